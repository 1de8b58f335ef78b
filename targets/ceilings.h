// SPDX-License-Identifier: Apache-2.0
// ceilings.h - a machine's roofline ceilings as a target measures them in-process: the
// streaming-read bandwidth and the int8-dot throughput its kernels are held against.
//
// `ternjit bench` prints a kernel beside them (Target::measure_ceilings); a target that
// runs on the host CPU measures them with its own probe loops. Nothing here is used by
// generated code.
#pragma once

#include <string>

namespace ternjit::targets {

/// How a ceiling is timed: like autotune's MeasureOptions, kept here so targets/ does
/// not depend on autotune/.
struct CeilingOptions {
  int warmup = 1;             ///< untimed calls first
  int min_reps = 3;           ///< timed calls at least
  int max_reps = 50;          ///< timed calls at most
  double max_seconds = 0.25;  ///< stop repeating after this long (min_reps still made)
};

/// One timed ceiling: per-call times and the rate they give.
struct CeilingResult {
  double work = 0;       ///< bytes (bandwidth) or int8 operations (dot) per call
  double median_ns = 0;  ///< median call
  double min_ns = 0;     ///< fastest call
  int reps = 0;          ///< timed calls
  /// work per second / 1e9 at the median call (GB/s or GOPS).
  [[nodiscard]] double rate() const { return median_ns > 0 ? work / median_ns : 0.0; }
  /// The same at the fastest call (the ceiling's best case).
  [[nodiscard]] double best_rate() const { return min_ns > 0 ? work / min_ns : 0.0; }
};

/// What Target::measure_ceilings returns.
struct Ceilings {
  CeilingResult read;      ///< a streaming read (work in bytes)
  CeilingResult int8_dot;  ///< the fastest int8 dot loop the target's options allow (work in operations)
  std::string int8_dot_path;  ///< the code path that loop ran ("avx512_vnni")
};

}  // namespace ternjit::targets
