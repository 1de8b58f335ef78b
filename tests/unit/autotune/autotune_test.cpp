// SPDX-License-Identifier: Apache-2.0
// autotune_test.cpp - the autotuner: search space, strategies and budgets, failures, records, dispatch.
#include <doctest/doctest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "autotune/dispatch.h"
#include "autotune/measure.h"
#include "autotune/records.h"
#include "autotune/tmatmul_bench.h"
#include "autotune/tuner.h"
#include "ir/dsl/dsl.h"
#include "ir/parse.h"
#include "ir/print.h"
#include "passes/pipeline.h"
#include "passes/specialize_shapes.h"
#include "targets/x86/isa.h"
#include "targets/x86/tmatmul_space.h"
#include "targets/x86/x86_target.h"

namespace {

using namespace ternjit;
using namespace ternjit::autotune;
namespace x86 = ternjit::targets::x86;

// A temporary directory, removed at the end.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = "/tmp/ternjit-autotune-test-XXXXXX";
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  std::string path_;
};

x86::TMatMulProblem small_problem(std::int64_t M) {
  x86::TMatMulProblem p;
  p.M = M;
  p.K = 256;
  p.N = 96;  // not a multiple of every n_block: tails
  p.x_kind = ElemKind::I8;
  p.out_kind = ElemKind::F32;
  p.x_scale = true;
  p.w_scale = true;
  p.w_scale_per_channel = true;
  return p;
}

x86::Isa host_isa() { return x86::best_isa(x86::host_isas()).value_or(x86::Isa::Avx2); }

// A fake evaluator: a deterministic "time" per config (the cost model plus a hash
// wiggle), failures for chosen configs, and a log of what was prepared and measured.
class FakeEvaluator final : public Evaluator {
 public:
  explicit FakeEvaluator(x86::TMatMulProblem p) : p_(p) {}
  std::set<std::string> fail_compile, fail_measure;

  Result<std::unique_ptr<Prepared>> prepare(const x86::TMatMulConfig& c) const override {
    std::lock_guard lock(mu_);
    prepared_.push_back(c);
    if (fail_compile.count(c.str())) return make_error(ErrorCode::Internal, "injected compile failure");
    auto out = std::make_unique<Fake>();
    out->c = c;
    return std::unique_ptr<Prepared>(std::move(out));
  }
  Result<Measurement> measure(const Prepared& pr, const MeasureOptions&) const override {
    const auto& f = static_cast<const Fake&>(pr);
    CHECK(!busy_.exchange(true));  // measuring runs alone
    measured_.insert(f.c.str());
    busy_ = false;
    if (fail_measure.count(f.c.str())) return make_error(ErrorCode::Unavailable, "timeout: injected");
    Measurement m;
    m.median_ns = time_of(f.c);
    m.min_ns = m.median_ns;
    m.spread = 0.001;
    m.reps = 3;
    return m;
  }
  [[nodiscard]] double time_of(const x86::TMatMulConfig& c) const {
    const std::size_t h = std::hash<std::string>{}(c.str());
    return x86::estimated_cost(p_, c) * (1.0 + static_cast<double>(h % 1000) / 2000.0);
  }
  std::vector<x86::TMatMulConfig> prepared() const {
    std::lock_guard lock(mu_);
    return prepared_;
  }
  std::set<std::string> measured() const { return measured_; }

 private:
  struct Fake : Prepared {
    x86::TMatMulConfig c;
  };
  x86::TMatMulProblem p_;
  mutable std::mutex mu_;
  mutable std::vector<x86::TMatMulConfig> prepared_;
  mutable std::set<std::string> measured_;
  mutable std::atomic<bool> busy_{false};
};

}  // namespace

