// SPDX-License-Identifier: Apache-2.0
// llvm_bench.cpp - the llvm target: compile latency per kernel (O2) and host GEMV/GEMM beside the x86 target.
//
// BM_LlvmCompile/<kernel>: Target::compile (IR generation, the O2 LLVM pipeline and
// object emission for the host CPU) - the goal is < 30 ms per kernel.
// BM_LlvmLoad: linking that object in a fresh LLJIT and binding its weights.
// BM_Layer/<target>/M/K: the int8 quantize + tmatmul (x_scale, w_scale) of an O2
// BitLinear without rmsnorm, K = N, one thread on both targets (the llvm kernels are
// single-threaded), the same weights; the goal is llvm within 1.5x of x86.
#include <benchmark/benchmark.h>

#include <string>

#include "bench/layer_tir.h"
#include "ir/parse.h"
#include "targets/llvm/llvm_target.h"
#include "targets/x86/x86_target.h"

namespace {

using namespace ternjit;

using bench::layer_tir;

std::string kernel_tir(int which) {
  switch (which) {
    case 0: return layer_tir(1, 2048, 2048);
    case 1:
      return "func @f(%x: f32[4, 4096]) -> f32[4, 4096] {\n^entry:\n  %y = softmax %x {axis = 1} : f32[4, 4096]\n"
             "  ret %y\n}\n";
    case 2:
      return "func @f(%x: f32[4, 4096], %g: f32[4096]) -> (i8[4, 4096], f32[4, 1]) {\n^entry:\n"
             "  %h = rmsnorm %x, %g {eps = 1e-05} : f32[4, 4096]\n  %q, %s = quantize %h : i8[4, 4096], f32[4, 1]\n"
             "  ret %q, %s\n}\n";
    default:
      return "func @f(%a: f32[64, 256], %b: f32[256]) -> f32[64, 256] {\n^entry:\n"
             "  %y = ewise %a, %b {steps = [mul(0, 1), silu(2), add(3, 0)]} : f32[64, 256]\n  ret %y\n}\n";
  }
}

void BM_LlvmCompile(benchmark::State& state) {
  auto m = ir::parse_module(kernel_tir(static_cast<int>(state.range(0))), "bench.tir");
  if (!m.ok()) return state.SkipWithError(m.error().message.c_str());
  auto t = targets::make_llvm_target();
  for (auto _ : state) {
    auto a = t->compile(*m, "f", targets::CompileOptions{});
    if (!a.ok()) return state.SkipWithError(a.error().message.c_str());
    benchmark::DoNotOptimize(a->bytes.data());
  }
  const char* names[] = {"quantize+tmatmul 2048x2048", "softmax 4x4096", "rmsnorm+quantize 4x4096", "ewise 64x256"};
  state.SetLabel(names[state.range(0)]);
}
BENCHMARK(BM_LlvmCompile)->DenseRange(0, 3)->Unit(benchmark::kMillisecond);

ir::ParamValues weights(std::int64_t K, std::int64_t N) {
  ir::ParamValues pv;
  pv.set("w", ir::HostTensor::random(ElemKind::T2, {K, N}, 1));
  pv.set("ws", ir::HostTensor::random(ElemKind::F32, {N}, 2));
  return pv;
}

void BM_LlvmLoad(benchmark::State& state) {
  auto m = ir::parse_module(layer_tir(1, 2048, 2048), "bench.tir");
  if (!m.ok()) return state.SkipWithError(m.error().message.c_str());
  auto a = targets::make_llvm_target()->compile(*m, "f", targets::CompileOptions{});
  if (!a.ok()) return state.SkipWithError(a.error().message.c_str());
  const ir::ParamValues pv = weights(2048, 2048);
  for (auto _ : state) {
    auto k = targets::llvmjit::load_kernel(*a, pv);
    if (!k.ok()) return state.SkipWithError(k.error().message.c_str());
    benchmark::DoNotOptimize(k->get());
  }
}
BENCHMARK(BM_LlvmLoad)->Unit(benchmark::kMillisecond);

template <bool kLlvm>
void BM_Layer(benchmark::State& state) {
  const std::int64_t M = state.range(0), K = state.range(1), N = K;
  auto m = ir::parse_module(layer_tir(M, K, N), "bench.tir");
  if (!m.ok()) return state.SkipWithError(m.error().message.c_str());
  auto t = kLlvm ? targets::make_llvm_target() : targets::make_x86_target();
  if (!t->available().ok()) return state.SkipWithError("target unavailable");
  targets::CompileOptions co;
  co.threads = 1;
  auto a = t->compile(*m, "f", co);
  if (!a.ok()) return state.SkipWithError(a.error().message.c_str());
  const ir::ParamValues pv = weights(K, N);
  targets::LoadContext ctx;
  ctx.params = &pv;
  ctx.parallel.threads = 1;
  auto state_of = t->new_program_state();
  ctx.state = state_of.get();
  auto k = t->load(*a, ctx);
  if (!k.ok()) return state.SkipWithError(k.error().message.c_str());
  std::vector<float> x = ir::HostTensor::random(ElemKind::F32, {M, K}, 3).to_f32();
  std::vector<float> y(static_cast<std::size_t>(M * N));
  void* buffers[] = {x.data(), y.data()};
  for (auto _ : state) {
    if (!k->run(k->state, buffers).ok()) return state.SkipWithError("kernel failed");
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GMAC/s"] = benchmark::Counter(static_cast<double>(M * K * N), benchmark::Counter::kIsIterationInvariantRate,
                                                benchmark::Counter::kIs1000);
}
BENCHMARK(BM_Layer<false>)->Name("BM_Layer/x86")->Args({1, 2048})->Args({1, 4096})->Args({128, 2048})->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Layer<true>)->Name("BM_Layer/llvm")->Args({1, 2048})->Args({1, 4096})->Args({128, 2048})->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
