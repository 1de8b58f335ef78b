// SPDX-License-Identifier: Apache-2.0
// registry.cpp - the explicit target table (no static self-registration) and name lookup.
#include "targets/registry.h"

#include "targets/cuda/cuda_target.h"
#include "targets/hip/hip_target.h"
#include "targets/llvm/llvm_target.h"
#include "targets/reference/reference_target.h"
#include "targets/spirv/spirv_target.h"
#include "targets/x86/x86_target.h"

namespace ternjit::targets {

TargetRegistry TargetRegistry::create() {
  // The table, in `auto` priority order: a CUDA GPU, an AMD GPU, a
  // Vulkan GPU, then the CPU (x86 machine code, then LLVM), then the interpreter.
  std::vector<std::unique_ptr<Target>> table;
  table.push_back(make_cuda_target());
  table.push_back(make_hip_target());
  table.push_back(make_spirv_target());
  table.push_back(make_x86_target());
  table.push_back(make_llvm_target());
  table.push_back(make_reference_target());
  return TargetRegistry(std::move(table));
}

TargetRegistry::TargetRegistry(std::vector<std::unique_ptr<Target>> targets) : targets_(std::move(targets)) {
  for (const auto& t : targets_)
    for (const OptionAlias& a : t->option_aliases()) {
      TERNJIT_CHECK(find_alias(a.name) == nullptr, "option alias '" + std::string(a.name) + "' declared twice");
      aliases_.push_back(
          RegistryAlias{std::string(a.name), std::string(t->name()), std::string(a.option), std::string(a.help)});
    }
}

std::vector<RegistryAlias> TargetRegistry::option_aliases() const { return aliases_; }

const RegistryAlias* TargetRegistry::find_alias(std::string_view name) const {
  for (const RegistryAlias& a : aliases_)
    if (a.name == name) return &a;
  return nullptr;
}

std::string TargetChoice::key() const {
  std::string k(target->name());
  if (fallback != nullptr) k += ">" + std::string(fallback->name());
  return k;
}

std::string TargetRegistry::names() const {
  std::string s;
  for (const auto& t : targets_) s += (s.empty() ? "" : ", ") + std::string(t->name());
  return s;
}

const Target* TargetRegistry::lookup(std::string_view name) const {
  for (const auto& t : targets_)
    if (t->name() == name) return t.get();
  return nullptr;
}

Result<const Target*> TargetRegistry::find(std::string_view name) const {
  for (const auto& t : targets_) {
    if (t->name() != name) continue;
    if (auto ok = t->available(); !ok.ok())
      return make_error(ErrorCode::Unavailable,
                        "target '" + std::string(name) + "' is unavailable: " + ok.error().message);
    return t.get();
  }
  return make_error(ErrorCode::NotFound, "unknown target '" + std::string(name) + "' (known: auto, " + names() + ")");
}

Result<const Target*> TargetRegistry::pick_auto() const {
  std::string reasons;
  for (const auto& t : targets_) {
    // `auto` takes a GPU target only for a hardware GPU: where none can exist, its
    // driver is not even loaded (a Vulkan probe loads every ICD: tens of milliseconds).
    const TargetTraits traits = t->traits();
    if (traits.kind == TargetKind::Gpu && !traits.may_have_gpu) {
      reasons += "; " + std::string(t->name()) + ": no GPU device on this machine (not picked by auto)";
      continue;
    }
    auto ok = t->available();
    // A GPU API whose device is a CPU implementation (Vulkan on lavapipe) is never
    // preferred over the CPU targets: it describes itself with kind "cpu".
    if (ok.ok() && traits.kind == TargetKind::Gpu && t->describe().kind != "gpu") {
      reasons += "; " + std::string(t->name()) + ": its device is a CPU implementation (not picked by auto)";
      continue;
    }
    if (ok.ok()) return t.get();
    reasons += "; " + std::string(t->name()) + ": " + ok.error().message;
  }
  return make_error(ErrorCode::Unavailable, "no target is available" + reasons);
}

Result<const Target*> TargetRegistry::resolve(std::string_view name) const {
  if (name == "auto") return pick_auto();
  return find(name);
}

Result<TargetChoice> TargetRegistry::choose(std::string_view name) const {
  const bool is_auto = name.empty() || name == "auto";
  TargetChoice c;
  TERNJIT_TRY(c.target, resolve(is_auto ? std::string_view("auto") : name));
  if (is_auto && c.target->name() != "reference") c.fallback = lookup("reference");
  return c;
}

}  // namespace ternjit::targets
