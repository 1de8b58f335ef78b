/* SPDX-License-Identifier: Apache-2.0 */
/* bitlinear_ref.h - test data and an independent C computation of the README's BitLinear layer. */
#ifndef TERNJIT_TESTS_BITLINEAR_REF_H
#define TERNJIT_TESTS_BITLINEAR_REF_H

/* The layer (tests/dsl/bitlinear.tri), for x: f32[M, K], gamma: f32[K], w: t2[K, N],
 * w_scale: f32[N]:
 *   h = rmsnorm(x, gamma, 1e-5)   h[k] = x[k] / sqrt(mean_k(x^2) + 1e-5) * gamma[k]
 *   q = quantize_int8(h)          s = max_k |h[k]| / 127; q[k] = clamp(round(h[k] / s), -127, 127) * s
 *   y = q @ w                     ternary matmul
 *   return relu(y * w_scale)
 *
 * The data makes the int8 quantization exact, so every correct implementation (fused
 * or not, any summation order) agrees up to float rounding of the sums: each row of x
 * is v[k] / gamma[k] * 2^e with integers v in [-127, 127], one of them +-127, and gamma
 * in {0.5, 1, 2}. Then h[k] = v[k] * c for one c per row, s = c and the quantized row
 * is exactly v (h / s is within a few ulps of an integer, far from a rounding tie).
 * bitlinear_ref checks this and returns the int8 row it found.
 *
 * Tolerance of a comparison (bitlinear_close): |got - want| <= 1e-5 * B + 1e-6 where
 * B = s * sum_k |v[k] * w[k][n]| * |w_scale[n]| bounds the magnitude of every partial
 * sum, so any summation order or fused scale order passes and a wrong weight, sign or
 * row does not. */

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* A small deterministic generator (xorshift64*), so test data is the same everywhere. */
typedef struct bl_rng {
  uint64_t s;
} bl_rng;

static inline uint32_t bl_next(bl_rng* r) {
  r->s ^= r->s >> 12;
  r->s ^= r->s << 25;
  r->s ^= r->s >> 27;
  return (uint32_t)((r->s * 0x2545F4914F6CDD1DULL) >> 32);
}

/* An integer in [lo, hi]. */
static inline int bl_int(bl_rng* r, int lo, int hi) { return lo + (int)(bl_next(r) % (uint32_t)(hi - lo + 1)); }

/* The layer's parameters and sizes. */
typedef struct bl_layer {
  int64_t K, N;
  float* gamma;    /* [K] */
  int8_t* w;       /* [K, N], values in {-1, 0, 1} */
  float* w_scale;  /* [N] */
} bl_layer;

/* Draws parameters for K x N from `seed`. Free with bl_layer_free. */
static inline bl_layer bl_layer_make(int64_t K, int64_t N, uint64_t seed) {
  bl_layer L;
  bl_rng r = {seed * 2654435761u + 88172645463325252ULL};
  int64_t i;
  static const float gammas[3] = {0.5f, 1.0f, 2.0f};
  L.K = K;
  L.N = N;
  L.gamma = (float*)malloc(sizeof(float) * (size_t)K);
  L.w = (int8_t*)malloc((size_t)(K * N));
  L.w_scale = (float*)malloc(sizeof(float) * (size_t)N);
  if (!L.gamma || !L.w || !L.w_scale) {
    fprintf(stderr, "out of memory\n");
    exit(1);
  }
  for (i = 0; i < K; ++i) L.gamma[i] = gammas[bl_int(&r, 0, 2)];
  for (i = 0; i < K * N; ++i) L.w[i] = (int8_t)bl_int(&r, -1, 1);
  for (i = 0; i < N; ++i) L.w_scale[i] = (float)bl_int(&r, 1, 64) / 64.0f;
  return L;
}

static inline void bl_layer_free(bl_layer* L) {
  free(L->gamma);
  free(L->w);
  free(L->w_scale);
}

/* Fills x [M, K] for layer L from `seed` (see the comment at the top). */
static inline void bl_input(const bl_layer* L, int64_t M, uint64_t seed, float* x) {
  bl_rng r = {seed * 0x9E3779B97F4A7C15ULL + 1};
  int64_t m, k;
  for (m = 0; m < M; ++m) {
    const float row_scale = ldexpf(1.0f, bl_int(&r, -3, 3));
    const int64_t peak = (int64_t)bl_int(&r, 0, (int)L->K - 1);
    for (k = 0; k < L->K; ++k) {
      int v = bl_int(&r, -127, 127);
      if (k == peak) v = (bl_next(&r) & 1) ? 127 : -127;
      x[m * L->K + k] = (float)v / L->gamma[k] * row_scale;
    }
  }
}

