// SPDX-License-Identifier: Apache-2.0
// tmatmul_float.cpp - the Float tmatmul variant: 2-bit ternary weights decoded to f32 in registers, FMA.
//
// Packed layout ("tern2.float.nb<NB>"): the N columns are cut into panels of NB columns
// (the last one zero-padded); a panel is K rows of NB/4 bytes, panels back to back. In
// a row, column c of the panel is the 2-bit field at bit 2*(c % 16) of the little-endian
// dword at byte 4*(c / 16): code 0 -> 0, 1 -> +1, 3 -> -1 (2-bit two's complement;
// 2 is never written). One panel streams sequentially along K, which the hardware
// prefetchers follow well (interleaved panels beat short per-row streams).
//
// Decode (per vector of L = 8 or 16 f32 lanes, i.e. L codes = L/4 bytes):
//   vpbroadcastd t, [codes]      the dword holding this vector's codes, in every lane
//   vpsrlvd      t, t, shifts     lane i: code i now in bits 0-1 (shifts 0, 2, 4, ...)
//   vpermps      t, t, table      index = low 3 (ymm) or 4 (zmm) bits; table[i] = f(i & 3)
// Two ALU operations per L weights, whatever the row block; the decoded vector then
// feeds m_block FMAs (one per row of x). The table lookup ignores the bits above the
// code (they belong to the next codes), so no AND is needed. We chose this over masked
// add/sub from AVX-512 bit planes because it works the same on AVX2, needs one op
// fewer per row once m_block >= 2, and keeps the reference's 0 * x term (inf/NaN in x
// times a zero weight gives NaN, as the double reference does).
//
// Numerics: the sum is f32 FMA in ascending k (the reference sums in double; tests use
// a stated bound). The epilogue follows ir/interpret.cpp's binary(): for bf16/f16
// results the accumulator is first rounded to the kind, each epilogue operand is rounded
// to the kind (so even the f32 scales are, as the reference does), each op is one f32
// operation and its result is rounded to the kind again. Rounding to bf16 is done with
// integer ops (round to nearest even, NaN kept quiet) rather than vcvtneps2bf16, so the
// generated code depends only on (problem, config), never on the host's AVX512_BF16;
// it runs only in the epilogue. f16 uses vcvtps2ph imm 0 (round to nearest even).
#include <algorithm>
#include <array>
#include <cstring>
#include <string>

#include "targets/x86/jit_code.h"
#include "targets/x86/tmatmul_internal.h"

