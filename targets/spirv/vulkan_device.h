// SPDX-License-Identifier: Apache-2.0
// vulkan_device.h - Vulkan physical devices (description, selection) and one opened device: buffers, pipelines, submits.
//
// The GPU model of targets/README.md ("GPU targets") on Vulkan: a Device is opened once
// per process and physical device and shared by every Engine; buffers are DeviceBuffers
// (device-local, or host-visible for the host-copy run path); a compute pipeline is
// created from validated SPIR-V with its specialization constants through the device's
// pipeline cache, whose blob lives in the kernel cache directory keyed by the device's
// pipeline-cache UUID and driver version. Private to targets/spirv/.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "targets/spirv/pipeline_blob.h"
#include "targets/spirv/vulkan_api.h"
#include "targets/target.h"
#include "ternjit/result.h"

namespace ternjit::targets::spirv {

/// One Vulkan physical device, as `ternjit info` lists it.
struct DeviceInfo {
  std::uint32_t index = 0;
  std::string name;
  VkPhysicalDeviceType type = VK_PHYSICAL_DEVICE_TYPE_OTHER;
  std::string driver;                        ///< driver name and info ("llvmpipe Mesa 22.3.6")
  std::uint32_t api_version = 0, driver_version = 0;
  std::array<std::uint8_t, VK_UUID_SIZE> cache_uuid{};  ///< pipelineCacheUUID
  std::uint32_t vendor_id = 0, device_id = 0;           ///< vendorID, deviceID
  std::uint64_t device_local_bytes = 0;      ///< the largest device-local heap
  std::uint32_t subgroup_size = 0;
  bool int_dot = false;              ///< shaderIntegerDotProduct (VK_KHR_shader_integer_dot_product or 1.3)
  bool int_dot_accelerated = false;  ///< integerDotProduct4x8BitPackedSignedAccelerated
  bool timestamps = false;           ///< the compute queue writes timestamps
  float timestamp_period_ns = 0;
  std::uint32_t max_workgroup_invocations = 0, max_workgroup_size_x = 0, max_shared_bytes = 0;
  std::uint32_t max_storage_buffer_range = 0;
  std::uint32_t compute_queue_family = UINT32_MAX;  ///< UINT32_MAX: none
  VkPhysicalDevice handle = VK_NULL_HANDLE;

  /// "discrete gpu", "integrated gpu", "virtual gpu", "cpu" or "other".
  [[nodiscard]] std::string type_name() const;
  /// True for a GPU (discrete, integrated or virtual), false for a CPU implementation.
  [[nodiscard]] bool is_gpu() const;
  /// The cache-key text of the device: name, driver version, pipeline-cache UUID (hex).
  [[nodiscard]] std::string key() const;
  /// What a stored pipeline-cache blob must name (pipeline_blob.h): this device.
  [[nodiscard]] PipelineCacheIdentity pipeline_identity() const;
  /// The target-neutral description (targets/target.h) `ternjit info` prints; `selected`
  /// is left false.
  [[nodiscard]] DeviceDescription description() const;
};

/// Every physical device of the process's instance (enumerated once). Errors as vulkan_api().
Result<const std::vector<DeviceInfo>*> devices();

/// Whether a GPU driver exposes a device node here (/dev/dri/renderD*, /dev/nvidia*,
/// /dev/kfd, /dev/dxg), checked once per process without loading Vulkan: with none, the
/// only Vulkan devices can be CPU implementations, which `auto` never picks.
bool gpu_device_node_exists();

/// The device an option names: "" or "auto" (a discrete GPU first, then integrated,
/// virtual, and a CPU implementation last), an index ("1"), or a case-insensitive
/// substring of the name ("llvmpipe"). Errors: Unavailable (no device with a compute
/// queue), InvalidArgument (no device matches, listing them).
Result<const DeviceInfo*> select_device(std::string_view option);

class Device;

/// A VkBuffer and its memory; move-only, freed with the last owner.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();

  [[nodiscard]] VkBuffer buffer() const { return buffer_; }
  [[nodiscard]] std::size_t size() const { return size_; }
  /// The mapped bytes (host-visible buffers), else null.
  [[nodiscard]] std::uint8_t* mapped() const { return mapped_; }

