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
#include "autotune/tuner.h"
#include "ir/dsl/dsl.h"
#include "ir/parse.h"
#include "ir/print.h"
#include "passes/pipeline.h"
#include "passes/specialize_shapes.h"
#include "targets/x86/isa.h"
#include "targets/x86/tmatmul_space.h"
#include "targets/x86/plan.h"
#include "targets/x86/tmatmul_bench.h"
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

// A fake bench: a deterministic "time" per config (the cost model plus a hash wiggle),
// failures for chosen configs, and a log of what was prepared and measured. The tuner
// times candidates through measure_fn() (TuneOptions::measure_fn), which reads the fake.
class FakeBench final : public targets::TuningBench {
 public:
  explicit FakeBench(x86::TMatMulProblem p) : p_(p) {}
  std::set<std::string> fail_compile, fail_measure;

  Result<std::unique_ptr<targets::TuningRun>> prepare(std::string_view c) const override {
    std::lock_guard lock(mu_);
    prepared_.emplace_back(c);
    if (fail_compile.count(std::string(c))) return make_error(ErrorCode::Internal, "injected compile failure");
    auto out = std::make_unique<Fake>();
    out->c = std::string(c);
    return std::unique_ptr<targets::TuningRun>(std::move(out));
  }
  [[nodiscard]] Result<Measurement> measure(const targets::TuningRun& pr, const MeasureOptions&) const {
    const auto& f = static_cast<const Fake&>(pr);
    CHECK(!busy_.exchange(true));  // measuring runs alone
    measured_.insert(f.c);
    busy_ = false;
    if (fail_measure.count(f.c)) return make_error(ErrorCode::Unavailable, "timeout: injected");
    Measurement m;
    m.median_ns = time_of(f.c);
    m.min_ns = m.median_ns;
    m.spread = 0.001;
    m.reps = 3;
    return m;
  }
  [[nodiscard]] std::function<Result<Measurement>(const targets::TuningRun&, const MeasureOptions&)> measure_fn() const {
    return [this](const targets::TuningRun& r, const MeasureOptions& o) { return measure(r, o); };
  }
  [[nodiscard]] double time_of(const std::string& c) const {
    const std::size_t h = std::hash<std::string>{}(c);
    return x86::estimated_cost(p_, *x86::TMatMulConfig::parse(c)) * (1.0 + static_cast<double>(h % 1000) / 2000.0);
  }
  std::set<std::string> measured() const { return measured_; }

 private:
  struct Fake : targets::TuningRun {
    std::string c;
    void run(int) const override {}
  };
  x86::TMatMulProblem p_;
  mutable std::mutex mu_;
  mutable std::vector<std::string> prepared_;
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
        // amx's smallest block is one 16-row tile, padded below 16 rows.
        CHECK((c.m_block <= M || (c.variant == x86::TMatMulVariant::Amx && c.m_block == 16)));
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
  const auto space = x86::tmatmul_tuning_space(p, isa, 2);
  const auto candidates = space->candidates();
  std::set<std::string> in_space;
  for (const auto& c : candidates) in_space.insert(c.config);
  for (Strategy s : {Strategy::Exhaustive, Strategy::Random, Strategy::Halving}) {
    INFO(strategy_name(s));
    FakeBench ev(p);
    TuneOptions o;
    o.strategy = s;
    o.budget_s = 0;
    o.max_trials = 20;
    o.compile_threads = 3;
    o.measure_fn = ev.measure_fn();
    auto r = tune(*space, ev, o);
    REQUIRE(r.ok());
    CHECK(r->space_size == candidates.size());
    CHECK(r->measured <= 20);
    CHECK(ev.measured().size() <= 20);
    for (const std::string& c : ev.measured()) CHECK(in_space.count(c) == 1);
    CHECK(in_space.count(r->winner) == 1);
    CHECK(r->default_ok);
    // The winner is the fastest of what was measured (the fake is deterministic).
    for (const Trial& t : r->trials)
      if (t.ok && s != Strategy::Halving) CHECK(ev.time_of(r->winner) <= t.m.median_ns);
    CHECK(r->speedup() >= 1.0);
    CHECK(r->has_runner_up);
    CHECK(!(r->winner == r->runner_up));
  }
  // Exhaustive with no trial budget measures the whole space, and finds the true optimum.
  FakeBench ev(p);
  TuneOptions o;
  o.strategy = Strategy::Exhaustive;
  o.budget_s = 0;
  o.measure_fn = ev.measure_fn();
  auto r = tune(*space, ev, o);
  REQUIRE(r.ok());
  CHECK(r->measured == candidates.size());
  double best = 1e300;
  for (const auto& c : candidates) best = std::min(best, ev.time_of(c.config));
  CHECK(ev.time_of(r->winner) == best);
  CHECK(parse_strategy("halving") == Strategy::Halving);
  CHECK(!parse_strategy("nope"));
}

