// SPDX-License-Identifier: Apache-2.0
// tmatmul_dispatch.cpp - ternjit/tmatmul.h: a ternary matmul kernel per descriptor, generated as IR and compiled by the engine.
//
// A descriptor becomes the IR of one layer (layer_ir below): the weight W as the
// parameter @D.w (a GGUF weight's block scales as @D.d, the weight scale @D.s, the bias
// @D.b), the activation, its row scale and the residual as arguments (all rows-leading, as
// run-time rows need), one `tmatmul` and the epilogue as plain ops, which the engine's pipeline fuses as it does for any layer. So the kernel is
// what Engine::compile makes of that module: the disk cache, the tuning records and the
// run-time rows of the M buckets (docs/caching.md) all apply.
//
// A bound weight (TMatMulDispatcher::bind) is the same Program with the weight bound once:
// its calls pass only x, and run the bound kernel with no compare and no copy kept.
//
// The weight is a call argument in its own packed format, but the engine's fast kernels
// read a bound weight repacked once into their panels (targets/x86/README.md): a weight
// read per call would be repacked per call or run on the reference step. So the kernel
// keeps, for each of the last weights it was given (with its scale and bias), a Program
// with them bound plus a copy of the caller's bytes, and each call compares the bytes at
// args.w, args.w_scale and args.bias with the copies
// (memcmp: the weight bytes read once more) before running the bound kernel; a new or
// changed weight is bound again. That is exact whatever the caller does with its buffers,
// at the cost of the compare and of the copy's memory. The first dispatch of a descriptor
// also compiles the layer once with random weights (probe), so that a descriptor the
// engine cannot compile is refused there, not at the first call.
#include "ternjit/tmatmul.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

// xxHash header-only, as the cache's keys use it (cache/CMakeLists.txt).
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "formats/gguf.h"
#include "formats/ternary.h"
#include "jit/loader.h"
#include "ternjit/builder.h"
#include "ternjit/engine.h"

namespace ternjit {

namespace {

constexpr const char* kFunction = "D.forward";
// Weights a kernel keeps bound at once (a layer's weight, plus a few while a caller
// alternates); the oldest is dropped for a new one.
constexpr std::size_t kMaxBindings = 4;
// Row counts whose Kernel a binding remembers in a flat table (larger ones look up).
constexpr std::int64_t kRowTable = 4096;
constexpr std::int64_t kGgufBlock = 256;

bool is_gguf(ternjit_tmatmul_weight w) {
  return w == TERNJIT_TMATMUL_W_GGUF_TQ2_0 || w == TERNJIT_TMATMUL_W_GGUF_TQ1_0 || w == TERNJIT_TMATMUL_W_GGUF_Q2_0;
}

// A GGUF weight's values per block along K (each block has one scale): its tmatmul group.
std::int64_t gguf_block(ternjit_tmatmul_weight w) {
  return w == TERNJIT_TMATMUL_W_GGUF_Q2_0 ? static_cast<std::int64_t>(formats::kGgufQ2_0Elems) : kGgufBlock;
}

const char* gguf_name(ternjit_tmatmul_weight w) {
  return w == TERNJIT_TMATMUL_W_GGUF_TQ2_0 ? "TQ2_0" : w == TERNJIT_TMATMUL_W_GGUF_TQ1_0 ? "TQ1_0" : "Q2_0";
}

// The descriptor's fields as read (an enum stored by a C caller may hold any int: it is
// read as an int, never loaded as the enum).
struct Desc {
  std::int64_t m = 1, m_max = 0, k = 0, n = 0, group = 0;
  int weight = 0, x = 0, scale = 0, act = 0;
  std::uint32_t flags = 0;
  std::int32_t threads = 0;

