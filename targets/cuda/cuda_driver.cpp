// SPDX-License-Identifier: Apache-2.0
// cuda_driver.cpp - dlopen of libcuda.so.1, cuInit, device enumeration and description, primary contexts.
#include "targets/cuda/cuda_driver.h"

#include <dlfcn.h>

#include <cstdio>
#include <type_traits>

namespace ternjit::targets::cuda {

namespace {

Result<DriverApi> open_driver() {
  // The driver ships with the kernel module, never with the toolkit: only the soname
  // with its ABI version is looked for (libcuda.so is the toolkit's link stub).
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* why = dlerror();
    return make_error(ErrorCode::Unavailable,
                      std::string("no CUDA driver (libcuda.so.1): ") + (why ? why : "dlopen failed"));
  }
  DriverApi api;
  api.path = "libcuda.so.1";
  std::string missing;
  auto sym = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
    if (!fn) missing += std::string(missing.empty() ? "" : ", ") + name;
  };
  sym(api.cuInit, "cuInit");
  sym(api.cuDriverGetVersion, "cuDriverGetVersion");
  sym(api.cuDeviceGetCount, "cuDeviceGetCount");
  sym(api.cuDeviceGet, "cuDeviceGet");
  sym(api.cuDeviceGetName, "cuDeviceGetName");
  sym(api.cuDeviceTotalMem, "cuDeviceTotalMem_v2");
  sym(api.cuDeviceGetAttribute, "cuDeviceGetAttribute");
  sym(api.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
  sym(api.cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2");
  sym(api.cuCtxPushCurrent, "cuCtxPushCurrent_v2");
  sym(api.cuCtxPopCurrent, "cuCtxPopCurrent_v2");
  sym(api.cuModuleLoadData, "cuModuleLoadData");
  sym(api.cuModuleUnload, "cuModuleUnload");
  sym(api.cuModuleGetFunction, "cuModuleGetFunction");
  sym(api.cuFuncGetAttribute, "cuFuncGetAttribute");
  sym(api.cuFuncSetAttribute, "cuFuncSetAttribute");
  sym(api.cuLaunchKernel, "cuLaunchKernel");
  sym(api.cuMemAlloc, "cuMemAlloc_v2");
  sym(api.cuMemFree, "cuMemFree_v2");
  sym(api.cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
  sym(api.cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2");
  sym(api.cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2");
  sym(api.cuMemsetD8Async, "cuMemsetD8Async");
  sym(api.cuStreamCreate, "cuStreamCreate");
  sym(api.cuStreamDestroy, "cuStreamDestroy_v2");
  sym(api.cuStreamSynchronize, "cuStreamSynchronize");
  sym(api.cuEventCreate, "cuEventCreate");
  sym(api.cuEventRecord, "cuEventRecord");
  sym(api.cuEventSynchronize, "cuEventSynchronize");
  sym(api.cuEventElapsedTime, "cuEventElapsedTime");
  sym(api.cuEventDestroy, "cuEventDestroy_v2");
  sym(api.cuGetErrorName, "cuGetErrorName");
  sym(api.cuGetErrorString, "cuGetErrorString");
  if (!missing.empty()) return make_error(ErrorCode::Unavailable, "libcuda.so.1 lacks " + missing + " (driver too old)");
  if (CUresult r = api.cuInit(0); r != 0) {
    Error e = cu_error(api, "cuInit", r);
    e.code = ErrorCode::Unavailable;
    e.message = "the CUDA driver does not initialize (" + e.message + ")";
    return e;
  }
  if (CUresult r = api.cuDriverGetVersion(&api.driver_version); r != 0) return cu_error(api, "cuDriverGetVersion", r);
  return api;
}

Result<std::vector<CudaDevice>> enumerate() {
  TERNJIT_TRY(const DriverApi* api, driver());
  int count = 0;
  if (CUresult r = api->cuDeviceGetCount(&count); r != 0) return cu_error(*api, "cuDeviceGetCount", r);
  if (count <= 0) return make_error(ErrorCode::Unavailable, "the CUDA driver reports no device");
  std::vector<CudaDevice> out;
  for (int i = 0; i < count; ++i) {
    CudaDevice d;
    d.index = i;
    if (CUresult r = api->cuDeviceGet(&d.handle, i); r != 0) return cu_error(*api, "cuDeviceGet", r);
    char name[256] = {};
    if (CUresult r = api->cuDeviceGetName(name, sizeof name - 1, d.handle); r != 0)
      return cu_error(*api, "cuDeviceGetName", r);
    d.name = name;
    std::size_t mem = 0;
    if (CUresult r = api->cuDeviceTotalMem(&mem, d.handle); r != 0) return cu_error(*api, "cuDeviceTotalMem", r);
    d.memory_bytes = mem;
    auto attr = [&](int a, int& v) -> Result<void> {
      if (CUresult r = api->cuDeviceGetAttribute(&v, a, d.handle); r != 0)
        return cu_error(*api, "cuDeviceGetAttribute", r);
      return success();
    };
    TERNJIT_TRY_VOID(attr(kAttrCcMajor, d.cc_major));
    TERNJIT_TRY_VOID(attr(kAttrCcMinor, d.cc_minor));
    TERNJIT_TRY_VOID(attr(kAttrMultiprocessors, d.multiprocessors));
    TERNJIT_TRY_VOID(attr(kAttrWarpSize, d.warp_size));
    TERNJIT_TRY_VOID(attr(kAttrMaxThreadsPerBlock, d.max_threads_per_block));
    TERNJIT_TRY_VOID(attr(kAttrMaxBlockDimX, d.max_block_x));
    TERNJIT_TRY_VOID(attr(kAttrMaxSharedPerBlock, d.max_shared_per_block));
    TERNJIT_TRY_VOID(attr(kAttrMaxSharedOptin, d.max_shared_optin));
    // Deprecated on recent drivers (may read 0): the bandwidth is then unknown.
    (void)attr(kAttrMemoryClockKhz, d.memory_clock_khz);
    (void)attr(kAttrMemoryBusBits, d.memory_bus_bits);
    int integrated = 0;
    if (attr(kAttrIntegrated, integrated).ok()) d.integrated = integrated != 0;
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace

std::string DriverApi::version_text() const {
  return "cuda driver " + std::to_string(driver_version / 1000) + "." + std::to_string(driver_version % 1000 / 10);
}

Result<const DriverApi*> driver() {
  static const Result<DriverApi> api = open_driver();
  if (!api.ok()) return api.error();
  return &api.value();
}

Error cu_error(const DriverApi& api, const char* what, CUresult r) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (api.cuGetErrorName) api.cuGetErrorName(r, &name);
  if (api.cuGetErrorString) api.cuGetErrorString(r, &text);
  // CUDA_ERROR_OUT_OF_MEMORY (2), NO_DEVICE (100), LAUNCH_FAILED (719), the
  // initialization / driver classes (3, 34, 35, 999): the environment, not our code.
  const bool environment = r == 2 || r == 3 || r == 34 || r == 35 || r == 100 || r == 101 || r == 719 || r == 999;
  return make_error(environment ? ErrorCode::Unavailable : ErrorCode::Internal,
                    std::string(what) + ": " + (name ? name : "CUDA error " + std::to_string(r)) +
                        (text ? std::string(" (") + text + ")" : ""));
}

std::string CudaDevice::arch() const { return "sm_" + std::to_string(cc_major) + std::to_string(cc_minor); }

double CudaDevice::dram_gbps() const {
  return 2.0 * static_cast<double>(memory_clock_khz) * 1e3 * static_cast<double>(memory_bus_bits) / 8.0 / 1e9;
}

DeviceDescription CudaDevice::description(const DriverApi& api) const {
  DeviceDescription d;
  d.index = static_cast<std::uint32_t>(index);
  d.name = name;
  d.type = integrated ? "integrated gpu" : "discrete gpu";
  d.driver = api.version_text() + ", " + arch() + ", " + std::to_string(multiprocessors) + " SMs";
  if (dram_gbps() > 0) {
    char bw[32];
    std::snprintf(bw, sizeof bw, ", %.0f GB/s", dram_gbps());
    d.driver += bw;
  }
  d.api = "CUDA " + std::to_string(api.driver_version / 1000) + "." + std::to_string(api.driver_version % 1000 / 10);
  d.memory_bytes = memory_bytes;
  d.subgroup_size = static_cast<std::uint32_t>(warp_size);
  d.int_dot = cc_major * 10 + cc_minor >= 61;  // dp4a since sm_61
  d.int_dot_accelerated = d.int_dot;
  d.limits.max_workgroup_invocations = static_cast<std::uint32_t>(max_threads_per_block);
  d.limits.max_workgroup_size_x = static_cast<std::uint32_t>(max_block_x);
  d.limits.max_shared_bytes = static_cast<std::uint32_t>(max_shared_optin > 0 ? max_shared_optin : max_shared_per_block);
  d.limits.max_buffer_bytes = memory_bytes;
  return d;
}

Result<const std::vector<CudaDevice>*> cuda_devices() {
  static const Result<std::vector<CudaDevice>> all = enumerate();
  if (!all.ok()) return all.error();
  return &all.value();
}

Result<const CudaDevice*> select_cuda_device(const std::string& option) {
  std::size_t index = 0;
  if (!option.empty() && option != "auto") {
    if (option.size() > 4 || option.find_first_not_of("0123456789") != std::string::npos)
      return make_error(ErrorCode::InvalidArgument, "cuda.device='" + option + "': expected auto or a device index");
    index = static_cast<std::size_t>(std::stoi(option));
  }
  TERNJIT_TRY(const std::vector<CudaDevice>* all, cuda_devices());
  if (index >= all->size())
    return make_error(ErrorCode::NotFound, "cuda.device=" + option + ": there are " + std::to_string(all->size()) +
                                               " CUDA devices");
  return &(*all)[index];
}

Result<std::shared_ptr<PrimaryContext>> PrimaryContext::retain(const CudaDevice& device) {
  TERNJIT_TRY(const DriverApi* api, driver());
  CUcontext ctx = nullptr;
  if (CUresult r = api->cuDevicePrimaryCtxRetain(&ctx, device.handle); r != 0)
    return cu_error(*api, "cuDevicePrimaryCtxRetain", r);
  return std::shared_ptr<PrimaryContext>(new PrimaryContext(*api, device, ctx));
}

PrimaryContext::~PrimaryContext() { api_.cuDevicePrimaryCtxRelease(device_.handle); }

Result<std::shared_ptr<void>> PrimaryContext::push() const {
  if (CUresult r = api_.cuCtxPushCurrent(ctx_); r != 0) return cu_error(api_, "cuCtxPushCurrent", r);
  const DriverApi* api = &api_;
  return std::shared_ptr<void>(reinterpret_cast<void*>(1), [api](void*) {
    CUcontext popped = nullptr;
    api->cuCtxPopCurrent(&popped);
  });
}

}  // namespace ternjit::targets::cuda
