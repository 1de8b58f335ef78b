// SPDX-License-Identifier: Apache-2.0
// spirv_bench.cpp - the spirv target's int8 quantize + tmatmul layer beside the x86 target, in one process.
//
// BM_Layer/x86/M/K/G and BM_Layer/spirv/M/K/G: the quantize + tmatmul (x_scale, w_scale)
// of an O2 BitLinear without rmsnorm, K = N, with the uniform per-column w_scale (G = 0)
// or one grouped along K in groups of G = 256 (GGUF TQ2_0's blocks: w_scale
// f32[K / 256, N], the per-group int32 sums scaled in f32), the same weights, the host-copy run path
// (inputs copied to the device, outputs back). On lavapipe (VK_ICD_FILENAMES pointing at
// lvp_icd) the Vulkan "device" is the CPU: the spirv numbers are CPU numbers and the
// `vs_x86` counter (spirv time / x86 time of the same shape, this run) is a sanity
// figure only. Both sides run one thread: LP_NUM_THREADS=1 unless set, x86 threads=1.
// `weight_GB/s` counts the 2-bit weight bytes per second; `device_us` is the spirv
// command buffer's time from timestamp queries (without the host copies). Wall time
// (UseRealTime): the host waits on a fence while the device works.
// TERNJIT_BENCH_INT_DOT=on|off forces the spirv dot path (spirv.int_dot; default: the device's).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <string>
#include <tuple>

#include "bench/layer_tir.h"
#include "ir/parse.h"
#include "targets/spirv/spirv_target.h"
#include "targets/x86/x86_target.h"

namespace {

using namespace ternjit;

using bench::layer_tir;

std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t>, double>& x86_seconds() {
  static std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t>, double> m;
  return m;
}

template <bool kSpirv>
void BM_Layer(benchmark::State& state) {
  const std::int64_t M = state.range(0), K = state.range(1), N = K, group = state.range(2);
  auto m = ir::parse_module(layer_tir(M, K, N, group), "bench.tir");
  if (!m.ok()) return state.SkipWithError(m.error().message.c_str());
  auto t = kSpirv ? targets::make_spirv_target() : targets::make_x86_target();
  if (auto ok = t->available(); !ok.ok()) return state.SkipWithError(ok.error().message.c_str());
  targets::CompileOptions co;
  co.threads = 1;
  if (const char* dot = std::getenv("TERNJIT_BENCH_INT_DOT"); kSpirv && dot) co.target.values["int_dot"] = dot;
  auto a = t->compile(*m, "f", co);
  if (!a.ok()) return state.SkipWithError(a.error().message.c_str());
  ir::ParamValues pv;
  pv.set("w", ir::HostTensor::random(ElemKind::T2, {K, N}, 1));
  pv.set("ws", group > 0 ? ir::HostTensor::random(ElemKind::F32, {(K + group - 1) / group, N}, 2)
                         : ir::HostTensor::random(ElemKind::F32, {N}, 2));
  targets::LoadContext ctx;
  ctx.params = &pv;
  ctx.parallel.threads = 1;
  ctx.options = co.target;
  auto program_state = t->new_program_state();
  ctx.state = program_state.get();
  auto k = t->load(*a, ctx);
  if (!k.ok()) return state.SkipWithError(k.error().message.c_str());
  std::vector<float> x = ir::HostTensor::random(ElemKind::F32, {M, K}, 3).to_f32();
  std::vector<float> y(static_cast<std::size_t>(M * N));
  void* buffers[] = {x.data(), y.data()};
  double device_ns = 0;
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    if (!k->run(k->state, buffers).ok()) return state.SkipWithError("kernel failed");
    if constexpr (kSpirv) device_ns += targets::spirv::last_device_ns(k->state);
    benchmark::DoNotOptimize(y.data());
  }
  const double per_call = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() /
                          static_cast<double>(std::max<benchmark::IterationCount>(1, state.iterations()));
  const double weight_bytes = static_cast<double>(K * N) / 4.0;
  state.counters["weight_GB/s"] =
      benchmark::Counter(weight_bytes, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
  if constexpr (kSpirv) {
    state.counters["device_us"] = device_ns / 1e3 / static_cast<double>(state.iterations());
    if (auto it = x86_seconds().find({M, K, group}); it != x86_seconds().end())
      state.counters["vs_x86"] = per_call / it->second;
  } else {
    x86_seconds()[{M, K, group}] = per_call;
  }
}

// x86 before spirv for each shape (registration order), so the ratio has its baseline.
#define TERNJIT_SHAPES                \
  ->Args({1, 2048, 0})                \
      ->Args({1, 4096, 0})            \
      ->Args({16, 2048, 0})           \
      ->Args({64, 2048, 0})           \
      ->Args({1, 2048, 256})          \
      ->Args({1, 4096, 256})          \
      ->Args({16, 2048, 256})         \
      ->Args({64, 2048, 256})         \
      ->Unit(benchmark::kMicrosecond) \
      ->UseRealTime()
BENCHMARK(BM_Layer<false>)->Name("BM_Layer/x86") TERNJIT_SHAPES;
BENCHMARK(BM_Layer<true>)->Name("BM_Layer/spirv") TERNJIT_SHAPES;
#undef TERNJIT_SHAPES

}  // namespace

int main(int argc, char** argv) {
  // One lavapipe thread, like the x86 side (an explicit LP_NUM_THREADS wins).
  ::setenv("LP_NUM_THREADS", "1", 0);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
