// SPDX-License-Identifier: Apache-2.0
// compile_cmd.cpp - `ternjit compile`: specialize, optimize for a target, print IR or code.
//
// Each target plugs in through one row of kBackends: how it describes itself to the
// pass pipeline (TargetInfo) and how it renders the code of a specialized function as
// text. The x86 row renders targets::x86::describe_code's steps with the LLVM
// disassembler; a row for another target (llvm, cuda, ...) adds its own two functions.
#include "tools/ternjit/compile_cmd.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <string_view>

#include "formats/safetensors.h"
#include "ir/bind.h"
#include "ir/print.h"
#include "passes/pipeline.h"
#include "passes/specialize_shapes.h"
#include "targets/llvm/llvm_target.h"
#include "targets/x86/isa.h"
#include "targets/x86/x86_target.h"
#include "tools/ternjit/commands.h"
#include "tools/ternjit/disasm.h"

namespace ternjit::cli {

namespace {

// One target `ternjit compile` can show the code of.
struct CompileBackend {
  std::string_view name;
  /// Rejects options this target cannot take (before anything is loaded or compiled).
  Result<void> (*check_options)(const CompileCommandOptions& options);
  /// What the pass pipeline may know about the target.
  passes::TargetInfo (*info)();
  /// The code of `function` of `specialized` (pipeline already run) as text.
  Result<std::string> (*render_asm)(const ir::Module& specialized, const std::string& function,
                                    const CompileCommandOptions& options);
};

Result<void> x86_check_options(const CompileCommandOptions& o) {
  if (!o.max_isa.empty() && !targets::x86::parse_isa(o.max_isa))
    return make_error(ErrorCode::InvalidArgument,
                      "unknown --max-isa '" + o.max_isa + "' (expected avx2, avx_vnni, avx512, avx512_vnni or amx)");
  return {};
}

passes::TargetInfo x86_info() { return targets::make_x86_target()->info(); }

Result<std::string> x86_render_asm(const ir::Module& specialized, const std::string& function,
                                   const CompileCommandOptions& o) {
  std::string isa_cap;
  if (!o.max_isa.empty()) isa_cap = std::string(targets::x86::isa_name(*targets::x86::parse_isa(o.max_isa)));
  TERNJIT_TRY(auto steps, targets::x86::describe_code(specialized, function, isa_cap, o.threads));
  std::string out = "; " + function + " on x86" + (isa_cap.empty() ? "" : " (max isa " + isa_cap + ")") +
                    ", threads " + std::to_string(o.threads) + ", " + std::to_string(steps.size()) + " step" +
                    (steps.size() == 1 ? "" : "s") + "\n";
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const targets::x86::StepCode& s = steps[i];
    out += "\nstep " + std::to_string(i) + ": " + s.op + "\n";
    out += "  ir:     " + s.summary + "\n";
    out += "  config: " + (s.config.empty() ? std::string("-") : s.config) + "\n";
    if (s.blobs.empty()) out += "  (no generated code: run by the reference implementation)\n";
    for (const targets::x86::StepCode::Blob& b : s.blobs) {
      out += "  code \"" + b.label + "\" (" + std::to_string(b.code.size()) + " bytes):\n";
      TERNJIT_TRY(std::string text, disassemble_x86(b.code, 0));
      out += text;
    }
  }
  return out;
}

// ---- llvm: --emit asm prints the host assembly of the module (weights read through the
// entry's const table); --emit llvm|obj and --triple/--cpu/-o take the options below.
Result<void> llvm_check_options(const CompileCommandOptions& o) {
  if (!o.max_isa.empty()) return make_error(ErrorCode::InvalidArgument, "--max-isa is an x86 option");
  return {};
}

passes::TargetInfo llvm_info() { return targets::make_llvm_target()->info(); }

Result<std::string> llvm_render_asm(const ir::Module& specialized, const std::string& function,
                                    const CompileCommandOptions& o) {
  targets::llvmjit::EmitRequest r;
  r.what = targets::llvmjit::EmitWhat::Asm;
  if (auto level = passes::parse_opt_level(o.level)) r.opt = *level;
  TERNJIT_TRY(auto e, targets::llvmjit::emit(specialized, function, r));
  return e.bytes;
}

constexpr CompileBackend kBackends[] = {
    {"x86", &x86_check_options, &x86_info, &x86_render_asm},
    {"llvm", &llvm_check_options, &llvm_info, &llvm_render_asm},
};

// Options only the llvm target takes (kept here, next to its row).
struct LlvmExtras {
  std::string triple;   // --triple (default: host)
  std::string cpu;      // --cpu (default: host CPU, or generic)
  std::string output;   // -o: the object (its header goes next to it, .h)
  std::string weights;  // --weights: safetensors with the parameters (default: random, --seed)
  std::uint64_t seed = 1;
};

const CompileBackend* find_backend(std::string_view name) {
  for (const CompileBackend& b : kBackends)
    if (b.name == name) return &b;
  return nullptr;
}

std::string backend_names() {
  std::string s;
  for (const CompileBackend& b : kBackends) s += (s.empty() ? "" : ", ") + std::string(b.name);
  return s;
}

// The function the options name: --function F, --layer L (L.<fn>), or the only one.
Result<std::string> pick_function(const ir::Module& m, const CompileCommandOptions& o) {
  std::string name = !o.function.empty() ? o.function : !o.layer.empty() ? o.layer + "." + o.fn : std::string();
  if (name.empty() && m.functions().size() == 1) name = m.functions().front().name();
  if (!name.empty() && m.find_function(name)) return name;
  std::string have;
  for (const ir::Function& f : m.functions()) have += (have.empty() ? "" : ", ") + f.name();
  if (name.empty())
    return make_error(ErrorCode::InvalidArgument,
                      o.file + " has several functions: choose one with --layer or --function (it has: " + have + ")");
  return make_error(ErrorCode::NotFound, "no function '" + name + "' in " + o.file + " (it has: " + have + ")");
}

Result<std::string> compile_to_text(const CompileCommandOptions& o, const LlvmExtras& llvm_extras) {
  const CompileBackend* backend = find_backend(o.target);
  if (!backend)
    return make_error(ErrorCode::InvalidArgument,
                      "unknown --target '" + o.target + "' for compile (supported: " + backend_names() + ")");
  const bool llvm = o.target == "llvm";
  if (o.emit != "asm" && o.emit != "ir" && !(llvm && (o.emit == "llvm" || o.emit == "obj")))
    return make_error(ErrorCode::InvalidArgument, "unknown --emit '" + o.emit + "' (expected asm or ir" +
                                                      std::string(llvm ? ", llvm or obj" : "") + ")");
  if (!llvm && (!llvm_extras.triple.empty() || !llvm_extras.cpu.empty() || !llvm_extras.output.empty()))
    return make_error(ErrorCode::InvalidArgument, "--triple, --cpu and -o need --target llvm");
  if (o.emit == "obj" && llvm_extras.output.empty())
    return make_error(ErrorCode::InvalidArgument, "--emit obj needs -o FILE.o");
  if (o.threads < 1)
    return make_error(ErrorCode::InvalidArgument, "--threads must be >= 1, got " + std::to_string(o.threads));
  auto level = passes::parse_opt_level(o.level);
  if (!level)
    return make_error(ErrorCode::InvalidArgument,
                      "unknown optimization level '" + o.level +
                          "' (expected O0..O3, 0..3, none, conservative, balanced or aggressive)");
  TERNJIT_TRY_VOID(backend->check_options(o));

  std::string joined;
  for (const std::string& s : o.shapes) joined += (joined.empty() ? "" : ",") + s;
  TERNJIT_TRY(ir::ShapeBindings shapes, ir::parse_shape_list(joined));
  TERNJIT_TRY(ir::Module m, load_module(o.file));
  TERNJIT_TRY(std::string function, pick_function(m, o));
  TERNJIT_TRY(ir::Module specialized, passes::specialize_function(m, function, shapes.values, /*require_static=*/true));

  passes::PipelineOptions popts;
  popts.target = backend->info();
  TERNJIT_TRY(auto report_unused, passes::run_pipeline(specialized, passes::default_pipeline(*level, popts.target), popts));
  (void)report_unused;
  if (o.emit == "ir") return ir::print_module(specialized);
  if (!llvm || (o.emit == "asm" && llvm_extras.triple.empty() && llvm_extras.cpu.empty()))
    return backend->render_asm(specialized, function, o);

  // llvm --emit llvm|obj (or asm for another triple/cpu): the weights are baked in.
  std::optional<formats::StFile> weights;
  if (!llvm_extras.weights.empty()) {
    TERNJIT_TRY(weights, formats::read_safetensors(llvm_extras.weights));
  }
  formats::PrepareOptions prep;
  prep.seed = llvm_extras.seed;
  TERNJIT_TRY(formats::RunInputs run, formats::prepare_run(m, *m.find_function(function), nullptr, weights ? &*weights : nullptr,
                                                 shapes, prep));
  targets::llvmjit::EmitRequest r;
  r.triple = llvm_extras.triple;
  r.cpu = llvm_extras.cpu;
  r.opt = *level;
  r.params = &run.params;
  r.what = o.emit == "llvm" ? targets::llvmjit::EmitWhat::LlvmIr
           : o.emit == "asm" ? targets::llvmjit::EmitWhat::Asm
                             : targets::llvmjit::EmitWhat::Object;
  TERNJIT_TRY(auto e, targets::llvmjit::emit(specialized, function, r));
  if (o.emit != "obj") return e.bytes;
  std::string header = llvm_extras.output;
  const auto dot = header.rfind('.');
  header = (dot != std::string::npos && header.find('/', dot) == std::string::npos ? header.substr(0, dot) : header) + ".h";
  for (const auto& [path, bytes] : {std::pair<std::string, const std::string*>{llvm_extras.output, &e.bytes},
                                    std::pair<std::string, const std::string*>{header, &e.header}}) {
    std::ofstream f(path, std::ios::binary);
    f.write(bytes->data(), static_cast<std::streamsize>(bytes->size()));
    if (!f) return make_error(ErrorCode::IoError, "cannot write " + path);
  }
  return "wrote " + llvm_extras.output + " and " + header + ": entry " + e.symbol + " (" +
         (weights ? "weights from " + llvm_extras.weights : "random weights, seed " + std::to_string(llvm_extras.seed)) +
         ")\n";
}

int cmd_compile_with(const CompileCommandOptions& options, const LlvmExtras& extras) {
  auto text = compile_to_text(options, extras);
  if (!text.ok()) return report(text.error());
  std::fputs(text->c_str(), stdout);
  std::fflush(stdout);
  return 0;
}

}  // namespace

