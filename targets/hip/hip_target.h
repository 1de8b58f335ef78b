// SPDX-License-Identifier: Apache-2.0
// hip_target.h - the HIP target: the SIMT generator's HIP C++ compiled by hiprtc to AMDGPU code objects, run through the HIP runtime.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "targets/target.h"
#include "ternjit/result.h"

namespace ternjit::targets {

/// The "hip" target (targets/hip/README.md). Compiling needs hiprtc only; loading and
/// running need the HIP runtime and an AMD GPU.
std::unique_ptr<Target> make_hip_target();

namespace hip {

/// The offload arch compiled for when neither the option nor a device says: "gfx90a".
inline constexpr std::string_view kDefaultArch = "gfx90a";

/// The archs of a `hip.offload_arch` value ("gfx90a,gfx1030"), each checked against
/// kSupportedArchs, without repeats. Errors: InvalidArgument naming the first bad one.
Result<std::vector<std::string>> parse_offload_archs(std::string_view list);

/// The wavefront width the generator writes for `arch`: 32 on RDNA (gfx10, gfx11), else 64.
std::uint32_t wave_size(std::string_view arch);

}  // namespace hip

}  // namespace ternjit::targets
