// SPDX-License-Identifier: Apache-2.0
// options.cpp - EngineOptions::from_env and default_cache_dir (where the engine reads the environment) and option validation.
#include "jit/options.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <optional>
#include <string>

#include <pwd.h>
#include <unistd.h>

#include "cache/disk_cache.h"

namespace ternjit {

namespace {

// `text` with control bytes and DEL written \xNN, so that it never reaches a terminal raw;
// with `quote`, also in single quotes, '\'' and '\\' escaped with a backslash (a value).
std::string escape_text(std::string_view text, bool quote) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = quote ? "'" : "";
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (quote && (c == '\'' || c == '\\')) {
      out += '\\';
      out += c;
    } else if (u < 0x20 || u == 0x7f) {
      out += {'\\', 'x', kHex[u >> 4], kHex[u & 15]};
    } else {
      out += c;
    }
  }
  return quote ? out + "'" : out;
}

std::string quote_env(std::string_view value) { return escape_text(value, true); }

Error env_error(const char* var, std::string_view value, std::string_view expected) {
  return make_error(ErrorCode::InvalidArgument,
                    std::string(var) + "=" + quote_env(value) + " is malformed: expected " + std::string(expected));
}

// A non-negative decimal integer, whole string.
std::optional<int> parse_count(std::string_view s) {
  int v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < 0) return std::nullopt;
  return v;
}

constexpr const char* kTuningList = "off, cached or tune";

// The stages EngineOptions::print_after may name (jit/engine_internal.h).
constexpr std::string_view kStages[] = {"specialize", "optimize", "all"};

}  // namespace

Result<EngineOptions> EngineOptions::from_env() {
  EngineOptions o;
  // An unset or empty variable keeps the default.
  auto get = [&o](const char* var) -> std::string_view {
    const char* v = std::getenv(var);  // the options are read here only (STYLE section 10)
    if (v == nullptr || *v == '\0') return {};
    o.env_values.emplace_back(var, v);  // so that Engine::create's errors can name it
    return v;
  };
  if (auto v = get("TERNJIT_TARGET"); !v.empty()) o.target = std::string(v);
  if (auto v = get("TERNJIT_OPT_LEVEL"); !v.empty()) {
    auto level = passes::parse_opt_level(v);
    if (!level)
      return env_error("TERNJIT_OPT_LEVEL", v, "O0..O3, 0..3, none, conservative, balanced or aggressive");
    o.opt_level = static_cast<int>(*level);
  }
  if (auto v = get("TERNJIT_THREADS"); !v.empty()) {
    auto n = parse_count(v);
    if (!n) return env_error("TERNJIT_THREADS", v, "a non-negative integer (0: the target's default)");
    o.threads = *n;
  }
  // An option alias, resolved and validated when an engine is created (name_env_variable
  // names the variable in its errors).
  if (auto v = get("TERNJIT_MAX_ISA"); !v.empty()) o.max_isa = std::string(v);
  if (auto v = get("TERNJIT_CACHE_DIR"); !v.empty()) o.cache_dir = std::string(v);
  if (auto v = get("TERNJIT_CACHE_MAX_SIZE"); !v.empty()) {
    auto n = cache::parse_size(v);
    if (!n) return env_error("TERNJIT_CACHE_MAX_SIZE", v, "a size in bytes, or with K, M, G or T (500M, 2G)");
    o.cache_max_bytes = *n;
  }
  if (auto v = get("TERNJIT_CACHE_SHARED_GROUP"); !v.empty()) {
    if (v != "0" && v != "1") return env_error("TERNJIT_CACHE_SHARED_GROUP", v, "0 or 1");
    o.cache_shared_group = v == "1";
  }
  if (auto v = get("TERNJIT_RUNTIME_ROWS"); !v.empty()) {
    if (v != "0" && v != "1") return env_error("TERNJIT_RUNTIME_ROWS", v, "0 or 1");
    o.runtime_rows = v == "1";
  }
  if (auto v = get("TERNJIT_ADAPTIVE_PARALLEL"); !v.empty()) {
    if (v != "0" && v != "1") return env_error("TERNJIT_ADAPTIVE_PARALLEL", v, "0 or 1");
    o.adaptive_parallel = v == "1";
  }
  if (auto v = get("TERNJIT_TUNING"); !v.empty()) {
    if (!targets::parse_tuning_mode(v)) return env_error("TERNJIT_TUNING", v, kTuningList);
    o.tuning = std::string(v);
  }
  // Validated by the targets when an engine is created (it knows the registry).
  if (auto v = get("TERNJIT_TARGET_OPTIONS"); !v.empty()) o.target_options = std::string(v);
  if (auto v = get("TERNJIT_VERBOSE"); !v.empty()) {
    auto n = parse_count(v);
    if (!n) return env_error("TERNJIT_VERBOSE", v, "a non-negative integer (0: quiet, 1: trace)");
    o.verbose = *n;
  }
  // Stage names, validated when an engine is created.
  if (auto v = get("TERNJIT_PRINT_AFTER"); !v.empty()) o.print_after = std::string(v);
  return o;
}

