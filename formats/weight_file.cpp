// SPDX-License-Identifier: Apache-2.0
// weight_file.cpp - WeightFile: safetensors, GGUF and Hugging Face BitNet tensors as offers to parameters.
#include "formats/weight_file.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "formats/mapped_file.h"
#include "formats/text.h"
#include "formats/ternary.h"
#include "formats/weight_store.h"
#include "ir/bind.h"
#include "ir/builder.h"
#include "ir/numeric.h"

namespace ternjit::formats {

namespace {

Error fail(std::string msg) { return make_error(ErrorCode::InvalidInput, std::move(msg)); }

constexpr std::size_t kQK = 256;  // elements of a GGUF ternary block

// A tensor name or metadata string from the file, quoted and escaped for a message (text.h).
std::string quoted(std::string_view s) { return quoted_printable(s); }

// Little-endian float element i of `kind` (F32, F16 or BF16) at `p`.
float float_at(ElemKind kind, const std::uint8_t* p, std::size_t i) {
  switch (kind) {
    case ElemKind::F32: {
      std::uint32_t bits = 0;
      std::memcpy(&bits, p + 4 * i, 4);  // little-endian host (x86-64, AArch64)
      return std::bit_cast<float>(bits);
    }
    case ElemKind::F16: return ir::f16_bits_to_f32(static_cast<std::uint16_t>(p[2 * i] | p[2 * i + 1] << 8));
    case ElemKind::BF16: return ir::bf16_bits_to_f32(static_cast<std::uint16_t>(p[2 * i] | p[2 * i + 1] << 8));
    default: TERNJIT_UNREACHABLE("float_at: not a float kind");
  }
}

// The f32 values in a stored tensor of `kind` (rounded once to it).
ir::StoredTensor encode_floats(ElemKind kind, std::vector<std::int64_t> shape, std::span<const float> values) {
  const auto width = static_cast<std::size_t>(elem_bits(kind) / 8);
  std::vector<std::uint8_t> out(values.size() * width);
  for (std::size_t i = 0; i < values.size(); ++i)
    ir::encode_element(kind, ir::round_to_kind(values[i], kind), out.data() + i * width);
  auto t = ir::StoredTensor::view(kind, std::move(shape), ir::SharedBytes::adopt(std::move(out)));
  TERNJIT_CHECK(t.ok(), "encode_floats: sizes agree by construction");
  return std::move(t.value());
}

// A tern2 buffer for [K, N] written element by element (each exactly once).
struct Tern2Out {
  std::size_t n_cols;
  std::vector<std::uint8_t> bytes;
  Tern2Out(std::size_t k, std::size_t n) : n_cols(n), bytes(ir::tern2_size(k * n), 0) {}
  void set(std::size_t k, std::size_t n, std::uint8_t code) {
    const std::size_t i = k * n_cols + n;
    bytes[i / 4] = static_cast<std::uint8_t>(bytes[i / 4] | code << (2 * (i % 4)));
  }
  Result<ir::StoredTensor> finish(std::vector<std::int64_t> shape) {
    // The padding fields of the last byte stay 00; tern2 ignores them.
    return ir::StoredTensor::view(ElemKind::T2, std::move(shape), ir::SharedBytes::adopt(std::move(bytes)));
  }
};

// Rows and columns of a GGUF tensor seen as [K, N] (ne0, ne1); rank 1 is [K] with N = 1.
struct GgufDims {
  std::size_t k = 0, n = 0;
  std::vector<std::int64_t> shape;
};
Result<GgufDims> gguf_dims(const GgufTensor& t, const std::string& what) {
  if (t.dims.size() > 2) {
    return fail(what + ": GGUF tensor " + quoted(t.name) + " has " + std::to_string(t.dims.size()) +
                " dims; only 1- and 2-dim tensors bind to parameters");
  }
  GgufDims d;
  d.k = static_cast<std::size_t>(t.dims.empty() ? 1 : t.dims[0]);
  d.n = static_cast<std::size_t>(t.dims.size() == 2 ? t.dims[1] : 1);
  for (std::uint64_t v : t.dims) d.shape.push_back(static_cast<std::int64_t>(v));
  return d;
}

// The f16 scale d of block b of a ternary GGUF tensor (the block's last two bytes), read
// through a bounds check on the tensor's own bytes: a block past them (a tensor with
// ne0 = 0 has none) is an error, never a read of the bytes that follow the tensor.
Result<float> block_scale(const GgufTensor& t, std::size_t b) {
  const std::size_t size = gguf_block_bytes(t.type);
  const std::span<const std::uint8_t> bytes = t.bytes.span();
  if (size < 2 || b >= bytes.size() / size)
    return fail("GGUF tensor " + quoted(t.name) + " has " + std::to_string(size == 0 ? 0 : bytes.size() / size) +
                " blocks; block " + std::to_string(b) + " is past its bytes");
  const std::span<const std::uint8_t> d = bytes.subspan(size * b + size - 2, 2);
  return ir::f16_bits_to_f32(static_cast<std::uint16_t>(d[0] | d[1] << 8));
}

// A float matrix stored as N rows of K (safetensors [N, K], or GGUF dims (K, N)), read a row at a time.
struct FloatRows {
  std::size_t k = 0, n = 0;
  ElemKind kind = ElemKind::F32;  // F32/F16/BF16 elements, unless q8
  bool q8 = false;                 // GGUF Q8_0 blocks
  const std::uint8_t* data = nullptr;

