// SPDX-License-Identifier: Apache-2.0
// eltwise_rows.cpp - x86 row and column kernels: quantize, rmsnorm, softmax and reductions over one axis.
//
// Rows run 4-way unrolled passes over the last axis; columns vectorise across the
// contiguous inner extent of a middle axis. Both accumulate in f32 (eltwise.cpp's
// header states the numerics against ir/interpret.cpp).
#include <cstdint>
#include <limits>
#include <stdexcept>

#include "targets/x86/eltwise_internal.h"

namespace ternjit::targets::x86::eltwise_detail {

namespace {

using ir::Op;
using Xbyak::Reg64;
using Xbyak::RegExp;
using Xbyak::Xmm;

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

// Replaces the inactive tail lanes of v by `fill` (a register).
void fill_inactive(JitCode& c, const VecAsm& va, const Xmm& v, const Xmm& fill) {
  if (va.wide()) c.vblendmps(v | c.k1, fill, v);
  else c.vblendvps(v, fill, v, Xbyak::Ymm(15));
}

// One row kernel being emitted: the assembler, the vector helper, the spec, the kinds and
// sizes of x and the output, and the register names the family bodies share (v0..v9:
// va's vector registers; x0, x1: the xmm views of registers 0 and 1). Each family
// emits the body of the row loop: x at rdi, the output at rsi (advanced by emit_rows
// except by reduce, which writes one element and advances rsi itself).
struct RowEmitter {
  RowEmitter(JitCode& code, VecAsm& vec, const Spec& spec)
      : c(code), va(vec), s(spec), cols(spec.len), xk(spec.in_kinds[0]), ok(spec.out_kinds[0]),
        xs(elem_size(xk)), os(elem_size(ok)), v0(va.v(0)), v1(va.v(1)), v2(va.v(2)), v3(va.v(3)),
        v4(va.v(4)), v5(va.v(5)), v6(va.v(6)), v7(va.v(7)), v8(va.v(8)), v9(va.v(9)) {}

  void quantize();
  void rmsnorm();
  void softmax();
  void reduce();

  // x[r8 + off] as f32 into dst (the tail lanes only when t).
  void load_x(const Xmm& dst, std::int64_t off, bool t) {
    va.load(dst, xk, at(c.rdi, xs, off), t ? LoadMode::Tail : LoadMode::Full);
  }
  void splat(const Xmm& dst, const Xbyak::Address& value) { c.vmovaps(dst, value); }

