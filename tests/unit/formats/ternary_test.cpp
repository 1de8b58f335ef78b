// SPDX-License-Identifier: Apache-2.0
// ternary_test.cpp - ternary formats: golden bytes, round trips over many lengths, invalid codes.
#include "formats/ternary.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace ternjit;
using namespace ternjit::formats;
using ternjit::ir::check_ternary;

std::vector<std::int8_t> random_ternary(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(-1, 1);
  std::vector<std::int8_t> v(n);
  for (auto& x : v) x = static_cast<std::int8_t>(dist(rng));
  return v;
}

std::vector<std::uint8_t> pack_ok(WeightFormat format, const std::vector<std::int8_t>& values) {
  auto packed = pack_ternary(format, values);
  REQUIRE(packed.ok());
  return *packed;
}

std::string unpack_error(WeightFormat format, const std::vector<std::uint8_t>& bytes, std::size_t n) {
  auto r = unpack_ternary(format, bytes, n);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ErrorCode::InvalidInput);
  return r.error().message;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("format names parse back and unknown names are rejected") {
  CHECK(weight_format_name(WeightFormat::Tern2) == "tern2");
  CHECK(weight_format_name(WeightFormat::Tern2SM) == "tern2-sm");
  CHECK(weight_format_name(WeightFormat::Tern16) == "tern1.6");
  CHECK(weight_format_name(WeightFormat::Bitplane) == "bitplane");
  for (WeightFormat f : kPackedFormats) CHECK(parse_weight_format(weight_format_name(f)) == f);
  CHECK_FALSE(parse_weight_format("tern3").has_value());
  CHECK_FALSE(parse_weight_format("TERN2").has_value());
  CHECK_FALSE(parse_weight_format("").has_value());
}

TEST_CASE("packed_size") {
  CHECK(packed_size(WeightFormat::Tern2, 0) == 0);
  CHECK(packed_size(WeightFormat::Tern2, 1) == 1);
  CHECK(packed_size(WeightFormat::Tern2, 4) == 1);
  CHECK(packed_size(WeightFormat::Tern2, 5) == 2);
  CHECK(packed_size(WeightFormat::Tern2SM, 10) == 3);
  CHECK(packed_size(WeightFormat::Tern16, 0) == 0);
  CHECK(packed_size(WeightFormat::Tern16, 5) == 1);
  CHECK(packed_size(WeightFormat::Tern16, 6) == 2);
  CHECK(packed_size(WeightFormat::Tern16, 1000) == 200);
  CHECK(packed_size(WeightFormat::Bitplane, 0) == 0);
  CHECK(packed_size(WeightFormat::Bitplane, 1) == 16);
  CHECK(packed_size(WeightFormat::Bitplane, 64) == 16);
  CHECK(packed_size(WeightFormat::Bitplane, 65) == 32);
  CHECK(packed_size(WeightFormat::Tern2, SIZE_MAX) == SIZE_MAX / 4 + 1);  // no overflow in the rounding
}

TEST_CASE("tern2 golden bytes") {
  CHECK(pack_ok(WeightFormat::Tern2, {-1, 0, 1, 1}) == std::vector<std::uint8_t>{0xA4});
  CHECK(pack_ok(WeightFormat::Tern2, {0, 0, 0, 0}) == std::vector<std::uint8_t>{0x55});
  CHECK(pack_ok(WeightFormat::Tern2, {-1, -1, -1, -1}) == std::vector<std::uint8_t>{0x00});
  // Padding fields are code 01 (value 0).
  CHECK(pack_ok(WeightFormat::Tern2, {1}) == std::vector<std::uint8_t>{0x56});
  CHECK(pack_ok(WeightFormat::Tern2, {1, 1, 1, 1, -1}) == std::vector<std::uint8_t>{0xAA, 0x54});
}

TEST_CASE("tern2-sm golden bytes") {
  CHECK(pack_ok(WeightFormat::Tern2SM, {-1, 0, 1, 1}) == std::vector<std::uint8_t>{0x52});
  CHECK(pack_ok(WeightFormat::Tern2SM, {0, 0, 0, 0}) == std::vector<std::uint8_t>{0x00});
  CHECK(pack_ok(WeightFormat::Tern2SM, {-1, -1, -1, -1}) == std::vector<std::uint8_t>{0xAA});
  CHECK(pack_ok(WeightFormat::Tern2SM, {1}) == std::vector<std::uint8_t>{0x01});  // padding 00
}

