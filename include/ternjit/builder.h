// SPDX-License-Identifier: Apache-2.0
// builder.h - build ternjit IR from C++ with no text: the same IR the .tri front end makes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <source_location>
#include <string>
#include <string_view>
#include <vector>

#include "ternjit/result.h"
#include "ternjit/types.h"

namespace ternjit {

namespace detail {
struct ModuleImpl;
struct BuilderImpl;
}  // namespace detail

/// An opaque SSA value handle, valid only with the FunctionBuilder that made it.
struct Value {
  std::uint32_t id = UINT32_MAX;
  [[nodiscard]] bool valid() const { return id != UINT32_MAX; }
};

/// A finished, verified module. Move-only; cheap to move.
class Module {
 public:
  Module(Module&&) noexcept;
  Module& operator=(Module&&) noexcept;
  ~Module();

  /// The canonical IR text of the module (deterministic).
  [[nodiscard]] std::string to_text() const;
  /// Parses and verifies IR text; errors are located `file:line:col` diagnostics.
  static Result<Module> from_text(std::string_view text, std::string_view file_name = "<text>");
  /// Parses, type-checks and lowers `.tri` DSL source.
  static Result<Module> from_tri(std::string_view source, std::string_view file_name = "<tri>");

  /// Internal: the implementation (an ir::Module). Not part of the stable API.
  [[nodiscard]] detail::ModuleImpl& impl() const { return *impl_; }
  explicit Module(std::unique_ptr<detail::ModuleImpl> impl);

 private:
  std::unique_ptr<detail::ModuleImpl> impl_;
};

class ModuleBuilder;

/// How FunctionBuilder::rope pairs the elements it rotates (ir/README.md `rope`): Norm
/// pairs (2i, 2i + 1) (llama.cpp ROPE_TYPE_NORM: llama); Neox pairs (i, i + D/2) (bitnet).
enum class RopeMode : std::uint8_t { Norm, Neox };

/// Builds one function. Obtained from ModuleBuilder::function(); valid while the
/// ModuleBuilder lives. Every method records the caller's source location: the first
/// misuse (shape mismatch, unknown parameter...) is kept and reported by
/// ModuleBuilder::finish() as `file.cpp:line:col: error: ...`; later calls that use
/// an invalid Value are ignored.
class FunctionBuilder {
 public:
  using Loc = std::source_location;

  /// Adds an argument; the order of calls is the argument order.
  Value arg(const std::string& name, ElemKind kind, const Shape& shape, Loc loc = Loc::current());
  /// Reads module parameter `name` (declared with ModuleBuilder::param).
  Value param(const std::string& name, Loc loc = Loc::current());
  /// A scalar constant of `kind` (rounded to the kind).
  Value constant(double value, ElemKind kind = ElemKind::F32, Loc loc = Loc::current());
  /// A dense constant; `values.size()` must equal the product of `shape`.
  Value constant(const std::vector<double>& values, ElemKind kind, const Shape& shape,
                 Loc loc = Loc::current());

