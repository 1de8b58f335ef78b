// SPDX-License-Identifier: Apache-2.0
// eltwise.cpp - generators of the non-matmul x86 kernels: elementwise/ewise loops, quantize, rmsnorm, softmax, reductions.
//
// Kernel shapes (each one JIT function; C++ loops the outer dims and splits the work
// over Parallel):
//   ewise      fn(ptrs, out, nvec, tail): one contiguous run of the output; each
//              operand is either contiguous along it or one broadcast element (the
//              NumPy broadcast is collapsed into outer dims + this inner run).
//   rows       fn(x, out, aux, rows): ops over the last axis (quantize, rmsnorm,
//              softmax, reductions), the row length baked in; 4-way unrolled passes.
//   columns    fn(x, out, outer): softmax/reductions over a middle axis, vectorised
//              across the contiguous inner extent.
// Tails use AVX-512 opmasks, or on AVX2 vmaskmovps (f32) and per-element inserts and
// extracts (16-bit kinds, int8), so no access leaves the tensors.
//
// Numerics versus ir/interpret.cpp: the standalone binary ops and ewise steps compute in
// f32 and round to the result kind after every step (as the reference does); the f32
// IEEE ops and max/min are bit-exact. Transcendentals use vmath.h's polynomials.
// Reductions, softmax and rmsnorm accumulate in f32 (the reference in double); rmsnorm
// multiplies by 1/sqrt(mean + eps) instead of dividing; softmax multiplies by 1/sum.
// bf16 stores round with an integer sequence, not vcvtneps2bf16: that instruction
// flushes f32 subnormals to zero, which the reference rounding does not.
#include "targets/x86/eltwise.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <variant>

#include "targets/x86/jit_code.h"
#include "targets/x86/vmath.h"

