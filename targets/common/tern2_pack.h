// SPDX-License-Identifier: Apache-2.0
// tern2_pack.h - the CPU targets' shared steps for packing ternary weights into panels.
//
// The x86 i8 kernels and the llvm target's packed 2-bit panels interleave the same way:
// one byte holds the codes (value + 1) of four columns L apart of one weight row, and
// four consecutive rows sit in four consecutive bytes (the operand vpdpbusd / sdot read
// per 32-bit lane). Both start from the bound tern2 bytes (2-bit fields, code = w + 1,
// field 0 of a byte first) without widening them to one value per byte first.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ternjit::targets {

/// The codes (the raw 2-bit fields: 0, 1, 2, or 3 where the stored field is not a
/// ternary code) of the n weights from flat index i0 of tern2 bytes `codes`, one per
/// byte into out[0, n): up to 3 fields one by one until a byte starts, then 64 codes at
/// a time from 16 bytes (SSE2 where the build has it), then a table lookup a byte at a
/// time.
void tern2_fields(const std::uint8_t* codes, std::size_t i0, std::size_t n, std::uint8_t* out);

/// The index (0-based, from i0) of the first of those n weights whose stored field is 3,
/// n when every field is a ternary code. Checks the stored bytes 8 at a time.
std::size_t tern2_first_invalid(const std::uint8_t* codes, std::size_t i0, std::size_t n);

/// One packed group: out[4 j + r] = c[j] | c[L + j] << 2 | c[2L + j] << 4 | c[3L + j] << 6
/// with c = codes + r * stride (r < 4, j < L) and every code <= 3: the codes of weight
/// row r at columns j, L + j, 2L + j, 3L + j in one byte, the four rows in consecutive
/// bytes. 4 L bytes written.
void interleave_codes4(const std::uint8_t* codes, std::ptrdiff_t stride, int L, std::uint8_t* out);

/// The columns [0, result) of a tern2 matrix with rows of N weights whose groups (4 L
/// columns each) interleave_tern2_group builds: N rounded down to whole groups when every
/// row starts on a byte (N % 4 == 0) and this host has the direct path for L (L = 8 or 16
/// on an x86 host with SSSE3: every x86 target host, AVX2 implies it); else 0.
std::size_t tern2_direct_columns(std::size_t N, int L);

/// interleave_codes4's bytes for one group straight from tern2 bytes, without the codes
/// in between: weight rows k0 .. k0 + 3 of the matrix `codes` (rows of N weights),
/// columns c0 .. c0 + 4 L, with c0 + 4 L <= tern2_direct_columns(N, L) and c0 a multiple
/// of 4 L (every field a code <= 2, or the caller's check found the 3). Per row a byte
/// shuffle gathers, for each 4 output bytes, the 4 source bytes L / 4 apart, and a 4 x 4
/// transpose of their 2-bit fields (two mask-and-shift swaps in each 32-bit lane) gives
/// the row's L bytes; then the 4-row byte transpose.
void interleave_tern2_group(const std::uint8_t* codes, std::size_t N, std::size_t k0, std::size_t c0, int L,
                            std::uint8_t* out);

/// One packed group of the 1.6-bit (base3) panels: out[4 j + r] = sum over f < 5 of
/// 3^f * c[f L + j] with c = codes + r * stride (r < 4, j < L) and every code <= 2 (the
/// byte is then <= 242): five codes of weight row r, columns L apart, in one base-3
/// byte, the four rows in consecutive bytes. 4 L bytes written.
void interleave_base3_codes4(const std::uint8_t* codes, std::ptrdiff_t stride, int L, std::uint8_t* out);

}  // namespace ternjit::targets
