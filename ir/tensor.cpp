// SPDX-License-Identifier: Apache-2.0
// tensor.cpp - HostTensor construction, byte encoding, validation and comparison.
#include "ir/tensor.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <limits>

#include "ir/builder.h"
#include "ir/ir.h"
#include "ir/numeric.h"

namespace ternjit::ir {

namespace {

Error fail(std::string msg) { return make_error(ErrorCode::InvalidInput, std::move(msg)); }

// Shortest round-trip decimal form of a double (deterministic, locale independent).
std::string num_str(double v) {
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, res.ptr);
}

std::string shape_str(std::span<const std::int64_t> shape) { return index_str(shape); }

std::int64_t numel_or_die(std::span<const std::int64_t> shape) {
  auto n = checked_numel(shape);
  TERNJIT_CHECK(n.has_value(), "HostTensor shape " + shape_str(shape) + " is negative or too large");
  return *n;
}

bool representable(double v, ElemKind k) {
  if (is_float(k) && std::isnan(v)) return true;
  return round_to_kind(v, k) == v;
}

std::uint32_t load_le(const std::uint8_t* p, int bytes) {
  std::uint32_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

void store_le(std::uint8_t* p, std::uint32_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}

}  // namespace

std::vector<std::int64_t> multi_index(std::int64_t flat, std::span<const std::int64_t> shape) {
  std::vector<std::int64_t> idx(shape.size(), 0);
  for (std::size_t d = shape.size(); d-- > 0;) {
    if (shape[d] == 0) break;
    idx[d] = flat % shape[d];
    flat /= shape[d];
  }
  return idx;
}

std::optional<std::int64_t> checked_numel(std::span<const std::int64_t> shape) {
  std::int64_t n = 1;
  for (std::int64_t e : shape) {
    if (e < 0) return std::nullopt;
    if (e != 0 && n > std::numeric_limits<std::int64_t>::max() / e) return std::nullopt;
    n *= e;
  }
  return n;
}

double decode_element(ElemKind kind, const std::uint8_t* p) {
  switch (kind) {
    case ElemKind::F32: return std::bit_cast<float>(load_le(p, 4));
    case ElemKind::F16: return f16_bits_to_f32(static_cast<std::uint16_t>(load_le(p, 2)));
    case ElemKind::BF16: return bf16_bits_to_f32(static_cast<std::uint16_t>(load_le(p, 2)));
    case ElemKind::I32: return static_cast<std::int32_t>(load_le(p, 4));
    case ElemKind::I8: case ElemKind::T2: return static_cast<std::int8_t>(*p);
    case ElemKind::U8: case ElemKind::Bool: return *p;
  }
  return 0;
}

void encode_element(ElemKind kind, double v, std::uint8_t* p) {
  switch (kind) {
    case ElemKind::F32: store_le(p, std::bit_cast<std::uint32_t>(static_cast<float>(v)), 4); break;
    case ElemKind::F16: store_le(p, f32_to_f16_bits(static_cast<float>(v)), 2); break;
    case ElemKind::BF16: store_le(p, f32_to_bf16_bits(static_cast<float>(v)), 2); break;
    case ElemKind::I32: store_le(p, static_cast<std::uint32_t>(static_cast<std::int32_t>(round_to_kind(v, kind))), 4); break;
    case ElemKind::I8: case ElemKind::T2:
      *p = static_cast<std::uint8_t>(static_cast<std::int8_t>(round_to_kind(v, kind)));
      break;
    case ElemKind::U8: case ElemKind::Bool: *p = static_cast<std::uint8_t>(round_to_kind(v, kind)); break;
  }
}

double RandomValues::next(ElemKind kind) {
  auto int_in = [&](std::int64_t lo, std::int64_t hi) {
    const auto range = static_cast<std::uint64_t>(hi - lo + 1);
    return static_cast<double>(lo + static_cast<std::int64_t>(gen_() % range));
  };
  switch (kind) {
    case ElemKind::F32: case ElemKind::F16: case ElemKind::BF16: {
      const double u = static_cast<double>(gen_() >> 11) * 0x1p-53;
      return round_to_kind(2.0 * u - 1.0, kind);
    }
    case ElemKind::I8: return int_in(-127, 127);
    case ElemKind::U8: return int_in(0, 255);
    case ElemKind::I32: return int_in(-1000, 1000);
    case ElemKind::T2: return int_in(-1, 1);
    case ElemKind::Bool: return int_in(0, 1);
  }
  return 0;
}

std::int64_t HostTensor::numel() const {
  std::int64_t n = 1;
  for (std::int64_t e : shape) n *= e;
  return n;
}

HostTensor HostTensor::zeros(ElemKind kind, std::vector<std::int64_t> shape) {
  auto n = numel_or_die(shape);
  return HostTensor{kind, std::move(shape), std::vector<double>(static_cast<std::size_t>(n), 0.0)};
}

HostTensor HostTensor::scalar(ElemKind kind, double value) {
  return HostTensor{kind, {}, {round_to_kind(value, kind)}};
}

HostTensor HostTensor::from_f32(std::vector<std::int64_t> shape, std::span<const float> values) {
  TERNJIT_CHECK(numel_or_die(shape) == static_cast<std::int64_t>(values.size()),
                "from_f32: " + std::to_string(values.size()) + " values for shape " + shape_str(shape));
  return HostTensor{ElemKind::F32, std::move(shape), std::vector<double>(values.begin(), values.end())};
}

HostTensor HostTensor::from_i8(std::vector<std::int64_t> shape, std::span<const std::int8_t> values) {
  TERNJIT_CHECK(numel_or_die(shape) == static_cast<std::int64_t>(values.size()),
                "from_i8: " + std::to_string(values.size()) + " values for shape " + shape_str(shape));
  return HostTensor{ElemKind::I8, std::move(shape), std::vector<double>(values.begin(), values.end())};
}

HostTensor HostTensor::from_i32(std::vector<std::int64_t> shape, std::span<const std::int32_t> values) {
  TERNJIT_CHECK(numel_or_die(shape) == static_cast<std::int64_t>(values.size()),
                "from_i32: " + std::to_string(values.size()) + " values for shape " + shape_str(shape));
  return HostTensor{ElemKind::I32, std::move(shape), std::vector<double>(values.begin(), values.end())};
}

HostTensor HostTensor::from_values(ElemKind kind, std::vector<std::int64_t> shape,
                                   std::span<const double> values) {
  TERNJIT_CHECK(numel_or_die(shape) == static_cast<std::int64_t>(values.size()),
                "from_values: " + std::to_string(values.size()) + " values for shape " + shape_str(shape));
  HostTensor t{kind, std::move(shape), {}};
  t.data.reserve(values.size());
  for (double v : values) t.data.push_back(round_to_kind(v, kind));
  return t;
}

Result<HostTensor> HostTensor::from_bytes(ElemKind kind, std::vector<std::int64_t> shape,
                                          std::span<const std::uint8_t> bytes) {
  auto n = checked_numel(shape);
  const auto width = static_cast<std::uint64_t>(elem_bits(kind) / 8);
  if (!n || static_cast<std::uint64_t>(*n) > std::numeric_limits<std::uint64_t>::max() / width)
    return fail("shape " + shape_str(shape) + " is negative or too large");
  const std::uint64_t need = static_cast<std::uint64_t>(*n) * width;
  if (bytes.size() != need)
    return fail(std::string(elem_name(kind)) + shape_str(shape) + " needs " + std::to_string(need) +
                " bytes, got " + std::to_string(bytes.size()));
  HostTensor t{kind, std::move(shape), {}};
  t.data.reserve(static_cast<std::size_t>(*n));
  const std::uint8_t* p = bytes.data();
  for (std::int64_t i = 0; i < *n; ++i, p += width) {
    const double v = decode_element(kind, p);
    if (kind == ElemKind::T2 && (v < -1 || v > 1))
      return fail("t2 element " + index_str(multi_index(i, t.shape)) + " (byte " + std::to_string(i) + ") is " +
                  num_str(v) + ", expected -1, 0 or 1");
    if (kind == ElemKind::Bool && v > 1)
      return fail("bool element " + index_str(multi_index(i, t.shape)) + " (byte " + std::to_string(i) + ") is " +
                  num_str(v) + ", expected 0 or 1");
    t.data.push_back(v);
  }
  return t;
}

HostTensor HostTensor::random(ElemKind kind, std::vector<std::int64_t> shape, std::uint64_t seed) {
  HostTensor t = zeros(kind, std::move(shape));
  RandomValues gen(seed);
  for (double& v : t.data) v = gen.next(kind);
  return t;
}

std::vector<float> HostTensor::to_f32() const {
  std::vector<float> out;
  out.reserve(data.size());
  for (double v : data) out.push_back(static_cast<float>(v));
  return out;
}

std::vector<std::int8_t> HostTensor::to_i8() const {
  std::vector<std::int8_t> out;
  out.reserve(data.size());
  for (double v : data) out.push_back(static_cast<std::int8_t>(round_to_kind(v, ElemKind::I8)));
  return out;
}

std::vector<std::int32_t> HostTensor::to_i32() const {
  std::vector<std::int32_t> out;
  out.reserve(data.size());
  for (double v : data) out.push_back(static_cast<std::int32_t>(round_to_kind(v, ElemKind::I32)));
  return out;
}

std::vector<std::uint8_t> HostTensor::to_bytes() const {
  const auto width = static_cast<std::size_t>(elem_bits(kind) / 8);
  std::vector<std::uint8_t> out(data.size() * width);
  for (std::size_t i = 0; i < data.size(); ++i) encode_element(kind, data[i], out.data() + i * width);
  return out;
}

std::string HostTensor::describe() const { return std::string(elem_name(kind)) + shape_str(shape); }

std::string index_str(std::span<const std::int64_t> index) {
  std::string s = "[";
  for (std::size_t i = 0; i < index.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(index[i]);
  }
  return s + "]";
}

Result<void> validate(const HostTensor& t, std::string_view what) {
  auto n = checked_numel(t.shape);
  if (!n) return fail(std::string(what) + " has shape " + shape_str(t.shape) + ", which is negative or too large");
  if (static_cast<std::uint64_t>(*n) != t.data.size())
    return fail(std::string(what) + " " + t.describe() + " needs " + std::to_string(*n) + " elements, got " +
                std::to_string(t.data.size()));
  for (std::size_t i = 0; i < t.data.size(); ++i) {
    if (!representable(t.data[i], t.kind))
      return fail(std::string(what) + " element " +
                  index_str(multi_index(static_cast<std::int64_t>(i), t.shape)) + " is " + num_str(t.data[i]) +
                  ", which is not a " + std::string(elem_name(t.kind)) + " value");
  }
  return success();
}

std::optional<Mismatch> compare(const HostTensor& expected, const HostTensor& actual, double rtol,
                                double atol) {
  if (expected.kind != actual.kind)
    return Mismatch{Mismatch::Reason::Kind, {}, 0, 0,
                    "kind differs: expected " + expected.describe() + ", got " + actual.describe()};
  if (expected.shape != actual.shape)
    return Mismatch{Mismatch::Reason::Shape, {}, 0, 0,
                    "shape differs: expected " + expected.describe() + ", got " + actual.describe()};
  if (expected.data.size() != actual.data.size())
    return Mismatch{Mismatch::Reason::Size, {}, 0, 0,
                    "data size differs: expected " + std::to_string(expected.data.size()) +
                        " elements, got " + std::to_string(actual.data.size())};
  for (std::size_t i = 0; i < expected.data.size(); ++i) {
    const double e = expected.data[i];
    const double a = actual.data[i];
    if (e == a || (std::isnan(e) && std::isnan(a))) continue;
    if (std::isfinite(e) && std::isfinite(a) && std::fabs(a - e) <= atol + rtol * std::fabs(e)) continue;
    auto idx = multi_index(static_cast<std::int64_t>(i), expected.shape);
    std::string msg = "element " + index_str(idx) + ": expected " + num_str(e) + ", got " + num_str(a);
    if (rtol != 0 || atol != 0)
      msg += " (|diff| " + num_str(std::fabs(a - e)) + " > atol " + num_str(atol) + " + rtol " +
             num_str(rtol) + " * |expected|)";
    return Mismatch{Mismatch::Reason::Value, std::move(idx), e, a, std::move(msg)};
  }
  return std::nullopt;
}

OutputTolerance output_tolerance(const HostTensor& expected, double rel) {
  double scale = 0;
  for (double v : expected.data)
    if (std::isfinite(v)) scale = std::max(scale, std::fabs(v));
  return {rel, rel * scale};
}

}  // namespace ternjit::ir
