// SPDX-License-Identifier: Apache-2.0
// gguf.cpp - the GGUF reader (every length checked against the image), writer and ggml dequantizers.
#include "formats/gguf.h"

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <functional>
#include <cstring>
#include <limits>
#include <optional>
#include <set>
#include <utility>

#include "formats/mapped_file.h"
#include "formats/text.h"
#include "ir/ir.h"
#include "ir/numeric.h"

namespace ternjit::formats {
namespace {

constexpr std::uint64_t kMaxI63 = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
constexpr std::uint32_t kMaxDims = 4;  // GGML_MAX_DIMS
// ggml's block sizes (ggml-common.h): QK_K = 256, QK8_0 = 32.
constexpr std::uint64_t kQK = 256;
constexpr std::uint64_t kTq1Qs = (kQK - 4 * kQK / 64) / 5;  // 48 bytes of 5 trits each
constexpr std::uint64_t kTq1Qh = kQK / 64;                  // 4 bytes of 4 trits each

std::optional<GgufTensorType> tensor_type_of(std::uint32_t id) {
  switch (id) {
    case 0: case 1: case 2: case 3: case 6: case 7: case 8: case 9: case 10: case 11: case 12: case 13: case 14:
    case 15: case 24: case 25: case 26: case 27: case 28: case 30: case 34: case 35:
      return static_cast<GgufTensorType>(id);
    default: return std::nullopt;
  }
}

// Fixed size of a scalar value type, 0 for String/Array, nullopt for an unknown id.
std::optional<std::uint64_t> scalar_size(std::uint32_t id) {
  switch (id) {
    case 0: case 1: case 7: return 1;
    case 2: case 3: return 2;
    case 4: case 5: case 6: return 4;
    case 10: case 11: case 12: return 8;
    case 8: case 9: return 0;
    default: return std::nullopt;
  }
}

std::uint64_t load_le(const std::uint8_t* p, int n) {
  std::uint64_t v = 0;
  for (int k = n - 1; k >= 0; --k) v = v << 8 | p[k];
  return v;
}

std::uint16_t load_le16(const std::uint8_t* p) { return static_cast<std::uint16_t>(p[0] | p[1] << 8); }

// Byte size of `count` elements of `type`, or nullopt when count is not whole blocks or
// the size would exceed 2^63 - 1.
std::optional<std::uint64_t> byte_size(GgufTensorType type, std::uint64_t count) {
  const std::uint64_t block = gguf_block_elems(type);
  if (count % block != 0) return std::nullopt;
  const std::uint64_t blocks = count / block;
  const std::uint64_t per = gguf_block_bytes(type);
  if (blocks > kMaxI63 / per) return std::nullopt;
  return blocks * per;
}

// What a value is, for an error message: built only when there is an error (an array's
// millions of elements never format their labels).
using Label = std::function<std::string()>;

// A cursor over the image; every read checks the remaining length.
class Reader {
 public:
  Reader(const ir::SharedBytes& image, std::string_view display_name)
      : image_(image), data_(image.span()), display_name_(display_name) {}

  [[nodiscard]] Error fail(const std::string& message) const {
    return make_error(ErrorCode::InvalidInput, std::string(display_name_) + ": " + message);
  }
  [[nodiscard]] std::uint64_t pos() const { return pos_; }
  [[nodiscard]] std::uint64_t remaining() const { return data_.size() - pos_; }

  Result<std::uint64_t> uint(int n, const std::string& what) {
    return uint(n, [&] { return what; });
  }
  Result<std::uint64_t> uint(int n, const Label& what) {
    if (remaining() < static_cast<std::uint64_t>(n)) return truncated(static_cast<std::uint64_t>(n), what());
    const std::uint64_t v = load_le(data_.data() + pos_, n);
    pos_ += static_cast<std::uint64_t>(n);
    return v;
  }

  // A string of at most `max` bytes (a longer one is an error naming `what`).
  Result<std::string> string(const std::string& what, std::uint64_t max = std::numeric_limits<std::uint64_t>::max()) {
    TERNJIT_TRY(const std::uint64_t len, uint(8, what + " length"));
    if (len > max)
      return fail(what + " is " + std::to_string(len) + " bytes long, over the limit of " + std::to_string(max) +
                  " bytes");
    if (len > remaining()) return truncated(len, what);
    std::string s(reinterpret_cast<const char*>(data_.data() + pos_), static_cast<std::size_t>(len));
    pos_ += len;
    return s;
  }

  // Moves past `n` bytes. Precondition: n <= remaining().
  void skip(std::uint64_t n) { pos_ += n; }
  // The next `n` bytes. Precondition: n <= remaining().
  [[nodiscard]] std::span<const std::uint8_t> peek(std::uint64_t n) const {
    return data_.subspan(static_cast<std::size_t>(pos_), static_cast<std::size_t>(n));
  }
  // Bytes [begin, end) of the image: a region sharing its owner, or a copy when the image
  // is borrowed.
  [[nodiscard]] ir::SharedBytes region(std::uint64_t begin, std::uint64_t end) const {
    const auto b = static_cast<std::size_t>(begin), n = static_cast<std::size_t>(end - begin);
    return image_.owned() ? image_.slice(b, n) : ir::SharedBytes::copy_of(data_.subspan(b, n));
  }

  Error truncated(std::uint64_t need, const std::string& what) const {
    return fail(what + " needs " + std::to_string(need) + " bytes at offset " + std::to_string(pos_) +
                ", file has " + std::to_string(data_.size()));
  }

