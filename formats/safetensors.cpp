// SPDX-License-Identifier: Apache-2.0
// safetensors.cpp - safetensors parsing with full validation, deterministic serialization, atomic writes.
#include "formats/safetensors.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <utility>

#include <nlohmann/json.hpp>

#include "formats/mapped_file.h"
#include "formats/text.h"
#include "ir/numeric.h"

namespace ternjit::formats {

namespace {

using nlohmann::json;

// The reference implementation (Rust `safetensors`) uses the same cap; it bounds the
// memory a hostile header can make us spend on JSON.
constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;
constexpr std::string_view kMetadataKey = "__metadata__";
// A safetensors header nests 3 levels (the header object, a tensor's object, its shape
// array); the JSON library builds a heap node per level, so a hostile header of nested
// brackets costs ~100 bytes of memory per byte of header. Deeper headers are rejected
// before parsing (the margin keeps the precise messages for ill-typed fields).
constexpr int kMaxHeaderDepth = 8;

struct Dtype {
  std::string_view name;
  ElemKind kind;  // meaningless when !used
  std::uint64_t size;
  bool used;      // else parsed and bounds-checked, but never converted (StTensor::used)
};

constexpr Dtype kDtypes[] = {
    {"F32", ElemKind::F32, 4, true}, {"F16", ElemKind::F16, 2, true}, {"BF16", ElemKind::BF16, 2, true},
    {"I8", ElemKind::I8, 1, true},   {"U8", ElemKind::U8, 1, true},   {"I32", ElemKind::I32, 4, true},
    // Dtypes checkpoints carry that ternjit binds to nothing (position ids, masks, fp8 caches).
    {"F64", ElemKind::U8, 8, false}, {"I64", ElemKind::U8, 8, false}, {"U64", ElemKind::U8, 8, false},
    {"I16", ElemKind::U8, 2, false}, {"U16", ElemKind::U8, 2, false}, {"U32", ElemKind::U8, 4, false},
    {"BOOL", ElemKind::U8, 1, false}, {"F8_E4M3", ElemKind::U8, 1, false}, {"F8_E5M2", ElemKind::U8, 1, false},
};

const Dtype* find_dtype(std::string_view name) {
  for (const Dtype& d : kDtypes) {
    if (d.name == name) return &d;
  }
  return nullptr;
}

const Dtype* find_dtype(ElemKind kind) {
  for (const Dtype& d : kDtypes) {
    if (d.used && d.kind == kind) return &d;
  }
  return nullptr;
}

std::string supported_dtypes() {
  std::string out;
  for (const Dtype& d : kDtypes) {
    if (!d.used) continue;
    if (!out.empty()) out += ", ";
    out += d.name;
  }
  return out;
}

// A string from the file, quoted and made safe for a one-line message (text.h): control
// bytes and invalid UTF-8 escaped, long strings cut.
std::string for_message(std::string_view text) { return quoted_printable(text, 100); }

std::string shape_text(std::span<const std::int64_t> shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i != 0) out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

std::string range_text(std::uint64_t begin, std::uint64_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + "]";
}

// product(shape) * element_size, or nullopt when a dim is negative or the product
// overflows 64 bits. A zero dim makes the count 0 whatever the other dims are.
std::optional<std::uint64_t> byte_count(std::span<const std::int64_t> shape, std::uint64_t element_size) {
  if (std::any_of(shape.begin(), shape.end(), [](std::int64_t d) { return d < 0; })) return std::nullopt;
  if (std::any_of(shape.begin(), shape.end(), [](std::int64_t d) { return d == 0; })) return 0;
  std::uint64_t count = element_size;
  for (std::int64_t d : shape) {
    if (__builtin_mul_overflow(count, static_cast<std::uint64_t>(d), &count)) return std::nullopt;
  }
  return count;
}

// How a JSON value is described in a message: scalars by value (cheap and bounded for
// numbers and literals), containers and strings by type name. Never dumps a container:
// that is recursive, and a hostile header can nest deeply.
std::string describe(const json& value) {
  if (value.is_number() || value.is_boolean() || value.is_null()) return value.dump();
  if (value.is_string()) return "string " + for_message(value.get_ref<const std::string&>());
  return value.type_name();
}

// The SAX handler used to explain why the header is not JSON: it builds nothing and
// keeps the parser's message.
class JsonErrorLocator final : public nlohmann::json_sax<json> {
 public:
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t&) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& ex) override {
    // ex.what() is "[json.exception.parse_error.101] parse error at line 1, column 5:
    // syntax error ...; last read: '<token>'". The token can be a huge string from
    // the file, so keep only the part between the id and "; last read".
    std::string_view text = ex.what();
    if (const auto close = text.find("] "); close != std::string_view::npos) text.remove_prefix(close + 2);
    if (const auto cut = text.find("; last read"); cut != std::string_view::npos) text = text.substr(0, cut);
    message_ = std::string(text.substr(0, 300));
    return false;
  }
  [[nodiscard]] const std::string& message() const { return message_; }