  [[nodiscard]] bool any_m() const { return m == TERNJIT_TMATMUL_ANY_M; }
  [[nodiscard]] std::int64_t rows_bound() const { return any_m() ? m_max : m; }
  [[nodiscard]] ternjit_tmatmul_weight weight_format() const { return static_cast<ternjit_tmatmul_weight>(weight); }
  [[nodiscard]] bool bias() const { return (flags & TERNJIT_TMATMUL_BIAS) != 0; }
  [[nodiscard]] bool residual() const { return (flags & TERNJIT_TMATMUL_RESIDUAL) != 0; }
  // The call passes int8 x with its row scales (the kernel's own quantization reads f32).
  [[nodiscard]] bool x_i8() const { return x == TERNJIT_TMATMUL_X_I8; }
  [[nodiscard]] bool x_row_i8() const { return x == TERNJIT_TMATMUL_X_F32_ROW_I8; }
  [[nodiscard]] std::array<std::int64_t, 11> key() const {
    return {m, m_max, k, n, group, weight, x, scale, act, static_cast<std::int64_t>(flags), threads};
  }
};

struct KeyHash {
  std::size_t operator()(const std::array<std::int64_t, 11>& a) const noexcept {
    return static_cast<std::size_t>(XXH3_64bits(a.data(), sizeof a));
  }
};

template <class E>
int raw_int(const E& e) {
  static_assert(sizeof(E) == sizeof(int));
  int v;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

Error invalid(const std::string& what) { return Error{ErrorCode::InvalidArgument, "tmatmul dispatch: " + what, {}}; }

// Reads and checks the descriptor.
Result<Desc> read_desc(const TMatMulDesc& d) {
  if (d.struct_size < sizeof(TMatMulDesc))
    return invalid("struct_size is " + std::to_string(d.struct_size) + ", expected " +
                   std::to_string(sizeof(TMatMulDesc)) + " (initialize with ternjit_tmatmul_desc_init)");
  Desc r{d.m, d.m_max, d.k, d.n, d.group, raw_int(d.weight), raw_int(d.x), raw_int(d.scale), raw_int(d.act),
         d.flags, d.threads};
  constexpr std::int64_t kMaxDim = std::int64_t{1} << 31;
  if (r.any_m()) {
    if (r.m_max < 1 || r.m_max >= kMaxDim)
      return invalid("m is TERNJIT_TMATMUL_ANY_M but m_max is " + std::to_string(r.m_max) + " (need 1 .. 2^31-1)");
  } else {
    if (r.m < 1 || r.m >= kMaxDim)
      return invalid("m is " + std::to_string(r.m) + " (need 1 .. 2^31-1, or TERNJIT_TMATMUL_ANY_M)");
    if (r.m_max != 0) return invalid("m_max is set (" + std::to_string(r.m_max) + ") but m is not TERNJIT_TMATMUL_ANY_M");
  }
  if (r.k < 1 || r.k >= kMaxDim || r.n < 1 || r.n >= kMaxDim)
    return invalid("k and n must be 1 .. 2^31-1, got k = " + std::to_string(r.k) + ", n = " + std::to_string(r.n));
  // 2^34 weights (4 GiB at 2 bits) is far above any layer; a larger product is a mistake
  // that would otherwise surface as an allocation of that size.
  if (r.k * r.n > (std::int64_t{1} << 34))
    return invalid("k * n is " + std::to_string(r.k * r.n) + ", above the 2^34 weights a kernel takes");
  if (r.weight < TERNJIT_TMATMUL_W_TERN2 || r.weight > TERNJIT_TMATMUL_W_GGUF_Q2_0)
    return invalid("unknown weight format " + std::to_string(r.weight));
  if (r.x < TERNJIT_TMATMUL_X_F32 || r.x > TERNJIT_TMATMUL_X_F32_ROW_I8)
    return invalid("unknown x kind " + std::to_string(r.x));
  if (r.scale < TERNJIT_TMATMUL_SCALE_NONE || r.scale > TERNJIT_TMATMUL_SCALE_GROUP)
    return invalid("unknown scale kind " + std::to_string(r.scale));
  if (r.act < TERNJIT_TMATMUL_ACT_NONE || r.act > TERNJIT_TMATMUL_ACT_GELU)
    return invalid("unknown activation " + std::to_string(r.act));
  if ((r.flags & ~(TERNJIT_TMATMUL_BIAS | TERNJIT_TMATMUL_RESIDUAL)) != 0)
    return invalid("unknown flags " + std::to_string(r.flags));
  if (r.threads < 0) return invalid("threads is " + std::to_string(r.threads) + " (0: the engine's)");
  if (r.scale == TERNJIT_TMATMUL_SCALE_GROUP) {
    if (r.group < 1 || r.group >= kMaxDim) return invalid("group is " + std::to_string(r.group) + " (need >= 1)");
  } else if (r.group != 0) {
    return invalid("group is set (" + std::to_string(r.group) + ") but scale is not TERNJIT_TMATMUL_SCALE_GROUP");
  }
  if (is_gguf(r.weight_format())) {
    const std::string block = std::to_string(gguf_block(r.weight_format()));
    if (r.k % gguf_block(r.weight_format()) != 0)
      return invalid(std::string("a GGUF ") + gguf_name(r.weight_format()) + " weight needs K a multiple of " + block +
                     ", got " + std::to_string(r.k));
    if (r.scale == TERNJIT_TMATMUL_SCALE_GROUP)
      return Error{ErrorCode::Unsupported,
                   "tmatmul dispatch: a per-group weight scale on a GGUF weight, whose blocks already carry one "
                   "scale per " + block +
                       " along K (a tmatmul takes one grouped scale): fold it into the blocks' scales",
                   {}};
  }
  return r;
}

// The weight's bytes in its format.
std::size_t weight_bytes(const Desc& d) {
  const auto numel = static_cast<std::size_t>(d.k * d.n);
  switch (d.weight_format()) {
    case TERNJIT_TMATMUL_W_TERN2: return formats::packed_size(WeightFormat::Tern2, numel);
    case TERNJIT_TMATMUL_W_TERN1_6: return formats::packed_size(WeightFormat::Tern16, numel);
    case TERNJIT_TMATMUL_W_GGUF_TQ2_0:
      return static_cast<std::size_t>(formats::gguf_block_bytes(formats::GgufTensorType::TQ2_0)) * numel / kGgufBlock;
    case TERNJIT_TMATMUL_W_GGUF_TQ1_0:
      return static_cast<std::size_t>(formats::gguf_block_bytes(formats::GgufTensorType::TQ1_0)) * numel / kGgufBlock;
    case TERNJIT_TMATMUL_W_GGUF_Q2_0: return formats::kGgufQ2_0Bytes * numel / formats::kGgufQ2_0Elems;
  }
  return 0;
}

std::int64_t scale_rows(const Desc& d) { return (d.k + d.group - 1) / d.group; }

// The layer's IR (ir/README.md): one function "D.forward" of the call's tensors.
std::string layer_ir(const Desc& d) {
  const std::string K = std::to_string(d.k), N = std::to_string(d.n);
  const std::string M = d.any_m() ? "M" : std::to_string(d.m);
  const std::string mn = "f32[" + M + ", " + N + "]";
  const bool gguf = is_gguf(d.weight_format());
  std::string t = "param @D.w : t2[" + K + ", " + N + "]\n";
  const std::int64_t block = gguf ? gguf_block(d.weight_format()) : 0;
  const std::string blocks = gguf ? "f32[" + std::to_string(d.k / block) + ", " + N + "]" : "";
  if (gguf) t += "param @D.d : " + blocks + "\n";
  // The weight scale and the bias are parameters too, bound with the weight: every
  // argument then has the rows at axis 0, which run-time rows need (passes/row_batch.h).
  const std::string s_type = d.scale == TERNJIT_TMATMUL_SCALE_GROUP
                                 ? "f32[" + std::to_string(scale_rows(d)) + ", " + N + "]"
                                 : "f32[" + N + "]";
  if (d.scale != TERNJIT_TMATMUL_SCALE_NONE) t += "param @D.s : " + s_type + "\n";
  if (d.bias()) t += "param @D.b : f32[" + N + "]\n";
  t += std::string("\nfunc @D.forward") + (d.any_m() ? "<M>" : "") + "(";
  const char* x_kind = d.x_i8() ? "i8" : d.x == TERNJIT_TMATMUL_X_BF16 ? "bf16" : "f32";
  t += std::string("%x: ") + x_kind + "[" + M + ", " + K + "]";
  if (d.x_i8()) t += ", %xs: f32[" + M + ", 1]";
  if (d.residual()) t += ", %r: " + mn;
  t += ") -> " + mn + " {\n^entry:\n";
  t += "  %w = param @D.w : t2[" + K + ", " + N + "]\n";
  if (d.scale != TERNJIT_TMATMUL_SCALE_NONE) t += "  %s = param @D.s : " + s_type + "\n";
  if (d.bias()) t += "  %b = param @D.b : f32[" + N + "]\n";
  std::string x = "%x";
  if (d.x == TERNJIT_TMATMUL_X_BF16) {
    // bf16 -> f32 is exact, and the f32 tmatmul sums in double: the f32 result of the bf16 products.
    t += "  %xf = cast %x {to = f32} : f32[" + M + ", " + K + "]\n";
    x = "%xf";
  }
  if (d.x_row_i8()) {
    // The integer form of quantize_int8 (what fuse-quantization makes of BitLinear's
    // quantize_int8(x) @ w): the int8 rows and their absmax scales, then the int8 tmatmul.
    t += "  %q, %xs = quantize %x : i8[" + M + ", " + K + "], f32[" + M + ", 1]\n";
    x = "%q";
  }
  // The tmatmul carries the scales; bias, residual and activation are separate ops that
  // fuse-epilogue folds in where its order allows (a GGUF weight with a column scale
  // keeps that `mul` a step of its own).
  std::string ops = x + ", %w";
  std::string attrs;
  const bool x_scale = d.x_i8() || d.x_row_i8();
  if (x_scale) ops += ", %xs";
  attrs += std::string("x_scale = ") + (x_scale ? "true" : "false");
  if (gguf) {
    t += "  %d = param @D.d : " + blocks + "\n";
    ops += ", %d";
    attrs += ", w_scale = true, group = " + std::to_string(block);
  } else if (d.scale == TERNJIT_TMATMUL_SCALE_COLUMN) {
    ops += ", %s";
    attrs += ", w_scale = true";
  } else if (d.scale == TERNJIT_TMATMUL_SCALE_GROUP) {
    ops += ", %s";
    attrs += ", w_scale = true, group = " + std::to_string(d.group);
  } else {
    attrs += ", w_scale = false";
  }
  attrs += ", bias = false, residual = false, act = none";
  int v = 0;
  std::string y = "%y0";
  t += "  " + y + " = tmatmul " + ops + " {" + attrs + "} : " + mn + "\n";
  auto step = [&](const std::string& op_and_operands) {
    const std::string next = "%y" + std::to_string(++v);
    t += "  " + next + " = " + op_and_operands + " : " + mn + "\n";
    y = next;
  };
  if (gguf && d.scale == TERNJIT_TMATMUL_SCALE_COLUMN) step("mul " + y + ", %s");
  if (d.bias()) step("add " + y + ", %b");
  if (d.residual()) step("add " + y + ", %r");
  switch (d.act) {
    case TERNJIT_TMATMUL_ACT_RELU: step("relu " + y); break;
    case TERNJIT_TMATMUL_ACT_RELU2: step("relu " + y); step("mul " + y + ", " + y); break;
    case TERNJIT_TMATMUL_ACT_SILU: step("silu " + y); break;
    case TERNJIT_TMATMUL_ACT_GELU: step("gelu " + y); break;
    default: break;
  }
  t += "  ret " + y + "\n}\n";
  return t;
}

// The kinds and shapes of D.forward's inputs for `rows` rows (data null).
std::vector<TensorView> input_specs(const Desc& d, std::int64_t rows) {
  std::vector<TensorView> in;
  const ElemKind xk = d.x_i8() ? ElemKind::I8 : d.x == TERNJIT_TMATMUL_X_BF16 ? ElemKind::BF16 : ElemKind::F32;
  in.push_back({nullptr, xk, {rows, d.k}});
  if (d.x_i8()) in.push_back({nullptr, ElemKind::F32, {rows, 1}});
  if (d.residual()) in.push_back({nullptr, ElemKind::F32, {rows, d.n}});
  return in;
}

// Compiles the layer once with random weights for the most rows a call passes, so that a
// descriptor the engine cannot compile is refused by the dispatch itself (and the disk
// cache holds the kernel before the first call).
Result<void> probe(Engine& engine, const Module& module, const Desc& d) {
  TERNJIT_TRY(Program program, engine.compile(module));
  TERNJIT_TRY_VOID(program.bind_random(1));
  auto k = program.kernel(kFunction, input_specs(d, d.rows_bound()));
  if (!k.ok() && k.error().code == ErrorCode::Unsupported)
    return make_error(ErrorCode::Unsupported,
                      "tmatmul dispatch: the engine cannot compile this descriptor: " + k.error().message);
  if (!k.ok()) return std::move(k).error();
  return success();
}

// A GGUF weight of dims (K, N) as ternary values W[K, N] and block scales [K/block, N], and
// *columns: when every block of each column that holds a nonzero value has the same finite
// scale (bit for bit; blocks of zeros only with a finite scale), that scale per column (0 for
// a column of zeros), else empty. BitNet's files are so (one scale per tensor): their
// weight then takes the column-scale kernel, whose sum over K needs no step per block.
Result<void> decode_gguf(const Desc& d, const std::uint8_t* bytes, std::vector<std::int8_t>* values,
                         std::vector<float>* scales, std::vector<float>* columns) {
  const ternjit_tmatmul_weight format = d.weight_format();
  const bool q2_0 = format == TERNJIT_TMATMUL_W_GGUF_Q2_0;
  const auto type = format == TERNJIT_TMATMUL_W_GGUF_TQ2_0 ? formats::GgufTensorType::TQ2_0
                                                           : formats::GgufTensorType::TQ1_0;
  const std::size_t block_bytes =
      q2_0 ? formats::kGgufQ2_0Bytes : static_cast<std::size_t>(formats::gguf_block_bytes(type));
  const std::int64_t block_len = gguf_block(format);
  const std::int64_t blocks = d.k / block_len;
  values->resize(static_cast<std::size_t>(d.k * d.n));
  scales->resize(static_cast<std::size_t>(blocks * d.n));
  // The file's rows are W's columns: decoded kTile rows at a time into `tile` (row-major
  // [kTile, K]), then written out along W's rows kTile values at a time, so neither side
  // strides through memory N apart per value (a K = 2560, N = 6912 weight: 17.7M values).
  constexpr std::int64_t kTile = 64;
  std::vector<std::int8_t> tile(static_cast<std::size_t>(kTile * d.k));
  std::array<std::uint8_t, kGgufBlock> codes{};
  columns->assign(static_cast<std::size_t>(d.n), 0.0f);
  bool uniform = true;
  for (std::int64_t n0 = 0; n0 < d.n; n0 += kTile) {
    const std::int64_t rows = std::min(kTile, d.n - n0);
    for (std::int64_t j = 0; j < rows; ++j) {
      const std::int64_t n = n0 + j;
      bool seen = false;  // a block of this column with a nonzero value
      for (std::int64_t b = 0; b < blocks; ++b) {
        const std::uint8_t* block = bytes + static_cast<std::size_t>(n * blocks + b) * block_bytes;
        float scale = 0;
        const bool ternary = q2_0 ? formats::gguf_q2_0_block(block, codes.data(), &scale)
                                  : formats::gguf_ternary_block(type, block, codes.data(), &scale);
        if (!ternary)
          return make_error(ErrorCode::InvalidInput,
                            std::string("tmatmul dispatch: the ") + gguf_name(format) + " weight's block " +
                                std::to_string(b) + " of row " + std::to_string(n) +
                                " holds code 3 (+2, not a ternary value)");
        (*scales)[static_cast<std::size_t>(b * d.n + n)] = scale;
        std::int8_t* out = tile.data() + static_cast<std::size_t>(j * d.k + b * block_len);
        bool nonzero = false;
        for (std::int64_t e = 0; e < block_len; ++e) {
          out[e] = static_cast<std::int8_t>(codes[e] - 1);
          nonzero |= out[e] != 0;
        }
        if (!uniform) continue;
        float& column = (*columns)[static_cast<std::size_t>(n)];
        if (!std::isfinite(scale)) uniform = false;
        else if (nonzero && !seen) column = scale, seen = true;
        else if (nonzero && std::memcmp(&column, &scale, sizeof scale) != 0) uniform = false;
      }
    }
    for (std::int64_t k = 0; k < d.k; ++k) {
      std::int8_t* out = values->data() + static_cast<std::size_t>(k * d.n + n0);
      for (std::int64_t j = 0; j < rows; ++j) out[j] = tile[static_cast<std::size_t>(j * d.k + k)];
    }
  }
  if (!uniform) columns->clear();
  return success();
}

// The call's bound values: the weight, its scale and the bias (null when not asked for).
struct BoundValues {
  const void* w = nullptr;
  const float* scale = nullptr;
  const float* bias = nullptr;
};

// A weight (with its scale and bias) bound into a Program of the layer, and the Kernels of
// the row counts run so far.
struct BoundProgram {
  Program program;
  mutable std::vector<std::atomic<const Kernel*>> by_rows;  // [rows] once built (rows <= kRowTable)

  BoundProgram(Program prog, std::size_t table) : program(std::move(prog)), by_rows(table) {}
};

// One weight a per-call kernel has seen: copies of the caller's values (what later calls are
// compared with) and its bound program.
struct Binding {
  const void* ptr = nullptr;  // where the weight was
  std::vector<std::uint8_t> w;
  std::vector<float> scale, bias;
  BoundProgram bound;

  Binding(const BoundValues& v, std::size_t w_bytes, std::size_t scale_n, std::size_t bias_n, BoundProgram b)
      : ptr(v.w),
        w(static_cast<const std::uint8_t*>(v.w), static_cast<const std::uint8_t*>(v.w) + w_bytes),
        scale(v.scale, v.scale + scale_n),
        bias(v.bias, v.bias + bias_n),
        bound(std::move(b)) {}

  // Do the values at `v` equal the copies? (memcmp stops at the first differing byte.)
  [[nodiscard]] bool holds(const BoundValues& v) const {
    return std::memcmp(w.data(), v.w, w.size()) == 0 &&
           (scale.empty() || std::memcmp(scale.data(), v.scale, scale.size() * sizeof(float)) == 0) &&
           (bias.empty() || std::memcmp(bias.data(), v.bias, bias.size() * sizeof(float)) == 0);
  }
};

// Runs `body` as a kernel entry: the last-error rule, no exception out.
template <class F>
std::int32_t entry_guard(const TMatMulArgs* args, F body) noexcept {
  jit::last_error().clear();
  try {
    if (args == nullptr) return jit::kernel_failed(invalid("args is null"));
    return body(*args);
  } catch (const std::exception& e) {
    return jit::kernel_failed(Error{ErrorCode::Internal, std::string("unexpected exception: ") + e.what(), {}});
  } catch (...) {
    return jit::kernel_failed(Error{ErrorCode::Internal, "unexpected non-standard exception", {}});
  }
}

// One dispatched kernel: its descriptor, its module, the weights it has bound per call.
class DispatchKernel {
 public:
  DispatchKernel(Engine& engine, Desc d, Module module, std::optional<Module> column_module)
      : engine_(engine),
        desc_(d),
        module_(std::move(module)),
        column_module_(std::move(column_module)),
        weight_bytes_(weight_bytes(d)) {}

  static std::int32_t entry(const void* state, const TMatMulArgs* args) noexcept {
    return entry_guard(args, [&](const TMatMulArgs& a) { return static_cast<const DispatchKernel*>(state)->call(a); });
  }

  [[nodiscard]] const Desc& desc() const { return desc_; }
  [[nodiscard]] std::size_t weight_size() const { return weight_bytes_; }

  // A Program of the layer with the values at `v` bound (Program::bind keeps its own stored
  // form; nothing of the caller's is referenced after). The weight's packed panels are
  // made when a row count's kernel is first built (kernel_for). A GGUF weight is decoded
  // first: its values and block scales (D.w, D.d), or, when each column's blocks share one
  // scale, its values and that scale per column on the column-scale layer.
  Result<BoundProgram> bind(const BoundValues& v) const {
    const bool gguf = is_gguf(desc_.weight_format());
    std::vector<std::int8_t> values;
    std::vector<float> blocks, columns;
    if (gguf) TERNJIT_TRY_VOID(decode_gguf(desc_, static_cast<const std::uint8_t*>(v.w), &values, &blocks, &columns));
    const bool by_column = gguf && column_module_.has_value() && !columns.empty();
    TERNJIT_TRY(Program prog, engine_.compile(by_column ? *column_module_ : module_));
    // The caller's scale and bias, as the descriptor asks (by_column: the descriptor has no scale).
    if (desc_.scale != TERNJIT_TMATMUL_SCALE_NONE) {
      std::vector<std::int64_t> shape{desc_.n};
      if (desc_.scale == TERNJIT_TMATMUL_SCALE_GROUP) shape = {scale_rows(desc_), desc_.n};
      TERNJIT_TRY_VOID(prog.bind("D.s", TensorView{const_cast<float*>(v.scale), ElemKind::F32, shape}));
    }
    if (desc_.bias())
      TERNJIT_TRY_VOID(prog.bind("D.b", TensorView{const_cast<float*>(v.bias), ElemKind::F32, {desc_.n}}));
    const std::vector<std::int64_t> kn{desc_.k, desc_.n};
    if (!gguf) {
      const WeightFormat f =
          desc_.weight_format() == TERNJIT_TMATMUL_W_TERN2 ? WeightFormat::Tern2 : WeightFormat::Tern16;
      // TensorView holds void*; bind only reads.
      TERNJIT_TRY_VOID(prog.bind("D.w", TensorView{const_cast<void*>(v.w), ElemKind::U8, kn}, f, weight_bytes_));
    } else {
      TERNJIT_TRY_VOID(prog.bind("D.w", TensorView{values.data(), ElemKind::T2, kn}));
      if (by_column) {
        TERNJIT_TRY_VOID(prog.bind("D.s", TensorView{columns.data(), ElemKind::F32, {desc_.n}}));
      } else {
        const std::int64_t rows = desc_.k / gguf_block(desc_.weight_format());
        TERNJIT_TRY_VOID(prog.bind("D.d", TensorView{blocks.data(), ElemKind::F32, {rows, desc_.n}}));
      }
    }
    return BoundProgram(std::move(prog), static_cast<std::size_t>(std::min(desc_.rows_bound(), kRowTable) + 1));
  }

  // The Kernel of `rows` rows of a bound program: remembered per row count (the engine's
  // own cache behind it; with any M, the rows' M bucket and its run-time-rows kernel).
  Result<const Kernel*> kernel_for(const BoundProgram& b, std::int64_t rows) const {
    const bool tabled = rows < static_cast<std::int64_t>(b.by_rows.size());
    if (tabled) {
      if (const Kernel* k = b.by_rows[static_cast<std::size_t>(rows)].load(std::memory_order_acquire)) return k;
    }
    // Program is thread-safe; the const_cast reaches its kernel cache, which is what Program::kernel fills.
    TERNJIT_TRY(const std::shared_ptr<const Kernel> held,
                const_cast<Program&>(b.program).kernel(kFunction, input_specs(desc_, rows)));
    const Kernel* k = held.get();  // b.program holds it as long as `b` lives
    if (tabled) b.by_rows[static_cast<std::size_t>(rows)].store(k, std::memory_order_release);
    return k;
  }

  // The call's pointers against the descriptor: each it asks for present, each other null.
  // A bound weight's call (`bound`) passes no weight, scale or bias.
  Result<void> check(const TMatMulArgs& a, bool bound) const {
    if (desc_.any_m() ? (a.m < 1 || a.m > desc_.m_max) : a.m != desc_.m)
      return invalid("args.m is " + std::to_string(a.m) + ", the kernel takes " +
                     (desc_.any_m() ? "1 .. " + std::to_string(desc_.m_max) : std::to_string(desc_.m)));
    auto need = [](const void* p, bool wanted, const char* name, const char* why) -> Result<void> {
      if (wanted && p == nullptr) return invalid(std::string("args.") + name + " is null (" + why + ")");
      if (!wanted && p != nullptr)
        return invalid(std::string("args.") + name + " is set but the descriptor has no " + name);
      return success();
    };
    auto none = [](const void* p, const char* name) -> Result<void> {
      if (p != nullptr) return invalid(std::string("args.") + name + " is set but the weight is bound (pass NULL)");
      return success();
    };
    TERNJIT_TRY_VOID(need(a.x, true, "x", "the activation"));
    TERNJIT_TRY_VOID(need(a.y, true, "y", "the output"));
    TERNJIT_TRY_VOID(need(a.x_scale, desc_.x_i8(), "x_scale", "int8 x needs its row scales"));
    TERNJIT_TRY_VOID(need(a.residual, desc_.residual(), "residual", "TERNJIT_TMATMUL_RESIDUAL"));
    if (bound) {
      TERNJIT_TRY_VOID(none(a.w, "w"));
      TERNJIT_TRY_VOID(none(a.w_scale, "w_scale"));
      TERNJIT_TRY_VOID(none(a.bias, "bias"));
      return success();
    }
    TERNJIT_TRY_VOID(need(a.w, true, "w", "the weight"));
    TERNJIT_TRY_VOID(need(a.w_scale, desc_.scale != TERNJIT_TMATMUL_SCALE_NONE, "w_scale", "the descriptor's scale"));
    return need(a.bias, desc_.bias(), "bias", "TERNJIT_TMATMUL_BIAS");
  }

  // Runs a checked call on a bound program.
  std::int32_t run(const BoundProgram& b, const TMatMulArgs& a) const {
    auto kernel = kernel_for(b, a.m);
    if (!kernel.ok()) return jit::kernel_failed(kernel.error());
    std::array<void*, 4> buffers{};
    std::size_t i = 0;
    buffers[i++] = const_cast<void*>(a.x);  // the kernel convention is void* const*; inputs are only read
    if (desc_.x_i8()) buffers[i++] = const_cast<float*>(a.x_scale);
    if (desc_.residual()) buffers[i++] = const_cast<float*>(a.residual);
    buffers[i] = a.y;
    return (*kernel)->entry()((*kernel)->state(), buffers.data());
  }

  // The number of w_scale values the descriptor asks for (0: none).
  [[nodiscard]] std::size_t scale_count() const {
    if (desc_.scale == TERNJIT_TMATMUL_SCALE_NONE) return 0;
    const std::int64_t rows = desc_.scale == TERNJIT_TMATMUL_SCALE_GROUP ? scale_rows(desc_) : 1;
    return static_cast<std::size_t>(rows * desc_.n);
  }

 private:
  std::int32_t call(const TMatMulArgs& a) const {
    if (auto r = check(a, false); !r.ok()) return jit::kernel_failed(r.error());
    auto bound = binding(BoundValues{a.w, a.w_scale, a.bias});
    if (!bound.ok()) return jit::kernel_failed(bound.error());
    return run((*bound)->bound, a);
  }

  // A binding whose bytes equal those at `w` (at any address: a caller may pass the same
  // weight from another buffer), or null. A compare with another weight's copy stops at
  // its first differing byte. Called under mu_.
  std::shared_ptr<const Binding> find(const BoundValues& v) const {
    for (const auto& b : bindings_)
      if (b->holds(v)) return b;
    return nullptr;
  }

  // The binding of the call's values: one that holds them, else a new one.
  Result<std::shared_ptr<const Binding>> binding(const BoundValues& v) const {
    {
      std::shared_lock lock(mu_);
      if (auto b = find(v)) return b;
    }
    std::unique_lock lock(mu_);
    if (auto b = find(v)) return b;
    TERNJIT_TRY(BoundProgram bound, bind(v));
    auto made = std::make_shared<Binding>(v, weight_bytes_, scale_count(),
                                          desc_.bias() ? static_cast<std::size_t>(desc_.n) : 0, std::move(bound));
    // A changed weight at the same address replaces its old binding; else the oldest goes.
    std::erase_if(bindings_, [&](const std::shared_ptr<Binding>& b) { return b->ptr == v.w; });
    if (bindings_.size() >= kMaxBindings) bindings_.erase(bindings_.begin());
    bindings_.push_back(made);
    return std::shared_ptr<const Binding>(made);
  }

  Engine& engine_;
  const Desc desc_;
  const Module module_;
  // For a GGUF weight without a scale of the caller's: the same layer with a ternary weight
  // and a column scale (bind's column case).
  const std::optional<Module> column_module_;
  const std::size_t weight_bytes_;
  mutable std::shared_mutex mu_;                              // guards bindings_
  mutable std::vector<std::shared_ptr<Binding>> bindings_;  // oldest first
};

}  // namespace

struct TMatMulDispatcher::Impl {
  explicit Impl(Engine& e) : engine(&e) {}
  Engine* engine;
  std::mutex engines_mu;
  std::map<std::int32_t, std::unique_ptr<Engine>> engines;  // by thread count, other than the engine's
  std::shared_mutex mu;                                      // guards kernels
  // Declared after `engines`: destroyed first (their programs belong to those engines).
  std::unordered_map<std::array<std::int64_t, 11>, std::unique_ptr<DispatchKernel>, KeyHash> kernels;

