// SPDX-License-Identifier: Apache-2.0
// x86_eltwise_bench.cpp - the x86 row kernels' run time: per-row absmax int8 quantize on finite inputs.
//
// quantize/<isa>/<rows>x<cols>: the generated `quantize` kernel (eltwise_rows.cpp) on
// random finite f32 rows, one thread. Counters: us per call and GBps (input bytes read
// per second). This is the kernel whose absmax scan also detects NaN and inf rows
// (issue 19, item 11): compare builds on the same machine to see what that costs.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "ir/interpret.h"
#include "ir/parse.h"
#include "targets/x86/eltwise.h"
#include "targets/x86/isa.h"

namespace {

using namespace ternjit;
using namespace ternjit::targets::x86;

void bm_quantize(benchmark::State& state, Isa isa, std::int64_t rows, std::int64_t cols) {
  const std::string t = "[" + std::to_string(rows) + ", " + std::to_string(cols) + "]";
  const std::string text = "func @q(%x: f32" + t + ") -> (i8" + t + ", f32[" + std::to_string(rows) +
                           ", 1]) {\n^entry:\n  %q, %s = quantize %x : i8" + t + ", f32[" + std::to_string(rows) +
                           ", 1]\n  ret %q, %s\n}\n";
  auto m = ir::parse_module(text, "quantize.tir");
  if (!m.ok()) return state.SkipWithError(("parse: " + m.error().message).c_str());
  const ir::Function& f = m->functions().front();
  auto k = generate_eltwise(f, f.insts(f.blocks().front()).front(), isa);
  if (!k.ok()) return state.SkipWithError(k.error().message.c_str());
  const std::vector<float> x = ir::HostTensor::random(ElemKind::F32, {rows, cols}, 7).to_f32();
  std::vector<std::int8_t> q(x.size());
  std::vector<float> s(static_cast<std::size_t>(rows));
  const void* in[] = {x.data()};
  void* out[] = {q.data(), s.data()};
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    (*k)->run(in, out, Parallel{});
    benchmark::ClobberMemory();
  }
  const double per = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() /
                     static_cast<double>(std::max<benchmark::IterationCount>(state.iterations(), 1));
  state.counters["us"] = per * 1e6;
  state.counters["GBps"] = static_cast<double>(x.size() * sizeof(float)) / per / 1e9;
  state.SetLabel((*k)->describe());
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  const std::pair<std::int64_t, std::int64_t> shapes[] = {{1, 2560}, {1, 4096}, {32, 4096}, {512, 2560}};
  for (Isa isa : kAllIsas) {
    if (!host_isas().supports(isa)) continue;
    for (const auto& [rows, cols] : shapes)
      benchmark::RegisterBenchmark(
          ("quantize/" + std::string(isa_name(isa)) + "/" + std::to_string(rows) + "x" + std::to_string(cols)).c_str(),
          [isa, rows, cols](benchmark::State& s) { bm_quantize(s, isa, rows, cols); })
          ->UseRealTime();
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
