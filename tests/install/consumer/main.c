/* SPDX-License-Identifier: Apache-2.0 */
/* main.c - compiles and runs a BitLinear layer through an installed libternjit. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <ternjit/ternjit.h>

/* tests/dsl/bitlinear.tri without its comment lines: this program builds against an installed
 * package only (tests/unit/dsl/bitlinear_copies_test.cpp checks the copy). */
static const char kSource[] =
    "layer BitLinear {\n"
    "    param gamma: Tensor[K]\n"
    "    param w: TernaryTensor[K, N]\n"
    "    param w_scale: Tensor[N]\n"
    "    fn forward(x: Tensor[M, K]) -> Tensor[M, N] {\n"
    "        let h = rmsnorm(x, gamma, 1e-5)\n"
    "        let q = quantize_int8(h)\n"
    "        let y = q @ w\n"
    "        return relu(y * w_scale)\n"
    "    }\n"
    "}\n";

#define TRY(call)                                                                        \
  do {                                                                                   \
    ternjit_status st_ = (call);                                                         \
    if (st_ != TERNJIT_OK) {                                                             \
      fprintf(stderr, "%s failed (%d): %s\n", #call, (int)st_, ternjit_last_error());    \
      return 1;                                                                          \
    }                                                                                    \
  } while (0)

int main(void) {
  enum { M = 2, K = 16, N = 8 };
  float gamma[K], w_scale[N], x[M * K], y[M * N];
  int8_t w[K * N];
  const int64_t k_shape[1] = {K}, n_shape[1] = {N}, w_shape[2] = {K, N};
  const int64_t x_shape[2] = {M, K}, y_shape[2] = {M, N};
  ternjit_engine* engine = NULL;
  ternjit_program* program = NULL;
  ternjit_tensor in, out;
  int i, positive = 0;

  if (ternjit_abi_version() != TERNJIT_ABI_VERSION) {
    fprintf(stderr, "ABI mismatch: library %u, header %d\n", (unsigned)ternjit_abi_version(), TERNJIT_ABI_VERSION);
    return 1;
  }
  for (i = 0; i < K; ++i) gamma[i] = 1.0f;
  for (i = 0; i < N; ++i) w_scale[i] = 0.5f;
  for (i = 0; i < K * N; ++i) w[i] = (int8_t)(i % 3 - 1);
  for (i = 0; i < M * K; ++i) x[i] = (float)(i % 7) - 3.0f;

  TRY(ternjit_engine_create(NULL, &engine));
  TRY(ternjit_compile(engine, kSource, strlen(kSource), "consumer.tri", &program));
  TRY(ternjit_bind_weight(program, "BitLinear.gamma", gamma, TERNJIT_F32, TERNJIT_FORMAT_PLAIN, k_shape, 1));
  TRY(ternjit_bind_weight(program, "BitLinear.w", w, TERNJIT_T2, TERNJIT_FORMAT_PLAIN, w_shape, 2));
  TRY(ternjit_bind_weight(program, "BitLinear.w_scale", w_scale, TERNJIT_F32, TERNJIT_FORMAT_PLAIN, n_shape, 1));
  in.data = x;
  in.dtype = TERNJIT_F32;
  in.rank = 2;
  in.shape = x_shape;
  out.data = y;
  out.dtype = TERNJIT_F32;
  out.rank = 2;
  out.shape = y_shape;
  TRY(ternjit_run(program, "BitLinear.forward", &in, 1, &out, 1));
  for (i = 0; i < M * N; ++i) {
    if (!(y[i] >= 0.0f)) {
      fprintf(stderr, "y[%d] = %g is not a relu output\n", i, (double)y[i]);
      return 1;
    }
    positive += y[i] > 0.0f;
  }
  if (positive == 0) {
    fprintf(stderr, "every output is 0\n");
    return 1;
  }
  printf("consumer: ternjit %s ran BitLinear.forward [%d x %d] -> [%d x %d], y[0] = %g\n", ternjit_version(), M, K,
         M, N, (double)y[0]);
  ternjit_program_destroy(program);
  ternjit_engine_destroy(engine);
  return 0;
}
