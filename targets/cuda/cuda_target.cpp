// SPDX-License-Identifier: Apache-2.0
// cuda_target.cpp - the CUDA Target: options, arch, NVRTC compile to cubin + PTX, load on a device, emit.
#include "targets/cuda/cuda_target.h"

#include <unistd.h>

#include <algorithm>

#include "ir/print.h"
#include "ir/strings.h"
#include "targets/common/device_weights.h"
#include "targets/cuda/cuda_driver.h"
#include "targets/cuda/nvrtc.h"
#include "targets/simt/device_kernels.h"
#include "targets/simt/driver_library.h"
#include "targets/simt/driver_target.h"
#include "targets/simt/generate.h"
#include "targets/simt/tuning_space.h"

namespace ternjit::targets {

namespace {

using cuda::CudaDevice;
using cuda::DriverApi;
using cuda::PrimaryContext;
using simt::DevicePtr;
using ir::join;
using simt::kernel_names;
using simt::source_digest;
using ir::split;

// GpuApi on one device's primary context.
class CudaGpuApi final : public simt::GpuApi {
 public:
  CudaGpuApi(const DriverApi& api, std::shared_ptr<PrimaryContext> ctx) : api_(api), ctx_(std::move(ctx)) {}
  [[nodiscard]] Result<std::shared_ptr<void>> make_current() const override { return ctx_->push(); }
  [[nodiscard]] Result<DevicePtr> alloc(std::size_t bytes) const override {
    cuda::CUdeviceptr p = 0;
    if (cuda::CUresult r = api_.cuMemAlloc(&p, bytes); r != 0) return cuda::cu_error(api_, "cuMemAlloc", r);
    return static_cast<DevicePtr>(p);
  }
  void free(DevicePtr p) const override { api_.cuMemFree(static_cast<cuda::CUdeviceptr>(p)); }
  [[nodiscard]] Result<void> upload(DevicePtr dst, const void* src, std::size_t n, void* stream) const override {
    if (cuda::CUresult r = api_.cuMemcpyHtoDAsync(dst, src, n, static_cast<cuda::CUstream>(stream)); r != 0)
      return cuda::cu_error(api_, "cuMemcpyHtoDAsync", r);
    return success();
  }
  [[nodiscard]] Result<void> download(void* dst, DevicePtr src, std::size_t n, void* stream) const override {
    if (cuda::CUresult r = api_.cuMemcpyDtoHAsync(dst, src, n, static_cast<cuda::CUstream>(stream)); r != 0)
      return cuda::cu_error(api_, "cuMemcpyDtoHAsync", r);
    return success();
  }
  [[nodiscard]] Result<void> launch(void* function, const simt::Dim3& g, const simt::Dim3& b, std::uint32_t shared,
                                    void* stream, void** params) const override {
    if (cuda::CUresult r = api_.cuLaunchKernel(static_cast<cuda::CUfunction>(function), g.x, g.y, g.z, b.x, b.y, b.z,
                                               shared, static_cast<cuda::CUstream>(stream), params, nullptr);
        r != 0)
      return cuda::cu_error(api_, "cuLaunchKernel", r);
    return success();
  }
  [[nodiscard]] Result<void> synchronize(void* stream) const override {
    if (cuda::CUresult r = api_.cuStreamSynchronize(static_cast<cuda::CUstream>(stream)); r != 0)
      return cuda::cu_error(api_, "cuStreamSynchronize", r);
    return success();
  }
  [[nodiscard]] Result<void*> create_stream() const override {
    cuda::CUstream s = nullptr;
    if (cuda::CUresult r = api_.cuStreamCreate(&s, cuda::kStreamNonBlocking); r != 0)
      return cuda::cu_error(api_, "cuStreamCreate", r);
    return static_cast<void*>(s);
  }
  void destroy_stream(void* s) const override { api_.cuStreamDestroy(static_cast<cuda::CUstream>(s)); }

