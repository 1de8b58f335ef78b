// SPDX-License-Identifier: Apache-2.0
// backward_bench.cpp - the backward of a 2560 x 6912 BitLinear (ternjit::grad) against its forward, in one process.
//
// The layer is the QAT BitLinear on latent f32 weights `y = quantize_int8(x) @
// ternarize_absmean(w)`, compiled by one engine (x86 when available, else the default
// target), weights bound once. Rows, for M in {8, 32, 128}:
//   forward   L.forward (int8 x ternary tmatmul; the weights ternarized once at load)
//   bwd_dx    the backward with respect to x only (frozen weights): one ternary tmatmul
//             by the transposed weights, which are packed once at load
//   bwd_dx_dw the backward with respect to x and the latent weights: adds the f32 weight
//             gradient q^T (dy x_scale), the x86 dense f32 matmul kernel
//   bwd_dx_int8, bwd_dx_dw_int8  the same with GradOptions::int8_dx (opt-in lower
//             precision): dy quantized to int8 per row, dx on the int8 ternary kernel
//   bwd_dw_int8  the weight gradient alone (wrt @L.w) with GradOptions::int8_dw: the
//             int8 activations by the gradient quantized per column, an exact int8 x int8
//             matmul (vpdpbusd) with the f32 scale epilogue and streaming stores
//   bwd_dx_dw_int8_both  dx and dW with int8_dx and int8_dw (the fastest backward)
//   dw_write_floor  writing the K x N f32 weight gradient once (70.8 MB, streaming
//             stores): what any f32 dW costs at least, whatever its kernel
//   peak_f32_fma, peak_int8_vnni  M x K x N multiply-adds at the core's peak, measured by
//             a tight loop of vfmadd231ps / vpdpbusd zmm: the compute floors of an f32
//             product (exact dx, dW) and an int8 one (the forward, int8 dx)
//   torch_*   where libtorch is found (Debian libtorch-dev): the same layer in torch f32
//             with the straight-through estimators written as x + (q(x) - x).detach(),
//             one thread: its forward, backward w.r.t. x, and w.r.t. x and the weights
// Counters: `ms` per call; ternjit rows `vs_forward` = time / ternjit forward's (the
// issue's goal: backward <= 2.5x forward); torch rows `vs_ternjit` = torch time /
// ternjit's time of the same row. ternjit runs one thread too. Run:
//   build/bench/bench_backward --benchmark_min_time=0.5
#include <benchmark/benchmark.h>

#include <algorithm>
#include <immintrin.h>

#include <chrono>
#include <ctime>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "ir/tensor.h"
#ifdef TERNJIT_BENCH_TORCH
#include <torch/torch.h>
#endif
#include "ternjit/builder.h"
#include "ternjit/engine.h"

namespace {

constexpr std::int64_t kK = 2560, kN = 6912;

constexpr const char* kLayer = R"(param @L.w : f32[K, N]

func @L.forward<M, K, N>(%x: f32[M, K]) -> f32[M, N] {
^entry:
  %w = param @L.w : f32[K, N]
  %q = quantize_int8 %x : f32[M, K]
  %t = ternarize_absmean %w : f32[K, N]
  %y = matmul %q, %t : f32[M, N]
  ret %y
}
)";

struct Fixture {
  ternjit::Engine engine;
  ternjit::Program dx_only;  // L.forward.bwd with respect to x
  ternjit::Program dx_dw;    // with respect to x and @L.w
  ternjit::Program dx_only_int8, dx_dw_int8;  // the same with GradOptions::int8_dx
  ternjit::Program dw_int8, dx_dw_both;        // wrt @L.w with int8_dw; wrt x, @L.w with both
  std::vector<float> w;

