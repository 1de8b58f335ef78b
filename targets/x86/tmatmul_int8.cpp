// SPDX-License-Identifier: Apache-2.0
// tmatmul_int8.cpp - the Dot, MaskDot and Base3 ternary matmul kernels (i8 x, 2-bit or 1.6-bit weights, int32 sums).
//
// Arithmetic. A weight w in {-1, 0, 1} is stored as the 2-bit code c = w + 1 in {0, 1, 2}.
// The kernels compute sum_k c[k, n] * x[m, k] with u8 x s8 dot products (vpdpbusd, or
// vpmaddubsw + vpmaddwd without VNNI) and subtract rowsum[m] = sum_k x[m, k] once, in
// wrapping int32 - exactly the reference's wrapped i32 sum. No int16 step saturates:
// a vpmaddubsw pair is at most 2 * 128 * 2 = 512 (Dot) or 2 * 128 * 128 = 32768 in
// magnitude, and only -32768 reaches that bound (MaskDot, both x = -128).
//
// Packed layout (pack_signature "i8t2.v1:lanes=L,nb=NB,K=..,N=.."). L = int32 lanes of a
// vector (8 for ymm, 16 for zmm), G = 4L columns = one "group". N is padded to whole
// panels of NB columns (NB a multiple of G), K to whole steps of 4. Panel p is one
// contiguous run of steps; step s holds NB bytes: NB/G groups of G bytes. In byte b of
// group g of step s, the 2-bit field f (bits 2f, 2f+1) is the code of
//     column p*NB + g*G + f*L + b/4,   row k = 4s + b%4.
// So one vector of G packed bytes unpacks (Dot: (v >> 2f) & 3) into 4 vectors whose
// dword j holds 4 consecutive k of one column: exactly the operand vpdpbusd wants
// against a broadcast dword of 4 x bytes. MaskDot keeps the field in place
// (v & (3 << 2f)), so its accumulator f holds 4^f times the sum; an arithmetic shift
// right by 2f at the end is exact as long as 4^3 * 256 * K < 2^31 (validate: K < 2^17).
// On the VNNI paths field 0 takes the unmasked byte (S0 + 4 S1 + 16 S2 + 64 S3) and the
// three masked fields are subtracted from it at the end: 3 ANDs + 4 vpdpbusd per
// vector. (vpmaddubsw cannot: 170 * -128 twice saturates int16.)
// Both variants read the same layout. Padded rows (k >= K) hold code 0, which makes
// whatever x byte sits there contribute exactly 0 - so the kernel may read x up to the
// next multiple of 4 (run() copies the last row when K % 4 != 0, the only row whose
// overread could leave the buffer). Padded columns hold code 1 and are never stored.
//
// Base3 (pack_signature "i8t3.v1:lanes=16,nb=NB,K=..,N=.."; zmm, AVX512-VNNI + VBMI).
// 1.6 bits per weight: a group is G = 5L = 80 columns and one 64-byte vector per step,
// byte b of group g of step s holding the five codes
//     c_f of column p*NB + g*80 + f*16 + b/4, row k = 4s + b%4   (f = 0..4)
// as the base-3 number s_b = c_0 + 3 c_1 + 9 c_2 + 27 c_3 + 81 c_4 (<= 242). Decoding
// (two vpermi2b, whose index is the low 7 bits of a byte): the bytes >= 128 (the top
// bit as a mask, vpmovb2m) are first replaced by s_b mod 81 (< 128, the same c_0..c_3),
// then every byte is looked up in a 128-entry table of the 2-bit code byte c_0 | c_1 << 2
// | c_2 << 4 | c_3 << 6, whose four fields then go through MaskDot's arithmetic (the
// whole byte and three ANDs, four vpdpbusd). The fifth code is never decoded: a fifth vpdpbusd
// takes the raw byte s_b, so that accumulator holds R = S_0 + 3 S_1 + 9 S_2 + 27 S_3
// + 81 S_4 (mod 2^32, S_f = sum_k c_f x), and at the end S_4 = (R - S_0 - 3 S_1 - 9 S_2
// - 27 S_3) * 81^-1 mod 2^32 - exact, since 81 is odd and the wrapped int32 sum is
// what the reference computes. Per 64 bytes (320 weights): 1 load, 1 mask op, 2
// permutes (in place, after the raw byte's vpdpbusd), 3 ANDs, 5 vpdpbusd. The same K
// limit as MaskDot (its fields' shift). Padded rows hold byte 0 (all codes 0), padded
// columns code 1, as above.
//
// Code. One generated micro-kernel per row count (m_block and the M tail) computes an
// mb x NB tile over a range of steps with mb * NB / L accumulator registers, then
// either applies the epilogue in registers (f32 ops in the reference order, no FMA)
// and stores f32, or stores the raw int32 sums (split-K partials, and the last panel
// when N is not a multiple of NB), which run() finishes in C++ with the same f32 ops.
#include "targets/x86/tmatmul_internal.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "targets/common/tern2_pack.h"
#include "targets/x86/jit_code.h"

