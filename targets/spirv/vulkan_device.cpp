// SPDX-License-Identifier: Apache-2.0
// vulkan_device.cpp - physical device enumeration and selection, the opened device, buffers, pipelines, the pipeline cache.
#include "targets/spirv/vulkan_device.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>

#include "ir/ir.h"
#include "ir/strings.h"

namespace ternjit::targets::spirv {

namespace {

std::string hex(std::span<const std::uint8_t> bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s;
  for (std::uint8_t b : bytes) s += {kDigits[b >> 4], kDigits[b & 15]};
  return s;
}

std::string version_text(std::uint32_t v) {
  return std::to_string(VK_API_VERSION_MAJOR(v)) + "." + std::to_string(VK_API_VERSION_MINOR(v)) + "." +
         std::to_string(VK_API_VERSION_PATCH(v));
}

DeviceInfo describe_device(const VulkanApi& vk, VkPhysicalDevice pd, std::uint32_t index) {
  DeviceInfo d;
  d.index = index;
  d.handle = pd;
  VkPhysicalDeviceProperties base{};
  vk.vkGetPhysicalDeviceProperties(pd, &base);
  d.name = base.deviceName;
  d.type = base.deviceType;
  d.api_version = base.apiVersion;
  d.driver_version = base.driverVersion;
  std::memcpy(d.cache_uuid.data(), base.pipelineCacheUUID, VK_UUID_SIZE);
  d.vendor_id = base.vendorID;
  d.device_id = base.deviceID;
  d.max_workgroup_invocations = base.limits.maxComputeWorkGroupInvocations;
  d.max_workgroup_size_x = base.limits.maxComputeWorkGroupSize[0];
  d.max_shared_bytes = base.limits.maxComputeSharedMemorySize;
  d.max_storage_buffer_range = base.limits.maxStorageBufferRange;
  d.timestamp_period_ns = base.limits.timestampPeriod;

  // Vulkan 1.1+ structures (the instance is 1.1 at least; a 1.0 device skips them).
  if (base.apiVersion >= VK_API_VERSION_1_1) {
    VkPhysicalDeviceSubgroupProperties sub{};
    sub.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES;
    VkPhysicalDeviceDriverProperties drv{};
    drv.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES;
    VkPhysicalDeviceShaderIntegerDotProductProperties dotp{};
    dotp.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES;
    VkPhysicalDeviceProperties2 p2{};
    p2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
    p2.pNext = &sub;
    if (base.apiVersion >= VK_API_VERSION_1_2) sub.pNext = &drv;
    if (base.apiVersion >= VK_API_VERSION_1_3) drv.pNext = &dotp;
    vk.vkGetPhysicalDeviceProperties2(pd, &p2);
    d.subgroup_size = sub.subgroupSize;
    if (base.apiVersion >= VK_API_VERSION_1_2) d.driver = std::string(drv.driverName) + " " + drv.driverInfo;
    d.int_dot_accelerated = dotp.integerDotProduct4x8BitPackedSignedAccelerated == VK_TRUE;
    if (base.apiVersion >= VK_API_VERSION_1_3) {
      VkPhysicalDeviceVulkan13Features f13{};
      f13.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES;
      VkPhysicalDeviceFeatures2 f2{};
      f2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
      f2.pNext = &f13;
      vk.vkGetPhysicalDeviceFeatures2(pd, &f2);
      d.int_dot = f13.shaderIntegerDotProduct == VK_TRUE;
    }
  }
  if (d.driver.empty()) d.driver = "driver " + std::to_string(d.driver_version);

  VkPhysicalDeviceMemoryProperties mem{};
  vk.vkGetPhysicalDeviceMemoryProperties(pd, &mem);
  for (std::uint32_t h = 0; h < mem.memoryHeapCount; ++h)
    if (mem.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
      d.device_local_bytes = std::max<std::uint64_t>(d.device_local_bytes, mem.memoryHeaps[h].size);

  std::uint32_t nq = 0;
  vk.vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, nullptr);
  std::vector<VkQueueFamilyProperties> qs(nq);
  vk.vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, qs.data());
  for (std::uint32_t q = 0; q < nq; ++q) {
    if (!(qs[q].queueFlags & VK_QUEUE_COMPUTE_BIT)) continue;
    d.compute_queue_family = q;
    d.timestamps = qs[q].timestampValidBits > 0;
    break;
  }
  return d;
}

Result<std::vector<DeviceInfo>> enumerate() {
  TERNJIT_TRY(const VulkanApi* vk, vulkan_api());
  std::uint32_t n = 0;
  if (VkResult r = vk->vkEnumeratePhysicalDevices(vk->instance, &n, nullptr); r != VK_SUCCESS)
    return vk_error("vkEnumeratePhysicalDevices", r);
  std::vector<VkPhysicalDevice> pds(n);
  if (VkResult r = vk->vkEnumeratePhysicalDevices(vk->instance, &n, pds.data()); r != VK_SUCCESS && r != VK_INCOMPLETE)
    return vk_error("vkEnumeratePhysicalDevices", r);
  pds.resize(n);
  std::vector<DeviceInfo> out;
  for (std::uint32_t i = 0; i < n; ++i) out.push_back(describe_device(*vk, pds[i], i));
  return out;
}

int type_rank(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 0;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 1;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
    case VK_PHYSICAL_DEVICE_TYPE_OTHER: return 3;
    default: return 4;  // CPU implementations (lavapipe, SwiftShader) last
  }
}

