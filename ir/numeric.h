// SPDX-License-Identifier: Apache-2.0
// numeric.h - exact f32 <-> f16/bf16 conversions and round-half-to-even, header-only.
//
// These are the reference conversions: the interpreter models f16/bf16 storage with
// round_to_f16/round_to_bf16, and the safetensors reader decodes F16/BF16 with them.
// They work on bit patterns only, so they do not depend on the floating-point
// environment (rounding mode, FTZ/DAZ) or on hardware half-precision support.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace ternjit::ir {

/// Converts an f32 to IEEE 754 binary16 bits, rounding to nearest, ties to even.
/// Magnitudes >= 65520 (the midpoint between 65504 and 2^16) become +-inf; results
/// below the normal range become f16 subnormals or +-0 (2^-25 exactly rounds to 0).
/// NaN stays NaN: the sign and the top 10 payload bits are kept and the quiet bit set.
/// The sign of zero is preserved.
inline std::uint16_t f32_to_f16_bits(float value) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  const auto sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const std::uint32_t abs = bits & 0x7FFF'FFFFu;
  if (abs > 0x7F80'0000u) {
    return static_cast<std::uint16_t>(sign | 0x7E00u | ((abs >> 13) & 0x03FFu));
  }
  if (abs >= 0x477F'F000u) return static_cast<std::uint16_t>(sign | 0x7C00u);  // >= 65520, or inf
  if (abs <= 0x3300'0000u) return sign;                                         // <= 2^-25
  const std::uint32_t exponent = abs >> 23;
  std::uint32_t mantissa = abs & 0x007F'FFFFu;
  if (exponent < 113) {
    // f16 subnormal: the result counts units of 2^-24. With the implicit bit restored,
    // value = mantissa * 2^(exponent - 150), i.e. mantissa >> (126 - exponent) units;
    // exponent > 102 here (abs > 2^-25), so the shift is in [14, 24].
    mantissa |= 0x0080'0000u;
    const std::uint32_t shift = 126 - exponent;
    std::uint32_t result = mantissa >> shift;
    const std::uint32_t rest = mantissa & ((1u << shift) - 1);
    const std::uint32_t half = 1u << (shift - 1);
    if (rest > half || (rest == half && (result & 1u) != 0)) ++result;  // may carry into 0x0400: fine
    return static_cast<std::uint16_t>(sign | result);
  }
  // Normal: rebias the exponent (127 -> 15) and round away the low 13 mantissa bits.
  // A carry out of the mantissa correctly increments the exponent; it cannot reach
  // inf because inputs >= 65520 were handled above.
  std::uint32_t result = ((exponent - 112) << 10) | (mantissa >> 13);
  const std::uint32_t rest = mantissa & 0x1FFFu;
  if (rest > 0x1000u || (rest == 0x1000u && (result & 1u) != 0)) ++result;
  return static_cast<std::uint16_t>(sign | result);
}

/// Converts IEEE 754 binary16 bits to f32. Exact for every input (f32 represents every
/// f16 value, subnormals included); NaN stays NaN with its payload shifted up.
inline float f16_bits_to_f32(std::uint16_t half_bits) {
  const std::uint32_t sign = static_cast<std::uint32_t>(half_bits & 0x8000u) << 16;
  const std::uint32_t exponent = (half_bits >> 10) & 0x1Fu;
  const std::uint32_t mantissa = half_bits & 0x03FFu;
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24, exact in f32 (mantissa < 2^10).
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return std::bit_cast<float>(sign | std::bit_cast<std::uint32_t>(magnitude));
  }
  if (exponent == 0x1F) return std::bit_cast<float>(sign | 0x7F80'0000u | (mantissa << 13));
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

/// Converts an f32 to bfloat16 bits (the top half of the f32), rounding to nearest,
/// ties to even. Overflow rounds to +-inf (magnitudes >= 0x1.FFp127 rounded up);
/// subnormals round like any other value. NaN stays NaN: sign and top payload bits
/// are kept and the quiet bit is set.
inline std::uint16_t f32_to_bf16_bits(float value) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  if ((bits & 0x7FFF'FFFFu) > 0x7F80'0000u) {
    return static_cast<std::uint16_t>((bits >> 16) | 0x0040u);
  }
  // Adding 0x7FFF plus the lowest kept bit rounds the discarded 16 bits to nearest
  // even; the carry propagates through the exponent (into inf on overflow).
  const std::uint32_t rounding = 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>((bits + rounding) >> 16);
}

/// Converts bfloat16 bits to f32. Exact for every input.
inline float bf16_bits_to_f32(std::uint16_t bf16_bits) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bf16_bits) << 16);
}

/// Rounds an f32 to the nearest f16 value (as f16_bits_to_f32(f32_to_f16_bits(x))):
/// what storing x in an f16 tensor and loading it back yields.
inline float round_to_f16(float value) { return f16_bits_to_f32(f32_to_f16_bits(value)); }

/// Rounds an f32 to the nearest bf16 value: what storing x in a bf16 tensor and loading
/// it back yields.
inline float round_to_bf16(float value) { return bf16_bits_to_f32(f32_to_bf16_bits(value)); }

/// Rounds to the nearest integer, ties to even (0.5 -> 0, 1.5 -> 2, -2.5 -> -2), as an
/// f32. This equals std::nearbyint under the default FE_TONEAREST mode, but is computed
/// explicitly so that it does not depend on the floating-point environment.
/// NaN stays NaN, +-inf stays +-inf, and the sign of zero is kept (-0.3 -> -0.0).
inline float round_half_even(float value) {
  const float truncated = std::trunc(value);
  // value - truncated is exact (both share the exponent range; the difference has fewer
  // significant bits than value). For |value| >= 2^23, and for inf/NaN, no fraction
  // test below is true and `truncated` is the answer.
  const float fraction = value - truncated;
  const float away = value < 0 ? -1.0f : 1.0f;
  const float magnitude = std::fabs(fraction);
  if (magnitude > 0.5f) return truncated + away;
  if (magnitude == 0.5f && std::fmod(truncated, 2.0f) != 0.0f) return truncated + away;
  return truncated;
}

}  // namespace ternjit::ir
