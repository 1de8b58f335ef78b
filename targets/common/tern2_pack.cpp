// SPDX-License-Identifier: Apache-2.0
// tern2_pack.cpp - tern2 fields, their check and the 4-row interleave (tern2_pack.h).
#include "targets/common/tern2_pack.h"

#include <array>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <tmmintrin.h>
#endif

namespace ternjit::targets {
namespace {

// Byte -> its four fields as four bytes (little-endian uint32).
constexpr std::array<std::uint32_t, 256> kFields = [] {
  std::array<std::uint32_t, 256> t{};
  for (unsigned b = 0; b < 256; ++b)
    t[b] = (b & 3u) | ((b >> 2) & 3u) << 8 | ((b >> 4) & 3u) << 16 | ((b >> 6) & 3u) << 24;
  return t;
}();

unsigned field_at(const std::uint8_t* codes, std::size_t i) { return (codes[i / 4] >> (2 * (i % 4))) & 3u; }

#if defined(__SSE2__)
// out[4 j + r] = byte j of v[r] for j < L (8 or 16), r < 4: the 4 x L byte transpose.
inline void store_rows4(const __m128i* v, int L, std::uint8_t* out) {
  const __m128i a_lo = _mm_unpacklo_epi8(v[0], v[1]), b_lo = _mm_unpacklo_epi8(v[2], v[3]);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm_unpacklo_epi16(a_lo, b_lo));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 16), _mm_unpackhi_epi16(a_lo, b_lo));
  if (L == 16) {
    const __m128i a_hi = _mm_unpackhi_epi8(v[0], v[1]), b_hi = _mm_unpackhi_epi8(v[2], v[3]);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 32), _mm_unpacklo_epi16(a_hi, b_hi));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 48), _mm_unpackhi_epi16(a_hi, b_hi));
  }
}
#endif

}  // namespace

void tern2_fields(const std::uint8_t* codes, std::size_t i0, std::size_t n, std::uint8_t* out) {
  std::size_t c = 0;
  for (; c < n && (i0 + c) % 4 != 0; ++c) out[c] = static_cast<std::uint8_t>(field_at(codes, i0 + c));
  const std::uint8_t* src = codes + (i0 + c) / 4;  // byte-aligned from here
#if defined(__SSE2__)
  const __m128i m3 = _mm_set1_epi8(3);
  for (; c + 64 <= n; c += 64, src += 16) {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src));
    // Field f of every byte (16-bit shifts; the mask drops what crossed a byte), then
    // the four field vectors interleaved back into column order.
    const __m128i f0 = _mm_and_si128(b, m3), f1 = _mm_and_si128(_mm_srli_epi16(b, 2), m3);
    const __m128i f2 = _mm_and_si128(_mm_srli_epi16(b, 4), m3), f3 = _mm_and_si128(_mm_srli_epi16(b, 6), m3);
    const __m128i lo01 = _mm_unpacklo_epi8(f0, f1), lo23 = _mm_unpacklo_epi8(f2, f3);
    const __m128i hi01 = _mm_unpackhi_epi8(f0, f1), hi23 = _mm_unpackhi_epi8(f2, f3);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + c), _mm_unpacklo_epi16(lo01, lo23));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + c + 16), _mm_unpackhi_epi16(lo01, lo23));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + c + 32), _mm_unpacklo_epi16(hi01, hi23));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + c + 48), _mm_unpackhi_epi16(hi01, hi23));
  }
#endif
  for (; c + 4 <= n; c += 4, ++src) std::memcpy(out + c, &kFields[*src], 4);
  for (; c < n; ++c) out[c] = static_cast<std::uint8_t>(field_at(codes, i0 + c));
}

std::size_t tern2_first_invalid(const std::uint8_t* codes, std::size_t i0, std::size_t n) {
  std::size_t c = 0;
  for (; c < n && (i0 + c) % 4 != 0; ++c)
    if (field_at(codes, i0 + c) == 3) return c;
  const std::uint8_t* src = codes + (i0 + c) / 4;
  // A field is 3 exactly where both its bits are set: w & (w >> 1) on the low bit of
  // every field (0x55 per byte).
  constexpr std::uint64_t kLow = 0x5555555555555555ull;
  for (; c + 32 <= n; c += 32, src += 8) {
    std::uint64_t w;
    std::memcpy(&w, src, 8);
    if ((w & (w >> 1) & kLow) != 0) break;  // the per-field loop below finds which
  }
  for (; c < n; ++c)
    if (field_at(codes, i0 + c) == 3) return c;
  return n;
}