TEST_CASE("failed candidates are reported, not dropped; an all-failing search is an error") {
  const x86::TMatMulProblem p = small_problem(4);
  const x86::Isa isa = x86::Isa::Avx512Vnni;
  const auto tspace = x86::tmatmul_tuning_space(p, isa, 1);
  std::vector<std::string> space;
  for (const auto& c : tspace->candidates()) space.push_back(c.config);
  const std::string def = tspace->default_config();
  FakeBench ev(p);
  ev.fail_compile.insert(space[0] == def ? space[1] : space[0]);
  ev.fail_measure.insert(space[2] == def ? space[3] : space[2]);
  TuneOptions o;
  o.strategy = Strategy::Exhaustive;
  o.budget_s = 0;
  o.measure_fn = ev.measure_fn();
  auto r = tune(*tspace, ev, o);
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

  FakeBench all_fail(p);
  for (const auto& c : space) all_fail.fail_compile.insert(c);
  o.measure_fn = all_fail.measure_fn();
  auto none = tune(*tspace, all_fail, o);
  REQUIRE(!none.ok());
  CHECK(none.error().message.find("injected compile failure") != std::string::npos);
}

TEST_CASE("the time budget stops the search: later candidates are skipped, not failed") {
  const x86::TMatMulProblem p = small_problem(8);
  const x86::Isa isa = x86::Isa::Avx512Vnni;
  const auto space = x86::tmatmul_tuning_space(p, isa, 1);
  // Each measurement sleeps 20 ms; a 0.1 s budget allows a handful.
  struct NoOp final : targets::TuningRun {
    void run(int) const override {}
  };
  class Slow final : public targets::TuningBench {
   public:
    Result<std::unique_ptr<targets::TuningRun>> prepare(std::string_view) const override {
      return std::unique_ptr<targets::TuningRun>(std::make_unique<NoOp>());
    }
  } slow;
  int calls = 0;
  TuneOptions o;
  o.strategy = Strategy::Random;
  o.budget_s = 0.1;
  o.max_trials = 40;
  o.measure_fn = [&](const targets::TuningRun&, const MeasureOptions&) -> Result<Measurement> {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ++calls;
    return Measurement{1000.0 + calls, 1000.0, 0.0, 1};
  };
  const auto t0 = std::chrono::steady_clock::now();
  auto r = tune(*space, slow, o);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  REQUIRE(r.ok());
  CHECK(r->budget_hit);
  CHECK(calls < 40);
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
  targets::TuningBenchOptions bo;
  bo.rotate_bytes = 1 << 20;
  x86::TMatMulBench ev(p, 2, bo);
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
  const auto space = x86::tmatmul_tuning_space(p, isa, 2);
  auto r = tune(*space, ev, o);
  REQUIRE(r.ok());
  CHECK(r->failures.empty());
  CHECK(r->measured <= 12);
  CHECK(progress_calls > 0);
  CHECK(x86::validate(p, *x86::TMatMulConfig::parse(r->winner)).ok());
  CHECK(space->valid(r->winner));
  CHECK(r->default_ok);
  // A config asking more threads than the pool has fails at prepare (reported), and is
  // not valid for the space either.
  const std::string too_many = x86::default_config(p, isa, 8).str();
  CHECK(!ev.prepare(too_many).ok());
  CHECK(!ev.prepare("not a config").ok());
}

