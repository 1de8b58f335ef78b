// SPDX-License-Identifier: Apache-2.0
// ternary.h - the ternary interchange formats (tern2, tern2-sm, tern1.6, bitplane): pack and unpack.
//
// Layouts (SPEC section 4); element i of n, values in {-1, 0, +1}:
//   tern2     2 bits per value, code = value + 1 (-1 -> 00, 0 -> 01, +1 -> 10, 11 invalid),
//             element i in bits [2*(i%4), 2*(i%4)+1] of byte i/4. Padding fields of the
//             last byte are written as 01 (value 0) and ignored on unpack.
//   tern2-sm  the predecessor's sign-magnitude code 0 -> 00, +1 -> 01, -1 -> 10, 11 invalid;
//             same placement; padding written as 00 and ignored on unpack.
//   tern1.6   base 3, 5 values per byte: byte b = sum_{j=0..4} (v[5b+j] + 1) * 3^j (least
//             significant trit first). A byte > 242 is invalid. Padding trits are written
//             as value 0 (trit 1) and ignored on unpack (the byte must still be <= 242).
//   bitplane  groups of 64 elements, 16 bytes per group: the positive mask then the
//             negative mask, each a little-endian uint64; element i is bit i%64 of group
//             i/64. Both bits set is invalid. Padding bits are written as 0 and ignored
//             on unpack.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "ternjit/result.h"

namespace ternjit::ir {

/// A ternary storage format for import/export (target layouts are the layout pass's job).
enum class TernaryFormat : std::uint8_t { Tern2, Tern2SM, Tern16, Bitplane };

/// All ternary formats, in declaration order.
inline constexpr TernaryFormat kAllTernaryFormats[] = {TernaryFormat::Tern2, TernaryFormat::Tern2SM,
                                                       TernaryFormat::Tern16, TernaryFormat::Bitplane};

/// The spelling of a format: "tern2", "tern2-sm", "tern1.6" or "bitplane".
std::string_view format_name(TernaryFormat format);

/// Parses a spelling produced by format_name (exact, case-sensitive); nullopt if unknown.
std::optional<TernaryFormat> parse_ternary_format(std::string_view name);

/// Bytes needed to store n values in `format` (tern2/tern2-sm: ceil(n/4); tern1.6:
/// ceil(n/5); bitplane: 16 * ceil(n/64)). Zero for n == 0.
std::size_t packed_size(TernaryFormat format, std::size_t n);

/// Succeeds when every value is -1, 0 or 1. Otherwise an InvalidInput error naming the
/// first offending index: "value at index 5 is 3, expected -1, 0 or 1".
Result<void> check_ternary(std::span<const std::int8_t> values);

/// Packs `values` into `format`; the result has exactly packed_size(format, values.size())
/// bytes. Errors: InvalidInput from check_ternary when a value is not in {-1, 0, 1}.
Result<std::vector<std::uint8_t>> pack_ternary(TernaryFormat format, std::span<const std::int8_t> values);

/// Unpacks n values from `bytes`, the exact inverse of pack_ternary. Errors (InvalidInput):
/// bytes.size() != packed_size(format, n) ("tern2 data for 10 values needs 3 bytes, got 2"),
/// or an invalid code, naming the element index and byte ("tern2 element 7 (byte 1, bits
/// 6-7) has code 0b11, expected 0b00, 0b01 or 0b10"). Codes in padding are ignored.
Result<std::vector<std::int8_t>> unpack_ternary(TernaryFormat format, std::span<const std::uint8_t> bytes,
                                                std::size_t n);

}  // namespace ternjit::ir