namespace ternjit::targets::x86::detail {

namespace {

using Xbyak::Label;
using Xbyak::Opmask;
using Xbyak::Reg64;
using Xbyak::Xmm;
using Xbyak::Ymm;
using Xbyak::Zmm;

// What the generated function receives (one pointer to this, in rdi).
struct FloatCall {
  const std::uint8_t* x = nullptr;         // row m0 of x, column 0
  const std::uint8_t* w = nullptr;         // the first panel of the chunk
  std::uint8_t* y = nullptr;               // y[m0, n0]
  const float* x_scale = nullptr;          // x_scale + m0
  const float* w_scale = nullptr;          // w_scale + n0 (per channel) or w_scale
  const std::uint8_t* bias = nullptr;      // bias + n0
  const std::uint8_t* residual = nullptr;  // residual[m0, n0]
  std::int64_t m_count = 0;                // rows (a multiple of m_block, except the last chunk)
  std::int64_t full_panels = 0;            // full panels in the chunk
  std::int64_t tail = 0;                   // 1: the chunk ends with the partial last panel
};
using FloatFn = void (*)(const FloatCall*);

int elem_bytes(ElemKind k) { return k == ElemKind::F32 ? 4 : 2; }

bool is_avx512_isa(Isa isa) { return isa == Isa::Avx512 || isa == Isa::Avx512Vnni || isa == Isa::Amx; }

// Vector registers the K loop needs besides the accumulators: x broadcasts (m_block),
// two decode temporaries; the shift and table constants stay in registers when they fit.
int vector_regs(const TMatMulConfig& c) { return is_avx512_isa(c.isa) ? 32 : 16; }

struct Geometry {
  int lanes = 8;           // f32 lanes per vector
  int nb = 16;             // panel width (columns)
  int nv = 2;              // vectors per panel
  int mb = 1;              // rows per block
  int row_bytes = 4;       // bytes of one panel row (nb / 4)
  std::int64_t panels = 1; // ceil(N / nb)
  std::int64_t full_panels = 1;
  int tail_cols = 0;       // N % nb
  std::int64_t panel_bytes = 0;
  bool evex = false;       // AVX-512 encodings, 32 registers and masks available
  bool consts_in_regs = true;
};

Geometry geometry(const TMatMulProblem& p, const TMatMulConfig& c) {
  Geometry g;
  g.lanes = c.vector_bits / 32;
  g.nb = c.n_block;
  g.nv = g.nb / g.lanes;
  g.mb = c.m_block;
  g.row_bytes = g.nb / 4;
  g.panels = (p.N + g.nb - 1) / g.nb;
  g.full_panels = p.N / g.nb;
  g.tail_cols = static_cast<int>(p.N % g.nb);
  g.panel_bytes = p.K * g.row_bytes;
  g.evex = is_avx512_isa(c.isa);
  g.consts_in_regs = g.mb * g.nv + g.mb + 4 <= vector_regs(c);
  return g;
}

Error invalid(const std::string& what) { return make_error(ErrorCode::InvalidArgument, "tmatmul float: " + what); }

// ----------------------------------------------------------------------------------------------
// The generator.

// The constant pool, each entry 64 bytes (full-width memory operands for ymm and zmm).
enum Const : int { kShift, kTable, kOne, kRound, kHigh, kQuiet, kZero, kNumConsts };

class FloatGen {
 public:
  FloatGen(JitCode& code, const TMatMulProblem& p, const TMatMulConfig& c) : a_(code), p_(p), c_(c), g_(geometry(p, c)) {
    xb_ = elem_bytes(p.x_kind);
    ob_ = elem_bytes(p.out_kind);
  }

  void emit();

 private:
  // Registers (System V: rdi holds the FloatCall*; callee-saved ones are pushed).
  const Reg64 rArgs = Xbyak::util::rdi;
  const Reg64 rW = Xbyak::util::r8;       // current panel's codes
  const Reg64 rYp = Xbyak::util::r9;      // y of the current panel, row m0
  const Reg64 rBias = Xbyak::util::r10;   // bias of the current panel
  const Reg64 rWs = Xbyak::util::r11;     // w_scale of the current panel
  const Reg64 rResP = Xbyak::util::r12;   // residual of the current panel, row m0
  const Reg64 rPanels = Xbyak::util::r13; // panel counter
  const Reg64 rM = Xbyak::util::r14;      // rows left
  const Reg64 rX = Xbyak::util::rsi;      // x row of the block
  const Reg64 rY = Xbyak::util::rdx;      // y row of the block
  const Reg64 rRes = Xbyak::util::rcx;    // residual row of the block
  const Reg64 rXs = Xbyak::util::rbx;     // x_scale of the block's first row
  const Reg64 rXk = Xbyak::util::rax;     // x at k (K loop); epilogue temporary
  const Reg64 rWk = Xbyak::util::rbp;     // codes at k (K loop)
  const Reg64 rK = Xbyak::util::r15;      // K loop counter; epilogue temporary

  JitCode& a_;
  const TMatMulProblem& p_;
  const TMatMulConfig& c_;
  Geometry g_;
  int xb_ = 4, ob_ = 4;
  Label consts_;
  static constexpr int kStage = 64;  // bytes of stack staging for AVX2 partial vectors

  Ymm vec(int i) const { return c_.vector_bits == 512 ? Ymm(Zmm(i)) : Ymm(i); }
  // The register holding the packed 16-bit half of vec(i) (ymm for zmm, xmm for ymm).
  Xmm half(int i) const { return c_.vector_bits == 512 ? Xmm(Ymm(i)) : Xmm(i); }
  Xbyak::Address cst(Const k) const { return a_.ptr[a_.rip + consts_ + k * 64]; }
  void add_imm(const Reg64& r, std::int64_t v) {
    if (v == 0) return;
    if (v >= INT32_MIN && v <= INT32_MAX) {
      a_.add(r, static_cast<std::uint32_t>(v));
    } else {
      a_.mov(rXk, v);
      a_.add(r, rXk);
    }
  }