TEST_CASE("search space: every config validates, the default is in it, no duplicates") {
  for (x86::Isa isa : {x86::Isa::Avx2, x86::Isa::Avx512Vnni, x86::Isa::Amx})
    for (std::int64_t M : {1, 3, 32}) {
      x86::TMatMulProblem p = small_problem(M);
      p.K = 2048;  // split-K becomes a knob for small M
      const auto space = x86::search_space(p, isa, 4);
      REQUIRE(!space.empty());
      std::set<std::string> seen;
      for (const auto& c : space) {
        INFO(c.str());
        CHECK(x86::validate(p, c).ok());
        CHECK(c.isa == isa);
        CHECK(c.threads <= 4);
        CHECK(c.m_block <= M);
        CHECK(seen.insert(c.str()).second);
        CHECK(x86::estimated_cost(p, c) > 0);
      }
      CHECK(seen.count(x86::default_config(p, isa, 4).str()) == 1);
    }
  // Float x: only the float variant.
  x86::TMatMulProblem f = small_problem(4);
  f.x_kind = ElemKind::F32;
  f.out_kind = ElemKind::F32;
  for (const auto& c : x86::search_space(f, x86::Isa::Avx512Vnni, 2)) CHECK(c.variant == x86::TMatMulVariant::Float);
  CHECK(!x86::describe_space().empty());
}

TEST_CASE("strategies visit valid configs of the space only, within the trial budget") {
  const x86::TMatMulProblem p = small_problem(8);
  const x86::Isa isa = x86::Isa::Avx512Vnni;
  const auto space = x86::search_space(p, isa, 2);
  const auto def = x86::default_config(p, isa, 2);
  std::set<std::string> in_space;
  for (const auto& c : space) in_space.insert(c.str());
  for (Strategy s : {Strategy::Exhaustive, Strategy::Random, Strategy::Halving}) {
    INFO(strategy_name(s));
    FakeEvaluator ev(p);
    TuneOptions o;
    o.strategy = s;
    o.budget_s = 0;
    o.max_trials = 20;
    o.compile_threads = 3;
    auto r = tune(p, space, def, ev, o);
    REQUIRE(r.ok());
    CHECK(r->space_size == space.size());
    CHECK(r->measured <= 20);
    CHECK(ev.measured().size() <= 20);
    for (const std::string& c : ev.measured()) CHECK(in_space.count(c) == 1);
    CHECK(in_space.count(r->winner.str()) == 1);
    CHECK(r->default_ok);
    // The winner is the fastest of what was measured (the fake is deterministic).
    for (const Trial& t : r->trials)
      if (t.ok && s != Strategy::Halving) CHECK(ev.time_of(r->winner) <= t.m.median_ns);
    CHECK(r->speedup() >= 1.0);
    CHECK(r->has_runner_up);
    CHECK(!(r->winner == r->runner_up));
  }
  // Exhaustive with no trial budget measures the whole space, and finds the true optimum.
  FakeEvaluator ev(p);
  TuneOptions o;
  o.strategy = Strategy::Exhaustive;
  o.budget_s = 0;
  auto r = tune(p, space, def, ev, o);
  REQUIRE(r.ok());
  CHECK(r->measured == space.size());
  double best = 1e300;
  for (const auto& c : space) best = std::min(best, ev.time_of(c));
  CHECK(ev.time_of(r->winner) == best);
  CHECK(parse_strategy("halving") == Strategy::Halving);
  CHECK(!parse_strategy("nope"));
}

TEST_CASE("failed candidates are reported, not dropped; an all-failing search is an error") {
  const x86::TMatMulProblem p = small_problem(4);
  const x86::Isa isa = x86::Isa::Avx512Vnni;
  const auto space = x86::search_space(p, isa, 1);
  const auto def = x86::default_config(p, isa, 1);
  FakeEvaluator ev(p);
  ev.fail_compile.insert(space[0].str() == def.str() ? space[1].str() : space[0].str());
  ev.fail_measure.insert(space[2].str() == def.str() ? space[3].str() : space[2].str());
  TuneOptions o;
  o.strategy = Strategy::Exhaustive;
  o.budget_s = 0;
  auto r = tune(p, space, def, ev, o);
  REQUIRE(r.ok());
  REQUIRE(r->failures.size() == 2);
  bool compile = false, timeout = false;
  for (const Trial& t : r->failures) {
    CHECK(!t.ok);
    compile = compile || t.error.find("compile: injected") != std::string::npos;
    timeout = timeout || t.error.find("timeout") != std::string::npos;
  }
  CHECK(compile);
  CHECK(timeout);

  FakeEvaluator all_fail(p);
  for (const auto& c : space) all_fail.fail_compile.insert(c.str());
  auto none = tune(p, space, def, all_fail, o);
  REQUIRE(!none.ok());
  CHECK(none.error().message.find("injected compile failure") != std::string::npos);
}