/* The layer on x [M, K] into y [M, N], plus the error bound of each output in bound
 * [M, N] (bound may be NULL). Returns 0, or 1 when the data did not quantize exactly (a
 * bug of this test). */
static inline int bl_reference(const bl_layer* L, int64_t M, const float* x, float* y, double* bound) {
  const int64_t K = L->K, N = L->N;
  int64_t m, k, n;
  for (m = 0; m < M; ++m) {
    const float* xr = x + m * K;
    double ss = 0, denom;
    float amax = 0, s;
    int v[4096];
    if (K > 4096) return 1;
    for (k = 0; k < K; ++k) ss += (double)xr[k] * (double)xr[k];
    denom = sqrt(ss / (double)K + 1e-5);
    for (k = 0; k < K; ++k) {
      const float h = (float)((double)xr[k] / denom * (double)L->gamma[k]);
      if (fabsf(h) > amax) amax = fabsf(h);
    }
    s = amax / 127.0f;
    for (k = 0; k < K; ++k) {
      const float h = (float)((double)xr[k] / denom * (double)L->gamma[k]);
      const float t = h / s;
      const float rq = nearbyintf(t);
      if (fabsf(t - rq) > 1e-3f || rq > 127.0f || rq < -127.0f) {
        fprintf(stderr, "bitlinear_ref: row %lld does not quantize exactly (h/s = %.9g)\n", (long long)m, (double)t);
        return 1;
      }
      v[k] = (int)rq;
    }
    for (n = 0; n < N; ++n) {
      int64_t acc = 0, mag = 0;
      double out;
      for (k = 0; k < K; ++k) {
        acc += (int64_t)v[k] * L->w[k * N + n];
        mag += llabs((int64_t)v[k] * L->w[k * N + n]);
      }
      out = (double)acc * (double)s * (double)L->w_scale[n];
      y[m * N + n] = out > 0 ? (float)out : 0.0f;
      if (bound) bound[m * N + n] = 1e-5 * (double)mag * (double)s * fabs((double)L->w_scale[n]) + 1e-6;
    }
  }
  return 0;
}

/* Compares got with want elementwise within bound; prints the first mismatch under
 * `what` and returns the number of mismatches. */
static inline int bl_compare(const char* what, int64_t count, const float* got, const float* want,
                             const double* bound) {
  int64_t i;
  int bad = 0;
  for (i = 0; i < count; ++i) {
    const double d = fabs((double)got[i] - (double)want[i]);
    if (!(d <= bound[i])) {
      if (bad == 0)
        fprintf(stderr, "%s: element %lld is %.9g, expected %.9g (|diff| %.3g > %.3g)\n", what, (long long)i,
                (double)got[i], (double)want[i], d, bound[i]);
      ++bad;
    }
  }
  return bad;
}

/* Packs the K x N ternary values row-major into tern2: code = value + 1, four values
 * per byte, element i in bits 2 * (i % 4) of byte i / 4; padding codes are 01 (0). */
static inline void bl_pack_tern2(const int8_t* w, int64_t count, uint8_t* out) {
  int64_t i;
  for (i = 0; i < (count + 3) / 4; ++i) out[i] = 0x55; /* four zeros */
  for (i = 0; i < count; ++i) {
    const int shift = (int)(2 * (i % 4));
    out[i / 4] = (uint8_t)((out[i / 4] & ~(3 << shift)) | ((w[i] + 1) << shift));
  }
}

/* Reads a whole file into a NUL-terminated malloc'd buffer (*len = its size); NULL on failure. */
static char* read_file(const char* path, size_t* len) {
  FILE* f = fopen(path, "rb");
  char* buf;
  long n;
  if (f == NULL) return NULL;
  if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
    fclose(f);
    return NULL;
  }
  buf = (char*)malloc((size_t)n + 1);
  if (buf != NULL && fread(buf, 1, (size_t)n, f) != (size_t)n) {
    free(buf);
    buf = NULL;
  }
  fclose(f);
  if (buf != NULL) {
    buf[n] = '\0';
    *len = (size_t)n;
  }
  return buf;
}

#endif /* TERNJIT_TESTS_BITLINEAR_REF_H */
