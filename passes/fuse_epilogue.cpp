// SPDX-License-Identifier: Apache-2.0
// fuse_epilogue.cpp - fold the scale, bias, residual and activation that follow a tmatmul into it.
//
// What: while the result of a `tmatmul` has exactly one use and that use is a `mul` by
// a per-row [..., 1] f32 tensor (the x_scale slot), a `mul` by a per-channel [N] or
// scalar [] f32 tensor (w_scale), an `add` of a bias [N] or of a residual of the
// result type, or relu/gelu/silu/sigmoid/tanh, the tmatmul absorbs it: one new tmatmul
// with that epilogue operand (or activation) replaces the pair. The epilogue applies
// its steps in the fixed order x_scale, w_scale, bias, residual, act, so a step is
// absorbed only while its slot is free and no later step is set (a `mul` after an
// `add` stops the chain; a second scale is not combined, since (y*a)*b != y*(a*b) in
// floating point).
// Why: one kernel then does a whole BitLinear layer (matmul, scales, bias, activation)
// without writing the intermediate tensors.
// Exactness: each epilogue step is computed exactly as the standalone op at the
// result kind (ir/README.md, tmatmul), and only ops whose result type equals the
// tmatmul's are absorbed, so the rewrite is bit-exact.
// Preconditions: verified IR. The new tmatmul is placed where the absorbed op was:
// the tmatmul's operands dominate it, and so does the new epilogue operand.
//
//   %y = tmatmul %q, %w, %s {x_scale = true, w_scale = false, ...} : f32[N, 10]
//   %z = mul %y, %g : f32[N, 10]         ->   %r = tmatmul %q, %w, %s, %g
//   %r = relu %z : f32[N, 10]                  {x_scale = true, w_scale = true, bias = false,
//                                               residual = false, act = relu} : f32[N, 10]
#include <optional>
#include <vector>

#include "passes/epilogue_internal.h"
#include "passes/passes.h"

