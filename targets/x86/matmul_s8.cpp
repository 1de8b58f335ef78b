// SPDX-License-Identifier: Apache-2.0
// matmul_s8.cpp - the int8 weight-gradient matmul (matmul.h, Int8MatMulKernel): exact int32 sums, f32 outer-scale epilogue, streaming stores.
//
// C[k, n] = (f32(S[k, n]) [* u[k]]) * t[n], S[k, n] = sum_m A[m, k] * B[n, m], A i8 [M, K],
// B i8 [N, M] (what autodiff's int8_dw weight gradient computes: A the forward's int8
// activations, B the incoming gradient quantized per output column).
// Packing, per call (A and B are small next to C: M is the batch of rows): the
// contraction m is cut into groups of D (4 for vpdpbusd, 2 for vpmaddwd; the last one
// zero-padded); A becomes ap[k][group] (one dword of D bytes or words per row k: the
// broadcast operand), B becomes bp[group][n][D] (the vector operand: 16 or 8 columns per
// vector), columns padded to a whole vector.
//   avx512_vnni (and amx): vpdpbusd multiplies u8 by s8, so A is packed as A + 128 (u8)
//     and 128 * sum_m B[n, m] is subtracted from each column at the end. The hardware
//     adds without saturation, so every partial sum is exact mod 2^32 and the result is
//     S exactly whenever S fits in int32 (the IR's i32 matmul wraps the same way).
//   avx2, avx_vnni, avx512: vpmaddwd on sign-extended int16 pairs (each pair sum
//     <= 2 * 128 * 128, exact), accumulated with vpaddd.
// Micro-tile: kRows rows k (broadcasts) x NV vectors of columns, all of M in registers
// (the full AVX-512 VNNI tile, 4 x 64, is an Xbyak loop: emit_ukr4x4),
// then the epilogue: cvtdq2ps, the u[k] multiply, the t[n] multiply (one f32 rounding
// each, the interpreter's order: bit-exact), stored with vmovntps when C is large and
// its rows are vector-aligned (C is written once: no read-for-ownership), else plain;
// the column tail under a mask. Columns are swept in blocks whose packed B stays in L2.
// Packing, tails, the epilogue and the AVX2 path are compiled C++ with per-function
// target attributes; the hot full tile is generated (GCC's register allocation of its 16
// accumulators added copies to every iteration).
#include <algorithm>
#include <cstring>
#include <vector>

#include "targets/x86/intrinsics.h"
#include "targets/x86/jit_code.h"
#include "targets/x86/matmul.h"