namespace ternjit::targets::x86::detail {

namespace {

constexpr int kMaxMBlock = 16;
constexpr int kMaxKUnroll = 16;
constexpr int kMaxPrefetch = 1 << 16;
constexpr std::int64_t kMaxMaskDotK = 131071;
// Base3's two 128-byte tables (see the header) and 81^-1 mod 2^32. The code table: the
// 2-bit code byte c_0 | c_1 << 2 | c_2 << 4 | c_3 << 6 of the low four base-3 digits of
// j < 128. The reduce table: for a byte s = 128 + l >= 128, s mod 81 (< 128, with the
// same low four digits); 0 past 242, which pack never writes.
constexpr std::uint8_t base3_code_byte(int j) {
  int v = 0;
  for (int f = 0, q = j; f < 4; ++f, q /= 3) v |= (q % 3) << (2 * f);
  return static_cast<std::uint8_t>(v);
}
constexpr std::uint8_t base3_reduce_byte(int l) {
  return static_cast<std::uint8_t>(128 + l > 242 ? 0 : (128 + l) % 81);
}
constexpr std::uint32_t inverse_mod_2_32(std::uint32_t a) {  // a odd; Newton: x <- x (2 - a x)
  std::uint32_t x = a;
  for (int i = 0; i < 5; ++i) x *= 2u - a * x;
  return x;
}
static_assert(81u * inverse_mod_2_32(81) == 1u);

// What one micro-kernel call reads (the generated code loads these fields by offset).
struct MicroArgs {
  const std::int8_t* const* x_rows;  // mb row pointers, each already at the first k of the range
  const std::uint8_t* w;             // the panel at the first step of the range
  std::int64_t steps;                // steps of 4 k to run (>= 1)
  std::int32_t* raw;                 // non-null: store raw int32 sums here instead of the epilogue
  std::int64_t raw_stride;           // bytes between rows of raw
  float* y;                          // tile origin in y (row stride N)
  const std::int32_t* rowsum;        // at the tile's first row
  const float* x_scale;              // at the tile's first row
  const float* w_scale;              // per channel: at the tile's first column; else the scalar
  const float* bias;                 // at the tile's first column
  const float* residual;             // tile origin in residual (row stride N)
};

using MicroFn = void (*)(const MicroArgs*);

// Offsets in the constant pool (after the four 64-byte masks and the int16 ones).
constexpr int kBase3Consts = 320;
constexpr int kBase3Table = 384;

enum class DotPath : std::uint8_t { VnniEvex, VnniVex, Maddubs };

// The shape of the generated code, derived from (problem, config).
struct Shape {
  int lanes = 8;       // int32 lanes of a vector
  int fields = 4;      // codes per packed byte = accumulators per group and row (Base3: 5)
  int group = 32;      // columns of one packed group vector (fields * lanes)
  int group_bytes = 32;  // bytes of one packed group vector (4 * lanes)
  int groups = 1;      // groups per panel (n_block / group)
  int n_block = 32;
  int step_bytes = 32;  // bytes of one step of a panel (groups * group_bytes)
  bool evex = false;   // EVEX encodings and 32 vector registers (avx512 family)
  bool mask = false;   // MaskDot or Base3 (the fields stay in place: masks, scaled sums)
  bool base3 = false;  // Base3
  DotPath path = DotPath::Maddubs;
  int vregs = 16;
};

Shape shape_of(const TMatMulConfig& c) {
  Shape s;
  s.lanes = c.vector_bits / 32;
  s.base3 = c.variant == TMatMulVariant::Base3;
  s.fields = s.base3 ? 5 : 4;
  s.group = s.fields * s.lanes;
  s.group_bytes = 4 * s.lanes;
  s.n_block = c.n_block;
  s.groups = std::max(1, c.n_block / s.group);
  s.step_bytes = s.groups * s.group_bytes;
  s.evex = c.isa == Isa::Avx512 || c.isa == Isa::Avx512Vnni || c.isa == Isa::Amx;
  s.vregs = s.evex ? 32 : 16;
  s.mask = c.variant == TMatMulVariant::MaskDot || s.base3;
  s.path = (c.isa == Isa::Avx512Vnni || c.isa == Isa::Amx) ? DotPath::VnniEvex
           : c.isa == Isa::AvxVnni                        ? DotPath::VnniVex
                                                          : DotPath::Maddubs;
  return s;
}

// Vector registers of an mb-row micro-kernel: the accumulators, the packed vector V,
// the unpacked U, the int16 temp and ones (Maddubs), the row broadcasts (all but
// VnniEvex, which broadcasts from memory), then the field masks if they still fit
// (else the AND reads them from the constant pool). The epilogue needs 3 temps.
// Base3 adds the four 64-byte quarters of its table.
int num_masks(const Shape& s) { return s.mask ? 4 : 1; }
int vregs_base(const Shape& s, int mb) {
  int n = mb * s.fields * s.groups + 2;
  if (s.path == DotPath::Maddubs) n += 2;
  if (s.base3) n += 4;
  if (s.path != DotPath::VnniEvex) n += mb;
  return n;
}
bool masks_in_regs(const Shape& s, int mb) { return vregs_base(s, mb) + num_masks(s) <= s.vregs; }
// VnniEvex can take x from memory ({1toN}), but a register broadcast once per step
// saves a load per vpdpbusd: use registers when they fit after the masks.
bool evex_bx_in_regs(const Shape& s, int mb) {
  return s.path == DotPath::VnniEvex && masks_in_regs(s, mb) && vregs_base(s, mb) + num_masks(s) + mb <= s.vregs;
}
int vregs_needed(const Shape& s, int mb) {
  const int n = vregs_base(s, mb) + (masks_in_regs(s, mb) ? num_masks(s) : 0) + (evex_bx_in_regs(s, mb) ? mb : 0);
  return std::max(n, mb * s.fields * s.groups + 3);
}

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// The f32 epilogue of one element, in the reference's order (ir/interpret.cpp
// tmatmul): the wrapped int32 sum to f32, * x_scale[m], * w_scale, + bias[n],
// + residual[m, n], relu (NaN stays NaN, -0 becomes +0). This file is compiled in
// ISO C++ mode, so nothing is contracted into an FMA.
float finish_one(const TMatMulProblem& p, const TMatMulArgs& a, std::uint32_t acc, std::int64_t m,
                 std::int64_t n) {
  float v = static_cast<float>(static_cast<std::int32_t>(acc));
  if (p.x_scale) v = v * a.x_scale[m];
  if (p.w_scale) v = v * a.w_scale[p.w_scale_per_channel ? n : 0];
  if (p.bias) v = v + static_cast<const float*>(a.bias)[n];
  if (p.residual) v = v + static_cast<const float*>(a.residual)[m * p.N + n];
  if (p.relu && v <= 0.0f) v = 0.0f;
  return v;
}

// One micro-kernel for `mb` rows being emitted into `g` (emit_microkernel): the vector
// register plan (vregs_base), the general registers, and the emitters of its parts in
// code order. Accumulator q of row m (group q / F, field q % F) is register m * F * groups + q.
struct MicroEmitter {
  MicroEmitter(JitCode& code, const TMatMulProblem& problem, const TMatMulConfig& config, const Shape& shape,
               int rows);

