// SPDX-License-Identifier: Apache-2.0
// vmath.cpp - the vector emitters of vmath.h: conversions, tails, IEEE max and the math functions.
//
// Accuracy (f32, measured by tests/unit/x86/eltwise_test.cpp against double references):
// max relative error exp 1.2e-7, log 1.2e-7, tanh 1.2e-7, sigmoid 1.9e-7, silu 1.9e-7,
// gelu 3.4e-7 (about 2 to 6 ulps) on normal results. The algorithms:
//   exp    Cody-Waite reduction x = n ln2 + r, |r| <= ln2/2, the Cephes degree-7
//          polynomial, and 2^n applied as two factors 2^(n/2) so that results in the
//          subnormal range round once (x is clamped to [-104, 89]: 0 and inf beyond).
//   log    frexp, the Cephes logf polynomial around 1 (subnormals prescaled by 2^23).
//   tanh   odd polynomial for |x| < 0.625 (Cephes tanhf), else 1 - 2 / (e^2|x| + 1).
//   sigmoid (x >= 0 ? 1 : e) / (1 + e) with e = e^-|x| (no overflow, no cancellation);
//          silu multiplies the numerator by x.
//   gelu   x * Phi(x) with Phi from erfc(|x|/sqrt2) = exp(-a^2) * erfcx(a): erfcx(a) from
//          (1 + p(q)) / (1 + 2a), q = (a - 2) / (a + 2), p a degree-10 least-squares fit
//          (njuffa's erfcf scheme, coefficients refitted for this file); a and a^2 are
//          carried with their rounding errors so that the tail for x << 0 stays accurate.
#include "targets/x86/vmath.h"

#include <bit>
#include <stdexcept>