TEST_CASE("tern1.6 golden bytes") {
  CHECK(pack_ok(WeightFormat::Tern16, {1, 1, 1, 1, 1}) == std::vector<std::uint8_t>{242});
  CHECK(pack_ok(WeightFormat::Tern16, {-1, -1, -1, -1, -1}) == std::vector<std::uint8_t>{0});
  CHECK(pack_ok(WeightFormat::Tern16, {0, 0, 0, 0, 0}) == std::vector<std::uint8_t>{121});
  CHECK(pack_ok(WeightFormat::Tern16, {-1, 0, 1, 0, 0}) == std::vector<std::uint8_t>{0 + 3 + 18 + 27 + 81});
  // One value 1 (trit 2) and four padding trits 1: 2 + 3 + 9 + 27 + 81.
  CHECK(pack_ok(WeightFormat::Tern16, {1}) == std::vector<std::uint8_t>{122});
  CHECK(pack_ok(WeightFormat::Tern16, {1, 1, 1, 1, 1, -1}) == std::vector<std::uint8_t>{242, 120});
}

TEST_CASE("bitplane golden bytes") {
  std::vector<std::int8_t> values(70, 0);
  values[0] = 1;
  values[1] = -1;
  values[3] = 1;
  values[63] = -1;
  values[64] = 1;
  values[69] = -1;
  const auto packed = pack_ok(WeightFormat::Bitplane, values);
  REQUIRE(packed.size() == 32);
  const std::vector<std::uint8_t> expected = {
      0x09, 0, 0, 0, 0, 0, 0, 0,     // group 0 positive: bits 0 and 3
      0x02, 0, 0, 0, 0, 0, 0, 0x80,  // group 0 negative: bits 1 and 63
      0x01, 0, 0, 0, 0, 0, 0, 0,     // group 1 positive: bit 0 (element 64)
      0x20, 0, 0, 0, 0, 0, 0, 0,     // group 1 negative: bit 5 (element 69)
  };
  CHECK(packed == expected);
}

TEST_CASE("round trip for every format, many lengths, random values") {
  std::vector<std::size_t> lengths;
  for (std::size_t n = 0; n <= 130; ++n) lengths.push_back(n);
  for (std::size_t n : {191, 192, 193, 255, 256, 257, 1000, 1001, 4099}) lengths.push_back(n);
  for (WeightFormat format : kPackedFormats) {
    for (std::size_t n : lengths) {
      CAPTURE(weight_format_name(format));
      CAPTURE(n);
      const auto values = random_ternary(n, static_cast<std::uint32_t>(n * 31 + 7));
      const auto packed = pack_ok(format, values);
      CHECK(packed.size() == packed_size(format, n));
      auto back = unpack_ternary(format, packed, n);
      REQUIRE(back.ok());
      CHECK(*back == values);
    }
  }
}

TEST_CASE("round trip of constant runs") {
  for (WeightFormat format : kPackedFormats) {
    for (std::int8_t v : {std::int8_t{-1}, std::int8_t{0}, std::int8_t{1}}) {
      const std::vector<std::int8_t> values(77, v);
      auto back = unpack_ternary(format, pack_ok(format, values), values.size());
      REQUIRE(back.ok());
      CHECK(*back == values);
    }
  }
}

TEST_CASE("formats agree with each other after a round trip") {
  const auto values = random_ternary(333, 5);
  for (WeightFormat from : kPackedFormats) {
    for (WeightFormat to : kPackedFormats) {
      auto mid = unpack_ternary(from, pack_ok(from, values), values.size());
      REQUIRE(mid.ok());
      auto back = unpack_ternary(to, pack_ok(to, *mid), values.size());
      REQUIRE(back.ok());
      CHECK(*back == values);
    }
  }
}

TEST_CASE("non-ternary values name the first offending index") {
  auto r = pack_ternary(WeightFormat::Tern2, std::vector<std::int8_t>{0, 1, -1, 0, 0, 3, 7});
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ErrorCode::InvalidInput);
  CHECK(r.error().message == "value at index 5 is 3, expected -1, 0 or 1");

  for (WeightFormat format : kPackedFormats) {
    auto neg = pack_ternary(format, std::vector<std::int8_t>{-2});
    REQUIRE_FALSE(neg.ok());
    CHECK(neg.error().message == "value at index 0 is -2, expected -1, 0 or 1");
    auto big = pack_ternary(format, std::vector<std::int8_t>{1, 1, -128});
    REQUIRE_FALSE(big.ok());
    CHECK(big.error().message == "value at index 2 is -128, expected -1, 0 or 1");
  }

  CHECK(check_ternary(std::vector<std::int8_t>{}).ok());
  CHECK(check_ternary(std::vector<std::int8_t>{-1, 0, 1}).ok());
  auto c = check_ternary(std::vector<std::int8_t>{-1, 0, 1, 127});
  REQUIRE_FALSE(c.ok());
  CHECK(c.error().message == "value at index 3 is 127, expected -1, 0 or 1");
}

