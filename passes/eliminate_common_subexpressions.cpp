// SPDX-License-Identifier: Apache-2.0
// eliminate_common_subexpressions.cpp - share identical pure instructions.
//
// What: a Pure instruction (ops.def) with the same op, operands, attributes and result
// types as one that dominates it is replaced by that earlier instruction: its uses are
// redirected and it is erased. This covers repeated `const`s and `param` reads of the
// same parameter. Dominance is global: blocks are visited in preorder of the dominator
// tree (Cooper, Harvey, Kennedy, "A Simple, Fast Dominance Algorithm", 2001) with a
// scoped table, so a block sees the instructions of every block that dominates it.
// Unreachable blocks are handled block-locally (eliminate-dead-code removes them).
// Why: the DSL and inlining repeat parameter reads and subexpressions; sharing them
// removes work and lets fusion see one producer.
// Preconditions: verified IR. Const values are compared bit for bit, so `-0` and `0`
// (and NaNs with different payloads) stay apart. Running it twice changes nothing the
// second time.
//
//   %0 = add %x, %y : f32[4]          ->      %0 = add %x, %y : f32[4]
//   %1 = add %x, %y : f32[4]                  %2 = mul %0, %0 : f32[4]
//   %2 = mul %0, %1 : f32[4]
#include <bit>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "passes/passes.h"

namespace ternjit::passes {

namespace {

// ---------------------------------------------------------------- dominator tree

// For every block (by BlockId index), its children in the dominator tree in layout
// order; `reachable` marks the blocks reachable from the entry.
struct DomTree {
  std::vector<std::vector<ir::BlockId>> children;
  std::vector<char> reachable;
};

DomTree dom_tree(const ir::Function& f) {
  const std::size_t n = f.num_blocks();
  std::vector<std::vector<ir::BlockId>> succs(n), preds(n);
  for (ir::BlockId b : f.blocks())
    for (ir::InstId i : f.insts(b))
      for (const ir::BlockCall& c : f.inst(i).targets) succs[b.index].push_back(c.block);

  // Reverse postorder from the entry by an iterative DFS.
  std::vector<ir::BlockId> postorder;
  std::vector<char> seen(n, 0);
  std::vector<std::pair<ir::BlockId, std::size_t>> stack{{f.entry(), 0}};
  seen[f.entry().index] = 1;
  while (!stack.empty()) {
    auto& [b, next] = stack.back();
    if (next < succs[b.index].size()) {
      ir::BlockId s = succs[b.index][next++];
      if (!seen[s.index]) {
        seen[s.index] = 1;
        stack.emplace_back(s, 0);
      }
    } else {
      postorder.push_back(b);
      stack.pop_back();
    }
  }
  std::vector<int> po_index(n, -1);
  for (std::size_t k = 0; k < postorder.size(); ++k) po_index[postorder[k].index] = static_cast<int>(k);
  for (ir::BlockId b : postorder)
    for (ir::BlockId s : succs[b.index]) preds[s.index].push_back(b);

  std::vector<ir::BlockId> idom(n);
  idom[f.entry().index] = f.entry();
  auto intersect = [&](ir::BlockId a, ir::BlockId b) {
    while (a != b) {
      while (po_index[a.index] < po_index[b.index]) a = idom[a.index];
      while (po_index[b.index] < po_index[a.index]) b = idom[b.index];
    }
    return a;
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (auto it = postorder.rbegin(); it != postorder.rend(); ++it) {
      ir::BlockId b = *it;
      if (b == f.entry()) continue;
      ir::BlockId new_idom;
      for (ir::BlockId p : preds[b.index]) {
        if (!idom[p.index].valid()) continue;
        new_idom = new_idom.valid() ? intersect(p, new_idom) : p;
      }
      if (new_idom.valid() && idom[b.index] != new_idom) {
        idom[b.index] = new_idom;
        changed = true;
      }
    }
  }

  DomTree tree{std::vector<std::vector<ir::BlockId>>(n), std::move(seen)};
  for (ir::BlockId b : f.blocks())
    if (b != f.entry() && tree.reachable[b.index]) tree.children[idom[b.index].index].push_back(b);
  return tree;
}

// ---------------------------------------------------------------- keys

void append_u64(std::string& key, std::uint64_t v) {
  for (int k = 0; k < 8; ++k) key += static_cast<char>((v >> (8 * k)) & 0xff);
}

// Op, operands, result types, which attribute alternative, and the contents of the
// attributes a function may hold many different ones of (const values, param names),
// as bytes; instructions with equal keys are then compared with same_attrs. Keying
// those contents keeps the candidates per key few: 100,000 distinct constants must not
// be compared with each other.
std::string key_of(const ir::Function& f, const ir::InstData& d) {
  std::string key;
  key += static_cast<char>(d.op);
  key += static_cast<char>(ir::attrs_kind(d.attrs));
  append_u64(key, d.operands.size());
  for (ir::ValueId v : d.operands) append_u64(key, v.index);
  append_u64(key, d.results.size());
  for (ir::ValueId r : d.results) {
    const ir::Type& t = f.type_of(r);
    key += static_cast<char>(t.elem);
    key += static_cast<char>(t.layout);
    append_u64(key, t.shape.size());
    for (const ir::Dim& dim : t.shape) {
      append_u64(key, static_cast<std::uint64_t>(dim.extent));
      append_u64(key, dim.sym.index);
    }
  }
  if (const auto* c = std::get_if<ir::ConstAttrs>(&d.attrs))
    for (double v : c->values) append_u64(key, std::bit_cast<std::uint64_t>(v));
  if (const auto* p = std::get_if<ir::ParamAttrs>(&d.attrs)) key += p->name;
  return key;
}

bool same_attrs(const ir::Attrs& a, const ir::Attrs& b) {
  if (ir::attrs_kind(a) != ir::attrs_kind(b)) return false;
  if (const auto* ca = std::get_if<ir::ConstAttrs>(&a)) {
    const auto& cb = std::get<ir::ConstAttrs>(b);
    if (ca->values.size() != cb.values.size()) return false;
    for (std::size_t k = 0; k < ca->values.size(); ++k)
      if (std::bit_cast<std::uint64_t>(ca->values[k]) != std::bit_cast<std::uint64_t>(cb.values[k])) return false;
    return true;
  }
  return a == b;
}

// ---------------------------------------------------------------- the walk

class Eliminator {
 public:
  explicit Eliminator(ir::Function& f) : f_(f), replaced_(f.num_values()) {}