  static Fixture make() {
    ternjit::EngineOptions o;
    o.target = "x86";
    o.threads = 1;
    o.cache_dir = "off";
    auto e = ternjit::Engine::create(o);
    if (!e.ok()) {
      o.target = "auto";
      e = ternjit::Engine::create(o);
    }
    if (!e.ok()) std::abort();
    ternjit::Program dx_only = program(*e, {"x"}, false), dx_dw = program(*e, {"x", "@L.w"}, false);
    ternjit::Program dx_only8 = program(*e, {"x"}, true), dx_dw8 = program(*e, {"x", "@L.w"}, true);
    ternjit::Program dw8 = program(*e, {"@L.w"}, false, true), both = program(*e, {"x", "@L.w"}, true, true);
    Fixture f{std::move(e.value()), std::move(dx_only), std::move(dx_dw), std::move(dx_only8), std::move(dx_dw8),
              std::move(dw8), std::move(both), {}};
    f.w = ternjit::ir::HostTensor::random(ternjit::ElemKind::F32, {kK, kN}, 1).to_f32();
    for (ternjit::Program* p : {&f.dx_only, &f.dx_dw, &f.dx_only_int8, &f.dx_dw_int8, &f.dw_int8, &f.dx_dw_both})
      if (!p->bind("L.w", {f.w.data(), ternjit::ElemKind::F32, {kK, kN}}).ok()) std::abort();
    return f;
  }
  static ternjit::Program program(ternjit::Engine& e, std::vector<std::string> wrt, bool int8_dx, bool int8_dw = false) {
    auto m = ternjit::Module::from_text(kLayer, "bitlinear_qat.tir");
    if (!m.ok()) std::abort();
    ternjit::GradOptions go;
    go.wrt = std::move(wrt);
    go.int8_dx = int8_dx;
    go.int8_dw = int8_dw;
    if (!ternjit::grad(*m, "L.forward", go).ok()) std::abort();
    auto p = e.compile(*m);
    if (!p.ok()) std::abort();
    return std::move(p).value();
  }
};

Fixture& fixture() {
  static Fixture f = Fixture::make();  // benchmark-local; the library has no globals
  return f;
}

enum class Row { Forward, BackwardDx, BackwardDxDw, BackwardDxInt8, BackwardDxDwInt8, BackwardDwInt8, BackwardBothInt8, DwWriteFloor };

std::map<std::pair<Row, std::int64_t>, double>& ternjit_ms() {
  static std::map<std::pair<Row, std::int64_t>, double> ms;  // per row and M, for the ratios
  return ms;
}
std::map<std::pair<Row, std::int64_t>, double>& ternjit_cpu_ms() {
  static std::map<std::pair<Row, std::int64_t>, double> ms;  // the same in CPU time
  return ms;
}

// The process's CPU time in ms: one thread works (threads = 1), so on a loaded machine
// this is the time the work took, without the time other processes held the core.
double cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
}

// The counters of a ternjit row: ms and cpu_ms per call; backward rows the ratios to
// the forward of the same M, by wall clock (vs_forward) and by CPU time (cpu_vs_forward).
void record(benchmark::State& state, Row row, std::int64_t m, double total_ms, double total_cpu_ms) {
  const auto n = static_cast<double>(std::max<benchmark::IterationCount>(1, state.iterations()));
  const double ms = total_ms / n, cms = total_cpu_ms / n;
  state.counters["ms"] = ms;
  state.counters["cpu_ms"] = cms;
  ternjit_ms()[{row, m}] = ms;
  ternjit_cpu_ms()[{row, m}] = cms;
  if (row != Row::Forward && ternjit_ms().contains({Row::Forward, m})) {
    state.counters["vs_forward"] = ms / ternjit_ms()[{Row::Forward, m}];
    state.counters["cpu_vs_forward"] = cms / ternjit_cpu_ms()[{Row::Forward, m}];
  }
}

std::size_t bytes_of(const ternjit::TensorView& t) {
  std::size_t n = 1;
  for (std::int64_t d : t.shape) n *= static_cast<std::size_t>(d);
  return n * std::max<std::size_t>(1, ternjit::elem_bits(t.kind) / 8);
}