TEST_CASE("size mismatch on unpack") {
  CHECK(unpack_error(WeightFormat::Tern2, {0x55, 0x55}, 10) == "tern2 data for 10 values needs 3 bytes, got 2");
  CHECK(unpack_error(WeightFormat::Tern2SM, {0, 0, 0, 0}, 10) == "tern2-sm data for 10 values needs 3 bytes, got 4");
  CHECK(unpack_error(WeightFormat::Tern16, {121}, 6) == "tern1.6 data for 6 values needs 2 bytes, got 1");
  CHECK(unpack_error(WeightFormat::Bitplane, std::vector<std::uint8_t>(15), 1) ==
        "bitplane data for 1 value needs 16 bytes, got 15");
  CHECK(unpack_error(WeightFormat::Tern2, {0x55}, 0) == "tern2 data for 0 values needs 0 bytes, got 1");
  auto empty = unpack_ternary(WeightFormat::Tern2, {}, 0);
  REQUIRE(empty.ok());
  CHECK(empty->empty());
}

TEST_CASE("invalid 2-bit codes name element and byte") {
  // Byte 1 holds elements 4..7; element 7 (bits 6-7) has code 11.
  const std::string tern2 = unpack_error(WeightFormat::Tern2, {0x55, 0xD5, 0x55}, 10);
  CHECK(tern2 == "tern2 element 7 (byte 1, bits 6-7) has code 0b11, expected 0b00, 0b01 or 0b10");
  const std::string sm = unpack_error(WeightFormat::Tern2SM, {0x00, 0x00, 0x0C}, 10);
  CHECK(sm == "tern2-sm element 9 (byte 2, bits 2-3) has code 0b11, expected 0b00, 0b01 or 0b10");
  // The first invalid element is reported when there are several.
  CHECK(contains(unpack_error(WeightFormat::Tern2, {0xFF}, 4), "element 0 "));
}

TEST_CASE("codes in padding are ignored") {
  // n = 1: only bits 0-1 carry an element; the other fields hold invalid code 11.
  auto tern2 = unpack_ternary(WeightFormat::Tern2, std::vector<std::uint8_t>{0xFD}, 1);
  REQUIRE(tern2.ok());
  CHECK(*tern2 == std::vector<std::int8_t>{0});
  auto sm = unpack_ternary(WeightFormat::Tern2SM, std::vector<std::uint8_t>{0xFE}, 1);
  REQUIRE(sm.ok());
  CHECK(*sm == std::vector<std::int8_t>{-1});
  // tern1.6 byte 242 with n = 1: the padding trits are 2 (value +1), ignored.
  auto t16 = unpack_ternary(WeightFormat::Tern16, std::vector<std::uint8_t>{240}, 1);  // trits 0,2,2,2,2
  REQUIRE(t16.ok());
  CHECK(*t16 == std::vector<std::int8_t>{-1});
  // bitplane: both bits set at padding bit 5 of a 3-element group.
  std::vector<std::uint8_t> plane(16, 0);
  plane[0] = 0x21;
  plane[8] = 0x22;
  auto bp = unpack_ternary(WeightFormat::Bitplane, plane, 3);
  REQUIRE(bp.ok());
  CHECK(*bp == std::vector<std::int8_t>{1, -1, 0});
}

TEST_CASE("tern1.6 bytes above 242 are invalid") {
  CHECK(unpack_error(WeightFormat::Tern16, {121, 121, 243}, 15) ==
        "tern1.6 byte 2 (elements 10 to 14) is 243, expected at most 242");
  CHECK(unpack_error(WeightFormat::Tern16, {121, 255}, 7) ==
        "tern1.6 byte 1 (elements 5 to 6) is 255, expected at most 242");
  CHECK(unpack_error(WeightFormat::Tern16, {121, 250}, 6) ==
        "tern1.6 byte 1 (element 5) is 250, expected at most 242");
}

TEST_CASE("bitplane with both bits set names the element and bytes") {
  std::vector<std::uint8_t> plane(32, 0);
  plane[16 + 0] = 0x40;      // group 1 positive bit 6 -> element 70
  plane[16 + 8 + 0] = 0x40;  // group 1 negative bit 6
  CHECK(unpack_error(WeightFormat::Bitplane, plane, 100) ==
        "bitplane element 70 has both its positive bit (byte 16) and its negative bit (byte 24) set, "
        "expected at most one");
}