  void row(std::size_t r, float* out) const {
    if (!q8) {
      const auto width = static_cast<std::size_t>(elem_bits(kind) / 8);
      const std::uint8_t* p = data + r * k * width;
      for (std::size_t i = 0; i < k; ++i) out[i] = float_at(kind, p, i);
      return;
    }
    // block_q8_0 { ggml_half d; int8_t qs[32]; }: y = qs[j] * d (dequantize_row_q8_0).
    const std::uint8_t* p = data + r * (k / 32) * 34;
    for (std::size_t b = 0; b < k / 32; ++b) {
      const float d = ir::f16_bits_to_f32(static_cast<std::uint16_t>(p[34 * b] | p[34 * b + 1] << 8));
      for (std::size_t j = 0; j < 32; ++j)
        out[32 * b + j] = static_cast<float>(static_cast<std::int8_t>(p[34 * b + 2 + j])) * d;
    }
  }
};

// The rows of a float GGUF tensor with dims (K, N) (or (K): one row).
FloatRows gguf_rows(const GgufTensor& t) {
  FloatRows rows{static_cast<std::size_t>(t.dims.empty() ? 1 : t.dims[0]),
                 static_cast<std::size_t>(t.dims.size() > 1 ? t.dims[1] : 1), ElemKind::F32,
                 t.type == GgufTensorType::Q8_0, t.bytes.data()};
  if (t.type == GgufTensorType::F16) rows.kind = ElemKind::F16;
  if (t.type == GgufTensorType::BF16) rows.kind = ElemKind::BF16;
  return rows;
}

// The rows of a float matrix offer: safetensors [N, K], or GGUF dims (K, N).
FloatRows master_rows(const std::optional<StFile>& st, const std::optional<GgufFile>& gguf, std::size_t index) {
  if (!st) return gguf_rows(gguf->tensors[index]);
  const StTensor& t = st->tensors[index];
  return FloatRows{static_cast<std::size_t>(t.shape[1]), static_cast<std::size_t>(t.shape[0]), t.kind, false,
                   t.bytes.data()};
}

// absmean ternarization of a master weight (transformers' WeightQuant, in f32):
// s = 1 / max(mean|W|, 1e-5), q = clamp(round_half_even(W * s), -1, 1), W ~ q / s.
// Returns 1 / s (the multiplier ternjit's scale parameter holds). Errors: the first
// element that is not finite, by its index in the file ([row, element]) and its class
// (one would make the mean, and so every element's code, NaN or 0 * Inf); a scale that is
// not finite (a mean |W| near FLT_MAX makes s subnormal and 1 / s overflow: the values
// would all round to 0 under an infinite scale).
Result<float> master_scale(const FloatRows& w) {
  std::vector<float> row(w.n == 0 ? 0 : w.k);  // no rows: ne0 alone may be huge (a 0 x 2^37 tensor)
  double sum = 0;
  // A tensor of no elements has nothing to visit; its other extent may be 2^40.
  for (std::size_t r = 0; r < (w.k == 0 ? 0 : w.n); ++r) {
    w.row(r, row.data());
    for (std::size_t i = 0; i < w.k; ++i) {
      const float v = row[i];
      if (!std::isfinite(v))
        return fail("master weight element [" + std::to_string(r) + ", " + std::to_string(i) + "] is " +
                    (std::isnan(v) ? "NaN" : v > 0 ? "Inf" : "-Inf"));
      sum += std::fabs(static_cast<double>(v));
    }
  }
  const double count = static_cast<double>(w.k) * static_cast<double>(w.n);
  const float mean = std::max(static_cast<float>(count > 0 ? sum / count : 0.0), 1e-5f);
  const float s = 1.0f / mean;
  if (!std::isfinite(1.0f / s))
    return fail("its absmean scale 1 / (1 / mean |W|) overflows f32 (mean |W| is too close to the f32 maximum)");
  return 1.0f / s;
}

// The ternary codes of a master weight (errors: master_scale's, unprefixed: the caller
// names the tensor once). Every element is finite and 1 / s is finite, so no x is NaN.
Result<ir::StoredTensor> ternarize_master(const FloatRows& w) {
  std::vector<float> row(w.n == 0 ? 0 : w.k);
  TERNJIT_TRY(const float scale, master_scale(w));
  const float s = 1.0f / scale;
  Tern2Out out(w.k, w.n);
  for (std::size_t r = 0; r < (w.k == 0 ? 0 : w.n); ++r) {
    w.row(r, row.data());
    for (std::size_t i = 0; i < w.k; ++i) {
      const float x = row[i] * s;
      const float q = std::clamp(std::nearbyint(x), -1.0f, 1.0f);  // default rounding: half to even, as torch.round
      out.set(i, r, static_cast<std::uint8_t>(static_cast<int>(q) + 1));
    }
  }
  return out.finish({static_cast<std::int64_t>(w.k), static_cast<std::int64_t>(w.n)});
}

constexpr std::uint64_t kEvenBits = 0x5555555555555555ull;  // bit 0 of every 2-bit field
constexpr std::uint64_t kLowPairs = 0x0303030303030303ull;  // the low field of every byte

#if !defined(__SSE2__)
// Transposes an 8 x 8 byte matrix held as 8 little-endian words (byte c of word r is
// element (r, c)): swap the off-diagonal 4 x 4, then 2 x 2, then 1 x 1 blocks.
void transpose8x8(std::uint64_t m[8]) {
  for (std::size_t i = 0; i < 4; ++i) {
    const std::uint64_t t = ((m[i] >> 32) ^ m[i + 4]) & 0x00000000FFFFFFFFull;
    m[i] ^= t << 32;
    m[i + 4] ^= t;
  }
  for (std::size_t i : {0, 1, 4, 5}) {
    const std::uint64_t t = ((m[i] >> 16) ^ m[i + 2]) & 0x0000FFFF0000FFFFull;
    m[i] ^= t << 16;
    m[i + 2] ^= t;
  }
  for (std::size_t i : {0, 2, 4, 6}) {
    const std::uint64_t t = ((m[i] >> 8) ^ m[i + 1]) & 0x00FF00FF00FF00FFull;
    m[i] ^= t << 8;
    m[i + 1] ^= t;
  }
}
#endif

// Writes the transpose of the 16 x 16 bytes at `in` (row i at in + i * in_stride) to
// `out` (row e at out + e * out_stride).
void transpose16(const std::uint8_t* in, std::size_t in_stride, std::uint8_t* out, std::size_t out_stride) {
#if defined(__SSE2__)
  // Interleave bytes, then 16-, 32- and 64-bit lanes: after stage s, lane e of a
  // register holds column e of 2^s consecutive rows.
  __m128i x[16], y[16];
  for (int i = 0; i < 16; ++i) x[i] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i * in_stride));
  for (int k = 0; k < 8; ++k) {  // y[k]: rows 2k, 2k+1 at e 0..7; y[k + 8]: at e 8..15
    y[k] = _mm_unpacklo_epi8(x[2 * k], x[2 * k + 1]);
    y[k + 8] = _mm_unpackhi_epi8(x[2 * k], x[2 * k + 1]);
  }
  for (int k = 0; k < 4; ++k) {  // x[4h + k]: rows 4k..4k+3 at e 4h..4h+3
    x[k] = _mm_unpacklo_epi16(y[2 * k], y[2 * k + 1]);
    x[k + 4] = _mm_unpackhi_epi16(y[2 * k], y[2 * k + 1]);
    x[k + 8] = _mm_unpacklo_epi16(y[2 * k + 8], y[2 * k + 9]);
    x[k + 12] = _mm_unpackhi_epi16(y[2 * k + 8], y[2 * k + 9]);
  }
  for (int h = 0; h < 4; ++h) {  // y[4h + 0/1]: rows 0..7 at e 4h, 4h+1 / 4h+2, 4h+3; +2/+3: rows 8..15
    y[4 * h] = _mm_unpacklo_epi32(x[4 * h], x[4 * h + 1]);
    y[4 * h + 1] = _mm_unpackhi_epi32(x[4 * h], x[4 * h + 1]);
    y[4 * h + 2] = _mm_unpacklo_epi32(x[4 * h + 2], x[4 * h + 3]);
    y[4 * h + 3] = _mm_unpackhi_epi32(x[4 * h + 2], x[4 * h + 3]);
  }
  for (int h = 0; h < 4; ++h) {
    const __m128i col[4] = {_mm_unpacklo_epi64(y[4 * h], y[4 * h + 2]), _mm_unpackhi_epi64(y[4 * h], y[4 * h + 2]),
                            _mm_unpacklo_epi64(y[4 * h + 1], y[4 * h + 3]), _mm_unpackhi_epi64(y[4 * h + 1], y[4 * h + 3])};
    for (int c = 0; c < 4; ++c) _mm_storeu_si128(reinterpret_cast<__m128i*>(out + (4 * h + c) * out_stride), col[c]);
  }
#else
  for (std::size_t g0 = 0; g0 < 16; g0 += 8)
    for (std::size_t e0 = 0; e0 < 16; e0 += 8) {
      std::uint64_t m[8];
      for (std::size_t r = 0; r < 8; ++r) std::memcpy(&m[r], in + (g0 + r) * in_stride + e0, 8);
      transpose8x8(m);
      for (std::size_t r = 0; r < 8; ++r) std::memcpy(out + (e0 + r) * out_stride + g0, &m[r], 8);
    }
#endif
}

