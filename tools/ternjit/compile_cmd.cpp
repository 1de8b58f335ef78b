// SPDX-License-Identifier: Apache-2.0
// compile_cmd.cpp - `ternjit compile`: specialize, optimize for a target, print the IR or what the target emits.
//
// Nothing here knows a target: the forms come from Target::emit_forms, the code from
// Target::emit, the options from Target::parse_options (--max-isa, --triple and --cpu are
// shorthands for x86.max_isa, llvm.triple and llvm.cpu).
#include "tools/ternjit/compile_cmd.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <string_view>

#include "formats/run_inputs.h"
#include "formats/safetensors.h"
#include "ir/bind.h"
#include "ir/print.h"
#include "passes/pipeline.h"
#include "passes/specialize_shapes.h"
#include "targets/registry.h"
#include "tools/ternjit/commands.h"

namespace ternjit::cli {

namespace {

// Writes `bytes` to `path` (binary).
Result<void> write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f) return make_error(ErrorCode::IoError, "cannot write " + path);
  return success();
}

// `path` without its extension, then `suffix` ("l.o" + ".h" -> "l.h").
std::string companion_path(const std::string& path, const std::string& suffix) {
  const auto dot = path.rfind('.');
  const bool has_ext = dot != std::string::npos && path.find('/', dot) == std::string::npos;
  return (has_ext ? path.substr(0, dot) : path) + suffix;
}

Result<std::string> compile_to_text(const CompileCommandOptions& o) {
  const targets::TargetRegistry registry = targets::TargetRegistry::create();
  const targets::Target* target = registry.lookup(o.target);
  if (!target)
    return make_error(ErrorCode::InvalidArgument,
                      "unknown --target '" + o.target + "' for compile (known: " + registry.names() + ")");
  const std::vector<std::string_view> forms = target->emit_forms();
  std::string form_list = "ir";
  for (std::string_view f : forms) form_list += ", " + std::string(f);
  if (o.emit != "ir" && std::find(forms.begin(), forms.end(), o.emit) == forms.end())
    return make_error(ErrorCode::InvalidArgument, "unknown --emit '" + o.emit + "' for target '" + o.target +
                                                      "' (it emits: " + form_list + ")");
  if (o.threads < 1)
    return make_error(ErrorCode::InvalidArgument, "--threads must be >= 1, got " + std::to_string(o.threads));
  auto level = passes::parse_opt_level(o.level);
  if (!level)
    return make_error(ErrorCode::InvalidArgument,
                      "unknown optimization level '" + o.level +
                          "' (expected O0..O3, 0..3, none, conservative, balanced or aggressive)");
  targets::CompileOptions copts;
  copts.opt_level = *level;
  copts.threads = o.threads;
  copts.tuning = targets::TuningMode::Off;
  TERNJIT_TRY(copts.target, command_target_options(*target, o.target_options, o.max_isa, o.triple, o.cpu));

  if (!o.name_map.empty() && o.weights.empty())
    return make_error(ErrorCode::InvalidArgument, "--map needs --weights");
  TERNJIT_TRY(ir::Module m, load_module(o.file));
  TERNJIT_TRY(ir::ShapeBindings shapes, shape_flags(m, o.shapes));
  TERNJIT_TRY(std::string function, pick_function(m, o.file, o.layer, o.fn, o.function));
  TERNJIT_TRY(ir::Module specialized, passes::specialize_function(m, function, shapes.values, /*require_static=*/true));
  TERNJIT_TRY_VOID(passes::check_tensor_bytes(specialized, function));  // before prepare_run allocates

  TERNJIT_TRY(auto report_unused,
              passes::run_pipeline(specialized, passes::default_pipeline(*level), passes::PipelineOptions{}));
  (void)report_unused;
  targets::Emitted e;
  if (o.emit == "ir") {
    e.text = ir::print_module(specialized);
  } else {
    // Weights for forms that bake them in: from --weights (safetensors or GGUF, every
    // parameter in it), else random from --seed.
    std::optional<formats::WeightFile> weights;
    if (!o.weights.empty()) {
      TERNJIT_TRY(formats::NameMap names, formats::NameMap::parse(o.name_map));
      TERNJIT_TRY(weights, formats::WeightFile::open(o.weights, names));
    }
    formats::PrepareOptions prep;
    prep.seed = o.seed;
    prep.random_missing_params = !weights.has_value();
    TERNJIT_TRY(formats::RunInputs run, formats::prepare_run(m, *m.find_function(function), nullptr,
                                                   weights ? &*weights : nullptr, shapes, prep));
    TERNJIT_TRY(e, target->emit(specialized, function, o.emit, copts, &run.params));
  }
  if (o.output.empty()) {
    if (e.binary)
      return make_error(ErrorCode::InvalidArgument, "--emit " + o.emit + " is binary: give -o FILE");
    return e.text;
  }
  TERNJIT_TRY_VOID(write_file(o.output, e.text));
  std::string written = o.output;
  for (const auto& [suffix, text] : e.companions) {
    const std::string path = companion_path(o.output, suffix);
    TERNJIT_TRY_VOID(write_file(path, text));
    written += " and " + path;
  }
  return "wrote " + written + " (" + o.target + " --emit " + o.emit + ", " +
         (o.weights.empty() ? "random weights, seed " + std::to_string(o.seed) : "weights from " + o.weights) + ")\n";
}

}  // namespace