namespace jit {

std::string default_cache_dir() {
  // XDG base directories: $XDG_CACHE_HOME, else $HOME/.cache; the passwd entry when HOME
  // is unset. Read here so that getenv stays in this file (STYLE section 10).
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  std::string dir = cache::default_cache_dir(xdg ? xdg : "", home ? home : "");
  if (dir.empty()) {
    if (const passwd* pw = ::getpwuid(::geteuid()); pw && pw->pw_dir) dir = cache::default_cache_dir("", pw->pw_dir);
  }
  return dir;
}

Result<TypedOptions> validate_options(const EngineOptions& o, const targets::TargetRegistry& registry) {
  auto bad = [](const std::string& what) { return make_error(ErrorCode::InvalidArgument, what); };
  if (o.opt_level < 0 || o.opt_level > 3)
    return bad("opt_level " + std::to_string(o.opt_level) + " is out of range: expected 0..3");
  if (o.threads < 0) return bad("threads " + std::to_string(o.threads) + " is negative: expected 0 (default) or more");
  if (o.verbose < 0) return bad("verbose " + std::to_string(o.verbose) + " is negative");
  TypedOptions t;
  t.level = static_cast<passes::OptLevel>(o.opt_level);
  auto mode = targets::parse_tuning_mode(o.tuning);
  if (!mode) return bad("unknown tuning mode '" + o.tuning + "': expected " + kTuningList);
  t.tuning = *mode;
  for (std::string_view rest = o.print_after; !rest.empty();) {
    const std::size_t comma = rest.find(',');
    const std::string stage(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    if (std::find(std::begin(kStages), std::end(kStages), stage) == std::end(kStages))
      return bad("print_after names an unknown stage '" + stage + "' (stages: specialize, optimize, all)");
    t.print_after.push_back(stage);
  }
  TERNJIT_TRY(auto given, targets::split_target_options(o.target_options));
  if (!o.max_isa.empty()) {
    // The field is an option alias: the target that declares it says which option it sets.
    const targets::RegistryAlias* alias = registry.find_alias("max_isa");
    if (alias == nullptr) return bad("max_isa is set but no target of this build takes it");
    auto [it, fresh] = given[alias->target].values.emplace(alias->option, o.max_isa);
    if (!fresh && it->second != o.max_isa)
      return bad("max_isa '" + o.max_isa + "' contradicts target option " + alias->target + "." + alias->option + "=" +
                 it->second);
  }
  for (const auto& [name, opts] : given)
    if (registry.lookup(name) == nullptr)
      return bad("target options name an unknown target '" + name + "' (known: " + registry.names() + ")");
  for (const auto& target : registry.all()) {
    const std::string name(target->name());
    TERNJIT_TRY(t.target_options[name], target->parse_options(given[name]));
  }
  return t;
}

Error name_env_variable(Error error, const EngineOptions& o, const targets::TargetRegistry& registry) {
  // The value of `var` when `value` is still what from_env() read from it.
  auto from_env = [&o](std::string_view var, const std::string& value) {
    return !value.empty() && std::any_of(o.env_values.begin(), o.env_values.end(),
                                         [&](const auto& e) { return e.first == var && e.second == value; });
  };
  // The refusal may quote the value itself (a target name): escaped too.
  auto named = [&](std::string names) {
    return make_error(error.code, names + ": " + escape_text(error.message, false));
  };
  struct Variable {
    const char* name;
    std::string EngineOptions::*field;
  };
  // Each field the registry checks, alone on otherwise default options: the one refused
  // alone is the one at fault.
  for (const Variable v : {Variable{"TERNJIT_TARGET", &EngineOptions::target},
                           Variable{"TERNJIT_TARGET_OPTIONS", &EngineOptions::target_options},
                           Variable{"TERNJIT_MAX_ISA", &EngineOptions::max_isa},
                           Variable{"TERNJIT_PRINT_AFTER", &EngineOptions::print_after},
                           Variable{"TERNJIT_TUNING", &EngineOptions::tuning}}) {
    const std::string& value = o.*v.field;
    if (!from_env(v.name, value)) continue;
    EngineOptions alone;
    alone.*v.field = value;
    const bool refused = v.field == &EngineOptions::target ? !registry.choose(value).ok()
                                                           : !validate_options(alone, registry).ok();
    if (refused) return named(std::string(v.name) + "=" + quote_env(value));
  }
  // Neither alone: max_isa contradicting the target options, both from the environment.
  if (from_env("TERNJIT_MAX_ISA", o.max_isa) && from_env("TERNJIT_TARGET_OPTIONS", o.target_options)) {
    EngineOptions both;
    both.max_isa = o.max_isa;
    both.target_options = o.target_options;
    if (!validate_options(both, registry).ok())
      return named("TERNJIT_MAX_ISA=" + quote_env(o.max_isa) + " with TERNJIT_TARGET_OPTIONS=" +
                   quote_env(o.target_options));
  }
  return error;
}

}  // namespace jit

}  // namespace ternjit
