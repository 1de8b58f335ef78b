// SPDX-License-Identifier: Apache-2.0
// cuda_target.h - the CUDA target: the SIMT generator's CUDA C++ compiled by NVRTC to cubin and PTX, run through the driver API.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "targets/target.h"

namespace ternjit::targets {

/// The "cuda" target (targets/cuda/README.md). Compiling needs NVRTC only; loading and
/// running need libcuda.so.1 and a device.
std::unique_ptr<Target> make_cuda_target();

namespace cuda {

/// The archs the `cuda.arch` option takes.
inline constexpr std::string_view kCudaArchs[] = {"sm_80", "sm_86", "sm_89", "sm_90", "sm_90a"};

/// The arch compiled for when neither the option nor a device says: "sm_90".
inline constexpr std::string_view kDefaultArch = "sm_90";

/// The cache key's toolchain text from the versions: "nvrtc 13.0; cuda driver 12.4"
/// (driver_version 0: "cuda driver none"; nvrtc_major 0: "nvrtc none").
std::string toolchain_text(int nvrtc_major, int nvrtc_minor, int driver_version);

}  // namespace cuda

}  // namespace ternjit::targets
