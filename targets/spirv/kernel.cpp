// SPDX-License-Identifier: Apache-2.0
// kernel.cpp - a loaded SPIR-V program: buffers, device-resident weights, pipelines, the recorded command buffer.
#include "targets/spirv/kernel.h"

#include <charconv>
#include <cstring>

#include "targets/spirv/shader_compiler.h"

namespace ternjit::targets::spirv {

namespace {

constexpr std::uint32_t kMaxGroups = 65535;  // maxComputeWorkGroupCount's guaranteed minimum

std::uint32_t div_up(std::int64_t a, std::int64_t b) { return static_cast<std::uint32_t>((a + b - 1) / b); }

// Every write of a step is visible to every read and write of the next (dispatch or copy).
void barrier(const VulkanApi& vk, VkCommandBuffer cb, VkPipelineStageFlags dst_stage, VkAccessFlags dst_access) {
  VkMemoryBarrier b{};
  b.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  b.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  b.dstAccessMask = dst_access;
  vk.vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, dst_stage, 0, 1,
                          &b, 0, nullptr, 0, nullptr);
}

constexpr VkAccessFlags kAllDeviceAccess = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                                           VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
constexpr VkPipelineStageFlags kDeviceStages = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;

}  // namespace

std::string config_text(const ShaderConfig& c) {
  return "wg=" + std::to_string(c.workgroup) + ";tm=" + std::to_string(c.rows);
}

std::optional<ShaderConfig> parse_config(std::string_view text) {
  ShaderConfig c;
  auto field = [&](std::string_view name, std::uint32_t& out) {
    if (text.substr(0, name.size()) != name) return false;
    text.remove_prefix(name.size());
    auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
    if (ec != std::errc{} || out == 0 || out > 4096) return false;
    text.remove_prefix(static_cast<std::size_t>(p - text.data()));
    return true;
  };
  if (!field("wg=", c.workgroup)) return std::nullopt;
  if (text.empty() || text.front() != ';') return std::nullopt;
  text.remove_prefix(1);
  if (!field("tm=", c.rows) || !text.empty() || c.rows > 64) return std::nullopt;
  return c;
}

std::pair<std::uint32_t, std::uint32_t> dispatch_grid(const Shader& s, const ShaderConfig& c) {
  if (s.tmatmul) return {div_up(s.mm.n, c.workgroup), div_up(s.mm.m, c.rows)};
  const std::uint32_t groups = std::max<std::uint32_t>(1, div_up(s.items, c.workgroup));
  const std::uint32_t x = std::min(groups, kMaxGroups);
  return {x, div_up(groups, x)};
}

bool config_fits(const ShaderConfig& c, const DeviceInfo& d, const Shader& s) {
  if (c.workgroup > d.max_workgroup_invocations || c.workgroup > d.max_workgroup_size_x) return false;
  if (!s.tmatmul && c.rows != 1) return false;
  const auto [x, y] = dispatch_grid(s, c);
  return x <= kMaxGroups && y <= kMaxGroups;
}

