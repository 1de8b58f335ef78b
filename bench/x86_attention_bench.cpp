// SPDX-License-Identifier: Apache-2.0
// x86_attention_bench.cpp - the x86 attention step (targets/x86/attention.cpp) at BitNet 2B4T's shape
// (HQ = 20, HKV = 5, D = 128, an f16 cache of capacity C = 4096) against the reference step it replaced
// and the streaming read of the cache rows it reads.
//
// Rows, in this order, in one process:
//   reference/M<m>_pos<p>    the interpreter on the one attention op (what a reference step
//                            ran: from_bytes, ir::interpret, to_bytes), one iteration
//   x86/M<m>_pos<p>/t<n>     Plan::run of the attention op (the x86 step), n threads
//   stream/M<m>_pos<p>       ceilings' stream_sum over the key and value rows the step reads
//                            (2 (pos + M) HKV D 2 bytes): the floor of a decode step
// Counters: us per call; on x86 rows vs_reference = t_reference / t and vs_stream =
// t_stream / t (1 is the floor). Run: build/bench/bench_x86_attention.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "bench/tbb_parallel.h"
#include "ir/interpret.h"
#include "ir/parse.h"
#include "targets/x86/ceilings.h"
#include "targets/x86/isa.h"
#include "targets/x86/plan.h"

