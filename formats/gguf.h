// SPDX-License-Identifier: Apache-2.0
// gguf.h - read, validate, write and dequantize GGUF files (llama.cpp's model format).
//
// Layout (little-endian): "GGUF", version u32 (2 or 3), tensor_count u64, kv_count u64,
// kv_count key/value pairs (key: u64 length + bytes; type u32; value), tensor_count
// tensor infos (name string, n_dims u32, ne[n_dims] u64 with ne[0] innermost, ggml type
// u32, offset u64 relative to the data section), then the data section at the header's
// end rounded up to `general.alignment` (default 32).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ir/stored_tensor.h"
#include "ternjit/result.h"

namespace ternjit::formats {

/// GGUF metadata value types, with their on-disk ids.
enum class GgufValueType : std::uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, Bool = 7,
  String = 8, Array = 9, U64 = 10, I64 = 11, F64 = 12,
};

/// One metadata value. Integers of any width are in `u` (unsigned types) or `i` (signed
/// types), floats in `f`, booleans in `b`, strings in `str`. An Array has `array_type`,
/// `array_count` elements (each of that type; arrays of arrays are allowed), and holds
/// them encoded as in a GGUF file in `array_bytes`: in a parsed file a region of its
/// mapping, so an array takes no memory of its own however long it is. array_elements
/// decodes them; make_gguf_array encodes them.
struct GgufValue {
  GgufValueType type = GgufValueType::U8;  ///< which field holds the value
  std::uint64_t u = 0;                     ///< U8, U16, U32, U64
  std::int64_t i = 0;                      ///< I8, I16, I32, I64
  double f = 0;                            ///< F32 (exactly), F64
  bool b = false;                          ///< Bool
  std::string str;                         ///< String
  GgufValueType array_type = GgufValueType::U8;  ///< Array: the element type
  std::uint64_t array_count = 0;                 ///< Array: the number of elements
  ir::SharedBytes array_bytes;                   ///< Array: the elements, encoded (little-endian, as in the file)

  /// The first min(limit, array_count) elements of an Array, decoded (an element that is
  /// an array is again a view of its bytes). Precondition: an Array whose array_bytes hold
  /// array_count elements of array_type, as every parsed value and make_gguf_array result
  /// does (aborts otherwise).
  [[nodiscard]] std::vector<GgufValue> array_elements(std::size_t limit = SIZE_MAX) const;
};

/// An Array value holding `elements`, each of type `elem_type`, encoded. Errors
/// (InvalidArgument): an element of another type, an unknown type, or an element that is
/// an Array not holding what it says.
Result<GgufValue> make_gguf_array(GgufValueType elem_type, std::span<const GgufValue> elements);

/// The most key/value pairs parse_gguf reads (a model has about 30 to 60, its vocabulary
/// in a few arrays): with arrays kept as regions of the file, the parsed metadata takes at
/// most its keys' and strings' bytes plus about 160 bytes a pair (about 10 MB at the limit).
inline constexpr std::uint64_t kMaxGgufMetadataPairs = 65536;

/// One key/value pair of the metadata, in file order.
struct GgufKv {
  std::string key;  ///< e.g. "general.architecture"
  GgufValue value;  ///< the value
};

/// The ggml tensor types this reader knows, with their ggml ids (ggml.h). F32, F16, BF16,
/// Q8_0, TQ1_0 and TQ2_0 are converted; the others (the legacy and K quantizations and
/// the integer/F64 types a model file may carry beside its ternary weights) are parsed
/// and bounds-checked by their block sizes (ggml-common.h) but never converted
/// (gguf_type_converted). Any other id makes the file an error.
enum class GgufTensorType : std::uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
  I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, BF16 = 30, TQ1_0 = 34, TQ2_0 = 35,
};

/// The name of a tensor type ("F32", "TQ2_0", "Q6_K", ...).
std::string_view gguf_type_name(GgufTensorType type);
/// Elements per block: 1 for F32/F16/BF16 and the integer types, 32 for Q4_0..Q8_1, 256
/// for the K quantizations and TQ1_0/TQ2_0.
std::uint64_t gguf_block_elems(GgufTensorType type);
/// Bytes per block: 4, 2, 34 (Q8_0), 2, 54 (TQ1_0), 66 (TQ2_0); 18, 20, 22, 24, 36
/// (Q4_0, Q4_1, Q5_0, Q5_1, Q8_1); 84, 110, 144, 176, 210, 292 (Q2_K..Q8_K); 1, 2, 4, 8, 8
/// (I8, I16, I32, I64, F64).
std::uint64_t gguf_block_bytes(GgufTensorType type);
/// True for the types ternjit converts: F32, F16, BF16, Q8_0, TQ1_0, TQ2_0.
bool gguf_type_converted(GgufTensorType type);