  // Visits `root` and the blocks it dominates in preorder, each with the instructions
  // of its dominators in the table. An explicit stack, not recursion: a chain of
  // blocks makes the dominator tree as deep as the function is long.
  void visit_tree(ir::BlockId root, const DomTree& tree) {
    struct Frame {
      ir::BlockId block;
      std::size_t next_child = 0;
      std::vector<std::string> added;  // keys this block put in the table
    };
    std::vector<Frame> stack;
    stack.push_back(Frame{root, 0, visit(root)});
    while (!stack.empty()) {
      Frame& top = stack.back();
      const auto& children = tree.children[top.block.index];
      if (top.next_child < children.size()) {
        const ir::BlockId c = children[top.next_child++];
        stack.push_back(Frame{c, 0, visit(c)});
        continue;
      }
      for (const std::string& key : top.added) table_[key].pop_back();
      stack.pop_back();
    }
  }

  // Erases the shared instructions and redirects their uses, once at the end, so that
  // sharing N instructions costs one pass over the function, not N.
  void finish() {
    f_.erase_insts(erased_);
    f_.replace_uses(replaced_);
  }

 private:
  // The value `v` stands for after the replacements so far (one step: a replacement is
  // an instruction kept in the table, never itself replaced).
  [[nodiscard]] ir::ValueId resolve(ir::ValueId v) const {
    return v.index < replaced_.size() && replaced_[v.index].valid() ? replaced_[v.index] : v;
  }

  // Shares `b`'s instructions with equal ones in the table (or adds them); returns the
  // keys it added. Operands are resolved first: they are defined in `b` or in a block
  // that dominates it, so their replacements are already known.
  std::vector<std::string> visit(ir::BlockId b) {
    std::vector<std::string> added;
    for (ir::InstId i : f_.insts(b)) {
      ir::InstData& d = f_.inst(i);
      for (ir::ValueId& v : d.operands) v = resolve(v);
      if (ir::op_flags(d.op) != ir::OpFlags::Pure) continue;
      std::string key = key_of(f_, d);
      std::vector<ir::InstId>& same_key = table_[key];
      const ir::InstId* earlier = nullptr;
      for (const ir::InstId& e : same_key)
        if (same_attrs(f_.inst(e).attrs, d.attrs)) earlier = &e;
      if (!earlier) {
        same_key.push_back(i);
        added.push_back(std::move(key));
        continue;
      }
      for (std::size_t r = 0; r < d.results.size(); ++r) replaced_[d.results[r].index] = f_.inst(*earlier).results[r];
      erased_.push_back(i);
    }
    return added;
  }

  ir::Function& f_;
  std::map<std::string, std::vector<ir::InstId>> table_;
  std::vector<ir::ValueId> replaced_;  // by value index: the value it was replaced by
  std::vector<ir::InstId> erased_;     // shared instructions, erased by finish()
};

}  // namespace

void eliminate_common_subexpressions(ir::Function& f) {
  const DomTree tree = dom_tree(f);
  Eliminator eliminator(f);
  eliminator.visit_tree(f.entry(), tree);
  const std::vector<ir::BlockId> layout(f.blocks().begin(), f.blocks().end());
  for (ir::BlockId b : layout)
    if (!tree.reachable[b.index]) eliminator.visit_tree(b, tree);  // no children: block-local
  eliminator.finish();
}

}  // namespace ternjit::passes
