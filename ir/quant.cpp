// SPDX-License-Identifier: Apache-2.0
// quant.cpp - reference quantizers; the exact arithmetic is specified in quant.h.
#include "ir/quant.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>
#include <random>
#include <string>

#include "ir/numeric.h"

namespace ternjit::ir {

namespace {

// Largest |x| in f32, from 0, skipping NaN (a NaN never compares greater).
float max_abs(std::span<const float> values) {
  float amax = 0.0f;
  for (float v : values) {
    const float a = std::fabs(v);
    if (a > amax) amax = a;
  }
  return amax;
}

float sign_of(float x) { return x > 0 ? 1.0f : (x < 0 ? -1.0f : 0.0f); }

// rows * cols as a size, or nullopt when negative or not representable.
std::optional<std::size_t> element_count(std::int64_t rows, std::int64_t cols) {
  if (rows < 0 || cols < 0) return std::nullopt;
  const auto r = static_cast<std::uint64_t>(rows);
  const auto c = static_cast<std::uint64_t>(cols);
  if (c != 0 && r > SIZE_MAX / c) return std::nullopt;
  return static_cast<std::size_t>(r * c);
}

std::string shape_text(std::int64_t rows, std::int64_t cols) {
  return "[" + std::to_string(rows) + ", " + std::to_string(cols) + "]";
}

Result<void> check_rows(const char* what, std::size_t x_size, std::int64_t rows, std::int64_t cols,
                        const char* out_name, std::size_t out_size) {
  const auto count = element_count(rows, cols);
  if (!count) {
    return make_error(ErrorCode::InvalidArgument,
                      std::string(what) + ": shape " + shape_text(rows, cols) + " is negative or too large");
  }
  if (x_size != *count) {
    return make_error(ErrorCode::InvalidArgument, std::string(what) + ": shape " + shape_text(rows, cols) +
                                                      " needs " + std::to_string(*count) + " inputs, got " +
                                                      std::to_string(x_size));
  }
  if (out_size != *count) {
    return make_error(ErrorCode::InvalidArgument, std::string(what) + ": shape " + shape_text(rows, cols) +
                                                      " needs " + std::to_string(*count) + " " + out_name +
                                                      " elements, got " + std::to_string(out_size));
  }
  return success();
}

// A caller broke a documented precondition: our bug, so a loud crash (STYLE rule 3).
[[noreturn]] void precondition_failed(const std::string& message) {
  std::fprintf(stderr, "ternjit: internal error: %s\n", message.c_str());
  std::abort();
}

std::size_t checked_count(const char* what, std::span<const float> x, std::int64_t rows, std::int64_t cols) {
  const auto count = element_count(rows, cols);
  if (!count || *count != x.size()) {
    precondition_failed(std::string(what) + ": shape " + shape_text(rows, cols) + " does not match " +
                        std::to_string(x.size()) + " inputs");
  }
  return *count;
}

}  // namespace

float absmax_int8_scale(std::span<const float> row) {
  // A NaN or an infinity anywhere in the row makes the row's scale NaN, so every value
  // dequantizes to NaN (q = 0, q * NaN) and the integer path's x_scale carries the NaN
  // through tmatmul: a non-finite input is never read as a finite number.
  for (float v : row)
    if (!std::isfinite(v)) return std::numeric_limits<float>::quiet_NaN();
  return max_abs(row) / 127.0f;
}

std::int8_t quantize_int8_value(float x, float scale) {
  if (scale == 0.0f) return 0;
  const float r = round_half_even(x / scale);
  if (std::isnan(r)) return 0;
  if (r > 127.0f) return 127;
  if (r < -127.0f) return -127;
  return static_cast<std::int8_t>(r);
}

Result<void> quantize_int8_rows(std::span<const float> x, std::int64_t rows, std::int64_t cols,
                                std::span<std::int8_t> q, std::span<float> scales) {
  TERNJIT_TRY_VOID(check_rows("quantize_int8_rows", x.size(), rows, cols, "q", q.size()));
  if (scales.size() != static_cast<std::size_t>(rows)) {
    return make_error(ErrorCode::InvalidArgument, "quantize_int8_rows: " + std::to_string(rows) +
                                                      " rows need as many scales, got " +
                                                      std::to_string(scales.size()));
  }
  const auto width = static_cast<std::size_t>(cols);
  for (std::size_t r = 0; r < scales.size(); ++r) {
    const float s = absmax_int8_scale(x.subspan(r * width, width));
    scales[r] = s;
    for (std::size_t i = r * width; i < (r + 1) * width; ++i) q[i] = quantize_int8_value(x[i], s);
  }
  return success();
}

Result<void> fake_quantize_int8_rows(std::span<const float> x, std::int64_t rows, std::int64_t cols,
                                     std::span<float> out) {
  TERNJIT_TRY_VOID(check_rows("fake_quantize_int8_rows", x.size(), rows, cols, "output", out.size()));
  const auto width = static_cast<std::size_t>(cols);
  for (std::size_t r = 0; r < static_cast<std::size_t>(rows); ++r) {
    // The scale is taken before any element of the row is written, so out == x works.
    const float s = absmax_int8_scale(x.subspan(r * width, width));
    for (std::size_t i = r * width; i < (r + 1) * width; ++i) {
      out[i] = static_cast<float>(quantize_int8_value(x[i], s)) * s;
    }
  }
  return success();
}

Result<float> quantize_int8_tensor(std::span<const float> x, std::span<std::int8_t> q) {
  float scale = 0.0f;
  TERNJIT_TRY_VOID(quantize_int8_rows(x, 1, static_cast<std::int64_t>(x.size()), q, std::span<float>(&scale, 1)));
  return scale;
}

Result<void> fake_quantize_int8_tensor(std::span<const float> x, std::span<float> out) {
  return fake_quantize_int8_rows(x, 1, static_cast<std::int64_t>(x.size()), out);
}

float ternarize_threshold(float x, float threshold) {
  return std::fabs(x) > threshold ? sign_of(x) : 0.0f;
}

std::vector<float> ternarize_threshold(std::span<const float> x, float threshold) {
  std::vector<float> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = ternarize_threshold(x[i], threshold);
  return out;
}

float absmean_scale(std::span<const float> group) {
  if (group.empty()) return 0.0f;
  double sum = 0.0;
  for (float v : group) sum += std::fabs(static_cast<double>(v));
  return static_cast<float>(sum / static_cast<double>(group.size()));
}

std::int8_t ternarize_absmean_value(float x, float gamma) {
  if (gamma == 0.0f) return 0;
  const float r = round_half_even(x / gamma);
  if (std::isnan(r)) return 0;
  return static_cast<std::int8_t>(sign_of(r));  // r is an integer, so clamping to [-1, 1] is its sign
}

TernaryQuant ternarize_absmean(std::span<const float> x, std::int64_t rows, std::int64_t cols,
                               bool per_channel) {
  checked_count("ternarize_absmean", x, rows, cols);
  // Per tensor is one group of all elements; per channel is one group per row.
  const std::size_t groups = per_channel ? static_cast<std::size_t>(rows) : 1;
  const std::size_t width = per_channel ? static_cast<std::size_t>(cols) : x.size();
  TernaryQuant result;
  result.values.resize(x.size());
  result.scales.resize(groups);
  for (std::size_t g = 0; g < groups; ++g) {
    const float gamma = absmean_scale(x.subspan(g * width, width));
    result.scales[g] = gamma;
    for (std::size_t i = g * width; i < (g + 1) * width; ++i) {
      result.values[i] = ternarize_absmean_value(x[i], gamma);
    }
  }
  return result;
}

std::vector<float> fake_ternarize_absmean(std::span<const float> x, std::int64_t rows, std::int64_t cols,
                                          bool per_channel) {
  const TernaryQuant tq = ternarize_absmean(x, rows, cols, per_channel);
  const std::size_t width = per_channel ? static_cast<std::size_t>(cols) : x.size();
  std::vector<float> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    out[i] = static_cast<float>(tq.values[i]) * tq.scales[i / width];  // width > 0 whenever x is non-empty
  }
  return out;
}

TernaryQuant ternarize_stochastic(std::span<const float> x, std::uint64_t seed) {
  TernaryQuant result;
  result.values.assign(x.size(), 0);
  const float s = max_abs(x);
  result.scales = {s};
  if (s == 0.0f) return result;
  // mt19937_64's output sequence is fixed by the standard, and the u mapping below uses
  // only integer ops and an exact scaling by 2^-53, so results are platform-independent
  // (unlike std::uniform_real_distribution, whose algorithm is unspecified).
  std::mt19937_64 generator(seed);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double u = static_cast<double>(generator() >> 11) * 0x1p-53;
    const float p = std::fabs(x[i]) / s;
    if (u < static_cast<double>(p)) result.values[i] = static_cast<std::int8_t>(sign_of(x[i]));
  }
  return result;
}

}  // namespace ternjit::ir