 private:
  const ir::SharedBytes& image_;
  std::span<const std::uint8_t> data_;
  std::string_view display_name_;
  std::uint64_t pos_ = 0;
};

// A key or tensor name from the file, quoted and escaped for a message (text.h).
std::string quoted(std::string_view s) { return quoted_printable(s); }

// Arrays nest at most this deep: an array at depth 0 (a key's value) .. 8.
constexpr int kMaxArrayDepth = 8;

// An array's element type id must be known, and its count must fit the rest of the image
// (every element takes at least one byte: strings 8, arrays 12) before anything is read.
Result<void> check_array_count(Reader& in, std::uint64_t elem_id, std::uint64_t count, const Label& what) {
  const std::optional<std::uint64_t> elem_size = scalar_size(static_cast<std::uint32_t>(elem_id));
  if (elem_id > 0xffffffffu || !elem_size) return in.fail(what() + ": unknown array element type id " + std::to_string(elem_id));
  const std::uint64_t min_size = *elem_size != 0 ? *elem_size : (elem_id == 8 ? 8 : 12);
  if (count > in.remaining() / min_size) {
    return in.fail(what() + ": array count " + std::to_string(count) + " exceeds what the remaining " +
                   std::to_string(in.remaining()) + " bytes can hold");
  }
  return success();
}

// Checks and moves past `count` elements of type `elem_id` of an array at nesting `depth`,
// storing nothing: an array is kept as a region of the image, so it costs time linear in
// its bytes and no memory of its own. Errors as read_value, naming the element ("key 'k'[12]").
Result<void> skip_elements(Reader& in, std::uint32_t elem_id, std::uint64_t count, int depth, const Label& what) {
  auto element = [&](std::uint64_t k) -> Label { return [&what, k] { return what() + "[" + std::to_string(k) + "]"; }; };
  switch (static_cast<GgufValueType>(elem_id)) {
    case GgufValueType::Bool: {
      const std::span<const std::uint8_t> bytes = in.peek(count);  // count fits: checked by the caller
      for (std::uint64_t k = 0; k < count; ++k)
        if (bytes[k] > 1)
          return in.fail(element(k)() + ": bool value " + std::to_string(bytes[k]) + ", expected 0 or 1");
      in.skip(count);
      return success();
    }
    case GgufValueType::String:
      for (std::uint64_t k = 0; k < count; ++k) {
        TERNJIT_TRY(const std::uint64_t len, in.uint(8, [&] { return element(k)() + " length"; }));
        if (len > in.remaining()) return in.truncated(len, element(k)());
        in.skip(len);
      }
      return success();
    case GgufValueType::Array:
      if (depth + 1 > kMaxArrayDepth)
        return in.fail(element(0)() + ": arrays nested more than " + std::to_string(kMaxArrayDepth) + " deep");
      for (std::uint64_t k = 0; k < count; ++k) {
        const Label inner = element(k);
        TERNJIT_TRY(const std::uint64_t inner_id, in.uint(4, [&] { return inner() + " array type"; }));
        TERNJIT_TRY(const std::uint64_t inner_count, in.uint(8, [&] { return inner() + " array count"; }));
        TERNJIT_TRY_VOID(check_array_count(in, inner_id, inner_count, inner));
        TERNJIT_TRY_VOID(skip_elements(in, static_cast<std::uint32_t>(inner_id), inner_count, depth + 1, inner));
      }
      return success();
    default:
      // A fixed-size scalar: the count was checked against the remaining bytes.
      in.skip(count * *scalar_size(elem_id));
      return success();
  }
}

Result<GgufValue> read_value(Reader& in, std::uint32_t type_id, const Label& what) {
  const std::optional<std::uint64_t> size = scalar_size(type_id);
  if (!size) return in.fail(what() + ": unknown value type id " + std::to_string(type_id));
  GgufValue v;
  v.type = static_cast<GgufValueType>(type_id);
  switch (v.type) {
    case GgufValueType::U8: case GgufValueType::U16: case GgufValueType::U32: case GgufValueType::U64: {
      TERNJIT_TRY(v.u, in.uint(static_cast<int>(*size), what));
      break;
    }
    case GgufValueType::I8: case GgufValueType::I16: case GgufValueType::I32: case GgufValueType::I64: {
      TERNJIT_TRY(const std::uint64_t raw, in.uint(static_cast<int>(*size), what));
      const int shift = 64 - 8 * static_cast<int>(*size);
      // Sign-extend the low `size` bytes.
      v.i = static_cast<std::int64_t>(raw << shift) >> shift;
      break;
    }
    case GgufValueType::F32: {
      TERNJIT_TRY(const std::uint64_t raw, in.uint(4, what));
      v.f = std::bit_cast<float>(static_cast<std::uint32_t>(raw));
      break;
    }
    case GgufValueType::F64: {
      TERNJIT_TRY(const std::uint64_t raw, in.uint(8, what));
      v.f = std::bit_cast<double>(raw);
      break;
    }
    case GgufValueType::Bool: {
      TERNJIT_TRY(const std::uint64_t raw, in.uint(1, what));
      if (raw > 1) return in.fail(what() + ": bool value " + std::to_string(raw) + ", expected 0 or 1");
      v.b = raw == 1;
      break;
    }
    case GgufValueType::String: {
      TERNJIT_TRY(v.str, in.string(what()));
      break;
    }
    case GgufValueType::Array: {
      TERNJIT_TRY(const std::uint64_t elem_id, in.uint(4, [&] { return what() + " array type"; }));
      TERNJIT_TRY(const std::uint64_t count, in.uint(8, [&] { return what() + " array count"; }));
      TERNJIT_TRY_VOID(check_array_count(in, elem_id, count, what));
      const std::uint64_t begin = in.pos();
      TERNJIT_TRY_VOID(skip_elements(in, static_cast<std::uint32_t>(elem_id), count, 0, what));
      v.array_type = static_cast<GgufValueType>(elem_id);
      v.array_count = count;
      v.array_bytes = in.region(begin, in.pos());
      break;
    }
  }
  return v;
}

void put_le(std::vector<std::uint8_t>& out, std::uint64_t v, int n) {
  for (int k = 0; k < n; ++k) out.push_back(static_cast<std::uint8_t>(v >> (8 * k)));
}

void put_string(std::vector<std::uint8_t>& out, std::string_view s) {
  put_le(out, s.size(), 8);
  out.insert(out.end(), s.begin(), s.end());
}

Result<void> put_value(std::vector<std::uint8_t>& out, const GgufValue& v, const std::string& key) {
  const auto id = static_cast<std::uint32_t>(v.type);
  const std::optional<std::uint64_t> size = scalar_size(id);
  if (!size) return make_error(ErrorCode::InvalidArgument, "key " + quoted(key) + ": invalid value type");
  switch (v.type) {
    case GgufValueType::U8: case GgufValueType::U16: case GgufValueType::U32: case GgufValueType::U64:
      put_le(out, v.u, static_cast<int>(*size));
      break;
    case GgufValueType::I8: case GgufValueType::I16: case GgufValueType::I32: case GgufValueType::I64:
      put_le(out, static_cast<std::uint64_t>(v.i), static_cast<int>(*size));
      break;
    case GgufValueType::F32: put_le(out, std::bit_cast<std::uint32_t>(static_cast<float>(v.f)), 4); break;
    case GgufValueType::F64: put_le(out, std::bit_cast<std::uint64_t>(v.f), 8); break;
    case GgufValueType::Bool: out.push_back(v.b ? 1 : 0); break;
    case GgufValueType::String: put_string(out, v.str); break;
    case GgufValueType::Array: {
      // The encoded elements as they are, once checked to hold exactly array_count
      // elements of array_type (a value built by hand may not).
      Reader check(v.array_bytes, "");
      const Label what = [&] { return "key " + quoted(key); };
      if (!check_array_count(check, static_cast<std::uint32_t>(v.array_type), v.array_count, what).ok() ||
          !skip_elements(check, static_cast<std::uint32_t>(v.array_type), v.array_count, 0, what).ok() ||
          check.remaining() != 0)
        return make_error(ErrorCode::InvalidArgument, "key " + quoted(key) + ": array_bytes do not hold " +
                                                          std::to_string(v.array_count) + " elements of its array_type");
      put_le(out, static_cast<std::uint32_t>(v.array_type), 4);
      put_le(out, v.array_count, 8);
      out.insert(out.end(), v.array_bytes.span().begin(), v.array_bytes.span().end());
      break;
    }
  }
  return success();
}

Result<std::uint64_t> alignment_of(const GgufValue& v, const std::string& prefix, ErrorCode code) {
  if (v.type != GgufValueType::U32 || v.u == 0 || !std::has_single_bit(v.u)) {
    return make_error(code, prefix + "general.alignment must be a u32 power of two");
  }
  return v.u;
}

std::uint64_t align_up(std::uint64_t n, std::uint64_t alignment) {
  return (n + alignment - 1) / alignment * alignment;
}

Result<void> check_size(const GgufTensor& t) {
  const std::uint64_t n = t.elem_count();
  const std::optional<std::uint64_t> need = byte_size(t.type, n);
  if (!need || *need != t.bytes.size()) {
    return make_error(ErrorCode::InvalidInput, "tensor " + quoted(t.name) + ": " + std::to_string(t.bytes.size()) +
                                                   " bytes do not hold " + std::to_string(n) + " " +
                                                   std::string(gguf_type_name(t.type)) + " elements");
  }
  return success();
}

float f16_at(const std::uint8_t* p) { return ir::f16_bits_to_f32(load_le16(p)); }

}  // namespace

std::string_view gguf_type_name(GgufTensorType type) {
  switch (type) {
    case GgufTensorType::F32: return "F32";
    case GgufTensorType::F16: return "F16";
    case GgufTensorType::Q8_0: return "Q8_0";
    case GgufTensorType::BF16: return "BF16";
    case GgufTensorType::TQ1_0: return "TQ1_0";
    case GgufTensorType::TQ2_0: return "TQ2_0";
    case GgufTensorType::Q4_0: return "Q4_0";
    case GgufTensorType::Q4_1: return "Q4_1";
    case GgufTensorType::Q5_0: return "Q5_0";
    case GgufTensorType::Q5_1: return "Q5_1";
    case GgufTensorType::Q8_1: return "Q8_1";
    case GgufTensorType::Q2_K: return "Q2_K";
    case GgufTensorType::Q3_K: return "Q3_K";
    case GgufTensorType::Q4_K: return "Q4_K";
    case GgufTensorType::Q5_K: return "Q5_K";
    case GgufTensorType::Q6_K: return "Q6_K";
    case GgufTensorType::Q8_K: return "Q8_K";
    case GgufTensorType::I8: return "I8";
    case GgufTensorType::I16: return "I16";
    case GgufTensorType::I32: return "I32";
    case GgufTensorType::I64: return "I64";
    case GgufTensorType::F64: return "F64";
  }
  return "?";
}

std::uint64_t gguf_block_elems(GgufTensorType type) {
  switch (type) {
    case GgufTensorType::F32: case GgufTensorType::F16: case GgufTensorType::BF16: return 1;
    case GgufTensorType::I8: case GgufTensorType::I16: case GgufTensorType::I32: case GgufTensorType::I64:
    case GgufTensorType::F64: return 1;
    case GgufTensorType::Q8_0: return 32;
    case GgufTensorType::Q4_0: case GgufTensorType::Q4_1: case GgufTensorType::Q5_0: case GgufTensorType::Q5_1:
    case GgufTensorType::Q8_1: return 32;
    case GgufTensorType::TQ1_0: case GgufTensorType::TQ2_0: return kQK;
    case GgufTensorType::Q2_K: case GgufTensorType::Q3_K: case GgufTensorType::Q4_K: case GgufTensorType::Q5_K:
    case GgufTensorType::Q6_K: case GgufTensorType::Q8_K: return kQK;
  }
  return 1;
}

std::uint64_t gguf_block_bytes(GgufTensorType type) {
  switch (type) {
    case GgufTensorType::F32: return 4;
    case GgufTensorType::F16: case GgufTensorType::BF16: return 2;
    case GgufTensorType::Q8_0: return 2 + 32;
    case GgufTensorType::TQ1_0: return kTq1Qs + kTq1Qh + 2;
    case GgufTensorType::TQ2_0: return kQK / 4 + 2;
    // ggml-common.h: block_q4_0 {d; qs[16]}, q4_1 {d, m; qs[16]}, q5_0 {d; qh[4]; qs[16]},
    // q5_1 {d, m; qh[4]; qs[16]}, q8_1 {d, s; qs[32]}, q2_K {scales[16]; qs[64]; d, dmin},
    // q3_K {hmask[32]; qs[64]; scales[12]; d}, q4_K {d, dmin; scales[12]; qs[128]},
    // q5_K {d, dmin; scales[12]; qh[32]; qs[128]}, q6_K {ql[128]; qh[64]; scales[16]; d},
    // q8_K {float d; qs[256]; int16 bsums[16]}.
    case GgufTensorType::Q4_0: return 18;
    case GgufTensorType::Q4_1: return 20;
    case GgufTensorType::Q5_0: return 22;
    case GgufTensorType::Q5_1: return 24;
    case GgufTensorType::Q8_1: return 36;
    case GgufTensorType::Q2_K: return 84;
    case GgufTensorType::Q3_K: return 110;
    case GgufTensorType::Q4_K: return 144;
    case GgufTensorType::Q5_K: return 176;
    case GgufTensorType::Q6_K: return 210;
    case GgufTensorType::Q8_K: return 292;
    case GgufTensorType::I8: return 1;
    case GgufTensorType::I16: return 2;
    case GgufTensorType::I32: return 4;
    case GgufTensorType::I64: case GgufTensorType::F64: return 8;
  }
  return 1;
}

std::uint64_t GgufTensor::elem_count() const {
  std::uint64_t n = 1;
  for (std::uint64_t d : dims) n *= d;  // dims are validated (product < 2^63) by parse and serialize
  return n;
}

std::vector<GgufValue> GgufValue::array_elements(std::size_t limit) const {
  TERNJIT_CHECK(type == GgufValueType::Array, "GgufValue::array_elements: not an array");
  Reader in(array_bytes, "array");
  const std::uint64_t n = std::min<std::uint64_t>(limit, array_count);
  std::vector<GgufValue> out;
  out.reserve(static_cast<std::size_t>(n));
  for (std::uint64_t k = 0; k < n; ++k) {
    auto e = read_value(in, static_cast<std::uint32_t>(array_type), [k] { return "element " + std::to_string(k); });
    TERNJIT_CHECK(e.ok(), "GgufValue::array_elements: array_bytes do not hold array_count elements of array_type");
    out.push_back(std::move(e.value()));
  }
  return out;
}

Result<GgufValue> make_gguf_array(GgufValueType elem_type, std::span<const GgufValue> elements) {
  std::vector<std::uint8_t> bytes;
  for (std::size_t k = 0; k < elements.size(); ++k) {
    if (elements[k].type != elem_type)
      return make_error(ErrorCode::InvalidArgument, "array element " + std::to_string(k) + " has another type than the array's");
    TERNJIT_TRY_VOID(put_value(bytes, elements[k], "array element " + std::to_string(k)));
  }
  if (!scalar_size(static_cast<std::uint32_t>(elem_type)))
    return make_error(ErrorCode::InvalidArgument, "array element type id " +
                                                      std::to_string(static_cast<std::uint32_t>(elem_type)) + " is unknown");
  GgufValue v;
  v.type = GgufValueType::Array;
  v.array_type = elem_type;
  v.array_count = elements.size();
  v.array_bytes = ir::SharedBytes::adopt(std::move(bytes));
  return v;
}

const GgufValue* GgufFile::find(std::string_view key) const {
  for (const GgufKv& kv : metadata) {
    if (kv.key == key) return &kv.value;
  }
  return nullptr;
}

const GgufTensor* GgufFile::find_tensor(std::string_view name) const {
  for (const GgufTensor& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

namespace {
Result<const GgufValue*> lookup(const GgufFile& file, std::string_view key) {
  const GgufValue* v = file.find(key);
  if (v == nullptr) return make_error(ErrorCode::NotFound, "no metadata key " + quoted(key));
  return v;
}
Error wrong_type(std::string_view key, std::string_view want) {
  return make_error(ErrorCode::InvalidInput, "metadata key " + quoted(key) + " is not " + std::string(want));
}
}  // namespace

Result<std::string> GgufFile::get_string(std::string_view key) const {
  TERNJIT_TRY(const GgufValue* v, lookup(*this, key));
  if (v->type != GgufValueType::String) return wrong_type(key, "a string");
  return v->str;
}

Result<std::uint64_t> GgufFile::get_uint(std::string_view key) const {
  TERNJIT_TRY(const GgufValue* v, lookup(*this, key));
  switch (v->type) {
    case GgufValueType::U8: case GgufValueType::U16: case GgufValueType::U32: case GgufValueType::U64: return v->u;
    case GgufValueType::I8: case GgufValueType::I16: case GgufValueType::I32: case GgufValueType::I64:
      if (v->i < 0) return wrong_type(key, "a non-negative integer");
      return static_cast<std::uint64_t>(v->i);
    default: return wrong_type(key, "an integer");
  }
}

Result<std::int64_t> GgufFile::get_int(std::string_view key) const {
  TERNJIT_TRY(const GgufValue* v, lookup(*this, key));
  switch (v->type) {
    case GgufValueType::U8: case GgufValueType::U16: case GgufValueType::U32: case GgufValueType::U64:
      if (v->u > kMaxI63) return wrong_type(key, "an integer within int64");
      return static_cast<std::int64_t>(v->u);
    case GgufValueType::I8: case GgufValueType::I16: case GgufValueType::I32: case GgufValueType::I64: return v->i;
    default: return wrong_type(key, "an integer");
  }
}

Result<double> GgufFile::get_float(std::string_view key) const {
  TERNJIT_TRY(const GgufValue* v, lookup(*this, key));
  if (v->type != GgufValueType::F32 && v->type != GgufValueType::F64) return wrong_type(key, "a float");
  return v->f;
}

Result<bool> GgufFile::get_bool(std::string_view key) const {
  TERNJIT_TRY(const GgufValue* v, lookup(*this, key));
  if (v->type != GgufValueType::Bool) return wrong_type(key, "a bool");
  return v->b;
}

Result<GgufFile> parse_gguf(const ir::SharedBytes& data, std::string_view display_name) {
  Reader in(data, display_name);
  const std::string prefix = std::string(display_name) + ": ";
  TERNJIT_TRY(const std::uint64_t magic, in.uint(4, "magic"));
  if (magic != 0x46554747u) return in.fail("bad magic: not a GGUF file");  // "GGUF" little-endian
  TERNJIT_TRY(const std::uint64_t version, in.uint(4, "version"));
  if (version == 0x02000000u || version == 0x03000000u) {
    return in.fail("version " + std::to_string(version >> 24) +
                   " is byte-swapped: big-endian GGUF files are not supported");
  }
  if (version != 2 && version != 3) {
    return in.fail("version " + std::to_string(version) + " is not supported, expected 2 or 3");
  }
  GgufFile file;
  file.version = static_cast<std::uint32_t>(version);
  TERNJIT_TRY(const std::uint64_t tensor_count, in.uint(8, "tensor_count"));
  TERNJIT_TRY(const std::uint64_t kv_count, in.uint(8, "kv_count"));
  // A key/value pair takes at least 13 bytes (key length, type, one value byte) and a
  // tensor info at least 24 (name length, n_dims, type, offset).
  if (kv_count > in.remaining() / 13) {
    return in.fail("kv_count " + std::to_string(kv_count) + " exceeds what the file can hold");
  }
  if (kv_count > kMaxGgufMetadataPairs) {
    return in.fail("kv_count " + std::to_string(kv_count) + " is over the limit of " +
                   std::to_string(kMaxGgufMetadataPairs) + " key/value pairs (a limit of this reader)");
  }
  if (tensor_count > in.remaining() / 24) {
    return in.fail("tensor_count " + std::to_string(tensor_count) + " exceeds what the file can hold");
  }
  file.metadata.reserve(static_cast<std::size_t>(kv_count));
  for (std::uint64_t k = 0; k < kv_count; ++k) {
    const std::string what = "key/value " + std::to_string(k);
    GgufKv kv;
    TERNJIT_TRY(kv.key, in.string(what + " key"));
    TERNJIT_TRY(const std::uint64_t type, in.uint(4, "key " + quoted(kv.key) + " type"));
    TERNJIT_TRY(kv.value, read_value(in, static_cast<std::uint32_t>(type), [&] { return "key " + quoted(kv.key); }));
    if (kv.key == "general.alignment") {
      TERNJIT_TRY(file.alignment, alignment_of(kv.value, prefix, ErrorCode::InvalidInput));
    }
    file.metadata.push_back(std::move(kv));
  }

  file.tensors.reserve(static_cast<std::size_t>(tensor_count));
  std::set<std::string> names;
  for (std::uint64_t k = 0; k < tensor_count; ++k) {
    GgufTensor t;
    TERNJIT_TRY(t.name, in.string("tensor " + std::to_string(k) + " name", kMaxTensorNameBytes));
    const std::string what = "tensor " + quoted(t.name);
    if (!names.insert(t.name).second) return in.fail(what + ": name appears more than once");
    TERNJIT_TRY(const std::uint64_t n_dims, in.uint(4, what + " n_dims"));
    if (n_dims == 0 || n_dims > kMaxDims) {
      return in.fail(what + ": n_dims " + std::to_string(n_dims) + ", expected 1 to 4");
    }
    std::uint64_t count = 1;
    for (std::uint64_t d = 0; d < n_dims; ++d) {
      const std::string field = what + " ne[" + std::to_string(d) + "]";
      TERNJIT_TRY(const std::uint64_t ne, in.uint(8, field));
      if (ne > kMaxI63) return in.fail(field + " = " + std::to_string(ne) + " is negative as int64");
      if (ne != 0 && count > kMaxI63 / ne) return in.fail(field + ": element count overflows int64");
      count *= ne;
      t.dims.push_back(ne);
    }
    TERNJIT_TRY(const std::uint64_t type_id, in.uint(4, what + " type"));
    const std::optional<GgufTensorType> type = tensor_type_of(static_cast<std::uint32_t>(type_id));
    if (!type) return in.fail(what + ": unknown or unsupported ggml type id " + std::to_string(type_id));
    t.type = *type;
    if (t.dims[0] % gguf_block_elems(t.type) != 0) {
      return in.fail(what + ": ne[0] = " + std::to_string(t.dims[0]) + " is not a multiple of the " +
                     std::string(gguf_type_name(t.type)) + " block size " + std::to_string(gguf_block_elems(t.type)));
    }
    if (!byte_size(t.type, count)) return in.fail(what + ": byte size overflows int64");
    TERNJIT_TRY(t.offset, in.uint(8, what + " offset"));
    // The bytes are attached once the data section's start is known.
    file.tensors.push_back(std::move(t));
  }

  const std::uint64_t data_start = align_up(in.pos(), file.alignment);
  const std::uint64_t file_size = data.size();
  std::vector<std::pair<std::uint64_t, std::size_t>> ranges;  // (begin, tensor index)
  for (std::size_t k = 0; k < file.tensors.size(); ++k) {
    GgufTensor& t = file.tensors[k];
    const std::string what = "tensor " + quoted(t.name);
    if (t.offset % file.alignment != 0) {
      return in.fail(what + ": offset " + std::to_string(t.offset) + " is not a multiple of the alignment " +
                     std::to_string(file.alignment));
    }
    const std::uint64_t size = *byte_size(t.type, t.elem_count());
    if (data_start > file_size || t.offset > file_size - data_start || size > file_size - data_start - t.offset) {
      return in.fail(what + ": data [" + std::to_string(t.offset) + ", +" + std::to_string(size) +
                     ") of the data section at " + std::to_string(data_start) + " ends past the end of the file (" +
                     std::to_string(file_size) + " bytes)");
    }
    const auto begin = static_cast<std::size_t>(data_start + t.offset);
    t.bytes = data.owned() ? data.slice(begin, static_cast<std::size_t>(size))
                           : ir::SharedBytes::copy_of(data.span().subspan(begin, static_cast<std::size_t>(size)));
    ranges.emplace_back(t.offset, k);
  }
  // Sorted by offset, each non-empty tensor is checked against the non-empty one before
  // it that ends last (not merely its neighbour, which may be empty or end earlier).
  std::sort(ranges.begin(), ranges.end());
  const GgufTensor* furthest = nullptr;
  for (const auto& [offset, k] : ranges) {
    const GgufTensor& next = file.tensors[k];
    if (next.bytes.empty()) continue;
    if (furthest != nullptr && furthest->offset + furthest->bytes.size() > next.offset) {
      return in.fail("tensor " + quoted(furthest->name) + " and tensor " + quoted(next.name) + " overlap");
    }
    if (furthest == nullptr || next.offset + next.bytes.size() > furthest->offset + furthest->bytes.size()) {
      furthest = &next;
    }
  }
  return file;
}

Result<GgufFile> read_gguf(const std::string& path) {
  TERNJIT_TRY(ir::SharedBytes bytes, map_file(path));
  return parse_gguf(bytes, path);
}

namespace {

// One tensor's header entry: what serialize_gguf checks and writes for it.
struct TensorInfo {
  std::string_view name;
  GgufTensorType type;
  std::span<const std::uint64_t> dims;
};

// The header (magic .. tensor infos, padded to the alignment): `sizes` gets each tensor's
// byte size, `alignment` the data section's. Errors as serialize_gguf.
Result<std::vector<std::uint8_t>> serialize_header(std::span<const GgufKv> metadata, std::span<const TensorInfo> infos,
                                                   std::vector<std::uint64_t>& sizes, std::uint64_t& alignment) {
  alignment = 32;
  std::vector<std::uint8_t> out;
  put_le(out, 0x46554747u, 4);
  put_le(out, 3, 4);
  put_le(out, infos.size(), 8);
  put_le(out, metadata.size(), 8);
  for (const GgufKv& kv : metadata) {
    if (kv.key == "general.alignment") {
      TERNJIT_TRY(alignment, alignment_of(kv.value, "", ErrorCode::InvalidArgument));
    }
    put_string(out, kv.key);
    put_le(out, static_cast<std::uint32_t>(kv.value.type), 4);
    TERNJIT_TRY_VOID(put_value(out, kv.value, kv.key));
  }
  std::set<std::string_view> names;
  std::uint64_t offset = 0;
  for (const TensorInfo& t : infos) {
    const std::string what = "tensor " + quoted(std::string(t.name));
    if (!names.insert(t.name).second) return make_error(ErrorCode::InvalidArgument, what + ": name repeats");
    if (t.dims.empty() || t.dims.size() > kMaxDims) {
      return make_error(ErrorCode::InvalidArgument, what + ": needs 1 to 4 dims");
    }
    std::uint64_t count = 1;
    for (std::uint64_t d : t.dims) {
      if (d > kMaxI63 || (d != 0 && count > kMaxI63 / d)) {
        return make_error(ErrorCode::InvalidArgument, what + ": element count overflows int64");
      }
      count *= d;
    }
    if (t.dims[0] % gguf_block_elems(t.type) != 0) {
      return make_error(ErrorCode::InvalidArgument, what + ": ne[0] is not a multiple of the block size");
    }
    const std::optional<std::uint64_t> size = byte_size(t.type, count);
    if (!size) return make_error(ErrorCode::InvalidArgument, what + ": byte size overflows int64");
    sizes.push_back(*size);
    put_string(out, t.name);
    put_le(out, t.dims.size(), 4);
    for (std::uint64_t d : t.dims) put_le(out, d, 8);
    put_le(out, static_cast<std::uint32_t>(t.type), 4);
    put_le(out, offset, 8);
    offset = align_up(offset + *size, alignment);
  }
  out.resize(static_cast<std::size_t>(align_up(out.size(), alignment)), 0);
  return out;
}

}  // namespace

Result<std::vector<std::uint8_t>> serialize_gguf(std::span<const GgufKv> metadata,
                                                 std::span<const GgufTensor> tensors) {
  std::vector<TensorInfo> infos;
  for (const GgufTensor& t : tensors) infos.push_back({t.name, t.type, t.dims});
  std::vector<std::uint64_t> sizes;
  std::uint64_t alignment = 32;
  TERNJIT_TRY(std::vector<std::uint8_t> out, serialize_header(metadata, infos, sizes, alignment));
  for (std::size_t k = 0; k < tensors.size(); ++k)
    if (sizes[k] != tensors[k].bytes.size())
      return make_error(ErrorCode::InvalidArgument, "tensor " + quoted(tensors[k].name) + ": " +
                                                        std::to_string(tensors[k].bytes.size()) +
                                                        " bytes do not match its type and dims");
  const std::size_t data_start = out.size();
  for (const GgufTensor& t : tensors) {
    out.insert(out.end(), t.bytes.span().begin(), t.bytes.span().end());
    out.resize(data_start + static_cast<std::size_t>(align_up(out.size() - data_start, alignment)), 0);
  }
  return out;
}

Result<void> write_gguf(const std::string& path, std::span<const GgufKv> metadata,
                        std::span<const GgufTensor> tensors) {
  TERNJIT_TRY(const std::vector<std::uint8_t> image, serialize_gguf(metadata, tensors));
  return write_file_atomic(path, image);
}

Result<void> write_gguf_streamed(const std::string& path, std::span<const GgufKv> metadata,
                                 std::span<const GgufTensorSource> tensors) {
  std::vector<TensorInfo> infos;
  for (const GgufTensorSource& t : tensors) infos.push_back({t.name, t.type, t.dims});
  std::vector<std::uint64_t> sizes;
  std::uint64_t alignment = 32;
  TERNJIT_TRY(const std::vector<std::uint8_t> header, serialize_header(metadata, infos, sizes, alignment));
  TERNJIT_TRY(const ExclusiveTemp tf, create_temp_beside(path));
  const std::string& tmp = tf.path;
  std::FILE* f = ::fdopen(tf.fd, "wb");
  if (!f) {
    ::close(tf.fd);
    std::remove(tmp.c_str());
    return make_error(ErrorCode::IoError, "cannot open " + quoted(tmp) + " for writing");
  }
  auto fail = [&](const std::string& why) -> Result<void> {
    std::fclose(f);
    std::remove(tmp.c_str());
    return make_error(ErrorCode::IoError, path + ": " + why);
  };
  if (std::fwrite(header.data(), 1, header.size(), f) != header.size()) return fail("writing the header failed");
  std::vector<std::uint8_t> bytes;
  for (std::size_t k = 0; k < tensors.size(); ++k) {
    const auto size = static_cast<std::size_t>(sizes[k]);
    bytes.assign(static_cast<std::size_t>(align_up(sizes[k], alignment)), 0);
    if (auto filled = tensors[k].fill(std::span<std::uint8_t>(bytes.data(), size)); !filled.ok()) {
      std::fclose(f);
      std::remove(tmp.c_str());
      return filled;
    }
    if (std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size())
      return fail("writing tensor " + quoted(tensors[k].name) + " failed");
  }
  // On disk before the rename makes it visible: a crash leaves the old file or the whole new one.
  if (std::fflush(f) != 0 || ::fsync(::fileno(f)) != 0) return fail("flushing the file to disk failed");
  if (std::fclose(f) != 0) {
    std::remove(tmp.c_str());
    return make_error(ErrorCode::IoError, path + ": closing the file failed");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return make_error(ErrorCode::IoError, "cannot rename " + quoted(tmp) + " to " + quoted(path));
  }
  return success();
}

void encode_tq2_0_block(const std::int8_t* values, float d, std::uint8_t* out) {
  // block_tq2_0 { uint8_t qs[64]; ggml_half d; }: byte 32 j + m, bits 2 l hold element
  // 128 j + 32 l + m as value + 1 (quantize_row_tq2_0_ref).
  for (int j = 0; j < 2; ++j)
    for (int m = 0; m < 32; ++m) {
      unsigned byte = 0;
      for (int l = 0; l < 4; ++l) byte |= static_cast<unsigned>(values[128 * j + 32 * l + m] + 1) << (2 * l);
      out[32 * j + m] = static_cast<std::uint8_t>(byte);
    }
  const std::uint16_t h = ir::f32_to_f16_bits(d);
  out[64] = static_cast<std::uint8_t>(h & 0xFF);
  out[65] = static_cast<std::uint8_t>(h >> 8);
}

bool gguf_type_converted(GgufTensorType type) {
  switch (type) {
    case GgufTensorType::F32: case GgufTensorType::F16: case GgufTensorType::BF16: case GgufTensorType::Q8_0:
    case GgufTensorType::TQ1_0: case GgufTensorType::TQ2_0: return true;
    default: return false;
  }
}

Result<std::vector<float>> dequantize_gguf(const GgufTensor& t) {
  TERNJIT_TRY_VOID(check_size(t));
  if (!gguf_type_converted(t.type)) {
    return make_error(ErrorCode::InvalidInput, "tensor " + quoted(t.name) + ": type " +
                                                   std::string(gguf_type_name(t.type)) +
                                                   " is not one ternjit converts (F32, F16, BF16, Q8_0, TQ1_0, TQ2_0)");
  }
  const auto n = static_cast<std::size_t>(t.elem_count());
  const std::uint8_t* p = t.bytes.data();
  std::vector<float> out(n);
  switch (t.type) {
    case GgufTensorType::F32:
      for (std::size_t i = 0; i < n; ++i) out[i] = std::bit_cast<float>(static_cast<std::uint32_t>(load_le(p + 4 * i, 4)));
      break;
    case GgufTensorType::F16:
      for (std::size_t i = 0; i < n; ++i) out[i] = f16_at(p + 2 * i);
      break;
    case GgufTensorType::BF16:
      for (std::size_t i = 0; i < n; ++i) out[i] = ir::bf16_bits_to_f32(load_le16(p + 2 * i));
      break;
    case GgufTensorType::Q8_0:
      // block_q8_0 { ggml_half d; int8_t qs[32]; }: y = qs[j] * d.
      for (std::size_t b = 0; b < n / 32; ++b) {
        const std::uint8_t* blk = p + 34 * b;
        const float d = f16_at(blk);
        for (std::size_t j = 0; j < 32; ++j) out[32 * b + j] = static_cast<float>(static_cast<std::int8_t>(blk[2 + j])) * d;
      }
      break;
    case GgufTensorType::TQ2_0:
      // dequantize_row_tq2_0: (float)(q - 1) * d, code 3 (value 2) included, as ggml.
      for (std::size_t i = 0; i < n; ++i) {
        const std::uint8_t* blk = p + 66 * (i / kQK);
        const std::size_t e = i % kQK;  // e = 128 * half + 32 * shift + m
        const int q = (blk[(e / 128) * 32 + e % 32] >> (2 * ((e / 32) % 4))) & 3;
        out[i] = static_cast<float>(q - 1) * f16_at(blk + 64);
      }
      break;
    case GgufTensorType::TQ1_0: {
      TERNJIT_TRY(const GgufTernary tern, gguf_ternary(t));
      // ggml computes (float)(xi - 1) * d: the same product of a small integer and d.
      for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<float>(tern.values[i]) * tern.scales[i / kQK];
      break;
    }
    default: TERNJIT_UNREACHABLE("dequantize_gguf: a type not converted is refused above");
  }
  return out;
}

bool gguf_ternary_block(GgufTensorType type, const std::uint8_t* p, std::uint8_t* codes, float* scale) {
  TERNJIT_CHECK(type == GgufTensorType::TQ1_0 || type == GgufTensorType::TQ2_0, "gguf_ternary_block: not ternary");
  if (type == GgufTensorType::TQ2_0) {
    // block_tq2_0 { uint8_t qs[64]; ggml_half d; } (dequantize_row_tq2_0): for each
    // 32-byte half j, for shift l = 0..3, for byte m: ((qs[j + m] >> 2l) & 3) - 1, so
    // element 128 j/32 + 32 l + m. The code is value + 1 already.
    *scale = f16_at(p + 64);
    std::uint8_t bad = 0;
    for (std::size_t j = 0; j < 2; ++j) {
      for (int l = 0; l < 4; ++l) {
        for (std::size_t m = 0; m < 32; ++m) {
          const auto q = static_cast<std::uint8_t>((p[32 * j + m] >> (2 * l)) & 3);
          codes[128 * j + 32 * static_cast<std::size_t>(l) + m] = q;
          bad |= static_cast<std::uint8_t>(q & (q >> 1));
        }
      }
    }
    return bad == 0;
  }
  // block_tq1_0 { uint8_t qs[48]; uint8_t qh[4]; ggml_half d; } (dequantize_row_tq1_0):
  // each byte holds 5 (qs) or 4 (qh) trits as a fixed-point fraction; trit n is the top
  // base-3 digit of (byte * 3^n mod 256), extracted as (q * 3) >> 8. The value order:
  // qs[0..32) for n = 0..4, then qs[32..48) for n = 0..4, then qh[0..4) for n = 0..3.
  static constexpr std::uint8_t kPow3[6] = {1, 3, 9, 27, 81, 243};
  auto trit = [](std::uint8_t byte, int n) {
    const auto q = static_cast<std::uint8_t>(byte * kPow3[n]);  // uint8 wrap, as ggml
    return static_cast<std::uint8_t>((static_cast<std::uint16_t>(q) * 3) >> 8);
  };
  const std::uint8_t* qh = p + kTq1Qs;
  *scale = f16_at(qh + kTq1Qh);
  std::size_t e = 0;
  for (int n5 = 0; n5 < 5; ++n5)
    for (std::size_t m = 0; m < 32; ++m) codes[e++] = trit(p[m], n5);
  for (int n5 = 0; n5 < 5; ++n5)
    for (std::size_t m = 32; m < 48; ++m) codes[e++] = trit(p[m], n5);
  for (int n4 = 0; n4 < 4; ++n4)
    for (std::size_t m = 0; m < kTq1Qh; ++m) codes[e++] = trit(qh[m], n4);
  return true;  // (q * 3) >> 8 of a byte is at most 2
}

bool gguf_q2_0_block(const std::uint8_t* p, std::uint8_t* codes, float* scale) {
  // block_q2_0 { ggml_half d; uint8_t qs[16]; } (dequantize_row_q2_0): element j is
  // (qs[j / 4] >> 2 (j % 4)) & 3, the value code - 1: 0, 1, 2 are -1, 0, +1; 3 is +2.
  *scale = f16_at(p);
  std::uint8_t bad = 0;
  for (std::size_t j = 0; j < kGgufQ2_0Elems; ++j) {
    const auto q = static_cast<std::uint8_t>((p[2 + j / 4] >> (2 * (j % 4))) & 3);
    codes[j] = q;
    bad |= static_cast<std::uint8_t>(q & (q >> 1));
  }
  return bad == 0;
}

Result<GgufTernary> gguf_ternary(const GgufTensor& t) {
  if (t.type != GgufTensorType::TQ1_0 && t.type != GgufTensorType::TQ2_0) {
    return make_error(ErrorCode::InvalidInput, "tensor " + quoted(t.name) + ": type " +
                                                   std::string(gguf_type_name(t.type)) + " is not ternary");
  }
  TERNJIT_TRY_VOID(check_size(t));
  const auto n = static_cast<std::size_t>(t.elem_count());
  const std::size_t blocks = n / kQK;
  const std::size_t block_bytes = gguf_block_bytes(t.type);
  GgufTernary r;
  r.values.resize(n);
  r.scales.resize(blocks);
  std::uint8_t codes[kQK];
  for (std::size_t b = 0; b < blocks; ++b) {
    if (!gguf_ternary_block(t.type, t.bytes.data() + block_bytes * b, codes, &r.scales[b])) {
      const std::size_t e = static_cast<std::size_t>(std::find(codes, codes + kQK, 3) - codes);
      return make_error(ErrorCode::InvalidInput, "tensor " + quoted(t.name) + ": TQ2_0 element " +
                                                     std::to_string(kQK * b + e) + " has code 3 (value 2), not ternary");
    }
    for (std::size_t e = 0; e < kQK; ++e) r.values[kQK * b + e] = static_cast<std::int8_t>(codes[e] - 1);
  }
  return r;
}

}  // namespace ternjit::formats
