// SPDX-License-Identifier: Apache-2.0
// x86_jit_bench.cpp - how long the x86 target takes to generate a kernel (goal < 50 us).
//
// tmatmul/...: TMatMulKernel::create (heuristic config, Xbyak emit, finalize: the
// pages turned read-execute) for BitNet-like problems on each ISA; code for ISAs the
// host lacks is generated (allow_foreign_isa) but never run. rmsnorm/...:
// generate_eltwise for a parsed rmsnorm of 1 x 4096 f32. Counters: us per kernel and
// code bytes. The time includes freeing the kernel (munmap), as a cache eviction would.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <string>

#include "ir/parse.h"
#include "targets/x86/eltwise.h"
#include "targets/x86/isa.h"
#include "targets/x86/tmatmul.h"

namespace {

using namespace ternjit;
using namespace ternjit::targets::x86;

struct JitCase {
  const char* name;
  std::int64_t M, K, N;
  ElemKind x_kind;
};
constexpr JitCase kCases[] = {
    {"gemv_i8_K4096_N4096", 1, 4096, 4096, ElemKind::I8},
    {"gemm_i8_M32_K4096_N14336", 32, 4096, 14336, ElemKind::I8},
    {"gemm_i8_M512_K14336_N4096", 512, 14336, 4096, ElemKind::I8},
    {"gemv_f32_K2560_N6912", 1, 2560, 6912, ElemKind::F32},
};

double elapsed_us(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
}

void bm_tmatmul_create(benchmark::State& state, JitCase c, Isa isa) {
  TMatMulProblem p;
  p.M = c.M;
  p.K = c.K;
  p.N = c.N;
  p.x_kind = c.x_kind;
  p.out_kind = c.x_kind == ElemKind::I8 ? ElemKind::F32 : c.x_kind;
  p.x_scale = c.x_kind == ElemKind::I8;
  p.w_scale = true;
  p.w_scale_per_channel = true;
  const TMatMulConfig config = default_config(p, isa, 1);
  std::size_t bytes = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    auto k = TMatMulKernel::create(p, config, /*allow_foreign_isa=*/true);
    if (!k.ok()) {
      state.SkipWithError(k.error().message.c_str());
      return;
    }
    bytes = 0;
    for (const auto& blob : (*k)->code()) bytes += blob.code.size();
    benchmark::DoNotOptimize(k);
  }
  state.counters["us"] = elapsed_us(t0) / static_cast<double>(std::max<benchmark::IterationCount>(state.iterations(), 1));
  state.counters["code_bytes"] = static_cast<double>(bytes);
  state.SetLabel(config.str() + (host_isas().supports(isa) ? "" : " (host lacks it: generated only)"));
}

constexpr const char* kRmsnormIr = R"(func @norm(%x: f32[1, 4096], %g: f32[4096]) -> f32[1, 4096] {
^entry:
  %y = rmsnorm %x, %g {eps = 1e-05} : f32[1, 4096]
  ret %y
}
)";

void bm_rmsnorm_generate(benchmark::State& state, Isa isa) {
  auto m = ir::parse_module(kRmsnormIr, "rmsnorm.tir");
  if (!m.ok()) {
    state.SkipWithError(("parse: " + m.error().message).c_str());
    return;
  }
  const ir::Function& f = m->functions().front();
  ir::InstId inst = f.insts(f.blocks().front()).front();
  std::string describe;
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    auto k = generate_eltwise(f, inst, isa, /*allow_foreign_isa=*/true);
    if (!k.ok()) {
      state.SkipWithError(k.error().message.c_str());
      return;
    }
    describe = (*k)->describe();
    benchmark::DoNotOptimize(k);
  }
  state.counters["us"] = elapsed_us(t0) / static_cast<double>(std::max<benchmark::IterationCount>(state.iterations(), 1));
  state.SetLabel(describe);
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      return colon == std::string::npos ? line : line.substr(colon + 2);
    }
  return "unknown";
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  std::string isas;
  for (Isa isa : kAllIsas)
    if (host_isas().supports(isa)) isas += (isas.empty() ? "" : " ") + std::string(isa_name(isa));
  benchmark::AddCustomContext("cpu_model", cpu_model());
  benchmark::AddCustomContext("host_isas", isas);
  for (Isa isa : {Isa::Avx2, Isa::Avx512Vnni, Isa::Amx}) {
    for (const JitCase& c : kCases)
      benchmark::RegisterBenchmark(("tmatmul/" + std::string(c.name) + "/" + std::string(isa_name(isa))).c_str(),
                                   [c, isa](benchmark::State& s) { bm_tmatmul_create(s, c, isa); })
          ->Unit(benchmark::kMicrosecond);
    if (isa != Isa::Amx)
      benchmark::RegisterBenchmark(("rmsnorm/1x4096/" + std::string(isa_name(isa))).c_str(),
                                   [isa](benchmark::State& s) { bm_rmsnorm_generate(s, isa); })
          ->Unit(benchmark::kMicrosecond);
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