  JitCode& c;
  VecAsm& va;
  const Spec& s;
  const std::int64_t cols;
  const ElemKind xk, ok;
  const int xs, os;
  const Xmm v0, v1, v2, v3, v4, v5, v6, v7, v8, v9;
  const Xmm x0 = Xmm(0), x1 = Xmm(1);
};

// quantize_int8 of one row: the scale (stored unless fake_quant) and the int8 values
// (or, fake_quant, the dequantized values in the output kind).
void RowEmitter::quantize() {
  // amax as the integer max of the |x| bit patterns: for non-negative floats the
  // integer order is the float order, and NaN (above inf's bits) is not skipped as
  // vmaxps would skip it. Clamping to inf's bits then leaves amax = inf exactly when
  // the row holds a NaN or an inf, and such a row's scale is NaN (ir/quant.h):
  // scale = amax / 127 + amax * 0, where amax * 0 is NaN for inf and +0 otherwise.
  // The same instruction count per vector as a vmaxps scan, 3 more per row.
  for (int u = 0; u < 4; ++u) c.vxorps(va.v(u), va.v(u), va.v(u));
  for_vectors(c, va, cols, 4, [&](int u, std::int64_t off, bool t) {
    load_x(v4, off, t);
    c.vandps(v4, v4, va.cb(0x7FFF'FFFFu));
    c.vpmaxsd(va.v(u), va.v(u), v4);
  });
  c.vpmaxsd(v0, v0, v1);
  c.vpmaxsd(v2, v2, v3);
  c.vpmaxsd(v0, v0, v2);
  c.vpminsd(v0, v0, va.cb(0x7F80'0000u));
  va.horizontal(VecAsm::Horizontal::Max, 0, 5, 6, 7);
  c.vmulss(x1, x0, va.c(0.0f));
  c.vdivss(x0, x0, va.c(127.0f));
  c.vaddss(x0, x0, x1);
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
}

// rmsnorm of one row by the gain at rdx.
void RowEmitter::rmsnorm() {
  // The sum of squares is accumulated in f32, which overflows once the row's
  // magnitude passes about sqrt(FLT_MAX / cols) (2.9e17 for 4096 columns; the
  // reference sums in double). Pass 1 also finds m = max |x|. Rows with m < 2^32
  // cannot overflow (cols * 2^64 < FLT_MAX) and use the sum as is, bit for bit as
  // before. Larger finite rows are summed again scaled by the power of two
  // s = 2^(16 - exponent(m)) (exact; the scaled max lies in [2^16, 2^17)), and
  //   y = x * s / sqrt(sum((x s)^2) / cols + eps s^2) * g.
  // An infinite m keeps the unscaled path, whose inf sum gives the reference's 0s
  // (NaN where x is inf); NaN lanes are skipped by the max and poison the sum.
  const ElemKind gk = s.in_kinds[1];
  const Xmm x5 = Xmm(5), x7 = Xmm(7);
  const std::uint32_t kScaleFrom = (127u + 32u) << 23;  // bits of 2^32
  const std::uint32_t kInfBits = 0x7F80'0000u;
  for (int u = 0; u < 4; ++u) {
    c.vxorps(va.v(u), va.v(u), va.v(u));
    c.vxorps(va.v(5 + u), va.v(5 + u), va.v(5 + u));
  }
  for_vectors(c, va, cols, 4, [&](int u, std::int64_t off, bool t) {
    load_x(v4, off, t);
    c.vfmadd231ps(va.v(u), v4, v4);
    c.vandps(v4, v4, va.cb(0x7FFF'FFFFu));
    c.vmaxps(va.v(5 + u), v4, va.v(5 + u));
  });
  c.vmaxps(v5, v5, v6);
  c.vmaxps(v7, v7, v8);
  c.vmaxps(v5, v5, v7);
  va.horizontal(VecAsm::Horizontal::Max, 5, 6, 7, 8);
  auto sum_to_x0 = [&] {
    c.vaddps(v0, v0, v1);
    c.vaddps(v2, v2, v3);
    c.vaddps(v0, v0, v2);
    va.horizontal(VecAsm::Horizontal::Sum, 0, 6, 7, 8);
  };
  sum_to_x0();
  Xbyak::Label unscaled, normalize;
  c.vmovd(c.r10d, x5);
  c.cmp(c.r10d, kScaleFrom);
  c.jb(unscaled);
  c.cmp(c.r10d, kInfBits);
  c.jae(unscaled);
  // s = 2^(16 - (e - 127)): biased exponent 270 - e, in [16, 111] for e in [159, 254].
  c.shr(c.r10d, 23);
  c.mov(c.r11d, 270);
  c.sub(c.r11d, c.r10d);
  c.shl(c.r11d, 23);
  c.vmovd(x5, c.r11d);
  c.vbroadcastss(v5, x5);
  for (int u = 0; u < 4; ++u) c.vxorps(va.v(u), va.v(u), va.v(u));
  for_vectors(c, va, cols, 4, [&](int u, std::int64_t off, bool t) {
    load_x(v4, off, t);
    c.vmulps(v4, v4, v5);
    c.vfmadd231ps(va.v(u), v4, v4);
  });
  sum_to_x0();
  c.vdivss(x0, x0, va.c(static_cast<float>(cols)));
  c.vmulss(x7, x5, x5);
  c.vmulss(x7, x7, va.c(static_cast<float>(s.eps)));
  c.vaddss(x0, x0, x7);
  c.vsqrtss(x0, x0, x0);
  c.vdivss(x1, x5, x0);
  c.jmp(normalize);
  c.L(unscaled);
  c.vdivss(x0, x0, va.c(static_cast<float>(cols)));
  c.vaddss(x0, x0, va.c(static_cast<float>(s.eps)));
  c.vsqrtss(x0, x0, x0);
  c.vmovss(x1, va.c(1.0f));
  c.vdivss(x1, x1, x0);
  c.L(normalize);
  c.vbroadcastss(v1, x1);
  for_vectors(c, va, cols, 2, [&](int u, std::int64_t off, bool t) {
    const Xmm x = va.v(4 + 3 * u), g = va.v(5 + 3 * u), tmp = va.v(6 + 3 * u);
    load_x(x, off, t);
    va.load(g, gk, at(c.rdx, elem_size(gk), off), t ? LoadMode::Tail : LoadMode::Full);
    c.vmulps(x, x, v1);
    c.vmulps(x, x, g);
    va.store(at(c.rsi, os, off), ok, x, t, tmp);
  });
}

// softmax of one row: three passes (max, sum of exponentials, scale).
void RowEmitter::softmax() {
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
}

// reduce_sum / reduce_mean / reduce_max of one row into one output element.
void RowEmitter::reduce() {
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
}

}  // namespace

void emit_rows(JitCode& c, VecAsm& va, const Spec& s) {
  const int tail = static_cast<int>(s.len % va.lanes());
  if (tail) va.set_tail(tail);
  RowEmitter e(c, va, s);
  Xbyak::Label row;
  c.L(row);
  switch (s.family) {
    case Family::Quantize: e.quantize(); break;
    case Family::RmsNorm: e.rmsnorm(); break;
    case Family::Softmax: e.softmax(); break;
    case Family::Reduce: e.reduce(); break;
    case Family::Ewise: throw std::runtime_error("ewise is not a row kernel");
  }
  if (s.family != Family::Reduce) c.add(c.rsi, static_cast<std::uint32_t>(e.cols * e.os));
  c.add(c.rdi, static_cast<std::uint32_t>(e.cols * e.xs));
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

}  // namespace ternjit::targets::x86::eltwise_detail
