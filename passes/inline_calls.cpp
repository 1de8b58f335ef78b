// SPDX-License-Identifier: Apache-2.0
// inline_calls.cpp - replace every `call` by a copy of the callee's body.
//
// What: each `call @g(%a...)` in every function is replaced by g's instructions. g's
// symbols are mapped to the caller's dims by the unification infer_types uses for
// `call` (bind_call_symbols): a symbol bound by an argument takes the argument's dim,
// one that only appears in a result takes the call's declared result dim, and one that
// neither determines (bound at run time by a parameter) becomes a fresh caller symbol
// (qualified with g's layer when the caller is in another layer: `BitLinear.H`).
// g's constraints move to the caller with the symbols they name. Value and block names
// are kept where unique, else get a numeric suffix (`%h_1`); a call result's name moves
// to the value that replaces it. A single-block callee is spliced in before the call;
// a multi-block callee splits the caller's block at the call: the head branches into
// g's entry code, every `ret` becomes `br` to the continuation block, whose arguments
// replace the call's results. Callees are copied from the module as it was when the
// pass started; calls inside an inlined body are inlined in turn, up to
// kMaxInlineDepth levels (recursion is impossible in verified DSL output; deeper calls
// stay calls). Callees stay in the module: they are entry points too.
// Cost: inlining never grows a function past kMaxInlinedSize instructions (and fresh
// symbols). The bound is on the function, not on one run of the pass, so it holds
// across the pipeline (specialize_function inlines, then the pipeline's inline-calls
// runs again); a call tree that would grow past it is an error naming the size. The
// work is linear in the size reached: each block is rebuilt once in one scan, names
// are kept in sets across calls, and uses of call results are redirected in one pass
// at the end.
// Why: kernels are compiled per entry point; inlining makes the entry point
// self-contained, so specialization, fusion and code generation see the whole body.
// Preconditions: verified IR. A call whose callee constraint is statically violated
// (it would fail at run time) is left as is.
//
//   func @g<M>(%x: f32[M]) -> f32[M] { %y = relu %x : f32[M]; ret %y }
//   %r = call @g(%a) : f32[4]         ->      %r = relu %a : f32[4]
//   ret %r                                    ret %r
#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "ir/bind.h"
#include "ir/infer_type.h"
#include "ir/print.h"
#include "passes/passes.h"

namespace ternjit::passes {

namespace {

// How many levels of calls inside inlined bodies are inlined in turn.
constexpr int kMaxInlineDepth = 8;

// The most instructions plus symbols a function may reach by inlining. A layer of a
// real model inlines to hundreds; 9 layers each calling the next 4 times would reach
// 4^8 copies and hang the compiler.
constexpr std::size_t kMaxInlinedSize = std::size_t{1} << 16;

ir::Type map_type(const ir::Type& t, const std::vector<ir::Dim>& map) {
  ir::Type out = t;
  for (ir::Dim& d : out.shape)
    if (!d.is_static()) d = map.at(d.sym.index);
  return out;
}

// The callee-symbol -> caller-dim map of one call site, or nullopt when the call must
// stay a call (a constraint that fails for a static binding, or result types that bind
// a symbol twice).
std::optional<std::vector<std::optional<ir::Dim>>> bind_call(const ir::Function& f, const ir::InstData& call,
                                                             const ir::Function& callee) {
  std::vector<ir::Type> ops;
  for (ir::ValueId v : call.operands) ops.push_back(f.type_of(v));
  auto bound = ir::bind_call_symbols(callee, ops, f.symbols());
  TERNJIT_CHECK(bound.ok(), "inline-calls: verified call does not bind: " +
                                (bound.ok() ? std::string() : bound.error().message));
  std::vector<std::optional<ir::Dim>> map(callee.symbols().size());
  for (const auto& [sym, dim] : bound.value()) {
    TERNJIT_CHECK(sym < map.size(), "inline-calls: callee symbol out of range");
    map[sym] = dim;
  }
  // Result dims no argument determines come from the call's declared result types.
  const auto& rts = callee.result_types();
  TERNJIT_CHECK(rts.size() == call.results.size(), "inline-calls: call result count differs from callee");
  for (std::size_t r = 0; r < rts.size(); ++r) {
    const ir::Type& have = f.type_of(call.results[r]);
    for (std::size_t d = 0; d < rts[r].rank(); ++d) {
      const ir::Dim& cd = rts[r].shape[d];
      if (cd.is_static()) continue;
      std::optional<ir::Dim>& m = map.at(cd.sym.index);
      if (!m) m = have.shape.at(d);
      else if (!(*m == have.shape.at(d))) return std::nullopt;
    }
  }
  for (const ir::Constraint& c : callee.constraints()) {
    const std::optional<ir::Dim>& m = map.at(c.sym.index);
    if (m && m->is_static() && !ir::satisfies(m->extent, c)) return std::nullopt;
  }
  return map;
}

std::size_t num_insts(const ir::Function& f) {
  std::size_t n = 0;
  for (ir::BlockId b : f.blocks()) n += f.insts(b).size();
  return n;
}

// Inlines every call of one function. Each block is rebuilt in one scan: its
// instructions are taken out and put back one by one, a call being replaced by the
// callee's entry-block copies, which are scanned in turn (their calls are one level
// deeper). A multi-block callee ends the block: the instructions still to scan move to
// the continuation block, which is scanned when the layout reaches it, like the
// callee's other blocks. This visits calls in the order "first call in layout order"
// would, without rescanning.
class Inliner {
 public:
  Inliner(ir::Function& f, const std::map<std::string, const ir::Function*>& callees)
      : f_(f), callees_(callees), size_(num_insts(f) + f.symbols().size()) {
    for (const std::string& s : f.symbols()) symbol_names_.insert(s);
    for (const ir::Constraint& c : f.constraints()) constraint_keys_.insert(key(c));
    for (ir::BlockId b : f.blocks()) {
      if (!f.block(b).name.empty()) block_names_.insert(f.block(b).name);
      for (ir::ValueId v : f.block(b).args) note_name(v);
      for (ir::InstId i : f.insts(b))
        for (ir::ValueId v : f.inst(i).results) note_name(v);
    }
  }