 private:
  const DriverApi& api_;
  std::shared_ptr<PrimaryContext> ctx_;
};

// A loaded module, unloaded (in its context) with the last kernel using it.
struct CudaModule {
  const DriverApi* api = nullptr;
  std::shared_ptr<PrimaryContext> ctx;
  cuda::CUmodule module = nullptr;
  std::vector<cuda::CUfunction> functions;
  ~CudaModule() {
    if (!module) return;
    if (auto current = ctx->push(); current.ok()) api->cuModuleUnload(module);
  }
};

// Loads `cubin` on `device` and finds `names`. Errors: InvalidInput when the driver
// refuses the image (a damaged or foreign cubin), Unavailable/Internal otherwise.
Result<std::shared_ptr<CudaModule>> load_module(const CudaDevice& device, const std::vector<std::uint8_t>& cubin,
                                                const std::vector<std::string>& names) {
  TERNJIT_TRY(const DriverApi* api, cuda::driver());
  auto m = std::make_shared<CudaModule>();
  m->api = api;
  TERNJIT_TRY(m->ctx, PrimaryContext::retain(device));
  TERNJIT_TRY(std::shared_ptr<void> current, m->ctx->push());
  if (cuda::CUresult r = api->cuModuleLoadData(&m->module, cubin.data()); r != 0) {
    Error e = cuda::cu_error(*api, "cuModuleLoadData", r);
    // CUDA_ERROR_INVALID_IMAGE (200), NO_BINARY_FOR_GPU (209), INVALID_PTX (218), ...
    if (r == 200 || r == 209 || r == 218 || r == 1) e.code = ErrorCode::InvalidInput;
    m->module = nullptr;
    return e;
  }
  for (const std::string& n : names) {
    cuda::CUfunction f = nullptr;
    if (cuda::CUresult r = api->cuModuleGetFunction(&f, m->module, n.c_str()); r != 0)
      return cuda::cu_error(*api, ("cuModuleGetFunction '" + n + "'").c_str(), r);
    m->functions.push_back(f);
  }
  return m;
}

// Register and local-memory use of each kernel, one text line for `ternjit cache ls`:
// "regs<=N spill=S/L B local<=B (source)".
std::string usage_summary(const std::vector<cuda::PtxasUsage>& u, std::string_view source) {
  int regs = 0;
  std::int64_t stores = 0, loads = 0, stack = 0;
  for (const cuda::PtxasUsage& x : u) {
    regs = std::max(regs, x.registers);
    stores += std::max<std::int64_t>(0, x.spill_stores);
    loads += std::max<std::int64_t>(0, x.spill_loads);
    stack = std::max(stack, x.stack_bytes);
  }
  return "kernels=" + std::to_string(u.size()) + " regs<=" + std::to_string(regs) + " spill=" + std::to_string(stores) +
         "/" + std::to_string(loads) + "B local<=" + std::to_string(stack) + "B (" + std::string(source) + ")";
}

std::string per_kernel_usage(const std::vector<cuda::PtxasUsage>& u) {
  std::vector<std::string> items;
  for (const cuda::PtxasUsage& x : u)
    items.push_back(x.kernel + ":regs=" + std::to_string(x.registers) + ",spill=" + std::to_string(x.spill_stores) +
                    "/" + std::to_string(x.spill_loads) + ",local=" + std::to_string(x.stack_bytes));
  return join(items, ";");
}

class CudaTarget final : public Target {
 public:
  [[nodiscard]] std::string_view name() const override { return "cuda"; }
  [[nodiscard]] TargetTraits traits() const override {
    TargetTraits t;
    t.kind = TargetKind::Gpu;
    t.artifact_kind = "cubin";
    t.decides_at_compile = true;
    t.may_have_gpu = ::access("/dev/nvidiactl", F_OK) == 0 || ::access("/dev/nvidia0", F_OK) == 0 ||
                     ::access("/dev/dxg", F_OK) == 0;
    return t;
  }

  [[nodiscard]] Result<void> available() const override {
    auto nvrtc = cuda::nvrtc_info();
    auto device = cuda::select_cuda_device("auto");
    if (!device.ok()) {
      Error e = device.error();
      e.code = ErrorCode::Unavailable;
      e.message += nvrtc.ok() ? "; compile-only with " + (*nvrtc)->version_text() +
                                    " (ternjit compile --target cuda --emit cuda|ptx|cubin)"
                              : "; " + nvrtc.error().message;
      return e;
    }
    if (!nvrtc.ok()) return nvrtc.error();
    bool known = std::find(std::begin(cuda::kCudaArchs), std::end(cuda::kCudaArchs), (*device)->arch()) !=
                 std::end(cuda::kCudaArchs);
    if (!known)
      return make_error(ErrorCode::Unavailable, (*device)->name + " is " + (*device)->arch() +
                                                    ": the cuda target generates for sm_80, sm_86, sm_89 and sm_90");
    return success();
  }

