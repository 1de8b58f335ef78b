// SPDX-License-Identifier: Apache-2.0
// interpret_ops.cpp - the reference numerics of each op family (interpret.h states the rules).
//
// Shape helpers, then element-wise kernels, each a plain loop over the row-major output.
// The comments here explain only how the loops realise the rules of interpret.h.
//
// Floating-point note: the build uses ISO C++ mode, so GCC/Clang do not contract
// `acc += a * b` into an FMA (-ffp-contract=off is the ISO default); every f32 and
// double operation below is therefore one correctly rounded IEEE operation.
#include "ir/interpret_internal.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <utility>

#include "ir/builder.h"
#include "ir/quant.h"

namespace ternjit::ir::interp {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

}  // namespace

Error fail_at(const SourceLoc& loc, std::string msg) {
  if (loc.known()) return make_located_error(loc, std::move(msg));
  return make_error(ErrorCode::InvalidInput, std::move(msg));
}

std::string q(Op op) { return "'" + std::string(op_name(op)) + "'"; }

std::string extents_str(ElemKind k, const Extents& s) { return std::string(elem_name(k)) + index_str(s); }

double round_result(double v, ElemKind kind, bool f64) {
  return f64 && kind == ElemKind::F32 ? v : round_to_kind(v, kind);
}

std::int64_t numel(const Extents& s) {
  std::int64_t n = 1;
  for (std::int64_t e : s) n *= e;
  return n;
}


