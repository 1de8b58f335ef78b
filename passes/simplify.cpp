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

// Sweeps until no rule fires. Uses of a replaced instruction's result are redirected
// lazily (operands are resolved before matching) and once at the end, and the replaced
// instructions are erased together after each sweep: per-rewrite redirecting and
// erasing made N rewrites cost N passes over the function.
class Simplifier {
 public:
  explicit Simplifier(ir::Function& f) : f_(f) {}

  // One sweep; true when a rule fired.
  bool sweep() {
    bool changed = false;
    for (ir::BlockId b : f_.blocks()) {
      const std::vector<ir::InstId> insts(f_.insts(b).begin(), f_.insts(b).end());
      for (ir::InstId i : insts) changed |= simplify_inst(i);
    }
    f_.erase_insts(replaced_insts_);
    replaced_insts_.clear();
    return changed;
  }

  void finish() { f_.replace_uses(replaced_); }

 private:
  [[nodiscard]] ir::ValueId resolve(ir::ValueId v) const {
    while (v.index < replaced_.size() && replaced_[v.index].valid()) v = replaced_[v.index];
    return v;
  }

  // Applies the first matching rule to `i`; true when it fired.
  bool simplify_inst(ir::InstId i) {
    for (ir::ValueId& v : f_.inst(i).operands) v = resolve(v);
    for (const SimplifyRule& rule : simplify_rules()) {
      const ir::InstData& d = f_.inst(i);
      if (d.erased || rule.op != d.op || !rule.match(f_, d)) continue;
      const ir::ValueId result = d.results[0];
      const ir::ValueId replacement = resolve(rule.rewrite(f_, i));
      TERNJIT_CHECK(f_.type_of(replacement) == f_.type_of(result),
                    "simplify rule '" + std::string(rule.name) + "' changed the type of a value");
      if (replaced_.size() <= result.index) replaced_.resize(result.index + 1);
      replaced_[result.index] = replacement;
      replaced_insts_.push_back(i);
      return true;
    }
    return false;
  }

  ir::Function& f_;
  std::vector<ir::ValueId> replaced_;      // by value index: what replaces a result
  std::vector<ir::InstId> replaced_insts_; // replaced this sweep, erased at its end
};

}  // namespace

void simplify(ir::Function& f) {
  Simplifier s(f);
  while (s.sweep()) {
  }
  s.finish();
}

}  // namespace ternjit::passes