 private:
  friend class Device;
  std::shared_ptr<const Device> device_;  // a buffer (a Program's weights) may outlive every kernel
  VkBuffer buffer_ = VK_NULL_HANDLE;
  VkDeviceMemory memory_ = VK_NULL_HANDLE;
  std::size_t size_ = 0;
  std::uint8_t* mapped_ = nullptr;
};

/// A compute pipeline with its layouts.
struct Pipeline {
  std::shared_ptr<const Device> device;
  VkShaderModule module = VK_NULL_HANDLE;
  VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  VkPipeline pipeline = VK_NULL_HANDLE;
  std::uint32_t bindings = 0;
  Pipeline() = default;
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;
  ~Pipeline();
};

/// An opened logical device with one compute queue, shared by every Engine of the process.
class Device : public std::enable_shared_from_this<Device> {
 public:
  /// The device for `info`, opened on first use. Errors: Unavailable when creation fails.
  static Result<std::shared_ptr<Device>> open(const DeviceInfo& info);
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  [[nodiscard]] const VulkanApi& vk() const { return *vk_; }
  [[nodiscard]] VkDevice handle() const { return device_; }
  /// The compute queue (external synchronization: Device submits under its own lock;
  /// a framework recording for this device submits on it from one thread, see
  /// targets/README.md "GPU targets").
  [[nodiscard]] VkQueue queue() const { return queue_; }
  [[nodiscard]] const DeviceInfo& info() const { return info_; }
  /// True when shaders may use OpSDot (the feature was enabled at creation).
  [[nodiscard]] bool int_dot() const { return int_dot_; }

  /// A storage buffer of `bytes` (at least 16). `host_visible`: mapped, coherent (the
  /// host-copy path's inputs and outputs); otherwise device-local when the device has
  /// such memory. Errors: Unavailable on allocation failure (out of device memory).
  Result<DeviceBuffer> create_buffer(std::size_t bytes, bool host_visible) const;
  /// Copies `data` into `dst` at offset 0 (through a staging buffer when `dst` is not
  /// mapped) and waits.
  Result<void> upload(const DeviceBuffer& dst, std::span<const std::uint8_t> data) const;
  /// A compute pipeline of `spirv` with `bindings` storage buffers (0..bindings-1) and
  /// 32-bit specialization constants `spec` (constant_id i is spec[i]), through the
  /// pipeline cache. Errors: Internal when the driver rejects it.
  Result<std::unique_ptr<Pipeline>> create_pipeline(std::span<const std::uint32_t> spirv, std::uint32_t bindings,
                                                    std::span<const std::uint32_t> spec) const;
  /// A command buffer from the device's pool (primary, freed by free_commands).
  Result<VkCommandBuffer> allocate_commands() const;
  void free_commands(VkCommandBuffer cb) const;
  /// Submits `cb` on the queue and waits for it (at most `timeout_ns`). Errors:
  /// Unavailable on device loss or timeout.
  Result<void> submit_and_wait(VkCommandBuffer cb, std::uint64_t timeout_ns = 60'000'000'000ull) const;
  /// Merges the pipeline-cache blob kept in `files` (the engine's kernel cache) into the
  /// device's cache, once per store (null does nothing). The blob must pass the store's
  /// checks and check_pipeline_blob for this device; a missing, refused or damaged one is
  /// ignored (the store warns): the cache is a speed-up, never a correctness matter.
  void load_pipeline_cache(const SideFiles* files) const;
  /// Writes the pipeline cache's blob to `files` (null does nothing) if pipelines were
  /// created since the last save there. Failures only warn.
  void save_pipeline_cache(const SideFiles* files) const;

 private:
  Device() = default;
  const VulkanApi* vk_ = nullptr;
  DeviceInfo info_;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkPipelineCache cache_ = VK_NULL_HANDLE;
  bool int_dot_ = false;
  std::uint32_t host_type_ = UINT32_MAX, device_type_ = UINT32_MAX;  // memory type indices
  mutable std::mutex mutex_;  // the queue, the command pool, the cache file
  mutable std::uint64_t pipelines_created_ = 0;  // bumped by create_pipeline
  // Per side-file store (SideFiles::where): the blob was merged, and pipelines_created_ at its last save.
  mutable std::vector<std::pair<std::string, std::uint64_t>> cache_dirs_;
};

}  // namespace ternjit::targets::spirv
