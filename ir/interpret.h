// SPDX-License-Identifier: Apache-2.0
// interpret.h - the reference interpreter: executes IR on HostTensors; the oracle of every target.
//
// Written for obvious correctness, not speed. The semantics below are the definition
// every code generator is tested against (ir/README.md describes the ops in prose).
//
// Numerics, per op family (all results are finally rounded with round_to_kind to the
// kind of the instruction's declared result type, which infer_types/promote chose):
//   add sub mul div max min  NumPy broadcasting. Integer results: exact int64 arithmetic,
//            wrapped (two's complement) to the result width (i8, u8, i32); div truncates
//            toward zero and a zero divisor is an error naming the element. Float
//            results: each operand rounded to the result kind (this only changes integer
//            operands of an f16/bf16 result), the op computed in f32, the result rounded
//            to the result kind; float division by zero follows IEEE (inf/NaN). max/min
//            propagate NaN; max(-0, +0) is +0 and min(-0, +0) is -0.
//   neg abs relu  integers: int64 then wrapped (neg/abs of INT_MIN is INT_MIN); floats
//            exact. relu(x) = max(x, 0), NaN stays NaN.
//   sigmoid tanh gelu silu exp log sqrt rsqrt  computed in double from the element's
//            (exact) value, then rounded once to the kind. This is the most accurate
//            oracle we can cheaply have; targets computing in f32 compare with a
//            tolerance. gelu is the exact erf form 0.5*x*(1+erf(x/sqrt(2))), silu is
//            x*sigmoid(x), sigmoid is 1/(1+exp(-x)). Domain errors give NaN/inf (IEEE),
//            never a Result error.
//   cast     round_to_kind: float->int rounds half to even and saturates, NaN -> 0;
//            int->int saturates; ->t2 clamps to [-1, 1]; ->bool is x != 0 (NaN -> 0).
//   transpose reshape broadcast  data movement only (row-major; NumPy stretch).
//   matmul   numpy.matmul (1-D operands promoted and the added dim dropped, batch dims
//            broadcast). Integer x integer: exact products, sum modulo 2^64, wrapped to
//            i32. Otherwise: sum of double(a) * double(b) in double over k in ascending
//            order, rounded once.
//   reduce_sum reduce_mean reduce_max  integer sums are exact and wrapped to i32; float
//            sums and means accumulate in double in index order and round once; a mean
//            over an empty axis is NaN; reduce_max over an empty axis is an error;
//            reduce_max propagates NaN.
//   softmax  m = max of the slice, e_i = exp(x_i - m), y_i = e_i / sum(e), in double.
//   rmsnorm  over the last axis: ms = mean(x^2), y = x / sqrt(ms + eps) * gamma, in double.
//   quantize_int8 ternarize ternarize_absmean quantize tquantize  exactly quant.h
//            (fake_quantize_int8_rows per row of the last axis, ternarize_threshold with
//            the threshold converted to f32, per-tensor absmean), on the f32 values.
//   dequantize  float(q) * float(s) in f32 (q is not rounded to s's kind first),
//            broadcast, rounded to the result kind.
//   tmatmul  accumulate (i8 x: exact integer sum wrapped to i32; float x: as matmul),
//            round once to the result kind, then the epilogue operands present
//            (x_scale, w_scale: mul; bias, residual: add) and the activation, each by
//            the same code as the standalone op at the result kind.
//   ewise    each step by the same code as the standalone op, on whole tensors.
//   param    the parameter's StoredTensor decoded to a HostTensor (exact, every kind).
//   gather slice concat  data movement only (values copied exactly). An id outside
//            [0, V) is an error naming the id, its flat index and V.
//   layernorm  over the last axis, mean and variance in double, rounded once.
//   rope causal_softmax kv_write attention  read the i32 scalar `pos` at run time:
//            pos < 0, rows [pos, pos + M) past the cache capacity C, a layer past the
//            cache's L, HQ not a multiple of HKV and an odd rope D are errors naming the
//            op and the values. rope, causal_softmax and attention compute in double
//            (angles, cos/sin; exp and sums; dots, softmax and the weighted sum) and
//            round once; kv_write rounds each row value once to the cache's kind.
//            Masked entries (causal_softmax) and cache rows past pos + m (attention)
//            are never read. ir/README.md "Decoder ops" has the full text.
// "Rounded once" means one call of round_to_kind, which takes f16/bf16 through f32: a
// double result within half an f32 ulp of an f16/bf16 rounding midpoint may land one
// f16/bf16 ulp away from the directly rounded value (rare; targets compare f16/bf16
// with a tolerance anyway).
//
// Precondition: the module is verified (types consistent with infer_types). A computed
// result whose shape or kind disagrees with its instruction's type is an interpreter
// bug and aborts (TERNJIT_CHECK). Malformed IR that is cheap to detect (a value used
// before it is defined, a missing terminator, a bad branch arity) is an error instead.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ir/ir.h"
#include "ir/stored_tensor.h"
#include "ir/tensor.h"

namespace ternjit::ir {

/// Values of module parameters, by ParamDecl name ("LinearClassifier.weights"), kept in
/// their own element type (StoredTensor); `param` decodes one when it is evaluated.
struct ParamValues {
  std::map<std::string, StoredTensor> values;  ///< by parameter name