  void emit_m_loop(int nvb, int last_valid);
  void emit_block(int mb, int nvb, int last_valid);
  void emit_epilogue(int mb, int nvb, int last_valid);
  void emit_consts();

  // Epilogue helpers on one vector v (temporaries t1, t2).
  void round_to_kind(const Ymm& v, const Ymm& t1, const Ymm& t2);
  void relu(const Ymm& v, const Ymm& t1, const Ymm& t2);
  void load_f32(const Ymm& dst, const Xbyak::Address& src, int valid, const Reg64& base, std::int64_t off);
  void load_out(const Ymm& dst, const Reg64& base, std::int64_t off, int valid);
  void store_out(const Reg64& base, std::int64_t off, const Ymm& v, const Ymm& t1, int valid);
  // AVX2 partial vectors: copy `count` elements of `esz` bytes between memory and the stack.
  void stage_in(const Reg64& base, std::int64_t off, int count, int esz);
  void stage_out(const Reg64& base, std::int64_t off, int count, int esz);
};

void FloatGen::emit_consts() {
  a_.align(64);
  a_.L(consts_);
  auto dw = [&](auto f) {
    for (int i = 0; i < 16; ++i) a_.dd(static_cast<std::uint32_t>(f(i)));
  };
  dw([&](int i) { return 2 * (i % g_.lanes); });  // kShift: lane i's code at bits 2i
  dw([](int i) {                                   // kTable: f32 of code (i & 3)
    const float v[4] = {0.0f, 1.0f, 0.0f, -1.0f};
    std::uint32_t b;
    std::memcpy(&b, &v[i & 3], 4);
    return b;
  });
  dw([](int) { return 1u; });            // kOne
  dw([](int) { return 0x7fffu; });       // kRound
  dw([](int) { return 0xffff0000u; });   // kHigh
  dw([](int) { return 0x00400000u; });   // kQuiet: the quiet bit of an f32 NaN
  dw([](int) { return 0u; });            // kZero
}

// Rounds the f32 values of v to the out kind (bf16/f16), leaving them as f32.
void FloatGen::round_to_kind(const Ymm& v, const Ymm& t1, const Ymm& t2) {
  if (p_.out_kind == ElemKind::F32) return;
  if (p_.out_kind == ElemKind::F16) {
    a_.vcvtps2ph(half(t1.getIdx()), v, 0);  // imm 0: round to nearest even
    a_.vcvtph2ps(v, half(t1.getIdx()));
    return;
  }
  // bf16: bits + 0x7fff + ((bits >> 16) & 1), high half kept; NaN: quieted, not rounded
  // (adding could carry a NaN's payload into the exponent and make it inf).
  a_.vpsrld(t1, v, 16);
  a_.vandps(t1, t1, cst(kOne));
  a_.vpaddd(t1, t1, cst(kRound));
  a_.vpaddd(t1, t1, v);
  if (g_.evex) {
    a_.vcmpps(a_.k1, v, v, 3);  // unordered: NaN
    a_.vorps(t1 | a_.k1, v, cst(kQuiet));
  } else {
    a_.vcmpps(t2, v, v, 3);
    a_.vblendvps(t1, t1, v, t2);
    a_.vandps(t2, t2, cst(kQuiet));
    a_.vorps(t1, t1, t2);
  }
  a_.vandps(v, t1, cst(kHigh));
}

// relu as the reference: x > 0 ? x : +0, NaN stays NaN.
void FloatGen::relu(const Ymm& v, const Ymm& t1, const Ymm& t2) {
  if (g_.evex) {
    a_.vcmpps(a_.k1, v, v, 7);  // ordered lanes
    a_.vmaxps(v | a_.k1, v, cst(kZero));  // max(v, 0) = v > 0 ? v : 0 (also for -0)
  } else {
    a_.vmaxps(t1, v, cst(kZero));
    a_.vcmpps(t2, v, v, 3);
    a_.vblendvps(v, t1, v, t2);
  }
}

void FloatGen::stage_in(const Reg64& base, std::int64_t off, int count, int esz) {
  for (int i = 0; i < count; ++i) {
    if (esz == 4) {
      a_.mov(rK.cvt32(), a_.dword[base + off + i * 4]);
      a_.mov(a_.dword[a_.rsp + i * 4], rK.cvt32());
    } else {
      a_.mov(rK.cvt16(), a_.word[base + off + i * 2]);
      a_.mov(a_.word[a_.rsp + i * 2], rK.cvt16());
    }
  }
}

void FloatGen::stage_out(const Reg64& base, std::int64_t off, int count, int esz) {
  for (int i = 0; i < count; ++i) {
    if (esz == 4) {
      a_.mov(rK.cvt32(), a_.dword[a_.rsp + i * 4]);
      a_.mov(a_.dword[base + off + i * 4], rK.cvt32());
    } else {
      a_.mov(rK.cvt16(), a_.word[a_.rsp + i * 2]);
      a_.mov(a_.word[base + off + i * 2], rK.cvt16());
    }
  }
}

// Loads L f32 from base+off (valid < lanes: only that many, masked or staged).
void FloatGen::load_f32(const Ymm& dst, const Xbyak::Address& src, int valid, const Reg64& base, std::int64_t off) {
  if (valid == g_.lanes) {
    a_.vmovups(dst, src);
  } else if (g_.evex) {
    a_.vmovups(dst | a_.k2 | a_.T_z, src);
  } else {
    stage_in(base, off, valid, 4);
    a_.vmovups(dst, a_.ptr[a_.rsp]);
  }
}

// Loads L values of the out kind (bias/residual) at base+off as f32.
void FloatGen::load_out(const Ymm& dst, const Reg64& base, std::int64_t off, int valid) {
  const bool partial = valid != g_.lanes;
  if (partial && !g_.evex) {
    stage_in(base, off, valid, ob_);
  }
  const Xbyak::Address src = (partial && !g_.evex) ? a_.ptr[a_.rsp] : a_.ptr[base + off];
  const Ymm d = (partial && g_.evex) ? (dst | a_.k2 | a_.T_z) : dst;
  switch (p_.out_kind) {
    case ElemKind::F32: a_.vmovups(d, src); break;
    case ElemKind::BF16:
      a_.vpmovzxwd(d, src);
      a_.vpslld(dst, dst, 16);
      break;
    default: a_.vcvtph2ps(d, src); break;
  }
}

// Stores v (f32, already rounded to the out kind) as the out kind at base+off.
void FloatGen::store_out(const Reg64& base, std::int64_t off, const Ymm& v, const Ymm& t1, int valid) {
  const bool partial = valid != g_.lanes;
  const bool stage = partial && !g_.evex;
  const Xbyak::Address dst0 = stage ? a_.ptr[a_.rsp] : a_.ptr[base + off];
  const Xbyak::Address dst = (partial && g_.evex) ? (dst0 | a_.k2) : dst0;
  switch (p_.out_kind) {
    case ElemKind::F32: a_.vmovups(dst, v); break;
    case ElemKind::BF16:
      a_.vpsrld(t1, v, 16);
      if (g_.evex) {
        a_.vpmovdw(dst, t1);
      } else {
        // vpackusdw packs within 128-bit lanes: words 0-3 | 0-3 | 4-7 | 4-7; qwords 0, 2.
        a_.vpackusdw(t1, t1, t1);
        a_.vpermq(t1, t1, 0x08);
        a_.vmovdqu(dst, Xmm(t1.getIdx()));
      }
      break;
    default: a_.vcvtps2ph(dst, v, 0); break;
  }
  if (stage) stage_out(base, off, valid, ob_);
}

// One block: mb rows x nvb vectors of the current panel (the last vector has
// last_valid columns). Pointers: rX (x row), rW (panel codes), rY/rRes/rXs (rows),
// rBias/rWs (panel); rXk, rWk, rK are free to use.
void FloatGen::emit_block(int mb, int nvb, int last_valid) {
  const int nacc = mb * nvb;
  auto acc = [&](int m, int j) { return vec(m * nvb + j); };
  auto xr = [&](int m) { return vec(nacc + m); };
  const Ymm wt[2] = {vec(nacc + mb), vec(nacc + mb + 1)};
  const bool in_regs = nacc + mb + 4 <= vector_regs(c_);
  const Ymm shift = vec(nacc + mb + 2), table = vec(nacc + mb + 3);
  const std::int64_t ldx = p_.K * xb_;

  for (int i = 0; i < nacc; ++i) a_.vxorps(vec(i), vec(i), vec(i));
  if (in_regs) {
    a_.vmovups(shift, cst(kShift));
    a_.vmovups(table, cst(kTable));
  }
  a_.mov(rXk, rX);
  a_.mov(rWk, rW);

  auto body = [&](int u) {
    for (int m = 0; m < mb; ++m) {
      const Xbyak::Address xa = a_.ptr[rXk + m * ldx + u * xb_];
      switch (p_.x_kind) {
        case ElemKind::F32: a_.vbroadcastss(xr(m), xa); break;
        case ElemKind::BF16:
          a_.vpbroadcastw(xr(m), xa);
          a_.vpslld(xr(m), xr(m), 16);
          break;
        default:
          a_.vpbroadcastw(half(xr(m).getIdx()), xa);
          a_.vcvtph2ps(xr(m), half(xr(m).getIdx()));
          break;
      }
    }
    if (c_.prefetch_bytes > 0) {
      // One prefetch per 64-byte line whose start falls in this row's codes.
      for (int line = (u * g_.row_bytes + 63) / 64; line * 64 < (u + 1) * g_.row_bytes; ++line)
        a_.prefetcht0(a_.ptr[rWk + c_.prefetch_bytes + line * 64]);
    }
    for (int j = 0; j < nvb; ++j) {
      const Ymm& t = wt[j & 1];
      a_.vpbroadcastd(t, a_.ptr[rWk + u * g_.row_bytes + j * (g_.lanes / 4)]);
      if (in_regs) {
        a_.vpsrlvd(t, t, shift);
        a_.vpermps(t, t, table);
      } else {
        a_.vpsrlvd(t, t, cst(kShift));
        a_.vpermps(t, t, cst(kTable));
      }
      for (int m = 0; m < mb; ++m) a_.vfmadd231ps(acc(m, j), t, xr(m));
    }
  };

  const int ku = std::max(1, c_.k_unroll);
  const std::int64_t iters = p_.K / ku;
  const int rem = static_cast<int>(p_.K % ku);
  if (iters > 0) {
    Label loop;
    a_.mov(rK, iters);
    a_.L(loop);
    for (int u = 0; u < ku; ++u) body(u);
    add_imm(rXk, static_cast<std::int64_t>(ku) * xb_);
    add_imm(rWk, static_cast<std::int64_t>(ku) * g_.row_bytes);
    a_.dec(rK);
    a_.jnz(loop, JitCode::T_NEAR);
  }
  for (int u = 0; u < rem; ++u) body(u);

  emit_epilogue(mb, nvb, last_valid);
}

void FloatGen::emit_epilogue(int mb, int nvb, int last_valid) {
  const int nacc = mb * nvb;
  // Free after the K loop: the x broadcasts, decode temporaries and constants (>= 4).
  const Ymm xs = vec(nacc), t1 = vec(nacc + 1), t2 = vec(nacc + 2), t3 = vec(nacc + 3);
  const std::int64_t ldy = p_.N * ob_;
  if (g_.evex && last_valid != g_.lanes) {
    a_.mov(rK.cvt32(), (1u << last_valid) - 1);
    a_.kmovw(a_.k2, rK.cvt32());
  }
  for (int m = 0; m < mb; ++m) {
    if (p_.x_scale) {
      a_.vbroadcastss(xs, a_.ptr[rXs + m * 4]);
      round_to_kind(xs, t1, t2);
    }
    for (int j = 0; j < nvb; ++j) {
      const Ymm v = vec(m * nvb + j);
      const int valid = j == nvb - 1 ? last_valid : g_.lanes;
      round_to_kind(v, t1, t2);
      if (p_.x_scale) {
        a_.vmulps(v, v, xs);
        round_to_kind(v, t1, t2);
      }
      if (p_.w_scale) {
        if (p_.w_scale_per_channel) {
          load_f32(t1, a_.ptr[rWs + j * g_.lanes * 4], valid, rWs, static_cast<std::int64_t>(j) * g_.lanes * 4);
        } else {
          a_.vbroadcastss(t1, a_.ptr[rWs]);
        }
        round_to_kind(t1, t2, t3);
        a_.vmulps(v, v, t1);
        round_to_kind(v, t1, t2);
      }
      if (p_.bias) {
        load_out(t1, rBias, static_cast<std::int64_t>(j) * g_.lanes * ob_, valid);
        a_.vaddps(v, v, t1);
        round_to_kind(v, t1, t2);
      }
      if (p_.residual) {
        load_out(t1, rRes, m * ldy + static_cast<std::int64_t>(j) * g_.lanes * ob_, valid);
        a_.vaddps(v, v, t1);
        round_to_kind(v, t1, t2);
      }
      if (p_.relu) relu(v, t1, t2);
      store_out(rY, m * ldy + static_cast<std::int64_t>(j) * g_.lanes * ob_, v, t1, valid);
    }
  }
}

// Rows of the chunk for one panel: full blocks of m_block rows, then the M tail.
void FloatGen::emit_m_loop(int nvb, int last_valid) {
  a_.mov(rX, a_.ptr[rArgs + offsetof(FloatCall, x)]);
  a_.mov(rXs, a_.ptr[rArgs + offsetof(FloatCall, x_scale)]);
  a_.mov(rY, rYp);
  a_.mov(rRes, rResP);
  a_.mov(rM, a_.ptr[rArgs + offsetof(FloatCall, m_count)]);
  const int mb = g_.mb;
  const int mrem = static_cast<int>(p_.M % mb);
  Label loop, tail, done;
  if (p_.M >= mb) {
    a_.L(loop);
    a_.cmp(rM, mb);
    a_.jb(tail, JitCode::T_NEAR);
    emit_block(mb, nvb, last_valid);
    add_imm(rX, static_cast<std::int64_t>(mb) * p_.K * xb_);
    add_imm(rXs, static_cast<std::int64_t>(mb) * 4);
    add_imm(rY, static_cast<std::int64_t>(mb) * p_.N * ob_);
    if (p_.residual) add_imm(rRes, static_cast<std::int64_t>(mb) * p_.N * ob_);
    a_.sub(rM, mb);
    a_.jmp(loop, JitCode::T_NEAR);
  }
  a_.L(tail);
  if (mrem > 0) {
    // Chunks start at multiples of m_block, so the only partial block has M % m_block rows.
    a_.test(rM, rM);
    a_.jz(done, JitCode::T_NEAR);
    emit_block(mrem, nvb, last_valid);
  }
  a_.L(done);
}

void FloatGen::emit() {
  static const Reg64 saved[] = {Xbyak::util::rbx, Xbyak::util::rbp, Xbyak::util::r12,
                                Xbyak::util::r13, Xbyak::util::r14, Xbyak::util::r15};
  for (const Reg64& r : saved) a_.push(r);
  a_.sub(a_.rsp, kStage + 8);  // staging area (16-byte aligned after 6 pushes + return address)

  a_.mov(rW, a_.ptr[rArgs + offsetof(FloatCall, w)]);
  a_.mov(rYp, a_.ptr[rArgs + offsetof(FloatCall, y)]);
  a_.mov(rBias, a_.ptr[rArgs + offsetof(FloatCall, bias)]);
  a_.mov(rWs, a_.ptr[rArgs + offsetof(FloatCall, w_scale)]);
  a_.mov(rResP, a_.ptr[rArgs + offsetof(FloatCall, residual)]);
  a_.mov(rPanels, a_.ptr[rArgs + offsetof(FloatCall, full_panels)]);

  Label panel_loop, tail_part, done;
  if (g_.full_panels > 0) {
    a_.test(rPanels, rPanels);
    a_.jz(tail_part, JitCode::T_NEAR);
    a_.L(panel_loop);
    emit_m_loop(g_.nv, g_.lanes);
    add_imm(rW, g_.panel_bytes);
    add_imm(rYp, static_cast<std::int64_t>(g_.nb) * ob_);
    if (p_.bias) add_imm(rBias, static_cast<std::int64_t>(g_.nb) * ob_);
    if (p_.w_scale && p_.w_scale_per_channel) add_imm(rWs, static_cast<std::int64_t>(g_.nb) * 4);
    if (p_.residual) add_imm(rResP, static_cast<std::int64_t>(g_.nb) * ob_);
    a_.dec(rPanels);
    a_.jnz(panel_loop, JitCode::T_NEAR);
  }
  a_.L(tail_part);
  if (g_.tail_cols > 0) {
    a_.cmp(a_.qword[rArgs + offsetof(FloatCall, tail)], 0);
    a_.je(done, JitCode::T_NEAR);
    const int nvt = (g_.tail_cols + g_.lanes - 1) / g_.lanes;
    emit_m_loop(nvt, g_.tail_cols - (nvt - 1) * g_.lanes);
  }
  a_.L(done);
  a_.add(a_.rsp, kStage + 8);
  for (int i = 5; i >= 0; --i) a_.pop(saved[i]);
  a_.vzeroupper();
  a_.ret();
  emit_consts();
}

// ----------------------------------------------------------------------------------------------
// The kernel.

class FloatKernel final : public TMatMulKernel {
 public:
  FloatKernel(const TMatMulProblem& p, const TMatMulConfig& c) : p_(p), c_(c), g_(geometry(p, c)), code_(256 * 1024) {}

