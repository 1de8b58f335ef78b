// SPDX-License-Identifier: Apache-2.0
// tmatmul_amx.cpp - the Amx tmatmul variant: 2-bit weights unpacked to int8 VNNI tiles in cache, tdpbssd.
//
// Packed layout ("tern2.amx.nb<NB>"): N is cut into blocks of NB = 16 * nbt columns (the
// last zero-padded), K into chunks of 64 (zero-padded). Block b holds, for each chunk c,
// for each of its nbt B tiles t, the 16 tile rows r (k4 = 16 c + r) as 16 bytes: byte
// position p (0..63) of tile row r is column n = p / 4 of the tile and k = 4 k4 + p % 4
// (the VNNI layout tdpbssd reads), and its 2-bit code sits at byte p % 16, bits
// 2 * (p / 16): code 0 -> 0, 1 -> +1, 3 -> -1. Unpacking one tile row is
//   vbroadcasti32x4 z, [16 bytes]   128-bit lane L = the 16 bytes
//   vpsrlvw z, z, (2L per word)      lane L: its codes to bits 0-1 of each byte
//   vpandd z, z, 0x03                (bits from the neighbour byte dropped)
//   vpshufb z, table, z              code -> int8 {0, 1, 0, -1}
// and the unpacked block is the packed one, 4x larger, in the same order: 1 KB per tile.
//
// run(): per task (N blocks first, then M rows): x rows of the task are copied once into
// a zero-padded buffer (16-row tiles, K a multiple of 64: the A tiles), then the
// generated function loops over its N blocks: unpack the block's B tiles into a per-task
// buffer (K * NB bytes, L2-resident), then for each block of 16 * mbt rows accumulate
// the whole K in int32 C tiles (tdpbssd is s8 x s8 -> s32, wrapping, so the {-1, 0, 1}
// weights need no row-sum correction), store them to a scratch buffer and run the f32
// epilogue with AVX-512 exactly as the int8 path does (cvt, * x_scale, * w_scale,
// + bias, + residual as separate rounded ops, no FMA; relu): bit-exact with the reference.
// The tile configuration (64 bytes, palette 1) is emitted in the code and loaded with
// ldtilecfg by the generated code itself (GCC 12's _tile_loadconfig drops most of it,
// as measured when this kernel was written); tilerelease ends the function.
//
// Emulation (tests on CPUs without AMX): create_amx_emulated generates the same code
// except that ldtilecfg/tilerelease are left out and tileloadd, tilestored, tilezero and
// tdpbssd become AVX-512 sequences on an 8 KB memory tile file (tdpbssd as vpdpbusd of
// a ^ 0x80 minus 128 * the B column sums: exact modulo 2^32, as the tile unit's wrapping
// int32 sum). Everything else - packing, unpacking, blocking, addressing, epilogue - is
// the very code the AMX path runs, so the emulated tests cover all of it.
#include <algorithm>
#include <array>
#include <cstring>
#include <string>

#include "targets/x86/jit_code.h"
#include "targets/x86/tmatmul_internal.h"

