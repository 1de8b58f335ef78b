// SPDX-License-Identifier: Apache-2.0
// dense.cpp - the dense `matmul(a f32 [M, K], transpose(p))` with p a load-time [N, K] f16/bf16
// table read as stored (the output head `h @ transpose(token_embd)`; plan_internal.h).
//
// C[m, n] = sum_k A[m, k] * P[n, k]: every result is a dot product of a row of A and a row
// of P, so P is streamed once, row by row, in its own 2-byte kind and widened in registers
// (vcvtph2ps for f16, a 16-bit shift for bf16): no f32 or transposed copy of the table.
// Threads split N into chunks of rows of P. A tile is MR rows of A by NR rows of P with
// MR * NR vector accumulators over K (M = 1: 1 x 1, one row of P at a time, a streaming GEMV;
// larger M: 4 x 4 on 512-bit vectors, 2 x 4 on 256-bit ones, so a row of P read from cache feeds MR
// rows of A; M >= 16: blocks of 256 rows of P widened to f32 in a per-thread buffer and run
// through the register-blocked GEMM of matmul.h, B given transposed). The K tail is read through a masked load (512-bit) or a zero-padded copy of the
// last vector (256-bit); lanes are summed at the end. Numerics: each result is an f32 sum of
// K f32-rounded FMA terms in some order, within (gamma_K + u) * sum_k |a_mk| |p_nk| of the
// reference's exact-then-rounded sum (tests/unit/x86/dense_test.cpp); no term is skipped, so
// NaN and Inf propagate. The tiles' fixed-count loops are unrolled by pragma: GCC -O2 leaves
// an 8-iteration loop over arrays of vectors rolled, and the accumulators then live in memory
// (the M = 1 GEMV ran at 0.65 of a streaming read instead of ~0.8).
#include "targets/x86/intrinsics.h"

#include <algorithm>
#include <cstring>

#include "ir/numeric.h"
#include "targets/x86/matmul.h"
#include "targets/x86/plan_internal.h"

