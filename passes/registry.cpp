// SPDX-License-Identifier: Apache-2.0
// registry.cpp - the table of every pass, by name: one line per pass, no self-registration.
#include "passes/passes.h"

namespace ternjit::passes {

namespace {

// Pass-name order is the order `ternjit opt --help` and tests list them in.
const PassInfo kPasses[] = {
    {"none", PassFn{}, ""},  // placeholder row removed when the first pass lands
};

}  // namespace

std::span<const PassInfo> all_passes() { return std::span<const PassInfo>(kPasses).subspan(1); }

const PassInfo* find_pass(std::string_view name) {
  for (const PassInfo& p : all_passes())
    if (p.name == name) return &p;
  return nullptr;
}

}  // namespace ternjit::passes
