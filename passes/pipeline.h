// SPDX-License-Identifier: Apache-2.0
// pipeline.h - optimization levels, the per-level pass lists, and the pass runner.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/ir.h"
#include "passes/passes.h"

namespace ternjit::passes {

/// Optimization levels; aliases none / conservative / balanced / aggressive.
enum class OptLevel : std::uint8_t { O0, O1, O2, O3 };

/// Parses "O2", "o2", "2", "balanced", "BALANCED", ... (case-insensitive).
std::optional<OptLevel> parse_opt_level(std::string_view text);
/// "O0".."O3".
std::string_view opt_level_name(OptLevel level);

/// The pass list of a level, as a plain list a reader can scan (pipeline.cpp).
std::vector<const PassInfo*> default_pipeline(OptLevel level);

/// Options of run_pipeline.
struct PipelineOptions {
  bool verify_each = true;              ///< run the verifier after every pass (debug/test)
  bool print_after_all = false;         ///< append the IR after each pass to `log`
  std::vector<std::string> print_after; ///< pass names after which to print the IR
  bool time_passes = false;             ///< append a per-pass timing table to `log`
};

/// What run_pipeline reports besides the transformed module.
struct PipelineReport {
  std::string log;  ///< printed IR and timing tables requested by the options
};

/// Runs `pipeline` over every function of `m` in order. A verifier failure after a
/// pass is our bug: it aborts with the pass name and the IR (TERNJIT_CHECK).
/// Errors come only from passes that can fail on user input.
Result<PipelineReport> run_pipeline(ir::Module& m, const std::vector<const PassInfo*>& pipeline,
                                    const PipelineOptions& options);

/// Resolves a comma-separated list of pass names ("fold-constants,simplify").
Result<std::vector<const PassInfo*>> parse_pass_list(std::string_view text);

}  // namespace ternjit::passes