// Buffers for `kernel`'s outputs (owned by `bytes`) as views, 64-byte aligned as torch's
// allocator aligns them: the f32 matmul kernel streams a large C (the weight gradient)
// with vmovntps only into 64-byte aligned rows (targets/x86/matmul.cpp).
std::vector<ternjit::TensorView> output_views(const ternjit::Kernel& kernel, std::vector<std::vector<std::uint8_t>>& bytes) {
  std::vector<ternjit::TensorView> views;
  bytes.reserve(kernel.outputs().size());
  for (const ternjit::TensorView& o : kernel.outputs()) {
    bytes.emplace_back(bytes_of(o) + 64);
    auto* p = bytes.back().data();
    p += (64 - reinterpret_cast<std::uintptr_t>(p) % 64) % 64;
    views.push_back({p, o.kind, o.shape});
  }
  return views;
}

void BM_Layer(benchmark::State& state, Row row) {
  Fixture& f = fixture();
  const std::int64_t m = state.range(0);
  std::vector<float> x = ternjit::ir::HostTensor::random(ternjit::ElemKind::F32, {m, kK}, 2).to_f32();
  std::vector<float> dy = ternjit::ir::HostTensor::random(ternjit::ElemKind::F32, {m, kN}, 3).to_f32();
  ternjit::Program& p = row == Row::BackwardDxDw       ? f.dx_dw
                        : row == Row::BackwardDxInt8   ? f.dx_only_int8
                        : row == Row::BackwardDxDwInt8 ? f.dx_dw_int8
                        : row == Row::BackwardDwInt8   ? f.dw_int8
                        : row == Row::BackwardBothInt8 ? f.dx_dw_both
                                                       : f.dx_only;
  // L.forward.fwd once: its saved tensors are the backward's last inputs.
  std::vector<ternjit::TensorView> fwd_in{{x.data(), ternjit::ElemKind::F32, {m, kK}}};
  auto fwd = p.kernel("L.forward.fwd", fwd_in);
  if (!fwd.ok()) std::abort();
  std::vector<std::vector<std::uint8_t>> fwd_bytes, bwd_bytes;
  std::vector<ternjit::TensorView> fwd_out = output_views(**fwd, fwd_bytes);
  if (!p.run("L.forward.fwd", fwd_in, fwd_out).ok()) std::abort();
  std::vector<ternjit::TensorView> bwd_in{fwd_in[0], {dy.data(), ternjit::ElemKind::F32, {m, kN}}};
  bwd_in.insert(bwd_in.end(), fwd_out.begin() + 1, fwd_out.end());
  auto bwd = p.kernel("L.forward.bwd", bwd_in);
  if (!bwd.ok()) std::abort();
  std::vector<ternjit::TensorView> bwd_out = output_views(**bwd, bwd_bytes);
  std::vector<ternjit::TensorView> y_out{fwd_out[0]};
  // Warm-up outside timing: the first call specializes, compiles and loads the kernel.
  if (!(row == Row::Forward ? p.run("L.forward", fwd_in, y_out).ok() : p.run("L.forward.bwd", bwd_in, bwd_out).ok()))
    std::abort();
  double total_ms = 0, total_cpu_ms = 0;
  for (auto _ : state) {
    const double c0 = cpu_ms();
    const auto t0 = std::chrono::steady_clock::now();
    const bool ok = row == Row::Forward ? p.run("L.forward", fwd_in, y_out).ok() : p.run("L.forward.bwd", bwd_in, bwd_out).ok();
    total_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    total_cpu_ms += cpu_ms() - c0;
    if (!ok) state.SkipWithError("run failed");
  }
  record(state, row, m, total_ms, total_cpu_ms);
}

#ifdef TERNJIT_BENCH_TORCH
torch::Tensor ste(const torch::Tensor& v, const torch::Tensor& q) { return v + (q - v).detach(); }

// The layer in torch: per-row absmax int8 and per-tensor absmean ternary, both STE.
torch::Tensor torch_layer(const torch::Tensor& x, const torch::Tensor& w) {
  const torch::Tensor s = x.abs().amax({-1}, true) / 127;
  const torch::Tensor g = w.abs().mean();
  return torch::matmul(ste(x, torch::clamp(torch::round(x / s), -127, 127) * s),
                       ste(w, torch::clamp(torch::round(w / g), -1, 1) * g));
}