 private:
  std::string message_;
};

// The deepest nesting of objects and arrays in the JSON text, counted up to `limit + 1`
// in one pass over the bytes (brackets inside strings do not count). Exact for valid
// JSON; what it says about invalid JSON does not matter, the parser rejects that.
int json_depth(std::span<const std::uint8_t> text, int limit) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const std::uint8_t c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) break;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

// A tensor entry once validated, before its bytes are copied.
struct Entry {
  const std::string* name;
  const Dtype* dtype;
  std::vector<std::int64_t> shape;
  std::uint64_t begin;
  std::uint64_t end;
};

class HeaderParser {
 public:
  HeaderParser(std::string_view display_name, std::uint64_t data_size)
      : display_name_(display_name), data_size_(data_size) {}

  Error fail(const std::string& message) const {
    return make_error(ErrorCode::InvalidInput, std::string(display_name_) + ": " + message);
  }

  Result<std::map<std::string, std::string>> metadata(const json& value) const {
    if (!value.is_object()) {
      return fail("'__metadata__' is " + describe(value) + ", expected an object of strings");
    }
    std::map<std::string, std::string> out;
    for (const auto& [key, item] : value.get_ref<const json::object_t&>()) {
      if (!item.is_string()) {
        return fail("'__metadata__' entry " + for_message(key) + " is " + describe(item) + ", expected a string");
      }
      out.emplace(key, item.get<std::string>());
    }
    return out;
  }

  Result<Entry> entry(const std::string& name, const json& value) const {
    const std::string where = "tensor " + for_message(name) + ": ";
    if (!value.is_object()) return fail(where + "entry is " + describe(value) + ", expected an object");
    const auto& fields = value.get_ref<const json::object_t&>();

    const auto dtype_it = fields.find("dtype");
    if (dtype_it == fields.end()) return fail(where + "missing field 'dtype'");
    if (!dtype_it->second.is_string()) {
      return fail(where + "'dtype' is " + describe(dtype_it->second) + ", expected a string");
    }
    const auto& dtype_name = dtype_it->second.get_ref<const std::string&>();
    const Dtype* dtype = find_dtype(dtype_name);
    if (dtype == nullptr) {
      std::string unused;
      for (const Dtype& d : kDtypes) unused += d.used ? "" : (unused.empty() ? "" : ", ") + std::string(d.name);
      return fail(where + "unknown dtype " + for_message(dtype_name) + ", expected one of " + supported_dtypes() +
                  " (or, read but never bound, " + unused + ")");
    }

    const auto shape_it = fields.find("shape");
    if (shape_it == fields.end()) return fail(where + "missing field 'shape'");
    if (!shape_it->second.is_array()) {
      return fail(where + "'shape' is " + describe(shape_it->second) + ", expected an array of integers");
    }
    std::vector<std::int64_t> shape;
    const auto& dims = shape_it->second.get_ref<const json::array_t&>();
    for (std::size_t i = 0; i < dims.size(); ++i) {
      TERNJIT_TRY(const std::uint64_t dim, integer(dims[i], where + "shape dimension " + std::to_string(i)));
      shape.push_back(static_cast<std::int64_t>(dim));
    }

    const auto offsets_it = fields.find("data_offsets");
    if (offsets_it == fields.end()) return fail(where + "missing field 'data_offsets'");
    const json& offsets = offsets_it->second;
    if (!offsets.is_array()) {
      return fail(where + "'data_offsets' is " + describe(offsets) + ", expected an array [begin, end]");
    }
    if (offsets.size() != 2) {
      return fail(where + "'data_offsets' has " + std::to_string(offsets.size()) +
                  " elements, expected 2 ([begin, end])");
    }
    TERNJIT_TRY(const std::uint64_t begin, integer(offsets[0], where + "data_offsets[0]"));
    TERNJIT_TRY(const std::uint64_t end, integer(offsets[1], where + "data_offsets[1]"));
    const std::string range = "data_offsets " + range_text(begin, end);
    if (begin > end) return fail(where + range + " have begin > end");
    if (end > data_size_) {
      return fail(where + range + " end past the data buffer, which holds " + std::to_string(data_size_) +
                  " bytes");
    }
    const auto need = byte_count(shape, dtype->size);
    if (!need) {
      return fail(where + "dtype " + std::string(dtype->name) + " and shape " + shape_text(shape) +
                  " need more than 2^64 bytes");
    }
    if (end - begin != *need) {
      return fail(where + range + " hold " + std::to_string(end - begin) + " bytes, but dtype " +
                  std::string(dtype->name) + " and shape " + shape_text(shape) + " need " + std::to_string(*need));
    }
    return Entry{&name, dtype, std::move(shape), begin, end};
  }

