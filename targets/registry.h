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

/// The targets of this build, owned, in SPEC section 5 priority order (CUDA, HIP,
/// Vulkan/SPIR-V, x86, LLVM, reference; only those that exist are registered). An
/// object, not a global: every Engine makes its own.
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

 private:
  explicit TargetRegistry(std::vector<std::unique_ptr<Target>> targets) : targets_(std::move(targets)) {}
  std::vector<std::unique_ptr<Target>> targets_;
};

}  // namespace ternjit::targets
