// SPDX-License-Identifier: Apache-2.0
// llvm_bench.cpp - the llvm target: compile latency per kernel (O2) and host GEMV/GEMM beside the x86 target.
//
// BM_LlvmCompile/<kernel>: Target::compile (IR generation, the O2 LLVM pipeline and
// object emission for the host CPU) - the goal is < 30 ms per kernel (the
// packed tmatmul layer takes about 35-39 ms: bench/README.md).
// BM_LlvmLoad/K/N: linking that object in a fresh LLJIT and binding its weights (packing
// the panels; weight_GBps = 2-bit weight bytes per second).
// BM_VsX86/M/K/N/threads: the int8 quantize + tmatmul (x_scale, w_scale) of an O2
// BitLinear without rmsnorm on the llvm target beside the x86 target (and the llvm
// target's previous int8 panels), in one process, calls interleaved (below).
// BM_Head/V/E/threads: the output head matmul(x, transpose(embd)), x f32 [1, E], embd
// f16 [V, E] read as stored, beside a streaming read of the same bytes (the floor).
// BM_Attention/pos/threads: decode attention (M = 1, 20 query heads, 5 KV heads, D = 128,
// f16 caches, rows [0, pos]) beside the reference interpreter on the same op.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "bench/layer_tir.h"
#include "bench/tbb_parallel.h"
#include "ir/interpret.h"
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
  const std::int64_t K = state.range(0), N = state.range(1);
  auto m = ir::parse_module(layer_tir(1, K, N), "bench.tir");
  if (!m.ok()) return state.SkipWithError(m.error().message.c_str());
  auto a = targets::make_llvm_target()->compile(*m, "f", targets::CompileOptions{});
  if (!a.ok()) return state.SkipWithError(a.error().message.c_str());
  const ir::ParamValues pv = weights(K, N);
  for (auto _ : state) {
    auto k = targets::llvmjit::load_kernel(*a, pv);
    if (!k.ok()) return state.SkipWithError(k.error().message.c_str());
    benchmark::DoNotOptimize(k->get());
  }
  // Ternary weight bytes (2 bits each) packed per second, LLJIT link included.
  state.counters["weight_GBps"] = benchmark::Counter(static_cast<double>(K * N) / 4 / 1e9,
                                                     benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_LlvmLoad)->Args({2048, 2048})->Args({4096, 14336})->Unit(benchmark::kMillisecond);

// One implementation of the layer, loaded and ready to run.
struct Impl {
  std::unique_ptr<targets::Target> target;
  std::unique_ptr<targets::ProgramState> state;
  targets::LoadedKernel kernel;
};

