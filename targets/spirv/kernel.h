// SPDX-License-Identifier: Apache-2.0
// kernel.h - a loaded SPIR-V program on a Vulkan device: its buffers, pipelines and one recorded command buffer.
//
// The host-copy run path (Program::run, `ternjit run`, Python): inputs are copied into
// host-visible device buffers, the command buffer recorded at load runs every step
// (dispatches and copies, with barriers between them) and outputs are copied back. The
// framework path (launch) records the same dispatches into the caller's command
// buffer on the caller's buffers and returns without waiting (targets/README.md, "GPU
// targets"). Private to targets/spirv/.
#pragma once

#include <atomic>
#include <map>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <span>
#include <vector>

#include "targets/common/device_weights.h"
#include "targets/spirv/shader_set.h"
#include "targets/spirv/vulkan_device.h"

namespace ternjit::targets::spirv {

/// The tile sizes of one shader: the workgroup width and (tmatmul) rows per invocation.
struct ShaderConfig {
  std::uint32_t workgroup = kDefaultWorkgroup;
  std::uint32_t rows = 1;
};

/// "wg=64;tm=4" <-> ShaderConfig; nullopt for text of another form.
std::string config_text(const ShaderConfig& c);
std::optional<ShaderConfig> parse_config(std::string_view text);
/// Whether `c` runs on `device` (workgroup within its limits, a dispatch grid it takes).
bool config_fits(const ShaderConfig& c, const DeviceInfo& device, const Shader& shader);

/// A loaded program.
class Kernel {
 public:
  /// Creates the buffers (uploading the load-time values; a tmatmul weight whose
  /// `weight_keys` entry is not empty through `weights`, once per Program), the pipelines of `modules` (validated first) with
  /// `configs` (one per shader) and records the command buffer. Errors: InvalidInput
  /// for a module that fails validation or a bad weight, Unavailable for device
  /// failures (allocation, loss). The device's pipeline cache is saved to `side_files`
  /// (the engine's kernel cache; null when caching is off).
  static Result<std::shared_ptr<Kernel>> create(std::shared_ptr<Device> device, ShaderSet program,
                                                const std::vector<std::vector<std::uint32_t>>& modules,
                                                const std::vector<ShaderConfig>& configs,
                                                const std::vector<LoadValue>& load_values,
                                                const std::vector<std::string>& weight_keys, DeviceWeights* weights,
                                                const SideFiles* side_files);
  ~Kernel();
  Kernel(const Kernel&) = delete;
  Kernel& operator=(const Kernel&) = delete;

  /// The host-copy path: `buffers` = input pointers then output pointers (the sizes of
  /// the plan). Thread-safe (calls are serialized per kernel). Errors: Unavailable on
  /// device loss or timeout, InvalidArgument for a null buffer.
  Result<void> run(void* const* buffers);

  /// The framework path: records this program's steps into `cb` (in the recording
  /// state, on a queue of this kernel's device) reading and writing the caller's
  /// `buffers` (inputs then outputs, each at least its plan size rounded up to 4 bytes).
  /// Nothing is submitted or waited for. The descriptor sets of each distinct tuple of
  /// buffers are made once and kept with the kernel (the caller's command buffers may
  /// still use them). Errors: InvalidArgument for a null handle.
  Result<void> record(VkCommandBuffer cb, const VkBuffer* buffers);

  /// The device time of the last run() in nanoseconds (timestamp queries; 0 when the
  /// queue has no timestamps).
  [[nodiscard]] double last_device_ns() const { return last_device_ns_.load(); }
  [[nodiscard]] const Device& device() const { return *device_; }

 private:
  Kernel() = default;
  // A pool with room for one descriptor set per shader.
  Result<VkDescriptorPool> descriptor_pool() const;
  Result<VkDescriptorSet> descriptor_set(std::size_t shader, std::span<const VkBuffer> buffers);
  void record_steps(VkCommandBuffer cb, std::span<const VkDescriptorSet> sets, std::span<const VkBuffer> io);
  VkBuffer buffer_of(const Slot& s, std::span<const VkBuffer> io) const;

  std::shared_ptr<Device> device_;
  ShaderSet program_;
  std::vector<ShaderConfig> configs_;
  std::vector<DeviceBuffer> io_;       // inputs then outputs, host-visible
  std::vector<DeviceBuffer> scratch_;  // by ShaderSet::scratch_offsets
  std::vector<std::shared_ptr<const void>> consts_;  // DeviceBuffer per load-time value (null: unused)
  std::vector<std::unique_ptr<Pipeline>> pipelines_;
  VkDescriptorPool pool_ = VK_NULL_HANDLE;
  std::vector<VkDescriptorSet> sets_;
  VkCommandBuffer cb_ = VK_NULL_HANDLE;
  VkQueryPool queries_ = VK_NULL_HANDLE;
  std::vector<VkDescriptorPool> framework_pools_;  // descriptor sets of record() calls
  std::map<std::vector<VkBuffer>, std::vector<VkDescriptorSet>> framework_sets_;  // by the caller's buffers
  std::mutex mutex_;
  std::atomic<double> last_device_ns_{0};
};

/// The per-shader dispatch grid for `c`: workgroups in x and y.
std::pair<std::uint32_t, std::uint32_t> dispatch_grid(const Shader& shader, const ShaderConfig& c);

}  // namespace ternjit::targets::spirv