std::uint32_t find_memory_type(const VkPhysicalDeviceMemoryProperties& mem, std::uint32_t allowed,
                               VkMemoryPropertyFlags want) {
  for (std::uint32_t t = 0; t < mem.memoryTypeCount; ++t)
    if ((allowed & (1u << t)) && (mem.memoryTypes[t].propertyFlags & want) == want) return t;
  return UINT32_MAX;
}

}  // namespace

PipelineCacheIdentity DeviceInfo::pipeline_identity() const {
  PipelineCacheIdentity id;
  id.vendor_id = vendor_id;
  id.device_id = device_id;
  static_assert(sizeof id.uuid == VK_UUID_SIZE);
  std::memcpy(id.uuid.data(), cache_uuid.data(), VK_UUID_SIZE);
  id.driver_version = driver_version;
  return id;
}

std::string DeviceInfo::type_name() const {
  switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete gpu";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated gpu";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual gpu";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "cpu";
    default: return "other";
  }
}

bool DeviceInfo::is_gpu() const {
  return type == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU || type == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU ||
         type == VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU;
}

std::string DeviceInfo::key() const {
  return name + ";driver=" + std::to_string(driver_version) + ";uuid=" + hex(cache_uuid);
}

DeviceDescription DeviceInfo::description() const {
  DeviceDescription d;
  d.index = index;
  d.name = name;
  d.type = type_name();
  d.driver = driver;
  d.api = "Vulkan " + version_text(api_version);
  d.memory_bytes = device_local_bytes;
  d.subgroup_size = subgroup_size;
  d.int_dot = int_dot;
  d.int_dot_accelerated = int_dot_accelerated;
  d.limits.max_workgroup_invocations = max_workgroup_invocations;
  d.limits.max_workgroup_size_x = max_workgroup_size_x;
  d.limits.max_shared_bytes = max_shared_bytes;
  d.limits.max_buffer_bytes = max_storage_buffer_range;
  return d;
}

Result<const std::vector<DeviceInfo>*> devices() {
  static const Result<std::vector<DeviceInfo>> list = enumerate();
  if (!list.ok()) return list.error();
  return &list.value();
}