namespace ternjit::targets::x86::detail {

Result<std::unique_ptr<TMatMulKernel>> create_amx_emulated(const TMatMulProblem& problem, const TMatMulConfig& config);

namespace {

using Xbyak::Label;
using Xbyak::Reg64;
using Xbyak::Tmm;
using Xbyak::Zmm;

// What the generated function receives (one pointer to this, in rdi).
struct AmxCall {
  const std::uint8_t* a = nullptr;   // A: the task's x rows, padded (rows x kp bytes)
  const std::uint8_t* w = nullptr;   // packed weights of the task's first N block
  std::uint8_t* bbuf = nullptr;      // unpacked B tiles of one N block
  std::int32_t* cbuf = nullptr;      // C tiles stored for the epilogue
  std::uint8_t* tiles = nullptr;     // emulation only: the 8 x 1 KB tile file
  float* y = nullptr;                // y[m0, n0]
  const float* x_scale = nullptr;    // x_scale + m0
  const float* w_scale = nullptr;    // w_scale + n0 (per channel) or w_scale
  const float* bias = nullptr;       // bias + n0
  const float* residual = nullptr;   // residual[m0, n0]
  std::int64_t m_count = 0;          // rows of the task
  std::int64_t n_blocks = 0;         // N blocks of the task
  std::int64_t tail = 0;             // 1: the last of them is the partial last block of N
};
using AmxFn = void (*)(const AmxCall*);

Error invalid(const std::string& what) { return make_error(ErrorCode::InvalidArgument, "tmatmul amx: " + what); }

struct Geometry {
  int mbt = 1, nbt = 1;        // A tiles (16 rows each) and B tiles (16 columns each) per block
  int mb = 16, nb = 16;        // rows and columns per block
  std::int64_t kc = 1;         // K chunks of 64
  std::int64_t kp = 64;        // padded K
  std::int64_t nblocks = 1;    // ceil(N / nb)
  int tail_cols = 0;           // N % nb
  std::int64_t block_packed = 0;    // packed bytes of one N block
  std::int64_t block_unpacked = 0;  // unpacked bytes of one N block
};

Geometry geometry(const TMatMulProblem& p, const TMatMulConfig& c) {
  Geometry g;
  g.mbt = c.m_block / 16;
  g.nbt = c.n_block / 16;
  g.mb = c.m_block;
  g.nb = c.n_block;
  g.kc = (p.K + 63) / 64;
  g.kp = g.kc * 64;
  g.nblocks = (p.N + g.nb - 1) / g.nb;
  g.tail_cols = static_cast<int>(p.N % g.nb);
  g.block_unpacked = g.kc * g.nbt * 1024;
  g.block_packed = g.block_unpacked / 4;
  return g;
}

// Tile numbers: C tiles first (tm * nbt + tn), then the A tiles, then the B tiles.
int c_tile(const Geometry& g, int tm, int tn) { return tm * g.nbt + tn; }
int a_tile(const Geometry& g, int tm) { return g.mbt * g.nbt + tm; }
int b_tile(const Geometry& g, int tn) { return g.mbt * g.nbt + g.mbt + tn; }

// The 64-byte tile configuration (palette 1): every used tile is 16 rows x 64 bytes.
std::array<std::uint8_t, 64> tile_config(const Geometry& g) {
  std::array<std::uint8_t, 64> cfg{};
  cfg[0] = 1;  // palette 1; cfg[1] start_row 0; bytes 2-15 reserved (0)
  const int used = g.mbt * g.nbt + g.mbt + g.nbt;
  for (int t = 0; t < used; ++t) {
    cfg[16 + 2 * t] = 64;  // colsb[t] (u16 little-endian)
    cfg[48 + t] = 16;      // rows[t]
  }
  return cfg;
}

class AmxGen {
 public:
  AmxGen(JitCode& code, const TMatMulProblem& p, const TMatMulConfig& c, bool emulate)
      : a_(code), p_(p), c_(c), g_(geometry(p, c)), emulate_(emulate) {}
  void emit();

 private:
  const Reg64 rArgs = Xbyak::util::rdi;
  const Reg64 rW = Xbyak::util::r8;        // packed codes of the current N block
  const Reg64 rYb = Xbyak::util::r9;       // y of the current N block, row m0
  const Reg64 rBias = Xbyak::util::r10;
  const Reg64 rWs = Xbyak::util::r11;
  const Reg64 rResb = Xbyak::util::r12;    // residual of the current N block, row m0
  const Reg64 rN = Xbyak::util::r13;       // N blocks left
  const Reg64 rM = Xbyak::util::r14;       // rows left
  const Reg64 rA = Xbyak::util::rsi;       // A rows of the current M block
  const Reg64 rXs = Xbyak::util::rbx;      // x_scale of the current M block
  const Reg64 rStrideA = Xbyak::util::rdx; // K loop: A row stride (kp); epilogue: y row
  const Reg64 rStride64 = Xbyak::util::rcx;// K loop: 64; epilogue: residual row
  const Reg64 rT0 = Xbyak::util::rax;      // temporaries
  const Reg64 rT1 = Xbyak::util::rbp;
  const Reg64 rT2 = Xbyak::util::r15;

  JitCode& a_;
  const TMatMulProblem& p_;
  const TMatMulConfig& c_;
  Geometry g_;
  bool emulate_;
  Label consts_, cfg_;

  Xbyak::Address cst(int i) const { return a_.ptr[a_.rip + consts_ + i * 64]; }
  void add_imm(const Reg64& r, std::int64_t v) {
    if (v == 0) return;
    if (v >= INT32_MIN && v <= INT32_MAX) {
      a_.add(r, static_cast<std::uint32_t>(v));
    } else {
      a_.push(rT0);
      a_.mov(rT0, v);
      a_.add(r, rT0);
      a_.pop(rT0);
    }
  }

