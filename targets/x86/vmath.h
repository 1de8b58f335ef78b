// SPDX-License-Identifier: Apache-2.0
// vmath.h - vector emitters shared by the x86 eltwise kernels: constants, loads and
// stores of f32/bf16/f16 with tails, IEEE max/min, and exp/log/tanh/sigmoid/silu/gelu.
//
// Private to targets/x86 (include only from generator .cpp files: it pulls in Xbyak).
// Every emitter works on f32 lanes of one vector width: ymm (Avx2 family, 8 lanes) or
// zmm (Avx512 family, 16 lanes); helpers that take explicit narrower registers (the
// horizontal reductions) use VEX encodings, which every AVX-512 CPU also runs.
//
// Register conventions of the kernels built on these emitters:
//   vector register 15 (Avx2)  the tail lane mask (set_tail), never allocated
//   k1 (Avx512)                the tail mask (set_tail); k2..k5 are emitter temps
//   r11                        integer scratch of load()/store()
#pragma once

#include <cstdint>
#include <vector>

#include "targets/x86/isa.h"
#include "targets/x86/jit_code.h"
#include "ternjit/types.h"

namespace ternjit::targets::x86 {

/// A lane mask: a vector register (Avx2: all-ones lanes) or an opmask (Avx512).
struct VMask {
  Xbyak::Xmm v;     ///< used when the operation's registers are ymm/xmm
  Xbyak::Opmask k;  ///< used when they are zmm
};

/// How load() reads its operand.
enum class LoadMode : std::uint8_t {
  Full,       ///< one whole vector of contiguous elements
  Tail,       ///< the first tail() contiguous elements; the other lanes become 0
  Broadcast,  ///< one element, copied to every lane
};

/// Emits vector code into a JitCode for one ISA family. Not thread-safe; one per blob.
class VecAsm {
 public:
  /// `isa` picks the width: Avx512, Avx512Vnni and Amx use zmm, Avx2 and AvxVnni ymm.
  VecAsm(JitCode& code, Isa isa);

  [[nodiscard]] JitCode& code() const { return c_; }
  /// True for the zmm (AVX-512) family.
  [[nodiscard]] bool wide() const { return wide_; }
  /// f32 lanes per vector: 8 or 16.
  [[nodiscard]] int lanes() const { return wide_ ? 16 : 8; }
  /// Vector register i of the family's width.
  [[nodiscard]] Xbyak::Xmm v(int i) const;
  /// The mask of temp index t (0..3): Avx2 borrows vector register `vreg`; Avx512 k2+t.
  [[nodiscard]] VMask mask(int vreg, int t = 0) const;

  /// A full-width vector constant (every lane `value`), placed in the pool after the code.
  Xbyak::Address c(float value);
  /// As c(), from the lane's bit pattern.
  Xbyak::Address cb(std::uint32_t bits);
  /// Places the constant pool; call once, after the last instruction.
  void emit_constants();

  /// Sets the tail lane count (1 .. lanes-1) for Tail loads/stores: k1 (Avx512) or
  /// vector register 15 (Avx2) is loaded; both must then stay untouched.
  void set_tail(int tail);
  [[nodiscard]] int tail() const { return tail_; }

  /// Loads elements of `kind` at `at` as f32 lanes into dst (a register of the width).
  void load(const Xbyak::Xmm& dst, ElemKind kind, const Xbyak::RegExp& at, LoadMode mode);
  /// Stores the f32 lanes of `src` (clobbered) rounded to `kind` at `at`: the whole
  /// vector, or the first tail() lanes when `tail`. Temp t0 (a wide reg, != src).
  void store(const Xbyak::RegExp& at, ElemKind kind, const Xbyak::Xmm& src, bool tail, const Xbyak::Xmm& t0);
  /// Stores lane 0 of xmm `src` (clobbered) rounded to `kind`; `tmp` an xmm temp.
  void store_scalar(const Xbyak::RegExp& at, ElemKind kind, const Xbyak::Xmm& src, const Xbyak::Xmm& tmp);
  /// Rounds the lanes of x to `kind` (f32: nothing) as a store and reload would; temp t0.
  void round_to_kind(const Xbyak::Xmm& x, ElemKind kind, const Xbyak::Xmm& t0);
  /// The bf16 bits of each f32 lane exactly as numeric.h f32_to_bf16_bits (nearest even,
  /// NaN (bits >> 16) | 0x40), in the low 16 bits of each 32-bit lane of dst, or with
  /// `keep_high` in the high 16 bits with the low ones 0 (the f32 value of the bf16).
  /// `t` a temp; dst may equal src. Works on xmm/ymm/zmm.
  void bf16_bits(const Xbyak::Xmm& dst, const Xbyak::Xmm& src, const Xbyak::Xmm& t, bool keep_high = false);
  /// Rounds lanes of x (f32) to the nearest integer-valued f32, ties to even.
  void round_even(const Xbyak::Xmm& dst, const Xbyak::Xmm& x);