  Result<void> generate() {
    return emit_guarded("tmatmul float", [&] {
      FloatGen gen(code_, p_, c_);
      gen.emit();
      fn_ = code_.finalize<FloatFn>();
    });
  }

  [[nodiscard]] const TMatMulProblem& problem() const override { return p_; }
  [[nodiscard]] const TMatMulConfig& config() const override { return c_; }
  [[nodiscard]] std::string pack_signature() const override { return "tern2.float.nb" + std::to_string(g_.nb); }

  [[nodiscard]] Result<PackedWeights> pack(const TernaryWeights& w) const override {
    // 64 bytes of slack: the decode reads a dword at the end of a row (ymm: 2 bytes past it).
    TERNJIT_TRY(PackedWeights pw, detail::start_pack(w, p_, pack_signature(),
                                                     static_cast<std::size_t>(g_.panels * g_.panel_bytes), 64));
    std::uint8_t* out = pw.storage.data() + pw.offset;
    for (std::int64_t k = 0; k < p_.K; ++k) {
      for (std::int64_t n = 0; n < p_.N; ++n) {
        const int v = w[static_cast<std::size_t>(k * p_.N + n)];
        if (v == 0) continue;
        const std::int64_t panel = n / g_.nb, c = n % g_.nb;
        const unsigned code = v > 0 ? 1u : 3u;
        out[panel * g_.panel_bytes + k * g_.row_bytes + c / 4] |= static_cast<std::uint8_t>(code << (2 * (c % 4)));
      }
    }
    return pw;
  }

