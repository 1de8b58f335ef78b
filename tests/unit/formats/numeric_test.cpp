// SPDX-License-Identifier: Apache-2.0
// numeric_test.cpp - f16/bf16 conversions and round_half_even against known bit patterns.
#include "ir/numeric.h"

#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <ios>
#include <limits>
#include <random>

namespace {

using namespace ternjit::ir;

float from_bits(std::uint32_t b) { return std::bit_cast<float>(b); }
std::uint32_t to_bits(float f) { return std::bit_cast<std::uint32_t>(f); }

bool f16_is_nan(std::uint16_t h) { return (h & 0x7C00u) == 0x7C00u && (h & 0x03FFu) != 0; }
bool bf16_is_nan(std::uint16_t h) { return (h & 0x7F80u) == 0x7F80u && (h & 0x007Fu) != 0; }

// Independent check of round-to-nearest-even: the chosen f16 is at least as close to x
// as its neighbours, and on a tie it is the even one. Differences of nearby floats are
// exact in double.
void check_nearest_f16(float x) {
  const std::uint16_t h = f32_to_f16_bits(x);
  const double d = f16_bits_to_f32(h);
  CAPTURE(x);
  CAPTURE(h);
  CHECK(std::signbit(d) == std::signbit(x));
  const std::uint16_t magnitude = h & 0x7FFFu;
  if (magnitude == 0x7C00u) {
    CHECK(std::fabs(x) >= 65520.0f);
    return;
  }
  const double err = std::fabs(static_cast<double>(x) - d);
  const std::uint16_t sign = h & 0x8000u;
  if (magnitude < 0x7BFFu) {
    const double up = f16_bits_to_f32(static_cast<std::uint16_t>(sign | (magnitude + 1)));
    const double err_up = std::fabs(static_cast<double>(x) - up);
    CHECK(err <= err_up);
    if (err == err_up) CHECK((h & 1u) == 0);
  }
  if (magnitude > 0) {
    const double down = f16_bits_to_f32(static_cast<std::uint16_t>(sign | (magnitude - 1)));
    const double err_down = std::fabs(static_cast<double>(x) - down);
    CHECK(err <= err_down);
    if (err == err_down) CHECK((h & 1u) == 0);
  }
}

}  // namespace

TEST_CASE("f16: known bit patterns") {
  CHECK(f32_to_f16_bits(1.0f) == 0x3C00);
  CHECK(f32_to_f16_bits(-2.0f) == 0xC000);
  CHECK(f32_to_f16_bits(0.5f) == 0x3800);
  CHECK(f32_to_f16_bits(0.1f) == 0x2E66);
  CHECK(f32_to_f16_bits(0.0f) == 0x0000);
  CHECK(f32_to_f16_bits(-0.0f) == 0x8000);
  CHECK(f32_to_f16_bits(65504.0f) == 0x7BFF);          // largest finite
  CHECK(f32_to_f16_bits(65519.996f) == 0x7BFF);        // just below the midpoint
  CHECK(f32_to_f16_bits(65520.0f) == 0x7C00);          // midpoint: ties to even = inf
  CHECK(f32_to_f16_bits(-65520.0f) == 0xFC00);
  CHECK(f32_to_f16_bits(1e10f) == 0x7C00);
  CHECK(f32_to_f16_bits(std::numeric_limits<float>::infinity()) == 0x7C00);
  CHECK(f32_to_f16_bits(-std::numeric_limits<float>::infinity()) == 0xFC00);
  CHECK(f32_to_f16_bits(0x1p-14f) == 0x0400);          // smallest normal
  CHECK(f32_to_f16_bits(0x1p-24f) == 0x0001);          // smallest subnormal
  CHECK(f32_to_f16_bits(0x3FFp-24f) == 0x03FF);        // largest subnormal
  CHECK(f32_to_f16_bits(0x1p-25f) == 0x0000);          // half the smallest subnormal: tie to even 0
  CHECK(f32_to_f16_bits(-0x1p-25f) == 0x8000);
  CHECK(f32_to_f16_bits(std::nextafter(0x1p-25f, 1.0f)) == 0x0001);
  CHECK(f32_to_f16_bits(0x3p-25f) == 0x0002);          // 1.5 units: tie to even 2
  CHECK(f32_to_f16_bits(0x5p-25f) == 0x0002);          // 2.5 units: tie to even 2
  CHECK(f32_to_f16_bits(0x7FFp-25f) == 0x0400);        // 1023.5 units: carries into the smallest normal
  CHECK(f32_to_f16_bits(1e-30f) == 0x0000);
  CHECK(f32_to_f16_bits(from_bits(0x00000001)) == 0x0000);  // f32 subnormal
  // Ties in the normal range: 1 + 2^-11 lies halfway between 0x3C00 and 0x3C01.
  CHECK(f32_to_f16_bits(1.0f + 0x1p-11f) == 0x3C00);
  CHECK(f32_to_f16_bits(1.0f + 0x3p-11f) == 0x3C02);
  CHECK(f32_to_f16_bits(1.0f + 0x1p-11f + 0x1p-20f) == 0x3C01);
  CHECK(f32_to_f16_bits(2047.0f + 0.5f) == 0x6800);  // 2047.5 -> 2048 (mantissa carry into exponent)

  CHECK(f16_bits_to_f32(0x3C00) == 1.0f);
  CHECK(f16_bits_to_f32(0x7BFF) == 65504.0f);
  CHECK(f16_bits_to_f32(0x0001) == 0x1p-24f);
  CHECK(f16_bits_to_f32(0x03FF) == 0x3FFp-24f);
  CHECK(f16_bits_to_f32(0x0400) == 0x1p-14f);
  CHECK(f16_bits_to_f32(0xC000) == -2.0f);
  CHECK(to_bits(f16_bits_to_f32(0x8000)) == 0x80000000u);
  CHECK(f16_bits_to_f32(0x7C00) == std::numeric_limits<float>::infinity());
  CHECK(f16_bits_to_f32(0xFC00) == -std::numeric_limits<float>::infinity());
}