namespace ternjit::targets::x86 {

namespace {

constexpr std::int64_t kRows = 4;                     // rows k per micro-tile
constexpr std::int64_t kStreamBytes = std::int64_t{4} << 20;
constexpr std::int64_t kBlockBytes = std::int64_t{192} << 10;  // packed B per column block

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

struct Packed {
  std::int64_t groups = 0;  // ceil(M / D)
  std::int64_t npad = 0;    // N rounded up to a vector
  std::vector<std::int32_t> ap;   // [K][groups] dwords
  std::vector<std::int32_t> bp;   // [groups][npad] dwords
  std::vector<std::int32_t> corr; // [npad]: 128 * sum_m B[n, m] (vpdpbusd only)
};

// Packs for vpdpbusd (D = 4 bytes: A + 128 as u8, B as s8) or vpmaddwd (D = 2 int16).
void pack(const Int8MatMulProblem& p, bool vnni, int vl, const std::int8_t* a, const std::int8_t* b, Packed& out) {
  const std::int64_t d = vnni ? 4 : 2;
  out.groups = ceil_div(p.M, d);
  out.npad = ceil_div(p.N, vl) * vl;
  out.ap.assign(static_cast<std::size_t>(p.K * out.groups), 0);
  out.bp.assign(static_cast<std::size_t>(out.groups * out.npad), 0);
  if (vnni) {
    // A: four rows' bytes per dword, + 128 (padding rows: 128, i.e. A = 0).
    for (std::int64_t g = 0; p.a_km && g < out.groups; ++g) {  // At [K, M]: row k's bytes 4g .. 4g + 3
      std::int32_t* dst = out.ap.data() + g;
      for (std::int64_t k = 0; k < p.K; ++k) {
        std::uint32_t dw = 0;
        for (std::int64_t j = 0; j < 4; ++j)
          dw |= static_cast<std::uint32_t>(g * 4 + j < p.M ? static_cast<std::uint8_t>(a[k * p.M + g * 4 + j] + 128) : 128)
                << (8 * j);
        dst[k * out.groups] = static_cast<std::int32_t>(dw);
      }
    }
    for (std::int64_t g = 0; !p.a_km && g < out.groups; ++g) {
      const std::int8_t* rows[4];
      for (std::int64_t j = 0; j < 4; ++j) rows[j] = g * 4 + j < p.M ? a + (g * 4 + j) * p.K : nullptr;
      std::int32_t* dst = out.ap.data() + g;
      for (std::int64_t k = 0; k < p.K; ++k) {
        std::uint32_t dw = 0;
        for (std::int64_t j = 0; j < 4; ++j)
          dw |= static_cast<std::uint32_t>(rows[j] ? static_cast<std::uint8_t>(rows[j][k] + 128) : 128) << (8 * j);
        dst[k * out.groups] = static_cast<std::int32_t>(dw);
      }
    }
    // B: row n's bytes m = 4g .. 4g + 3 are one dword (zero past M); the correction is
    // 128 times the row's sum, mod 2^32 as the kernel's sums.
    out.corr.assign(static_cast<std::size_t>(out.npad), 0);
    const std::int64_t full = p.M / 4;
    for (std::int64_t n = 0; n < p.N; ++n) {
      const std::int8_t* row = b + n * p.M;
      std::uint32_t s = 0;
      for (std::int64_t m = 0; m < p.M; ++m) s += static_cast<std::uint32_t>(static_cast<std::int32_t>(row[m]));
      out.corr[static_cast<std::size_t>(n)] = static_cast<std::int32_t>(s * 128u);
      std::int32_t* dst = out.bp.data() + n;
      for (std::int64_t g = 0; g < full; ++g) std::memcpy(dst + g * out.npad, row + 4 * g, 4);
      if (full < out.groups) {
        std::uint8_t tail[4] = {0, 0, 0, 0};
        std::memcpy(tail, row + 4 * full, static_cast<std::size_t>(p.M - 4 * full));
        std::memcpy(dst + full * out.npad, tail, 4);
      }
    }
    return;
  }
  for (std::int64_t g = 0; g < out.groups; ++g)
    for (std::int64_t j = 0; j < d; ++j) {
      const std::int64_t m = g * d + j;
      for (std::int64_t k = 0; k < p.K; ++k) {
        auto* dw = reinterpret_cast<std::uint8_t*>(&out.ap[static_cast<std::size_t>(k * out.groups + g)]);
        const std::int16_t v = m < p.M ? a[p.a_km ? k * p.M + m : m * p.K + k] : 0;
        std::memcpy(dw + 2 * j, &v, 2);
      }
      if (m >= p.M) continue;  // B's padding stays 0: padded terms add nothing
      for (std::int64_t n = 0; n < p.N; ++n) {
        auto* dw = reinterpret_cast<std::uint8_t*>(&out.bp[static_cast<std::size_t>(g * out.npad + n)]);
        const std::int16_t v = b[n * p.M + m];
        std::memcpy(dw + 2 * j, &v, 2);
      }
    }
}

// The full 4 x 64 tile's multiply-adds over every group, generated (Xbyak): GCC keeps
// the 16 accumulators in registers only with register copies in the loop (a third of
// its uops, measured); this loop is 4 loads, 4 broadcasts and 16 vpdpbusd per group.
// ukr(a_row0, a_stride_bytes, b, b_stride_bytes, groups >= 1, out[16][16] int32).
using Ukr4x4 = void (*)(const std::int32_t* a, std::int64_t a_stride, const std::int32_t* b, std::int64_t b_stride,
                        std::int64_t groups, std::int32_t* out);

void emit_ukr4x4(JitCode& c) {
  using namespace Xbyak::util;
  for (int i = 0; i < 16; ++i) c.vpxord(Xbyak::Zmm(i), Xbyak::Zmm(i), Xbyak::Zmm(i));
  c.mov(r11, rdi);
  c.add(r11, rsi);                  // row 1
  c.lea(r10, c.ptr[rdi + rsi * 2]); // row 2
  c.lea(rax, c.ptr[r11 + rsi * 2]); // row 3
  c.xor_(rsi, rsi);                 // byte offset of the group
  Xbyak::Label loop;
  c.L(loop);
  for (int v = 0; v < 4; ++v) c.vmovdqu32(Xbyak::Zmm(16 + v), c.ptr[rdx + v * 64]);
  const Xbyak::Reg64 rows[4] = {rdi, r11, r10, rax};
  for (int r = 0; r < 4; ++r) {
    c.vpbroadcastd(Xbyak::Zmm(20 + r), c.ptr[rows[r] + rsi]);
    for (int v = 0; v < 4; ++v) c.vpdpbusd(Xbyak::Zmm(r * 4 + v), Xbyak::Zmm(20 + r), Xbyak::Zmm(16 + v));
  }
  c.add(rdx, rcx);
  c.add(rsi, 4);
  c.dec(r8);
  c.jnz(loop);
  for (int i = 0; i < 16; ++i) c.vmovdqa32(c.ptr[r9 + i * 64], Xbyak::Zmm(i));
  c.vzeroupper();
  c.ret();
}

struct Args {
  const Int8MatMulProblem* p;
  Ukr4x4 ukr = nullptr;  // AVX-512 VNNI: the generated full tile
  const Packed* pk;
  const float* u;
  const float* t;
  float* c;
  bool stream;
};

// ------------------------------------------------------------ AVX-512 VNNI

#define TJ_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")))

template <int R, int NV>
TJ_AVX512 inline void tile512(const Args& x, std::int64_t k0, std::int64_t n0, std::int64_t ncols) {
  const Packed& pk = *x.pk;
  __m512i acc[R][NV];
  #pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
    #pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_si512();
  const std::int32_t* ap = pk.ap.data() + k0 * pk.groups;
  const std::int32_t* bp = pk.bp.data() + n0;
  const std::int64_t groups = pk.groups, npad = pk.npad;
  if constexpr (R == 4 && NV == 4) {
    alignas(64) std::int32_t out[16][16];
    x.ukr(ap, groups * 4, bp, npad * 4, groups, &out[0][0]);
    #pragma GCC unroll 16
    for (int r = 0; r < 4; ++r)
      #pragma GCC unroll 16
      for (int v = 0; v < 4; ++v) acc[r][v] = _mm512_load_si512(out[r * 4 + v]);
  } else {
    for (std::int64_t g = 0; g < groups; ++g) {
      __m512i bv[NV];
      #pragma GCC unroll 16
      for (int v = 0; v < NV; ++v) bv[v] = _mm512_loadu_si512(bp + g * npad + 16 * v);
      #pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        const __m512i av = _mm512_set1_epi32(ap[r * groups + g]);
        #pragma GCC unroll 16
        for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_dpbusd_epi32(acc[r][v], av, bv[v]);
      }
    }
  }
  const std::int64_t N = x.p->N;
  #pragma GCC unroll 16
  for (int v = 0; v < NV; ++v) {
    const std::int64_t n = n0 + 16 * v;
    const std::int64_t left = std::min<std::int64_t>(16, ncols - 16 * v);
    if (left <= 0) break;
    const __mmask16 mask = left == 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << left) - 1);
    const __m512i corr = _mm512_loadu_si512(pk.corr.data() + n);
    const __m512 tv = _mm512_maskz_loadu_ps(mask, x.t + n);
    #pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      __m512 y = _mm512_cvtepi32_ps(_mm512_sub_epi32(acc[r][v], corr));
      if (x.p->row_scale) y = _mm512_mul_ps(y, _mm512_set1_ps(x.u[k0 + r]));
      y = _mm512_mul_ps(y, tv);
      float* dst = x.c + (k0 + r) * N + n;
      if (left < 16) _mm512_mask_storeu_ps(dst, mask, y);
      else if (x.stream) _mm512_stream_ps(dst, y);
      else _mm512_storeu_ps(dst, y);
    }
  }
}

