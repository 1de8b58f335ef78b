// SPDX-License-Identifier: Apache-2.0
// runtime_rows_bench.cpp - run-time rows (issue 20 part 3) and load time (part 6), baselines in the same process.
//
// Part 3, on a BitLinear 2560 x 6912 layer on x86 (docs/caching.md, "Run-time rows"):
//   BM_NewM/rows        a new M on a warm Program, served from its bucket's kernel
//                       (every bucket compiled beforehand): Program::kernel for an M
//                       never seen. Goal <= 2 us.
//   BM_NewM/specialize  the same with EngineOptions::runtime_rows = false: the old
//                       specialization of every M (pipeline, plan, code generation; the
//                       packed weights are shared). Counter x_rows = its time / rows'.
//   BM_Run/<M>/rows     one call of the run-time-rows kernel (compiled for M's bucket,
//   BM_Run/<M>/spec     run with M rows) and of the M-specialized kernel, interleaved
//                       per repetition; compare medians. Goal: rows within 5%.
// Part 6 (4096 x 14336, the ternary weight in tern2 codes as a bound file gives it):
//   BM_Pack             TMatMulKernel::pack of the weight into the x86 layout (default
//                       configuration at M = 1 and M = 8): counter GBps = tern2 bytes /
//                       time, per core (one thread). Goal >= 2 GB/s.
//   BM_FirstKernel      a fresh Program: compile the .tri, bind the weights (tern2
//                       bytes), first Program::kernel at M = 1 (plan, code, pack).
// Each new-M iteration uses an M not used before, so the supply of fresh M per bucket
// bounds the iterations (fixed below). Run:
//   build/bench/bench_runtime_rows --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ir/stored_tensor.h"
#include "ir/tensor.h"
#include "targets/x86/isa.h"
#include "targets/x86/tmatmul.h"
#include "ternjit/engine.h"

namespace {

using ternjit::ElemKind;
using ternjit::TensorView;

constexpr const char* kLayer =
    "layer L {\n"
    "    param gamma: Tensor[K]\n"
    "    param w: TernaryTensor[K, N]\n"
    "    param w_scale: Tensor[N]\n"
    "    fn forward(x: Tensor[M, K]) -> Tensor[M, N] {\n"
    "        let h = rmsnorm(x, gamma, 1e-5)\n"
    "        let q = quantize_int8(h)\n"
    "        return relu((q @ w) * w_scale)\n"
    "    }\n"
    "}\n";

// Random tern2 codes (0, 1, 2 per field) for n values.
std::vector<std::uint8_t> tern2_codes(std::size_t n, std::uint64_t seed) {
  std::vector<std::uint8_t> codes(ternjit::ir::tern2_size(n));
  std::uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (std::uint8_t& b : codes) {
    unsigned v = 0;
    for (int f = 0; f < 4; ++f) {
      s ^= s << 13;
      s ^= s >> 7;
      s ^= s << 17;
      v |= static_cast<unsigned>(s % 3) << (2 * f);
    }
    b = static_cast<std::uint8_t>(v);
  }
  return codes;
}

// A BitLinear K x N program with bound weights on an x86 engine.
struct Layer {
  ternjit::Engine engine;
  ternjit::Program program;
  std::int64_t K, N;
  std::vector<float> gamma, scale;
  std::vector<std::uint8_t> w;

