// SPDX-License-Identifier: Apache-2.0
// x86_scaling_bench.cpp - two cores: the x86 ternary matmul on 1 and 2 threads beside 1- and 2-thread ceilings.
//
// One benchmark per case `BM_Scaling/K<k>_N<n>/M<m>/<hot|cold>`. Every iteration calls,
// in turn (interleaved, so the machine's load falls on all of them alike):
//   probe_t1, probe_t2    streaming read of the case's 2-bit weight bytes (stream_sum of
//                         targets/x86/ceilings.h) inline, and split in two page-aligned
//                         halves on a 2-thread oneTBB arena
//   tern_t1               TMatMulKernel, default_config for 1 thread, inline
//   tern_t2_tbb           the same problem, default_config for 2 threads, on the oneTBB
//                         arena (the engine's default pool, jit/thread_pool.h)
//   tern_t2_host          the same 2-thread kernel on a host's pool: an OpenMP parallel
//                         for (what EngineOptions::parallel_pool hands a kernel when the
//                         host app owns its threads, e.g. a framework on OpenMP)
//   plan_t2_tbb, plan_t2_host          (hot cases) the same layer as an x86 Plan of one
//                         tmatmul step (what a Program runs), 2 threads, on the arena /
//                         the host pool, with PlanOptions::adaptive_parallel (the engine's
//                         default: a step whose parallel runs measure slower runs inline)
//   plan_t2_tbb_off, plan_t2_host_off  the same plans with adaptive_parallel off (every
//                         call forks, the behaviour before it)
// `cold` rotates through >= 512 MiB of weight copies (DRAM), `hot` reuses one.
// Counters (medians over the interleaved calls, us; `_min` the fastest):
//   scaling_tbb / scaling_host = tern_t1 / tern_t2_*      (goal >= 1.85 at M >= 8)
//   plan_tbb / plan_host (_off) = tern_t1 / plan_t2_* (_off)  (goal >= 1 everywhere)
//   vs_probe2 = probe_t2 / tern_t2_tbb                     (goal >= 0.95 at M = 1 cold)
//   probe_scaling = probe_t1 / probe_t2                    (how much a second core reads)
//   vs_dot1 / vs_dot2 = the case's operations at the int8-dot ceiling of 1 / 2 threads
//                       (measure_int8_dot, timed at setup) / tern_t1 / tern_t2_tbb
// The int8-dot ceiling counts one multiply-add per weight and activation; ternjit's
// kernels do the same number of u8 x s8 products, so vs_dot is the fraction of the
// compute peak reached.
#include <benchmark/benchmark.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/tbb_parallel.h"
#include "ir/interpret.h"
#include "ir/parse.h"
#include "targets/x86/ceilings.h"
#include "targets/x86/isa.h"
#include "targets/x86/parallel.h"
#include "targets/x86/plan.h"
#include "targets/x86/tmatmul.h"