template <int R>
TJ_AVX512 void rows512(const Args& x, std::int64_t k0, std::int64_t nb0, std::int64_t nb1) {
  std::int64_t n = nb0;
  for (; n + 64 <= nb1; n += 64) tile512<R, 4>(x, k0, n, 64);
  for (; n < nb1; n += 16) tile512<R, 1>(x, k0, n, std::min<std::int64_t>(16, nb1 - n));
}

TJ_AVX512 void run512(const Args& x, std::int64_t k_begin, std::int64_t k_end, std::int64_t nblock) {
  for (std::int64_t nb = 0; nb < x.p->N; nb += nblock) {
    const std::int64_t nb1 = std::min(x.p->N, nb + nblock);
    std::int64_t k = k_begin;
    for (; k + kRows <= k_end; k += kRows) rows512<kRows>(x, k, nb, nb1);
    for (; k < k_end; ++k) rows512<1>(x, k, nb, nb1);
  }
  _mm_sfence();
}

// ------------------------------------------------------------ AVX2 (vpmaddwd)

#define TJ_AVX2 __attribute__((target("avx2,fma")))

template <int R, int NV>
TJ_AVX2 inline void tile256(const Args& x, std::int64_t k0, std::int64_t n0, std::int64_t ncols) {
  const Packed& pk = *x.pk;
  __m256i acc[R][NV];
  #pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
    #pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm256_setzero_si256();
  const std::int32_t* ap = pk.ap.data() + k0 * pk.groups;
  const std::int32_t* bp = pk.bp.data() + n0;
  for (std::int64_t g = 0; g < pk.groups; ++g) {
    __m256i bv[NV];
    #pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) bv[v] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bp + g * pk.npad + 8 * v));
    #pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m256i av = _mm256_set1_epi32(ap[r * pk.groups + g]);
      #pragma GCC unroll 16
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm256_add_epi32(acc[r][v], _mm256_madd_epi16(av, bv[v]));
    }
  }
  const std::int64_t N = x.p->N;
  #pragma GCC unroll 16
  for (int v = 0; v < NV; ++v) {
    const std::int64_t n = n0 + 8 * v;
    const std::int64_t left = std::min<std::int64_t>(8, ncols - 8 * v);
    if (left <= 0) break;
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(left)), lane);
    const __m256 tv = _mm256_maskload_ps(x.t + n, mask);
    #pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      __m256 y = _mm256_cvtepi32_ps(acc[r][v]);
      if (x.p->row_scale) y = _mm256_mul_ps(y, _mm256_set1_ps(x.u[k0 + r]));
      y = _mm256_mul_ps(y, tv);
      float* dst = x.c + (k0 + r) * N + n;
      if (left < 8) _mm256_maskstore_ps(dst, mask, y);
      else if (x.stream) _mm256_stream_ps(dst, y);
      else _mm256_storeu_ps(dst, y);
    }
  }
}