  [[nodiscard]] TargetDescription describe() const override {
    TargetDescription t = simt::target_description(*this);
    auto d = cuda::select_cuda_device("auto");
    auto drv = cuda::driver();
    if (d.ok() && drv.ok()) {
      t.device = (*d)->name + " (CUDA, " + (*drv)->version_text() + ")";
      t.memory_bytes = (*d)->memory_bytes;
      t.features = (*d)->arch() + ", " + std::to_string((*d)->multiprocessors) + " SMs, warp " +
                   std::to_string((*d)->warp_size) + ", dp4a";
    } else {
      t.features = "compile-only, default arch " + std::string(cuda::kDefaultArch);
    }
    return t;
  }

  [[nodiscard]] std::vector<DeviceDescription> devices() const override {
    return simt::device_descriptions(cuda::cuda_devices(), cuda::driver());
  }

  // The machine text of the key: the device, its features and the toolchain.
  [[nodiscard]] std::string cache_key_text() const override {
    return Target::cache_key_text() + ";toolchain=" + toolchain();
  }

  // NVRTC's and the driver's versions: what changes the code besides the device.
  [[nodiscard]] std::string toolchain() const {
    auto nvrtc = cuda::nvrtc_info();
    auto drv = cuda::driver();
    return cuda::toolchain_text(nvrtc.ok() ? (*nvrtc)->major : 0, nvrtc.ok() ? (*nvrtc)->minor : 0,
                                drv.ok() ? (*drv)->driver_version : 0);
  }

  // Options: arch (sm_80 | sm_86 | sm_89 | sm_90 | sm_90a), device (auto | index).
  [[nodiscard]] Result<TargetOptions> parse_options(const TargetOptions& given) const override {
    for (const auto& [option, value] : given.values) {
      if (option == "arch") {
        if (std::find(std::begin(cuda::kCudaArchs), std::end(cuda::kCudaArchs), value) == std::end(cuda::kCudaArchs))
          return make_error(ErrorCode::InvalidArgument,
                            "cuda.arch='" + value + "': expected sm_80, sm_86, sm_89, sm_90 or sm_90a");
      } else if (option == "device") {
        TERNJIT_TRY_VOID(simt::check_device_option("cuda", value));
      } else {
        return make_error(ErrorCode::InvalidArgument, "unknown cuda option '" + option + "' (cuda takes: arch, device)");
      }
    }
    return given;
  }

  [[nodiscard]] Result<void> check_supported(const ir::Function& f) const override { return simt::supported(f); }

  [[nodiscard]] Result<Artifact> compile(const ir::Module& specialized, std::string_view function,
                                         const CompileOptions& options) const override {
    TERNJIT_TRY(simt::KernelSet p, generate(specialized, function, options));
    TERNJIT_TRY(const std::string arch, resolve_arch(options.target));
    TERNJIT_TRY(cuda::NvrtcOutput out, cuda::nvrtc_compile(p.source, std::string(function), arch, true));
    Artifact a;
    a.kind = std::string(traits().artifact_kind);
    a.bytes = std::move(out.cubin);
    a.entry = std::string(function);
    a.metadata["ir"] = ir::print_module(specialized);
    a.metadata["arch"] = arch;
    a.metadata["ptx"] = std::move(out.ptx);
    a.metadata["decisions"] = join(options.decisions, "|");
    a.metadata["source_digest"] = source_digest(p.source);
    a.metadata["bytes_digest"] = bytes_digest(a.bytes);
    a.metadata["toolchain"] = toolchain();
    a.metadata["isa"] = "cuda_" + arch;
    a.metadata["kernels"] = join(kernel_names(p), ",");
    // Register and spill counts: the driver's (cuFuncGetAttribute) when a device of
    // this arch can load the cubin here, else what ptxas printed while NVRTC compiled.
    std::vector<cuda::PtxasUsage> usage = cuda::parse_ptxas_usage(out.log);
    std::string source = "ptxas";
    if (auto d = cuda::select_cuda_device(options.target.get("device")); d.ok() && (*d)->arch() == arch_base(arch))
      if (auto measured = driver_usage(**d, a.bytes, kernel_names(p)); measured.ok()) {
        // The driver's registers and local bytes; the spill split only ptxas prints.
        for (cuda::PtxasUsage& m : *measured)
          for (const cuda::PtxasUsage& x : usage)
            if (x.kernel == m.kernel) {
              m.spill_stores = x.spill_stores;
              m.spill_loads = x.spill_loads;
            }
        usage = std::move(*measured);
        source = "cuFuncGetAttribute";
      }
    a.metadata["usage"] = usage_summary(usage, source);
    a.metadata["usage_kernels"] = per_kernel_usage(usage);
    return a;
  }

  [[nodiscard]] std::unique_ptr<ProgramState> new_program_state() const override {
    return std::make_unique<DeviceWeights>();
  }

