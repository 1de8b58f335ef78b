// SPDX-License-Identifier: Apache-2.0
// cuda_gemv_bench.cpp - the cuda target's BitLinear core (quantize + ternary GEMV/GEMM) on a CUDA device, cold L2: GB/s of weight bytes and % of DRAM bandwidth.
//
// BM_CudaLayer/K/N/M: the O2 BitLinear core (quantize + tmatmul with x_scale and
// w_scale, bench/layer_tir.h) compiled by the cuda target (the generator's default
// configuration), loaded with random weights, run on device-resident inputs
// (DeviceKernels::run_device: launches + stream sync, no copies). Before every timed call
// a 256 MiB buffer is written on the device so the weights come from DRAM, not L2
// (the write is outside the timing). Counters: weight_GBps = packed weight bytes (2 bits
// each) / time, dram_GBps = the device's 2 x memory clock x bus width (their ratio is the
// fraction of the DRAM roofline; the goal: >= 80% for layers >= 16 MB at M = 1).
// Shapes: the K x N in {2560x2560, 2560x6912, 4096x14336, 14336x4096,
// 8192x28672}, M in {1, 8, 32, 128}. Without a CUDA device every row reports SKIPPED
// with the reason; nothing here ran on a GPU yet.
#include <benchmark/benchmark.h>

#include <chrono>
#include <memory>
#include <string>

#include "bench/layer_tir.h"
#include "ir/parse.h"
#include "targets/simt/device_kernels.h"
#include "targets/cuda/cuda_driver.h"
#include "targets/cuda/cuda_target.h"

namespace {

using namespace ternjit;

constexpr std::int64_t kShapes[][2] = {{2560, 2560}, {2560, 6912}, {4096, 14336}, {14336, 4096}, {8192, 28672}};

void BM_CudaLayer(benchmark::State& state) {
  const std::int64_t K = kShapes[state.range(0)][0], N = kShapes[state.range(0)][1], M = state.range(1);
  auto t = targets::make_cuda_target();
  if (auto ok = t->available(); !ok.ok()) return state.SkipWithError(ok.error().message.c_str());
  auto m = ir::parse_module(bench::layer_tir(M, K, N), "bench.tir");
  if (!m.ok()) return state.SkipWithError(m.error().message.c_str());
  auto a = t->compile(*m, "f", {});
  if (!a.ok()) return state.SkipWithError(a.error().message.c_str());
  ir::ParamValues params;
  params.set("w", ir::HostTensor::random(ElemKind::T2, {K, N}, 1));
  params.set("ws", ir::HostTensor::random(ElemKind::F32, {N}, 2));
  auto program_state = t->new_program_state();
  targets::LoadContext lc;
  lc.params = &params;
  lc.state = program_state.get();
  auto k = t->load(*a, lc);
  if (!k.ok()) return state.SkipWithError(k.error().message.c_str());
  const auto& program = static_cast<const targets::simt::GpuLoadedState*>(k->state)->kernels;
  const auto& api = program->api();
  auto x = targets::simt::DeviceAllocation::make(api, static_cast<std::size_t>(M * K) * 4);
  auto y = targets::simt::DeviceAllocation::make(api, static_cast<std::size_t>(M * N) * 4);
  auto flush = targets::simt::DeviceAllocation::make(api, std::size_t{256} << 20);
  if (!x.ok() || !y.ok() || !flush.ok()) return state.SkipWithError("device allocation failed");
  auto driver = targets::cuda::driver();
  if (!driver.ok()) return state.SkipWithError(driver.error().message.c_str());
  const ir::HostTensor xs = ir::HostTensor::random(ElemKind::F32, {M, K}, 3);
  const std::vector<std::uint8_t> xb = xs.to_bytes();
  {
    auto current = api->make_current();
    if (!current.ok() || !api->upload((*x)->ptr(), xb.data(), xb.size(), nullptr).ok() ||
        !api->synchronize(nullptr).ok())
      return state.SkipWithError("input upload failed");
  }
  void* buffers[2] = {reinterpret_cast<void*>((*x)->ptr()), reinterpret_cast<void*>((*y)->ptr())};
  int value = 0;
  for (auto _ : state) {
    state.PauseTiming();
    {  // cold L2: overwrite 256 MiB (every current L2 is smaller), outside the timing
      auto current = api->make_current();
      if (!current.ok() || (*driver)->cuMemsetD8Async((*flush)->ptr(), static_cast<unsigned char>(++value),
                                                      (*flush)->bytes(), nullptr) != 0 ||
          !api->synchronize(nullptr).ok())
        return state.SkipWithError("L2 flush failed");
    }
    state.ResumeTiming();
    const auto start = std::chrono::steady_clock::now();
    if (auto r = program->run_device(buffers); !r.ok()) return state.SkipWithError(r.error().message.c_str());
    state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  const double weight_bytes = static_cast<double>(K) * static_cast<double>(N) / 4.0;
  state.counters["weight_GBps"] =
      benchmark::Counter(weight_bytes, benchmark::Counter::kIsIterationInvariantRate);
  auto device = targets::cuda::select_cuda_device("auto");
  if (device.ok() && (*device)->dram_gbps() > 0)
    state.counters["dram_GBps"] = (*device)->dram_gbps();
  state.SetLabel(a->metadata.at("arch") + " " + a->metadata.at("usage"));
}

}  // namespace

BENCHMARK(BM_CudaLayer)
    ->ArgsProduct({{0, 1, 2, 3, 4}, {1, 8, 32, 128}})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
