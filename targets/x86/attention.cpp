// SPDX-License-Identifier: Apache-2.0
// attention.cpp - the x86 steps of the transformer ops: layernorm, rope, causal_softmax, attention
// (plan_internal.h, lower_attention_op).
//
//   - layernorm, rope and causal_softmax run the interpreter's double arithmetic in the same
//     order (ir/interpret_decoder.cpp: sums in order, std::pow/cos/sin/exp/sqrt in double,
//     one rounding to the result kind), so they are bit-exact with it. rope's frequencies
//     theta^(-2i/D) are computed once at build; its cos/sin once per (row, pair) and applied
//     to every head.
//   - attention (GQA) is f32: a task is a query row m and a group of cache heads (all of them,
//     or with fewer rows than threads the heads split over the threads); it reads its heads'
//     contiguous part of each key and value row once, in order (an f16/bf16 one widened
//     exactly; on AVX-512 in registers, by the blocked kernels scores512 / values512), and
//     serves every query head h of its cache heads (h / g, g = HQ / HKV). Rows
//     t <= pos + m only are read. Two passes over t: the scores s_t = scale * (q . k_t) as f32
//     FMA dot products, then the softmax weights w_t = exp(s_t - max) (NaN if any score is;
//     a vector expf within 2 ulp) and out = sum_t w_t v_t / sum_t w_t. Within the bound stated in
//     tests/unit/x86/attention_test.cpp of the double reference.
// Every op reading `pos` checks it when it runs: pos < 0 (and, for attention, pos + M > C)
// is an InvalidInput error naming the op, with nothing written. Run-time rows: layernorm,
// rope and rank-2 causal_softmax honour them (their axis 0 is the rows axis); attention
// refuses (row analysis refuses it too: its pos + M <= C check needs the call's M).
#include "targets/x86/intrinsics.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "targets/x86/elem_io.h"
#include "targets/x86/plan_internal.h"

namespace ternjit::targets::x86 {
namespace {

using ir::Op;

std::int64_t pos_value(const Frame& fr, const Loc& l) {
  std::int32_t v;
  std::memcpy(&v, fr.ptr(l), 4);
  return v;
}

Result<void> negative_pos(const char* op, std::int64_t pos) {
  return make_error(ErrorCode::InvalidInput,
                    std::string(op) + ": pos " + std::to_string(pos) + " is negative (pos must be >= 0)");
}

// ---------------------------------------------------------------- layernorm

class LayerNormStep final : public Step {
 public:
  LayerNormStep(ElemKind xk, ElemKind gk, ElemKind bk, ElemKind rk, std::int64_t rows, std::int64_t d, double eps,
                std::int64_t rows_max, std::vector<Loc> in, Loc out, std::string summary)
      : xk_(xk), gk_(gk), bk_(bk), rk_(rk), rows_(rows), d_(d), eps_(eps), rows_max_(rows_max), in_(std::move(in)),
        out_(out), summary_(std::move(summary)) {}
  Result<void> run(const Frame& fr) const override {
    const std::int64_t rows = fr.rows > 0 ? rows_ / rows_max_ * fr.rows : rows_;
    const auto* x = static_cast<const std::uint8_t*>(fr.ptr(in_[0]));
    const auto* g = static_cast<const std::uint8_t*>(fr.ptr(in_[1]));
    const auto* b = static_cast<const std::uint8_t*>(fr.ptr(in_[2]));
    auto* o = static_cast<std::uint8_t*>(fr.ptr(out_));
    const double d = static_cast<double>(d_);
    fr.parallel->for_each(rows, [&](std::int64_t r) {
      const std::int64_t base = r * d_;
      double sum = 0;
      for (std::int64_t j = 0; j < d_; ++j) sum += load_elem(xk_, x, base + j);
      const double mean = sum / d;
      double ss = 0;
      for (std::int64_t j = 0; j < d_; ++j) {
        const double c = load_elem(xk_, x, base + j) - mean;
        ss += c * c;
      }
      const double denom = std::sqrt(ss / d + eps_);
      for (std::int64_t j = 0; j < d_; ++j)
        store_elem(rk_, o, base + j,
                   (load_elem(xk_, x, base + j) - mean) / denom * load_elem(gk_, g, j) + load_elem(bk_, b, j));
    });
    return success();
  }
  [[nodiscard]] StepCode describe() const override {
    return StepCode{"layernorm", summary_,
                    "layernorm rows=" + std::to_string(rows_) + " d=" + std::to_string(d_) + " double", {}};
  }

