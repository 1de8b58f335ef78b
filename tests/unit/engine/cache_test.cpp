// SPDX-License-Identifier: Apache-2.0
// cache_test.cpp - specialization per shape, single flight under threads, trace lines, engine isolation.
#include <doctest/doctest.h>

#include <latch>
#include <set>
#include <thread>

#include "jit/single_flight.h"
#include "tests/unit/engine/engine_testing.h"

namespace ternjit {
namespace {

using testing::BitLinearWeights;
using testing::view;

constexpr std::int64_t kK = 32, kN = 8;

TEST_CASE("one kernel per shape: same shape, same pointer; another shape, another kernel") {
  Engine e = testing::reference_engine();
  Program p = testing::bitlinear(e);
  BitLinearWeights w(kK, kN, 1);
  w.bind(p);
  std::vector<float> x(8 * kK);
  TensorView m4[] = {view(x, {4, kK})};
  TensorView m8[] = {view(x, {8, kK})};
  auto a = p.kernel("BitLinear.forward", m4);
  auto b = p.kernel("BitLinear.forward", m4);
  auto c = p.kernel("BitLinear.forward", m8);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  REQUIRE(c.ok());
  CHECK(*a == *b);
  CHECK(*a != *c);
  CHECK((*a)->outputs()[0].shape == std::vector<std::int64_t>{4, kN});
  CHECK((*c)->outputs()[0].shape == std::vector<std::int64_t>{8, kN});
  // The data pointer is not part of the key.
  std::vector<float> other(4 * kK);
  TensorView m4b[] = {view(other, {4, kK})};
  CHECK(*p.kernel("BitLinear.forward", m4b) == *a);
}

TEST_CASE("trace: one line per compile, miss and hit, in the ONEDNN_VERBOSE spirit") {
  testing::TraceCapture trace;
  Engine e = testing::reference_engine(trace.options());
  Program p = testing::bitlinear(e);
  BitLinearWeights w(kK, kN, 2);
  w.bind(p);
  std::vector<float> x(4 * kK);
  TensorView in[] = {view(x, {4, kK})};
  REQUIRE(p.kernel("BitLinear.forward", in).ok());
  REQUIRE(p.kernel("BitLinear.forward", in).ok());
  CHECK(!p.kernel("BitLinear.nope", in).ok());
  std::lock_guard lock(trace.mu);
  REQUIRE(trace.lines.size() == 4);
  CHECK(trace.lines[0].rfind("ternjit_verbose,compile,target=reference,src=bitlinear.tri,functions=1,params=3,config=O2,ms=",
                             0) == 0);
  CHECK(trace.lines[1].rfind("ternjit_verbose,specialize,miss,target=reference,isa=-,fn=BitLinear.forward,"
                             "shape=x:f32[4,32],config=O2,disk=",
                             0) == 0);
  CHECK(trace.lines[2].rfind("ternjit_verbose,specialize,hit,target=reference,isa=-,fn=BitLinear.forward,"
                             "shape=x:f32[4,32],config=O2,disk=",
                             0) == 0);
  CHECK(trace.lines[3].rfind("ternjit_verbose,specialize,error,target=reference,fn=BitLinear.nope,", 0) == 0);
  for (const std::string& l : trace.lines) CHECK(l.find('\n') == std::string::npos);
}

TEST_CASE("quiet by default: verbose 0 writes no trace") {
  testing::TraceCapture trace;
  EngineOptions o = trace.options();
  o.verbose = 0;
  Engine e = testing::reference_engine(o);
  Program p = testing::bitlinear(e);
  BitLinearWeights w(kK, kN, 3);
  w.bind(p);
  std::vector<float> x(4 * kK);
  TensorView in[] = {view(x, {4, kK})};
  REQUIRE(p.kernel("BitLinear.forward", in).ok());
  CHECK(trace.lines.empty());
}

TEST_CASE("single flight: 8 threads asking for one new shape build it once") {
  testing::TraceCapture trace;
  Engine e = testing::reference_engine(trace.options());
  Program p = testing::bitlinear(e);
  BitLinearWeights w(kK, kN, 4);
  w.bind(p);
  constexpr int kThreads = 8;
  std::vector<const Kernel*> got(kThreads, nullptr);
  std::latch start(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      std::vector<float> x(5 * kK);
      TensorView in[] = {view(x, {5, kK})};
      start.arrive_and_wait();  // all ask at once
      auto k = p.kernel("BitLinear.forward", in);
      if (k.ok()) got[t] = k->get();
    });
  for (auto& th : threads) th.join();
  for (const Kernel* k : got) CHECK(k == got[0]);
  CHECK(got[0] != nullptr);
  CHECK(trace.count(",specialize,miss,") == 1);
  CHECK(trace.count(",specialize,miss,") + trace.count(",specialize,wait,") + trace.count(",specialize,hit,") ==
        kThreads);
}

TEST_CASE("different shapes build concurrently and each is correct") {
  testing::TraceCapture trace;
  Engine e = testing::reference_engine(trace.options());
  Program p = testing::bitlinear(e);
  BitLinearWeights w(kK, kN, 5);
  w.bind(p);
  const ir::ParamValues params = w.params();
  constexpr int kThreads = 8;
  std::vector<const Kernel*> got(kThreads, nullptr);
  std::vector<int> exact(kThreads, 0);
  std::latch start(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      const std::int64_t M = t + 1;
      std::vector<float> x = testing::random_f32(M * kK, 100 + static_cast<std::uint64_t>(t));
      std::vector<float> y(static_cast<std::size_t>(M * kN));
      TensorView in[] = {view(x, {M, kK})};
      TensorView out[] = {view(y, {M, kN})};
      start.arrive_and_wait();
      for (int rep = 0; rep < 2; ++rep) {
        auto k = p.kernel("BitLinear.forward", in);
        if (!k.ok() || !(*k)->run(in, out).ok()) return;
        got[t] = k->get();
      }
      exact[t] = 1;
      (void)x;
    });
  for (auto& th : threads) th.join();
  std::set<const Kernel*> distinct(got.begin(), got.end());
  CHECK(distinct.size() == kThreads);
  CHECK(distinct.count(nullptr) == 0);
  for (int t = 0; t < kThreads; ++t) CHECK(exact[t] == 1);
  CHECK(trace.count(",specialize,miss,") == kThreads);
  // Check each shape against the oracle (on this thread: doctest asserts are not thread-safe).
  for (int t = 0; t < kThreads; ++t) {
    const std::int64_t M = t + 1;
    std::vector<float> x = testing::random_f32(M * kK, 100 + static_cast<std::uint64_t>(t));
    std::vector<float> y(static_cast<std::size_t>(M * kN));
    TensorView in[] = {view(x, {M, kK})};
    TensorView out[] = {view(y, {M, kN})};
    REQUIRE(got[t]->run(in, out).ok());
    CHECK(testing::bit_equal(y, testing::oracle(params, x, M, kK)));
  }
}