// GGUF ternary T (N rows of K in blocks) re-coded as tern2 [K, N]; TQ2_0 and tern2 share
// the code (value + 1), so this is a transpose of 2-bit fields.
Result<ir::StoredTensor> gguf_ternary_transposed(const GgufTensor& t, const GgufDims& d, const std::string& what) {
  const std::size_t blocks_per_row = d.k / kQK;
  const std::size_t block_bytes = gguf_block_bytes(t.type);
  const std::uint8_t* base = t.bytes.data();
  auto bad_code = [&](std::size_t row, std::size_t b, const std::uint8_t* codes) {
    const std::size_t e = static_cast<std::size_t>(std::find(codes, codes + kQK, 3) - codes);
    return fail(what + ": TQ2_0 element (k " + std::to_string(b * kQK + e) + ", row " + std::to_string(row) +
                ") has code 3 (value 2), not ternary");
  };
  Tern2Out out(d.k, d.n);
  if (d.k == 0 || d.n == 0) return out.finish(d.shape);  // no blocks; the other extent may be 2^40
  float scale = 0;
  if (d.n % 64 == 0 && t.type == GgufTensorType::TQ2_0) {
    // 64 rows at a time make 16 whole output bytes per output row: byte e of row group g
    // is field e of each of its four rows' blocks, and TQ2_0 already holds value + 1 in
    // two bits, so this is a transpose of 2-bit fields, done on 64-bit words (the build's
    // -O2 does not vectorize byte loops of unknown trip count) into tile[g][e], then a
    // 16 x K byte transpose into the output. Each row is read once, front to back.
    const std::size_t stride = d.n / 4;
    std::vector<std::uint8_t> tile(16 * d.k);  // tile[g * K + e]
    for (std::size_t n0 = 0; n0 < d.n; n0 += 64) {
      for (std::size_t g = 0; g < 16; ++g) {
        for (std::size_t b = 0; b < blocks_per_row; ++b) {
          std::uint64_t q[4][8];
          std::uint64_t bad = 0;
          for (std::size_t r = 0; r < 4; ++r) {
            std::memcpy(q[r], base + ((n0 + 4 * g + r) * blocks_per_row + b) * block_bytes, 64);
            for (std::uint64_t w : q[r]) bad |= w & (w >> 1) & kEvenBits;
          }
          if (bad != 0) {
            std::uint8_t codes[kQK];
            for (std::size_t r = 0; r < 4; ++r) {
              const std::size_t row = n0 + 4 * g + r;
              if (!gguf_ternary_block(t.type, base + (row * blocks_per_row + b) * block_bytes, codes, &scale))
                return bad_code(row, b, codes);
            }
          }
          // Word c of half j holds qs bytes 32 j + 8 c .. + 7: elements 128 j + 32 l + 8 c ..
          std::uint8_t* row_tile = tile.data() + g * d.k + b * kQK;
          for (std::size_t j = 0; j < 2; ++j)
            for (unsigned l = 0; l < 4; ++l)
              for (std::size_t c = 0; c < 4; ++c) {
                const std::size_t i = 4 * j + c;
                const std::uint64_t v = ((q[0][i] >> (2 * l)) & kLowPairs) | ((q[1][i] >> (2 * l)) & kLowPairs) << 2 |
                                        ((q[2][i] >> (2 * l)) & kLowPairs) << 4 | ((q[3][i] >> (2 * l)) & kLowPairs) << 6;
                std::memcpy(row_tile + 128 * j + 32 * l + 8 * c, &v, 8);
              }
        }
      }
      std::uint8_t* dst = out.bytes.data() + n0 / 4;
      for (std::size_t e0 = 0; e0 < d.k; e0 += 16) transpose16(tile.data() + e0, d.k, dst + e0 * stride, stride);
    }
  } else if (d.n % 4 == 0) {
    // TQ1_0: decode four rows' blocks to codes, then gather bytes the same way.
    std::uint8_t codes[4][kQK];
    const std::size_t stride = d.n / 4;
    for (std::size_t b = 0; b < blocks_per_row; ++b) {
      std::uint8_t* dst = out.bytes.data() + b * kQK * stride;
      for (std::size_t n0 = 0; n0 < d.n; n0 += 4) {
        for (std::size_t r = 0; r < 4; ++r) {
          const std::uint8_t* blk = base + ((n0 + r) * blocks_per_row + b) * block_bytes;
          if (!gguf_ternary_block(t.type, blk, codes[r], &scale)) return bad_code(n0 + r, b, codes[r]);
        }
        for (std::size_t e = 0; e < kQK; ++e)
          dst[e * stride + n0 / 4] =
              static_cast<std::uint8_t>(codes[0][e] | codes[1][e] << 2 | codes[2][e] << 4 | codes[3][e] << 6);
      }
    }
  } else {
    std::uint8_t codes[kQK];
    for (std::size_t row = 0; row < d.n; ++row) {
      for (std::size_t b = 0; b < blocks_per_row; ++b) {
        if (!gguf_ternary_block(t.type, base + (row * blocks_per_row + b) * block_bytes, codes, &scale))
          return bad_code(row, b, codes);
        for (std::size_t e = 0; e < kQK; ++e) out.set(b * kQK + e, row, codes[e]);
      }
    }
  }
  return out.finish(d.shape);
}