 private:
  ElemKind xk_, gk_, bk_, rk_;
  std::int64_t rows_, d_;
  double eps_;
  std::int64_t rows_max_;
  std::vector<Loc> in_;
  Loc out_;
  std::string summary_;
};

// ---------------------------------------------------------------- rope

class RopeStep final : public Step {
 public:
  RopeStep(std::int64_t M, std::int64_t H, std::int64_t D, double theta, ir::RopeMode mode, std::int64_t rows_max,
           Loc x, Loc pos, Loc out, std::string summary)
      : m_(M), h_(H), d_(D), mode_(mode), rows_max_(rows_max), x_(x), pos_(pos), out_(out),
        summary_(std::move(summary)) {
    for (std::int64_t i = 0; i < D / 2; ++i)
      freq_.push_back(std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(D)));
  }
  Result<void> run(const Frame& fr) const override {
    const std::int64_t p0 = pos_value(fr, pos_);
    if (p0 < 0) return negative_pos("rope", p0);
    const std::int64_t rows = fr.rows > 0 ? m_ / rows_max_ * fr.rows : m_;
    const auto* x = static_cast<const float*>(fr.ptr(x_));
    auto* o = static_cast<float*>(fr.ptr(out_));
    const std::int64_t half = d_ / 2;
    const bool norm = mode_ == ir::RopeMode::Norm;
    fr.parallel->for_each(rows, [&](std::int64_t m) {
      const auto p = static_cast<double>(p0 + m);
      for (std::int64_t i = 0; i < half; ++i) {
        const double angle = p * freq_[static_cast<std::size_t>(i)];
        const double c = std::cos(angle), s = std::sin(angle);
        const std::int64_t ja = norm ? 2 * i : i, jb = norm ? 2 * i + 1 : i + half;
        for (std::int64_t h = 0; h < h_; ++h) {
          const std::int64_t base = (m * h_ + h) * d_;
          const double va = x[base + ja], vb = x[base + jb];
          o[base + ja] = static_cast<float>(va * c - vb * s);
          o[base + jb] = static_cast<float>(va * s + vb * c);
        }
      }
    });
    return success();
  }
  [[nodiscard]] StepCode describe() const override {
    return StepCode{"rope", summary_,
                    "rope " + std::string(ir::rope_mode_name(mode_)) + " M=" + std::to_string(m_) + " H=" +
                        std::to_string(h_) + " D=" + std::to_string(d_) + " cos/sin per (row, pair)",
                    {}};
  }

 private:
  std::int64_t m_, h_, d_;
  ir::RopeMode mode_;
  std::int64_t rows_max_;
  Loc x_, pos_, out_;
  std::vector<double> freq_;
  std::string summary_;
};

// ---------------------------------------------------------------- causal_softmax

class CausalSoftmaxStep final : public Step {
 public:
  CausalSoftmaxStep(ElemKind xk, ElemKind rk, std::int64_t batch, std::int64_t M, std::int64_t T,
                    std::int64_t rows_max, Loc x, Loc pos, Loc out, std::string summary)
      : xk_(xk), rk_(rk), batch_(batch), m_(M), t_(T), rows_max_(rows_max), x_(x), pos_(pos), out_(out),
        summary_(std::move(summary)) {}
  Result<void> run(const Frame& fr) const override {
    const std::int64_t p0 = pos_value(fr, pos_);
    if (p0 < 0) return negative_pos("causal_softmax", p0);
    const std::int64_t m_rows = fr.rows > 0 ? m_ / rows_max_ * fr.rows : m_;  // rank 2 only with run-time rows
    const auto* x = static_cast<const std::uint8_t*>(fr.ptr(x_));
    auto* o = static_cast<std::uint8_t*>(fr.ptr(out_));
    fr.parallel->for_each(batch_ * m_rows, [&](std::int64_t bm) {
      const std::int64_t m = bm % m_rows;
      const std::int64_t base = bm * t_;
      const std::int64_t kept = std::min(t_, p0 + m + 1);
      double mx = -std::numeric_limits<double>::infinity();
      for (std::int64_t t = 0; t < kept; ++t) {
        const double v = load_elem(xk_, x, base + t);
        mx = (std::isnan(v) || std::isnan(mx)) ? std::numeric_limits<double>::quiet_NaN() : std::max(mx, v);
      }
      thread_local std::vector<double> e;
      e.resize(static_cast<std::size_t>(kept));
      double sum = 0;
      for (std::int64_t t = 0; t < kept; ++t) {
        e[static_cast<std::size_t>(t)] = std::exp(load_elem(xk_, x, base + t) - mx);
        sum += e[static_cast<std::size_t>(t)];
      }
      for (std::int64_t t = 0; t < kept; ++t) store_elem(rk_, o, base + t, e[static_cast<std::size_t>(t)] / sum);
      for (std::int64_t t = kept; t < t_; ++t) store_elem(rk_, o, base + t, 0.0);  // masked: exactly 0
    });
    return success();
  }
  [[nodiscard]] StepCode describe() const override {
    return StepCode{"causal_softmax", summary_,
                    "causal_softmax rows=" + std::to_string(batch_ * m_) + " T=" + std::to_string(t_) +
                        " kept t <= pos + m, double",
                    {}};
  }

