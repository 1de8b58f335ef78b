// SPDX-License-Identifier: Apache-2.0
// ggml-ternjit.h - ternjit as a ggml backend (docs/ggml.md): an accelerator device
// ("TERNJIT", type ACCEL) that runs llama.cpp's ternary matmuls (MUL_MAT of TQ2_0, TQ1_0 and
// Q2_0 weights with f32 activations) on ternjit kernels and leaves every other op to
// ggml-cpu. libggml-ternjit.so is loaded at run time (GGML_BACKEND_PATH, ggml_backend_load:
// its entry is ggml_backend_init) or linked into a program, which then registers it:
//   ggml_backend_register(ggml_backend_ternjit_reg());
// Built against one llama.cpp commit (.deps/llama.cpp/VERSION): ggml's backend interface
// has no stable ABI, so the library serves that commit's ggml only.
#pragma once

#include <stddef.h>

#include "ggml-backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The backend's registration (one device, "TERNJIT"; none when ternjit's engine cannot be
 *  made here, with the reason in ggml's log). */
GGML_BACKEND_API ggml_backend_reg_t ggml_backend_ternjit_reg(void);

/** The weights packed so far in this process: how many, the bytes they hold in ternjit's
 *  layout, and the bytes of the GGUF blocks they were packed from. Each may be NULL. Also
 *  reachable as ggml_backend_reg_get_proc_address(reg, "ggml_backend_ternjit_memory"). */
GGML_BACKEND_API void ggml_backend_ternjit_memory(size_t* weights, size_t* packed_bytes, size_t* source_bytes);

#ifdef __cplusplus
}
#endif
