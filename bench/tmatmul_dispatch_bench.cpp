// SPDX-License-Identifier: Apache-2.0
// tmatmul_dispatch_bench.cpp - the descriptor dispatch's hit beside ternjit_get_kernel's lookup, and a call with the weight passed per call.
//
// Goal (issue 30): a hit of ternjit_tmatmul_dispatch is <= 1 us. Baselines in the same
// process: ternjit_get_kernel on an already specialized kernel (the shape-keyed hit of the
// .tri path), Program::kernel, and a std::unordered_map<std::string, int> lookup of a
// prebuilt key. The call rows compare a dispatched kernel (the weight passed per call, so
// compared with the kept copy on each call) with the same layer compiled from .tri with
// the weight bound once (ternjit_kernel_entry): their ratio is the per-call compare's cost.
// BM_CallBoundWeight is the dispatch's own bound weight (ternjit_tmatmul_bind: x only per
// call, no compare). BM_BindTQ2_0 times binds of K = 2560, N = 6912 TQ2_0 weights (BitNet
// 2B's FFN up projection) on one descriptor: the first (which compiles), the second
// (another weight: the engine's compiled code reused?), with the disk cache on (arg 1) or
// off (arg 0), and the bytes a bound weight holds.
// Report: BM_DispatchHitC / BM_GetKernelHitC, BM_CallDispatched / BM_CallBound /
// BM_CallBoundWeight, BM_BindTQ2_0's counters. Run:
//   build/bench/bench_tmatmul_dispatch --benchmark_min_time=0.2
#include <benchmark/benchmark.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "formats/gguf.h"
#include "formats/ternary.h"
#include "ir/tensor.h"
#include "ternjit/engine.h"
#include "ternjit/ternjit.h"
#include "ternjit/tmatmul.h"

namespace {

constexpr std::int64_t kK = 1024, kN = 1024;

// The same layer as .tri text: f32 x, a column scale, bias. (.tri has no int8 argument
// form of tmatmul: `x @ w` of an i8 argument stays a reference matmul.)
constexpr const char* kLayer = R"(layer D {
    param w: TernaryTensor[1024, 1024]
    fn forward(x: Tensor[M, 1024], s: Tensor[1024], b: Tensor[1024]) -> Tensor[M, 1024] {
        return (x @ w) * s + b
    }
}
)";

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "bench_tmatmul_dispatch: %s: %s\n", what, ternjit_last_error());
    std::abort();
  }
}

struct Fixture {
  ternjit_engine* engine = nullptr;
  ternjit_program* program = nullptr;
  ternjit_tmatmul_desc desc{};
  std::vector<std::int8_t> w;
  std::vector<float> x;
  std::vector<std::uint8_t> packed;
  std::vector<float> s, b, y;
  std::vector<std::int64_t> x_shape{1, kK}, n_shape{kN};
  std::vector<ternjit_tensor> inputs;

  Fixture() {
    ternjit_engine_options o;
    ternjit_engine_options_init(&o);
    o.cache_dir = "off";
    o.threads = 1;
    check(ternjit_engine_create(&o, &engine) == TERNJIT_OK, "engine");
    w = ternjit::ir::HostTensor::random(ternjit::ElemKind::T2, {kK * kN}, 1).to_i8();
    packed = ternjit::formats::pack_ternary(ternjit::WeightFormat::Tern2, w).value();
    x.assign(kK, 0.5f);
    s.assign(kN, 0.5f);
    b.assign(kN, 0.25f);
    y.assign(kN, 0);
    // 16 descriptors in the table, the benchmarked one among them.
    for (std::int64_t n = 8; n < 8 + 16; ++n) {
      ternjit_tmatmul_desc d;
      ternjit_tmatmul_desc_init(&d);
      d.k = kK;
      d.n = n;
      ternjit_tmatmul_fn fn;
      const void* st;
      check(ternjit_tmatmul_dispatch(engine, &d, &fn, &st) == TERNJIT_OK, "dispatch");
    }
    ternjit_tmatmul_desc_init(&desc);
    desc.k = kK;
    desc.n = kN;
    desc.scale = TERNJIT_TMATMUL_SCALE_COLUMN;
    desc.flags = TERNJIT_TMATMUL_BIAS;
    check(ternjit_compile(engine, kLayer, std::strlen(kLayer), "d.tri", &program) == TERNJIT_OK, "compile");
    const std::int64_t w_shape[] = {kK, kN};
    check(ternjit_bind_weight_sized(program, "D.w", packed.data(), packed.size(), TERNJIT_U8, TERNJIT_FORMAT_TERN2,
                                    w_shape, 2) == TERNJIT_OK,
          "bind");
    inputs = {{x.data(), TERNJIT_F32, 2, x_shape.data()},
              {s.data(), TERNJIT_F32, 1, n_shape.data()},
              {b.data(), TERNJIT_F32, 1, n_shape.data()}};
    ternjit_kernel* k;
    check(ternjit_get_kernel(program, "D.forward", inputs.data(), inputs.size(), &k) == TERNJIT_OK, "get_kernel");
  }
  ~Fixture() {
    ternjit_program_destroy(program);
    ternjit_engine_destroy(engine);
  }
  ternjit_tmatmul_args args() {
    ternjit_tmatmul_args a{};
    a.x = x.data();
    a.w = packed.data();
    a.w_scale = s.data();
    a.bias = b.data();
    a.y = y.data();
    a.m = 1;
    return a;
  }
};