Result<Impl> load_impl(bool llvm, const char* panels, const ir::Module& m, const ir::ParamValues& pv, int threads) {
  Impl i;
  i.target = llvm ? targets::make_llvm_target() : targets::make_x86_target();
  TERNJIT_TRY_VOID(i.target->available());
  targets::CompileOptions co;
  co.threads = threads;
  if (llvm && panels) co.target.values["panels"] = panels;
  TERNJIT_TRY(targets::Artifact a, i.target->compile(m, "f", co));
  targets::LoadContext ctx;
  ctx.params = &pv;
  ctx.parallel = bench::parallel_for_threads(threads);
  i.state = i.target->new_program_state();
  ctx.state = i.state.get();
  TERNJIT_TRY(i.kernel, i.target->load(a, ctx));
  return i;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// BM_VsX86/M/K/N/threads: the layer on the llvm target (packed 2-bit panels), the x86
// target, and the llvm target on int8 panels (`panels = int8`, the layout before),
// interleaved call by call on the same weights and input (hot: one weight copy). The
// reported time is the llvm one; counters: each implementation's median and min in
// microseconds, and ratio = median llvm / median x86 (the goal: <= 1.3) and
// vs_int8 = median llvm int8 panels / median llvm packed (> 1: packed is faster).
void BM_VsX86(benchmark::State& state) {
  const std::int64_t M = state.range(0), K = state.range(1), N = state.range(2);
  const int threads = static_cast<int>(state.range(3));
  auto m = ir::parse_module(layer_tir(M, K, N), "bench.tir");
  if (!m.ok()) return state.SkipWithError(m.error().message.c_str());
  const ir::ParamValues pv = weights(K, N);
  std::vector<Impl> impls;
  for (int k = 0; k < 3; ++k) {
    auto i = load_impl(k != 1, k == 2 ? "int8" : nullptr, *m, pv, threads);
    if (!i.ok()) return state.SkipWithError(i.error().message.c_str());
    impls.push_back(std::move(*i));
  }
  std::vector<float> x = ir::HostTensor::random(ElemKind::F32, {M, K}, 3).to_f32();
  std::vector<float> y(static_cast<std::size_t>(M * N));
  void* buffers[] = {x.data(), y.data()};
  std::vector<double> t[3];
  auto call = [&](int k) {
    const auto t0 = std::chrono::steady_clock::now();
    const bool ok = impls[static_cast<std::size_t>(k)].kernel.run(impls[static_cast<std::size_t>(k)].kernel.state, buffers).ok();
    benchmark::DoNotOptimize(y.data());
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    t[k].push_back(sec);
    return ok ? sec : -1.0;
  };
  for (int k = 0; k < 3; ++k) call(k);  // warm up: first touch of the panels and the scratch
  for (auto& v : t) v.clear();
  for (auto _ : state) {
    const double sec = call(0);
    if (sec < 0 || call(1) < 0 || call(2) < 0) return state.SkipWithError("kernel failed");
    state.SetIterationTime(sec);
  }
  const double med[] = {median(t[0]), median(t[1]), median(t[2])};
  auto us = [](double s) { return benchmark::Counter(s * 1e6); };
  state.counters["llvm_us"] = us(med[0]);
  state.counters["x86_us"] = us(med[1]);
  state.counters["llvm_int8_us"] = us(med[2]);
  state.counters["llvm_min_us"] = us(*std::min_element(t[0].begin(), t[0].end()));
  state.counters["x86_min_us"] = us(*std::min_element(t[1].begin(), t[1].end()));
  state.counters["ratio"] = med[0] / med[1];
  state.counters["vs_int8"] = med[2] / med[0];
  state.counters["GMAC/s"] = benchmark::Counter(static_cast<double>(M * K * N) / med[0] / 1e9);
}

void vs_x86_args(benchmark::internal::Benchmark* b) {
  for (int threads : {1, 2})
    for (std::int64_t M : {1, 128})
      for (auto [K, N] : {std::pair<std::int64_t, std::int64_t>{2560, 2560}, {4096, 14336}, {14336, 4096}})
        b->Args({M, K, N, threads});
}
BENCHMARK(BM_VsX86)->Apply(vs_x86_args)->UseManualTime()->MinTime(0.3)->Unit(benchmark::kMicrosecond);

// Loads `tir`'s @f on the llvm target with `threads` (the bench's oneTBB arena).
Result<Impl> load_llvm(const std::string& tir, const ir::ParamValues& pv, int threads) {
  TERNJIT_TRY(ir::Module m, ir::parse_module(tir, "bench.tir"));
  return load_impl(true, nullptr, m, pv, threads);
}

void BM_Head(benchmark::State& state) {
  const std::int64_t V = state.range(0), E = state.range(1);
  const int threads = static_cast<int>(state.range(2));
  const std::string e = std::to_string(E), v = std::to_string(V);
  const std::string tir = "param @embd : f16[" + v + ", " + e + "]\nfunc @f(%x: f32[1, " + e + "]) -> f32[1, " + v +
                          "] {\n^entry:\n  %t = param @embd : f16[" + v + ", " + e + "]\n  %tt = transpose %t {perm = [1, 0]} : f16[" +
                          e + ", " + v + "]\n  %y = matmul %x, %tt : f32[1, " + v + "]\n  ret %y\n}\n";
  ir::ParamValues pv;
  pv.set("embd", ir::HostTensor::random(ElemKind::F16, {V, E}, 1));
  auto impl = load_llvm(tir, pv, threads);
  if (!impl.ok()) return state.SkipWithError(impl.error().message.c_str());
  std::vector<float> x = ir::HostTensor::random(ElemKind::F32, {1, E}, 2).to_f32(), y(static_cast<std::size_t>(V));
  void* buffers[] = {x.data(), y.data()};
  // The floor: one streaming read of the table's bytes (what the head must read).
  const ir::StoredTensor& table = pv.values.at("embd");
  const auto* words = reinterpret_cast<const std::uint64_t*>(table.bytes().data());
  const std::size_t n_words = table.bytes().size() / 8;
  std::vector<double> th, ts;
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    if (!impl->kernel.run(impl->kernel.state, buffers).ok()) return state.SkipWithError("kernel failed");
    auto t1 = std::chrono::steady_clock::now();
    std::uint64_t sum = std::accumulate(words, words + n_words, std::uint64_t{0});
    benchmark::DoNotOptimize(sum);
    auto t2 = std::chrono::steady_clock::now();
    th.push_back(std::chrono::duration<double>(t1 - t0).count());
    ts.push_back(std::chrono::duration<double>(t2 - t1).count());
    state.SetIterationTime(th.back());
  }
  const double bytes = static_cast<double>(table.bytes().size());
  state.counters["head_GBps"] = benchmark::Counter(bytes / median(th) / 1e9);
  state.counters["stream_GBps"] = benchmark::Counter(bytes / median(ts) / 1e9);
  state.counters["ratio"] = median(th) / median(ts);
}
BENCHMARK(BM_Head)->Args({32000, 2560, 1})->Args({32000, 2560, 2})->UseManualTime()->MinTime(0.5)->Unit(benchmark::kMillisecond);

