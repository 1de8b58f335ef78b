// SPDX-License-Identifier: Apache-2.0
// hip_api.h - hiprtc and the HIP runtime of ROCm 5 (libamdhip64.so.5) opened with dlopen: code objects, devices, memory, launches.
//
// Nothing is linked: hiprtc()/runtime() open the library once per process. ROCm 5.2
// (Debian's libamdhip64-dev) keeps hiprtc inside libamdhip64.so.5; a libhiprtc.so
// (later ROCm) is tried first. hiprtc of ROCm 5.2 aborts the whole process for an
// offload arch its device libraries do not know, so compile_hip() refuses anything but
// kSupportedArchs before calling it. The runtime entry points and the device-property
// layout are those of the ROCm 5 ABI (libamdhip64.so.5); other ABIs are reported as
// unavailable rather than misread. Private to targets/hip/.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "targets/target.h"
#include "ternjit/result.h"

namespace ternjit::targets::hip {

/// The offload archs compile_hip() accepts: those ROCm 5.2's hiprtc was seen to compile
/// (targets/hip/README.md); any other is refused before hiprtc is called.
inline constexpr std::array<std::string_view, 4> kSupportedArchs = {"gfx90a", "gfx908", "gfx900", "gfx1030"};

/// Success when `arch` is in kSupportedArchs; else InvalidArgument listing them.
Result<void> check_offload_arch(std::string_view arch);

/// What hiprtc produced: one code object per arch.
struct HipOutput {
  std::vector<std::uint8_t> code;  ///< the code object (an AMDGPU ELF)
  std::string log;
  double compile_ms = 0;
};

/// hiprtc's library and version ("hiprtc 9.0, libamdhip64.so.5"). Errors: Unavailable.
Result<std::string> hiprtc_version();

/// Compiles `source` for `arch` (checked by check_offload_arch first). Errors:
/// InvalidArgument for an arch outside the list, Unavailable without hiprtc, Internal
/// for a compile failure (the log and the numbered source as notes).
Result<HipOutput> compile_hip(std::string_view source, std::string_view name, std::string_view arch);

/// Checks that `code` is a 64-bit little-endian ELF for AMDGPU (e_machine 224) whose
/// section header table lies inside it. Errors (InvalidInput) say what is wrong.
Result<void> check_code_object(const std::vector<std::uint8_t>& code);

/// Resource use of one kernel as its code object's AMDGPU metadata note records it.
struct KernelUsage {
  std::string name;
  std::int64_t vgprs = -1, sgprs = -1, agprs = -1;
  std::int64_t vgpr_spills = -1, sgpr_spills = -1;
  std::int64_t scratch_bytes = -1;  ///< .private_segment_fixed_size (per work-item)
};

/// The "amdhsa.kernels" entries of `code`'s NT_AMDGPU_METADATA note (msgpack, code
/// object v3+). Every length is checked. Errors (InvalidInput): not an AMDGPU ELF, no
/// metadata note, or a note that does not decode.
Result<std::vector<KernelUsage>> code_object_usage(const std::vector<std::uint8_t>& code);

using HipDeviceptr = void*;
using HipModule = struct HipModuleOpaque*;
using HipFunction = struct HipFunctionOpaque*;
using HipStream = struct HipStreamOpaque*;

/// The runtime entry points the target calls (ROCm 5 ABI).
struct RuntimeApi {
  int (*hipInit)(unsigned) = nullptr;
  int (*hipDriverGetVersion)(int*) = nullptr;
  int (*hipGetDeviceCount)(int*) = nullptr;
  int (*hipGetDeviceProperties)(void*, int) = nullptr;
  int (*hipDeviceGetAttribute)(int*, int, int) = nullptr;
  int (*hipSetDevice)(int) = nullptr;
  int (*hipModuleLoadData)(HipModule*, const void*) = nullptr;
  int (*hipModuleUnload)(HipModule) = nullptr;
  int (*hipModuleGetFunction)(HipFunction*, HipModule, const char*) = nullptr;
  int (*hipModuleLaunchKernel)(HipFunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                               HipStream, void**, void**) = nullptr;
  int (*hipMalloc)(void**, std::size_t) = nullptr;
  int (*hipFree)(void*) = nullptr;
  int (*hipMemcpyHtoDAsync)(HipDeviceptr, void*, std::size_t, HipStream) = nullptr;
  int (*hipMemcpyDtoHAsync)(void*, HipDeviceptr, std::size_t, HipStream) = nullptr;
  int (*hipMemcpyDtoDAsync)(HipDeviceptr, HipDeviceptr, std::size_t, HipStream) = nullptr;
  int (*hipMemsetAsync)(void*, int, std::size_t, HipStream) = nullptr;
  int (*hipStreamCreate)(HipStream*) = nullptr;
  int (*hipStreamDestroy)(HipStream) = nullptr;
  int (*hipStreamSynchronize)(HipStream) = nullptr;
  const char* (*hipGetErrorName)(int) = nullptr;
  const char* (*hipGetErrorString)(int) = nullptr;
  int driver_version = 0;
  std::string path;
  /// "hip runtime 5.2.21153" (a cache-key field).
  [[nodiscard]] std::string version_text() const;
};

/// The HIP runtime, opened once per process. Errors: Unavailable (no library, another ABI).
Result<const RuntimeApi*> runtime();

/// "what: hipErrorName (text)"; out of memory / no device are Unavailable, the rest Internal.
Error hip_error(const RuntimeApi& api, const char* what, int r);

/// One AMD GPU as the runtime describes it.
struct HipDevice {
  int index = 0;
  std::string name;
  std::string arch;  ///< "gfx90a" (the gcnArchName without its ":sramecc+:xnack-" features)
  std::string arch_full;
  std::uint64_t memory_bytes = 0;
  int compute_units = 0, warp_size = 64, max_threads_per_block = 0, max_block_x = 0, max_shared_per_block = 0;
  int memory_clock_khz = 0, memory_bus_bits = 0;
  [[nodiscard]] DeviceDescription description(const RuntimeApi& api) const;
};

/// Every HIP device. Errors: as runtime(), and Unavailable for none (hipErrorNoDevice).
Result<const std::vector<HipDevice>*> hip_devices();

/// The device `option` names ("" / "auto": 0; an index). Errors as cuda's.
Result<const HipDevice*> select_hip_device(const std::string& option);

}  // namespace ternjit::targets::hip