Result<std::shared_ptr<Kernel>> Kernel::create(std::shared_ptr<Device> device, ShaderSet program,
                                               const std::vector<std::vector<std::uint32_t>>& modules,
                                               const std::vector<ShaderConfig>& configs,
                                               const std::vector<LoadValue>& load_values,
                                               const std::vector<std::string>& weight_keys, DeviceWeights* weights,
                                               const SideFiles* side_files) {
  TERNJIT_CHECK(modules.size() == program.shaders.size() && configs.size() == modules.size(),
                "Kernel::create: one module and one configuration per shader");
  std::shared_ptr<Kernel> k(new Kernel());
  k->device_ = std::move(device);
  const Device& dev = *k->device_;
  const VulkanApi& vk = dev.vk();
  k->program_ = std::move(program);
  k->configs_ = configs;
  const ShaderSet& p = k->program_;

  for (std::size_t b : p.plan.in_bytes) {
    TERNJIT_TRY(DeviceBuffer buf, dev.create_buffer(b, true));
    k->io_.push_back(std::move(buf));
  }
  for (std::size_t b : p.plan.out_bytes) {
    TERNJIT_TRY(DeviceBuffer buf, dev.create_buffer(b, true));
    k->io_.push_back(std::move(buf));
  }
  for (std::size_t b : p.scratch_sizes) {
    TERNJIT_TRY(DeviceBuffer buf, dev.create_buffer(b, false));
    k->scratch_.push_back(std::move(buf));
  }

  // Load-time values: a tmatmul weight in the 2-bit layout, once per Program; any other
  // value a shader or a copy reads as its bytes, once per kernel.
  k->consts_.resize(p.plan.load_time.size());
  for (const Shader& s : p.shaders) {
    if (!s.tmatmul || k->consts_[s.weight_const]) continue;
    const LoadValue& w = load_values[s.weight_const];
    auto upload = [&]() -> Result<std::shared_ptr<const void>> {
      TERNJIT_TRY(std::vector<std::uint32_t> words, weight_words(w, s.mm.k, s.mm.n));
      TERNJIT_TRY(DeviceBuffer buf, dev.create_buffer(words.size() * 4, false));
      TERNJIT_TRY_VOID(dev.upload(buf, {reinterpret_cast<const std::uint8_t*>(words.data()), words.size() * 4}));
      return std::shared_ptr<const void>(std::make_shared<DeviceBuffer>(std::move(buf)));
    };
    // A parameter is shared by name across the Program's kernels; a computed weight is
    // this kernel's own.
    const std::string& key = weight_keys[s.weight_const];
    if (weights && !key.empty()) {
      TERNJIT_TRY(k->consts_[s.weight_const], weights->get_or_upload(key, upload));
    } else {
      TERNJIT_TRY(k->consts_[s.weight_const], upload());
    }
  }
  auto need_value = [&](const Slot& slot) -> Result<void> {
    if (slot.kind != SlotKind::Const || k->consts_[slot.index]) return success();
    const std::vector<std::uint8_t> bytes = load_values[slot.index].encoded();
    TERNJIT_TRY(DeviceBuffer buf, dev.create_buffer(bytes.size(), false));
    TERNJIT_TRY_VOID(dev.upload(buf, bytes));
    k->consts_[slot.index] = std::make_shared<DeviceBuffer>(std::move(buf));
    return success();
  };
  for (const Shader& s : p.shaders)
    for (std::size_t b = 0; b < s.bindings.size(); ++b)
      if (!(s.tmatmul && b == 1)) TERNJIT_TRY_VOID(need_value(s.bindings[b]));
  for (const CallStep& st : p.steps)
    if (st.kind == CallStep::Kind::Copy) TERNJIT_TRY_VOID(need_value(st.from));

  // Pipelines: every module is validated again (an artifact may come from a damaged
  // cache file: an error, never a driver crash).
  for (std::size_t i = 0; i < modules.size(); ++i) {
    if (auto ok = validate_spirv(modules[i]); !ok.ok())
      return make_error(ErrorCode::InvalidInput, "shader '" + p.shaders[i].name + "': " + ok.error().message);
    if (!config_fits(configs[i], dev.info(), p.shaders[i]))
      return make_error(ErrorCode::InvalidArgument, "configuration '" + config_text(configs[i]) + "' of shader '" +
                                                        p.shaders[i].name + "' does not fit " + dev.info().name);
    std::vector<std::uint32_t> spec = {configs[i].workgroup};
    if (p.shaders[i].tmatmul) spec.push_back(configs[i].rows);
    TERNJIT_TRY(auto pipe, dev.create_pipeline(modules[i], static_cast<std::uint32_t>(p.shaders[i].bindings.size()), spec));
    k->pipelines_.push_back(std::move(pipe));
  }
  dev.save_pipeline_cache(side_files);

  // One descriptor set per shader, on the kernel's own buffers.
  TERNJIT_TRY(k->pool_, k->descriptor_pool());
  std::vector<VkBuffer> io;
  for (const DeviceBuffer& b : k->io_) io.push_back(b.buffer());
  for (std::size_t i = 0; i < p.shaders.size(); ++i) {
    TERNJIT_TRY(VkDescriptorSet set, k->descriptor_set(i, io));
    k->sets_.push_back(set);
  }

  if (dev.info().timestamps) {
    VkQueryPoolCreateInfo qi{};
    qi.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO;
    qi.queryType = VK_QUERY_TYPE_TIMESTAMP;
    qi.queryCount = 2;
    if (vk.vkCreateQueryPool(dev.handle(), &qi, nullptr, &k->queries_) != VK_SUCCESS) k->queries_ = VK_NULL_HANDLE;
  }
  TERNJIT_TRY(k->cb_, dev.allocate_commands());
  VkCommandBufferBeginInfo bi{};
  bi.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  vk.vkBeginCommandBuffer(k->cb_, &bi);
  if (k->queries_) {
    vk.vkCmdResetQueryPool(k->cb_, k->queries_, 0, 2);
    vk.vkCmdWriteTimestamp(k->cb_, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, k->queries_, 0);
  }
  k->record_steps(k->cb_, k->sets_, io);
  if (k->queries_) vk.vkCmdWriteTimestamp(k->cb_, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, k->queries_, 1);
  barrier(vk, k->cb_, VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
  if (VkResult r = vk.vkEndCommandBuffer(k->cb_); r != VK_SUCCESS) return vk_error("vkEndCommandBuffer", r);
  return k;
}

Kernel::~Kernel() {
  if (!device_) return;
  const VulkanApi& vk = device_->vk();
  if (cb_) device_->free_commands(cb_);
  if (queries_) vk.vkDestroyQueryPool(device_->handle(), queries_, nullptr);
  if (pool_) vk.vkDestroyDescriptorPool(device_->handle(), pool_, nullptr);
  for (VkDescriptorPool p : framework_pools_) vk.vkDestroyDescriptorPool(device_->handle(), p, nullptr);
}

VkBuffer Kernel::buffer_of(const Slot& s, std::span<const VkBuffer> io) const {
  switch (s.kind) {
    case SlotKind::Arg: return io[s.index];
    case SlotKind::Out: return io[program_.plan.in_bytes.size() + s.index];
    case SlotKind::Const: return static_cast<const DeviceBuffer*>(consts_[s.index].get())->buffer();
    case SlotKind::Scratch: {
      const auto& offs = program_.scratch_offsets;
      const auto it = std::lower_bound(offs.begin(), offs.end(), s.index);
      TERNJIT_CHECK(it != offs.end() && *it == s.index, "a scratch slot without a buffer");
      return scratch_[static_cast<std::size_t>(it - offs.begin())].buffer();
    }
  }
  TERNJIT_UNREACHABLE("slot kind");
}

Result<VkDescriptorPool> Kernel::descriptor_pool() const {
  std::uint32_t n_bindings = 0;
  for (const Shader& s : program_.shaders) n_bindings += static_cast<std::uint32_t>(s.bindings.size());
  VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, std::max<std::uint32_t>(1, n_bindings)};
  VkDescriptorPoolCreateInfo pci{};
  pci.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO;
  pci.maxSets = std::max<std::uint32_t>(1, static_cast<std::uint32_t>(program_.shaders.size()));
  pci.poolSizeCount = 1;
  pci.pPoolSizes = &size;
  VkDescriptorPool pool = VK_NULL_HANDLE;
  if (VkResult r = device_->vk().vkCreateDescriptorPool(device_->handle(), &pci, nullptr, &pool); r != VK_SUCCESS)
    return vk_error("vkCreateDescriptorPool", r);
  return pool;
}

