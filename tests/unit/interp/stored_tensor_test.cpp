// SPDX-License-Identifier: Apache-2.0
// stored_tensor_test.cpp - SharedBytes ownership, tern2 codes, and StoredTensor checks and conversions.
#include "ir/stored_tensor.h"

#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace ternjit::ir {
namespace {

std::string error_of(const Result<StoredTensor>& r) { return r.ok() ? std::string("ok") : r.error().message; }

TEST_CASE("shared bytes: owned values share, borrowed ones are copied when kept") {
  std::vector<std::uint8_t> caller{1, 2, 3, 4, 5};
  const SharedBytes borrowed = SharedBytes::borrow(caller);
  CHECK_FALSE(borrowed.owned());
  CHECK(borrowed.data() == caller.data());
  const SharedBytes kept = borrowed.keep();
  CHECK(kept.owned());
  CHECK(kept.data() != caller.data());
  CHECK(std::vector<std::uint8_t>(kept.data(), kept.data() + kept.size()) == caller);

  const SharedBytes owned = SharedBytes::adopt({9, 8, 7, 6});
  CHECK(owned.keep().data() == owned.data());
  const SharedBytes mid = owned.slice(1, 2);
  CHECK(mid.owned());
  CHECK(mid.data() == owned.data() + 1);
  CHECK(mid.size() == 2);
  CHECK(owned.slice(4, 0).empty());
}

TEST_CASE("tern2 codes: packing, element access and validation") {
  auto codes = pack_tern2(std::vector<std::int8_t>{-1, 0, 1, 1, -1});
  REQUIRE(codes.ok());
  CHECK(*codes == std::vector<std::uint8_t>{0xA4, 0x54});  // padding fields are 01
  CHECK(tern2_size(0) == 0);
  CHECK(tern2_size(5) == 2);
  CHECK(tern2_at(codes->data(), 0) == -1);
  CHECK(tern2_at(codes->data(), 2) == 1);
  CHECK(tern2_at(codes->data(), 4) == -1);
  CHECK(pack_tern2(std::vector<std::int8_t>{0, 2}).error().message == "value at index 1 is 2, expected -1, 0 or 1");
  CHECK(check_tern2(std::vector<std::uint8_t>{0x55, 0xD5}, 8).error().message ==
        "tern2 element 7 (byte 1, bits 6-7) has code 0b11, expected 0b00, 0b01 or 0b10");
  CHECK(check_tern2(std::vector<std::uint8_t>{0x55, 0xD5}, 7).ok());  // a 0b11 padding field is ignored
}

TEST_CASE("stored tensor: view checks the byte count, codes and bool bytes") {
  // A 10-byte slice bound as 64x16 t2 is refused, not read past its end; so is a long one.
  std::vector<std::uint8_t> slice(10, 0x55);
  CHECK(error_of(StoredTensor::view(ElemKind::T2, {64, 16}, SharedBytes::borrow(slice))) ==
        "t2[64, 16] needs 256 bytes of tern2 codes, got 10");
  std::vector<std::uint8_t> long_buf(257, 0x55);
  CHECK(error_of(StoredTensor::view(ElemKind::T2, {64, 16}, SharedBytes::borrow(long_buf))) ==
        "t2[64, 16] needs 256 bytes of tern2 codes, got 257");
  std::vector<std::uint8_t> f32(7);
  CHECK(error_of(StoredTensor::view(ElemKind::F32, {2}, SharedBytes::borrow(f32))) == "f32[2] needs 8 bytes, got 7");
  CHECK(error_of(StoredTensor::view(ElemKind::F32, {-1, 2}, {})) == "f32[-1, 2] has a negative extent or too many elements");
  CHECK(error_of(StoredTensor::view(ElemKind::F32, {std::int64_t{1} << 62, 8}, {})) ==
        "f32[4611686018427387904, 8] has a negative extent or too many elements");
  CHECK(error_of(StoredTensor::view(ElemKind::I32, {std::int64_t{1} << 62}, {})) ==
        "i32[4611686018427387904] has a negative extent or too many elements");  // the byte count overflows
  std::vector<std::uint8_t> bad_code{0x55, 0x57};
  CHECK(error_of(StoredTensor::view(ElemKind::T2, {8}, SharedBytes::borrow(bad_code))) ==
        "tern2 element 4 (byte 1, bits 0-1) has code 0b11, expected 0b00, 0b01 or 0b10");
  std::vector<std::uint8_t> bools{0, 1, 2};
  CHECK(error_of(StoredTensor::view(ElemKind::Bool, {3}, SharedBytes::borrow(bools))) ==
        "bool element 2 is 2, expected 0 or 1");
  // Owned bytes are kept where they are.
  const SharedBytes codes = SharedBytes::adopt(std::vector<std::uint8_t>(256, 0x55));
  auto t = StoredTensor::view(ElemKind::T2, {64, 16}, codes);
  REQUIRE(t.ok());
  CHECK(t->bytes().data() == codes.data());
}

TEST_CASE("stored tensor: from_ternary names a bad value by its multi-index") {
  CHECK(error_of(StoredTensor::from_ternary({2, 3}, std::vector<std::int8_t>{1, 0, -1, 0, 3, 0})) ==
        "t2 element [1, 1] (byte 4) is 3, expected -1, 0 or 1");
  CHECK(error_of(StoredTensor::from_ternary({2, 3}, std::vector<std::int8_t>{1, 0})) == "t2[2, 3] needs 6 values, got 2");
  auto t = StoredTensor::from_ternary({2, 3}, std::vector<std::int8_t>{1, 0, -1, 0, 1, 0});
  REQUIRE(t.ok());
  CHECK(t->bytes().size() == 2);
  CHECK(t->describe() == "t2[2, 3]");
  std::vector<std::int8_t> row(3);
  t->read_int8(3, row);
  CHECK(row == std::vector<std::int8_t>{0, 1, 0});
}

TEST_CASE("stored tensor: every kind round-trips through HostTensor, random and zeros agree") {
  for (ElemKind kind : kAllElemKinds) {
    CAPTURE(std::string(elem_name(kind)));
    const HostTensor h = HostTensor::random(kind, {3, 5}, 7);
    const StoredTensor s = StoredTensor::from_host(h);
    CHECK(s.kind() == kind);
    CHECK(s.shape() == h.shape);
    CHECK(s.numel() == 15);
    CHECK(s.to_host().data == h.data);
    CHECK(s.to_bytes() == h.to_bytes());
    for (std::size_t i = 0; i < h.data.size(); ++i) CHECK(s.at(i) == h.data[i]);
    const StoredTensor r = StoredTensor::random(kind, {3, 5}, 7);
    CHECK(r.to_host().data == h.data);
    CHECK(StoredTensor::zeros(kind, {3, 5}).to_host().data == std::vector<double>(15, 0.0));
  }
  // Stored sizes: t2 at 2 bits a value, the others at their element width.
  CHECK(StoredTensor::random(ElemKind::T2, {64, 16}, 1).bytes().size() == 256);
  CHECK(StoredTensor::random(ElemKind::BF16, {64, 16}, 1).bytes().size() == 2048);
  CHECK(StoredTensor::zeros(ElemKind::F32, {}).numel() == 1);
}

}  // namespace
}  // namespace ternjit::ir