TEST_CASE("the time budget stops the search: later candidates are skipped, not failed") {
  const x86::TMatMulProblem p = small_problem(8);
  const x86::Isa isa = x86::Isa::Avx512Vnni;
  const auto space = x86::search_space(p, isa, 1);
  const auto def = x86::default_config(p, isa, 1);
  // Each measurement sleeps 20 ms; a 0.1 s budget allows a handful.
  class Slow final : public Evaluator {
   public:
    Result<std::unique_ptr<Prepared>> prepare(const x86::TMatMulConfig&) const override {
      return std::make_unique<Prepared>();
    }
    Result<Measurement> measure(const Prepared&, const MeasureOptions&) const override {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      ++calls;
      return Measurement{1000.0 + calls, 1000.0, 0.0, 1};
    }
    mutable int calls = 0;
  } slow;
  TuneOptions o;
  o.strategy = Strategy::Random;
  o.budget_s = 0.1;
  o.max_trials = 40;
  const auto t0 = std::chrono::steady_clock::now();
  auto r = tune(p, space, def, slow, o);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  REQUIRE(r.ok());
  CHECK(r->budget_hit);
  CHECK(slow.calls < 40);
  CHECK(r->failures.empty());
  CHECK(s < 5.0);  // generous: the budget is 0.1 s, one candidate may overrun it
}

TEST_CASE("measure: repetitions, median and the per-call timeout") {
  int calls = 0;
  MeasureOptions o;
  o.warmup = 2;
  o.min_reps = 4;
  o.max_reps = 6;
  auto m = measure([&](int) { ++calls; }, o);
  REQUIRE(m.ok());
  CHECK(m->reps >= 4);
  CHECK(m->reps <= 6);
  CHECK(calls == m->reps + 2);
  CHECK(m->median_ns >= m->min_ns);
  o.timeout_s = 0.001;
  auto t = measure([&](int) { std::this_thread::sleep_for(std::chrono::milliseconds(5)); }, o);
  REQUIRE(!t.ok());
  CHECK(t.error().message.find("timeout") != std::string::npos);
  Measurement a{100, 100, 0.01, 5}, b{150, 150, 0.01, 5}, c{100.5, 100, 0.01, 5};
  CHECK(differs_beyond_noise(a, b));
  CHECK(!differs_beyond_noise(a, c));
}

TEST_CASE("real kernels: a halving search on the host measures valid configs and beats or ties the default") {
  const x86::TMatMulProblem p = small_problem(4);
  const x86::Isa isa = host_isa();
  BenchOptions bo;
  bo.threads = 2;
  bo.rotate_bytes = 1 << 20;
  TMatMulEvaluator ev(p, bo);
  TuneOptions o;
  o.strategy = Strategy::Halving;
  o.budget_s = 5;
  o.max_trials = 12;
  o.measure.max_reps = 8;
  int progress_calls = 0;
  o.progress = [&](const Progress& pr) {
    ++progress_calls;
    CHECK(pr.done <= pr.total + 1);
  };
  const auto space = x86::search_space(p, isa, 2);
  auto r = tune(p, space, x86::default_config(p, isa, 2), ev, o);
  REQUIRE(r.ok());
  CHECK(r->failures.empty());
  CHECK(r->measured <= 12);
  CHECK(progress_calls > 0);
  CHECK(x86::validate(p, r->winner).ok());
  CHECK(r->default_ok);
  // A config asking more threads than the pool has fails at prepare (reported).
  x86::TMatMulConfig too_many = x86::default_config(p, isa, 8);
  CHECK(!ev.prepare(too_many).ok());
}

