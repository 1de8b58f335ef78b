// SPDX-License-Identifier: Apache-2.0
// fuzz_gguf.cpp - libFuzzer harness: parsing a GGUF file, dequantizing and splitting its tensors.
//
// Invariants: parse_gguf never crashes, reads out of bounds or spends memory out of
// proportion to the input (-rss_limit_mb); a parsed tensor's bytes are its type's byte
// size for its dims, and the non-empty byte ranges of two tensors never overlap;
// dequantize_gguf succeeds on every parsed tensor with one value per element;
// gguf_ternary splits a TQ1_0/TQ2_0 tensor into values in {-1, 0, 1} whose products with
// the block scales are dequantize_gguf's values (or rejects a TQ2_0 code 3); serializing
// a parsed file and parsing it again gives the same metadata and tensors.
#include <algorithm>
#include <cstring>

#include "formats/gguf.h"
#include "tests/fuzz/fuzz_testing.h"

namespace {

using namespace ternjit;
using formats::GgufTensorType;
using formats::GgufValue;

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

bool same_value(const GgufValue& a, const GgufValue& b) {
  if (a.type != b.type || a.u != b.u || a.i != b.i || !same_bits(a.f, b.f) || a.b != b.b || a.str != b.str ||
      a.array_type != b.array_type || a.array_count != b.array_count)
    return false;
  if (a.type != formats::GgufValueType::Array) return true;
  // Decoded element by element (an array is a view of its encoded bytes).
  const std::vector<GgufValue> ea = a.array_elements(), eb = b.array_elements();
  if (ea.size() != a.array_count || eb.size() != b.array_count) return false;
  for (std::size_t k = 0; k < ea.size(); ++k)
    if (!same_value(ea[k], eb[k])) return false;
  return true;
}

bool same_bytes(const ir::SharedBytes& a, const ir::SharedBytes& b) {
  return a.size() == b.size() && (a.size() == 0 || std::memcmp(a.data(), b.data(), a.size()) == 0);
}

void check_tensor(const formats::GgufTensor& t) {
  const std::uint64_t n = t.elem_count();
  if (t.dims.empty() || t.dims.size() > 4) fuzz::finding("tensor '" + t.name + "' has 0 or more than 4 dims");
  const std::uint64_t blocks = n / formats::gguf_block_elems(t.type);
  if (n % formats::gguf_block_elems(t.type) != 0 || t.bytes.size() != blocks * formats::gguf_block_bytes(t.type))
    fuzz::finding("tensor '" + t.name + "' has a byte count other than its type and dims need");
  // The legacy and K quantizations and the integer types are parsed and bounds-checked
  // but not converted (formats/README.md "Unused dtypes"): dequantize_gguf refuses them.
  const bool converted = t.type == GgufTensorType::F32 || t.type == GgufTensorType::F16 ||
                         t.type == GgufTensorType::BF16 || t.type == GgufTensorType::Q8_0 ||
                         t.type == GgufTensorType::TQ1_0 || t.type == GgufTensorType::TQ2_0;
  auto values = formats::dequantize_gguf(t);
  if (!converted) {
    if (values.ok()) fuzz::finding("dequantize_gguf converts a type it does not support");
    return;
  }
  if (!values.ok()) fuzz::finding("dequantize_gguf fails on a parsed tensor: " + values.error().message);
  if (values->size() != n) fuzz::finding("dequantize_gguf gives the wrong count");
  if (t.type != GgufTensorType::TQ1_0 && t.type != GgufTensorType::TQ2_0) return;
  auto split = formats::gguf_ternary(t);
  if (!split.ok()) {
    if (t.type == GgufTensorType::TQ1_0) fuzz::finding("gguf_ternary rejects a TQ1_0 tensor: " + split.error().message);
    return;
  }
  if (split->values.size() != n || split->scales.size() != blocks) fuzz::finding("gguf_ternary gives the wrong sizes");
  for (std::size_t k = 0; k < n; ++k) {
    const std::int8_t v = split->values[k];
    if (v < -1 || v > 1) fuzz::finding("gguf_ternary gives a value outside {-1, 0, 1}");
    const float product = static_cast<float>(v) * split->scales[k / 256];
    if (!same_bits(product, (*values)[k]) && !(product != product && (*values)[k] != (*values)[k]))
      fuzz::finding("gguf_ternary's value * scale differs from dequantize_gguf at element " + std::to_string(k));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto file = formats::parse_gguf(ir::SharedBytes::borrow({data, size}), "fuzz.gguf");
  if (!file.ok()) {
    if (file.error().message.rfind("fuzz.gguf: ", 0) != 0)
      fuzz::finding("an error does not name the file: " + file.error().message);
    return 0;
  }
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
  for (const formats::GgufTensor& t : file->tensors) {
    check_tensor(t);
    if (!t.bytes.empty()) ranges.emplace_back(t.offset, t.offset + t.bytes.size());
  }
  std::sort(ranges.begin(), ranges.end());
  for (std::size_t r = 1; r < ranges.size(); ++r)
    if (ranges[r].first < ranges[r - 1].second) fuzz::finding("two tensors' data overlap");
  auto image = formats::serialize_gguf(file->metadata, file->tensors);
  if (!image.ok()) fuzz::finding("a parsed file does not serialize: " + image.error().message);
  auto back = formats::parse_gguf(ir::SharedBytes::borrow(*image), "serialized");
  if (!back.ok()) fuzz::finding("a serialized file does not parse: " + back.error().message);
  if (back->metadata.size() != file->metadata.size() || back->tensors.size() != file->tensors.size())
    fuzz::finding("a serialized file parses to other counts");
  for (std::size_t k = 0; k < file->metadata.size(); ++k)
    if (back->metadata[k].key != file->metadata[k].key || !same_value(back->metadata[k].value, file->metadata[k].value))
      fuzz::finding("a serialized file parses to other metadata at key/value " + std::to_string(k));
  for (std::size_t k = 0; k < file->tensors.size(); ++k) {
    const formats::GgufTensor& a = file->tensors[k];
    const formats::GgufTensor& b = back->tensors[k];
    if (a.name != b.name || a.type != b.type || a.dims != b.dims || !same_bytes(a.bytes, b.bytes))
      fuzz::finding("a serialized file parses to another tensor " + std::to_string(k));
  }
  return 0;
}
