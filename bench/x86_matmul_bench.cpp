// SPDX-License-Identifier: Apache-2.0
// x86_matmul_bench.cpp - the x86 dense f32 matmul kernel against oneDNN's dnnl_sgemm and the reference step it replaced.
//
// Shapes M x K x N (C[M, N] = A[M, K] @ B[K, N], f32): the BitLinear 2560 x 6912 layer's
// forward-like products at M = 8 and 128, and its weight gradient dW = x^T dy for a
// batch of 32 tokens, i.e. M x K x N = 2560 x 32 x 6912 with A given transposed (x is
// [32, 2560]: the plan reads `transpose %x` in place), 1 and 2 threads. Each case runs,
// in this order (Google Benchmark keeps registration order), in one process:
//   onednn_sgemm/... dnnl_sgemm (row-major, transa 'T' for the dW case), OpenMP threads
//   reference/...    what the x86 plan ran before: the interpreter on the one matmul
//                    (from_bytes, ir::interpret, to_bytes: ReferenceStep); one
//                    iteration, t1 only (it is single-threaded and ~10^3 times slower)
//   ternjit/...      MatMulKernel::run with B given per call (the backward's case)
//   ternjit_packed/... the same with B packed once (a load-time B: MatMulKernel::pack_b)
// Names are IMPL/M<m>_K<k>_N<n>[_at]/t<threads>. Counters: ms per call, GFLOPS
// (2 M K N / s / 1e9); on ternjit rows vs_onednn = t_onednn / t and vs_reference =
// t_reference / t (> 1: faster). Ratios need the baselines of the same case in the same
// run (a filter keeps them when it matches the case part of the name).
#include <benchmark/benchmark.h>
#include <omp.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <oneapi/dnnl/dnnl.h>

#include "bench/tbb_parallel.h"
#include "ir/interpret.h"
#include "ir/parse.h"
#include "targets/x86/isa.h"
#include "targets/x86/matmul.h"

