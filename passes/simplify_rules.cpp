// SPDX-License-Identifier: Apache-2.0
// simplify_rules.cpp - the algebraic identities simplify applies, as a table of {name, match, rewrite}.
//
// Every rule is exact under the reference semantics (ir/README.md), for every value
// including NaN, infinities and signed zeros; none relies on fast-math:
//   x * 1, 1 * x, x / 1   -> x       exact for floats (NaN stays NaN) and integers
//   x + 0, 0 + x, x - 0   -> x       integers always; floats only when the constant is
//                                    a float whose sign keeps -0: x + (-0) and x - (+0)
//                                    (x + (+0) turns -0 into +0, so it is not rewritten)
//   x * 0, 0 * x          -> 0       integer results only (float NaN * 0 and inf * 0 are NaN)
//   neg(neg(x))           -> x       integers wrap, so this holds for INT_MIN too
//   relu(relu(x))         -> relu(x)
//   transpose(transpose(x)) with inverse perms, transpose with the identity perm -> x
//   cast to the operand's kind, reshape or broadcast to the operand's type -> x
// A constant is a `const` whose values are all the same (a splat). Every rule also
// requires the replacement to have the replaced result's exact type, so `x + 0` with a
// broadcasting zero (f32[4] + f32[2, 4]) is left alone.
#include <cmath>
#include <cstdint>
#include <optional>
#include <variant>

#include "passes/simplify_internal.h"