TEST_CASE("corrupting one element is reported at that element") {
  std::mt19937 rng(77);
  for (int trial = 0; trial < 200; ++trial) {
    const std::size_t n = 1 + rng() % 300;
    const std::size_t bad = rng() % n;
    const auto values = random_ternary(n, static_cast<std::uint32_t>(trial));
    CAPTURE(n);
    CAPTURE(bad);

    auto tern2 = pack_ok(WeightFormat::Tern2, values);
    tern2[bad / 4] = static_cast<std::uint8_t>(tern2[bad / 4] | (3u << (2 * (bad % 4))));
    CHECK(contains(unpack_error(WeightFormat::Tern2, tern2, n), "element " + std::to_string(bad) + " "));

    auto sm = pack_ok(WeightFormat::Tern2SM, values);
    sm[bad / 4] = static_cast<std::uint8_t>(sm[bad / 4] | (3u << (2 * (bad % 4))));
    CHECK(contains(unpack_error(WeightFormat::Tern2SM, sm, n), "element " + std::to_string(bad) + " "));

    auto plane = pack_ok(WeightFormat::Bitplane, values);
    const std::size_t byte = (bad / 64) * 16 + (bad % 64) / 8;
    const auto bit = static_cast<std::uint8_t>(1u << (bad % 8));
    plane[byte] |= bit;
    plane[byte + 8] |= bit;
    CHECK(contains(unpack_error(WeightFormat::Bitplane, plane, n), "element " + std::to_string(bad) + " "));

    auto t16 = pack_ok(WeightFormat::Tern16, values);
    t16[bad / 5] = 243;
    CHECK(contains(unpack_error(WeightFormat::Tern16, t16, n), "byte " + std::to_string(bad / 5) + " "));
  }
}

TEST_CASE("store_packed: every format gives the same t2 values, block by block") {
  // 3 blocks of transcoding and a ragged end; a shape that is not a multiple of any group.
  const std::int64_t rows = 193, cols = 331;
  const auto values = random_ternary(static_cast<std::size_t>(rows * cols), 5);
  auto want = ir::StoredTensor::from_ternary({rows, cols}, values);
  REQUIRE(want.ok());
  for (WeightFormat format : kPackedFormats) {
    CAPTURE(weight_format_name(format));
    const ir::SharedBytes packed = ir::SharedBytes::adopt(pack_ok(format, values));
    auto got = store_packed(format, {rows, cols}, packed);
    REQUIRE_MESSAGE(got.ok(), (got.ok() ? "" : got.error().message));
    CHECK(got->kind() == ElemKind::T2);
    CHECK(got->shape() == std::vector<std::int64_t>{rows, cols});
    CHECK(std::ranges::equal(got->bytes().span(), want->bytes().span()));
    // tern2 data is the stored form itself: kept, not copied.
    CHECK((got->bytes().data() == packed.data()) == (format == WeightFormat::Tern2));
  }
}

TEST_CASE("store_packed: wrong byte counts and bad codes are errors naming the element") {
  // A 10-byte slice bound as 64x16 is refused in every format, as is a longer buffer.
  const std::vector<std::uint8_t> slice(10, 0x55);
  for (WeightFormat format : kPackedFormats) {
    auto r = store_packed(format, {64, 16}, ir::SharedBytes::borrow(slice));
    REQUIRE_FALSE(r.ok());
    CHECK(contains(r.error().message, "data for 1024 values needs"));
    CHECK(contains(r.error().message, "got 10"));
  }
  CHECK(store_packed(WeightFormat::Tern2, {4}, ir::SharedBytes::borrow(std::vector<std::uint8_t>{0x55, 0x55}))
            .error()
            .message == "tern2 data for 4 values needs 1 byte, got 2");
  CHECK(store_packed(WeightFormat::Plain, {4}, {}).error().code == ErrorCode::InvalidArgument);
  CHECK(store_packed(WeightFormat::Tern2, {-4}, {}).error().message == "shape [-4] is negative or too large");
  // A bad element in a later transcoding block is named by its index in the whole tensor.
  const std::size_t n = 70000, bad = 65537;
  auto values = random_ternary(n, 9);
  auto plane = pack_ok(WeightFormat::Bitplane, values);
  const std::size_t byte = (bad / 64) * 16 + (bad % 64) / 8;
  plane[byte] |= static_cast<std::uint8_t>(1u << (bad % 8));
  plane[byte + 8] |= static_cast<std::uint8_t>(1u << (bad % 8));
  auto r = store_packed(WeightFormat::Bitplane, {static_cast<std::int64_t>(n)}, ir::SharedBytes::adopt(plane));
  REQUIRE_FALSE(r.ok());
  CHECK(contains(r.error().message, "bitplane element 65537 "));
  auto t16 = pack_ok(WeightFormat::Tern16, values);
  t16[bad / 5] = 250;
  r = store_packed(WeightFormat::Tern16, {static_cast<std::int64_t>(n)}, ir::SharedBytes::adopt(t16));
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message == "tern1.6 byte 13107 (elements 65535 to 65539) is 250, expected at most 242");
}