  // The tile instructions, real or emulated. Addresses are base + disp + row * stride.
  void tile_load(int t, const Reg64& base, int disp, const Reg64& stride);
  void tile_store(int t, const Reg64& base, int disp, const Reg64& stride);
  void tile_zero(int t);
  void tile_dp(int c, int a, int b);
  // Emulation: tile t's 16 rows of 64 bytes from (to_tile) or to memory, as tile_load
  // and tile_store address it.
  void tile_copy(int t, const Reg64& base, int disp, const Reg64& stride, bool to_tile);
  // Emulation: the tile file address of tile t, row 0, into `dst`.
  void tile_addr(const Reg64& dst, int t) {
    a_.mov(dst, a_.ptr[rArgs + offsetof(AmxCall, tiles)]);
    if (t) a_.add(dst, t * 1024);
  }

  void emit_unpack();
  void emit_m_block();
  void emit_epilogue();
  void emit_consts();
};

void AmxGen::tile_load(int t, const Reg64& base, int disp, const Reg64& stride) {
  if (!emulate_) {
    a_.tileloadd(Tmm(t), a_.ptr[base + stride + disp]);
    return;
  }
  tile_copy(t, base, disp, stride, true);
}

void AmxGen::tile_store(int t, const Reg64& base, int disp, const Reg64& stride) {
  if (!emulate_) {
    a_.tilestored(a_.ptr[base + stride + disp], Tmm(t));
    return;
  }
  tile_copy(t, base, disp, stride, false);
}

void AmxGen::tile_copy(int t, const Reg64& base, int disp, const Reg64& stride, bool to_tile) {
  // Registers free here: rT2 (the K loop counter is kept on the stack across this).
  a_.push(rT2);
  a_.push(rT1);
  a_.lea(rT2, a_.ptr[base + disp]);
  tile_addr(rT1, t);
  for (int r = 0; r < 16; ++r) {
    if (to_tile) {
      a_.vmovdqu64(Zmm(31), a_.ptr[rT2]);
      a_.vmovdqu64(a_.ptr[rT1 + r * 64], Zmm(31));
    } else {
      a_.vmovdqu64(Zmm(31), a_.ptr[rT1 + r * 64]);
      a_.vmovdqu64(a_.ptr[rT2], Zmm(31));
    }
    a_.add(rT2, stride);
  }
  a_.pop(rT1);
  a_.pop(rT2);
}

void AmxGen::tile_zero(int t) {
  if (!emulate_) {
    a_.tilezero(Tmm(t));
    return;
  }
  a_.push(rT1);
  tile_addr(rT1, t);
  a_.vpxord(Zmm(31), Zmm(31), Zmm(31));
  for (int r = 0; r < 16; ++r) a_.vmovdqu64(a_.ptr[rT1 + r * 64], Zmm(31));
  a_.pop(rT1);
}

// C[m][n] += sum_k4 sum_i A[m][4 k4 + i] * B[k4][4 n + i] (s8 x s8, int32 wrapping).
void AmxGen::tile_dp(int c, int a, int b) {
  if (!emulate_) {
    a_.tdpbssd(Tmm(c), Tmm(a), Tmm(b));
    return;
  }
  // zmm0-15: the 16 B rows; zmm16: column sums of B; zmm17: acc; zmm18: a; 19: 0x80; 20: 0x01.
  a_.push(rT1);
  a_.push(rT2);
  tile_addr(rT1, b);
  for (int r = 0; r < 16; ++r) a_.vmovdqu64(Zmm(r), a_.ptr[rT1 + r * 64]);
  a_.mov(rT2.cvt32(), 0x80808080u);
  a_.vpbroadcastd(Zmm(19), rT2.cvt32());
  a_.mov(rT2.cvt32(), 0x01010101u);
  a_.vpbroadcastd(Zmm(20), rT2.cvt32());
  a_.vpxord(Zmm(16), Zmm(16), Zmm(16));
  for (int r = 0; r < 16; ++r) a_.vpdpbusd(Zmm(16), Zmm(20), Zmm(r));
  a_.vpslld(Zmm(16), Zmm(16), 7);  // 128 * column sums
  tile_addr(rT1, a);
  tile_addr(rT2, c);
  for (int m = 0; m < 16; ++m) {
    a_.vmovdqu32(Zmm(17), a_.ptr[rT2 + m * 64]);
    for (int k4 = 0; k4 < 16; ++k4) {
      a_.vpbroadcastd(Zmm(18), a_.ptr[rT1 + m * 64 + k4 * 4]);
      a_.vpxord(Zmm(18), Zmm(18), Zmm(19));  // a + 128 as u8
      a_.vpdpbusd(Zmm(17), Zmm(18), Zmm(k4));
    }
    a_.vpsubd(Zmm(17), Zmm(17), Zmm(16));
    a_.vmovdqu32(a_.ptr[rT2 + m * 64], Zmm(17));
  }
  a_.pop(rT2);
  a_.pop(rT1);
}

enum AmxConst : int { kWordShift, kLow2, kCodeTable, kNumAmxConsts };

void AmxGen::emit_consts() {
  a_.align(64);
  a_.L(consts_);
  for (int w = 0; w < 32; ++w) a_.dw(static_cast<std::uint16_t>(2 * (w / 8)));  // lane L: 2L
  for (int i = 0; i < 64; ++i) a_.db(0x03);
  for (int i = 0; i < 64; ++i) {
    const std::uint8_t v[4] = {0x00, 0x01, 0x00, 0xff};
    a_.db(i % 16 < 4 ? v[i % 16] : 0);  // vpshufb reads 16 bytes per lane; codes are 0-3
  }
  a_.L(cfg_);
  for (std::uint8_t b : tile_config(g_)) a_.db(b);
}

// Unpacks the current N block's codes (rW) into bbuf: one 64-byte tile row per 16 bytes.
void AmxGen::emit_unpack() {
  a_.mov(rT0, rW);
  a_.mov(rT1, a_.ptr[rArgs + offsetof(AmxCall, bbuf)]);
  a_.vmovdqu64(Zmm(29), cst(kWordShift));
  a_.vmovdqu64(Zmm(30), cst(kLow2));
  a_.vmovdqu64(Zmm(31), cst(kCodeTable));
  const std::int64_t rows = g_.block_packed / 16;  // a multiple of 16
  const int unroll = 4;
  Label loop;
  a_.mov(rT2, rows / unroll);
  a_.L(loop);
  if (c_.prefetch_bytes > 0) a_.prefetcht0(a_.ptr[rT0 + c_.prefetch_bytes]);
  for (int u = 0; u < unroll; ++u) {
    const Zmm z(u);
    a_.vbroadcasti32x4(z, a_.ptr[rT0 + u * 16]);
    a_.vpsrlvw(z, z, Zmm(29));
    a_.vpandd(z, z, Zmm(30));
    a_.vpshufb(z, Zmm(31), z);
    a_.vmovdqu64(a_.ptr[rT1 + u * 64], z);
  }
  a_.add(rT0, 16 * unroll);
  a_.add(rT1, 64 * unroll);
  a_.dec(rT2);
  a_.jnz(loop, JitCode::T_NEAR);
}

// One block of 16 * mbt rows (rA) against the unpacked N block: the whole K in C tiles,
// stored to cbuf.
void AmxGen::emit_m_block() {
  for (int tm = 0; tm < g_.mbt; ++tm)
    for (int tn = 0; tn < g_.nbt; ++tn) tile_zero(c_tile(g_, tm, tn));
  a_.mov(rStrideA, g_.kp);
  a_.mov(rStride64, 64);
  a_.mov(rT0, rA);                                              // A at chunk c
  a_.mov(rT1, a_.ptr[rArgs + offsetof(AmxCall, bbuf)]);        // B tiles of chunk c
  const int ku = std::max(1, c_.k_unroll);
  auto chunk = [&](int u) {
    for (int tm = 0; tm < g_.mbt; ++tm)
      tile_load(a_tile(g_, tm), rT0, static_cast<int>(tm * 16 * g_.kp + u * 64), rStrideA);
    for (int tn = 0; tn < g_.nbt; ++tn)
      tile_load(b_tile(g_, tn), rT1, (u * g_.nbt + tn) * 1024, rStride64);
    for (int tm = 0; tm < g_.mbt; ++tm)
      for (int tn = 0; tn < g_.nbt; ++tn) tile_dp(c_tile(g_, tm, tn), a_tile(g_, tm), b_tile(g_, tn));
  };
  const std::int64_t iters = g_.kc / ku;
  const int rem = static_cast<int>(g_.kc % ku);
  if (iters > 0) {
    Label loop;
    a_.mov(rT2, iters);
    a_.L(loop);
    for (int u = 0; u < ku; ++u) chunk(u);
    a_.add(rT0, 64 * ku);
    a_.add(rT1, 1024 * g_.nbt * ku);
    a_.dec(rT2);
    a_.jnz(loop, JitCode::T_NEAR);
  }
  for (int u = 0; u < rem; ++u) chunk(u);
  a_.mov(rT0, a_.ptr[rArgs + offsetof(AmxCall, cbuf)]);
  for (int tm = 0; tm < g_.mbt; ++tm)
    for (int tn = 0; tn < g_.nbt; ++tn)
      tile_store(c_tile(g_, tm, tn), rT0, c_tile(g_, tm, tn) * 1024, rStride64);
}

// The epilogue of the stored C tiles for min(rM, 16 * mbt) rows: masks k1..k(nbt) hold
// the valid columns of each 16-column vector.
void AmxGen::emit_epilogue() {
  const Reg64 rY = rStrideA, rRes = rStride64, rC = rT0, rRow = rT1, rRows = rT2;
  const std::int64_t ldy = p_.N * 4;
  // Zmm use: 0..nbt-1 values, 8: x_scale, 9, 10: temporaries, 11: zero.
  a_.vpxord(Zmm(11), Zmm(11), Zmm(11));
  for (int tm = 0; tm < g_.mbt; ++tm) {
    Label done, loop;
    // rows in this tile: min(16, rM - 16 tm), nothing when <= 0.
    a_.mov(rRows, rM);
    a_.sub(rRows, 16 * tm);  // sets the flags even for tm = 0
    a_.jle(done, JitCode::T_NEAR);
    a_.mov(rRow, 16);
    a_.cmp(rRows, rRow);
    a_.cmovg(rRows, rRow);
    a_.mov(rY, rYb);
    a_.mov(rRes, rResb);
    a_.mov(rC, a_.ptr[rArgs + offsetof(AmxCall, cbuf)]);
    // rRow: the row within the M block (indexes x_scale).
    a_.mov(rRow, static_cast<std::uint32_t>(16 * tm));
    a_.L(loop);
    for (int tn = 0; tn < g_.nbt; ++tn) {
      const Zmm v(tn);
      const Xbyak::Opmask k(1 + tn);
      a_.vcvtdq2ps(v, a_.ptr[rC + c_tile(g_, tm, tn) * 1024]);
      if (p_.x_scale) a_.vmulps(v, v, a_.ptr_b[rXs + rRow * 4]);
      if (p_.w_scale) {
        if (p_.w_scale_per_channel) {
          a_.vmovups(Zmm(9) | k | a_.T_z, a_.ptr[rWs + tn * 64]);
          a_.vmulps(v, v, Zmm(9));
        } else {
          a_.vmulps(v, v, a_.ptr_b[rWs]);
        }
      }
      if (p_.bias) {
        a_.vmovups(Zmm(9) | k | a_.T_z, a_.ptr[rBias + tn * 64]);
        a_.vaddps(v, v, Zmm(9));
      }
      if (p_.residual) {
        a_.vmovups(Zmm(9) | k | a_.T_z, a_.ptr[rRes + tn * 64]);
        a_.vaddps(v, v, Zmm(9));
      }
      if (p_.relu) {
        // x > 0 ? x : +0, NaN kept (the reference's relu).
        a_.vcmpps(a_.k7, v, v, 7);  // ordered
        a_.vmaxps(v | a_.k7, v, Zmm(11));
      }
      a_.vmovups(a_.ptr[rY + tn * 64] | k, v);
    }
    a_.add(rC, 64);
    add_imm(rY, ldy);
    if (p_.residual) add_imm(rRes, ldy);
    a_.inc(rRow);
    a_.dec(rRows);
    a_.jnz(loop, JitCode::T_NEAR);
    // The next tile's rows follow 16 rows on: advance the block bases.
    a_.L(done);
    if (tm + 1 < g_.mbt) {
      add_imm(rYb, 16 * ldy);
      if (p_.residual) add_imm(rResb, 16 * ldy);
    }
  }
  // Undo the per-tile advance of the bases (the caller advances by whole M blocks).
  if (g_.mbt > 1) {
    add_imm(rYb, -16 * (g_.mbt - 1) * ldy);
    if (p_.residual) add_imm(rResb, -16 * (g_.mbt - 1) * ldy);
  }
}

void AmxGen::emit() {
  static const Reg64 saved[] = {Xbyak::util::rbx, Xbyak::util::rbp, Xbyak::util::r12,
                                Xbyak::util::r13, Xbyak::util::r14, Xbyak::util::r15};
  for (const Reg64& r : saved) a_.push(r);
  a_.sub(a_.rsp, 8);
  if (!emulate_) a_.ldtilecfg(a_.ptr[a_.rip + cfg_]);

  a_.mov(rW, a_.ptr[rArgs + offsetof(AmxCall, w)]);
  a_.mov(rYb, a_.ptr[rArgs + offsetof(AmxCall, y)]);
  a_.mov(rBias, a_.ptr[rArgs + offsetof(AmxCall, bias)]);
  a_.mov(rWs, a_.ptr[rArgs + offsetof(AmxCall, w_scale)]);
  a_.mov(rResb, a_.ptr[rArgs + offsetof(AmxCall, residual)]);
  a_.mov(rN, a_.ptr[rArgs + offsetof(AmxCall, n_blocks)]);

  Label nloop, full_masks, masks_done, mloop, mdone, done;
  a_.test(rN, rN);
  a_.jz(done, JitCode::T_NEAR);
  a_.L(nloop);
  // Column masks of this block: all valid, except in the partial last block of N.
  if (g_.tail_cols > 0) {
    a_.cmp(rN, 1);
    a_.jne(full_masks, JitCode::T_NEAR);
    a_.cmp(a_.qword[rArgs + offsetof(AmxCall, tail)], 0);
    a_.je(full_masks, JitCode::T_NEAR);
    for (int tn = 0; tn < g_.nbt; ++tn) {
      const int valid = std::clamp(g_.tail_cols - 16 * tn, 0, 16);
      a_.mov(rT0.cvt32(), (1u << valid) - 1);
      a_.kmovw(Xbyak::Opmask(1 + tn), rT0.cvt32());
    }
    a_.jmp(masks_done, JitCode::T_NEAR);
  }
  a_.L(full_masks);
  a_.mov(rT0.cvt32(), 0xffff);
  for (int tn = 0; tn < g_.nbt; ++tn) a_.kmovw(Xbyak::Opmask(1 + tn), rT0.cvt32());
  a_.L(masks_done);

  emit_unpack();

  a_.mov(rA, a_.ptr[rArgs + offsetof(AmxCall, a)]);
  a_.mov(rXs, a_.ptr[rArgs + offsetof(AmxCall, x_scale)]);
  a_.mov(rM, a_.ptr[rArgs + offsetof(AmxCall, m_count)]);
  a_.push(rYb);
  a_.push(rResb);
  a_.L(mloop);
  emit_m_block();
  emit_epilogue();
  add_imm(rA, static_cast<std::int64_t>(g_.mb) * g_.kp);
  if (p_.x_scale) add_imm(rXs, static_cast<std::int64_t>(g_.mb) * 4);
  add_imm(rYb, static_cast<std::int64_t>(g_.mb) * p_.N * 4);
  if (p_.residual) add_imm(rResb, static_cast<std::int64_t>(g_.mb) * p_.N * 4);
  a_.sub(rM, g_.mb);
  a_.jg(mloop, JitCode::T_NEAR);
  a_.L(mdone);
  a_.pop(rResb);
  a_.pop(rYb);

  add_imm(rW, g_.block_packed);
  add_imm(rYb, static_cast<std::int64_t>(g_.nb) * 4);
  if (p_.bias) add_imm(rBias, static_cast<std::int64_t>(g_.nb) * 4);
  if (p_.w_scale && p_.w_scale_per_channel) add_imm(rWs, static_cast<std::int64_t>(g_.nb) * 4);
  if (p_.residual) add_imm(rResb, static_cast<std::int64_t>(g_.nb) * 4);
  a_.dec(rN);
  a_.jnz(nloop, JitCode::T_NEAR);

  a_.L(done);
  if (!emulate_) a_.tilerelease();
  a_.add(a_.rsp, 8);
  for (int i = 5; i >= 0; --i) a_.pop(saved[i]);
  a_.vzeroupper();
  a_.ret();
  emit_consts();
}

// 64-byte aligned scratch owned by one task.
struct Scratch {
  std::vector<std::uint8_t> storage;
  std::uint8_t* p = nullptr;
  explicit Scratch(std::size_t bytes) : storage(bytes + 64) {
    p = storage.data() + (64 - reinterpret_cast<std::uintptr_t>(storage.data()) % 64) % 64;
  }
};

class AmxKernel final : public TMatMulKernel {
 public:
  AmxKernel(const TMatMulProblem& p, const TMatMulConfig& c, bool emulate)
      : p_(p), c_(c), g_(geometry(p, c)), emulate_(emulate), code_(256 * 1024) {}

