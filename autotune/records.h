// SPDX-License-Identifier: Apache-2.0
// records.h - tuning decisions as cache records, and choosing a configuration from them at dispatch.
//
// Records of one x86 tmatmul live under a *family* key: everything that identifies the
// kernel except M (K, N, kinds, epilogue, isa, threads, the CPU model, the ternjit
// version), so the nearest tuned M can be found. Each record is one (M, configuration)
// pair: its config text is "M=<m>;<TMatMulConfig::str()>", its measurements JSON
// {"M", "median_ns", "spread", "reps", "role" ("winner", "runner_up" or "default")}.
// Records are append-only and merge by union (DiskCache::merge), so the decision for an
// M is a pure function of the set: the record of that M with the smallest median (ties:
// the smaller config text).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "autotune/tuner.h"
#include "cache/disk_cache.h"
#include "cache/key.h"
#include "targets/x86/tmatmul.h"

namespace ternjit::autotune {

/// The family key of `problem` (M ignored) on `isa` with `threads` kernel threads.
cache::Key tmatmul_family_key(const targets::x86::TMatMulProblem& problem, targets::x86::Isa isa, int threads);

/// One decoded record.
struct TMatMulRecord {
  std::int64_t M = 0;
  targets::x86::TMatMulConfig config;
  double median_ns = 0;
  std::string role;
};

/// Stores the winner, runner-up and default of `result` (tuned for `problem`) as records.
/// Returns how many were new (existing records are kept: append-only).
Result<int> store_result(cache::DiskCache& disk, const targets::x86::TMatMulProblem& problem, targets::x86::Isa isa,
                         int threads, const TuneResult& result);

/// Every decodable record of the family of `problem` (undecodable ones are skipped).
Result<std::vector<TMatMulRecord>> load_records(cache::DiskCache& disk, const targets::x86::TMatMulProblem& problem,
                                                targets::x86::Isa isa, int threads);

/// Where a dispatch decision came from.
enum class DecisionSource : std::uint8_t {
  Exact,    ///< a record of this very shape
  Nearest,  ///< a record of the nearest tuned M (same K, N, kinds, epilogue)
  Default,  ///< no usable record: default_config
};

/// "exact", "nearest", "default".
std::string_view decision_source_name(DecisionSource s);

/// The configuration to run `problem` with.
struct Decision {
  targets::x86::TMatMulConfig config;
  DecisionSource source = DecisionSource::Default;
  std::int64_t tuned_m = 0;  ///< the M of the record used (0 for Default)
};

/// Chooses from `records`: the best record of problem.M; else of the nearest M (distance
/// |log2(M'/M)|, ties: the smaller M') whose config is valid for `problem` and whose
/// threads fit `threads`; else default_config(problem, isa, threads).
Decision decide(const std::vector<TMatMulRecord>& records, const targets::x86::TMatMulProblem& problem,
                targets::x86::Isa isa, int threads);

/// load_records + decide; a cache error gives the default (`disk` may be null).
Decision decide(cache::DiskCache* disk, const targets::x86::TMatMulProblem& problem, targets::x86::Isa isa,
                int threads);

}  // namespace ternjit::autotune