  // Entries are sorted by begin here; an empty range holds no bytes and overlaps nothing.
  Result<void> check_overlaps(const std::vector<Entry>& entries) const {
    const Entry* furthest = nullptr;  // the non-empty entry seen so far that ends last
    for (const Entry& e : entries) {
      if (e.begin == e.end) continue;
      if (furthest != nullptr && e.begin < furthest->end) {
        return fail("tensors " + for_message(*furthest->name) + " (data_offsets " +
                    range_text(furthest->begin, furthest->end) + ") and " + for_message(*e.name) + " (data_offsets " +
                    range_text(e.begin, e.end) + ") overlap");
      }
      if (furthest == nullptr || e.end > furthest->end) furthest = &e;
    }
    return success();
  }

 private:
  // A non-negative JSON integer that fits in int64 (dims and offsets alike).
  Result<std::uint64_t> integer(const json& value, const std::string& what) const {
    if (value.is_number_unsigned()) {
      const auto v = value.get<std::uint64_t>();
      if (v > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        return fail(what + " is " + std::to_string(v) + ", larger than 2^63 - 1");
      }
      return v;
    }
    return fail(what + " is " + describe(value) + ", expected a non-negative integer");
  }

  std::string_view display_name_;
  std::uint64_t data_size_;
};

std::uint32_t load_le32(const std::uint8_t* p) {
  return static_cast<std::uint32_t>(p[0]) | static_cast<std::uint32_t>(p[1]) << 8 |
         static_cast<std::uint32_t>(p[2]) << 16 | static_cast<std::uint32_t>(p[3]) << 24;
}

void append_le32(std::vector<std::uint8_t>& out, std::uint32_t v) {
  for (int k = 0; k < 4; ++k) out.push_back(static_cast<std::uint8_t>(v >> (8 * k)));
}

// The shape/byte-count check shared by to_f32, to_i8 and write_safetensors.
Result<const Dtype*> checked_dtype(const StTensor& tensor, ErrorCode code) {
  if (!tensor.used) {
    return make_error(code, "tensor " + for_message(tensor.name) + ": dtype " + for_message(tensor.dtype) +
                                " is not one ternjit reads, expected one of " + supported_dtypes());
  }
  const std::string where = "tensor " + for_message(tensor.name) + ": ";
  const Dtype* dtype = find_dtype(tensor.kind);
  if (dtype == nullptr) {
    return make_error(code, where + "element kind " + std::string(elem_name(tensor.kind)) +
                                " has no safetensors dtype, expected one of " + supported_dtypes());
  }
  const auto need = byte_count(tensor.shape, dtype->size);
  if (!need) {
    return make_error(code, where + "shape " + shape_text(tensor.shape) +
                                " has a negative dimension or more than 2^64 bytes");
  }
  if (tensor.bytes.size() != *need) {
    return make_error(code, where + std::to_string(tensor.bytes.size()) + " bytes, but dtype " +
                                std::string(dtype->name) + " and shape " + shape_text(tensor.shape) + " need " +
                                std::to_string(*need));
  }
  return dtype;
}

}  // namespace

