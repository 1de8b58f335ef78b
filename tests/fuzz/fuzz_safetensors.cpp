// SPDX-License-Identifier: Apache-2.0
// fuzz_safetensors.cpp - libFuzzer harness: parsing a safetensors file, and what reads its tensors.
//
// Invariants: parse_safetensors never crashes, reads out of bounds or spends memory out of
// proportion to the input (-rss_limit_mb); a parsed file's tensors hold exactly
// product(shape) * dtype size bytes, inside the input; to_f32 and to_i8 succeed or fail
// with a message, never crash, and refuse the dtypes the parser reads but never converts; serializing a parsed file and parsing it again gives the
// same tensors (names, dtypes, shapes, bytes) and metadata, and serializing that gives the
// same bytes (serialization is deterministic).
#include <cstring>

#include "formats/safetensors.h"
#include "tests/fuzz/fuzz_testing.h"

namespace {

using namespace ternjit;

bool same_file(const formats::StFile& a, const formats::StFile& b) {
  if (a.metadata != b.metadata || a.tensors.size() != b.tensors.size()) return false;
  for (std::size_t i = 0; i < a.tensors.size(); ++i) {
    const formats::StTensor& x = a.tensors[i];
    const formats::StTensor& y = b.tensors[i];
    if (x.name != y.name || x.dtype != y.dtype || x.kind != y.kind || x.shape != y.shape ||
        x.bytes.size() != y.bytes.size() || (x.bytes.size() != 0 && std::memcmp(x.bytes.data(), y.bytes.data(), x.bytes.size()) != 0))
      return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto file = formats::parse_safetensors(std::span<const std::uint8_t>(data, size), "fuzz.safetensors");
  if (!file.ok()) {
    if (file.error().message.rfind("fuzz.safetensors: ", 0) != 0)
      fuzz::finding("an error does not name the file: " + file.error().message);
    return 0;
  }
  std::uint64_t total = 0;
  for (const formats::StTensor& t : file->tensors) {
    if (t.name == "__metadata__") fuzz::finding("a tensor called __metadata__");
    total += t.bytes.size();
    // A dtype parsed but never converted (F64, I64, BOOL, ...: `used` false) is refused by
    // both readers. Every other dtype converts to f32 but an I32 value f32 cannot hold; an
    // I8 tensor converts to int8. Anything else would be a parser bug (a byte count off its shape).
    if (!t.used) {
      if (formats::to_f32(t).ok() || formats::to_i8(t).ok())
        fuzz::finding("tensor '" + t.name + "' of unconverted dtype " + t.dtype + " converts");
      continue;
    }
    std::uint64_t numel = 1;
    for (std::int64_t d : t.shape) numel *= static_cast<std::uint64_t>(d);
    if (auto f = formats::to_f32(t); f.ok() ? f->size() != numel : t.kind != ElemKind::I32)
      fuzz::finding("to_f32 of tensor '" + t.name + "' fails or has the wrong size");
    if (auto i = formats::to_i8(t); i.ok() ? i->size() != numel : t.kind == ElemKind::I8)
      fuzz::finding("to_i8 of tensor '" + t.name + "' fails or has the wrong size");
  }
  if (total > size) fuzz::finding("the tensors hold more bytes than the file");
  const std::vector<std::uint8_t> image = formats::serialize_safetensors(*file);
  auto back = formats::parse_safetensors(std::span<const std::uint8_t>(image), "serialized");
  if (!back.ok()) fuzz::finding("a serialized file does not parse: " + back.error().message);
  if (!same_file(*file, *back)) fuzz::finding("a serialized file parses to other tensors or metadata");
  if (formats::serialize_safetensors(*back) != image) fuzz::finding("serialization is not deterministic");
  return 0;
}
