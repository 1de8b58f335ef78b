// SPDX-License-Identifier: Apache-2.0
// dlpack_test.cpp - ternjit_run_dlpack from C++ with the caller's own dlpack.h (version 1.3) included before ternjit.h.
//
// The block below stands for a framework's dlpack.h (the specification's 1.x layout, minor
// version 3, with an enumerator ternjit.h does not declare): ternjit.h must use it as it is
// (no second definition), which the static_asserts and the calls through it check. The
// C test (tests/c/dlpack_test.c) covers ternjit.h's own declarations.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

// ---- the caller's dlpack.h (DLPack 1.3's types, abridged to what ternjit reads)
#define DLPACK_MAJOR_VERSION 1
#define DLPACK_MINOR_VERSION 3
#define DLPACK_FLAG_BITMASK_READ_ONLY (1UL << 0UL)
extern "C" {
typedef struct {
  uint32_t major;
  uint32_t minor;
} DLPackVersion;
typedef enum { kDLCPU = 1, kDLCUDA = 2, kDLTrn = 18 } DLDeviceType;
typedef struct {
  DLDeviceType device_type;
  int32_t device_id;
} DLDevice;
typedef enum { kDLInt = 0U, kDLUInt = 1U, kDLFloat = 2U, kDLBfloat = 4U } DLDataTypeCode;
typedef struct {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
} DLDataType;
typedef struct {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
} DLTensor;
typedef struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
} DLManagedTensorVersioned;
}
// ---- end of the caller's dlpack.h

#include <doctest/doctest.h>

#include "ternjit/ternjit.h"

static_assert(DLPACK_MINOR_VERSION == 3, "ternjit.h redefined the caller's DLPack version");
static_assert(kDLTrn == 18, "the caller's enumerators are the ones in use");

namespace {

DLManagedTensorVersioned make(void* data, DLDataType dtype, std::vector<std::int64_t>& shape,
                              std::int64_t* strides = nullptr) {
  DLManagedTensorVersioned t{};
  t.version = {1, 3};
  t.dl_tensor.data = data;
  t.dl_tensor.device = {kDLCPU, 0};
  t.dl_tensor.ndim = static_cast<std::int32_t>(shape.size());
  t.dl_tensor.dtype = dtype;
  t.dl_tensor.shape = shape.data();
  t.dl_tensor.strides = strides;
  return t;
}

TEST_CASE("DLPack from C++: a caller's dlpack.h, zero copy in and out, refusals") {
  ternjit_engine_options o;
  ternjit_engine_options_init(&o);
  o.cache_dir = "off";
  o.threads = 1;
  ternjit_engine* e = nullptr;
  REQUIRE(ternjit_engine_create(&o, &e) == TERNJIT_OK);
  const std::string src =
      "layer L {\n    fn f(x: Tensor<i8>[M, K], s: Tensor[K]) -> Tensor[M, K] {\n"
      "        return cast<f32>(x) * s\n    }\n}\n";
  ternjit_program* p = nullptr;
  REQUIRE(ternjit_compile(e, src.data(), src.size(), "l.tri", &p) == TERNJIT_OK);

  std::vector<std::int8_t> x{1, -2, 3, -4, 5, -6};
  std::vector<float> s{0.5f, 2.0f, -1.0f};
  std::vector<float> y(6, std::numeric_limits<float>::quiet_NaN());
  std::vector<std::int64_t> xs{2, 3}, ss{3}, ys{2, 3};
  DLManagedTensorVersioned tx = make(x.data(), {kDLInt, 8, 1}, xs);
  DLManagedTensorVersioned ts = make(s.data(), {kDLFloat, 32, 1}, ss);
  DLManagedTensorVersioned ty = make(y.data(), {kDLFloat, 32, 1}, ys);
  DLManagedTensorVersioned* ins[] = {&tx, &ts};
  DLManagedTensorVersioned* outs[] = {&ty};
  REQUIRE(ternjit_run_dlpack(p, "L.f", ins, 2, outs, 1) == TERNJIT_OK);
  for (std::size_t i = 0; i < 6; ++i) CHECK(y[i] == static_cast<float>(x[i]) * s[i % 3]);

  ternjit_tensor view{};
  REQUIRE(ternjit_tensor_from_dlpack(&tx, 0, &view) == TERNJIT_OK);
  CHECK(view.data == x.data());
  CHECK(view.dtype == TERNJIT_I8);

  // A column of a wider matrix (strides {4, 1}, shape {2, 3}) is not compact: refused.
  std::int64_t wide[] = {4, 1};
  tx.dl_tensor.strides = wide;
  CHECK(ternjit_run_dlpack(p, "L.f", ins, 2, outs, 1) == TERNJIT_INVALID_ARGUMENT);
  CHECK(std::string(ternjit_last_error()).find("dim 0 has stride 4, expected 3") != std::string::npos);
  // Strides of a dim of extent 1 do not matter; compact strides given explicitly are fine.
  std::int64_t compact[] = {3, 1};
  tx.dl_tensor.strides = compact;
  CHECK(ternjit_run_dlpack(p, "L.f", ins, 2, outs, 1) == TERNJIT_OK);
  std::vector<std::int64_t> one{1, 3};
  std::int64_t odd[] = {77, 1};
  DLManagedTensorVersioned row = make(x.data(), {kDLInt, 8, 1}, one, odd);
  std::vector<std::int64_t> yone{1, 3};
  DLManagedTensorVersioned yrow = make(y.data(), {kDLFloat, 32, 1}, yone);
  DLManagedTensorVersioned* ins1[] = {&row, &ts};
  DLManagedTensorVersioned* outs1[] = {&yrow};
  CHECK(ternjit_run_dlpack(p, "L.f", ins1, 2, outs1, 1) == TERNJIT_OK);
  // A device ternjit.h never named, a wrong dtype for the function, a bfloat16 accepted as such.
  ts.dl_tensor.device.device_type = kDLTrn;
  CHECK(ternjit_run_dlpack(p, "L.f", ins, 2, outs, 1) == TERNJIT_INVALID_ARGUMENT);
  ts.dl_tensor.device.device_type = kDLCPU;
  ts.dl_tensor.dtype = {kDLBfloat, 16, 1};
  CHECK(ternjit_run_dlpack(p, "L.f", ins, 2, outs, 1) == TERNJIT_INVALID_ARGUMENT);  // the function takes f32
  CHECK(ternjit_tensor_from_dlpack(&ts, 0, &view) == TERNJIT_OK);
  CHECK(view.dtype == TERNJIT_BF16);
  ts.dl_tensor.dtype = {kDLUInt, 16, 1};
  CHECK(ternjit_tensor_from_dlpack(&ts, 0, &view) == TERNJIT_INVALID_ARGUMENT);
  CHECK(ternjit_tensor_from_dlpack(nullptr, 0, &view) == TERNJIT_INVALID_ARGUMENT);
  CHECK(ternjit_tensor_from_dlpack(&tx, 0, nullptr) == TERNJIT_INVALID_ARGUMENT);

  ternjit_program_destroy(p);
  ternjit_engine_destroy(e);
}

}  // namespace
