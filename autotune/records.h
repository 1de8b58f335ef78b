// SPDX-License-Identifier: Apache-2.0
// records.h - tuning decisions as cache records, and choosing a configuration from them.
//
// Records of one tunable kernel live under its *problem* key: the problem's op and family
// text (targets/tuning.h: everything that identifies the kernel except M and the
// conditions), so the nearest tuned M can be found and a record measured under other
// conditions can be reported, not just missed. Each record is one (M, conditions,
// configuration) triple. Its config text is
//   "M=<m>;cpu=<host CPU model>;isa=<..>;threads=<..>;version=<ternjit>;config=<target config>"
// (the conditions sorted by name; ';' in a value is written ','), its measurements JSON
// {"M", "median_ns", "spread", "reps", "role" ("winner", "runner_up" or "default")}.
// A record applies only where every condition is the same: the problem's own (x86: the
// code path and the resolved thread count), the host CPU model and the ternjit version.
// Records are append-only and merge by union (DiskCache::merge), so the decision for an M
// is a pure function of the set: the applicable record of that M with the smallest median
// (ties: the smaller config text).
//
// The format before conditions (key kind "tuning_family": op, family text with the
// conditions appended, device, version; config text "M=<m>;<config>") is still read:
// its key holds every condition, so a record under the key these very conditions give
// applies as it did; one under any other key is only reported, with what differs
// (RecordScope::Explain), and never applied.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "autotune/record_text.h"
#include "autotune/tuner.h"
#include "cache/disk_cache.h"
#include "cache/key.h"
#include "targets/tuning.h"

namespace ternjit::autotune {

/// The conditions of `problem` on this host with this build.
Conditions conditions_of(const targets::TuningProblem& problem);

/// The key the records of `problem` are stored under (its M and conditions left out).
cache::Key problem_key(const targets::TuningProblem& problem);

/// The key the older format stored the records of `problem` under, measured under
/// exactly conditions_of(problem).
cache::Key legacy_family_key(const targets::TuningProblem& problem);

/// Stores the winner, runner-up and default of `result` (tuned for `problem`, under its
/// conditions) as records. Returns how many were new (existing records are kept:
/// append-only).
Result<int> store_result(cache::DiskCache& disk, const targets::TuningProblem& problem, const TuneResult& result);

/// Which records load_records finds.
enum class RecordScope : std::uint8_t {
  /// The records of the problem's key (under any conditions), and the older format's
  /// records of exactly the problem's conditions.
  Problem,
  /// Also the older format's records of the problem under other conditions, found by
  /// reading every record's key (for reports: they never apply).
  Explain,
};

/// The decodable records of `problem` in `scope` (undecodable ones are skipped).
Result<std::vector<Record>> load_records(cache::DiskCache& disk, const targets::TuningProblem& problem,
                                         RecordScope scope = RecordScope::Problem);

/// Why `record` cannot serve `space` run under `here` ("" when it can): the conditions
/// that differ ("measured with threads=1; here threads=2"), else a configuration the
/// space does not accept for its M.
std::string mismatch(const Record& record, const Conditions& here, const targets::TuningSpace& space);

/// Where a decision came from.
enum class DecisionSource : std::uint8_t {
  Exact,    ///< a record of this very shape
  Nearest,  ///< a record of the nearest tuned M (same family)
  Default,  ///< no usable record: the space's default
};

/// "exact", "nearest", "default".
std::string_view decision_source_name(DecisionSource s);

/// A record that does not apply, and why (mismatch()).
struct SkippedRecord {
  Record record;
  std::string why;
};

/// The configuration to run a space with.
struct Decision {
  std::string config;
  DecisionSource source = DecisionSource::Default;
  std::int64_t tuned_m = 0;            ///< the M of the record used (0 for Default)
  std::size_t applicable = 0;          ///< records that apply (any M)
  std::vector<SkippedRecord> skipped;  ///< records that do not, in the order given
};

/// Chooses from the records that apply (mismatch() is "" under conditions_of(the
/// space's problem)): the best record of the problem's M; else of the nearest M
/// (distance |log2(M'/M)|, ties: the smaller M'); else space.default_config(). The
/// others are listed as skipped.
Decision decide(const std::vector<Record>& records, const targets::TuningSpace& space);

/// load_records + decide; a cache error gives the default (`disk` may be null).
Decision decide(cache::DiskCache* disk, const targets::TuningSpace& space, RecordScope scope = RecordScope::Problem);

}  // namespace ternjit::autotune
