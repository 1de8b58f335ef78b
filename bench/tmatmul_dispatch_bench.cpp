// SPDX-License-Identifier: Apache-2.0
// tmatmul_dispatch_bench.cpp - the descriptor dispatch's hit beside ternjit_get_kernel's lookup, and a call with the weight passed per call.
//
// Goal (issue 30): a hit of ternjit_tmatmul_dispatch is <= 1 us. Baselines in the same
// process: ternjit_get_kernel on an already specialized kernel (the shape-keyed hit of the
// .tri path), Program::kernel, and a std::unordered_map<std::string, int> lookup of a
// prebuilt key. The call rows compare a dispatched kernel (the weight passed per call, so
// compared with the kept copy on each call) with the same layer compiled from .tri with
// the weight bound once (ternjit_kernel_entry): their ratio is the per-call compare's cost.
// Report: BM_DispatchHitC / BM_GetKernelHitC, BM_CallDispatched / BM_CallBound. Run:
//   build/bench/bench_tmatmul_dispatch --benchmark_min_time=0.2
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

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

}  // namespace

BENCHMARK_MAIN();
