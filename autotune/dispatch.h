// SPDX-License-Identifier: Apache-2.0
// dispatch.h - the tuning source engines hand to targets: records first, tuning on first call when asked.
//
// A target asks RecordSource::decide for each tunable kernel call it loads or compiles
// (targets/tuning.h). The source decides from the records in the disk cache (records.h:
// exact shape, nearest tuned M, or the space's default); in TuningMode::Tune a space with
// no record of its exact shape is first tuned (a short halving search on the space's own
// bench), stored, and decided again - so the choice is the one a later Cached load makes.
// It knows no target: everything target-specific comes through the TuningSpace.
#pragma once

#include <functional>
#include <string>

#include "autotune/records.h"
#include "cache/disk_cache.h"
#include "targets/tuning.h"

namespace ternjit::autotune {

/// How RecordSource decides.
struct DispatchOptions {
  targets::TuningMode mode = targets::TuningMode::Cached;
  /// Where records are (called at each decision, so a cache can open lazily); empty or
  /// returning null: every space gets its default.
  std::function<cache::DiskCache*()> disk;
  double tune_budget_s = 5;          ///< Tune: time budget per space
  int tune_max_trials = 0;           ///< Tune: trial budget per space (0: the tuner's default)
  /// Which records are read: Explain also finds the older format's records measured under
  /// other conditions, so on_decision can report them as skipped (costs a read of every
  /// record's key: for verbose traces).
  RecordScope scope = RecordScope::Problem;
  /// Called once per decision (may be empty): for trace lines and tests. The decision
  /// lists the records that did not apply and why.
  std::function<void(const targets::TuningProblem&, const Decision&, bool tuned_now)> on_decision;
};

/// The records-backed TuningSource. Thread-safe (the cache is).
class RecordSource final : public targets::TuningSource {
 public:
  explicit RecordSource(DispatchOptions options) : options_(std::move(options)) {}
  /// Off: the default; Cached: decide(disk, space); Tune: tune first when no exact record.
  [[nodiscard]] std::string decide(const targets::TuningSpace& space) const override;

 private:
  DispatchOptions options_;
};

}  // namespace ternjit::autotune
