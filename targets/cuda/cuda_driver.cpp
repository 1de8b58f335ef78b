// SPDX-License-Identifier: Apache-2.0
// cuda_driver.cpp - dlopen of libcuda.so.1, cuInit, device enumeration and description, primary contexts.
#include "targets/cuda/cuda_driver.h"

#include <dlfcn.h>

#include <cstdio>

#include "targets/simt/driver_library.h"

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
  simt::SymbolTable sym(lib);
  sym.get(api.cuInit, "cuInit");
  sym.get(api.cuDriverGetVersion, "cuDriverGetVersion");
  sym.get(api.cuDeviceGetCount, "cuDeviceGetCount");
  sym.get(api.cuDeviceGet, "cuDeviceGet");
  sym.get(api.cuDeviceGetName, "cuDeviceGetName");
  sym.get(api.cuDeviceTotalMem, "cuDeviceTotalMem_v2");
  sym.get(api.cuDeviceGetAttribute, "cuDeviceGetAttribute");
  sym.get(api.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
  sym.get(api.cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2");
  sym.get(api.cuCtxPushCurrent, "cuCtxPushCurrent_v2");
  sym.get(api.cuCtxPopCurrent, "cuCtxPopCurrent_v2");
  sym.get(api.cuModuleLoadData, "cuModuleLoadData");
  sym.get(api.cuModuleUnload, "cuModuleUnload");
  sym.get(api.cuModuleGetFunction, "cuModuleGetFunction");
  sym.get(api.cuFuncGetAttribute, "cuFuncGetAttribute");
  sym.get(api.cuFuncSetAttribute, "cuFuncSetAttribute");
  sym.get(api.cuLaunchKernel, "cuLaunchKernel");
  sym.get(api.cuMemAlloc, "cuMemAlloc_v2");
  sym.get(api.cuMemFree, "cuMemFree_v2");
  sym.get(api.cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
  sym.get(api.cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2");
  sym.get(api.cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2");
  sym.get(api.cuMemsetD8Async, "cuMemsetD8Async");
  sym.get(api.cuStreamCreate, "cuStreamCreate");
  sym.get(api.cuStreamDestroy, "cuStreamDestroy_v2");
  sym.get(api.cuStreamSynchronize, "cuStreamSynchronize");
  sym.get(api.cuEventCreate, "cuEventCreate");
  sym.get(api.cuEventRecord, "cuEventRecord");
  sym.get(api.cuEventSynchronize, "cuEventSynchronize");
  sym.get(api.cuEventElapsedTime, "cuEventElapsedTime");
  sym.get(api.cuEventDestroy, "cuEventDestroy_v2");
  sym.get(api.cuGetErrorName, "cuGetErrorName");
  sym.get(api.cuGetErrorString, "cuGetErrorString");
  if (!sym.missing().empty())
    return make_error(ErrorCode::Unavailable, "libcuda.so.1 lacks " + sym.missing() + " (driver too old)");
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
  const int shared = max_shared_optin > 0 ? max_shared_optin : max_shared_per_block;
  DeviceDescription d =
      simt::device_description(index, name, memory_bytes, warp_size, max_threads_per_block, max_block_x, shared);
  d.type = integrated ? "integrated gpu" : "discrete gpu";
  d.driver = api.version_text() + ", " + arch() + ", " + std::to_string(multiprocessors) + " SMs";
  if (dram_gbps() > 0) {
    char bw[32];
    std::snprintf(bw, sizeof bw, ", %.0f GB/s", dram_gbps());
    d.driver += bw;
  }
  d.api = "CUDA " + std::to_string(api.driver_version / 1000) + "." + std::to_string(api.driver_version % 1000 / 10);
  d.int_dot = cc_major * 10 + cc_minor >= 61;  // dp4a since sm_61
  d.int_dot_accelerated = d.int_dot;
  return d;
}

Result<const std::vector<CudaDevice>*> cuda_devices() {
  static const Result<std::vector<CudaDevice>> all = enumerate();
  if (!all.ok()) return all.error();
  return &all.value();
}

Result<const CudaDevice*> select_cuda_device(const std::string& option) {
  return simt::select_device<CudaDevice>("cuda", "CUDA", option, cuda_devices);
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