namespace ternjit::targets::x86 {
namespace {

// ---------------------------------------------------------------- 512-bit path
template <ElemKind P>
__attribute__((target("avx512f,avx512bw,avx512vl,f16c,fma"))) inline __m512 load_p512(const std::uint16_t* p,
                                                                                    __mmask16 m) {
  const __m256i h = _mm256_maskz_loadu_epi16(m, p);
  if constexpr (P == ElemKind::F16) return _mm512_cvtph_ps(h);
  else return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

template <ElemKind P, int MR, int NR>
__attribute__((target("avx512f,avx512bw,avx512vl,f16c,fma"))) void tile512(const float* a, std::int64_t lda,
                                                                          const std::uint16_t* p, std::int64_t K,
                                                                          float* c, std::int64_t ldc, int mr, int nr) {
  __m512 acc[MR][NR];
  _Pragma("GCC unroll 16")
  for (int i = 0; i < MR; ++i)
    _Pragma("GCC unroll 16")
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_setzero_ps();
  const std::uint16_t* prow[NR];
  const float* arow[MR];
  _Pragma("GCC unroll 16")
  for (int j = 0; j < NR; ++j) prow[j] = p + (j < nr ? j : 0) * K;
  _Pragma("GCC unroll 16")
  for (int i = 0; i < MR; ++i) arow[i] = a + (i < mr ? i : 0) * lda;
  const std::int64_t kv = K / 16 * 16;
  for (std::int64_t k = 0; k < kv; k += 16) {  // whole vectors: plain loads
    __m512 pv[NR];
    _Pragma("GCC unroll 16")
    for (int j = 0; j < NR; ++j) {
      const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(prow[j] + k));
      if constexpr (P == ElemKind::F16) pv[j] = _mm512_cvtph_ps(h);
      else pv[j] = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
    _Pragma("GCC unroll 16")
    for (int i = 0; i < MR; ++i) {
      const __m512 av = _mm512_loadu_ps(arow[i] + k);
      _Pragma("GCC unroll 16")
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_fmadd_ps(av, pv[j], acc[i][j]);
    }
  }
  for (std::int64_t k = kv; k < K; k += 16) {  // the tail: masked loads (zero lanes add nothing)
    const __mmask16 m = static_cast<__mmask16>((1u << (K - k)) - 1);
    __m512 pv[NR];
    _Pragma("GCC unroll 16")
    for (int j = 0; j < NR; ++j) pv[j] = load_p512<P>(p + (j < nr ? j : 0) * K + k, m);
    _Pragma("GCC unroll 16")
    for (int i = 0; i < MR; ++i) {
      const __m512 av = _mm512_maskz_loadu_ps(m, a + (i < mr ? i : 0) * lda + k);
      _Pragma("GCC unroll 16")
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_fmadd_ps(av, pv[j], acc[i][j]);
    }
  }
  // Every accumulator is reduced under compile-time bounds, then the mr x nr results are
  // stored: indexing acc by the run-time mr, nr would keep it in memory through the loop.
  float r[MR][NR];
  _Pragma("GCC unroll 16") for (int i = 0; i < MR; ++i)
    _Pragma("GCC unroll 16") for (int j = 0; j < NR; ++j) r[i][j] = _mm512_reduce_add_ps(acc[i][j]);
  for (int i = 0; i < mr; ++i)
    for (int j = 0; j < nr; ++j) c[i * ldc + j] = r[i][j];
}

// ---------------------------------------------------------------- 256-bit path
template <ElemKind P>
__attribute__((target("avx2,f16c,fma"))) inline __m256 load_p256(const std::uint16_t* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  if constexpr (P == ElemKind::F16) return _mm256_cvtph_ps(h);
  else return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

__attribute__((target("avx2,f16c,fma"))) inline float hsum256(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_shuffle_ps(t, t, 1)));
}

template <ElemKind P, int MR, int NR>
__attribute__((target("avx2,f16c,fma"))) void tile256(const float* a, std::int64_t lda, const std::uint16_t* p,
                                                        std::int64_t K, float* c, std::int64_t ldc, int mr, int nr) {
  __m256 acc[MR][NR];
  _Pragma("GCC unroll 16")
  for (int i = 0; i < MR; ++i)
    _Pragma("GCC unroll 16")
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_setzero_ps();
  const std::int64_t kv = K / 8 * 8;
  for (std::int64_t k = 0; k < kv; k += 8) {
    __m256 pv[NR];
    _Pragma("GCC unroll 16")
    for (int j = 0; j < NR; ++j) pv[j] = load_p256<P>(p + (j < nr ? j : 0) * K + k);
    _Pragma("GCC unroll 16")
    for (int i = 0; i < MR; ++i) {
      const __m256 av = _mm256_loadu_ps(a + (i < mr ? i : 0) * lda + k);
      _Pragma("GCC unroll 16")
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_fmadd_ps(av, pv[j], acc[i][j]);
    }
  }
  if (kv < K) {  // the tail through zero-padded copies (zero lanes add +0: the sum is unchanged)
    alignas(32) std::uint16_t pt[NR][8] = {};
    alignas(32) float at[MR][8] = {};
    for (int j = 0; j < nr; ++j) std::memcpy(pt[j], p + j * K + kv, static_cast<std::size_t>(K - kv) * 2);
    for (int i = 0; i < mr; ++i) std::memcpy(at[i], a + i * lda + kv, static_cast<std::size_t>(K - kv) * 4);
    _Pragma("GCC unroll 16")
    for (int i = 0; i < MR; ++i) {
      const __m256 av = _mm256_load_ps(at[i]);
      _Pragma("GCC unroll 16")
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_fmadd_ps(av, load_p256<P>(pt[j]), acc[i][j]);
    }
  }
  float r[MR][NR];  // as tile512: reduced under compile-time bounds
  _Pragma("GCC unroll 16") for (int i = 0; i < MR; ++i)
    _Pragma("GCC unroll 16") for (int j = 0; j < NR; ++j) r[i][j] = hsum256(acc[i][j]);
  for (int i = 0; i < mr; ++i)
    for (int j = 0; j < nr; ++j) c[i * ldc + j] = r[i][j];
}

using TileFn = void (*)(const float*, std::int64_t, const std::uint16_t*, std::int64_t, float*, std::int64_t, int, int);

struct Tiles {
  TileFn fn;
  int mr, nr;
};

template <ElemKind P>
Tiles pick(bool wide, std::int64_t M) {
  // M = 1: one row of P at a time (one sequential stream; 8 rows at a time read 8 streams
  // and ran at ~0.65 of a streaming read of the 2B4T head from its file mapping, one row at
  // ~0.85, measured on Zen 4). One accumulator per result, as in the larger tiles: every M
  // sums each result in the same order, so a decode step's logits equal the same row of a
  // prefill's bit for bit (M < kGemmRows).
  if (wide) return M == 1 ? Tiles{&tile512<P, 1, 1>, 1, 1} : Tiles{&tile512<P, 4, 4>, 4, 4};
  return M == 1 ? Tiles{&tile256<P, 1, 1>, 1, 1} : Tiles{&tile256<P, 2, 4>, 2, 4};
}

// Rows [n0, n0 + nb) of P widened to f32 (exact) into `dst` [nb, K].
__attribute__((target("avx2,f16c,fma"))) void widen_rows(ElemKind kind, const std::uint16_t* p, std::int64_t n,
                                                          float* dst) {
  std::int64_t i = 0;
  if (kind == ElemKind::F16) {
    for (; i + 8 <= n; i += 8)
      _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i))));
    for (; i < n; ++i) dst[i] = ir::f16_bits_to_f32(p[i]);
  } else {
    for (; i + 8 <= n; i += 8)
      _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(
                                    _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i))), 16)));
    for (; i < n; ++i) dst[i] = ir::bf16_bits_to_f32(p[i]);
  }
}

