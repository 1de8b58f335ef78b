// SPDX-License-Identifier: Apache-2.0
// compile_bench.cpp - .tri source to optimized, specialized IR, per optimization level.
//
// Each benchmark times the whole front half of a JIT compile: parse + type-check +
// lower (DSL), specialize the shapes (N = 8), run the level's pipeline with the
// verifier off (as a release engine would). Its baseline, run in the same process right
// after, is the DSL front end alone: `x_frontend` is the ratio of the two, and
// `pass:<name>` counters hold each pass's mean share of one compile in microseconds.
#include <benchmark/benchmark.h>

#include <chrono>
#include <map>
#include <string>

#include "ir/dsl/dsl.h"
#include "passes/pipeline.h"
#include "passes/specialize_shapes.h"

namespace {

using namespace ternjit;

const char* const kLinearClassifier = R"(layer LinearClassifier {
    param weights: TernaryTensor[784, 10]
    param bias: Tensor[10]

    fn forward(x: Tensor[N, 784]) -> Tensor[N, 10] {
        return x @ weights + bias
    }
}
)";

// A 50-op layer: a BitLinear block followed by a long chain of elementwise ops,
// reductions and a second ternary matmul, so every pass has work.
std::string fifty_op_layer() {
  std::string s = R"(layer Big {
    param gamma: Tensor[K]
    param w1: TernaryTensor[K, H]
    param s1: Tensor[H]
    param b1: Tensor[H]
    param w2: TernaryTensor[H, K]
    fn forward(x: Tensor[N, K]) -> Tensor[N, K] {
        let h0 = relu((quantize_int8(rmsnorm(x, gamma, 1e-5)) @ w1) * s1 + b1)
)";
  const char* ops[] = {"sigmoid", "tanh", "gelu", "silu", "relu"};
  for (int i = 1; i <= 40; ++i)
    s += "        let h" + std::to_string(i) + " = " + ops[i % 5] + "(h" + std::to_string(i - 1) + " * 1.0 + 0.5)\n";
  s += "        return softmax(quantize_int8(h40) @ w2, -1)\n    }\n}\n";
  return s;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Compiles once; returns false (and reports the error) on failure.
bool compile_once(const std::string& src, const std::string& fn, passes::OptLevel level, benchmark::State& state,
                  std::map<std::string, double>* pass_seconds) {
  auto m = dsl::compile_tri(src, "bench.tri");
  if (!m.ok()) {
    state.SkipWithError(render(m.error()).c_str());
    return false;
  }
  auto spec = passes::specialize_function(m.value(), fn, {{"N", 8}, {"K", 256}, {"H", 512}}, true);
  if (!spec.ok()) {
    state.SkipWithError(render(spec.error()).c_str());
    return false;
  }
  passes::PipelineOptions opts;
  opts.verify_each = false;
  for (const passes::PassInfo* p : passes::default_pipeline(level)) {
    auto t0 = std::chrono::steady_clock::now();
    auto r = passes::run_pipeline(spec.value(), {p}, opts);
    if (pass_seconds) (*pass_seconds)[std::string(p->name)] += seconds_since(t0);
    if (!r.ok()) {
      state.SkipWithError(render(r.error()).c_str());
      return false;
    }
  }
  benchmark::DoNotOptimize(spec.value());
  return true;
}

void run(benchmark::State& state, const std::string& src, const std::string& fn) {
  const auto level = static_cast<passes::OptLevel>(state.range(0));
  std::map<std::string, double> pass_seconds;
  std::int64_t n = 0;
  for (auto _ : state) {
    if (!compile_once(src, fn, level, state, &pass_seconds)) return;
    ++n;
  }
  // Baseline in the same process: the DSL front end alone, as many times.
  auto t0 = std::chrono::steady_clock::now();
  for (std::int64_t i = 0; i < n; ++i) benchmark::DoNotOptimize(dsl::compile_tri(src, "bench.tri"));
  const double frontend = seconds_since(t0) / static_cast<double>(n);
  t0 = std::chrono::steady_clock::now();
  for (std::int64_t i = 0; i < n; ++i) compile_once(src, fn, level, state, nullptr);
  const double whole = seconds_since(t0) / static_cast<double>(n);
  state.counters["frontend_us"] = frontend * 1e6;
  state.counters["x_frontend"] = whole / frontend;
  for (const auto& [name, secs] : pass_seconds) state.counters["pass:" + name] = secs / static_cast<double>(n) * 1e6;
  state.SetLabel(std::string(passes::opt_level_name(level)));
}

void BM_LinearClassifier(benchmark::State& state) { run(state, kLinearClassifier, "LinearClassifier.forward"); }
void BM_FiftyOpLayer(benchmark::State& state) {
  static const std::string src = fifty_op_layer();
  run(state, src, "Big.forward");
}

BENCHMARK(BM_LinearClassifier)->DenseRange(0, 3)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_FiftyOpLayer)->DenseRange(0, 3)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
