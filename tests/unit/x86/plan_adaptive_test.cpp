// SPDX-License-Identifier: Apache-2.0
// plan_adaptive_test.cpp - a step's parallel work runs inline where its parallel runs measure slower
// (PlanOptions::adaptive_parallel, plan_adaptive.h); the engine's option: tests/unit/engine/adaptive_parallel_test.cpp.
//
// SplitChooser is driven with synthetic times (deterministic). The plan cases use a
// deliberately slow host pool: its parallel_for sleeps 500 us before running the tasks, so a
// step of a few microseconds is 100x slower on it than inline - robust under any machine load
// (no assertion on real speed beyond that). Every output is compared bit for bit: serial and
// parallel runs of every step kind compute the same bits (plan.h says why).
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ir/interpret.h"
#include "ir/parse.h"
#include "targets/x86/isa.h"
#include "targets/x86/plan.h"
#include "targets/x86/plan_adaptive.h"
#include "tests/unit/engine/engine_testing.h"  // random_f32
#include "tests/unit/x86/plan_check.h"
#include "tests/unit/x86/x86_testing.h"

namespace ternjit::targets::x86 {
namespace {

constexpr std::int64_t kMax = 2'000'000;  // PlanOptions' default adaptive_max_parallel_ns

struct Counts {
  int serial = 0, parallel = 0;
};

// `calls` calls of `ch` taking `par_ns` on the pool and `ser_ns` inline; counts the ways of
// the calls from `count_from` on.
Counts drive(SplitChooser& ch, int calls, std::int64_t par_ns, std::int64_t ser_ns, int count_from = 0,
             bool forks = true, std::int64_t max_ns = kMax) {
  Counts n;
  for (int i = 0; i < calls; ++i) {
    const SplitChooser::Call c = ch.begin(max_ns);
    ch.end(c, c.serial ? ser_ns : par_ns, forks, max_ns);
    if (i >= count_from) ++(c.serial ? n.serial : n.parallel);
  }
  return n;
}

TEST_CASE("adaptive split: a step faster inline goes serial after the first probe window, parallel probes cost <= 1%") {
  SplitChooser ch;
  CHECK(!ch.prefers_serial());
  const Counts first = drive(ch, static_cast<int>(SplitChooser::kFirstProbe) + SplitChooser::kProbeCalls, 100'000, 30'000);
  CHECK(ch.prefers_serial());
  CHECK(first.serial == SplitChooser::kProbeCalls);  // the probes; the calls before them ran on the pool
  drive(ch, 4000, 100'000, 30'000);
  CHECK(ch.prefers_serial());
  // Settled: windows of 3 parallel probes (70 us more each) every 300 * 70 / 30 = 700 calls.
  CHECK(ch.period() == 700);
  const Counts later = drive(ch, 10000, 100'000, 30'000);
  CHECK(ch.prefers_serial());
  const double extra = later.parallel * 70'000.0, chosen = 10000 * 30'000.0;
  CHECK(later.parallel >= SplitChooser::kProbeCalls);  // it keeps checking
  CHECK(extra <= 0.011 * chosen);
  CHECK(ch.serial_estimate() == 30'000);
  CHECK(ch.parallel_estimate() == 100'000);
}

TEST_CASE("adaptive split: a step faster on the pool stays parallel, serial probes cost <= 1%") {
  SplitChooser ch;
  drive(ch, 4000, 30'000, 60'000);
  CHECK(ch.period() == 300);  // 300 * (60 - 30) / 30
  const Counts c = drive(ch, 10000, 30'000, 60'000);
  CHECK(!ch.prefers_serial());
  CHECK(c.serial >= SplitChooser::kProbeCalls);
  CHECK(c.serial * 30'000.0 <= 0.011 * 10000 * 30'000.0);
  // A large gap caps the period at kMaxPeriod.
  SplitChooser wide;
  drive(wide, 6000, 10'000, 100'000);
  CHECK(!wide.prefers_serial());
  CHECK(wide.period() == SplitChooser::kMaxPeriod);
}

TEST_CASE("adaptive split: ways that measure alike are re-checked every kMinPeriod calls, so a change shows fast") {
  SplitChooser ch;
  drive(ch, 2000, 50'000, 51'000);
  CHECK(!ch.prefers_serial());
  CHECK(ch.period() == SplitChooser::kMinPeriod);
  // The pool's second core gets taken: the pool is now slower than inline.
  int calls = 0;
  while (!ch.prefers_serial() && calls < 1000) {
    drive(ch, 1, 90'000, 51'000);
    ++calls;
  }
  CHECK(ch.prefers_serial());
  CHECK(calls <= 2 * static_cast<int>(SplitChooser::kMinPeriod) + 2 * SplitChooser::kProbeCalls);
}

TEST_CASE("adaptive split: a pool that changes behaviour is followed both ways") {
  SplitChooser ch;
  drive(ch, 3000, 100'000, 30'000);  // slow pool: serial, period at its maximum
  REQUIRE(ch.prefers_serial());
  // The pool becomes fast: the next parallel window (within a period) sees it; the median
  // of the last 5 parallel samples needs the 3 new ones, so one window suffices.
  int calls = 0;
  while (ch.prefers_serial() && calls < 4 * static_cast<int>(SplitChooser::kMaxPeriod)) {
    drive(ch, 1, 10'000, 30'000);
    ++calls;
  }
  CHECK(!ch.prefers_serial());
  CHECK(calls <= static_cast<int>(SplitChooser::kMaxPeriod) + 2 * SplitChooser::kProbeCalls);
  CHECK(ch.period() == SplitChooser::kMinPeriod);
  // And slow again: the pool's median rises once 3 of the last 5 parallel samples are slow.
  calls = 0;
  while (!ch.prefers_serial() && calls < 4 * static_cast<int>(SplitChooser::kMaxPeriod)) {
    drive(ch, 1, 100'000, 30'000);
    ++calls;
  }
  CHECK(ch.prefers_serial());
  CHECK(calls <= 2 * static_cast<int>(SplitChooser::kMinPeriod) + 4 * SplitChooser::kProbeCalls);
}

TEST_CASE("adaptive split: a large step is never run inline to find out; a step that does not fork is not timed") {
  SplitChooser large;
  // 3 ms on the pool, over the 2 ms bound: never probed serially, even if inline were faster.
  CHECK(drive(large, 3000, 3'000'000, 1'000).serial == 0);
  CHECK(!large.prefers_serial());
  CHECK(large.serial_estimate() == 0);

  SplitChooser quiet;
  int timed = 0;
  for (int i = 0; i < 500; ++i) {
    const SplitChooser::Call c = quiet.begin(kMax);
    timed += c.timed ? 1 : 0;
    CHECK(!c.serial);
    quiet.end(c, 1'000, /*forked=*/false, kMax);
  }
  CHECK(timed <= 1);  // the call after the first (cold, untimed) one, which showed no fork
  CHECK(quiet.parallel_estimate() == 0);
  // A fork turns timing back on from the next call.
  quiet.end(quiet.begin(kMax), 1'000, /*forked=*/true, kMax);
  CHECK(quiet.begin(kMax).timed);
}

// ------------------------------------------------------------------- plans

// A host pool that takes 500 us to start any parallel_for, then runs the tasks inline: a
// passive pool's wake-up, exaggerated. Counts its invocations. Thread-safe.
struct SlowPool {
  std::atomic<int> calls{0};
  static void run(void* self, Parallel::TaskFn task, void* context, std::int64_t n) {
    static_cast<SlowPool*>(self)->calls.fetch_add(1);
    std::this_thread::sleep_for(std::chrono::microseconds(500));
    for (std::int64_t i = 0; i < n; ++i) task(context, i);
  }
  Parallel parallel() { return Parallel{2, &SlowPool::run, this}; }
};

// A small BitLinear: quantize f32 x [M, 256] (no fork: 256 elements), then the int8 tmatmul
// over N = 512 (2 threads: two panel ranges, one fork per call).
const char* kSmall = R"(param @L.w : t2[256, 512]
param @L.s : f32[512]

func @f(%x: f32[1, 256]) -> f32[1, 512] {
^entry:
  %w = param @L.w : t2[256, 512]
  %s = param @L.s : f32[512]
  %q, %qs = quantize %x : i8[1, 256], f32[1, 1]
  %y = tmatmul %q, %w, %qs, %s {x_scale = true, w_scale = true, bias = false, residual = false, act = none} : f32[1, 512]
  ret %y
}
)";

ir::ParamValues small_params() {
  ir::ParamValues p;
  p.set("L.w", ir::HostTensor::random(ElemKind::T2, {256, 512}, 41));
  p.set("L.s", ir::HostTensor::random(ElemKind::F32, {512}, 42));
  return p;
}

std::unique_ptr<Plan> build(const char* text, const std::string& fn, const ir::ParamValues& params, Isa isa,
                            bool adaptive, std::int64_t max_ns = kMax) {
  auto m = ir::parse_module(text, "adaptive.tir");
  REQUIRE_MESSAGE(m.ok(), (m.ok() ? "" : m.error().message));
  PlanOptions o;
  o.isa = isa;
  o.threads = 2;
  o.adaptive_parallel = adaptive;
  o.adaptive_max_parallel_ns = max_ns;
  auto plan = Plan::build(m.value(), fn, params, o, nullptr);
  REQUIRE_MESSAGE(plan.ok(), (plan.ok() ? "" : plan.error().message));
  return std::move(plan).value();
}

// Runs `plan` on x (outputs poisoned with 0xAB first) and returns y's bytes.
std::vector<std::uint8_t> run_small(const Plan& plan, const std::vector<float>& x, const Parallel& par) {
  std::vector<float> xin = x;
  std::vector<std::uint8_t> y(512 * 4, 0xAB);
  void* bufs[] = {xin.data(), y.data()};
  auto r = plan.run(bufs, par);
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
  return y;
}

std::optional<Isa> host_best() {
  const std::optional<Isa> isa = best_isa(host_isas());
  if (!isa) MESSAGE("skipped: host runs no x86 code path");
  return isa;
}

TEST_CASE("adaptive plan: a small step on a slow host pool ends serial; off, every call forks; same bits") {
  const std::optional<Isa> isa = host_best();
  if (!isa) return;
  const ir::ParamValues params = small_params();
  const std::vector<float> x = ternjit::testing::random_f32(256, 5);
  auto on = build(kSmall, "f", params, *isa, true);
  auto off = build(kSmall, "f", params, *isa, false);
  const std::vector<std::uint8_t> want = run_small(*off, x, Parallel{});

  SlowPool pool_on, pool_off;
  constexpr int kCalls = 160, kWarm = 60;
  int forks_warm = 0;
  for (int i = 0; i < kCalls; ++i) {
    if (i == kWarm) forks_warm = pool_on.calls.load();
    CHECK(run_small(*on, x, pool_on.parallel()) == want);
    CHECK(run_small(*off, x, pool_off.parallel()) == want);
  }
  // Off: one fork per call (the tmatmul), as before. On: windows of 3 parallel probes at
  // calls 4-6 (then serial), 23-25, 58-60, 125-127: 1 + 3 of them after call 60.
  CHECK(pool_off.calls.load() == kCalls);
  const int forks_late = pool_on.calls.load() - forks_warm;
  MESSAGE("adaptive on: " << pool_on.calls.load() << " forks in " << kCalls << " calls, " << forks_late
                          << " after call " << kWarm);
  CHECK(forks_late <= 8);
  CHECK(pool_on.calls.load() <= 20);
  const std::vector<bool> serial = on->steps_run_serially();
  CHECK(std::count(serial.begin(), serial.end(), true) == 1);  // the tmatmul (quantize does not fork)
  for (bool s : off->steps_run_serially()) CHECK(!s);
}

TEST_CASE("adaptive plan: a step whose parallel time is over the bound stays on the pool") {
  const std::optional<Isa> isa = host_best();
  if (!isa) return;
  const ir::ParamValues params = small_params();
  const std::vector<float> x = ternjit::testing::random_f32(256, 6);
  // Bound 100 us: the slow pool's 500 us makes the tmatmul a "large" step.
  auto plan = build(kSmall, "f", params, *isa, true, 100'000);
  const std::vector<std::uint8_t> want = run_small(*plan, x, Parallel{});
  SlowPool pool;
  for (int i = 0; i < 80; ++i) CHECK(run_small(*plan, x, pool.parallel()) == want);
  CHECK(pool.calls.load() == 80);
  for (bool s : plan->steps_run_serially()) CHECK(!s);
}

TEST_CASE("adaptive plan: run from two threads at once on the slow pool, every result exact") {
  const std::optional<Isa> isa = host_best();
  if (!isa) return;
  const ir::ParamValues params = small_params();
  const std::vector<float> x = ternjit::testing::random_f32(256, 7);
  auto plan = build(kSmall, "f", params, *isa, true);
  const std::vector<std::uint8_t> want = run_small(*plan, x, Parallel{});
  SlowPool pool;
  std::atomic<int> wrong{0};
  auto worker = [&] {
    for (int i = 0; i < 60; ++i) {
      std::vector<float> xin = x;
      std::vector<std::uint8_t> y(512 * 4, 0xAB);
      void* bufs[] = {xin.data(), y.data()};
      if (!plan->run(bufs, pool.parallel()).ok() || y != want) wrong.fetch_add(1);
    }
  };
  std::thread t(worker);
  worker();
  t.join();
  CHECK(wrong.load() == 0);
  CHECK(pool.calls.load() <= 30);  // it went serial (the two threads share the step's state)
}

// Every step kind of the x86 plan with work large enough that each splits on 2 threads
// (eltwise >= 32 Ki elements, data ops >= 64 KiB per task at M = 40, dense NK >= 2 tasks,
// attention rows, tmatmul panels): E = 2048, HQ = 16, HKV = 8, D = 128, C = 64, V = 1024.
const char* kWide = R"(param @B.embd : f16[1024, 2048]
param @B.attn_norm : f32[2048]
param @B.wq : t2[2048, 2048]
param @B.wq_s : f32[2048]
param @B.wk : f32[2048, 1024]
param @B.wv : f32[2048, 1024]
param @B.ln_g : f32[2048]
param @B.ln_b : f32[2048]
param @B.bias : f32[1, 2048]
param @B.wf : t2[2048, 512]

func @block(%ids: i32[M], %pos: i32[], %kc: f16[1, 64, 8, 128], %vc: f16[1, 64, 8, 128], %xf: f32[M, 2048]) -> (f32[M, 1024], f16[1, 64, 8, 128], f16[1, 64, 8, 128], f32[M, 64], f32[M, 512], f32[M, 2048], f32[M]) {
^entry:
  %embd = param @B.embd : f16[1024, 2048]
  %an = param @B.attn_norm : f32[2048]
  %wq = param @B.wq : t2[2048, 2048]
  %wqs = param @B.wq_s : f32[2048]
  %wk = param @B.wk : f32[2048, 1024]
  %wv = param @B.wv : f32[2048, 1024]
  %lg = param @B.ln_g : f32[2048]
  %lb = param @B.ln_b : f32[2048]
  %bias = param @B.bias : f32[1, 2048]
  %wf = param @B.wf : t2[2048, 512]
  %e = gather %embd, %ids {axis = 0} : f16[M, 2048]
  %h = cast %e {to = f32} : f32[M, 2048]
  %n = rmsnorm %h, %an {eps = 1e-05} : f32[M, 2048]
  %xq, %xs = quantize %n : i8[M, 2048], f32[M, 1]
  %q0 = tmatmul %xq, %wq, %xs, %wqs {x_scale = true, w_scale = true, bias = false, residual = false, act = none} : f32[M, 2048]
  %q1 = reshape %q0 : f32[M, 16, 128]
  %q = rope %q1, %pos {theta = 500000, mode = norm} : f32[M, 16, 128]
  %k0 = matmul %n, %wk : f32[M, 1024]
  %k1 = reshape %k0 : f32[M, 8, 128]
  %k = rope %k1, %pos {theta = 500000, mode = neox} : f32[M, 8, 128]
  %v0 = matmul %n, %wv : f32[M, 1024]
  %v = reshape %v0 : f32[M, 8, 128]
  %kc2 = kv_write %kc, %k, %pos {layer = 0} : f16[1, 64, 8, 128]
  %vc2 = kv_write %vc, %v, %pos {layer = 0} : f16[1, 64, 8, 128]
  %a = attention %q, %kc2, %vc2, %pos {layer = 0, scale = 0.08838834764831845} : f32[M, 16, 128]
  %a2 = reshape %a : f32[M, 2048]
  %h2 = add %h, %a2 : f32[M, 2048]
  %bb = broadcast %bias : f32[M, 2048]
  %h3 = add %h2, %bb : f32[M, 2048]
  %ln = layernorm %h3, %lg, %lb {eps = 1e-05} : f32[M, 2048]
  %s0 = slice %ln {axis = 1, start = 0, size = 768} : f32[M, 768]
  %s1 = slice %ln {axis = 1, start = 768, size = 1280} : f32[M, 1280]
  %cc = concat %s1, %s0 {axis = 1} : f32[M, 2048]
  %et = transpose %embd {perm = [1, 0]} : f16[2048, 1024]
  %logits = matmul %cc, %et : f32[M, 1024]
  %sc = slice %logits {axis = 1, start = 0, size = 64} : f32[M, 64]
  %sm = causal_softmax %sc, %pos : f32[M, 64]
  %yf = tmatmul %xf, %wf {x_scale = false, w_scale = false, bias = false, residual = false, act = none} : f32[M, 512]
  %sx = softmax %xf {axis = 1} : f32[M, 2048]
  %rs = reduce_sum %xf {axis = 1, keepdims = false} : f32[M]
  ret %logits, %kc2, %vc2, %sm, %yf, %sx, %rs
}
)";

ir::ParamValues wide_params() {
  ir::ParamValues p;
  std::uint64_t seed = 900;
  p.set("B.embd", ir::HostTensor::random(ElemKind::F16, {1024, 2048}, seed++));
  p.set("B.attn_norm", ir::HostTensor::random(ElemKind::F32, {2048}, seed++));
  p.set("B.wq", ir::HostTensor::random(ElemKind::T2, {2048, 2048}, seed++));
  p.set("B.wq_s", ir::HostTensor::random(ElemKind::F32, {2048}, seed++));
  p.set("B.wk", ir::HostTensor::random(ElemKind::F32, {2048, 1024}, seed++));
  p.set("B.wv", ir::HostTensor::random(ElemKind::F32, {2048, 1024}, seed++));
  p.set("B.ln_g", ir::HostTensor::random(ElemKind::F32, {2048}, seed++));
  p.set("B.ln_b", ir::HostTensor::random(ElemKind::F32, {2048}, seed++));
  p.set("B.bias", ir::HostTensor::random(ElemKind::F32, {1, 2048}, seed++));
  p.set("B.wf", ir::HostTensor::random(ElemKind::T2, {2048, 512}, seed++));
  return p;
}

// A Parallel over real std::threads that counts its forks.
struct CountingThreads {
  std::atomic<int> calls{0};
  static void run(void* self, Parallel::TaskFn task, void* context, std::int64_t n) {
    static_cast<CountingThreads*>(self)->calls.fetch_add(1);
    testing::std_thread_run(reinterpret_cast<void*>(std::intptr_t{2}), task, context, n);
  }
  Parallel parallel() { return Parallel{2, &CountingThreads::run, this}; }
};

TEST_CASE("adaptive plan: every step kind computes the same bits inline and on 2 threads, M = 1 and 40 [avx2] [avx512]") {
  const ir::ParamValues params = wide_params();
  for (Isa isa : testing::step_isas()) {
    for (std::int64_t M : {1, 40}) {
      CAPTURE(isa_name(isa));
      CAPTURE(M);
      std::string text = kWide;
      for (std::size_t at = text.find("[M"); at != std::string::npos; at = text.find("[M", at))
        text.replace(at + 1, 1, std::to_string(M));
      auto plan = build(text.c_str(), "block", params, isa, true);
      auto steps = plan->describe();
      std::vector<std::vector<std::uint8_t>> ins;
      std::vector<std::int32_t> ids(static_cast<std::size_t>(M));
      for (std::int64_t i = 0; i < M; ++i) ids[static_cast<std::size_t>(i)] = static_cast<std::int32_t>((37 * i + 5) % 1024);
      const std::int32_t pos = M == 1 ? 17 : 64 - static_cast<std::int32_t>(M);
      const auto kc = ir::HostTensor::random(ElemKind::F16, {1, 64, 8, 128}, 31).to_bytes();
      const auto vc = ir::HostTensor::random(ElemKind::F16, {1, 64, 8, 128}, 32).to_bytes();
      const auto xf = ir::HostTensor::random(ElemKind::F32, {M, 2048}, 33).to_bytes();
      const std::size_t out_bytes[] = {static_cast<std::size_t>(M * 1024 * 4), kc.size(), vc.size(),
                                       static_cast<std::size_t>(M * 64 * 4), static_cast<std::size_t>(M * 512 * 4),
                                       static_cast<std::size_t>(M * 2048 * 4), static_cast<std::size_t>(M * 4)};
      // One run: fresh inputs, outputs poisoned; returns the outputs.
      auto run = [&](const Plan& p, const Parallel& par) {
        std::vector<std::uint8_t> ib(ids.size() * 4), kb = kc, vb = vc, xb = xf;
        std::memcpy(ib.data(), ids.data(), ib.size());
        std::int32_t p32 = pos;
        std::vector<std::vector<std::uint8_t>> outs;
        for (std::size_t b : out_bytes) outs.emplace_back(b, 0xAB);
        std::vector<void*> bufs = {ib.data(), &p32, kb.data(), vb.data(), xb.data()};
        for (auto& o : outs) bufs.push_back(o.data());
        auto r = p.run(bufs.data(), par);
        REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
        return outs;
      };
      const auto inline_out = run(*plan, Parallel{});
      CountingThreads threads;
      const auto threads_out = run(*plan, threads.parallel());
      MESSAGE(isa_name(isa) << " M = " << M << ": " << steps.size() << " steps, " << threads.calls.load()
                            << " forks on 2 threads");
      CHECK(threads.calls.load() >= 1);
      for (std::size_t j = 0; j < inline_out.size(); ++j) {
        CAPTURE(j);
        CHECK(inline_out[j] == threads_out[j]);
      }
      // The adaptive plan on the slow pool after its steps chose (each small one serial,
      // each large one parallel): the same bits again.
      SlowPool slow;
      std::vector<std::vector<std::uint8_t>> mixed;
      for (int i = 0; i < 8; ++i) mixed = run(*plan, slow.parallel());
      for (std::size_t j = 0; j < inline_out.size(); ++j) {
        CAPTURE(j);
        CHECK(inline_out[j] == mixed[j]);
      }
    }
  }
}

}  // namespace
}  // namespace ternjit::targets::x86
