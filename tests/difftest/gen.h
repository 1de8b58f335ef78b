// SPDX-License-Identifier: Apache-2.0
// gen.h - random generator of valid IR programs for the differential test of the passes.
//
// generate_program(seed) builds, through ir::Builder, a module whose function @main has
// static shapes and reads a few module parameters; it sometimes holds a second function
// @helper that @main calls, and sometimes a diamond of blocks (cond_br, br, block
// arguments). The op mix is chosen to make every pass fire: splat constants (folding),
// duplicated instructions (CSE), unused values (DCE), x*1 / x+0 / double transposes
// (simplify), calls (inlining), and the BitLinear chain rmsnorm -> quantize_int8 ->
// matmul(t2) -> scale -> activation that the fusion passes rewrite.
//
// A share of the programs (GenOptions::decoder_share) also uses the decoder ops: gather,
// slice, concat, layernorm, rope, causal_softmax, kv_write and attention, the last two on
// KV caches [L, C, HKV, D] passed as arguments of @main, in the decoder's pattern (rope on
// q and k, kv_write of the new rows at pos, attention over the written caches, chains of
// writes to several layers) and standalone. Their i32 operands that must lie in a range
// (gather's ids, every op's pos) are named arguments of @main whose ranges are stored in
// the module metadata (kRangesKey); make_inputs draws their values inside them.
//
// Numerics are kept tame so that the reference interpreter never fails and never meets
// NaN or infinity: tensors have at most 512 elements, divisors are bounded away from 0,
// exp sees bounded values, log/sqrt/rsqrt see abs(x)+1, and magnitudes are tracked and
// renormalized with exact power-of-two scales. The tracked magnitude bound of every
// result of @main is stored in the module metadata (kBoundsKey) so the checker can scale
// its absolute tolerance.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "ir/interpret.h"
#include "ir/ir.h"
#include "ir/tensor.h"

namespace ternjit::difftest {

/// Knobs of the generator.
struct GenOptions {
  /// Number of generation steps (each one op, or a short idiom such as a BitLinear chain).
  int min_steps = 3;
  int max_steps = 20;
  /// Largest element count of any tensor the program creates.
  std::int64_t max_elements = 512;
  /// When true, rounding-sensitive ops (quantize_int8, quantize, ternarize*, tquantize,
  /// casts from float to an integer or narrower float kind) only take values computed
  /// from the inputs by at most one rounding float op. Passes may legitimately move the
  /// rounding of longer float chains by an ulp (fusion, reassociation), and an ulp can
  /// flip a quantizer's rounding boundary, which is no bug. Off: quantizers anywhere, to
  /// hunt for such flips by hand.
  bool strict_quant = true;
  /// With strict_quant: quantizers only read values computed without any rounding op
  /// (arguments, parameters, exact ops), for comparing targets with the interpreter: a
  /// target may round any float op differently by an ulp (f32 instead of double, another
  /// summation order), which can flip a quantizer's step (tests/difftest/targets.h).
  bool exact_quant = false;
  /// Whether functions may branch (diamonds of blocks). Off for the compiled targets,
  /// which take single-block functions only (the engine's pipeline keeps a cond_br).
  bool control_flow = true;
  /// The share of programs, in [0, 1], that use the decoder ops (gather, slice, concat,
  /// layernorm, rope, causal_softmax, kv_write, attention). Whether program `seed` does is
  /// decided by a hash of the seed apart from the generator's random stream, so a program
  /// that does not is the same module as with decoder_share = 0. Programs that do are
  /// refused by the targets without kernels for these ops (spirv, the SIMT targets).
  double decoder_share = 0.25;
};

/// The options of the differential test across targets (exact_quant on, control_flow off,
/// decoder_share 0.15: a decoder program takes the llvm target about twice as long to
/// compile, attention most, and difftest/targets runs 1,000 programs in the suite's budget).
inline GenOptions target_gen_options() {
  GenOptions o;
  o.exact_quant = true;
  o.control_flow = false;
  o.decoder_share = 0.15;
  return o;
}

/// Name of the function the checker runs.
inline constexpr std::string_view kMainFunction = "main";
/// Metadata key holding the comma-separated magnitude bounds of @main's results.
inline constexpr std::string_view kBoundsKey = "difftest.bounds";
/// Metadata key holding the program seed (decimal).
inline constexpr std::string_view kSeedKey = "difftest.seed";
/// Metadata key holding the value ranges of named i32 arguments of @main, as
/// comma-separated `name:lo:hi` items (`pos0:0:3,ids1:0:6`): gather's ids must lie in
/// [0, V) and the decoder ops' pos must keep pos + M <= C, so make_inputs draws those
/// arguments inside their range. Keyed by argument name, so removing other arguments
/// (minimize) keeps it valid. Absent when @main has no such argument.
inline constexpr std::string_view kRangesKey = "difftest.ranges";
/// Metadata key holding, for the KV cache arguments [L, C, H, D] of @main, the first row
/// no attention reads, as comma-separated `name:row` items (`cache0:4,cache1:4`):
/// attention reads rows [0, pos + m] only (ir/README.md), so make_inputs sets rows
/// [row, C) of every layer to NaN, which must reach no result but the caches kv_write
/// copies. Absent when @main has no cache argument.
inline constexpr std::string_view kUnreadKey = "difftest.unread";

/// Generates one program; the same seed and options always give the same module
/// (print_module-identical), on every platform. The result passes ir::verify_module;
/// a generator bug that breaks this aborts (TERNJIT_CHECK) with the partial IR.
ir::Module generate_program(std::uint64_t seed, const GenOptions& options = {});

/// Values for a module's @main arguments and parameter declarations.
struct Inputs {
  std::vector<ir::HostTensor> args;  ///< one per argument of @main
  ir::ParamValues params;            ///< one per parameter declaration
};

/// Random inputs for `m` from HostTensor::random: floats in [-1, 1), i8 in [-127, 127],
/// i32 in [-1000, 1000], t2 in {-1, 0, 1}; an integer argument named in kRangesKey in its
/// range [lo, hi] instead (each value lo + (r + 1000) mod (hi - lo + 1) of the random
/// i32 r); a float argument of rank 4 named in kUnreadKey has NaN in its unread rows.
/// Argument i uses a seed derived from `seed` and i, a parameter one derived from
/// `seed` and its name (so dropping parameters or appending arguments keeps the other
/// values). Precondition: `m` has a function @main; its argument types and the parameter
/// types are static.
Inputs make_inputs(const ir::Module& m, std::uint64_t seed);

/// The magnitude bounds stored under kBoundsKey, one per result of @main; missing or
/// unreadable entries are 1.
std::vector<double> output_bounds(const ir::Module& m);

}  // namespace ternjit::difftest
