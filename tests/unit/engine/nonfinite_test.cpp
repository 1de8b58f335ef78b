// SPDX-License-Identifier: Apache-2.0
// nonfinite_test.cpp - NaN and infinities in quantized rows propagate, on every CPU target (issue 19, item 11).
//
// The rule (ir/README.md, quantize_int8; ir/quant.h absmax_int8_scale): a row of the
// quantized axis holding a NaN or an infinity has the scale NaN, so every value of
// that row dequantizes to NaN and every output of a matmul reading that row is NaN:
// through the float form, the fused integer path (the x_scale operand carries the NaN)
// and after rmsnorm (whose rows with an inf are 0 with NaN at the inf). Finite rows are
// unaffected. Checked on the reference, x86 at every ISA with 1 and 2 threads, and llvm,
// each at O0 and O2 (O2 fuses quantize_int8 @ w into the integer tmatmul).
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "tests/unit/engine/cpu_targets_testing.h"
#include "tests/unit/engine/engine_testing.h"

namespace ternjit {
namespace {

using testing::view;

constexpr const char* kLayer = R"(
layer Q {
    param w: TernaryTensor[K, N]
    param gamma: Tensor[K]
    param s: Tensor[G, N]
    fn mm(x: Tensor[M, K]) -> Tensor[M, N] {
        return quantize_int8(x) @ w
    }
    fn fake(x: Tensor[M, K]) -> Tensor[M, K] {
        return quantize_int8(x)
    }
    fn norm(x: Tensor[M, K]) -> Tensor[M, N] {
        return relu(quantize_int8(rmsnorm(x, gamma, 1e-5)) @ w)
    }
    fn grouped(x: Tensor[M, K]) -> Tensor[M, N] {
        return grouped_matmul(quantize_int8(x), w, s, 32)
    }
}
)";

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// Row r of x: 0 finite, 1 one NaN, 2 one +inf, 3 one -inf, 4 finite (when M > 4), the
// non-finite value at a different column per row (first, middle, last).
std::vector<float> make_x(std::int64_t M, std::int64_t K) {
  std::vector<float> x = testing::random_f32(M * K, 17);
  const float special[] = {kNaN, kInf, -kInf};
  for (std::int64_t r = 1; r <= 3 && r < M; ++r) {
    const std::int64_t col = r == 1 ? 0 : (r == 2 ? K / 2 : K - 1);
    x[static_cast<std::size_t>(r * K + col)] = special[r - 1];
  }
  if (M == 1) x[static_cast<std::size_t>(K / 3)] = kNaN;  // the only row holds a NaN
  return x;
}

bool row_finite(std::int64_t M, std::int64_t r) { return M > 1 && (r == 0 || r > 3); }

TEST_CASE("NaN and inf in a quantized row make the row's outputs NaN on every CPU target, O0 and O2") {
  std::vector<std::string> skipped;
  const auto targets = testing::cpu_targets(&skipped);
  for (const std::string& s : skipped) MESSAGE("not run: " << s);
  const std::int64_t K = 67, N = 13, G = (K + 31) / 32;
  std::vector<std::int8_t> w = testing::random_t2(K * N, 3);
  std::vector<float> gamma = testing::random_f32(K, 4), scale = testing::random_f32(G * N, 5);
  for (const testing::CpuTarget& t : targets) {
    for (int level : {0, 2}) {
      for (std::int64_t M : {1, 5}) {
        CAPTURE(t.label);
        CAPTURE(level);
        CAPTURE(M);
        EngineOptions o = t.options;
        o.opt_level = level;
        auto e = Engine::create(o);
        REQUIRE_MESSAGE(e.ok(), (e.ok() ? "" : e.error().message));
        auto p = e->compile(kLayer, "q.tri");
        REQUIRE_MESSAGE(p.ok(), (p.ok() ? "" : p.error().message));
        REQUIRE(p->bind("Q.w", view(w, {K, N})).ok());
        REQUIRE(p->bind("Q.gamma", view(gamma, {K})).ok());
        REQUIRE(p->bind("Q.s", view(scale, {G, N})).ok());
        std::vector<float> x = make_x(M, K);
        TensorView in[] = {view(x, {M, K})};
        for (const std::string fn : {"Q.mm", "Q.norm", "Q.grouped", "Q.fake"}) {
          CAPTURE(fn);
          const std::int64_t cols = fn == "Q.fake" ? K : N;
          std::vector<float> y(static_cast<std::size_t>(M * cols), 12345.0f);  // poisoned with a finite value
          TensorView out[] = {view(y, {M, cols})};
          auto r = p->run(fn, in, out);
          REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
          for (std::int64_t row = 0; row < M; ++row) {
            int nan = 0;
            for (std::int64_t c = 0; c < cols; ++c) nan += std::isnan(y[static_cast<std::size_t>(row * cols + c)]);
            CAPTURE(row);
            if (row_finite(M, row)) CHECK(nan == 0);
            else CHECK(nan == cols);
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace ternjit