 private:
  ElemKind xk_, rk_;
  std::int64_t batch_, m_, t_, rows_max_;
  Loc x_, pos_, out_;
  std::string summary_;
};

// ---------------------------------------------------------------- attention kernels

__attribute__((target("avx512f,avx512bw,avx512vl,fma"))) void axpy512(float* y, float w, const float* x,
                                                                       std::int64_t n) {
  const __m512 wv = _mm512_set1_ps(w);
  for (std::int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(y + i, m, _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, y + i)));
  }
}

__attribute__((target("avx2,fma"))) void axpy256(float* y, float w, const float* x, std::int64_t n) {
  const __m256 wv = _mm256_set1_ps(w);
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] = std::fma(w, x[i], y[i]);
}

// out[i] = q_i . k for the G query heads q_i = q + i * n (consecutive) sharing one cache row k:
// each vector of k is loaded once for up to 4 heads (f32 FMA lanes, then the lanes added).
__attribute__((target("avx512f,avx512bw,avx512vl,fma"))) void dots512(const float* q, const float* k,
                                                                       std::int64_t n, std::int64_t G, float* out) {
  for (std::int64_t c = 0; c < G; c += 4) {
    const std::int64_t cnt = std::min<std::int64_t>(4, G - c);
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    for (std::int64_t i = 0; i < n; i += 16) {
      const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (n - i)) - 1);
      const __m512 kv = _mm512_maskz_loadu_ps(m, k + i);
      for (int j = 0; j < 4; ++j)
        if (j < cnt) acc[j] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, q + (c + j) * n + i), kv, acc[j]);
    }
    for (int j = 0; j < cnt; ++j) out[c + j] = _mm512_reduce_add_ps(acc[j]);
  }
}

__attribute__((target("avx2,fma"))) void dots256(const float* q, const float* k, std::int64_t n, std::int64_t G,
                                                  float* out) {
  for (std::int64_t c = 0; c < G; c += 4) {
    const std::int64_t cnt = std::min<std::int64_t>(4, G - c);
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    std::int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
      const __m256 kv = _mm256_loadu_ps(k + i);
      for (int j = 0; j < 4; ++j)
        if (j < cnt) acc[j] = _mm256_fmadd_ps(_mm256_loadu_ps(q + (c + j) * n + i), kv, acc[j]);
    }
    for (int j = 0; j < cnt; ++j) {
      __m128 h = _mm_add_ps(_mm256_castps256_ps128(acc[j]), _mm256_extractf128_ps(acc[j], 1));
      h = _mm_add_ps(h, _mm_movehl_ps(h, h));
      float r = _mm_cvtss_f32(_mm_add_ss(h, _mm_shuffle_ps(h, h, 1)));
      for (std::int64_t t = i; t < n; ++t) r = std::fma(q[(c + j) * n + t], k[t], r);
      out[c + j] = r;
    }
  }
}

// s[t] = exp(s[t] - mx) for t < n, returning the f32 sum in order of 8/16-lane partial sums.
// The exponential is Cephes' expf (x = k ln2 + r, |r| <= ln2 / 2, a degree-7 polynomial,
// 2^k added to the exponent): within 2 ulp of exp for the arguments here (x <= 0 or NaN;
// x < -87.3 gives 0, as expf's result there is below 2^-126 relative to a kept 1; NaN
// stays NaN).
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma"))) float exp_sum512(float* s, std::int64_t n, float mx) {
  const __m512 m = _mm512_set1_ps(mx);
  __m512 sum = _mm512_setzero_ps();
  std::int64_t t = 0;
  for (; t + 16 <= n; t += 16) {
    const __m512 x0 = _mm512_sub_ps(_mm512_loadu_ps(s + t), m);
    const __m512 x = _mm512_max_ps(x0, _mm512_set1_ps(-87.3f));
    const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT);
    __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(k, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 y = _mm512_set1_ps(1.9875691500e-4f);
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.3981999507e-3f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(8.3334519073e-3f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(4.1665795894e-2f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.6666665459e-1f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(5.0000001201e-1f));
    y = _mm512_fmadd_ps(y, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    __m512 e = _mm512_castsi512_ps(
        _mm512_add_epi32(_mm512_slli_epi32(_mm512_cvtps_epi32(k), 23), _mm512_castps_si512(y)));
    e = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x0, _mm512_set1_ps(-87.3f), _CMP_LT_OQ), e, _mm512_setzero_ps());
    e = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x0, x0, _CMP_UNORD_Q), e, x0);  // NaN stays NaN
    _mm512_storeu_ps(s + t, e);
    sum = _mm512_add_ps(sum, e);
  }
  float total = _mm512_reduce_add_ps(sum);
  for (; t < n; ++t) {
    s[t] = std::exp(s[t] - mx);
    total += s[t];
  }
  return total;
}