TEST_CASE("f16: NaN stays NaN in both directions") {
  CHECK(f16_is_nan(f32_to_f16_bits(std::numeric_limits<float>::quiet_NaN())));
  CHECK(f16_is_nan(f32_to_f16_bits(-std::numeric_limits<float>::quiet_NaN())));
  CHECK((f32_to_f16_bits(-std::numeric_limits<float>::quiet_NaN()) & 0x8000u) != 0);
  // A signalling NaN whose payload lives only in the low 13 bits must not become inf.
  CHECK(f16_is_nan(f32_to_f16_bits(from_bits(0x7F800001u))));
  CHECK(std::isnan(f16_bits_to_f32(0x7E00)));
  CHECK(std::isnan(f16_bits_to_f32(0x7C01)));
  CHECK(std::isnan(f16_bits_to_f32(0xFFFF)));
}

TEST_CASE("f16: every f16 value survives f16 -> f32 -> f16") {
  for (std::uint32_t h = 0; h <= 0xFFFF; ++h) {
    const auto bits = static_cast<std::uint16_t>(h);
    const float f = f16_bits_to_f32(bits);
    if (f16_is_nan(bits)) {
      CHECK(std::isnan(f));
      CHECK(f16_is_nan(f32_to_f16_bits(f)));
    } else if (f32_to_f16_bits(f) != bits) {
      FAIL("f16 round trip changed 0x" << std::hex << h);
    }
  }
}

TEST_CASE("f16: round to nearest even for random and boundary inputs") {
  std::mt19937 rng(1234);
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  std::uniform_int_distribution<int> exponent(-27, 16);
  for (int i = 0; i < 20000; ++i) {
    const float x = std::ldexp(mantissa(rng), exponent(rng)) * (i % 2 == 0 ? 1.0f : -1.0f);
    check_nearest_f16(x);
  }
  // Exact midpoints and their neighbours, across the subnormal and normal range.
  for (std::uint32_t h = 0; h < 0x7BFF; h += 7) {
    const float lo = f16_bits_to_f32(static_cast<std::uint16_t>(h));
    const float hi = f16_bits_to_f32(static_cast<std::uint16_t>(h + 1));
    const float mid = lo + (hi - lo) / 2;  // exact in f32
    check_nearest_f16(mid);
    check_nearest_f16(std::nextafter(mid, 0.0f));
    check_nearest_f16(std::nextafter(mid, 1e9f));
    CHECK(f32_to_f16_bits(mid) == ((h & 1u) == 0 ? h : h + 1));
  }
}

