// SPDX-License-Identifier: Apache-2.0
// compile_cmd.h - `ternjit compile`: show what a target generates for one function.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "targets/registry.h"
#include "ternjit/result.h"
#include "tools/ternjit/flags.h"

namespace CLI {
class App;
}

namespace ternjit::cli {

/// Options of `ternjit compile`.
struct CompileCommandOptions {
  std::string file;                 ///< the .tri or .tir input
  FunctionFlags function;           ///< --layer, --function
  std::vector<std::string> shapes;  ///< "M=1,K=64,N=16" (repeatable)
  TargetFlags target;               ///< --target (default auto), its options, --threads, -O
  std::string emit;                 ///< "ir" (the optimized IR) or a form of the target's emit_forms(); "": its first
  std::string output;               ///< -o: write the emitted form here (companions beside it)
  std::string weights;              ///< weights file (safetensors or GGUF) for forms that bake them in
  std::vector<std::string> name_map;  ///< --map rules renaming the file's tensors (formats/README.md)
  std::uint64_t seed = 1;           ///< random weights when `weights` is empty
};

/// `ternjit compile FILE ...`: specializes the chosen function to static shapes, runs the
/// pipeline for the target, and prints either the optimized IR (--emit ir) or what the
/// target emits in the asked form (Target::emit; default: the target's first form, else
/// ir) to stdout, or to -o FILE (a binary form needs -o). Errors (unknown file, layer,
/// target, option, level, emit form; shapes that leave the function symbolic) are
/// printed to stderr; returns 0 or 1.
int cmd_compile(const CompileCommandOptions& options, const targets::TargetRegistry& registry);

/// Adds the `compile` subcommand to `app` (its help lists the targets and forms of
/// `registry`, which must outlive the parse); when it is parsed its callback runs
/// cmd_compile and ends parsing with its status (end_command).
void add_compile_command(CLI::App& app, const targets::TargetRegistry& registry);

}  // namespace ternjit::cli