  /// numpy.matmul (int x int accumulates in i32).
  Value matmul(Value a, Value b, Loc loc = Loc::current());
  /// Elementwise with NumPy broadcasting.
  Value add(Value a, Value b, Loc loc = Loc::current());
  Value sub(Value a, Value b, Loc loc = Loc::current());
  Value mul(Value a, Value b, Loc loc = Loc::current());
  Value div(Value a, Value b, Loc loc = Loc::current());
  Value maximum(Value a, Value b, Loc loc = Loc::current());
  Value minimum(Value a, Value b, Loc loc = Loc::current());
  /// Elementwise unary.
  Value neg(Value x, Loc loc = Loc::current());
  Value abs(Value x, Loc loc = Loc::current());
  Value relu(Value x, Loc loc = Loc::current());
  Value sigmoid(Value x, Loc loc = Loc::current());
  Value tanh(Value x, Loc loc = Loc::current());
  Value gelu(Value x, Loc loc = Loc::current());
  Value silu(Value x, Loc loc = Loc::current());
  Value exp(Value x, Loc loc = Loc::current());
  Value log(Value x, Loc loc = Loc::current());
  Value sqrt(Value x, Loc loc = Loc::current());
  /// Element-kind conversion (see ir/README.md for rounding).
  Value cast(Value x, ElemKind to, Loc loc = Loc::current());
  /// Reverses the dims (rank 2: swaps rows and columns).
  Value transpose(Value x, Loc loc = Loc::current());
  /// Reductions over `axis` (negative counts from the end).
  Value sum(Value x, int axis, bool keepdims = false, Loc loc = Loc::current());
  Value mean(Value x, int axis, bool keepdims = false, Loc loc = Loc::current());
  Value max(Value x, int axis, bool keepdims = false, Loc loc = Loc::current());
  /// Softmax along `axis` (negative counts from the end).
  Value softmax(Value x, int axis, Loc loc = Loc::current());
  /// RMS normalization over the last axis, scaled by gamma.
  Value rmsnorm(Value x, Value gamma, double eps, Loc loc = Loc::current());
  /// Per-row absmax int8 fake quantization (float in, float out).
  Value quantize_int8(Value x, Loc loc = Loc::current());
  /// sign(x) where |x| > threshold, else 0.
  Value ternarize(Value x, double threshold, Loc loc = Loc::current());
  /// BitNet b1.58 absmean ternarization (per tensor, float in, float out).
  Value ternarize_absmean(Value x, Loc loc = Loc::current());
  /// q * s for integer q and float scales s (broadcast).
  Value dequantize(Value q, Value s, Loc loc = Loc::current());
  /// Rows of `table` [V, D] (f32/f16/bf16) picked by i32 `ids` of any shape: ids.shape ++ [D].
  /// An id outside [0, V) is an error when the function runs.
  Value gather(Value table, Value ids, Loc loc = Loc::current());
  /// `size` elements from `start` along `axis` (negative counts from the end); static.
  Value slice(Value x, int axis, std::int64_t start, std::int64_t size, Loc loc = Loc::current());
  /// Concatenation along `axis` (negative counts from the end); other dims equal.
  Value concat(const std::vector<Value>& xs, int axis, Loc loc = Loc::current());
  /// Layer normalization over the last axis: (x - mean) / sqrt(var + eps) * gamma + beta.
  Value layernorm(Value x, Value gamma, Value beta, double eps, Loc loc = Loc::current());
  /// Rotary position embedding of x f32[M, H, D] at positions pos + m (pos an i32 scalar).
  Value rope(Value x, Value pos, double theta, RopeMode mode = RopeMode::Norm, Loc loc = Loc::current());
  /// Softmax over the last axis of x [..., M, T] keeping entries t <= pos + m (others 0).
  Value causal_softmax(Value x, Value pos, Loc loc = Loc::current());
  /// The cache [L, C, H, D] with rows [M, H, D] written at layer `layer`, rows pos + m.
  Value kv_write(Value cache, Value rows, Value pos, std::int64_t layer, Loc loc = Loc::current());
  /// Causal grouped-query attention of q f32[M, HQ, D] over cache rows [0, pos + m] of
  /// layer `layer` of k_cache and v_cache [L, C, HKV, D]; scores scaled by `scale`.
  Value attention(Value q, Value k_cache, Value v_cache, Value pos, std::int64_t layer, double scale,
                  Loc loc = Loc::current());
  /// Calls another function of the module (by full name, e.g. "BitLinear.forward").
  std::vector<Value> call(const std::string& function, const std::vector<Value>& args,
                          Loc loc = Loc::current());
  /// Returns values; sets the function's result types. Call exactly once, last.
  void ret(const std::vector<Value>& values, Loc loc = Loc::current());