void BM_Torch(benchmark::State& state, Row row) {
  torch::set_num_threads(1);
  const std::int64_t m = state.range(0);
  torch::manual_seed(0);
  const torch::Tensor x0 = torch::randn({m, kK}), w0 = torch::randn({kK, kN}), dy = torch::randn({m, kN});
  double total_ms = 0;
  for (auto _ : state) {
    if (row == Row::Forward) {
      torch::NoGradGuard no_grad;
      const auto t0 = std::chrono::steady_clock::now();
      benchmark::DoNotOptimize(torch_layer(x0, w0));
      total_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      continue;
    }
    // The backward alone is timed: the forward that records the graph is not.
    const torch::Tensor x = x0.clone().requires_grad_(true), w = w0.clone().requires_grad_(row == Row::BackwardDxDw);
    const torch::Tensor y = torch_layer(x, w);
    const auto t0 = std::chrono::steady_clock::now();
    y.backward(dy);
    total_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  const double ms = total_ms / static_cast<double>(std::max<benchmark::IterationCount>(1, state.iterations()));
  state.counters["ms"] = ms;
  if (ternjit_ms().contains({row, m})) state.counters["vs_ternjit"] = ms / ternjit_ms()[{row, m}];
}
#endif

// Fills n floats (64-byte aligned) with v by streaming stores: writing without reading
// the lines first, as the f32 matmul kernel stores a large C.
__attribute__((target("avx512f"))) void stream_fill(float* p, std::size_t n, float v) {
  const __m512 x = _mm512_set1_ps(v);
  for (std::size_t i = 0; i + 16 <= n; i += 16) _mm512_stream_ps(p + i, x);
  _mm_sfence();
}

// The floor of any f32 weight gradient: its K x N result written once (streaming
// stores where AVX-512 exists, else std::fill).
void BM_DwWriteFloor(benchmark::State& state) {
  const std::int64_t m = state.range(0);
  std::vector<float> storage(static_cast<std::size_t>(kK * kN) + 16);
  float* dw = storage.data() + (16 - reinterpret_cast<std::uintptr_t>(storage.data()) % 64 / 4) % 16;
  const std::size_t n = static_cast<std::size_t>(kK * kN);
  const bool nt = __builtin_cpu_supports("avx512f");
  double total_ms = 0, total_cpu_ms = 0;
  float v = 0;
  for (auto _ : state) {
    const double c0 = cpu_ms();
    const auto t0 = std::chrono::steady_clock::now();
    v += 1;
    if (nt) stream_fill(dw, n, v);
    else std::fill(dw, dw + n, v);
    benchmark::DoNotOptimize(dw);
    benchmark::ClobberMemory();
    total_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    total_cpu_ms += cpu_ms() - c0;
  }
  record(state, Row::DwWriteFloor, m, total_ms, total_cpu_ms);
}

// Tight loops of independent multiply-adds: the core's peak in f32 FMA (vfmadd231ps zmm,
// 16 multiply-adds) and int8 VNNI (vpdpbusd zmm, 64), in multiply-adds per ms of CPU.
__attribute__((target("avx512f,fma"))) double fma_peak_per_ms() {
  constexpr int kAcc = 12, kIters = 400000;
  __m512 acc[kAcc];
  for (int j = 0; j < kAcc; ++j) acc[j] = _mm512_set1_ps(static_cast<float>(j));
  const __m512 a = _mm512_set1_ps(0.999999F), b = _mm512_set1_ps(1e-7F);
  const double c0 = cpu_ms();
  for (int i = 0; i < kIters; ++i) {
#pragma GCC unroll 12  // the accumulators stay in registers
    for (int j = 0; j < kAcc; ++j) acc[j] = _mm512_fmadd_ps(acc[j], a, b);
  }
  const double ms = cpu_ms() - c0;
  for (int j = 0; j < kAcc; ++j) benchmark::DoNotOptimize(acc[j]);
  return 16.0 * kAcc * kIters / ms;
}
__attribute__((target("avx512f,avx512vnni"))) double vnni_peak_per_ms() {
  constexpr int kAcc = 12, kIters = 400000;
  __m512i acc[kAcc];
  for (int j = 0; j < kAcc; ++j) acc[j] = _mm512_set1_epi32(j);
  const __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-2);
  const double c0 = cpu_ms();
  for (int i = 0; i < kIters; ++i) {
#pragma GCC unroll 12
    for (int j = 0; j < kAcc; ++j) acc[j] = _mm512_dpbusd_epi32(acc[j], a, b);
  }
  const double ms = cpu_ms() - c0;
  for (int j = 0; j < kAcc; ++j) benchmark::DoNotOptimize(acc[j]);
  return 64.0 * kAcc * kIters / ms;
}

