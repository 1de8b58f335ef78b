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
#include <utility>
#include <vector>

#include "ir/bind.h"
#include "ir/infer_type.h"
#include "passes/passes.h"

namespace ternjit::passes {

namespace {

// How many levels of calls inside inlined bodies are inlined in turn.
constexpr int kMaxInlineDepth = 8;


// `base` if unused, else `base_1`, `base_2`, ...; the name returned is marked used.
std::string unique_name(const std::string& base, std::set<std::string>& used) {
  if (used.insert(base).second) return base;
  for (int k = 1;; ++k) {
    std::string n = base + "_" + std::to_string(k);
    if (used.insert(n).second) return n;
  }
}

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

// Completes the map with fresh caller symbols and moves the callee's constraints over.
std::vector<ir::Dim> import_symbols(ir::Function& f, const ir::Function& callee,
                                    const std::vector<std::optional<ir::Dim>>& partial) {
  std::set<std::string> used(f.symbols().begin(), f.symbols().end());
  const std::string_view callee_layer = ir::layer_of(callee.name());
  const bool qualify = !callee_layer.empty() && callee_layer != ir::layer_of(f.name());
  std::vector<ir::Dim> map(partial.size());
  for (std::size_t s = 0; s < partial.size(); ++s) {
    if (partial[s]) {
      map[s] = *partial[s];
      continue;
    }
    const std::string& name = callee.symbols()[s];
    std::string base = qualify && name.find('.') == std::string::npos ? std::string(callee_layer) + "." + name : name;
    map[s] = ir::Dim::symbolic(f.symbol(unique_name(base, used)));
  }
  for (const ir::Constraint& c : callee.constraints()) {
    const ir::Dim& d = map.at(c.sym.index);
    if (d.is_static()) continue;  // checked in bind_call
    ir::Constraint moved{d.sym, c.kind, c.value};
    const auto& have = f.constraints();
    if (std::find(have.begin(), have.end(), moved) == have.end()) f.add_constraint(moved);
  }
  return map;
}

// Inlines one call whose depth is `depth`; copied calls are recorded one level deeper.
// Returns false (changing nothing) when the call must stay.
bool inline_one(ir::Function& f, ir::InstId call, const ir::Function& callee, int depth,
                std::map<std::uint32_t, int>& depths) {
  const ir::InstData call_data = f.inst(call);  // a copy: f's storage grows below
  if (callee.blocks().empty()) return false;
  auto partial = bind_call(f, call_data, callee);
  if (!partial) return false;
  const std::vector<ir::Dim> syms = import_symbols(f, callee, *partial);

  std::set<std::string> value_names, block_names;
  for (ir::BlockId b : f.blocks()) {
    if (!f.block(b).name.empty()) block_names.insert(f.block(b).name);
    for (ir::ValueId v : f.block(b).args)
      if (!f.value(v).name.empty()) value_names.insert(f.value(v).name);
    for (ir::InstId i : f.insts(b))
      for (ir::ValueId v : f.inst(i).results)
        if (!f.value(v).name.empty()) value_names.insert(f.value(v).name);
  }
  auto copy_name = [&](const std::string& n) { return n.empty() ? n : unique_name(n, value_names); };

  std::vector<ir::ValueId> vmap(callee.num_values());
  std::vector<ir::BlockId> bmap(callee.num_blocks());
  std::vector<bool> created(0);  // by caller ValueId index: made by this inlining
  auto mark_created = [&](ir::ValueId v) {
    if (created.size() <= v.index) created.resize(v.index + 1, false);
    created[v.index] = true;
  };
  const auto entry_args = callee.args();
  for (std::size_t a = 0; a < entry_args.size(); ++a) vmap[entry_args[a].index] = call_data.operands.at(a);

  const ir::BlockId head = call_data.block;
  const bool single = callee.blocks().size() == 1;
  ir::BlockId cont;
  if (!single) {
    // Split the caller's block after the call; the tail moves to the continuation.
    cont = f.add_block();
    auto& order = f.block(head).insts;
    auto pos = std::find(order.begin(), order.end(), call);
    TERNJIT_CHECK(pos != order.end(), "inline-calls: call not in its block");
    std::vector<ir::InstId> tail(pos + 1, order.end());
    order.erase(pos + 1, order.end());
    for (ir::InstId t : tail) {
      f.block(cont).insts.push_back(t);
      f.inst(t).block = cont;
    }
    for (ir::ValueId r : call_data.results) {
      std::string name = std::move(f.value(r).name);
      f.value(r).name.clear();
      ir::ValueId arg = f.add_block_arg(cont, f.type_of(r), std::move(name));
      f.replace_all_uses(r, arg);
    }
  }
  for (ir::BlockId cb : callee.blocks()) {
    if (cb == callee.entry()) {
      bmap[cb.index] = head;
      continue;
    }
    const ir::BlockData& bd = callee.block(cb);
    ir::BlockId nb = f.add_block(bd.name.empty() ? std::string() : unique_name(bd.name, block_names));
    bmap[cb.index] = nb;
    for (ir::ValueId a : bd.args) {
      ir::ValueId na = f.add_block_arg(nb, map_type(callee.type_of(a), syms), copy_name(callee.value(a).name));
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
      ir::InstId ni = single ? f.insert_inst_before(call, op, {}, std::move(types), attrs, d.loc)
                             : f.append_inst(bmap[cb.index], op, {}, std::move(types), attrs, d.loc);
      for (std::size_t r = 0; r < d.results.size(); ++r) {
        ir::ValueId nv = f.inst(ni).results[r];
        f.value(nv).name = copy_name(callee.value(d.results[r]).name);
        vmap[d.results[r].index] = nv;
        mark_created(nv);
      }
      if (d.op == ir::Op::Call) depths[ni.index] = depth + 1;
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
    ir::InstData& n = f.inst(ni);
    if (d.op == ir::Op::Ret) {
      n.targets = {ir::BlockCall{cont, mapped(d.operands)}};
      continue;
    }
    n.operands = mapped(d.operands);
    for (const ir::BlockCall& c : d.targets) n.targets.push_back(ir::BlockCall{bmap.at(c.block.index), mapped(c.args)});
  }

  if (single) {
    const std::vector<ir::ValueId> values = mapped(returned);
    TERNJIT_CHECK(values.size() == call_data.results.size(), "inline-calls: ret arity differs from the call");
    for (std::size_t r = 0; r < values.size(); ++r) {
      const ir::ValueId res = call_data.results[r], v = values[r];
      TERNJIT_CHECK(f.type_of(res) == f.type_of(v), "inline-calls: inlined result type differs from the call's");
      // The call result's name is the caller's; it moves to the value that replaces it.
      if (!f.value(res).name.empty() && v.index < created.size() && created[v.index]) {
        f.value(v).name = std::move(f.value(res).name);
        f.value(res).name.clear();
        created[v.index] = false;  // renamed once
      }
      f.replace_all_uses(res, v);
    }
  }
  for (ir::ValueId r : call_data.results) f.value(r).name.clear();
  f.erase_inst(call);
  return true;
}

void inline_into(ir::Function& f, const ir::Module& original) {
  std::map<std::uint32_t, int> depths;  // call InstId index -> nesting depth (absent: 0)
  std::set<std::uint32_t> kept;         // calls that stay calls
  for (;;) {
    std::optional<ir::InstId> next;
    for (ir::BlockId b : f.blocks()) {
      for (ir::InstId i : f.insts(b)) {
        if (f.inst(i).op != ir::Op::Call || kept.count(i.index)) continue;
        next = i;
        break;
      }
      if (next) break;
    }
    if (!next) return;
    const auto it = depths.find(next->index);
    const int depth = it == depths.end() ? 0 : it->second;
    const ir::Function* callee = original.find_function(std::get<ir::CallAttrs>(f.inst(*next).attrs).callee);
    TERNJIT_CHECK(callee != nullptr, "inline-calls: verified call to an unknown function");
    if (depth >= kMaxInlineDepth || !inline_one(f, *next, *callee, depth, depths)) kept.insert(next->index);
  }
}

}  // namespace

void inline_calls(ir::Module& m) {
  const ir::Module original = m;
  for (ir::Function& f : m.functions()) inline_into(f, original);
}

}  // namespace ternjit::passes
