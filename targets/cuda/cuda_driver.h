// SPDX-License-Identifier: Apache-2.0
// cuda_driver.h - the CUDA driver API opened with dlopen (libcuda.so.1): devices, primary contexts, modules, memory, launches.
//
// libcuda is never linked (the toolkit's link stub would make a binary that cannot
// start without a driver). driver() opens it once per process and calls cuInit; a
// missing library, a failing cuInit or no device is an Unavailable error saying which.
// The handle types are declared here (cuda.h is not needed to build). Private to
// targets/cuda/.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "targets/target.h"
#include "ternjit/result.h"

namespace ternjit::targets::cuda {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using CUstream = struct CUstream_st*;
using CUevent = struct CUevent_st*;

/// The driver entry points the target calls (cuda.h's _v2 ABI where there is one).
struct DriverApi {
  CUresult (*cuInit)(unsigned) = nullptr;
  CUresult (*cuDriverGetVersion)(int*) = nullptr;
  CUresult (*cuDeviceGetCount)(int*) = nullptr;
  CUresult (*cuDeviceGet)(CUdevice*, int) = nullptr;
  CUresult (*cuDeviceGetName)(char*, int, CUdevice) = nullptr;
  CUresult (*cuDeviceTotalMem)(std::size_t*, CUdevice) = nullptr;
  CUresult (*cuDeviceGetAttribute)(int*, int, CUdevice) = nullptr;
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice) = nullptr;
  CUresult (*cuCtxPushCurrent)(CUcontext) = nullptr;
  CUresult (*cuCtxPopCurrent)(CUcontext*) = nullptr;
  CUresult (*cuModuleLoadData)(CUmodule*, const void*) = nullptr;
  CUresult (*cuModuleUnload)(CUmodule) = nullptr;
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*cuFuncGetAttribute)(int*, int, CUfunction) = nullptr;
  CUresult (*cuFuncSetAttribute)(CUfunction, int, int) = nullptr;
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             CUstream, void**, void**) = nullptr;
  CUresult (*cuMemAlloc)(CUdeviceptr*, std::size_t) = nullptr;
  CUresult (*cuMemFree)(CUdeviceptr) = nullptr;
  CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void*, std::size_t, CUstream) = nullptr;
  CUresult (*cuMemcpyDtoHAsync)(void*, CUdeviceptr, std::size_t, CUstream) = nullptr;
  CUresult (*cuMemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, std::size_t, CUstream) = nullptr;
  CUresult (*cuMemsetD8Async)(CUdeviceptr, unsigned char, std::size_t, CUstream) = nullptr;
  CUresult (*cuStreamCreate)(CUstream*, unsigned) = nullptr;
  CUresult (*cuStreamDestroy)(CUstream) = nullptr;
  CUresult (*cuStreamSynchronize)(CUstream) = nullptr;
  CUresult (*cuEventCreate)(CUevent*, unsigned) = nullptr;
  CUresult (*cuEventRecord)(CUevent, CUstream) = nullptr;
  CUresult (*cuEventSynchronize)(CUevent) = nullptr;
  CUresult (*cuEventElapsedTime)(float*, CUevent, CUevent) = nullptr;
  CUresult (*cuEventDestroy)(CUevent) = nullptr;
  CUresult (*cuGetErrorName)(CUresult, const char**) = nullptr;
  CUresult (*cuGetErrorString)(CUresult, const char**) = nullptr;
  int driver_version = 0;  ///< cuDriverGetVersion: 13000 for CUDA 13.0
  std::string path;        ///< the library dlopen found
  /// "cuda driver 13.0" (a cache-key field).
  [[nodiscard]] std::string version_text() const;
};

/// Device attributes (cuda.h CUdevice_attribute / CUfunction_attribute values).
inline constexpr int kAttrMaxThreadsPerBlock = 1, kAttrMaxBlockDimX = 2, kAttrMaxSharedPerBlock = 8,
                     kAttrWarpSize = 10, kAttrMultiprocessors = 16, kAttrIntegrated = 18, kAttrMemoryClockKhz = 36,
                     kAttrMemoryBusBits = 37, kAttrCcMajor = 75, kAttrCcMinor = 76, kAttrMaxSharedOptin = 97;
inline constexpr int kFuncAttrSharedBytes = 1, kFuncAttrLocalBytes = 3, kFuncAttrNumRegs = 4,
                     kFuncAttrMaxDynamicShared = 8;
inline constexpr unsigned kStreamNonBlocking = 1;

/// The driver, opened and initialized once per process. Errors: Unavailable (no
/// libcuda.so.1, cuInit failed: the reason names the CUresult).
Result<const DriverApi*> driver();

/// An Error for a failed driver call: "what: CUDA_ERROR_NAME (text)"; out-of-memory and
/// device-lost class errors are Unavailable, the rest Internal.
Error cu_error(const DriverApi& api, const char* what, CUresult r);

/// One CUDA device as the driver describes it.
struct CudaDevice {
  int index = 0;
  CUdevice handle = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0;
  std::uint64_t memory_bytes = 0;
  int multiprocessors = 0, warp_size = 32, max_threads_per_block = 0, max_block_x = 0;
  int max_shared_per_block = 0, max_shared_optin = 0;
  int memory_clock_khz = 0, memory_bus_bits = 0;
  bool integrated = false;  ///< an integrated GPU sharing host memory (Jetson)
  /// "sm_90" for compute capability 9.0.
  [[nodiscard]] std::string arch() const;
  /// The theoretical DRAM bandwidth in GB/s (2 x clock x bus width; 0 when unknown).
  [[nodiscard]] double dram_gbps() const;
  /// As `ternjit info` lists it.
  [[nodiscard]] DeviceDescription description(const DriverApi& api) const;
};

/// Every CUDA device, in driver order. Errors: as driver(), and Unavailable for zero devices.
Result<const std::vector<CudaDevice>*> cuda_devices();

/// The device `option` names ("" or "auto": device 0; an index). Errors: InvalidArgument
/// for text that is not an index, NotFound for an index past the devices, as cuda_devices().
Result<const CudaDevice*> select_cuda_device(const std::string& option);

/// The primary context of one device, retained for the object's lifetime.
class PrimaryContext {
 public:
  static Result<std::shared_ptr<PrimaryContext>> retain(const CudaDevice& device);
  ~PrimaryContext();
  PrimaryContext(const PrimaryContext&) = delete;
  PrimaryContext& operator=(const PrimaryContext&) = delete;
  [[nodiscard]] CUcontext handle() const { return ctx_; }
  [[nodiscard]] const CudaDevice& device() const { return device_; }
  /// Makes the context current on this thread until the returned guard dies.
  [[nodiscard]] Result<std::shared_ptr<void>> push() const;

 private:
  PrimaryContext(const DriverApi& api, CudaDevice d, CUcontext c) : api_(api), device_(std::move(d)), ctx_(c) {}
  const DriverApi& api_;
  CudaDevice device_;
  CUcontext ctx_ = nullptr;
};

}  // namespace ternjit::targets::cuda