TEST_CASE("real kernels: tuning a grouped-scale tmatmul (rotated weight copies keep their groups)") {
  x86::TMatMulProblem p = small_problem(1);
  p.K = 300;  // groups of 256 and 44
  p.w_scale_per_channel = false;
  p.w_scale_group = 256;
  targets::TuningBenchOptions bo;
  bo.rotate_bytes = 1 << 20;  // several copies of the packed weights
  x86::TMatMulBench ev(p, 1, bo);
  TuneOptions o;
  o.strategy = Strategy::Halving;
  o.budget_s = 5;
  o.max_trials = 6;
  o.measure.max_reps = 4;
  const auto space = x86::tmatmul_tuning_space(p, host_isa(), 1);
  auto r = tune(*space, ev, o);
  REQUIRE(r.ok());
  CHECK(r->failures.empty());
  CHECK(x86::validate(p, *x86::TMatMulConfig::parse(r->winner)).ok());
}

TEST_CASE("records round-trip through the cache; decide: exact, nearest, default") {
  TempDir dir;
  cache::CacheOptions co;
  co.dir = dir.path() + "/cache";
  auto disk = cache::DiskCache::open(co);
  REQUIRE(disk.ok());
  const x86::Isa isa = x86::Isa::Avx512Vnni;
  const x86::TMatMulProblem p8 = small_problem(8);
  const auto s8 = x86::tmatmul_tuning_space(p8, isa, 2);

  TuneResult r;
  x86::TMatMulConfig winner = x86::default_config(p8, isa, 2), runner_up;
  winner.k_unroll = 4;
  winner.m_block = 3;
  runner_up = winner;
  runner_up.k_unroll = 1;
  r.winner = winner.str();
  r.winner_m = Measurement{1000, 990, 0.01, 5};
  r.has_runner_up = true;
  r.runner_up = runner_up.str();
  r.runner_up_m = Measurement{1100, 1090, 0.01, 5};
  r.default_config = s8->default_config();
  r.default_m = Measurement{1500, 1400, 0.01, 5};
  r.default_ok = true;
  REQUIRE(s8->valid(r.winner));
  auto stored = store_result(**disk, s8->problem(), r);
  REQUIRE(stored.ok());
  CHECK(*stored == 3);
  CHECK(*store_result(**disk, s8->problem(), r) == 0);  // append-only: nothing new

  auto recs = load_records(**disk, s8->problem());
  REQUIRE(recs.ok());
  REQUIRE(recs->size() == 3);

  Decision exact = decide(disk->get(), *s8);
  CHECK(exact.source == DecisionSource::Exact);
  CHECK(exact.config == r.winner);

  // 8 is the nearest (and only) tuned M of the family.
  const auto s16 = x86::tmatmul_tuning_space(small_problem(16), isa, 2);
  CHECK(s16->problem().family == s8->problem().family);
  Decision near = decide(disk->get(), *s16);
  CHECK(near.source == DecisionSource::Nearest);
  CHECK(near.tuned_m == 8);
  CHECK(near.config == r.winner);

  x86::TMatMulProblem other = small_problem(8);
  other.N = 160;  // another family: no records
  const auto so = x86::tmatmul_tuning_space(other, isa, 2);
  Decision def = decide(disk->get(), *so);
  CHECK(def.source == DecisionSource::Default);
  CHECK(def.config == x86::default_config(other, isa, 2).str());
  CHECK(decide(nullptr, *s8).source == DecisionSource::Default);
  // Records measured with another thread count never apply (the key rule's test below).
  CHECK(decide(disk->get(), *x86::tmatmul_tuning_space(p8, isa, 1)).source == DecisionSource::Default);
  // A record the space does not accept (a config for more threads) is never chosen.
  std::vector<Record> foreign = {{8, x86::default_config(p8, isa, 8).str(), 1, "winner", conditions_of(s8->problem())}};
  if (x86::default_config(p8, isa, 8).threads > 2) CHECK(decide(foreign, *s8).source == DecisionSource::Default);

  // Records merge into another cache and decide the same there.
  cache::CacheOptions co2;
  co2.dir = dir.path() + "/other";
  auto disk2 = cache::DiskCache::open(co2);
  REQUIRE(disk2.ok());
  auto merged = (*disk2)->merge(co.dir);
  REQUIRE(merged.ok());
  CHECK(merged->copied == 3);
  CHECK(decide(disk2->get(), *s8).config == r.winner);

  // Nearest prefers the closer M in log scale, ties the smaller (records measured under
  // the spaces' conditions: those do not depend on M).
  std::vector<Record> many;
  auto rec = [&](std::int64_t m, int ku) {
    x86::TMatMulConfig c = x86::default_config(small_problem(m), isa, 2);
    c.k_unroll = ku;
    return Record{m, c.str(), 100, "winner", conditions_of(s8->problem())};
  };
  many.push_back(rec(1, 1));
  many.push_back(rec(32, 4));
  CHECK(decide(many, *x86::tmatmul_tuning_space(small_problem(16), isa, 2)).tuned_m == 32);
  CHECK(decide(many, *x86::tmatmul_tuning_space(small_problem(2), isa, 2)).tuned_m == 1);
  Decision tie = decide(many, *x86::tmatmul_tuning_space(small_problem(4), isa, 2));  // log distances: 2 vs 3
  CHECK(tie.tuned_m == 1);
}

