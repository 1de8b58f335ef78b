// SPDX-License-Identifier: Apache-2.0
// passes.h - every optimization pass, one line each; the registry looks them up by name.
//
// A pass transforms verified IR into verified IR, never prints, never reads the
// environment, keeps no static state and is safe to run twice. Per-function passes
// take `ir::Function&` (and the module when they need parameter declarations or
// callees); module passes take `ir::Module&`. Only passes that can fail on user input
// return Result<void>.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "ir/ir.h"

namespace ternjit::passes {

// ---------------------------------------------------------------- the passes
// (Each is defined in passes/<name>.cpp; the list grows as passes land.)

/// Evaluates instructions whose operands are all constants (`add 2, 3` -> `const 5`).
void fold_constants(ir::Function& f);
/// Removes pure instructions whose results are unused, and unreachable blocks.
void eliminate_dead_code(ir::Function& f);
/// Shares identical pure instructions (same op, operands, attributes, types).
void eliminate_common_subexpressions(ir::Function& f);
/// Local algebraic rewrites from simplify_rules.cpp (x*1, x+0, transpose(transpose(x)), ...).
void simplify(ir::Function& f);
/// Replaces every `call` by a copy of the callee's body (symbols unified per call site);
/// an error (InvalidInput, at the call) when a function would grow past 65,536 instructions.
Result<void> inline_calls(ir::Module& m);
/// Quantize/ternarize chains and matmuls with a ternary weight -> `tmatmul` kernels (int8 path, scales).
void fuse_quantization(ir::Function& f);
/// Folds the per-row/per-channel scale, bias, residual and activation after a `tmatmul` into it.
void fuse_epilogue(ir::Function& f);
/// Merges chains (trees) of single-use elementwise ops of one kind into one `ewise` loop.
void fuse_elementwise(ir::Function& f);

/// What `autodiff` differentiates: a function of the module and the values to take the
/// gradient with respect to.
struct AutodiffOptions {
  std::string function;          ///< the forward function's name, without '@'
  /// "%name" (an argument) or "@name" (a module parameter), in the order of the
  /// backward's results; empty: every named float argument, then every float or t2
  /// parameter the function reads, in order of first read.
  std::vector<std::string> wrt;
  /// The default STE clipping, for quantizers without a `ste_clip` attribute (an
  /// attribute on the op wins): true, straight-through estimators pass the gradient
  /// only where the quantizer's input is in its range (|x| <= 1 for ternarize,
  /// |x| <= mean|x| for ternarize_absmean and tquantize); false: everywhere.
  bool ste_clip = false;
  /// Lower precision, opt in (changes results): the activation gradient of a ternary
  /// matmul (a tmatmul, a matmul by ternarize_absmean(p) or by a plain t2 matrix),
  /// dx = g @ T^T, quantizes g (already times the weight scale) to int8 per row
  /// (absmax / 127, the forward's `quantize`) so that it runs on the int8 ternary kernel;
  /// each dx element then differs from the exact one by at most
  /// sum_n |T[k, n]| * s_m / 2 (s_m = max_n |g[m, n]| / 127, the row's int8 step).
  /// The weight gradient stays exact f32. false: dx in f32 (the default).
  bool int8_dx = false;
  /// Lower precision, opt in (changes results): the weight gradient of a ternary matmul,
  /// dW[k, n] = sum_m x[m, k] * g[m, n] (g: the incoming gradient times the activation
  /// scale x_s[m] when x is the forward's int8 activation), runs as an exact int8 x int8 ->
  /// i32 matmul: g^T quantized per row (per output column n, absmax over m, scale t[n]),
  /// an int8 x taken as is (a float x: x^T quantized per row k, scale u[k]), then
  /// dW = f32(sum) [* u[k]] * t[n]. Rank-2 x only (others stay f32); M <= 131071 (so
  /// M * 128 * 128 < 2^31: the int32 sum is exact), a static M above it is refused and a
  /// symbolic M gets that bound as a constraint. ir/README.md "Gradients" has the
  /// error bound. false: dW in f32 (the default).
  bool int8_dw = false;
};
/// The functions `autodiff` added.
struct AutodiffResult {
  std::string forward;            ///< "<f>.fwd": (args) -> (results..., saved...)
  std::string backward;           ///< "<f>.bwd": (args, d_results, saved) -> (grads...)
  std::vector<std::string> wrt;   ///< the wrt list used (options.wrt, or the default)
  std::size_t num_saved = 0;      ///< how many values the forward saves for the backward
};
/// Adds `@<f>.fwd` (f's results plus the saved intermediates) and `@<f>.bwd` (the
/// reverse-mode gradients, one result per wrt entry; f32 for a t2 parameter) to `m`.
/// Errors: NotFound (no such function); InvalidInput (a wrt name that is unknown, not
/// read, or of a kind without gradient; control flow; a call; an op whose gradient is
/// not supported; `@<f>.fwd`/`.bwd` exist). On error `m` is unchanged.
Result<AutodiffResult> autodiff(ir::Module& m, const AutodiffOptions& options);
/// The registered form: autodiff with the default wrt list, for every function with a
/// float result that has no `.bwd` yet (functions it cannot differentiate are left alone).
Result<void> autodiff(ir::Module& m);

// ---------------------------------------------------------------- registry

/// What a pass operates on.
using FunctionPass = void (*)(ir::Function&);
using ModulePass = void (*)(ir::Module&);
/// A module pass that can fail on user input (e.g. a call tree too large to inline).
using FallibleModulePass = Result<void> (*)(ir::Module&);
using PassFn = std::variant<FunctionPass, ModulePass, FallibleModulePass>;

/// One registered pass: kebab-case name (the file stem), entry point, one-line summary.
struct PassInfo {
  std::string_view name;
  PassFn fn;
  std::string_view summary;
};

/// Every registered pass, in registry.cpp order.
std::span<const PassInfo> all_passes();
/// Looks a pass up by name; nullptr if unknown.
const PassInfo* find_pass(std::string_view name);

}  // namespace ternjit::passes
