// SPDX-License-Identifier: Apache-2.0
// spirv_target.h - the SPIR-V target: Vulkan compute shaders (GLSL -> glslang -> SPIRV-Tools), run through a dlopen'ed loader.
#pragma once

#include <memory>

#include "targets/target.h"
#include "ternjit/result.h"

namespace ternjit::targets {

/// The SPIR-V target ("spirv"): every kernel op as a Vulkan compute shader, validated
/// and optimized by SPIRV-Tools; artifacts are of kind "spirv-modules" (the modules, with
/// the optimized IR in metadata "ir"). Options: `device` (auto, an index or part of a
/// name) and `int_dot` (auto, on, off: OpSDot or scalar multiply-adds). Emits "spirv"
/// (disassembly) and "glsl". targets/spirv/README.md has the details.
std::unique_ptr<Target> make_spirv_target();

}  // namespace ternjit::targets

namespace ternjit::targets::spirv {

/// A kernel the framework launch path can record (the C ABI's ternjit_vulkan_launch):
/// records `state`'s steps (a LoadedKernel::state of this target) into `command_buffer`
/// on the caller's `buffers` (VkBuffer handles: inputs then outputs) and returns without
/// submitting or waiting. Errors: InvalidArgument for a null handle or a state of
/// another target (`isa` of its LoadedKernel must start with "vulkan").
Result<void> record_launch(const void* state, void* command_buffer, void* const* buffers);

/// The device time of the last host-copy run of `state` in nanoseconds (timestamp
/// queries), 0 when unknown. For benches.
double last_device_ns(const void* state);

}  // namespace ternjit::targets::spirv
