// SPDX-License-Identifier: Apache-2.0
// gpu_compile_bench.cpp - the cuda and hip targets without a GPU: source generation, NVRTC and hiprtc latency per layer, disk-cache hits.
//
// BM_Generate/<layer>: simt::generate alone (the CUDA source and launch plan), the
// baseline the compiles below include.
// BM_CudaCompile/<layer>/<arch>: CudaTarget::compile = generate + NVRTC to cubin and PTX
// (ptxas in-process) - the goal is < 100 ms per kernel.
// BM_HipCompile/<layer>: HipTarget::compile for gfx90a (hiprtc + comgr in-process).
// BM_CudaCacheHit/<layer>: an engine's disk-cache hit of the cuda artifact (read,
// checksum, decode, signature and cubin digest), what a cached load costs before the
// driver's cuModuleLoadData (which needs a device; not measured here).
// Layers: the O2 BitLinear core (quantize + tmatmul) at M = 1 for K x N = 2560 x 2560,
// 2560 x 6912 and 4096 x 14336. Every benchmark reports SKIPPED with the reason where
// its toolchain is missing.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "bench/layer_tir.h"
#include "ir/parse.h"
#include "jit/kernel_cache.h"
#include "targets/simt/generate.h"
#include "targets/cuda/cuda_target.h"
#include "targets/hip/hip_target.h"

namespace {

using namespace ternjit;

constexpr std::int64_t kShapes[][2] = {{2560, 2560}, {2560, 6912}, {4096, 14336}};

Result<ir::Module> layer(std::int64_t which) {
  return ir::parse_module(bench::layer_tir(1, kShapes[which][0], kShapes[which][1]), "bench.tir");
}

std::string label(std::int64_t which) {
  return "M=1 K=" + std::to_string(kShapes[which][0]) + " N=" + std::to_string(kShapes[which][1]);
}

void BM_Generate(benchmark::State& state) {
  auto m = layer(state.range(0));
  if (!m.ok()) return state.SkipWithError(m.error().message.c_str());
  for (auto _ : state) {
    auto p = targets::simt::generate(*m, "f", {});
    if (!p.ok()) return state.SkipWithError(p.error().message.c_str());
    benchmark::DoNotOptimize(p->source.data());
  }
  state.SetLabel(label(state.range(0)));
}
BENCHMARK(BM_Generate)->DenseRange(0, 2)->Unit(benchmark::kMillisecond);

void BM_CudaCompile(benchmark::State& state) {
  auto m = layer(state.range(0));
  if (!m.ok()) return state.SkipWithError(m.error().message.c_str());
  auto t = targets::make_cuda_target();
  targets::CompileOptions co;
  co.target.values["arch"] = state.range(1) == 0 ? "sm_80" : "sm_90";
  for (auto _ : state) {
    auto a = t->compile(*m, "f", co);
    if (!a.ok()) return state.SkipWithError(a.error().message.c_str());
    benchmark::DoNotOptimize(a->bytes.data());
    state.SetLabel(label(state.range(0)) + " " + co.target.values["arch"] + " " + a->metadata.at("usage"));
  }
}
BENCHMARK(BM_CudaCompile)->ArgsProduct({{0, 1, 2}, {0, 1}})->Unit(benchmark::kMillisecond)->Iterations(5);

// BM_CudaCompileRows/<M>/<config>: the BitLinear core at K x N = 2560 x 6912 with M
// rows, compiled for sm_90 under one tmatmul configuration: 0 the default, 1..
// kRowConfigs (the blockings the compile latency depends on: rows x cpt accumulators
// per thread, fully unrolled by ptxas). Ratios between configurations of one run are
// what count.
const char* const kRowConfigs[] = {
    "",                                          // the default of the shape
    "tpc=16;cols=16;unroll=1;rows=8;cpt=4",      // 32 accumulators (the M = 8 default before)
    "tpc=16;cols=16;unroll=1;rows=8;cpt=2",      // 16
    "tpc=16;cols=16;unroll=1;rows=4;cpt=4",      // 16, two row passes at M = 8
    "tpc=32;cols=4;unroll=1;rows=2;cpt=2;mma=1",  // the tensor-core form (M >= 16)
};
void BM_CudaCompileRows(benchmark::State& state) {
  const std::int64_t M = state.range(0);
  const char* config = kRowConfigs[state.range(1)];
  if (M < 16 && std::string(config).find("mma") != std::string::npos) return state.SkipWithError("mma: M >= 16");
  auto m = ir::parse_module(bench::layer_tir(M, 2560, 6912), "bench.tir");
  if (!m.ok()) return state.SkipWithError(m.error().message.c_str());
  auto t = targets::make_cuda_target();
  targets::CompileOptions co;
  co.target.values["arch"] = "sm_90";
  if (*config != 0) co.decisions = {config};
  for (auto _ : state) {
    auto a = t->compile(*m, "f", co);
    if (!a.ok()) return state.SkipWithError(a.error().message.c_str());
    benchmark::DoNotOptimize(a->bytes.data());
    state.SetLabel("M=" + std::to_string(M) + " " + a->metadata.at("decisions") + " " + a->metadata.at("usage"));
  }
}
BENCHMARK(BM_CudaCompileRows)->ArgsProduct({{8, 32}, {0, 1, 2, 3, 4}})->Unit(benchmark::kMillisecond)->Iterations(3);

void BM_HipCompile(benchmark::State& state) {
  auto m = layer(state.range(0));
  if (!m.ok()) return state.SkipWithError(m.error().message.c_str());
  auto t = targets::make_hip_target();
  for (auto _ : state) {
    auto a = t->compile(*m, "f", {});
    if (!a.ok()) return state.SkipWithError(a.error().message.c_str());
    benchmark::DoNotOptimize(a->bytes.data());
  }
  state.SetLabel(label(state.range(0)) + " gfx90a");
}
BENCHMARK(BM_HipCompile)->DenseRange(0, 2)->Unit(benchmark::kMillisecond)->Iterations(3);

void BM_CudaCacheHit(benchmark::State& state) {
  auto m = layer(state.range(0));
  if (!m.ok()) return state.SkipWithError(m.error().message.c_str());
  auto t = targets::make_cuda_target();
  char tmpl[] = "/tmp/ternjit_gpu_bench_XXXXXX";
  if (!::mkdtemp(tmpl)) return state.SkipWithError("mkdtemp failed");
  jit::KernelCacheConfig cfg;
  cfg.disk.dir = tmpl;
  {
    jit::KernelCache kc(cfg, {t.get(), nullptr});
    auto compile = [&] { return t->compile(*m, "f", {}); };
    auto first = kc.get_or_compile(*m, "f", {}, compile);
    if (!first.ok()) {
      std::filesystem::remove_all(tmpl);
      return state.SkipWithError(first.error().message.c_str());
    }
    jit::DiskState how = jit::DiskState::Off;
    for (auto _ : state) {
      auto hit = kc.get_or_compile(*m, "f", {}, compile, &how);
      if (!hit.ok() || how != jit::DiskState::Hit) {
        std::filesystem::remove_all(tmpl);
        return state.SkipWithError("not a disk-cache hit");
      }
      benchmark::DoNotOptimize(hit->bytes.data());
    }
  }
  std::filesystem::remove_all(tmpl);
  state.SetLabel(label(state.range(0)));
}
BENCHMARK(BM_CudaCacheHit)->DenseRange(0, 2)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
