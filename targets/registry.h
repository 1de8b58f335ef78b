// SPDX-License-Identifier: Apache-2.0
// registry.h - the table of targets this build has, lookup by name, and what `auto` picks.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "targets/target.h"
#include "ternjit/result.h"

namespace ternjit::targets {

/// A target option's short spelling (Target::option_aliases) with the target it belongs to.
struct RegistryAlias {
  std::string name;    ///< "max_isa": EngineOptions::max_isa, `ternjit --max-isa`
  std::string target;  ///< "x86"
  std::string option;  ///< "max_isa": the entry it stands for is "x86.max_isa=VALUE"
  std::string help;    ///< one line for --help
};

/// What an engine compiles with: its target and, for `auto`, the target that takes a
/// function the first cannot compile (the reference interpreter).
struct TargetChoice {
  const Target* target = nullptr;
  const Target* fallback = nullptr;  ///< null when the target was named (then a refusal is the error)
  /// "x86" or "x86>reference": the disk-cache key's target field (the same function may
  /// compile to different artifacts under `auto` and under a named target).
  [[nodiscard]] std::string key() const;
};

/// The targets of this build, owned, in `auto` priority order (CUDA, HIP, Vulkan/SPIR-V,
/// x86, LLVM, reference; only those that exist are registered). An object, not a
/// global: every Engine makes its own.
class TargetRegistry {
 public:
  /// The explicit table of registry.cpp; each target detects its machine here.
  static TargetRegistry create();

  /// Every registered target, available or not, in priority order.
  [[nodiscard]] std::span<const std::unique_ptr<Target>> all() const { return targets_; }
  /// The names of every registered target, in priority order, comma-separated.
  [[nodiscard]] std::string names() const;

  /// The registered target called `name`, available or not; null when there is none.
  [[nodiscard]] const Target* lookup(std::string_view name) const;
  /// The target called `name`. Errors: NotFound listing the known targets; Unavailable
  /// with the target's own reason when it exists but cannot run here.
  [[nodiscard]] Result<const Target*> find(std::string_view name) const;
  /// The first available target in priority order. Errors: Unavailable listing every
  /// target's reason (cannot happen while `reference` is registered).
  [[nodiscard]] Result<const Target*> pick_auto() const;
  /// pick_auto() for "auto", else find(name).
  [[nodiscard]] Result<const Target*> resolve(std::string_view name) const;
  /// resolve(name) with its fallback: the reference target when `name` is "auto" or
  /// empty and another target was picked; none for a named target. The one place this
  /// rule is written.
  [[nodiscard]] Result<TargetChoice> choose(std::string_view name) const;

  /// Every target's option aliases, in registry order.
  [[nodiscard]] std::vector<RegistryAlias> option_aliases() const;
  /// The alias called `name`, or null.
  [[nodiscard]] const RegistryAlias* find_alias(std::string_view name) const;

 private:
  explicit TargetRegistry(std::vector<std::unique_ptr<Target>> targets);
  std::vector<std::unique_ptr<Target>> targets_;
  std::vector<RegistryAlias> aliases_;
};

}  // namespace ternjit::targets
