// SPDX-License-Identifier: Apache-2.0
// fuse_quantization.cpp - turn quantize/ternarize chains and ternary matmuls into tmatmul kernels.
//
// What, per instruction in program order:
//  (a) `dequantize(quantize(x))` of the quantize's own values and scales becomes
//      `quantize_int8 x` (its float form, exact by definition) when the types agree.
//      `quantize_int8(quantize_int8(x))` is NOT collapsed: the second quantization
//      recomputes the scale as fl(fl(127 s) / 127), which for about 1% of f32 scales is
//      one ulp off s, so the pair is not exactly the inner one.
//  (b) `matmul(quantize_int8(x), w)` with a plain t2 [K, N] weight and an f32 `x`
//      becomes `%q, %s = quantize x` and `tmatmul %q, %w, %s {x_scale = true}`: int8 x
//      ternary with exact int32 accumulation, the activation scale in the epilogue.
//  (c) a weight `ternarize_absmean(p)` of a float `param` p ([K, N]) becomes
//      `%t, %g = tquantize p` and the tmatmul takes %t with `w_scale = %g`; so does a
//      weight `dequantize(%t, %g)` of one `tquantize`. Combines with (b).
//  (d) `matmul(x, w)` of a float x and a plain t2 [K, N] weight becomes `tmatmul x, w`
//      (exact: a float tmatmul without epilogue is matmul).
//  (e) a `tmatmul` of an f32 `quantize_int8(x)` without x_scale (what the DSL's
//      grouped_matmul makes: `tmatmul %a, %w, %s {w_scale = true, group = 256, ...}`)
//      takes `%q, %s = quantize x` and x_scale, keeping its other operands and flags.
// A rewrite is made only when the tmatmul's result type equals the matmul's (so an f16
// activation times an f32 weight is left alone). The `quantize`/`tquantize` made for a
// source is inserted right after it and shared by all its rewritten users. Producers
// left unused are erased.
// Why: (b)-(d) produce the one kernel op every target lowers; (a) removes redundant
// rounding so that (b) can see through it.
// Exactness: (a) first part, (d): exact. (b), (c), (e): the kernel multiplies the exact
// integer (or double) sum by the scales instead of summing the rounded products
// q*s or t*g, which differs by a few f32 ulps of the sum of |products|.
// Preconditions: verified IR.
//
//   %a = quantize_int8 %x : f32[N, 64]          %q, %s = quantize %x : i8[N, 64], f32[N, 1]
//   %v = ternarize_absmean %p : f32[64, 10]  -> %t, %g = tquantize %p : t2[64, 10], f32[]
//   %y = matmul %a, %v : f32[N, 10]             %y = tmatmul %q, %t, %s, %g {x_scale = true,
//                                                 w_scale = true, bias = false, residual = false,
//                                                 act = none} : f32[N, 10]
#include <algorithm>
#include <map>
#include <optional>
#include <vector>

#include "passes/passes.h"

namespace ternjit::passes {

namespace {

using ir::InstId;
using ir::Op;
using ir::ValueId;

// The instruction defining `v`, when v is an instruction result.
std::optional<InstId> def_of(const ir::Function& f, ValueId v) {
  const ir::ValueData& d = f.value(v);
  if (d.def != ir::ValueDef::InstResult) return std::nullopt;
  return d.inst;
}

// The defining instruction of `v` when it has op `op`.
std::optional<InstId> def_with(const ir::Function& f, ValueId v, Op op) {
  auto i = def_of(f, v);
  if (!i || f.inst(*i).op != op) return std::nullopt;
  return i;
}

bool used(const ir::Function& f, ValueId v) {
  for (ir::BlockId b : f.blocks())
    for (InstId i : f.insts(b)) {
      const ir::InstData& d = f.inst(i);
      for (ValueId o : d.operands)
        if (o == v) return true;
      for (const ir::BlockCall& c : d.targets)
        for (ValueId a : c.args)
          if (a == v) return true;
    }
  return false;
}

// Erases `i` when it is pure and all its results are unused, then its producers likewise
// (a worklist, not recursion: the chain of producers is as long as the input makes it).
void erase_if_dead(ir::Function& f, InstId first) {
  std::vector<InstId> work{first};
  while (!work.empty()) {
    const InstId i = work.back();
    work.pop_back();
    const ir::InstData& d = f.inst(i);
    if (d.erased || ir::op_flags(d.op) != ir::OpFlags::Pure) continue;
    if (std::any_of(d.results.begin(), d.results.end(), [&](ValueId r) { return used(f, r); })) continue;
    const std::vector<ValueId> operands = d.operands;
    f.erase_inst(i);
    for (auto v = operands.rbegin(); v != operands.rend(); ++v)
      if (auto p = def_of(f, *v)) work.push_back(*p);
  }
}

// Inserts an instruction right after `anchor` (never a terminator: it has a result).
InstId insert_after(ir::Function& f, InstId anchor, Op op, std::vector<ValueId> operands,
                    std::vector<ir::Type> types, ir::Attrs attrs) {
  const auto insts = f.insts(f.inst(anchor).block);
  std::size_t k = 0;
  while (insts[k] != anchor) ++k;
  TERNJIT_CHECK(k + 1 < insts.size(), "fuse-quantization: a value-producing instruction ends its block");
  return f.insert_inst_before(insts[k + 1], op, std::move(operands), std::move(types), std::move(attrs),
                              f.inst(anchor).loc);
}

bool is_plain_t2_matrix(const ir::Type& t) {
  return t.elem == ElemKind::T2 && t.rank() == 2 && t.layout == WeightFormat::Plain;
}

class Fuser {
 public:
  explicit Fuser(ir::Function& f) : f_(f) {}

