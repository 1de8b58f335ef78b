// SPDX-License-Identifier: Apache-2.0
// weight_store.cpp - store_weight: the conversions of weight_store.h.
#include "formats/weight_store.h"

#include <limits>
#include <string>

#include "formats/ternary.h"
#include "ir/ir.h"
#include "ir/builder.h"

namespace ternjit::formats {

namespace {

Error fail(std::string msg) { return make_error(ErrorCode::InvalidInput, std::move(msg)); }

// The element count of `shape` holding `kind` elements in `bytes`, or the error naming
// what the shape needs.
Result<std::size_t> plain_count(ElemKind kind, const std::vector<std::int64_t>& shape, const ir::SharedBytes& bytes) {
  const std::string type = std::string(elem_name(kind)) + ir::index_str(shape);
  const auto n = ir::checked_numel(shape);
  const auto width = static_cast<std::uint64_t>(elem_bits(kind) / 8);
  if (!n || static_cast<std::uint64_t>(*n) > std::numeric_limits<std::uint64_t>::max() / width)
    return fail(type + " has a negative extent or too many elements");
  const std::uint64_t need = static_cast<std::uint64_t>(*n) * width;
  if (bytes.size() != need)
    return fail(type + " needs " + std::to_string(need) + " bytes, got " + std::to_string(bytes.size()));
  return static_cast<std::size_t>(*n);
}

}  // namespace

Result<ir::StoredTensor> store_weight(ElemKind declared, ElemKind given, WeightFormat format,
                                      std::vector<std::int64_t> shape, const ir::SharedBytes& bytes) {
  if (format != WeightFormat::Plain) {
    TERNJIT_CHECK(declared == ElemKind::T2 && given == ElemKind::U8, "store_weight: packed data must be u8 for t2");
    return store_packed(format, std::move(shape), bytes);
  }
  if (declared == given && declared != ElemKind::T2) return ir::StoredTensor::view(declared, std::move(shape), bytes);
  TERNJIT_TRY(const std::size_t n, plain_count(given, shape, bytes));
  if (declared == ElemKind::T2) {
    TERNJIT_CHECK(given == ElemKind::T2 || given == ElemKind::I8, "store_weight: t2 takes t2 or i8 values");
    return ir::StoredTensor::from_ternary(std::move(shape), {reinterpret_cast<const std::int8_t*>(bytes.data()), n});
  }
  TERNJIT_CHECK(is_float(declared) && is_float(given), "store_weight: no conversion between these kinds");
  // Another float kind: each value rounded to the declared kind, straight into its bytes.
  const auto in_width = static_cast<std::size_t>(elem_bits(given) / 8);
  const auto out_width = static_cast<std::size_t>(elem_bits(declared) / 8);
  std::vector<std::uint8_t> out(n * out_width);
  for (std::size_t i = 0; i < n; ++i) {
    const double v = ir::decode_element(given, bytes.data() + i * in_width);
    ir::encode_element(declared, ir::round_to_kind(v, declared), out.data() + i * out_width);
  }
  return ir::StoredTensor::view(declared, std::move(shape), ir::SharedBytes::adopt(std::move(out)));
}

}  // namespace ternjit::formats
