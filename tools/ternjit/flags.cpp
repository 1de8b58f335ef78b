// SPDX-License-Identifier: Apache-2.0
// flags.cpp - the shared flags of the `ternjit` commands, their defaults, and usage errors with suggestions.
#include "tools/ternjit/flags.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <vector>

#include "ir/bind.h"
#include "jit/options.h"
#include "jit/thread_pool.h"
#include "passes/pipeline.h"

namespace ternjit::cli {

namespace {

Error bad(std::string msg) { return make_error(ErrorCode::InvalidArgument, std::move(msg)); }

// "an_alias" -> "--an-alias": the flag of a target option alias.
std::string alias_flag(std::string_view name) {
  std::string flag = "--" + std::string(name);
  for (char& c : flag)
    if (c == '_') c = '-';
  return flag;
}

// The entries "TARGET.NAME=VALUE;..." of `options`, in map order (the inverse of split_target_options).
std::string join_target_options(const std::map<std::string, targets::TargetOptions>& options) {
  std::string text;
  for (const auto& [target, opts] : options)
    for (const auto& [name, value] : opts.values) text += (text.empty() ? "" : ";") + target + "." + name + "=" + value;
  return text;
}

// The command a parse reached: the app, then the parsed subcommand at each level.
std::vector<const CLI::App*> parsed_chain(const CLI::App& app) {
  std::vector<const CLI::App*> chain{&app};
  while (!chain.back()->get_subcommands().empty()) chain.push_back(chain.back()->get_subcommands().front());
  return chain;
}

// "ternjit cache ls": the names along a chain.
std::string command_path(const std::vector<const CLI::App*>& chain) {
  std::string path;
  for (const CLI::App* a : chain) path += (path.empty() ? "" : " ") + a->get_name();
  return path;
}

// Every flag spelling the last command of `chain` accepts: its own and, while a command
// lets unknown flags fall through, its parent's.
std::vector<std::string> flag_names(const std::vector<const CLI::App*>& chain) {
  std::vector<std::string> names;
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    for (const CLI::Option* opt : (*it)->get_options()) {
      for (const std::string& n : opt->get_lnames()) names.push_back("--" + n);
      for (const std::string& n : opt->get_snames()) names.push_back("-" + n);
    }
    if (!(*it)->get_fallthrough()) break;
  }
  return names;
}

// The message of a command line that does not parse: an unknown command or flag with the
// closest spellings, else CLI11's own text; then where the usage is.
std::string usage_message(const CLI::App& app, const CLI::Error& e) {
  const std::vector<const CLI::App*> chain = parsed_chain(app);
  const CLI::App& last = *chain.back();
  const std::vector<std::string> left = app.remaining(/*recurse=*/true);
  // The first word the parse left: a flag no command took, or a misspelled command.
  std::string first;
  for (const std::string& arg : left)
    if (arg != "--") {
      first = arg;
      break;
    }
  std::string what;
  if (first.size() >= 2 && first[0] == '-') {
    const std::string flag = first.substr(0, first.find('='));
    what = "unknown flag '" + flag + "' for '" + command_path(chain) + "'" + ir::did_you_mean(flag, flag_names(chain));
  } else if (last.get_require_subcommand_min() > 0 && last.get_subcommands().empty()) {
    std::vector<std::string> commands;
    std::string list;
    for (const CLI::App* sub : last.get_subcommands([](const CLI::App*) { return true; })) {
      commands.push_back(sub->get_name());
      list += (list.empty() ? "" : ", ") + sub->get_name();
    }
    what = first.empty() ? "'" + command_path(chain) + "' needs a command: " + list
                         : "unknown command '" + first + "' for '" + command_path(chain) + "'" +
                               ir::did_you_mean(first, commands) + "; the commands are " + list;
  }
  if (what.empty()) what = e.what();
  return "ternjit: error: " + what + "\nrun '" + command_path(chain) + " --help' for its usage\n";
}

}  // namespace

void add_function_flags(CLI::App& cmd, FunctionFlags& flags, const std::string& what) {
  cmd.add_option("--layer", flags.layer, "the layer whose function " + what + " (its forward unless --function)");
  cmd.add_option("--function,--fn", flags.function,
                 "with --layer: the layer's function (default forward); else a function by its full name, e.g. "
                 "BitLinear.forward (default: the module's only function)");
}

void add_target_flags(CLI::App& cmd, TargetFlags& flags, const targets::TargetRegistry& registry,
                      const std::string& target_help) {
  cmd.add_option("--target", flags.target,
                 target_help + ": auto or one of " + registry.names() + " (default: TERNJIT_TARGET, else auto)");
  cmd.add_option("--target-options", flags.target_options,
                 "the targets' options, TARGET.NAME=VALUE;... (default: TERNJIT_TARGET_OPTIONS; an unknown one is an "
                 "error listing what its target takes)");
  for (const targets::RegistryAlias& a : registry.option_aliases()) {
    const std::string key = a.target + "." + a.option;
    cmd.add_option_function<std::string>(
        alias_flag(a.name), [&flags, key](const std::string& value) { flags.aliases[key] = value; },
        a.help + " (the same as --target-options " + key + "=VALUE)");
  }
  cmd.add_option_function<int>(
      "--threads", [&flags](int n) { flags.threads = n; },
      "threads the kernels run on (default: TERNJIT_THREADS, else every core)");
  cmd.add_option("-O,--opt-level", flags.level,
                 "pipeline level: O0..O3, 0..3, none, conservative, balanced or aggressive (default: "
                 "TERNJIT_OPT_LEVEL, else O2)");
}