void BM_Attention(benchmark::State& state) {
  const std::int64_t pos = state.range(0), C = pos + 1;
  const int threads = static_cast<int>(state.range(1));
  const std::string c = "f16[1, " + std::to_string(C) + ", 5, 128]";
  const std::string tir = "func @f(%q: f32[1, 20, 128], %k: " + c + ", %v: " + c + ", %pos: i32[]) -> f32[1, 20, 128] {\n^entry:\n"
                          "  %y = attention %q, %k, %v, %pos {layer = 0, scale = 0.08838834764831845} : f32[1, 20, 128]\n"
                          "  ret %y\n}\n";
  auto impl = load_llvm(tir, {}, threads);
  if (!impl.ok()) return state.SkipWithError(impl.error().message.c_str());
  auto m = ir::parse_module(tir, "bench.tir");
  const std::vector<ir::HostTensor> args = {ir::HostTensor::random(ElemKind::F32, {1, 20, 128}, 1),
                                            ir::HostTensor::random(ElemKind::F16, {1, C, 5, 128}, 2),
                                            ir::HostTensor::random(ElemKind::F16, {1, C, 5, 128}, 3),
                                            ir::HostTensor{ElemKind::I32, {}, {static_cast<double>(pos)}}};
  std::vector<std::vector<std::uint8_t>> bytes;
  for (const auto& a : args) bytes.push_back(a.to_bytes());
  std::vector<float> y(20 * 128);
  void* buffers[] = {bytes[0].data(), bytes[1].data(), bytes[2].data(), bytes[3].data(), y.data()};
  std::vector<double> tl, ti;
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    if (!impl->kernel.run(impl->kernel.state, buffers).ok()) return state.SkipWithError("kernel failed");
    auto t1 = std::chrono::steady_clock::now();
    tl.push_back(std::chrono::duration<double>(t1 - t0).count());
    state.SetIterationTime(tl.back());
    if (ti.size() < 3) {  // the interpreter is slow: a few calls are enough for a median
      auto w = ir::interpret(*m, "f", args, {});
      benchmark::DoNotOptimize(w.ok());
      ti.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count());
    }
  }
  state.counters["llvm_us"] = benchmark::Counter(median(tl) * 1e6);
  state.counters["interp_us"] = benchmark::Counter(median(ti) * 1e6);
  state.counters["vs_interp"] = median(ti) / median(tl);
}
BENCHMARK(BM_Attention)->Args({127, 1})->Args({1023, 1})->Args({1023, 2})->UseManualTime()->MinTime(0.3)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
