// SPDX-License-Identifier: Apache-2.0
// artifact_codec.h - targets::Artifact to bytes and back, for storing artifacts in the disk cache.
//
// Encoding (integers little-endian, str = u64 length + bytes):
//   "tjart\0\0\0"  u32 codec version  str kind  u8 code_is_ir  str bytes  str entry
//   u64 metadata count  (str name, str value)*   (names in std::map order)
// The entry that holds it is checksummed already; decoding still checks every length,
// so a bug or a format change can only give an error, never an out-of-bounds read.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "targets/target.h"
#include "ternjit/result.h"

namespace ternjit::cache {

/// Version of the artifact encoding; bump when it changes (old entries then fail to
/// decode, which the cache treats as a corrupt entry: removed and rebuilt).
inline constexpr std::uint32_t kArtifactCodecVersion = 2;

/// The bytes of `artifact` (deterministic: equal artifacts give equal bytes).
std::string encode_artifact(const targets::Artifact& artifact);

/// The artifact encoded in `bytes`. Errors (InvalidInput): bad magic, another codec
/// version, a kind that is not valid_artifact_kind(), a code_is_ir byte other than 0
/// or 1, a length past the end, metadata names out of order or
/// repeated, or trailing bytes. What decodes encodes back to `bytes`.
Result<targets::Artifact> decode_artifact(std::string_view bytes);

/// Checks that `artifact` is a kernel of `function` as `specialized` declares it: the IR
/// the artifact carries (Interpreted / Plan: its bytes; other kinds: metadata "ir") must
/// parse and declare `function` with the same argument and result types. A checksum
/// only says the entry is what was written; a loader trusting another signature would
/// read and write out of bounds. An artifact that carries no IR (a GPU kind without
/// metadata "ir") has nothing to compare and passes.
/// Errors (InvalidInput): what does not parse or which type differs.
Result<void> check_artifact_signature(const targets::Artifact& artifact, const ir::Module& specialized,
                                      std::string_view function);

/// check_artifact_signature against the specialized IR and function named by the
/// fields "ir" and "function" of an artifact entry's key (what `ternjit cache verify`
/// can check without compiling anything).
Result<void> check_artifact_entry(const targets::Artifact& artifact, std::string_view key_ir,
                                  std::string_view function);

}  // namespace ternjit::cache