TEST_CASE("records round-trip through the cache; decide: exact, nearest, default") {
  TempDir dir;
  cache::CacheOptions co;
  co.dir = dir.path() + "/cache";
  auto disk = cache::DiskCache::open(co);
  REQUIRE(disk.ok());
  const x86::Isa isa = x86::Isa::Avx512Vnni;
  x86::TMatMulProblem p8 = small_problem(8);

  TuneResult r;
  r.winner = x86::default_config(p8, isa, 2);
  r.winner.k_unroll = 4;
  r.winner.m_block = 3;
  r.winner_m = Measurement{1000, 990, 0.01, 5};
  r.has_runner_up = true;
  r.runner_up = r.winner;
  r.runner_up.k_unroll = 1;
  r.runner_up_m = Measurement{1100, 1090, 0.01, 5};
  r.default_config = x86::default_config(p8, isa, 2);
  r.default_m = Measurement{1500, 1400, 0.01, 5};
  r.default_ok = true;
  REQUIRE(x86::validate(p8, r.winner).ok());
  auto stored = store_result(**disk, p8, isa, 2, r);
  REQUIRE(stored.ok());
  CHECK(*stored == 3);
  CHECK(*store_result(**disk, p8, isa, 2, r) == 0);  // append-only: nothing new

  auto recs = load_records(**disk, p8, isa, 2);
  REQUIRE(recs.ok());
  REQUIRE(recs->size() == 3);

  Decision exact = decide(disk->get(), p8, isa, 2);
  CHECK(exact.source == DecisionSource::Exact);
  CHECK(exact.config == r.winner);

  x86::TMatMulProblem p16 = small_problem(16);  // 8 is the nearest (and only) tuned M
  Decision near = decide(disk->get(), p16, isa, 2);
  CHECK(near.source == DecisionSource::Nearest);
  CHECK(near.tuned_m == 8);
  CHECK(near.config == r.winner);

  x86::TMatMulProblem other = small_problem(8);
  other.N = 160;  // another family: no records
  Decision def = decide(disk->get(), other, isa, 2);
  CHECK(def.source == DecisionSource::Default);
  CHECK(def.config == x86::default_config(other, isa, 2));
  CHECK(decide(nullptr, p8, isa, 2).source == DecisionSource::Default);
  // Another thread count is another family.
  CHECK(decide(disk->get(), p8, isa, 1).source == DecisionSource::Default);

  // Records merge into another cache and decide the same there.
  cache::CacheOptions co2;
  co2.dir = dir.path() + "/other";
  auto disk2 = cache::DiskCache::open(co2);
  REQUIRE(disk2.ok());
  auto merged = (*disk2)->merge(co.dir);
  REQUIRE(merged.ok());
  CHECK(merged->copied == 3);
  CHECK(decide(disk2->get(), p8, isa, 2).config == r.winner);

  // Nearest prefers the closer M in log scale, ties the smaller.
  std::vector<TMatMulRecord> many;
  auto rec = [&](std::int64_t m, int ku) {
    TMatMulRecord t;
    t.M = m;
    t.config = x86::default_config(small_problem(m), isa, 2);
    t.config.k_unroll = ku;
    t.median_ns = 100;
    return t;
  };
  many.push_back(rec(1, 1));
  many.push_back(rec(32, 4));
  CHECK(decide(many, small_problem(16), isa, 2).tuned_m == 32);
  CHECK(decide(many, small_problem(2), isa, 2).tuned_m == 1);
  Decision tie = decide(many, small_problem(4), isa, 2);  // log distances: 2 vs 3
  CHECK(tie.tuned_m == 1);
}