  /// Stores `t` under `name`, replacing any value. Precondition (aborts otherwise):
  /// validate(t) succeeds.
  void set(const std::string& name, const HostTensor& t);
};

/// Limits that keep the interpreter from running away on bad IR.
struct InterpretOptions {
  /// Most instructions executed in one interpret() call (all calls included); an
  /// infinite loop becomes an error instead of a hang. The default, 2^24 (~1.7e7), is
  /// a few seconds of a loop of scalar ops on a small machine (10^8 took 27 s on the
  /// loaded 2-core VM that measured it); a program without loops executes each of its
  /// instructions once.
  std::uint64_t max_steps = std::uint64_t{1} << 24;
  /// Deepest nesting of `call` (recursion guard, keeps the host stack safe).
  int max_call_depth = 64;
  /// Most elements in any one tensor the interpreter creates (about 2 GiB of doubles).
  std::int64_t max_elements = std::int64_t{1} << 28;
  /// Most work in one interpret() call (all calls included), counted before each
  /// instruction runs: the elements of its operands and results, plus M*N*K
  /// multiply-adds for matmul and tmatmul (the element count of the result times the
  /// contracted extent). Bounds a loop of large ops that max_steps alone would let run
  /// for hours. The default, 2^31 (~2.1e9), stops a runaway loop within seconds on a
  /// small machine (on the loaded 2-core VM that measured it, a loop over a 64x64
  /// matmul stops after ~7,800 iterations in ~2 s where 2^34 took 10-43 s); it still
  /// allows one [256, 2048] x [2048, 2048] matmul (~1.1e9). Larger reference runs
  /// raise it (the reference target's option max_work).
  std::uint64_t max_work = std::uint64_t{1} << 31;
  /// How errors name max_steps and max_work, so that they say what to raise: the fields
  /// by default; the reference target names its options (reference.max_work).
  std::string max_steps_name = "InterpretOptions::max_steps";
  std::string max_work_name = "InterpretOptions::max_work";
  /// A double-precision evaluation mode for checking gradients by finite differences
  /// (tests/unit/autodiff): values of kind f32 are held and computed in double and never
  /// rounded to f32 (f32 arguments may hold any double), so a central difference with a
  /// small step is not drowned by f32 rounding. Every rule above applies with "f32"
  /// read as "double" for an f32 result: binary ops compute in double; unary ops,
  /// matmul, reductions, softmax, rmsnorm, tmatmul's float accumulation and epilogue
  /// skip their final rounding. Unchanged: the other kinds (f16/bf16 results and casts
  /// still round), integer arithmetic, and the quantizers, which are defined on f32 and
  /// round their input to f32 first (their outputs are f32 values). Parameter values
  /// (ParamValues) are stored in their declared kind, so they stay f32 values. No
  /// compiled target has this mode: it is a property of the oracle, not of the IR (the
  /// IR has no f64 kind; docs/training.md says why this mode rather than one).
  bool f32_as_f64 = false;
};

/// Runs `f` (a function of `m`) on `args` with parameter values `params` and returns
/// the values of the `ret` that ends it, in order.
///
/// Binding: each argument's kind and rank must equal the declared argument type and
/// static dims must match; every symbolic dim is bound from the arguments and from the
/// values of the parameters the function reads (`param` instructions); a symbol bound
/// to two extents is an error naming the symbol, both extents and both sources
/// ("symbol 'N' is 4 from argument %x but 5 from argument %y"; unnamed arguments are
/// "argument 2", parameters "parameter @w"). Then the function's constraints are checked
/// for every bound symbol. `call` interprets the callee the same way, binding its
/// symbols from the call's operand tensors.
///
/// Errors (InvalidInput unless noted; located at the instruction when it has a
/// location): wrong argument count, kind, rank or extent; an invalid tensor (see
/// validate); a missing parameter value or one of the wrong kind or shape; a violated
/// constraint; a symbol no argument or parameter binds but a shape needs; integer
/// division by zero (naming the op and the element); reduce_max of an empty axis; the
/// decoder ops' range errors (above);
/// a call to an unknown function (NotFound); more than options.max_steps instructions or
/// options.max_work work ("execution exceeded the interpreter's work limit of ... element
/// operations ...: raise " + options.max_work_name), calls nested deeper than options.max_call_depth, or a tensor larger than
/// options.max_elements; malformed IR as listed above.
/// Deterministic: the same inputs give bit-identical outputs.
Result<std::vector<HostTensor>> interpret(const Module& m, const Function& f,
                                          std::span<const HostTensor> args, const ParamValues& params,
                                          const InterpretOptions& options = {});

/// interpret() on the function of `m` named `func_name`. Errors: NotFound when there is
/// no such function, then as interpret().
Result<std::vector<HostTensor>> interpret(const Module& m, std::string_view func_name,
                                          std::span<const HostTensor> args, const ParamValues& params,
                                          const InterpretOptions& options = {});

/// A module with one function, "step", whose arguments are the operands of `inst` (typed
/// as in `f`) and whose body is a copy of `inst` and a `ret` of its results: how a code
/// generator runs one op it has no kernel for through interpret().
Module single_inst_module(const Function& f, const InstData& inst);

}  // namespace ternjit::ir