__attribute__((target("avx2,fma"))) float exp_sum256(float* s, std::int64_t n, float mx) {
  const __m256 m = _mm256_set1_ps(mx);
  __m256 sum = _mm256_setzero_ps();
  std::int64_t t = 0;
  for (; t + 8 <= n; t += 8) {
    const __m256 x0 = _mm256_sub_ps(_mm256_loadu_ps(s + t), m);
    const __m256 x = _mm256_max_ps(x0, _mm256_set1_ps(-87.3f));
    const __m256 k = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(k, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 y = _mm256_set1_ps(1.9875691500e-4f);
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.3981999507e-3f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(8.3334519073e-3f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(4.1665795894e-2f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.6666665459e-1f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(5.0000001201e-1f));
    y = _mm256_fmadd_ps(y, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256 e = _mm256_castsi256_ps(
        _mm256_add_epi32(_mm256_slli_epi32(_mm256_cvtps_epi32(k), 23), _mm256_castps_si256(y)));
    e = _mm256_blendv_ps(e, _mm256_setzero_ps(), _mm256_cmp_ps(x0, _mm256_set1_ps(-87.3f), _CMP_LT_OQ));
    e = _mm256_blendv_ps(e, x0, _mm256_cmp_ps(x0, x0, _CMP_UNORD_Q));  // NaN stays NaN
    _mm256_storeu_ps(s + t, e);
    sum = _mm256_add_ps(sum, e);
  }
  __m128 h = _mm_add_ps(_mm256_castps256_ps128(sum), _mm256_extractf128_ps(sum, 1));
  h = _mm_add_ps(h, _mm_movehl_ps(h, h));
  float total = _mm_cvtss_f32(_mm_add_ss(h, _mm_shuffle_ps(h, h, 1)));
  for (; t < n; ++t) {
    s[t] = std::exp(s[t] - mx);
    total += s[t];
  }
  return total;
}

// ---------------------------------------------------------------- 512-bit blocked attention
// The AVX-512 path reads the cache in its own kind and widens in registers (no row buffer),
// and keeps every partial sum in registers:
//   scores: 4 query heads x 4 cache rows = 16 accumulators over D (16 lanes each), reduced
//     together by one transposing add tree (reduce16) into the 16 dot products;
//   values: 4 query heads x 64 values of D = 16 accumulators over t, each the same FMA chain
//     out[i][d] += w_t v_t[d] in t order as the 256-bit path's axpy (the same bits).
#define TJ_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,f16c,fma")))

template <ElemKind K>
TJ_AVX512 inline __m512 load16(const std::uint8_t* p, __mmask16 m) {
  if constexpr (K == ElemKind::F32) {
    return _mm512_maskz_loadu_ps(m, p);
  } else {
    const __m256i h = _mm256_maskz_loadu_epi16(m, p);
    if constexpr (K == ElemKind::F16) return _mm512_cvtph_ps(h);
    else return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
}

inline __mmask16 lanes(std::int64_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << std::max<std::int64_t>(n, 0)) - 1);
}

// Lane j of the result is the sum of the 16 lanes of a[j]: pairs of lanes added within
// 128-bit blocks (unpack, then shuffle), then the four blocks (shuffle_f32x4).
TJ_AVX512 inline __m512 reduce16(const __m512* a) {
  __m512 u[4];
  for (int k = 0; k < 4; ++k) {
    const __m512 s01 = _mm512_add_ps(_mm512_unpacklo_ps(a[4 * k], a[4 * k + 1]), _mm512_unpackhi_ps(a[4 * k], a[4 * k + 1]));
    const __m512 s23 =
        _mm512_add_ps(_mm512_unpacklo_ps(a[4 * k + 2], a[4 * k + 3]), _mm512_unpackhi_ps(a[4 * k + 2], a[4 * k + 3]));
    u[k] = _mm512_add_ps(_mm512_shuffle_ps(s01, s23, 0x44), _mm512_shuffle_ps(s01, s23, 0xEE));
  }
  const __m512 w01 = _mm512_add_ps(_mm512_shuffle_f32x4(u[0], u[1], 0x44), _mm512_shuffle_f32x4(u[0], u[1], 0xEE));
  const __m512 w23 = _mm512_add_ps(_mm512_shuffle_f32x4(u[2], u[3], 0x44), _mm512_shuffle_f32x4(u[2], u[3], 0xEE));
  return _mm512_add_ps(_mm512_shuffle_f32x4(w01, w23, 0x88), _mm512_shuffle_f32x4(w01, w23, 0xDD));
}

// Sixteen accumulators as separate members (the compiler keeps them in registers).
struct Acc16 {
  __m512 v0, v1, v2, v3, v4, v5, v6, v7, v8, v9, v10, v11, v12, v13, v14, v15;
};
TJ_AVX512 inline void zero(Acc16& a) {
  a.v0 = a.v1 = a.v2 = a.v3 = a.v4 = a.v5 = a.v6 = a.v7 = _mm512_setzero_ps();
  a.v8 = a.v9 = a.v10 = a.v11 = a.v12 = a.v13 = a.v14 = a.v15 = _mm512_setzero_ps();
}

// a_r = x * b_r + a_r for r < 4 (one FMA each, in that order).
TJ_AVX512 inline void fma4(__m512 x, __m512 b0, __m512 b1, __m512 b2, __m512 b3, __m512& a0, __m512& a1, __m512& a2,
                           __m512& a3) {
  a0 = _mm512_fmadd_ps(x, b0, a0);
  a1 = _mm512_fmadd_ps(x, b1, a1);
  a2 = _mm512_fmadd_ps(x, b2, a2);
  a3 = _mm512_fmadd_ps(x, b3, a3);
}

// scores[i * len + t] = scale * (q_i . k_t) for the g query heads q_i = q + i * D of one cache
// head, rows t < len of it at k0 + t * kstride bytes.
template <ElemKind K>
TJ_AVX512 void scores512(const float* q, std::int64_t g, const std::uint8_t* k0, std::int64_t kstride, std::int64_t D,
                         std::int64_t len, float scale, float* scores) {
  constexpr std::int64_t eb = K == ElemKind::F32 ? 4 : 2;
  const __m512 sc = _mm512_set1_ps(scale);
  for (std::int64_t i0 = 0; i0 < g; i0 += 4) {
    const std::int64_t nh = std::min<std::int64_t>(4, g - i0);
    const float* qp[4];
    for (int i = 0; i < 4; ++i) qp[i] = q + (i0 + std::min<std::int64_t>(i, nh - 1)) * D;
    for (std::int64_t t0 = 0; t0 < len; t0 += 4) {
      const std::int64_t nr = std::min<std::int64_t>(4, len - t0);
      const std::uint8_t* kp[4];
      for (int r = 0; r < 4; ++r) kp[r] = k0 + (t0 + std::min<std::int64_t>(r, nr - 1)) * kstride;
      // The 16 accumulators as named values, not an array: GCC keeps a 1 KB array of
      // vectors in memory and stored all 16 on every iteration (store-bound; measured).
      Acc16 a;
      zero(a);
      for (std::int64_t d0 = 0; d0 < D; d0 += 16) {
        const __mmask16 m = lanes(D - d0);
        const __m512 k0 = load16<K>(kp[0] + d0 * eb, m), k1 = load16<K>(kp[1] + d0 * eb, m);
        const __m512 k2 = load16<K>(kp[2] + d0 * eb, m), k3 = load16<K>(kp[3] + d0 * eb, m);
        fma4(_mm512_maskz_loadu_ps(m, qp[0] + d0), k0, k1, k2, k3, a.v0, a.v1, a.v2, a.v3);
        fma4(_mm512_maskz_loadu_ps(m, qp[1] + d0), k0, k1, k2, k3, a.v4, a.v5, a.v6, a.v7);
        fma4(_mm512_maskz_loadu_ps(m, qp[2] + d0), k0, k1, k2, k3, a.v8, a.v9, a.v10, a.v11);
        fma4(_mm512_maskz_loadu_ps(m, qp[3] + d0), k0, k1, k2, k3, a.v12, a.v13, a.v14, a.v15);
      }
      const __m512 acc[16] = {a.v0, a.v1, a.v2,  a.v3,  a.v4,  a.v5,  a.v6,  a.v7,
                              a.v8, a.v9, a.v10, a.v11, a.v12, a.v13, a.v14, a.v15};
      alignas(64) float s[16];
      _mm512_store_ps(s, _mm512_mul_ps(reduce16(acc), sc));
      for (std::int64_t i = 0; i < nh; ++i)
        for (std::int64_t r = 0; r < nr; ++r) scores[(i0 + i) * len + t0 + r] = s[4 * i + r];
    }
  }
}

// out_i[d] = (sum_t w_i[t] v_t[d]) / sums[i] for the g query heads of one cache head (weights
// w_i = scores + i * len, rows v_t at v0 + t * vstride bytes), out_i = out + i * D.
template <ElemKind K>
TJ_AVX512 void values512(const float* scores, const float* sums, std::int64_t g, const std::uint8_t* v0,
                         std::int64_t vstride, std::int64_t D, std::int64_t len, float* out) {
  constexpr std::int64_t eb = K == ElemKind::F32 ? 4 : 2;
  for (std::int64_t i0 = 0; i0 < g; i0 += 4) {
    const std::int64_t nh = std::min<std::int64_t>(4, g - i0);
    const float* w[4];
    for (int i = 0; i < 4; ++i) w[i] = scores + (i0 + std::min<std::int64_t>(i, nh - 1)) * len;
    for (std::int64_t d0 = 0; d0 < D; d0 += 64) {
      __mmask16 m[4];
      for (int j = 0; j < 4; ++j) m[j] = lanes(D - d0 - 16 * j);
      Acc16 a;  // named accumulators (see scores512): head i, values 16 j.. at v(4 i + j)
      zero(a);
      const std::uint8_t* vp = v0 + d0 * eb;
      for (std::int64_t t = 0; t < len; ++t, vp += vstride) {
        const __m512 u0 = load16<K>(vp, m[0]), u1 = load16<K>(vp + 16 * eb, m[1]);
        const __m512 u2 = load16<K>(vp + 32 * eb, m[2]), u3 = load16<K>(vp + 48 * eb, m[3]);
        fma4(_mm512_set1_ps(w[0][t]), u0, u1, u2, u3, a.v0, a.v1, a.v2, a.v3);
        fma4(_mm512_set1_ps(w[1][t]), u0, u1, u2, u3, a.v4, a.v5, a.v6, a.v7);
        fma4(_mm512_set1_ps(w[2][t]), u0, u1, u2, u3, a.v8, a.v9, a.v10, a.v11);
        fma4(_mm512_set1_ps(w[3][t]), u0, u1, u2, u3, a.v12, a.v13, a.v14, a.v15);
      }
      const __m512 acc[4][4] = {{a.v0, a.v1, a.v2, a.v3},
                                {a.v4, a.v5, a.v6, a.v7},
                                {a.v8, a.v9, a.v10, a.v11},
                                {a.v12, a.v13, a.v14, a.v15}};
      for (std::int64_t i = 0; i < nh; ++i) {
        const __m512 sum = _mm512_set1_ps(sums[i0 + i]);
        for (int j = 0; j < 4; ++j)
          _mm512_mask_storeu_ps(out + (i0 + i) * D + d0 + 16 * j, m[j], _mm512_div_ps(acc[i][j], sum));
      }
    }
  }
}

using ScoresFn = void (*)(const float*, std::int64_t, const std::uint8_t*, std::int64_t, std::int64_t, std::int64_t,
                          float, float*);
using ValuesFn = void (*)(const float*, const float*, std::int64_t, const std::uint8_t*, std::int64_t, std::int64_t,
                          std::int64_t, float*);
#undef TJ_AVX512

// A cache row widened to f32 (exact): f16 with F16C, bf16 by a 16-bit shift.
__attribute__((target("avx2,f16c,fma"))) void widen(ElemKind k, const std::uint8_t* s, float* d, std::int64_t n) {
  if (k == ElemKind::F16) {
    const auto* h = reinterpret_cast<const std::uint16_t*>(s);
    std::int64_t i = 0;
    for (; i + 8 <= n; i += 8)
      _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i))));
    for (; i < n; ++i) d[i] = ir::f16_bits_to_f32(h[i]);
  } else {
    for (std::int64_t i = 0; i < n; ++i) {
      std::uint16_t b;
      std::memcpy(&b, s + 2 * i, 2);
      d[i] = ir::bf16_bits_to_f32(b);
    }
  }
}

