/* SPDX-License-Identifier: Apache-2.0 */
/* bitlinear_ffi.h - the C interface of libternjit_jax.so, the XLA FFI handlers of ternjit.jax. */
#ifndef TERNJIT_JAX_BITLINEAR_FFI_H
#define TERNJIT_JAX_BITLINEAR_FFI_H

#include <stddef.h>
#include <stdint.h>

#include "xla/ffi/api/c_api.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The layer: BitNet b1.58's BitLinear on latent float weights, in training form,
 *
 *   y = activation(quantize_int8(x) @ ternarize_absmean(w, ste_clip) (+ b))
 *
 * with x f32[M, K], w f32[K, N] (the layout of jnp.dot(x, w); nn.Linear's transpose), b f32[N].
 * It is compiled once per configuration with ternjit_compile_grad (the straight-through
 * gradient, docs/training.md) by an engine made from the environment
 * (ternjit_engine_create_from_env), and kept for the life of the process. */

/** One configuration of the layer; the key of the program cache. */
typedef struct ternjit_jax_config {
  const char* activation; /**< "none", "relu", "gelu", "silu", "sigmoid" or "tanh" */
  int32_t has_bias;       /**< 1: the layer adds b */
  int32_t ste_clip;       /**< 1: w's gradient passes only where |w| <= mean|w| */
  int32_t int8_dx;        /**< 1: TERNJIT_GRAD_INT8_DX (lower-precision input gradient) */
  int32_t int8_dw;        /**< 1: TERNJIT_GRAD_INT8_DW (lower-precision weight gradient) */
} ternjit_jax_config;

/** One output of the layer's ".fwd" function as specialized for given shapes. */
typedef struct ternjit_jax_output {
  int32_t dtype;     /**< a ternjit_dtype; TERNJIT_T2 is one int8 per element */
  int32_t rank;      /**< at most 4 */
  int64_t shape[4];  /**< rank extents */
  int32_t per_row;   /**< 1: the first dim is the row count M (one slice per row of x) */
} ternjit_jax_output;

/** Describes the outputs of "BitLinear.forward.fwd" (y, then the tensors saved for the backward)
 *  for x [rows, k] and w [k, n] into outputs[0 .. capacity) and sets *count to how many there
 *  are. Compiles the configuration and the kernel for these shapes when not done yet (the
 *  handlers then find both in the cache). Returns a ternjit_status; on failure
 *  ternjit_jax_last_error() says why. */
int32_t ternjit_jax_bitlinear_describe(const ternjit_jax_config* config, int64_t rows, int64_t k, int64_t n,
                                       ternjit_jax_output* outputs, size_t capacity, size_t* count);

/** The message of this thread's last failed ternjit_jax_bitlinear_describe, else "". */
const char* ternjit_jax_last_error(void);

/* The XLA FFI handlers (typed FFI, api_version 1, CPU). Each takes its buffers as remaining
 * arguments and results and the configuration as attributes: activation (string), has_bias,
 * ste_clip, int8_dx, int8_dw (bool). Every buffer is f32, except that a ternary (t2) tensor
 * saved by ".fwd" is int8; shapes must be those the layer declares for x [M, K] and w [K, N].
 *   forward: x, w[, b] -> y                       ("BitLinear.forward")
 *   fwd:     x, w[, b] -> y, saved...             ("BitLinear.forward.fwd")
 *   bwd:     x, w[, b], dy, saved... -> dx, dw[, db] ("BitLinear.forward.bwd")
 * A failure (bad configuration, dtype or shape, a compile error, a kernel error) is returned as
 * an XLA FFI error carrying ternjit's message, never a crash. */
XLA_FFI_Error* ternjit_jax_bitlinear_forward(XLA_FFI_CallFrame* call_frame);
XLA_FFI_Error* ternjit_jax_bitlinear_fwd(XLA_FFI_CallFrame* call_frame);
XLA_FFI_Error* ternjit_jax_bitlinear_bwd(XLA_FFI_CallFrame* call_frame);

#ifdef __cplusplus
}
#endif

#endif /* TERNJIT_JAX_BITLINEAR_FFI_H */