  // (a) dequantize(quantize(x)) -> quantize_int8(x).
  void dequantize_of_quantize(InstId i) {
    const ir::InstData& d = f_.inst(i);
    auto qi = def_with(f_, d.operands[0], Op::Quantize);
    if (!qi || def_of(f_, d.operands[1]) != qi) return;
    const ir::InstData& q = f_.inst(*qi);
    if (q.results[0] != d.operands[0] || q.results[1] != d.operands[1]) return;
    const ValueId x = q.operands[0];
    if (!(f_.type_of(x) == f_.type_of(d.results[0]))) return;
    // The STE clipping attribute travels with the quantizer (quantize <-> quantize_int8).
    const ir::Attrs ste = q.attrs;
    const InstId fq = f_.insert_inst_before(i, Op::QuantizeInt8, {x}, {f_.type_of(x)}, ste, d.loc);
    replace(i, f_.inst(fq).results[0]);
  }

  // (b), (c), (d).
  void matmul(InstId i) {
    // Copies: inserting instructions below reallocates the instruction storage.
    const ir::InstData& d = f_.inst(i);
    const ValueId a = d.operands[0], w = d.operands[1];
    const ir::Type result = f_.type_of(d.results[0]);
    const SourceLoc loc = d.loc;
    if (f_.type_of(a).rank() == 0) return;

    // The activation: int8 when it is quantize_int8 of an f32 tensor.
    std::optional<InstId> fake_x = def_with(f_, a, Op::QuantizeInt8);
    if (fake_x && f_.type_of(a).elem != ElemKind::F32) fake_x.reset();
    if (!fake_x && !is_float(f_.type_of(a).elem)) return;

    // The result type a tmatmul would have must be the matmul's. Every weight form
    // below is a [K, N] matrix.
    const ir::Type wt = f_.type_of(w);
    if (wt.rank() != 2) return;
    ir::Type want{fake_x ? ElemKind::F32 : f_.type_of(a).elem, f_.type_of(a).shape};
    want.shape.back() = wt.shape[1];
    if (!(want == result)) return;

    // The weight: plain t2, or ternarized with a scale.
    ValueId t;
    std::optional<ValueId> g;
    std::optional<InstId> ternarized;
    if (is_plain_t2_matrix(wt)) {
      t = w;
    } else if (auto ta = def_with(f_, w, Op::TernarizeAbsmean);
               ta && def_with(f_, f_.inst(*ta).operands[0], Op::Param)) {
      auto [tv, gv] = tquantize_for(*ta);
      t = tv;
      g = gv;
      ternarized = ta;
    } else if (auto dq = def_with(f_, w, Op::Dequantize)) {
      const ir::InstData& dd = f_.inst(*dq);
      auto tq = def_with(f_, dd.operands[0], Op::TQuantize);
      if (!tq || def_of(f_, dd.operands[1]) != tq || f_.inst(*tq).results[0] != dd.operands[0] ||
          f_.inst(*tq).results[1] != dd.operands[1] || !is_plain_t2_matrix(f_.type_of(dd.operands[0])))
        return;
      t = dd.operands[0];
      g = dd.operands[1];
      ternarized = dq;
    } else {
      return;
    }

    ir::TMatMulAttrs attrs;
    std::vector<ValueId> operands;
    if (fake_x) {
      auto [q, s] = quantize_for(*fake_x);
      operands = {q, t, s};
      attrs.x_scale = true;
    } else {
      operands = {a, t};
    }
    if (g) {
      operands.push_back(*g);
      attrs.w_scale = true;
    }
    const InstId mm = f_.insert_inst_before(i, Op::TMatMul, std::move(operands), {result}, attrs, loc);
    replace(i, f_.inst(mm).results[0]);
    if (fake_x) erase_if_dead(f_, *fake_x);
    if (ternarized) erase_if_dead(f_, *ternarized);
  }