void interleave_codes4(const std::uint8_t* codes, std::ptrdiff_t stride, int L, std::uint8_t* out) {
#if defined(__SSE2__)
  if (L == 8 || L == 16) {
    // Each row's L bytes (codes <= 3, so a 16-bit shift by <= 6 never carries into the
    // next byte), then a 4 x L byte transpose with SSE2 unpacks.
    auto load = [L](const std::uint8_t* p) {
      return L == 16 ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(p))
                     : _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
    };
    __m128i v[4];
    for (int r = 0; r < 4; ++r) {
      const std::uint8_t* c = codes + r * stride;
      v[r] = _mm_or_si128(_mm_or_si128(load(c), _mm_slli_epi16(load(c + L), 2)),
                          _mm_or_si128(_mm_slli_epi16(load(c + 2 * L), 4), _mm_slli_epi16(load(c + 3 * L), 6)));
    }
    store_rows4(v, L, out);
    return;
  }
#endif
  for (int r = 0; r < 4; ++r) {
    const std::uint8_t* c = codes + r * stride;
    for (int j = 0; j < L; ++j)
      out[4 * j + r] = static_cast<std::uint8_t>(c[j] | c[L + j] << 2 | c[2 * L + j] << 4 | c[3 * L + j] << 6);
  }
}

#if defined(__x86_64__) || defined(__i386__)
namespace {

// Row r's L panel bytes (byte j: the codes of columns j, L + j, 2L + j, 3L + j in fields
// 0..3) from its L tern2 bytes. Source byte q + f L/4 holds the codes of columns
// 4 q + f L + i (field i), so after gathering bytes (q, q + L/4, q + L/2, q + 3L/4) into
// 32-bit lane q (byte f), element (f, i) sits at bit 8 f + 2 i and belongs at 8 i + 2 f:
// a 4 x 4 transpose of 2-bit fields, the off-diagonal 2 x 2 blocks swapped (distance 12
// bits), then the off-diagonal fields of each block (distance 6).
__attribute__((target("ssse3"))) __m128i tern2_row_bytes(const std::uint8_t* src, int L) {
  const __m128i gather = L == 16 ? _mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15)
                                 : _mm_setr_epi8(0, 2, 4, 6, 1, 3, 5, 7, -1, -1, -1, -1, -1, -1, -1, -1);
  __m128i x = L == 16 ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(src))
                      : _mm_loadl_epi64(reinterpret_cast<const __m128i*>(src));
  x = _mm_shuffle_epi8(x, gather);
  __m128i t = _mm_and_si128(_mm_xor_si128(x, _mm_srli_epi32(x, 12)), _mm_set1_epi32(0x0000F0F0));
  x = _mm_xor_si128(x, _mm_xor_si128(t, _mm_slli_epi32(t, 12)));
  t = _mm_and_si128(_mm_xor_si128(x, _mm_srli_epi32(x, 6)), _mm_set1_epi32(0x00CC00CC));
  return _mm_xor_si128(x, _mm_xor_si128(t, _mm_slli_epi32(t, 6)));
}

}  // namespace

std::size_t tern2_direct_columns(std::size_t N, int L) {
  static const bool ssse3 = __builtin_cpu_supports("ssse3");
  if (!ssse3 || (L != 8 && L != 16) || N % 4 != 0) return 0;
  const auto G = static_cast<std::size_t>(4 * L);
  return N / G * G;
}

__attribute__((target("ssse3"))) void interleave_tern2_group(const std::uint8_t* codes, std::size_t N,
                                                              std::size_t k0, std::size_t c0, int L,
                                                              std::uint8_t* out) {
  __m128i v[4];
  for (std::size_t r = 0; r < 4; ++r) v[r] = tern2_row_bytes(codes + ((k0 + r) * N + c0) / 4, L);
  store_rows4(v, L, out);
}
#else
std::size_t tern2_direct_columns(std::size_t, int) { return 0; }
void interleave_tern2_group(const std::uint8_t*, std::size_t, std::size_t, std::size_t, int, std::uint8_t*) {}
#endif

void interleave_base3_codes4(const std::uint8_t* codes, std::ptrdiff_t stride, int L, std::uint8_t* out) {
#if defined(__SSE2__)
  if (L == 16) {
    // Horner from the fifth code down, x 3 as three byte adds: every partial sum stays
    // <= 242, so the byte adds never wrap. Then the 4 x 16 byte transpose.
    __m128i v[4];
    for (int r = 0; r < 4; ++r) {
      const std::uint8_t* c = codes + r * stride;
      __m128i acc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(c + 4 * L));
      for (int f = 3; f >= 0; --f)
        acc = _mm_add_epi8(_mm_add_epi8(acc, _mm_add_epi8(acc, acc)),
                           _mm_loadu_si128(reinterpret_cast<const __m128i*>(c + f * L)));
      v[r] = acc;
    }
    store_rows4(v, 16, out);
    return;
  }
#endif
  for (int r = 0; r < 4; ++r) {
    const std::uint8_t* c = codes + r * stride;
    for (int j = 0; j < L; ++j) {
      unsigned byte = 0;
      for (int f = 4; f >= 0; --f) byte = 3 * byte + c[f * L + j];
      out[4 * j + r] = static_cast<std::uint8_t>(byte);
    }
  }
}

}  // namespace ternjit::targets