  Result<void> generate() {
    return emit_guarded("tmatmul amx", [&] {
      AmxGen gen(code_, p_, c_, emulate_);
      gen.emit();
      fn_ = code_.finalize<AmxFn>();
    });
  }

  [[nodiscard]] const TMatMulProblem& problem() const override { return p_; }
  [[nodiscard]] const TMatMulConfig& config() const override { return c_; }
  [[nodiscard]] std::string pack_signature() const override { return "tern2.amx.nb" + std::to_string(g_.nb); }

  [[nodiscard]] Result<PackedWeights> pack(const TernaryWeights& w) const override {
    TERNJIT_TRY(PackedWeights pw, detail::start_pack(w, p_, pack_signature(),
                                                     static_cast<std::size_t>(g_.nblocks * g_.block_packed)));
    std::uint8_t* out = pw.storage.data() + pw.offset;
    for (std::int64_t k = 0; k < p_.K; ++k) {
      for (std::int64_t n = 0; n < p_.N; ++n) {
        const int v = w[static_cast<std::size_t>(k * p_.N + n)];
        if (v == 0) continue;
        const std::int64_t block = n / g_.nb, t = (n % g_.nb) / 16, col = n % 16;
        const std::int64_t chunk = k / 64, r = (k % 64) / 4;
        const std::int64_t pos = col * 4 + k % 4;  // byte of the 64-byte tile row
        const std::int64_t row = (chunk * g_.nbt + t) * 16 + r;
        const unsigned code = v > 0 ? 1u : 3u;
        out[block * g_.block_packed + row * 16 + pos % 16] |= static_cast<std::uint8_t>(code << (2 * (pos / 16)));
      }
    }
    return pw;
  }

