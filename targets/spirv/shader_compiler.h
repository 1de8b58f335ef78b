// SPDX-License-Identifier: Apache-2.0
// shader_compiler.h - GLSL compute shaders to SPIR-V in-process: glslang, then SPIRV-Tools validate and optimize.
//
// Route (targets/spirv/README.md): the target writes GLSL 4.50 compute shaders, glslang
// (Debian glslang-dev) compiles them to SPIR-V 1.3 for Vulkan 1.1, and SPIRV-Tools
// validates every module, runs its performance recipe and validates the result again.
// Nothing here needs a device. Private to targets/spirv/.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ternjit/result.h"

namespace ternjit::targets::spirv {

/// Compiles one GLSL compute shader to optimized, validated SPIR-V words. Errors
/// (Internal, a generator bug): the GLSL does not compile, or a module fails
/// validation; the compiler's or validator's log and the numbered source are notes.
Result<std::vector<std::uint32_t>> compile_glsl(std::string_view glsl, std::string_view name);

/// Validates SPIR-V words for Vulkan 1.1. Errors (InvalidInput): the validator's message.
Result<void> validate_spirv(std::span<const std::uint32_t> words);

/// The SPIR-V disassembly of `words` (friendly names, one instruction a line).
Result<std::string> disassemble_spirv(std::span<const std::uint32_t> words);

}  // namespace ternjit::targets::spirv
