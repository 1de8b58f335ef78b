// SPDX-License-Identifier: Apache-2.0
// autodiff.cpp - reverse-mode differentiation: adds a forward-with-saved-values and a backward function.
//
// What: for a function `@f` and the values to differentiate with respect to (arguments
// `%x`, module parameters `@w`), adds two functions to the module:
//   `@f.fwd(args...) -> (results..., saved...)`   `@f` plus the intermediates the
//        backward reuses, appended to its results;
//   `@f.bwd(args..., d_results..., saved...) -> (grads...)`   one `d_result` per float
//        result of `@f` (the gradient of the loss with respect to that result, same
//        type), one gradient per `wrt` entry in order (the value's type; f32 for a `t2`
//        parameter: the gradient of the latent float weights).
// How: the backward function first recomputes the forward (an `ewise` is expanded into
// its steps, which compute exactly the same values), then walks it in reverse applying
// each op's gradient rule (ir/README.md, "Gradients") and accumulates the adjoints of
// shared values with `add`. Broadcast operands get the gradient summed over the
// stretched axes. Then the save-or-recompute policy: a recomputed value whose op is
// costly to recompute (it reads a whole row, tensor or contraction per result element:
// matmul, tmatmul, reductions, softmax, rmsnorm, the per-row/per-tensor quantizers) and
// which the gradient still needs becomes an argument of `@f.bwd` (saved) and an extra
// result of `@f.fwd`; everything elementwise, data movement, `const` and `param` is
// recomputed in the backward, and so is every value that depends on no
// argument (a `tquantize` of a parameter): targets evaluate those once at load time,
// so the backward's `transpose` of a ternary weight is packed once, never per call. Dead code is removed, and common
// subexpressions of `@f.fwd` shared (so a saved value the forward already computes is
// not computed twice).
// Quantizers are straight-through estimators (STE): `ternarize`, `ternarize_absmean`,
// `quantize_int8` pass the gradient unchanged, or, when clipped (the op's `ste_clip`
// attribute; where it is not written, the pass option), only where the input
// lies in the quantizer's range (|x| <= 1, |x| <= mean|x|; quantize_int8's range is the
// row's max|x|, which holds every element). Their integer forms follow: `quantize`
// and `tquantize` pass d(values) / scale to their input (scales get no gradient), and a
// `tmatmul` or `dequantize` whose values and scale come from the same quantizer passes
// its gradient to the quantizer's float input directly.
// Why: training (QAT) a BitNet layer needs the backward of the same kernels; the
// backward is ordinary IR, so it goes through the same pipeline and targets.
// Preconditions: verified IR; the function has one block and no `call` (run
// inline-calls first). Errors (InvalidInput): unknown function or wrt name, a wrt of an
// integer kind other than a t2 parameter, control flow, calls, a grouped tmatmul whose
// operands need a gradient, a gradient that reaches a weight of a packed layout.
//
//   func @f(%x: f32[4], %w: f32[4]) -> f32[4] {       func @f.bwd(%x: f32[4], %w: f32[4], %0: f32[4]) -> f32[4] {
//   ^entry:                                  ->        ^entry:
//     %y = mul %x, %w : f32[4]                           %1 = mul %0, %x : f32[4]
//     ret %y                                             ret %1
//   }                                                  }         (wrt = [%w]; @f.fwd is @f: nothing saved)
#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ir/builder.h"
#include "passes/passes.h"

namespace ternjit::passes {

namespace {

using ir::InstId;
using ir::Op;
using ir::Type;
using ir::ValueId;

Error not_differentiable(const ir::Function& f, std::string message) {
  return make_error(ErrorCode::InvalidInput, "autodiff of @" + f.name() + ": " + message);
}

// The kind of a value's gradient: its own float kind, f32 for the integer kinds a
// straight-through estimator carries a gradient through (t2 weights, i8 activations),
// none for the rest (i32, u8, bool: not differentiable).
std::optional<ElemKind> grad_kind(const Type& t) {
  if (is_float(t.elem)) return t.elem;
  if (t.elem == ElemKind::T2 || t.elem == ElemKind::I8) return ElemKind::F32;
  return std::nullopt;
}

// Ops whose recomputation reads more than O(1) elements per result element: their
// values are saved by the forward rather than recomputed by the backward.
bool costly_to_recompute(Op op) {
  switch (ir::op_category(op)) {
    case ir::OpCategory::LinearAlgebra:
    case ir::OpCategory::Reduction:
    case ir::OpCategory::Normalization: return true;
    case ir::OpCategory::Quantization: return op != Op::Ternarize && op != Op::Dequantize;
    case ir::OpCategory::Kernel: return op == Op::TMatMul;
    default: return false;
  }
}

// Builds the backward function of one forward function.
class Reverse {
 public:
  Reverse(const ir::Module& m, const ir::Function& f, const AutodiffOptions& options)
      : m_(m), f_(f), options_(options), b_(f.name() + ".bwd"), bld_(m, b_) {}

  Result<void> run(const std::vector<std::string>& wrt, std::vector<Type>& grad_types);
  ir::Function& function() { return b_; }
  [[nodiscard]] std::size_t num_forward_args() const { return f_.args().size(); }