// M >= kGemmRows: each task widens a block of kGemmCols rows of P to f32 (in a thread's
// buffer, L2-sized) and runs the register-blocked GEMM (matmul.h, B given as Bt, packed per
// call) on it, so a widened row feeds all M rows of A at the GEMM's speed.
constexpr std::int64_t kGemmRows = 16, kGemmCols = 256;

class DenseNKStep final : public Step {
 public:
  DenseNKStep(std::int64_t M, std::int64_t K, std::int64_t N, ElemKind kind, bool wide, Loc a, Loc p, Loc c,
              std::string summary, std::unique_ptr<MatMulKernel>* gemm)
      : M_(M), K_(K), N_(N), kind_(kind), wide_(wide), a_(a), p_(p), c_(c), summary_(std::move(summary)) {
    tiles_ = kind == ElemKind::F16 ? pick<ElemKind::F16>(wide, M) : pick<ElemKind::BF16>(wide, M);
    row_ = kind == ElemKind::F16 ? pick<ElemKind::F16>(wide, 1) : pick<ElemKind::BF16>(wide, 1);
    if (gemm) {
      gemm_[0] = std::move(gemm[0]);
      gemm_[1] = std::move(gemm[1]);
    }
    // About 64 KiB of P per task (at least one tile of rows): many tasks balance the threads.
    chunk_ = std::max<std::int64_t>(4, (32768 / std::max<std::int64_t>(K, 1)) / 4 * 4);
  }
  Result<void> run(const Frame& fr) const override {
    const auto* a = static_cast<const float*>(fr.ptr(a_));
    const auto* p = static_cast<const std::uint16_t*>(fr.ptr(p_));
    auto* c = static_cast<float*>(fr.ptr(c_));
    // Run-time rows: A's leading rows (rows_max of them at most, each M / rows_max kernel rows).
    const std::int64_t M = fr.rows > 0 ? fr.rows * (M_ / fr.rows_max) : M_;
    if (gemm_[0] && M >= kGemmRows) {
      const std::int64_t tasks = (N_ + kGemmCols - 1) / kGemmCols;
      fr.parallel->for_each(tasks, [&](std::int64_t t) {
        const std::int64_t n0 = t * kGemmCols, nb = std::min(kGemmCols, N_ - n0);
        const MatMulKernel& k = *gemm_[nb == kGemmCols ? 0 : 1];
        thread_local std::vector<float> bt, cb;
        bt.resize(static_cast<std::size_t>(nb * K_));
        cb.resize(static_cast<std::size_t>(M_ * nb));
        widen_rows(kind_, p + n0 * K_, nb * K_, bt.data());
        k.run(a, bt.data(), nullptr, cb.data(), Parallel{}, M == M_ ? 0 : M);
        for (std::int64_t m = 0; m < M; ++m)
          std::memcpy(c + m * N_ + n0, cb.data() + m * nb, static_cast<std::size_t>(nb) * 4);
      });
      return success();
    }
    const Tiles& tl = M == 1 ? row_ : tiles_;
    const std::int64_t tasks = (N_ + chunk_ - 1) / chunk_;
    fr.parallel->for_each(tasks, [&](std::int64_t t) {
      const std::int64_t n0 = t * chunk_, n1 = std::min(N_, n0 + chunk_);
      for (std::int64_t n = n0; n < n1; n += tl.nr) {
        const int nr = static_cast<int>(std::min<std::int64_t>(tl.nr, n1 - n));
        for (std::int64_t m = 0; m < M; m += tl.mr) {
          const int mr = static_cast<int>(std::min<std::int64_t>(tl.mr, M - m));
          tl.fn(a + m * K_, K_, p + n * K_, K_, c + m * N_ + n, N_, mr, nr);
        }
      }
    });
    return success();
  }
  [[nodiscard]] StepCode describe() const override {
    return StepCode{"matmul", summary_,
                    "matmul f32 x " + std::string(elem_name(kind_)) + "^T M=" + std::to_string(M_) +
                        " K=" + std::to_string(K_) + " N=" + std::to_string(N_) + " mr=" + std::to_string(tiles_.mr) +
                        " nr=" + std::to_string(tiles_.nr) + " p=as stored (no copy) vec=" + (wide_ ? "512" : "256") +
                        (gemm_[0] ? " | M >= " + std::to_string(kGemmRows) + ": blocks of " + std::to_string(kGemmCols) +
                                        " rows widened, " + gemm_[0]->describe()
                                  : std::string()),
                    {}};
  }