class AttentionStep final : public Step {
 public:
  AttentionStep(ElemKind ck, std::int64_t M, std::int64_t HQ, std::int64_t D, std::int64_t C, std::int64_t HKV,
                std::int64_t layer, double scale, bool wide, std::vector<Loc> in, Loc out, std::string summary)
      : ck_(ck), m_(M), hq_(HQ), d_(D), c_(C), hkv_(HKV), layer_(layer), scale_(static_cast<float>(scale)),
        wide_(wide), in_(std::move(in)), out_(out), summary_(std::move(summary)) {
    if (ck == ElemKind::F16) scores_ = &scores512<ElemKind::F16>, values_ = &values512<ElemKind::F16>;
    else if (ck == ElemKind::BF16) scores_ = &scores512<ElemKind::BF16>, values_ = &values512<ElemKind::BF16>;
    else scores_ = &scores512<ElemKind::F32>, values_ = &values512<ElemKind::F32>;
  }
  Result<void> run(const Frame& fr) const override {
    const std::int64_t p0 = pos_value(fr, in_[3]);
    if (p0 < 0) return negative_pos("attention", p0);
    if (m_ > c_ - p0)
      return make_error(ErrorCode::InvalidInput, "attention: rows [pos, pos + M) = [" + std::to_string(p0) + ", " +
                                                     std::to_string(p0 + m_) + ") do not fit the cache capacity C = " +
                                                     std::to_string(c_) + " (pos " + std::to_string(p0) + ", M " +
                                                     std::to_string(m_) + ")");
    const auto* q = static_cast<const float*>(fr.ptr(in_[0]));
    const auto* kc = static_cast<const std::uint8_t*>(fr.ptr(in_[1]));
    const auto* vc = static_cast<const std::uint8_t*>(fr.ptr(in_[2]));
    auto* out = static_cast<float*>(fr.ptr(out_));
    const std::int64_t g = hq_ / hkv_;
    const auto eb = static_cast<std::size_t>(elem_bits(ck_) / 8);
    auto dots = wide_ ? &dots512 : &dots256;
    auto axpy = wide_ ? &axpy512 : &axpy256;
    auto exp_sum = wide_ ? &exp_sum512 : &exp_sum256;
    // Tasks: (query row m, group of cache heads). A task reads its heads' part of every cache
    // row t <= pos + m once, in order (the heads of a row are contiguous): with fewer rows than
    // threads the cache heads are split over the threads, else each row is one task.
    const std::int64_t groups = m_ >= fr.parallel->threads ? 1 : std::min<std::int64_t>(hkv_, fr.parallel->threads);
    fr.parallel->for_each(m_ * groups, [&](std::int64_t task) {
      const std::int64_t m = task / groups, gi = task % groups;
      const std::int64_t hk0 = gi * hkv_ / groups, hk1 = (gi + 1) * hkv_ / groups;
      const std::int64_t nh = hk1 - hk0, nq = nh * g;  // cache heads, query heads of this task
      const std::int64_t len = p0 + m + 1;
      // The scores and sums; the 256-bit path also keeps its accumulators, a widened row and
      // one row's scores in the buffer (the 512-bit kernels keep theirs in registers).
      thread_local std::vector<float> buf;
      buf.resize(static_cast<std::size_t>(nq * len + nq + (wide_ ? 0 : nq * d_ + nh * d_ + g)));
      float* scores = buf.data();        // [nq][len]
      float* sums = scores + nq * len;   // [nq]
      float* acc = wide_ ? nullptr : sums + nq;          // [nq][D]
      float* row = wide_ ? nullptr : acc + nq * d_;      // the task's heads of one cache row, widened
      float* part = wide_ ? nullptr : row + nh * d_;     // [g]: one row's scores of a cache head's query heads
      auto cache_row = [&](const std::uint8_t* cache, std::int64_t t) -> const float* {
        const std::uint8_t* p = cache + static_cast<std::size_t>(((layer_ * c_ + t) * hkv_ + hk0) * d_) * eb;
        if (ck_ == ElemKind::F32) return reinterpret_cast<const float*>(p);
        widen(ck_, p, row, nh * d_);
        return row;
      };
      const float* qm = q + (m * hq_ + hk0 * g) * d_;  // query heads hk0 * g .. hk1 * g of row m
      if (wide_) {  // the blocked 512-bit kernels, one cache head at a time, reading the cache as stored
        const auto rstride = static_cast<std::int64_t>(static_cast<std::size_t>(hkv_ * d_) * eb);
        for (std::int64_t hh = 0; hh < nh; ++hh) {
          const std::size_t head = static_cast<std::size_t>((layer_ * c_ * hkv_ + hk0 + hh) * d_) * eb;
          float* sc = scores + hh * g * len;
          scores_(qm + hh * g * d_, g, kc + head, rstride, d_, len, scale_, sc);
          for (std::int64_t i = 0; i < g; ++i) {
            float* s = sc + i * len;
            float mx = -std::numeric_limits<float>::infinity();
            for (std::int64_t t = 0; t < len; ++t)
              mx = (std::isnan(s[t]) || std::isnan(mx)) ? std::numeric_limits<float>::quiet_NaN() : std::max(mx, s[t]);
            sums[hh * g + i] = exp_sum(s, len, mx);
          }
          values_(sc, sums + hh * g, g, vc + head, rstride, d_, len, out + (m * hq_ + (hk0 + hh) * g) * d_);
        }
        return;
      }
      for (std::int64_t t = 0; t < len; ++t) {
        const float* k = cache_row(kc, t);
        for (std::int64_t hh = 0; hh < nh; ++hh) {  // the g query heads of cache head hk0 + hh
          dots(qm + hh * g * d_, k + hh * d_, d_, g, part);
          for (std::int64_t i = 0; i < g; ++i) scores[(hh * g + i) * len + t] = scale_ * part[i];
        }
      }
      for (std::int64_t i = 0; i < nq; ++i) {
        float* s = scores + i * len;
        float mx = -std::numeric_limits<float>::infinity();
        for (std::int64_t t = 0; t < len; ++t)
          mx = (std::isnan(s[t]) || std::isnan(mx)) ? std::numeric_limits<float>::quiet_NaN() : std::max(mx, s[t]);
        sums[i] = exp_sum(s, len, mx);
      }
      std::fill(acc, acc + nq * d_, 0.0f);
      for (std::int64_t t = 0; t < len; ++t) {
        const float* v = cache_row(vc, t);
        for (std::int64_t i = 0; i < nq; ++i) axpy(acc + i * d_, scores[i * len + t], v + (i / g) * d_, d_);
      }
      for (std::int64_t i = 0; i < nq; ++i) {
        float* o = out + (m * hq_ + hk0 * g + i) * d_;
        for (std::int64_t j = 0; j < d_; ++j) o[j] = acc[i * d_ + j] / sums[i];
      }
    });
    return success();
  }
  [[nodiscard]] StepCode describe() const override {
    return StepCode{"attention", summary_,
                    "attention M=" + std::to_string(m_) + " HQ=" + std::to_string(hq_) + " HKV=" +
                        std::to_string(hkv_) + " D=" + std::to_string(d_) + " C=" + std::to_string(c_) + " cache " +
                        std::string(elem_name(ck_)) + " two-pass f32, tasks=(row, kv head group), vec=" +
                        (wide_ ? "512 blocked (4 heads x 4 rows scores, 4 heads x 64 values in registers)" : "256"),
                    {}};
  }

