// SPDX-License-Identifier: Apache-2.0
// spirv_target.cpp - the SPIR-V Target: options, device selection, compile to modules, load onto a Vulkan device, emit.
#include "targets/spirv/spirv_target.h"

#include <cstring>

#include "ir/print.h"
#include "targets/common/device_weights.h"
#include "targets/spirv/kernel.h"
#include "targets/spirv/shader_compiler.h"
#include "targets/spirv/tmatmul_space.h"

namespace ternjit::targets {

namespace {

// What `ternjit info` says of the target's f32 numerics (README.md, "Numerics"; the bounds
// are the tests' in tests/unit/spirv).
constexpr const char* kNumerics =
    "subnormal f32 inputs and results may be flushed to zero by the device (|error| <= 2^-126 an element, "
    "run --check allows it); exp (and softmax, sigmoid, tanh, silu, gelu) within 2^-22 relative (1 ulp measured); "
    "rmsnorm, softmax, sum and mean within (row length + 64) 2^-23 relative";

using spirv::Device;
using spirv::DeviceInfo;
using spirv::ShaderSet;

// The artifact's bytes: the module count, each module's word count, then the words
// (native-endian 32-bit words, as SPIR-V itself).
std::vector<std::uint8_t> pack_modules(const std::vector<std::vector<std::uint32_t>>& modules) {
  std::vector<std::uint32_t> words = {static_cast<std::uint32_t>(modules.size())};
  for (const auto& m : modules) words.push_back(static_cast<std::uint32_t>(m.size()));
  for (const auto& m : modules) words.insert(words.end(), m.begin(), m.end());
  std::vector<std::uint8_t> bytes(words.size() * 4);
  std::memcpy(bytes.data(), words.data(), bytes.size());
  return bytes;
}

Result<std::vector<std::vector<std::uint32_t>>> unpack_modules(const std::vector<std::uint8_t>& bytes) {
  auto bad = [] { return make_error(ErrorCode::InvalidInput, "spirv artifact: the module table is damaged"); };
  if (bytes.size() % 4 != 0 || bytes.size() < 4) return bad();
  std::vector<std::uint32_t> words(bytes.size() / 4);
  std::memcpy(words.data(), bytes.data(), bytes.size());
  const std::size_t n = words[0];
  if (n > words.size() - 1) return bad();
  std::size_t at = 1 + n;
  std::vector<std::vector<std::uint32_t>> modules;
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t len = words[1 + i];
    if (len > words.size() - at) return bad();
    modules.emplace_back(words.begin() + static_cast<std::ptrdiff_t>(at),
                         words.begin() + static_cast<std::ptrdiff_t>(at + len));
    at += len;
  }
  if (at != words.size()) return bad();
  return modules;
}

// The dispatchable handles of a device, in LoadedKernel::device_handles order.
struct VulkanApiHandles {
  VkInstance instance;
  VkPhysicalDevice physical;
  VkDevice device;
  VkQueue queue;
};

// A loaded program (LoadedKernel::state).
struct LoadedState {
  std::shared_ptr<spirv::Kernel> kernel;
};

Result<void> run_loaded(const void* state, void* const* buffers) {
  return static_cast<const LoadedState*>(state)->kernel->run(buffers);
}

Result<void> launch_loaded(const void* state, void* stream, void* const* buffers) {
  return spirv::record_launch(state, stream, buffers);
}

class SpirvTarget final : public Target {
 public:
  [[nodiscard]] std::string_view name() const override { return "spirv"; }
  [[nodiscard]] TargetTraits traits() const override {
    TargetTraits t;
    t.kind = TargetKind::Gpu;
    t.artifact_kind = "spirv-modules";
    t.may_have_gpu = spirv::gpu_device_node_exists();
    return t;
  }

  [[nodiscard]] Result<void> available() const override {
    TERNJIT_TRY(const DeviceInfo* d, spirv::select_device("auto"));
    (void)d;
    return success();
  }


