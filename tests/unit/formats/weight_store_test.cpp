// SPDX-License-Identifier: Apache-2.0
// weight_store_test.cpp - store_weight: kept bytes, conversions and the byte-count checks.
#include "formats/weight_store.h"

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "formats/ternary.h"
#include "ir/numeric.h"

namespace ternjit::formats {
namespace {

std::string error_of(const Result<ir::StoredTensor>& r) { return r.ok() ? std::string("ok") : r.error().message; }

TEST_CASE("store_weight: the declared kind is kept as it is, shared when owned") {
  std::vector<float> values{1.5f, -2.0f, 0.25f, 8.0f};
  std::vector<std::uint8_t> bytes(16);
  std::memcpy(bytes.data(), values.data(), bytes.size());
  const ir::SharedBytes owned = ir::SharedBytes::copy_of(bytes);
  auto shared = store_weight(ElemKind::F32, ElemKind::F32, WeightFormat::Plain, {2, 2}, owned);
  REQUIRE(shared.ok());
  CHECK(shared->bytes().data() == owned.data());
  CHECK(shared->to_host().data == std::vector<double>{1.5, -2.0, 0.25, 8.0});
  // Caller memory is copied once: the stored value does not depend on it afterwards.
  auto copied = store_weight(ElemKind::F32, ElemKind::F32, WeightFormat::Plain, {4}, ir::SharedBytes::borrow(bytes));
  REQUIRE(copied.ok());
  CHECK(copied->bytes().data() != bytes.data());
  bytes.assign(16, 0);
  CHECK(copied->at(0) == 1.5);
}

TEST_CASE("store_weight: conversions write the stored form directly") {
  // bf16 bits of 1.0 and -2.5 for an f32 parameter: values kept exactly.
  const std::vector<std::uint16_t> bits{ir::f32_to_bf16_bits(1.0f), ir::f32_to_bf16_bits(-2.5f)};
  const auto* p = reinterpret_cast<const std::uint8_t*>(bits.data());
  auto f32 = store_weight(ElemKind::F32, ElemKind::BF16, WeightFormat::Plain, {2}, ir::SharedBytes::borrow({p, 4}));
  REQUIRE(f32.ok());
  CHECK(f32->bytes().size() == 8);
  CHECK(f32->to_host().data == std::vector<double>{1.0, -2.5});
  // f32 for an f16 parameter: rounded to f16.
  const std::vector<float> fine{1.0009765625f, 0.1f};
  const auto* q = reinterpret_cast<const std::uint8_t*>(fine.data());
  auto f16 = store_weight(ElemKind::F16, ElemKind::F32, WeightFormat::Plain, {2}, ir::SharedBytes::borrow({q, 8}));
  REQUIRE(f16.ok());
  CHECK(f16->bytes().size() == 4);
  CHECK(f16->at(1) == static_cast<double>(ir::round_to_f16(0.1f)));
  // Ternary int8 values are packed to 2 bits each.
  const std::vector<std::int8_t> t{1, 0, -1, 1, 0, 0, -1, 1};
  const auto* r = reinterpret_cast<const std::uint8_t*>(t.data());
  auto t2 = store_weight(ElemKind::T2, ElemKind::I8, WeightFormat::Plain, {2, 4}, ir::SharedBytes::borrow({r, 8}));
  REQUIRE(t2.ok());
  CHECK(t2->bytes().size() == 2);
  CHECK(t2->to_bytes() == std::vector<std::uint8_t>(r, r + 8));
}

TEST_CASE("store_weight: every byte count it can see is checked") {
  const std::vector<std::uint8_t> seven(7);
  CHECK(error_of(store_weight(ElemKind::T2, ElemKind::I8, WeightFormat::Plain, {4, 2}, ir::SharedBytes::borrow(seven))) ==
        "i8[4, 2] needs 8 bytes, got 7");
  CHECK(error_of(store_weight(ElemKind::F32, ElemKind::BF16, WeightFormat::Plain, {4}, ir::SharedBytes::borrow(seven))) ==
        "bf16[4] needs 8 bytes, got 7");
  CHECK(error_of(store_weight(ElemKind::I32, ElemKind::I32, WeightFormat::Plain, {2}, ir::SharedBytes::borrow(seven))) ==
        "i32[2] needs 8 bytes, got 7");
  const std::vector<std::uint8_t> slice(10, 0x55);
  CHECK(error_of(store_weight(ElemKind::T2, ElemKind::U8, WeightFormat::Tern2, {64, 16}, ir::SharedBytes::borrow(slice))) ==
        "tern2 data for 1024 values needs 256 bytes, got 10");
  const std::vector<std::int8_t> bad{0, 1, -2};
  const auto* b = reinterpret_cast<const std::uint8_t*>(bad.data());
  CHECK(error_of(store_weight(ElemKind::T2, ElemKind::T2, WeightFormat::Plain, {3}, ir::SharedBytes::borrow({b, 3}))) ==
        "t2 element [2] (byte 2) is -2, expected -1, 0 or 1");
}

}  // namespace
}  // namespace ternjit::formats
