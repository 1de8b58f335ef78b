// SPDX-License-Identifier: Apache-2.0
// hip_target.cpp - the HIP Target: options, offload archs, hiprtc code objects, load on an AMD GPU, emit.
#include "targets/hip/hip_target.h"

#include <unistd.h>

#include <algorithm>

#include "ir/print.h"
#include "ir/strings.h"
#include "targets/common/device_weights.h"
#include "targets/hip/hip_api.h"
#include "targets/simt/device_kernels.h"
#include "targets/simt/driver_library.h"
#include "targets/simt/driver_target.h"
#include "targets/simt/generate.h"
#include "targets/simt/tuning_space.h"

namespace ternjit::targets {

namespace {

using hip::HipDevice;
using hip::RuntimeApi;
using simt::DevicePtr;
using ir::join;
using simt::source_digest;
using ir::split;

// GpuApi on one AMD GPU (hipSetDevice makes it current for the calling thread).
class HipGpuApi final : public simt::GpuApi {
 public:
  HipGpuApi(const RuntimeApi& api, int device) : api_(api), device_(device) {}
  [[nodiscard]] Result<std::shared_ptr<void>> make_current() const override {
    if (int r = api_.hipSetDevice(device_); r != 0) return hip::hip_error(api_, "hipSetDevice", r);
    return std::shared_ptr<void>();
  }
  [[nodiscard]] Result<DevicePtr> alloc(std::size_t bytes) const override {
    void* p = nullptr;
    if (int r = api_.hipMalloc(&p, bytes); r != 0) return hip::hip_error(api_, "hipMalloc", r);
    return reinterpret_cast<DevicePtr>(p);
  }
  void free(DevicePtr p) const override { api_.hipFree(reinterpret_cast<void*>(p)); }
  [[nodiscard]] Result<void> upload(DevicePtr dst, const void* src, std::size_t n, void* stream) const override {
    if (int r = api_.hipMemcpyHtoDAsync(reinterpret_cast<void*>(dst), const_cast<void*>(src), n,
                                        static_cast<hip::HipStream>(stream));
        r != 0)
      return hip::hip_error(api_, "hipMemcpyHtoDAsync", r);
    return success();
  }
  [[nodiscard]] Result<void> download(void* dst, DevicePtr src, std::size_t n, void* stream) const override {
    if (int r = api_.hipMemcpyDtoHAsync(dst, reinterpret_cast<void*>(src), n, static_cast<hip::HipStream>(stream));
        r != 0)
      return hip::hip_error(api_, "hipMemcpyDtoHAsync", r);
    return success();
  }
  [[nodiscard]] Result<void> launch(void* function, const simt::Dim3& g, const simt::Dim3& b, std::uint32_t shared,
                                    void* stream, void** params) const override {
    if (int r = api_.hipModuleLaunchKernel(static_cast<hip::HipFunction>(function), g.x, g.y, g.z, b.x, b.y, b.z,
                                           shared, static_cast<hip::HipStream>(stream), params, nullptr);
        r != 0)
      return hip::hip_error(api_, "hipModuleLaunchKernel", r);
    return success();
  }
  [[nodiscard]] Result<void> synchronize(void* stream) const override {
    if (int r = api_.hipStreamSynchronize(static_cast<hip::HipStream>(stream)); r != 0)
      return hip::hip_error(api_, "hipStreamSynchronize", r);
    return success();
  }
  [[nodiscard]] Result<void*> create_stream() const override {
    hip::HipStream s = nullptr;
    if (int r = api_.hipStreamCreate(&s); r != 0) return hip::hip_error(api_, "hipStreamCreate", r);
    return static_cast<void*>(s);
  }
  void destroy_stream(void* s) const override { api_.hipStreamDestroy(static_cast<hip::HipStream>(s)); }

 private:
  const RuntimeApi& api_;
  int device_ = 0;
};

struct HipModuleHolder {
  const RuntimeApi* api = nullptr;
  int device = 0;
  hip::HipModule module = nullptr;
  std::vector<hip::HipFunction> functions;
  ~HipModuleHolder() {
    if (module && api->hipSetDevice(device) == 0) api->hipModuleUnload(module);
  }
};

// One code object of an artifact: "arch:offset:size:digest" in metadata "code_objects".
struct CodeObjectEntry {
  std::string arch;
  std::size_t offset = 0, size = 0;
  std::string source_digest;
};

Result<std::vector<CodeObjectEntry>> parse_entries(const Artifact& a) {
  std::vector<CodeObjectEntry> out;
  auto bad = [] { return make_error(ErrorCode::InvalidInput, "hip artifact: its code-object table is damaged"); };
  auto it = a.metadata.find("code_objects");
  if (it == a.metadata.end()) return bad();
  for (const std::string& item : split(it->second, ',')) {
    const std::vector<std::string> f = split(item, ':');
    if (f.size() != 4 || f[1].empty() || f[2].empty() || f[1].size() > 12 || f[2].size() > 12 ||
        f[1].find_first_not_of("0123456789") != std::string::npos ||
        f[2].find_first_not_of("0123456789") != std::string::npos)
      return bad();
    CodeObjectEntry e{f[0], std::stoull(f[1]), std::stoull(f[2]), f[3]};
    if (e.offset > a.bytes.size() || e.size > a.bytes.size() - e.offset) return bad();
    out.push_back(std::move(e));
  }
  return out;
}

class HipTarget final : public Target {
 public:
  [[nodiscard]] std::string_view name() const override { return "hip"; }
  [[nodiscard]] TargetTraits traits() const override {
    TargetTraits t;
    t.kind = TargetKind::Gpu;
    t.artifact_kind = "hsaco";
    t.decides_at_compile = true;
    t.may_have_gpu = ::access("/dev/kfd", F_OK) == 0;
    return t;
  }