  Result<Engine*> engine_for(std::int32_t threads) {
    if (threads == 0 || threads == engine->options().threads) return engine;
    std::lock_guard lock(engines_mu);
    auto it = engines.find(threads);
    if (it != engines.end()) return it->second.get();
    EngineOptions o = engine->options();
    o.threads = threads;
    TERNJIT_TRY(Engine e, Engine::create(o));
    return engines.emplace(threads, std::make_unique<Engine>(std::move(e))).first->second.get();
  }
};

// A bound weight: its kernel's descriptor and module (the dispatcher's) and its program.
struct TMatMulBound::Impl {
  const DispatchKernel* kernel;
  BoundProgram bound;

  static std::int32_t entry(const void* state, const TMatMulArgs* args) noexcept {
    return entry_guard(args, [&](const TMatMulArgs& a) {
      const auto* self = static_cast<const Impl*>(state);
      if (auto r = self->kernel->check(a, true); !r.ok()) return jit::kernel_failed(r.error());
      return self->kernel->run(self->bound, a);
    });
  }
};

TMatMulBound::TMatMulBound(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TMatMulBound::~TMatMulBound() = default;
TMatMulBound::TMatMulBound(TMatMulBound&&) noexcept = default;
TMatMulBound& TMatMulBound::operator=(TMatMulBound&&) noexcept = default;

TMatMulKernel TMatMulBound::kernel() const { return TMatMulKernel{&Impl::entry, impl_.get()}; }

std::size_t TMatMulBound::bytes() const { return impl_->bound.program.resident_bytes(); }

TMatMulDesc TMatMulDispatcher::desc(std::int64_t m, std::int64_t k, std::int64_t n) {
  TMatMulDesc d{};
  d.struct_size = sizeof(TMatMulDesc);
  d.m = m;
  d.k = k;
  d.n = n;
  d.weight = TERNJIT_TMATMUL_W_TERN2;
  d.x = TERNJIT_TMATMUL_X_F32;
  d.scale = TERNJIT_TMATMUL_SCALE_NONE;
  d.act = TERNJIT_TMATMUL_ACT_NONE;
  return d;
}

TMatMulDispatcher::TMatMulDispatcher(Engine& engine) : impl_(std::make_unique<Impl>(engine)) {}
TMatMulDispatcher::~TMatMulDispatcher() = default;
TMatMulDispatcher::TMatMulDispatcher(TMatMulDispatcher&&) noexcept = default;
TMatMulDispatcher& TMatMulDispatcher::operator=(TMatMulDispatcher&&) noexcept = default;

Result<TMatMulKernel> TMatMulDispatcher::dispatch(const TMatMulDesc& desc) try {
  TERNJIT_TRY(Desc d, read_desc(desc));
  const auto key = d.key();
  {
    // The hit: one shared lock and a hash lookup of the descriptor's fields.
    std::shared_lock lock(impl_->mu);
    auto it = impl_->kernels.find(key);
    if (it != impl_->kernels.end()) return TMatMulKernel{&DispatchKernel::entry, it->second.get()};
  }
  TERNJIT_TRY(Engine * engine, impl_->engine_for(d.threads));
  TERNJIT_TRY(Module module, Module::from_text(layer_ir(d), "<tmatmul dispatch>"));
  TERNJIT_TRY_VOID(probe(*engine, module, d));
  std::optional<Module> column_module;
  if (is_gguf(d.weight_format()) && d.scale == TERNJIT_TMATMUL_SCALE_NONE) {
    Desc column = d;
    column.weight = TERNJIT_TMATMUL_W_TERN2;
    column.scale = TERNJIT_TMATMUL_SCALE_COLUMN;
    TERNJIT_TRY(Module m, Module::from_text(layer_ir(column), "<tmatmul dispatch>"));
    column_module = std::move(m);
  }
  std::unique_lock lock(impl_->mu);
  auto [it, added] = impl_->kernels.try_emplace(key);
  if (added) it->second = std::make_unique<DispatchKernel>(*engine, d, std::move(module), std::move(column_module));
  return TMatMulKernel{&DispatchKernel::entry, it->second.get()};
} catch (const std::bad_alloc&) {
  // No exception crosses the public API (STYLE.md section 5).
  return make_error(ErrorCode::Internal, "tmatmul dispatch: out of memory");
}

Result<TMatMulBound> TMatMulDispatcher::bind(const TMatMulDesc& desc, const void* w, std::size_t w_bytes,
                                              const float* w_scale, const float* bias) try {
  TERNJIT_TRY(TMatMulKernel k, dispatch(desc));
  const auto* kernel = static_cast<const DispatchKernel*>(k.state);
  const Desc& d = kernel->desc();
  if (w == nullptr) return invalid("bind: w is null");
  if (w_bytes != kernel->weight_size())
    return invalid("bind: w_bytes is " + std::to_string(w_bytes) + ", the descriptor's weight format needs " +
                   std::to_string(kernel->weight_size()) + " for K = " + std::to_string(d.k) +
                   ", N = " + std::to_string(d.n));
  if ((w_scale != nullptr) != (d.scale != TERNJIT_TMATMUL_SCALE_NONE))
    return invalid(w_scale == nullptr ? "bind: w_scale is null (the descriptor's scale)"
                                      : "bind: w_scale is set but the descriptor has no scale");
  if ((bias != nullptr) != d.bias())
    return invalid(bias == nullptr ? "bind: bias is null (TERNJIT_TMATMUL_BIAS)"
                                   : "bind: bias is set but the descriptor has no TERNJIT_TMATMUL_BIAS");
  TERNJIT_TRY(BoundProgram bound, kernel->bind(BoundValues{w, w_scale, bias}));
  // The kernel of the most rows now: its panels are packed here, not at the first call.
  TERNJIT_TRY_VOID(kernel->kernel_for(bound, d.rows_bound()));
  return TMatMulBound(std::make_unique<TMatMulBound::Impl>(TMatMulBound::Impl{kernel, std::move(bound)}));
} catch (const std::bad_alloc&) {
  return make_error(ErrorCode::Internal, "tmatmul dispatch: out of memory");
}

}  // namespace ternjit
