// SPDX-License-Identifier: Apache-2.0
// stored_tensor.h - StoredTensor, a bound weight kept in its own element type (t2 at 2 bits a value).
//
// A HostTensor spends a double on every element: right for the interpreter's working
// values, ruinous for weights (a 4096 x 14336 ternary layer is 14.7 MB at 2 bits and
// 470 MB as doubles). Parameter values are therefore stored at rest in their own
// encoding and converted where they are read: the interpreter's `param` materializes a
// HostTensor for one evaluation, a target packs its panels straight from the codes.
//
// Encodings (one per kind, so a StoredTensor needs no encoding field):
//   t2      tern2 codes: code = value + 1 (-1 -> 00, 0 -> 01, +1 -> 10; 11 is invalid),
//           element i in bits [2*(i%4), 2*(i%4)+1] of byte i/4 (row-major element
//           order); the padding fields of the last byte are ignored. (n + 3) / 4 bytes.
//   others  the little-endian elements HostTensor::from_bytes reads: f32/i32 4 bytes,
//           f16/bf16 2 bytes, i8/u8 1 byte, bool 1 byte (0 or 1).
// The bytes are shared (SharedBytes): a heap buffer or a region of a memory-mapped file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ir/tensor.h"
#include "ternjit/result.h"
#include "ternjit/types.h"

namespace ternjit::ir {

/// Read-only bytes and what keeps them alive. Copying shares the bytes. An owned value
/// holds its owner (a heap buffer, a file mapping); a borrowed one (borrow()) points
/// into memory its creator guarantees for as long as it is used, and keep() copies it
/// before it is stored.
class SharedBytes {
 public:
  /// No bytes.
  SharedBytes() = default;
  /// `bytes`, kept alive by `owner`. Precondition: `owner` owns the memory of `bytes`
  /// and never changes it.
  SharedBytes(std::shared_ptr<const void> owner, std::span<const std::uint8_t> bytes)
      : owner_(std::move(owner)), bytes_(bytes) {}
  /// Takes ownership of a buffer.
  static SharedBytes adopt(std::vector<std::uint8_t> bytes);
  /// A copy of `bytes` in a new buffer.
  static SharedBytes copy_of(std::span<const std::uint8_t> bytes);
  /// Borrows caller memory: no owner, nothing copied (see keep()).
  static SharedBytes borrow(std::span<const std::uint8_t> bytes) { return SharedBytes(nullptr, bytes); }

  /// This value when owned, else a copy of the borrowed bytes.
  [[nodiscard]] SharedBytes keep() const { return owned() ? *this : copy_of(bytes_); }
  /// Bytes [offset, offset + size) with the same owner. Precondition: in range.
  [[nodiscard]] SharedBytes slice(std::size_t offset, std::size_t size) const;
  /// True when an owner keeps the bytes alive.
  [[nodiscard]] bool owned() const { return owner_ != nullptr; }

  /// The bytes.
  [[nodiscard]] std::span<const std::uint8_t> span() const { return bytes_; }
  /// The first byte (may be null when empty).
  [[nodiscard]] const std::uint8_t* data() const { return bytes_.data(); }
  /// The byte count.
  [[nodiscard]] std::size_t size() const { return bytes_.size(); }
  /// True when there are no bytes.
  [[nodiscard]] bool empty() const { return bytes_.empty(); }