  /// Lane compare into m (the mask form matching x's width).
  void cmp(const VMask& m, const Xbyak::Xmm& x, const Xbyak::Operand& y, int predicate);
  /// dst = m ? if_true : if_false (lane-wise).
  void blend(const Xbyak::Xmm& dst, const VMask& m, const Xbyak::Xmm& if_false, const Xbyak::Operand& if_true);

  // Math. dst, x and the temps are distinct registers of one width unless stated; x is
  // preserved. Results follow ir/interpret.cpp's element functions (see eltwise.h for
  // the accuracy contract).
  /// IEEE 754-2019 maximum (minimum when `is_min`): NaN propagates, +0 > -0; bit-exact
  /// up to the NaN payload. dst != a, b; one temp.
  void max_ieee(const Xbyak::Xmm& dst, const Xbyak::Xmm& a, const Xbyak::Xmm& b, const Xbyak::Xmm& t0,
                bool is_min = false);
  /// relu as the reference: NaN stays, x > 0 ? x : +0.
  void relu(const Xbyak::Xmm& dst, const Xbyak::Xmm& x, const Xbyak::Xmm& t0);
  /// e^x; x may equal dst (then it is not preserved). Two temps.
  void exp(const Xbyak::Xmm& dst, const Xbyak::Xmm& x, const Xbyak::Xmm& t0, const Xbyak::Xmm& t1);
  /// ln x (x <= 0, inf, NaN and subnormals as std::log). Three temps.
  void log(const Xbyak::Xmm& dst, const Xbyak::Xmm& x, const Xbyak::Xmm& t0, const Xbyak::Xmm& t1,
           const Xbyak::Xmm& t2);
  /// tanh. Three temps.
  void tanh(const Xbyak::Xmm& dst, const Xbyak::Xmm& x, const Xbyak::Xmm& t0, const Xbyak::Xmm& t1,
            const Xbyak::Xmm& t2);
  /// 1 / (1 + e^-x), or x / (1 + e^-x) when `silu`. Three temps.
  void sigmoid(const Xbyak::Xmm& dst, const Xbyak::Xmm& x, const Xbyak::Xmm& t0, const Xbyak::Xmm& t1,
               const Xbyak::Xmm& t2, bool silu = false);
  /// 0.5 x (1 + erf(x / sqrt 2)), computed as x * Phi(x) through erfc. Four temps.
  void gelu(const Xbyak::Xmm& dst, const Xbyak::Xmm& x, const Xbyak::Xmm& t0, const Xbyak::Xmm& t1,
            const Xbyak::Xmm& t2, const Xbyak::Xmm& t3);

  /// How horizontal() combines lanes.
  enum class Horizontal : std::uint8_t { Sum, Max, MaxIeee };
  /// Horizontal sum / max (vmaxps, NaN-ignoring) / IEEE max of the lanes of vector
  /// register index v (clobbered) into lane 0 of xmm v; t, t2, t3 temp register indices.
  void horizontal(Horizontal how, int v, int t, int t2, int t3);

 private:
  Xbyak::Address pool_at(std::size_t index) const;

  JitCode& c_;
  bool wide_ = false;
  int tail_ = 0;
  Xbyak::Label pool_;
  std::vector<std::uint32_t> pool_bits_;
};

}  // namespace ternjit::targets::x86
