/* SPDX-License-Identifier: Apache-2.0 */
/* dlpack_test.c - ternjit_run_dlpack and ternjit_tensor_from_dlpack in strict C11: zero copy, and every refusal. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "expect.h"
#include "ternjit/ternjit.h"

static const char kSource[] =
    "layer L {\n"
    "    fn f(x: Tensor[M, K]) -> Tensor[M, K] {\n"
    "        return relu(x) * 2\n"
    "    }\n"
    "}\n";

static DLManagedTensorVersioned tensor(void* data, int64_t* shape, int32_t ndim, int64_t* strides) {
  DLManagedTensorVersioned t;
  memset(&t, 0, sizeof t);
  t.version.major = 1;
  t.version.minor = 0;
  t.dl_tensor.data = data;
  t.dl_tensor.device.device_type = kDLCPU;
  t.dl_tensor.ndim = ndim;
  t.dl_tensor.dtype.code = kDLFloat;
  t.dl_tensor.dtype.bits = 32;
  t.dl_tensor.dtype.lanes = 1;
  t.dl_tensor.shape = shape;
  t.dl_tensor.strides = strides;
  return t;
}

int main(void) {
  ternjit_engine_options o;
  ternjit_engine_options_init(&o);
  o.cache_dir = "off";
  ternjit_engine* e = NULL;
  ternjit_program* p = NULL;
  EXPECT(ternjit_engine_create(&o, &e) == TERNJIT_OK);
  EXPECT(ternjit_compile(e, kSource, sizeof kSource - 1, "l.tri", &p) == TERNJIT_OK);
  EXPECT(ternjit_has_feature("dlpack") == 1);
  EXPECT(ternjit_has_feature("tmatmul-dispatch") == 1);

  /* x is a 2 x 3 view at byte offset 4 of a larger buffer, with explicit compact strides. */
  float xbuf[7] = {99, -1, 2, -3, 4, -5, 6};
  float y[6];
  int64_t shape[2] = {2, 3}, strides[2] = {3, 1};
  DLManagedTensorVersioned x = tensor(xbuf, shape, 2, strides);
  x.dl_tensor.byte_offset = sizeof(float);
  DLManagedTensorVersioned out = tensor(y, shape, 2, NULL);
  DLManagedTensorVersioned* ins[1] = {&x};
  DLManagedTensorVersioned* outs[1] = {&out};
  for (int i = 0; i < 6; ++i) y[i] = NAN;
  EXPECT(ternjit_run_dlpack(p, "L.f", ins, 1, outs, 1) == TERNJIT_OK);
  for (int i = 0; i < 6; ++i) EXPECT(y[i] == (xbuf[i + 1] > 0 ? 2 * xbuf[i + 1] : 0));
  EXPECT(strcmp(ternjit_last_error(), "") == 0);

  /* The view the library takes is the caller's memory itself. */
  ternjit_tensor view;
  EXPECT(ternjit_tensor_from_dlpack(&x, 0, &view) == TERNJIT_OK);
  EXPECT(view.data == (void*)&xbuf[1] && view.dtype == TERNJIT_F32 && view.rank == 2 && view.shape == shape);

  /* Refusals: each INVALID_ARGUMENT with a message, nothing written. */
  for (int i = 0; i < 6; ++i) y[i] = NAN;
  int64_t transposed[2] = {1, 2};
  x.dl_tensor.strides = transposed;
  EXPECT(ternjit_run_dlpack(p, "L.f", ins, 1, outs, 1) == TERNJIT_INVALID_ARGUMENT);
  EXPECT(strstr(ternjit_last_error(), "not contiguous row-major") != NULL);
  x.dl_tensor.strides = NULL;
  x.dl_tensor.dtype.bits = 64; /* float64 */
  EXPECT(ternjit_run_dlpack(p, "L.f", ins, 1, outs, 1) == TERNJIT_INVALID_ARGUMENT);
  EXPECT(strstr(ternjit_last_error(), "dtype") != NULL);
  x.dl_tensor.dtype.bits = 32;
  x.dl_tensor.dtype.lanes = 4;
  EXPECT(ternjit_run_dlpack(p, "L.f", ins, 1, outs, 1) == TERNJIT_INVALID_ARGUMENT);
  x.dl_tensor.dtype.lanes = 1;
  x.dl_tensor.device.device_type = kDLCUDA;
  EXPECT(ternjit_run_dlpack(p, "L.f", ins, 1, outs, 1) == TERNJIT_INVALID_ARGUMENT);
  EXPECT(strstr(ternjit_last_error(), "kDLCPU") != NULL);
  x.dl_tensor.device.device_type = kDLCPU;
  x.version.major = 0;
  EXPECT(ternjit_run_dlpack(p, "L.f", ins, 1, outs, 1) == TERNJIT_INVALID_ARGUMENT);
  x.version.major = 1;
  out.flags = DLPACK_FLAG_BITMASK_READ_ONLY;
  EXPECT(ternjit_run_dlpack(p, "L.f", ins, 1, outs, 1) == TERNJIT_INVALID_ARGUMENT);
  EXPECT(strstr(ternjit_last_error(), "read-only") != NULL);
  out.flags = 0;
  EXPECT(ternjit_run_dlpack(p, "L.f", NULL, 1, outs, 1) == TERNJIT_INVALID_ARGUMENT);
  ins[0] = NULL;
  EXPECT(ternjit_run_dlpack(p, "L.f", ins, 1, outs, 1) == TERNJIT_INVALID_ARGUMENT);
  for (int i = 0; i < 6; ++i) EXPECT(isnan(y[i]));
  /* A shape the function does not take is the run's own error. */
  ins[0] = &x;
  int64_t other[2] = {3, 2};
  out.dl_tensor.shape = other;
  EXPECT(ternjit_run_dlpack(p, "L.f", ins, 1, outs, 1) == TERNJIT_INVALID_ARGUMENT);

  ternjit_program_destroy(p);
  ternjit_engine_destroy(e);
  if (failures == 0) printf("dlpack_test: all passed\n");
  return failures == 0 ? 0 : 1;
}