 private:
  std::shared_ptr<const void> owner_;
  std::span<const std::uint8_t> bytes_;
};

/// Bytes of `n` values in tern2 codes: ceil(n / 4).
constexpr std::size_t tern2_size(std::size_t n) { return n / 4 + (n % 4 != 0 ? 1 : 0); }

/// Value i (-1, 0 or 1) of tern2 `codes`. Precondition: i is in range and its code is
/// valid (a code 0b11 reads as 2).
inline int tern2_at(const std::uint8_t* codes, std::size_t i) {
  return static_cast<int>((codes[i / 4] >> (2 * (i % 4))) & 3u) - 1;
}

/// Succeeds when every value is -1, 0 or 1. Otherwise an InvalidInput error naming the
/// first offending index: "value at index 5 is 3, expected -1, 0 or 1".
Result<void> check_ternary(std::span<const std::int8_t> values);

/// Packs values in {-1, 0, 1} into tern2 codes (padding fields written as 01, value 0).
/// Errors: as check_ternary.
Result<std::vector<std::uint8_t>> pack_tern2(std::span<const std::int8_t> values);

/// Succeeds when the first `n` codes of `codes` (which holds tern2_size(n) bytes) are
/// valid. Errors (InvalidInput): "tern2 element 7 (byte 1, bits 6-7) has code 0b11,
/// expected 0b00, 0b01 or 0b10".
Result<void> check_tern2(std::span<const std::uint8_t> codes, std::size_t n);

/// A tensor at rest in its kind's encoding (file comment): kind, shape and shared
/// bytes. Invariant (established by every constructor): extents >= 0, the byte count
/// is exactly what the encoding needs for the shape, every t2 code is valid and every
/// bool byte is 0 or 1. Immutable; copies share the bytes.
class StoredTensor {
 public:
  /// Views `bytes` as a tensor of `kind` and `shape`, without copying (a borrowed
  /// `bytes` is copied first: SharedBytes::keep). Errors (InvalidInput): a negative
  /// extent, an element or byte count that overflows, a byte count other than the
  /// encoding needs ("t2[64, 16] needs 256 bytes of tern2 codes, got 10"), an invalid
  /// t2 code or bool byte (naming the element).
  static Result<StoredTensor> view(ElemKind kind, std::vector<std::int64_t> shape, SharedBytes bytes);
  /// Packs ternary values of `shape` (row-major). Errors (InvalidInput): a bad shape, a
  /// value count other than the shape's, a value outside {-1, 0, 1} ("t2 element [0, 5]
  /// (byte 5) is 2, expected -1, 0 or 1").
  static Result<StoredTensor> from_ternary(std::vector<std::int64_t> shape, std::span<const std::int8_t> values);
  /// Encodes a HostTensor. Precondition (aborts otherwise): validate(t) succeeds.
  static StoredTensor from_host(const HostTensor& t);
  /// A tensor of zeros. Precondition: extents >= 0.
  static StoredTensor zeros(ElemKind kind, std::vector<std::int64_t> shape);
  /// The values HostTensor::random(kind, shape, seed) has, drawn straight into the
  /// encoding (no temporary HostTensor). Precondition: extents >= 0.
  static StoredTensor random(ElemKind kind, std::vector<std::int64_t> shape, std::uint64_t seed);

  /// The element kind.
  [[nodiscard]] ElemKind kind() const { return kind_; }
  /// The row-major extents.
  [[nodiscard]] const std::vector<std::int64_t>& shape() const { return shape_; }
  /// The element count (1 for a scalar).
  [[nodiscard]] std::int64_t numel() const { return numel_; }
  /// The encoded bytes (t2: tern2 codes; others: little-endian elements).
  [[nodiscard]] const SharedBytes& bytes() const { return bytes_; }

  /// Element i as an exact value (HostTensor's convention). Precondition: i < numel().
  [[nodiscard]] double at(std::size_t i) const;
  /// Decodes elements [first, first + out.size()) of a t2 or i8 tensor as int8 (a row of a
  /// weight matrix). Precondition: kind is T2 or I8, the range is in bounds.
  void read_int8(std::size_t first, std::span<std::int8_t> out) const;
  /// The whole tensor as a HostTensor (8 bytes per element: one evaluation's worth).
  [[nodiscard]] HostTensor to_host() const;
  /// The HostTensor::to_bytes layout (t2 as one i8 byte per value): the raw bytes for
  /// every kind but t2, which is unpacked.
  [[nodiscard]] std::vector<std::uint8_t> to_bytes() const;
  /// The type as text: "t2[4096, 14336]".
  [[nodiscard]] std::string describe() const;

 private:
  StoredTensor(ElemKind kind, std::vector<std::int64_t> shape, std::int64_t numel, SharedBytes bytes)
      : kind_(kind), shape_(std::move(shape)), numel_(numel), bytes_(std::move(bytes)) {}

  ElemKind kind_ = ElemKind::F32;
  std::vector<std::int64_t> shape_;
  std::int64_t numel_ = 0;
  SharedBytes bytes_;
};

}  // namespace ternjit::ir