// True when a 2-dim GGUF tensor (ne0, ne1), ne0 != ne1, is bound to a parameter declared
// [ne1, ne0]: ggml's own row order (ne1 rows of ne0), bound as stored (token_embd [V, E]).
// A square matrix keeps the transposed reading: its declaration cannot tell the two apart.
bool gguf_row_order(const GgufTensor& t, const ir::Type& declared) {
  if (t.dims.size() != 2 || t.dims[0] == t.dims[1] || declared.rank() != 2) return false;
  return declared.shape[0].is_static() && declared.shape[1].is_static() &&
         static_cast<std::uint64_t>(declared.shape[0].extent) == t.dims[1] &&
         static_cast<std::uint64_t>(declared.shape[1].extent) == t.dims[0];
}

// A float GGUF tensor as [ne0] or [ne0, ne1] of `kind` (2 dims: transposed from ggml's
// rows), or, `row_order`, as [ne1, ne0] in ggml's order. Of the declared kind, a vector
// and a row-order matrix are views of the mapping (no copy).
Result<ir::StoredTensor> gguf_float(const GgufTensor& t, const GgufDims& d, ElemKind kind, bool row_order) {
  const bool same = (t.type == GgufTensorType::F32 && kind == ElemKind::F32) ||
                    (t.type == GgufTensorType::F16 && kind == ElemKind::F16) ||
                    (t.type == GgufTensorType::BF16 && kind == ElemKind::BF16);
  if (same && t.dims.size() <= 1) return ir::StoredTensor::view(kind, d.shape, t.bytes);
  // No elements: nothing to convert (and no row buffer of ne0 floats, which may be 2^37).
  if (d.k == 0 || d.n == 0) return ir::StoredTensor::zeros(kind, row_order ? std::vector<std::int64_t>{static_cast<std::int64_t>(d.n), static_cast<std::int64_t>(d.k)} : d.shape);
  std::vector<std::int64_t> stored{static_cast<std::int64_t>(d.n), static_cast<std::int64_t>(d.k)};
  if (same && row_order) return ir::StoredTensor::view(kind, std::move(stored), t.bytes);
  const FloatRows rows = gguf_rows(t);
  if (row_order) {
    std::vector<float> values(d.k * d.n);
    for (std::size_t r = 0; r < d.n; ++r) rows.row(r, values.data() + r * d.k);
    return encode_floats(kind, std::move(stored), values);
  }
  std::vector<float> values(d.k * d.n), row(d.k);
  for (std::size_t r = 0; r < d.n; ++r) {
    rows.row(r, row.data());
    for (std::size_t i = 0; i < d.k; ++i) values[i * d.n + r] = row[i];
  }
  return encode_floats(kind, d.shape, values);
}

