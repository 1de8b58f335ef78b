// SPDX-License-Identifier: Apache-2.0
// fuzz_vulkan_blob.cpp - libFuzzer harness: the checks a stored Vulkan pipeline-cache blob passes before a driver sees it.
//
// The blob is a side file of the disk cache (targets::SideFiles): an entry file of kind
// target-file. Its load trusts it after cache::decode_entry_of (checksum, kind, whole key)
// and spirv::check_pipeline_blob (VkPipelineCacheHeaderVersionOne against the device), both
// pure functions over bytes, called here with a fixed device identity.
// Input: byte 0 picks the mode; 0 (even): the rest is the whole entry file as read from
// disk; 1 (odd): the rest is a blob, wrapped here into a well-formed entry of the right key
// (so the header checks are reached without forging a checksum).
// Invariants: nothing crashes or reads out of bounds; a file is accepted exactly when its
// entry decodes with kind target-file and the expected key and its payload's header
// (checked here independently of pipeline_blob.cpp) says headerSize 32, version 1 and the
// device's vendorID, deviceID and pipelineCacheUUID, within the size bound; what is accepted
// round-trips: encode_entry(target-file, key, payload) == the file (wrap(unwrap(b)) == b).
#include <cstring>

#include "cache/entry.h"
#include "cache/key.h"
#include "targets/spirv/pipeline_blob.h"
#include "tests/fuzz/fuzz_testing.h"

namespace {

using namespace ternjit;

// The device the blob must name: Mesa's vendor ID, device 0, a patterned UUID.
targets::spirv::PipelineCacheIdentity device() {
  targets::spirv::PipelineCacheIdentity id;
  id.vendor_id = 0x10005;
  id.device_id = 0;
  for (std::size_t i = 0; i < id.uuid.size(); ++i) id.uuid[i] = static_cast<std::uint8_t>(0xa0 + i);
  id.driver_version = 1;
  return id;
}

std::uint32_t le32(std::string_view b, std::size_t at) {
  std::uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = v << 8 | static_cast<std::uint8_t>(b[at + static_cast<std::size_t>(i)]);
  return v;
}

// The header rule, written out again: what check_pipeline_blob must accept exactly.
bool header_names(std::string_view blob, const targets::spirv::PipelineCacheIdentity& id) {
  return blob.size() >= 32 && blob.size() <= targets::spirv::kMaxPipelineBlobBytes && le32(blob, 0) == 32 &&
         le32(blob, 4) == 1 && le32(blob, 8) == id.vendor_id && le32(blob, 12) == id.device_id &&
         std::memcmp(blob.data() + 16, id.uuid.data(), id.uuid.size()) == 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  static const targets::spirv::PipelineCacheIdentity id = device();
  static const cache::Key key = cache::target_file_key(targets::spirv::kPipelineBlobName,
                                                       targets::spirv::pipeline_blob_identity(id), "fuzz");
  const std::string_view rest = fuzz::as_text(data + 1, size - 1);
  const std::string file = (data[0] & 1) ? cache::encode_entry(cache::EntryKind::TargetFile, key, rest) : std::string(rest);

  // Unwrap: the disk cache's integrity check, then the header against the device.
  auto payload = cache::decode_entry_of(file, cache::EntryKind::TargetFile, key);
  const bool accepted =
      payload.ok() && targets::spirv::check_pipeline_blob(
                          {reinterpret_cast<const std::uint8_t*>(payload->data()), payload->size()}, id)
                          .ok();

  // The same decision from the parts: the entry decodes, is a target-file of this key, and
  // its payload's header names the device.
  auto entry = cache::decode_entry(file);
  const bool entry_ok = entry.ok() && entry->kind == cache::EntryKind::TargetFile && entry->key == key.bytes();
  if ((data[0] & 1) && !entry_ok) fuzz::finding("a wrapped blob does not decode as its own entry");
  const bool want = entry_ok && header_names(entry->payload, id);
  if (accepted != want)
    fuzz::finding(std::string("blob ") + (accepted ? "accepted" : "refused") + " against the header rule");
  if (!accepted) return 0;
  // Accepted: wrap(unwrap(b)) == b.
  if (cache::encode_entry(cache::EntryKind::TargetFile, key, *payload) != file)
    fuzz::finding("an accepted blob does not re-wrap to its bytes");
  return 0;
}