namespace ternjit::passes {

namespace {

// ---------------------------------------------------------------- helpers

const ir::InstData* def_of(const ir::Function& f, ir::ValueId v) {
  const ir::ValueData& vd = f.value(v);
  if (vd.def != ir::ValueDef::InstResult) return nullptr;
  const ir::InstData& d = f.inst(vd.inst);
  return d.erased ? nullptr : &d;
}

// Bitwise value equality: -0 and +0 differ, NaN equals NaN.
bool same_value(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return a == b && std::signbit(a) == std::signbit(b);
}

// The value of a splat constant (a `const` whose values are all the same).
std::optional<double> splat(const ir::Function& f, ir::ValueId v) {
  const ir::InstData* d = def_of(f, v);
  if (!d || d->op != ir::Op::Const) return std::nullopt;
  const auto& values = std::get<ir::ConstAttrs>(d->attrs).values;
  if (values.empty()) return std::nullopt;
  for (double x : values)
    if (!same_value(x, values[0])) return std::nullopt;
  return values[0];
}

bool splat_is(const ir::Function& f, ir::ValueId v, double c) {
  auto s = splat(f, v);
  return s && *s == c;
}

const ir::Type& result_type(const ir::Function& f, const ir::InstData& inst) {
  return f.type_of(inst.results[0]);
}

// True when `v` may replace inst's result: exactly the same type.
bool forwards(const ir::Function& f, const ir::InstData& inst, ir::ValueId v) {
  return f.type_of(v) == result_type(f, inst);
}

// `c` is an identity of `x + c` for the result kind `k`: any zero for integers; for
// floats only a float -0 (+0 would turn x = -0 into +0).
bool add_identity(const ir::Function& f, ir::ValueId c, ElemKind k) {
  auto s = splat(f, c);
  if (!s || *s != 0) return false;
  return is_integer(k) || (is_float(f.type_of(c).elem) && std::signbit(*s));
}

// `c` is an identity of `x - c` for the result kind `k`: any zero for integers; for
// floats a float +0 (x - (+0) keeps -0; x - (-0) does not).
bool sub_identity(const ir::Function& f, ir::ValueId c, ElemKind k) {
  auto s = splat(f, c);
  if (!s || *s != 0) return false;
  return is_integer(k) || (is_float(f.type_of(c).elem) && !std::signbit(*s));
}

ir::ValueId first_operand(ir::Function& f, ir::InstId i) { return f.inst(i).operands[0]; }
ir::ValueId second_operand(ir::Function& f, ir::InstId i) { return f.inst(i).operands[1]; }

// The operand of the operand: neg(neg(x)) -> x.
ir::ValueId inner_operand(ir::Function& f, ir::InstId i) {
  return def_of(f, f.inst(i).operands[0])->operands[0];
}

// ---------------------------------------------------------------- match functions

bool mul_one(const ir::Function& f, const ir::InstData& d) {
  return splat_is(f, d.operands[1], 1) && forwards(f, d, d.operands[0]);
}
bool one_mul(const ir::Function& f, const ir::InstData& d) {
  return splat_is(f, d.operands[0], 1) && forwards(f, d, d.operands[1]);
}
bool div_one(const ir::Function& f, const ir::InstData& d) {
  return splat_is(f, d.operands[1], 1) && forwards(f, d, d.operands[0]);
}
bool add_zero(const ir::Function& f, const ir::InstData& d) {
  return add_identity(f, d.operands[1], result_type(f, d).elem) && forwards(f, d, d.operands[0]);
}
bool zero_add(const ir::Function& f, const ir::InstData& d) {
  return add_identity(f, d.operands[0], result_type(f, d).elem) && forwards(f, d, d.operands[1]);
}
bool sub_zero(const ir::Function& f, const ir::InstData& d) {
  return sub_identity(f, d.operands[1], result_type(f, d).elem) && forwards(f, d, d.operands[0]);
}
bool mul_zero(const ir::Function& f, const ir::InstData& d) {
  return is_integer(result_type(f, d).elem) && (splat_is(f, d.operands[0], 0) || splat_is(f, d.operands[1], 0));
}
// `op(op(x))` where the outer result may be replaced by `x` (neg) or by the inner
// result (relu): checked on the value the rewrite returns.
bool neg_neg(const ir::Function& f, const ir::InstData& d) {
  const ir::InstData* inner = def_of(f, d.operands[0]);
  return inner && inner->op == ir::Op::Neg && forwards(f, d, inner->operands[0]);
}
bool relu_relu(const ir::Function& f, const ir::InstData& d) {
  const ir::InstData* inner = def_of(f, d.operands[0]);
  return inner && inner->op == ir::Op::Relu && forwards(f, d, d.operands[0]);
}
bool transpose_inverse(const ir::Function& f, const ir::InstData& d) {
  const ir::InstData* inner = def_of(f, d.operands[0]);
  if (!inner || inner->op != ir::Op::Transpose || !forwards(f, d, inner->operands[0])) return false;
  // Result dim i is inner's dim q[i], which is x's dim p[q[i]]: the identity iff p[q[i]] == i.
  const auto& q = std::get<ir::PermAttrs>(d.attrs).perm;
  const auto& p = std::get<ir::PermAttrs>(inner->attrs).perm;
  if (p.size() != q.size()) return false;
  for (std::size_t i = 0; i < q.size(); ++i)
    if (q[i] < 0 || static_cast<std::size_t>(q[i]) >= p.size() || p[q[i]] != static_cast<std::int64_t>(i))
      return false;
  return true;
}
bool transpose_identity(const ir::Function& f, const ir::InstData& d) {
  const auto& perm = std::get<ir::PermAttrs>(d.attrs).perm;
  for (std::size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != static_cast<std::int64_t>(i)) return false;
  return forwards(f, d, d.operands[0]);
}
bool same_type(const ir::Function& f, const ir::InstData& d) { return forwards(f, d, d.operands[0]); }

// ---------------------------------------------------------------- rewrite functions

ir::ValueId zero_of_result_type(ir::Function& f, ir::InstId i) {
  const ir::InstData& d = f.inst(i);
  ir::Type t = f.type_of(d.results[0]);
  SourceLoc loc = d.loc;
  ir::InstId c = f.insert_inst_before(i, ir::Op::Const, {}, {std::move(t)}, ir::ConstAttrs{{0.0}}, std::move(loc));
  return f.inst(c).results[0];
}

constexpr SimplifyRule kRules[] = {
    {"mul-one", ir::Op::Mul, &mul_one, &first_operand},
    {"one-mul", ir::Op::Mul, &one_mul, &second_operand},
    {"mul-zero", ir::Op::Mul, &mul_zero, &zero_of_result_type},
    {"div-one", ir::Op::Div, &div_one, &first_operand},
    {"add-zero", ir::Op::Add, &add_zero, &first_operand},
    {"zero-add", ir::Op::Add, &zero_add, &second_operand},
    {"sub-zero", ir::Op::Sub, &sub_zero, &first_operand},
    {"neg-neg", ir::Op::Neg, &neg_neg, &inner_operand},
    {"relu-relu", ir::Op::Relu, &relu_relu, &first_operand},
    {"transpose-inverse", ir::Op::Transpose, &transpose_inverse, &inner_operand},
    {"transpose-identity", ir::Op::Transpose, &transpose_identity, &first_operand},
    {"cast-same-kind", ir::Op::Cast, &same_type, &first_operand},
    {"reshape-same-type", ir::Op::Reshape, &same_type, &first_operand},
    {"broadcast-same-type", ir::Op::Broadcast, &same_type, &first_operand},
};

}  // namespace

std::span<const SimplifyRule> simplify_rules() { return kRules; }

}  // namespace ternjit::passes
