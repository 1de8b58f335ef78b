// SPDX-License-Identifier: Apache-2.0
// ternary.cpp - pack, unpack and store the packed ternary formats described in ternary.h.
#include "formats/ternary.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "ir/ir.h"

namespace ternjit::formats {

namespace {

constexpr std::size_t kBitplaneGroup = 64;
constexpr std::size_t kBitplaneGroupBytes = 16;
constexpr unsigned kTern16MaxByte = 242;  // 3^5 - 1
// Values transcoded at a time by store_packed: a multiple of 4, 5 and 64 (whole bytes of
// every format, whole bitplane groups), small enough to stay in cache.
constexpr std::size_t kBlockValues = 320 * 64;

Error not_packed() { return make_error(ErrorCode::InvalidArgument, "'plain' is not a packed ternary format"); }

std::size_t ceil_div(std::size_t n, std::size_t d) { return n / d + (n % d != 0 ? 1 : 0); }

// The 2-bit code of a value and back, for the two 2-bit formats. encode2's value is
// known to be ternary; decode2 returns -2 for the invalid code 0b11.
std::uint8_t encode2(WeightFormat format, std::int8_t v) {
  if (format == WeightFormat::Tern2) return static_cast<std::uint8_t>(v + 1);
  return v == 0 ? 0 : (v > 0 ? 1 : 2);
}

int decode2(WeightFormat format, unsigned code) {
  if (code == 3) return -2;
  if (format == WeightFormat::Tern2) return static_cast<int>(code) - 1;
  return code == 0 ? 0 : (code == 1 ? 1 : -1);
}

std::vector<std::uint8_t> pack2(WeightFormat format, std::span<const std::int8_t> values) {
  // Start every byte as four padding fields, then overwrite the real ones.
  const std::uint8_t padding = format == WeightFormat::Tern2 ? 0x55 : 0x00;
  std::vector<std::uint8_t> out(ceil_div(values.size(), 4), padding);
  for (std::size_t i = 0; i < values.size(); ++i) {
    const unsigned shift = 2 * (i % 4);
    auto& byte = out[i / 4];
    byte = static_cast<std::uint8_t>((byte & ~(3u << shift)) | (encode2(format, values[i]) << shift));
  }
  return out;
}

std::vector<std::uint8_t> pack16(std::span<const std::int8_t> values) {
  std::vector<std::uint8_t> out(ceil_div(values.size(), 5));
  for (std::size_t b = 0; b < out.size(); ++b) {
    unsigned byte = 0;
    // Horner from the most significant trit down; missing trailing elements are
    // padding with value 0, i.e. trit 1.
    for (std::size_t j = 5; j-- > 0;) {
      const std::size_t i = 5 * b + j;
      const unsigned trit = i < values.size() ? static_cast<unsigned>(values[i] + 1) : 1u;
      byte = byte * 3 + trit;
    }
    out[b] = static_cast<std::uint8_t>(byte);
  }
  return out;
}

void store_le64(std::uint8_t* dst, std::uint64_t v) {
  for (int k = 0; k < 8; ++k) dst[k] = static_cast<std::uint8_t>(v >> (8 * k));
}

std::uint64_t load_le64(const std::uint8_t* src) {
  std::uint64_t v = 0;
  for (int k = 0; k < 8; ++k) v |= static_cast<std::uint64_t>(src[k]) << (8 * k);
  return v;
}

std::vector<std::uint8_t> pack_bitplane(std::span<const std::int8_t> values) {
  const std::size_t groups = ceil_div(values.size(), kBitplaneGroup);
  std::vector<std::uint8_t> out(groups * kBitplaneGroupBytes);
  for (std::size_t g = 0; g < groups; ++g) {
    std::uint64_t positive = 0;
    std::uint64_t negative = 0;
    for (std::size_t bit = 0; bit < kBitplaneGroup; ++bit) {
      const std::size_t i = g * kBitplaneGroup + bit;
      if (i >= values.size()) break;
      if (values[i] > 0) positive |= std::uint64_t{1} << bit;
      if (values[i] < 0) negative |= std::uint64_t{1} << bit;
    }
    store_le64(&out[g * kBitplaneGroupBytes], positive);
    store_le64(&out[g * kBitplaneGroupBytes + 8], negative);
  }
  return out;
}

// The decoders fill out[j] with element first + j of n. `first` is a multiple of
// kBlockValues, so a decoder starts on a byte (tern2, tern1.6) or group (bitplane)
// boundary and checks every byte it reads once. `bytes` holds packed_size(format, n).
Result<void> unpack2(WeightFormat format, std::span<const std::uint8_t> bytes, std::size_t first,
                     std::span<std::int8_t> out) {
  for (std::size_t j = 0; j < out.size(); ++j) {
    const std::size_t i = first + j;
    const unsigned shift = 2 * (i % 4);
    const unsigned code = (bytes[i / 4] >> shift) & 3u;
    const int v = decode2(format, code);
    if (v < -1) {
      return make_error(ErrorCode::InvalidInput,
                        std::string(weight_format_name(format)) + " element " + std::to_string(i) + " (byte " +
                            std::to_string(i / 4) + ", bits " + std::to_string(shift) + "-" +
                            std::to_string(shift + 1) + ") has code 0b11, expected 0b00, 0b01 or 0b10");
    }
    out[j] = static_cast<std::int8_t>(v);
  }
  return success();
}

Result<void> unpack16(std::span<const std::uint8_t> bytes, std::size_t n, std::size_t first,
                      std::span<std::int8_t> out) {
  const std::size_t end = first + out.size();
  for (std::size_t b = first / 5; 5 * b < end; ++b) {
    unsigned byte = bytes[b];
    const std::size_t lo = 5 * b;
    if (byte > kTern16MaxByte) {
      const std::size_t last = std::min(lo + 4, n - 1);
      const std::string elements = lo == last ? "element " + std::to_string(lo)
                                              : "elements " + std::to_string(lo) + " to " + std::to_string(last);
      return make_error(ErrorCode::InvalidInput, "tern1.6 byte " + std::to_string(b) + " (" + elements + ") is " +
                                                     std::to_string(byte) + ", expected at most 242");
    }
    for (std::size_t j = 0; j < 5; ++j, byte /= 3) {
      if (lo + j < end) out[lo + j - first] = static_cast<std::int8_t>(static_cast<int>(byte % 3) - 1);
    }
  }
  return success();
}

Result<void> unpack_bitplane(std::span<const std::uint8_t> bytes, std::size_t first, std::span<std::int8_t> out) {
  const std::size_t end = first + out.size();
  for (std::size_t g = first / kBitplaneGroup; g * kBitplaneGroup < end; ++g) {
    const std::uint64_t positive = load_le64(&bytes[g * kBitplaneGroupBytes]);
    const std::uint64_t negative = load_le64(&bytes[g * kBitplaneGroupBytes + 8]);
    for (std::size_t bit = 0; bit < kBitplaneGroup; ++bit) {
      const std::size_t i = g * kBitplaneGroup + bit;
      if (i >= end) break;
      const bool pos = ((positive >> bit) & 1u) != 0;
      const bool neg = ((negative >> bit) & 1u) != 0;
      if (pos && neg) {
        const std::size_t pos_byte = g * kBitplaneGroupBytes + bit / 8;
        return make_error(ErrorCode::InvalidInput,
                          "bitplane element " + std::to_string(i) + " has both its positive bit (byte " +
                              std::to_string(pos_byte) + ") and its negative bit (byte " +
                              std::to_string(pos_byte + 8) + ") set, expected at most one");
      }
      out[i - first] = static_cast<std::int8_t>(pos ? 1 : (neg ? -1 : 0));
    }
  }
  return success();
}

// Decodes elements [first, first + out.size()) of n (first a multiple of kBlockValues).
Result<void> decode(WeightFormat format, std::span<const std::uint8_t> bytes, std::size_t n, std::size_t first,
                    std::span<std::int8_t> out) {
  switch (format) {
    case WeightFormat::Tern2:
    case WeightFormat::Tern2SM: return unpack2(format, bytes, first, out);
    case WeightFormat::Tern16: return unpack16(bytes, n, first, out);
    case WeightFormat::Bitplane: return unpack_bitplane(bytes, first, out);
    case WeightFormat::Plain: break;
  }
  return not_packed();
}

// The byte count check shared by unpack_ternary and store_packed.
Result<void> check_size(WeightFormat format, std::span<const std::uint8_t> bytes, std::size_t n) {
  const std::size_t need = packed_size(format, n);
  if (bytes.size() == need) return success();
  return make_error(ErrorCode::InvalidInput, std::string(weight_format_name(format)) + " data for " + std::to_string(n) +
                                                 (n == 1 ? " value" : " values") + " needs " + std::to_string(need) +
                                                 (need == 1 ? " byte" : " bytes") + ", got " +
                                                 std::to_string(bytes.size()));
}

}  // namespace

std::size_t packed_size(WeightFormat format, std::size_t n) {
  switch (format) {
    case WeightFormat::Tern2:
    case WeightFormat::Tern2SM: return ceil_div(n, 4);
    case WeightFormat::Tern16: return ceil_div(n, 5);
    case WeightFormat::Bitplane: return ceil_div(n, kBitplaneGroup) * kBitplaneGroupBytes;
    case WeightFormat::Plain: break;
  }
  TERNJIT_UNREACHABLE("packed_size of the plain format");
}

Result<std::vector<std::uint8_t>> pack_ternary(WeightFormat format, std::span<const std::int8_t> values) {
  TERNJIT_TRY_VOID(ir::check_ternary(values));
  switch (format) {
    case WeightFormat::Tern2:
    case WeightFormat::Tern2SM: return pack2(format, values);
    case WeightFormat::Tern16: return pack16(values);
    case WeightFormat::Bitplane: return pack_bitplane(values);
    case WeightFormat::Plain: break;
  }
  return not_packed();
}

Result<std::vector<std::int8_t>> unpack_ternary(WeightFormat format, std::span<const std::uint8_t> bytes,
                                                std::size_t n) {
  if (format == WeightFormat::Plain) return not_packed();
  TERNJIT_TRY_VOID(check_size(format, bytes, n));
  std::vector<std::int8_t> out(n);
  TERNJIT_TRY_VOID(decode(format, bytes, n, 0, out));
  return out;
}

Result<ir::StoredTensor> store_packed(WeightFormat format, std::vector<std::int64_t> shape,
                                      const ir::SharedBytes& bytes) {
  if (format == WeightFormat::Plain) return not_packed();
  const auto numel = ir::checked_numel(shape);
  if (!numel) return make_error(ErrorCode::InvalidInput, "shape " + ir::index_str(shape) + " is negative or too large");
  const auto n = static_cast<std::size_t>(*numel);
  TERNJIT_TRY_VOID(check_size(format, bytes.span(), n));
  if (format == WeightFormat::Tern2) return ir::StoredTensor::view(ElemKind::T2, std::move(shape), bytes);
  // Transcode a block at a time: a block of kBlockValues values is a whole number of
  // tern2 bytes, so its codes land at byte first / 4.
  std::vector<std::uint8_t> codes(ir::tern2_size(n));
  std::vector<std::int8_t> block(std::min(n, kBlockValues));
  for (std::size_t first = 0; first < n; first += kBlockValues) {
    const std::span<std::int8_t> values(block.data(), std::min(kBlockValues, n - first));
    TERNJIT_TRY_VOID(decode(format, bytes.span(), n, first, values));
    TERNJIT_TRY(std::vector<std::uint8_t> packed, ir::pack_tern2(values));
    std::memcpy(codes.data() + first / 4, packed.data(), packed.size());
  }
  return ir::StoredTensor::view(ElemKind::T2, std::move(shape), ir::SharedBytes::adopt(std::move(codes)));
}

}  // namespace ternjit::formats
