// SPDX-License-Identifier: Apache-2.0
// fuzz_cache.cpp - libFuzzer harness: decoding a cache entry file and the artifact it holds.
//
// Invariants: decode_entry, Key::parse, decode_artifact and check_artifact_entry never
// crash or read out of bounds on any bytes; what decodes re-encodes to the same bytes.
#include "cache/artifact_codec.h"
#include "cache/entry.h"
#include "cache/key.h"
#include "tests/fuzz/fuzz_testing.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ternjit;
  const std::string_view file = fuzz::as_text(data, size);
  // The payload alone, as an artifact, too: the fuzzer rarely forges a checksum.
  if (auto a = cache::decode_artifact(file); a.ok() && cache::encode_artifact(*a) != file)
    fuzz::finding("an artifact does not re-encode to its bytes");
  auto entry = cache::decode_entry(file);
  if (!entry.ok()) return 0;
  auto key = cache::Key::parse(entry->key);
  if (!key) return 0;
  if (cache::encode_entry(entry->kind, *key, entry->payload) != file)
    fuzz::finding("an entry does not re-encode to its bytes");
  if (entry->kind != cache::EntryKind::Artifact) return 0;
  auto artifact = cache::decode_artifact(entry->payload);
  if (!artifact.ok()) return 0;
  (void)cache::check_artifact_entry(*artifact, key->field("ir"), key->field("function"));
  return 0;
}
