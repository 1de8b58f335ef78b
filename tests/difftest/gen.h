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
};

/// The options of the differential test across targets (exact_quant on, control_flow off).
inline GenOptions target_gen_options() {
  GenOptions o;
  o.exact_quant = true;
  o.control_flow = false;
  return o;
}

/// Name of the function the checker runs.
inline constexpr std::string_view kMainFunction = "main";
/// Metadata key holding the comma-separated magnitude bounds of @main's results.
inline constexpr std::string_view kBoundsKey = "difftest.bounds";
/// Metadata key holding the program seed (decimal).
inline constexpr std::string_view kSeedKey = "difftest.seed";

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
/// i32 in [-1000, 1000], t2 in {-1, 0, 1}. Argument i uses a seed derived from `seed`
/// and i, a parameter one derived from `seed` and its name (so dropping parameters or
/// appending arguments keeps the other values). Precondition: `m` has a function @main;
/// its argument types and the parameter types are static.
Inputs make_inputs(const ir::Module& m, std::uint64_t seed);

/// The magnitude bounds stored under kBoundsKey, one per result of @main; missing or
/// unreadable entries are 1.
std::vector<double> output_bounds(const ir::Module& m);

}  // namespace ternjit::difftest