  [[nodiscard]] Result<LoadedKernel> load(const Artifact& a, const LoadContext& context) const override {
    TERNJIT_CHECK(context.params != nullptr, "load: no parameter values");
    TERNJIT_TRY_VOID(simt::check_artifact(a, "cuda", traits().artifact_kind,
                                          {"ir", "arch", "decisions", "source_digest", "bytes_digest"},
                                          "the cubin does not match its digest (damaged)"));
    TERNJIT_TRY_VOID(cuda::check_cubin(a.bytes));
    TERNJIT_TRY(const CudaDevice* device, cuda::select_cuda_device(context.options.get("device")));
    const std::string& arch = a.metadata.at("arch");
    if (arch_base(arch) != device->arch())
      return make_error(ErrorCode::Unavailable, "the cubin is for " + arch + " but " + device->name + " is " +
                                                    device->arch() + " (compile with cuda.arch=" + device->arch() + ")");
    // The launch plan comes from the generator again: the same IR and decisions give
    // the same source, which the digest proves, so the plan matches the cubin.
    TERNJIT_TRY(ir::Module m, simt::artifact_module(a));
    CompileOptions copts;
    copts.decisions = split(a.metadata.at("decisions"), '|');
    TERNJIT_TRY(simt::KernelSet p, generate(m, a.entry, copts));
    TERNJIT_TRY_VOID(simt::check_source_digest(p, "cuda", a.metadata.at("source_digest")));
    TERNJIT_TRY(std::shared_ptr<CudaModule> module, load_module(*device, a.bytes, kernel_names(p)));
    TERNJIT_TRY(const DriverApi* api, cuda::driver());
    // Kernels over 48 KiB of dynamic shared memory must opt in (none today: shared is static).
    for (std::size_t i = 0; i < p.kernels.size(); ++i)
      if (p.kernels[i].shared_bytes > 48 * 1024) {
        TERNJIT_TRY(std::shared_ptr<void> current, module->ctx->push());
        if (cuda::CUresult r = api->cuFuncSetAttribute(module->functions[i], cuda::kFuncAttrMaxDynamicShared,
                                                       static_cast<int>(p.kernels[i].shared_bytes));
            r != 0)
          return cuda::cu_error(*api, "cuFuncSetAttribute", r);
      }
    std::vector<void*> functions(module->functions.begin(), module->functions.end());
    auto gpu = std::make_shared<const CudaGpuApi>(*api, module->ctx);
    const std::string device_key = "cuda" + std::to_string(device->index) + ":" + device->name;
    TERNJIT_TRY(LoadedKernel k, simt::load_kernel_set(simt::Dialect::Cuda, m, a.entry, std::move(p), std::move(gpu),
                                                      device_key, std::move(functions), module, context));
    k.isa = a.metadata.count("isa") ? a.metadata.at("isa") : "cuda";
    k.device_handles = {reinterpret_cast<std::uintptr_t>(module->ctx->handle()),
                        static_cast<std::uintptr_t>(device->handle)};
    return k;
  }


  [[nodiscard]] Result<std::vector<std::unique_ptr<TuningSpace>>> tuning_spaces(
      const ir::Module& specialized, std::string_view function, const CompileOptions& options) const override {
    TERNJIT_TRY(const ir::Function* f, simt::supported_function(specialized, function));
    TERNJIT_TRY(const std::string arch, resolve_arch(options.target));
    simt::SpaceOptions o;
    o.op = "cuda.tmatmul";
    o.device_key = arch;
    o.warp_size = 32;
    o.int_dot = true;
    o.tensor_cores = true;  // every arch of kCudaArchs is sm_80+
    if (auto d = cuda::select_cuda_device(options.target.get("device")); d.ok()) {
      o.multiprocessors = static_cast<std::uint32_t>((*d)->multiprocessors);
      if ((*d)->dram_gbps() > 0) o.bandwidth_gbs = (*d)->dram_gbps();
    }
    return simt::tmatmul_spaces(*f, o, *this, options.target);
  }

  [[nodiscard]] std::vector<std::string_view> emit_forms() const override { return {"cuda", "ptx", "cubin"}; }