// What the record tests share: an empty cache, and the M = 8 problem's spaces on
// avx512_vnni with 2 and 1 threads.
struct RecordsFixture {
  TempDir dir;
  std::unique_ptr<cache::DiskCache> disk;
  const x86::Isa isa = x86::Isa::Avx512Vnni;
  const x86::TMatMulProblem p8 = small_problem(8);
  const std::unique_ptr<targets::TuningSpace> two = x86::tmatmul_tuning_space(p8, isa, 2);
  const std::unique_ptr<targets::TuningSpace> one = x86::tmatmul_tuning_space(p8, isa, 1);
  RecordsFixture() {
    cache::CacheOptions co;
    co.dir = dir.path();
    auto opened = cache::DiskCache::open(co);
    REQUIRE(opened.ok());
    disk = std::move(*opened);
  }
};

TEST_CASE_FIXTURE(RecordsFixture,
                  "records: the key holds the problem, the record its conditions; a mismatch is skipped with why") {
  const auto avx2 = x86::tmatmul_tuning_space(p8, x86::Isa::Avx2, 2);
  // One key for the problem, whatever the conditions; the conditions tell them apart.
  CHECK(problem_key(two->problem()).hex() == problem_key(one->problem()).hex());
  CHECK(problem_key(two->problem()).hex() == problem_key(avx2->problem()).hex());
  x86::TMatMulProblem wider = p8;
  wider.N = 160;
  CHECK(problem_key(two->problem()).hex() != problem_key(x86::tmatmul_tuning_space(wider, isa, 2)->problem()).hex());
  const Conditions c2 = conditions_of(two->problem());
  CHECK(c2.at("threads") == "2");
  CHECK(c2.at("isa") == "avx512_vnni");
  CHECK(c2.count("cpu") == 1);
  CHECK(c2.at("version") == cache::ternjit_version());
  CHECK(conditions_of(one->problem()).at("threads") == "1");

  // Tuned with 1 thread: applies to a 1-thread engine, skipped by a 2-thread one.
  TuneResult r;
  r.winner = one->default_config();
  r.winner_m = Measurement{1000, 990, 0.01, 5};
  REQUIRE(store_result(*disk, one->problem(), r).ok());
  Decision d1 = decide(disk.get(), *one);
  CHECK(d1.source == DecisionSource::Exact);
  CHECK(d1.applicable == 1);
  CHECK(d1.skipped.empty());
  Decision d2 = decide(disk.get(), *two);
  CHECK(d2.source == DecisionSource::Default);
  CHECK(d2.applicable == 0);
  REQUIRE(d2.skipped.size() == 1);
  CHECK(d2.skipped[0].why == "measured with threads=1; here threads=2");
  CHECK(d2.skipped[0].record.config == r.winner);
  CHECK(!d2.skipped[0].record.legacy);
  // Several conditions differ: each is named.
  Decision da = decide(disk.get(), *avx2);
  REQUIRE(da.skipped.size() == 1);
  CHECK(da.skipped[0].why == "measured with isa=avx512_vnni threads=1; here isa=avx2 threads=2");

  // The same config tuned with 2 threads is another record (the conditions are in its
  // key): both are kept, each applies to its own engine.
  TuneResult r2 = r;
  REQUIRE(store_result(*disk, two->problem(), r2).ok());
  CHECK(*store_result(*disk, two->problem(), r2) == 0);
  Decision both = decide(disk.get(), *two);
  CHECK(both.source == DecisionSource::Exact);
  CHECK(both.applicable == 1);
  CHECK(both.skipped.size() == 1);

  // Another machine or build: skipped, saying which.
  Record foreign{8, two->default_config(), 5, "winner", c2, false};
  foreign.conditions["cpu"] = "Some Other CPU";
  foreign.conditions["version"] = "0.0.1";
  CHECK(mismatch(foreign, c2, *two) == "measured with cpu=Some Other CPU version=0.0.1; here cpu=" + c2.at("cpu") +
                                           " version=" + std::string(cache::ternjit_version()));
  // Same conditions, a config the space refuses: skipped too, with that reason.
  Record refused{8, x86::default_config(p8, isa, 2).str(), 5, "winner", c2, false};
  refused.config.replace(refused.config.find("isa=avx512_vnni"), 15, "isa=avx2");
  CHECK(mismatch(refused, c2, *two) == "config not valid for M=8");
  Decision dd = decide(std::vector<Record>{foreign, refused}, *two);
  CHECK(dd.source == DecisionSource::Default);
  CHECK(dd.skipped.size() == 2);
}

