// SPDX-License-Identifier: Apache-2.0
// key.h - cache keys: a versioned list of named fields, its canonical bytes and their XXH3-128 hash.
//
// A key is what identifies a stored thing completely. Its canonical bytes are
//   "tjkey\0\0\0"  u32 key-format version  str kind  u32 field-count  (str name, str value)*
// with every integer little-endian and every str a u64 length then the bytes, so two
// keys are equal exactly when their bytes are. The hash names the entry's file; the
// bytes themselves are stored in the entry and compared on every load, so a hash
// collision or an entry holding another key is a miss, never a wrong result.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ternjit::cache {

/// Version of the canonical key encoding; bump it when the encoding or the meaning of a
/// field changes (every old entry then misses).
inline constexpr std::uint32_t kKeyFormatVersion = 1;

/// One named field of a key ("target" = "x86").
struct KeyField {
  std::string name;
  std::string value;
};

/// A 128-bit XXH3 hash, in canonical (big-endian) byte order.
using Hash128 = std::array<std::uint8_t, 16>;

/// XXH3-128 of `bytes` (the xxHash library, one-shot).
Hash128 hash128(std::string_view bytes);

/// XXH3-128 of the concatenation of `parts` (streamed; no copy is made).
Hash128 hash128(std::initializer_list<std::string_view> parts);

/// `h` as 32 lowercase hex digits.
std::string hex(const Hash128& h);

/// A complete key: its kind ("artifact", "record", ...), its fields in the order they
/// were given, the canonical bytes and their hash. Immutable once built.
class Key {
 public:
  /// Builds the key of kind `kind` from `fields` (order matters and is kept).
  Key(std::string_view kind, std::vector<KeyField> fields);

  /// Parses canonical bytes (as stored in an entry). Nullopt when they are malformed or
  /// of another key-format version.
  static std::optional<Key> parse(std::string_view bytes);

  /// The kind given at construction.
  [[nodiscard]] const std::string& kind() const { return kind_; }
  /// The fields, in order.
  [[nodiscard]] const std::vector<KeyField>& fields() const { return fields_; }
  /// The value of field `name`, or "" when absent.
  [[nodiscard]] std::string_view field(std::string_view name) const;
  /// The canonical bytes (what is hashed and stored).
  [[nodiscard]] const std::string& bytes() const { return bytes_; }
  /// hash128(bytes()).
  [[nodiscard]] const Hash128& hash() const { return hash_; }
  /// hex(hash()): the entry's file stem.
  [[nodiscard]] std::string hex() const { return cache::hex(hash_); }

 private:
  std::string kind_;
  std::vector<KeyField> fields_;
  std::string bytes_;
  Hash128 hash_{};
};

/// Everything that changes a compiled kernel. Each field is text so the key stays
/// readable in `ternjit cache ls`; all of them are required (empty is a value too).
struct ArtifactKeyInputs {
  std::string ir;               ///< canonical text of the specialized module, before the pass pipeline
  std::string function;         ///< the entry function compiled
  /// The engine's targets (targets::TargetChoice::key(): "x86", or "x86>reference" when
  /// functions x86 refuses go to the reference target)
  std::string target;
  std::string machine;          ///< Target::cache_key_text(): device, ISA features, toolchain versions
  /// targets::CompileOptions::key(): opt level, threads, tuning mode, the target's
  /// options, compile-time tuning decisions, the run-time-rows bound
  std::string compile_options;
  std::string version;          ///< the ternjit version string
  std::string build_id;         ///< build_id() of the code that compiles and loads
};

/// The key of a compiled kernel ("artifact" kind, fields in ArtifactKeyInputs order).
Key artifact_key(const ArtifactKeyInputs& inputs);

/// The key of a tuning record: the kernel's key bytes and the configuration string.
Key record_key(const Key& kernel_key, std::string_view config);

/// The key of a file a target keeps beside its artifacts (DiskCache::get_file): its name
/// ("spirv.vulkan-pipelines"), what its content depends on (`identity`: device, driver)
/// and the ternjit version ("target-file" kind).
Key target_file_key(std::string_view name, std::string_view identity, std::string_view version);

/// The ternjit version this library was built as (PROJECT_VERSION, "0.1.0").
std::string_view ternjit_version();

/// Identifies the code of this build, reproducibly: the compiler's version, the build
/// type, and the GNU build-id of the ELF object holding this function (a hash the linker
/// computes over the linked output, so the same sources, flags and toolchain give the same
/// id, and any change to the code gives another). Falls back to an XXH3 hash of that
/// object's file when it has no build-id note.
std::string build_id();

}  // namespace ternjit::cache
