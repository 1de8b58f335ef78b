// SPDX-License-Identifier: Apache-2.0
// compile_cmd.h - `ternjit compile`: show what a target generates for one function.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ternjit/result.h"

namespace CLI {
class App;
}

namespace ternjit::cli {

/// Options of `ternjit compile`.
struct CompileCommandOptions {
  std::string file;                 ///< the .tri or .tir input
  std::string layer;                ///< --layer L: the function "L.<fn>" (exclusive with function)
  std::string fn = "forward";       ///< with --layer: the layer's function
  std::string function;             ///< --function F: a function by its full name
  std::vector<std::string> shapes;  ///< "M=1,K=64,N=16" (repeatable)
  std::string level = "O2";         ///< -O value
  std::string target = "x86";       ///< the code generator
  std::string emit = "asm";         ///< "ir" (the optimized IR) or a form of the target's emit_forms()
  std::string target_options;       ///< "x86.max_isa=avx2;llvm.triple=..." (validated by the targets)
  std::string max_isa;              ///< shorthand for x86.max_isa ("" = the best the host runs)
  std::string triple;               ///< shorthand for llvm.triple
  std::string cpu;                  ///< shorthand for llvm.cpu
  std::string output;               ///< -o: write the emitted form here (companions beside it)
  std::string weights;              ///< weights file (safetensors or GGUF) for forms that bake them in
  std::vector<std::string> name_map;  ///< --map rules renaming the file's tensors (formats/README.md)
  std::uint64_t seed = 1;           ///< random weights when `weights` is empty
  int threads = 1;                  ///< threads the kernels are generated for
};

/// `ternjit compile FILE ...`: specializes the chosen function to static shapes, runs the
/// pipeline for the target, and prints either the optimized IR (--emit ir) or what the
/// target emits in the asked form (Target::emit: x86 asm = per step the op, its IR, the
/// configuration and the disassembly; llvm asm, llvm, obj) to stdout, or to -o FILE (a
/// binary form needs -o). Errors (unknown file, layer, target, option, level, emit form;
/// shapes that leave the function symbolic) are printed to stderr; returns 0 or 1.
int cmd_compile(const CompileCommandOptions& options);

/// Adds the `compile` subcommand to `app`; when it is parsed its callback runs
/// cmd_compile and ends parsing with the exit status (CLI::Success for 0,
/// CLI::RuntimeError otherwise, which CLI11_PARSE turns into main's return value
/// without printing anything more).
void add_compile_command(CLI::App& app);

}  // namespace ternjit::cli