  void run(const TMatMulArgs& args, const Parallel& parallel) const override {
    const std::int64_t M = args.rows > 0 ? args.rows : p_.M;
    const std::int64_t mblocks = (M + g_.mb - 1) / g_.mb;
    const std::int64_t t = std::max(1, c_.threads);
    const std::int64_t nchunks = std::min<std::int64_t>(g_.nblocks, t);
    const std::int64_t mchunks = std::min<std::int64_t>(mblocks, std::max<std::int64_t>(1, t / nchunks));
    const auto* x = static_cast<const std::int8_t*>(args.x);
    auto* y = static_cast<float*>(args.y);
    const auto* bias = static_cast<const float*>(args.bias);
    const auto* res = static_cast<const float*>(args.residual);
    const std::uint8_t* w = args.w->data();
    parallel.for_each(nchunks * mchunks, [&](std::int64_t i) {
      const std::int64_t ni = i / mchunks, mi = i % mchunks;
      const std::int64_t nb0 = g_.nblocks * ni / nchunks, nb1 = g_.nblocks * (ni + 1) / nchunks;
      const std::int64_t b0 = mblocks * mi / mchunks, b1 = mblocks * (mi + 1) / mchunks;
      const std::int64_t m0 = b0 * g_.mb, m1 = std::min(M, b1 * g_.mb);
      if (nb0 >= nb1 || m0 >= m1) return;
      const std::int64_t rows_pad = (b1 - b0) * g_.mb;
      const std::size_t a_bytes = static_cast<std::size_t>(rows_pad * g_.kp);
      const std::size_t b_bytes = static_cast<std::size_t>(g_.block_unpacked);
      const std::size_t c_bytes = static_cast<std::size_t>(g_.mbt * g_.nbt * 1024);
      Scratch scratch(a_bytes + b_bytes + c_bytes + (emulate_ ? 8192 : 0));
      std::uint8_t* abuf = scratch.p;
      // The A tiles: the task's rows with K padded to 64 and rows to whole blocks, zeros.
      std::memset(abuf, 0, a_bytes);
      for (std::int64_t m = m0; m < m1; ++m)
        std::memcpy(abuf + (m - m0) * g_.kp, x + m * p_.K, static_cast<std::size_t>(p_.K));
      const std::int64_t n0 = nb0 * g_.nb;
      AmxCall call;
      call.a = abuf;
      call.w = w + nb0 * g_.block_packed;
      call.bbuf = abuf + a_bytes;
      call.cbuf = reinterpret_cast<std::int32_t*>(abuf + a_bytes + b_bytes);
      call.tiles = emulate_ ? abuf + a_bytes + b_bytes + c_bytes : nullptr;
      call.y = y + m0 * p_.N + n0;
      call.x_scale = args.x_scale ? args.x_scale + m0 : nullptr;
      call.w_scale = args.w_scale ? args.w_scale + (p_.w_scale_per_channel ? n0 : 0) : nullptr;
      call.bias = bias ? bias + n0 : nullptr;
      call.residual = res ? res + m0 * p_.N + n0 : nullptr;
      call.m_count = m1 - m0;
      call.n_blocks = nb1 - nb0;
      call.tail = nb1 == g_.nblocks && g_.tail_cols > 0 ? 1 : 0;
      fn_(&call);
    });
  }