TEST_CASE("two engines in one process share nothing") {
  testing::TraceCapture ta, tb;
  EngineOptions oa = ta.options();
  EngineOptions ob = tb.options();
  ob.opt_level = 0;
  Engine a = testing::reference_engine(oa);
  Engine b = testing::reference_engine(ob);
  Program pa = testing::bitlinear(a);
  Program pb = testing::bitlinear(b);
  BitLinearWeights wa(kK, kN, 6), wb(kK, kN, 7);
  wa.bind(pa);
  wb.bind(pb);
  std::vector<float> x = testing::random_f32(3 * kK, 8);
  TensorView in[] = {view(x, {3, kK})};
  auto ka = pa.kernel("BitLinear.forward", in);
  auto kb = pb.kernel("BitLinear.forward", in);
  REQUIRE(ka.ok());
  REQUIRE(kb.ok());
  CHECK(*ka != *kb);
  // Each engine's trace has its own program's lines, with its own configuration.
  CHECK(ta.count(",specialize,miss,") == 1);
  CHECK(tb.count(",specialize,miss,") == 1);
  CHECK(ta.count("config=O2") == 2);
  CHECK(tb.count("config=O0") == 2);
  CHECK(a.options().opt_level == 2);
  CHECK(b.options().opt_level == 0);
  // Each program runs with its own weights.
  std::vector<float> ya(3 * kN), yb(3 * kN);
  TensorView oa_[] = {view(ya, {3, kN})};
  TensorView ob_[] = {view(yb, {3, kN})};
  REQUIRE((*ka)->run(in, oa_).ok());
  REQUIRE((*kb)->run(in, ob_).ok());
  CHECK(testing::bit_equal(ya, testing::oracle(wa.params(), x, 3, kK)));
  CHECK(testing::bit_equal(yb, testing::oracle(wb.params(), x, 3, kK, 0)));
  // Destroying one engine leaves the other (and its programs) working.
  { Engine gone = std::move(a); }
  REQUIRE((*kb)->run(in, ob_).ok());
}

TEST_CASE("errors are not cached: a failed specialization is retried") {
  Engine e = testing::reference_engine();
  Program p = testing::bitlinear(e);
  std::vector<float> x(4 * kK);
  TensorView in[] = {view(x, {4, kK})};
  CHECK_FALSE(p.kernel("BitLinear.forward", in).ok());  // weights unbound
  BitLinearWeights w(kK, kN, 9);
  w.bind(p);
  CHECK(p.kernel("BitLinear.forward", in).ok());
}

TEST_CASE("SingleFlightCache: builds once, waiters share the result, failures are retried") {
  jit::SingleFlightCache<int> cache;
  std::atomic<int> builds{0};
  constexpr int kThreads = 8;
  std::latch start(kThreads);
  std::vector<const int*> got(kThreads);
  std::vector<jit::Lookup> how(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      auto r = cache.get(
          "k",
          [&]() -> Result<std::unique_ptr<int>> {
            ++builds;
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            return std::make_unique<int>(42);
          },
          how[t]);
      got[t] = r.ok() ? *r : nullptr;
    });
  for (auto& th : threads) th.join();
  CHECK(builds == 1);
  for (const int* g : got) CHECK((g && *g == 42 && g == got[0]));
  CHECK(std::count(how.begin(), how.end(), jit::Lookup::Miss) == 1);
  CHECK(cache.find("k") == got[0]);
  CHECK(cache.find("other") == nullptr);

  jit::Lookup h{};
  auto bad = cache.get("f", []() -> Result<std::unique_ptr<int>> { return make_error(ErrorCode::InvalidInput, "no"); }, h);
  CHECK_FALSE(bad.ok());
  CHECK(cache.size() == 1);
  auto good = cache.get("f", [] { return Result<std::unique_ptr<int>>(std::make_unique<int>(1)); }, h);
  REQUIRE(good.ok());
  CHECK(h == jit::Lookup::Miss);
  CHECK(cache.size() == 2);
}

}  // namespace
}  // namespace ternjit