void add_cache_dir_flag(CLI::App& cmd, std::string& dir, const std::string& old) {
  cmd.add_option("--cache-dir" + (old.empty() ? "" : "," + old), dir,
                 "the kernel cache and tuning records directory; off: none (default: TERNJIT_CACHE_DIR, else "
                 "$XDG_CACHE_HOME/ternjit)");
}

Result<EngineOptions> command_engine_options(const TargetFlags& flags, const targets::TargetRegistry& registry) {
  TERNJIT_TRY(EngineOptions o, EngineOptions::from_env());
  if (!flags.target.empty()) o.target = flags.target;
  if (!flags.level.empty()) {
    auto level = passes::parse_opt_level(flags.level);
    if (!level)
      return bad("unknown optimization level '" + flags.level +
                 "' (expected O0..O3, 0..3, none, conservative, balanced or aggressive)");
    o.opt_level = static_cast<int>(*level);
  }
  if (flags.threads) {
    if (*flags.threads < 1) return bad("--threads must be >= 1, got " + std::to_string(*flags.threads));
    o.threads = *flags.threads;
  }
  if (!flags.cache_dir.empty()) o.cache_dir = flags.cache_dir;

  // The command line's target options: --target-options, then each alias flag's entry.
  TERNJIT_TRY(auto given, targets::split_target_options(flags.target_options));
  for (const auto& [key, value] : flags.aliases) {
    const auto dot = key.find('.');
    auto [it, fresh] = given[key.substr(0, dot)].values.emplace(key.substr(dot + 1), value);
    if (!fresh && it->second != value)
      return bad("target option " + key + " is given twice: '" + it->second + "' and '" + value + "'");
  }
  // An option for another target than the one named would be ignored: say so instead.
  if (o.target != "auto")
    for (const auto& [target, opts] : given)
      if (target != o.target && !opts.values.empty())
        return bad("option '" + target + "." + opts.values.begin()->first + "' is for target '" + target +
                   "', not '" + o.target + "'");
  if (flags.target_options.empty() && flags.aliases.empty()) return o;
  // A flag beats its variable: --target-options replaces TERNJIT_TARGET_OPTIONS, an alias
  // flag only its own entry of it.
  std::map<std::string, targets::TargetOptions> merged;
  if (flags.target_options.empty()) {
    TERNJIT_TRY(merged, targets::split_target_options(o.target_options));
  }
  for (const auto& [target, opts] : given)
    for (const auto& [name, value] : opts.values) merged[target].values[name] = value;
  o.target_options = join_target_options(merged);
  // EngineOptions::max_isa is the engine API's field for the alias named "max_isa",
  // filled from its variable TERNJIT_MAX_ISA: a flag giving the same option beats it.
  if (const targets::RegistryAlias* a = registry.find_alias("max_isa");
      a && given.count(a->target) && given[a->target].values.count(a->option))
    o.max_isa.clear();
  return o;
}

Result<CommandTarget> command_target(const TargetFlags& flags, const targets::TargetRegistry& registry) {
  CommandTarget out;
  TERNJIT_TRY(out.engine, command_engine_options(flags, registry));
  if (out.engine.target == "auto") {
    TERNJIT_TRY(out.target, registry.pick_auto());
  } else {
    out.target = registry.lookup(out.engine.target);
    if (!out.target) {
      // From the flag, or else from TERNJIT_TARGET (which the error then names).
      const std::string from = flags.target.empty() ? "target" : "--target";
      return jit::name_env_variable(
          bad("unknown " + from + " '" + out.engine.target + "' (known: auto, " + registry.names() + ")"), out.engine,
          registry);
    }
  }
  auto typed = jit::validate_options(out.engine, registry);
  if (!typed.ok()) return jit::name_env_variable(typed.error(), out.engine, registry);
  out.compile.opt_level = typed->level;
  out.compile.threads = out.engine.threads > 0 ? out.engine.threads : jit::ThreadPool::default_threads();
  out.compile.target = typed->target_options[std::string(out.target->name())];
  return out;
}

void end_command(int rc) {
  if (rc == 0) throw CLI::Success();
  throw CLI::RuntimeError(rc);
}

int run_cli(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
    return 0;
  } catch (const CLI::RuntimeError& e) {
    return e.get_exit_code();  // a command's own status: its message is printed
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version, a command's success
    std::fputs(usage_message(app, e).c_str(), stderr);
    return 2;
  }
}

}  // namespace ternjit::cli