TEST_CASE("bf16: known bit patterns, ties to even, overflow, NaN") {
  CHECK(f32_to_bf16_bits(1.0f) == 0x3F80);
  CHECK(f32_to_bf16_bits(-1.0f) == 0xBF80);
  CHECK(f32_to_bf16_bits(-0.0f) == 0x8000);
  CHECK(f32_to_bf16_bits(3.140625f) == 0x4049);
  CHECK(f32_to_bf16_bits(1.0f + 0x1p-8f) == 0x3F80);                 // tie, down to even
  CHECK(f32_to_bf16_bits(1.0f + 0x3p-8f) == 0x3F82);                 // tie, up to even
  CHECK(f32_to_bf16_bits(1.0f + 0x1p-8f + 0x1p-20f) == 0x3F81);      // just above the tie
  CHECK(f32_to_bf16_bits(std::numeric_limits<float>::max()) == 0x7F80);  // overflows to inf
  CHECK(f32_to_bf16_bits(from_bits(0x7F7F7FFFu)) == 0x7F7F);         // just below the overflow tie
  CHECK(f32_to_bf16_bits(std::numeric_limits<float>::infinity()) == 0x7F80);
  CHECK(f32_to_bf16_bits(-std::numeric_limits<float>::infinity()) == 0xFF80);
  CHECK(f32_to_bf16_bits(from_bits(0x00008000u)) == 0x0000);  // subnormal tie to even 0
  CHECK(f32_to_bf16_bits(from_bits(0x00018000u)) == 0x0002);  // subnormal tie to even 2
  CHECK(f32_to_bf16_bits(from_bits(0x00008001u)) == 0x0001);
  CHECK(bf16_is_nan(f32_to_bf16_bits(std::numeric_limits<float>::quiet_NaN())));
  CHECK(bf16_is_nan(f32_to_bf16_bits(from_bits(0x7F800001u))));  // payload only in the low half
  CHECK(bf16_is_nan(f32_to_bf16_bits(from_bits(0xFFFFFFFFu))));

  CHECK(bf16_bits_to_f32(0x3F80) == 1.0f);
  CHECK(bf16_bits_to_f32(0x4049) == 3.140625f);
  CHECK(bf16_bits_to_f32(0x0001) == from_bits(0x00010000u));
  CHECK(std::isnan(bf16_bits_to_f32(0x7FC0)));
  for (std::uint32_t h = 0; h <= 0xFFFF; ++h) {
    const auto bits = static_cast<std::uint16_t>(h);
    if (!bf16_is_nan(bits) && f32_to_bf16_bits(bf16_bits_to_f32(bits)) != bits) {
      FAIL("bf16 round trip changed 0x" << std::hex << h);
    }
  }
}

TEST_CASE("round_to_f16 and round_to_bf16 model storage") {
  CHECK(round_to_f16(0.1f) == 0.0999755859375f);
  CHECK(round_to_f16(70000.0f) == std::numeric_limits<float>::infinity());
  CHECK(round_to_f16(1e-8f) == 0.0f);
  CHECK(round_to_f16(3e-8f) == 0x1p-24f);  // about 0.503 units of 2^-24: rounds up to 1 unit
  CHECK(round_to_bf16(0.1f) == 0.10009765625f);
  CHECK(round_to_bf16(1.0f + 0x1p-8f) == 1.0f);
  CHECK(std::isnan(round_to_f16(std::numeric_limits<float>::quiet_NaN())));
  CHECK(std::isnan(round_to_bf16(std::numeric_limits<float>::quiet_NaN())));
}

TEST_CASE("round_half_even") {
  CHECK(round_half_even(0.5f) == 0.0f);
  CHECK(round_half_even(1.5f) == 2.0f);
  CHECK(round_half_even(2.5f) == 2.0f);
  CHECK(round_half_even(3.5f) == 4.0f);
  CHECK(round_half_even(-0.5f) == 0.0f);
  CHECK(std::signbit(round_half_even(-0.5f)));
  CHECK(round_half_even(-1.5f) == -2.0f);
  CHECK(round_half_even(-2.5f) == -2.0f);
  CHECK(round_half_even(-3.5f) == -4.0f);
  CHECK(round_half_even(0.49999997f) == 0.0f);
  CHECK(round_half_even(0.50000006f) == 1.0f);
  CHECK(round_half_even(-2.7f) == -3.0f);
  CHECK(round_half_even(2.2f) == 2.0f);
  CHECK(round_half_even(8388607.5f) == 8388608.0f);   // 2^23 - 0.5
  CHECK(round_half_even(8388606.5f) == 8388606.0f);
  CHECK(round_half_even(16777216.0f) == 16777216.0f);
  CHECK(round_half_even(std::numeric_limits<float>::infinity()) == std::numeric_limits<float>::infinity());
  CHECK(round_half_even(-std::numeric_limits<float>::infinity()) == -std::numeric_limits<float>::infinity());
  CHECK(std::isnan(round_half_even(std::numeric_limits<float>::quiet_NaN())));

  std::mt19937 rng(99);
  std::uniform_real_distribution<float> dist(-1000.0f, 1000.0f);
  for (int i = 0; i < 10000; ++i) {
    // Half-integers are the interesting inputs; mix them in.
    const float x = i % 3 == 0 ? std::round(dist(rng)) + 0.5f : dist(rng);
    CAPTURE(x);
    CHECK(to_bits(round_half_even(x)) == to_bits(std::nearbyint(x)));
  }
}
