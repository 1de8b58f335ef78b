// SPDX-License-Identifier: Apache-2.0
// pipeline_blob.cpp - the checks of a stored Vulkan pipeline-cache blob (pipeline_blob.h).
#include "targets/spirv/pipeline_blob.h"

#include <algorithm>
#include <cstdio>

namespace ternjit::targets::spirv {

namespace {

std::uint32_t le32(const std::uint8_t* p) {
  return std::uint32_t(p[0]) | std::uint32_t(p[1]) << 8 | std::uint32_t(p[2]) << 16 | std::uint32_t(p[3]) << 24;
}

std::string hex32(std::uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%x", v);
  return buf;
}

std::string hex(std::span<const std::uint8_t> bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s;
  for (std::uint8_t b : bytes) s += {kDigits[b >> 4], kDigits[b & 15]};
  return s;
}

Error bad(const std::string& what) {
  return make_error(ErrorCode::InvalidInput, "Vulkan pipeline cache: " + what);
}

}  // namespace

std::string pipeline_blob_identity(const PipelineCacheIdentity& id) {
  return "vendor=" + hex32(id.vendor_id) + ";device=" + hex32(id.device_id) + ";uuid=" + hex(id.uuid) +
         ";driver=" + std::to_string(id.driver_version);
}

Result<void> check_pipeline_blob(std::span<const std::uint8_t> blob, const PipelineCacheIdentity& want) {
  if (blob.size() > kMaxPipelineBlobBytes)
    return bad(std::to_string(blob.size()) + " bytes, more than the " + std::to_string(kMaxPipelineBlobBytes) +
               " allowed");
  if (blob.size() < kPipelineHeaderBytes)
    return bad("truncated: " + std::to_string(blob.size()) + " bytes, shorter than the " +
               std::to_string(kPipelineHeaderBytes) + "-byte header");
  const std::uint8_t* p = blob.data();
  if (const std::uint32_t size = le32(p); size != kPipelineHeaderBytes)
    return bad("headerSize " + std::to_string(size) + ", expected " + std::to_string(kPipelineHeaderBytes));
  if (const std::uint32_t version = le32(p + 4); version != 1)
    return bad("headerVersion " + std::to_string(version) + ", expected 1 (VK_PIPELINE_CACHE_HEADER_VERSION_ONE)");
  if (const std::uint32_t vendor = le32(p + 8); vendor != want.vendor_id)
    return bad("vendorID " + hex32(vendor) + ", this device's is " + hex32(want.vendor_id));
  if (const std::uint32_t device = le32(p + 12); device != want.device_id)
    return bad("deviceID " + hex32(device) + ", this device's is " + hex32(want.device_id));
  const std::span<const std::uint8_t> uuid = blob.subspan(16, want.uuid.size());
  if (!std::equal(uuid.begin(), uuid.end(), want.uuid.begin()))
    return bad("pipelineCacheUUID " + hex(uuid) + ", this device's is " + hex(want.uuid));
  return success();
}

}  // namespace ternjit::targets::spirv
