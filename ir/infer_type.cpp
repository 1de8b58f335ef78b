// SPDX-License-Identifier: Apache-2.0
// infer_type.cpp - the type rule of every op (see ir/README.md for the semantics).
#include "ir/infer_type.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "ir/print.h"

namespace ternjit::ir {

namespace {

Error fail(std::string msg) { return make_error(ErrorCode::InvalidInput, std::move(msg)); }

std::string q(Op op) { return "'" + std::string(op_name(op)) + "'"; }

std::string dim_str(const Dim& d, std::span<const std::string> syms) {
  if (d.is_static()) return std::to_string(d.extent);
  return d.sym.index < syms.size() ? syms[d.sym.index] : "?";
}

bool same_dim(const Dim& a, const Dim& b) { return a == b; }

Result<void> need_float(Op op, const Type& t, std::span<const std::string> syms) {
  if (!is_float(t.elem))
    return fail(q(op) + " needs a float operand, got " + type_str(t, syms));
  return success();
}

Result<std::int64_t> check_axis(Op op, std::int64_t axis, const Type& t,
                                std::span<const std::string> syms) {
  auto rank = static_cast<std::int64_t>(t.rank());
  if (axis < 0 || axis >= rank)
    return fail(q(op) + " axis " + std::to_string(axis) + " is out of range for " +
                type_str(t, syms) + " (rank " + std::to_string(rank) + ")");
  return axis;
}

// Product signature of a shape: static product and sorted symbol list. Two shapes
// hold the same number of elements for every binding iff their signatures match.
// The product is checked (ir.h kMaxElements) by the caller.
std::pair<std::int64_t, std::vector<std::uint32_t>> numel_signature(const Type& t) {
  std::vector<std::uint32_t> syms;
  for (const Dim& d : t.shape)
    if (!d.is_static()) syms.push_back(d.sym.index);
  std::sort(syms.begin(), syms.end());
  return {static_dims_product(t).value_or(-1), syms};
}

Result<std::vector<Type>> infer_matmul(const Type& a, const Type& b,
                                       std::span<const std::string> syms) {
  const Op op = Op::MatMul;
  if (a.rank() == 0 || b.rank() == 0)
    return fail(q(op) + " needs operands of rank >= 1, got " + type_str(a, syms) + " and " +
                type_str(b, syms));
  if (a.elem == ElemKind::Bool || b.elem == ElemKind::Bool)
    return fail(q(op) + " does not take bool operands");
  // NumPy: a vector lhs is [1, K] and a vector rhs is [K, 1]; the added dim is dropped.
  std::vector<Dim> as = a.shape, bs = b.shape;
  bool a_vec = as.size() == 1, b_vec = bs.size() == 1;
  if (a_vec) as.insert(as.begin(), Dim::fixed(1));
  if (b_vec) bs.push_back(Dim::fixed(1));
  const Dim& ka = as[as.size() - 1];
  const Dim& kb = bs[bs.size() - 2];
  if (!same_dim(ka, kb))
    return fail(q(op) + " needs matching K: lhs is " + type_str(a, syms) + " (K = " +
                dim_str(ka, syms) + "), rhs is " + type_str(b, syms) + " (K = " + dim_str(kb, syms) +
                ")");
  std::vector<Dim> batch_a(as.begin(), as.end() - 2), batch_b(bs.begin(), bs.end() - 2);
  auto batch = broadcast_shapes(batch_a, batch_b, syms);
  if (!batch.ok())
    return fail(q(op) + " batch dims do not broadcast: " + type_str(a, syms) + " @ " +
                type_str(b, syms));
  std::vector<Dim> out = batch.value();
  if (!a_vec) out.push_back(as[as.size() - 2]);
  if (!b_vec) out.push_back(bs[bs.size() - 1]);
  ElemKind k = (is_integer(a.elem) && is_integer(b.elem)) ? ElemKind::I32 : promote(a.elem, b.elem);
  return std::vector<Type>{Type{k, out}};
}

// tmatmul: x [..., K] (i8 or float) @ w t2 [K, N] (any layout), then the epilogue
// operands present per the attributes, in their fixed order.
Result<std::vector<Type>> infer_tmatmul(std::span<const Type> ops, const TMatMulAttrs& a,
                                        std::span<const std::string> syms) {
  const std::size_t want = 2 + static_cast<std::size_t>(a.num_epilogue());
  if (ops.size() != want)
    return fail("'tmatmul' with these attributes takes " + std::to_string(want) + " operands (x, w" +
                (a.x_scale ? ", x_scale" : "") + (a.w_scale ? ", w_scale" : "") + (a.bias ? ", bias" : "") +
                (a.residual ? ", residual" : "") + "), got " + std::to_string(ops.size()));
  const Type& x = ops[0];
  const Type& w = ops[1];
  if (x.rank() == 0 || !(x.elem == ElemKind::I8 || is_float(x.elem)))
    return fail("'tmatmul' needs x of kind i8 or a float kind and rank >= 1, got " + type_str(x, syms));
  if (w.elem != ElemKind::T2 || w.rank() != 2)
    return fail("'tmatmul' needs a rank-2 t2 weight, got " + type_str(w, syms));
  if (!same_dim(x.shape.back(), w.shape[0]))
    return fail("'tmatmul' needs matching K: x is " + type_str(x, syms) + " (K = " + dim_str(x.shape.back(), syms) +
                "), w is " + type_str(w, syms) + " (K = " + dim_str(w.shape[0], syms) + ")");
  Type out{x.elem == ElemKind::I8 ? ElemKind::F32 : x.elem, x.shape};
  out.shape.back() = w.shape[1];
  const Dim n = w.shape[1];
  std::size_t next = 2;
  auto bad = [&](const char* what, const Type& got, const std::string& want_text) {
    return fail("'tmatmul' " + std::string(what) + " must be " + want_text + ", got " + type_str(got, syms));
  };
  if (a.x_scale) {
    Type want_t{ElemKind::F32, x.shape};
    want_t.shape.back() = Dim::fixed(1);
    if (!(ops[next] == want_t)) return bad("x_scale", ops[next], type_str(want_t, syms));
    ++next;
  }
  if (a.group < 0) return fail("'tmatmul' group must be >= 0 (0: no grouping), got " + std::to_string(a.group));
  if (a.group > 0 && !a.w_scale)
    return fail("'tmatmul' with group = " + std::to_string(a.group) + " needs a w_scale operand (w_scale = true)");
  if (a.w_scale && a.group > 0) {
    // f32[G, N] with G = ceil(K / group). With a symbolic K or G the relation cannot be
    // checked here; specialize_shapes checks it once both are bound.
    const Type& s = ops[next];
    const Dim k = w.shape[0];
    const bool shape_ok = s.rank() == 2 && same_dim(s.shape[1], n);
    const bool ok = s.elem == ElemKind::F32 && s.layout == WeightFormat::Plain && shape_ok;
    if (!ok) return bad("w_scale", s, "f32[G, " + dim_str(n, syms) + "] (G = ceil(K / " + std::to_string(a.group) + "))");
    if (k.is_static() && s.shape[0].is_static() && s.shape[0].extent != grouped_scale_rows(k.extent, a.group))
      return fail("'tmatmul' grouped w_scale needs G = ceil(K / group) = ceil(" + std::to_string(k.extent) + " / " +
                  std::to_string(a.group) + ") = " + std::to_string(grouped_scale_rows(k.extent, a.group)) +
                  " rows, got " + type_str(s, syms));
    ++next;
  } else if (a.w_scale) {
    const Type& s = ops[next];
    const bool ok = s.elem == ElemKind::F32 && s.layout == WeightFormat::Plain &&
                    (s.rank() == 0 || (s.rank() == 1 && same_dim(s.shape[0], n)));
    if (!ok) return bad("w_scale", s, "f32[] or " + type_str(Type{ElemKind::F32, {n}}, syms));
    ++next;
  }
  if (a.bias) {
    const Type want_t{out.elem, {n}};
    if (!(ops[next] == want_t)) return bad("bias", ops[next], type_str(want_t, syms));
    ++next;
  }
  if (a.residual) {
    if (!(ops[next] == out)) return bad("residual", ops[next], type_str(out, syms));
    ++next;
  }
  return std::vector<Type>{out};
}

// ewise: every operand has the result kind; each step is typed by the standalone op's
// rule on the types of its slots and must keep the kind.
Result<std::vector<Type>> infer_ewise(const Module* m, const Function& f, std::span<const Type> ops,
                                      const EwiseAttrs& a, std::span<const std::string> syms) {
  if (ops.empty()) return fail("'ewise' needs at least one operand");
  if (a.steps.empty()) return fail("'ewise' needs at least one step");
  const ElemKind kind = ops[0].elem;
  for (std::size_t i = 1; i < ops.size(); ++i)
    if (ops[i].elem != kind)
      return fail("'ewise' operands must all have one kind: operand 1 is " + type_str(ops[0], syms) +
                  ", operand " + std::to_string(i + 1) + " is " + type_str(ops[i], syms));
  std::vector<Type> slots(ops.begin(), ops.end());
  std::vector<bool> read(ops.size(), false);
  for (std::size_t j = 0; j < a.steps.size(); ++j) {
    const EwiseStep& st = a.steps[j];
    const std::string which = "'ewise' step " + std::to_string(j + 1) + " (" + std::string(op_name(st.op)) + ")";
    if (!is_ewise_step_op(st.op)) return fail(which + " is not an elementwise op ewise can fuse");
    const bool binary = is_ewise_binary(st.op);
    auto slot_ok = [&](std::int32_t s) { return s >= 0 && static_cast<std::size_t>(s) < slots.size(); };
    if (!slot_ok(st.a) || (binary ? !slot_ok(st.b) : st.b != -1))
      return fail(which + " reads slots (" + std::to_string(st.a) + ", " + std::to_string(st.b) +
                  "); it may read operands 0.." + std::to_string(ops.size() - 1) + " and earlier steps" +
                  (binary ? "" : ", and b must be -1 for a unary op"));
    std::vector<Type> in{slots[static_cast<std::size_t>(st.a)]};
    if (binary) in.push_back(slots[static_cast<std::size_t>(st.b)]);
    for (std::int32_t s : {st.a, st.b})
      if (s >= 0 && static_cast<std::size_t>(s) < ops.size()) read[static_cast<std::size_t>(s)] = true;
    auto t = infer_types(m, f, st.op, in, NoAttrs{}, {});
    if (!t.ok()) return fail(which + ": " + t.error().message);
    if (t.value()[0].elem != kind)
      return fail(which + " would change the kind to " + std::string(elem_name(t.value()[0].elem)) +
                  "; every step must keep " + std::string(elem_name(kind)));
    slots.push_back(t.value()[0]);
  }
  for (std::size_t i = 0; i < read.size(); ++i)
    if (!read[i]) return fail("'ewise' operand " + std::to_string(i + 1) + " is not read by any step");
  return std::vector<Type>{slots.back()};
}

// The run-time position operand of the decoder ops: an i32 scalar.
Result<void> need_pos(Op op, const Type& t, std::span<const std::string> syms) {
  if (t.elem != ElemKind::I32 || t.rank() != 0)
    return fail(q(op) + " needs the position `pos` as an i32 scalar (i32[]), got " + type_str(t, syms));
  return success();
}

// The element kinds a table or a KV cache may have.
bool storage_float(ElemKind k) { return k == ElemKind::F32 || k == ElemKind::F16 || k == ElemKind::BF16; }

// The layer attribute of kv_write/attention against the caches' L (checked when static;
// a symbolic L is checked once specialization binds it, and by the interpreter).
Result<void> check_layer(Op op, std::int64_t layer, const Type& cache, std::span<const std::string> syms) {
  if (layer < 0) return fail(q(op) + " layer must be >= 0, got " + std::to_string(layer));
  if (cache.shape[0].is_static() && layer >= cache.shape[0].extent)
    return fail(q(op) + " layer " + std::to_string(layer) + " is out of range for the cache " +
                type_str(cache, syms) + " (L = " + std::to_string(cache.shape[0].extent) + ")");
  return success();
}

Result<std::vector<Type>> infer_gather(std::span<const Type> ops, const AxisAttrs& a, std::span<const std::string> syms) {
  const Type& table = ops[0];
  const Type& ids = ops[1];
  if (a.axis != 0 || a.keepdims)
    return fail("'gather' supports only axis = 0 (rows of the table) without keepdims, got axis = " +
                std::to_string(a.axis) + (a.keepdims ? " with keepdims" : ""));
  if (table.rank() != 2 || !storage_float(table.elem))
    return fail("'gather' needs a table of rank 2 and kind f32, f16 or bf16, got " + type_str(table, syms));
  if (ids.elem != ElemKind::I32) return fail("'gather' needs i32 ids, got " + type_str(ids, syms));
  Type out{table.elem, ids.shape};
  out.shape.push_back(table.shape[1]);
  return std::vector<Type>{out};
}

Result<std::vector<Type>> infer_slice(const Type& x, const SliceAttrs& a, std::span<const std::string> syms) {
  TERNJIT_TRY(auto axis, check_axis(Op::Slice, a.axis, x, syms));
  const Dim& d = x.shape[axis];
  if (!d.is_static())
    return fail("'slice' needs a static extent along axis " + std::to_string(axis) + ", got " + type_str(x, syms));
  // 0 <= start, 0 <= size, start + size <= extent (compared without overflow).
  if (a.start < 0 || a.size < 0 || a.start > d.extent || a.size > d.extent - a.start)
    return fail("'slice' of [" + std::to_string(a.start) + ", " + std::to_string(a.start) + " + " +
                std::to_string(a.size) + ") along axis " + std::to_string(axis) + " is out of range for " +
                type_str(x, syms) + " (extent " + std::to_string(d.extent) + ")");
  Type out = x;
  out.shape[axis] = Dim::fixed(a.size);
  return std::vector<Type>{out};
}

Result<std::vector<Type>> infer_concat(std::span<const Type> ops, const AxisAttrs& a, std::span<const std::string> syms) {
  if (ops.empty()) return fail("'concat' needs at least one operand");
  if (a.keepdims) return fail("'concat' does not take keepdims");
  const Type& first = ops[0];
  TERNJIT_TRY(auto axis, check_axis(Op::Concat, a.axis, first, syms));
  Type out = first;
  std::int64_t total = 0;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const Type& t = ops[i];
    const std::string which = "'concat' operand " + std::to_string(i + 1) + " ";
    if (t.elem != first.elem || t.rank() != first.rank())
      return fail(which + "is " + type_str(t, syms) + "; every operand must have the kind and rank of operand 1, " +
                  type_str(first, syms));
    for (std::size_t d = 0; d < t.rank(); ++d)
      if (static_cast<std::int64_t>(d) != axis && !same_dim(t.shape[d], first.shape[d]))
        return fail(which + "is " + type_str(t, syms) + " but operand 1 is " + type_str(first, syms) +
                    ": dims other than axis " + std::to_string(axis) + " must be equal");
    if (ops.size() == 1) break;  // one operand: the identity, any extent
    const Dim& e = t.shape[axis];
    if (!e.is_static())
      return fail(which + "has a symbolic extent along axis " + std::to_string(axis) + " (" + type_str(t, syms) +
                  "): the sum of the extents must be static");
    if (e.extent > kMaxElements - total)
      return fail("'concat' result along axis " + std::to_string(axis) + " has more than 2^60 elements");
    total += e.extent;
  }
  if (ops.size() > 1) out.shape[axis] = Dim::fixed(total);
  return std::vector<Type>{out};
}

Result<std::vector<Type>> infer_rope(std::span<const Type> ops, const RopeAttrs& a, std::span<const std::string> syms) {
  const Type& x = ops[0];
  if (x.elem != ElemKind::F32 || x.rank() != 3)
    return fail("'rope' needs x of type f32[M, H, D], got " + type_str(x, syms));
  if (x.shape[2].is_static() && x.shape[2].extent % 2 != 0)
    return fail("'rope' needs an even head dim D, got " + type_str(x, syms));
  TERNJIT_TRY_VOID(need_pos(Op::Rope, ops[1], syms));
  if (!(a.theta > 0) || !std::isfinite(a.theta))
    return fail("'rope' theta must be a finite number > 0, got " + format_double(a.theta));
  return std::vector<Type>{x};
}

Result<std::vector<Type>> infer_layernorm(std::span<const Type> ops, const EpsAttrs& a, std::span<const std::string> syms) {
  const Type& x = ops[0];
  for (const Type& t : ops) TERNJIT_TRY_VOID(need_float(Op::LayerNorm, t, syms));
  if (x.rank() == 0) return fail("'layernorm' needs an operand of rank >= 1, got " + type_str(x, syms));
  const char* names[] = {"", "gamma", "beta"};
  for (std::size_t i = 1; i < 3; ++i)
    if (ops[i].rank() != 1 || !(ops[i].shape[0] == x.shape.back()))
      return fail("'layernorm' needs " + std::string(names[i]) + " of shape [" + dim_str(x.shape.back(), syms) +
                  "] for input " + type_str(x, syms) + ", got " + type_str(ops[i], syms));
  if (!(a.eps >= 0) || !std::isfinite(a.eps)) return fail("'layernorm' eps must be a finite number >= 0");
  return std::vector<Type>{Type{promote(promote(x.elem, ops[1].elem), ops[2].elem), x.shape}};
}

Result<std::vector<Type>> infer_causal_softmax(std::span<const Type> ops, std::span<const std::string> syms) {
  TERNJIT_TRY_VOID(need_float(Op::CausalSoftmax, ops[0], syms));
  if (ops[0].rank() < 2)
    return fail("'causal_softmax' needs x of rank >= 2 ([..., M, T]), got " + type_str(ops[0], syms));
  TERNJIT_TRY_VOID(need_pos(Op::CausalSoftmax, ops[1], syms));
  return std::vector<Type>{ops[0]};
}

Result<std::vector<Type>> infer_kv_write(std::span<const Type> ops, const LayerAttrs& a, std::span<const std::string> syms) {
  const Type& cache = ops[0];
  const Type& rows = ops[1];
  if (cache.rank() != 4 || !storage_float(cache.elem))
    return fail("'kv_write' needs a cache of type [L, C, H, D] and kind f32, f16 or bf16, got " + type_str(cache, syms));
  if (rows.rank() != 3 || (rows.elem != ElemKind::F32 && rows.elem != cache.elem))
    return fail("'kv_write' needs rows of type [M, H, D] and kind f32 or the cache's kind (" +
                std::string(elem_name(cache.elem)) + "), got " + type_str(rows, syms));
  if (!same_dim(rows.shape[1], cache.shape[2]) || !same_dim(rows.shape[2], cache.shape[3]))
    return fail("'kv_write' rows " + type_str(rows, syms) + " do not match the cache " + type_str(cache, syms) +
                " (rows [M, H, D] into a cache [L, C, H, D])");
  TERNJIT_TRY_VOID(need_pos(Op::KvWrite, ops[2], syms));
  TERNJIT_TRY_VOID(check_layer(Op::KvWrite, a.layer, cache, syms));
  return std::vector<Type>{cache};
}

Result<std::vector<Type>> infer_attention(std::span<const Type> ops, const AttentionAttrs& a,
                                          std::span<const std::string> syms) {
  const Type& qt = ops[0];
  const Type& kc = ops[1];
  const Type& vc = ops[2];
  if (qt.elem != ElemKind::F32 || qt.rank() != 3)
    return fail("'attention' needs q of type f32[M, HQ, D], got " + type_str(qt, syms));
  if (kc.rank() != 4 || !storage_float(kc.elem))
    return fail("'attention' needs caches of type [L, C, HKV, D] and kind f32, f16 or bf16, got " + type_str(kc, syms));
  if (!(vc == kc))
    return fail("'attention' needs the key and value caches of one type, got " + type_str(kc, syms) + " and " +
                type_str(vc, syms));
  if (!same_dim(kc.shape[3], qt.shape[2]))
    return fail("'attention' head dim of q " + type_str(qt, syms) + " does not match the caches " + type_str(kc, syms));
  const Dim& hq = qt.shape[1];
  const Dim& hkv = kc.shape[2];
  if (hq.is_static() && hkv.is_static() && (hkv.extent == 0 ? hq.extent != 0 : hq.extent % hkv.extent != 0))
    return fail("'attention' needs the query heads HQ = " + std::to_string(hq.extent) +
                " to be a multiple of the cache heads HKV = " + std::to_string(hkv.extent));
  TERNJIT_TRY_VOID(need_pos(Op::Attention, ops[3], syms));
  TERNJIT_TRY_VOID(check_layer(Op::Attention, a.layer, kc, syms));
  if (!std::isfinite(a.scale)) return fail("'attention' scale must be finite, got " + format_double(a.scale));
  return std::vector<Type>{qt};
}

// Packed ternary layouts are storage for tmatmul weights: only these ops may read one.
bool reads_packed_layouts(Op op) {
  return op == Op::TMatMul || op == Op::Ret || op == Op::Br || op == Op::Call;
}

// True when `t` is the declaration type `decl` with each of its symbols (indices below
// `num_syms`) replaced consistently by one dim of the using function. The DSL uses the
// declaration's own names; inlining and specialization rename or fix them.
bool instantiates(const Type& decl, std::size_t num_syms, const Type& t) {
  if (decl.elem != t.elem || decl.layout != t.layout || decl.rank() != t.rank()) return false;
  std::map<std::uint32_t, Dim> sub;
  for (std::size_t i = 0; i < decl.rank(); ++i) {
    const Dim& g = decl.shape[i];
    if (g.is_static()) {
      if (!(g == t.shape[i])) return false;
      continue;
    }
    if (g.sym.index >= num_syms) return false;
    auto [it, fresh] = sub.emplace(g.sym.index, t.shape[i]);
    if (!fresh && !(it->second == t.shape[i])) return false;
  }
  return true;
}

}  // namespace