  [[nodiscard]] std::vector<CodeBlob> code() const override {
    return {CodeBlob{std::string(emulate_ ? "tmatmul amx (emulated tiles)" : "tmatmul amx") +
                         " mb=" + std::to_string(g_.mb) + " nb=" + std::to_string(g_.nb),
                     code_.bytes()}};
  }

 private:
  TMatMulProblem p_;
  TMatMulConfig c_;
  Geometry g_;
  bool emulate_;
  JitCode code_;
  AmxFn fn_ = nullptr;
};

Result<std::unique_ptr<TMatMulKernel>> create(const TMatMulProblem& problem, const TMatMulConfig& config,
                                              bool emulate) {
  TERNJIT_TRY_VOID(validate_amx(problem, config));
  auto k = std::make_unique<AmxKernel>(problem, config, emulate);
  TERNJIT_TRY_VOID(k->generate());
  return std::unique_ptr<TMatMulKernel>(std::move(k));
}

}  // namespace

Result<void> validate_amx(const TMatMulProblem& p, const TMatMulConfig& c) {
  if (c.variant != TMatMulVariant::Amx) return invalid("variant must be amx");
  if (c.isa != Isa::Amx) return invalid("isa must be amx, got " + std::string(isa_name(c.isa)));
  if (p.x_kind != ElemKind::I8) return invalid("x kind must be i8, got " + std::string(elem_name(p.x_kind)));
  if (p.out_kind != ElemKind::F32) return invalid("out kind must be f32, got " + std::string(elem_name(p.out_kind)));
  if (p.M < 1 || p.K < 1 || p.N < 1) return invalid("M, K and N must be >= 1");
  if (p.w_scale_per_channel && !p.w_scale) return invalid("w_scale_per_channel needs w_scale");
  if (c.vector_bits != 512) return invalid("vec must be 512 (the epilogue uses zmm)");
  if (c.m_block < 16 || c.m_block % 16 != 0) return invalid("mb must be a positive multiple of 16");
  if (c.n_block < 16 || c.n_block % 16 != 0) return invalid("nb must be a positive multiple of 16");
  const int mbt = c.m_block / 16, nbt = c.n_block / 16;
  if (mbt * nbt + mbt + nbt > 8)
    return invalid("mb=" + std::to_string(c.m_block) + " nb=" + std::to_string(c.n_block) + " needs " +
                   std::to_string(mbt * nbt + mbt + nbt) + " tiles, there are 8");
  if (c.k_unroll < 1 || c.k_unroll > 8) return invalid("ku must be in [1, 8]");
  if (c.prefetch_bytes < 0 || c.prefetch_bytes > 65536) return invalid("pf must be in [0, 65536]");
  if (c.threads < 1) return invalid("t must be >= 1");
  if (c.split_k != 1) return invalid("sk must be 1 (the amx variant does not split K)");
  return success();
}

Result<std::unique_ptr<TMatMulKernel>> create_amx(const TMatMulProblem& problem, const TMatMulConfig& config) {
  return create(problem, config, false);
}

/// The Amx kernel with the tile instructions replaced by AVX-512 VNNI sequences on a
/// memory tile file (no ldtilecfg/tilerelease): the same packing, unpacking, blocking
/// and epilogue code, runnable and testable on CPUs without AMX (needs AVX512-VNNI).
/// For tests only.
Result<std::unique_ptr<TMatMulKernel>> create_amx_emulated(const TMatMulProblem& problem, const TMatMulConfig& config) {
  return create(problem, config, true);
}

}  // namespace ternjit::targets::x86::detail