Result<VkDescriptorSet> Kernel::descriptor_set(std::size_t shader, std::span<const VkBuffer> io) {
  const VulkanApi& vk = device_->vk();
  const Shader& s = program_.shaders[shader];
  VkDescriptorSetAllocateInfo ai{};
  ai.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO;
  ai.descriptorPool = pool_;
  ai.descriptorSetCount = 1;
  ai.pSetLayouts = &pipelines_[shader]->set_layout;
  VkDescriptorSet set = VK_NULL_HANDLE;
  if (VkResult r = vk.vkAllocateDescriptorSets(device_->handle(), &ai, &set); r != VK_SUCCESS)
    return vk_error("vkAllocateDescriptorSets", r);
  std::vector<VkDescriptorBufferInfo> infos(s.bindings.size());
  std::vector<VkWriteDescriptorSet> writes(s.bindings.size());
  for (std::size_t b = 0; b < s.bindings.size(); ++b) {
    infos[b] = VkDescriptorBufferInfo{buffer_of(s.bindings[b], io), 0, VK_WHOLE_SIZE};
    VkWriteDescriptorSet& w = writes[b];
    w.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
    w.dstSet = set;
    w.dstBinding = static_cast<std::uint32_t>(b);
    w.descriptorCount = 1;
    w.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    w.pBufferInfo = &infos[b];
  }
  vk.vkUpdateDescriptorSets(device_->handle(), static_cast<std::uint32_t>(writes.size()), writes.data(), 0, nullptr);
  return set;
}