Result<std::map<std::uint32_t, Dim>> bind_call_symbols(const Function& callee, std::span<const Type> ops,
                                                       std::span<const std::string> syms) {
  auto cargs = callee.args();
  if (cargs.size() != ops.size())
    return fail("@" + callee.name() + " takes " + std::to_string(cargs.size()) + " argument" +
                (cargs.size() == 1 ? "" : "s") + ", got " + std::to_string(ops.size()));
  std::map<std::uint32_t, Dim> bound;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const Type& formal = callee.type_of(cargs[i]);
    const Type& actual = ops[i];
    bool ok = formal.elem == actual.elem && formal.layout == actual.layout && formal.rank() == actual.rank();
    for (std::size_t d = 0; ok && d < formal.rank(); ++d) {
      const Dim& fd = formal.shape[d];
      if (fd.is_static()) { ok = fd == actual.shape[d]; continue; }
      auto [it, fresh] = bound.emplace(fd.sym.index, actual.shape[d]);
      if (!fresh && !(it->second == actual.shape[d])) {
        return fail("@" + callee.name() + " binds '" + callee.symbol_name(fd.sym) + "' to " +
                    dim_str(it->second, syms) + " and to " + dim_str(actual.shape[d], syms));
      }
    }
    if (!ok)
      return fail("@" + callee.name() + " argument " + std::to_string(i + 1) + " must be " +
                  type_str(formal, callee.symbols()) + ", got " + type_str(actual, syms));
  }
  return bound;
}