 private:
  ElemKind ck_;
  std::int64_t m_, hq_, d_, c_, hkv_, layer_;
  float scale_;
  bool wide_;
  std::vector<Loc> in_;
  Loc out_;
  std::string summary_;
  ScoresFn scores_ = nullptr;  // the 512-bit path (wide_) for the cache's kind
  ValuesFn values_ = nullptr;
};

}  // namespace

Result<std::unique_ptr<Step>> lower_attention_op(const LowerContext& ctx) {
  const ir::InstData& inst = ctx.f.inst(ctx.inst);
  auto unsupported_rows = [&]() -> Result<std::unique_ptr<Step>> {
    return make_error(ErrorCode::Unsupported, "x86 plan: run-time rows through " + ctx.summary);
  };
  auto dims = [&](ir::ValueId v) {
    std::vector<std::int64_t> s;
    for (const ir::Dim& d : ctx.f.type_of(v).shape) s.push_back(d.extent);
    return s;
  };
  switch (inst.op) {
    case Op::LayerNorm: {
      const ir::Type& xt = ctx.f.type_of(inst.operands[0]);
      const ir::Type& rt = ctx.f.type_of(inst.results[0]);
      const std::int64_t d = xt.shape.back().extent, n = xt.static_numel().value_or(0);
      if (d == 0 || n == 0) return std::unique_ptr<Step>();
      if (ctx.rows_max > 0 && (xt.rank() < 2 || xt.shape[0].extent != ctx.rows_max)) return unsupported_rows();
      return std::unique_ptr<Step>(std::make_unique<LayerNormStep>(
          xt.elem, ctx.f.type_of(inst.operands[1]).elem, ctx.f.type_of(inst.operands[2]).elem, rt.elem, n / d, d,
          std::get<ir::EpsAttrs>(inst.attrs).eps, ctx.rows_max, ctx.in, ctx.out[0], ctx.summary));
    }
    case Op::Rope: {
      const auto s = dims(inst.operands[0]);
      const auto& a = std::get<ir::RopeAttrs>(inst.attrs);
      if (ctx.rows_max > 0 && s[0] != ctx.rows_max) return unsupported_rows();
      return std::unique_ptr<Step>(std::make_unique<RopeStep>(s[0], s[1], s[2], a.theta, a.mode, ctx.rows_max,
                                                              ctx.in[0], ctx.in[1], ctx.out[0], ctx.summary));
    }
    case Op::CausalSoftmax: {
      const auto s = dims(inst.operands[0]);
      const std::int64_t M = s[s.size() - 2], T = s.back();
      const std::int64_t n = ctx.f.type_of(inst.operands[0]).static_numel().value_or(0);
      if (n == 0) return std::unique_ptr<Step>();
      if (ctx.rows_max > 0 && (s.size() != 2 || s[0] != ctx.rows_max)) return unsupported_rows();
      return std::unique_ptr<Step>(std::make_unique<CausalSoftmaxStep>(
          ctx.f.type_of(inst.operands[0]).elem, ctx.f.type_of(inst.results[0]).elem, n / (M * T), M, T, ctx.rows_max,
          ctx.in[0], ctx.in[1], ctx.out[0], ctx.summary));
    }
    case Op::Attention: {
      if (ctx.rows_max > 0) return unsupported_rows();
      const auto q = dims(inst.operands[0]), kc = dims(inst.operands[1]);
      const auto& a = std::get<ir::AttentionAttrs>(inst.attrs);
      if (q[0] * q[1] * q[2] == 0 || kc[2] == 0 || q[1] % kc[2] != 0) return std::unique_ptr<Step>();
      return std::unique_ptr<Step>(std::make_unique<AttentionStep>(
          ctx.f.type_of(inst.operands[1]).elem, q[0], q[1], q[2], kc[1], kc[2], a.layer, a.scale,
          wide_vectors(ctx.isa), ctx.in, ctx.out[0], ctx.summary));
    }
    default: break;
  }
  return std::unique_ptr<Step>();
}

}  // namespace ternjit::targets::x86
