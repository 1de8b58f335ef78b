// SPDX-License-Identifier: Apache-2.0
// tuning.h - the target-neutral tuning interface: a target declares a space, a source decides.
//
// A target that has knobs for a kernel op (tile sizes, blockings, variants) describes one
// call of that op as a TuningSpace: a problem (what identifies the kernel, the row count
// M kept apart so the nearest tuned M can serve), the candidate configurations as text
// with a cost estimate each, a default, a validity test for configurations recorded for
// another M, and a bench that compiles and runs one candidate. The configuration to use
// comes from a TuningSource: the target asks it at load (x86: when a plan is built), or,
// for a target whose choice shapes the emitted code (Target::decides_at_compile), the
// engine asks it before compile and hands the answers over in CompileOptions::decisions,
// keying the disk cache by them. autotune/ implements
// TuningSource (records on disk, optional tuning on first call) and knows no target's
// types; a target knows nothing of records or strategies.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ternjit/result.h"

namespace ternjit::targets {

/// How an engine uses tuning records (EngineOptions::tuning).
enum class TuningMode : std::uint8_t {
  Off,     ///< every kernel gets its target's default configuration
  Cached,  ///< the recorded winner of the exact shape, else of the nearest tuned M, else the default
  Tune,    ///< as Cached, but a kernel op with no record of its exact shape is tuned (and recorded) first
};

/// "off", "cached", "tune".
std::string_view tuning_mode_name(TuningMode mode);
/// Parses tuning_mode_name's spellings; nullopt otherwise.
std::optional<TuningMode> parse_tuning_mode(std::string_view text);

/// One condition a measurement depends on: a name ("threads") and its value ("2").
struct TuningCondition {
  std::string name;   ///< an identifier: letters, digits, '_'
  std::string value;  ///< no ';'
  friend bool operator==(const TuningCondition&, const TuningCondition&) = default;
};

/// What identifies one tunable kernel call.
struct TuningProblem {
  std::string op;      ///< target-qualified op family: "x86.tmatmul"
  std::string family;  ///< canonical text of the kernel's problem but M ("K=4096;N=14336;x=i8;out=f32;epilogue=...")
  std::int64_t m = 0;  ///< the row count records are matched on (nearest tuned M)
  std::string label;   ///< a short human description for progress lines ("M=1 K=4096 N=14336 i8->f32")
  /// What a configuration's speed depends on besides the problem, as the kernel will run
  /// (x86: the code path `isa` and the resolved `threads`), in the target's order. A
  /// tuning record carries the conditions it was measured under and applies only where
  /// every one of them is the same (autotune/records.h).
  std::vector<TuningCondition> conditions;
};

/// One candidate configuration and the target's cost-model estimate of it.
struct TuningCandidate {
  std::string config;        ///< the target's configuration text (parsed back by the target)
  double estimated_ns = 0;   ///< analytic estimate; lower is expected faster (0: unknown)
  /// The algorithm class ("dot/512"): estimates rank well within a class, poorly across
  /// classes, so the tuner prunes and picks per class.
  std::string group;
};

/// A compiled candidate, ready to be timed.
class TuningRun {
 public:
  virtual ~TuningRun() = default;
  /// One call of the kernel; `i` counts calls (implementations rotate their inputs by
  /// it so caches do not flatter a configuration). Called from one thread at a time.
  virtual void run(int i) const = 0;
};

/// How a bench prepares candidates.
struct TuningBenchOptions {
  /// Inputs are rotated through copies totalling about this many bytes.
  std::size_t rotate_bytes = std::size_t{64} << 20;
  std::uint64_t seed = 1;  ///< the random inputs
};

/// What compiles candidates of one problem (on random inputs the bench owns).
class TuningBench {
 public:
  virtual ~TuningBench() = default;
  /// Compiles `config` (and lays out its weights). Thread-safe: called from several
  /// threads at once. Errors: InvalidArgument for a configuration this bench cannot run.
  [[nodiscard]] virtual Result<std::unique_ptr<TuningRun>> prepare(std::string_view config) const = 0;
};

/// A kernel call with knobs, as a target declares it.
class TuningSpace {
 public:
  virtual ~TuningSpace() = default;
  /// What is being tuned.
  [[nodiscard]] virtual const TuningProblem& problem() const = 0;
  /// The target's configuration when nothing better is known (always valid).
  [[nodiscard]] virtual std::string default_config() const = 0;
  /// Every valid configuration of the space, with estimates (order: the target's).
  [[nodiscard]] virtual std::vector<TuningCandidate> candidates() const = 0;
  /// Whether `config` (recorded for this family at another M, or found anywhere) can run
  /// this very problem.
  [[nodiscard]] virtual bool valid(std::string_view config) const = 0;
  /// A bench for timing candidates of this problem. Errors: Unavailable when this
  /// machine cannot run the space's code.
  [[nodiscard]] virtual Result<std::unique_ptr<TuningBench>> bench(const TuningBenchOptions& options) const = 0;
};

/// Decides configurations for targets. Implementations are thread-safe.
class TuningSource {
 public:
  virtual ~TuningSource() = default;
  /// The configuration to use for `space` (valid for it; its default when nothing
  /// better is known). Never fails: a record problem falls back to the default.
  [[nodiscard]] virtual std::string decide(const TuningSpace& space) const = 0;
};

}  // namespace ternjit::targets