TEST_CASE_FIXTURE(RecordsFixture,
                  "records: the older format is read under its own conditions and only reported under others") {
  // What the format before conditions wrote: key "tuning_family" (op, family with
  // ";isa=..;threads=.." appended, device, version), config "M=<m>;<config>".
  const cache::Key old_one = legacy_family_key(one->problem());
  CHECK(old_one.kind() == "tuning_family");
  CHECK(std::string(old_one.field("family")) == one->problem().family + ";isa=avx512_vnni;threads=1");
  x86::TMatMulConfig w = *x86::TMatMulConfig::parse(one->default_config());
  w.k_unroll = w.k_unroll == 1 ? 2 : 1;
  REQUIRE(one->valid(w.str()));
  const std::string json = R"({"M":8,"median_ns":900,"spread":0.01,"reps":5,"role":"winner"})";
  REQUIRE(*disk->put_record(old_one, "M=8;" + w.str(), json));
  REQUIRE(*disk->put_record(old_one, "M=oops;" + w.str(), json));  // undecodable: ignored

  // Its own conditions: read and applied, as before.
  auto recs = load_records(*disk, one->problem());
  REQUIRE(recs.ok());
  REQUIRE(recs->size() == 1);
  CHECK((*recs)[0].legacy);
  CHECK((*recs)[0].median_ns == 900);
  Decision d1 = decide(disk.get(), *one);
  CHECK(d1.source == DecisionSource::Exact);
  CHECK(d1.config == w.str());

  // Other conditions: never applied; an explaining scope finds and skips it with why.
  Decision d2 = decide(disk.get(), *two);
  CHECK(d2.source == DecisionSource::Default);
  CHECK(d2.skipped.empty());
  Decision e2 = decide(disk.get(), *two, RecordScope::Explain);
  CHECK(e2.source == DecisionSource::Default);
  REQUIRE(e2.skipped.size() == 1);
  CHECK(e2.skipped[0].record.legacy);
  CHECK(e2.skipped[0].record.config == w.str());
  CHECK(e2.skipped[0].why == "measured with threads=1; here threads=2");
  // Another problem's older records (a family that only starts like ours) are not ours.
  x86::TMatMulProblem grouped = p8;
  grouped.w_scale_group = 64;  // its family text is ours + ";group=64"
  const auto g = x86::tmatmul_tuning_space(grouped, isa, 2);
  REQUIRE(g->problem().family == two->problem().family + ";group=64");
  REQUIRE(*disk->put_record(legacy_family_key(g->problem()), "M=8;" + w.str(), json));
  CHECK(decide(disk.get(), *two, RecordScope::Explain).skipped.size() == 1);
  // Undecodable records of the current format are ignored, never applied.
  REQUIRE(*disk->put_record(problem_key(two->problem()), "M=8;isa=avx512_vnni;" + w.str(), json));
  REQUIRE(*disk->put_record(problem_key(two->problem()), "M=8;bad name=1;config=" + w.str(), json));
  CHECK(decide(disk.get(), *two).applicable == 0);
}

