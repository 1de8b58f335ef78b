// SPDX-License-Identifier: Apache-2.0
// quant_test.cpp - reference quantizers against hand-computed examples.
#include "ir/quant.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

namespace {

using namespace ternjit;
using namespace ternjit::ir;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("quantize_int8_rows: worked examples") {
  // Row 0: amax 127 -> s = 1; 0.5 ties to even 0.
  // Row 1: amax 508 -> s = 4; 2/4 = 0.5 -> 0, 6/4 = 1.5 -> 2, -10/4 = -2.5 -> -2.
  // Row 2: all zero -> s = 0 and every q is 0.
  // Row 3: amax 127 -> s = 1; 63.5 -> 64, -0.25 -> 0.
  const std::vector<float> x = {1.0f, -2.0f, 0.5f, 127.0f,  //
                                508.0f, 2.0f, 6.0f, -10.0f,  //
                                0.0f, 0.0f, -0.0f, 0.0f,     //
                                63.5f, 127.0f, -0.25f, -127.0f};
  std::vector<std::int8_t> q(16, 99);
  std::vector<float> scales(4, -1.0f);
  REQUIRE(quantize_int8_rows(x, 4, 4, q, scales).ok());
  CHECK(scales == std::vector<float>{1.0f, 4.0f, 0.0f, 1.0f});
  CHECK(q == std::vector<std::int8_t>{1, -2, 0, 127,  //
                                      127, 0, 2, -2,  //
                                      0, 0, 0, 0,     //
                                      64, 127, 0, -127});

  std::vector<float> fake(16);
  REQUIRE(fake_quantize_int8_rows(x, 4, 4, fake).ok());
  CHECK(fake == std::vector<float>{1.0f, -2.0f, 0.0f, 127.0f,  //
                                   508.0f, 0.0f, 8.0f, -8.0f,  //
                                   0.0f, 0.0f, 0.0f, 0.0f,     //
                                   64.0f, 127.0f, 0.0f, -127.0f});
}

TEST_CASE("quantize_int8_rows: a non-exact scale follows the documented f32 arithmetic") {
  const std::vector<float> x = {0.3f, -1.0f, 0.7f};
  std::vector<std::int8_t> q(3);
  std::vector<float> scales(1);
  REQUIRE(quantize_int8_rows(x, 1, 3, q, scales).ok());
  CHECK(scales[0] == 1.0f / 127.0f);
  // 0.3 * 127 = 38.1 and 0.7 * 127 = 88.9: far from ties, so hand rounding applies.
  CHECK(q == std::vector<std::int8_t>{38, -127, 89});
  std::vector<float> fake(3);
  REQUIRE(fake_quantize_int8_rows(x, 1, 3, fake).ok());
  CHECK(fake[0] == 38.0f * (1.0f / 127.0f));
  CHECK(fake[1] == -127.0f * (1.0f / 127.0f));
  CHECK(std::fabs(fake[2] - 0.7f) < 0.5f / 127.0f);
}

TEST_CASE("quantize_int8: every q stays in [-127, 127] and NaN becomes 0") {
  CHECK(quantize_int8_value(1000.0f, 1.0f) == 127);
  CHECK(quantize_int8_value(-1000.0f, 1.0f) == -127);
  CHECK(quantize_int8_value(127.5f, 1.0f) == 127);
  CHECK(quantize_int8_value(kNaN, 1.0f) == 0);
  CHECK(quantize_int8_value(5.0f, 0.0f) == 0);
  CHECK(quantize_int8_value(kInf, kInf) == 0);

  CHECK(quantize_int8_value(2.0f, kNaN) == 0);
}

TEST_CASE("quantize_int8: a NaN or an inf in a row makes that row's scale NaN and its values NaN") {
  // Rows: a NaN, +inf, -inf, then a finite row that must be unaffected.
  const std::vector<float> x = {kNaN, 2.0f, -254.0f, 1.0f, kInf, 3.0f, -kInf, 0.5f, 1.0f, 2.0f, -254.0f, 0.0f};
  std::vector<std::int8_t> q(12, 99);
  std::vector<float> scales(3);
  REQUIRE(quantize_int8_rows(std::span(x).first(9), 3, 3, std::span(q).first(9), scales).ok());
  for (float s : scales) CHECK(std::isnan(s));
  for (std::size_t i = 0; i < 9; ++i) CHECK(q[i] == 0);
  std::vector<float> fake(12);
  REQUIRE(fake_quantize_int8_rows(x, 4, 3, fake).ok());
  for (std::size_t i = 0; i < 9; ++i) CHECK(std::isnan(fake[i]));
  // The finite row {2, -254, 0}: scale 2, q = {1, -127, 0}.
  CHECK(fake[9] == 2.0f);
  CHECK(fake[10] == -254.0f);
  CHECK(fake[11] == 0.0f);
  CHECK(std::isnan(absmax_int8_scale(std::vector<float>{1.0f, kNaN})));
  CHECK(std::isnan(absmax_int8_scale(std::vector<float>{-kInf})));
  CHECK(absmax_int8_scale(std::vector<float>{-254.0f, 1.0f}) == 2.0f);
}

TEST_CASE("quantize_int8: tiny amax whose scale underflows to zero") {
  const float tiny = std::numeric_limits<float>::denorm_min();
  CHECK(absmax_int8_scale(std::vector<float>{tiny, -tiny}) == 0.0f);
  std::vector<std::int8_t> q(2, 5);
  std::vector<float> scales(1, 1.0f);
  REQUIRE(quantize_int8_rows(std::vector<float>{tiny, -tiny}, 1, 2, q, scales).ok());
  CHECK(scales[0] == 0.0f);
  CHECK(q == std::vector<std::int8_t>{0, 0});
}

TEST_CASE("quantize_int8: per-tensor variant and in-place fake quantization") {
  std::vector<float> x = {508.0f, 2.0f, 6.0f, -10.0f};
  std::vector<std::int8_t> q(4);
  auto s = quantize_int8_tensor(x, q);
  REQUIRE(s.ok());
  CHECK(*s == 4.0f);
  CHECK(q == std::vector<std::int8_t>{127, 0, 2, -2});

  REQUIRE(fake_quantize_int8_tensor(x, x).ok());
  CHECK(x == std::vector<float>{508.0f, 0.0f, 8.0f, -8.0f});

  std::vector<float> empty_out;
  REQUIRE(fake_quantize_int8_tensor({}, empty_out).ok());
}

TEST_CASE("quantize_int8: size mismatches are InvalidArgument errors") {
  const std::vector<float> x(6, 1.0f);
  std::vector<std::int8_t> q(6);
  std::vector<float> scales(2);

  auto wrong_x = quantize_int8_rows(x, 2, 4, std::span<std::int8_t>(q), scales);
  REQUIRE_FALSE(wrong_x.ok());
  CHECK(wrong_x.error().code == ErrorCode::InvalidArgument);
  CHECK(wrong_x.error().message == "quantize_int8_rows: shape [2, 4] needs 8 inputs, got 6");

  std::vector<std::int8_t> short_q(5);
  auto wrong_q = quantize_int8_rows(x, 2, 3, short_q, scales);
  REQUIRE_FALSE(wrong_q.ok());
  CHECK(wrong_q.error().message == "quantize_int8_rows: shape [2, 3] needs 6 q elements, got 5");

  std::vector<float> one_scale(1);
  auto wrong_scales = quantize_int8_rows(x, 2, 3, q, one_scale);
  REQUIRE_FALSE(wrong_scales.ok());
  CHECK(wrong_scales.error().message == "quantize_int8_rows: 2 rows need as many scales, got 1");

  auto negative = quantize_int8_rows(x, -2, -3, q, scales);
  REQUIRE_FALSE(negative.ok());
  CHECK(contains(negative.error().message, "[-2, -3]"));

  std::vector<float> out(5);
  auto wrong_out = fake_quantize_int8_rows(x, 2, 3, out);
  REQUIRE_FALSE(wrong_out.ok());
  CHECK(wrong_out.error().message == "fake_quantize_int8_rows: shape [2, 3] needs 6 output elements, got 5");

  auto wrong_tensor = quantize_int8_tensor(x, short_q);
  REQUIRE_FALSE(wrong_tensor.ok());
  CHECK(wrong_tensor.error().code == ErrorCode::InvalidArgument);

  // Nothing is written when the call fails.
  std::vector<std::int8_t> untouched(6, 42);
  CHECK_FALSE(quantize_int8_rows(x, 2, 3, untouched, one_scale).ok());
  CHECK(untouched == std::vector<std::int8_t>(6, 42));
}

TEST_CASE("ternarize_threshold") {
  const std::vector<float> x = {0.6f, -0.6f, 0.5f, -0.5f, 0.0f, kNaN, kInf, -kInf, 100.0f};
  CHECK(ternarize_threshold(x, 0.5f) == std::vector<float>{1, -1, 0, 0, 0, 0, 1, -1, 1});
  CHECK(ternarize_threshold(x, kInf) == std::vector<float>(9, 0.0f));
  CHECK(ternarize_threshold(-0.0f, -1.0f) == 0.0f);  // |x| > threshold, but sign(0) is 0
  CHECK(ternarize_threshold(0.25f, kNaN) == 0.0f);
  CHECK(ternarize_threshold(-3.0f, 2.0f) == -1.0f);
}

TEST_CASE("ternarize_absmean: per tensor, hand example") {
  // sum |x| = 5, gamma = 1.25; x / gamma = [0.4, -1.2, 0, 2.4] -> round [0, -1, 0, 2] -> clamp [0, -1, 0, 1].
  const std::vector<float> x = {0.5f, -1.5f, 0.0f, 3.0f};
  const TernaryQuant tq = ternarize_absmean(x, 2, 2, /*per_channel=*/false);
  CHECK(tq.scales == std::vector<float>{1.25f});
  CHECK(tq.values == std::vector<std::int8_t>{0, -1, 0, 1});
  CHECK(fake_ternarize_absmean(x, 2, 2, false) == std::vector<float>{0.0f, -1.25f, 0.0f, 1.25f});
  // A tie: gamma = 2, 1 / 2 = 0.5 rounds to even 0, 3 / 2 = 1.5 rounds to 2 and clamps to 1.
  const TernaryQuant tie = ternarize_absmean(std::vector<float>{1.0f, -3.0f}, 1, 2, false);
  CHECK(tie.scales == std::vector<float>{2.0f});
  CHECK(tie.values == std::vector<std::int8_t>{0, -1});
}

TEST_CASE("ternarize_absmean: per channel, hand example") {
  // Row 0: gamma = 1; 0.5 -> 0 (tie to even), -1.5 -> -2 -> -1.
  // Row 1: gamma = 1.5; 0 -> 0, 3 / 1.5 = 2 -> 1.
  // Row 2: all zero -> gamma 0.
  const std::vector<float> x = {0.5f, -1.5f, 0.0f, 3.0f, 0.0f, -0.0f};
  const TernaryQuant tq = ternarize_absmean(x, 3, 2, /*per_channel=*/true);
  CHECK(tq.scales == std::vector<float>{1.0f, 1.5f, 0.0f});
  CHECK(tq.values == std::vector<std::int8_t>{0, -1, 0, 1, 0, 0});
  CHECK(fake_ternarize_absmean(x, 3, 2, true) == std::vector<float>{0.0f, -1.0f, 0.0f, 1.5f, 0.0f, 0.0f});
}

TEST_CASE("ternarize_absmean: zero, empty and NaN inputs") {
  const TernaryQuant zero = ternarize_absmean(std::vector<float>(8, 0.0f), 2, 4, false);
  CHECK(zero.scales == std::vector<float>{0.0f});
  CHECK(zero.values == std::vector<std::int8_t>(8, 0));

  const TernaryQuant empty = ternarize_absmean({}, 0, 4, false);
  CHECK(empty.values.empty());
  CHECK(empty.scales == std::vector<float>{0.0f});
  CHECK(ternarize_absmean({}, 3, 0, true).scales == std::vector<float>(3, 0.0f));

  const TernaryQuant nan = ternarize_absmean(std::vector<float>{1.0f, kNaN}, 1, 2, false);
  CHECK(std::isnan(nan.scales[0]));
  CHECK(nan.values == std::vector<std::int8_t>{0, 0});
}

TEST_CASE("absmean_scale accumulates in double") {
  // 2^24 + 1 + 1 is not representable in f32 at each step; in double it is exact.
  const std::vector<float> x = {16777216.0f, 1.0f, 1.0f, 0.0f};
  CHECK(absmean_scale(x) == static_cast<float>((16777216.0 + 2.0) / 4.0));
  CHECK(absmean_scale(x) == 4194304.5f);
}

TEST_CASE("ternarize_stochastic: determinism and seeds") {
  std::vector<float> x(1000);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = (i % 2 == 0 ? 0.5f : -0.25f) * static_cast<float>(i % 7);
  const TernaryQuant a = ternarize_stochastic(x, 42);
  const TernaryQuant b = ternarize_stochastic(x, 42);
  const TernaryQuant c = ternarize_stochastic(x, 43);
  CHECK(a.values == b.values);
  CHECK(a.scales == b.scales);
  CHECK(a.scales == std::vector<float>{3.0f});
  CHECK(a.values != c.values);
}

TEST_CASE("ternarize_stochastic: golden output pins the generator and the u mapping") {
  // "Same seed, same result on every platform": the expected values were computed by an
  // independent Python implementation of mt19937_64 (checked against the standard's
  // 10000th-output value 9981545732273789042) with the documented u and p arithmetic.
  const std::vector<float> x = {0.5f, -0.5f, 0.5f, -0.5f, 0.5f, -0.5f, 0.5f, -0.5f, 1.0f, -0.1f};
  const TernaryQuant tq = ternarize_stochastic(x, 7);
  CHECK(tq.scales == std::vector<float>{1.0f});
  CHECK(tq.values == std::vector<std::int8_t>{0, 0, 1, 0, 1, -1, 0, 0, 1, 0});
}

TEST_CASE("ternarize_stochastic: values only where the sign matches") {
  const std::vector<float> x = {0.0f, 2.0f, -2.0f, 1.0f, -1.0f, 0.0f, kNaN, -0.5f};
  for (std::uint64_t seed = 0; seed < 50; ++seed) {
    const TernaryQuant tq = ternarize_stochastic(x, seed);
    CHECK(tq.scales == std::vector<float>{2.0f});
    CHECK(tq.values[0] == 0);
    CHECK(tq.values[1] == 1);   // |x| == s: probability 1
    CHECK(tq.values[2] == -1);
    CHECK(tq.values[3] >= 0);
    CHECK(tq.values[4] <= 0);
    CHECK(tq.values[5] == 0);
    CHECK(tq.values[6] == 0);   // NaN
    CHECK(tq.values[7] <= 0);
  }
  const TernaryQuant zero = ternarize_stochastic(std::vector<float>(5, 0.0f), 1);
  CHECK(zero.scales == std::vector<float>{0.0f});
  CHECK(zero.values == std::vector<std::int8_t>(5, 0));
}

TEST_CASE("ternarize_stochastic: nonzero frequency is |x| / s") {
  // One element pins s = 1; the rest have |x| / s = 0.25 or 0.75.
  std::vector<float> x(40001);
  x[0] = 1.0f;
  for (std::size_t i = 1; i < x.size(); ++i) x[i] = i % 2 == 0 ? 0.25f : -0.75f;
  const TernaryQuant tq = ternarize_stochastic(x, 2024);
  double quarter = 0;
  double three_quarters = 0;
  for (std::size_t i = 1; i < x.size(); ++i) {
    if (i % 2 == 0) quarter += tq.values[i] == 1 ? 1 : 0;
    else three_quarters += tq.values[i] == -1 ? 1 : 0;
  }
  // 20000 draws each: the standard deviation of the frequency is about 0.003.
  CHECK(quarter / 20000.0 == doctest::Approx(0.25).epsilon(0.06));
  CHECK(three_quarters / 20000.0 == doctest::Approx(0.75).epsilon(0.03));
  // Unbiased: the mean of value * s matches the mean of x.
  double mean_x = 0;
  double mean_q = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    mean_x += x[i];
    mean_q += tq.values[i] * tq.scales[0];
  }
  CHECK(mean_q / x.size() == doctest::Approx(mean_x / x.size()).epsilon(0.05));
}
