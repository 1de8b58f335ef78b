// SPDX-License-Identifier: Apache-2.0
// artifact_codec.h - targets::Artifact to bytes and back, for storing artifacts in the disk cache.
//
// Encoding (integers little-endian, str = u64 length + bytes):
//   "tjart\0\0\0"  u32 codec version  u32 kind  str bytes  str entry
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
inline constexpr std::uint32_t kArtifactCodecVersion = 1;

/// The bytes of `artifact` (deterministic: equal artifacts give equal bytes).
std::string encode_artifact(const targets::Artifact& artifact);

/// The artifact encoded in `bytes`. Errors (InvalidInput): bad magic, another codec
/// version, an unknown kind, a length past the end, or trailing bytes.
Result<targets::Artifact> decode_artifact(std::string_view bytes);

}  // namespace ternjit::cache
