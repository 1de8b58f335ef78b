// SPDX-License-Identifier: Apache-2.0
// measure.h - timing one candidate: warm-up, repetitions until the spread is small, median, timeout.
#pragma once

#include <functional>
#include <string>

#include "ternjit/result.h"

namespace ternjit::autotune {

/// How one candidate is timed.
struct MeasureOptions {
  int warmup = 2;               ///< untimed calls first (code and data into caches, threads awake)
  int min_reps = 5;             ///< timed calls at least
  int max_reps = 40;            ///< timed calls at most (the cap when the spread stays large)
  double target_spread = 0.03;  ///< stop once (p75 - p25) / median is below this
  double max_seconds = 0.5;     ///< stop repeating after this long (>= min_reps calls are still made)
  double timeout_s = 2.0;       ///< one call taking longer fails the candidate ("timeout")
};

/// What timing one candidate gave.
struct Measurement {
  double median_ns = 0;  ///< median of the timed calls
  double min_ns = 0;     ///< fastest timed call
  double spread = 0;     ///< (p75 - p25) / median: the noise estimate
  int reps = 0;          ///< timed calls made
};

/// Times `call(i)` where i counts the calls made (callers rotate their inputs by it, so
/// caches do not flatter a configuration). Errors: Unavailable "timeout: ..." when one
/// call exceeds options.timeout_s (the call itself is not interrupted).
Result<Measurement> measure(const std::function<void(int)>& call, const MeasureOptions& options);

/// True when `b` is slower than `a` by more than their noise: (b - a) / a exceeds
/// max(a.spread, b.spread, 1%).
bool differs_beyond_noise(const Measurement& a, const Measurement& b);

}  // namespace ternjit::autotune
