// SPDX-License-Identifier: Apache-2.0
// plan_adaptive.cpp - SplitChooser (plan_adaptive.h): per step, pool or inline, from the step's own timings.
#include "targets/x86/plan_adaptive.h"

#include <algorithm>
#include <limits>
#include <utility>

namespace ternjit::targets::x86 {

namespace {
constexpr auto kRelaxed = std::memory_order_relaxed;
}  // namespace

SplitChooser::Call SplitChooser::begin(std::int64_t max_parallel_ns) noexcept {
  Call c;
  c.n = calls_.fetch_add(1, kRelaxed);
  c.window = next_window_.load(kRelaxed);
  const bool serial = serial_.load(kRelaxed);
  const bool forks = forks_.load(kRelaxed);
  c.serial = serial;
  if (c.n >= c.window && c.n < c.window + kProbeCalls) {
    if (serial) {
      c.serial = false;
      c.probe = true;
    } else if (forks) {
      const std::int64_t p = parallel_estimate();
      if (p > 0 && p < max_parallel_ns) {
        c.serial = true;
        c.probe = true;
      }
    }
  }
  // The first call is cold (first touch of code and scratch): not a sample. A parallel
  // call of a step whose last parallel call did not fork is not timed either (nothing to
  // choose: its clock reads are saved); a fork re-enables timing from the next call.
  c.timed = c.n > 0 && (c.serial || c.probe || forks);
  return c;
}

void SplitChooser::end(const Call& c, std::int64_t ns, bool forked, std::int64_t max_parallel_ns) noexcept {
  if (!c.serial && forks_.load(kRelaxed) != forked) forks_.store(forked, kRelaxed);
  // A parallel probe window's first call (the step runs inline meanwhile) wakes a pool that
  // has slept since the last window: it is not what a step kept on the pool pays, so it is
  // not a sample (timing it kept a spread-out pool's steps inline for too long).
  const bool waking = c.probe && !c.serial && c.n == c.window;
  if (c.timed && !waking) {
    if (c.serial) record(ser_, ser_next_, ns);
    else if (forked) record(par_, par_next_, ns);
  }
  if (c.n + 1 >= c.window + kProbeCalls) {
    // The window's last call (or a later one that saw the same window, should the last
    // one still be running): exactly one of them moves the window, by the CAS in decide.
    const std::int64_t p = parallel_estimate(), s = serial_estimate();
    const bool was_serial = serial_.load(kRelaxed);
    bool want_serial = false;
    if (was_serial) {
      // Stay serial unless the parallel probes measured faster.
      want_serial = !(p > 0 && s > 0 && p < s);
    } else {
      // Go serial only on this window's serial probes (a serial estimate left from an
      // older window is not trusted against today's parallel one) and a small step.
      // Inline must win by 1/8: a spread-out pool's median of 5 crosses a serial time a bit
      // below it now and then, and each such flip costs a stretch inline.
      want_serial = c.probe && c.serial && p > 0 && p < max_parallel_ns && s > 0 && 8 * s < 7 * p;
    }
    // The next window: the period doubles while the choice holds, up to what keeps the
    // probes' cost (kProbeCalls calls the slower way, |p - s| each) at kProbeCostPercent
    // of the calls in between; close estimates (a probe costs ~nothing, and the choice
    // is the least certain) keep the windows frequent, so a pool whose speed changes
    // (its second core taken or freed by other work) is followed within tens of calls.
    std::uint32_t cap = kMaxPeriod;
    if (p > 0 && s > 0) {
      const std::int64_t need = kProbeCalls * 100 / kProbeCostPercent * (p > s ? p - s : s - p) / std::min(p, s);
      cap = static_cast<std::uint32_t>(std::clamp<std::int64_t>(need, kMinPeriod, kMaxPeriod));
    }
    const std::uint32_t period = period_.load(kRelaxed);
    const std::uint32_t next_period = want_serial == was_serial ? std::min(period * 2, cap) : kMinPeriod;
    std::uint64_t expected = c.window;
    if (next_window_.compare_exchange_strong(expected, c.n + 1 + next_period, kRelaxed)) {
      period_.store(next_period, kRelaxed);
      serial_.store(want_serial, kRelaxed);
    }
  }
}

std::int64_t SplitChooser::parallel_estimate() const noexcept { return median(par_); }
std::int64_t SplitChooser::serial_estimate() const noexcept { return median(ser_); }

void SplitChooser::record(Ring& ring, std::atomic<std::uint32_t>& next, std::int64_t ns) noexcept {
  const auto v = static_cast<std::uint32_t>(
      std::clamp<std::int64_t>(ns, 1, std::numeric_limits<std::uint32_t>::max()));
  ring[next.fetch_add(1, kRelaxed) % kWindow].store(v, kRelaxed);
}

std::int64_t SplitChooser::median(const Ring& ring) noexcept {
  std::array<std::uint32_t, kWindow> v{};
  int k = 0;
  for (const auto& a : ring)
    if (const std::uint32_t x = a.load(kRelaxed); x != 0) v[static_cast<std::size_t>(k++)] = x;
  if (k == 0) return 0;
  // Insertion sort of at most kWindow values (std::sort here trips GCC 12's
  // -Warray-bounds on its 16-element insertion threshold).
  for (int i = 1; i < k; ++i)
    for (int j = i; j > 0 && v[static_cast<std::size_t>(j - 1)] > v[static_cast<std::size_t>(j)]; --j)
      std::swap(v[static_cast<std::size_t>(j - 1)], v[static_cast<std::size_t>(j)]);
  return v[static_cast<std::size_t>((k - 1) / 2)];  // the lower median
}

}  // namespace ternjit::targets::x86