namespace {

using namespace ternjit;
using namespace ternjit::targets::x86;
using ternjit::targets::CeilingOptions;
using ternjit::targets::Parallel;

constexpr std::size_t kColdBytes = std::size_t{512} << 20;

struct Case {
  std::int64_t K, N, M;
  bool cold;
  [[nodiscard]] std::string name() const {
    return "K" + std::to_string(K) + "_N" + std::to_string(N) + "/M" + std::to_string(M) + (cold ? "/cold" : "/hot");
  }
  [[nodiscard]] double macs() const { return static_cast<double>(M) * static_cast<double>(K) * static_cast<double>(N); }
};

// The cases: M = 1 cold on the large shapes (bandwidth bound), M = 1 hot on the small
// layer (fork/join overhead: ~30 us a call), M = 8..128 hot (compute bound).
const Case kCases[] = {
    {4096, 14336, 1, true}, {14336, 4096, 1, true}, {2560, 6912, 1, true}, {2560, 2560, 1, false},
    {2560, 6912, 1, false}, {2560, 2560, 8, false}, {2560, 6912, 8, false}, {4096, 4096, 32, false},
    {2560, 6912, 128, false}, {4096, 14336, 128, false},
};

std::uint64_t splitmix(std::uint64_t& s) {
  std::uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// A 64-byte aligned buffer.
struct Aligned {
  struct Free {
    void operator()(std::uint8_t* p) const { std::free(p); }
  };
  std::unique_ptr<std::uint8_t, Free> ptr;
  std::size_t size = 0;
  explicit Aligned(std::size_t n) : ptr(static_cast<std::uint8_t*>(std::aligned_alloc(64, (n + 63) / 64 * 64))), size(n) {}
};

// The host pool stand-in: an OpenMP parallel for over the items, 2 threads, static.
void omp_run(void*, Parallel::TaskFn task, void* context, std::int64_t n) {
#pragma omp parallel for schedule(static) num_threads(2)
  for (std::int64_t i = 0; i < n; ++i) task(context, i);
}
Parallel omp_parallel() { return Parallel{2, &omp_run, nullptr}; }

// One 2-bit BitLinear kernel (int8 x with x_scale, per-column w_scale, f32 out) and its
// weight copies.
struct Kernel {
  std::unique_ptr<TMatMulKernel> kernel;
  std::vector<PackedWeights> weights;
};

struct Data {
  std::string error;
  Kernel t1, t2;
  std::vector<std::int8_t> x;
  std::vector<float> x_scale, w_scale, y;
  Aligned probe{0};
  std::size_t probe_bytes = 0, probe_stride = 0, probe_copies = 0;
  double dot1_ns = 0, dot2_ns = 0;  // the case's MACs at the int8-dot ceiling
  std::string config1, config2;
  // Hot cases: the layer as plans of 2 threads, adaptive on / off (one pack shared).
  std::unique_ptr<PackCache> packs = std::make_unique<PackCache>();
  // One adaptive plan per pool (a plan's choice follows the pool it runs on, as a
  // Program's does); the plan without it keeps no state and serves both.
  std::unique_ptr<Plan> plan_tbb, plan_host, plan_off;
};

// The case's layer as IR: int8 x and its row scale in, the tmatmul with the per-column
// weight scale (the kernel rows' problem), one plan step.
std::string layer_ir(const Case& c) {
  const std::string m = std::to_string(c.M), k = std::to_string(c.K), n = std::to_string(c.N);
  return "param @w : t2[" + k + ", " + n + "]\nparam @ws : f32[" + n + "]\nfunc @f(%x: i8[" + m + ", " + k +
         "], %xs: f32[" + m + ", 1]) -> f32[" + m + ", " + n + "] {\n^entry:\n  %w = param @w : t2[" + k + ", " + n +
         "]\n  %ws = param @ws : f32[" + n + "]\n  %y = tmatmul %x, %w, %xs, %ws {x_scale = true, w_scale = true, " +
         "bias = false, residual = false, act = none} : f32[" + m + ", " + n + "]\n  ret %y\n}\n";
}

// Builds plan_tbb / plan_host / plan_off of a hot case; an error message or "".
std::string build_plans(const Case& c, Isa isa, const std::vector<std::int8_t>& w, const std::vector<float>& ws,
                        Data& d) {
  auto m = ir::parse_module(layer_ir(c), "layer.tir");
  if (!m.ok()) return "layer ir: " + m.error().message;
  ir::ParamValues params;
  auto wt = ir::StoredTensor::from_ternary({c.K, c.N}, w);
  if (!wt.ok()) return "weights: " + wt.error().message;
  params.values.emplace("w", std::move(wt).value());
  const auto* wsb = reinterpret_cast<const std::uint8_t*>(ws.data());
  auto st = ir::StoredTensor::view(ElemKind::F32, {c.N}, ir::SharedBytes::copy_of({wsb, ws.size() * 4}));
  if (!st.ok()) return "scales: " + st.error().message;
  params.values.emplace("ws", std::move(st).value());
  for (std::unique_ptr<Plan>* slot : {&d.plan_tbb, &d.plan_host, &d.plan_off}) {
    PlanOptions o;
    o.isa = isa;
    o.threads = 2;
    o.adaptive_parallel = slot != &d.plan_off;
    auto plan = Plan::build(m.value(), "f", params, o, d.packs.get());
    if (!plan.ok()) return "plan: " + plan.error().message;
    *slot = std::move(plan).value();
  }
  return "";
}

Result<Kernel> make_kernel(const Case& c, Isa isa, int threads, const std::vector<std::int8_t>& w) {
  TMatMulProblem p;
  p.M = c.M;
  p.K = c.K;
  p.N = c.N;
  p.x_kind = ElemKind::I8;
  p.out_kind = ElemKind::F32;
  p.x_scale = true;
  p.w_scale = true;
  p.w_scale_per_channel = true;
  auto k = TMatMulKernel::create(p, default_config(p, isa, threads));
  if (!k.ok()) return k.error();
  Kernel out;
  out.kernel = std::move(k.value());
  auto packed = out.kernel->pack(w);
  if (!packed.ok()) return packed.error();
  const std::size_t copies = c.cold ? std::max<std::size_t>(2, (kColdBytes + packed->size - 1) / packed->size) : 1;
  out.weights.push_back(std::move(packed.value()));
  for (std::size_t i = 1; i < copies; ++i) out.weights.push_back(aligned_copy(out.weights[0]));
  return out;
}

Data build(const Case& c) {
  Data d;
  const std::optional<Isa> isa = best_isa(host_isas());
  if (!isa) {
    d.error = "host runs no x86 kernel path (needs AVX2)";
    return d;
  }
  std::uint64_t s = 7;
  std::vector<std::int8_t> w(static_cast<std::size_t>(c.K * c.N));
  for (auto& v : w) v = static_cast<std::int8_t>(static_cast<int>(splitmix(s) % 3) - 1);
  auto k1 = make_kernel(c, *isa, 1, w);
  auto k2 = make_kernel(c, *isa, 2, w);
  if (!k1.ok() || !k2.ok()) {
    d.error = "kernel: " + (!k1.ok() ? k1.error().message : k2.error().message);
    return d;
  }
  d.t1 = std::move(k1.value());
  d.t2 = std::move(k2.value());
  d.config1 = d.t1.kernel->config().str();
  d.config2 = d.t2.kernel->config().str();
  d.x.resize(static_cast<std::size_t>(c.M * c.K));
  for (auto& v : d.x) v = static_cast<std::int8_t>(static_cast<int>(splitmix(s) % 255) - 127);
  d.x_scale.assign(static_cast<std::size_t>(c.M), 0.01f);
  d.w_scale.assign(static_cast<std::size_t>(c.N), 1.0f);
  d.y.assign(static_cast<std::size_t>(c.M * c.N), 0.0f);
  if (!c.cold) {
    d.error = build_plans(c, *isa, w, d.w_scale, d);
    if (!d.error.empty()) return d;
  }
  // The probe reads the 2-bit bytes of the case (K*N/4), rotating like the kernel.
  d.probe_bytes = static_cast<std::size_t>(c.K * c.N / 4);
  d.probe_stride = (d.probe_bytes + 4095) / 4096 * 4096;
  d.probe_copies = c.cold ? std::max<std::size_t>(2, (kColdBytes + d.probe_bytes - 1) / d.probe_bytes) : 1;
  d.probe = Aligned(d.probe_stride * d.probe_copies);
  for (std::size_t i = 0; i < d.probe.size; i += 8) {
    const std::uint64_t v = splitmix(s);
    std::memcpy(d.probe.ptr.get() + i, &v, std::min<std::size_t>(8, d.probe.size - i));
  }
  // The int8-dot ceilings, 1 and 2 threads (GOPS counts 2 per multiply-add).
  if (auto dot = dot_ceiling_isa(*isa)) {
    CeilingOptions o;
    auto r1 = measure_int8_dot(Parallel{}, *dot, o);
    auto r2 = measure_int8_dot(bench::parallel_for_threads(2), *dot, o);
    if (r1.ok() && r1->best_rate() > 0) d.dot1_ns = 2.0 * c.macs() / r1->best_rate();
    if (r2.ok() && r2->best_rate() > 0) d.dot2_ns = 2.0 * c.macs() / r2->best_rate();
  }
  return d;
}

std::uint64_t probe_once(const Data& d, std::size_t it, const Parallel& par) {
  const std::uint8_t* base = d.probe.ptr.get() + (it % d.probe_copies) * d.probe_stride;
  const std::int64_t chunks = par.threads;
  const std::size_t chunk = (d.probe_bytes / static_cast<std::size_t>(chunks) + 4095) / 4096 * 4096;
  std::uint64_t sums[2] = {0, 0};
  par.for_each(chunks, [&](std::int64_t t) {
    const std::size_t lo = std::min(d.probe_bytes, static_cast<std::size_t>(t) * chunk);
    const std::size_t hi = std::min(d.probe_bytes, lo + chunk);
    sums[t] += stream_sum(base + lo, hi - lo);
  });
  return sums[0] + sums[1];
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
double minimum(const std::vector<double>& v) { return v.empty() ? 0 : *std::min_element(v.begin(), v.end()); }

void BM_Scaling(benchmark::State& state, Case c) {
  static std::string key;
  static std::unique_ptr<Data> slot;
  if (!slot || key != c.name()) {
    slot.reset();
    slot = std::make_unique<Data>(build(c));
    key = c.name();
  }
  Data& d = *slot;
  if (!d.error.empty()) {
    state.SkipWithError(d.error.c_str());
    return;
  }
  const Parallel tbb2 = bench::parallel_for_threads(2);
  const Parallel host2 = omp_parallel();
  enum { kProbe1, kProbe2, kT1, kT2Tbb, kT2Host, kPlanTbbOff, kPlanTbb, kPlanHostOff, kPlanHost, kRows };
  std::vector<double> us[kRows];
  TMatMulArgs args;
  args.x = d.x.data();
  args.x_scale = d.x_scale.data();
  args.w_scale = d.w_scale.data();
  args.y = d.y.data();
  std::uint64_t sink = 0;
  std::size_t it = 0;
  auto timed = [&](int row, auto&& f) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    us[row].push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  };
  for (auto _ : state) {
    // Rows sharing a buffer read different copies (2 it, 2 it + 1): a cold row never
    // reads the copy another row just pulled into the cache.
    timed(kProbe1, [&] { sink += probe_once(d, 2 * it, Parallel{}); });
    timed(kProbe2, [&] { sink += probe_once(d, 2 * it + 1, tbb2); });
    timed(kT1, [&] {
      args.w = &d.t1.weights[it % d.t1.weights.size()];
      d.t1.kernel->run(args, Parallel{});
    });
    timed(kT2Tbb, [&] {
      args.w = &d.t2.weights[(2 * it) % d.t2.weights.size()];
      d.t2.kernel->run(args, tbb2);
    });
    timed(kT2Host, [&] {
      args.w = &d.t2.weights[(2 * it + 1) % d.t2.weights.size()];
      d.t2.kernel->run(args, host2);
    });
    if (d.plan_off) {
      void* bufs[] = {d.x.data(), d.x_scale.data(), d.y.data()};
      auto plan_row = [&](int row, const Plan& plan, const Parallel& par) {
        timed(row, [&] {
          if (!plan.run(bufs, par).ok()) state.SkipWithError("plan run failed");
        });
      };
      plan_row(kPlanTbbOff, *d.plan_off, tbb2);
      plan_row(kPlanTbb, *d.plan_tbb, tbb2);
      plan_row(kPlanHostOff, *d.plan_off, host2);
      plan_row(kPlanHost, *d.plan_host, host2);
    }
    benchmark::ClobberMemory();
    ++it;
  }
  benchmark::DoNotOptimize(sink);
  const char* names[kRows] = {"probe_t1",        "probe_t2",    "tern_t1",          "tern_t2_tbb", "tern_t2_host",
                              "plan_t2_tbb_off", "plan_t2_tbb", "plan_t2_host_off", "plan_t2_host"};
  double med[kRows];
  for (int r = 0; r < kRows; ++r) {
    med[r] = median(us[r]);
    if (us[r].empty()) continue;  // the plan rows of a cold case
    state.counters[std::string(names[r]) + "_us"] = med[r];
    state.counters[std::string(names[r]) + "_min"] = minimum(us[r]);
  }
  state.counters["scaling_tbb"] = med[kT1] / med[kT2Tbb];
  state.counters["scaling_host"] = med[kT1] / med[kT2Host];
  if (d.plan_off) {
    state.counters["plan_tbb"] = med[kT1] / med[kPlanTbb];
    state.counters["plan_tbb_off"] = med[kT1] / med[kPlanTbbOff];
    state.counters["plan_host"] = med[kT1] / med[kPlanHost];
    state.counters["plan_host_off"] = med[kT1] / med[kPlanHostOff];
  }
  state.counters["probe_scaling"] = med[kProbe1] / med[kProbe2];
  state.counters["vs_probe2"] = med[kProbe2] / med[kT2Tbb];
  if (d.dot1_ns > 0) state.counters["vs_dot1"] = d.dot1_ns / 1e3 / med[kT1];
  if (d.dot2_ns > 0) state.counters["vs_dot2"] = d.dot2_ns / 1e3 / med[kT2Tbb];
  state.SetLabel("t1 " + d.config1 + " | t2 " + d.config2);
}

int register_all() {
  for (const Case& c : kCases)
    benchmark::RegisterBenchmark(("BM_Scaling/" + c.name()).c_str(), BM_Scaling, c)->UseRealTime()->MinTime(0.5);
  return 0;
}
const int registered = register_all();

}  // namespace

int main(int argc, char** argv) {
  // libgomp's threads must not spin between the host-pool calls (they would steal the
  // second core from the oneTBB rows); OMP_WAIT_POLICY is read when libgomp loads, so
  // the default is set and the process re-executed once.
  if (std::getenv("OMP_WAIT_POLICY") == nullptr) {
    setenv("OMP_WAIT_POLICY", "passive", 1);
    execv("/proc/self/exe", argv);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("omp_wait_policy", std::getenv("OMP_WAIT_POLICY"));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  (void)registered;
  return 0;
}