namespace ternjit::targets::x86 {

namespace {

using ir::Op;
using Xbyak::Xmm;
using Extents = std::vector<std::int64_t>;

constexpr int kMaxOperands = 16;
constexpr int kValueRegs = 8;  // vector registers 0..7 hold ewise step results
// Work below this many elements runs on the calling thread.
constexpr std::int64_t kMinParallelElems = 32 * 1024;
// Ewise runs longer than this are split so that one long row can use several threads.
constexpr std::int64_t kEwiseBlock = 16 * 1024;

enum class Family : std::uint8_t { Ewise, Quantize, RmsNorm, Softmax, Reduce };

int elem_size(ElemKind k) { return k == ElemKind::F32 ? 4 : (k == ElemKind::I8 ? 1 : 2); }

bool is_wide(Isa isa) { return isa == Isa::Avx512 || isa == Isa::Avx512Vnni || isa == Isa::Amx; }

std::int64_t numel(const Extents& s) {
  std::int64_t n = 1;
  for (std::int64_t e : s) n *= e;
  return n;
}

std::string extents_str(const Extents& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

Error unsupported(std::string msg) { return make_error(ErrorCode::Unsupported, std::move(msg)); }

// What one kernel computes, extracted from the IR (or built for an activation).
struct Spec {
  Family family = Family::Ewise;
  Op op = Op::Add;
  std::vector<ElemKind> in_kinds;
  std::vector<Extents> in_shapes;
  std::vector<ElemKind> out_kinds;
  std::vector<Extents> out_shapes;
  std::vector<ir::EwiseStep> steps;  // Ewise
  bool round_steps = false;          // round to the kind between ewise steps
  std::int64_t outer = 1, len = 1, inner = 1;  // axis view of the operand
  double eps = 0;
  bool fake_quant = false;  // quantize_int8: float output q * s
};

// The largest number of step results live at once while evaluating `steps` (the last
// one is live until the store).
int max_live(const std::vector<ir::EwiseStep>& steps, int n_in) {
  const int n = static_cast<int>(steps.size());
  std::vector<int> last(static_cast<std::size_t>(n), -1);
  for (int j = 0; j < n; ++j)
    for (int s : {steps[static_cast<std::size_t>(j)].a, steps[static_cast<std::size_t>(j)].b})
      if (s >= n_in) last[static_cast<std::size_t>(s - n_in)] = j;
  last[static_cast<std::size_t>(n - 1)] = n;
  int best = 0;
  for (int j = 0; j < n; ++j) {
    // Live while computing step j: earlier results used at j or later, plus j's own.
    int live = 1;
    for (int i = 0; i < j; ++i)
      if (last[static_cast<std::size_t>(i)] >= j) ++live;
    best = std::max(best, live);
  }
  return best;
}

Result<Extents> static_extents(const ir::Type& t, const char* what) {
  if (!t.is_static()) return unsupported(std::string("eltwise: the ") + what + " has a symbolic shape");
  Extents e;
  for (const ir::Dim& d : t.shape) e.push_back(d.extent);
  return e;
}

void set_axis_view(Spec& s, const Extents& shape, std::size_t axis) {
  s.outer = s.len = s.inner = 1;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (d < axis) s.outer *= shape[d];
    else if (d == axis) s.len = shape[d];
    else s.inner *= shape[d];
  }
}

Result<Spec> analyze(const ir::Function& f, ir::InstId id) {
  const ir::InstData& inst = f.inst(id);
  Spec s;
  s.op = inst.op;
  const std::string name = "'" + std::string(ir::op_name(inst.op)) + "'";
  if (ir::is_ewise_step_op(inst.op) || inst.op == Op::Ewise) {
    s.family = Family::Ewise;
  } else if (ir::op_category(inst.op) == ir::OpCategory::Reduction) {
    s.family = Family::Reduce;
  } else {
    switch (inst.op) {
      case Op::Quantize: case Op::QuantizeInt8: s.family = Family::Quantize; break;
      case Op::RmsNorm: s.family = Family::RmsNorm; break;
      case Op::Softmax: s.family = Family::Softmax; break;
      default: return unsupported("eltwise: " + name + " is not an eltwise op");
    }
  }
  for (ir::ValueId v : inst.operands) {
    const ir::Type& t = f.type_of(v);
    TERNJIT_TRY(Extents e, static_extents(t, "operand"));
    if (!is_float(t.elem))
      return unsupported("eltwise: " + name + " with " + std::string(elem_name(t.elem)) +
                         " operands is not generated (float kinds only)");
    s.in_kinds.push_back(t.elem);
    s.in_shapes.push_back(std::move(e));
  }
  for (ir::ValueId v : inst.results) {
    const ir::Type& t = f.type_of(v);
    TERNJIT_TRY(Extents e, static_extents(t, "result"));
    s.out_kinds.push_back(t.elem);
    s.out_shapes.push_back(std::move(e));
  }
  if (s.family != Family::Quantize || inst.op == Op::QuantizeInt8)
    if (s.out_kinds.size() != 1 || !is_float(s.out_kinds[0]))
      return unsupported("eltwise: " + name + " must have one float result");

  switch (s.family) {
    case Family::Ewise: {
      const int n_in = static_cast<int>(s.in_kinds.size());
      if (n_in > kMaxOperands) return unsupported("eltwise: 'ewise' with more than 16 operands");
      if (inst.op == Op::Ewise) {
        s.steps = std::get<ir::EwiseAttrs>(inst.attrs).steps;
        if (s.steps.empty()) return unsupported("eltwise: 'ewise' without steps");
      } else {
        s.steps = {ir::EwiseStep{inst.op, 0, n_in == 2 ? 1 : -1}};
      }
      if (max_live(s.steps, n_in) > kValueRegs)
        return unsupported("eltwise: 'ewise' keeps more than 8 intermediate values live");
      for (const ElemKind k : s.in_kinds)
        if (inst.op != Op::Ewise && !ir::is_ewise_binary(inst.op) && k != s.out_kinds[0])
          return unsupported("eltwise: " + name + " changes the element kind");
      s.round_steps = s.out_kinds[0] != ElemKind::F32 && s.steps.size() > 1;
      break;
    }
    case Family::Quantize: {
      if (s.in_shapes[0].empty()) return unsupported("eltwise: " + name + " of a scalar");
      s.fake_quant = inst.op == Op::QuantizeInt8;
      if (!s.fake_quant && (s.out_kinds[0] != ElemKind::I8 || s.out_kinds[1] != ElemKind::F32))
        return unsupported("eltwise: 'quantize' must give i8 values and f32 scales");
      set_axis_view(s, s.in_shapes[0], s.in_shapes[0].size() - 1);
      break;
    }
    case Family::RmsNorm: {
      if (s.in_shapes[0].empty()) return unsupported("eltwise: 'rmsnorm' of a scalar");
      set_axis_view(s, s.in_shapes[0], s.in_shapes[0].size() - 1);
      s.eps = std::get<ir::EpsAttrs>(inst.attrs).eps;
      break;
    }
    case Family::Softmax: case Family::Reduce: {
      const auto& ax = std::get<ir::AxisAttrs>(inst.attrs);
      if (ax.axis < 0 || ax.axis >= static_cast<std::int64_t>(s.in_shapes[0].size()))
        return unsupported("eltwise: " + name + " axis out of range");
      set_axis_view(s, s.in_shapes[0], static_cast<std::size_t>(ax.axis));
      if (s.family == Family::Reduce && s.out_kinds[0] != s.in_kinds[0])
        return unsupported("eltwise: " + name + " changes the element kind");
      if (inst.op == Op::ReduceMax && s.len == 0 && s.outer * s.inner > 0)
        return unsupported("eltwise: 'reduce_max' over an empty axis has no maximum");
      break;
    }
  }
  return s;
}

// ---------------------------------------------------------------- ewise broadcast plan

// The output as [outer dims..., inner]: each operand's element stride per dim (0 where
// broadcast), the inner run contiguous (stride 1) or one broadcast element (stride 0).
struct Bcast {
  Extents dims;
  std::vector<Extents> strides;
  std::vector<bool> scalar_inner;
};

Bcast plan_broadcast(const std::vector<Extents>& in_shapes, const Extents& out) {
  const std::size_t n = in_shapes.size(), rank = out.size();
  std::vector<Extents> st(n, Extents(rank, 0));
  for (std::size_t k = 0; k < n; ++k) {
    const Extents& s = in_shapes[k];
    const std::size_t off = rank - s.size();
    std::int64_t stride = 1;
    for (std::size_t d = s.size(); d-- > 0;) {
      st[k][off + d] = s[d] == 1 ? 0 : stride;
      stride *= s[d];
    }
  }
  Bcast b;
  b.strides.assign(n, {});
  for (std::size_t d = 0; d < rank; ++d) {
    if (out[d] == 1) continue;
    const bool merge = !b.dims.empty() && [&] {
      for (std::size_t k = 0; k < n; ++k)
        if (b.strides[k].back() != st[k][d] * out[d]) return false;
      return true;
    }();
    if (merge) {
      b.dims.back() *= out[d];
      for (std::size_t k = 0; k < n; ++k) b.strides[k].back() = st[k][d];
    } else {
      b.dims.push_back(out[d]);
      for (std::size_t k = 0; k < n; ++k) b.strides[k].push_back(st[k][d]);
    }
  }
  if (b.dims.empty()) {  // one element
    b.dims = {1};
    for (std::size_t k = 0; k < n; ++k) b.strides[k] = {1};
  }
  for (std::size_t k = 0; k < n; ++k) b.scalar_inner.push_back(b.strides[k].back() == 0);
  return b;
}

// ---------------------------------------------------------------- code generation

using Xbyak::Reg64;
using Xbyak::RegExp;

// Emits `body(slot, elem_offset, tail)` over n contiguous elements starting at element
// index r8 = 0: full vectors `unroll` at a time (slot = 0..unroll-1), the rest one by
// one, then the tail. r8 advances; r9 is the loop counter.
template <class Body>
void for_vectors(JitCode& c, const VecAsm& va, std::int64_t n, int unroll, Body body) {
  const std::int64_t lanes = va.lanes();
  const std::int64_t nvec = n / lanes, tail = n % lanes;
  const std::int64_t blocks = nvec / unroll, rem = nvec % unroll;
  c.xor_(c.r8, c.r8);
  if (blocks > 0) {
    Xbyak::Label loop;
    c.mov(c.r9, blocks);
    c.L(loop);
    for (int u = 0; u < unroll; ++u) body(u, u * lanes, false);
    c.add(c.r8, static_cast<std::uint32_t>(unroll * lanes));
    c.dec(c.r9);
    c.jnz(loop);
  }
  for (int u = 0; u < rem; ++u) body(u, u * lanes, false);
  if (tail) body(static_cast<int>(rem % unroll), rem * lanes, true);
}

// &base[r8 + off] for elements of `size` bytes.
RegExp at(const Reg64& base, int size, std::int64_t off) {
  return base + Reg64(Xbyak::Operand::R8) * size + static_cast<int>(off * size);
}

// The elementwise unary/binary op of one step into dst; temps are vector regs 10..13.
void emit_step_op(JitCode& c, VecAsm& va, Op op, const Xmm& dst, const Xmm& a, const Xmm& b) {
  const Xmm t0 = va.v(10), t1 = va.v(11), t2 = va.v(12), t3 = va.v(13);
  switch (op) {
    case Op::Add: c.vaddps(dst, a, b); return;
    case Op::Sub: c.vsubps(dst, a, b); return;
    case Op::Mul: c.vmulps(dst, a, b); return;
    case Op::Div: c.vdivps(dst, a, b); return;
    case Op::Max: va.max_ieee(dst, a, b, t0); return;
    case Op::Min: va.max_ieee(dst, a, b, t0, /*is_min=*/true); return;
    case Op::Neg: c.vxorps(dst, a, va.cb(0x8000'0000u)); return;
    case Op::Abs: c.vandps(dst, a, va.cb(0x7FFF'FFFFu)); return;
    case Op::Relu: va.relu(dst, a, t0); return;
    case Op::Sigmoid: va.sigmoid(dst, a, t0, t1, t2); return;
    case Op::Silu: va.sigmoid(dst, a, t0, t1, t2, /*silu=*/true); return;
    case Op::Tanh: va.tanh(dst, a, t0, t1, t2); return;
    case Op::Gelu: va.gelu(dst, a, t0, t1, t2, t3); return;
    case Op::Exp: va.exp(dst, a, t0, t1); return;
    case Op::Log: va.log(dst, a, t0, t1, t2); return;
    case Op::Sqrt: c.vsqrtps(dst, a); return;
    case Op::Rsqrt:
      c.vsqrtps(t0, a);
      c.vmovaps(dst, va.c(1.0f));
      c.vdivps(dst, dst, t0);
      return;
    default: throw std::runtime_error("not an ewise step op");
  }
}

// fn(const void* const* ptrs, void* out, int64 nvec, int64 tail): nvec full vectors,
// then (tail != 0) the baked tail of `tail_lanes` elements.
void emit_ewise(JitCode& c, VecAsm& va, const Spec& s, const Bcast& bc, int tail_lanes) {
  const int n_in = static_cast<int>(s.in_kinds.size());
  const int n_steps = static_cast<int>(s.steps.size());
  const ElemKind out_kind = s.out_kinds[0];
  std::vector<int> last(static_cast<std::size_t>(n_steps), -1);
  for (int j = 0; j < n_steps; ++j)
    for (int sl : {s.steps[static_cast<std::size_t>(j)].a, s.steps[static_cast<std::size_t>(j)].b})
      if (sl >= n_in) last[static_cast<std::size_t>(sl - n_in)] = j;

  auto body = [&](bool tail) {
    std::vector<int> reg(static_cast<std::size_t>(n_steps), -1);
    std::array<bool, kValueRegs> used{};
    auto operand = [&](int slot, int into) -> Xmm {
      if (slot >= n_in) return va.v(reg[static_cast<std::size_t>(slot - n_in)]);
      const auto k = static_cast<std::size_t>(slot);
      c.mov(c.rax, c.ptr[c.rdi + 8 * slot]);
      const ElemKind kind = s.in_kinds[k];
      if (bc.scalar_inner[k]) va.load(va.v(into), kind, c.rax, LoadMode::Broadcast);
      else va.load(va.v(into), kind, c.rax + c.r8 * elem_size(kind), tail ? LoadMode::Tail : LoadMode::Full);
      return va.v(into);
    };
    for (int j = 0; j < n_steps; ++j) {
      const ir::EwiseStep& st = s.steps[static_cast<std::size_t>(j)];
      const Xmm a = operand(st.a, 8);
      const Xmm b = st.b >= 0 ? operand(st.b, 9) : a;
      int r = 0;
      while (used[static_cast<std::size_t>(r)]) ++r;  // max_live() bounds this
      used[static_cast<std::size_t>(r)] = true;
      reg[static_cast<std::size_t>(j)] = r;
      emit_step_op(c, va, st.op, va.v(r), a, b);
      if (s.round_steps && j + 1 < n_steps) va.round_to_kind(va.v(r), out_kind, va.v(10));
      for (int i = 0; i < j; ++i)
        if (last[static_cast<std::size_t>(i)] == j) used[static_cast<std::size_t>(reg[static_cast<std::size_t>(i)])] = false;
    }
    va.store(c.rsi + c.r8 * elem_size(out_kind), out_kind, va.v(reg.back()), tail, va.v(10));
  };

  Xbyak::Label loop, tail_part, done;
  if (tail_lanes) va.set_tail(tail_lanes);
  c.xor_(c.r8, c.r8);
  c.test(c.rdx, c.rdx);
  c.jz(tail_part);
  c.L(loop);
  body(false);
  c.add(c.r8, va.lanes());
  c.dec(c.rdx);
  c.jnz(loop);
  c.L(tail_part);
  if (tail_lanes) {
    c.test(c.rcx, c.rcx);
    c.jz(done);
    body(true);
  }
  c.L(done);
  c.vzeroupper();
  c.ret();
}

// Replaces the inactive tail lanes of v by `fill` (a register).
void fill_inactive(JitCode& c, const VecAsm& va, const Xmm& v, const Xmm& fill) {
  if (va.wide()) c.vblendmps(v | c.k1, fill, v);
  else c.vblendvps(v, fill, v, Xbyak::Ymm(15));
}

// Row kernels: fn(x, out, aux, rows) with rdi, rsi, rdx, rcx.
void emit_rows(JitCode& c, VecAsm& va, const Spec& s) {
  const std::int64_t cols = s.len;
  const ElemKind xk = s.in_kinds[0];
  const ElemKind ok = s.out_kinds[0];
  const int xs = elem_size(xk), os = elem_size(ok);
  const int tail = static_cast<int>(cols % va.lanes());
  if (tail) va.set_tail(tail);
  const Xmm v0 = va.v(0), v1 = va.v(1), v2 = va.v(2), v3 = va.v(3), v4 = va.v(4), v5 = va.v(5), v6 = va.v(6),
            v7 = va.v(7), v8 = va.v(8), v9 = va.v(9);
  const Xmm x0 = Xmm(0), x1 = Xmm(1);
  auto load_x = [&](const Xmm& dst, std::int64_t off, bool t) {
    va.load(dst, xk, at(c.rdi, xs, off), t ? LoadMode::Tail : LoadMode::Full);
  };
  auto splat = [&](const Xmm& dst, const Xbyak::Address& value) { c.vmovaps(dst, value); };

  Xbyak::Label row;
  c.L(row);
  switch (s.family) {
    case Family::Quantize: {
      for (int u = 0; u < 4; ++u) c.vxorps(va.v(u), va.v(u), va.v(u));
      for_vectors(c, va, cols, 4, [&](int u, std::int64_t off, bool t) {
        load_x(v4, off, t);
        c.vandps(v4, v4, va.cb(0x7FFF'FFFFu));
        c.vmaxps(va.v(u), v4, va.v(u));  // NaN lanes of x are skipped, as in max_abs
      });
      c.vmaxps(v0, v0, v1);
      c.vmaxps(v2, v2, v3);
      c.vmaxps(v0, v0, v2);
      va.horizontal(VecAsm::Horizontal::Max, 0, 5, 6, 7);
      c.vdivss(x0, x0, va.c(127.0f));
      if (!s.fake_quant) c.vmovss(c.dword[c.rdx], x0);
      // v1: divisor (NaN when the scale is 0, so that every value becomes 0), v2: scale.
      c.vbroadcastss(v2, x0);
      {
        const VMask m = va.mask(3);
        va.cmp(m, v2, va.c(0.0f), 0x00);
        c.vmovaps(v5, va.cb(0x7FC0'0000u));
        va.blend(v1, m, v2, v5);
      }
      for_vectors(c, va, cols, 2, [&](int u, std::int64_t off, bool t) {
        const Xmm q = va.v(4 + 3 * u), tmp = va.v(5 + 3 * u);
        load_x(q, off, t);
        c.vdivps(q, q, v1);
        va.round_even(q, q);
        if (va.wide()) {
          c.vcmpps(c.k2, q, q, 0x07);  // ordered: NaN lanes become 0
          c.vmovaps(q | c.k2 | c.T_z, q);
        } else {
          c.vcmpps(tmp, q, q, 0x07);
          c.vandps(q, q, tmp);
        }
        c.vmaxps(q, q, va.c(-127.0f));
        c.vminps(q, q, va.c(127.0f));
        if (s.fake_quant) {
          c.vaddps(q, q, va.c(0.0f));  // float(int8 q) has no -0
          c.vmulps(q, q, v2);
          va.store(at(c.rsi, os, off), ok, q, t, tmp);
          return;
        }
        c.vcvtps2dq(q, q);
        const RegExp dst = at(c.rsi, 1, off);
        if (va.wide()) {
          if (t) c.vpmovsdb(c.ptr[dst] | c.k1, q);
          else c.vpmovsdb(c.ptr[dst], q);
          return;
        }
        const Xmm xq = Xmm(q.getIdx()), xt = Xmm(tmp.getIdx());
        c.vextracti128(xt, Xbyak::Ymm(q.getIdx()), 1);
        c.vpackssdw(xq, xq, xt);
        c.vpacksswb(xq, xq, xq);
        if (!t) {
          c.vmovq(c.qword[dst], xq);
        } else {
          for (int j = 0; j < va.tail(); ++j) c.vpextrb(c.byte[dst + j], xq, static_cast<std::uint8_t>(j));
        }
      });
      if (!s.fake_quant) c.add(c.rdx, 4);
      break;
    }
    case Family::RmsNorm: {
      const ElemKind gk = s.in_kinds[1];
      for (int u = 0; u < 4; ++u) c.vxorps(va.v(u), va.v(u), va.v(u));
      for_vectors(c, va, cols, 4, [&](int u, std::int64_t off, bool t) {
        load_x(v4, off, t);
        c.vfmadd231ps(va.v(u), v4, v4);
      });
      c.vaddps(v0, v0, v1);
      c.vaddps(v2, v2, v3);
      c.vaddps(v0, v0, v2);
      va.horizontal(VecAsm::Horizontal::Sum, 0, 5, 6, 7);
      c.vdivss(x0, x0, va.c(static_cast<float>(cols)));
      c.vaddss(x0, x0, va.c(static_cast<float>(s.eps)));
      c.vsqrtss(x0, x0, x0);
      c.vmovss(x1, va.c(1.0f));
      c.vdivss(x1, x1, x0);
      c.vbroadcastss(v1, x1);
      for_vectors(c, va, cols, 2, [&](int u, std::int64_t off, bool t) {
        const Xmm x = va.v(4 + 3 * u), g = va.v(5 + 3 * u), tmp = va.v(6 + 3 * u);
        load_x(x, off, t);
        va.load(g, gk, at(c.rdx, elem_size(gk), off), t ? LoadMode::Tail : LoadMode::Full);
        c.vmulps(x, x, v1);
        c.vmulps(x, x, g);
        va.store(at(c.rsi, os, off), ok, x, t, tmp);
      });
      break;
    }
    case Family::Softmax: {
      // Pass 1: m = max (vmaxps; a NaN anywhere makes the sum, hence every output, NaN).
      splat(v8, va.c(-std::numeric_limits<float>::infinity()));
      for (int u = 0; u < 4; ++u) c.vmovaps(va.v(u), v8);
      for_vectors(c, va, cols, 4, [&](int u, std::int64_t off, bool t) {
        load_x(v4, off, t);
        if (t) fill_inactive(c, va, v4, v8);
        c.vmaxps(va.v(u), va.v(u), v4);
      });
      c.vmaxps(v0, v0, v1);
      c.vmaxps(v2, v2, v3);
      c.vmaxps(v0, v0, v2);
      va.horizontal(VecAsm::Horizontal::Max, 0, 5, 6, 7);
      c.vbroadcastss(v9, x0);
      // Pass 2: sum of e = exp(x - m) (f32 output: e is stored and rescaled in pass 3).
      for (int u = 0; u < 4; ++u) c.vxorps(va.v(u), va.v(u), va.v(u));
      for_vectors(c, va, cols, 4, [&](int u, std::int64_t off, bool t) {
        load_x(v4, off, t);
        if (t) fill_inactive(c, va, v4, v8);
        c.vsubps(v4, v4, v9);
        va.exp(v7, v4, v5, v6);
        c.vaddps(va.v(u), va.v(u), v7);
        if (ok == ElemKind::F32) va.store(at(c.rsi, 4, off), ok, v7, t, v5);
      });
      c.vaddps(v0, v0, v1);
      c.vaddps(v2, v2, v3);
      c.vaddps(v0, v0, v2);
      va.horizontal(VecAsm::Horizontal::Sum, 0, 5, 6, 7);
      c.vmovss(x1, va.c(1.0f));
      c.vdivss(x1, x1, x0);
      c.vbroadcastss(v8, x1);
      for_vectors(c, va, cols, 1, [&](int, std::int64_t off, bool t) {
        if (ok == ElemKind::F32) {
          va.load(v7, ok, at(c.rsi, 4, off), t ? LoadMode::Tail : LoadMode::Full);
        } else {
          load_x(v4, off, t);
          c.vsubps(v4, v4, v9);
          va.exp(v7, v4, v5, v6);
        }
        c.vmulps(v7, v7, v8);
        va.store(at(c.rsi, os, off), ok, v7, t, v5);
      });
      break;
    }
    case Family::Reduce: {
      const bool is_max = s.op == Op::ReduceMax;
      if (is_max) {
        splat(v8, va.c(-std::numeric_limits<float>::infinity()));
        for (int u = 0; u < 4; ++u) c.vmovaps(va.v(u), v8);
      } else {
        for (int u = 0; u < 4; ++u) c.vxorps(va.v(u), va.v(u), va.v(u));
      }
      for_vectors(c, va, cols, 4, [&](int u, std::int64_t off, bool t) {
        load_x(v4, off, t);
        if (is_max) {
          if (t) fill_inactive(c, va, v4, v8);
          va.max_ieee(v5, va.v(u), v4, v6);
          c.vmovaps(va.v(u), v5);
        } else {
          c.vaddps(va.v(u), va.v(u), v4);
        }
      });
      if (is_max) {
        va.max_ieee(v5, v0, v1, v6);
        va.max_ieee(v7, v2, v3, v6);
        va.max_ieee(v0, v5, v7, v6);
        va.horizontal(VecAsm::Horizontal::MaxIeee, 0, 5, 6, 7);
      } else {
        c.vaddps(v0, v0, v1);
        c.vaddps(v2, v2, v3);
        c.vaddps(v0, v0, v2);
        va.horizontal(VecAsm::Horizontal::Sum, 0, 5, 6, 7);
        if (s.op == Op::ReduceMean) c.vdivss(x0, x0, va.c(static_cast<float>(cols)));
      }
      va.store_scalar(c.rsi, ok, x0, x1);
      c.add(c.rsi, os);
      break;
    }
    case Family::Ewise: throw std::runtime_error("ewise is not a row kernel");
  }
  if (s.family != Family::Reduce) c.add(c.rsi, static_cast<std::uint32_t>(cols * os));
  c.add(c.rdi, static_cast<std::uint32_t>(cols * xs));
  c.dec(c.rcx);
  c.jnz(row);
  c.vzeroupper();
  c.ret();
}

// Column kernels (reduction axis with inner > 1): fn(x, out, outer) with rdi, rsi, rdx.
void emit_columns(JitCode& c, VecAsm& va, const Spec& s) {
  const ElemKind xk = s.in_kinds[0], ok = s.out_kinds[0];
  const int xs = elem_size(xk), os = elem_size(ok);
  const std::int64_t lanes = va.lanes();
  const std::int64_t nvi = s.inner / lanes;
  const int tail = static_cast<int>(s.inner % lanes);
  if (tail) va.set_tail(tail);
  const auto in_step = static_cast<std::uint32_t>(s.inner * xs), out_step = static_cast<std::uint32_t>(s.inner * os);
  const Xmm v0 = va.v(0), v1 = va.v(1), v2 = va.v(2), v4 = va.v(4), v5 = va.v(5), v6 = va.v(6), v7 = va.v(7);

  // Loops k over the axis with r10 = &x[o, k, j] (and rax = &out[o, k, j] if `with_out`).
  auto over_axis = [&](bool with_out, auto&& step) {
    Xbyak::Label k_loop;
    c.lea(c.r10, c.ptr[c.rdi + c.r8 * xs]);
    if (with_out) c.lea(c.rax, c.ptr[c.rsi + c.r8 * os]);
    c.mov(c.r9, s.len);
    c.L(k_loop);
    step();
    c.add(c.r10, in_step);
    if (with_out) c.add(c.rax, out_step);
    c.dec(c.r9);
    c.jnz(k_loop);
  };
  auto block = [&](bool t) {
    const LoadMode mode = t ? LoadMode::Tail : LoadMode::Full;
    if (s.family == Family::Reduce) {
      const bool is_max = s.op == Op::ReduceMax;
      if (is_max) c.vmovaps(v0, va.c(-std::numeric_limits<float>::infinity()));
      else c.vxorps(v0, v0, v0);
      over_axis(false, [&] {
        va.load(v4, xk, c.r10, mode);
        if (is_max) {
          va.max_ieee(v5, v0, v4, v6);
          c.vmovaps(v0, v5);
        } else {
          c.vaddps(v0, v0, v4);
        }
      });
      if (s.op == Op::ReduceMean) c.vdivps(v0, v0, va.c(static_cast<float>(s.len)));
      va.store(c.rsi + c.r8 * os, ok, v0, t, v5);
      return;
    }
    // Softmax down the axis: each lane is one column.
    c.vmovaps(v0, va.c(-std::numeric_limits<float>::infinity()));
    over_axis(false, [&] {
      va.load(v4, xk, c.r10, mode);
      c.vmaxps(v0, v0, v4);
    });
    c.vxorps(v1, v1, v1);
    over_axis(false, [&] {
      va.load(v4, xk, c.r10, mode);
      c.vsubps(v4, v4, v0);
      va.exp(v7, v4, v5, v6);
      c.vaddps(v1, v1, v7);
    });
    c.vmovaps(v2, va.c(1.0f));
    c.vdivps(v2, v2, v1);
    over_axis(true, [&] {
      va.load(v4, xk, c.r10, mode);
      c.vsubps(v4, v4, v0);
      va.exp(v7, v4, v5, v6);
      c.vmulps(v7, v7, v2);
      va.store(c.rax, ok, v7, t, v5);
    });
  };

  Xbyak::Label outer;
  c.L(outer);
  c.xor_(c.r8, c.r8);
  if (nvi > 0) {
    Xbyak::Label blk;
    c.mov(c.rcx, nvi);
    c.L(blk);
    block(false);
    c.add(c.r8, static_cast<std::uint32_t>(lanes));
    c.dec(c.rcx);
    c.jnz(blk);
  }
  if (tail) block(true);
  c.add(c.rdi, static_cast<std::uint32_t>(s.len * s.inner * xs));
  c.add(c.rsi, static_cast<std::uint32_t>((s.family == Family::Reduce ? 1 : s.len) * s.inner * os));
  c.dec(c.rdx);
  c.jnz(outer);
  c.vzeroupper();
  c.ret();
}

// ---------------------------------------------------------------- kernels

using EwiseFn = void (*)(const void* const* ptrs, void* out, std::int64_t nvec, std::int64_t tail);
using RowFn = void (*)(const void* x, void* out, void* aux, std::int64_t rows);
using ColFn = void (*)(const void* x, void* out, std::int64_t outer);

// Splits [0, n) into about `parallel.threads * 4` chunks when there is enough work.
template <class F>
void split(const Parallel& parallel, std::int64_t n, std::int64_t work, F&& f) {
  std::int64_t chunks = 1;
  if (parallel.threads > 1 && work >= kMinParallelElems) chunks = std::min<std::int64_t>(n, parallel.threads * 4);
  parallel.for_each(chunks, [&](std::int64_t c) { f(n * c / chunks, n * (c + 1) / chunks); });
}

class Kernel final : public EltwiseKernel {
 public:
  Kernel(Spec spec, Isa isa) : spec_(std::move(spec)), isa_(isa) {}

  Result<void> generate() {
    const bool wide = is_wide(isa_);
    const int lanes = wide ? 16 : 8;
    const std::string isa_label = wide ? "avx512" : "avx2";
    label_ = std::string(ir::op_name(spec_.op)) + "_" + std::string(elem_name(spec_.out_kinds[0])) + "_" +
             extents_str(spec_.in_shapes.empty() ? Extents{} : spec_.in_shapes[0]) + "__" + isa_label;
    desc_ = std::string(ir::op_name(spec_.op)) + " " + std::string(elem_name(spec_.out_kinds[0]));
    std::size_t bytes = 16 * 1024;
    if (spec_.family == Family::Ewise) {
      bc_ = plan_broadcast(spec_.in_shapes, spec_.out_shapes[0]);
      bytes += spec_.steps.size() * 4096;
      desc_ += " shape=" + extents_str(spec_.out_shapes[0]) + " run=" + std::to_string(bc_.dims.back()) +
               " steps=" + std::to_string(spec_.steps.size());
    } else {
      rows_kernel_ = spec_.inner == 1;
      desc_ += " outer=" + std::to_string(spec_.outer) + " len=" + std::to_string(spec_.len) +
               " inner=" + std::to_string(spec_.inner);
    }
    desc_ += " vec=" + std::to_string(lanes * 32);
    code_ = std::make_unique<JitCode>(bytes);
    return emit_guarded("eltwise " + label_, [&] {
      code_->setDefaultJmpNEAR(true);
      VecAsm va(*code_, isa_);
      switch (spec_.family) {
        case Family::Ewise:
          emit_ewise(*code_, va, spec_, bc_, static_cast<int>(bc_.dims.back() % lanes));
          break;
        default:
          if (spec_.outer * spec_.len * spec_.inner == 0) break;  // run() handles empty tensors alone
          if (rows_kernel_) emit_rows(*code_, va, spec_);
          else emit_columns(*code_, va, spec_);
          break;
      }
      va.emit_constants();
      code_->ret();  // keeps the buffer non-empty for kernels that emitted nothing
      fn_ = code_->finalize<void*>();
    });
  }

  void run(std::span<const void* const> inputs, std::span<void* const> outputs,
           const Parallel& parallel) const override {
    switch (spec_.family) {
      case Family::Ewise: run_ewise(inputs, outputs[0], parallel); return;
      default: break;
    }
    const auto* x = static_cast<const std::uint8_t*>(inputs[0]);
    auto* out = static_cast<std::uint8_t*>(outputs[0]);
    const int xs = elem_size(spec_.in_kinds[0]), os = elem_size(spec_.out_kinds[0]);
    const std::int64_t outer = spec_.outer, len = spec_.len, inner = spec_.inner;
    if (outer * inner == 0) return;
    if (len == 0) {
      fill_empty(outputs);
      return;
    }
    if (rows_kernel_) {
      const auto fn = reinterpret_cast<RowFn>(fn_);
      split(parallel, outer, outer * len, [&](std::int64_t r0, std::int64_t r1) {
        if (r0 == r1) return;
        void* aux = nullptr;
        if (spec_.family == Family::Quantize && !spec_.fake_quant)
          aux = static_cast<std::uint8_t*>(outputs[1]) + r0 * 4;
        if (spec_.family == Family::RmsNorm) aux = const_cast<void*>(inputs[1]);
        const std::int64_t out_row = spec_.family == Family::Reduce ? 1 : len;
        fn(x + r0 * len * xs, out + r0 * out_row * os, aux, r1 - r0);
      });
      return;
    }
    const auto fn = reinterpret_cast<ColFn>(fn_);
    split(parallel, outer, outer * len * inner, [&](std::int64_t o0, std::int64_t o1) {
      if (o0 == o1) return;
      const std::int64_t out_outer = spec_.family == Family::Reduce ? inner : len * inner;
      fn(x + o0 * len * inner * xs, out + o0 * out_outer * os, o1 - o0);
    });
  }

  [[nodiscard]] std::vector<CodeBlob> code() const override { return {CodeBlob{label_, code_->bytes()}}; }
  [[nodiscard]] std::string describe() const override { return desc_; }

 private:
  // An axis of extent 0: sums are 0, means NaN (0 / 0), quantize scales 0.
  void fill_empty(std::span<void* const> outputs) const {
    const ElemKind k = spec_.out_kinds[0];
    const std::int64_t n = spec_.outer * spec_.inner;
    if (spec_.family == Family::Quantize) {
      if (!spec_.fake_quant) std::memset(outputs[1], 0, static_cast<std::size_t>(spec_.outer) * 4);
      return;
    }
    if (spec_.family != Family::Reduce) return;  // softmax / rmsnorm: the output is empty too
    auto* out = static_cast<std::uint8_t*>(outputs[0]);
    if (spec_.op != Op::ReduceMean) {
      std::memset(out, 0, static_cast<std::size_t>(n * elem_size(k)));
      return;
    }
    for (std::int64_t i = 0; i < n; ++i) {
      if (k == ElemKind::F32) {
        const std::uint32_t nan = 0x7FC0'0000u;
        std::memcpy(out + i * 4, &nan, 4);
      } else {
        const std::uint16_t nan = k == ElemKind::BF16 ? 0x7FC0 : 0x7E00;
        std::memcpy(out + i * 2, &nan, 2);
      }
    }
  }

  void run_ewise(std::span<const void* const> inputs, void* output, const Parallel& parallel) const {
    const std::int64_t total = numel(spec_.out_shapes[0]);
    if (total == 0) return;
    const auto fn = reinterpret_cast<EwiseFn>(fn_);
    const std::size_t n_in = spec_.in_kinds.size();
    const std::int64_t inner = bc_.dims.back();
    const std::int64_t outer = total / inner;
    const std::int64_t lanes = is_wide(isa_) ? 16 : 8;
    const std::int64_t block = inner <= kEwiseBlock ? inner : kEwiseBlock;  // a multiple of lanes
    const std::int64_t nb = (inner + block - 1) / block;
    const std::size_t outer_rank = bc_.dims.size() - 1;
    const int os = elem_size(spec_.out_kinds[0]);
    split(parallel, outer * nb, total, [&](std::int64_t u0, std::int64_t u1) {
      std::array<const void*, kMaxOperands> ptrs{};
      for (std::int64_t u = u0; u < u1; ++u) {
        const std::int64_t o = u / nb, j0 = (u % nb) * block, n = std::min(inner - j0, block);
        std::array<std::int64_t, kMaxOperands> off{};
        std::int64_t rest = o;
        for (std::size_t d = outer_rank; d-- > 0;) {
          const std::int64_t idx = rest % bc_.dims[d];
          rest /= bc_.dims[d];
          for (std::size_t k = 0; k < n_in; ++k) off[k] += idx * bc_.strides[k][d];
        }
        for (std::size_t k = 0; k < n_in; ++k) {
          const std::int64_t e = off[k] + (bc_.scalar_inner[k] ? 0 : j0);
          ptrs[k] = static_cast<const std::uint8_t*>(inputs[k]) + e * elem_size(spec_.in_kinds[k]);
        }
        fn(ptrs.data(), static_cast<std::uint8_t*>(output) + (o * inner + j0) * os, n / lanes, n % lanes);
      }
    });
  }

  Spec spec_;
  Isa isa_;
  Bcast bc_;
  bool rows_kernel_ = false;
  std::unique_ptr<JitCode> code_;
  void* fn_ = nullptr;
  std::string label_, desc_;
};

Result<void> check_isa(Isa isa, bool allow_foreign_isa) {
  if (!allow_foreign_isa && !host_isas().supports(isa))
    return make_error(ErrorCode::Unavailable, "eltwise: this CPU cannot run " + std::string(isa_name(isa)) + " code");
  return success();
}

}  // namespace

Result<void> eltwise_supported(const ir::Function& f, ir::InstId inst) {
  TERNJIT_TRY(Spec s, analyze(f, inst));
  (void)s;
  return success();
}

Result<std::unique_ptr<EltwiseKernel>> generate_eltwise(const ir::Function& f, ir::InstId inst, Isa isa,
                                                        bool allow_foreign_isa) {
  TERNJIT_TRY_VOID(check_isa(isa, allow_foreign_isa));
  TERNJIT_TRY(Spec s, analyze(f, inst));
  auto k = std::make_unique<Kernel>(std::move(s), isa);
  TERNJIT_TRY_VOID(k->generate());
  return std::unique_ptr<EltwiseKernel>(std::move(k));
}

Result<std::unique_ptr<EltwiseKernel>> generate_activation(ir::Op act, ElemKind kind, std::int64_t n, Isa isa,
                                                           bool allow_foreign_isa) {
  TERNJIT_TRY_VOID(check_isa(isa, allow_foreign_isa));
  if (!ir::is_ewise_step_op(act) || ir::is_ewise_binary(act))
    return unsupported("eltwise: '" + std::string(ir::op_name(act)) + "' is not a unary elementwise op");
  if (!is_float(kind)) return unsupported("eltwise: activations on " + std::string(elem_name(kind)) + " values");
  if (n < 0) return make_error(ErrorCode::InvalidArgument, "eltwise: negative activation length");
  Spec s;
  s.family = Family::Ewise;
  s.op = act;
  s.in_kinds = {kind};
  s.in_shapes = {{n}};
  s.out_kinds = {kind};
  s.out_shapes = {{n}};
  s.steps = {ir::EwiseStep{act, 0, -1}};
  auto k = std::make_unique<Kernel>(std::move(s), isa);
  TERNJIT_TRY_VOID(k->generate());
  return std::unique_ptr<EltwiseKernel>(std::move(k));
}

}  // namespace ternjit::targets::x86