  [[nodiscard]] Result<Emitted> emit(const ir::Module& specialized, std::string_view function, std::string_view what,
                                     const CompileOptions& options, const ir::ParamValues*) const override {
    if (what != "cuda" && what != "ptx" && what != "cubin")
      return make_error(ErrorCode::InvalidArgument,
                        "the cuda target emits 'cuda', 'ptx' or 'cubin', not '" + std::string(what) + "'");
    TERNJIT_TRY(simt::KernelSet p, generate(specialized, function, options));
    TERNJIT_TRY(const std::string arch, resolve_arch(options.target));
    if (what == "cuda") return Emitted{launch_listing(p, function, arch) + p.source, false, {}};
    TERNJIT_TRY(cuda::NvrtcOutput out, cuda::nvrtc_compile(p.source, std::string(function), arch, what == "cubin"));
    if (what == "ptx") return Emitted{std::move(out.ptx), false, {}};
    return Emitted{std::string(out.cubin.begin(), out.cubin.end()), true, {}};
  }

 private:
  // The arch to compile for: the option, else the selected device's, else kDefaultArch.
  static Result<std::string> resolve_arch(const TargetOptions& options) {
    if (std::string a = options.get("arch"); !a.empty()) return a;
    auto d = cuda::select_cuda_device(options.get("device"));
    if (d.ok()) return (*d)->arch();
    if (d.error().code == ErrorCode::InvalidArgument) return d.error();
    return std::string(cuda::kDefaultArch);
  }

  // "sm_90a" -> "sm_90": the device arch an accelerated-feature cubin runs on.
  static std::string arch_base(const std::string& arch) {
    return !arch.empty() && arch.back() == 'a' ? arch.substr(0, arch.size() - 1) : arch;
  }

  static Result<simt::KernelSet> generate(const ir::Module& specialized, std::string_view function,
                                            const CompileOptions& options) {
    simt::SimtOptions o;
    o.dialect = simt::Dialect::Cuda;
    o.warp_size = 32;
    o.int_dot = true;       // dp4a on every arch of kCudaArchs
    o.tensor_cores = true;  // and int8 mma.sync (sm_80+): M >= 16 takes it by default
    o.decisions = options.decisions;
    return simt::generate(specialized, function, o);
  }

  // The launch plan as comment lines above the source (`--emit cuda`).
  static std::string launch_listing(const simt::KernelSet& p, std::string_view function, const std::string& arch) {
    std::string out = "// " + std::string(function) + " on cuda (" + arch + "): " + std::to_string(p.kernels.size()) +
                      " launch" + (p.kernels.size() == 1 ? "" : "es") + " in order on one stream\n";
    out += simt::launch_lines(p);
    for (std::size_t i = 0; i < p.configs.size(); ++i)
      out += "//   tmatmul " + std::to_string(i) + ": " + simt::config_text(p.configs[i]) + "\n";
    return out + "\n";
  }

  // cuFuncGetAttribute's register and local-memory counts of `names` in `cubin`.
  static Result<std::vector<cuda::PtxasUsage>> driver_usage(const CudaDevice& device,
                                                            const std::vector<std::uint8_t>& cubin,
                                                            const std::vector<std::string>& names) {
    TERNJIT_TRY(std::shared_ptr<CudaModule> m, load_module(device, cubin, names));
    TERNJIT_TRY(std::shared_ptr<void> current, m->ctx->push());
    std::vector<cuda::PtxasUsage> out;
    for (std::size_t i = 0; i < names.size(); ++i) {
      int regs = 0, local = 0;
      if (m->api->cuFuncGetAttribute(&regs, cuda::kFuncAttrNumRegs, m->functions[i]) != 0 ||
          m->api->cuFuncGetAttribute(&local, cuda::kFuncAttrLocalBytes, m->functions[i]) != 0)
        return make_error(ErrorCode::Internal, "cuFuncGetAttribute failed");
      cuda::PtxasUsage u;
      u.kernel = names[i];
      u.registers = regs;
      u.stack_bytes = local;  // local memory per thread: the stack frame and spills
      u.spill_stores = -1;
      u.spill_loads = -1;
      out.push_back(u);
    }
    return out;
  }
};

}  // namespace

std::unique_ptr<Target> make_cuda_target() { return std::make_unique<CudaTarget>(); }

std::string cuda::toolchain_text(int nvrtc_major, int nvrtc_minor, int driver_version) {
  const std::string nvrtc =
      nvrtc_major == 0 ? "nvrtc none" : "nvrtc " + std::to_string(nvrtc_major) + "." + std::to_string(nvrtc_minor);
  const std::string drv = driver_version == 0 ? "cuda driver none"
                                              : "cuda driver " + std::to_string(driver_version / 1000) + "." +
                                                    std::to_string(driver_version % 1000 / 10);
  return nvrtc + "; " + drv;
}

}  // namespace ternjit::targets