  [[nodiscard]] Result<void> available() const override {
    auto rtc = hip::hiprtc_version();
    auto device = hip::select_hip_device("auto");
    if (!device.ok()) {
      Error e = device.error();
      e.code = ErrorCode::Unavailable;
      e.message += rtc.ok() ? "; compile-only with " + *rtc + " (ternjit compile --target hip --emit hip|hsaco)"
                            : "; " + rtc.error().message;
      return e;
    }
    if (!rtc.ok()) return rtc.error();
    if (auto ok = hip::check_offload_arch((*device)->arch); !ok.ok())
      return make_error(ErrorCode::Unavailable, (*device)->name + " (" + (*device)->arch + "): " + ok.error().message);
    return success();
  }


  [[nodiscard]] TargetDescription describe() const override {
    TargetDescription t = simt::target_description(*this);
    auto d = hip::select_hip_device("auto");
    auto rt = hip::runtime();
    if (d.ok() && rt.ok()) {
      t.device = (*d)->name + " (HIP, " + (*rt)->version_text() + ")";
      t.memory_bytes = (*d)->memory_bytes;
      t.features = (*d)->arch + ", " + std::to_string((*d)->compute_units) + " CUs, wave " +
                   std::to_string((*d)->warp_size);
    } else {
      t.features = "compile-only, default offload arch " + std::string(hip::kDefaultArch);
    }
    return t;
  }

  [[nodiscard]] std::vector<DeviceDescription> devices() const override {
    return simt::device_descriptions(hip::hip_devices(), hip::runtime());
  }

  // The machine text of the key: the device, its features and the toolchain.
  [[nodiscard]] std::string cache_key_text() const override {
    return Target::cache_key_text() + ";toolchain=" + toolchain();
  }

  // hiprtc's and the runtime's versions: what changes the code besides the device.
  [[nodiscard]] std::string toolchain() const {
    auto rtc = hip::hiprtc_version();
    auto rt = hip::runtime();
    return (rtc.ok() ? *rtc : std::string("hiprtc none")) + "; " + (rt.ok() ? (*rt)->version_text() : "hip runtime none");
  }

  // Options: offload_arch (a comma list of kSupportedArchs), device (auto | index).
  [[nodiscard]] Result<TargetOptions> parse_options(const TargetOptions& given) const override {
    for (const auto& [option, value] : given.values) {
      if (option == "offload_arch") {
        TERNJIT_TRY(auto archs, hip::parse_offload_archs(value));
        (void)archs;
      } else if (option == "device") {
        TERNJIT_TRY_VOID(simt::check_device_option("hip", value));
      } else {
        return make_error(ErrorCode::InvalidArgument,
                          "unknown hip option '" + option + "' (hip takes: offload_arch, device)");
      }
    }
    return given;
  }

  [[nodiscard]] Result<void> check_supported(const ir::Function& f) const override { return simt::supported(f); }

