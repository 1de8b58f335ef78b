// SPDX-License-Identifier: Apache-2.0
// select_layout.cpp - repack the ternary weights of tmatmul kernels once, into the target's layout.
//
// What: for each `tmatmul` whose weight (operand 2) is a load-time value, that is a
// plain t2 `param` or the values of a `tquantize` of a `param`, insert one
// `tpack {layout = L}` right after its definition, with L = target.weight_layout, and
// make the tmatmul read the packed value. The tpack is shared by every tmatmul reading
// the same weight. A weight already packed, or computed per call, is left alone.
// Plain (the reference target's default) changes nothing.
// Why: the target's kernels read weights in their own packed order. The repack depends
// only on parameters, and tpack is pure, so an engine evaluates it once when it loads
// the parameters, never per call. The layout is part of the weight's type
// (t2<tern2>[K, N]), so no other op can read the packed value by mistake.
// Preconditions: verified IR. Values are unchanged (tpack is the identity on values).
//
//   %w = param @layer.w : t2[64, 10]            %w = param @layer.w : t2[64, 10]
//   %y = tmatmul %x, %w {...} : f32[N, 10]  ->  %0 = tpack %w {layout = tern2} : t2<tern2>[64, 10]
//                                               %y = tmatmul %x, %0 {...} : f32[N, 10]
#include <map>
#include <optional>
#include <vector>

#include "passes/passes.h"

namespace ternjit::passes {

namespace {

using ir::InstId;
using ir::ValueId;

// Whether `w` is known when parameters are loaded: a param, or tquantize of a param.
bool is_load_time_weight(const ir::Function& f, ValueId w) {
  const ir::ValueData& v = f.value(w);
  if (v.def != ir::ValueDef::InstResult) return false;
  const ir::InstData& d = f.inst(v.inst);
  if (d.op == ir::Op::Param) return true;
  if (d.op != ir::Op::TQuantize || v.index != 0) return false;
  const ir::ValueData& src = f.value(d.operands[0]);
  return src.def == ir::ValueDef::InstResult && f.inst(src.inst).op == ir::Op::Param;
}

}  // namespace

void select_layout(ir::Function& f, const TargetInfo& target) {
  if (target.weight_layout == WeightFormat::Plain) return;
  std::map<std::uint32_t, ValueId> packed;  // weight value index -> its tpack result
  for (ir::BlockId b : std::vector<ir::BlockId>(f.blocks().begin(), f.blocks().end())) {
    const std::vector<InstId> insts(f.insts(b).begin(), f.insts(b).end());
    for (InstId i : insts) {
      if (f.inst(i).op != ir::Op::TMatMul) continue;
      const ValueId w = f.inst(i).operands[1];
      const ir::Type wt = f.type_of(w);
      if (wt.layout != WeightFormat::Plain || !is_load_time_weight(f, w)) continue;
      auto it = packed.find(w.index);
      if (it == packed.end()) {
        // Right after the definition, which dominates every use of the weight.
        const InstId def = f.value(w).inst;
        const auto order = f.insts(f.inst(def).block);
        std::size_t k = 0;
        while (order[k] != def) ++k;
        TERNJIT_CHECK(k + 1 < order.size(), "select-layout: a weight definition ends its block");
        ir::Type pt = wt;
        pt.layout = target.weight_layout;
        const InstId pack = f.insert_inst_before(order[k + 1], ir::Op::TPack, {w}, {pt},
                                                 ir::LayoutAttrs{target.weight_layout}, f.inst(def).loc);
        it = packed.emplace(w.index, f.inst(pack).results[0]).first;
      }
      f.inst(i).operands[1] = it->second;
    }
  }
}

}  // namespace ternjit::passes
