// SPDX-License-Identifier: Apache-2.0
// dispatch.h - tuning records used when the engine loads an x86 kernel (and "tune" mode: tune on first call).
//
// The x86 artifact is the optimized IR of one function plus metadata (isa, threads).
// apply_tuning walks its tmatmuls in order (the plan numbers them "tmatmul.0", ... the
// same way), decides each one's configuration from the records (records.h: exact shape,
// nearest tuned M, or the default heuristic) and writes the choice as the artifact's
// "tmatmul.<i>" metadata, which the loader hands to the plan. It runs after the disk
// cache, on hits too, so records stored after an artifact was cached still apply.
#pragma once

#include <string>
#include <vector>

#include "autotune/records.h"
#include "cache/disk_cache.h"
#include "targets/target.h"
#include "ternjit/result.h"

namespace ternjit::autotune {

/// How apply_tuning decides.
struct DispatchOptions {
  /// "cached": use records only; "tune": tune (and store) the tmatmuls that have no
  /// record of their exact shape first; "off": nothing is done.
  std::string mode = "cached";
  cache::DiskCache* disk = nullptr;  ///< where records are; null: every tmatmul gets the default
  double tune_budget_s = 5;          ///< "tune": time budget per tmatmul
  int tune_max_trials = 0;           ///< "tune": trial budget per tmatmul (0: the tuner's default)
};

/// One tmatmul's decision.
struct DispatchEntry {
  std::string key;  ///< "tmatmul.<i>"
  targets::x86::TMatMulProblem problem;
  Decision decision;
  bool tuned_now = false;  ///< "tune" mode ran the tuner for it
};

/// Decides the configuration of every tmatmul of an x86 `artifact` and writes it into its
/// metadata. Artifacts of other targets (no "isa" metadata) are left alone (empty
/// result). Errors: InvalidInput when the artifact's IR does not parse.
Result<std::vector<DispatchEntry>> apply_tuning(targets::Artifact& artifact, const DispatchOptions& options);

/// The tmatmuls of `function` in `m`, numbered as the x86 plan numbers them, with their
/// problems ("tmatmul.<i>"; those with an empty or non-static shape are left out).
std::vector<std::pair<std::string, targets::x86::TMatMulProblem>> tmatmul_problems(const ir::Module& m,
                                                                                   std::string_view function);

}  // namespace ternjit::autotune