  [[nodiscard]] TargetDescription describe() const override {
    TargetDescription t;
    t.name = std::string(name());
    t.kind = std::string(target_kind_name(kind()));
    // README.md, "Numerics": what a Vulkan device may do to f32 that the CPU targets do not.
    t.numerics = kNumerics;
    t.abs_error_floor = 0x1p-126;
    auto d = spirv::select_device("auto");
    if (!d.ok()) {
      t.reason = d.error().message;
      return t;
    }
    t.available = true;
    // A Vulkan implementation on the CPU (lavapipe) is described as a CPU: `auto` never
    // prefers it over the CPU targets (registry.cpp).
    if (!(*d)->is_gpu()) t.kind = "cpu";
    t.device = (*d)->name + " (Vulkan, " + (*d)->driver + ")";
    t.memory_bytes = (*d)->device_local_bytes;
    // The selected device only: every device is listed by devices().
    t.features = "int dot " + std::string((*d)->int_dot ? "yes" : "no") + ", subgroup " +
                 std::to_string((*d)->subgroup_size) + ", " + (*d)->key();
    return t;
  }

  [[nodiscard]] std::vector<DeviceDescription> devices() const override {
    std::vector<DeviceDescription> out;
    auto all = spirv::devices();
    if (!all.ok()) return out;
    auto chosen = spirv::select_device("auto");
    for (const DeviceInfo& x : **all) {
      out.push_back(x.description());
      out.back().selected = chosen.ok() && *chosen == &x;
    }
    return out;
  }

  // Options: device (auto | index | part of a name), int_dot (auto | on | off).
  [[nodiscard]] Result<TargetOptions> parse_options(const TargetOptions& given) const override {
    for (const auto& [option, value] : given.values) {
      if (option == "device") {
        if (value.empty()) return make_error(ErrorCode::InvalidArgument, "spirv.device is empty: expected auto, an index or a name");
      } else if (option == "int_dot") {
        if (value != "auto" && value != "on" && value != "off")
          return make_error(ErrorCode::InvalidArgument,
                            "spirv.int_dot='" + value + "': expected auto, on (OpSDot) or off (scalar)");
      } else {
        return make_error(ErrorCode::InvalidArgument,
                          "unknown spirv option '" + option + "' (spirv takes: device, int_dot)");
      }
    }
    return given;
  }

  [[nodiscard]] Result<void> check_supported(const ir::Function& f) const override {
    return spirv::shader_set_supported(f);
  }

  [[nodiscard]] Result<Artifact> compile(const ir::Module& specialized, std::string_view function,
                                         const CompileOptions& options) const override {
    const ir::Function* f = specialized.find_function(function);
    if (!f) return make_error(ErrorCode::NotFound, "no function '" + std::string(function) + "' in the module");
    TERNJIT_TRY(const bool int_dot, use_int_dot(options.target));
    TERNJIT_TRY(ShaderSet p, spirv::build_shader_set(*f, int_dot));
    std::vector<std::vector<std::uint32_t>> modules;
    for (const spirv::Shader& s : p.shaders) {
      TERNJIT_TRY(auto words, spirv::compile_glsl(s.glsl, s.name));
      modules.push_back(std::move(words));
    }
    Artifact a;
    a.kind = std::string(traits().artifact_kind);
    a.bytes = pack_modules(modules);
    a.entry = std::string(function);
    a.metadata["ir"] = ir::print_module(specialized);
    a.metadata["int_dot"] = int_dot ? "1" : "0";
    a.metadata["isa"] = int_dot ? "vulkan_sdot" : "vulkan_scalar";
    return a;
  }

  [[nodiscard]] std::unique_ptr<ProgramState> new_program_state() const override {
    return std::make_unique<DeviceWeights>();
  }

