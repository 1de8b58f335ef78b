// SPDX-License-Identifier: Apache-2.0
// entry.h - the bytes of one cache entry file: a fixed header, the key bytes, the payload, checksummed.
//
// Layout (integers little-endian):
//   0  "tjentry\0"                 8 bytes
//   8  u32 entry-format version    (kEntryFormatVersion)
//  12  u32 kind                    (EntryKind)
//  16  u64 key size
//  24  u64 payload size
//  32  16-byte XXH3-128 checksum of bytes [0, 32) + key + payload
//  48  key bytes (Key::bytes()), then the payload
// The file is exactly 48 + key size + payload size bytes: a truncated or extended file,
// a flipped bit anywhere, or an entry of another format version fails decode_entry.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "cache/key.h"
#include "ternjit/result.h"

namespace ternjit::cache {

/// Version of the entry-file layout above; an entry of another version is a miss.
inline constexpr std::uint32_t kEntryFormatVersion = 1;

/// Size of the fixed header.
inline constexpr std::size_t kEntryHeaderSize = 48;

/// What an entry holds.
enum class EntryKind : std::uint32_t {
  Artifact = 1,    ///< a serialized targets::Artifact (artifact_codec.h)
  Record = 2,      ///< a tuning record's measurements (text)
  TargetFile = 3,  ///< a file a target keeps beside its artifacts (spirv: the Vulkan pipeline cache)
};

/// "artifact", "record" or "target-file".
const char* entry_kind_name(EntryKind kind);

/// The whole file content of an entry of `kind` for `key` holding `payload`.
std::string encode_entry(EntryKind kind, const Key& key, std::string_view payload);

/// An entry decoded in place: views into the bytes given to decode_entry.
struct EntryView {
  EntryKind kind = EntryKind::Artifact;
  std::string_view key;      ///< the stored key bytes
  std::string_view payload;  ///< the stored payload
};

/// Checks `file` (a whole entry file) and returns views of its parts. Errors
/// (InvalidInput) say what is wrong: "bad magic", "format version 7, expected 1",
/// "truncated: ...", "checksum mismatch", "unknown kind 9".
Result<EntryView> decode_entry(std::string_view file);

/// The payload of `file` (a whole entry file) when it decodes (decode_entry), is of `kind`
/// and holds exactly `key`'s bytes: what a load trusts. Errors (InvalidInput) as
/// decode_entry, or "holds a record, not an artifact", "holds another key (hash collision
/// or misplaced entry)".
Result<std::string_view> decode_entry_of(std::string_view file, EntryKind kind, const Key& key);

/// The fixed header's fields.
struct EntryHeader {
  EntryKind kind = EntryKind::Artifact;
  std::uint64_t key_size = 0;
  std::uint64_t payload_size = 0;
};

/// Checks the fixed header alone (the first kEntryHeaderSize bytes of a file of
/// `file_size` bytes; no checksum) for listings. Errors as decode_entry.
Result<EntryHeader> decode_entry_header(std::string_view header, std::uint64_t file_size);

}  // namespace ternjit::cache