ElemKind promote(ElemKind a, ElemKind b) {
  if (is_float(a) || is_float(b)) {
    if (is_float(a) && is_float(b)) return a == b ? a : ElemKind::F32;
    return is_float(a) ? a : b;
  }
  if (a == b && (a == ElemKind::I8 || a == ElemKind::U8 || a == ElemKind::I32)) return a;
  return ElemKind::I32;
}

Result<std::vector<Dim>> broadcast_shapes(const std::vector<Dim>& a, const std::vector<Dim>& b,
                                          std::span<const std::string> syms) {
  std::size_t n = std::max(a.size(), b.size());
  std::vector<Dim> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    // Align from the right.
    const Dim* da = i < n - a.size() ? nullptr : &a[i - (n - a.size())];
    const Dim* db = i < n - b.size() ? nullptr : &b[i - (n - b.size())];
    if (!da) out[i] = *db;
    else if (!db) out[i] = *da;
    else if (same_dim(*da, *db)) out[i] = *da;
    else if (da->is_static() && da->extent == 1) out[i] = *db;
    else if (db->is_static() && db->extent == 1) out[i] = *da;
    else {
      auto shape_str = [&](const std::vector<Dim>& s) {
        std::string r = "[";
        for (std::size_t j = 0; j < s.size(); ++j) r += (j ? ", " : "") + dim_str(s[j], syms);
        return r + "]";
      };
      return fail("shapes " + shape_str(a) + " and " + shape_str(b) +
                  " do not broadcast: dim " + dim_str(*da, syms) + " vs " + dim_str(*db, syms));
    }
  }
  return out;
}