TEST_CASE("dispatch: the x86 target asks the record source for each tmatmul at load (exact, nearest, default)") {
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
  targets::CompileOptions copts;
  copts.threads = 1;
  auto specialized = [&](std::int64_t M) {
    auto spec = passes::specialize_function(*m, "L.forward", {{"M", M}, {"K", 128}, {"N", 64}}, true);
    REQUIRE(spec.ok());
    passes::PipelineOptions po;
    REQUIRE(passes::run_pipeline(*spec, passes::default_pipeline(passes::OptLevel::O2), po).ok());
    return std::move(*spec);
  };
  // The spaces the target declares are the ones load() asks about.
  const ir::Module m4 = specialized(4);
  auto spaces = target->tuning_spaces(m4, "L.forward", copts);
  REQUIRE(spaces.ok());
  REQUIRE(spaces->size() == 1);
  const targets::TuningSpace& s4 = *(*spaces)[0];
  CHECK(s4.problem().op == "x86.tmatmul");
  CHECK(s4.problem().m == 4);
  CHECK(s4.problem().family.find("K=128;N=64") == 0);

  TempDir dir;
  cache::CacheOptions co;
  co.dir = dir.path();
  auto disk = cache::DiskCache::open(co);
  REQUIRE(disk.ok());
  std::vector<std::pair<Decision, bool>> seen;
  DispatchOptions d;
  d.disk = [&] { return disk->get(); };
  d.on_decision = [&](const targets::TuningProblem&, const Decision& dec, bool now) { seen.emplace_back(dec, now); };
  // Loads the kernel for M through the target with a RecordSource of `d`; returns the
  // configuration the plan used.
  ir::ParamValues params;
  params.values.emplace("L.w", ir::StoredTensor::random(ElemKind::T2, {128, 64}, 1));
  params.values.emplace("L.w_scale", ir::StoredTensor::random(ElemKind::F32, {64}, 2));
  auto load = [&](std::int64_t M) {
    const ir::Module spec = specialized(M);
    auto a = target->compile(spec, "L.forward", copts);
    REQUIRE(a.ok());
    const RecordSource source(d);
    const auto parsed = targets::parse_artifact_module(*a);
    REQUIRE(parsed.ok());
    x86::PlanOptions po;
    po.isa = *x86::parse_isa(a->metadata.at("isa"));
    po.tuning = d.mode == targets::TuningMode::Off ? nullptr : &source;
    auto plan = x86::Plan::build(*parsed, "L.forward", params, po, nullptr);
    REQUIRE(plan.ok());
    // The same through Target::load (the engine's path) must succeed too; `seen` keeps
    // the plan's decision as its last entry.
    const auto decisions = seen;
    targets::LoadContext ctx;
    ctx.params = &params;
    ctx.tuning = d.mode;
    ctx.tuning_source = &source;
    REQUIRE(target->load(*a, ctx).ok());
    seen = decisions;
    return (*plan)->configs().at("tmatmul.0");
  };

  // No records: the default.
  CHECK(load(4) == s4.default_config());
  REQUIRE(!seen.empty());
  CHECK(seen.back().first.source == DecisionSource::Default);

  // A record for M = 4: exact for M = 4, nearest for M = 8.
  TuneResult r;
  x86::TMatMulConfig w = *x86::TMatMulConfig::parse(s4.default_config());
  w.k_unroll = w.k_unroll == 1 ? 2 : 1;
  r.winner = w.str();
  r.winner_m = Measurement{10, 10, 0, 1};
  REQUIRE(s4.valid(r.winner));
  REQUIRE(store_result(**disk, s4.problem(), r).ok());
  CHECK(load(4) == r.winner);
  CHECK(seen.back().first.source == DecisionSource::Exact);
  CHECK(load(8) == r.winner);
  CHECK(seen.back().first.source == DecisionSource::Nearest);
  // Off: the default, records or not.
  d.mode = targets::TuningMode::Off;
  CHECK(load(8) == x86::default_config(x86::TMatMulProblem{8, 128, 64, ElemKind::I8, ElemKind::F32, true, true, true},
                                       *x86::parse_isa(target->compile(specialized(8), "L.forward", copts)->metadata.at("isa")),
                                       1)
                       .str());
  // Tune: tunes the shape without an exact record, stores it, then it is exact.
  d.mode = targets::TuningMode::Tune;
  d.tune_budget_s = 2;
  d.tune_max_trials = 6;
  const std::string tuned = load(2);
  CHECK(seen.back().second);
  CHECK(seen.back().first.source == DecisionSource::Exact);
  d.mode = targets::TuningMode::Cached;
  CHECK(load(2) == tuned);
  CHECK(seen.back().first.source == DecisionSource::Exact);
  CHECK(!seen.back().second);
}
