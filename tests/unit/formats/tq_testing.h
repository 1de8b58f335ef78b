// SPDX-License-Identifier: Apache-2.0
// tq_testing.h - an independent packer of GGUF TQ1_0/TQ2_0 blocks for tests (ggml's quantizer layouts).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "formats/gguf.h"
#include "ir/numeric.h"

namespace ternjit::testing {

/// ggml's quantize_row_tq1_0_ref packing of 5 (or 4, then *3) trits: digits in base 3,
/// first value most significant, then a ceiling division mapping [0, 243) onto a byte.
inline std::uint8_t tq1_pack(const int* digits, int count) {
  unsigned q = 0;
  for (int n = 0; n < count; ++n) q = q * 3 + static_cast<unsigned>(digits[n]);
  if (count == 4) q *= 3;
  return static_cast<std::uint8_t>((q * 256 + 242) / 243);
}

/// Appends one block of 256 values (-1, 0, 1) with scale bits `d` (f16) in `type`'s
/// layout: TQ2_0 byte 32 j + m, bits 2 l hold element 128 j + 32 l + m (code value + 1);
/// TQ1_0 qs[m] (m < 32) holds elements m + 32 n, qs[32 + m] (m < 16) 160 + m + 16 n,
/// qh[m] (m < 4) 240 + m + 4 n; d little-endian last.
inline void append_tq_block(std::vector<std::uint8_t>& out, formats::GgufTensorType type, const int* values,
                            std::uint16_t d) {
  if (type == formats::GgufTensorType::TQ2_0) {
    for (int j = 0; j < 2; ++j)
      for (int m = 0; m < 32; ++m) {
        unsigned byte = 0;
        for (int l = 0; l < 4; ++l) byte |= static_cast<unsigned>(values[128 * j + 32 * l + m] + 1) << (2 * l);
        out.push_back(static_cast<std::uint8_t>(byte));
      }
  } else {
    int g[5];
    for (int m = 0; m < 32; ++m) {
      for (int n = 0; n < 5; ++n) g[n] = values[m + 32 * n] + 1;
      out.push_back(tq1_pack(g, 5));
    }
    for (int m = 0; m < 16; ++m) {
      for (int n = 0; n < 5; ++n) g[n] = values[160 + m + 16 * n] + 1;
      out.push_back(tq1_pack(g, 5));
    }
    for (int m = 0; m < 4; ++m) {
      for (int n = 0; n < 4; ++n) g[n] = values[240 + m + 4 * n] + 1;
      out.push_back(tq1_pack(g, 4));
    }
  }
  out.push_back(static_cast<std::uint8_t>(d & 0xFF));
  out.push_back(static_cast<std::uint8_t>(d >> 8));
}

/// A ternary GGUF tensor with dims (K, N): row n holds values[n * K + k], block g of row n
/// has scale scales[n * (K / 256) + g] (rounded to f16). Precondition: K % 256 == 0.
inline formats::GgufTensor make_tq_tensor(std::string name, formats::GgufTensorType type, std::size_t k, std::size_t n,
                                          const std::vector<int>& values, const std::vector<float>& scales) {
  std::vector<std::uint8_t> bytes;
  const std::size_t g = k / 256;
  for (std::size_t row = 0; row < n; ++row)
    for (std::size_t b = 0; b < g; ++b)
      append_tq_block(bytes, type, values.data() + row * k + b * 256, ir::f32_to_f16_bits(scales[row * g + b]));
  formats::GgufTensor t;
  t.name = std::move(name);
  t.type = type;
  t.dims = {k, n};
  t.bytes = ir::SharedBytes::adopt(std::move(bytes));
  return t;
}

}  // namespace ternjit::testing