  [[nodiscard]] Result<Artifact> compile(const ir::Module& specialized, std::string_view function,
                                         const CompileOptions& options) const override {
    TERNJIT_TRY(std::vector<std::string> archs, resolve_archs(options.target));
    Artifact a;
    a.kind = std::string(traits().artifact_kind);
    a.entry = std::string(function);
    std::vector<std::string> table, usage, usage_kernels;
    for (const std::string& arch : archs) {
      TERNJIT_TRY(simt::KernelSet p, generate(specialized, function, options.decisions, arch));
      TERNJIT_TRY(hip::HipOutput out, hip::compile_hip(p.source, std::string(function), arch));
      // Registers and spills from the code object's metadata note (what the HIP runtime
      // would report): one summary per arch for `ternjit cache ls`.
      TERNJIT_TRY(std::vector<hip::KernelUsage> used, hip::code_object_usage(out.code));
      std::int64_t vgprs = 0, sgprs = 0, vspill = 0, sspill = 0, scratch = 0;
      for (const hip::KernelUsage& u : used) {
        vgprs = std::max(vgprs, u.vgprs);
        sgprs = std::max(sgprs, u.sgprs);
        vspill += std::max<std::int64_t>(0, u.vgpr_spills);
        sspill += std::max<std::int64_t>(0, u.sgpr_spills);
        scratch = std::max(scratch, u.scratch_bytes);
        usage_kernels.push_back(arch + "/" + u.name + ":vgprs=" + std::to_string(u.vgprs) + ",sgprs=" +
                                std::to_string(u.sgprs) + ",spill=" + std::to_string(u.vgpr_spills) + "/" +
                                std::to_string(u.sgpr_spills) + ",scratch=" + std::to_string(u.scratch_bytes));
      }
      usage.push_back(arch + " kernels=" + std::to_string(used.size()) + " vgprs<=" + std::to_string(vgprs) +
                      " sgprs<=" + std::to_string(sgprs) + " spill=" + std::to_string(vspill) + "/" +
                      std::to_string(sspill) + " scratch<=" + std::to_string(scratch) + "B");
      table.push_back(arch + ":" + std::to_string(a.bytes.size()) + ":" + std::to_string(out.code.size()) + ":" +
                      source_digest(p.source));
      a.bytes.insert(a.bytes.end(), out.code.begin(), out.code.end());
    }
    a.metadata["ir"] = ir::print_module(specialized);
    a.metadata["code_objects"] = join(table, ",");
    a.metadata["decisions"] = join(options.decisions, "|");
    a.metadata["bytes_digest"] = bytes_digest(a.bytes);
    a.metadata["toolchain"] = toolchain();
    a.metadata["isa"] = "hip_" + join(archs, "_");
    a.metadata["usage"] = join(usage, "; ") + " (code object)";
    a.metadata["usage_kernels"] = join(usage_kernels, ";");
    return a;
  }

  [[nodiscard]] std::unique_ptr<ProgramState> new_program_state() const override {
    return std::make_unique<DeviceWeights>();
  }

  [[nodiscard]] Result<LoadedKernel> load(const Artifact& a, const LoadContext& context) const override {
    TERNJIT_CHECK(context.params != nullptr, "load: no parameter values");
    TERNJIT_TRY_VOID(simt::check_artifact(a, "hip", traits().artifact_kind, {"ir", "decisions", "bytes_digest"},
                                          "the code objects do not match their digest (damaged)"));
    TERNJIT_TRY(std::vector<CodeObjectEntry> entries, parse_entries(a));
    TERNJIT_TRY(const HipDevice* device, hip::select_hip_device(context.options.get("device")));
    auto entry = std::find_if(entries.begin(), entries.end(), [&](const CodeObjectEntry& e) { return e.arch == device->arch; });
    if (entry == entries.end())
      return make_error(ErrorCode::Unavailable, "the artifact has no code object for " + device->name + " (" +
                                                    device->arch + "): compile with hip.offload_arch=" + device->arch);
    const std::vector<std::uint8_t> code(a.bytes.begin() + static_cast<std::ptrdiff_t>(entry->offset),
                                         a.bytes.begin() + static_cast<std::ptrdiff_t>(entry->offset + entry->size));
    TERNJIT_TRY_VOID(hip::check_code_object(code));
    TERNJIT_TRY(ir::Module m, simt::artifact_module(a));
    TERNJIT_TRY(simt::KernelSet p, generate(m, a.entry, split(a.metadata.at("decisions"), '|'), device->arch));
    TERNJIT_TRY_VOID(simt::check_source_digest(p, "hip", entry->source_digest));
    TERNJIT_TRY(const RuntimeApi* api, hip::runtime());
    auto module = std::make_shared<HipModuleHolder>();
    module->api = api;
    module->device = device->index;
    if (int r = api->hipSetDevice(device->index); r != 0) return hip::hip_error(*api, "hipSetDevice", r);
    if (int r = api->hipModuleLoadData(&module->module, code.data()); r != 0) {
      module->module = nullptr;
      Error e = hip::hip_error(*api, "hipModuleLoadData", r);
      e.code = ErrorCode::InvalidInput;
      return e;
    }
    for (const simt::KernelLaunch& k : p.kernels) {
      hip::HipFunction f = nullptr;
      if (int r = api->hipModuleGetFunction(&f, module->module, k.name.c_str()); r != 0)
        return hip::hip_error(*api, ("hipModuleGetFunction '" + k.name + "'").c_str(), r);
      module->functions.push_back(f);
    }
    std::vector<void*> functions(module->functions.begin(), module->functions.end());
    auto gpu = std::make_shared<const HipGpuApi>(*api, device->index);
    const std::string device_key = "hip" + std::to_string(device->index) + ":" + device->name;
    TERNJIT_TRY(LoadedKernel k, simt::load_kernel_set(simt::Dialect::Hip, m, a.entry, std::move(p), std::move(gpu),
                                                      device_key, std::move(functions), module, context));
    k.isa = "hip_" + device->arch;
    k.device_handles = {static_cast<std::uintptr_t>(device->index)};
    return k;
  }


