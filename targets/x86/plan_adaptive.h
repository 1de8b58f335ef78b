// SPDX-License-Identifier: Apache-2.0
// plan_adaptive.h - per plan step, whether its parallel work runs on the pool or inline, chosen from its own timings.
//
// A pool's fork/join costs a few microseconds when its threads are awake and tens to
// hundreds when they sleep (a passive OpenMP pool wakes them through the kernel on every
// call). A step that takes ~30 us on one thread (2560 x 2560 at M = 1) can then be slower
// on two. SplitChooser decides, per step, from the step's own measured calls:
//   - the first call is not measured (cold caches, first touch of the code);
//   - calls run parallel and record their time (only calls that did fork: a step that
//     did not call the pool has nothing to choose);
//   - probe windows of kProbeCalls calls run the other way: serial probes while parallel
//     is preferred (only when the parallel estimate is below `max_parallel_ns`: a large
//     step is never run serially to find out), parallel probes while serial is;
//   - at the end of each window the lower of the two estimates (median of the last
//     kWindow samples of each way) wins - going serial needs serial faster by 1/8, and
//     the first call of a parallel probe window (it wakes a pool that slept since the
//     last window) is not a sample; the next window comes `period` calls later, the
//     period doubling from kMinPeriod while the choice holds and falling back to
//     kMinPeriod when it flips, so a pool that changes behaviour is followed. It grows
//     at most to what keeps the probes' cost under kProbeCostPercent of the step's time
//     (kProbeCalls x |parallel - serial| per window), and never past kMaxPeriod: two
//     ways that measure alike are re-checked every kMinPeriod calls at no cost, a step
//     that halves on 2 threads every ~300 calls.
// The parallel probes run back to back, so a pool whose threads sleep between calls (a
// serial stretch) but stay awake between parallel calls shows its awake cost in the
// median, and one that sleeps every time shows that.
// Thread-safe: a plan may be run by several threads at once; the state is relaxed
// atomics, and a race only mixes samples or shifts a window - it never changes what a
// step computes (both ways run the same tasks: plan.h says why the results are equal).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

namespace ternjit::targets::x86 {

/// The adaptive choice of one step. Default-constructed state: prefers parallel.
class SplitChooser {
 public:
  static constexpr int kWindow = 5;             ///< samples kept per way (median of these)
  static constexpr int kProbeCalls = 3;         ///< calls per probe window
  static constexpr std::uint64_t kFirstProbe = 4;  ///< the first window's first call
  static constexpr std::uint32_t kMinPeriod = 16, kMaxPeriod = 1024;
  static constexpr std::int64_t kProbeCostPercent = 1;  ///< the probes' share of the time, at most

  /// How one call runs.
  struct Call {
    std::uint64_t n = 0;       ///< the step's call index
    std::uint64_t window = 0;  ///< the first call of the probe window this call saw
    bool serial = false;       ///< run inline (else on the pool)
    bool timed = false;        ///< the caller measures it and passes the time to end()
    bool probe = false;        ///< a probe call (runs the way not preferred)
  };

  /// Starts a call: which way it runs and whether it is to be timed. `max_parallel_ns`:
  /// a step whose parallel estimate is this or more is never probed serially.
  Call begin(std::int64_t max_parallel_ns) noexcept;
  /// Ends `c`: `ns` its time (ignored unless c.timed), `forked` whether it called the pool
  /// (ignored for serial calls). Decides at the end of a probe window.
  void end(const Call& c, std::int64_t ns, bool forked, std::int64_t max_parallel_ns) noexcept;

  /// Whether serial is preferred now.
  [[nodiscard]] bool prefers_serial() const noexcept { return serial_.load(std::memory_order_relaxed); }
  /// The median of the recorded parallel / serial samples in ns; 0 when none.
  [[nodiscard]] std::int64_t parallel_estimate() const noexcept;
  [[nodiscard]] std::int64_t serial_estimate() const noexcept;
  /// The current probe period (calls between windows).
  [[nodiscard]] std::uint32_t period() const noexcept { return period_.load(std::memory_order_relaxed); }

 private:
  using Ring = std::array<std::atomic<std::uint32_t>, kWindow>;
  static void record(Ring& ring, std::atomic<std::uint32_t>& next, std::int64_t ns) noexcept;
  static std::int64_t median(const Ring& ring) noexcept;

  std::atomic<std::uint64_t> calls_{0};
  std::atomic<std::uint64_t> next_window_{kFirstProbe};
  std::atomic<std::uint32_t> period_{kMinPeriod};
  std::atomic<bool> serial_{false};
  std::atomic<bool> forks_{true};  // the last parallel call forked (then parallel calls are timed)
  Ring par_{}, ser_{};             // ns, 0 = empty
  std::atomic<std::uint32_t> par_next_{0}, ser_next_{0};
};

}  // namespace ternjit::targets::x86
