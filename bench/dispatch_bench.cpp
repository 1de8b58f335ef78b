// SPDX-License-Identifier: Apache-2.0
// dispatch_bench.cpp - the cost of a specialization-cache hit (Program::kernel) against a plain hash lookup.
//
// Goal (issue 5): a hit is well under a microsecond. The baselines put it in context:
// a std::unordered_map<std::string, int> lookup of a prebuilt key of similar length,
// and the same lookup when the key string is built per call (as a dispatcher that keys
// on shapes must). Report: BM_KernelHit / BM_MapLookup. Run:
//   build/bench/bench_dispatch --benchmark_min_time=0.2
#include <benchmark/benchmark.h>

#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "bitlinear_source.h"
#include "ir/tensor.h"
#include "ternjit/engine.h"

namespace {

constexpr std::int64_t kK = 64, kN = 16;

// A BitLinear program with bound weights and kernels for M = 1..8 already built.
struct Fixture {
  ternjit::Engine engine;
  ternjit::Program program;
  std::vector<float> x;
  std::vector<float> gamma, scale;
  std::vector<std::int8_t> w;

  static Fixture make() {
    ternjit::EngineOptions o;
    o.target = "reference";
    auto e = ternjit::Engine::create(o);
    if (!e.ok()) std::abort();
    auto p = e->compile(ternjit::examples::kBitLinearSource, "bitlinear.tri");
    if (!p.ok()) std::abort();
    Fixture f{std::move(e.value()), std::move(p.value()), std::vector<float>(8 * kK), {}, {}, {}};
    f.gamma = ternjit::ir::HostTensor::random(ternjit::ElemKind::F32, {kK}, 1).to_f32();
    f.scale = ternjit::ir::HostTensor::random(ternjit::ElemKind::F32, {kN}, 2).to_f32();
    f.w = ternjit::ir::HostTensor::random(ternjit::ElemKind::T2, {kK * kN}, 3).to_i8();
    if (!f.program.bind("BitLinear.gamma", {f.gamma.data(), ternjit::ElemKind::F32, {kK}}).ok() ||
        !f.program.bind("BitLinear.w", {f.w.data(), ternjit::ElemKind::T2, {kK, kN}}).ok() ||
        !f.program.bind("BitLinear.w_scale", {f.scale.data(), ternjit::ElemKind::F32, {kN}}).ok())
      std::abort();
    for (std::int64_t m = 1; m <= 8; ++m) {
      ternjit::TensorView in[] = {{f.x.data(), ternjit::ElemKind::F32, {m, kK}}};
      if (!f.program.kernel("BitLinear.forward", in).ok()) std::abort();
    }
    return f;
  }
};

Fixture& fixture() {
  static Fixture f = Fixture::make();  // benchmark-local; the library has no globals
  return f;
}

void BM_KernelHit(benchmark::State& state) {
  Fixture& f = fixture();
  ternjit::TensorView in[] = {{f.x.data(), ternjit::ElemKind::F32, {4, kK}}};
  for (auto _ : state) {
    auto k = f.program.kernel("BitLinear.forward", in);
    benchmark::DoNotOptimize(k);
  }
}
BENCHMARK(BM_KernelHit);
BENCHMARK(BM_KernelHit)->Threads(2)->UseRealTime();

// The lookup of a prebuilt key of similar length among 8 entries.
void BM_MapLookup(benchmark::State& state) {
  std::unordered_map<std::string, int> map;
  for (int m = 1; m <= 8; ++m) map.emplace("BitLinear.forward|f32[" + std::to_string(m) + ",64]", m);
  const std::string key = "BitLinear.forward|f32[4,64]";
  for (auto _ : state) {
    auto it = map.find(key);
    benchmark::DoNotOptimize(it);
  }
}
BENCHMARK(BM_MapLookup);

// The same lookup with the key string built from the shape on every call.
void BM_MapLookupBuildKey(benchmark::State& state) {
  std::unordered_map<std::string, int> map;
  for (int m = 1; m <= 8; ++m) map.emplace("BitLinear.forward|f32[" + std::to_string(m) + ",64]", m);
  const std::vector<std::int64_t> shape{4, 64};
  for (auto _ : state) {
    std::string key = "BitLinear.forward|f32[";
    key += std::to_string(shape[0]);
    key += ',';
    key += std::to_string(shape[1]);
    key += ']';
    auto it = map.find(key);
    benchmark::DoNotOptimize(it);
  }
}
BENCHMARK(BM_MapLookupBuildKey);

// A full call through the kernel (the interpreter dominates; for scale only).
void BM_RunM1(benchmark::State& state) {
  Fixture& f = fixture();
  std::vector<float> y(kN);
  ternjit::TensorView in[] = {{f.x.data(), ternjit::ElemKind::F32, {1, kK}}};
  ternjit::TensorView out[] = {{y.data(), ternjit::ElemKind::F32, {1, kN}}};
  for (auto _ : state) {
    auto r = f.program.run("BitLinear.forward", in, out);
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_RunM1);

}  // namespace

BENCHMARK_MAIN();