/// One tensor. `dims` are in ggml order (dims[0] is the innermost, contiguous extent;
/// the row-major shape is `dims` reversed). `bytes` holds byte_size bytes: in a file read
/// by read_gguf, a region of the file's mapping (kept alive by it).
struct GgufTensor {
  std::string name;                       ///< the tensor's name
  GgufTensorType type = GgufTensorType::F32;  ///< element encoding
  std::vector<std::uint64_t> dims;        ///< ggml ne[], innermost first, 1 to 4 of them
  std::uint64_t offset = 0;               ///< from the start of the data section (ignored by write_gguf)
  ir::SharedBytes bytes;                  ///< the encoded elements

  /// Product of dims (1 for no dims).
  [[nodiscard]] std::uint64_t elem_count() const;
};

/// A whole GGUF file.
struct GgufFile {
  std::uint32_t version = 3;         ///< 2 or 3
  std::uint64_t alignment = 32;      ///< general.alignment, or 32
  std::vector<GgufKv> metadata;      ///< in file order
  std::vector<GgufTensor> tensors;   ///< in file order

  /// The value of `key`, or nullptr. Valid until `metadata` changes.
  [[nodiscard]] const GgufValue* find(std::string_view key) const;
  /// The tensor called `name`, or nullptr. Valid until `tensors` changes.
  [[nodiscard]] const GgufTensor* find_tensor(std::string_view name) const;
  /// The string value of `key`. Errors: NotFound when absent, InvalidInput when not a string.
  [[nodiscard]] Result<std::string> get_string(std::string_view key) const;
  /// The value of an unsigned, or non-negative signed, integer key. Errors: NotFound when
  /// absent, InvalidInput for another type or a negative value.
  [[nodiscard]] Result<std::uint64_t> get_uint(std::string_view key) const;
  /// The value of an integer key of any type. Errors: NotFound, InvalidInput (another
  /// type, or a U64 above INT64_MAX).
  [[nodiscard]] Result<std::int64_t> get_int(std::string_view key) const;
  /// The value of an F32 or F64 key. Errors: NotFound, InvalidInput.
  [[nodiscard]] Result<double> get_float(std::string_view key) const;
  /// The value of a Bool key. Errors: NotFound, InvalidInput.
  [[nodiscard]] Result<bool> get_bool(std::string_view key) const;
};

/// Parses a GGUF image. Every malformation is an InvalidInput error (never a crash or an
/// over-read) whose message starts with "<display_name>: " and names the field (and the
/// key or tensor): a truncated header ("tensor 'w': ne[1] needs 8 bytes at offset 60,
/// file has 64"), a bad magic, a byte-swapped (big-endian) version, a version other than
/// 2 or 3, counts larger than the file could hold, an unknown value or tensor type id,
/// more than 4 dims, a dim product or byte size over 2^63, ne[0] not a multiple of the
/// block size, a misaligned offset, data past the end of the file, overlapping tensors,
/// a repeated tensor name, a tensor name longer than kMaxTensorNameBytes (text.h; "tensor
/// 3 name is 102400 bytes long, over the limit of 4096 bytes"), a general.alignment that
/// is not a power of two u32, more than kMaxGgufMetadataPairs key/value pairs, arrays
/// nested more than 8 deep. The tensors' bytes and the metadata arrays' are regions of
/// `data` when it is owned, else copies. Time and memory are linear in the header's bytes.
Result<GgufFile> parse_gguf(const ir::SharedBytes& data, std::string_view display_name);

/// Maps the file at `path` (map_file) and parses it with the path as display name.
/// Errors: NotFound, IoError, otherwise as parse_gguf.
Result<GgufFile> read_gguf(const std::string& path);

/// Serializes a version 3 image: `metadata` in order (general.alignment, if present,
/// must be a U32 power of two and sets the alignment; otherwise 32 is used and no key
/// is added), then tensor infos with offsets assigned in order, each aligned, then the
/// data. Errors (InvalidArgument): a tensor whose bytes.size() is not its byte size for
/// its type and dims, 0 or more than 4 dims, ne[0] not a multiple of the block size, a
/// repeated tensor name, a bad general.alignment, an array whose array_bytes do not hold
/// array_count elements of its array_type.
Result<std::vector<std::uint8_t>> serialize_gguf(std::span<const GgufKv> metadata,
                                                 std::span<const GgufTensor> tensors);

