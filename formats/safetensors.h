// SPDX-License-Identifier: Apache-2.0
// safetensors.h - read, validate and write safetensors files (how real model weights arrive).
//
// Format: an 8-byte little-endian u64 N, N bytes of JSON header, then the data buffer.
// The header maps tensor names to {"dtype", "shape", "data_offsets": [begin, end]}
// (offsets relative to the start of the data buffer) plus an optional "__metadata__"
// object of string values. Supported dtypes: F32, F16, BF16, I8, U8, I32; tensors of
// F64, I64, U64, I16, U16, U32, BOOL, F8_E4M3 and F8_E5M2 are parsed but never converted.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ir/stored_tensor.h"
#include "ternjit/result.h"
#include "ternjit/types.h"

namespace ternjit::formats {

/// One tensor of a safetensors file. `kind` is authoritative; `dtype` is its safetensors
/// spelling ("F32", "F16", "BF16", "I8", "U8", "I32"). `bytes` holds the raw
/// little-endian elements, row-major, product(shape) * element size bytes; in a file
/// read by read_safetensors they are a region of the file's memory mapping (shared, not
/// copied: they stay valid as long as any copy of them lives).
struct StTensor {
  std::string name;                 ///< the header key; never "__metadata__"
  std::string dtype;                ///< "F32", "F16", "BF16", "I8", "U8" or "I32"
  ElemKind kind = ElemKind::F32;    ///< the same dtype as an element kind
  std::vector<std::int64_t> shape;  ///< row-major dims; empty for a scalar
  ir::SharedBytes bytes;            ///< little-endian elements (owned)
  /// False for a dtype ternjit parses (bounds-checked) but never converts: F64, I64, U64,
  /// I16, U16, U32, BOOL, F8_E4M3, F8_E5M2. Then `kind` is meaningless, and to_f32, to_i8,
  /// write_safetensors and binding refuse the tensor, naming it.
  bool used = true;
  std::uint64_t data_offset = 0;    ///< parsed files: data_offsets[0] (from the data buffer's start)
};

/// A whole safetensors file: tensors (sorted by name when produced by the parser) and
/// the optional "__metadata__" string map.
struct StFile {
  std::vector<StTensor> tensors;                ///< sorted by name when parsed; any order to write
  std::map<std::string, std::string> metadata;  ///< "__metadata__"; omitted from the file when empty

  /// The tensor called `name`, or nullptr. The pointer is valid until `tensors` changes.
  [[nodiscard]] const StTensor* find(std::string_view name) const;
};

/// The safetensors dtype spelling of a kind ("F32", ...); empty for T2 and Bool, which
/// have no safetensors dtype here.
std::string_view st_dtype_name(ElemKind kind);

/// Parses a safetensors image held in memory. Every malformation is an InvalidInput
/// error (never a crash) whose message starts with "<display_name>: ", e.g.
/// "w.st: tensor 'w': data_offsets [0, 12] hold 12 bytes, but dtype F32 and shape
/// [2, 2] need 16". Rejected: fewer than 8 bytes; a tensor name longer than
/// kMaxTensorNameBytes (text.h; naming its index in name order); a header length over 100'000'000 or
/// past the end; objects and arrays nested deeper than 8 levels (checked before
/// parsing, so a hostile header cannot make the JSON parser spend memory on them); invalid JSON or
/// a non-object header; a non-object entry; missing or
/// ill-typed dtype/shape/data_offsets; an unknown dtype; a negative or fractional dim;
/// an element or byte count over 2^63 - 1; offsets out of the data buffer or begin >
/// end; a byte length != product(shape) * element size; two tensors whose byte ranges
/// overlap; a "__metadata__" that is not an object of strings. Gaps and trailing bytes
/// in the data buffer are allowed. Tensors of the result are sorted by name. The
/// tensors' bytes are regions of `data` when it is owned (SharedBytes::owned), else
/// copies of those regions.
Result<StFile> parse_safetensors(const ir::SharedBytes& data, std::string_view display_name);

/// parse_safetensors of caller memory (each tensor's bytes are copied).
inline Result<StFile> parse_safetensors(std::span<const std::uint8_t> data, std::string_view display_name) {
  return parse_safetensors(ir::SharedBytes::borrow(data), display_name);
}

/// Maps the file at `path` (map_file) and parses it, using the path as display name: the
/// tensors' bytes point into the mapping, nothing is copied. Errors: NotFound if it does
/// not exist, IoError if it cannot be read, otherwise as parse_safetensors.
Result<StFile> read_safetensors(const std::string& path);

/// Serializes `file` deterministically: the header is `{"__metadata__":{...},"name":
/// {"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},...}` without whitespace
/// (__metadata__ omitted when empty), tensors in name order and their data packed in
/// that order without gaps; the header is padded with spaces to a multiple of 8 bytes.
/// Names are JSON-escaped; invalid UTF-8 in a name is replaced by U+FFFD.
/// Precondition: `file` passes the checks of write_safetensors, otherwise the image is
/// one that parse_safetensors rejects.
std::vector<std::uint8_t> serialize_safetensors(const StFile& file);

/// Validates `file`, serializes it and writes it atomically: to a temporary file in the
/// same directory, flushed, then renamed over `path`. Errors: InvalidArgument when a
/// tensor's kind has no safetensors dtype, dtype does not spell kind, a dim is
/// negative, bytes.size() != product(shape) * element size, a name repeats or is
/// "__metadata__"; IoError when writing or renaming fails (the temporary is removed).
Result<void> write_safetensors(const std::string& path, const StFile& file);

/// Converts any supported tensor to f32 values, exactly: F16/BF16 via numeric.h, integers
/// by value. Errors (InvalidInput): bytes.size() does not match the shape, an
/// unsupported kind, or an I32 value that f32 cannot represent exactly, such as
/// 16777217 (naming its index); there is no silent rounding.
Result<std::vector<float>> to_f32(const StTensor& tensor);

/// Converts an I8 tensor (as-is) or a U8 tensor whose values are all <= 127 to int8.
/// Errors (InvalidInput): another kind, a U8 value > 127 (naming its index), or a byte
/// count that does not match the shape.
Result<std::vector<std::int8_t>> to_i8(const StTensor& tensor);

/// An F32 tensor holding `values` (little-endian). Precondition: values.size() ==
/// product(shape); write_safetensors rejects a tensor that breaks it.
StTensor make_f32_tensor(std::string name, std::vector<std::int64_t> shape, std::span<const float> values);

/// An I8 tensor holding `values`. Precondition as make_f32_tensor.
StTensor make_i8_tensor(std::string name, std::vector<std::int64_t> shape, std::span<const std::int8_t> values);

/// A U8 tensor holding `values` (e.g. packed tern2 weights). Precondition as make_f32_tensor.
StTensor make_u8_tensor(std::string name, std::vector<std::int64_t> shape, std::span<const std::uint8_t> values);

/// An I32 tensor holding `values` (little-endian). Precondition as make_f32_tensor.
StTensor make_i32_tensor(std::string name, std::vector<std::int64_t> shape, std::span<const std::int32_t> values);

}  // namespace ternjit::formats