// Row n's block scales (g >= 1 of them): all equal? (bitwise, as f32 from f16). On
// failure `at` is the first differing block.
Result<bool> row_uniform(const GgufTensor& t, std::size_t n, std::size_t g, std::size_t* at) {
  TERNJIT_TRY(const float first, block_scale(t, n * g));
  for (std::size_t b = 1; b < g; ++b) {
    TERNJIT_TRY(const float d, block_scale(t, n * g + b));
    if (std::bit_cast<std::uint32_t>(d) != std::bit_cast<std::uint32_t>(first)) {
      *at = b;
      return false;
    }
  }
  return true;
}

std::string fmt_float(float v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(v));
  return buf;
}

bool is_master_source(const StTensor& t) { return t.used && is_float(t.kind) && t.shape.size() == 2; }
bool is_master_source(const GgufTensor& t) {
  return gguf_type_converted(t.type) && t.type != GgufTensorType::TQ1_0 && t.type != GgufTensorType::TQ2_0 &&
         t.dims.size() == 2;
}

}  // namespace

// ---------------------------------------------------------------- WeightFile

bool is_gguf(std::span<const std::uint8_t> data) { return data.size() >= 4 && std::memcmp(data.data(), "GGUF", 4) == 0; }

Result<WeightFile> WeightFile::open(const std::string& path, const NameMap& names) {
  TERNJIT_TRY(ir::SharedBytes image, map_file(path));
  if (is_gguf(image.span())) {
    TERNJIT_TRY(GgufFile g, parse_gguf(image, path));
    return from_gguf(std::move(g), path, names);
  }
  TERNJIT_TRY(StFile st, parse_safetensors(image, path));
  return from_safetensors(std::move(st), path, names);
}

WeightFile WeightFile::from_safetensors(StFile file, std::string display_name, const NameMap& names) {
  WeightFile w;
  w.display_name_ = std::move(display_name);
  // Hugging Face packed weights: U8 [R, K], not in a ternjit packed format, with a
  // one-element float "<name>_scale" sibling (BitLinear's weight_scale buffer).
  std::map<std::size_t, std::size_t> hf;  // weight index -> weight_scale index
  std::set<std::size_t> consumed;
  for (std::size_t i = 0; i < file.tensors.size(); ++i) {
    const StTensor& t = file.tensors[i];
    if (!t.used || t.kind != ElemKind::U8 || t.shape.size() != 2 || file.metadata.count(t.name + ".format")) continue;
    if (t.shape[0] > std::numeric_limits<std::int64_t>::max() / 4) continue;  // N = 4 R must fit int64
    const StTensor* s = file.find(t.name + "_scale");
    if (s == nullptr || !s->used || !is_float(s->kind) || ir::checked_numel(s->shape).value_or(0) != 1) continue;
    const auto sibling = static_cast<std::size_t>(s - file.tensors.data());
    hf.emplace(i, sibling);
    consumed.insert(sibling);
  }
  for (std::size_t i = 0; i < file.tensors.size(); ++i) {
    if (consumed.count(i)) continue;
    const StTensor& t = file.tensors[i];
    const std::string mapped = names.apply(t.name);
    if (auto it = hf.find(i); it != hf.end()) {
      w.offers_.push_back({mapped, t.name, OfferKind::HfPacked, i, it->second});
      w.offers_.push_back({mapped + "_scale", file.tensors[it->second].name, OfferKind::HfScale, i, it->second});
      continue;
    }
    w.offers_.push_back({mapped, t.name, OfferKind::Safetensors, i, 0});
    if (is_master_source(t)) w.offers_.push_back({mapped + "_scale", t.name, OfferKind::MasterScale, i, 0});
  }
  w.st_ = std::move(file);
  for (std::size_t i = 0; i < w.offers_.size(); ++i) w.by_name_.emplace(w.offers_[i].name, i);
  return w;
}

WeightFile WeightFile::from_gguf(GgufFile file, std::string display_name, const NameMap& names) {
  WeightFile w;
  w.display_name_ = std::move(display_name);
  for (std::size_t i = 0; i < file.tensors.size(); ++i) {
    const GgufTensor& t = file.tensors[i];
    const std::string mapped = names.apply(t.name);
    if (t.type == GgufTensorType::TQ1_0 || t.type == GgufTensorType::TQ2_0) {
      w.offers_.push_back({mapped, t.name, OfferKind::GgufTernary, i, 0});
      w.offers_.push_back({mapped + "_scale", t.name, OfferKind::GgufScale, i, 0});
      continue;
    }
    w.offers_.push_back({mapped, t.name, OfferKind::GgufFloat, i, 0});
    if (is_master_source(t)) w.offers_.push_back({mapped + "_scale", t.name, OfferKind::MasterScale, i, 0});
  }
  w.gguf_ = std::move(file);
  for (std::size_t i = 0; i < w.offers_.size(); ++i) w.by_name_.emplace(w.offers_[i].name, i);
  return w;
}

std::vector<std::string> WeightFile::offer_names() const {
  std::vector<std::string> names;
  for (const WeightOffer& o : offers_)
    if (o.kind != OfferKind::MasterScale) names.push_back(printable(o.name));
  return names;
}