namespace {
// Row-major strides (in elements).
Extents strides(const Extents& s) {
  Extents st(s.size(), 1);
  for (std::size_t d = s.size(); d-- > 1;) st[d - 1] = st[d] * s[d];
  return st;
}

// Advances a row-major multi-index by one element (wraps to all zeros at the end).
void advance(Extents& idx, const Extents& shape) {
  for (std::size_t d = shape.size(); d-- > 0;) {
    if (++idx[d] < shape[d]) return;
    idx[d] = 0;
  }
}

std::int64_t dot(const Extents& idx, const Extents& st) {
  std::int64_t off = 0;
  for (std::size_t d = 0; d < idx.size(); ++d) off += idx[d] * st[d];
  return off;
}

// NumPy broadcast of two concrete shapes. The IR was type-checked with the same rule
// (infer_types), and symbols are bound consistently, so failure is our bug.
Extents broadcast_extents(const Extents& a, const Extents& b) {
  const std::size_t n = std::max(a.size(), b.size());
  Extents out(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const std::int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    TERNJIT_CHECK(da == db || da == 1 || db == 1,
                  "shapes " + index_str(a) + " and " + index_str(b) + " do not broadcast");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

// Strides that read an operand of shape `in` while walking an output of shape `out`
// (right-aligned; a stretched dim of extent 1 gets stride 0, a missing leading dim too).
Extents broadcast_strides(const Extents& in, const Extents& out) {
  TERNJIT_CHECK(in.size() <= out.size(), "broadcast to a lower rank");
  const Extents st = strides(in);
  const std::size_t off = out.size() - in.size();
  Extents res(out.size(), 0);
  for (std::size_t d = 0; d < in.size(); ++d) {
    TERNJIT_CHECK(in[d] == out[off + d] || in[d] == 1,
                  "cannot broadcast " + index_str(in) + " to " + index_str(out));
    res[off + d] = in[d] == 1 ? 0 : st[d];
  }
  return res;
}

// Wraps an integer (taken modulo 2^64) to the two's-complement width of `k`. Integer
// conversions to narrower types are modular in C++20, so this is well defined.
double wrap_to_kind(std::uint64_t bits, ElemKind k) {
  switch (k) {
    case ElemKind::I8: return static_cast<std::int8_t>(static_cast<std::uint8_t>(bits));
    case ElemKind::U8: return static_cast<std::uint8_t>(bits);
    case ElemKind::I32: return static_cast<std::int32_t>(static_cast<std::uint32_t>(bits));
    case ElemKind::T2: case ElemKind::Bool: {
      // promote() never makes t2/bool an arithmetic result; only neg/abs/relu of t2
      // reach here, and they stay in range.
      const auto v = static_cast<std::int64_t>(bits);
      const std::int64_t lo = k == ElemKind::T2 ? -1 : 0;
      TERNJIT_CHECK(v >= lo && v <= 1, "integer result out of range for " + std::string(elem_name(k)));
      return static_cast<double>(v);
    }
    case ElemKind::F16: case ElemKind::BF16: case ElemKind::F32: break;
  }
  TERNJIT_UNREACHABLE("wrap_to_kind on a float kind");
}

double wrap_to_kind(std::int64_t v, ElemKind k) { return wrap_to_kind(static_cast<std::uint64_t>(v), k); }

std::int64_t as_int(double v) { return static_cast<std::int64_t>(v); }

// IEEE 754-2019 maximum/minimum: NaN propagates, and +0 > -0.
template <class T>
T max_ieee(T x, T y) {
  if (std::isnan(x) || std::isnan(y)) return std::numeric_limits<T>::quiet_NaN();
  if (x == y) return std::signbit(x) ? y : x;
  return x > y ? x : y;
}
template <class T>
T min_ieee(T x, T y) {
  if (std::isnan(x) || std::isnan(y)) return std::numeric_limits<T>::quiet_NaN();
  if (x == y) return std::signbit(x) ? x : y;
  return x < y ? x : y;
}

// How binary() feeds the operands of a float result to the f32 computation.
enum class Operands : std::uint8_t {
  ToResultKind,  // round each operand to the result kind first (add/sub/mul/div/max/min)
  ToF32,         // convert each operand straight to f32 (dequantize)
};

// Elementwise binary op with broadcasting. `float_fn(float, float) -> float` is used
// for a float result kind; `int_fn(int64, int64) -> optional<int64>` for an integer
// one, where nullopt means division by zero.
// `float_fn` is generic (called with floats, and with doubles for an f32 result when
// `f64` is set: InterpretOptions::f32_as_f64).
template <class FloatFn, class IntFn>
Result<HostTensor> binary(const InstData& inst, const HostTensor& a, const HostTensor& b, ElemKind kind, bool f64,
                          FloatFn float_fn, IntFn int_fn, Operands convert = Operands::ToResultKind) {
  const Extents shape = broadcast_extents(a.shape, b.shape);
  HostTensor r = HostTensor::zeros(kind, shape);
  const Extents sa = broadcast_strides(a.shape, shape), sb = broadcast_strides(b.shape, shape);
  Extents idx(shape.size(), 0);
  for (std::size_t i = 0; i < r.data.size(); ++i, advance(idx, shape)) {
    const double x = a.data[static_cast<std::size_t>(dot(idx, sa))];
    const double y = b.data[static_cast<std::size_t>(dot(idx, sb))];
    if (f64 && kind == ElemKind::F32) {
      r.data[i] = float_fn(x, y);
    } else if (is_float(kind)) {
      // Rounding to the result kind only changes integer operands of an f16/bf16
      // result (e.g. i32 2049 becomes 2048 in f16); float operands are already exact.
      const bool first = convert == Operands::ToResultKind;
      const auto fx = static_cast<float>(first ? round_to_kind(x, kind) : x);
      const auto fy = static_cast<float>(first ? round_to_kind(y, kind) : y);
      const float v = float_fn(fx, fy);
      r.data[i] = round_to_kind(static_cast<double>(v), kind);
    } else {
      const std::optional<std::int64_t> v = int_fn(as_int(x), as_int(y));
      if (!v) return fail_at(inst.loc, q(inst.op) + " divides by zero at element " + index_str(idx));
      r.data[i] = wrap_to_kind(*v, kind);
    }
  }
  return r;
}

// Elementwise unary op computed in double from the exact element value, rounded once.
template <class Fn>
HostTensor unary_double(const HostTensor& t, ElemKind kind, bool f64, Fn fn) {
  HostTensor r{kind, t.shape, std::vector<double>(t.data.size())};
  for (std::size_t i = 0; i < t.data.size(); ++i) r.data[i] = round_result(fn(t.data[i]), kind, f64);
  return r;
}

// neg/abs/relu: exact for floats, int64 then wrapped for integers.
template <class FloatFn, class IntFn>
HostTensor unary_signed(const HostTensor& t, ElemKind kind, bool f64, FloatFn float_fn, IntFn int_fn) {
  if (is_float(kind)) return unary_double(t, kind, f64, float_fn);
  HostTensor r{kind, t.shape, std::vector<double>(t.data.size())};
  for (std::size_t i = 0; i < t.data.size(); ++i) r.data[i] = wrap_to_kind(int_fn(as_int(t.data[i])), kind);
  return r;
}

}  // namespace

HostTensor transpose(const HostTensor& t, const std::vector<std::int64_t>& perm) {
  Extents shape(perm.size());
  for (std::size_t i = 0; i < perm.size(); ++i) shape[i] = t.shape[static_cast<std::size_t>(perm[i])];
  const Extents in_st = strides(t.shape);
  Extents st(perm.size());  // stride in the input of each output dim
  for (std::size_t i = 0; i < perm.size(); ++i) st[i] = in_st[static_cast<std::size_t>(perm[i])];
  HostTensor r = HostTensor::zeros(t.kind, shape);
  Extents idx(shape.size(), 0);
  for (std::size_t i = 0; i < r.data.size(); ++i, advance(idx, shape))
    r.data[i] = t.data[static_cast<std::size_t>(dot(idx, st))];
  return r;
}

HostTensor broadcast_to(const HostTensor& t, const Extents& shape) {
  const Extents st = broadcast_strides(t.shape, shape);
  HostTensor r = HostTensor::zeros(t.kind, shape);
  Extents idx(shape.size(), 0);
  for (std::size_t i = 0; i < r.data.size(); ++i, advance(idx, shape))
    r.data[i] = t.data[static_cast<std::size_t>(dot(idx, st))];
  return r;
}

// numpy.matmul. The operands are viewed as [batch..., M, K] and [batch..., K, N]
// (a 1-D lhs as [1, K], a 1-D rhs as [K, 1]); the output is computed as
// [batch..., M, N], which has the same row-major data as the result with the added
// dims dropped.
HostTensor matmul(const HostTensor& a, const HostTensor& b, ElemKind kind, bool f64) {
  Extents as = a.shape, bs = b.shape;
  const bool a_vec = as.size() == 1, b_vec = bs.size() == 1;
  if (a_vec) as.insert(as.begin(), 1);
  if (b_vec) bs.push_back(1);
  TERNJIT_CHECK(as.size() >= 2 && bs.size() >= 2, "matmul of a scalar");
  const std::int64_t m = as[as.size() - 2], k = as.back(), k2 = bs[bs.size() - 2], n = bs.back();
  TERNJIT_CHECK(k == k2, "matmul K mismatch: " + index_str(a.shape) + " @ " + index_str(b.shape));
  const Extents batch_a(as.begin(), as.end() - 2), batch_b(bs.begin(), bs.end() - 2);
  const Extents batch = broadcast_extents(batch_a, batch_b);
  const Extents sa = broadcast_strides(batch_a, batch), sb = broadcast_strides(batch_b, batch);

  Extents shape = batch;
  if (!a_vec) shape.push_back(m);
  if (!b_vec) shape.push_back(n);
  HostTensor r = HostTensor::zeros(kind, shape);
  const bool exact_int = is_integer(a.kind) && is_integer(b.kind);
  Extents bidx(batch.size(), 0);
  std::size_t out = 0;
  for (std::int64_t bi = 0; bi < numel(batch); ++bi, advance(bidx, batch)) {
    // Batch strides count whole matrices.
    const std::int64_t a0 = dot(bidx, sa) * m * k, b0 = dot(bidx, sb) * k * n;
    for (std::int64_t i = 0; i < m; ++i) {
      for (std::int64_t j = 0; j < n; ++j, ++out) {
        if (exact_int) {
          // |a*b| < 2^62 fits int64; the sum is taken modulo 2^64, whose low 32 bits
          // equal those of the exact sum.
          std::uint64_t acc = 0;
          for (std::int64_t p = 0; p < k; ++p) {
            const std::int64_t x = as_int(a.data[static_cast<std::size_t>(a0 + i * k + p)]);
            const std::int64_t y = as_int(b.data[static_cast<std::size_t>(b0 + p * n + j)]);
            acc += static_cast<std::uint64_t>(x * y);
          }
          r.data[out] = wrap_to_kind(acc, kind);
        } else {
          double acc = 0;
          for (std::int64_t p = 0; p < k; ++p)
            acc += a.data[static_cast<std::size_t>(a0 + i * k + p)] *
                   b.data[static_cast<std::size_t>(b0 + p * n + j)];
          r.data[out] = round_result(acc, kind, f64);
        }
      }
    }
  }
  return r;
}

namespace {

// A tensor viewed as [outer, len, inner] around `axis`.
struct AxisView {
  std::int64_t outer = 1, len = 1, inner = 1;
  [[nodiscard]] std::size_t at(std::int64_t o, std::int64_t k, std::int64_t i) const {
    return static_cast<std::size_t>((o * len + k) * inner + i);
  }
};

AxisView axis_view(const Extents& shape, std::size_t axis) {
  AxisView v;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (d < axis) v.outer *= shape[d];
    else if (d == axis) v.len = shape[d];
    else v.inner *= shape[d];
  }
  return v;
}

Extents reduced_shape(const Extents& shape, std::size_t axis, bool keepdims) {
  Extents out = shape;
  if (keepdims) out[axis] = 1;
  else out.erase(out.begin() + static_cast<std::ptrdiff_t>(axis));
  return out;
}

}  // namespace

Result<HostTensor> reduce(const InstData& inst, const HostTensor& t, std::size_t axis, bool keepdims,
                          ElemKind kind, bool f64) {
  const AxisView v = axis_view(t.shape, axis);
  HostTensor r = HostTensor::zeros(kind, reduced_shape(t.shape, axis, keepdims));
  if (inst.op == Op::ReduceMax && v.len == 0 && !r.data.empty())
    return fail_at(inst.loc, "'reduce_max' over axis " + std::to_string(axis) + " of extent 0 of " +
                                 extents_str(t.kind, t.shape) + " has no maximum");
  for (std::int64_t o = 0; o < v.outer; ++o) {
    for (std::int64_t i = 0; i < v.inner; ++i) {
      double& out = r.data[static_cast<std::size_t>(o * v.inner + i)];
      if (inst.op == Op::ReduceMax) {
        double m = t.data[v.at(o, 0, i)];
        for (std::int64_t k = 1; k < v.len; ++k) {
          const double x = t.data[v.at(o, k, i)];
          if (std::isnan(m) || std::isnan(x)) m = kNaN;
          else if (x > m || (x == m && !std::signbit(x))) m = x;  // +0 beats -0, as max
        }
        out = round_result(m, kind, f64);
      } else if (is_integer(kind)) {
        std::uint64_t acc = 0;
        for (std::int64_t k = 0; k < v.len; ++k) acc += static_cast<std::uint64_t>(as_int(t.data[v.at(o, k, i)]));
        out = wrap_to_kind(acc, kind);
      } else {
        double acc = 0;
        for (std::int64_t k = 0; k < v.len; ++k) acc += t.data[v.at(o, k, i)];
        if (inst.op == Op::ReduceMean) acc /= static_cast<double>(v.len);  // 0 / 0 = NaN when empty
        out = round_result(acc, kind, f64);
      }
    }
  }
  return r;
}

HostTensor softmax(const HostTensor& t, std::size_t axis, ElemKind kind, bool f64) {
  const AxisView v = axis_view(t.shape, axis);
  HostTensor r{kind, t.shape, std::vector<double>(t.data.size())};
  std::vector<double> e(static_cast<std::size_t>(v.len));
  for (std::int64_t o = 0; o < v.outer; ++o) {
    for (std::int64_t i = 0; i < v.inner; ++i) {
      // m is NaN when any element is NaN; then every e_k and y_k is NaN too.
      double m = -std::numeric_limits<double>::infinity();
      for (std::int64_t k = 0; k < v.len; ++k) {
        const double x = t.data[v.at(o, k, i)];
        if (std::isnan(x) || std::isnan(m)) m = kNaN;
        else m = std::max(m, x);
      }
      double sum = 0;
      for (std::int64_t k = 0; k < v.len; ++k) {
        e[static_cast<std::size_t>(k)] = std::exp(t.data[v.at(o, k, i)] - m);
        sum += e[static_cast<std::size_t>(k)];
      }
      for (std::int64_t k = 0; k < v.len; ++k)
        r.data[v.at(o, k, i)] = round_result(e[static_cast<std::size_t>(k)] / sum, kind, f64);
    }
  }
  return r;
}

HostTensor rmsnorm(const HostTensor& x, const HostTensor& gamma, double eps, ElemKind kind, bool f64) {
  TERNJIT_CHECK(!x.shape.empty() && gamma.shape.size() == 1 && gamma.shape[0] == x.shape.back(),
                "rmsnorm gamma " + index_str(gamma.shape) + " does not match " + index_str(x.shape));
  const std::int64_t d = x.shape.back();
  HostTensor r{kind, x.shape, std::vector<double>(x.data.size())};
  const std::int64_t rows = d == 0 ? 0 : numel(x.shape) / d;
  for (std::int64_t row = 0; row < rows; ++row) {
    const std::size_t base = static_cast<std::size_t>(row * d);
    double ss = 0;
    for (std::int64_t j = 0; j < d; ++j) ss += x.data[base + static_cast<std::size_t>(j)] * x.data[base + static_cast<std::size_t>(j)];
    const double denom = std::sqrt(ss / static_cast<double>(d) + eps);
    for (std::int64_t j = 0; j < d; ++j) {
      const auto at = base + static_cast<std::size_t>(j);
      r.data[at] = round_result(x.data[at] / denom * gamma.data[static_cast<std::size_t>(j)], kind, f64);
    }
  }
  return r;
}

namespace {

// Rows of the last axis: [prod(shape[:-1]), shape[-1]] (rank >= 1).
std::pair<std::int64_t, std::int64_t> rows_cols(const Extents& shape) {
  TERNJIT_CHECK(!shape.empty(), "row view of a scalar");
  return {numel(Extents(shape.begin(), shape.end() - 1)), shape.back()};
}

HostTensor from_floats(ElemKind kind, const Extents& shape, const std::vector<float>& v) {
  HostTensor r{kind, shape, {}};
  r.data.reserve(v.size());
  for (float x : v) r.data.push_back(round_to_kind(static_cast<double>(x), kind));
  return r;
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

}  // namespace

// One elementwise op (binary: add sub mul div max min; unary: neg abs relu sigmoid tanh
// gelu silu exp log sqrt rsqrt) with result kind `kind`. The standalone ops, the steps
// of `ewise` and the epilogue of `tmatmul` all compute through this one function, which
// is what makes fusing them bit-exact. `b` is null for unary ops.
Result<HostTensor> elementwise(const InstData& inst, Op op, const HostTensor& a, const HostTensor* b, ElemKind kind,
                               bool f64) {
  using I = std::int64_t;
  using OptI = std::optional<I>;
  auto need_b = [&]() -> const HostTensor& {
    TERNJIT_CHECK(b != nullptr, q(op) + " needs two operands");
    return *b;
  };
  switch (op) {
    case Op::Add:
      return binary(inst, a, need_b(), kind, f64, [](auto x, auto y) { return x + y; }, [](I x, I y) -> OptI { return x + y; });
    case Op::Sub:
      return binary(inst, a, need_b(), kind, f64, [](auto x, auto y) { return x - y; }, [](I x, I y) -> OptI { return x - y; });
    case Op::Mul:
      return binary(inst, a, need_b(), kind, f64, [](auto x, auto y) { return x * y; }, [](I x, I y) -> OptI { return x * y; });
    case Op::Div:
      // Integer division truncates toward zero (C++ semantics). Operands are at most
      // 32-bit, so INT32_MIN / -1 cannot overflow int64; it wraps to INT32_MIN.
      return binary(inst, a, need_b(), kind, f64, [](auto x, auto y) { return x / y; }, [](I x, I y) -> OptI {
        if (y == 0) return std::nullopt;
        return x / y;
      });
    case Op::Max: return binary(inst, a, need_b(), kind, f64, [](auto x, auto y) { return max_ieee(x, y); }, [](I x, I y) -> OptI { return std::max(x, y); });
    case Op::Min: return binary(inst, a, need_b(), kind, f64, [](auto x, auto y) { return min_ieee(x, y); }, [](I x, I y) -> OptI { return std::min(x, y); });
    case Op::Neg: return unary_signed(a, kind, f64, [](double x) { return -x; }, [](I x) { return -x; });
    case Op::Abs: return unary_signed(a, kind, f64, [](double x) { return std::fabs(x); }, [](I x) { return x < 0 ? -x : x; });
    case Op::Relu:
      return unary_signed(a, kind, f64, [](double x) { return std::isnan(x) ? x : (x > 0 ? x : 0.0); },
                          [](I x) { return x > 0 ? x : I{0}; });
    case Op::Sigmoid: return unary_double(a, kind, f64, sigmoid);
    case Op::Tanh: return unary_double(a, kind, f64, [](double x) { return std::tanh(x); });
    case Op::Gelu: return unary_double(a, kind, f64, [](double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); });
    case Op::Silu: return unary_double(a, kind, f64, [](double x) { return x * sigmoid(x); });
    case Op::Exp: return unary_double(a, kind, f64, [](double x) { return std::exp(x); });
    case Op::Log: return unary_double(a, kind, f64, [](double x) { return std::log(x); });
    case Op::Sqrt: return unary_double(a, kind, f64, [](double x) { return std::sqrt(x); });
    case Op::Rsqrt: return unary_double(a, kind, f64, [](double x) { return 1.0 / std::sqrt(x); });
    default: break;
  }
  TERNJIT_UNREACHABLE(q(op) + " is not an elementwise op");
}

// tmatmul: the accumulation y = x @ w (i8 x: exact integer sum, wrapped to i32, then
// rounded once to the result kind; float x: matmul's double sum in ascending k, rounded
// once; with a grouped w_scale, each group's such sum times its scale, summed in double
// over ascending groups and rounded once), then each epilogue operand applied by elementwise() exactly as the standalone
// mul/add would (x_scale and w_scale multiply, bias and residual add, broadcasting),
// then the activation as its unary op.
Result<HostTensor> tmatmul(const InstData& inst, const TMatMulAttrs& attrs, std::span<const HostTensor* const> ops,
                           ElemKind kind, bool f64) {
  const HostTensor& x = *ops[0];
  const HostTensor& w = *ops[1];
  TERNJIT_CHECK(!x.shape.empty() && w.shape.size() == 2 && x.shape.back() == w.shape[0],
                "'tmatmul' of " + x.describe() + " and " + w.describe());
  const std::int64_t k = x.shape.back(), n = w.shape[1];
  const std::int64_t rows = k == 0 ? numel(Extents(x.shape.begin(), x.shape.end() - 1)) : numel(x.shape) / k;
  Extents shape = x.shape;
  shape.back() = n;
  HostTensor y = HostTensor::zeros(kind, shape);
  // The sum over k in [lo, hi): i8 x exact (wrapped to i32), float x in double, ascending k.
  auto partial = [&](std::int64_t r, std::int64_t j, std::int64_t lo, std::int64_t hi) -> double {
    if (x.kind == ElemKind::I8) {
      std::uint64_t sum = 0;  // modulo 2^64; its low 32 bits are the i32 sum
      for (std::int64_t p = lo; p < hi; ++p)
        sum += static_cast<std::uint64_t>(as_int(x.data[static_cast<std::size_t>(r * k + p)]) *
                                          as_int(w.data[static_cast<std::size_t>(p * n + j)]));
      return wrap_to_kind(sum, ElemKind::I32);
    }
    double acc = 0;
    for (std::int64_t p = lo; p < hi; ++p)
      acc += x.data[static_cast<std::size_t>(r * k + p)] * w.data[static_cast<std::size_t>(p * n + j)];
    return acc;
  };
  // A grouped w_scale (f32[G, N]) is part of the accumulation: sum over g, ascending, of
  // s[g, j] * partial(group g), in double, rounded once.
  const std::size_t group_scale_at = attrs.x_scale ? 3 : 2;  // the w_scale operand
  const HostTensor* group_scale = attrs.group > 0 ? ops[group_scale_at] : nullptr;
  const std::int64_t group = attrs.group > 0 ? attrs.group : std::max<std::int64_t>(k, 1);
  const std::int64_t groups = grouped_scale_rows(k, group);
  // A function run unspecialized binds K and G from its arguments: a pair that breaks
  // G = ceil(K / group) is the caller's error (specialize_shapes reports it earlier).
  if (group_scale != nullptr &&
      !(group_scale->shape.size() == 2 && group_scale->shape[0] == groups && group_scale->shape[1] == n))
    return fail_at(inst.loc, "'tmatmul' grouped w_scale needs " + std::to_string(groups) + " rows (ceil(" +
                                 std::to_string(k) + " / " + std::to_string(group) + ")) of " + std::to_string(n) +
                                 ", got " + group_scale->describe());
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (std::int64_t g = 0; g < groups; ++g) {
        const double p = partial(r, j, g * group, std::min(k, (g + 1) * group));
        acc += group_scale ? group_scale->data[static_cast<std::size_t>(g * n + j)] * p : p;
      }
      y.data[static_cast<std::size_t>(r * n + j)] = round_result(acc, kind, f64);
    }
  }
  std::size_t next = 2;
  const std::pair<bool, Op> epilogue[] = {
      {attrs.x_scale, Op::Mul}, {attrs.w_scale, Op::Mul}, {attrs.bias, Op::Add}, {attrs.residual, Op::Add}};
  for (const auto& [present, op] : epilogue) {
    if (!present) continue;
    const std::size_t at = next++;
    if (group_scale != nullptr && at == group_scale_at) continue;  // applied in the accumulation
    TERNJIT_TRY(y, elementwise(inst, op, y, ops[at], kind, f64));
  }
  if (auto act = activation_op(attrs.act)) {
    TERNJIT_TRY(y, elementwise(inst, *act, y, nullptr, kind, f64));
  }
  return y;
}

