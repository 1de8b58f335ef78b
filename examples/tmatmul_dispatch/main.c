/* SPDX-License-Identifier: Apache-2.0 */
/* main.c - a ternary matmul kernel from a descriptor (docs/c_abi.md, "Ternary matmul dispatch"). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ternjit/ternjit.h"

int main(void) {
  enum { M = 2, K = 6, N = 4 };
  /* W[K, N] in {-1, 0, 1}, packed as tern2: element k*N+n, code value+1, 4 per byte. */
  const int8_t w[K * N] = {1, 0, -1, 1, 0, 1, 1, -1, -1, -1, 0, 0, 1, 1, 1, 1, 0, 0, -1, 1, 1, -1, 0, 0};
  uint8_t packed[(K * N + 3) / 4];
  memset(packed, 0, sizeof packed);
  for (int i = 0; i < K * N; ++i) packed[i / 4] |= (uint8_t)((w[i] + 1) << (2 * (i % 4)));
  const int8_t x[M * K] = {3, -7, 127, 0, 5, -127, 1, 2, 3, 4, 5, 6};
  const float x_scale[M] = {0.01f, 0.5f};   /* per row */
  const float w_scale[N] = {1.0f, 2.0f, 0.5f, 0.25f}; /* per column */
  const float bias[N] = {0.1f, -0.2f, 0.3f, -0.4f};
  float y[M * N];

  ternjit_engine_options o;
  ternjit_engine_options_init(&o);
  o.cache_dir = "off";
  ternjit_engine* engine = NULL;
  if (ternjit_engine_create(&o, &engine) != TERNJIT_OK) {
    fprintf(stderr, "%s\n", ternjit_last_error());
    return 1;
  }
  ternjit_tmatmul_desc d;
  ternjit_tmatmul_desc_init(&d);
  d.m = M;
  d.k = K;
  d.n = N;
  d.weight = TERNJIT_TMATMUL_W_TERN2;
  d.x = TERNJIT_TMATMUL_X_I8;
  d.scale = TERNJIT_TMATMUL_SCALE_COLUMN;
  d.flags = TERNJIT_TMATMUL_BIAS;
  d.act = TERNJIT_TMATMUL_ACT_RELU;
  ternjit_tmatmul_fn fn;
  const void* state;
  if (ternjit_tmatmul_dispatch(engine, &d, &fn, &state) != TERNJIT_OK) {
    fprintf(stderr, "%s\n", ternjit_last_error());
    return 1;
  }
  ternjit_tmatmul_args a;
  memset(&a, 0, sizeof a);
  a.x = x;
  a.x_scale = x_scale;
  a.w = packed;
  a.w_scale = w_scale;
  a.bias = bias;
  a.y = y;
  a.m = M;
  if (fn(state, &a) != TERNJIT_OK) {
    fprintf(stderr, "%s\n", ternjit_last_error());
    return 1;
  }
  /* The same by hand: relu(sum_k x w * x_scale * w_scale + bias). */
  int bad = 0;
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      int32_t acc = 0;
      for (int k = 0; k < K; ++k) acc += x[m * K + k] * w[k * N + n];
      float want = (float)acc * x_scale[m] * w_scale[n] + bias[n];
      want = want > 0 ? want : 0;
      printf("y[%d][%d] = %g (expected %g)\n", m, n, y[m * N + n], want);
      bad |= fabsf(y[m * N + n] - want) > 1e-5f * (1 + fabsf(want));
    }
  /* A descriptor the engine cannot compute is refused, never approximated. */
  d.weight = TERNJIT_TMATMUL_W_GGUF_TQ2_0;
  d.k = 256;
  d.scale = TERNJIT_TMATMUL_SCALE_GROUP;
  d.group = 64;
  if (ternjit_tmatmul_dispatch(engine, &d, &fn, &state) != TERNJIT_UNSUPPORTED) bad = 1;
  printf("refused: %s\n", ternjit_last_error());
  ternjit_engine_destroy(engine);
  return bad;
}