void Kernel::record_steps(VkCommandBuffer cb, std::span<const VkDescriptorSet> sets, std::span<const VkBuffer> io) {
  const VulkanApi& vk = device_->vk();
  for (const CallStep& st : program_.steps) {
    if (st.kind == CallStep::Kind::Copy) {
      if (st.bytes != 0) {
        VkBufferCopy region{0, 0, st.bytes};
        vk.vkCmdCopyBuffer(cb, buffer_of(st.from, io), buffer_of(st.to, io), 1, &region);
      }
      barrier(vk, cb, kDeviceStages, kAllDeviceAccess);
      continue;
    }
    const Shader& s = program_.shaders[st.shader];
    if (s.zero_first_result) {  // int8 results are OR-ed in where rows share a word
      vk.vkCmdFillBuffer(cb, buffer_of(s.bindings[s.bindings.size() - 2], io), 0, VK_WHOLE_SIZE, 0);
      barrier(vk, cb, kDeviceStages, kAllDeviceAccess);
    }
    vk.vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pipelines_[st.shader]->pipeline);
    vk.vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pipelines_[st.shader]->layout, 0, 1,
                               &sets[st.shader], 0, nullptr);
    const auto [x, y] = dispatch_grid(s, configs_[st.shader]);
    vk.vkCmdDispatch(cb, x, y, 1);
    barrier(vk, cb, kDeviceStages, kAllDeviceAccess);
  }
}

Result<void> Kernel::run(void* const* buffers) {
  const std::size_t n_in = program_.plan.in_bytes.size(), n_out = program_.plan.out_bytes.size();
  for (std::size_t i = 0; i < n_in + n_out; ++i) {
    const std::size_t bytes = i < n_in ? program_.plan.in_bytes[i] : program_.plan.out_bytes[i - n_in];
    if (!buffers[i] && bytes != 0)
      return make_error(ErrorCode::InvalidArgument,
                        (i < n_in ? "input " + std::to_string(i) : "output " + std::to_string(i - n_in)) + " is null");
  }
  std::lock_guard lock(mutex_);  // one recorded command buffer and one set of io buffers per kernel
  for (std::size_t i = 0; i < n_in; ++i)
    if (program_.plan.in_bytes[i]) std::memcpy(io_[i].mapped(), buffers[i], program_.plan.in_bytes[i]);
  TERNJIT_TRY_VOID(device_->submit_and_wait(cb_));
  for (std::size_t j = 0; j < n_out; ++j)
    if (program_.plan.out_bytes[j]) std::memcpy(buffers[n_in + j], io_[n_in + j].mapped(), program_.plan.out_bytes[j]);
  if (queries_) {
    std::uint64_t ts[2] = {0, 0};
    if (device_->vk().vkGetQueryPoolResults(device_->handle(), queries_, 0, 2, sizeof ts, ts, sizeof ts[0],
                                            VK_QUERY_RESULT_64_BIT) == VK_SUCCESS)
      last_device_ns_.store(static_cast<double>(ts[1] - ts[0]) * device_->info().timestamp_period_ns);
  }
  return success();
}

Result<void> Kernel::record(VkCommandBuffer cb, const VkBuffer* buffers) {
  const std::size_t n_io = program_.plan.in_bytes.size() + program_.plan.out_bytes.size();
  if (!cb) return make_error(ErrorCode::InvalidArgument, "no command buffer");
  for (std::size_t i = 0; i < n_io; ++i)
    if (!buffers[i]) return make_error(ErrorCode::InvalidArgument, "buffer " + std::to_string(i) + " is null");
  std::lock_guard lock(mutex_);
  const VulkanApi& vk = device_->vk();
  const std::span<const VkBuffer> io(buffers, n_io);
  std::vector<VkBuffer> key(io.begin(), io.end());
  auto it = framework_sets_.find(key);
  if (it == framework_sets_.end()) {
    // Sets for these buffers, from a pool of their own kept with the kernel: the
    // caller's command buffers may use them until the kernel is destroyed.
    TERNJIT_TRY(VkDescriptorPool pool, descriptor_pool());
    framework_pools_.push_back(pool);
    std::swap(pool, pool_);  // descriptor_set() allocates from pool_
    std::vector<VkDescriptorSet> sets;
    for (std::size_t i = 0; i < program_.shaders.size(); ++i) {
      auto set = descriptor_set(i, io);
      if (!set.ok()) {
        std::swap(pool, pool_);
        return set.error();
      }
      sets.push_back(*set);
    }
    std::swap(pool, pool_);
    it = framework_sets_.emplace(std::move(key), std::move(sets)).first;
  }
  const std::vector<VkDescriptorSet>& sets = it->second;
  barrier(vk, cb, kDeviceStages, kAllDeviceAccess);
  record_steps(cb, sets, io);
  return success();
}

}  // namespace ternjit::targets::spirv