// ewise: each step evaluated as the standalone op on whole tensors (its own broadcast
// shape), in order; the result is the last step's.
Result<HostTensor> ewise(const InstData& inst, const EwiseAttrs& attrs, std::span<const HostTensor* const> ops,
                         ElemKind kind, bool f64) {
  std::vector<HostTensor> steps;
  auto slot = [&](std::int32_t s) -> const HostTensor& {
    TERNJIT_CHECK(s >= 0 && static_cast<std::size_t>(s) < ops.size() + steps.size(), "'ewise' slot out of range");
    const auto i = static_cast<std::size_t>(s);
    return i < ops.size() ? *ops[i] : steps[i - ops.size()];
  };
  for (const EwiseStep& st : attrs.steps) {
    const HostTensor* b = st.b >= 0 ? &slot(st.b) : nullptr;
    TERNJIT_TRY(auto r, elementwise(inst, st.op, slot(st.a), b, kind, f64));
    steps.push_back(std::move(r));
  }
  TERNJIT_CHECK(!steps.empty(), "'ewise' without steps");
  return std::move(steps.back());
}

HostTensor cast(const HostTensor& t, ElemKind to, bool f64) { return unary_double(t, to, f64, [](double x) { return x; }); }

Result<HostTensor> dequantize(const InstData& inst, const HostTensor& q, const HostTensor& s, ElemKind kind,
                              bool f64) {
  // The result kind is float, so binary() computes float(q) * float(s) in f32.
  TERNJIT_CHECK(is_float(kind), "'dequantize' result must be a float kind");
  return binary(inst, q, s, kind, f64, [](auto x, auto y) { return x * y; },
                [](std::int64_t x, std::int64_t y) -> std::optional<std::int64_t> { return x * y; }, Operands::ToF32);
}

