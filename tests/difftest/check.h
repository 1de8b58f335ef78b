// SPDX-License-Identifier: Apache-2.0
// check.h - the differential check: interpret a module before and after a pass pipeline.
//
// For every pipeline (by default the O0..O3 pipelines of passes::default_pipeline) the
// module is copied, optimized with passes::run_pipeline (verify_each on), and @main of
// the original and of the optimized module is interpreted on the same random inputs.
// Every result must agree: integer kinds exactly, float kinds within a tolerance (see
// Tolerance). An interpreter error on the original module is a generator bug and is
// reported apart from mismatches.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "ir/ir.h"
#include "passes/pipeline.h"
#include "tests/difftest/gen.h"

namespace ternjit::difftest {

/// A named pass list the original module is compared against.
struct Level {
  std::string name;                             ///< "O2", or a pass list for custom runs
  std::vector<const passes::PassInfo*> passes;  ///< run in order by passes::run_pipeline
};

/// The O0..O3 pipelines of passes::default_pipeline.
std::vector<Level> default_levels();

/// Float tolerance: an element agrees when |actual - expected| <= atol * max(1, bound) +
/// rtol * |expected| (ir::compare), where `bound` is the generator's magnitude bound of
/// that result (output_bounds). Integer kinds are always compared exactly.
///
/// Why 1e-5: a correct pass may change where f32 rounding happens (fused epilogues,
/// int32 accumulation of int8 x ternary products, constants combined at compile time),
/// which moves each value by a few f32 ulps (2^-24 ~ 6e-8 relative) per op, over chains
/// of at most ~40 ops; cancellation turns such errors absolute, hence the atol scaled by
/// the magnitude bound. 1e-5 leaves a margin of ~100 ulps while a real miscompile (a
/// wrong op, operand, constant or axis) is off by far more. Quantizers never see values
/// whose rounding a pass may move (GenOptions::strict_quant), so no quantization step
/// needs to be tolerated.
struct Tolerance {
  double rtol = 1e-5;
  double atol = 1e-5;
};

/// One disagreement (or error) of an optimized module with the original.
struct Failure {
  std::string level;          ///< Level::name
  std::uint64_t input_seed = 0;
  std::string message;        ///< "result 1: element [0, 2]: expected 0.5, got 0.625", or an error
  std::string optimized_ir;   ///< the optimized module's text
};

/// What check_module found.
struct CheckReport {
  int runs = 0;                    ///< (level, input seed) pairs compared
  std::vector<Failure> failures;   ///< at most one per (level, input seed)
  std::string original_error;      ///< non-empty when the original module failed to run
  /// Target runs only: the targets that refused the program as Unsupported, "not this
  /// target's program" (Failure::level names the target, `message` its reason), one per
  /// target; neither runs nor failures.
  std::vector<Failure> unsupported;
};

/// The inputs make_inputs(m, seed) of each seed and the interpreter's results of @main
/// on them, or `error` (the original program does not run: "input seed 2: ...").
struct Reference {
  std::vector<Inputs> inputs;                         ///< one per seed
  std::vector<std::vector<ir::HostTensor>> expected;  ///< one per seed
  std::string error;                                  ///< non-empty when a run failed
};
Reference reference_results(const ir::Module& m, std::span<const std::uint64_t> input_seeds);

/// Compares `m` with its optimization by each level, on inputs make_inputs(m, seed) for
/// every seed. A verifier failure after a pass aborts (passes::run_pipeline).
CheckReport check_module(const ir::Module& m, std::span<const Level> levels,
                         std::span<const std::uint64_t> input_seeds, const Tolerance& tol = {});

/// Shrinks a module on which `level` fails: drops results and replaces instructions by
/// their operands or by new arguments while the level still fails on some input seed;
/// then removes what became unused. Returns the smallest failing module found (or `m`).
ir::Module minimize(const ir::Module& m, const Level& level, std::span<const std::uint64_t> input_seeds,
                    const Tolerance& tol = {});

/// The shrinking of minimize() under any test: `fails(candidate)` says whether a
/// candidate module still fails. Precondition: fails(m).
ir::Module minimize_with(const ir::Module& m, const std::function<bool(const ir::Module&)>& fails);

}  // namespace ternjit::difftest