const StTensor* StFile::find(std::string_view name) const {
  for (const StTensor& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

std::string_view st_dtype_name(ElemKind kind) {
  const Dtype* dtype = find_dtype(kind);
  return dtype != nullptr ? dtype->name : std::string_view{};
}

Result<StFile> parse_safetensors(const ir::SharedBytes& image, std::string_view display_name) {
  const std::span<const std::uint8_t> data = image.span();
  const auto fail = [&](const std::string& message) {
    return make_error(ErrorCode::InvalidInput, std::string(display_name) + ": " + message);
  };
  if (data.size() < 8) {
    return fail("file is " + std::to_string(data.size()) + " bytes, expected at least 8 (the header length)");
  }
  std::uint64_t header_size = 0;
  for (int k = 0; k < 8; ++k) header_size |= static_cast<std::uint64_t>(data[k]) << (8 * k);
  if (header_size > kMaxHeaderBytes) {
    return fail("header length " + std::to_string(header_size) + " is over the limit of " +
                std::to_string(kMaxHeaderBytes) + " bytes");
  }
  if (header_size > data.size() - 8) {
    return fail("header length " + std::to_string(header_size) + " is past the end of the file: only " +
                std::to_string(data.size() - 8) + " bytes follow the length field");
  }
  const std::uint8_t* header_begin = data.data() + 8;
  const std::uint8_t* header_end = header_begin + header_size;
  if (json_depth({header_begin, header_end}, kMaxHeaderDepth) > kMaxHeaderDepth) {
    return fail("header nests objects and arrays deeper than " + std::to_string(kMaxHeaderDepth) +
                " levels (a safetensors header needs 3)");
  }
  const json header = json::parse(header_begin, header_end, nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded()) {
    JsonErrorLocator locator;
    json::sax_parse(header_begin, header_end, &locator);
    return fail("header is not valid JSON: " +
                (locator.message().empty() ? std::string("parse error") : locator.message()));
  }
  if (!header.is_object()) return fail("header is " + describe(header) + ", expected a JSON object");

  const std::span<const std::uint8_t> buffer = data.subspan(8 + header_size);
  HeaderParser parser(display_name, buffer.size());
  StFile file;
  std::vector<Entry> entries;
  // json::object_t is a std::map, so entries (and the resulting tensors) come out
  // sorted by name, byte-wise.
  std::size_t index = 0;  // of the entry, in the header's name order
  for (const auto& [name, value] : header.get_ref<const json::object_t&>()) {
    if (name.size() > kMaxTensorNameBytes) {
      return fail("tensor " + std::to_string(index) + " (in name order): its name " + for_message(name) + " is " +
                  std::to_string(name.size()) + " bytes long, over the limit of " + std::to_string(kMaxTensorNameBytes) +
                  " bytes");
    }
    if (name == kMetadataKey) {
      TERNJIT_TRY(file.metadata, parser.metadata(value));
      continue;
    }
    ++index;
    TERNJIT_TRY(Entry e, parser.entry(name, value));
    entries.push_back(std::move(e));
  }

  std::vector<Entry> by_offset = entries;
  std::stable_sort(by_offset.begin(), by_offset.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  TERNJIT_TRY_VOID(parser.check_overlaps(by_offset));

  file.tensors.reserve(entries.size());
  for (Entry& e : entries) {
    StTensor t;
    t.name = *e.name;
    t.dtype = std::string(e.dtype->name);
    t.kind = e.dtype->kind;
    t.used = e.dtype->used;
    t.data_offset = e.begin;
    t.shape = std::move(e.shape);
    // A region of the image: shared with a mapped or owned image, copied from a borrowed one.
    t.bytes = image.slice(8 + header_size + e.begin, e.end - e.begin).keep();
    file.tensors.push_back(std::move(t));
  }
  return file;
}

Result<StFile> read_safetensors(const std::string& path) {
  TERNJIT_TRY(ir::SharedBytes image, map_file(path));
  return parse_safetensors(image, path);
}

std::vector<std::uint8_t> serialize_safetensors(const StFile& file) {
  const auto json_string = [](const std::string& s) {
    return json(s).dump(-1, ' ', /*ensure_ascii=*/false, json::error_handler_t::replace);
  };
  std::vector<const StTensor*> order;
  order.reserve(file.tensors.size());
  for (const StTensor& t : file.tensors) order.push_back(&t);
  std::stable_sort(order.begin(), order.end(), [](const StTensor* a, const StTensor* b) { return a->name < b->name; });

  std::string header = "{";
  if (!file.metadata.empty()) {
    header += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [key, value] : file.metadata) {
      if (!first) header += ',';
      first = false;
      header += json_string(key) + ":" + json_string(value);
    }
    header += "}";
  }
  std::uint64_t offset = 0;
  for (const StTensor* t : order) {
    if (header.size() > 1) header += ',';
    header += json_string(t->name) + ":{\"dtype\":" + json_string(t->dtype) + ",\"shape\":[";
    for (std::size_t i = 0; i < t->shape.size(); ++i) {
      if (i != 0) header += ',';
      header += std::to_string(t->shape[i]);
    }
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + t->bytes.size()) + "]}";
    offset += t->bytes.size();
  }
  header += "}";
  // The format allows trailing spaces in the header; pad so the data buffer starts at
  // an 8-byte-aligned file offset (8 + header size).
  header.append((8 - header.size() % 8) % 8, ' ');

  std::vector<std::uint8_t> out;
  out.reserve(8 + header.size() + offset);
  for (int k = 0; k < 8; ++k) out.push_back(static_cast<std::uint8_t>(static_cast<std::uint64_t>(header.size()) >> (8 * k)));
  out.insert(out.end(), header.begin(), header.end());
  for (const StTensor* t : order) out.insert(out.end(), t->bytes.span().begin(), t->bytes.span().end());
  return out;
}

Result<void> write_safetensors(const std::string& path, const StFile& file) {
  std::vector<const std::string*> names;
  for (const StTensor& t : file.tensors) {
    if (t.name == kMetadataKey) {
      return make_error(ErrorCode::InvalidArgument, "tensor name '__metadata__' is reserved for the metadata map");
    }
    TERNJIT_TRY(const Dtype* dtype, checked_dtype(t, ErrorCode::InvalidArgument));
    if (t.dtype != dtype->name) {
      return make_error(ErrorCode::InvalidArgument, "tensor " + for_message(t.name) + ": dtype " + for_message(t.dtype) +
                                                        " does not spell element kind " +
                                                        std::string(elem_name(t.kind)) + ", expected " +
                                                        std::string(dtype->name));
    }
    names.push_back(&t.name);
  }
  std::sort(names.begin(), names.end(), [](const std::string* a, const std::string* b) { return *a < *b; });
  const auto repeat = std::adjacent_find(names.begin(), names.end(),
                                         [](const std::string* a, const std::string* b) { return *a == *b; });
  if (repeat != names.end()) {
    return make_error(ErrorCode::InvalidArgument, "tensor name " + for_message(**repeat) + " appears more than once");
  }

  const std::vector<std::uint8_t> image = serialize_safetensors(file);
  return write_file_atomic(path, image);
}

Result<std::vector<float>> to_f32(const StTensor& tensor) {
  TERNJIT_TRY(const Dtype* dtype, checked_dtype(tensor, ErrorCode::InvalidInput));
  const std::size_t n = tensor.bytes.size() / dtype->size;
  const std::uint8_t* p = tensor.bytes.data();
  std::vector<float> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    switch (tensor.kind) {
      case ElemKind::F32: out[i] = std::bit_cast<float>(load_le32(p + 4 * i)); break;
      case ElemKind::F16:
        out[i] = ir::f16_bits_to_f32(static_cast<std::uint16_t>(p[2 * i] | p[2 * i + 1] << 8));
        break;
      case ElemKind::BF16:
        out[i] = ir::bf16_bits_to_f32(static_cast<std::uint16_t>(p[2 * i] | p[2 * i + 1] << 8));
        break;
      case ElemKind::I8: out[i] = static_cast<float>(static_cast<std::int8_t>(p[i])); break;
      case ElemKind::U8: out[i] = static_cast<float>(p[i]); break;
      case ElemKind::I32: {
        const auto v = static_cast<std::int32_t>(load_le32(p + 4 * i));
        out[i] = static_cast<float>(v);
        // float(v) is at most 2^31 in magnitude, so the int64 round trip is defined.
        if (static_cast<std::int64_t>(out[i]) != v) {
          return make_error(ErrorCode::InvalidInput, "tensor " + for_message(tensor.name) + ": I32 value " +
                                                         std::to_string(v) + " at index " + std::to_string(i) +
                                                         " is not exactly representable as f32");
        }
        break;
      }
      case ElemKind::T2:
      case ElemKind::Bool: break;  // rejected by checked_dtype
    }
  }
  return out;
}

