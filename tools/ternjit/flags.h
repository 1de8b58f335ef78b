// SPDX-License-Identifier: Apache-2.0
// flags.h - the one rule set of the `ternjit` command line (docs/cli.md): shared flags, their defaults, usage errors.
//
// Every command that picks a function, a target or a cache directory adds its flags
// here, so each is spelled, defaulted (flag > TERNJIT_* variable > default) and checked
// the same way everywhere; run_cli parses with CLI11 and maps every outcome to exit
// status 0 (success), 1 (the command failed) or 2 (the command line does not parse,
// with a did-you-mean for a misspelled command or flag).
#pragma once

#include <map>
#include <optional>
#include <string>

#include "targets/registry.h"
#include "targets/target.h"
#include "ternjit/engine.h"
#include "ternjit/result.h"

namespace CLI {
class App;
}

namespace ternjit::cli {

/// --layer and --function (alias --fn): the function of the module a command works on.
struct FunctionFlags {
  std::string layer;     ///< --layer L
  std::string function;  ///< --function F: with --layer, L's function F (default forward); else a full name
};

/// The flags of every command that compiles (compile, run, bench, tune).
struct TargetFlags {
  std::string target;          ///< --target; "": TERNJIT_TARGET, else auto
  std::string target_options;  ///< --target-options; "": TERNJIT_TARGET_OPTIONS
  /// The target option aliases given as flags: "TARGET.OPTION" -> value.
  std::map<std::string, std::string> aliases;
  std::optional<int> threads;  ///< --threads; empty: TERNJIT_THREADS, else every core
  std::string level;           ///< -O; "": TERNJIT_OPT_LEVEL, else O2
  std::string cache_dir;       ///< --cache-dir (commands with a cache); "": TERNJIT_CACHE_DIR, else the default
};

/// Adds --layer and --function (alias --fn) to `cmd`; `what` completes their help
/// ("to compile").
void add_function_flags(CLI::App& cmd, FunctionFlags& flags, const std::string& what);

/// Adds --target, --target-options, one flag per target option alias of `registry`
/// ("--" + the alias name with '_' as '-': --max-isa), --threads and -O to `cmd`.
/// `target_help` describes what --target chooses.
void add_target_flags(CLI::App& cmd, TargetFlags& flags, const targets::TargetRegistry& registry,
                      const std::string& target_help);

/// Adds --cache-dir (and the older spelling `old`, e.g. "--dir", when non-empty) to `cmd`.
void add_cache_dir_flag(CLI::App& cmd, std::string& dir, const std::string& old = {});

/// The EngineOptions of a command: EngineOptions::from_env() (every TERNJIT_* variable),
/// then each flag that was given (target, target options, aliases, threads, level, cache
/// directory). Alias flags replace the same entry of the target options and, when
/// --target names a target, an option the command line gives for another target is an
/// error. Errors: a malformed variable (naming it), an unknown -O level, --threads < 1.
Result<EngineOptions> command_engine_options(const TargetFlags& flags, const targets::TargetRegistry& registry);

/// What a command that compiles without an engine (compile, tune) works with.
struct CommandTarget {
  const targets::Target* target = nullptr;  ///< owned by the registry
  targets::CompileOptions compile;          ///< level, threads (0 resolved to every core) and target options
  EngineOptions engine;                     ///< what command_engine_options gave
};

/// command_engine_options, then the target it names ("auto": the registry's pick; a
/// registered target whether or not it runs here) with its validated options. Errors:
/// an unknown target (listing the known ones), those of command_engine_options and of
/// the targets' option parsers.
Result<CommandTarget> command_target(const TargetFlags& flags, const targets::TargetRegistry& registry);

/// Ends a command run from a CLI11 callback with its exit status: throws CLI::Success for
/// 0, else CLI::RuntimeError(rc), which run_cli returns as is.
[[noreturn]] void end_command(int rc);

/// Parses `argv` with `app` (whose command callbacks end with end_command) and returns
/// the exit status: 0 (also for --help and --version), the command's status, or 2 for a
/// command line that does not parse, after a message naming the command, the closest
/// commands or flags to a misspelled one, and its --help.
int run_cli(CLI::App& app, int argc, char** argv);

}  // namespace ternjit::cli
