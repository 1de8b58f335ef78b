// SPDX-License-Identifier: Apache-2.0
// x86_head_bench.cpp - the output head `h @ transpose(token_embd)` of a BitNet 2B4T-shaped model on the
// x86 target (dense NK kernel, targets/x86/dense.cpp) against the streaming read of the table.
//
// The table is f16 [V, E] = [128256, 2560] (656 MB), bound as a parameter and read as stored;
// h is f32 [M, E]. Each case runs, in this order, in one process:
//   stream/t<threads>          ceilings' stream_sum over the table's bytes, one page-aligned
//                              chunk per thread: the decode floor of the head
//   head/M<m>/t<threads>       Plan::run of `matmul(h, transpose(p))` (the plan the engine
//                              builds; no transposed or f32 copy of the table)
// Counters: ms per call, GB/s of table bytes; on head rows vs_stream = t_stream / t (1 is the
// floor; M = 1 decode is read-bound). Ratios need the stream row of the same thread count in
// the same run. Run: build/bench/bench_x86_head [--benchmark_filter=...].
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bench/tbb_parallel.h"
#include "ir/interpret.h"
#include "ir/parse.h"
#include "ir/stored_tensor.h"
#include "targets/x86/ceilings.h"
#include "targets/x86/isa.h"
#include "targets/x86/plan.h"

namespace {

using namespace ternjit;
using targets::x86::Isa;

constexpr std::int64_t kV = 128256, kE = 2560;
std::map<int, double> g_stream_ms;  // by threads

const std::vector<std::uint8_t>& table_bytes() {
  static const std::vector<std::uint8_t> b = [] {
    std::vector<std::uint8_t> v(static_cast<std::size_t>(kV * kE * 2));
    std::uint32_t x = 12345;
    for (std::size_t i = 0; i < v.size(); i += 2) {
      x = x * 1664525u + 1013904223u;
      const std::uint16_t h = static_cast<std::uint16_t>(0x3000u | ((x >> 16) & 0x0FFFu) | ((x & 1u) << 15));  // |v| < 1
      std::memcpy(v.data() + i, &h, 2);
    }
    return v;
  }();
  return b;
}

void bm_stream(benchmark::State& s, int threads) {
  const auto& t = table_bytes();
  const targets::Parallel par = ternjit::bench::parallel_for_threads(threads);
  // Page-aligned chunks, one per thread (stream_sum needs 64-byte alignment).
  auto* base = reinterpret_cast<const std::uint8_t*>((reinterpret_cast<std::uintptr_t>(t.data()) + 4095) & ~std::uintptr_t{4095});
  const std::size_t n = (t.size() - static_cast<std::size_t>(base - t.data())) / 4096 * 4096;
  const std::size_t chunk = n / static_cast<std::size_t>(threads) / 4096 * 4096;
  std::vector<std::uint64_t> sink(static_cast<std::size_t>(threads));
  double ms = 0;
  for (auto _ : s) {
    const auto t0 = std::chrono::steady_clock::now();
    par.for_each(threads, [&](std::int64_t i) {
      sink[static_cast<std::size_t>(i)] += targets::x86::stream_sum(base + static_cast<std::size_t>(i) * chunk, chunk);
    });
    ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    s.SetIterationTime(ms / 1e3);
  }
  benchmark::DoNotOptimize(sink.data());
  g_stream_ms[threads] = ms;
  s.counters["ms"] = ms;
  s.counters["GB/s"] = static_cast<double>(chunk) * threads / ms / 1e6;
}

void bm_head(benchmark::State& s, std::int64_t M, int threads) {
  const std::string p = "f16[" + std::to_string(kV) + ", " + std::to_string(kE) + "]";
  const std::string text = "param @M.embd : " + p + "\n\nfunc @f(%h: f32[" + std::to_string(M) + ", " +
                           std::to_string(kE) + "]) -> f32[" + std::to_string(M) + ", " + std::to_string(kV) +
                           "] {\n^entry:\n  %p = param @M.embd : " + p + "\n  %t = transpose %p {perm = [1, 0]} : f16[" +
                           std::to_string(kE) + ", " + std::to_string(kV) + "]\n  %c = matmul %h, %t : f32[" +
                           std::to_string(M) + ", " + std::to_string(kV) + "]\n  ret %c\n}\n";
  auto m = ir::parse_module(text, "head.tir");
  if (!m.ok()) return s.SkipWithError(m.error().message.c_str());
  ir::ParamValues params;
  auto st = ir::StoredTensor::view(ElemKind::F16, {kV, kE}, ir::SharedBytes::borrow(table_bytes()));
  if (!st.ok()) return s.SkipWithError(st.error().message.c_str());
  params.values.emplace("M.embd", std::move(st).value());
  targets::x86::PlanOptions o;
  o.isa = *targets::x86::best_isa(targets::x86::host_isas());
  o.threads = threads;
  auto plan = targets::x86::Plan::build(m.value(), "f", params, o, nullptr);
  if (!plan.ok()) return s.SkipWithError(plan.error().message.c_str());
  std::vector<float> h(static_cast<std::size_t>(M * kE), 0.01f), c(static_cast<std::size_t>(M * kV));
  void* bufs[] = {h.data(), c.data()};
  const targets::Parallel par = ternjit::bench::parallel_for_threads(threads);
  double ms = 0;
  for (auto _ : s) {
    const auto t0 = std::chrono::steady_clock::now();
    if (!plan.value()->run(bufs, par).ok()) return s.SkipWithError("run failed");
    ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    s.SetIterationTime(ms / 1e3);
  }
  s.counters["ms"] = ms;
  s.counters["GB/s"] = static_cast<double>(table_bytes().size()) / ms / 1e6;
  if (g_stream_ms.count(threads)) s.counters["vs_stream"] = g_stream_ms[threads] / ms;
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  if (!targets::x86::host_isas().avx2) {
    std::fprintf(stderr, "SKIP: the host lacks AVX2\n");
    return 0;
  }
  for (int threads : {1, 2}) {
    benchmark::RegisterBenchmark(("stream/t" + std::to_string(threads)).c_str(),
                                 [threads](benchmark::State& s) { bm_stream(s, threads); })
        ->UseManualTime()
        ->Iterations(5);
    for (std::int64_t M : {1, 8, 64})
      benchmark::RegisterBenchmark(("head/M" + std::to_string(M) + "/t" + std::to_string(threads)).c_str(),
                                   [M, threads](benchmark::State& s) { bm_head(s, M, threads); })
          ->UseManualTime()
          ->Iterations(M == 1 ? 5 : 1);
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