Result<std::vector<std::int8_t>> to_i8(const StTensor& tensor) {
  if (tensor.kind != ElemKind::I8 && tensor.kind != ElemKind::U8) {
    return make_error(ErrorCode::InvalidInput, "tensor " + for_message(tensor.name) + " has dtype " +
                                                   (tensor.dtype.empty() ? std::string(elem_name(tensor.kind))
                                                                         : tensor.dtype) +
                                                   ", expected I8 or U8");
  }
  TERNJIT_TRY_VOID(checked_dtype(tensor, ErrorCode::InvalidInput));
  std::vector<std::int8_t> out(tensor.bytes.size());
  for (std::size_t i = 0; i < tensor.bytes.size(); ++i) {
    const std::uint8_t b = tensor.bytes.data()[i];
    if (tensor.kind == ElemKind::U8 && b > 127) {
      return make_error(ErrorCode::InvalidInput, "tensor " + for_message(tensor.name) + ": U8 value " +
                                                     std::to_string(b) + " at index " + std::to_string(i) +
                                                     " does not fit in I8, expected at most 127");
    }
    out[i] = static_cast<std::int8_t>(b);
  }
  return out;
}

StTensor make_f32_tensor(std::string name, std::vector<std::int64_t> shape, std::span<const float> values) {
  std::vector<std::uint8_t> bytes;
  bytes.reserve(values.size() * 4);
  for (float v : values) append_le32(bytes, std::bit_cast<std::uint32_t>(v));
  return StTensor{std::move(name), "F32", ElemKind::F32, std::move(shape), ir::SharedBytes::adopt(std::move(bytes))};
}

StTensor make_i8_tensor(std::string name, std::vector<std::int64_t> shape, std::span<const std::int8_t> values) {
  const auto* p = reinterpret_cast<const std::uint8_t*>(values.data());
  return StTensor{std::move(name), "I8", ElemKind::I8, std::move(shape), ir::SharedBytes::copy_of({p, values.size()})};
}

StTensor make_u8_tensor(std::string name, std::vector<std::int64_t> shape, std::span<const std::uint8_t> values) {
  return StTensor{std::move(name), "U8", ElemKind::U8, std::move(shape), ir::SharedBytes::copy_of(values)};
}

StTensor make_i32_tensor(std::string name, std::vector<std::int64_t> shape, std::span<const std::int32_t> values) {
  std::vector<std::uint8_t> bytes;
  bytes.reserve(values.size() * 4);
  for (std::int32_t v : values) append_le32(bytes, static_cast<std::uint32_t>(v));
  return StTensor{std::move(name), "I32", ElemKind::I32, std::move(shape), ir::SharedBytes::adopt(std::move(bytes))};
}

}  // namespace ternjit::formats