Fixture& fixture() {
  static Fixture f;  // benchmark-local; the library has no globals
  return f;
}

void BM_DispatchHitC(benchmark::State& state) {
  Fixture& f = fixture();
  ternjit_tmatmul_fn fn;
  const void* st;
  check(ternjit_tmatmul_dispatch(f.engine, &f.desc, &fn, &st) == TERNJIT_OK, "dispatch");
  for (auto _ : state) {
    auto r = ternjit_tmatmul_dispatch(f.engine, &f.desc, &fn, &st);
    benchmark::DoNotOptimize(r);
    benchmark::DoNotOptimize(st);
  }
}
BENCHMARK(BM_DispatchHitC);
BENCHMARK(BM_DispatchHitC)->Threads(2)->UseRealTime();

void BM_GetKernelHitC(benchmark::State& state) {
  Fixture& f = fixture();
  ternjit_kernel* k;
  for (auto _ : state) {
    auto r = ternjit_get_kernel(f.program, "D.forward", f.inputs.data(), f.inputs.size(), &k);
    benchmark::DoNotOptimize(r);
    benchmark::DoNotOptimize(k);
  }
}
BENCHMARK(BM_GetKernelHitC);

// The lookup of a prebuilt key of similar length among 16 entries.
void BM_MapLookup(benchmark::State& state) {
  std::unordered_map<std::string, int> map;
  for (int n = 8; n < 24; ++n) map.emplace("tmatmul|m1|k1024|n" + std::to_string(n) + "|tern2|f32", n);
  const std::string key = "tmatmul|m1|k1024|n16|tern2|f32";
  for (auto _ : state) {
    auto it = map.find(key);
    benchmark::DoNotOptimize(it);
  }
}
BENCHMARK(BM_MapLookup);

// One call of the dispatched kernel, M = 1, K = N = 1024 (the weight compared per call).
void BM_CallDispatched(benchmark::State& state) {
  Fixture& f = fixture();
  ternjit_tmatmul_fn fn;
  const void* st;
  check(ternjit_tmatmul_dispatch(f.engine, &f.desc, &fn, &st) == TERNJIT_OK, "dispatch");
  const ternjit_tmatmul_args a = f.args();
  check(fn(st, &a) == TERNJIT_OK, "call");
  for (auto _ : state) {
    auto r = fn(st, &a);
    benchmark::DoNotOptimize(r);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(f.packed.size()));
}
BENCHMARK(BM_CallDispatched);

// The same layer from .tri with the weight bound once, called through ternjit_kernel_entry.
void BM_CallBound(benchmark::State& state) {
  Fixture& f = fixture();
  ternjit_kernel* k;
  check(ternjit_get_kernel(f.program, "D.forward", f.inputs.data(), f.inputs.size(), &k) == TERNJIT_OK, "kernel");
  ternjit_kernel_fn fn;
  const void* st;
  check(ternjit_kernel_entry(k, &fn, &st) == TERNJIT_OK, "entry");
  void* buffers[] = {f.x.data(), f.s.data(), f.b.data(), f.y.data()};
  for (auto _ : state) {
    auto r = fn(st, buffers);
    benchmark::DoNotOptimize(r);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(f.packed.size()));
}
BENCHMARK(BM_CallBound);

