// SPDX-License-Identifier: Apache-2.0
// vulkan_api.cpp - dlopen of libvulkan.so.1, the process's one instance, Vulkan result names.
#include "targets/spirv/vulkan_api.h"

#include <dlfcn.h>

#include <mutex>

namespace ternjit::targets::spirv {

namespace {

Result<VulkanApi> open_vulkan() {
  // The loader is never linked (spirv/README.md): a missing one is a reason, not a failure.
  void* lib = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* why = dlerror();
    return make_error(ErrorCode::Unavailable,
                      std::string("no Vulkan loader (libvulkan.so.1): ") + (why ? why : "dlopen failed"));
  }
  // The handle stays open for the process: the instance and every device live until exit.
  VulkanApi api;
  api.vkGetInstanceProcAddr = reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(lib, "vkGetInstanceProcAddr"));
  if (!api.vkGetInstanceProcAddr)
    return make_error(ErrorCode::Unavailable, "the Vulkan loader has no vkGetInstanceProcAddr");
#define TERNJIT_VK_LOAD_GLOBAL(name) \
  api.name = reinterpret_cast<PFN_##name>(api.vkGetInstanceProcAddr(VK_NULL_HANDLE, #name));
  TERNJIT_VK_GLOBAL_FUNCTIONS(TERNJIT_VK_LOAD_GLOBAL)
#undef TERNJIT_VK_LOAD_GLOBAL
  if (!api.vkCreateInstance) return make_error(ErrorCode::Unavailable, "the Vulkan loader has no vkCreateInstance");
  api.instance_version = VK_API_VERSION_1_0;
  if (api.vkEnumerateInstanceVersion) api.vkEnumerateInstanceVersion(&api.instance_version);
  if (api.instance_version < VK_API_VERSION_1_1)
    return make_error(ErrorCode::Unavailable, "the Vulkan loader supports only Vulkan 1.0 (the target needs 1.1)");

  VkApplicationInfo app{};
  app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
  app.pApplicationName = "ternjit";
  app.pEngineName = "ternjit";
  // 1.3 when the loader has it (integer dot product and subgroup control are core there).
  app.apiVersion = api.instance_version >= VK_API_VERSION_1_3 ? VK_API_VERSION_1_3 : VK_API_VERSION_1_1;
  VkInstanceCreateInfo ci{};
  ci.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
  ci.pApplicationInfo = &app;
  if (VkResult r = api.vkCreateInstance(&ci, nullptr, &api.instance); r != VK_SUCCESS)
    return make_error(ErrorCode::Unavailable, "no Vulkan instance (vkCreateInstance: " + vk_result_name(r) +
                                                  "): no Vulkan driver (ICD) is installed or it failed to load");
#define TERNJIT_VK_LOAD_INSTANCE(name)                                                            \
  api.name = reinterpret_cast<PFN_##name>(api.vkGetInstanceProcAddr(api.instance, #name));       \
  if (!api.name) return make_error(ErrorCode::Unavailable, "the Vulkan loader lacks " #name);
  TERNJIT_VK_INSTANCE_FUNCTIONS(TERNJIT_VK_LOAD_INSTANCE)
#undef TERNJIT_VK_LOAD_INSTANCE
  return api;
}

}  // namespace

Result<const VulkanApi*> vulkan_api() {
  // One loader and instance per process: the loader is process-wide state anyway, and
  // every Engine's SPIR-V target shares the devices it opens.
  static const Result<VulkanApi> api = open_vulkan();
  if (!api.ok()) return api.error();
  return &api.value();
}

std::string vk_result_name(VkResult r) {
  const char* name = "VK_ERROR_UNKNOWN";
  switch (r) {
    case VK_SUCCESS: name = "VK_SUCCESS"; break;
    case VK_NOT_READY: name = "VK_NOT_READY"; break;
    case VK_TIMEOUT: name = "VK_TIMEOUT"; break;
    case VK_INCOMPLETE: name = "VK_INCOMPLETE"; break;
    case VK_ERROR_OUT_OF_HOST_MEMORY: name = "VK_ERROR_OUT_OF_HOST_MEMORY"; break;
    case VK_ERROR_OUT_OF_DEVICE_MEMORY: name = "VK_ERROR_OUT_OF_DEVICE_MEMORY"; break;
    case VK_ERROR_INITIALIZATION_FAILED: name = "VK_ERROR_INITIALIZATION_FAILED"; break;
    case VK_ERROR_DEVICE_LOST: name = "VK_ERROR_DEVICE_LOST"; break;
    case VK_ERROR_MEMORY_MAP_FAILED: name = "VK_ERROR_MEMORY_MAP_FAILED"; break;
    case VK_ERROR_EXTENSION_NOT_PRESENT: name = "VK_ERROR_EXTENSION_NOT_PRESENT"; break;
    case VK_ERROR_FEATURE_NOT_PRESENT: name = "VK_ERROR_FEATURE_NOT_PRESENT"; break;
    case VK_ERROR_INCOMPATIBLE_DRIVER: name = "VK_ERROR_INCOMPATIBLE_DRIVER"; break;
    case VK_ERROR_TOO_MANY_OBJECTS: name = "VK_ERROR_TOO_MANY_OBJECTS"; break;
    case VK_ERROR_OUT_OF_POOL_MEMORY: name = "VK_ERROR_OUT_OF_POOL_MEMORY"; break;
    case VK_ERROR_INVALID_SHADER_NV: name = "VK_ERROR_INVALID_SHADER_NV"; break;
    default: break;
  }
  return std::string(name) + " (" + std::to_string(static_cast<int>(r)) + ")";
}

Error vk_error(std::string_view what, VkResult r) {
  const bool environment = r == VK_ERROR_OUT_OF_HOST_MEMORY || r == VK_ERROR_OUT_OF_DEVICE_MEMORY ||
                           r == VK_ERROR_DEVICE_LOST || r == VK_ERROR_INITIALIZATION_FAILED || r == VK_TIMEOUT;
  return make_error(environment ? ErrorCode::Unavailable : ErrorCode::Internal,
                    std::string(what) + ": " + vk_result_name(r));
}

}  // namespace ternjit::targets::spirv
