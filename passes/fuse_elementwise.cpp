// SPDX-License-Identifier: Apache-2.0
// fuse_elementwise.cpp - merge chains of elementwise ops into one `ewise` loop.
//
// What: an elementwise op (add sub mul div max min neg abs relu sigmoid tanh gelu silu
// exp log sqrt rsqrt) whose operands and result all have one kind K is "fusable". A
// fusable op whose result has exactly one user, a fusable op of the same kind in the
// same block (which may read it twice), becomes a step of its user's loop. Each
// maximal tree of such ops (two ops or more) is replaced by one `ewise` at the
// position of its root: the values entering the tree are the ewise operands (each
// once, in first-use order), the ops are its steps in operand-first order. An op that
// fuse-epilogue would fold into a tmatmul is never taken (run this pass after
// fuse-epilogue).
// Why: one loop reads the inputs once and writes one output, instead of writing and
// re-reading every intermediate tensor.
// Exactness: each ewise step computes exactly as the standalone op (ir/README.md), and
// all intermediates keep the kind K, so the rewrite is bit-exact.
// Preconditions: verified IR. The root's position is dominated by every operand: each
// entered a tree op, and every tree op precedes the root in its block.
//
//   %a = mul %x, %y : f32[N, 4]
//   %b = add %a, %z : f32[N, 4]      ->   %c = ewise %x, %y, %z {steps = [mul(0, 1),
//   %c = relu %b : f32[N, 4]                 add(3, 2), relu(4)]} : f32[N, 4]
#include <algorithm>
#include <map>
#include <optional>
#include <vector>

#include "passes/epilogue_internal.h"
#include "passes/passes.h"

namespace ternjit::passes {

namespace {

using ir::InstId;
using ir::ValueId;

class ElementwiseFuser {
 public:
  explicit ElementwiseFuser(ir::Function& f) : f_(f) {}

  void run() {
    count_uses();
    for (ir::BlockId b : std::vector<ir::BlockId>(f_.blocks().begin(), f_.blocks().end())) {
      const std::vector<InstId> insts(f_.insts(b).begin(), f_.insts(b).end());
      for (InstId i : insts)
        if (fusable(i) && !absorbed_by_user(i)) fuse_tree(i);
    }
  }

 private:
  void count_uses() {
    uses_.assign(f_.num_values(), 0);
    user_.assign(f_.num_values(), InstId{});
    for (ir::BlockId b : f_.blocks())
      for (InstId i : f_.insts(b)) {
        const ir::InstData& d = f_.inst(i);
        for (ValueId v : d.operands) {
          // Count users, not uses: `mul %a, %a` reads one slot twice.
          if (uses_[v.index] != 0 && user_[v.index] == i) continue;
          ++uses_[v.index];
          user_[v.index] = i;
        }
        for (const ir::BlockCall& c : d.targets)
          for (ValueId v : c.args) uses_[v.index] += 2;  // a branch argument is never fused
      }
  }

  // The defining instruction of `v`, when it is an instruction result.
  std::optional<InstId> def_of(ValueId v) const {
    const ir::ValueData& d = f_.value(v);
    if (d.def != ir::ValueDef::InstResult) return std::nullopt;
    return d.inst;
  }

  bool fusable(InstId i) const {
    const ir::InstData& d = f_.inst(i);
    if (d.erased || !ir::is_ewise_step_op(d.op)) return false;
    const ElemKind k = f_.type_of(d.results[0]).elem;
    for (ValueId v : d.operands) {
      if (f_.type_of(v).elem != k) return false;
      // Leave an epilogue candidate to fuse-epilogue.
      if (auto p = def_of(v); p && f_.inst(*p).op == ir::Op::TMatMul && match_epilogue(f_, *p, i)) return false;
    }
    return true;
  }

  // Whether `i` becomes a step of its single user's tree instead of rooting its own.
  bool absorbed_by_user(InstId i) const {
    const ValueId r = f_.inst(i).results[0];
    if (r.index >= uses_.size() || uses_[r.index] != 1) return false;
    const InstId u = user_[r.index];
    return fusable(u) && f_.inst(u).block == f_.inst(i).block &&
           f_.type_of(f_.inst(u).results[0]).elem == f_.type_of(r).elem;
  }

  // Whether the operand `v` of a tree op is produced by an op of the same tree.
  std::optional<InstId> tree_producer(ValueId v) const {
    auto p = def_of(v);
    if (p && fusable(*p) && absorbed_by_user(*p)) return p;
    return std::nullopt;
  }

  // Collects the tree under `i` in operand-first (post) order.
  // (A step whose operands are one value is visited once.)
  void collect(InstId i, std::vector<InstId>& order) const {
    for (ValueId v : f_.inst(i).operands)
      if (auto p = tree_producer(v); p && std::find(order.begin(), order.end(), *p) == order.end())
        collect(*p, order);
    order.push_back(i);
  }

  void fuse_tree(InstId root) {
    std::vector<InstId> order;
    collect(root, order);
    if (order.size() < 2) return;

    // Operands: the values entering the tree, each once, in first-use order.
    std::vector<ValueId> operands;
    std::map<std::uint32_t, std::int32_t> slot_of_input;  // value index -> operand slot
    std::map<std::uint32_t, std::size_t> step_of;         // inst index -> step number
    for (std::size_t s = 0; s < order.size(); ++s) {
      step_of.emplace(order[s].index, s);
      for (ValueId v : f_.inst(order[s]).operands)
        if (!tree_producer(v) && slot_of_input.emplace(v.index, static_cast<std::int32_t>(operands.size())).second)
          operands.push_back(v);
    }
    const auto n = static_cast<std::int32_t>(operands.size());
    auto slot = [&](ValueId v) -> std::int32_t {
      if (auto p = tree_producer(v)) return n + static_cast<std::int32_t>(step_of.at(p->index));
      return slot_of_input.at(v.index);
    };
    ir::EwiseAttrs attrs;
    for (InstId i : order) {
      const ir::InstData& d = f_.inst(i);
      attrs.steps.push_back(ir::EwiseStep{d.op, slot(d.operands[0]), d.operands.size() > 1 ? slot(d.operands[1]) : -1});
    }

    const ValueId r = f_.inst(root).results[0];
    const InstId fused =
        f_.insert_inst_before(root, ir::Op::Ewise, std::move(operands), {f_.type_of(r)}, std::move(attrs),
                              f_.inst(root).loc);
    f_.replace_all_uses(r, f_.inst(fused).results[0]);
    f_.value(f_.inst(fused).results[0]).name = std::move(f_.value(r).name);
    f_.value(r).name.clear();
    // Users before producers, so that each erased op's results are already unused.
    for (auto it = order.rbegin(); it != order.rend(); ++it) f_.erase_inst(*it);
  }

  ir::Function& f_;
  std::vector<std::uint32_t> uses_;  // by value index: distinct users (a branch argument counts 2)
  std::vector<InstId> user_;         // by value index: the last user seen (meaningful when uses_ == 1)
};

}  // namespace

void fuse_elementwise(ir::Function& f) { ElementwiseFuser(f).run(); }

}  // namespace ternjit::passes
