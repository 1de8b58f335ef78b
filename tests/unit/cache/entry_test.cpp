// SPDX-License-Identifier: Apache-2.0
// entry_test.cpp - the entry file format and the artifact codec: round trips; every bit flip and truncation detected.
#include <doctest/doctest.h>

#include "cache/artifact_codec.h"
#include "cache/entry.h"

namespace ternjit::cache {
namespace {

TEST_CASE("entry: round trip") {
  const Key k("artifact", {{"x", "1"}});
  const std::string file = encode_entry(EntryKind::Artifact, k, "payload bytes");
  CHECK(file.size() == kEntryHeaderSize + k.bytes().size() + 13);
  auto e = decode_entry(file);
  REQUIRE(e.ok());
  CHECK(e->kind == EntryKind::Artifact);
  CHECK(e->key == k.bytes());
  CHECK(e->payload == "payload bytes");
  auto r = decode_entry(encode_entry(EntryKind::Record, k, ""));
  REQUIRE(r.ok());
  CHECK(r->kind == EntryKind::Record);
  CHECK(r->payload.empty());
}

TEST_CASE("entry: every single-bit flip is detected") {
  const Key k("artifact", {{"x", "1"}});
  const std::string file = encode_entry(EntryKind::Artifact, k, "some payload");
  int detected = 0, total = 0;
  for (std::size_t i = 0; i < file.size(); ++i)
    for (int bit = 0; bit < 8; ++bit) {
      std::string bad = file;
      bad[i] = static_cast<char>(bad[i] ^ (1 << bit));
      ++total;
      detected += !decode_entry(bad).ok();
    }
  CHECK(detected == total);
}

TEST_CASE("entry: truncation and extension are detected, with a message") {
  const Key k("artifact", {{"x", "1"}});
  const std::string file = encode_entry(EntryKind::Artifact, k, "0123456789");
  for (std::size_t n = 0; n < file.size(); ++n) CHECK_FALSE(decode_entry(file.substr(0, n)).ok());
  auto ext = decode_entry(file + "!");
  REQUIRE_FALSE(ext.ok());
  CHECK(ext.error().message.find("truncated or extended") != std::string::npos);
  std::string flipped = file;
  flipped.back() ^= 1;
  CHECK(decode_entry(flipped).error().message == "checksum mismatch");
  std::string other_version = file;
  other_version[8] = 9;
  CHECK(decode_entry(other_version).error().message.find("format version 9") != std::string::npos);
}

TEST_CASE("artifact codec: round trip and bounds-checked decoding") {
  targets::Artifact a;
  a.kind = "x86-plan";
  a.code_is_ir = true;
  a.bytes = {1, 2, 3, 0, 255};
  a.entry = "tgemv_f16_m1_k4096__avx512vnni";
  a.metadata = {{"isa", "avx512_vnni"}, {"tile", "m4n16"}};
  const std::string bytes = encode_artifact(a);
  auto b = decode_artifact(bytes);
  REQUIRE(b.ok());
  CHECK(b->kind == a.kind);
  CHECK(b->code_is_ir);
  CHECK(b->bytes == a.bytes);
  CHECK(b->entry == a.entry);
  CHECK(b->metadata == a.metadata);
  CHECK(encode_artifact(*b) == bytes);
  for (std::size_t n = 0; n < bytes.size(); ++n) CHECK_FALSE(decode_artifact(bytes.substr(0, n)).ok());
  CHECK_FALSE(decode_artifact(bytes + "x").ok());
  // The kind is the target's name for its bytes: any short [a-z0-9_-] text, nothing else.
  for (const char* bad : {"", "X86", "a b", "kind\n", "0123456789012345678901234567890123"}) {
    INFO(bad);
    a.kind = bad;
    auto d = decode_artifact(encode_artifact(a));
    REQUIRE_FALSE(d.ok());
    CHECK(d.error().message.find("invalid kind") != std::string::npos);
  }
}

// Found by fuzz_cache: two metadata entries with one name decoded to one (the second
// dropped silently), so decoding then encoding changed the bytes.
TEST_CASE("artifact codec: metadata names repeated or out of order do not decode") {
  targets::Artifact a;
  a.kind = "ir-text";
  a.metadata = {{"a", "1"}, {"b", "2"}};
  const std::string bytes = encode_artifact(a);
  const std::string first = std::string("\x01\0\0\0\0\0\0\0a", 9) + std::string("\x01\0\0\0\0\0\0\0" "1", 9);
  const std::string second = std::string("\x01\0\0\0\0\0\0\0b", 9) + std::string("\x01\0\0\0\0\0\0\0" "2", 9);
  REQUIRE(bytes.size() > first.size() + second.size());
  REQUIRE(bytes.substr(bytes.size() - 36) == first + second);
  const std::string head = bytes.substr(0, bytes.size() - 36);
  auto repeated = decode_artifact(head + first + first);
  REQUIRE_FALSE(repeated.ok());
  CHECK(repeated.error().message.find("metadata name 'a' out of order or repeated") != std::string::npos);
  CHECK_FALSE(decode_artifact(head + second + first).ok());
}

}  // namespace
}  // namespace ternjit::cache
