// SPDX-License-Identifier: Apache-2.0
// shader_compiler.cpp - glslang (GLSL -> SPIR-V) and SPIRV-Tools (validate, performance passes, disassemble).
#include "targets/spirv/shader_compiler.h"

#include <glslang/Public/ResourceLimits.h>
#include <glslang/Public/ShaderLang.h>
#include <glslang/SPIRV/GlslangToSpv.h>

#include <mutex>
#include <spirv-tools/libspirv.hpp>
#include <spirv-tools/optimizer.hpp>

namespace ternjit::targets::spirv {

namespace {

constexpr spv_target_env kEnv = SPV_ENV_VULKAN_1_1;

// glslang keeps process-wide tables: initialized once, never finalized (other threads
// may still compile at exit).
void init_glslang() {
  static std::once_flag once;
  std::call_once(once, [] { glslang::InitializeProcess(); });
}

std::string numbered(std::string_view src) {
  std::string out;
  int line = 1;
  std::size_t pos = 0;
  while (pos <= src.size()) {
    const std::size_t nl = src.find('\n', pos);
    const std::string_view l = src.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    out += std::to_string(line++) + ": " + std::string(l) + "\n";
    if (nl == std::string_view::npos) break;
    pos = nl + 1;
  }
  return out;
}

Error shader_error(std::string message, std::string log, std::string_view glsl) {
  Error e = make_error(ErrorCode::Internal, std::move(message));
  e.diagnostics.push_back(Diagnostic{{}, Severity::Note, std::move(log), {}, {}});
  if (!glsl.empty()) e.diagnostics.push_back(Diagnostic{{}, Severity::Note, "shader source:\n" + numbered(glsl), {}, {}});
  return e;
}

}  // namespace

Result<void> validate_spirv(std::span<const std::uint32_t> words) {
  spvtools::SpirvTools tools(kEnv);
  std::string log;
  tools.SetMessageConsumer([&](spv_message_level_t, const char*, const spv_position_t& pos, const char* message) {
    log += "word " + std::to_string(pos.index) + ": " + message + "\n";
  });
  if (!tools.Validate(words.data(), words.size()))
    return make_error(ErrorCode::InvalidInput, "SPIR-V validation failed: " + (log.empty() ? "no message" : log));
  return success();
}

Result<std::vector<std::uint32_t>> compile_glsl(std::string_view glsl, std::string_view name) {
  init_glslang();
  glslang::TShader shader(EShLangCompute);
  const char* src = glsl.data();
  const int len = static_cast<int>(glsl.size());
  const std::string label(name);
  const char* names = label.c_str();
  shader.setStringsWithLengthsAndNames(&src, &len, &names, 1);
  shader.setEnvInput(glslang::EShSourceGlsl, EShLangCompute, glslang::EShClientVulkan, 100);
  shader.setEnvClient(glslang::EShClientVulkan, glslang::EShTargetVulkan_1_1);
  shader.setEnvTarget(glslang::EShTargetSpv, glslang::EShTargetSpv_1_3);
  const auto messages = static_cast<EShMessages>(EShMsgSpvRules | EShMsgVulkanRules);
  if (!shader.parse(GetDefaultResources(), 450, false, messages))
    return shader_error("glslang rejected the generated shader '" + label + "'",
                        std::string(shader.getInfoLog()) + shader.getInfoDebugLog(), glsl);
  glslang::TProgram program;
  program.addShader(&shader);
  if (!program.link(messages))
    return shader_error("glslang could not link the generated shader '" + label + "'", program.getInfoLog(), glsl);
  std::vector<std::uint32_t> words;
  spv::SpvBuildLogger logger;
  glslang::SpvOptions options;
  options.disableOptimizer = true;  // SPIRV-Tools runs below, with validation around it
  glslang::GlslangToSpv(*program.getIntermediate(EShLangCompute), words, &logger, &options);
  if (words.empty())
    return shader_error("glslang produced no SPIR-V for '" + label + "'", logger.getAllMessages(), glsl);

  if (auto ok = validate_spirv(words); !ok.ok())
    return shader_error("the SPIR-V of '" + label + "' failed validation", ok.error().message, glsl);
  spvtools::Optimizer opt(kEnv);
  std::string log;
  opt.SetMessageConsumer([&](spv_message_level_t level, const char*, const spv_position_t&, const char* message) {
    if (level <= SPV_MSG_ERROR) log += std::string(message) + "\n";
  });
  opt.RegisterPerformancePasses();
  std::vector<std::uint32_t> optimized;
  if (!opt.Run(words.data(), words.size(), &optimized))
    return shader_error("the SPIR-V optimizer failed on '" + label + "'", log, glsl);
  if (auto ok = validate_spirv(optimized); !ok.ok())
    return shader_error("the optimized SPIR-V of '" + label + "' failed validation", ok.error().message, glsl);
  return optimized;
}

Result<std::string> disassemble_spirv(std::span<const std::uint32_t> words) {
  spvtools::SpirvTools tools(kEnv);
  std::string text;
  if (!tools.Disassemble(words.data(), words.size(), &text,
                         SPV_BINARY_TO_TEXT_OPTION_FRIENDLY_NAMES | SPV_BINARY_TO_TEXT_OPTION_INDENT))
    return make_error(ErrorCode::InvalidInput, "the SPIR-V does not disassemble");
  return text;
}

}  // namespace ternjit::targets::spirv