// The time one M x K x N matmul takes at that peak (`Row` picks which), as a row with
// the forward ratio: the compute floor of an f32 (dx exact, dW) or int8 (forward,
// int8 dx) product of the layer's size.
void BM_Peak(benchmark::State& state, bool vnni) {
  const std::int64_t m = state.range(0);
  if (!__builtin_cpu_supports("avx512f") || (vnni && !__builtin_cpu_supports("avx512vnni"))) {
    state.SkipWithError("no AVX-512 (VNNI) on this CPU");
    return;
  }
  double best = 0;
  for (auto _ : state) best = std::max(best, vnni ? vnni_peak_per_ms() : fma_peak_per_ms());
  const double ms = static_cast<double>(m * kK * kN) / best;
  state.counters["cpu_ms"] = ms;
  state.counters["gmacs"] = best * 1e-6;
  if (ternjit_cpu_ms().contains({Row::Forward, m}))
    state.counters["cpu_vs_forward"] = ms / ternjit_cpu_ms()[{Row::Forward, m}];
}

// Forward first for each M, so the backward rows can report vs_forward.
void register_all() {
  for (std::int64_t m : {8, 32, 128}) {
    benchmark::RegisterBenchmark("forward", BM_Layer, Row::Forward)->Arg(m)->Unit(benchmark::kMillisecond)->UseRealTime();
    benchmark::RegisterBenchmark("bwd_dx", BM_Layer, Row::BackwardDx)->Arg(m)->Unit(benchmark::kMillisecond)->UseRealTime();
    benchmark::RegisterBenchmark("bwd_dx_dw", BM_Layer, Row::BackwardDxDw)->Arg(m)->Unit(benchmark::kMillisecond)->UseRealTime();
    benchmark::RegisterBenchmark("bwd_dx_int8", BM_Layer, Row::BackwardDxInt8)->Arg(m)->Unit(benchmark::kMillisecond)->UseRealTime();
    benchmark::RegisterBenchmark("bwd_dx_dw_int8", BM_Layer, Row::BackwardDxDwInt8)->Arg(m)->Unit(benchmark::kMillisecond)->UseRealTime();
    benchmark::RegisterBenchmark("bwd_dw_int8", BM_Layer, Row::BackwardDwInt8)->Arg(m)->Unit(benchmark::kMillisecond)->UseRealTime();
    benchmark::RegisterBenchmark("bwd_dx_dw_int8_both", BM_Layer, Row::BackwardBothInt8)->Arg(m)->Unit(benchmark::kMillisecond)->UseRealTime();
    benchmark::RegisterBenchmark("dw_write_floor", BM_DwWriteFloor)->Arg(m)->Unit(benchmark::kMillisecond)->UseRealTime();
    benchmark::RegisterBenchmark("peak_f32_fma", BM_Peak, false)->Arg(m)->Iterations(5)->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark("peak_int8_vnni", BM_Peak, true)->Arg(m)->Iterations(5)->Unit(benchmark::kMillisecond);
#ifdef TERNJIT_BENCH_TORCH
    benchmark::RegisterBenchmark("torch_forward", BM_Torch, Row::Forward)->Arg(m)->Unit(benchmark::kMillisecond)->UseRealTime();
    benchmark::RegisterBenchmark("torch_bwd_dx", BM_Torch, Row::BackwardDx)->Arg(m)->Unit(benchmark::kMillisecond)->UseRealTime();
    benchmark::RegisterBenchmark("torch_bwd_dx_dw", BM_Torch, Row::BackwardDxDw)->Arg(m)->Unit(benchmark::kMillisecond)->UseRealTime();
#endif
  }
}

}  // namespace

int main(int argc, char** argv) {
  register_all();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