  [[nodiscard]] Result<LoadedKernel> load(const Artifact& a, const LoadContext& context) const override {
    TERNJIT_CHECK(context.params != nullptr, "load: no parameter values");
    TERNJIT_TRY_VOID(check_artifact_kind(a, traits().artifact_kind, name()));
    auto ir_it = a.metadata.find("ir");
    auto dot_it = a.metadata.find("int_dot");
    if (ir_it == a.metadata.end() || dot_it == a.metadata.end())
      return make_error(ErrorCode::InvalidInput, "spirv artifact lacks its 'ir' or 'int_dot' metadata");
    Artifact text;
    text.bytes.assign(ir_it->second.begin(), ir_it->second.end());
    text.entry = a.entry;
    TERNJIT_TRY(ir::Module m, parse_artifact_module(text));
    const ir::Function& f = *m.find_function(a.entry);
    const bool int_dot = dot_it->second == "1";
    TERNJIT_TRY(ShaderSet p, spirv::build_shader_set(f, int_dot));
    TERNJIT_TRY(auto modules, unpack_modules(a.bytes));
    if (modules.size() != p.shaders.size())
      return make_error(ErrorCode::InvalidInput, "spirv artifact has " + std::to_string(modules.size()) +
                                                     " modules for " + std::to_string(p.shaders.size()) + " shaders");
    TERNJIT_TRY(const DeviceInfo* info, spirv::select_device(context.options.get("device")));
    if (int_dot && !info->int_dot)
      return make_error(ErrorCode::Unavailable, "the artifact uses the integer dot product, which " + info->name +
                                                    " lacks (compile with spirv.int_dot=off)");
    TERNJIT_TRY(std::shared_ptr<Device> device, Device::open(*info));
    device->load_pipeline_cache(context.side_files);

    // Load-time values and the Program-wide keys of parameter weights.
    TERNJIT_TRY(std::vector<LoadValue> values, evaluate_load_time(f, p.plan, *context.params, false));
    std::vector<std::string> keys(p.plan.load_time.size());
    for (std::size_t k = 0; k < keys.size(); ++k) {
      const ir::InstData& def = f.inst(p.plan.load_time[k].inst);
      if (def.op == ir::Op::Param)
        keys[k] = info->key() + "/" + std::get<ir::ParamAttrs>(def.attrs).name + "/t2planes";
    }
    // Tile sizes: the tuning source's decision for each tmatmul, the default otherwise.
    std::vector<spirv::ShaderConfig> configs;
    for (const spirv::Shader& s : p.shaders) {
      spirv::ShaderConfig c = spirv::default_config(s);
      if (s.tmatmul && context.tuning != TuningMode::Off && context.tuning_source) {
        auto space = spirv::make_tmatmul_space(s, device, info, int_dot);
        if (auto decided = spirv::parse_config(context.tuning_source->decide(*space));
            decided && spirv::config_fits(*decided, *info, s))
          c = *decided;
      }
      configs.push_back(c);
    }
    auto state = std::make_shared<LoadedState>();
    TERNJIT_TRY(state->kernel, spirv::Kernel::create(device, std::move(p), modules, configs, values, keys,
                                                     dynamic_cast<DeviceWeights*>(context.state), context.side_files));
    LoadedKernel k;
    k.run = &run_loaded;
    k.state = state.get();
    k.owner = std::move(state);
    k.isa = a.metadata.count("isa") ? a.metadata.at("isa") : "vulkan";
    k.launch = &launch_loaded;
    const VulkanApiHandles h{device->vk().instance, info->handle, device->handle(), device->queue()};
    k.device_handles = {reinterpret_cast<std::uintptr_t>(h.instance), reinterpret_cast<std::uintptr_t>(h.physical),
                        reinterpret_cast<std::uintptr_t>(h.device), reinterpret_cast<std::uintptr_t>(h.queue),
                        info->compute_queue_family};
    return k;
  }