 private:
  // ------------------------------------------------ building blocks
  ValueId emit(Op op, std::vector<ValueId> operands, ir::Attrs attrs = ir::NoAttrs{}, std::vector<Type> declared = {}) {
    auto r = bld_.create1(op, std::move(operands), std::move(attrs), std::move(declared));
    TERNJIT_CHECK(r.ok(), "autodiff built an ill-typed instruction: " + (r.ok() ? std::string() : r.error().message));
    return *r;
  }
  const Type& type(ValueId v) const { return b_.type_of(v); }
  ValueId splat(Type t, double v) {
    auto r = bld_.constant(std::move(t), {v});
    TERNJIT_CHECK(r.ok(), "autodiff built an invalid constant");
    return *r;
  }
  ValueId scalar(ElemKind k, double v) { return splat(Type{k, {}}, v); }
  ValueId add(ValueId a, ValueId b) { return emit(Op::Add, {a, b}); }
  ValueId sub(ValueId a, ValueId b) { return emit(Op::Sub, {a, b}); }
  ValueId mul(ValueId a, ValueId b) { return emit(Op::Mul, {a, b}); }
  ValueId div(ValueId a, ValueId b) { return emit(Op::Div, {a, b}); }
  ValueId un(Op op, ValueId a) { return emit(op, {a}); }
  ValueId mul_c(ValueId a, double c) { return mul(a, scalar(type(a).elem, c)); }
  ValueId c_sub(double c, ValueId a) { return sub(scalar(type(a).elem, c), a); }
  // 1 where x > 0, 0 where x <= 0, NaN for NaN, from elementwise ops only (every
  // target has kernels for them): two multiplications by F take the smallest positive
  // subnormal to >= 1 (f32/bf16: 2^-149 * 2^254; f16: 2^-24 * 2^24) and anything larger
  // to >= 1 or inf, which min(., 1) clamps; relu keeps 0 and the negatives at 0.
  ValueId positive(ValueId x) {
    const ValueId f = scalar(type(x).elem, type(x).elem == ElemKind::F16 ? 0x1p12 : 0x1p127);
    return emit(Op::Min, {un(Op::Relu, mul(mul(x, f), f)), scalar(type(x).elem, 1.0)});
  }
  // sign(x) in {-1, 0, 1} (NaN for NaN).
  ValueId sign(ValueId x) { return sub(positive(x), positive(un(Op::Neg, x))); }
  ValueId cast(ValueId v, ElemKind k) {
    return type(v).elem == k ? v : emit(Op::Cast, {v}, ir::CastAttrs{k});
  }
  ValueId reduce(Op op, ValueId v, std::int64_t axis, bool keepdims) {
    return emit(op, {v}, ir::AxisAttrs{axis, keepdims});
  }
  ValueId reshape(ValueId v, std::vector<ir::Dim> shape) {
    return emit(Op::Reshape, {v}, ir::NoAttrs{}, {Type{type(v).elem, std::move(shape)}});
  }
  ValueId broadcast_to(ValueId v, const std::vector<ir::Dim> shape) {
    if (type(v).shape == shape) return v;
    return emit(Op::Broadcast, {v}, ir::NoAttrs{}, {Type{type(v).elem, shape}});
  }
  // Swaps the last two axes (rank >= 2).
  ValueId transpose_last2(ValueId v) {
    const std::size_t r = type(v).rank();
    std::vector<std::int64_t> perm(r);
    for (std::size_t i = 0; i < r; ++i) perm[i] = static_cast<std::int64_t>(i);
    std::swap(perm[r - 1], perm[r - 2]);
    return emit(Op::Transpose, {v}, ir::PermAttrs{perm});
  }
  // `shape` with a static 1 inserted before position `axis`.
  static std::vector<ir::Dim> with_unit(std::vector<ir::Dim> shape, std::size_t axis) {
    shape.insert(shape.begin() + static_cast<std::ptrdiff_t>(axis), ir::Dim::fixed(1));
    return shape;
  }
  // Sums `g` over the axes broadcasting stretched to reach g's shape from `target`'s
  // (leading axes, and static-1 axes of target), then casts to target's gradient kind.
  ValueId unbroadcast(ValueId g, const Type target) {  // by value: emitting reallocates types
    while (type(g).rank() > target.rank()) g = reduce(Op::ReduceSum, g, 0, false);
    for (std::size_t i = 0; i < target.rank(); ++i) {
      const ir::Dim one = ir::Dim::fixed(1);
      if (target.shape[i] == one && type(g).shape[i] != one) g = reduce(Op::ReduceSum, g, static_cast<std::int64_t>(i), true);
    }
    TERNJIT_CHECK(type(g).shape == target.shape, "autodiff: unbroadcast reached the wrong shape");
    return cast(g, *grad_kind(target));
  }
  // The weight gradient of y[.., n] = sum_k x[.., k] w[k, n]: sum over the leading
  // dims of x^T d, as an f32 [K, N].
  ValueId contract(ValueId x, ValueId d) {
    if (type(x).rank() == 1) {
      const ir::Dim k = type(x).shape[0];
      const ir::Dim n = type(d).shape[0];
      return cast(emit(Op::MatMul, {reshape(x, {k, ir::Dim::fixed(1)}), reshape(d, {ir::Dim::fixed(1), n})}), ElemKind::F32);
    }
    ValueId r = emit(Op::MatMul, {transpose_last2(x), d});
    while (type(r).rank() > 2) r = reduce(Op::ReduceSum, r, 0, false);
    return cast(r, ElemKind::F32);
  }
  // The int8_dw weight gradient x^T gw of a rank-2 x [M, K] and gw [M, N] (passes.h):
  // gw^T quantized per row (scale t[n]), an i8 x as is, a float x's x^T quantized per
  // row (scale u[k]); dW = f32(matmul(a [K, M], b^T [M, N]) : i32) [* u] * t. The int32
  // sum is exact while M * 128 * 128 < 2^31 (|a|, |b| <= 128 for any i8; quantize's are
  // <= 127): M <= kInt8DwMaxRows, refused above it (static M) or a constraint (symbolic M).
  static constexpr std::int64_t kInt8DwMaxRows = 131071;  // (2^31 - 1) / 2^14
  Result<ValueId> int8_contract(ValueId x, ValueId gw) {
    const ir::Dim m = type(x).shape[0];
    if (m.is_static() && m.extent > kInt8DwMaxRows)
      return not_differentiable(f_, "int8_dw: the weight gradient sums " + std::to_string(m.extent) +
                                        " rows, more than the " + std::to_string(kInt8DwMaxRows) +
                                        " an int32 sum of int8 products holds exactly");
    if (!m.is_static()) {
      const ir::Constraint c{m.sym, ir::Constraint::Kind::AtMost, kInt8DwMaxRows};
      if (std::find(b_.constraints().begin(), b_.constraints().end(), c) == b_.constraints().end()) b_.add_constraint(c);
    }
    auto qg = bld_.create(Op::Quantize, {transpose_last2(gw)}, ir::SteAttrs{});  // [N, M], [N, 1]
    TERNJIT_CHECK(qg.ok(), "autodiff built an ill-typed quantize");
    ValueId a = x, u;
    if (type(x).elem == ElemKind::I8) {
      a = transpose_last2(x);
    } else {
      auto qx = bld_.create(Op::Quantize, {transpose_last2(x)}, ir::SteAttrs{});  // [K, M], [K, 1]
      TERNJIT_CHECK(qx.ok(), "autodiff built an ill-typed quantize");
      a = (*qx)[0];
      u = (*qx)[1];
    }
    ValueId dw = cast(emit(Op::MatMul, {a, transpose_last2((*qg)[0])}), ElemKind::F32);
    if (u.valid()) dw = mul(dw, u);
    const ir::Dim n = type(gw).shape[1];
    return mul(dw, reshape((*qg)[1], {ir::Dim::fixed(1), n}));
  }
  // Adds `g` (already of v's gradient type) to v's adjoint.
  void accumulate(ValueId v, ValueId g) {
    if (!active_.at(v.index)) return;
    const Type want{*grad_kind(type(v)), type(v).shape};
    g = cast(g, want.elem);
    TERNJIT_CHECK(type(g) == want, "autodiff: adjoint " + ir::type_str(type(g), b_.symbols()) + " for a value of type " +
                                       ir::type_str(type(v), b_.symbols()));
    auto [it, fresh] = adjoint_.try_emplace(v.index, g);
    if (!fresh) it->second = add(it->second, g);
  }
  // The value an instruction result comes from when it is result `index` of an op `op`.
  std::optional<InstId> defined_by(ValueId v, Op op, std::uint32_t index) const {
    const ir::ValueData& d = b_.value(v);
    if (d.def != ir::ValueDef::InstResult || d.index != index || b_.inst(d.inst).op != op) return std::nullopt;
    return d.inst;
  }
  // 1 where |x| <= r (r broadcasts), else 0.
  ValueId inside(ValueId x, ValueId r) { return c_sub(1.0, positive(sub(un(Op::Abs, x), r))); }