  Result<void> run() {
    for (std::size_t p = 0; p < f_.blocks().size(); ++p) TERNJIT_TRY_VOID(rebuild(f_.blocks()[p]));
    f_.erase_insts(inlined_);
    f_.replace_uses(replaced_);
    return success();
  }

 private:
  using ConstraintKey = std::tuple<std::uint32_t, int, std::int64_t>;
  static ConstraintKey key(const ir::Constraint& c) { return {c.sym.index, static_cast<int>(c.kind), c.value}; }

  void note_name(ir::ValueId v) {
    if (!f_.value(v).name.empty()) value_names_.insert(f_.value(v).name);
  }
  // A value name taken from a value: free for later copies again.
  void drop_name(ir::ValueId v) {
    value_names_.erase(f_.value(v).name);
    f_.value(v).name.clear();
  }
  std::string copy_name(const std::string& n) { return n.empty() ? n : value_names_.take(n); }

  // The value `v` stands for after the call results replaced so far.
  [[nodiscard]] ir::ValueId resolve(ir::ValueId v) const {
    while (v.index < replaced_.size() && replaced_[v.index].valid()) v = replaced_[v.index];
    return v;
  }
  void replace(ir::ValueId from, ir::ValueId to) {
    if (replaced_.size() <= from.index) replaced_.resize(from.index + 1);
    replaced_[from.index] = to;
  }

  // Moves the instructions of `b` from index `from` on back to the scan (in order).
  void rescan_from(ir::BlockId b, std::size_t from) {
    auto& order = f_.block(b).insts;
    todo_.insert(todo_.end(), order.rbegin(), order.rend() - static_cast<std::ptrdiff_t>(from));
    order.resize(from);
  }

  Result<void> rebuild(ir::BlockId b) {
    TERNJIT_CHECK(todo_.empty(), "inline-calls: scan left over from another block");
    rescan_from(b, 0);
    while (!todo_.empty()) {
      const ir::InstId i = todo_.back();
      todo_.pop_back();
      ir::InstData& d = f_.inst(i);
      d.block = b;
      for (ir::ValueId& v : d.operands) v = resolve(v);
      for (ir::BlockCall& c : d.targets)
        for (ir::ValueId& v : c.args) v = resolve(v);
      const auto depth_it = depths_.find(i.index);
      const int depth = depth_it == depths_.end() ? 0 : depth_it->second;
      if (d.op != ir::Op::Call || depth >= kMaxInlineDepth) {
        f_.block(b).insts.push_back(i);
        continue;
      }
      const std::string& name = std::get<ir::CallAttrs>(d.attrs).callee;
      const auto callee = callees_.find(name);
      TERNJIT_CHECK(callee != callees_.end(), "inline-calls: verified call to an unknown function");
      TERNJIT_TRY(const bool inlined, inline_one(b, i, *callee->second, depth));
      if (!inlined) f_.block(b).insts.push_back(i);
    }
    return success();
  }

