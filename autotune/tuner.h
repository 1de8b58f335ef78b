// SPDX-License-Identifier: Apache-2.0
// tuner.h - search strategies over a kernel's configurations: exhaustive, random, successive halving.
//
// The tuner ranks the space a target declares (targets/tuning.h) by the target's cost
// estimates, prunes it per algorithm class, picks candidates by the strategy, compiles them (several at
// once) and measures them (one at a time), within a time and a trial budget. Every
// failed candidate is reported. With a Collective of several ranks (MPI) each rank
// measures its share of every round; rank 0 merges the round's trials and broadcasts
// them, so every rank makes the same decisions from the same data.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "autotune/measure.h"
#include "targets/tuning.h"
#include "ternjit/result.h"

namespace ternjit::autotune {

/// How candidates are chosen.
enum class Strategy : std::uint8_t {
  Exhaustive,  ///< every candidate of the space, cheapest estimate first (budgets still apply)
  Random,      ///< a seeded random sample of the pruned space, each measured fully
  Halving,     ///< successive halving: many candidates measured briefly, the best third kept, repeated
};

/// "exhaustive", "random", "halving".
std::string_view strategy_name(Strategy s);
/// Parses strategy_name's spellings; nullopt otherwise.
std::optional<Strategy> parse_strategy(std::string_view name);

/// Several processes tuning one kernel together (MPI ranks). Implementations: local()
/// (one rank) and autotune/mpi_collective.h.
class Collective {
 public:
  virtual ~Collective() = default;
  /// This process's rank in [0, size()).
  [[nodiscard]] virtual int rank() const = 0;
  /// The number of ranks (>= 1).
  [[nodiscard]] virtual int size() const = 0;
  /// On rank 0: every rank's `mine`, in rank order; on the others: empty.
  virtual std::vector<std::string> gather(const std::string& mine) const = 0;
  /// Rank 0's `text`, on every rank.
  virtual std::string broadcast(const std::string& text) const = 0;
};

/// The single-process collective.
const Collective& local_collective();

/// Where a search stands, for progress display.
struct Progress {
  int done = 0;             ///< candidates measured (or failed) so far
  int total = 0;            ///< candidates planned (halving: of the first round)
  double best_ns = 0;       ///< best median so far (0: none yet)
  std::string best_config;  ///< its configuration
  double seconds_left = 0;  ///< of the time budget (negative: no budget)
  int round = 0;            ///< halving round (0-based)
};

/// How to search.
struct TuneOptions {
  Strategy strategy = Strategy::Halving;
  double budget_s = 60;  ///< time budget in seconds (<= 0: none); candidates not started in it are skipped
  int max_trials = 0;    ///< distinct configurations measured at most; 0: 15% of the space (>= 8), all for exhaustive
  double prune_keep = 0.5;  ///< fraction of the space (cheapest estimates) kept before measuring; exhaustive: 1
  std::uint64_t seed = 1;   ///< random choices (random sample, halving's exploration half)
  int compile_threads = 2;  ///< candidates compiled at once (measuring is always alone)
  MeasureOptions measure;   ///< the full measurement (random, exhaustive, halving's last round)
  std::function<void(const Progress&)> progress;  ///< called after each candidate (may be empty)
  const Collective* collective = nullptr;         ///< null: local_collective()
  /// How one prepared candidate is timed; empty: autotune::measure over run.run(i).
  /// (Tests replace it with deterministic times.) Called from one thread at a time.
  std::function<Result<Measurement>(const targets::TuningRun& run, const MeasureOptions& options)> measure_fn;
};

/// One measured (or failed) candidate.
struct Trial {
  std::string config;       ///< the target's configuration text
  double estimated_ns = 0;  ///< the target's cost estimate
  bool ok = false;
  bool skipped = false;  ///< not measured: the time budget ran out first (not a failure)
  std::string error;     ///< why it failed (compile error, timeout) when !ok
  Measurement m;         ///< when ok: the last (most precise) measurement
  int round = 0;         ///< the halving round of that measurement
};

/// What a search found.
struct TuneResult {
  std::size_t space_size = 0;   ///< valid configurations declared
  std::size_t measured = 0;     ///< distinct configurations measured (or failed)
  std::vector<Trial> trials;    ///< every distinct configuration tried, final state, in order tried
  std::vector<Trial> failures;  ///< the failed ones (also in trials)
  std::string default_config;
  Measurement default_m;  ///< the default configuration, fully measured
  bool default_ok = false;
  std::string winner, runner_up;
  Measurement winner_m, runner_up_m;
  bool has_runner_up = false;
  bool significant = false;  ///< winner and runner-up differ by more than the noise
  bool budget_hit = false;   ///< the time budget ended the search early
  double seconds = 0;        ///< wall time of the search
  /// default median / winner median (1 when either is missing).
  [[nodiscard]] double speedup() const;
};

/// Searches the candidates of `space` (its default included) by timing them on `bench`
/// (made by space.bench()). Errors: InvalidArgument (empty space), Unavailable (no
/// candidate, the default included, could be measured: the failures are listed).
Result<TuneResult> tune(const targets::TuningSpace& space, const targets::TuningBench& bench,
                        const TuneOptions& options);

}  // namespace ternjit::autotune
