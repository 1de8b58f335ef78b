// SPDX-License-Identifier: Apache-2.0
// pipeline_blob.h - what a stored Vulkan pipeline-cache blob must be before a driver sees it.
//
// The blob is kept in the engine's kernel cache as a side file (targets::SideFiles: the
// disk cache's directory and file checks, checksum and key comparison, so it is trusted
// exactly as much as an artifact). Before vkCreatePipelineCache gets it, its
// VkPipelineCacheHeaderVersionOne must name this device: a blob of another device, a
// truncated one or a forged header is refused with the reason. Pure functions over bytes
// (no Vulkan device): tests and tests/fuzz/fuzz_vulkan_blob.cpp call them directly.
// Private to targets/spirv/.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "ternjit/result.h"

namespace ternjit::targets::spirv {

/// What a pipeline-cache header must match (VkPhysicalDeviceProperties of the device).
struct PipelineCacheIdentity {
  std::uint32_t vendor_id = 0;
  std::uint32_t device_id = 0;
  std::array<std::uint8_t, 16> uuid{};  ///< pipelineCacheUUID
  std::uint32_t driver_version = 0;     ///< not in the header: in the side file's key only
};

/// The side file's name (targets::SideFiles).
inline constexpr std::string_view kPipelineBlobName = "spirv.vulkan-pipelines";
/// The largest blob read or written: a driver's cache of this project's few dozen shaders
/// is far smaller; anything larger is refused unread.
inline constexpr std::uint64_t kMaxPipelineBlobBytes = std::uint64_t{64} << 20;
/// The size of VkPipelineCacheHeaderVersionOne (headerSize must equal it).
inline constexpr std::size_t kPipelineHeaderBytes = 32;

/// The side file's identity text: "vendor=0x10005;device=0x0;uuid=<32 hex>;driver=<n>".
std::string pipeline_blob_identity(const PipelineCacheIdentity& id);

/// Checks a blob: at most kMaxPipelineBlobBytes, and it starts with a
/// VkPipelineCacheHeaderVersionOne (little-endian whatever the host, per the Vulkan spec)
/// whose headerSize is 32, headerVersion 1 (VK_PIPELINE_CACHE_HEADER_VERSION_ONE), and
/// vendorID, deviceID and pipelineCacheUUID those of `want`. Errors (InvalidInput) name the
/// field and both values ("deviceID 0x1234, this device's is 0x0").
Result<void> check_pipeline_blob(std::span<const std::uint8_t> blob, const PipelineCacheIdentity& want);

}  // namespace ternjit::targets::spirv