Result<std::vector<Type>> infer_types(const Module* m, const Function& f, Op op,
                                      std::span<const Type> ops, const Attrs& attrs,
                                      std::span<const Type> declared) {
  auto syms = std::span<const std::string>(f.symbols());
  int want = op_num_operands(op);
  if (want >= 0 && static_cast<int>(ops.size()) != want)
    return fail(q(op) + " takes " + std::to_string(want) + " operand" + (want == 1 ? "" : "s") +
                ", got " + std::to_string(ops.size()));
  if (!attrs_match(op, attrs))
    return fail(q(op) + " has the wrong kind of attributes");

  if (!reads_packed_layouts(op))
    for (std::size_t i = 0; i < ops.size(); ++i)
      if (ops[i].layout != WeightFormat::Plain)
        return fail(q(op) + " cannot read operand " + std::to_string(i + 1) + " of packed layout " +
                    type_str(ops[i], syms) + " (only 'tmatmul' reads packed weights)");
  for (const Type& t : declared)
    if (t.layout != WeightFormat::Plain && t.elem != ElemKind::T2)
      return fail("type " + type_str(t, syms) + " has a ternary layout but is not t2");

  auto need_declared = [&](std::size_t n) -> Result<void> {
    if (declared.size() != n)
      return fail(q(op) + " needs " + std::to_string(n) + " declared result type" +
                  (n == 1 ? "" : "s") + ", got " + std::to_string(declared.size()));
    return success();
  };
  auto same = [&](const Type& t) { return std::vector<Type>{t}; };

  std::vector<Type> out;
  switch (op) {
    case Op::Const: {
      TERNJIT_TRY_VOID(need_declared(1));
      const auto& c = std::get<ConstAttrs>(attrs);
      if (std::string big = too_large(declared[0], syms); !big.empty()) return fail("'const' " + big);
      auto n = declared[0].static_numel();
      if (c.values.empty()) return fail("'const' needs at least one value");
      if (c.values.size() != 1 && (!n || static_cast<std::size_t>(*n) != c.values.size()))
        return fail("'const' has " + std::to_string(c.values.size()) + " values but type " +
                    type_str(declared[0], syms) + " needs " +
                    (n ? std::to_string(*n) : std::string("a static shape")));
      return std::vector<Type>(declared.begin(), declared.end());
    }
    case Op::Param: {
      TERNJIT_TRY_VOID(need_declared(1));
      const auto& p = std::get<ParamAttrs>(attrs);
      if (!m) return fail("'param' @" + p.name + " used outside a module");
      const ParamDecl* d = m->find_param(p.name);
      if (!d) return fail("unknown parameter @" + p.name);
      if (!instantiates(d->type, d->symbols.size(), declared[0]))
        return fail("'param' @" + p.name + " is declared " + type_str(d->type, d->symbols) +
                    " but used as " + type_str(declared[0], syms));
      return std::vector<Type>(declared.begin(), declared.end());
    }
    case Op::Call: {
      const auto& c = std::get<CallAttrs>(attrs);
      if (!m) return fail("'call' @" + c.callee + " used outside a module");
      const Function* callee = m->find_function(c.callee);
      if (!callee) return fail("unknown function @" + c.callee);
      // Bind the callee's symbols to the caller's dims by unification.
      TERNJIT_TRY(const auto bound, bind_call_symbols(*callee, ops, syms));
      for (std::size_t r = 0; r < callee->result_types().size(); ++r) {
        Type t = callee->result_types()[r];
        for (std::size_t d = 0; d < t.rank(); ++d) {
          if (t.shape[d].is_static()) continue;
          auto it = bound.find(t.shape[d].sym.index);
          if (it != bound.end()) t.shape[d] = it->second;
          else if (r < declared.size() && declared[r].rank() == t.rank()) t.shape[d] = declared[r].shape[d];
          else
            return fail("result dim '" + callee->symbol_name(t.shape[d].sym) + "' of @" +
                        c.callee + " is not determined by its arguments");
        }
        out.push_back(t);
      }
      break;
    }
    case Op::Ret: {
      const auto& rt = f.result_types();
      if (rt.size() != ops.size())
        return fail("'ret' returns " + std::to_string(ops.size()) + " value" +
                    (ops.size() == 1 ? "" : "s") + " but @" + f.name() + " returns " +
                    std::to_string(rt.size()));
      for (std::size_t i = 0; i < ops.size(); ++i)
        if (!(rt[i] == ops[i]))
          return fail("'ret' value " + std::to_string(i + 1) + " is " + type_str(ops[i], syms) +
                      " but @" + f.name() + " returns " + type_str(rt[i], syms));
      return out;
    }
    case Op::Br: return out;
    case Op::CondBr:
      if (ops[0].rank() != 0 || is_float(ops[0].elem))
        return fail("'cond_br' condition must be an integer or bool scalar, got " +
                    type_str(ops[0], syms));
      return out;

    case Op::Add: case Op::Sub: case Op::Mul: case Op::Div: case Op::Max: case Op::Min: {
      TERNJIT_TRY(auto shape, broadcast_shapes(ops[0].shape, ops[1].shape, syms));
      out.push_back(Type{promote(ops[0].elem, ops[1].elem), shape});
      break;
    }
    case Op::Neg: case Op::Abs: case Op::Relu:
      if (ops[0].elem == ElemKind::Bool || ops[0].elem == ElemKind::U8)
        return fail(q(op) + " needs a signed operand, got " + type_str(ops[0], syms));
      out = same(ops[0]);
      break;
    case Op::Sigmoid: case Op::Tanh: case Op::Gelu: case Op::Silu: case Op::Exp: case Op::Log:
    case Op::Sqrt: case Op::Rsqrt:
      TERNJIT_TRY_VOID(need_float(op, ops[0], syms));
      out = same(ops[0]);
      break;
    case Op::Cast:
      out.push_back(Type{std::get<CastAttrs>(attrs).to, ops[0].shape});
      break;

    case Op::Transpose: {
      const auto& perm = std::get<PermAttrs>(attrs).perm;
      if (perm.size() != ops[0].rank())
        return fail("'transpose' permutation has " + std::to_string(perm.size()) +
                    " entries but the operand has rank " + std::to_string(ops[0].rank()));
      std::vector<bool> seen(perm.size(), false);
      Type t{ops[0].elem, {}};
      for (std::int64_t p : perm) {
        if (p < 0 || p >= static_cast<std::int64_t>(perm.size()) || seen[p])
          return fail("'transpose' permutation is not a permutation of 0.." +
                      std::to_string(static_cast<std::int64_t>(perm.size()) - 1));
        seen[p] = true;
        t.shape.push_back(ops[0].shape[p]);
      }
      out.push_back(t);
      break;
    }
    case Op::Reshape: {
      TERNJIT_TRY_VOID(need_declared(1));
      if (declared[0].elem != ops[0].elem || declared[0].layout != ops[0].layout)
        return fail("'reshape' cannot change the element kind");
      for (const Type* t : {&ops[0], &declared[0]})
        if (std::string big = too_large(*t, syms); !big.empty()) return fail("'reshape' " + big);
      if (numel_signature(declared[0]) != numel_signature(ops[0]))
        return fail("'reshape' from " + type_str(ops[0], syms) + " to " +
                    type_str(declared[0], syms) + " changes the number of elements");
      return std::vector<Type>(declared.begin(), declared.end());
    }
    case Op::Broadcast: {
      TERNJIT_TRY_VOID(need_declared(1));
      if (declared[0].elem != ops[0].elem || declared[0].layout != ops[0].layout)
        return fail("'broadcast' cannot change the element kind");
      auto b = broadcast_shapes(ops[0].shape, declared[0].shape, syms);
      if (!b.ok() || !(b.value() == declared[0].shape))
        return fail("'broadcast' cannot broadcast " + type_str(ops[0], syms) + " to " +
                    type_str(declared[0], syms));
      return std::vector<Type>(declared.begin(), declared.end());
    }

    case Op::MatMul: {
      TERNJIT_TRY(out, infer_matmul(ops[0], ops[1], syms));
      break;
    }
    case Op::ReduceSum: case Op::ReduceMean: case Op::ReduceMax: {
      const auto& ax = std::get<AxisAttrs>(attrs);
      TERNJIT_TRY(auto axis, check_axis(op, ax.axis, ops[0], syms));
      if (op == Op::ReduceMean) TERNJIT_TRY_VOID(need_float(op, ops[0], syms));
      Type t = ops[0];
      if (op == Op::ReduceSum && is_integer(t.elem)) t.elem = ElemKind::I32;
      if (ax.keepdims) t.shape[axis] = Dim::fixed(1);
      else t.shape.erase(t.shape.begin() + axis);
      out.push_back(t);
      break;
    }
    case Op::Softmax: {
      TERNJIT_TRY_VOID(need_float(op, ops[0], syms));
      TERNJIT_TRY(auto axis, check_axis(op, std::get<AxisAttrs>(attrs).axis, ops[0], syms));
      (void)axis;
      if (std::get<AxisAttrs>(attrs).keepdims) return fail("'softmax' does not take keepdims");
      out = same(ops[0]);
      break;
    }
    case Op::RmsNorm: {
      TERNJIT_TRY_VOID(need_float(op, ops[0], syms));
      TERNJIT_TRY_VOID(need_float(op, ops[1], syms));
      if (ops[0].rank() == 0 || ops[1].rank() != 1 || !(ops[1].shape[0] == ops[0].shape.back()))
        return fail("'rmsnorm' needs gamma of shape [" +
                    (ops[0].rank() ? dim_str(ops[0].shape.back(), syms) : std::string("D")) +
                    "] for input " + type_str(ops[0], syms) + ", got " + type_str(ops[1], syms));
      if (std::get<EpsAttrs>(attrs).eps < 0) return fail("'rmsnorm' eps must be >= 0");
      out.push_back(Type{promote(ops[0].elem, ops[1].elem), ops[0].shape});
      break;
    }
    case Op::QuantizeInt8:
      TERNJIT_TRY_VOID(need_float(op, ops[0], syms));
      if (ops[0].rank() == 0) return fail("'quantize_int8' needs an operand of rank >= 1");
      out = same(ops[0]);
      break;
    case Op::Ternarize:
      TERNJIT_TRY_VOID(need_float(op, ops[0], syms));
      if (std::get<ThresholdAttrs>(attrs).threshold < 0)
        return fail("'ternarize' threshold must be >= 0");
      out = same(ops[0]);
      break;
    case Op::TernarizeAbsmean:
      TERNJIT_TRY_VOID(need_float(op, ops[0], syms));
      out = same(ops[0]);
      break;
    case Op::Quantize: {
      TERNJIT_TRY_VOID(need_float(op, ops[0], syms));
      if (ops[0].rank() == 0) return fail("'quantize' needs an operand of rank >= 1");
      Type scales{ElemKind::F32, ops[0].shape};
      scales.shape.back() = Dim::fixed(1);
      out = {Type{ElemKind::I8, ops[0].shape}, scales};
      break;
    }
    case Op::TQuantize:
      TERNJIT_TRY_VOID(need_float(op, ops[0], syms));
      out = {Type{ElemKind::T2, ops[0].shape}, Type{ElemKind::F32, {}}};
      break;
    case Op::Dequantize: {
      if (is_float(ops[0].elem))
        return fail("'dequantize' needs integer values, got " + type_str(ops[0], syms));
      TERNJIT_TRY_VOID(need_float(op, ops[1], syms));
      TERNJIT_TRY(auto shape, broadcast_shapes(ops[0].shape, ops[1].shape, syms));
      out.push_back(Type{ops[1].elem, shape});
      break;
    }

    case Op::TMatMul: {
      TERNJIT_TRY(out, infer_tmatmul(ops, std::get<TMatMulAttrs>(attrs), syms));
      break;
    }
    case Op::Ewise: {
      TERNJIT_TRY(out, infer_ewise(m, f, ops, std::get<EwiseAttrs>(attrs), syms));
      break;
    }
    case Op::Gather: {
      TERNJIT_TRY(out, infer_gather(ops, std::get<AxisAttrs>(attrs), syms));
      break;
    }
    case Op::Slice: {
      TERNJIT_TRY(out, infer_slice(ops[0], std::get<SliceAttrs>(attrs), syms));
      break;
    }
    case Op::Concat: {
      TERNJIT_TRY(out, infer_concat(ops, std::get<AxisAttrs>(attrs), syms));
      break;
    }
    case Op::LayerNorm: {
      TERNJIT_TRY(out, infer_layernorm(ops, std::get<EpsAttrs>(attrs), syms));
      break;
    }
    case Op::Rope: {
      TERNJIT_TRY(out, infer_rope(ops, std::get<RopeAttrs>(attrs), syms));
      break;
    }
    case Op::CausalSoftmax: {
      TERNJIT_TRY(out, infer_causal_softmax(ops, syms));
      break;
    }
    case Op::KvWrite: {
      TERNJIT_TRY(out, infer_kv_write(ops, std::get<LayerAttrs>(attrs), syms));
      break;
    }
    case Op::Attention: {
      TERNJIT_TRY(out, infer_attention(ops, std::get<AttentionAttrs>(attrs), syms));
      break;
    }
  }

  if (!declared.empty()) {
    if (declared.size() != out.size())
      return fail(q(op) + " produces " + std::to_string(out.size()) + " result" +
                  (out.size() == 1 ? "" : "s") + ", but " + std::to_string(declared.size()) +
                  " are declared");
    for (std::size_t i = 0; i < out.size(); ++i)
      if (!(declared[i] == out[i]))
        return fail(q(op) + " result is " + type_str(out[i], syms) + ", but " +
                    type_str(declared[i], syms) + " is declared");
  }
  return out;
}

}  // namespace ternjit::ir
