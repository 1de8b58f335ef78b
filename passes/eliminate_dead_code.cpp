// SPDX-License-Identifier: Apache-2.0
// eliminate_dead_code.cpp - remove unused pure instructions and unreachable blocks.
//
// What: first every block not reachable from the entry block is removed; then every
// instruction whose op is Pure (ops.def) and whose results are all unused is erased,
// repeatedly, until none is left (removing a user can make its operands dead).
// `call` is an Effect op and is always kept (we do not prove callees pure), as are
// terminators. Unused block arguments are kept: removing them would change branches.
// Why: folding, simplification and fusion leave dead producers behind; removing them
// is what makes those rewrites pay off.
// Preconditions: verified IR. Values of an unreachable block can only be used in
// unreachable blocks (the verifier's dominance rule), so removing all of them at once
// leaves no dangling use. Running it twice changes nothing the second time.
//
//   %unused = add %x, %y : f32[4]     ->      %p = mul %x, %y : f32[4]
//   %p = mul %x, %y : f32[4]                  ret %p
//   ret %p
#include <cstdint>
#include <vector>

#include "passes/passes.h"

namespace ternjit::passes {

namespace {

void remove_unreachable_blocks(ir::Function& f) {
  std::vector<char> reachable(f.num_blocks(), 0);
  std::vector<ir::BlockId> stack{f.entry()};
  reachable[f.entry().index] = 1;
  while (!stack.empty()) {
    ir::BlockId b = stack.back();
    stack.pop_back();
    for (ir::InstId i : f.insts(b))
      for (const ir::BlockCall& c : f.inst(i).targets)
        if (!reachable[c.block.index]) {
          reachable[c.block.index] = 1;
          stack.push_back(c.block);
        }
  }
  std::vector<ir::BlockId> unreachable;
  for (ir::BlockId b : f.blocks())
    if (!reachable[b.index]) unreachable.push_back(b);
  f.erase_blocks(unreachable);
}

// How many times each value is used, by ValueId index (operands and branch arguments).
std::vector<std::uint32_t> count_uses(const ir::Function& f) {
  std::vector<std::uint32_t> uses(f.num_values(), 0);
  for (ir::BlockId b : f.blocks())
    for (ir::InstId i : f.insts(b)) {
      const ir::InstData& d = f.inst(i);
      for (ir::ValueId v : d.operands) ++uses[v.index];
      for (const ir::BlockCall& c : d.targets)
        for (ir::ValueId v : c.args) ++uses[v.index];
    }
  return uses;
}

bool is_dead(const ir::InstData& d, const std::vector<std::uint32_t>& uses) {
  if (ir::op_flags(d.op) != ir::OpFlags::Pure) return false;
  for (ir::ValueId r : d.results)
    if (uses[r.index] != 0) return false;
  return true;
}

}  // namespace

void eliminate_dead_code(ir::Function& f) {
  remove_unreachable_blocks(f);
  std::vector<std::uint32_t> uses = count_uses(f);
  // Walking backwards erases a whole chain of dead producers in one sweep; a producer
  // used only from a later block may need another sweep.
  // The dead are erased together after each sweep (one pass per block, not one per
  // instruction).
  for (bool changed = true; changed;) {
    changed = false;
    std::vector<ir::InstId> dead;
    for (auto b = f.blocks().rbegin(); b != f.blocks().rend(); ++b) {
      const auto insts = f.insts(*b);
      for (auto i = insts.rbegin(); i != insts.rend(); ++i) {
        const ir::InstData& d = f.inst(*i);
        if (!is_dead(d, uses)) continue;
        for (ir::ValueId v : d.operands) --uses[v.index];
        dead.push_back(*i);
        changed = true;
      }
    }
    f.erase_insts(dead);
  }
}

}  // namespace ternjit::passes