int cmd_compile(const CompileCommandOptions& options) {
  auto text = compile_to_text(options);
  if (!text.ok()) return report(text.error());
  std::fputs(text->c_str(), stdout);
  std::fflush(stdout);
  return 0;
}

void add_compile_command(CLI::App& app) {
  // The options live as long as the callback that reads them (owned by the subcommand).
  auto o = std::make_shared<CompileCommandOptions>();
  // Flag > variable > default: the variables give the defaults the flags override.
  apply_env_defaults(o->target, o->target_options, o->max_isa, o->level);
  auto* cmd = app.add_subcommand("compile", "show the optimized IR or the generated code of one function");
  cmd->add_option("file", o->file, "the .tri or .tir file")->required();
  auto* layer = cmd->add_option("--layer", o->layer, "the layer whose function to compile (LAYER.forward)");
  cmd->add_option("--fn", o->fn, "with --layer: the layer's function (default forward)");
  auto* function = cmd->add_option("--function", o->function, "a function by its full name, e.g. BitLinear.forward");
  layer->excludes(function);
  cmd->add_option("--shape", o->shapes, "symbol values, e.g. M=1,K=64,N=16 (repeatable); all must end up bound")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("-O,--opt-level", o->level, "pipeline level: O0..O3 (default O2)");
  cmd->add_option("--target", o->target,
                  "code generator: x86 (default), llvm, spirv, cuda, hip, reference (cuda and hip compile without a GPU)");
  cmd->add_option("--emit", o->emit, "ir: the optimized IR; else a form the target emits - x86: asm (per-step "
                                      "config and disassembly); llvm: asm, llvm (LLVM IR), obj (object + C header, "
                                      "needs -o); spirv: spirv (SPIR-V disassembly), glsl (shader source); cuda: cuda (CUDA C++ and "
                                      "the launch plan), ptx, cubin (needs -o); hip: hip (HIP C++), hsaco (code object, "
                                      "needs -o)");
  cmd->add_option("--target-options", o->target_options,
                  "the target's options, TARGET.NAME=VALUE;... (x86.max_isa=avx2, llvm.triple=..., llvm.cpu=..., "
                  "spirv.device=..., spirv.int_dot=on|off, cuda.arch=sm_80|sm_86|sm_89|sm_90|sm_90a, cuda.device=N, "
                  "hip.offload_arch=gfx90a,gfx1030,..., hip.device=N)");
  cmd->add_option("--max-isa", o->max_isa,
                  "x86.max_isa: highest ISA to generate code for: avx2, avx_vnni, avx512, avx512_vnni or amx "
                  "(default: the best the host runs; code for others is generated, never run)");
  cmd->add_option("--threads", o->threads, "threads the kernels are configured for (default 1)");
  cmd->add_option("--triple", o->triple, "llvm.triple: target triple, e.g. aarch64-linux-gnu (default: the host)");
  cmd->add_option("--cpu", o->cpu, "llvm.cpu: target CPU, e.g. neoverse-n1 (default: host CPU or generic)");
  cmd->add_option("-o,--output", o->output, "write the emitted form to this file (companions, e.g. the C header "
                                             "of an object, beside it); needed for binary forms");
  cmd->add_option("--weights", o->weights,
                  "weights file (safetensors, GGUF or a Hugging Face BitNet checkpoint, by content) for forms that "
                  "bake them in (llvm obj); every parameter must be in it");
  cmd->add_option("--map", o->name_map, "rename the weights file's tensors, PATTERN=TARGET (repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--seed", o->seed, "seed of the random weights when --weights is not given (default 1)");
  cmd->callback([o] {
    int rc = cmd_compile(*o);
    if (rc == 0) throw CLI::Success();
    throw CLI::RuntimeError(rc);
  });
}

}  // namespace ternjit::cli
