// SPDX-License-Identifier: Apache-2.0
// compile_cmd.cpp - `ternjit compile`: specialize, optimize for a target, print the IR or what the target emits.
//
// Nothing here knows a target: the targets and forms come from the registry and
// Target::emit_forms, the code from Target::emit, the options from Target::parse_options
// (the alias flags from the registry's option aliases).
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

Result<std::string> compile_to_text(const CompileCommandOptions& o, const targets::TargetRegistry& registry) {
  TERNJIT_TRY(CommandTarget chosen, command_target(o.target, registry));
  const targets::Target* target = chosen.target;
  const std::string target_name(target->name());
  const std::vector<std::string_view> forms = target->emit_forms();
  // The default form: the target's first, else the IR (the reference target emits none).
  const std::string emit = !o.emit.empty() ? o.emit : forms.empty() ? "ir" : std::string(forms.front());
  std::string form_list = "ir";
  for (std::string_view f : forms) form_list += ", " + std::string(f);
  if (emit != "ir" && std::find(forms.begin(), forms.end(), emit) == forms.end())
    return make_error(ErrorCode::InvalidArgument, "unknown --emit '" + emit + "' for target '" + target_name +
                                                      "' (it emits: " + form_list + ")");
  targets::CompileOptions copts = chosen.compile;
  copts.tuning = targets::TuningMode::Off;
  const passes::OptLevel level = copts.opt_level;

  if (!o.name_map.empty() && o.weights.empty())
    return make_error(ErrorCode::InvalidArgument, "--map needs --weights");
  TERNJIT_TRY(ir::Module m, load_module(o.file));
  TERNJIT_TRY(ir::ShapeBindings shapes, shape_flags(m, o.shapes));
  TERNJIT_TRY(std::string function, pick_function(m, o.file, o.function));
  TERNJIT_TRY(ir::Module specialized, passes::specialize_function(m, function, shapes.values, /*require_static=*/true));
  TERNJIT_TRY_VOID(passes::check_tensor_bytes(specialized, function));  // before prepare_run allocates

  TERNJIT_TRY(auto report_unused,
              passes::run_pipeline(specialized, passes::default_pipeline(level), passes::PipelineOptions{}));
  (void)report_unused;
  targets::Emitted e;
  if (emit == "ir") {
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
    TERNJIT_TRY(e, target->emit(specialized, function, emit, copts, &run.params));
  }
  if (o.output.empty()) {
    if (e.binary)
      return make_error(ErrorCode::InvalidArgument, "--emit " + emit + " is binary: give -o FILE");
    return e.text;
  }
  TERNJIT_TRY_VOID(write_file(o.output, e.text));
  std::string written = o.output;
  for (const auto& [suffix, text] : e.companions) {
    const std::string path = companion_path(o.output, suffix);
    TERNJIT_TRY_VOID(write_file(path, text));
    written += " and " + path;
  }
  return "wrote " + written + " (" + target_name + " --emit " + emit + ", " +
         (o.weights.empty() ? "random weights, seed " + std::to_string(o.seed) : "weights from " + o.weights) + ")\n";
}

}  // namespace

int cmd_compile(const CompileCommandOptions& options, const targets::TargetRegistry& registry) {
  auto text = compile_to_text(options, registry);
  if (!text.ok()) return report(text.error());
  std::fputs(text->c_str(), stdout);
  std::fflush(stdout);
  return 0;
}

void add_compile_command(CLI::App& app, const targets::TargetRegistry& registry) {
  // The options live as long as the callback that reads them (owned by the subcommand).
  auto o = std::make_shared<CompileCommandOptions>();
  auto* cmd = app.add_subcommand("compile", "show the optimized IR or the generated code of one function");
  cmd->add_option("file", o->file, "the .tri or .tir file")->required();
  add_function_flags(*cmd, o->function, "to compile");
  cmd->add_option("--shape", o->shapes, "symbol values, e.g. M=1,K=64,N=16 (repeatable); all must end up bound")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  add_target_flags(*cmd, o->target, registry, "the code generator (cuda and hip compile without a GPU)");
  // The forms of every target, from the registry.
  std::string forms;
  for (const auto& t : registry.all()) {
    std::string list;
    for (std::string_view f : t->emit_forms()) list += (list.empty() ? "" : ", ") + std::string(f);
    forms += "; " + std::string(t->name()) + ": " + (list.empty() ? "-" : list);
  }
  cmd->add_option("--emit", o->emit,
                  "ir: the optimized IR; else a form the target emits (default: its first; binary forms need -o)" +
                      forms);
  cmd->add_option("-o,--output", o->output, "write the emitted form to this file (companions, e.g. the C header "
                                             "of an object, beside it); needed for binary forms");
  cmd->add_option("--weights", o->weights,
                  "weights file (safetensors, GGUF or a Hugging Face BitNet checkpoint, by content) for forms that "
                  "bake them in (llvm obj); every parameter must be in it");
  cmd->add_option("--map", o->name_map, "rename the weights file's tensors, PATTERN=TARGET (repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--seed", o->seed, "seed of the random weights when --weights is not given (default 1)");
  cmd->callback([o, &registry] { end_command(cmd_compile(*o, registry)); });
}

}  // namespace ternjit::cli