 private:
  std::int64_t M_, K_, N_;
  ElemKind kind_;
  bool wide_;
  Loc a_, p_, c_;
  std::string summary_;
  Tiles tiles_{}, row_{};  // row_: the M = 1 form (run-time rows may bring M = 1 to a larger kernel)
  std::int64_t chunk_ = 0;
  std::unique_ptr<MatMulKernel> gemm_[2];  // M >= kGemmRows: whole blocks, the last block
};

}  // namespace

Result<std::unique_ptr<Step>> make_dense_nk_step(const LowerContext& ctx, std::int64_t M, std::int64_t K,
                                                 std::int64_t N, ElemKind p_kind, Loc a, Loc p, Loc c) {
  if (M < 1 || K < 1 || N < 1) return make_error(ErrorCode::InvalidInput, "dense matmul: empty operand");
  if (p_kind != ElemKind::F16 && p_kind != ElemKind::BF16)
    return make_error(ErrorCode::Unsupported, "dense matmul: p must be f16 or bf16");
  if (ctx.rows_max > 0 && M % ctx.rows_max != 0)
    return make_error(ErrorCode::Unsupported, "x86 plan: run-time rows through this matmul: " + ctx.summary);
  std::unique_ptr<MatMulKernel> gemm[2];
  if (M >= kGemmRows) {
    for (int j = 0; j < 2; ++j) {
      MatMulProblem mp;
      mp.M = M;
      mp.K = K;
      mp.N = j == 0 ? std::min(N, kGemmCols) : (N % kGemmCols == 0 ? kGemmCols : N % kGemmCols);
      mp.trans_b = true;
      TERNJIT_TRY(gemm[j], MatMulKernel::create(mp, ctx.isa, ctx.allow_foreign_isa));
    }
  }
  return std::unique_ptr<Step>(std::make_unique<DenseNKStep>(M, K, N, p_kind, wide_vectors(ctx.isa), a, p, c,
                                                             ctx.summary, M >= kGemmRows ? gemm : nullptr));
}

}  // namespace ternjit::targets::x86