namespace {

using ternjit::targets::x86::best_isa;
using ternjit::targets::x86::host_isas;
using ternjit::targets::x86::isa_name;
using ternjit::targets::x86::MatMulKernel;
using ternjit::targets::x86::MatMulPackedB;
using ternjit::targets::x86::MatMulProblem;
using ternjit::targets::x86::Parallel;

struct Case {
  std::int64_t M, K, N;
  bool trans_a;
  int threads;
  [[nodiscard]] std::string shape() const {
    return "M" + std::to_string(M) + "_K" + std::to_string(K) + "_N" + std::to_string(N) + (trans_a ? "_at" : "");
  }
  [[nodiscard]] std::string name() const { return shape() + "/t" + std::to_string(threads); }
  [[nodiscard]] double flops() const { return 2.0 * static_cast<double>(M) * static_cast<double>(K) * static_cast<double>(N); }
};

const Case kShapes[] = {{8, 2560, 6912, false, 1}, {128, 2560, 6912, false, 1}, {2560, 32, 6912, true, 1}};

std::uint64_t splitmix(std::uint64_t& s) {
  std::uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

std::vector<float> random_f32(std::size_t n, std::uint64_t seed) {
  std::vector<float> v(n);
  for (auto& x : v) x = -1.0F + 2.0F * static_cast<float>(splitmix(seed) >> 40) / static_cast<float>(1 << 24);
  return v;
}

// The operands of one shape, shared by every row of it.
struct Data {
  std::vector<float> a, b;
  // C 64-byte aligned, as the plan's scratch is (a large C is then stored streaming).
  std::unique_ptr<float, decltype(&std::free)> c{nullptr, &std::free};
};

Data& data_of(const Case& c) {
  static std::map<std::string, std::unique_ptr<Data>> all;
  auto& d = all[c.shape()];
  if (!d) {
    d = std::make_unique<Data>();
    d->a = random_f32(static_cast<std::size_t>(c.M * c.K), 1);
    d->b = random_f32(static_cast<std::size_t>(c.K * c.N), 2);
    const std::size_t bytes = (static_cast<std::size_t>(c.M * c.N) * 4 + 63) / 64 * 64;
    d->c.reset(static_cast<float*>(std::aligned_alloc(64, bytes)));
    std::memset(d->c.get(), 0, bytes);
  }
  return *d;
}

std::map<std::string, std::map<std::string, double>>& times_ms() {
  static std::map<std::string, std::map<std::string, double>> t;
  return t;
}

using ternjit::bench::parallel_for_threads;

template <class Call>
void time_loop(benchmark::State& state, const Case& c, const std::string& impl, Call&& call) {
  std::size_t n = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    call();
    ++n;
  }
  const double per = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() /
                     static_cast<double>(std::max<std::size_t>(n, 1));
  const double ms = per * 1e3;
  state.counters["ms"] = ms;
  state.counters["GFLOPS"] = c.flops() / per / 1e9;
  auto& row = times_ms()[c.name()];
  row[impl] = ms;
  if (impl == "reference") times_ms()[c.shape()][impl] = ms;
  if (impl.rfind("ternjit", 0) == 0) {
    if (row.count("onednn_sgemm")) state.counters["vs_onednn"] = row["onednn_sgemm"] / ms;
    // The interpreter runs on one thread whatever the case's count: its t1 time serves both.
    auto& by_shape = times_ms()[c.shape()];
    if (by_shape.count("reference")) state.counters["vs_reference"] = by_shape["reference"] / ms;
  }
}

void bm_onednn(benchmark::State& state, Case c) {
  Data& d = data_of(c);
  omp_set_num_threads(c.threads);
  // Row-major: A is [M, K] (lda K), or given as At [K, M] (transa 'T', lda M).
  const dnnl_dim_t lda = c.trans_a ? c.M : c.K;
  time_loop(state, c, "onednn_sgemm", [&] {
    const dnnl_status_t s = dnnl_sgemm(c.trans_a ? 'T' : 'N', 'N', c.M, c.N, c.K, 1.0F, d.a.data(), lda, d.b.data(),
                                       c.N, 0.0F, d.c.get(), c.N);
    if (s != dnnl_success) state.SkipWithError("dnnl_sgemm failed");
    benchmark::DoNotOptimize(d.c.get());
  });
}

void bm_reference(benchmark::State& state, Case c) {
  Data& d = data_of(c);
  auto dims = [](std::int64_t r, std::int64_t k) { return "f32[" + std::to_string(r) + ", " + std::to_string(k) + "]"; };
  std::string text = "func @f(%a: " + (c.trans_a ? dims(c.K, c.M) : dims(c.M, c.K)) + ", %b: " + dims(c.K, c.N) +
                     ") -> " + dims(c.M, c.N) + " {\n^entry:\n";
  std::string a = "%a";
  if (c.trans_a) {
    text += "  %t = transpose %a {perm = [1, 0]} : " + dims(c.M, c.K) + "\n";
    a = "%t";
  }
  text += "  %c = matmul " + a + ", %b : " + dims(c.M, c.N) + "\n  ret %c\n}\n";
  auto m = ternjit::ir::parse_module(text, "bench.tir");
  if (!m.ok()) {
    state.SkipWithError(m.error().message.c_str());
    return;
  }
  const std::vector<std::int64_t> ashape = c.trans_a ? std::vector<std::int64_t>{c.K, c.M}
                                                     : std::vector<std::int64_t>{c.M, c.K};
  ternjit::ir::InterpretOptions io;
  io.max_elements = std::int64_t{1} << 30;
  time_loop(state, c, "reference", [&] {
    // As the plan's ReferenceStep: operands from bytes, interpret, result to bytes.
    std::vector<ternjit::ir::HostTensor> args;
    args.push_back(ternjit::ir::HostTensor::from_f32(ashape, d.a));
    args.push_back(ternjit::ir::HostTensor::from_f32({c.K, c.N}, d.b));
    auto out = ternjit::ir::interpret(m.value(), "f", args, ternjit::ir::ParamValues{}, io);
    if (!out.ok()) {
      state.SkipWithError(out.error().message.c_str());
      return;
    }
    const std::vector<std::uint8_t> bytes = out.value()[0].to_bytes();
    std::memcpy(d.c.get(), bytes.data(), bytes.size());
  });
}

void bm_ternjit(benchmark::State& state, Case c, bool packed) {
  Data& d = data_of(c);
  const auto isa = best_isa(host_isas());
  if (!isa) {
    state.SkipWithError("host lacks AVX2");
    return;
  }
  MatMulProblem p;
  p.M = c.M;
  p.K = c.K;
  p.N = c.N;
  p.trans_a = c.trans_a;
  auto k = MatMulKernel::create(p, *isa);
  if (!k.ok()) {
    state.SkipWithError(k.error().message.c_str());
    return;
  }
  MatMulPackedB pb;
  if (packed) pb = k.value()->pack_b(d.b.data());
  const Parallel par = parallel_for_threads(c.threads);
  time_loop(state, c, packed ? "ternjit_packed" : "ternjit", [&] {
    k.value()->run(d.a.data(), d.b.data(), packed ? &pb : nullptr, d.c.get(), par);
    benchmark::DoNotOptimize(d.c.get());
  });
  state.SetLabel(k.value()->describe(packed));
}

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

}  // namespace

int main(int argc, char** argv) {
  // libgomp reads OMP_WAIT_POLICY when it loads: oneDNN's OpenMP threads must not spin
  // on the cores the oneTBB workers of the next benchmark need, so re-exec with it set.
  if (!std::getenv("OMP_WAIT_POLICY")) {
    setenv("OMP_WAIT_POLICY", "passive", 1);
    execv("/proc/self/exe", argv);  // returns only on failure: then run as is
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  const auto isa = best_isa(host_isas());
  benchmark::AddCustomContext("cpu_model", cpu_model());
  benchmark::AddCustomContext("ternjit_isa", isa ? std::string(isa_name(*isa)) : "none (no AVX2)");
  benchmark::AddCustomContext("ratios", "vs_onednn = t_onednn_sgemm / t; vs_reference = t_reference / t (>1: faster)");
  for (Case c : kShapes) {
    for (int t : {1, 2}) {
      c.threads = t;
      benchmark::RegisterBenchmark(("onednn_sgemm/" + c.name()).c_str(), bm_onednn, c)->UseRealTime();
      if (t == 1)
        benchmark::RegisterBenchmark(("reference/" + c.name()).c_str(), bm_reference, c)->Iterations(1)->UseRealTime();
      benchmark::RegisterBenchmark(("ternjit/" + c.name()).c_str(), bm_ternjit, c, false)->UseRealTime();
      benchmark::RegisterBenchmark(("ternjit_packed/" + c.name()).c_str(), bm_ternjit, c, true)->UseRealTime();
    }
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
