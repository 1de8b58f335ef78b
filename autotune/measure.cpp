// SPDX-License-Identifier: Apache-2.0
// measure.cpp - timing one candidate (measure.h).
#include "autotune/measure.h"

#include <algorithm>
#include <chrono>
#include <vector>

namespace ternjit::autotune {

namespace {

using Clock = std::chrono::steady_clock;

double elapsed_ns(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::nano>(b - a).count();
}

// Value at fraction q of sorted `v` (linear interpolation).
double quantile(const std::vector<double>& v, double q) {
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(pos);
  const std::size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

}  // namespace

Result<Measurement> measure(const std::function<void(int)>& call, const MeasureOptions& o) {
  const double timeout_ns = o.timeout_s * 1e9;
  int n = 0;
  auto timed = [&]() -> Result<double> {
    const auto t0 = Clock::now();
    call(n++);
    const double ns = elapsed_ns(t0, Clock::now());
    if (o.timeout_s > 0 && ns > timeout_ns)
      return make_error(ErrorCode::Unavailable, "timeout: one call took " + std::to_string(ns / 1e6) + " ms (limit " +
                                                    std::to_string(o.timeout_s * 1e3) + " ms)");
    return ns;
  };
  for (int i = 0; i < o.warmup; ++i) TERNJIT_TRY_VOID(timed());
  const int min_reps = std::max(1, o.min_reps);
  const int max_reps = std::max(min_reps, o.max_reps);
  const auto start = Clock::now();
  std::vector<double> times;
  Measurement m;
  for (;;) {
    TERNJIT_TRY(double ns, timed());
    times.push_back(ns);
    if (static_cast<int>(times.size()) < min_reps) continue;
    std::vector<double> s = times;
    std::sort(s.begin(), s.end());
    m.median_ns = quantile(s, 0.5);
    m.min_ns = s.front();
    m.spread = m.median_ns > 0 ? (quantile(s, 0.75) - quantile(s, 0.25)) / m.median_ns : 0.0;
    m.reps = static_cast<int>(s.size());
    if (m.spread <= o.target_spread || m.reps >= max_reps) break;
    if (elapsed_ns(start, Clock::now()) > o.max_seconds * 1e9) break;
  }
  return m;
}

bool differs_beyond_noise(const Measurement& a, const Measurement& b) {
  if (a.median_ns <= 0) return false;
  const double noise = std::max({a.spread, b.spread, 0.01});
  return (b.median_ns - a.median_ns) / a.median_ns > noise;
}

}  // namespace ternjit::autotune
