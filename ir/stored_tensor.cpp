// SPDX-License-Identifier: Apache-2.0
// stored_tensor.cpp - shared bytes, tern2 codes, and StoredTensor's checks and conversions.
#include "ir/stored_tensor.h"

#include <cstring>
#include <limits>

#include "ir/ir.h"

namespace ternjit::ir {

namespace {

Error fail(std::string msg) { return make_error(ErrorCode::InvalidInput, std::move(msg)); }

constexpr std::uint8_t kTern2Padding = 0x55;  // four fields of code 01 (value 0)

// Sets field i of tern2 `codes` (initialized to kTern2Padding) to value v in {-1, 0, 1}.
void set_tern2(std::uint8_t* codes, std::size_t i, int v) {
  const unsigned shift = 2 * (i % 4);
  codes[i / 4] = static_cast<std::uint8_t>((codes[i / 4] & ~(3u << shift)) | (static_cast<unsigned>(v + 1) << shift));
}

// Bytes the encoding of `kind` needs for n elements, or nullopt on overflow.
std::optional<std::uint64_t> encoded_size(ElemKind kind, std::int64_t n) {
  const auto count = static_cast<std::uint64_t>(n);
  if (kind == ElemKind::T2) return tern2_size(count);
  const auto width = static_cast<std::uint64_t>(elem_bits(kind) / 8);
  if (count > std::numeric_limits<std::uint64_t>::max() / width) return std::nullopt;
  return count * width;
}

}  // namespace

SharedBytes SharedBytes::adopt(std::vector<std::uint8_t> bytes) {
  auto owner = std::make_shared<const std::vector<std::uint8_t>>(std::move(bytes));
  const std::span<const std::uint8_t> span(*owner);
  return SharedBytes(std::move(owner), span);
}

SharedBytes SharedBytes::copy_of(std::span<const std::uint8_t> bytes) {
  return adopt(std::vector<std::uint8_t>(bytes.begin(), bytes.end()));
}

SharedBytes SharedBytes::slice(std::size_t offset, std::size_t size) const {
  TERNJIT_CHECK(offset <= bytes_.size() && size <= bytes_.size() - offset, "SharedBytes::slice out of range");
  return SharedBytes(owner_, bytes_.subspan(offset, size));
}

Result<void> check_ternary(std::span<const std::int8_t> values) {
  for (std::size_t i = 0; i < values.size(); ++i)
    if (values[i] < -1 || values[i] > 1)
      return fail("value at index " + std::to_string(i) + " is " + std::to_string(values[i]) + ", expected -1, 0 or 1");
  return success();
}

Result<std::vector<std::uint8_t>> pack_tern2(std::span<const std::int8_t> values) {
  TERNJIT_TRY_VOID(check_ternary(values));
  std::vector<std::uint8_t> out(tern2_size(values.size()), kTern2Padding);
  for (std::size_t i = 0; i < values.size(); ++i) set_tern2(out.data(), i, values[i]);
  return out;
}

Result<void> check_tern2(std::span<const std::uint8_t> codes, std::size_t n) {
  TERNJIT_CHECK(codes.size() == tern2_size(n), "check_tern2: wrong byte count");
  // A byte holds an invalid code when some field is 0b11: both bits of a pair set.
  // Only the fields of real elements count (the last byte may hold padding). A branch-free
  // pass over the whole bytes first (it vectorizes); the located error only when it finds one.
  const std::size_t whole = n / 4;
  std::uint64_t any = 0;
  std::size_t b = 0;
  for (; b + 8 <= whole; b += 8) {
    std::uint64_t w;
    std::memcpy(&w, codes.data() + b, 8);
    any |= w & (w >> 1) & 0x5555555555555555ull;
  }
  for (; b < whole; ++b) any |= codes[b] & (codes[b] >> 1) & 0x55u;
  for (b = any == 0 ? whole : 0; b < codes.size(); ++b) {
    const unsigned pairs = codes[b] & (codes[b] >> 1) & 0x55u;
    if (pairs == 0) continue;
    for (unsigned f = 0; f < 4; ++f) {
      const std::size_t i = 4 * b + f;
      if (i >= n) break;
      if ((pairs >> (2 * f)) & 1u)
        return fail("tern2 element " + std::to_string(i) + " (byte " + std::to_string(b) + ", bits " +
                    std::to_string(2 * f) + "-" + std::to_string(2 * f + 1) +
                    ") has code 0b11, expected 0b00, 0b01 or 0b10");
    }
  }
  return success();
}

Result<StoredTensor> StoredTensor::view(ElemKind kind, std::vector<std::int64_t> shape, SharedBytes bytes) {
  const std::string type = std::string(elem_name(kind)) + index_str(shape);
  const auto n = checked_numel(shape);
  const auto need = n ? encoded_size(kind, *n) : std::nullopt;
  if (!need) return fail(type + " has a negative extent or too many elements");
  if (bytes.size() != *need)
    return fail(type + " needs " + std::to_string(*need) + (kind == ElemKind::T2 ? " bytes of tern2 codes" : " bytes") +
                ", got " + std::to_string(bytes.size()));
  if (kind == ElemKind::T2) TERNJIT_TRY_VOID(check_tern2(bytes.span(), static_cast<std::size_t>(*n)));
  if (kind == ElemKind::Bool) {
    for (std::size_t i = 0; i < bytes.size(); ++i)
      if (bytes.data()[i] > 1)
        return fail("bool element " + std::to_string(i) + " is " + std::to_string(bytes.data()[i]) +
                    ", expected 0 or 1");
  }
  return StoredTensor(kind, std::move(shape), *n, bytes.keep());
}

Result<StoredTensor> StoredTensor::from_ternary(std::vector<std::int64_t> shape, std::span<const std::int8_t> values) {
  const auto n = checked_numel(shape);
  if (!n) return fail("t2" + index_str(shape) + " has a negative extent or too many elements");
  if (static_cast<std::uint64_t>(*n) != values.size())
    return fail("t2" + index_str(shape) + " needs " + std::to_string(*n) + " values, got " +
                std::to_string(values.size()));
  // The message names the element as HostTensor::from_bytes does for t2 bytes.
  for (std::size_t i = 0; i < values.size(); ++i)
    if (values[i] < -1 || values[i] > 1)
      return fail("t2 element " + index_str(multi_index(static_cast<std::int64_t>(i), shape)) + " (byte " +
                  std::to_string(i) + ") is " + std::to_string(values[i]) + ", expected -1, 0 or 1");
  TERNJIT_TRY(std::vector<std::uint8_t> codes, pack_tern2(values));
  return StoredTensor(ElemKind::T2, std::move(shape), *n, SharedBytes::adopt(std::move(codes)));
}

StoredTensor StoredTensor::from_host(const HostTensor& t) {
  auto ok = validate(t, "StoredTensor::from_host");
  TERNJIT_CHECK(ok.ok(), ok.ok() ? std::string() : ok.error().message);
  if (t.kind == ElemKind::T2) return from_ternary(t.shape, t.to_i8()).value();
  return StoredTensor(t.kind, t.shape, t.numel(), SharedBytes::adopt(t.to_bytes()));
}

StoredTensor StoredTensor::zeros(ElemKind kind, std::vector<std::int64_t> shape) {
  const auto n = checked_numel(shape);
  TERNJIT_CHECK(n.has_value(), "StoredTensor::zeros: bad shape " + index_str(shape));
  // Value 0 is code 01 in every tern2 field, and all-zero bytes in every other kind.
  std::vector<std::uint8_t> bytes(*encoded_size(kind, *n), kind == ElemKind::T2 ? kTern2Padding : 0);
  return StoredTensor(kind, std::move(shape), *n, SharedBytes::adopt(std::move(bytes)));
}

StoredTensor StoredTensor::random(ElemKind kind, std::vector<std::int64_t> shape, std::uint64_t seed) {
  const auto n = checked_numel(shape);
  TERNJIT_CHECK(n.has_value(), "StoredTensor::random: bad shape " + index_str(shape));
  RandomValues gen(seed);
  std::vector<std::uint8_t> out(*encoded_size(kind, *n), kind == ElemKind::T2 ? kTern2Padding : 0);
  const std::size_t width = kind == ElemKind::T2 ? 0 : static_cast<std::size_t>(elem_bits(kind) / 8);
  for (std::size_t i = 0; i < static_cast<std::size_t>(*n); ++i) {
    const double v = gen.next(kind);
    if (kind == ElemKind::T2) {
      set_tern2(out.data(), i, static_cast<int>(v));
    } else {
      encode_element(kind, v, out.data() + i * width);
    }
  }
  return StoredTensor(kind, std::move(shape), *n, SharedBytes::adopt(std::move(out)));
}

double StoredTensor::at(std::size_t i) const {
  TERNJIT_CHECK(i < static_cast<std::size_t>(numel_), "StoredTensor::at out of range");
  if (kind_ == ElemKind::T2) return tern2_at(bytes_.data(), i);
  return decode_element(kind_, bytes_.data() + i * static_cast<std::size_t>(elem_bits(kind_) / 8));
}

void StoredTensor::read_int8(std::size_t first, std::span<std::int8_t> out) const {
  TERNJIT_CHECK(kind_ == ElemKind::T2 || kind_ == ElemKind::I8, "read_int8 of a " + describe());
  TERNJIT_CHECK(first <= static_cast<std::size_t>(numel_) && out.size() <= static_cast<std::size_t>(numel_) - first,
                "read_int8 out of range");
  const std::uint8_t* p = bytes_.data();
  if (kind_ == ElemKind::I8) {
    for (std::size_t j = 0; j < out.size(); ++j) out[j] = static_cast<std::int8_t>(p[first + j]);
    return;
  }
  for (std::size_t j = 0; j < out.size(); ++j) out[j] = static_cast<std::int8_t>(tern2_at(p, first + j));
}

HostTensor StoredTensor::to_host() const {
  HostTensor t{kind_, shape_, std::vector<double>(static_cast<std::size_t>(numel_))};
  for (std::size_t i = 0; i < t.data.size(); ++i) t.data[i] = at(i);
  return t;
}

std::vector<std::uint8_t> StoredTensor::to_bytes() const {
  if (kind_ != ElemKind::T2) return {bytes_.data(), bytes_.data() + bytes_.size()};
  std::vector<std::uint8_t> out(static_cast<std::size_t>(numel_));
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i] = static_cast<std::uint8_t>(static_cast<std::int8_t>(tern2_at(bytes_.data(), i)));
  return out;
}

std::string StoredTensor::describe() const { return std::string(elem_name(kind_)) + index_str(shape_); }

}  // namespace ternjit::ir
