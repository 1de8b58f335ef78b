// SPDX-License-Identifier: Apache-2.0
// main.cpp - the `ternjit` command-line tool: argument parsing and dispatch.
//
// CLI11 (Debian libcli11-dev, header-only) parses the command line: it gives
// subcommands with their own --help and typed options without hand-written parsing.
#include <CLI/CLI.hpp>

#include "tools/ternjit/commands.h"

int main(int argc, char** argv) {
  using namespace ternjit::cli;
  CLI::App app{"ternjit - a JIT compiler for ternary-weight neural-network kernels"};
  app.require_subcommand(1);

  std::string file;
  auto* check = app.add_subcommand("check", "parse and type-check a .tri or .tir file");
  check->add_option("file", file, "the .tri (DSL) or .tir (IR) file")->required();

  auto* ir = app.add_subcommand("ir", "print the IR of a .tri or .tir file");
  ir->add_option("file", file, "the .tri (DSL) or .tir (IR) file")->required();

  std::string passes;
  auto* opt = app.add_subcommand("opt", "run passes over a module and print the IR");
  opt->add_option("file", file, "the .tri or .tir file")->required();
  opt->add_option("--passes", passes, "comma-separated pass names (empty: print only)")->expected(0, 1);

  RunOptions run_opts;
  auto* run = app.add_subcommand("run", "run a layer on random or safetensors inputs");
  run->add_option("file", run_opts.file, "the .tri or .tir file")->required();
  run->add_option("--layer", run_opts.layer, "the layer to run")->required();
  run->add_option("--fn", run_opts.fn, "the layer's function (default forward)");
  run->add_option("--shape", run_opts.shapes, "symbol values, e.g. M=4,K=64 (or Layer.K=64)");
  run->add_option("--target", run_opts.target, "where to run: reference");
  run->add_option("--weights", run_opts.weights, "safetensors file with the parameters");
  run->add_option("--input", run_opts.input, "safetensors file with the inputs (by argument name)");
  run->add_option("--output", run_opts.output, "write the outputs to this safetensors file");
  run->add_option("--seed", run_opts.seed, "seed of random inputs/parameters (default 1)");

  auto* demo = app.add_subcommand("demo", "compile and run an embedded BitLinear layer, checked");

  CLI11_PARSE(app, argc, argv);

  if (check->parsed()) return cmd_check(file);
  if (ir->parsed()) return cmd_ir(file);
  if (opt->parsed()) return cmd_opt(file, passes);
  if (run->parsed()) return cmd_run(run_opts);
  if (demo->parsed()) return cmd_demo();
  return 2;
}