template <int R>
TJ_AVX2 void rows256(const Args& x, std::int64_t k0, std::int64_t nb0, std::int64_t nb1) {
  std::int64_t n = nb0;
  for (; n + 16 <= nb1; n += 16) tile256<R, 2>(x, k0, n, 16);
  for (; n < nb1; n += 8) tile256<R, 1>(x, k0, n, std::min<std::int64_t>(8, nb1 - n));
}

TJ_AVX2 void run256(const Args& x, std::int64_t k_begin, std::int64_t k_end, std::int64_t nblock) {
  for (std::int64_t nb = 0; nb < x.p->N; nb += nblock) {
    const std::int64_t nb1 = std::min(x.p->N, nb + nblock);
    std::int64_t k = k_begin;
    for (; k + kRows <= k_end; k += kRows) rows256<kRows>(x, k, nb, nb1);
    for (; k < k_end; ++k) rows256<1>(x, k, nb, nb1);
  }
  _mm_sfence();
}

}  // namespace

struct Int8MatMulKernel::Impl {
  Int8MatMulProblem p;
  Isa isa = Isa::Avx2;
  bool vnni = false;  // vpdpbusd (else vpmaddwd)
  int vl = 8;         // int32 lanes per vector
  JitCode code{4096};
  Ukr4x4 ukr = nullptr;
};