int cmd_compile(const CompileCommandOptions& options) { return cmd_compile_with(options, LlvmExtras{}); }

void add_compile_command(CLI::App& app) {
  // The options live as long as the callback that reads them (owned by the subcommand).
  auto o = std::make_shared<CompileCommandOptions>();
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
  cmd->add_option("--target", o->target, "code generator: x86 (default) or llvm");
  cmd->add_option("--emit", o->emit, "asm (default): per-step config and disassembly; ir: the optimized IR; "
                                      "llvm target also: llvm (LLVM IR), obj (object + C header, needs -o)");
  cmd->add_option("--max-isa", o->max_isa,
                  "x86: highest ISA to generate code for: avx2, avx_vnni, avx512, avx512_vnni or amx "
                  "(default: the best the host runs; code for others is generated, never run)");
  cmd->add_option("--threads", o->threads, "threads the kernels are configured for (default 1)");
  auto llvm = std::make_shared<LlvmExtras>();
  cmd->add_option("--triple", llvm->triple, "llvm: target triple, e.g. aarch64-linux-gnu (default: the host)");
  cmd->add_option("--cpu", llvm->cpu, "llvm: target CPU, e.g. neoverse-n1 (default: host CPU or generic)");
  cmd->add_option("-o,--output", llvm->output, "llvm --emit obj: the object file; the C header is written beside it");
  cmd->add_option("--weights", llvm->weights, "llvm --emit obj|llvm: safetensors with the weights to bake in");
  cmd->add_option("--seed", llvm->seed, "llvm: seed of the random weights when --weights is not given (default 1)");
  cmd->callback([o, llvm] {
    int rc = cmd_compile_with(*o, *llvm);
    if (rc == 0) throw CLI::Success();
    throw CLI::RuntimeError(rc);
  });
}

}  // namespace ternjit::cli