Result<const DeviceInfo*> select_device(std::string_view option) {
  TERNJIT_TRY(const std::vector<DeviceInfo>* all, devices());
  std::vector<const DeviceInfo*> usable;
  for (const DeviceInfo& d : *all)
    if (d.compute_queue_family != UINT32_MAX && d.api_version >= VK_API_VERSION_1_1) usable.push_back(&d);
  if (usable.empty())
    return make_error(ErrorCode::Unavailable, all->empty() ? "no Vulkan device (the instance lists none)"
                                                           : "no Vulkan 1.1 device with a compute queue");
  if (option.empty() || option == "auto") {
    return *std::min_element(usable.begin(), usable.end(), [](const DeviceInfo* a, const DeviceInfo* b) {
      return type_rank(a->type) < type_rank(b->type);
    });
  }
  std::string list;
  for (const DeviceInfo* d : usable) list += (list.empty() ? "" : ", ") + std::to_string(d->index) + ": " + d->name;
  if (std::all_of(option.begin(), option.end(), [](char c) { return c >= '0' && c <= '9'; }) && option.size() < 6) {
    const auto idx = static_cast<std::uint32_t>(std::stoul(std::string(option)));
    for (const DeviceInfo* d : usable)
      if (d->index == idx) return d;
    return make_error(ErrorCode::InvalidArgument,
                      "no Vulkan device " + std::string(option) + " (devices: " + list + ")");
  }
  for (const DeviceInfo* d : usable)
    if (ir::lower(d->name).find(ir::lower(option)) != std::string::npos) return d;
  return make_error(ErrorCode::InvalidArgument,
                    "no Vulkan device named like '" + std::string(option) + "' (devices: " + list + ")");
}

// ------------------------------------------------------------------ buffers

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    this->~DeviceBuffer();
    device_ = std::move(o.device_);
    buffer_ = std::exchange(o.buffer_, VK_NULL_HANDLE);
    memory_ = std::exchange(o.memory_, VK_NULL_HANDLE);
    size_ = std::exchange(o.size_, 0);
    mapped_ = std::exchange(o.mapped_, nullptr);
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (!device_) return;
  const VulkanApi& vk = device_->vk();
  if (mapped_) vk.vkUnmapMemory(device_->handle(), memory_);
  if (buffer_) vk.vkDestroyBuffer(device_->handle(), buffer_, nullptr);
  if (memory_) vk.vkFreeMemory(device_->handle(), memory_, nullptr);
  device_.reset();
}

Pipeline::~Pipeline() {
  if (!device) return;
  const VulkanApi& vk = device->vk();
  VkDevice d = device->handle();
  if (pipeline) vk.vkDestroyPipeline(d, pipeline, nullptr);
  if (layout) vk.vkDestroyPipelineLayout(d, layout, nullptr);
  if (set_layout) vk.vkDestroyDescriptorSetLayout(d, set_layout, nullptr);
  if (module) vk.vkDestroyShaderModule(d, module, nullptr);
}

// ------------------------------------------------------------------ device

bool gpu_device_node_exists() {
  static const bool exists = [] {
    std::error_code ec;
    for (const char* path : {"/dev/kfd", "/dev/dxg", "/dev/nvidiactl", "/dev/nvidia0"})
      if (std::filesystem::exists(path, ec)) return true;
    for (const auto& e : std::filesystem::directory_iterator("/dev/dri", ec))
      if (e.path().filename().string().rfind("renderD", 0) == 0 || e.path().filename().string().rfind("card", 0) == 0)
        return true;
    return false;
  }();
  return exists;
}

