// SPDX-License-Identifier: Apache-2.0
// options.h - validation of EngineOptions values (shared by from_env and Engine::create).
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "passes/pipeline.h"
#include "targets/registry.h"
#include "targets/tuning.h"
#include "ternjit/engine.h"
#include "ternjit/result.h"

namespace ternjit::jit {

/// EngineOptions after validation, as the stages use them.
struct TypedOptions {
  passes::OptLevel level = passes::OptLevel::O2;
  targets::TuningMode tuning = targets::TuningMode::Off;
  /// Each registered target's validated options (every target present, most empty).
  std::map<std::string, targets::TargetOptions, std::less<>> target_options;
  /// EngineOptions::print_after split: stage names, or "all".
  std::vector<std::string> print_after;
};

/// Checks every field of `options` and types it: opt_level in 0..3, threads >= 0,
/// verbose >= 0, a known tuning mode, print_after stage names, target_options entries
/// (plus the max_isa field, an alias the registry resolves: TargetRegistry::find_alias)
/// each validated by the target they name in `registry`. The
/// target name itself is checked by the registry. Errors (InvalidArgument) name the
/// field, its value and what is allowed.
Result<TypedOptions> validate_options(const EngineOptions& options, const targets::TargetRegistry& registry);

/// `error`, a refusal of `options` by validate_options or by the registry's choice of
/// its target, naming the environment variable whose value caused it: the first of
/// TERNJIT_TARGET, TERNJIT_TARGET_OPTIONS, TERNJIT_MAX_ISA, TERNJIT_PRINT_AFTER and
/// TERNJIT_TUNING whose value is still the one from_env() read (EngineOptions::env_values)
/// and is refused on its own, as "VAR='value': message" (the value escaped); both
/// TERNJIT_MAX_ISA and TERNJIT_TARGET_OPTIONS when they contradict each other. `error`
/// unchanged when no variable is at fault.
Error name_env_variable(Error error, const EngineOptions& options, const targets::TargetRegistry& registry);

/// The default disk-cache directory: $XDG_CACHE_HOME/ternjit, else $HOME/.cache/ternjit
/// (HOME from the passwd entry when unset); "" when none can be found.
std::string default_cache_dir();

}  // namespace ternjit::jit