Result<const WeightOffer*> WeightFile::find(std::string_view name) const {
  auto [lo, hi] = by_name_.equal_range(std::string(name));
  std::vector<const WeightOffer*> found;
  for (auto it = lo; it != hi; ++it) found.push_back(&offers_[it->second]);
  // A file tensor wins over the absmean scale a float matrix would derive; check_scales
  // refuses the pair if that matrix is ternarized.
  if (found.size() > 1)
    std::erase_if(found, [](const WeightOffer* o) { return o->kind == OfferKind::MasterScale; });
  if (found.empty()) return static_cast<const WeightOffer*>(nullptr);
  if (found.size() > 1) {
    return fail(display_name_ + ": two tensors would bind " + quoted(name) + ": " + quoted(found[0]->origin) +
                " and " + quoted(found[1]->origin) + (found[1]->kind == OfferKind::GgufScale ? " (its block scales)" : "") +
                "; rename one with a name map rule");
  }
  return found.front();
}

Result<const WeightOffer*> find_param_offer(const WeightFile& file, const std::string& param, bool short_ok) {
  TERNJIT_TRY(const WeightOffer* o, file.find(param));
  if (o != nullptr || !short_ok) return o;
  const std::string_view layer = ir::layer_of(param);
  if (layer.empty()) return o;
  return file.find(std::string_view(param).substr(layer.size() + 1));
}

Result<std::optional<std::vector<std::int64_t>>> WeightFile::shape_for(const WeightOffer& o, const ir::Type& declared,
                                                                     const std::string& what) const {
  using Shape = std::optional<std::vector<std::int64_t>>;
  const bool ternary = declared.elem == ElemKind::T2;
  const std::string from = what + ": tensor " + quoted(o.origin) + " of " + display_name_;
  auto need_float = [&]() -> Result<void> {
    if (is_float(declared.elem)) return success();
    return fail(from + " holds float scales, but the parameter is " + std::string(elem_name(declared.elem)));
  };
  switch (o.kind) {
    case OfferKind::Safetensors: {
      const StTensor& t = st_->tensors[o.tensor];
      if (!t.used) return fail(from + " has dtype " + t.dtype + ", which ternjit does not bind");
      if (ternary && is_master_source(t)) return Shape{std::vector<std::int64_t>{t.shape[1], t.shape[0]}};
      if (ternary && st_->metadata.count(t.name + ".format")) {
        auto s = st_->metadata.find(t.name + ".shape");
        if (s == st_->metadata.end()) return Shape{};
        auto dims = ir::parse_dims(s->second);
        if (!dims) return fail(from + ": bad " + quoted(t.name + ".shape") + " metadata " + quoted(s->second));
        return Shape{*dims};
      }
      return Shape{t.shape};
    }
    case OfferKind::GgufFloat: {
      const GgufTensor& t = gguf_->tensors[o.tensor];
      if (!gguf_type_converted(t.type))
        return fail(from + " is " + std::string(gguf_type_name(t.type)) +
                    ", which ternjit does not convert (it reads F32, F16, BF16, Q8_0, TQ1_0 and TQ2_0)");
      TERNJIT_TRY(GgufDims d, gguf_dims(t, from));
      if (!ternary && gguf_row_order(t, declared))
        return Shape{std::vector<std::int64_t>{static_cast<std::int64_t>(d.n), static_cast<std::int64_t>(d.k)}};
      return Shape{d.shape};
    }
    case OfferKind::GgufTernary: {
      const GgufTensor& t = gguf_->tensors[o.tensor];
      if (!ternary)
        return fail(from + " is " + std::string(gguf_type_name(t.type)) +
                    " (ternary): declare the parameter TernaryTensor[K, N] (its scales bind " + quoted(o.name + "_scale") + ")");
      TERNJIT_TRY(GgufDims d, gguf_dims(t, from));
      return Shape{d.shape};
    }
    case OfferKind::GgufScale: {
      TERNJIT_TRY_VOID(need_float());
      const GgufTensor& t = gguf_->tensors[o.tensor];
      TERNJIT_TRY(GgufDims d, gguf_dims(t, from));
      const std::size_t g = d.k / kQK;
      if (declared.rank() == 2) return Shape{std::vector<std::int64_t>{static_cast<std::int64_t>(g), static_cast<std::int64_t>(d.n)}};
      // A per-row scale is each row's block 0: a row of K = 0 has none.
      if (g == 0 && d.n != 0)
        return fail(from + ": its rows have no blocks (K = " + std::to_string(d.k) + "), so there is no per-row scale to bind");
      for (std::size_t n = 0; n < d.n; ++n) {
        std::size_t at = 0;
        auto uniform = row_uniform(t, n, g, &at);
        if (!uniform.ok()) return fail(from + ": " + uniform.error().message);
        if (!*uniform) {
          return fail(from + ": its block scales vary along K (row " + std::to_string(n) + ": d = " +
                      fmt_float(*block_scale(t, n * g)) + " in block 0, " + fmt_float(*block_scale(t, n * g + at)) +
                      " in block " + std::to_string(at) + "), so they bind only a grouped scale: declare the parameter Tensor[G, N] with G = K / 256 = " +
                      std::to_string(g));
        }
      }
      return Shape{std::vector<std::int64_t>{static_cast<std::int64_t>(d.n)}};
    }
    case OfferKind::HfPacked: {
      const StTensor& t = st_->tensors[o.tensor];
      if (!ternary)
        return fail(from + " is a Hugging Face BitNet packed ternary weight (U8 with " + quoted(t.name + "_scale") +
                    "): declare the parameter TernaryTensor[K, N]");
      return Shape{std::vector<std::int64_t>{t.shape[1], t.shape[0] * 4}};
    }
    case OfferKind::HfScale: {
      TERNJIT_TRY_VOID(need_float());
      return Shape{std::vector<std::int64_t>{st_->tensors[o.tensor].shape[0] * 4}};
    }
    case OfferKind::MasterScale: {
      TERNJIT_TRY_VOID(need_float());
      if (st_) return Shape{std::vector<std::int64_t>{st_->tensors[o.tensor].shape[0]}};
      return Shape{std::vector<std::int64_t>{static_cast<std::int64_t>(gguf_->tensors[o.tensor].dims[1])}};
    }
  }
  TERNJIT_UNREACHABLE("shape_for: offer kind");
}