  static Layer make(std::int64_t K, std::int64_t N, bool runtime_rows) {
    ternjit::EngineOptions o;
    o.target = "x86";
    o.threads = 1;
    o.cache_dir = "off";
    o.runtime_rows = runtime_rows;
    auto e = ternjit::Engine::create(o);
    if (!e.ok()) std::abort();
    auto p = e->compile(kLayer, "l.tri");
    if (!p.ok()) std::abort();
    Layer l{std::move(e.value()), std::move(p.value()), K, N, {}, {}, {}};
    l.gamma = ternjit::ir::HostTensor::random(ElemKind::F32, {K}, 1).to_f32();
    l.scale = ternjit::ir::HostTensor::random(ElemKind::F32, {N}, 2).to_f32();
    l.w = tern2_codes(static_cast<std::size_t>(K * N), 3);
    if (!l.program.bind("L.gamma", {l.gamma.data(), ElemKind::F32, {K}}).ok() ||
        !l.program.bind("L.w", {l.w.data(), ElemKind::U8, {K, N}}, ternjit::WeightFormat::Tern2, l.w.size()).ok() ||
        !l.program.bind("L.w_scale", {l.scale.data(), ElemKind::F32, {N}}).ok())
      std::abort();
    return l;
  }
  const ternjit::Kernel* kernel(std::int64_t M, std::vector<float>& x) {
    if (x.size() < static_cast<std::size_t>(M * K)) x.resize(static_cast<std::size_t>(M * K), 0.5f);
    TensorView in[] = {{x.data(), ElemKind::F32, {M, K}}};
    auto k = program.kernel("L.forward", in);
    if (!k.ok()) {
      std::fprintf(stderr, "%s\n", k.error().message.c_str());
      std::abort();
    }
    return k.value().get();  // the program holds it
  }
};

constexpr std::int64_t kK = 2560, kN = 6912;

// ---------------------------------------------------------------- a new M

// Fresh M values for the new-M benchmarks: [lo, hi] lie in one bucket (257..512).
constexpr std::int64_t kNewLo = 257, kNewHi = 512;

void BM_NewM(benchmark::State& state) {
  const bool rows = state.range(0) == 1;
  Layer l = Layer::make(kK, kN, rows);
  std::vector<float> x;
  l.kernel(kNewLo - 1, x);  // warm: the packed weight (and with rows, bucket 256's kernel)
  l.kernel(kNewHi, x);      // with rows: bucket 512's kernel
  x.resize(static_cast<std::size_t>(kNewHi * kK), 0.5f);
  std::int64_t M = kNewLo;
  for (auto _ : state) {
    TensorView in[] = {{x.data(), ElemKind::F32, {M, kK}}};
    auto k = l.program.kernel("L.forward", in);
    if (!k.ok()) std::abort();
    benchmark::DoNotOptimize(k);
    ++M;
  }
  state.SetLabel(rows ? "rows" : "specialize");
}
BENCHMARK(BM_NewM)->Arg(1)->Arg(0)->Iterations(kNewHi - kNewLo)->Unit(benchmark::kMicrosecond)->UseRealTime();

// ---------------------------------------------------------------- kernel speed

struct RunPair {
  Layer rows = Layer::make(kK, kN, true);
  Layer spec = Layer::make(kK, kN, false);
};
RunPair& pair() {
  static RunPair p;  // benchmark-local; the library has no globals
  return p;
}

void BM_Run(benchmark::State& state) {
  const std::int64_t M = state.range(0);
  const bool rows = state.range(1) == 1;
  Layer& l = rows ? pair().rows : pair().spec;
  std::vector<float> x(static_cast<std::size_t>(M * kK));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 7919) % 255) / 127.0f - 1.0f;
  std::vector<float> y(static_cast<std::size_t>(M * kN));
  const ternjit::Kernel* k = l.kernel(M, x);
  TensorView in[] = {{x.data(), ElemKind::F32, {M, kK}}};
  TensorView out[] = {{y.data(), ElemKind::F32, {M, kN}}};
  for (auto _ : state) {
    auto r = k->run(in, out);
    if (!r.ok()) std::abort();
    benchmark::DoNotOptimize(y.data());
  }
  state.SetLabel(rows ? "rows" : "spec");
  state.counters["GOPS"] = benchmark::Counter(2.0 * static_cast<double>(M * kK * kN),
                                              benchmark::Counter::kIsIterationInvariantRate,
                                              benchmark::Counter::kIs1000);
}
BENCHMARK(BM_Run)
    ->ArgsProduct({{1, 3, 8, 17, 128}, {1, 0}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime()
    ->MinTime(0.3);

// ---------------------------------------------------------------- load time (part 6)

constexpr std::int64_t kLK = 4096, kLN = 14336;

void BM_Pack(benchmark::State& state) {
  using namespace ternjit::targets::x86;
  const auto isa = best_isa(host_isas());
  if (!isa) {
    state.SkipWithError("no x86 code path on this host");
    return;
  }
  TMatMulProblem p;
  p.M = state.range(0);
  p.K = kLK;
  p.N = kLN;
  p.x_scale = p.w_scale = true;
  auto k = TMatMulKernel::create(p, default_config(p, *isa, 1));
  if (!k.ok()) std::abort();
  const std::vector<std::uint8_t> codes = tern2_codes(static_cast<std::size_t>(kLK * kLN), 5);
  const auto w = TernaryWeights::tern2(codes, static_cast<std::size_t>(kLK * kLN));
  for (auto _ : state) {
    auto packed = k.value()->pack(w);
    if (!packed.ok()) std::abort();
    benchmark::DoNotOptimize(packed.value().data());
  }
  state.SetLabel(k.value()->config().str());
  state.counters["GBps"] = benchmark::Counter(static_cast<double>(codes.size()), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Pack)->Arg(1)->Arg(8)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);

// The baseline: the value-at-a-time packing loop pack() used before (each weight read
// through TernaryWeights::operator[] and placed by itself), same layout as M = 8's.
void BM_PackPerValue(benchmark::State& state) {
  using namespace ternjit::targets::x86;
  const auto isa = best_isa(host_isas());
  if (!isa) {
    state.SkipWithError("no x86 code path on this host");
    return;
  }
  TMatMulProblem p;
  p.M = 8;
  p.K = kLK;
  p.N = kLN;
  const TMatMulConfig c = default_config(p, *isa, 1);
  const int L = c.vector_bits / 32, G = 4 * L, nb = c.n_block, groups = nb / G;
  const std::int64_t steps = (kLK + 3) / 4, panels = (kLN + nb - 1) / nb;
  const std::vector<std::uint8_t> codes = tern2_codes(static_cast<std::size_t>(kLK * kLN), 5);
  const auto w = TernaryWeights::tern2(codes, static_cast<std::size_t>(kLK * kLN));
  std::vector<std::uint8_t> out(static_cast<std::size_t>(steps * panels * nb));
  for (auto _ : state) {
    for (std::size_t i = 0; i < w.size(); ++i)  // start_pack's check, value by value
      if (w[i] < -1 || w[i] > 1) std::abort();
    auto code = [&](std::int64_t k, std::int64_t n) -> unsigned {
      if (k >= kLK) return 0;
      if (n >= kLN) return 1;
      return static_cast<unsigned>(w[static_cast<std::size_t>(k * kLN + n)] + 1);
    };
    for (std::int64_t pnl = 0; pnl < panels; ++pnl)
      for (std::int64_t st = 0; st < steps; ++st) {
        std::uint8_t* row = out.data() + (pnl * steps + st) * nb;
        for (int gi = 0; gi < groups; ++gi)
          for (int b = 0; b < G; ++b) {
            const std::int64_t k = 4 * st + b % 4, n0 = pnl * nb + gi * G + b / 4;
            unsigned byte = 0;
            for (int f = 0; f < 4; ++f) byte |= code(k, n0 + f * L) << (2 * f);
            row[gi * G + b] = static_cast<std::uint8_t>(byte);
          }
      }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetLabel(c.str());
  state.counters["GBps"] = benchmark::Counter(static_cast<double>(codes.size()), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_PackPerValue)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);

void BM_FirstKernel(benchmark::State& state) {
  const std::vector<std::uint8_t> codes = tern2_codes(static_cast<std::size_t>(kLK * kLN), 5);
  std::vector<float> gamma(kLK, 1.0f), scale(kLN, 0.5f), x(kLK, 0.25f);
  ternjit::EngineOptions o;
  o.target = "x86";
  o.threads = 1;
  o.cache_dir = "off";
  auto e = ternjit::Engine::create(o);
  if (!e.ok()) std::abort();
  for (auto _ : state) {
    auto p = e->compile(kLayer, "l.tri");
    if (!p.ok()) std::abort();
    if (!p->bind("L.gamma", {gamma.data(), ElemKind::F32, {kLK}}).ok() ||
        !p->bind("L.w", {const_cast<std::uint8_t*>(codes.data()), ElemKind::U8, {kLK, kLN}},
                 ternjit::WeightFormat::Tern2, codes.size())
             .ok() ||
        !p->bind("L.w_scale", {scale.data(), ElemKind::F32, {kLN}}).ok())
      std::abort();
    TensorView in[] = {{x.data(), ElemKind::F32, {1, kLK}}};
    auto k = p->kernel("L.forward", in);
    if (!k.ok()) std::abort();
    benchmark::DoNotOptimize(k);
  }
}
BENCHMARK(BM_FirstKernel)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);

}  // namespace

BENCHMARK_MAIN();
