// SPDX-License-Identifier: Apache-2.0
// main.cpp - compiles and runs a BitLinear layer through an installed libternjit's C++ API.
#include <cstdio>
#include <vector>

#include <ternjit/engine.h>

namespace {

// tests/dsl/bitlinear.tri without its comment lines: this program builds against an installed
// package only (tests/unit/dsl/bitlinear_copies_test.cpp checks the copy).
constexpr const char* kSource = R"(layer BitLinear {
    param gamma: Tensor[K]
    param w: TernaryTensor[K, N]
    param w_scale: Tensor[N]
    fn forward(x: Tensor[M, K]) -> Tensor[M, N] {
        let h = rmsnorm(x, gamma, 1e-5)
        let q = quantize_int8(h)
        let y = q @ w
        return relu(y * w_scale)
    }
}
)";

int report(const ternjit::Error& e) {
  std::fputs(ternjit::render(e).c_str(), stderr);
  return 1;
}

}  // namespace

int main() {
  constexpr int M = 2, K = 16, N = 8;
  ternjit::EngineOptions options;
  options.target = "reference";
  auto engine = ternjit::Engine::create(options);
  if (!engine.ok()) return report(engine.error());
  auto program = engine->compile(kSource, "consumer.tri");
  if (!program.ok()) return report(program.error());

  std::vector<signed char> w(K * N);
  for (int i = 0; i < K * N; ++i) w[static_cast<std::size_t>(i)] = static_cast<signed char>(i % 3 - 1);
  if (auto r = program->bind("BitLinear.w", {w.data(), ternjit::ElemKind::T2, {K, N}}); !r.ok())
    return report(r.error());
  if (auto r = program->bind_random(7); !r.ok()) return report(r.error());

  std::vector<float> x(M * K), y(M * N, -1.0f);
  for (int i = 0; i < M * K; ++i) x[static_cast<std::size_t>(i)] = static_cast<float>(i % 7) - 3.0f;
  const ternjit::TensorView in[] = {{x.data(), ternjit::ElemKind::F32, {M, K}}};
  ternjit::TensorView out[] = {{y.data(), ternjit::ElemKind::F32, {M, N}}};
  if (auto r = program->run("BitLinear.forward", in, out); !r.ok()) return report(r.error());
  for (float v : y)
    if (!(v >= 0.0f)) {
      std::fprintf(stderr, "output %g is not a relu output\n", static_cast<double>(v));
      return 1;
    }
  // A user mistake comes back as an Error with a located diagnostic.
  auto bad = engine->compile("layer L { fn f(x: Tensor[M]) -> Tensor[M] { return nope } }", "bad.tri");
  if (bad.ok() || ternjit::render(bad.error()).find("bad.tri:1:") == std::string::npos) {
    std::fprintf(stderr, "expected a located error for bad.tri\n");
    return 1;
  }
  std::printf("consumer (C++ API): target %s ran BitLinear.forward [%d x %d] -> [%d x %d]\n",
              engine->target_name().c_str(), M, K, M, N);
  return 0;
}
