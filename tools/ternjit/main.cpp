// SPDX-License-Identifier: Apache-2.0
// main.cpp - the `ternjit` command-line tool: argument parsing and dispatch.
//
// CLI11 (Debian libcli11-dev, header-only) parses the command line: it gives
// subcommands with their own --help and typed options without hand-written parsing.
// The rules every command shares (flags, defaults, exit status) are flags.h's and
// docs/cli.md's.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <new>
#include <stdexcept>

#include "passes/passes.h"
#include "tools/ternjit/bench_cmd.h"
#include "tools/ternjit/commands.h"
#include "tools/ternjit/cache_cmd.h"
#include "tools/ternjit/compile_cmd.h"
#include "tools/ternjit/flags.h"
#include "tools/ternjit/tune_cmd.h"

namespace {

int cli_main(int argc, char** argv) {
  using namespace ternjit::cli;
  // The targets of this build: the target flags, their aliases and the help texts come from it.
  const ternjit::targets::TargetRegistry registry = ternjit::targets::TargetRegistry::create();
  CLI::App app{"ternjit - a JIT compiler for ternary-weight neural-network kernels", "ternjit"};
  app.require_subcommand(1);
  app.footer("The rules every command follows (flags, defaults, exit status 0, 1 or 2): docs/cli.md");
  app.set_version_flag("--version", [] { return version_text(); }, "print the version, the build id and the targets");

  std::string file;
  auto* check = app.add_subcommand("check", "parse and type-check a .tri or .tir file");
  check->add_option("file", file, "the .tri (DSL) or .tir (IR) file")->required();

  auto* ir = app.add_subcommand("ir", "print the IR of a .tri or .tir file");
  ir->add_option("file", file, "the .tri (DSL) or .tir (IR) file")->required();

  OptOptions opt_opts;
  auto* opt = app.add_subcommand("opt", "run passes over a module and print the IR (stdout); logs go to stderr");
  opt->add_option("file", opt_opts.file, "the .tri or .tir file")->required();
  std::string pass_names = "passes:";
  for (const ternjit::passes::PassInfo& p : ternjit::passes::all_passes()) pass_names += " " + std::string(p.name);
  auto* passes_opt = opt->add_option("--passes", opt_opts.passes,
                                     "comma-separated pass names to run in order; empty (--passes=) runs none "
                                     "and prints the parsed IR. Registered " + pass_names)
                         ->expected(0, 1);
  auto* level_opt = opt->add_option("-O,--opt-level", opt_opts.level,
                                    "run the pipeline of a level: O0..O3, 0..3, none, conservative, "
                                    "balanced or aggressive (default: TERNJIT_OPT_LEVEL, else O2; not with --passes)");
  passes_opt->excludes(level_opt);
  opt->add_flag("--print-after-all", opt_opts.print_after_all, "print the IR after every pass (stderr)");
  opt->add_option("--print-after", opt_opts.print_after, "print the IR after the named pass (stderr; repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  opt->add_flag("--time-passes", opt_opts.time_passes, "print a table of per-pass times (stderr)");
  opt->add_option("--shape", opt_opts.shapes,
                  "bind symbols before the passes run, e.g. N=8 or M=4,K=64 (repeatable; specialize-shapes runs first)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);

  RunOptions run_opts;
  auto* run = app.add_subcommand("run", "run a function on random or safetensors inputs");
  run->add_option("file", run_opts.file, "the .tri or .tir file")->required();
  add_function_flags(*run, run_opts.function, "to run");
  run->add_option("--shape", run_opts.shapes, "symbol values, e.g. M=4,K=64 (or Layer.K=64; repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  add_target_flags(*run, run_opts.target, registry, "where to run");
  add_cache_dir_flag(*run, run_opts.target.cache_dir);
  run->add_option("--weights", run_opts.weights,
                  "weights file: safetensors, GGUF or a Hugging Face BitNet checkpoint (by content); every "
                  "parameter must be in it unless --random-missing is given");
  run->add_option("--map", run_opts.name_map,
                  "rename file tensors to parameters, PATTERN=TARGET with {x} placeholders, e.g. "
                  "'model.layers.{i}.mlp.up_proj.weight=L{i}.w' (repeatable; first match wins)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  run->add_option_function<std::uint64_t>(
      "--random-missing", [&run_opts](std::uint64_t seed) { run_opts.random_missing = seed; },
      "draw parameters the weights file lacks at random from SEED (otherwise an error)");
  run->add_option("--input", run_opts.input,
                  "safetensors file with the inputs (by argument name); every argument must be in it unless "
                  "--random-missing-inputs is given (without --input all inputs are random from --seed)");
  run->add_option_function<std::uint64_t>(
      "--random-missing-inputs", [&run_opts](std::uint64_t seed) { run_opts.random_missing_inputs = seed; },
      "draw arguments the --input file lacks at random from SEED (otherwise an error)");
  run->add_option("--output", run_opts.output, "write the outputs to this safetensors file");
  run->add_option("--seed", run_opts.seed, "seed of random inputs/parameters (default 1)");
  run->add_flag("--check", run_opts.check,
                "also run on the reference target and compare every output: integers exactly, floats within "
                "1e-4 * (|expected| + max|finite expected|), NaN/inf by class; exit 1 on a mismatch");

  auto* demo = app.add_subcommand("demo", "compile and run an embedded BitLinear layer, checked");

  std::string inspect_file;
  bool inspect_json = false;
  auto* inspect = app.add_subcommand("inspect", "list the tensors and metadata of a GGUF or safetensors file");
  inspect->add_option("file", inspect_file, "the file (its kind is read from its first bytes)")->required();
  inspect->add_flag("--json", inspect_json, "print JSON instead of a table");
  std::vector<std::string> inspect_map;
  inspect->add_option("--map", inspect_map, "rename tensors as run --map does, to see what binds (repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);

  bool info_json = false;
  auto* info = app.add_subcommand(
      "info", "list the targets (availability, device, features, the devices of GPU targets) and what auto picks");
  info->add_flag("--json", info_json,
                 "print a JSON object: targets (name, kind, available, reason, ..., devices) and auto");

  add_compile_command(app, registry);  // its callback runs the command and ends parsing with its status
  add_cache_command(app);              // the same for `cache ls|stat|verify|prune|clear|merge`
  add_tune_command(app, registry);     // `tune` (autotune/): the same
  add_bench_command(app, registry);    // `bench`: the same

  // Every command runs from its callback and ends the parse with its status (end_command).
  check->callback([&] { end_command(cmd_check(file)); });
  ir->callback([&] { end_command(cmd_ir(file)); });
  opt->callback([&] {
    opt_opts.passes_given = passes_opt->count() > 0;
    // -O: flag > TERNJIT_OPT_LEVEL > O2 (with --passes no level applies).
    if (!opt_opts.passes_given && opt_opts.level.empty()) {
      auto env = ternjit::EngineOptions::from_env();
      if (!env.ok()) end_command(report(env.error()));
      opt_opts.level = std::to_string(env->opt_level);
    }
    end_command(cmd_opt(opt_opts));
  });
  run->callback([&] { end_command(cmd_run(run_opts, registry)); });
  demo->callback([] { end_command(cmd_demo()); });
  info->callback([&] { end_command(cmd_info(info_json)); });
  inspect->callback([&] { end_command(cmd_inspect(inspect_file, inspect_json, inspect_map)); });
  return run_cli(app, argc, argv);
}

}  // namespace

// Sizes from the user are checked before anything is allocated; should memory run out
// anyway (a limit of the machine, not of ternjit), the command fails with a message
// and exit 1. No command ends on an uncaught exception's abort: anything else thrown
// past the commands (which report their own errors) is an error with exit 1 too.
int main(int argc, char** argv) {
  try {
    return cli_main(argc, argv);
  } catch (const std::bad_alloc&) {
    std::fputs("error: out of memory (the machine could not provide the memory this command needs)\n", stderr);
  } catch (const std::length_error& e) {
    std::fprintf(stderr, "error: a size is too large to allocate (%s)\n", e.what());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: internal error: %s\n", e.what());
  } catch (...) {
    std::fputs("error: internal error: an unknown exception\n", stderr);
  }
  return 1;
}