Result<ir::StoredTensor> WeightFile::load(const WeightOffer& o, ElemKind declared, std::vector<std::int64_t> shape,
                                          const std::string& what) const {
  ir::Type as{declared, {}, WeightFormat::Plain};
  for (std::int64_t e : shape) as.shape.push_back(ir::Dim::fixed(e));
  TERNJIT_TRY(auto expect, shape_for(o, as, what));
  const std::string from = what + ": tensor " + quoted(o.origin) + " of " + display_name_;
  if (expect && *expect != shape)
    return fail(from + " has shape " + ir::index_str(*expect) + ", not " + ir::index_str(shape));
  const bool ternary = declared == ElemKind::T2;
  auto wrap = [&](Result<ir::StoredTensor> r) -> Result<ir::StoredTensor> {
    if (!r.ok()) return fail(from + ": " + r.error().message);
    return r;
  };
  switch (o.kind) {
    case OfferKind::Safetensors: {
      const StTensor& t = st_->tensors[o.tensor];
      if (ternary && is_master_source(t)) return wrap(ternarize_master(master_rows(st_, gguf_, o.tensor)));
      WeightFormat format = WeightFormat::Plain;
      if (ternary) {
        if (auto f = st_->metadata.find(t.name + ".format"); f != st_->metadata.end()) {
          auto parsed = parse_weight_format(f->second);
          if (!parsed) return fail(from + ": unknown ternary format " + quoted(f->second) + " in metadata");
          format = *parsed;
        }
        if (format != WeightFormat::Plain && t.kind != ElemKind::U8)
          return fail(from + ": packed ternary data must be U8, got " + t.dtype);
        if (format == WeightFormat::Plain && t.kind != ElemKind::I8)
          return fail(from + " is ternary: it needs I8 values in {-1, 0, 1}, U8 bytes with a " + quoted(t.name + ".format") +
                      " metadata entry, a float master weight, or a Hugging Face packed weight; got " + t.dtype);
      } else if (is_float(declared) ? !is_float(t.kind) : t.kind != declared) {
        return fail(from + " is " + t.dtype + " but the parameter is " + std::string(elem_name(declared)));
      }
      return wrap(store_weight(declared, t.kind, format, std::move(shape), t.bytes));
    }
    case OfferKind::GgufFloat: {
      const GgufTensor& t = gguf_->tensors[o.tensor];
      TERNJIT_TRY(GgufDims d, gguf_dims(t, from));
      if (ternary) {
        if (t.dims.size() != 2) return fail(from + " is a float vector; a ternary parameter needs a matrix");
        return wrap(ternarize_master(master_rows(st_, gguf_, o.tensor)));
      }
      if (!is_float(declared))
        return fail(from + " is " + std::string(gguf_type_name(t.type)) + " but the parameter is " +
                    std::string(elem_name(declared)));
      return wrap(gguf_float(t, d, declared, gguf_row_order(t, as)));
    }
    case OfferKind::GgufTernary: {
      const GgufTensor& t = gguf_->tensors[o.tensor];
      TERNJIT_TRY(GgufDims d, gguf_dims(t, from));
      auto r = gguf_ternary_transposed(t, d, from);  // `from` names the tensor and the file
      // The blocks now live as tern2 codes: the file's pages of them need not stay resident
      // (issue 14: 0.52 GB of the 2B4T model). Its scales' offer reads them again, then drops them too.
      if (r.ok()) release_mapped_pages(t.bytes.span());
      return r;
    }
    case OfferKind::GgufScale: {
      const GgufTensor& t = gguf_->tensors[o.tensor];
      TERNJIT_TRY(GgufDims d, gguf_dims(t, from));
      const std::size_t g = d.k / kQK;
      auto scale = [&](std::size_t b) -> Result<float> {
        auto v = block_scale(t, b);
        if (!v.ok()) return fail(from + ": " + v.error().message);
        return v;
      };
      std::vector<float> values;
      if (shape.size() == 1) {
        for (std::size_t n = 0; n < d.n; ++n) {
          TERNJIT_TRY(const float v, scale(n * g));
          values.push_back(v);
        }
      } else {
        values.resize(g * d.n);
        for (std::size_t n = 0; n < (g == 0 ? 0 : d.n); ++n)
          for (std::size_t b = 0; b < g; ++b) {
            TERNJIT_TRY(values[b * d.n + n], scale(n * g + b));
          }
      }
      release_mapped_pages(t.bytes.span());  // read once (above): as the GgufTernary offer
      return encode_floats(declared, std::move(shape), values);
    }
    case OfferKind::HfPacked: {
      // transformers' pack_weights: row n of the [N, K] weight is byte row n % R, bits
      // 2 (n / R), code = value + 1 (unpack_weights). tern2 has the same code.
      const StTensor& t = st_->tensors[o.tensor];
      const auto r_rows = static_cast<std::size_t>(t.shape[0]);
      const auto k = static_cast<std::size_t>(t.shape[1]);
      Tern2Out out(k, 4 * r_rows);
      for (std::size_t plane = 0; plane < (k == 0 ? 0 : 4); ++plane) {
        for (std::size_t r = 0; r < r_rows; ++r) {
          const std::uint8_t* src = t.bytes.data() + r * k;
          for (std::size_t i = 0; i < k; ++i) {
            const auto code = static_cast<std::uint8_t>((src[i] >> (2 * plane)) & 3);
            if (code == 3)
              return fail(from + ": packed byte [" + std::to_string(r) + ", " + std::to_string(i) + "] bits " +
                          std::to_string(2 * plane) + "-" + std::to_string(2 * plane + 1) + " (row " +
                          std::to_string(plane * r_rows + r) + ") hold code 3, not ternary");
            out.set(i, plane * r_rows + r, code);
          }
        }
      }
      return wrap(out.finish(std::move(shape)));
    }
    case OfferKind::HfScale: {
      const StTensor& s = st_->tensors[o.sibling];
      TERNJIT_TRY(std::vector<float> ws, to_f32(s));
      // BitLinear computes y / weight_scale: the multiplier is its reciprocal, which must be
      // finite as bound too. A subnormal scale (1e-39, bf16 0x0001) is finite and non-zero,
      // yet its reciprocal overflows: every output would be +-inf.
      const float multiplier = 1.0f / ws[0];
      if (!std::isfinite(ws[0]) || ws[0] == 0.0f || !std::isfinite(ir::round_to_kind(multiplier, declared)))
        return fail(from + " is " + fmt_float(ws[0]) + ": a weight_scale must be finite and non-zero, with a finite "
                    "reciprocal as " + std::string(elem_name(declared)) + " (BitLinear divides by it)");
      const std::vector<float> values(static_cast<std::size_t>(shape[0]), multiplier);
      return encode_floats(declared, std::move(shape), values);
    }
    case OfferKind::MasterScale: {
      const FloatRows rows = master_rows(st_, gguf_, o.tensor);
      auto scale = master_scale(rows);
      if (!scale.ok()) return fail(from + ": " + scale.error().message);
      // Finite as the parameter's kind too (an f16 scale overflows past 65504).
      if (!std::isfinite(ir::round_to_kind(*scale, declared)))
        return fail(from + ": its absmean scale " + fmt_float(*scale) + " is not finite as " +
                    std::string(elem_name(declared)));
      const std::vector<float> values(rows.n, *scale);
      return encode_floats(declared, std::move(shape), values);
    }
  }
  TERNJIT_UNREACHABLE("load: offer kind");
}