  void prologue();
  void k_loops();
  void step(int u);
  void dots(int gi, int u, int f, const Xbyak::Xmm& src);
  void unscale_fields();
  void store();
  void store_f32();
  void store_raw();
  void constant_pool();

  Xbyak::Xmm vec(int i) const {
    if (c.vector_bits == 512) return Xbyak::Zmm(i);
    return Xbyak::Ymm(i);
  }
  Xbyak::Xmm acc(int m, int q) const { return vec(m * F * s.groups + q); }
  Xbyak::Xmm bx(int m) const { return vec(bx0 + m); }
  void vand(const Xbyak::Xmm& d, const Xbyak::Xmm& a, const Xbyak::Operand& b);
  void and_mask(const Xbyak::Xmm& d, const Xbyak::Xmm& a, int f);
  void vzero(const Xbyak::Xmm& d);
  void vload(const Xbyak::Xmm& d, const Xbyak::Address& a);

  JitCode& g;
  const TMatMulProblem& p;
  const TMatMulConfig& c;
  const Shape& s;
  const int mb;
  const int F;     // fields: accumulators per group and row
  const int accs;  // accumulators: registers 0 .. accs - 1
  // V the packed vector, U the unpacked field; T and ONES (Maddubs) the int16 temp and
  // the int16 ones; TAB (Base3) the reduce table (2 vectors) and the code table (2).
  Xbyak::Xmm V, U, T, ONES, TAB[4];
  int bx0 = 0;            // the first row broadcast register
  int mask0 = 0;          // the first field mask register (when mregs)
  bool bx_regs = false;   // x broadcast into registers (else, VnniEvex, from memory)
  bool mregs = false;     // the field masks in registers (else read from the pool)
  Xbyak::Label consts;    // the constant pool
  // General registers: args in rdi; W weights, KO the byte offset into every x row,
  // CNT steps left; the row pointers after them (callee-saved ones pushed).
  const Xbyak::Reg64 args = Xbyak::util::rdi, W = Xbyak::util::rsi, KO = Xbyak::util::rdx, CNT = Xbyak::util::rcx;
  const Xbyak::Reg64 row_regs[11] = {Xbyak::util::r8,  Xbyak::util::r9,  Xbyak::util::r10, Xbyak::util::r11,
                                     Xbyak::util::rax, Xbyak::util::rbx, Xbyak::util::rbp, Xbyak::util::r12,
                                     Xbyak::util::r13, Xbyak::util::r14, Xbyak::util::r15};
  const Xbyak::Reg64 saved[6] = {Xbyak::util::rbx, Xbyak::util::rbp, Xbyak::util::r12,
                                 Xbyak::util::r13, Xbyak::util::r14, Xbyak::util::r15};
  const int nsaved;
  // After the k loops: the raw sums' pointer and row stride.
  const Xbyak::Reg64 RAW = Xbyak::util::r11, RAWS = Xbyak::util::rax;
};

MicroEmitter::MicroEmitter(JitCode& code, const TMatMulProblem& problem, const TMatMulConfig& config,
                           const Shape& shape, int rows)
    : g(code), p(problem), c(config), s(shape), mb(rows), F(shape.fields), accs(rows * shape.fields * shape.groups),
      nsaved(std::clamp(rows - 5, 0, 6)) {
  V = vec(accs);
  U = vec(accs + 1);
  int next = accs + 2;
  T = vec(s.path == DotPath::Maddubs ? next : 0);
  ONES = vec(s.path == DotPath::Maddubs ? next + 1 : 0);
  if (s.path == DotPath::Maddubs) next += 2;
  for (int i = 0; i < 4; ++i) TAB[i] = vec(s.base3 ? next + i : 0);
  if (s.base3) next += 4;
  bx0 = next;
  bx_regs = s.path != DotPath::VnniEvex || evex_bx_in_regs(s, mb);
  mregs = masks_in_regs(s, mb);
  mask0 = s.path == DotPath::VnniEvex ? next : next + mb;  // VnniEvex: masks before its optional broadcasts
  if (s.path == DotPath::VnniEvex) bx0 = mask0 + num_masks(s);
}

void MicroEmitter::vand(const Xbyak::Xmm& d, const Xbyak::Xmm& a, const Xbyak::Operand& b) {
  if (s.evex) g.vpandd(d, a, b);
  else g.vpand(d, a, b);
}

// d = a & mask f: the mask from a register, or from the constant pool (a broadcast
// dword with EVEX, the full-width copy otherwise).
void MicroEmitter::and_mask(const Xbyak::Xmm& d, const Xbyak::Xmm& a, int f) {
  using Xbyak::util::rip;
  if (mregs) vand(d, a, vec(mask0 + f));
  else if (s.evex) g.vpandd(d, a, g.ptr_b[rip + consts + 64 * f]);
  else g.vpand(d, a, g.ptr[rip + consts + 64 * f]);
}

void MicroEmitter::vzero(const Xbyak::Xmm& d) {
  if (s.evex) g.vpxord(d, d, d);
  else g.vpxor(d, d, d);
}

void MicroEmitter::vload(const Xbyak::Xmm& d, const Xbyak::Address& a) {
  if (s.evex) g.vmovdqu32(d, a);
  else g.vmovdqu(d, a);
}

// Saves the callee-saved row registers, loads the arguments and the constants kept in
// registers, and zeroes the accumulators.
void MicroEmitter::prologue() {
  using Xbyak::util::rip;
  for (int i = 0; i < nsaved; ++i) g.push(saved[i]);
  g.mov(W, g.ptr[args + offsetof(MicroArgs, x_rows)]);
  for (int m = 0; m < mb; ++m) g.mov(row_regs[m], g.ptr[W + 8 * m]);
  g.mov(W, g.ptr[args + offsetof(MicroArgs, w)]);
  g.mov(CNT, g.ptr[args + offsetof(MicroArgs, steps)]);
  g.xor_(KO, KO);
  if (mregs)
    for (int f = 0; f < num_masks(s); ++f) g.vpbroadcastd(vec(mask0 + f), g.ptr[rip + consts + 64 * f]);
  if (s.path == DotPath::Maddubs) g.vpbroadcastd(ONES, g.ptr[rip + consts + 256]);
  if (s.base3)
    for (int i = 0; i < 4; ++i) g.vmovdqu8(TAB[i], g.ptr[rip + consts + kBase3Table + 64 * i]);
  for (int i = 0; i < accs; ++i) vzero(vec(i));
}

// The accumulators of field f of group gi += the dot products of `src` with each row's
// 4 x bytes at step u.
void MicroEmitter::dots(int gi, int u, int f, const Xbyak::Xmm& src) {
  for (int m = 0; m < mb; ++m) {
    const Xbyak::Xmm a = acc(m, gi * F + f);
    switch (s.path) {
      case DotPath::VnniEvex:
        if (bx_regs) g.vpdpbusd(a, src, bx(m), Xbyak::EvexEncoding);
        else g.vpdpbusd(a, src, g.ptr_b[row_regs[m] + KO + 4 * u], Xbyak::EvexEncoding);
        break;
      case DotPath::VnniVex: g.vpdpbusd(a, src, bx(m), Xbyak::VexEncoding); break;
      case DotPath::Maddubs:
        g.vpmaddubsw(T, U, bx(m));
        g.vpmaddwd(T, T, ONES);
        g.vpaddd(a, a, T);
        break;
    }
  }
}

// Step u (4 k) of the unrolled body: every group's packed vector, decoded field by field.
void MicroEmitter::step(int u) {
  using Xbyak::util::k1;
  const int nb = s.step_bytes;
  for (int gi = 0; gi < s.groups; ++gi) {
    const int wdisp = u * nb + gi * s.group_bytes;
    if (c.prefetch_bytes > 0 && wdisp % 64 == 0) g.prefetcht0(g.ptr[W + wdisp + c.prefetch_bytes]);
    vload(V, g.ptr[W + wdisp]);
    if (bx_regs && gi == 0)
      for (int m = 0; m < mb; ++m) g.vpbroadcastd(bx(m), g.ptr[row_regs[m] + KO + 4 * u]);
    if (s.base3) {
      // The fifth field first: the raw base-3 byte (recovered at the end, see the header).
      dots(gi, u, 4, V);
      // Then V becomes the 2-bit code byte in place: the bytes >= 128 (k1: the top bit)
      // become s mod 81 (the reduce table), then every byte < 128 is looked up in the
      // code table (vpermi2b indexes by bits 0-6).
      g.vpmovb2m(k1, V);
      g.vpermi2b(V | k1, TAB[0], TAB[1]);
      g.vpermi2b(V, TAB[2], TAB[3]);
    }
    const Xbyak::Xmm& P = V;  // the 2-bit code bytes
    for (int f = 0; f < std::min(F, 4); ++f) {
      if (s.mask && f == 0 && s.path != DotPath::Maddubs) {
        // Field 0 takes the whole byte: its accumulator gets S0 + 4 S1 + 16 S2 + 64 S3,
        // and the three masked fields are subtracted at the end (exact mod 2^32).
        // Not for vpmaddubsw: a pair of 170 * -128 would saturate int16.
      } else if (s.mask) {
        and_mask(U, P, f);
      } else if (f == 0) {
        and_mask(U, V, 0);
      } else {
        // Word shift: bits of the neighbouring byte move in above the field; the mask drops them.
        g.vpsrlw(U, V, static_cast<std::uint8_t>(2 * f));
        and_mask(U, U, 0);
      }
      dots(gi, u, f, s.mask && f == 0 && s.path != DotPath::Maddubs ? P : U);
    }
  }
}

// The loops over the steps: k_unroll steps at a time, then one at a time.
void MicroEmitter::k_loops() {
  Xbyak::Label loop_main, loop_rem, rem_one, done_k;
  const int nb = s.step_bytes;
  const int ku = c.k_unroll;
  if (ku > 1) {
    g.cmp(CNT, ku);
    g.jl(loop_rem, Xbyak::CodeGenerator::T_NEAR);
    g.L(loop_main);
    for (int u = 0; u < ku; ++u) step(u);
    g.add(W, ku * nb);
    g.add(KO, 4 * ku);
    g.sub(CNT, ku);
    g.cmp(CNT, ku);
    g.jge(loop_main, Xbyak::CodeGenerator::T_NEAR);
    g.L(loop_rem);
    g.test(CNT, CNT);
    g.jz(done_k, Xbyak::CodeGenerator::T_NEAR);
  }
  g.L(rem_one);
  step(0);
  g.add(W, nb);
  g.add(KO, 4);
  g.dec(CNT);
  g.jnz(rem_one, Xbyak::CodeGenerator::T_NEAR);
  g.L(done_k);
}

// MaskDot: accumulator f of a group holds 4^f times the sum (exact, see the header);
// on the VNNI paths accumulator 0 also holds the other three fields' scaled sums.
void MicroEmitter::unscale_fields() {
  using Xbyak::util::rip;
  for (int m = 0; m < mb; ++m) {
    for (int q = 0; q < F * s.groups; ++q) {
      if (q % F == 0) {
        if (s.path != DotPath::Maddubs)
          for (int f = 1; f < 4; ++f) g.vpsubd(acc(m, q), acc(m, q), acc(m, q + f));
      } else if (q % F < 4) {
        g.vpsrad(acc(m, q), acc(m, q), static_cast<std::uint8_t>(2 * (q % F)));
      }
    }
    // Base3: S_4 = (R - S_0 - 3 S_1 - 9 S_2 - 27 S_3) * 81^-1 (mod 2^32).
    for (int gi = 0; s.base3 && gi < s.groups; ++gi) {
      const int q0 = gi * F;
      const Xbyak::Xmm r = acc(m, q0 + 4);
      g.vpsubd(r, r, acc(m, q0));
      for (int f = 1; f < 4; ++f) {
        g.vpmulld(U, acc(m, q0 + f), g.ptr_b[rip + consts + kBase3Consts + 4 * (f - 1)]);
        g.vpsubd(r, r, U);
      }
      g.vpmulld(r, r, g.ptr_b[rip + consts + kBase3Consts + 12]);
    }
  }
}

// Column of accumulator q within the tile: group q/F, field q%F.
int column_of(const Shape& s, int q) { return (q / s.fields) * s.group + (q % s.fields) * s.lanes; }

// The f32 epilogue: V holds the row's broadcast, U the per-tensor w_scale, Z zero.
void MicroEmitter::store_f32() {
  using namespace Xbyak::util;
  using Xbyak::Reg64;
  const Reg64 Y = rsi, RS = rdx, XS = rcx, WS = r8, BIAS = r9, RES = r10;
  auto col = [&](int q) { return column_of(s, q); };
  const Xbyak::Xmm Z = vec(accs + 2);
  g.mov(Y, g.ptr[args + offsetof(MicroArgs, y)]);
  g.mov(RS, g.ptr[args + offsetof(MicroArgs, rowsum)]);
  if (p.x_scale) g.mov(XS, g.ptr[args + offsetof(MicroArgs, x_scale)]);
  if (p.w_scale) g.mov(WS, g.ptr[args + offsetof(MicroArgs, w_scale)]);
  if (p.bias) g.mov(BIAS, g.ptr[args + offsetof(MicroArgs, bias)]);
  if (p.residual) g.mov(RES, g.ptr[args + offsetof(MicroArgs, residual)]);
  if (p.w_scale && !p.w_scale_per_channel) g.vbroadcastss(U, g.ptr[WS]);
  if (p.relu) vzero(Z);
  const int row_bytes = static_cast<int>(4 * p.N);
  const int nq = F * s.groups;
  for (int m = 0; m < mb; ++m) {
    g.vpbroadcastd(V, g.ptr[RS + 4 * m]);
    for (int q = 0; q < nq; ++q) {
      g.vpsubd(acc(m, q), acc(m, q), V);
      g.vcvtdq2ps(acc(m, q), acc(m, q));
    }
    if (p.x_scale) {
      g.vbroadcastss(V, g.ptr[XS + 4 * m]);
      for (int q = 0; q < nq; ++q) g.vmulps(acc(m, q), acc(m, q), V);
    }
    for (int q = 0; q < nq; ++q) {
      const Xbyak::Xmm a = acc(m, q);
      if (p.w_scale) {
        if (p.w_scale_per_channel) g.vmulps(a, a, g.ptr[WS + 4 * col(q)]);
        else g.vmulps(a, a, U);
      }
      if (p.bias) g.vaddps(a, a, g.ptr[BIAS + 4 * col(q)]);
      if (p.residual) g.vaddps(a, a, g.ptr[RES + 4 * col(q)]);
      if (p.relu) {
        // max(0, a) keeps NaN (the second operand wins on unordered) and turns
        // negatives into +0; adding +0 turns -0 into +0 and changes nothing else.
        g.vmaxps(a, Z, a);
        g.vaddps(a, a, Z);
      }
      g.vmovups(g.ptr[Y + 4 * col(q)], a);
    }
    if (m + 1 < mb) {
      g.add(Y, row_bytes);
      if (p.residual) g.add(RES, row_bytes);
    }
  }
}

// The raw int32 sums to MicroArgs::raw (RAW, loaded by store()), row by row.
void MicroEmitter::store_raw() {
  g.mov(RAWS, g.ptr[args + offsetof(MicroArgs, raw_stride)]);
  const int nq = F * s.groups;
  for (int m = 0; m < mb; ++m) {
    for (int q = 0; q < nq; ++q) g.vmovups(g.ptr[RAW + 4 * column_of(s, q)], acc(m, q));
    if (m + 1 < mb) g.add(RAW, RAWS);
  }
}

// The tile's results: the raw sums when MicroArgs::raw is set, else the f32 epilogue;
// then the return.
void MicroEmitter::store() {
  Xbyak::Label raw_path, end;
  g.mov(RAW, g.ptr[args + offsetof(MicroArgs, raw)]);
  g.test(RAW, RAW);
  g.jnz(raw_path, Xbyak::CodeGenerator::T_NEAR);
  store_f32();
  g.jmp(end, Xbyak::CodeGenerator::T_NEAR);
  g.L(raw_path);
  store_raw();
  g.L(end);
  g.vzeroupper();
  for (int i = nsaved; i-- > 0;) g.pop(saved[i]);
  g.ret();
}

// The constant pool: the four field masks, 64 bytes each, then int16 ones for vpmaddwd.
void MicroEmitter::constant_pool() {
  g.align(64);
  g.L(consts);
  for (std::uint32_t mask : {0x03030303u, 0x0c0c0c0cu, 0x30303030u, 0xc0c0c0c0u})
    for (int i = 0; i < 16; ++i) g.dd(mask);
  g.dd(0x00010001);
  if (s.base3) {
    // At kBase3Consts: 3, 9, 27, 81^-1; at kBase3Table: the reduce table, then the code table.
    for (int i = 260; i < kBase3Consts; ++i) g.db(0);  // the pool so far: 4 x 64 mask bytes, 4 bytes of ones
    for (std::uint32_t v : {3u, 9u, 27u, inverse_mod_2_32(81)}) g.dd(v);
    for (int i = 0; i < 12; ++i) g.dd(0);
    for (int l = 0; l < 128; ++l) g.db(base3_reduce_byte(l));
    for (int j = 0; j < 128; ++j) g.db(base3_code_byte(j));
  }
}

// Emits one micro-kernel for `mb` rows into `g`.
void emit_microkernel(JitCode& g, const TMatMulProblem& p, const TMatMulConfig& c, const Shape& s, int mb) {
  MicroEmitter e(g, p, c, s, mb);
  e.prologue();
  e.k_loops();
  if (s.mask) e.unscale_fields();
  e.store();
  e.constant_pool();
}

class Int8Kernel final : public TMatMulKernel {
 public:
  Int8Kernel(const TMatMulProblem& p, const TMatMulConfig& c) : p_(p), c_(c), s_(shape_of(c)) {
    steps_ = ceil_div(p.K, 4);
    panels_ = ceil_div(p.N, s_.n_block);
    np_ = panels_ * s_.n_block;
    panel_bytes_ = static_cast<std::size_t>(steps_) * static_cast<std::size_t>(s_.step_bytes);
    mb_ = static_cast<int>(std::min<std::int64_t>(c.m_block, p.M));
  }

