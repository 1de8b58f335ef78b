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

// Rebuilds each block's instruction list in one scan per sweep: a folded instruction's
// constants are appended where it stood, and uses of its results are redirected once at
// the end (inserting and redirecting per fold made 50,000 folds take 27 s).
class Folder {
 public:
  explicit Folder(ir::Function& f) : f_(f) {}

  // One sweep over every block; true when something was folded.
  bool sweep() {
    bool changed = false;
    for (ir::BlockId b : f_.blocks()) {
      const std::vector<ir::InstId> old = std::move(f_.block(b).insts);
      f_.block(b).insts.clear();
      for (ir::InstId i : old) {
        for (ir::ValueId& v : f_.inst(i).operands) v = resolve(v);
        if (f_.inst(i).op == ir::Op::CondBr) {
          changed |= fold_branch(f_, i);
          f_.block(b).insts.push_back(i);
        } else if (fold(b, i)) {
          changed = true;
        } else {
          f_.block(b).insts.push_back(i);
        }
      }
    }
    f_.erase_insts(folded_);
    folded_.clear();
    return changed;
  }

  void finish() { f_.replace_uses(replaced_); }

 private:
  [[nodiscard]] ir::ValueId resolve(ir::ValueId v) const {
    return v.index < replaced_.size() && replaced_[v.index].valid() ? replaced_[v.index] : v;
  }

  // Folds `i` (already taken out of block `b`'s list) into constants appended to `b`;
  // false when it stays.
  bool fold(ir::BlockId b, ir::InstId i) {
    if (!foldable(f_, f_.inst(i))) return false;
    auto values = evaluate(f_, f_.inst(i));
    if (!values) return false;
    const std::vector<ir::ValueId> results = f_.inst(i).results;
    TERNJIT_CHECK(values->size() == results.size(), "fold-constants: interpreter returned a wrong result count");
    for (std::size_t r = 0; r < results.size(); ++r) {
      ir::InstId c = f_.append_inst(b, ir::Op::Const, {}, {f_.type_of(results[r])}, const_attrs_of((*values)[r]),
                                    f_.inst(i).loc);
      ir::ValueId folded = f_.inst(c).results[0];
      // The constant takes over the name, so the printed IR stays readable.
      f_.value(folded).name = std::move(f_.value(results[r]).name);
      f_.value(results[r]).name.clear();
      if (replaced_.size() <= results[r].index) replaced_.resize(results[r].index + 1);
      replaced_[results[r].index] = folded;
    }
    folded_.push_back(i);
    return true;
  }

  ir::Function& f_;
  std::vector<ir::ValueId> replaced_;  // by value index: the constant replacing a folded result
  std::vector<ir::InstId> folded_;     // folded this sweep, erased at its end
};

}  // namespace

void fold_constants(ir::Function& f) {
  // Layout order need not follow dominance across blocks, so sweep to a fixed point:
  // that also makes a second run a no-op.
  Folder folder(f);
  while (folder.sweep()) {
  }
  folder.finish();
}

}  // namespace ternjit::passes
