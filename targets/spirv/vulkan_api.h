// SPDX-License-Identifier: Apache-2.0
// vulkan_api.h - the Vulkan loader opened with dlopen (libvulkan.so.1) and the entry points the target calls.
//
// Nothing links libvulkan: the headers come from libvulkan-dev (VK_NO_PROTOTYPES), the
// loader is opened at run time and every function is fetched through
// vkGetInstanceProcAddr, so a machine without a loader or an ICD builds and starts and
// the target reports "unavailable: why". Private to targets/spirv/.
#pragma once

#ifndef VK_NO_PROTOTYPES
#define VK_NO_PROTOTYPES
#endif
#include <vulkan/vulkan.h>

#include <string>

#include "ternjit/result.h"

namespace ternjit::targets::spirv {

// Global (no instance) entry points.
#define TERNJIT_VK_GLOBAL_FUNCTIONS(X) \
  X(vkCreateInstance)                  \
  X(vkEnumerateInstanceVersion)

// Instance-level entry points (device-level ones fetched through the instance too: one
// dispatch table per process is enough for the devices this target creates).
#define TERNJIT_VK_INSTANCE_FUNCTIONS(X)     \
  X(vkDestroyInstance)                       \
  X(vkEnumeratePhysicalDevices)              \
  X(vkGetPhysicalDeviceProperties)           \
  X(vkGetPhysicalDeviceProperties2)          \
  X(vkGetPhysicalDeviceFeatures2)            \
  X(vkGetPhysicalDeviceMemoryProperties)     \
  X(vkGetPhysicalDeviceQueueFamilyProperties) \
  X(vkEnumerateDeviceExtensionProperties)    \
  X(vkCreateDevice)                          \
  X(vkDestroyDevice)                         \
  X(vkGetDeviceQueue)                        \
  X(vkDeviceWaitIdle)                        \
  X(vkCreateBuffer)                          \
  X(vkDestroyBuffer)                         \
  X(vkGetBufferMemoryRequirements)           \
  X(vkAllocateMemory)                        \
  X(vkFreeMemory)                            \
  X(vkBindBufferMemory)                      \
  X(vkMapMemory)                             \
  X(vkUnmapMemory)                           \
  X(vkCreateShaderModule)                    \
  X(vkDestroyShaderModule)                   \
  X(vkCreatePipelineCache)                   \
  X(vkDestroyPipelineCache)                  \
  X(vkGetPipelineCacheData)                  \
  X(vkMergePipelineCaches)                   \
  X(vkCreateComputePipelines)                \
  X(vkDestroyPipeline)                       \
  X(vkCreatePipelineLayout)                  \
  X(vkDestroyPipelineLayout)                 \
  X(vkCreateDescriptorSetLayout)             \
  X(vkDestroyDescriptorSetLayout)            \
  X(vkCreateDescriptorPool)                  \
  X(vkDestroyDescriptorPool)                 \
  X(vkAllocateDescriptorSets)                \
  X(vkUpdateDescriptorSets)                  \
  X(vkCreateCommandPool)                     \
  X(vkDestroyCommandPool)                    \
  X(vkAllocateCommandBuffers)                \
  X(vkFreeCommandBuffers)                    \
  X(vkBeginCommandBuffer)                    \
  X(vkEndCommandBuffer)                      \
  X(vkCmdBindPipeline)                       \
  X(vkCmdBindDescriptorSets)                 \
  X(vkCmdDispatch)                           \
  X(vkCmdPipelineBarrier)                    \
  X(vkCmdCopyBuffer)                         \
  X(vkCmdFillBuffer)                         \
  X(vkCmdResetQueryPool)                     \
  X(vkCmdWriteTimestamp)                     \
  X(vkCreateQueryPool)                       \
  X(vkDestroyQueryPool)                      \
  X(vkGetQueryPoolResults)                   \
  X(vkCreateFence)                           \
  X(vkDestroyFence)                          \
  X(vkResetFences)                           \
  X(vkWaitForFences)                         \
  X(vkQueueSubmit)

/// The loader and its entry points. Obtained once per process (vulkan_api()); the
/// function pointers are those of the one instance this target creates.
struct VulkanApi {
  PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr = nullptr;
#define TERNJIT_VK_DECLARE(name) PFN_##name name = nullptr;
  TERNJIT_VK_GLOBAL_FUNCTIONS(TERNJIT_VK_DECLARE)
  TERNJIT_VK_INSTANCE_FUNCTIONS(TERNJIT_VK_DECLARE)
#undef TERNJIT_VK_DECLARE
  VkInstance instance = VK_NULL_HANDLE;
  std::uint32_t instance_version = 0;  ///< what the loader supports (VK_API_VERSION_1_x)
};

/// The process's Vulkan loader and instance, created on first use (thread-safe).
/// Errors (Unavailable): no libvulkan.so.1, a missing entry point, or no instance (no
/// ICD, or a loader older than Vulkan 1.1), each saying why.
Result<const VulkanApi*> vulkan_api();

/// "VK_ERROR_OUT_OF_DEVICE_MEMORY (-2)" and the like.
std::string vk_result_name(VkResult r);

/// An error for a failed Vulkan call: "what: VK_ERROR_... (-n)"; device loss and
/// allocation failures are Unavailable (the device or its memory ran out), the rest Internal.
Error vk_error(std::string_view what, VkResult r);

}  // namespace ternjit::targets::spirv
