// SPDX-License-Identifier: Apache-2.0
// quant.h - reference quantizers (int8 absmax, ternarize by threshold, absmean, stochastic).
//
// These define the semantics the interpreter executes and every target is compared
// against, so each one spells out its exact f32 arithmetic. Matrices are row-major
// rows x cols. "round" is round_half_even from numeric.h (ties to even, independent
// of the floating-point environment). Where a rule below would cast NaN to an integer,
// the result is 0 instead; no input, NaN and inf included, is undefined behaviour.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "ternjit/result.h"

namespace ternjit::ir {

/// The absmax int8 scale of one row: `amax / 127.0f` (f32 division), where amax is the
/// largest |x| of the row in f32, starting from 0. An empty row gives 0. A row holding
/// a NaN or an infinity gives NaN (so its values quantize to 0 and dequantize to NaN:
/// non-finite input propagates to the whole row instead of being read as a number).
float absmax_int8_scale(std::span<const float> row);

/// Quantizes one value with an absmax scale: 0 if scale == 0; otherwise
/// clamp(round_half_even(x / scale), -127, 127) with x / scale an f32 division, and 0
/// when that quotient is NaN (x NaN, or the scale NaN, or x and scale both infinite).
std::int8_t quantize_int8_value(float x, float scale);

/// Per-row absmax int8 quantization (ir/README.md, `quantize_int8`): for each row r,
/// scales[r] = absmax_int8_scale(row r) and q[i] = quantize_int8_value(x[i], scales[r]).
/// Errors (InvalidArgument): rows or cols negative, x.size() or q.size() != rows * cols,
/// scales.size() != rows. Nothing is written on error.
Result<void> quantize_int8_rows(std::span<const float> x, std::int64_t rows, std::int64_t cols,
                                std::span<std::int8_t> q, std::span<float> scales);

/// quantize_int8_rows followed by dequantization: out[i] = float(q[i]) * scales[r] (f32
/// multiply). `out` may be the same span as `x` (in place), but must not partially
/// overlap it. Errors (InvalidArgument): as quantize_int8_rows, with out.size() in
/// place of q.size().
Result<void> fake_quantize_int8_rows(std::span<const float> x, std::int64_t rows, std::int64_t cols,
                                     std::span<float> out);

/// Per-tensor absmax int8 quantization: the whole of `x` as one row. Returns the scale.
/// Errors (InvalidArgument): q.size() != x.size().
Result<float> quantize_int8_tensor(std::span<const float> x, std::span<std::int8_t> q);

/// Per-tensor fake quantization: the whole of `x` as one row of fake_quantize_int8_rows.
/// `out` may alias `x` exactly. Errors (InvalidArgument): out.size() != x.size().
Result<void> fake_quantize_int8_tensor(std::span<const float> x, std::span<float> out);

/// `ternarize {threshold}` (ir/README.md) for one value: sign(x) (+1.0f or -1.0f) when
/// |x| > threshold, else +0.0f. NaN (in x or threshold) gives 0.
float ternarize_threshold(float x, float threshold);

/// ternarize_threshold applied to every element of `x`.
std::vector<float> ternarize_threshold(std::span<const float> x, float threshold);

/// Ternary values with their scales: value i represents values[i] * scale, with one
/// scale per tensor (scales.size() == 1) or one per row (scales.size() == rows).
struct TernaryQuant {
  std::vector<std::int8_t> values;  ///< each -1, 0 or +1, same order as the input
  std::vector<float> scales;        ///< 1 per tensor, or 1 per row when per-channel
};

/// The absmean scale gamma of a group: sum of |x| accumulated in double in index order,
/// divided by (double)group.size(), then cast to float. An empty group gives 0; NaN in
/// the group gives NaN.
float absmean_scale(std::span<const float> group);

/// Ternarizes one value with an absmean scale: 0 if gamma == 0; otherwise
/// clamp(round_half_even(x / gamma), -1, 1) with x / gamma an f32 division, and 0 when
/// that quotient is NaN.
std::int8_t ternarize_absmean_value(float x, float gamma);

/// BitNet b1.58 absmean ternarization (ir/README.md, `ternarize_absmean`). Per tensor: one
/// gamma = absmean_scale(x); per channel: gamma_r = absmean_scale(row r). Each value is
/// ternarize_absmean_value(x[i], gamma of its row or tensor).
/// Precondition (a caller bug, not user input): rows >= 0, cols >= 0 and
/// x.size() == rows * cols; a violation prints a message and aborts.
TernaryQuant ternarize_absmean(std::span<const float> x, std::int64_t rows, std::int64_t cols,
                               bool per_channel);

/// ternarize_absmean as floats: out[i] = float(values[i]) * gamma (f32 multiply; so a
/// NaN gamma makes the whole group NaN). Same precondition as ternarize_absmean.
std::vector<float> fake_ternarize_absmean(std::span<const float> x, std::int64_t rows, std::int64_t cols,
                                          bool per_channel);

/// Stochastic ternarization with an explicit seed; one scale s = max |x| (f32, starting
/// from 0, ignoring NaN). If s == 0 every value is 0. Otherwise a std::mt19937_64 seeded
/// with `seed` makes exactly one draw per element in index order; with
/// u = double(draw >> 11) * 2^-53 (uniform in [0, 1)) and p = |x_i| / s (f32 division),
/// value i is sign(x_i) when u < p (compared in double), else 0. NaN elements give 0.
/// E[value * s] = x_i for finite input. Identical on every platform for a given seed.
TernaryQuant ternarize_stochastic(std::span<const float> x, std::uint64_t seed);

}  // namespace ternjit::ir