  [[nodiscard]] Result<std::vector<std::unique_ptr<TuningSpace>>> tuning_spaces(
      const ir::Module& specialized, std::string_view function, const CompileOptions& options) const override {
    TERNJIT_TRY(const ir::Function* f, simt::supported_function(specialized, function));
    TERNJIT_TRY(std::vector<std::string> archs, resolve_archs(options.target));
    simt::SpaceOptions o;
    o.op = "hip.tmatmul";
    o.device_key = archs.front();
    o.warp_size = hip::wave_size(archs.front());
    o.int_dot = archs.front() != "gfx900";
    if (auto d = hip::select_hip_device(options.target.get("device")); d.ok())
      o.multiprocessors = static_cast<std::uint32_t>((*d)->compute_units);
    return simt::tmatmul_spaces(*f, o, *this, options.target);
  }

  [[nodiscard]] std::vector<std::string_view> emit_forms() const override { return {"hip", "hsaco"}; }

  [[nodiscard]] Result<Emitted> emit(const ir::Module& specialized, std::string_view function, std::string_view what,
                                     const CompileOptions& options, const ir::ParamValues*) const override {
    if (what != "hip" && what != "hsaco")
      return make_error(ErrorCode::InvalidArgument,
                        "the hip target emits 'hip' or 'hsaco', not '" + std::string(what) + "'");
    TERNJIT_TRY(std::vector<std::string> archs, resolve_archs(options.target));
    if (what == "hsaco" && archs.size() != 1)
      return make_error(ErrorCode::InvalidArgument, "--emit hsaco writes one code object: give one hip.offload_arch");
    std::string text;
    for (const std::string& arch : archs) {
      TERNJIT_TRY(simt::KernelSet p, generate(specialized, function, options.decisions, arch));
      if (what == "hsaco") {
        TERNJIT_TRY(hip::HipOutput out, hip::compile_hip(p.source, std::string(function), arch));
        return Emitted{std::string(out.code.begin(), out.code.end()), true, {}};
      }
      text += "// " + std::string(function) + " on hip (" + arch + ", wave" + std::to_string(p.warp_size) + "): " +
              std::to_string(p.kernels.size()) + " launches in order on one stream\n";
      text += simt::launch_lines(p);
      text += "\n" + p.source;
    }
    return Emitted{std::move(text), false, {}};
  }

 private:
  // The option's archs, else the selected device's, else kDefaultArch.
  static Result<std::vector<std::string>> resolve_archs(const TargetOptions& options) {
    if (std::string list = options.get("offload_arch"); !list.empty()) return hip::parse_offload_archs(list);
    auto d = hip::select_hip_device(options.get("device"));
    if (d.ok()) {
      TERNJIT_TRY_VOID(hip::check_offload_arch((*d)->arch));
      return std::vector<std::string>{(*d)->arch};
    }
    if (d.error().code == ErrorCode::InvalidArgument) return d.error();
    return std::vector<std::string>{std::string(hip::kDefaultArch)};
  }

  static Result<simt::KernelSet> generate(const ir::Module& specialized, std::string_view function,
                                            const std::vector<std::string>& decisions, const std::string& arch) {
    simt::SimtOptions o;
    o.dialect = simt::Dialect::Hip;
    o.warp_size = hip::wave_size(arch);
    o.int_dot = arch != "gfx900";  // v_dot4_i32_i8 (sdot4) from gfx906 on
    o.decisions = decisions;
    return simt::generate(specialized, function, o);
  }
};

}  // namespace

std::unique_ptr<Target> make_hip_target() { return std::make_unique<HipTarget>(); }

Result<std::vector<std::string>> hip::parse_offload_archs(std::string_view list) {
  std::vector<std::string> out;
  for (std::string arch : split(list, ',')) {
    while (!arch.empty() && arch.front() == ' ') arch.erase(arch.begin());
    while (!arch.empty() && arch.back() == ' ') arch.pop_back();
    TERNJIT_TRY_VOID(check_offload_arch(arch));
    if (std::find(out.begin(), out.end(), arch) == out.end()) out.push_back(arch);
  }
  if (out.empty()) return make_error(ErrorCode::InvalidArgument, "hip.offload_arch is empty");
  return out;
}

std::uint32_t hip::wave_size(std::string_view arch) {
  return arch.substr(0, 5) == "gfx10" || arch.substr(0, 5) == "gfx11" ? 32 : 64;
}

}  // namespace ternjit::targets