std::vector<HostTensor> quantization(const InstData& inst, const HostTensor& x, std::span<const ElemKind> kinds) {
  const std::vector<float> xs = x.to_f32();  // exact: the operand is a float kind
  std::vector<HostTensor> out;
  switch (inst.op) {
    case Op::QuantizeInt8: {
      const auto [rows, cols] = rows_cols(x.shape);
      std::vector<float> y(xs.size());
      auto ok = fake_quantize_int8_rows(xs, rows, cols, y);
      TERNJIT_CHECK(ok.ok(), "fake_quantize_int8_rows rejected a consistent shape");
      out.push_back(from_floats(kinds[0], x.shape, y));
      break;
    }
    case Op::Ternarize: {
      const auto threshold = static_cast<float>(std::get<ThresholdAttrs>(inst.attrs).threshold);
      out.push_back(from_floats(kinds[0], x.shape, ternarize_threshold(xs, threshold)));
      break;
    }
    case Op::TernarizeAbsmean: {
      const auto n = static_cast<std::int64_t>(xs.size());
      out.push_back(from_floats(kinds[0], x.shape, fake_ternarize_absmean(xs, 1, n, /*per_channel=*/false)));
      break;
    }
    case Op::Quantize: {
      const auto [rows, cols] = rows_cols(x.shape);
      std::vector<std::int8_t> values(xs.size());
      std::vector<float> scales(static_cast<std::size_t>(rows));
      auto ok = quantize_int8_rows(xs, rows, cols, values, scales);
      TERNJIT_CHECK(ok.ok(), "quantize_int8_rows rejected a consistent shape");
      Extents scale_shape = x.shape;
      scale_shape.back() = 1;
      out.push_back(HostTensor{kinds[0], x.shape, std::vector<double>(values.begin(), values.end())});
      out.push_back(from_floats(kinds[1], scale_shape, scales));
      break;
    }
    case Op::TQuantize: {
      const TernaryQuant tq = ternarize_absmean(xs, 1, static_cast<std::int64_t>(xs.size()), /*per_channel=*/false);
      TERNJIT_CHECK(tq.scales.size() == 1, "per-tensor ternarize_absmean must give one scale");
      out.push_back(HostTensor{kinds[0], x.shape, std::vector<double>(tq.values.begin(), tq.values.end())});
      out.push_back(from_floats(kinds[1], {}, tq.scales));
      break;
    }
    default: TERNJIT_UNREACHABLE(q(inst.op) + " is not a quantization op");
  }
  return out;
}

}  // namespace ternjit::ir::interp
