// SPDX-License-Identifier: Apache-2.0
// autotune_bench.cpp - the autotuner's quality bar: halving vs the exhaustive optimum vs the default heuristic.
//
// For each x86 benchmark shape (K, N from bench/x86_tmatmul_bench.cpp, M in {1, 8, 32})
// one iteration runs, on the host's best ISA with `t` threads:
//   1. an exhaustive search over the whole declared space (tmatmul_space.h): the optimum;
//   2. a successive-halving search limited to 15% of the space (no time budget): "tuned";
//   3. a head-to-head re-measurement of optimum, tuned and default, interleaved over
//      5 rounds (the best median of each), so the comparison is not skewed by drift
//      between the searches.
// Counters: space (configs), measured_pct (halving's distinct configs / space, %),
// tuned_vs_opt_pct ((t_tuned / t_opt - 1) * 100; the bar: <= 3), speedup_vs_default
// (t_default / t_tuned) and opt_vs_default (t_default / t_opt). A markdown table of the
// same numbers is printed at the end. Without --benchmark_filter a quick subset runs
// (kQuickFilter); --benchmark_filter=. runs every shape (tens of minutes).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "autotune/measure.h"
#include "autotune/tuner.h"
#include "targets/x86/isa.h"
#include "targets/x86/tmatmul_space.h"

namespace {

using namespace ternjit;
using namespace ternjit::autotune;
namespace x86 = ternjit::targets::x86;

constexpr const char* kQuickFilter = "K2560_N2560/M(1|8|32)/t1/";

struct Row {
  std::string name;
  std::size_t space = 0, measured = 0;
  double opt_ms = 0, tuned_ms = 0, default_ms = 0;
  std::string opt, tuned, def;
};
std::vector<Row>& rows() {
  static std::vector<Row> r;  // the summary table (benchmarks run on one thread)
  return r;
}

double best_median(const targets::TuningRun& run, const MeasureOptions& mo, double current) {
  auto m = measure([&](int i) { run.run(i); }, mo);
  if (!m.ok()) return current;
  return current == 0 ? m->median_ns : std::min(current, m->median_ns);
}

void BM_Quality(benchmark::State& state, std::string name, std::int64_t K, std::int64_t N, std::int64_t M,
                int threads) {
  const auto isa = x86::best_isa(x86::host_isas());
  if (!isa) {
    state.SkipWithError("no x86 code path runs here");
    return;
  }
  x86::TMatMulProblem p;
  p.M = M;
  p.K = K;
  p.N = N;
  p.x_scale = p.w_scale = p.w_scale_per_channel = true;  // BitLinear's epilogue
  const auto space = x86::tmatmul_tuning_space(p, *isa, threads);
  const std::string def = space->default_config();
  const std::size_t space_size = space->candidates().size();
  auto bench = space->bench({});
  if (!bench.ok()) {
    state.SkipWithError(bench.error().message.c_str());
    return;
  }
  const targets::TuningBench& ev = **bench;
  MeasureOptions mo;
  mo.warmup = 1;
  mo.min_reps = 5;
  mo.max_reps = 15;
  mo.max_seconds = 0.3;
  Row row;
  for (auto _ : state) {
    TuneOptions ex;
    ex.strategy = Strategy::Exhaustive;
    ex.budget_s = 0;
    ex.measure = mo;
    auto opt = tune(*space, ev, ex);
    TuneOptions hv;
    hv.strategy = Strategy::Halving;
    hv.budget_s = 0;
    hv.max_trials = static_cast<int>(static_cast<double>(space_size) * 0.15);
    hv.measure = mo;
    auto tuned = tune(*space, ev, hv);
    if (!opt.ok() || !tuned.ok()) {
      state.SkipWithError("a search failed");
      return;
    }
    // Head to head, interleaved.
    auto po = ev.prepare(opt->winner);
    auto pt = ev.prepare(tuned->winner);
    auto pd = ev.prepare(def);
    if (!po.ok() || !pt.ok() || !pd.ok()) {
      state.SkipWithError("prepare failed");
      return;
    }
    MeasureOptions full = mo;
    full.max_reps = 30;
    double to = 0, tt = 0, td = 0;
    for (int r = 0; r < 5; ++r) {
      to = best_median(**po, full, to);
      tt = best_median(**pt, full, tt);
      td = best_median(**pd, full, td);
    }
    row.space = space_size;
    row.measured = tuned->measured;
    row.opt_ms = to / 1e6;
    row.tuned_ms = tt / 1e6;
    row.default_ms = td / 1e6;
    row.opt = opt->winner;
    row.tuned = tuned->winner;
    row.def = def;
  }
  state.counters["space"] = static_cast<double>(row.space);
  state.counters["measured_pct"] = 100.0 * static_cast<double>(row.measured) / static_cast<double>(row.space);
  state.counters["tuned_vs_opt_pct"] = (row.tuned_ms / row.opt_ms - 1.0) * 100.0;
  state.counters["speedup_vs_default"] = row.default_ms / row.tuned_ms;
  state.counters["opt_vs_default"] = row.default_ms / row.opt_ms;
  row.name = std::move(name);
  rows().push_back(row);
}

void register_all() {
  struct Shape {
    std::int64_t K, N;
  };
  constexpr Shape kShapes[] = {{2560, 2560}, {2560, 6912}, {6912, 2560}, {4096, 4096}};
  for (const Shape& s : kShapes)
    for (std::int64_t M : {1, 8, 32})
      for (int t : {1, 2}) {
        const std::string name = "tune/K" + std::to_string(s.K) + "_N" + std::to_string(s.N) + "/M" +
                                 std::to_string(M) + "/t" + std::to_string(t);
        benchmark::RegisterBenchmark(name.c_str(), BM_Quality, name, s.K, s.N, M, t)
            ->Iterations(1)
            ->Unit(benchmark::kSecond);
      }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> args(argv, argv + argc);
  bool filtered = false;
  for (int i = 1; i < argc; ++i) filtered = filtered || std::string(argv[i]).rfind("--benchmark_filter", 0) == 0;
  std::string quick = std::string("--benchmark_filter=") + kQuickFilter;
  if (!filtered) args.push_back(quick.data());
  int n = static_cast<int>(args.size());
  benchmark::Initialize(&n, args.data());
  register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  std::printf(
      "\n| shape | space | measured | opt ms | tuned ms | default ms | tuned vs opt | speedup vs default | tuned "
      "config |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|\n");
  for (const Row& r : rows())
    std::printf("| %s | %zu | %zu (%.1f%%) | %.4f | %.4f | %.4f | %+.1f%% | %.2fx | %s |\n", r.name.c_str(), r.space,
                r.measured, 100.0 * static_cast<double>(r.measured) / static_cast<double>(r.space), r.opt_ms,
                r.tuned_ms, r.default_ms, (r.tuned_ms / r.opt_ms - 1.0) * 100.0, r.default_ms / r.tuned_ms,
                r.tuned.c_str());
  return 0;
}