  Result<void> generate() {
    const int tail = static_cast<int>(p_.M % mb_);
    std::vector<int> mbs{mb_, tail};
    if (p_.runtime_rows)  // any row count: every tail
      for (int mb = 1; mb < mb_; ++mb) mbs.push_back(mb);
    for (int mb : mbs) {
      if (mb == 0 || fn_for(mb) != nullptr) continue;
      Fn fn;
      fn.mb = mb;
      fn.code = std::make_unique<JitCode>();
      const std::string variant = s_.base3 ? "base3" : s_.mask ? "mask_dot" : "dot";
      fn.label = "tmatmul i8 " + variant + " microkernel mb=" + std::to_string(mb) +
                 " nb=" + std::to_string(s_.n_block) + " " + c_.str();
      TERNJIT_TRY_VOID(emit_guarded(fn.label, [&] {
        emit_microkernel(*fn.code, p_, c_, s_, mb);
        fn.entry = fn.code->finalize<MicroFn>();
      }));
      fns_.push_back(std::move(fn));
    }
    return success();
  }

  const TMatMulProblem& problem() const override { return p_; }
  const TMatMulConfig& config() const override { return c_; }

  std::string pack_signature() const override {
    return std::string(s_.base3 ? "i8t3.v1" : "i8t2.v1") + ":lanes=" + std::to_string(s_.lanes) +
           ",nb=" + std::to_string(s_.n_block) + ",K=" + std::to_string(p_.K) + ",N=" + std::to_string(p_.N);
  }