  // (e) tmatmul(quantize_int8(x), w, ...) -> tmatmul(q, w, s, ...) {x_scale = true}.
  void tmatmul(InstId i) {
    const ir::InstData& d = f_.inst(i);
    ir::TMatMulAttrs attrs = std::get<ir::TMatMulAttrs>(d.attrs);
    const ValueId a = d.operands[0];
    std::optional<InstId> fake_x = def_with(f_, a, Op::QuantizeInt8);
    if (attrs.x_scale || !fake_x || f_.type_of(a).elem != ElemKind::F32) return;
    std::vector<ValueId> rest(d.operands.begin() + 1, d.operands.end());
    const ir::Type result = f_.type_of(d.results[0]);
    const SourceLoc loc = d.loc;
    auto [q, s] = quantize_for(*fake_x);
    std::vector<ValueId> operands{q, rest[0], s};
    operands.insert(operands.end(), rest.begin() + 1, rest.end());
    attrs.x_scale = true;
    const InstId mm = f_.insert_inst_before(i, Op::TMatMul, std::move(operands), {result}, attrs, loc);
    replace(i, f_.inst(mm).results[0]);
    erase_if_dead(f_, *fake_x);
  }

 private:
  // Redirects the uses of i's single result to `v` and erases i (and dead producers).
  void replace(InstId i, ValueId v) {
    const ValueId old = f_.inst(i).results[0];
    f_.replace_all_uses(old, v);
    if (f_.value(v).name.empty()) f_.value(v).name = std::move(f_.value(old).name);  // a fresh value takes the name
    f_.value(old).name.clear();
    erase_if_dead(f_, i);
  }

  // `quantize x` for the quantize_int8 `fake` (one per source, right after it).
  std::pair<ValueId, ValueId> quantize_for(InstId fake) {
    auto it = quantized_.find(fake.index);
    if (it != quantized_.end()) return it->second;
    const ValueId x = f_.inst(fake).operands[0];
    ir::Type scales{ElemKind::F32, f_.type_of(x).shape};
    scales.shape.back() = ir::Dim::fixed(1);
    const ir::Attrs ste = f_.inst(fake).attrs;  // quantize_int8's STE clipping, carried over
    const InstId q =
        insert_after(f_, fake, Op::Quantize, {x}, {ir::Type{ElemKind::I8, f_.type_of(x).shape}, scales}, ste);
    const std::pair<ValueId, ValueId> out{f_.inst(q).results[0], f_.inst(q).results[1]};
    quantized_.emplace(fake.index, out);
    return out;
  }

  // `tquantize p` for the ternarize_absmean `ta` of p (one per source, right after it).
  std::pair<ValueId, ValueId> tquantize_for(InstId ta) {
    auto it = ternarized_.find(ta.index);
    if (it != ternarized_.end()) return it->second;
    const ValueId p = f_.inst(ta).operands[0];
    const ir::Attrs ste = f_.inst(ta).attrs;  // ternarize_absmean's STE clipping, carried over
    const InstId q = insert_after(f_, ta, Op::TQuantize, {p},
                                  {ir::Type{ElemKind::T2, f_.type_of(p).shape}, ir::Type{ElemKind::F32, {}}}, ste);
    const std::pair<ValueId, ValueId> out{f_.inst(q).results[0], f_.inst(q).results[1]};
    ternarized_.emplace(ta.index, out);
    return out;
  }

  ir::Function& f_;
  std::map<std::uint32_t, std::pair<ValueId, ValueId>> quantized_;   // by quantize_int8 inst
  std::map<std::uint32_t, std::pair<ValueId, ValueId>> ternarized_;  // by ternarize_absmean inst
};

}  // namespace

void fuse_quantization(ir::Function& f) {
  Fuser fuser(f);
  for (ir::BlockId b : std::vector<ir::BlockId>(f.blocks().begin(), f.blocks().end())) {
    const std::vector<InstId> insts(f.insts(b).begin(), f.insts(b).end());
    for (InstId i : insts) {
      if (f.inst(i).erased) continue;
      switch (f.inst(i).op) {
        case Op::Dequantize: fuser.dequantize_of_quantize(i); break;
        case Op::MatMul: fuser.matmul(i); break;
        case Op::TMatMul: fuser.tmatmul(i); break;
        default: break;
      }
    }
  }
}

}  // namespace ternjit::passes