TEST_CASE("dispatch: an x86 artifact's tmatmuls get the recorded configs (exact, nearest, default)") {
  if (!x86::host_isas().avx2) {
    MESSAGE("skipped: host lacks avx2");
    return;
  }
  const char* src =
      "layer L {\n"
      "  param w: TernaryTensor[K, N]\n"
      "  param w_scale: Tensor[N]\n"
      "  fn forward(x: Tensor[M, K]) -> Tensor[M, N] {\n"
      "    let q = quantize_int8(x)\n"
      "    let y = q @ w\n"
      "    return y * w_scale\n"
      "  }\n"
      "}\n";
  auto m = dsl::compile_tri(src, "l.tri");
  REQUIRE(m.ok());
  auto target = targets::make_x86_target();
  auto artifact_for = [&](std::int64_t M) {
    auto spec = passes::specialize_function(*m, "L.forward", {{"M", M}, {"K", 128}, {"N", 64}}, true);
    REQUIRE(spec.ok());
    passes::PipelineOptions po;
    po.target = target->info();
    REQUIRE(passes::run_pipeline(*spec, passes::default_pipeline(passes::OptLevel::O2, po.target), po).ok());
    targets::CompileOptions copts;
    copts.threads = 1;
    auto a = target->compile(*spec, "L.forward", copts);
    REQUIRE(a.ok());
    return *a;
  };
  targets::Artifact a4 = artifact_for(4);
  const x86::Isa isa = *x86::parse_isa(a4.metadata.at("isa"));
  std::string text(a4.bytes.begin(), a4.bytes.end());
  auto parsed = ir::parse_module(text, "a");
  REQUIRE(parsed.ok());
  auto probs = tmatmul_problems(*parsed, "L.forward");
  REQUIRE(probs.size() == 1);
  CHECK(probs[0].first == "tmatmul.0");
  CHECK(probs[0].second.M == 4);
  CHECK(probs[0].second.K == 128);
  CHECK(probs[0].second.N == 64);

  TempDir dir;
  cache::CacheOptions co;
  co.dir = dir.path();
  auto disk = cache::DiskCache::open(co);
  REQUIRE(disk.ok());
  DispatchOptions d;
  d.disk = disk->get();

  // No records: the default.
  auto e0 = apply_tuning(a4, d);
  REQUIRE(e0.ok());
  REQUIRE(e0->size() == 1);
  CHECK((*e0)[0].decision.source == DecisionSource::Default);
  CHECK(a4.metadata.at("tmatmul.0") == x86::default_config(probs[0].second, isa, 1).str());

  // A record for M = 4: exact for M = 4, nearest for M = 8.
  TuneResult r;
  r.winner = x86::default_config(probs[0].second, isa, 1);
  r.winner.k_unroll = 3;
  r.winner_m = Measurement{10, 10, 0, 1};
  REQUIRE(store_result(**disk, probs[0].second, isa, 1, r).ok());
  auto e1 = apply_tuning(a4, d);
  REQUIRE(e1.ok());
  CHECK((*e1)[0].decision.source == DecisionSource::Exact);
  CHECK(a4.metadata.at("tmatmul.0") == r.winner.str());
  targets::Artifact a8 = artifact_for(8);
  auto e2 = apply_tuning(a8, d);
  REQUIRE(e2.ok());
  CHECK((*e2)[0].decision.source == DecisionSource::Nearest);
  CHECK(a8.metadata.at("tmatmul.0") == r.winner.str());
  // "off" leaves the artifact alone.
  targets::Artifact a8b = artifact_for(8);
  d.mode = "off";
  REQUIRE(apply_tuning(a8b, d).ok());
  CHECK(a8b.metadata.count("tmatmul.0") == 0);
  // "tune": tunes the shape without an exact record, stores it, then it is exact.
  targets::Artifact a2 = artifact_for(2);
  d.mode = "tune";
  d.tune_budget_s = 2;
  d.tune_max_trials = 6;
  auto e3 = apply_tuning(a2, d);
  REQUIRE(e3.ok());
  CHECK((*e3)[0].tuned_now);
  CHECK((*e3)[0].decision.source == DecisionSource::Exact);
  d.mode = "cached";
  targets::Artifact a2b = artifact_for(2);
  auto e4 = apply_tuning(a2b, d);
  REQUIRE(e4.ok());
  CHECK((*e4)[0].decision.source == DecisionSource::Exact);
  CHECK(a2b.metadata.at("tmatmul.0") == a2.metadata.at("tmatmul.0"));
}
