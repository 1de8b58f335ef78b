// SPDX-License-Identifier: Apache-2.0
// options.h - validation of EngineOptions values (shared by from_env and Engine::create).
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "passes/pipeline.h"
#include "ternjit/engine.h"
#include "ternjit/result.h"

namespace ternjit::jit {

/// The tuning modes: "off" (default configurations), "cached" (use recorded tuning
/// results only), "tune" (search configurations that have no record).
inline constexpr std::string_view kTuningModes[] = {"off", "cached", "tune"};

/// Checks every field of `options`: opt_level in 0..3, threads >= 0, verbose >= 0, a
/// known tuning mode. The target name is checked by the registry. Errors
/// (InvalidArgument) name the field, its value and what is allowed.
Result<void> validate_options(const EngineOptions& options);

/// The default disk-cache directory: $XDG_CACHE_HOME/ternjit, else $HOME/.cache/ternjit
/// (HOME from the passwd entry when unset); "" when none can be found.
std::string default_cache_dir();

/// The pipeline level of a validated opt_level.
passes::OptLevel opt_level_of(const EngineOptions& options);

}  // namespace ternjit::jit