  [[nodiscard]] Result<std::vector<std::unique_ptr<TuningSpace>>> tuning_spaces(
      const ir::Module& specialized, std::string_view function, const CompileOptions& options) const override {
    const ir::Function* f = specialized.find_function(function);
    if (!f) return make_error(ErrorCode::NotFound, "no function '" + std::string(function) + "' in the module");
    TERNJIT_TRY(const bool int_dot, use_int_dot(options.target));
    TERNJIT_TRY(ShaderSet p, spirv::build_shader_set(*f, int_dot));
    std::shared_ptr<Device> device;
    const DeviceInfo* info = nullptr;
    if (auto d = spirv::select_device(options.target.get("device")); d.ok()) {
      info = *d;
      if (auto opened = Device::open(*info); opened.ok()) device = *opened;
    }
    std::vector<std::unique_ptr<TuningSpace>> spaces;
    for (const spirv::Shader& s : p.shaders)
      if (s.tmatmul) spaces.push_back(spirv::make_tmatmul_space(s, device, info, int_dot));
    return spaces;
  }

  [[nodiscard]] std::vector<std::string_view> emit_forms() const override { return {"spirv", "glsl"}; }

  [[nodiscard]] Result<Emitted> emit(const ir::Module& specialized, std::string_view function, std::string_view what,
                                     const CompileOptions& options, const ir::ParamValues*) const override {
    if (what != "spirv" && what != "glsl")
      return make_error(ErrorCode::InvalidArgument,
                        "the spirv target emits 'spirv' or 'glsl', not '" + std::string(what) + "'");
    const ir::Function* f = specialized.find_function(function);
    if (!f) return make_error(ErrorCode::NotFound, "no function '" + std::string(function) + "' in the module");
    TERNJIT_TRY(const bool int_dot, use_int_dot(options.target));
    TERNJIT_TRY(ShaderSet p, spirv::build_shader_set(*f, int_dot));
    std::string out = "; " + std::string(function) + " on spirv (" + (int_dot ? "OpSDot" : "scalar dot") + "), " +
                      std::to_string(p.shaders.size()) + " shader" + (p.shaders.size() == 1 ? "" : "s") + "\n";
    const ir::FunctionNames names(*f);
    for (const spirv::Shader& s : p.shaders) {
      out += "\n; shader " + s.name + ": " + ir::print_inst(*f, names, s.inst) + "\n";
      if (what == "glsl") {
        out += s.glsl;
        continue;
      }
      TERNJIT_TRY(auto words, spirv::compile_glsl(s.glsl, s.name));
      TERNJIT_TRY(std::string text, spirv::disassemble_spirv(words));
      out += text;
    }
    return Emitted{std::move(out), false, {}};
  }

 private:
  // Whether shaders use OpSDot: the option, else what the selected device reports
  // (OpSDot when no device can be asked: emitting on a machine without Vulkan).
  static Result<bool> use_int_dot(const TargetOptions& options) {
    const std::string v = options.get("int_dot");
    if (v == "on") return true;
    if (v == "off") return false;
    auto d = spirv::select_device(options.get("device"));
    if (!d.ok()) {
      if (d.error().code == ErrorCode::InvalidArgument) return d.error();
      return true;
    }
    return (*d)->int_dot;
  }
};

}  // namespace

std::unique_ptr<Target> make_spirv_target() { return std::make_unique<SpirvTarget>(); }

}  // namespace ternjit::targets

namespace ternjit::targets::spirv {

Result<void> record_launch(const void* state, void* command_buffer, void* const* buffers) {
  if (!state || !command_buffer || !buffers)
    return make_error(ErrorCode::InvalidArgument, "vulkan launch: a null kernel, command buffer or buffer table");
  const auto* s = static_cast<const LoadedState*>(state);
  return s->kernel->record(static_cast<VkCommandBuffer>(command_buffer), reinterpret_cast<const VkBuffer*>(buffers));
}

double last_device_ns(const void* state) {
  return state ? static_cast<const LoadedState*>(state)->kernel->last_device_ns() : 0.0;
}

}  // namespace ternjit::targets::spirv
