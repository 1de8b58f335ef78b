// SPDX-License-Identifier: Apache-2.0
// entry.cpp - encoding and checking entry files (layout in entry.h).
#include "cache/entry.h"

#include <cstring>

namespace ternjit::cache {

namespace {

constexpr char kMagic[8] = {'t', 'j', 'e', 'n', 't', 'r', 'y', 0};

void put_le(char* p, std::uint64_t v, int n) {
  for (int i = 0; i < n; ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
std::uint64_t get_le(const char* p, int n) {
  std::uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= std::uint64_t(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

Error bad(std::string message) { return make_error(ErrorCode::InvalidInput, std::move(message)); }

}  // namespace

const char* entry_kind_name(EntryKind kind) {
  switch (kind) {
    case EntryKind::Artifact: return "artifact";
    case EntryKind::Record: return "record";
    case EntryKind::TargetFile: return "target-file";
  }
  return "unknown";
}

std::string encode_entry(EntryKind kind, const Key& key, std::string_view payload) {
  std::string out(kEntryHeaderSize, '\0');
  std::memcpy(out.data(), kMagic, sizeof kMagic);
  put_le(out.data() + 8, kEntryFormatVersion, 4);
  put_le(out.data() + 12, static_cast<std::uint32_t>(kind), 4);
  put_le(out.data() + 16, key.bytes().size(), 8);
  put_le(out.data() + 24, payload.size(), 8);
  const Hash128 sum = hash128({std::string_view(out.data(), 32), key.bytes(), payload});
  std::memcpy(out.data() + 32, sum.data(), sum.size());
  out.reserve(kEntryHeaderSize + key.bytes().size() + payload.size());
  out += key.bytes();
  out += payload;
  return out;
}

Result<EntryHeader> decode_entry_header(std::string_view header, std::uint64_t file_size) {
  if (header.size() < kEntryHeaderSize || file_size < kEntryHeaderSize)
    return bad("truncated: " + std::to_string(file_size) + " bytes, shorter than the " +
               std::to_string(kEntryHeaderSize) + "-byte header");
  if (std::memcmp(header.data(), kMagic, sizeof kMagic) != 0) return bad("bad magic (not a ternjit cache entry)");
  const auto version = static_cast<std::uint32_t>(get_le(header.data() + 8, 4));
  if (version != kEntryFormatVersion)
    return bad("format version " + std::to_string(version) + ", expected " + std::to_string(kEntryFormatVersion));
  EntryHeader h;
  const auto kind = static_cast<std::uint32_t>(get_le(header.data() + 12, 4));
  if (kind != static_cast<std::uint32_t>(EntryKind::Artifact) && kind != static_cast<std::uint32_t>(EntryKind::Record) &&
      kind != static_cast<std::uint32_t>(EntryKind::TargetFile))
    return bad("unknown kind " + std::to_string(kind));
  h.kind = static_cast<EntryKind>(kind);
  h.key_size = get_le(header.data() + 16, 8);
  h.payload_size = get_le(header.data() + 24, 8);
  const std::uint64_t body = file_size - kEntryHeaderSize;
  // Compare without overflow: a corrupt size field may be close to 2^64.
  if (h.key_size > body || h.payload_size != body - h.key_size)
    return bad("truncated or extended: " + std::to_string(file_size) + " bytes, the header says " +
               std::to_string(kEntryHeaderSize) + " + key " + std::to_string(h.key_size) + " + payload " +
               std::to_string(h.payload_size));
  return h;
}

Result<EntryView> decode_entry(std::string_view file) {
  TERNJIT_TRY(EntryHeader h, decode_entry_header(file, file.size()));
  const std::string_view key = file.substr(kEntryHeaderSize, h.key_size);
  const std::string_view payload = file.substr(kEntryHeaderSize + h.key_size);
  const Hash128 sum = hash128({file.substr(0, 32), key, payload});
  if (std::memcmp(sum.data(), file.data() + 32, sum.size()) != 0) return bad("checksum mismatch");
  return EntryView{h.kind, key, payload};
}

Result<std::string_view> decode_entry_of(std::string_view file, EntryKind kind, const Key& key) {
  TERNJIT_TRY(EntryView e, decode_entry(file));
  if (e.kind != kind) {
    const auto with_article = [](EntryKind k) {
      const std::string name = entry_kind_name(k);
      return (name[0] == 'a' ? "an " : "a ") + name;
    };
    return bad("holds " + with_article(e.kind) + ", not " + with_article(kind));
  }
  if (e.key != key.bytes()) return bad("holds another key (hash collision or misplaced entry)");
  return e.payload;
}

}  // namespace ternjit::cache