Result<void> WeightFile::check_scales(const std::set<std::string>& ternary, const std::set<std::string>& bound) const {
  for (const WeightOffer& o : offers_) {
    if (o.kind == OfferKind::MasterScale && bound.count(o.name)) {
      TERNJIT_TRY(const WeightOffer* chosen, find(o.name));
      if (chosen == &o && !ternary.count(o.name.substr(0, o.name.size() - 6)))
        return fail(display_name_ + ": " + quoted(o.name) + " would be the absmean scale of float tensor " + quoted(o.origin) +
                    ", but that tensor binds no ternary parameter");
    }
    if (!ternary.count(o.name)) continue;
    bool master = false;
    if (o.kind == OfferKind::Safetensors) master = is_master_source(st_->tensors[o.tensor]);
    if (o.kind == OfferKind::GgufFloat) master = is_master_source(gguf_->tensors[o.tensor]);
    const bool scaled = master || o.kind == OfferKind::GgufTernary || o.kind == OfferKind::HfPacked;
    if (!scaled) continue;
    const std::string scale = o.name + "_scale";
    TERNJIT_TRY(const WeightOffer* s, find(scale));
    if (master && s != nullptr && s->kind != OfferKind::MasterScale) {
      return fail(display_name_ + ": float tensor " + quoted(o.origin) + " is ternarized (absmean) for a ternary parameter, "
                  "whose scale is " + quoted(scale) + ", but the file also holds a tensor " + quoted(s->origin) +
                  " by that name: bind a ternary tensor instead, or rename one with a name map rule");
    }
    if (bound.count(scale)) continue;
    // Unbound: fine only when every scale is exactly 1.
    bool unit = true;
    std::string what;
    if (o.kind == OfferKind::GgufTernary) {
      const GgufTensor& t = gguf_->tensors[o.tensor];
      const std::size_t blocks = static_cast<std::size_t>(t.elem_count() / kQK);
      for (std::size_t b = 0; b < blocks && unit; ++b) {
        TERNJIT_TRY(const float d, block_scale(t, b));
        unit = d == 1.0f;
      }
      what = std::string(gguf_type_name(t.type)) + " tensor " + quoted(o.origin) + " has block scales";
    } else if (o.kind == OfferKind::HfPacked) {
      TERNJIT_TRY(std::vector<float> ws, to_f32(st_->tensors[o.sibling]));
      unit = ws[0] == 1.0f;
      what = "Hugging Face packed tensor " + quoted(o.origin) + " has a weight_scale";
    } else {
      what = "float tensor " + quoted(o.origin) + " ternarized with absmean has a scale";
      auto scale = master_scale(master_rows(st_, gguf_, o.tensor));
      if (!scale.ok()) return fail(display_name_ + ": float tensor " + quoted(o.origin) + ": " + scale.error().message);
      unit = *scale == 1.0f;
    }
    if (!unit) {
      return fail(display_name_ + ": " + what + " other than 1, and no parameter " + quoted(scale) +
                  " takes them: declare it (a scale is never dropped)");
    }
  }
  return success();
}

}  // namespace ternjit::formats
