// SPDX-License-Identifier: Apache-2.0
// fold_constants.cpp - evaluate instructions whose operands are all constants.
//
// What: a pure instruction whose operands are all `const` results is evaluated at
// compile time and each of its results becomes a `const` (a splat when all elements
// are equal). The evaluation runs the reference interpreter (ir/interpret.h) on a
// one-instruction function, so folding can never disagree with the reference
// semantics: no op is re-implemented here.
// Why: the DSL and the other passes leave constant arithmetic behind (scales, eps,
// broadcast constants); folding it removes work from every kernel.
// Preconditions: verified IR. Only static-shaped operands and results with at most
// kMaxFoldElements elements each are folded, so a huge constant is never
// materialized; an evaluation that fails (integer division by zero, reduce_max of an
// empty axis) is left to fail at run time. The now-unused operands are left for
// eliminate-dead-code. A `cond_br` on a constant becomes a `br`. Running it twice
// changes nothing the second time.
//
//   %0 = const {value = 2} : f32[]                 %0 = const {value = 2} : f32[]
//   %1 = const {value = 3} : f32[]         ->      %1 = const {value = 3} : f32[]
//   %2 = add %0, %1 : f32[]                        %2 = const {value = 5} : f32[]
//   %3 = const {value = 4} : f32[]                 %3 = const {value = 4} : f32[]
//   %4 = mul %2, %3 : f32[]                        %4 = const {value = 20} : f32[]
#include <cmath>
#include <cstdint>
#include <optional>
#include <vector>

#include "ir/interpret.h"
#include "passes/passes.h"

namespace ternjit::passes {

namespace {

/// The most elements an operand or a result of a folded instruction may have.
constexpr std::int64_t kMaxFoldElements = 4096;

// Plain layout only: a packed weight layout is not something a `const` can hold.
bool small_static(const ir::Type& t) {
  auto n = t.static_numel();
  return n && *n <= kMaxFoldElements && t.layout == WeightFormat::Plain;
}

// The `const` instruction defining `v`, or nullptr (block argument, other op).
const ir::InstData* const_def(const ir::Function& f, ir::ValueId v) {
  const ir::ValueData& vd = f.value(v);
  if (vd.def != ir::ValueDef::InstResult) return nullptr;
  const ir::InstData& d = f.inst(vd.inst);
  return d.op == ir::Op::Const && !d.erased ? &d : nullptr;
}

bool foldable(const ir::Function& f, const ir::InstData& inst) {
  // Ops without operands (const, param) are sources, not computations.
  if (ir::op_flags(inst.op) != ir::OpFlags::Pure || inst.operands.empty()) return false;
  for (ir::ValueId v : inst.operands)
    if (!const_def(f, v) || !small_static(f.type_of(v))) return false;
  for (ir::ValueId r : inst.results)
    if (!small_static(f.type_of(r))) return false;
  return true;
}

// Bitwise equality of element values, so that -0 and +0 differ and NaN equals NaN.
bool same_value(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return a == b && std::signbit(a) == std::signbit(b);
}

ir::ConstAttrs const_attrs_of(const ir::HostTensor& t) {
  // An empty tensor still needs one value (a splat of nothing).
  if (t.data.empty()) return ir::ConstAttrs{{0.0}};
  for (double v : t.data)
    if (!same_value(v, t.data[0])) return ir::ConstAttrs{t.data};
  return ir::ConstAttrs{{t.data[0]}};
}

// Evaluates `inst` with the reference interpreter on a function holding copies of its
// constant operands, the instruction itself and a `ret` of its results. nullopt when
// the evaluation fails: the failure is then left for run time.
std::optional<std::vector<ir::HostTensor>> evaluate(const ir::Function& f, const ir::InstData& inst) {
  ir::Module scratch;
  ir::Function g("fold");
  ir::BlockId b = g.add_block();
  std::vector<ir::ValueId> operands;
  for (ir::ValueId v : inst.operands) {
    ir::InstId c = g.append_inst(b, ir::Op::Const, {}, {f.type_of(v)}, const_def(f, v)->attrs);
    operands.push_back(g.inst(c).results[0]);
  }
  std::vector<ir::Type> result_types;
  for (ir::ValueId r : inst.results) result_types.push_back(f.type_of(r));
  ir::InstId i = g.append_inst(b, inst.op, operands, result_types, inst.attrs);
  g.append_inst(b, ir::Op::Ret, g.inst(i).results, {});
  g.set_result_types(result_types);
  scratch.functions().push_back(std::move(g));

  ir::InterpretOptions options;
  options.max_steps = 64;
  auto out = ir::interpret(scratch, scratch.functions()[0], {}, ir::ParamValues{}, options);
  if (!out.ok()) return std::nullopt;
  return std::move(out).value();
}

// A `cond_br` on a constant condition becomes a `br` to the target it always takes
// (nonzero: the first); the other edge disappears and eliminate-dead-code can drop
// the block if nothing else reaches it. True when rewritten.
bool fold_branch(ir::Function& f, ir::InstId i) {
  ir::InstData& inst = f.inst(i);
  const ir::InstData* c = const_def(f, inst.operands[0]);
  if (!c) return false;
  const double cond = std::get<ir::ConstAttrs>(c->attrs).values.at(0);
  ir::BlockCall taken = inst.targets.at(cond != 0 ? 0 : 1);
  inst.op = ir::Op::Br;
  inst.operands.clear();
  inst.targets = {std::move(taken)};
  return true;
}

// Folds one instruction; true when it was replaced by constants.
bool fold(ir::Function& f, ir::InstId i) {
  if (f.inst(i).op == ir::Op::CondBr) return fold_branch(f, i);
  if (!foldable(f, f.inst(i))) return false;
  auto values = evaluate(f, f.inst(i));
  if (!values) return false;
  const std::vector<ir::ValueId> results = f.inst(i).results;
  TERNJIT_CHECK(values->size() == results.size(), "fold-constants: interpreter returned a wrong result count");
  for (std::size_t r = 0; r < results.size(); ++r) {
    ir::InstId c = f.insert_inst_before(i, ir::Op::Const, {}, {f.type_of(results[r])},
                                        const_attrs_of((*values)[r]), f.inst(i).loc);
    ir::ValueId folded = f.inst(c).results[0];
    // The constant takes over the name, so the printed IR stays readable.
    f.value(folded).name = std::move(f.value(results[r]).name);
    f.value(results[r]).name.clear();
    f.replace_all_uses(results[r], folded);
  }
  f.erase_inst(i);
  return true;
}

}  // namespace

void fold_constants(ir::Function& f) {
  // Layout order need not follow dominance across blocks, so sweep to a fixed point:
  // that also makes a second run a no-op.
  for (bool changed = true; changed;) {
    changed = false;
    for (ir::BlockId b : f.blocks()) {
      const std::vector<ir::InstId> insts(f.insts(b).begin(), f.insts(b).end());
      for (ir::InstId i : insts) changed |= fold(f, i);
    }
  }
}

}  // namespace ternjit::passes