  Result<PackedWeights> pack(const TernaryWeights& w) const override {
    const std::int64_t K = p_.K, N = p_.N;
    TERNJIT_TRY(PackedWeights pw, detail::start_pack(w, p_, pack_signature(),
                                                     panel_bytes_ * static_cast<std::size_t>(panels_)));
    std::uint8_t* out = pw.storage.data() + pw.offset;
    const int G = s_.group, L = s_.lanes, nb = s_.n_block, GB = s_.group_bytes;
    // Byte b of group gi of step st holds the codes of (k = 4 st + b % 4, n = n0 + f L),
    // n0 = the group's column + b / 4, f = 0..3 (2-bit fields) or 0..4 (base 3). The
    // codes of the step's four rows and the panel's columns are fetched first (rows past
    // K: code 0, which multiplies the padded x bytes by 0; columns past N: code 1, value
    // 0), then interleaved (targets/common/tern2_pack.h).
    // kSteps steps at a time (their weight rows read in order: page-friendly), then each
    // panel's kSteps steps of contiguous bytes (fewer visits to each far-apart panel;
    // 8 or 16 steps measured slower for the dot layout than 4).
    constexpr std::int64_t kSteps = 4;
    // Where every row starts on a tern2 byte (N % 4 == 0), the groups inside N of steps
    // inside K are interleaved straight from the tern2 bytes (interleave_tern2_group);
    // only the columns from `lo` on (the last partial group and the padding) and steps
    // with rows past K go through the codes.
    const std::uint8_t* t2 = w.tern2_codes();
    const auto nfull =
        static_cast<std::int64_t>(!s_.base3 && t2 != nullptr ? tern2_direct_columns(static_cast<std::size_t>(N), L) : 0);
    std::vector<std::uint8_t> codes(static_cast<std::size_t>(4 * kSteps * np_));
    for (std::int64_t st0 = 0; st0 < steps_; st0 += kSteps) {
      const std::int64_t ns = std::min(kSteps, steps_ - st0);
      const std::int64_t lo = 4 * (st0 + ns) <= K ? nfull : 0, cols = np_ - lo;
      if (cols > 0) detail::weight_codes(w, K, N, 4 * st0, static_cast<int>(4 * ns), lo, cols, codes.data());
      for (std::int64_t pnl = 0; pnl < panels_; ++pnl)
        for (std::int64_t si = 0; si < ns; ++si) {
          std::uint8_t* row = out + static_cast<std::size_t>(pnl) * panel_bytes_ +
                              static_cast<std::size_t>((st0 + si) * s_.step_bytes);
          for (int gi = 0; gi < s_.groups; ++gi) {
            const std::int64_t c0 = pnl * nb + gi * G;
            if (c0 + G <= lo) {
              interleave_tern2_group(t2, static_cast<std::size_t>(N), static_cast<std::size_t>(4 * (st0 + si)),
                                     static_cast<std::size_t>(c0), L, row + gi * GB);
            } else if (s_.base3) {
              interleave_base3_codes4(codes.data() + 4 * si * cols + (c0 - lo), cols, L, row + gi * GB);
            } else {
              interleave_codes4(codes.data() + 4 * si * cols + (c0 - lo), cols, L, row + gi * GB);
            }
          }
        }
    }
    return pw;
  }

