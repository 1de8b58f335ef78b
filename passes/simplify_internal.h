// SPDX-License-Identifier: Apache-2.0
// simplify_internal.h - the rule table of the simplify pass, shared with its tests.
#pragma once

#include <span>
#include <string_view>

#include "ir/ir.h"

namespace ternjit::passes {

/// One local rewrite of simplify: when an instruction of op `op` satisfies `match`,
/// `rewrite` returns the value that replaces its (single) result. `rewrite` may insert
/// new instructions before the matched one but must not erase anything; the pass then
/// redirects the uses and erases the matched instruction. A rule only matches when the
/// replacement has exactly the result's type (kind, shape and layout), so a rewrite can
/// never change a shape through broadcasting.
struct SimplifyRule {
  std::string_view name;  ///< kebab-case, e.g. "mul-one"
  ir::Op op;              ///< the op of the matched instruction
  bool (*match)(const ir::Function& f, const ir::InstData& inst);
  ir::ValueId (*rewrite)(ir::Function& f, ir::InstId inst);
};

/// Every rule, in the order simplify tries them (simplify_rules.cpp).
std::span<const SimplifyRule> simplify_rules();

}  // namespace ternjit::passes