  // ------------------------------------------------ rules
  Result<void> rule(InstId i);
  ValueId activation_grad(Op act, ValueId g, ValueId x, ValueId y);
  Result<void> matmul_rule(const ir::InstData& d, ValueId g);
  Result<void> tmatmul_rule(const ir::InstData& d, ValueId g);
  ValueId gelu_grad(ValueId x);
  // g @ wt (wt: a t2 [N, K] weight), times the per-tensor scale `ws` when valid: a
  // float-activation tmatmul, or with the int8_dx option one on g quantized per row.
  ValueId ternary_dx(ValueId g, ValueId wt, ValueId ws) {
    ir::TMatMulAttrs attrs;
    attrs.w_scale = ws.valid();
    std::vector<ValueId> operands{g, wt};
    if (options_.int8_dx) {
      auto q = bld_.create(Op::Quantize, {g}, ir::SteAttrs{});
      TERNJIT_CHECK(q.ok(), "autodiff built an ill-typed quantize");
      operands = {(*q)[0], wt, (*q)[1]};
      attrs.x_scale = true;
    }
    if (ws.valid()) operands.push_back(ws);
    return emit(Op::TMatMul, std::move(operands), attrs);
  }
  // Whether `w` is a rank-2 t2 matrix of the plain layout (a TernaryTensor parameter):
  // a matmul by it is a ternary matmul, as one by ternarize_absmean(p) is.
  [[nodiscard]] bool plain_ternary(ValueId w) const {
    return type(w).elem == ElemKind::T2 && type(w).rank() == 2 && type(w).layout == WeightFormat::Plain;
  }
  // Whether quantizer `d`'s straight-through gradient is clipped to its range: its
  // ste_clip attribute, or the pass option where the attribute is not set.
  [[nodiscard]] bool clips(const ir::InstData& d) const {
    ir::SteClip c = ir::SteClip::Default;
    if (const auto* t = std::get_if<ir::ThresholdAttrs>(&d.attrs)) c = t->ste_clip;
    if (const auto* q = std::get_if<ir::SteAttrs>(&d.attrs)) c = q->ste_clip;
    return c == ir::SteClip::Default ? options_.ste_clip : c == ir::SteClip::On;
  }

