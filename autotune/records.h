// SPDX-License-Identifier: Apache-2.0
// records.h - tuning decisions as cache records, and choosing a configuration from them.
//
// Records of one tunable kernel live under a *family* key: the problem's op and family
// text (targets/tuning.h: everything that identifies the kernel except M), the host CPU
// model and the ternjit version, so the nearest tuned M can be found. Each record is one
// (M, configuration) pair: its config text is "M=<m>;<target config text>", its
// measurements JSON {"M", "median_ns", "spread", "reps", "role" ("winner", "runner_up" or
// "default")}. Records are append-only and merge by union (DiskCache::merge), so the
// decision for an M is a pure function of the set: the record of that M with the
// smallest median (ties: the smaller config text).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "autotune/tuner.h"
#include "cache/disk_cache.h"
#include "cache/key.h"
#include "targets/tuning.h"

namespace ternjit::autotune {

/// The family key of `problem` (its M ignored).
cache::Key family_key(const targets::TuningProblem& problem);

/// One decoded record.
struct Record {
  std::int64_t M = 0;
  std::string config;  ///< the target's configuration text
  double median_ns = 0;
  std::string role;
};

/// Stores the winner, runner-up and default of `result` (tuned for `problem`) as records.
/// Returns how many were new (existing records are kept: append-only).
Result<int> store_result(cache::DiskCache& disk, const targets::TuningProblem& problem, const TuneResult& result);

/// Every decodable record of the family of `problem` (undecodable ones are skipped).
Result<std::vector<Record>> load_records(cache::DiskCache& disk, const targets::TuningProblem& problem);

/// Where a decision came from.
enum class DecisionSource : std::uint8_t {
  Exact,    ///< a record of this very shape
  Nearest,  ///< a record of the nearest tuned M (same family)
  Default,  ///< no usable record: the space's default
};

/// "exact", "nearest", "default".
std::string_view decision_source_name(DecisionSource s);

/// The configuration to run a space with.
struct Decision {
  std::string config;
  DecisionSource source = DecisionSource::Default;
  std::int64_t tuned_m = 0;  ///< the M of the record used (0 for Default)
};

/// Chooses from `records`: the best record of the problem's M; else of the nearest M
/// (distance |log2(M'/M)|, ties: the smaller M') whose config space.valid() accepts;
/// else space.default_config().
Decision decide(const std::vector<Record>& records, const targets::TuningSpace& space);

/// load_records + decide; a cache error gives the default (`disk` may be null).
Decision decide(cache::DiskCache* disk, const targets::TuningSpace& space);

}  // namespace ternjit::autotune