Int8MatMulKernel::Int8MatMulKernel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Int8MatMulKernel::~Int8MatMulKernel() = default;
const Int8MatMulProblem& Int8MatMulKernel::problem() const { return impl_->p; }

Result<std::unique_ptr<Int8MatMulKernel>> Int8MatMulKernel::create(const Int8MatMulProblem& p, Isa isa,
                                                                   bool allow_foreign_isa) {
  if (p.M < 1 || p.K < 1 || p.N < 1)
    return make_error(ErrorCode::InvalidInput, "int8 matmul kernel needs M, K, N >= 1; got M=" + std::to_string(p.M) +
                                                   " K=" + std::to_string(p.K) + " N=" + std::to_string(p.N));
  if (!allow_foreign_isa && !host_isas().supports(isa))
    return make_error(ErrorCode::Unavailable, "this CPU cannot run x86 code path '" + std::string(isa_name(isa)) + "'");
  auto impl = std::make_unique<Impl>();
  impl->p = p;
  impl->isa = isa;
  impl->vnni = isa == Isa::Avx512Vnni || isa == Isa::Amx;
  impl->vl = impl->vnni ? 16 : 8;
  if (impl->vnni) {
    Impl* raw = impl.get();
    TERNJIT_TRY_VOID(emit_guarded("matmul s8", [raw] {
      emit_ukr4x4(raw->code);
      raw->ukr = raw->code.finalize<Ukr4x4>();
    }));
  }
  return std::unique_ptr<Int8MatMulKernel>(new Int8MatMulKernel(std::move(impl)));
}

void Int8MatMulKernel::run(const std::int8_t* a, const std::int8_t* b, const float* u, const float* t, float* c,
                           const Parallel& parallel) const {
  const Int8MatMulProblem& p = impl_->p;
  Packed pk;
  pack(p, impl_->vnni, impl_->vl, a, b, pk);
  const std::int64_t vbytes = impl_->vl * 4;
  const bool aligned = reinterpret_cast<std::uintptr_t>(c) % static_cast<std::uintptr_t>(vbytes) == 0 &&
                       (p.N * 4) % vbytes == 0;
  Args x{&p, impl_->ukr, &pk, u, t, c, aligned && p.K * p.N * 4 >= kStreamBytes};
  // Column blocks whose packed B (groups * D bytes per column) stays in L2.
  const std::int64_t per_col = pk.groups * 4;
  const std::int64_t nblock = std::max<std::int64_t>(64, kBlockBytes / per_col / 64 * 64);
  // Rows k split into chunks of whole micro-tiles over the pool.
  const std::int64_t tiles = ceil_div(p.K, kRows);
  const std::int64_t chunks = parallel.threads <= 1 ? 1 : std::min<std::int64_t>(tiles, std::int64_t{4} * parallel.threads);
  const bool vnni = impl_->vnni;
  parallel.for_each(chunks, [&](std::int64_t i) {
    const std::int64_t k0 = std::min(p.K, tiles * i / chunks * kRows);
    const std::int64_t k1 = std::min(p.K, tiles * (i + 1) / chunks * kRows);
    if (vnni) run512(x, k0, k1, nblock);
    else run256(x, k0, k1, nblock);
  });
}

std::string Int8MatMulKernel::describe() const {
  const Int8MatMulProblem& p = impl_->p;
  return "matmul s8 M=" + std::to_string(p.M) + " K=" + std::to_string(p.K) + " N=" + std::to_string(p.N) +
         " dot=" + (impl_->vnni ? "vpdpbusd" : "vpmaddwd") + " u=" + (p.row_scale ? "yes" : "no") +
         " a=" + (p.a_km ? "km" : "mk") +
         " isa=" + std::string(isa_name(impl_->isa));
}

}  // namespace ternjit::targets::x86