namespace ternjit::passes {

namespace {

using ir::InstId;
using ir::ValueId;

// The single instruction using `v` (as an operand), or nothing when v has no use,
// several uses, or is passed to a block.
std::optional<InstId> single_user(const ir::Function& f, ValueId v) {
  std::optional<InstId> user;
  int uses = 0;
  for (ir::BlockId b : f.blocks())
    for (InstId i : f.insts(b)) {
      const ir::InstData& d = f.inst(i);
      for (ValueId o : d.operands)
        if (o == v) {
          ++uses;
          user = i;
        }
      for (const ir::BlockCall& c : d.targets)
        for (ValueId a : c.args) uses += a == v ? 2 : 0;  // a branch argument cannot be absorbed
    }
  if (uses != 1) return std::nullopt;
  return user;
}

// Is `t` the type `want` with its last dim replaced by 1 (the per-row x_scale shape)?
bool is_row_scale(const ir::Type& t, const ir::Type& result) {
  ir::Type want{ElemKind::F32, result.shape};
  if (want.shape.empty()) return false;
  want.shape.back() = ir::Dim::fixed(1);
  return t == want;
}

// Absorbs the single user of tmatmul `mm` when it matches; returns the new tmatmul.
std::optional<InstId> absorb_one(ir::Function& f, InstId mm) {
  const ValueId y = f.inst(mm).results[0];
  const std::optional<InstId> user = single_user(f, y);
  if (!user) return std::nullopt;
  const std::optional<EpilogueMatch> m = match_epilogue(f, mm, *user);
  if (!m) return std::nullopt;

  // The new operand list keeps the fixed slot order: x, w, x_scale, w_scale, bias, residual.
  const ir::InstData& old = f.inst(mm);
  const ir::TMatMulAttrs& before = std::get<ir::TMatMulAttrs>(old.attrs);
  std::vector<ValueId> operands{old.operands[0], old.operands[1]};
  std::size_t next = 2;
  const bool had[] = {before.x_scale, before.w_scale, before.bias, before.residual};
  const bool has[] = {m->attrs.x_scale, m->attrs.w_scale, m->attrs.bias, m->attrs.residual};
  for (int slot = 0; slot < 4; ++slot) {
    if (had[slot]) operands.push_back(old.operands[next++]);
    else if (has[slot]) operands.push_back(m->operand);
  }
  const ValueId z = f.inst(*user).results[0];
  const InstId fused = f.insert_inst_before(*user, ir::Op::TMatMul, std::move(operands), {f.type_of(z)}, m->attrs,
                                            f.inst(*user).loc);
  const ValueId r = f.inst(fused).results[0];
  f.replace_all_uses(z, r);
  // The kernel keeps a name: the absorbed value's, else the tmatmul's.
  f.value(r).name = std::move(f.value(f.value(z).name.empty() ? y : z).name);
  f.value(y).name.clear();
  f.value(z).name.clear();
  f.erase_inst(*user);
  f.erase_inst(mm);
  return fused;
}

}  // namespace

std::optional<EpilogueMatch> match_epilogue(const ir::Function& f, InstId mm, InstId user) {
  const ir::InstData& d = f.inst(mm);
  const ir::InstData& u = f.inst(user);
  if (d.op != ir::Op::TMatMul || u.results.size() != 1) return std::nullopt;
  const ValueId y = d.results[0];
  if (single_user(f, y) != user) return std::nullopt;
  const ir::Type& yt = f.type_of(y);
  if (!(f.type_of(u.results[0]) == yt)) return std::nullopt;  // no kind change, no broadcast to a larger shape
  const auto& a = std::get<ir::TMatMulAttrs>(d.attrs);
  EpilogueMatch m{a, ValueId{}};

  if (auto act = ir::activation_of(u.op)) {
    if (a.act != ir::Activation::None) return std::nullopt;
    m.attrs.act = *act;
    return m;
  }
  if (u.op != ir::Op::Mul && u.op != ir::Op::Add) return std::nullopt;
  if (u.operands.size() != 2 || (u.operands[0] == y) == (u.operands[1] == y)) return std::nullopt;
  // Both ops commute exactly in IEEE arithmetic, so y may be either operand.
  const ValueId other = u.operands[0] == y ? u.operands[1] : u.operands[0];
  const ir::Type& ot = f.type_of(other);
  m.operand = other;
  const ir::Dim n = yt.shape.back();
  if (u.op == ir::Op::Mul) {
    if (ot.elem != ElemKind::F32) return std::nullopt;
    // A grouped w_scale is applied inside the accumulation, before x_scale.
    const bool scale_free = !a.w_scale || a.group > 0;
    if (is_row_scale(ot, yt) && !a.x_scale && scale_free && !a.bias && !a.residual && a.act == ir::Activation::None) {
      m.attrs.x_scale = true;
      return m;
    }
    const bool per_channel = ot.rank() == 0 || (ot.rank() == 1 && ot.shape[0] == n);
    if (per_channel && !a.w_scale && !a.bias && !a.residual && a.act == ir::Activation::None) {
      m.attrs.w_scale = true;
      return m;
    }
    return std::nullopt;
  }
  // add: a bias [N] of the result kind, else a residual of the result type.
  if (ot == ir::Type{yt.elem, {n}} && !a.bias && !a.residual && a.act == ir::Activation::None) {
    m.attrs.bias = true;
    return m;
  }
  if (ot == yt && !a.residual && a.act == ir::Activation::None) {
    m.attrs.residual = true;
    return m;
  }
  return std::nullopt;
}

void fuse_epilogue(ir::Function& f) {
  for (ir::BlockId b : std::vector<ir::BlockId>(f.blocks().begin(), f.blocks().end())) {
    const std::vector<InstId> insts(f.insts(b).begin(), f.insts(b).end());
    for (InstId i : insts) {
      if (f.inst(i).erased || f.inst(i).op != ir::Op::TMatMul) continue;
      // Each absorption erases the old tmatmul and its user; follow the new one.
      for (std::optional<InstId> cur = i; cur;) cur = absorb_one(f, *cur);
    }
  }
}

}  // namespace ternjit::passes
