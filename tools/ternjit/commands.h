// SPDX-License-Identifier: Apache-2.0
// commands.h - the subcommands of the `ternjit` CLI, each callable alone.
#pragma once

#include <cstdint>
#include <string>

#include "ir/ir.h"

namespace ternjit::cli {

/// Options of `ternjit run`.
struct RunOptions {
  std::string file;
  std::string layer;
  std::string fn = "forward";
  std::string shapes;       ///< "M=4,K=64"
  std::string target = "reference";
  std::string weights;      ///< safetensors path or empty
  std::string input;        ///< safetensors path or empty
  std::string output;       ///< safetensors path or empty (then print)
  std::uint64_t seed = 1;
};

/// Reads a whole file; errors name the path.
Result<std::string> read_text_file(const std::string& path);
/// Loads a `.tri` (DSL) or `.tir` (IR text) file into a verified module.
Result<ir::Module> load_module(const std::string& path);

/// `ternjit check FILE`: 0 when the file is valid, else prints diagnostics, 1.
int cmd_check(const std::string& file);
/// `ternjit ir FILE`: prints the canonical IR of the file.
int cmd_ir(const std::string& file);
/// `ternjit opt FILE --passes=...`: runs the named passes (none yet) and prints the IR.
int cmd_opt(const std::string& file, const std::string& passes);
/// `ternjit run ...`: runs a layer's function on the chosen target.
int cmd_run(const RunOptions& options);
/// `ternjit demo`: compiles an embedded BitLinear layer, runs it on the reference and
/// checks the output against an independent computation.
int cmd_demo();

/// Prints an Error to stderr (rendered diagnostics) and returns 1.
int report(const Error& e);

}  // namespace ternjit::cli