// The dispatch's bound weight: the same layer and weight bound once, calls pass x only.
void BM_CallBoundWeight(benchmark::State& state) {
  Fixture& f = fixture();
  ternjit_tmatmul_bound* bound = nullptr;
  check(ternjit_tmatmul_bind(f.engine, &f.desc, f.packed.data(), f.packed.size(), f.s.data(), f.b.data(), &bound) ==
            TERNJIT_OK,
        "bind");
  ternjit_tmatmul_fn fn;
  const void* st;
  check(ternjit_tmatmul_bound_entry(bound, &fn, &st) == TERNJIT_OK, "entry");
  ternjit_tmatmul_args a{};
  a.x = f.x.data();
  a.y = f.y.data();
  a.m = 1;
  for (auto _ : state) {
    auto r = fn(st, &a);
    benchmark::DoNotOptimize(r);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(f.packed.size()));
  ternjit_tmatmul_bound_destroy(bound);
}
BENCHMARK(BM_CallBoundWeight);

// Random TQ2_0 blocks of a K x N weight (N rows of K / 256 blocks), scale 1/64.
std::vector<std::uint8_t> tq2_0_weight(std::int64_t K, std::int64_t N, std::uint64_t seed) {
  const auto values = ternjit::ir::HostTensor::random(ternjit::ElemKind::T2, {K * N}, seed).to_i8();
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(K * N / 256 * 66));
  for (std::size_t b = 0; b < bytes.size() / 66; ++b)
    ternjit::formats::encode_tq2_0_block(values.data() + b * 256, 1.0f / 64, bytes.data() + b * 66);
  return bytes;
}

// Two binds of different K = 2560, N = 6912 TQ2_0 weights to one descriptor (any M up to
// 512, int8 x quantized in the kernel: BitNet's FFN up projection) on a fresh engine.
void BM_BindTQ2_0(benchmark::State& state) {
  constexpr std::int64_t K = 2560, N = 6912;
  const bool disk = state.range(0) != 0;
  std::array<std::vector<std::uint8_t>, 2> weights{tq2_0_weight(K, N, 1), tq2_0_weight(K, N, 2)};
  std::string dir = "off";
  if (disk) {
    char tmpl[] = "/tmp/ternjit-bind-bench-XXXXXX";
    check(mkdtemp(tmpl) != nullptr, "mkdtemp");
    dir = tmpl;
  }
  for (auto _ : state) {
    ternjit_engine_options o;
    ternjit_engine_options_init(&o);
    o.cache_dir = dir.c_str();
    ternjit_engine* engine = nullptr;
    check(ternjit_engine_create(&o, &engine) == TERNJIT_OK, "engine");
    ternjit_tmatmul_desc d;
    ternjit_tmatmul_desc_init(&d);
    d.m = TERNJIT_TMATMUL_ANY_M;
    d.m_max = 512;
    d.k = K;
    d.n = N;
    d.weight = TERNJIT_TMATMUL_W_GGUF_TQ2_0;
    d.x = TERNJIT_TMATMUL_X_F32_ROW_I8;
    std::array<ternjit_tmatmul_bound*, 2> bound{};
    std::array<double, 2> seconds{};
    for (std::size_t i = 0; i < 2; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      check(ternjit_tmatmul_bind(engine, &d, weights[i].data(), weights[i].size(), nullptr, nullptr, &bound[i]) ==
                TERNJIT_OK,
            "bind");
      seconds[i] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    state.counters["first_bind_ms"] = seconds[0] * 1e3;
    state.counters["second_bind_ms"] = seconds[1] * 1e3;
    state.counters["resident_MiB"] = static_cast<double>(ternjit_tmatmul_bound_bytes(bound[1])) / (1 << 20);
    state.counters["tq2_0_MiB"] = static_cast<double>(weights[1].size()) / (1 << 20);
    for (auto* b : bound) ternjit_tmatmul_bound_destroy(b);
    ternjit_engine_destroy(engine);
  }
  if (disk) std::filesystem::remove_all(dir);
}
BENCHMARK(BM_BindTQ2_0)->Arg(0)->Arg(1)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