namespace ternjit::targets::x86 {

namespace {

using Xbyak::Opmask;
using Xbyak::Xmm;
using Xbyak::Ymm;
using Xbyak::Zmm;

// vcmpps predicates.
constexpr int kEqOq = 0x00;
constexpr int kUnord = 0x03;
constexpr int kNgtUq = 0x0A;
constexpr int kNltUq = 0x05;
constexpr int kNleUq = 0x16;
constexpr int kLtOq = 0x11;
constexpr int kGeOq = 0x1D;

Xmm xmm_of(const Xmm& r) { return Xmm(r.getIdx()); }
Xmm ymm_of(const Xmm& r) { return Ymm(r.getIdx()); }

}  // namespace

VecAsm::VecAsm(JitCode& code, Isa isa)
    : c_(code), wide_(isa == Isa::Avx512 || isa == Isa::Avx512Vnni || isa == Isa::Amx) {}

Xmm VecAsm::v(int i) const {
  if (wide_) return Zmm(i);
  return Ymm(i);
}

VMask VecAsm::mask(int vreg, int t) const { return VMask{Ymm(vreg), Opmask(2 + t)}; }

Xbyak::Address VecAsm::pool_at(std::size_t index) const {
  return c_.ptr[c_.rip + pool_ + static_cast<int>(index * static_cast<std::size_t>(lanes()) * 4)];
}

Xbyak::Address VecAsm::cb(std::uint32_t bits) {
  for (std::size_t i = 0; i < pool_bits_.size(); ++i)
    if (pool_bits_[i] == bits) return pool_at(i);
  pool_bits_.push_back(bits);
  return pool_at(pool_bits_.size() - 1);
}

Xbyak::Address VecAsm::c(float value) { return cb(std::bit_cast<std::uint32_t>(value)); }

void VecAsm::emit_constants() {
  c_.align(64);
  c_.L(pool_);
  for (std::uint32_t bits : pool_bits_)
    for (int l = 0; l < lanes(); ++l) c_.dd(bits);
}

void VecAsm::set_tail(int tail) {
  if (tail <= 0 || tail >= lanes()) throw std::runtime_error("bad tail count");
  tail_ = tail;
  if (wide_) {
    c_.mov(c_.r11d, (1u << tail) - 1);
    c_.kmovw(c_.k1, c_.r11d);
  } else {
    // The lane mask (all-ones for lanes < tail) as data in the code stream.
    Xbyak::Label data, done;
    c_.jmp(done);
    c_.align(32);
    c_.L(data);
    for (int l = 0; l < 8; ++l) c_.dd(l < tail ? 0xFFFF'FFFFu : 0u);
    c_.L(done);
    c_.vmovups(Ymm(15), c_.ptr[c_.rip + data]);
  }
}

void VecAsm::cmp(const VMask& m, const Xmm& x, const Xbyak::Operand& y, int predicate) {
  if (x.isZMM()) c_.vcmpps(m.k, x, y, static_cast<std::uint8_t>(predicate));
  else c_.vcmpps(x.isYMM() ? ymm_of(m.v) : xmm_of(m.v), x, y, static_cast<std::uint8_t>(predicate));
}

void VecAsm::blend(const Xmm& dst, const VMask& m, const Xmm& if_false, const Xbyak::Operand& if_true) {
  if (dst.isZMM()) c_.vblendmps(dst | m.k, if_false, if_true);
  else c_.vblendvps(dst, if_false, if_true, dst.isYMM() ? ymm_of(m.v) : xmm_of(m.v));
}

void VecAsm::load(const Xmm& dst, ElemKind kind, const Xbyak::RegExp& at, LoadMode mode) {
  const Xmm xd = xmm_of(dst);
  if (mode == LoadMode::Broadcast) {
    if (kind == ElemKind::F32) {
      c_.vbroadcastss(dst, c_.dword[at]);
      return;
    }
    c_.movzx(c_.r11d, c_.word[at]);
    c_.vmovd(xd, c_.r11d);
    if (kind == ElemKind::BF16) c_.vpslld(xd, xd, 16);
    else c_.vcvtph2ps(xd, xd);
    c_.vbroadcastss(dst, xd);
    return;
  }
  const bool tail = mode == LoadMode::Tail;
  if (tail && tail_ == 0) throw std::runtime_error("tail load without set_tail");
  if (wide_) {
    const Xmm d = tail ? (dst | c_.k1 | c_.T_z) : dst;
    switch (kind) {
      case ElemKind::F32: c_.vmovups(d, c_.ptr[at]); break;
      case ElemKind::BF16:
        c_.vpmovzxwd(d, c_.ptr[at]);
        c_.vpslld(dst, dst, 16);
        break;
      case ElemKind::F16: c_.vcvtph2ps(d, c_.ptr[at]); break;
      default: throw std::runtime_error("load of a non-float kind");
    }
    return;
  }
  if (kind == ElemKind::F32) {
    if (tail) c_.vmaskmovps(dst, Ymm(15), c_.ptr[at]);
    else c_.vmovups(dst, c_.ptr[at]);
    return;
  }
  if (kind != ElemKind::BF16 && kind != ElemKind::F16) throw std::runtime_error("load of a non-float kind");
  if (tail) {
    // No 16-bit masked load in AVX2: insert the tail elements one by one.
    c_.vpxor(xd, xd, xd);
    for (int j = 0; j < tail_; ++j) c_.vpinsrw(xd, xd, c_.word[at + 2 * j], static_cast<std::uint8_t>(j));
    if (kind == ElemKind::BF16) {
      c_.vpmovzxwd(dst, xd);
      c_.vpslld(dst, dst, 16);
    } else {
      c_.vcvtph2ps(dst, xd);
    }
    return;
  }
  if (kind == ElemKind::BF16) {
    c_.vpmovzxwd(dst, c_.ptr[at]);
    c_.vpslld(dst, dst, 16);
  } else {
    c_.vcvtph2ps(dst, c_.ptr[at]);
  }
}

void VecAsm::bf16_bits(const Xmm& dst, const Xmm& src, const Xmm& t, bool keep_high) {
  // NaN lanes first become (bits & 0xFFFF0000) | 0x00400000, so that the rounding
  // below neither carries out of them nor turns them into inf: their result is then the
  // reference's (bits >> 16) | 0x40. Other lanes round to nearest even by adding
  // 0x7FFF + the lowest kept bit (numeric.h f32_to_bf16_bits).
  if (src.isZMM()) {
    c_.vcmpps(c_.k2, src, src, kUnord);
    if (dst.getIdx() != src.getIdx()) c_.vmovaps(dst, src);
    c_.vandps(dst | c_.k2, dst, cb(0xFFFF'0000u));
    c_.vorps(dst | c_.k2, dst, cb(0x0040'0000u));
  } else {
    c_.vcmpps(t, src, src, 0x07);         // ordered: all-ones except NaN lanes
    c_.vorps(t, t, cb(0xFFBF'0000u));     // NaN lanes: keep the high half but bit 22
    c_.vandps(dst, src, t);
    c_.vandnps(t, t, cb(0x0040'0000u));  // NaN lanes: bit 22
    c_.vorps(dst, dst, t);
  }
  c_.vpsrld(t, dst, 16);
  c_.vandps(t, t, cb(1u));
  c_.vpaddd(t, t, cb(0x7FFFu));
  c_.vpaddd(dst, dst, t);
  if (keep_high) c_.vandps(dst, dst, cb(0xFFFF'0000u));
  else c_.vpsrld(dst, dst, 16);
}

void VecAsm::round_to_kind(const Xmm& x, ElemKind kind, const Xmm& t0) {
  switch (kind) {
    case ElemKind::F32: return;
    case ElemKind::BF16: bf16_bits(x, x, t0, /*keep_high=*/true); return;
    case ElemKind::F16: {
      const Xmm h = x.isZMM() ? ymm_of(t0) : xmm_of(t0);
      c_.vcvtps2ph(h, x, 0);
      c_.vcvtph2ps(x, h);
      return;
    }
    default: throw std::runtime_error("round_to_kind of a non-float kind");
  }
}

void VecAsm::store(const Xbyak::RegExp& at, ElemKind kind, const Xmm& src, bool tail, const Xmm& t0) {
  if (tail && tail_ == 0) throw std::runtime_error("tail store without set_tail");
  if (wide_) {
    const Xbyak::Address m = c_.ptr[at];
    switch (kind) {
      case ElemKind::F32:
        if (tail) c_.vmovups(m | c_.k1, src);
        else c_.vmovups(m, src);
        return;
      case ElemKind::BF16:
        bf16_bits(src, src, t0);
        if (tail) c_.vpmovdw(m | c_.k1, src);
        else c_.vpmovdw(m, src);
        return;
      case ElemKind::F16:
        if (tail) c_.vcvtps2ph(m | c_.k1, src, 0);
        else c_.vcvtps2ph(m, src, 0);
        return;
      default: throw std::runtime_error("store of a non-float kind");
    }
  }
  const Xmm xs = xmm_of(src), xt = xmm_of(t0);
  switch (kind) {
    case ElemKind::F32:
      if (tail) c_.vmaskmovps(c_.ptr[at], Ymm(15), src);
      else c_.vmovups(c_.ptr[at], src);
      return;
    case ElemKind::BF16:
      bf16_bits(src, src, t0);
      c_.vextracti128(xt, Ymm(src.getIdx()), 1);
      c_.vpackusdw(xs, xs, xt);  // values <= 0xFFFF: unsigned saturation keeps them
      break;
    case ElemKind::F16:
      if (!tail) {
        c_.vcvtps2ph(c_.ptr[at], src, 0);
        return;
      }
      c_.vcvtps2ph(xs, src, 0);
      break;
    default: throw std::runtime_error("store of a non-float kind");
  }
  if (!tail) {
    c_.vmovdqu(c_.ptr[at], xs);
    return;
  }
  for (int j = 0; j < tail_; ++j) c_.vpextrw(c_.word[at + 2 * j], xs, static_cast<std::uint8_t>(j));
}

void VecAsm::store_scalar(const Xbyak::RegExp& at, ElemKind kind, const Xmm& src, const Xmm& tmp) {
  const Xmm xs = xmm_of(src), xt = xmm_of(tmp);
  switch (kind) {
    case ElemKind::F32: c_.vmovss(c_.dword[at], xs); return;
    case ElemKind::BF16:
      bf16_bits(xs, xs, xt);
      c_.vpextrw(c_.word[at], xs, 0);
      return;
    case ElemKind::F16:
      c_.vcvtps2ph(xt, xs, 0);
      c_.vpextrw(c_.word[at], xt, 0);
      return;
    default: throw std::runtime_error("store of a non-float kind");
  }
}

void VecAsm::round_even(const Xmm& dst, const Xmm& x) {
  if (x.isZMM()) c_.vrndscaleps(dst, x, 0);  // imm 0: round to nearest even
  else c_.vroundps(dst, x, 0);
}

void VecAsm::max_ieee(const Xmm& dst, const Xmm& a, const Xmm& b, const Xmm& t0, bool is_min) {
  // vmaxps returns its second operand when the lanes are equal (+0 vs -0) or either is
  // NaN. Taking both orders and AND-ing (max) / OR-ing (min) the bits picks +0 / -0 for
  // zeros of either sign and leaves every other lane as it is; NaN lanes are then set.
  if (is_min) {
    c_.vminps(dst, a, b);
    c_.vminps(t0, b, a);
    c_.vorps(dst, dst, t0);
  } else {
    c_.vmaxps(dst, a, b);
    c_.vmaxps(t0, b, a);
    c_.vandps(dst, dst, t0);
  }
  if (dst.isZMM()) {
    c_.vcmpps(c_.k2, a, b, kUnord);
    c_.vmovaps(dst | c_.k2, c(std::bit_cast<float>(0x7FC0'0000u)));
  } else {
    c_.vcmpps(t0, a, b, kUnord);
    c_.vorps(dst, dst, t0);  // all-ones lanes are a NaN
  }
}

void VecAsm::relu(const Xmm& dst, const Xmm& x, const Xmm& t0) {
  // Keep x where !(x <= 0) (x > 0 or NaN), else +0.
  if (x.isZMM()) {
    c_.vcmpps(c_.k2, x, c(0.0f), kNleUq);
    c_.vmovaps(dst | c_.k2 | c_.T_z, x);
  } else {
    c_.vcmpps(t0, x, c(0.0f), kNleUq);
    c_.vandps(dst, x, t0);
  }
}

void VecAsm::exp(const Xmm& dst, const Xmm& x, const Xmm& t0, const Xmm& t1) {
  // Clamp with the constant first: vmaxps/vminps return the second operand for NaN.
  c_.vmovaps(t0, c(-104.0f));
  c_.vmaxps(t0, t0, x);
  c_.vmovaps(t1, c(89.0f));
  c_.vminps(t0, t1, t0);
  // n = round(x log2 e); r = x - n ln2 (ln2 = C1 + C2, n * C1 exact).
  c_.vmulps(t1, t0, c(1.44269504088896341f));
  round_even(t1, t1);
  c_.vfnmadd231ps(t0, t1, c(0.693359375f));
  c_.vfnmadd231ps(t0, t1, c(-2.12194440e-4f));
  // e^r = 1 + r + r^2 P(r).
  c_.vmovaps(dst, c(1.9875691500e-4f));
  c_.vfmadd213ps(dst, t0, c(1.3981999507e-3f));
  c_.vfmadd213ps(dst, t0, c(8.3334519073e-3f));
  c_.vfmadd213ps(dst, t0, c(4.1665795894e-2f));
  c_.vfmadd213ps(dst, t0, c(1.6666665459e-1f));
  c_.vfmadd213ps(dst, t0, c(5.0000001201e-1f));
  c_.vmulps(dst, dst, t0);
  c_.vfmadd213ps(dst, t0, t0);
  c_.vaddps(dst, dst, c(1.0f));
  // Scale by 2^n as 2^n1 * 2^n2, n1 = n >> 1, n2 = n - n1 (both in [-76, 65]).
  c_.vcvtps2dq(t1, t1);
  c_.vpsrad(t0, t1, 1);
  c_.vpsubd(t1, t1, t0);
  c_.vpaddd(t0, t0, cb(127u));
  c_.vpslld(t0, t0, 23);
  c_.vmulps(dst, dst, t0);
  c_.vpaddd(t1, t1, cb(127u));
  c_.vpslld(t1, t1, 23);
  c_.vmulps(dst, dst, t1);
}

void VecAsm::log(const Xmm& dst, const Xmm& x, const Xmm& t0, const Xmm& t1, const Xmm& t2) {
  const VMask m = mask(t2.getIdx());
  // Subnormals: scale by 2^23 and take 23 off the exponent.
  c_.vmulps(t0, x, c(8388608.0f));
  cmp(m, x, c(1.17549435e-38f), kLtOq);
  blend(t0, m, x, t0);
  if (wide_) {
    c_.vmovaps(t1 | m.k | c_.T_z, c(23.0f));
  } else {
    c_.vandps(t1, t2, c(23.0f));
  }
  // frexp: t0 = mantissa in [0.5, 1), dst = exponent.
  c_.vpsrld(dst, t0, 23);
  c_.vandps(t0, t0, cb(0x007F'FFFFu));
  c_.vorps(t0, t0, cb(0x3F00'0000u));
  c_.vpsubd(dst, dst, cb(126u));
  c_.vcvtdq2ps(dst, dst);
  c_.vsubps(dst, dst, t1);
  // m < sqrt(1/2): e -= 1, f = 2m - 1; else f = m - 1.
  cmp(m, t0, c(0.707106781186547524f), kLtOq);
  if (wide_) {
    c_.vsubps(dst | m.k, dst, c(1.0f));
    c_.vaddps(t0 | m.k, t0, t0);
    c_.vsubps(t0, t0, c(1.0f));
  } else {
    c_.vandps(t1, t2, t0);
    c_.vandps(t2, t2, c(1.0f));
    c_.vsubps(dst, dst, t2);
    c_.vsubps(t0, t0, c(1.0f));
    c_.vaddps(t0, t0, t1);
  }
  // log(1 + f) = f - f^2/2 + f^3 P(f), plus e ln2 in two parts.
  c_.vmulps(t1, t0, t0);
  c_.vmovaps(t2, c(7.0376836292e-2f));
  c_.vfmadd213ps(t2, t0, c(-1.1514610310e-1f));
  c_.vfmadd213ps(t2, t0, c(1.1676998740e-1f));
  c_.vfmadd213ps(t2, t0, c(-1.2420140846e-1f));
  c_.vfmadd213ps(t2, t0, c(1.4249322787e-1f));
  c_.vfmadd213ps(t2, t0, c(-1.6668057665e-1f));
  c_.vfmadd213ps(t2, t0, c(2.0000714765e-1f));
  c_.vfmadd213ps(t2, t0, c(-2.4999993993e-1f));
  c_.vfmadd213ps(t2, t0, c(3.3333331174e-1f));
  c_.vmulps(t2, t2, t0);
  c_.vmulps(t2, t2, t1);
  c_.vfmadd231ps(t2, dst, c(-2.12194440e-4f));
  c_.vfmadd231ps(t2, t1, c(-0.5f));
  c_.vaddps(t0, t0, t2);
  c_.vfmadd231ps(t0, dst, c(0.693359375f));
  c_.vmovaps(dst, t0);
  // Special inputs: !(0 < x < inf) gives x (inf, NaN), then x < 0 NaN, x == 0 -inf.
  if (wide_) {
    c_.vcmpps(c_.k2, x, c(0.0f), kNgtUq);
    c_.vcmpps(c_.k3, x, c(std::bit_cast<float>(0x7F80'0000u)), kNltUq);
    c_.korw(c_.k2, c_.k2, c_.k3);
    c_.vmovaps(dst | c_.k2, x);
    c_.vcmpps(c_.k2, x, c(0.0f), kLtOq);
    c_.vmovaps(dst | c_.k2, c(std::bit_cast<float>(0x7FC0'0000u)));
    c_.vcmpps(c_.k2, x, c(0.0f), kEqOq);
    c_.vmovaps(dst | c_.k2, c(std::bit_cast<float>(0xFF80'0000u)));
  } else {
    c_.vcmpps(t1, x, c(0.0f), kNgtUq);
    c_.vcmpps(t2, x, c(std::bit_cast<float>(0x7F80'0000u)), kNltUq);
    c_.vorps(t1, t1, t2);
    c_.vblendvps(dst, dst, x, t1);
    c_.vcmpps(t1, x, c(0.0f), kLtOq);
    c_.vblendvps(dst, dst, c(std::bit_cast<float>(0x7FC0'0000u)), t1);
    c_.vcmpps(t1, x, c(0.0f), kEqOq);
    c_.vblendvps(dst, dst, c(std::bit_cast<float>(0xFF80'0000u)), t1);
  }
}

void VecAsm::tanh(const Xmm& dst, const Xmm& x, const Xmm& t0, const Xmm& t1, const Xmm& t2) {
  // Large |x|: 1 - 2 / (e^2|x| + 1) with the sign of x.
  c_.vandps(t0, x, cb(0x7FFF'FFFFu));
  c_.vaddps(t1, t0, t0);
  exp(t1, t1, t2, dst);
  c_.vaddps(t1, t1, c(1.0f));
  c_.vmovaps(t2, c(2.0f));
  c_.vdivps(t2, t2, t1);
  c_.vmovaps(t1, c(1.0f));
  c_.vsubps(t1, t1, t2);
  c_.vandps(t2, x, cb(0x8000'0000u));
  c_.vorps(t1, t1, t2);
  // Small |x|: x (1 + z P(z)), z = x^2 (keeps the sign of -0).
  c_.vmulps(t2, x, x);
  c_.vmovaps(dst, c(-5.70498872745e-3f));
  c_.vfmadd213ps(dst, t2, c(2.06390887954e-2f));
  c_.vfmadd213ps(dst, t2, c(-5.37397155531e-2f));
  c_.vfmadd213ps(dst, t2, c(1.33314422036e-1f));
  c_.vfmadd213ps(dst, t2, c(-3.33332819422e-1f));
  c_.vfmadd213ps(dst, t2, c(1.0f));
  c_.vmulps(dst, dst, x);
  const VMask m = mask(t0.getIdx());
  cmp(m, t0, c(0.625f), kGeOq);
  blend(dst, m, dst, t1);
}

void VecAsm::sigmoid(const Xmm& dst, const Xmm& x, const Xmm& t0, const Xmm& t1, const Xmm& t2, bool silu) {
  c_.vorps(t0, x, cb(0x8000'0000u));  // -|x|
  exp(t0, t0, t1, t2);                 // e = e^-|x| in (0, 1]
  c_.vaddps(t1, t0, c(1.0f));
  const VMask m = mask(t2.getIdx());
  cmp(m, x, c(0.0f), kGeOq);  // NaN: false, and e is NaN
  blend(dst, m, t0, c(1.0f));
  if (silu) c_.vmulps(dst, dst, x);
  c_.vdivps(dst, dst, t1);
}

void VecAsm::gelu(const Xmm& dst, const Xmm& x, const Xmm& t0, const Xmm& t1, const Xmm& t2, const Xmm& t3) {
  // 1/sqrt2 = kHi + kLo.
  constexpr float kHi = 0.707106769f;
  constexpr float kLo = 1.21016172e-08f;
  // ax = min(|x|, 30) (NaN kept); a = ax/sqrt2 rounded, a_lo its error (t1).
  c_.vandps(t0, x, cb(0x7FFF'FFFFu));
  c_.vmovaps(t3, c(30.0f));
  c_.vminps(t0, t3, t0);
  c_.vmulps(t1, t0, c(kLo));
  c_.vmulps(t2, t0, c(kHi));
  c_.vmovaps(t3, t2);
  c_.vfmsub231ps(t3, t0, c(kHi));  // t3 = ax*kHi - a, exact
  c_.vaddps(t1, t1, t3);
  c_.vmovaps(t0, t2);  // a
  // erfcx(a) = (1 + p(q)) / (1 + 2a), q = (a - 2) / (a + 2).
  c_.vsubps(t2, t0, c(2.0f));
  c_.vaddps(t3, t0, c(2.0f));
  c_.vdivps(t2, t2, t3);
  static constexpr std::uint32_t kP[] = {
      0x38c8cf91u, 0xb98129edu, 0xbaa87e16u, 0x3a9606e9u, 0x3c0d4bb5u, 0xbc030733u,
      0xbd5dfcf7u, 0x3e27fbd8u, 0xbe2a0465u, 0xbdbdfadeu, 0x3e8dd01du};
  c_.vmovaps(dst, cb(kP[0]));
  for (std::size_t i = 1; i < sizeof(kP) / sizeof(kP[0]); ++i) c_.vfmadd213ps(dst, t2, cb(kP[i]));
  c_.vaddps(dst, dst, c(1.0f));
  c_.vaddps(t3, t0, t0);
  c_.vaddps(t3, t3, c(1.0f));
  c_.vdivps(dst, dst, t3);
  // erfc(a + a_lo) ~ exp(-a^2) (r - 2/sqrt(pi) a_lo); exp(-a^2) = exp(-s)(1 - s_lo).
  c_.vfmadd231ps(dst, t1, c(-1.12837917f));
  c_.vmulps(t2, t0, t0);
  c_.vmovaps(t3, t0);
  c_.vfmsub213ps(t3, t0, t2);  // s_lo = a*a - s, exact
  c_.vfnmadd231ps(dst, dst, t3);
  c_.vxorps(t2, t2, cb(0x8000'0000u));
  exp(t2, t2, t0, t1);
  c_.vmulps(dst, dst, t2);
  c_.vmulps(dst, dst, c(0.5f));  // Phi(-|x|) = erfc(a) / 2
  c_.vmovaps(t0, c(1.0f));
  c_.vsubps(t0, t0, dst);  // Phi(|x|)
  const VMask m = mask(t1.getIdx());
  cmp(m, x, c(0.0f), kLtOq);
  blend(dst, m, t0, dst);
  c_.vmulps(dst, dst, x);
}

void VecAsm::horizontal(Horizontal how, int v, int t, int t2, int t3) {
  auto combine = [&](const Xmm& a, const Xmm& b) {
    switch (how) {
      case Horizontal::Sum: c_.vaddps(a, a, b); break;
      case Horizontal::Max: c_.vmaxps(a, a, b); break;
      case Horizontal::MaxIeee: {
        const bool y = a.isYMM();
        const Xmm d = y ? Xmm(Ymm(t2)) : Xmm(t2), tt = y ? Xmm(Ymm(t3)) : Xmm(t3);
        max_ieee(d, a, b, tt);
        c_.vmovaps(a, d);
        break;
      }
    }
  };
  if (wide_) {
    c_.vextractf64x4(Ymm(t), Zmm(v), 1);
    combine(Ymm(v), Ymm(t));
  }
  c_.vextractf128(Xmm(t), Ymm(v), 1);
  combine(Xmm(v), Xmm(t));
  c_.vmovhlps(Xmm(t), Xmm(t), Xmm(v));
  combine(Xmm(v), Xmm(t));
  c_.vmovshdup(Xmm(t), Xmm(v));
  combine(Xmm(v), Xmm(t));
}

}  // namespace ternjit::targets::x86