  // Completes the map with fresh caller symbols and moves the callee's constraints over.
  std::vector<ir::Dim> import_symbols(const ir::Function& callee, const std::vector<std::optional<ir::Dim>>& partial) {
    const std::string_view callee_layer = ir::layer_of(callee.name());
    const bool qualify = !callee_layer.empty() && callee_layer != ir::layer_of(f_.name());
    std::vector<ir::Dim> map(partial.size());
    for (std::size_t s = 0; s < partial.size(); ++s) {
      if (partial[s]) {
        map[s] = *partial[s];
        continue;
      }
      const std::string& name = callee.symbols()[s];
      std::string base =
          qualify && name.find('.') == std::string::npos ? std::string(callee_layer) + "." + name : name;
      map[s] = ir::Dim::symbolic(f_.add_symbol(symbol_names_.take(base)));
    }
    for (const ir::Constraint& c : callee.constraints()) {
      const ir::Dim& d = map.at(c.sym.index);
      if (d.is_static()) continue;  // checked in bind_call
      const ir::Constraint moved{d.sym, c.kind, c.value};
      if (constraint_keys_.insert(key(moved)).second) f_.add_constraint(moved);
    }
    return map;
  }

  // Inlines the call `call`, just taken from the scan of block `head`, whose depth is
  // `depth`. False (changing nothing) when the call must stay; an error when the
  // function would grow past kMaxInlinedSize.
  Result<bool> inline_one(ir::BlockId head, ir::InstId call, const ir::Function& callee, int depth) {
    const ir::InstData call_data = f_.inst(call);  // a copy: f's storage grows below
    if (callee.blocks().empty()) return false;
    auto partial = bind_call(f_, call_data, callee);
    if (!partial) return false;
    const bool single = callee.blocks().size() == 1;
    std::size_t fresh = 0;
    for (const auto& p : *partial) fresh += !p.has_value();
    // The callee's instructions (less its `ret` when spliced) replace the call.
    const std::size_t grown = size_ + fresh + num_insts(callee) - (single ? 1 : 0);
    if (grown > kMaxInlinedSize + 1)
      return make_located_error(call_data.loc, "inlining @" + callee.name() + " into @" + f_.name() +
                                                   " would grow it past " + std::to_string(kMaxInlinedSize) +
                                                   " instructions: the call tree is too large to inline (" +
                                                   std::to_string(size_) + " instructions so far)");
    size_ = grown - 1;
    const std::vector<ir::Dim> syms = import_symbols(callee, *partial);

    std::vector<ir::ValueId> vmap(callee.num_values());
    std::vector<ir::BlockId> bmap(callee.num_blocks());
    std::vector<bool> created(0);  // by caller ValueId index: made by this inlining
    auto mark_created = [&](ir::ValueId v) {
      if (created.size() <= v.index) created.resize(v.index + 1, false);
      created[v.index] = true;
    };
    const auto entry_args = callee.args();
    for (std::size_t a = 0; a < entry_args.size(); ++a) vmap[entry_args[a].index] = call_data.operands.at(a);

    const std::size_t head_size = f_.block(head).insts.size();
    ir::BlockId cont;
    if (!single) {
      // The rest of the scan moves to the continuation block; the call's results become
      // its arguments.
      cont = f_.add_block();
      auto& tail = f_.block(cont).insts;
      tail.assign(todo_.rbegin(), todo_.rend());
      todo_.clear();
      for (ir::InstId t : tail) f_.inst(t).block = cont;
      for (ir::ValueId r : call_data.results) {
        std::string name = std::move(f_.value(r).name);
        f_.value(r).name.clear();
        replace(r, f_.add_block_arg(cont, f_.type_of(r), std::move(name)));
      }
    }
    for (ir::BlockId cb : callee.blocks()) {
      if (cb == callee.entry()) {
        bmap[cb.index] = head;
        continue;
      }
      const ir::BlockData& bd = callee.block(cb);
      ir::BlockId nb = f_.add_block(bd.name.empty() ? std::string() : block_names_.take(bd.name));
      bmap[cb.index] = nb;
      for (ir::ValueId a : bd.args) {
        ir::ValueId na = f_.add_block_arg(nb, map_type(callee.type_of(a), syms), copy_name(callee.value(a).name));
        vmap[a.index] = na;
        mark_created(na);
      }
    }

    // Phase 1 creates the instructions (results typed, operands empty); phase 2 fills in
    // operands and branch targets, which may refer forward to later blocks.
    std::vector<std::pair<ir::InstId, ir::InstId>> copies;  // (new, callee's)
    std::vector<ir::ValueId> returned;
    for (ir::BlockId cb : callee.blocks()) {
      for (ir::InstId ci : callee.insts(cb)) {
        const ir::InstData& d = callee.inst(ci);
        if (single && d.op == ir::Op::Ret) {
          returned = d.operands;
          continue;
        }
        std::vector<ir::Type> types;
        for (ir::ValueId r : d.results) types.push_back(map_type(callee.type_of(r), syms));
        const ir::Op op = d.op == ir::Op::Ret ? ir::Op::Br : d.op;
        const ir::Attrs attrs = d.op == ir::Op::Ret ? ir::Attrs{ir::NoAttrs{}} : d.attrs;
        ir::InstId ni = f_.append_inst(bmap[cb.index], op, {}, std::move(types), attrs, d.loc);
        for (std::size_t r = 0; r < d.results.size(); ++r) {
          ir::ValueId nv = f_.inst(ni).results[r];
          f_.value(nv).name = copy_name(callee.value(d.results[r]).name);
          vmap[d.results[r].index] = nv;
          mark_created(nv);
        }
        if (d.op == ir::Op::Call) depths_[ni.index] = depth + 1;
        copies.emplace_back(ni, ci);
      }
    }
    auto mapped = [&](const std::vector<ir::ValueId>& vs) {
      std::vector<ir::ValueId> out;
      for (ir::ValueId v : vs) {
        TERNJIT_CHECK(vmap.at(v.index).valid(), "inline-calls: callee value used before it is mapped");
        out.push_back(vmap[v.index]);
      }
      return out;
    };
    for (const auto& [ni, ci] : copies) {
      const ir::InstData& d = callee.inst(ci);
      ir::InstData& n = f_.inst(ni);
      if (d.op == ir::Op::Ret) {
        n.targets = {ir::BlockCall{cont, mapped(d.operands)}};
        continue;
      }
      n.operands = mapped(d.operands);
      for (const ir::BlockCall& c : d.targets)
        n.targets.push_back(ir::BlockCall{bmap.at(c.block.index), mapped(c.args)});
    }

    if (single) {
      const std::vector<ir::ValueId> values = mapped(returned);
      TERNJIT_CHECK(values.size() == call_data.results.size(), "inline-calls: ret arity differs from the call");
      for (std::size_t r = 0; r < values.size(); ++r) {
        const ir::ValueId res = call_data.results[r], v = values[r];
        TERNJIT_CHECK(f_.type_of(res) == f_.type_of(v), "inline-calls: inlined result type differs from the call's");
        // The call result's name is the caller's; it moves to the value that replaces it.
        if (!f_.value(res).name.empty() && v.index < created.size() && created[v.index]) {
          drop_name(v);
          f_.value(v).name = std::move(f_.value(res).name);
          f_.value(res).name.clear();
          created[v.index] = false;  // renamed once
        }
        replace(res, v);
      }
    }
    for (ir::ValueId r : call_data.results)
      if (!f_.value(r).name.empty()) drop_name(r);
    inlined_.push_back(call);
    // The entry-block copies were appended to `head`: scan them like the rest.
    rescan_from(head, head_size);
    return true;
  }

  ir::Function& f_;
  const std::map<std::string, const ir::Function*>& callees_;
  std::size_t size_;  // instructions plus symbols of f_, with the scan's
  ir::UniqueNames value_names_, block_names_, symbol_names_;
  std::set<ConstraintKey> constraint_keys_;
  std::vector<ir::InstId> todo_;        // the rest of the block being scanned, last first
  std::map<std::uint32_t, int> depths_; // call InstId index -> nesting depth (absent: 0)
  std::vector<ir::ValueId> replaced_;   // by value index: what replaces a call result
  std::vector<ir::InstId> inlined_;     // the calls inlined, erased at the end
};

}  // namespace

Result<void> inline_calls(ir::Module& m) {
  const ir::Module original = m;
  std::map<std::string, const ir::Function*> callees;
  for (const ir::Function& f : original.functions()) callees.emplace(f.name(), &f);
  for (ir::Function& f : m.functions()) TERNJIT_TRY_VOID(Inliner(f, callees).run());
  return success();
}

}  // namespace ternjit::passes