  const ir::Module& m_;
  const ir::Function& f_;
  const AutodiffOptions& options_;
  ir::Function b_;
  ir::Builder bld_;
  std::vector<InstId> primal_;          // the recomputed forward, in order
  std::vector<char> active_;            // by b_ value index: depends on a wrt value
  std::map<std::uint32_t, ValueId> adjoint_;
};

ValueId Reverse::gelu_grad(ValueId x) {
  // d/dx [x Phi(x)] = Phi(x) + x phi(x). The IR has no erf, so Phi(x) = gelu(x) / x
  // where |x| > 2^-6, and its series 1/2 + (x - x^3 / 6) / sqrt(2 pi) below it (the
  // first omitted term, x^5 / (40 sqrt(2 pi)), is < 1e-11 there: exact in f32 and
  // within the double-precision finite-difference checks' tolerance).
  const ElemKind k = type(x).elem;
  const ValueId big = positive(sub(un(Op::Abs, x), scalar(k, 1.0 / 64)));  // 1 where |x| > 2^-6
  const ValueId small = c_sub(1.0, big);
  const ValueId safe_x = add(mul(x, big), small);  // x where big, else 1
  const ValueId phi_big = div(un(Op::Gelu, safe_x), safe_x);
  const ValueId phi_small =
      add(scalar(k, 0.5), mul_c(mul(x, c_sub(1.0, mul_c(mul(x, x), 1.0 / 6))), 0.3989422804014327));
  const ValueId cdf = add(mul(phi_big, big), mul(phi_small, small));
  const ValueId pdf = mul_c(un(Op::Exp, mul_c(mul(x, x), -0.5)), 0.3989422804014327);
  return add(cdf, mul(x, pdf));
}

ValueId Reverse::activation_grad(Op act, ValueId g, ValueId x, ValueId y) {
  switch (act) {
    case Op::Relu: return mul(g, positive(x));
    case Op::Sigmoid: return mul(g, mul(y, c_sub(1.0, y)));
    case Op::Tanh: return mul(g, c_sub(1.0, mul(y, y)));
    case Op::Gelu: return mul(g, gelu_grad(x));
    case Op::Silu: {
      const ValueId s = un(Op::Sigmoid, x);
      return mul(g, mul(s, add(scalar(type(s).elem, 1.0), mul(x, c_sub(1.0, s)))));
    }
    default: TERNJIT_UNREACHABLE("autodiff: not an activation");
  }
}

Result<void> Reverse::matmul_rule(const ir::InstData& d, ValueId g) {
  const ValueId a = d.operands[0], b = d.operands[1];
  const bool a1 = type(a).rank() == 1, b1 = type(b).rank() == 1;
  if (a1 && b1) {  // a dot product: g is a scalar
    accumulate(a, mul(g, b));
    accumulate(b, mul(g, a));
    return success();
  }
  // Promote rank-1 operands to matrices as numpy.matmul does, and g with them.
  const ValueId a2 = a1 ? reshape(a, with_unit(type(a).shape, 0)) : a;
  const ValueId b2 = b1 ? reshape(b, with_unit(type(b).shape, 1)) : b;
  ValueId g2 = g;
  if (a1) g2 = reshape(g2, with_unit(type(g).shape, type(g).rank() - 1));
  if (b1) g2 = reshape(g2, with_unit(type(g2).shape, type(g2).rank()));
  if (active_[a.index]) {
    // A ternary weight b makes g @ b^T a ternary matmul by the transposed weight (a
    // load-time value when b comes from a parameter), which int8_dx runs on g quantized
    // per row: by ternarize_absmean(p) = t * s, (g @ t^T) * s; by a plain t2 b (a
    // TernaryTensor parameter), g @ b^T itself.
    const auto ta = b1 ? std::nullopt : defined_by(b, Op::TernarizeAbsmean, 0);
    ValueId product;
    if (ta && type(b).rank() == 2 && is_float(type(g2).elem)) {
      auto ts = bld_.create(Op::TQuantize, {b_.inst(*ta).operands[0]}, b_.inst(*ta).attrs);
      TERNJIT_CHECK(ts.ok(), "autodiff built an ill-typed tquantize");
      const ValueId tt = emit(Op::Transpose, {(*ts)[0]}, ir::PermAttrs{{1, 0}});
      product = ternary_dx(g2, tt, (*ts)[1]);
    } else if (plain_ternary(b) && is_float(type(g2).elem)) {
      product = ternary_dx(g2, emit(Op::Transpose, {b}, ir::PermAttrs{{1, 0}}), ValueId{});
    } else {
      product = emit(Op::MatMul, {g2, transpose_last2(b2)});
    }
    ValueId da = unbroadcast(product, type(a2));
    accumulate(a, a1 ? reshape(da, type(a).shape) : da);
  }
  if (active_[b.index]) {
    // The gradient of the latent weights of a ternary b (ternarize_absmean(p), or a t2
    // parameter's straight-through f32 gradient).
    const bool ternary = defined_by(b, Op::TernarizeAbsmean, 0) || plain_ternary(b);
    if (options_.int8_dw && ternary && type(a).rank() == 2 && type(b).rank() == 2 && is_float(type(g).elem)) {
      // The ternary weight's gradient on the int8 path: x = quantize_int8(x0) is
      // xq * sx (per row), so x^T g = xq^T (g * sx), xq exact.
      ValueId x = a, gw = g;
      if (const auto qi = defined_by(a, Op::QuantizeInt8, 0)) {
        auto q = bld_.create(Op::Quantize, {b_.inst(*qi).operands[0]}, ir::SteAttrs{});
        TERNJIT_CHECK(q.ok(), "autodiff built an ill-typed quantize");
        x = (*q)[0];
        gw = mul(g, cast((*q)[1], type(g).elem));
      }
      TERNJIT_TRY(const ValueId dw, int8_contract(x, gw));
      accumulate(b, dw);
      return success();
    }
    ValueId db = unbroadcast(emit(Op::MatMul, {transpose_last2(a2), g2}), Type{*grad_kind(type(b2)), type(b2).shape});
    accumulate(b, b1 ? reshape(db, type(b).shape) : db);
  }
  return success();
}

Result<void> Reverse::tmatmul_rule(const ir::InstData& d, ValueId g) {
  const auto& at = std::get<ir::TMatMulAttrs>(d.attrs);
  const ValueId x = d.operands[0], w = d.operands[1];
  std::size_t next = 2;
  // Absent epilogue operands are invalid ids.
  const ValueId xs = at.x_scale ? d.operands[next++] : ValueId{};
  const ValueId ws = at.w_scale ? d.operands[next++] : ValueId{};
  const ValueId bias = at.bias ? d.operands[next++] : ValueId{};
  const ValueId res = at.residual ? d.operands[next++] : ValueId{};
  const ValueId y = d.results[0];
  auto active = [&](ValueId v) { return v.valid() && active_[v.index]; };
  if (at.group > 0 && (active_[x.index] || active_[w.index] || active(ws)))
    return not_differentiable(f_, "the gradient of a grouped 'tmatmul' (group = " + std::to_string(at.group) +
                                      ") is not supported");

  // The gradient at the pre-activation z.
  ValueId gz = g;
  if (at.act != ir::Activation::None) {
    const Op act = *ir::activation_op(at.act);
    ValueId z = y;
    if (act == Op::Gelu || act == Op::Silu) {  // these need z itself: recomputed (and so saved)
      ir::TMatMulAttrs plain = at;
      plain.act = ir::Activation::None;
      z = emit(Op::TMatMul, d.operands, plain);
    }
    gz = activation_grad(act, g, z, y);  // relu, sigmoid, tanh read the sign/value of y
  }
  if (res.valid()) accumulate(res, gz);
  if (bias.valid()) accumulate(bias, unbroadcast(gz, type(bias)));
  if (active(xs) || active(ws)) {
    const ValueId acc = emit(Op::TMatMul, {x, w}, ir::TMatMulAttrs{});
    if (active(ws)) accumulate(ws, unbroadcast(mul(gz, xs.valid() ? mul(acc, xs) : acc), type(ws)));
    if (active(xs)) accumulate(xs, unbroadcast(mul(gz, ws.valid() ? mul(acc, ws) : acc), type(xs)));
  }

  // The activation side: dx = (gz * ws [* xs]) @ W^T, a ternary matmul by the
  // transposed weights. When x and x_scale are one quantizer's values and scale, the
  // straight-through gradient goes to the quantizer's float input: x_scale cancels.
  const auto qx = defined_by(x, Op::Quantize, 0);
  const bool x_through = qx && xs.valid() && b_.inst(*qx).results[1] == xs;
  const ValueId x_target = x_through ? b_.inst(*qx).operands[0] : x;
  if (active_[x_target.index]) {
    if (type(w).layout != WeightFormat::Plain)
      return not_differentiable(f_, "the weight of a 'tmatmul' has a packed layout");
    // A per-tensor weight scale multiplies dx as an epilogue; a per-channel one (along
    // dx's contraction) and a non-cancelling x_scale multiply the gradient first.
    const bool ws_epilogue = ws.valid() && type(ws).rank() == 0;
    ValueId gx = ws.valid() && !ws_epilogue ? mul(gz, ws) : gz;
    if (xs.valid() && !x_through) gx = mul(gx, xs);
    const ValueId wt = emit(Op::Transpose, {w}, ir::PermAttrs{{1, 0}});
    accumulate(x_target, ternary_dx(gx, wt, ws_epilogue ? ws : ValueId{}));
  }

  // The weight side: dW = x^T (gz * xs [* ws]) in f32, the latent weights' gradient.
  const auto qw = defined_by(w, Op::TQuantize, 0);
  const bool w_through = qw && ws.valid() && b_.inst(*qw).results[1] == ws;
  const ValueId w_target = w_through ? b_.inst(*qw).operands[0] : w;
  if (active_[w_target.index]) {
    ValueId gw = xs.valid() ? mul(gz, xs) : gz;
    if (ws.valid() && !w_through) gw = mul(gw, ws);
    ValueId dw;
    if (options_.int8_dw && type(x).rank() == 2 && type(gw).rank() == 2) {
      TERNJIT_TRY(const ValueId q, int8_contract(x, gw));
      dw = q;
    } else {
      dw = contract(x, gw);
    }
    if (w_through && clips(b_.inst(*qw))) {
      const ValueId latent = w_target;
      ValueId mean = un(Op::Abs, latent);
      while (type(mean).rank() > 0) mean = reduce(Op::ReduceMean, mean, 0, false);
      dw = mul(dw, inside(latent, mean));
    }
    accumulate(w_target, dw);
  }
  return success();
}

Result<void> Reverse::rule(InstId i) {
  const ir::InstData d = b_.inst(i);  // a copy: emitting instructions may reallocate storage
  auto it = adjoint_.find(d.results.empty() ? UINT32_MAX : d.results[0].index);
  const bool has_g = it != adjoint_.end();
  const ValueId g = has_g ? it->second : ValueId{};
  const ValueId y = d.results.empty() ? ValueId{} : d.results[0];
  auto operand_active = [&](std::size_t k) { return k < d.operands.size() && active_[d.operands[k].index]; };
  if (!has_g && d.op != Op::Quantize && d.op != Op::TQuantize) return success();
  const ValueId a = d.operands.empty() ? ValueId{} : d.operands[0];
  const ValueId b = d.operands.size() > 1 ? d.operands[1] : ValueId{};

  switch (d.op) {
    case Op::Const:
    case Op::Param: return success();
    case Op::Call: return not_differentiable(f_, "'call' (run inline-calls first)");
    case Op::Ret:
    case Op::Br:
    case Op::CondBr: return not_differentiable(f_, "control flow");
    case Op::Add:
      if (operand_active(0)) accumulate(a, unbroadcast(g, type(a)));
      if (operand_active(1)) accumulate(b, unbroadcast(g, type(b)));
      return success();
    case Op::Sub:
      if (operand_active(0)) accumulate(a, unbroadcast(g, type(a)));
      if (operand_active(1)) accumulate(b, unbroadcast(un(Op::Neg, g), type(b)));
      return success();
    case Op::Mul:
      if (operand_active(0)) accumulate(a, unbroadcast(mul(g, b), type(a)));
      if (operand_active(1)) accumulate(b, unbroadcast(mul(g, a), type(b)));
      return success();
    case Op::Div: {
      const ValueId ga = div(g, b);
      if (operand_active(0)) accumulate(a, unbroadcast(ga, type(a)));
      if (operand_active(1)) accumulate(b, unbroadcast(un(Op::Neg, mul(ga, y)), type(b)));
      return success();
    }
    case Op::Max:
    case Op::Min: {
      // A tie splits the gradient in halves (torch.maximum / torch.minimum do the same).
      const ValueId diff = d.op == Op::Max ? sub(a, b) : sub(b, a);
      const ValueId to_a = mul(g, mul_c(add(sign(diff), scalar(type(diff).elem, 1.0)), 0.5));
      if (operand_active(0)) accumulate(a, unbroadcast(to_a, type(a)));
      if (operand_active(1)) accumulate(b, unbroadcast(sub(g, to_a), type(b)));
      return success();
    }
    case Op::Neg: accumulate(a, un(Op::Neg, g)); return success();
    case Op::Abs: accumulate(a, mul(g, sign(a))); return success();
    case Op::Relu:
    case Op::Sigmoid:
    case Op::Tanh:
    case Op::Gelu:
    case Op::Silu: accumulate(a, activation_grad(d.op, g, a, y)); return success();
    case Op::Exp: accumulate(a, mul(g, y)); return success();
    case Op::Log: accumulate(a, div(g, a)); return success();
    case Op::Sqrt: accumulate(a, div(mul_c(g, 0.5), y)); return success();
    case Op::Rsqrt: accumulate(a, mul(g, mul_c(mul(y, mul(y, y)), -0.5))); return success();
    case Op::Cast: accumulate(a, g); return success();
    case Op::Transpose: {
      const auto& perm = std::get<ir::PermAttrs>(d.attrs).perm;
      std::vector<std::int64_t> inverse(perm.size());
      for (std::size_t k = 0; k < perm.size(); ++k) inverse[static_cast<std::size_t>(perm[k])] = static_cast<std::int64_t>(k);
      accumulate(a, emit(Op::Transpose, {g}, ir::PermAttrs{inverse}));
      return success();
    }
    case Op::Reshape: accumulate(a, reshape(g, type(a).shape)); return success();
    case Op::Broadcast: accumulate(a, unbroadcast(g, type(a))); return success();
    case Op::MatMul: return matmul_rule(d, g);
    case Op::ReduceSum:
    case Op::ReduceMean:
    case Op::ReduceMax: {
      const auto& ax = std::get<ir::AxisAttrs>(d.attrs);
      const auto axis = static_cast<std::size_t>(ax.axis);
      const ValueId gk = ax.keepdims ? g : reshape(g, with_unit(type(g).shape, axis));
      ValueId dx;
      if (d.op == Op::ReduceSum) {
        dx = broadcast_to(gk, type(a).shape);
      } else if (d.op == Op::ReduceMean) {
        // The extent may be a symbol: count it as the sum of ones over the axis.
        const ValueId ones = splat(Type{type(gk).elem, type(a).shape}, 1.0);
        dx = broadcast_to(div(gk, reduce(Op::ReduceSum, ones, ax.axis, true)), type(a).shape);
      } else {
        // Every element equal to the maximum gets an equal share (torch.amax does the same).
        const ValueId yk = ax.keepdims ? y : reshape(y, with_unit(type(y).shape, axis));
        const ValueId at_max = add(sign(sub(a, yk)), scalar(type(a).elem, 1.0));
        dx = div(mul(gk, at_max), reduce(Op::ReduceSum, at_max, ax.axis, true));
      }
      accumulate(a, dx);
      return success();
    }
    case Op::Softmax: {
      const auto axis = std::get<ir::AxisAttrs>(d.attrs).axis;
      accumulate(a, mul(y, sub(g, reduce(Op::ReduceSum, mul(g, y), axis, true))));
      return success();
    }
    case Op::RmsNorm: {
      // n = x r with r = rsqrt(mean(x^2) + eps), y = n gamma:
      // dgamma = sum over rows of g n; dx = r (dn - n mean(dn n)) with dn = g gamma.
      const ElemKind rk = type(y).elem;
      const ValueId x = cast(a, rk);
      const auto last = static_cast<std::int64_t>(type(a).rank()) - 1;
      const ValueId ms = reduce(Op::ReduceMean, mul(x, x), last, true);
      const ValueId r = un(Op::Rsqrt, add(ms, scalar(rk, std::get<ir::EpsAttrs>(d.attrs).eps)));
      const ValueId n = mul(x, r);
      if (operand_active(1)) accumulate(b, unbroadcast(mul(g, n), type(b)));
      if (operand_active(0)) {
        const ValueId dn = mul(g, cast(b, rk));
        accumulate(a, mul(r, sub(dn, mul(n, reduce(Op::ReduceMean, mul(dn, n), last, true)))));
      }
      return success();
    }
    case Op::QuantizeInt8: accumulate(a, g); return success();
    case Op::Ternarize:
      accumulate(a, clips(d) ? mul(g, inside(a, scalar(type(a).elem, 1.0))) : g);
      return success();
    case Op::TernarizeAbsmean: {
      if (!clips(d)) {
        accumulate(a, g);
        return success();
      }
      ValueId mean = un(Op::Abs, a);
      while (type(mean).rank() > 0) mean = reduce(Op::ReduceMean, mean, 0, false);
      accumulate(a, mul(g, inside(a, mean)));
      return success();
    }
    case Op::Quantize:
    case Op::TQuantize: {
      // values ~ x / scale: the values' gradient divided by the scale (which gets none).
      auto gv = adjoint_.find(d.results[0].index);
      if (gv == adjoint_.end()) return success();
      ValueId dx = div(gv->second, d.results[1]);
      if (d.op == Op::TQuantize && clips(d)) dx = mul(dx, inside(a, d.results[1]));
      accumulate(a, dx);
      return success();
    }
    case Op::Dequantize: {
      const auto q = defined_by(a, Op::Quantize, 0);
      if (q && b_.inst(*q).results[1] == b) {  // dequantize(quantize(x)) is quantize_int8(x)
        accumulate(b_.inst(*q).operands[0], g);
        return success();
      }
      if (operand_active(0)) accumulate(a, unbroadcast(mul(g, b), Type{ElemKind::F32, type(a).shape}));
      if (operand_active(1)) accumulate(b, unbroadcast(mul(g, cast(a, ElemKind::F32)), type(b)));
      return success();
    }
    case Op::TMatMul: return tmatmul_rule(d, g);
    case Op::Ewise: TERNJIT_UNREACHABLE("autodiff: ewise is expanded before the reverse sweep");
    case Op::Gather:
    case Op::Slice:
    case Op::Concat:
    case Op::LayerNorm:
    case Op::Rope:
    case Op::CausalSoftmax:
    case Op::KvWrite:
    case Op::Attention:
      return not_differentiable(f_, "'" + std::string(ir::op_name(d.op)) + "' has no gradient rule");
  }
  TERNJIT_UNREACHABLE("autodiff: unknown op");
}

Result<void> Reverse::run(const std::vector<std::string>& wrt, std::vector<Type>& grad_types) {
  if (f_.blocks().size() != 1) return not_differentiable(f_, "control flow (more than one block)");
  b_.set_symbols(f_.symbols());
  b_.set_constraints(f_.constraints());
  b_.set_loc(f_.loc());
  const ir::BlockId entry = b_.add_block();
  bld_.set_block(entry);

  // Arguments: the forward's, then one gradient per float result.
  std::vector<ValueId> map(f_.num_values());
  for (ValueId v : f_.args()) map[v.index] = b_.add_block_arg(entry, f_.type_of(v), f_.value(v).name);
  std::vector<ValueId> d_results;
  for (const Type& t : f_.result_types()) d_results.push_back(is_float(t.elem) ? b_.add_block_arg(entry, t) : ValueId{});

  // Which values the gradient is taken with respect to.
  std::vector<std::pair<std::string, std::vector<ValueId>>> targets;  // per wrt entry: its values in b_
  std::set<std::string> wrt_params;
  for (const std::string& name : wrt) {
    if (name.starts_with("@")) {
      const ir::ParamDecl* p = m_.find_param(name.substr(1));
      if (!p) return not_differentiable(f_, "unknown parameter '" + name + "'");
      if (!is_float(p->type.elem) && p->type.elem != ElemKind::T2)
        return not_differentiable(f_, "parameter '" + name + "' is " + std::string(elem_name(p->type.elem)) +
                                          ": only float and t2 parameters have a gradient");
      wrt_params.insert(name.substr(1));
      targets.push_back({name, {}});
      continue;
    }
    const std::string bare = name.starts_with("%") ? name.substr(1) : name;
    std::optional<ValueId> arg;
    for (ValueId v : f_.args())
      if (f_.value(v).name == bare) arg = map[v.index];
    if (!arg) return not_differentiable(f_, "no argument named '%" + bare + "'");
    if (!is_float(b_.type_of(*arg).elem))
      return not_differentiable(f_, "argument '%" + bare + "' is not a float: it has no gradient");
    targets.push_back({name, {*arg}});
  }

  // The forward, recomputed (ewise expanded into its steps).
  const ir::BlockId fb = f_.blocks()[0];
  std::optional<InstId> ret;
  for (InstId i : f_.insts(fb)) {
    const ir::InstData& d = f_.inst(i);
    if (d.op == Op::Ret) {
      ret = i;
      break;
    }
    if (d.op == Op::Call) return not_differentiable(f_, "'call' to @" + std::get<ir::CallAttrs>(d.attrs).callee + " (run inline-calls first)");
    std::vector<ValueId> ops;
    for (ValueId o : d.operands) ops.push_back(map[o.index]);
    if (d.op == Op::Ewise) {
      std::vector<ValueId> slots = ops;
      for (const ir::EwiseStep& s : std::get<ir::EwiseAttrs>(d.attrs).steps) {
        std::vector<ValueId> step_ops{slots[static_cast<std::size_t>(s.a)]};
        if (s.b >= 0) step_ops.push_back(slots[static_cast<std::size_t>(s.b)]);
        slots.push_back(emit(s.op, step_ops));
        primal_.push_back(b_.value(slots.back()).inst);
      }
      map[d.results[0].index] = slots.back();
      continue;
    }
    const InstId c = b_.append_inst(entry, d.op, ops, [&] {
      std::vector<Type> ts;
      for (ValueId r : d.results) ts.push_back(f_.type_of(r));
      return ts;
    }(), d.attrs, d.loc);
    for (std::size_t k = 0; k < d.results.size(); ++k) map[d.results[k].index] = b_.inst(c).results[k];
    primal_.push_back(c);
  }
  TERNJIT_CHECK(ret.has_value(), "autodiff: verified function without ret");

  // Activity: a value depends on a wrt value through ops that pass a gradient.
  active_.assign(b_.num_values(), 0);
  for (auto& [name, values] : targets)
    for (ValueId v : values) active_[v.index] = 1;
  for (InstId i : primal_) {
    const ir::InstData& d = b_.inst(i);
    bool in = false;
    if (d.op == Op::Param) {
      const auto& pname = std::get<ir::ParamAttrs>(d.attrs).name;
      in = wrt_params.contains(pname);
      if (in)
        for (auto& [name, values] : targets)
          if (name == "@" + pname) values.push_back(d.results[0]);
    }
    for (ValueId o : d.operands) in = in || active_[o.index];
    if (d.op == Op::Cast && !is_float(std::get<ir::CastAttrs>(d.attrs).to)) in = false;  // rounding to an integer: no gradient
    for (ValueId r : d.results) active_[r.index] = in && grad_kind(b_.type_of(r)) ? 1 : 0;
    // A quantizer's scale carries no gradient (straight-through: the scale is a constant).
    if (d.op == Op::Quantize || d.op == Op::TQuantize) active_[d.results[1].index] = 0;
  }

  // Seeds, then the reverse sweep.
  const ir::InstData& r = f_.inst(*ret);
  for (std::size_t k = 0; k < r.operands.size(); ++k)
    if (d_results[k].valid()) accumulate(map[r.operands[k].index], d_results[k]);
  for (auto it = primal_.rbegin(); it != primal_.rend(); ++it) {
    active_.resize(b_.num_values(), 0);  // values the rules create are never targets
    TERNJIT_TRY_VOID(rule(*it));
  }

  // Results: the adjoint of each wrt entry (summed over its reads), zero when none.
  std::vector<ValueId> grads;
  for (auto& [name, values] : targets) {
    if (values.empty()) return not_differentiable(f_, "parameter '" + name + "' is not read by the function");
    const Type gt{*grad_kind(b_.type_of(values[0])), b_.type_of(values[0]).shape};
    std::optional<ValueId> sum;
    for (ValueId v : values) {
      auto a = adjoint_.find(v.index);
      if (a == adjoint_.end()) continue;
      sum = sum ? add(*sum, a->second) : a->second;
    }
    grads.push_back(sum ? *sum : splat(gt, 0.0));
    grad_types.push_back(gt);
  }
  b_.append_inst(entry, Op::Ret, grads, {});
  b_.set_result_types(grad_types);
  return success();
}

// True when `v` of `b` does not depend on an argument at or past `first_non_forward`.
std::vector<char> primal_values(const ir::Function& b, std::size_t num_forward_args) {
  std::vector<char> primal(b.num_values(), 0);
  const auto args = b.args();
  for (std::size_t k = 0; k < num_forward_args; ++k) primal[args[k].index] = 1;
  for (InstId i : b.insts(b.entry())) {
    const ir::InstData& d = b.inst(i);
    bool p = true;
    for (ValueId o : d.operands) p = p && primal[o.index];
    for (ValueId r : d.results) primal[r.index] = p ? 1 : 0;
  }
  return primal;
}

// True for values that depend on no argument (params, consts and pure ops of them):
// targets evaluate them once at load time, so recomputing them costs nothing per call
// and they are never saved (a saved ternary weight would be transposed per call).
std::vector<char> load_time_values(const ir::Function& b) {
  std::vector<char> load_time(b.num_values(), 0);
  for (InstId i : b.insts(b.entry())) {
    const ir::InstData& d = b.inst(i);
    bool lt = ir::op_flags(d.op) == ir::OpFlags::Pure;
    for (ValueId o : d.operands) lt = lt && load_time[o.index];
    for (ValueId r : d.results) load_time[r.index] = lt ? 1 : 0;
  }
  return load_time;
}

bool used(const ir::Function& b, ValueId v) {
  for (InstId i : b.insts(b.entry()))
    for (ValueId o : b.inst(i).operands)
      if (o == v) return true;
  return false;
}

// Copies the computation of `v` (a primal value of `b`) into `fwd` before its ret.
// `memo` maps values of `b` to `fwd` (the forward arguments to start with); `saved`
// maps the arguments that replaced saved values back to those values.
ValueId import_primal(const ir::Function& b, ValueId v, ir::Function& fwd, InstId before,
                      std::map<std::uint32_t, ValueId>& memo, const std::map<std::uint32_t, ValueId>& saved) {
  if (auto it = memo.find(v.index); it != memo.end()) return it->second;
  if (auto it = saved.find(v.index); it != saved.end()) return memo[v.index] = import_primal(b, it->second, fwd, before, memo, saved);
  const ir::ValueData& vd = b.value(v);
  TERNJIT_CHECK(vd.def == ir::ValueDef::InstResult, "autodiff: a saved value depends on a non-forward argument");
  const ir::InstData d = b.inst(vd.inst);
  std::vector<ValueId> ops;
  for (ValueId o : d.operands) ops.push_back(import_primal(b, o, fwd, before, memo, saved));
  std::vector<Type> types;
  for (ValueId r : d.results) types.push_back(b.type_of(r));
  const InstId c = fwd.insert_inst_before(before, d.op, ops, types, d.attrs, d.loc);
  for (std::size_t k = 0; k < d.results.size(); ++k) memo[d.results[k].index] = fwd.inst(c).results[k];
  return memo.at(v.index);
}

}  // namespace

Result<AutodiffResult> autodiff(ir::Module& m, const AutodiffOptions& options) {
  const ir::Function* fp = m.find_function(options.function);
  if (!fp) return make_error(ErrorCode::NotFound, "autodiff: no function @" + options.function);
  const ir::Function& f = *fp;
  for (const char* suffix : {".fwd", ".bwd"})
    if (m.find_function(f.name() + suffix))
      return make_error(ErrorCode::InvalidInput, "autodiff: @" + f.name() + suffix + " exists already");

  std::vector<std::string> wrt = options.wrt;
  if (wrt.empty()) {  // every float argument and every float or t2 parameter read
    for (ValueId v : f.args())
      if (is_float(f.type_of(v).elem) && !f.value(v).name.empty()) wrt.push_back("%" + f.value(v).name);
    std::set<std::string> seen;
    for (ir::BlockId blk : f.blocks())
      for (InstId i : f.insts(blk))
        if (f.inst(i).op == Op::Param) {
          const std::string& name = std::get<ir::ParamAttrs>(f.inst(i).attrs).name;
          const ir::ParamDecl* p = m.find_param(name);
          if (p && (is_float(p->type.elem) || p->type.elem == ElemKind::T2) && seen.insert(name).second) wrt.push_back("@" + name);
        }
  }

  if (wrt.empty()) return not_differentiable(f, "nothing to differentiate with respect to (no float argument or parameter)");
  Reverse rev(m, f, options);
  std::vector<Type> grad_types;
  TERNJIT_TRY_VOID(rev.run(wrt, grad_types));
  ir::Function& b = rev.function();
  eliminate_dead_code(b);

  // Save or recompute: the costly values the backward still needs become arguments,
  // latest first (so a value needed only to recompute a later saved one is not saved).
  std::vector<ValueId> saved;  // values of b (of erased instructions) the forward returns
  std::map<std::uint32_t, ValueId> saved_by_arg;  // the argument that replaced each
  const std::vector<char> primal = primal_values(b, rev.num_forward_args());
  const std::vector<char> load_time = load_time_values(b);
  const std::vector<InstId> order(b.insts(b.entry()).begin(), b.insts(b.entry()).end());
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const ir::InstData& d = b.inst(*it);
    if (!costly_to_recompute(d.op) || !primal[d.results[0].index] || load_time[d.results[0].index]) continue;
    bool any = false;
    for (std::size_t k = 0; k < d.results.size(); ++k) {
      const ValueId r = b.inst(*it).results[k];
      if (!used(b, r)) continue;
      const ValueId arg = b.add_block_arg(b.entry(), b.type_of(r));
      b.replace_all_uses(r, arg);
      saved.push_back(r);
      saved_by_arg[arg.index] = r;
      any = true;
    }
    if (any) b.erase_inst(*it);
  }
  eliminate_dead_code(b);

