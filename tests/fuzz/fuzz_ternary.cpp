// SPDX-License-Identifier: Apache-2.0
// fuzz_ternary.cpp - libFuzzer harness: the packed ternary codecs (formats/ternary.h, store_weight).
//
// Input: byte 0 picks the format (and whether the rest is packed data or int8 values),
// byte 1 how many elements fewer than the data could hold to unpack (below one byte's or
// group's worth when its top bit is clear, so the count mostly fits the data), the rest
// is the data. Invariants: nothing crashes or reads out of bounds; unpack_ternary accepts exactly
// the data store_packed (and store_weight) accept, and all three decode the same values;
// pack_ternary(unpack_ternary(d)) unpacks to the same values and has d's size; pack_ternary
// fails exactly on a value outside {-1, 0, 1}.
#include <algorithm>
#include <cstring>

#include "formats/ternary.h"
#include "formats/weight_store.h"
#include "tests/fuzz/fuzz_testing.h"

namespace {

using namespace ternjit;

// Elements per byte (per 16-byte group for bitplane) of `format`.
std::size_t unit(WeightFormat format) {
  switch (format) {
    case WeightFormat::Tern16: return 5;
    case WeightFormat::Bitplane: return 64;
    default: return 4;
  }
}

// The most elements `bytes` packed bytes of `format` can hold.
std::size_t capacity(WeightFormat format, std::size_t bytes) {
  return format == WeightFormat::Bitplane ? bytes / 16 * 64 : bytes * unit(format);
}

// The values of a t2 StoredTensor, decoded one by one.
std::vector<std::int8_t> values_of(const ir::StoredTensor& t) {
  std::vector<std::int8_t> out(static_cast<std::size_t>(t.numel()));
  t.read_int8(0, out);
  return out;
}

void check_packed(WeightFormat format, std::span<const std::uint8_t> bytes, std::size_t shortfall) {
  const std::size_t cap = capacity(format, bytes.size());
  const std::size_t n = cap - std::min(cap, shortfall);
  auto values = formats::unpack_ternary(format, bytes, n);
  const auto shared = ir::SharedBytes::copy_of(bytes);
  auto stored = formats::store_packed(format, {static_cast<std::int64_t>(n)}, shared);
  auto weight = formats::store_weight(ElemKind::T2, ElemKind::U8, format, {1, static_cast<std::int64_t>(n)}, shared);
  if (values.ok() != stored.ok() || values.ok() != weight.ok())
    fuzz::finding("unpack_ternary, store_packed and store_weight disagree on accepting the data: " +
                  std::string(values.ok() ? "" : values.error().message) + " / " +
                  std::string(stored.ok() ? "" : stored.error().message) + " / " +
                  std::string(weight.ok() ? "" : weight.error().message));
  if (!values.ok()) return;
  if (values->size() != n) fuzz::finding("unpack_ternary returned the wrong count");
  for (std::int8_t v : *values)
    if (v < -1 || v > 1) fuzz::finding("unpack_ternary returned a value outside {-1, 0, 1}");
  if (values_of(*stored) != *values || values_of(*weight) != *values)
    fuzz::finding("store_packed or store_weight decodes other values than unpack_ternary");
  auto repacked = formats::pack_ternary(format, *values);
  if (!repacked.ok()) fuzz::finding("pack_ternary rejects unpacked values: " + repacked.error().message);
  if (repacked->size() != formats::packed_size(format, n)) fuzz::finding("pack_ternary has the wrong size");
  auto again = formats::unpack_ternary(format, *repacked, n);
  if (!again.ok() || *again != *values) fuzz::finding("unpack(pack(values)) != values");
}

void check_values(WeightFormat format, std::span<const std::uint8_t> bytes) {
  std::vector<std::int8_t> values(bytes.size());
  if (!bytes.empty()) std::memcpy(values.data(), bytes.data(), bytes.size());
  const bool ternary = std::all_of(values.begin(), values.end(), [](std::int8_t v) { return v >= -1 && v <= 1; });
  auto packed = formats::pack_ternary(format, values);
  if (packed.ok() != ternary) fuzz::finding("pack_ternary accepts a non-ternary value or rejects a ternary one");
  if (!packed.ok()) return;
  auto back = formats::unpack_ternary(format, *packed, values.size());
  if (!back.ok() || *back != values) fuzz::finding("unpack(pack(values)) != values");
  // A stored t2 tensor from the same values, plain (I8) and packed, holds the same values.
  auto plain = formats::store_weight(ElemKind::T2, ElemKind::I8, WeightFormat::Plain,
                                     {static_cast<std::int64_t>(values.size())}, ir::SharedBytes::copy_of(bytes));
  if (!plain.ok() || values_of(*plain) != values) fuzz::finding("store_weight of plain ternary I8 values differs");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const WeightFormat format = formats::kPackedFormats[data[0] % 4];
  const std::size_t shortfall = data[1] & 0x80 ? data[1] & 0x7F : data[1] % unit(format);
  const std::span<const std::uint8_t> rest(data + 2, size - 2);
  if (data[0] & 0x80) check_values(format, rest);
  else check_packed(format, rest, shortfall);
  return 0;
}
