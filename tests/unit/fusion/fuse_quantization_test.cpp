// SPDX-License-Identifier: Apache-2.0
// fuse_quantization_test.cpp - fuse-quantization keeps interpreter results on random inputs and shapes.
//
// Tolerances: the rewrites that only re-express an op ((a) dequantize(quantize),
// (d) float matmul) must be bit-exact. The integer kernel ((b)) and the scaled
// ternary weight ((c)) multiply the exact sum by the scales instead of summing
// rounded products; inputs are in [-1, 1] and K <= 48, so the difference is below
// K * 2^-24 * |products| < 1e-5 absolute (we check rtol = atol = 1e-5).
#include <doctest/doctest.h>

#include <map>
#include <string>

#include "tests/unit/fusion/fusion_testing.h"

using namespace ternjit;
using testing::apply;
using testing::count_op;

namespace {

// Substitutes $M, $K, $N in a template.
std::string fill(std::string text, std::int64_t m, std::int64_t k, std::int64_t n) {
  const std::map<std::string, std::int64_t> subst{{"$M", m}, {"$K", k}, {"$N", n}};
  for (const auto& [key, value] : subst)
    for (std::size_t at; (at = text.find(key)) != std::string::npos;) text.replace(at, key.size(), std::to_string(value));
  return text;
}

// Runs fuse-quantization on `text` for several shapes and seeds; checks the op counts
// after the pass and the results.
void check(const std::string& text, std::size_t tmatmuls, double tol, std::uint64_t salt) {
  testing::Dice dice(salt);
  for (int round = 0; round < 12; ++round) {
    const std::int64_t m = dice.in(1, 4), k = dice.in(1, 48), n = dice.in(1, 6);
    const std::string src = fill(text, m, k, n);
    CAPTURE(src);
    const ir::Module before = testing::parse_ok(src);
    const ir::Module after = apply(before, passes::fuse_quantization);
    CHECK(count_op(after, ir::Op::TMatMul) == tmatmuls);
    CHECK(count_op(after, ir::Op::MatMul) == count_op(before, ir::Op::MatMul) - tmatmuls);
    // Running it again changes nothing.
    CHECK(ir::print_module(apply(after, passes::fuse_quantization)) == ir::print_module(after));
    for (std::uint64_t seed = 1; seed <= 3; ++seed) testing::check_same_results(before, after, seed + 10 * round, tol, tol);
  }
}

}  // namespace

TEST_CASE("fuse-quantization (a): dequantize(quantize(x)) is quantize_int8(x), exactly") {
  const std::string text = R"(func @f(%x: f32[$M, $K]) -> f32[$M, $K] {
^entry:
  %q, %s = quantize %x : i8[$M, $K], f32[$M, 1]
  %d = dequantize %q, %s : f32[$M, $K]
  ret %d
}
)";
  check(text, 0, 0.0, 1);
  const ir::Module after = apply(testing::parse_ok(fill(text, 2, 3, 1)), passes::fuse_quantization);
  CHECK(count_op(after, ir::Op::Quantize) == 0);
  CHECK(count_op(after, ir::Op::Dequantize) == 0);
  CHECK(count_op(after, ir::Op::QuantizeInt8) == 1);
}

// The second quantize_int8 recomputes the scale as fl(fl(127 s) / 127), one f32 ulp
// off s for about 1% of scales: not exact, so the pass keeps both.
TEST_CASE("fuse-quantization (a): quantize_int8 twice is kept (not exact)") {
  const std::string text = R"(func @f(%x: f32[$M, $K]) -> f32[$M, $K] {
^entry:
  %a = quantize_int8 %x : f32[$M, $K]
  %b = quantize_int8 %a : f32[$M, $K]
  ret %b
}
)";
  check(text, 0, 0, 2);
  CHECK(count_op(apply(testing::parse_ok(fill(text, 2, 3, 1)), passes::fuse_quantization), ir::Op::QuantizeInt8) == 2);
}

TEST_CASE("fuse-quantization (b): int8 activations times ternary weights, every activation rank") {
  check(R"(param @w : t2[$K, $N]

func @rank2(%x: f32[$M, $K]) -> f32[$M, $N] {
^entry:
  %a = quantize_int8 %x : f32[$M, $K]
  %w = param @w : t2[$K, $N]
  %y = matmul %a, %w : f32[$M, $N]
  ret %y
}

func @rank1(%x: f32[$K]) -> f32[$N] {
^entry:
  %a = quantize_int8 %x : f32[$K]
  %w = param @w : t2[$K, $N]
  %y = matmul %a, %w : f32[$N]
  ret %y
}

func @rank3(%x: f32[2, $M, $K], %v: t2[$K, $N]) -> (f32[2, $M, $N], f32[2, $M, $N]) {
^entry:
  %a = quantize_int8 %x : f32[2, $M, $K]
  %w = param @w : t2[$K, $N]
  %y = matmul %a, %w : f32[2, $M, $N]
  %z = matmul %a, %v : f32[2, $M, $N]
  ret %y, %z
}
)",
        4, 1e-5, 3);
}

TEST_CASE("fuse-quantization (c): ternarized float parameters, alone and with int8 activations") {
  check(R"(param @p : f32[$K, $N]

func @absmean(%x: f32[$M, $K]) -> (f32[$M, $N], f32[$M, $N]) {
^entry:
  %p = param @p : f32[$K, $N]
  %w = ternarize_absmean %p : f32[$K, $N]
  %y = matmul %x, %w : f32[$M, $N]
  %a = quantize_int8 %x : f32[$M, $K]
  %z = matmul %a, %w : f32[$M, $N]
  ret %y, %z
}

func @explicit(%x: f32[$M, $K]) -> f32[$M, $N] {
^entry:
  %p = param @p : f32[$K, $N]
  %t, %g = tquantize %p : t2[$K, $N], f32[]
  %w = dequantize %t, %g : f32[$K, $N]
  %q, %s = quantize %x : i8[$M, $K], f32[$M, 1]
  %a = dequantize %q, %s : f32[$M, $K]
  %y = matmul %a, %w : f32[$M, $N]
  ret %y
}
)",
        3, 1e-5, 4);
}

TEST_CASE("fuse-quantization (d): a float activation times a ternary weight, exactly") {
  check(R"(func @f(%x: f32[$M, $K], %h: f16[$M, $K], %b: bf16[$K], %w: t2[$K, $N]) -> (f32[$M, $N], f16[$M, $N], bf16[$N]) {
^entry:
  %y = matmul %x, %w : f32[$M, $N]
  %z = matmul %h, %w : f16[$M, $N]
  %v = matmul %b, %w : bf16[$N]
  ret %y, %z, %v
}
)",
        3, 0.0, 5);
}

TEST_CASE("fuse-quantization leaves what it cannot express alone") {
  // A ternarized activation (not a param), an f16 activation with an f32 weight scale
  // (the kernel would be f16, the matmul is f32), an i8 x t2 matmul (i32 result).
  const std::string text = R"(func @f(%x: f32[3, 4], %p: f32[4, 2], %h: f16[3, 4], %i: i8[3, 4], %w: t2[4, 2]) -> (f32[3, 2], f32[3, 2], i32[3, 2]) {
^entry:
  %t = ternarize_absmean %p : f32[4, 2]
  %y = matmul %x, %t : f32[3, 2]
  %z = matmul %h, %t : f32[3, 2]
  %n = matmul %i, %w : i32[3, 2]
  ret %y, %z, %n
}
)";
  const ir::Module before = testing::parse_ok(text);
  CHECK(ir::print_module(apply(before, passes::fuse_quantization)) == ir::print_module(before));
}