Result<std::shared_ptr<Device>> Device::open(const DeviceInfo& info) {
  static std::mutex mutex;
  static std::map<std::uint32_t, std::weak_ptr<Device>> opened;
  std::lock_guard lock(mutex);
  if (auto it = opened.find(info.index); it != opened.end())
    if (auto d = it->second.lock()) return d;

  TERNJIT_TRY(const VulkanApi* vk, vulkan_api());
  std::shared_ptr<Device> dev(new Device());
  dev->vk_ = vk;
  dev->info_ = info;
  const float priority = 1.0f;
  VkDeviceQueueCreateInfo q{};
  q.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
  q.queueFamilyIndex = info.compute_queue_family;
  q.queueCount = 1;
  q.pQueuePriorities = &priority;
  VkPhysicalDeviceVulkan13Features f13{};
  f13.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES;
  f13.shaderIntegerDotProduct = info.int_dot ? VK_TRUE : VK_FALSE;
  VkDeviceCreateInfo ci{};
  ci.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
  ci.queueCreateInfoCount = 1;
  ci.pQueueCreateInfos = &q;
  if (info.int_dot) ci.pNext = &f13;
  if (VkResult r = vk->vkCreateDevice(info.handle, &ci, nullptr, &dev->device_); r != VK_SUCCESS)
    return vk_error("vkCreateDevice on " + info.name, r);
  dev->int_dot_ = info.int_dot;
  vk->vkGetDeviceQueue(dev->device_, info.compute_queue_family, 0, &dev->queue_);

  VkCommandPoolCreateInfo pci{};
  pci.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
  pci.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pci.queueFamilyIndex = info.compute_queue_family;
  if (VkResult r = vk->vkCreateCommandPool(dev->device_, &pci, nullptr, &dev->pool_); r != VK_SUCCESS)
    return vk_error("vkCreateCommandPool", r);

  VkPhysicalDeviceMemoryProperties mem{};
  vk->vkGetPhysicalDeviceMemoryProperties(info.handle, &mem);
  dev->host_type_ = find_memory_type(mem, ~0u, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT);
  dev->device_type_ = find_memory_type(mem, ~0u, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
  if (dev->host_type_ == UINT32_MAX)
    return make_error(ErrorCode::Unavailable, info.name + " has no host-visible coherent memory");

  // The pipeline cache starts empty; each engine's kernel cache directory merges its
  // stored blob in (load_pipeline_cache).
  VkPipelineCacheCreateInfo cci{};
  cci.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO;
  if (VkResult r = vk->vkCreatePipelineCache(dev->device_, &cci, nullptr, &dev->cache_); r != VK_SUCCESS)
    return vk_error("vkCreatePipelineCache", r);
  opened[info.index] = dev;
  return dev;
}

Device::~Device() {
  if (!device_) return;
  vk_->vkDeviceWaitIdle(device_);
  if (cache_) vk_->vkDestroyPipelineCache(device_, cache_, nullptr);
  if (pool_) vk_->vkDestroyCommandPool(device_, pool_, nullptr);
  vk_->vkDestroyDevice(device_, nullptr);
}

void Device::load_pipeline_cache(const SideFiles* files) const {
  if (files == nullptr) return;
  std::lock_guard lock(mutex_);
  for (const auto& [where, saved] : cache_dirs_)
    if (where == files->where()) return;
  cache_dirs_.emplace_back(files->where(), 0);
  // Read through the disk cache (its directory and file checks, checksum and key), then
  // the header must name this device before the driver parses the rest.
  const PipelineCacheIdentity id = info_.pipeline_identity();
  const auto blob = files->read(kPipelineBlobName, pipeline_blob_identity(id), kMaxPipelineBlobBytes,
                                [&](std::string_view b) {
                                  return check_pipeline_blob(
                                      {reinterpret_cast<const std::uint8_t*>(b.data()), b.size()}, id);
                                });
  if (!blob) return;
  VkPipelineCacheCreateInfo cci{};
  cci.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO;
  cci.initialDataSize = blob->size();
  cci.pInitialData = blob->data();
  VkPipelineCache stored = VK_NULL_HANDLE;
  if (vk_->vkCreatePipelineCache(device_, &cci, nullptr, &stored) != VK_SUCCESS) return;
  (void)vk_->vkMergePipelineCaches(device_, cache_, 1, &stored);
  vk_->vkDestroyPipelineCache(device_, stored, nullptr);
}

void Device::save_pipeline_cache(const SideFiles* files) const {
  if (files == nullptr) return;
  std::lock_guard lock(mutex_);
  auto entry = std::find_if(cache_dirs_.begin(), cache_dirs_.end(),
                            [&](const auto& e) { return e.first == files->where(); });
  if (entry == cache_dirs_.end()) entry = cache_dirs_.insert(cache_dirs_.end(), {files->where(), 0});
  if (entry->second == pipelines_created_) return;  // nothing new since the last save there
  std::size_t size = 0;
  if (vk_->vkGetPipelineCacheData(device_, cache_, &size, nullptr) != VK_SUCCESS || size == 0 ||
      size > kMaxPipelineBlobBytes)
    return;
  std::string blob(size, '\0');
  if (vk_->vkGetPipelineCacheData(device_, cache_, &size, blob.data()) != VK_SUCCESS) return;
  blob.resize(size);
  if (auto ok = files->write(kPipelineBlobName, pipeline_blob_identity(info_.pipeline_identity()), blob); !ok.ok()) {
    std::fprintf(stderr, "ternjit: warning: cannot store the Vulkan pipeline cache: %s\n", ok.error().message.c_str());
    return;
  }
  entry->second = pipelines_created_;
}

Result<DeviceBuffer> Device::create_buffer(std::size_t bytes, bool host_visible) const {
  // 16 bytes of slack past the end: shaders read int8 data a 32-bit word at a time.
  if (bytes > (std::size_t{1} << 40)) return make_error(ErrorCode::InvalidArgument, "a device buffer over 1 TiB");
  const std::size_t size = (std::max<std::size_t>(bytes, 16) + 16 + 15) / 16 * 16;
  if (size > info_.max_storage_buffer_range)
    return make_error(ErrorCode::Unsupported, "a buffer of " + std::to_string(size) + " bytes exceeds " + info_.name +
                                                  "'s storage buffer range (" +
                                                  std::to_string(info_.max_storage_buffer_range) + ")");
  DeviceBuffer b;
  b.device_ = shared_from_this();
  b.size_ = size;
  VkBufferCreateInfo ci{};
  ci.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  ci.size = size;
  ci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  ci.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  if (VkResult r = vk_->vkCreateBuffer(device_, &ci, nullptr, &b.buffer_); r != VK_SUCCESS)
    return vk_error("vkCreateBuffer of " + std::to_string(size) + " bytes", r);
  VkMemoryRequirements req{};
  vk_->vkGetBufferMemoryRequirements(device_, b.buffer_, &req);
  VkPhysicalDeviceMemoryProperties mem{};
  vk_->vkGetPhysicalDeviceMemoryProperties(info_.handle, &mem);
  std::uint32_t type = UINT32_MAX;
  if (host_visible) {
    type = find_memory_type(mem, req.memoryTypeBits,
                            VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT);
  } else {
    type = find_memory_type(mem, req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
    if (type == UINT32_MAX) type = find_memory_type(mem, req.memoryTypeBits, 0);
  }
  if (type == UINT32_MAX) return make_error(ErrorCode::Unavailable, "no memory type fits a storage buffer");
  VkMemoryAllocateInfo ai{};
  ai.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  ai.allocationSize = req.size;
  ai.memoryTypeIndex = type;
  if (VkResult r = vk_->vkAllocateMemory(device_, &ai, nullptr, &b.memory_); r != VK_SUCCESS)
    return vk_error("allocating " + std::to_string(req.size) + " bytes of " + info_.name + " memory", r);
  if (VkResult r = vk_->vkBindBufferMemory(device_, b.buffer_, b.memory_, 0); r != VK_SUCCESS)
    return vk_error("vkBindBufferMemory", r);
  if (mem.memoryTypes[type].propertyFlags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT &&
      mem.memoryTypes[type].propertyFlags & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT) {
    void* p = nullptr;
    if (VkResult r = vk_->vkMapMemory(device_, b.memory_, 0, VK_WHOLE_SIZE, 0, &p); r != VK_SUCCESS)
      return vk_error("vkMapMemory", r);
    b.mapped_ = static_cast<std::uint8_t*>(p);
  }
  return b;
}

Result<void> Device::upload(const DeviceBuffer& dst, std::span<const std::uint8_t> data) const {
  TERNJIT_CHECK(data.size() <= dst.size(), "upload larger than its buffer");
  if (dst.mapped()) {
    std::memcpy(dst.mapped(), data.data(), data.size());
    return success();
  }
  TERNJIT_TRY(DeviceBuffer staging, create_buffer(data.size(), true));
  std::memcpy(staging.mapped(), data.data(), data.size());
  TERNJIT_TRY(VkCommandBuffer cb, allocate_commands());
  VkCommandBufferBeginInfo bi{};
  bi.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  vk_->vkBeginCommandBuffer(cb, &bi);
  VkBufferCopy region{0, 0, data.size()};
  vk_->vkCmdCopyBuffer(cb, staging.buffer(), dst.buffer(), 1, &region);
  vk_->vkEndCommandBuffer(cb);
  auto ok = submit_and_wait(cb);
  free_commands(cb);
  return ok;
}

Result<std::unique_ptr<Pipeline>> Device::create_pipeline(std::span<const std::uint32_t> spirv, std::uint32_t bindings,
                                                          std::span<const std::uint32_t> spec) const {
  auto p = std::make_unique<Pipeline>();
  p->device = shared_from_this();
  p->bindings = bindings;
  VkShaderModuleCreateInfo mi{};
  mi.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
  mi.codeSize = spirv.size() * 4;
  mi.pCode = spirv.data();
  if (VkResult r = vk_->vkCreateShaderModule(device_, &mi, nullptr, &p->module); r != VK_SUCCESS)
    return vk_error("vkCreateShaderModule", r);
  std::vector<VkDescriptorSetLayoutBinding> b(bindings);
  for (std::uint32_t i = 0; i < bindings; ++i)
    b[i] = VkDescriptorSetLayoutBinding{i, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
  VkDescriptorSetLayoutCreateInfo li{};
  li.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO;
  li.bindingCount = bindings;
  li.pBindings = b.data();
  if (VkResult r = vk_->vkCreateDescriptorSetLayout(device_, &li, nullptr, &p->set_layout); r != VK_SUCCESS)
    return vk_error("vkCreateDescriptorSetLayout", r);
  VkPipelineLayoutCreateInfo pli{};
  pli.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
  pli.setLayoutCount = 1;
  pli.pSetLayouts = &p->set_layout;
  if (VkResult r = vk_->vkCreatePipelineLayout(device_, &pli, nullptr, &p->layout); r != VK_SUCCESS)
    return vk_error("vkCreatePipelineLayout", r);
  std::vector<VkSpecializationMapEntry> entries;
  for (std::uint32_t i = 0; i < spec.size(); ++i) entries.push_back({i, i * 4, 4});
  VkSpecializationInfo si{};
  si.mapEntryCount = static_cast<std::uint32_t>(entries.size());
  si.pMapEntries = entries.data();
  si.dataSize = spec.size() * 4;
  si.pData = spec.data();
  VkComputePipelineCreateInfo ci{};
  ci.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
  ci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  ci.stage.module = p->module;
  ci.stage.pName = "main";
  ci.stage.pSpecializationInfo = spec.empty() ? nullptr : &si;
  ci.layout = p->layout;
  std::lock_guard lock(mutex_);  // the cache is merged into under it (load_pipeline_cache)
  if (VkResult r = vk_->vkCreateComputePipelines(device_, cache_, 1, &ci, nullptr, &p->pipeline); r != VK_SUCCESS)
    return vk_error("vkCreateComputePipelines", r);
  ++pipelines_created_;
  return p;
}

Result<VkCommandBuffer> Device::allocate_commands() const {
  std::lock_guard lock(mutex_);
  VkCommandBufferAllocateInfo ai{};
  ai.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
  ai.commandPool = pool_;
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ai.commandBufferCount = 1;
  VkCommandBuffer cb = VK_NULL_HANDLE;
  if (VkResult r = vk_->vkAllocateCommandBuffers(device_, &ai, &cb); r != VK_SUCCESS)
    return vk_error("vkAllocateCommandBuffers", r);
  return cb;
}

void Device::free_commands(VkCommandBuffer cb) const {
  std::lock_guard lock(mutex_);
  vk_->vkFreeCommandBuffers(device_, pool_, 1, &cb);
}

Result<void> Device::submit_and_wait(VkCommandBuffer cb, std::uint64_t timeout_ns) const {
  VkFenceCreateInfo fi{};
  fi.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
  VkFence fence = VK_NULL_HANDLE;
  if (VkResult r = vk_->vkCreateFence(device_, &fi, nullptr, &fence); r != VK_SUCCESS) return vk_error("vkCreateFence", r);
  VkSubmitInfo si{};
  si.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
  si.commandBufferCount = 1;
  si.pCommandBuffers = &cb;
  VkResult r = VK_SUCCESS;
  {
    std::lock_guard lock(mutex_);  // vkQueueSubmit needs external synchronization of the queue
    r = vk_->vkQueueSubmit(queue_, 1, &si, fence);
  }
  if (r == VK_SUCCESS) r = vk_->vkWaitForFences(device_, 1, &fence, VK_TRUE, timeout_ns);
  vk_->vkDestroyFence(device_, fence, nullptr);
  if (r == VK_TIMEOUT) return make_error(ErrorCode::Unavailable, "the Vulkan device did not finish within " +
                                                                     std::to_string(timeout_ns / 1'000'000'000) + " s");
  if (r != VK_SUCCESS) return vk_error("running on " + info_.name, r);
  return success();
}

}  // namespace ternjit::targets::spirv