  void run(const TMatMulArgs& args, const Parallel& parallel) const override {
    const std::int64_t mblocks = (p_.M + g_.mb - 1) / g_.mb;
    const std::int64_t t = std::max(1, c_.threads);
    const std::int64_t nchunks = std::min<std::int64_t>(g_.panels, t);
    const std::int64_t mchunks = std::min<std::int64_t>(mblocks, std::max<std::int64_t>(1, t / nchunks));
    const int xb = elem_bytes(p_.x_kind), ob = elem_bytes(p_.out_kind);
    const auto* x = static_cast<const std::uint8_t*>(args.x);
    auto* y = static_cast<std::uint8_t*>(args.y);
    const auto* bias = static_cast<const std::uint8_t*>(args.bias);
    const auto* res = static_cast<const std::uint8_t*>(args.residual);
    const std::uint8_t* w = args.w->data();
    parallel.for_each(nchunks * mchunks, [&](std::int64_t i) {
      const std::int64_t ni = i / mchunks, mi = i % mchunks;
      const std::int64_t p0 = g_.panels * ni / nchunks, p1 = g_.panels * (ni + 1) / nchunks;
      const std::int64_t b0 = mblocks * mi / mchunks, b1 = mblocks * (mi + 1) / mchunks;
      const std::int64_t m0 = b0 * g_.mb, m1 = std::min(p_.M, b1 * g_.mb);
      if (p0 >= p1 || m0 >= m1) return;
      const std::int64_t n0 = p0 * g_.nb;
      FloatCall call;
      call.x = x + m0 * p_.K * xb;
      call.w = w + p0 * g_.panel_bytes;
      call.y = y + (m0 * p_.N + n0) * ob;
      call.x_scale = args.x_scale ? args.x_scale + m0 : nullptr;
      call.w_scale = args.w_scale ? args.w_scale + (p_.w_scale_per_channel ? n0 : 0) : nullptr;
      call.bias = bias ? bias + n0 * ob : nullptr;
      call.residual = res ? res + (m0 * p_.N + n0) * ob : nullptr;
      call.m_count = m1 - m0;
      const bool has_tail = p1 == g_.panels && g_.tail_cols > 0;
      call.full_panels = (p1 - p0) - (has_tail ? 1 : 0);
      call.tail = has_tail ? 1 : 0;
      fn_(&call);
    });
  }