namespace {

using namespace ternjit;

constexpr std::int64_t kHQ = 20, kHKV = 5, kD = 128, kC = 4096;
std::map<std::string, double> g_ref_us, g_stream_us;

std::string text(std::int64_t M) {
  const std::string q = "f32[" + std::to_string(M) + ", 20, 128]", c = "f16[1, 4096, 5, 128]";
  return "func @f(%q: " + q + ", %k: " + c + ", %v: " + c + ", %pos: i32[]) -> " + q +
         " {\n^entry:\n  %a = attention %q, %k, %v, %pos {layer = 0, scale = 0.08838834764831845} : " + q +
         "\n  ret %a\n}\n";
}

struct Inputs {
  std::vector<float> q;
  std::vector<std::uint16_t> k, v;
};

const Inputs& inputs(std::int64_t M) {
  static std::map<std::int64_t, Inputs> all;
  auto it = all.find(M);
  if (it != all.end()) return it->second;
  Inputs in;
  in.q.assign(static_cast<std::size_t>(M * kHQ * kD), 0.03f);
  in.k.assign(static_cast<std::size_t>(kC * kHKV * kD), 0x2E66);  // 0.1 in f16
  in.v.assign(in.k.size(), 0x3C00);                                // 1.0
  return all.emplace(M, std::move(in)).first->second;
}

std::string key(std::int64_t M, std::int64_t pos) { return "M" + std::to_string(M) + "_pos" + std::to_string(pos); }

void bm_reference(benchmark::State& s, std::int64_t M, std::int64_t pos) {
  auto m = ir::parse_module(text(M), "att.tir");
  if (!m.ok()) return s.SkipWithError(m.error().message.c_str());
  const Inputs& in = inputs(M);
  double us = 0;
  for (auto _ : s) {
    const auto t0 = std::chrono::steady_clock::now();
    auto q = ir::HostTensor::from_bytes(ElemKind::F32, {M, kHQ, kD},
                                        {reinterpret_cast<const std::uint8_t*>(in.q.data()), in.q.size() * 4});
    auto k = ir::HostTensor::from_bytes(ElemKind::F16, {1, kC, kHKV, kD},
                                        {reinterpret_cast<const std::uint8_t*>(in.k.data()), in.k.size() * 2});
    auto v = ir::HostTensor::from_bytes(ElemKind::F16, {1, kC, kHKV, kD},
                                        {reinterpret_cast<const std::uint8_t*>(in.v.data()), in.v.size() * 2});
    const ir::HostTensor p{ElemKind::I32, {}, {static_cast<double>(pos)}};
    auto r = ir::interpret(m.value(), "f", std::vector<ir::HostTensor>{q.value(), k.value(), v.value(), p}, {});
    if (!r.ok()) return s.SkipWithError(r.error().message.c_str());
    benchmark::DoNotOptimize(r.value()[0].to_bytes());
    us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    s.SetIterationTime(us / 1e6);
  }
  g_ref_us[key(M, pos)] = us;
  s.counters["us"] = us;
}

void bm_stream(benchmark::State& s, std::int64_t M, std::int64_t pos) {
  const Inputs& in = inputs(M);
  const std::size_t n = static_cast<std::size_t>((pos + M) * kHKV * kD * 2) / 64 * 64;
  std::vector<std::uint8_t> buf(2 * n + 128);
  auto* base = reinterpret_cast<std::uint8_t*>((reinterpret_cast<std::uintptr_t>(buf.data()) + 63) & ~std::uintptr_t{63});
  std::memcpy(base, in.k.data(), n);
  std::memcpy(base + n, in.v.data(), n);
  double us = 0;
  std::uint64_t sink = 0;
  for (auto _ : s) {
    const auto t0 = std::chrono::steady_clock::now();
    sink += targets::x86::stream_sum(base, 2 * n);
    us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    s.SetIterationTime(us / 1e6);
  }
  benchmark::DoNotOptimize(sink);
  g_stream_us[key(M, pos)] = us;
  s.counters["us"] = us;
}

void bm_x86(benchmark::State& s, std::int64_t M, std::int64_t pos, int threads) {
  auto m = ir::parse_module(text(M), "att.tir");
  if (!m.ok()) return s.SkipWithError(m.error().message.c_str());
  targets::x86::PlanOptions o;
  o.isa = *targets::x86::best_isa(targets::x86::host_isas());
  o.threads = threads;
  auto plan = targets::x86::Plan::build(m.value(), "f", {}, o, nullptr);
  if (!plan.ok()) return s.SkipWithError(plan.error().message.c_str());
  const Inputs& in = inputs(M);
  std::vector<float> out(in.q.size());
  std::int32_t p32 = static_cast<std::int32_t>(pos);
  void* bufs[] = {const_cast<float*>(in.q.data()), const_cast<std::uint16_t*>(in.k.data()),
                  const_cast<std::uint16_t*>(in.v.data()), &p32, out.data()};
  const targets::Parallel par = ternjit::bench::parallel_for_threads(threads);
  double us = 0;
  for (auto _ : s) {
    const auto t0 = std::chrono::steady_clock::now();
    if (!plan.value()->run(bufs, par).ok()) return s.SkipWithError("run failed");
    us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    s.SetIterationTime(us / 1e6);
  }
  s.counters["us"] = us;
  if (g_ref_us.count(key(M, pos))) s.counters["vs_reference"] = g_ref_us[key(M, pos)] / us;
  if (g_stream_us.count(key(M, pos))) s.counters["vs_stream"] = g_stream_us[key(M, pos)] / us;
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  if (!targets::x86::host_isas().avx2) {
    std::fprintf(stderr, "SKIP: the host lacks AVX2\n");
    return 0;
  }
  const std::pair<std::int64_t, std::int64_t> cases[] = {{1, 127}, {1, 1023}, {1, 4095}, {128, 0}};
  for (const auto& [M, pos] : cases) {
    const std::string k = key(M, pos);
    if (pos <= 1023)
      benchmark::RegisterBenchmark(("reference/" + k).c_str(), [M, pos](benchmark::State& s) { bm_reference(s, M, pos); })
          ->UseManualTime()
          ->Iterations(1);
    benchmark::RegisterBenchmark(("stream/" + k).c_str(), [M, pos](benchmark::State& s) { bm_stream(s, M, pos); })
        ->UseManualTime()
        ->Iterations(50);
    for (int threads : {1, 2})
      benchmark::RegisterBenchmark(("x86/" + k + "/t" + std::to_string(threads)).c_str(),
                                   [M, pos, threads](benchmark::State& s) { bm_x86(s, M, pos, threads); })
          ->UseManualTime()
          ->Iterations(M == 1 ? 50 : 3);
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
