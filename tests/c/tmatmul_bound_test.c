/* SPDX-License-Identifier: Apache-2.0 */
/* tmatmul_bound_test.c - bound weights, f32 x quantized per row and GGUF Q2_0 of the dispatch, in strict C11. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "expect.h"
#include "ternjit/ternjit.h"

enum { M = 3, K = 7, N = 5 };

/* The IR's quantize_int8 of one row (ir/README.md): s = max|x| / 127, q = round half to
 * even of x / s (nearbyintf in the default rounding mode), clamped to [-127, 127]. */
static float quantize_row(const float* x, int n, int8_t* q) {
  float amax = 0;
  for (int i = 0; i < n; ++i) amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
  const float s = amax / 127.0f;
  for (int i = 0; i < n; ++i) {
    float v = s == 0 ? 0.0f : nearbyintf(x[i] / s);
    q[i] = (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
  }
  return s;
}

/* A tern2 weight bound once, f32 x quantized in the kernel: the caller's buffers are freed
 * before the calls, which pass x only. */
static void bound_tern2(ternjit_engine* e) {
  int8_t w[K * N];
  for (int i = 0; i < K * N; ++i) w[i] = (int8_t)((i * 5 + i / 3) % 3 - 1);
  uint8_t* packed = calloc((K * N + 3) / 4, 1);
  float* w_scale = malloc(N * sizeof(float));
  float* bias = malloc(N * sizeof(float));
  for (int i = 0; i < K * N; ++i) packed[i / 4] |= (uint8_t)((w[i] + 1) << (2 * (i % 4)));
  for (int n = 0; n < N; ++n) {
    w_scale[n] = 0.5f + 0.25f * (float)n;
    bias[n] = 0.125f * (float)(n - 2);
  }
  const float ws[N] = {0.5f, 0.75f, 1.0f, 1.25f, 1.5f}, b[N] = {-0.25f, -0.125f, 0.0f, 0.125f, 0.25f};

  ternjit_tmatmul_desc d;
  ternjit_tmatmul_desc_init(&d);
  d.m = TERNJIT_TMATMUL_ANY_M;
  d.m_max = M;
  d.k = K;
  d.n = N;
  d.x = TERNJIT_TMATMUL_X_F32_ROW_I8;
  d.scale = TERNJIT_TMATMUL_SCALE_COLUMN;
  d.flags = TERNJIT_TMATMUL_BIAS;
  ternjit_tmatmul_bound* bound = (ternjit_tmatmul_bound*)1;
  /* Wrong sizes and missing buffers are refused, *out NULL. */
  EXPECT(ternjit_tmatmul_bind(e, &d, packed, (K * N + 3) / 4 - 1, w_scale, bias, &bound) == TERNJIT_INVALID_ARGUMENT);
  EXPECT(bound == NULL);
  EXPECT(ternjit_tmatmul_bind(e, &d, packed, (K * N + 3) / 4, NULL, bias, &bound) == TERNJIT_INVALID_ARGUMENT);
  EXPECT(ternjit_tmatmul_bind(e, &d, packed, (K * N + 3) / 4, w_scale, bias, NULL) == TERNJIT_INVALID_ARGUMENT);
  EXPECT(ternjit_tmatmul_bind(e, &d, packed, (K * N + 3) / 4, w_scale, bias, &bound) == TERNJIT_OK);
  memset(packed, 0xff, (K * N + 3) / 4);
  for (int n = 0; n < N; ++n) w_scale[n] = bias[n] = NAN;
  free(packed);
  free(w_scale);
  free(bias);
  EXPECT(ternjit_tmatmul_bound_bytes(bound) >= (K * N + 3) / 4);

  ternjit_tmatmul_fn fn = NULL;
  const void* state = NULL;
  EXPECT(ternjit_tmatmul_bound_entry(NULL, &fn, &state) == TERNJIT_INVALID_ARGUMENT);
  EXPECT(ternjit_tmatmul_bound_entry(bound, &fn, &state) == TERNJIT_OK);
  float x[M * K], y[M * N];
  for (int i = 0; i < M * K; ++i) x[i] = (float)((i * 37) % 23 - 11) / 7.0f;
  for (int m = 1; m <= M; ++m) {
    for (int i = 0; i < M * N; ++i) y[i] = NAN;
    ternjit_tmatmul_args a;
    memset(&a, 0, sizeof a);
    a.x = x;
    a.y = y;
    a.m = m;
    EXPECT(fn(state, &a) == TERNJIT_OK);
    for (int r = 0; r < m; ++r) {
      int8_t q[K];
      const float s = quantize_row(x + r * K, K, q);
      for (int n = 0; n < N; ++n) {
        int32_t acc = 0;
        for (int k = 0; k < K; ++k) acc += q[k] * w[k * N + n];
        /* The epilogue's f32 steps in the IR's order: exact, integer path. */
        float want = (float)acc * s;
        want = want * ws[n];
        want = want + b[n];
        EXPECT(y[r * N + n] == want);
      }
    }
    for (int i = m * N; i < M * N; ++i) EXPECT(isnan(y[i]));  /* rows past m untouched */
  }
  /* The weight, its scale and bias are bound: a call passing any is refused. */
  ternjit_tmatmul_args a;
  memset(&a, 0, sizeof a);
  a.x = x;
  a.y = y;
  a.m = 1;
  a.bias = ws;
  EXPECT(fn(state, &a) == TERNJIT_INVALID_ARGUMENT);
  EXPECT(strstr(ternjit_last_error(), "args.bias is set but the weight is bound") != NULL);
  ternjit_tmatmul_bound_destroy(bound);
}

/* Q2_0: 18-byte blocks { f16 d; uint8 qs[16] }, element j at (qs[j/4] >> 2(j%4)) & 3. */
static void q2_0(ternjit_engine* e) {
  enum { QK = 64, QN = 3 };
  uint8_t blocks[QN][18];
  const uint16_t d_bits[QN] = {0x3c00, 0x3800, 0x4100}; /* 1, 0.5, 2.5 */
  const float d_value[QN] = {1.0f, 0.5f, 2.5f};
  memset(blocks, 0, sizeof blocks);
  for (int n = 0; n < QN; ++n) {
    memcpy(blocks[n], &d_bits[n], 2);
    for (int j = 0; j < QK; ++j) blocks[n][2 + j / 4] |= (uint8_t)(((j + n) % 3) << (2 * (j % 4)));
  }
  float x[QK], y[QN];
  for (int k = 0; k < QK; ++k) x[k] = (float)(k % 9) - 4.0f;
  ternjit_tmatmul_desc d;
  ternjit_tmatmul_desc_init(&d);
  d.k = QK;
  d.n = QN;
  d.weight = TERNJIT_TMATMUL_W_GGUF_Q2_0;
  ternjit_tmatmul_bound* bound = NULL;
  EXPECT(ternjit_tmatmul_bind(e, &d, blocks, sizeof blocks, NULL, NULL, &bound) == TERNJIT_OK);
  ternjit_tmatmul_fn fn = NULL;
  const void* state = NULL;
  EXPECT(ternjit_tmatmul_bound_entry(bound, &fn, &state) == TERNJIT_OK);
  ternjit_tmatmul_args a;
  memset(&a, 0, sizeof a);
  a.x = x;
  a.y = y;
  a.m = 1;
  for (int n = 0; n < QN; ++n) y[n] = NAN;
  EXPECT(fn(state, &a) == TERNJIT_OK);
  for (int n = 0; n < QN; ++n) {
    double want = 0;
    for (int j = 0; j < QK; ++j) {
      const int code = (blocks[n][2 + j / 4] >> (2 * (j % 4))) & 3;
      want += (double)x[j] * (code - 1) * d_value[n];
    }
    EXPECT(y[n] == (float)want); /* small integers times a power-of-two-ish f16: exact */
  }
  ternjit_tmatmul_bound_destroy(bound);
  /* Code 3 (+2) is not ternary: refused, naming the block and row. */
  blocks[1][2 + 5] |= 0x03;
  bound = (ternjit_tmatmul_bound*)1;
  EXPECT(ternjit_tmatmul_bind(e, &d, blocks, sizeof blocks, NULL, NULL, &bound) == TERNJIT_INVALID_INPUT);
  EXPECT(strstr(ternjit_last_error(), "block 0 of row 1 holds code 3") != NULL);
  EXPECT(bound == NULL);
}

int main(void) {
  ternjit_engine_options o;
  ternjit_engine_options_init(&o);
  o.cache_dir = "off";
  ternjit_engine* e = NULL;
  EXPECT(ternjit_engine_create(&o, &e) == TERNJIT_OK);
  if (e == NULL) return 1;
  EXPECT(ternjit_has_feature("tmatmul-bound") == 1);
  EXPECT(ternjit_has_feature("tmatmul-q2_0") == 1);
  EXPECT(ternjit_has_feature("tmatmul-x-row-i8") == 1);
  bound_tern2(e);
  q2_0(e);
  EXPECT(ternjit_tmatmul_bound_bytes(NULL) == 0);
  ternjit_tmatmul_bound_destroy(NULL);
  ternjit_engine_destroy(e);
  if (failures == 0) printf("tmatmul_bound_test: ok\n");
  return failures == 0 ? 0 : 1;
}