  [[nodiscard]] std::vector<CodeBlob> code() const override {
    return {CodeBlob{"tmatmul float mb=" + std::to_string(g_.mb) + " nb=" + std::to_string(g_.nb), code_.bytes()}};
  }

 private:
  TMatMulProblem p_;
  TMatMulConfig c_;
  Geometry g_;
  JitCode code_;
  FloatFn fn_ = nullptr;
};

}  // namespace

Result<void> validate_float(const TMatMulProblem& p, const TMatMulConfig& c) {
  if (c.variant != TMatMulVariant::Float) return invalid("variant must be float");
  if (!(p.x_kind == ElemKind::F32 || p.x_kind == ElemKind::BF16 || p.x_kind == ElemKind::F16))
    return invalid("x kind must be f32, bf16 or f16, got " + std::string(elem_name(p.x_kind)));
  if (p.out_kind != p.x_kind)
    return invalid("out kind must be the x kind " + std::string(elem_name(p.x_kind)) + ", got " +
                   std::string(elem_name(p.out_kind)));
  if (p.M < 1 || p.K < 1 || p.N < 1) return invalid("M, K and N must be >= 1");
  if (p.runtime_rows) return invalid("float kernels bake their M tail: no run-time rows");
  if (p.w_scale_per_channel && !p.w_scale) return invalid("w_scale_per_channel needs w_scale");
  if (c.vector_bits != 256 && c.vector_bits != 512) return invalid("vec must be 256 or 512");
  if (c.vector_bits == 512 && !is_avx512_isa(c.isa)) return invalid("vec=512 needs an avx512 isa");
  const int lanes = c.vector_bits / 32;
  if (c.n_block < 16 || c.n_block % 16 != 0 || c.n_block % lanes != 0)
    return invalid("nb must be a positive multiple of 16 and of the lanes, got " + std::to_string(c.n_block));
  if (c.m_block < 1) return invalid("mb must be >= 1");
  const int nv = c.n_block / lanes;
  // Accumulators, x broadcasts, two decode temporaries and one more epilogue temporary
  // must fit (the shift/table constants move to memory operands when they do not).
  if (c.m_block * nv + c.m_block + 3 > vector_regs(c))
    return invalid("mb=" + std::to_string(c.m_block) + " x nb=" + std::to_string(c.n_block) + " needs " +
                   std::to_string(c.m_block * nv + c.m_block + 3) + " vector registers, the isa has " +
                   std::to_string(vector_regs(c)));
  if (c.k_unroll < 1 || c.k_unroll > 16) return invalid("ku must be in [1, 16]");
  if (c.prefetch_bytes < 0 || c.prefetch_bytes > 65536) return invalid("pf must be in [0, 65536]");
  if (c.threads < 1) return invalid("t must be >= 1");
  if (c.split_k != 1) return invalid("sk must be 1 (the float variant does not split K)");
  return success();
}

Result<std::unique_ptr<TMatMulKernel>> create_float(const TMatMulProblem& problem, const TMatMulConfig& config) {
  TERNJIT_TRY_VOID(validate_float(problem, config));
  auto k = std::make_unique<FloatKernel>(problem, config);
  TERNJIT_TRY_VOID(k->generate());
  return std::unique_ptr<TMatMulKernel>(std::move(k));
}

}  // namespace ternjit::targets::x86::detail
