// SPDX-License-Identifier: Apache-2.0
// ternary.h - the packed ternary weight formats (tern2, tern2-sm, tern1.6, bitplane): pack, unpack, store.
//
// Layouts (formats/README.md); element i of n, values in {-1, 0, +1}:
//   tern2     2 bits per value, code = value + 1 (-1 -> 00, 0 -> 01, +1 -> 10, 11 invalid),
//             element i in bits [2*(i%4), 2*(i%4)+1] of byte i/4. Padding fields of the
//             last byte are written as 01 (value 0) and ignored on unpack. This is also
//             how ir::StoredTensor keeps t2 values, so tern2 data is stored as is.
//   tern2-sm  the predecessor's sign-magnitude code 0 -> 00, +1 -> 01, -1 -> 10, 11 invalid;
//             same placement; padding written as 00 and ignored on unpack.
//   tern1.6   base 3, 5 values per byte: byte b = sum_{j=0..4} (v[5b+j] + 1) * 3^j (least
//             significant trit first). A byte > 242 is invalid. Padding trits are written
//             as value 0 (trit 1) and ignored on unpack (the byte must still be <= 242).
//   bitplane  groups of 64 elements, 16 bytes per group: the positive mask then the
//             negative mask, each a little-endian uint64; element i is bit i%64 of group
//             i/64. Both bits set is invalid. Padding bits are written as 0 and ignored
//             on unpack.
// The formats are the packed WeightFormats of include/ternjit/types.h, which also spells
// them (weight_format_name); WeightFormat::Plain is not a packed format.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "ir/stored_tensor.h"
#include "ternjit/result.h"
#include "ternjit/types.h"

namespace ternjit::formats {

/// The packed formats (every WeightFormat but Plain), in declaration order.
inline constexpr WeightFormat kPackedFormats[] = {WeightFormat::Tern2, WeightFormat::Tern2SM, WeightFormat::Tern16,
                                                  WeightFormat::Bitplane};

/// Bytes needed to store n values in a packed `format` (tern2/tern2-sm: ceil(n/4);
/// tern1.6: ceil(n/5); bitplane: 16 * ceil(n/64)). Zero for n == 0.
/// Precondition: format != Plain.
std::size_t packed_size(WeightFormat format, std::size_t n);

/// Packs `values` into `format`; the result has exactly packed_size(format, values.size())
/// bytes. Errors: InvalidInput from ir::check_ternary when a value is not in {-1, 0, 1};
/// InvalidArgument for WeightFormat::Plain.
Result<std::vector<std::uint8_t>> pack_ternary(WeightFormat format, std::span<const std::int8_t> values);

/// Unpacks n values from `bytes`, the exact inverse of pack_ternary. Errors (InvalidInput):
/// bytes.size() != packed_size(format, n) ("tern2 data for 10 values needs 3 bytes, got 2"),
/// or an invalid code, naming the element index and byte ("tern2 element 7 (byte 1, bits
/// 6-7) has code 0b11, expected 0b00, 0b01 or 0b10"). Codes in padding are ignored.
/// InvalidArgument for WeightFormat::Plain.
Result<std::vector<std::int8_t>> unpack_ternary(WeightFormat format, std::span<const std::uint8_t> bytes,
                                                std::size_t n);

/// A t2 StoredTensor of `shape` from data packed in `format`. tern2 data is kept as is
/// (shared, not copied, when `bytes` is owned); the other formats are transcoded to tern2
/// a block at a time, never through a full unpacked copy. Errors: as unpack_ternary (the
/// byte count must be exactly packed_size(format, numel(shape))), InvalidInput for a
/// negative or too large shape.
Result<ir::StoredTensor> store_packed(WeightFormat format, std::vector<std::int64_t> shape,
                                      const ir::SharedBytes& bytes);

}  // namespace ternjit::formats
