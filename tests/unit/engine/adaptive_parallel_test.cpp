// SPDX-License-Identifier: Apache-2.0
// adaptive_parallel_test.cpp - EngineOptions::adaptive_parallel / TERNJIT_ADAPTIVE_PARALLEL through a Program on a host pool.
//
// The host pool is deliberately slow: its parallel_for sleeps 500 us before running the tasks
// inline, so the BitLinear layer (K = 256, N = 512, M = 1: microseconds inline) is 100x slower
// on it. Under heavy load (the TSan stage runs unit/cache beside it) those sleeps were seen to
// take 1-4 ms, and a step whose parallel median reaches 2 ms is not tried inline: the strict
// bound is checked only when every pool call of the deciding calls (0..59) stayed under 2 ms. With the option on (the default) the layer stops
// forking after its first probe window; off, every call forks as before; the results are the
// same bits. The concurrent case runs one Program from two threads (the TSan stage runs this
// file: the per-step choice is shared atomics).
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "tests/unit/engine/engine_testing.h"

namespace ternjit {
namespace {

std::atomic<int> g_slow_calls{0};
std::mutex g_call_mu;
std::vector<double> g_call_us;  // each slow call's duration (sleep + tasks), under g_call_mu
void slow_parallel_for(void*, void (*task)(void*, std::int64_t), void* context, std::int64_t n) {
  g_slow_calls.fetch_add(1);
  const auto t0 = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::microseconds(500));
  for (std::int64_t i = 0; i < n; ++i) task(context, i);
  const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  std::lock_guard<std::mutex> lock(g_call_mu);
  g_call_us.push_back(us);
}

// The longest of the slow pool's calls so far (0 with none).
double max_call_us() {
  std::lock_guard<std::mutex> lock(g_call_mu);
  return g_call_us.empty() ? 0 : *std::max_element(g_call_us.begin(), g_call_us.end());
}

// An x86 engine of 2 threads on the slow pool; nullopt (test skipped) without the x86 target.
std::optional<Engine> slow_pool_engine(bool adaptive) {
  EngineOptions o;
  o.target = "x86";
  o.threads = 2;
  o.cache_dir = "off";
  o.parallel_for = &slow_parallel_for;
  o.adaptive_parallel = adaptive;
  auto e = Engine::create(o);
  if (!e.ok()) {
    MESSAGE("skipped: " << e.error().message);
    return std::nullopt;
  }
  return std::move(e).value();
}

// Runs BitLinear.forward once on x into y (poisoned first).
void run_once(Program& p, std::vector<float>& x, std::vector<float>& y) {
  std::fill(y.begin(), y.end(), std::nanf(""));
  TensorView in[] = {testing::view(x, {1, 256})};
  TensorView out[] = {testing::view(y, {1, 512})};
  auto r = p.run("BitLinear.forward", in, out);
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
}

TEST_CASE("adaptive parallel: on (the default), a small layer on a slow host pool stops forking; off, every call "
          "forks; the same bits") {
  std::vector<std::vector<float>> outs;
  std::vector<int> late_forks;
  double pool_us = 0;  // the adaptive run's longest pool call in calls 0..59
  testing::BitLinearWeights w(256, 512, 3);
  std::vector<float> x = testing::random_f32(256, 9);
  for (bool adaptive : {true, false}) {
    std::optional<Engine> e = slow_pool_engine(adaptive);
    if (!e) return;
    Program p = testing::bitlinear(*e);
    w.bind(p);
    std::vector<float> y(512);
    g_slow_calls = 0;
    {
      std::lock_guard<std::mutex> lock(g_call_mu);
      g_call_us.clear();
    }
    int warm = 0;
    for (int i = 0; i < 120; ++i) {
      if (i == 60) {
        warm = g_slow_calls.load();
        if (adaptive) pool_us = max_call_us();
      }
      run_once(p, x, y);
    }
    late_forks.push_back(g_slow_calls.load() - warm);
    outs.push_back(y);
  }
  MESSAGE("forks in calls 60..119: adaptive " << late_forks[0] << ", off " << late_forks[1]
                                             << "; the pool's longest call in calls 0..59: " << pool_us << " us");
  // The plan does not probe a step inline while its parallel median is 2 ms or more (a
  // large step cannot lose to fork/join), and the windows that decide come 16, 32, 64 calls
  // apart; so the bound needs the 500 us pool to have stayed well under 2 ms while the
  // choice was made. On a machine so loaded (the sanitizer stages run tests side by side)
  // that a call of calls 0..59 took 2 ms or more, only "no more forks than off" is checked.
  if (pool_us < 2000)
    CHECK(late_forks[0] <= 16);  // probe windows only (3 calls, 64+ calls apart; a second step may fork too)
  else
    CHECK(late_forks[0] <= late_forks[1]);
  CHECK(late_forks[1] >= 60);  // off: at least one fork per call, as before
  CHECK(std::memcmp(outs[0].data(), outs[1].data(), outs[0].size() * 4) == 0);
}

TEST_CASE("adaptive parallel: one Program run from two threads on the slow pool gives the same bits every call") {
  std::optional<Engine> off = slow_pool_engine(false);
  if (!off) return;
  testing::BitLinearWeights w(256, 512, 4);
  std::vector<float> x = testing::random_f32(256, 10);
  std::vector<float> want(512);
  {
    Program p = testing::bitlinear(*off);
    w.bind(p);
    run_once(p, x, want);
  }
  std::optional<Engine> on = slow_pool_engine(true);
  REQUIRE(on);
  Program p = testing::bitlinear(*on);
  w.bind(p);
  // The kernel exists before the threads start (specialization is tested elsewhere).
  std::vector<float> y0(512);
  run_once(p, x, y0);
  g_slow_calls = 0;
  std::atomic<int> wrong{0};
  auto worker = [&] {
    std::vector<float> xin = x, y(512);
    for (int i = 0; i < 60; ++i) {
      std::fill(y.begin(), y.end(), std::nanf(""));
      TensorView in[] = {testing::view(xin, {1, 256})};
      TensorView out[] = {testing::view(y, {1, 512})};
      if (!p.run("BitLinear.forward", in, out).ok() || std::memcmp(y.data(), want.data(), want.size() * 4) != 0)
        wrong.fetch_add(1);
    }
  };
  std::thread t(worker);
  worker();
  t.join();
  CHECK(wrong.load() == 0);
  MESSAGE("forks in 120 concurrent calls: " << g_slow_calls.load());
  // It went inline, the two threads sharing the step's choice: off, all 120 calls fork. The
  // count varies with timing (9 in a plain build, 45 under TSan's slower serial runs and the
  // two threads' interleaved probe windows), so the bound only tells the two apart.
  CHECK(g_slow_calls.load() <= 90);
}

TEST_CASE("adaptive parallel: TERNJIT_ADAPTIVE_PARALLEL turns it off; other values are errors") {
  ::setenv("TERNJIT_ADAPTIVE_PARALLEL", "0", 1);
  auto off = EngineOptions::from_env();
  ::setenv("TERNJIT_ADAPTIVE_PARALLEL", "1", 1);
  auto on = EngineOptions::from_env();
  ::setenv("TERNJIT_ADAPTIVE_PARALLEL", "yes", 1);
  auto bad = EngineOptions::from_env();
  ::unsetenv("TERNJIT_ADAPTIVE_PARALLEL");
  REQUIRE(off.ok());
  REQUIRE(on.ok());
  CHECK(!off.value().adaptive_parallel);
  CHECK(on.value().adaptive_parallel);
  CHECK(EngineOptions{}.adaptive_parallel);
  REQUIRE(!bad.ok());
  CHECK(bad.error().message.find("TERNJIT_ADAPTIVE_PARALLEL") != std::string::npos);
}

}  // namespace
}  // namespace ternjit