  void run(const TMatMulArgs& args, const Parallel& parallel) const override;

  std::vector<CodeBlob> code() const override {
    std::vector<CodeBlob> r;
    for (const Fn& f : fns_) r.push_back({f.label, f.code->bytes()});
    return r;
  }

 private:
  struct Fn {
    int mb = 0;
    std::unique_ptr<JitCode> code;
    MicroFn entry = nullptr;
    std::string label;
  };
  MicroFn fn_for(int mb) const {
    for (const Fn& f : fns_)
      if (f.mb == mb) return f.entry;
    return nullptr;
  }

  TMatMulProblem p_;
  TMatMulConfig c_;
  Shape s_;
  std::int64_t steps_ = 0, panels_ = 0, np_ = 0;
  std::size_t panel_bytes_ = 0;
  int mb_ = 1;
  std::vector<Fn> fns_;
};

void Int8Kernel::run(const TMatMulArgs& args, const Parallel& parallel) const {
  const std::int64_t M = args.rows > 0 ? args.rows : p_.M, K = p_.K, N = p_.N;
  const auto* x = static_cast<const std::int8_t*>(args.x);
  const int nb = s_.n_block;

  // Row sums of x (the code offset's correction), wrapping like the int32 sum.
  std::vector<std::int32_t> rowsum(static_cast<std::size_t>(M));
  for (std::int64_t m = 0; m < M; ++m) {
    std::uint32_t sum = 0;
    const std::int8_t* row = x + m * K;
    for (std::int64_t k = 0; k < K; ++k) sum += static_cast<std::uint32_t>(static_cast<std::int32_t>(row[k]));
    rowsum[static_cast<std::size_t>(m)] = static_cast<std::int32_t>(sum);
  }
  // The kernel reads x in dwords, up to 3 bytes past K (multiplied by code 0). Only
  // the last row's overread could leave the buffer: run that row from a padded copy.
  std::vector<std::int8_t> last_row;
  if (K % 4 != 0) {
    last_row.assign(static_cast<std::size_t>(steps_ * 4), 0);
    std::memcpy(last_row.data(), x + (M - 1) * K, static_cast<std::size_t>(K));
  }
  auto row_ptr = [&](std::int64_t m) { return m == M - 1 && !last_row.empty() ? last_row.data() : x + m * K; };

  const std::int64_t T = std::max(1, std::min(c_.threads, parallel.run != nullptr ? parallel.threads : 1));
  const std::int64_t S = std::min<std::int64_t>(c_.split_k, steps_);
  const std::int64_t mblocks = ceil_div(M, mb_);
  const std::int64_t pc = std::min(panels_, T);
  const std::int64_t mc = panels_ >= T ? 1 : std::min(mblocks, ceil_div(T, panels_));
  const bool has_tail = np_ != N;

  std::vector<std::int32_t> partial, tail;
  if (S > 1) partial.resize(static_cast<std::size_t>(S * M * np_));
  else if (has_tail) tail.resize(static_cast<std::size_t>(M * nb));

  const std::uint8_t* packed = args.w->data();
  auto* y = static_cast<float*>(args.y);
  const auto* bias = static_cast<const float*>(args.bias);
  const auto* residual = static_cast<const float*>(args.residual);

  parallel.for_each(pc * mc * S, [&](std::int64_t task) {
    const std::int64_t si = task % S, rest = task / S;
    const std::int64_t mi = rest % mc, pi = rest / mc;
    const std::int64_t p_lo = panels_ * pi / pc, p_hi = panels_ * (pi + 1) / pc;
    const std::int64_t b_lo = mblocks * mi / mc, b_hi = mblocks * (mi + 1) / mc;
    const std::int64_t s_lo = steps_ * si / S, s_hi = steps_ * (si + 1) / S;
    const std::int8_t* rows[kMaxMBlock];
    for (std::int64_t pn = p_lo; pn < p_hi; ++pn) {
      const std::int64_t n0 = pn * nb;
      for (std::int64_t b = b_lo; b < b_hi; ++b) {
        const std::int64_t m0 = b * mb_;
        const int mb = static_cast<int>(std::min<std::int64_t>(mb_, M - m0));
        for (int i = 0; i < mb; ++i) rows[i] = row_ptr(m0 + i) + 4 * s_lo;
        MicroArgs a{};
        a.x_rows = rows;
        a.w = packed + static_cast<std::size_t>(pn) * panel_bytes_ + static_cast<std::size_t>(s_lo * s_.step_bytes);
        a.steps = s_hi - s_lo;
        if (S > 1) {
          a.raw = partial.data() + (si * M + m0) * np_ + n0;
          a.raw_stride = 4 * np_;
        } else if (has_tail && pn == panels_ - 1) {
          a.raw = tail.data() + m0 * nb;
          a.raw_stride = 4 * nb;
        } else {
          a.y = y + m0 * N + n0;
          a.rowsum = rowsum.data() + m0;
          a.x_scale = args.x_scale != nullptr ? args.x_scale + m0 : nullptr;
          a.w_scale = args.w_scale != nullptr ? args.w_scale + (p_.w_scale_per_channel ? n0 : 0) : nullptr;
          a.bias = bias != nullptr ? bias + n0 : nullptr;
          a.residual = residual != nullptr ? residual + m0 * N + n0 : nullptr;
        }
        fn_for(mb)(&a);
      }
    }
  });

  // Raw sums: reduce the split-K partials (wrapping) and apply the epilogue in C++.
  if (S > 1) {
    const std::int64_t chunks = std::min<std::int64_t>(T, M * N);
    parallel.for_each(chunks, [&](std::int64_t ci) {
      const std::int64_t lo = M * N * ci / chunks, hi = M * N * (ci + 1) / chunks;
      for (std::int64_t e = lo; e < hi; ++e) {
        const std::int64_t m = e / N, n = e % N;
        std::uint32_t sum = 0;
        for (std::int64_t si = 0; si < S; ++si)
          sum += static_cast<std::uint32_t>(partial[static_cast<std::size_t>((si * M + m) * np_ + n)]);
        sum -= static_cast<std::uint32_t>(rowsum[static_cast<std::size_t>(m)]);
        y[e] = finish_one(p_, args, sum, m, n);
      }
    });
  } else if (has_tail) {
    const std::int64_t n0 = (panels_ - 1) * nb;
    for (std::int64_t m = 0; m < M; ++m)
      for (std::int64_t n = n0; n < N; ++n) {
        const std::uint32_t sum = static_cast<std::uint32_t>(tail[static_cast<std::size_t>(m * nb + (n - n0))]) -
                                  static_cast<std::uint32_t>(rowsum[static_cast<std::size_t>(m)]);
        y[m * N + n] = finish_one(p_, args, sum, m, n);
      }
  }
}

Error bad(std::string msg) { return make_error(ErrorCode::InvalidArgument, std::move(msg)); }

}  // namespace

Result<void> validate_int8(const TMatMulProblem& p, const TMatMulConfig& c) {
  const Shape s = shape_of(c);
  if (c.variant == TMatMulVariant::Base3) {
    if (c.isa != Isa::Avx512Vnni && c.isa != Isa::Amx)
      return bad("variant=base3 needs isa=avx512_vnni (with AVX512-VBMI) or amx, not " + std::string(isa_name(c.isa)));
    if (c.vector_bits != 512) return bad("variant=base3 needs vec=512 (its table lookups are zmm vpermi2b)");
    if (p.K > kMaxMaskDotK)
      return bad("variant=base3 needs K <= " + std::to_string(kMaxMaskDotK) +
                 " (its 64x-scaled int32 accumulator must not wrap), K = " + std::to_string(p.K));
  }
  if (c.n_block % s.group != 0)
    return bad("nb=" + std::to_string(c.n_block) + ": n_block must be a multiple of " + std::to_string(s.group) + " (" +
               std::to_string(s.fields) + " x the int32 lanes of vec=" + std::to_string(c.vector_bits) + ")");
  if (c.m_block > kMaxMBlock)
    return bad("mb=" + std::to_string(c.m_block) + ": m_block must be at most " + std::to_string(kMaxMBlock));
  if (c.k_unroll > kMaxKUnroll)
    return bad("ku=" + std::to_string(c.k_unroll) + ": k_unroll must be at most " + std::to_string(kMaxKUnroll));
  if (c.prefetch_bytes > kMaxPrefetch)
    return bad("pf=" + std::to_string(c.prefetch_bytes) + ": prefetch_bytes must be at most " +
               std::to_string(kMaxPrefetch));
  const int mb = static_cast<int>(std::min<std::int64_t>(c.m_block, p.M));
  const int need = vregs_needed(s, mb);
  if (need > s.vregs)
    return bad("mb=" + std::to_string(c.m_block) + ",nb=" + std::to_string(c.n_block) + ": needs " +
               std::to_string(need) + " vector registers, isa=" + std::string(isa_name(c.isa)) + " has " +
               std::to_string(s.vregs));
  if (c.variant == TMatMulVariant::MaskDot && p.K > kMaxMaskDotK)
    return bad("variant=mask_dot needs K <= " + std::to_string(kMaxMaskDotK) +
               " (its 64x-scaled int32 accumulator must not wrap), K = " + std::to_string(p.K));
  return success();
}

Result<std::unique_ptr<TMatMulKernel>> create_int8(const TMatMulProblem& p, const TMatMulConfig& c) {
  auto k = std::make_unique<Int8Kernel>(p, c);
  TERNJIT_TRY_VOID(k->generate());
  return std::unique_ptr<TMatMulKernel>(std::move(k));
}

}  // namespace ternjit::targets::x86::detail