 private:
  friend class ModuleBuilder;
  FunctionBuilder(detail::BuilderImpl* b, std::uint32_t f) : b_(b), f_(f) {}
  detail::BuilderImpl* b_;
  std::uint32_t f_;
};

/// Builds a module: parameter declarations and functions, then finish().
class ModuleBuilder {
 public:
  ModuleBuilder();
  ~ModuleBuilder();
  ModuleBuilder(const ModuleBuilder&) = delete;
  ModuleBuilder& operator=(const ModuleBuilder&) = delete;

  /// Declares a module parameter (weights); `shape` may use symbols.
  void param(const std::string& name, ElemKind kind, const Shape& shape,
             std::source_location loc = std::source_location::current());
  /// Starts a new function named `name`.
  FunctionBuilder function(const std::string& name,
                           std::source_location loc = std::source_location::current());
  /// Verifies and returns the module, or the first recorded misuse (located at the
  /// caller's C++ line) / all verifier diagnostics. The builder is empty afterwards.
  Result<Module> finish(std::source_location loc = std::source_location::current());

 private:
  std::unique_ptr<detail::BuilderImpl> impl_;
};

/// Options of grad().
struct GradOptions {
  /// What to differentiate with respect to, in the order of the gradients: "x" (or "%x")
  /// names an argument, "@Layer.w" a parameter. Empty: every named float argument, then
  /// every float or ternary parameter the function reads.
  std::vector<std::string> wrt;
  /// Straight-through estimators pass the gradient only where the quantizer's input lies
  /// in its range (|x| <= 1 for ternarize, |x| <= mean|x| for ternarize_absmean).
  bool ste_clip = false;
  /// Lower precision, opt in (it changes the gradients): the input gradient of a ternary
  /// matmul (by ternarize_absmean(p), by a TernaryTensor parameter, or a tmatmul)
  /// quantizes the incoming gradient to int8 per row (absmax, as the forward quantizes
  /// activations) and runs on the fast int8 ternary kernel; error per element at most
  /// sum_n |T[k, n]| * max_n |g[m, n]| / 254 (g: times a per-channel weight scale).
  /// Weight gradients stay exact f32.
  bool int8_dx = false;
  /// Lower precision, opt in (it changes the gradients): the weight gradient of a ternary
  /// matmul (the latent weights' of ternarize_absmean(p) or of a TernaryTensor parameter)
  /// runs as an exact int8 x int8 -> int32 matmul, the incoming gradient (times the
  /// activation scale) quantized per output column over the rows (absmax / 127), the int8
  /// activations as they are; dW = f32(sum) * scale[n]. Error per element at most
  /// sum_m |x[m, k]| * max_m |g[m, n]| / 254 (docs/training.md). Rank-2 activations only
  /// (others stay f32); at most 131071 rows.
  bool int8_dw = false;
};

/// The functions grad() added (docs/training.md).
struct GradFunctions {
  std::string forward;           ///< "<function>.fwd": (args...) -> (results..., saved...)
  std::string backward;          ///< "<function>.bwd": (args..., d_results..., saved...) -> (grads...)
  std::vector<std::string> wrt;  ///< what each gradient is with respect to, in order
  std::size_t num_saved = 0;     ///< saved tensors: the last results of forward, last arguments of backward
};

/// Adds the reverse-mode gradient of `function` ("Layer.forward") to `module`: a forward
/// that also returns the intermediates the backward reuses, and the backward, which
/// takes the forward's arguments, one gradient per float result (same type) and the
/// saved tensors, and returns one gradient per wrt entry (a ternary parameter's is f32:
/// the latent weights'). Quantizers are straight-through. Calls are inlined into the
/// module's functions first. Errors: NotFound (no such function); InvalidInput (a wrt
/// name unknown, unread or not differentiable, control flow, an op without a gradient
/// rule, the functions exist already). On error the module is unchanged.
Result<GradFunctions> grad(Module& module, std::string_view function, const GradOptions& options = {});

}  // namespace ternjit