/// serialize_gguf, then written atomically (temporary file in the same directory,
/// fsync, rename). Errors: as serialize_gguf; IoError when writing fails.
Result<void> write_gguf(const std::string& path, std::span<const GgufKv> metadata,
                        std::span<const GgufTensor> tensors);

/// One tensor of a streamed write: its header entry and a function that fills its bytes
/// (exactly its byte size for the type and dims), called once, in order.
struct GgufTensorSource {
  std::string name;                    ///< the tensor's name
  GgufTensorType type = GgufTensorType::F32;  ///< element encoding
  std::vector<std::uint64_t> dims;     ///< ggml ne[], innermost first, 1 to 4 of them
  std::function<Result<void>(std::span<std::uint8_t>)> fill;  ///< writes the encoded elements
};

/// write_gguf without the whole image in memory (a multi-GB model): the header is
/// checked and written as serialize_gguf writes it, then each tensor's bytes as its
/// `fill` produces them, one tensor held at a time; written to PATH.tmp and renamed.
/// Errors: as serialize_gguf; a fill's error; IoError when writing fails (PATH.tmp removed).
Result<void> write_gguf_streamed(const std::string& path, std::span<const GgufKv> metadata,
                                 std::span<const GgufTensorSource> tensors);

/// Encodes one TQ2_0 block (66 bytes at `out`) of 256 values in {-1, 0, 1} with scale
/// `d` (rounded to f16), in quantize_row_tq2_0_ref's layout.
void encode_tq2_0_block(const std::int8_t* values, float d, std::uint8_t* out);

/// The tensor's values as f32, exactly as ggml's dequantize_row_* computes them (a TQ2_0
/// code 3 gives 2 * d, as in ggml; gguf_ternary rejects it).
/// Errors (InvalidInput): bytes.size() does not match the type and dims; a type ternjit
/// does not convert (gguf_type_converted), naming it.
Result<std::vector<float>> dequantize_gguf(const GgufTensor& tensor);

/// The exact ternary content of a TQ1_0 or TQ2_0 tensor: value k of the tensor equals
/// values[k] * scales[k / 256] (in f32), as ggml dequantizes it.
struct GgufTernary {
  std::vector<std::int8_t> values;  ///< -1, 0 or 1 per element, ggml element order
  std::vector<float> scales;        ///< one f16 scale d per 256-element block
};

/// Decodes one 256-value block of a TQ1_0 or TQ2_0 tensor (`block` points at its
/// gguf_block_bytes(type) bytes): codes[e] = value of element e + 1 (0, 1 or 2; TQ2_0
/// code 3 is passed through as 3) in ggml element order, and *scale = the block's d as
/// f32. Returns false when a code is 3 (not ternary). Precondition: type is TQ1_0 or TQ2_0.
bool gguf_ternary_block(GgufTensorType type, const std::uint8_t* block, std::uint8_t* codes, float* scale);

/// ggml's Q2_0 block (GGML_TYPE_Q2_0, type id 42): 64 values along a row as
/// { ggml_half d; uint8_t qs[16] }, 18 bytes, element j's code (qs[j/4] >> 2*(j%4)) & 3
/// and value (code - 1) * d (dequantize_row_q2_0). Not a GgufTensorType: GGUF files with
/// Q2_0 tensors are not converted; the ternary matmul dispatch reads such blocks from memory.
inline constexpr std::size_t kGgufQ2_0Elems = 64;
inline constexpr std::size_t kGgufQ2_0Bytes = 18;

/// Decodes one Q2_0 block (kGgufQ2_0Bytes at `block`): codes[j] = code of element j
/// (value + 1, as gguf_ternary_block) for j < 64, *scale = d as f32. Returns false when a
/// code is 3 (value +2, not ternary); codes are written either way.
bool gguf_q2_0_block(const std::uint8_t* block, std::uint8_t* codes, float* scale);

/// Splits a TQ1_0 or TQ2_0 tensor into ternary values and block scales. Errors
/// (InvalidInput): another type, a size mismatch, or a TQ2_0 code 3 (value 2, which
/// ggml would dequantize as 2 * d: not ternary), naming the element index.
Result<GgufTernary> gguf_ternary(const GgufTensor& tensor);

}  // namespace ternjit::formats