  // The forward with the saved values appended to its results.
  ir::Function fwd = f;
  fwd.set_name(f.name() + ".fwd");
  const InstId ret = *fwd.terminator(fwd.entry());
  std::map<std::uint32_t, ValueId> memo;
  for (std::size_t k = 0; k < rev.num_forward_args(); ++k) memo[b.args()[k].index] = fwd.args()[k];
  std::vector<ValueId> results = fwd.inst(ret).operands;
  std::vector<Type> result_types = fwd.result_types();
  for (ValueId v : saved) {
    results.push_back(import_primal(b, v, fwd, ret, memo, saved_by_arg));
    result_types.push_back(b.type_of(v));
  }
  fwd.erase_inst(ret);
  fwd.append_inst(fwd.entry(), Op::Ret, results, {});
  fwd.set_result_types(result_types);
  eliminate_common_subexpressions(fwd);
  eliminate_dead_code(fwd);

  AutodiffResult out{fwd.name(), b.name(), wrt, saved.size()};
  m.functions().push_back(std::move(fwd));
  m.functions().push_back(std::move(b));
  return out;
}

Result<void> autodiff(ir::Module& m) {
  std::vector<std::string> names;
  for (const ir::Function& f : m.functions()) {
    const std::string& n = f.name();
    if (n.ends_with(".fwd") || n.ends_with(".bwd") || m.find_function(n + ".bwd")) continue;
    if (std::none_of(f.result_types().begin(), f.result_types().end(), [](const Type& t) { return is_float(t.elem); })) continue;
    names.push_back(n);
  }
  for (const std::string& n : names) {
    // A function the pass cannot differentiate (control flow, calls, nothing to
    // differentiate) is left without a backward; the module is unchanged for it.
    auto r = autodiff(m, AutodiffOptions{n, {}, false});
    if (!r.ok() && r.error().code != ErrorCode::InvalidInput) return std::move(r).error();
  }
  return success();
}

}  // namespace ternjit::passes
