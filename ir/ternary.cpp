// SPDX-License-Identifier: Apache-2.0
// ternary.cpp - pack and unpack the ternary interchange formats described in ternary.h.
#include "ir/ternary.h"

#include <algorithm>
#include <string>

namespace ternjit::ir {

namespace {

constexpr std::size_t kBitplaneGroup = 64;
constexpr std::size_t kBitplaneGroupBytes = 16;
constexpr unsigned kTern16MaxByte = 242;  // 3^5 - 1

std::size_t ceil_div(std::size_t n, std::size_t d) { return n / d + (n % d != 0 ? 1 : 0); }

// The 2-bit code of a value and back, for the two 2-bit formats. encode2's value is
// known to be ternary; decode2 returns -2 for the invalid code 0b11.
std::uint8_t encode2(TernaryFormat format, std::int8_t v) {
  if (format == TernaryFormat::Tern2) return static_cast<std::uint8_t>(v + 1);
  return v == 0 ? 0 : (v > 0 ? 1 : 2);
}

int decode2(TernaryFormat format, unsigned code) {
  if (code == 3) return -2;
  if (format == TernaryFormat::Tern2) return static_cast<int>(code) - 1;
  return code == 0 ? 0 : (code == 1 ? 1 : -1);
}

std::vector<std::uint8_t> pack2(TernaryFormat format, std::span<const std::int8_t> values) {
  // Start every byte as four padding fields, then overwrite the real ones.
  const std::uint8_t padding = format == TernaryFormat::Tern2 ? 0x55 : 0x00;
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

Result<std::vector<std::int8_t>> unpack2(TernaryFormat format, std::span<const std::uint8_t> bytes,
                                         std::size_t n) {
  std::vector<std::int8_t> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned shift = 2 * (i % 4);
    const unsigned code = (bytes[i / 4] >> shift) & 3u;
    const int v = decode2(format, code);
    if (v < -1) {
      return make_error(ErrorCode::InvalidInput,
                        std::string(format_name(format)) + " element " + std::to_string(i) + " (byte " +
                            std::to_string(i / 4) + ", bits " + std::to_string(shift) + "-" +
                            std::to_string(shift + 1) + ") has code 0b11, expected 0b00, 0b01 or 0b10");
    }
    out[i] = static_cast<std::int8_t>(v);
  }
  return out;
}

Result<std::vector<std::int8_t>> unpack16(std::span<const std::uint8_t> bytes, std::size_t n) {
  std::vector<std::int8_t> out(n);
  for (std::size_t b = 0; b < bytes.size(); ++b) {
    unsigned byte = bytes[b];
    const std::size_t first = 5 * b;
    if (byte > kTern16MaxByte) {
      const std::size_t last = std::min(first + 4, n - 1);
      const std::string elements = first == last ? "element " + std::to_string(first)
                                                 : "elements " + std::to_string(first) + " to " + std::to_string(last);
      return make_error(ErrorCode::InvalidInput, "tern1.6 byte " + std::to_string(b) + " (" + elements + ") is " +
                                                     std::to_string(byte) + ", expected at most 242");
    }
    for (std::size_t j = 0; j < 5; ++j, byte /= 3) {
      if (first + j < n) out[first + j] = static_cast<std::int8_t>(static_cast<int>(byte % 3) - 1);
    }
  }
  return out;
}

Result<std::vector<std::int8_t>> unpack_bitplane(std::span<const std::uint8_t> bytes, std::size_t n) {
  std::vector<std::int8_t> out(n);
  const std::size_t groups = bytes.size() / kBitplaneGroupBytes;
  for (std::size_t g = 0; g < groups; ++g) {
    const std::uint64_t positive = load_le64(&bytes[g * kBitplaneGroupBytes]);
    const std::uint64_t negative = load_le64(&bytes[g * kBitplaneGroupBytes + 8]);
    for (std::size_t bit = 0; bit < kBitplaneGroup; ++bit) {
      const std::size_t i = g * kBitplaneGroup + bit;
      if (i >= n) break;
      const bool pos = ((positive >> bit) & 1u) != 0;
      const bool neg = ((negative >> bit) & 1u) != 0;
      if (pos && neg) {
        const std::size_t pos_byte = g * kBitplaneGroupBytes + bit / 8;
        return make_error(ErrorCode::InvalidInput,
                          "bitplane element " + std::to_string(i) + " has both its positive bit (byte " +
                              std::to_string(pos_byte) + ") and its negative bit (byte " +
                              std::to_string(pos_byte + 8) + ") set, expected at most one");
      }
      out[i] = static_cast<std::int8_t>(pos ? 1 : (neg ? -1 : 0));
    }
  }
  return out;
}

}  // namespace

std::string_view format_name(TernaryFormat format) {
  switch (format) {
    case TernaryFormat::Tern2: return "tern2";
    case TernaryFormat::Tern2SM: return "tern2-sm";
    case TernaryFormat::Tern16: return "tern1.6";
    case TernaryFormat::Bitplane: return "bitplane";
  }
  return "tern2";
}

std::optional<TernaryFormat> parse_ternary_format(std::string_view name) {
  for (TernaryFormat format : kAllTernaryFormats) {
    if (format_name(format) == name) return format;
  }
  return std::nullopt;
}

std::size_t packed_size(TernaryFormat format, std::size_t n) {
  switch (format) {
    case TernaryFormat::Tern2:
    case TernaryFormat::Tern2SM: return ceil_div(n, 4);
    case TernaryFormat::Tern16: return ceil_div(n, 5);
    case TernaryFormat::Bitplane: return ceil_div(n, kBitplaneGroup) * kBitplaneGroupBytes;
  }
  return 0;
}

Result<void> check_ternary(std::span<const std::int8_t> values) {
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (values[i] < -1 || values[i] > 1) {
      return make_error(ErrorCode::InvalidInput, "value at index " + std::to_string(i) + " is " +
                                                     std::to_string(values[i]) + ", expected -1, 0 or 1");
    }
  }
  return success();
}

Result<std::vector<std::uint8_t>> pack_ternary(TernaryFormat format, std::span<const std::int8_t> values) {
  TERNJIT_TRY_VOID(check_ternary(values));
  switch (format) {
    case TernaryFormat::Tern2:
    case TernaryFormat::Tern2SM: return pack2(format, values);
    case TernaryFormat::Tern16: return pack16(values);
    case TernaryFormat::Bitplane: return pack_bitplane(values);
  }
  return make_error(ErrorCode::InvalidArgument, "unknown ternary format");
}

Result<std::vector<std::int8_t>> unpack_ternary(TernaryFormat format, std::span<const std::uint8_t> bytes,
                                                std::size_t n) {
  const std::size_t need = packed_size(format, n);
  if (bytes.size() != need) {
    return make_error(ErrorCode::InvalidInput, std::string(format_name(format)) + " data for " + std::to_string(n) +
                                                   (n == 1 ? " value" : " values") + " needs " +
                                                   std::to_string(need) + (need == 1 ? " byte" : " bytes") +
                                                   ", got " + std::to_string(bytes.size()));
  }
  switch (format) {
    case TernaryFormat::Tern2:
    case TernaryFormat::Tern2SM: return unpack2(format, bytes, n);
    case TernaryFormat::Tern16: return unpack16(bytes, n);
    case TernaryFormat::Bitplane: return unpack_bitplane(bytes, n);
  }
  return make_error(ErrorCode::InvalidArgument, "unknown ternary format");
}

}  // namespace ternjit::ir
