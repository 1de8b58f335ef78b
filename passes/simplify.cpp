// SPDX-License-Identifier: Apache-2.0
// simplify.cpp - apply the local algebraic rewrites of simplify_rules.cpp until none applies.
//
// What: for every instruction, the first rule of simplify_rules() whose op and match
// fit gives a replacement value; the instruction's uses are redirected to it and the
// instruction is erased. Sweeps repeat until no rule fires, so chains such as
// neg(neg(neg(neg(x)))) collapse fully and a second run changes nothing. Operands
// left unused (the `1` of `x * 1`) are left for eliminate-dead-code.
// Why: the DSL, inlining and folding produce identities (scales of 1, zero biases,
// transposes that cancel) that would otherwise cost a kernel each.
// Preconditions: verified IR. The rules are exact under the reference semantics
// (simplify_rules.cpp explains each, including signed zeros and NaN).
//
//   %one = const {value = 1} : f32[]          %one = const {value = 1} : f32[]
//   %a = mul %x, %one : f32[4]         ->     %b = neg %x : f32[4]
//   %b = neg %a : f32[4]                      %d = relu %x : f32[4]
//   %c = neg %b : f32[4]                      ret %d
//   %d = relu %c : f32[4]
//   ret %d                         (%one and %b are left for eliminate-dead-code)
#include <string>
#include <vector>

#include "passes/passes.h"
#include "passes/simplify_internal.h"

namespace ternjit::passes {

namespace {

// Applies the first matching rule to `i`; true when it fired.
bool simplify_inst(ir::Function& f, ir::InstId i) {
  for (const SimplifyRule& rule : simplify_rules()) {
    const ir::InstData& d = f.inst(i);
    if (d.erased || rule.op != d.op || !rule.match(f, d)) continue;
    const ir::ValueId result = d.results[0];
    const ir::ValueId replacement = rule.rewrite(f, i);
    TERNJIT_CHECK(f.type_of(replacement) == f.type_of(result),
                  "simplify rule '" + std::string(rule.name) + "' changed the type of a value");
    f.replace_all_uses(result, replacement);
    f.erase_inst(i);
    return true;
  }
  return false;
}

}  // namespace

void simplify(ir::Function& f) {
  for (bool changed = true; changed;) {
    changed = false;
    for (ir::BlockId b : f.blocks()) {
      const std::vector<ir::InstId> insts(f.insts(b).begin(), f.insts(b).end());
      for (ir::InstId i : insts) changed |= simplify_inst(f, i);
    }
  }
}

}  // namespace ternjit::passes
