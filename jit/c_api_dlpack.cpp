// SPDX-License-Identifier: Apache-2.0
// c_api_dlpack.cpp - the C ABI's DLPack entry points (ternjit_tensor_from_dlpack,
// ternjit_run_dlpack) and the ternary matmul dispatch (ternjit_tmatmul_dispatch, over
// ternjit/tmatmul.h); the conventions of jit/c_api.cpp (jit/c_api_internal.h).
#include <cstdint>
#include <string>
#include <vector>

#include "jit/c_api_internal.h"

using namespace ternjit::jit::capi;

namespace {

// The ternjit_tensor of a DLPack tensor (ternjit.h, ternjit_run_dlpack): version 1.x, CPU,
// a dtype ternjit takes, compact row-major; `writable` also refuses a read-only one.
ternjit_status dlpack_view(const char* function, const std::string& what, const DLManagedTensorVersioned* m,
                           bool writable, ternjit_tensor* out) {
  if (m == nullptr) return misuse(function, what + " is null");
  if (m->version.major != DLPACK_MAJOR_VERSION)
    return misuse(function, what + " is DLPack " + std::to_string(m->version.major) + "." +
                                std::to_string(m->version.minor) + ": only DLPack 1.x is read");
  const DLTensor& t = m->dl_tensor;
  if (raw_enum(t.device.device_type) != kDLCPU)
    return misuse(function, what + " is on DLPack device type " + std::to_string(raw_enum(t.device.device_type)) +
                                ": only kDLCPU (1) memory is read");
  if (writable && (m->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0)
    return misuse(function, what + " is read-only (DLPACK_FLAG_BITMASK_READ_ONLY)");
  struct Kind {
    uint8_t code, bits;
    ternjit_dtype dtype;
  };
  static constexpr Kind kKinds[] = {{kDLFloat, 32, TERNJIT_F32}, {kDLFloat, 16, TERNJIT_F16},
                                    {kDLBfloat, 16, TERNJIT_BF16}, {kDLInt, 8, TERNJIT_I8},
                                    {kDLUInt, 8, TERNJIT_U8}, {kDLInt, 32, TERNJIT_I32}};
  const Kind* kind = nullptr;
  for (const Kind& k : kKinds)
    if (k.code == t.dtype.code && k.bits == t.dtype.bits) kind = &k;
  if (kind == nullptr || t.dtype.lanes != 1)
    return misuse(function, what + " has DLPack dtype code " + std::to_string(t.dtype.code) + ", " +
                                std::to_string(t.dtype.bits) + " bits, " + std::to_string(t.dtype.lanes) +
                                " lanes: ternjit takes float32, float16, bfloat16, int8, uint8 or int32, 1 lane");
  if (t.ndim < 0 || t.ndim > 64) return misuse(function, what + " has ndim " + std::to_string(t.ndim));
  if (t.ndim > 0 && t.shape == nullptr) return misuse(function, what + " has a null shape");
  int64_t elems = 1;
  for (int32_t i = 0; i < t.ndim; ++i) {
    if (t.shape[i] < 0) return misuse(function, what + " has a negative extent in dim " + std::to_string(i));
    if (__builtin_mul_overflow(elems, t.shape[i], &elems))
      return misuse(function, what + " has more elements than an int64 counts");
  }
  // Compact row-major: each stride the product of the extents after it, except where the
  // extent is 1 (any stride reads the same element). An empty tensor has no layout.
  if (t.strides != nullptr && elems > 0) {
    int64_t expect = 1;
    for (int32_t i = t.ndim - 1; i >= 0; --i) {
      if (t.shape[i] != 1 && t.strides[i] != expect)
        return misuse(function, what + " is not contiguous row-major: dim " + std::to_string(i) + " has stride " +
                                    std::to_string(t.strides[i]) + ", expected " + std::to_string(expect) +
                                    " (make it contiguous first; ternjit makes no copy)");
      expect *= t.shape[i];
    }
  }
  if (t.data == nullptr && elems > 0) return misuse(function, what + " has null data");
  out->data = t.data == nullptr ? nullptr : static_cast<char*>(t.data) + t.byte_offset;
  out->dtype = kind->dtype;
  out->rank = t.ndim;
  out->shape = t.shape;
  return TERNJIT_OK;
}

}  // namespace

extern "C" {

ternjit_status ternjit_tensor_from_dlpack(const DLManagedTensorVersioned* tensor, int32_t writable,
                                          ternjit_tensor* out) {
  constexpr const char* fn = "ternjit_tensor_from_dlpack";
  return guarded(fn, [&] {
    if (out == nullptr) return misuse(fn, "out is null");
    return dlpack_view(fn, "tensor", tensor, writable != 0, out);
  });
}

ternjit_status ternjit_run_dlpack(ternjit_program* program, const char* function,
                                  DLManagedTensorVersioned* const* inputs, size_t n_inputs,
                                  DLManagedTensorVersioned* const* outputs, size_t n_outputs) {
  constexpr const char* fn = "ternjit_run_dlpack";
  return guarded(fn, [&] {
    if (program == nullptr) return misuse(fn, "program is null");
    if (function == nullptr) return misuse(fn, "function is null");
    if (n_inputs > 0 && inputs == nullptr) return misuse(fn, "inputs is null but n_inputs is " + std::to_string(n_inputs));
    if (n_outputs > 0 && outputs == nullptr)
      return misuse(fn, "outputs is null but n_outputs is " + std::to_string(n_outputs));
    std::vector<ternjit_tensor> in(n_inputs), out(n_outputs);
    for (size_t i = 0; i < n_inputs; ++i)
      if (auto st = dlpack_view(fn, "input " + std::to_string(i), inputs[i], false, &in[i]); st != TERNJIT_OK)
        return st;
    for (size_t i = 0; i < n_outputs; ++i)
      if (auto st = dlpack_view(fn, "output " + std::to_string(i), outputs[i], true, &out[i]); st != TERNJIT_OK)
        return st;
    std::vector<ternjit::TensorView> vin, vout;
    if (auto st = make_views(fn, "input", in.data(), in.size(), true, &vin); st != TERNJIT_OK) return st;
    if (auto st = make_views(fn, "output", out.data(), out.size(), true, &vout); st != TERNJIT_OK) return st;
    if (auto r = program->program.run(function, vin, vout); !r.ok()) return fail(r.error());
    return TERNJIT_OK;
  });
}

void ternjit_tmatmul_desc_init(ternjit_tmatmul_desc* desc) {
  (void)guarded("ternjit_tmatmul_desc_init", [&] {
    if (desc == nullptr) return misuse("ternjit_tmatmul_desc_init", "desc is null");
    *desc = ternjit::TMatMulDispatcher::desc(1, 0, 0);
    return TERNJIT_OK;
  });
}

ternjit_status ternjit_tmatmul_dispatch(ternjit_engine* engine, const ternjit_tmatmul_desc* desc,
                                        ternjit_tmatmul_fn* fn_out, const void** state) {
  constexpr const char* fn = "ternjit_tmatmul_dispatch";
  return guarded(fn, [&] {
    if (fn_out == nullptr) return misuse(fn, "fn is null");
    if (state == nullptr) return misuse(fn, "state is null");
    *fn_out = nullptr;
    *state = nullptr;
    if (engine == nullptr) return misuse(fn, "engine is null");
    if (desc == nullptr) return misuse(fn, "desc is null");
    auto k = engine->dispatcher.dispatch(*desc);
    if (!k.ok()) return fail(k.error());
    *fn_out = k->fn;
    *state = k->state;
    return TERNJIT_OK;
  });
}

// A bound weight of the ternary matmul dispatch.
struct ternjit_tmatmul_bound {
  ternjit::TMatMulBound bound;
};

ternjit_status ternjit_tmatmul_bind(ternjit_engine* engine, const ternjit_tmatmul_desc* desc, const void* w,
                                    size_t w_bytes, const float* w_scale, const float* bias,
                                    ternjit_tmatmul_bound** out) {
  constexpr const char* fn = "ternjit_tmatmul_bind";
  return guarded(fn, [&] {
    if (out == nullptr) return misuse(fn, "out is null");
    *out = nullptr;
    if (engine == nullptr) return misuse(fn, "engine is null");
    if (desc == nullptr) return misuse(fn, "desc is null");
    auto b = engine->dispatcher.bind(*desc, w, w_bytes, w_scale, bias);
    if (!b.ok()) return fail(b.error());
    *out = new ternjit_tmatmul_bound{std::move(b).value()};
    return TERNJIT_OK;
  });
}

ternjit_status ternjit_tmatmul_bound_entry(const ternjit_tmatmul_bound* bound, ternjit_tmatmul_fn* fn_out,
                                           const void** state) {
  constexpr const char* fn = "ternjit_tmatmul_bound_entry";
  return guarded(fn, [&] {
    if (fn_out == nullptr) return misuse(fn, "fn is null");
    if (state == nullptr) return misuse(fn, "state is null");
    *fn_out = nullptr;
    *state = nullptr;
    if (bound == nullptr) return misuse(fn, "bound is null");
    const ternjit::TMatMulKernel k = bound->bound.kernel();
    *fn_out = k.fn;
    *state = k.state;
    return TERNJIT_OK;
  });
}

size_t ternjit_tmatmul_bound_bytes(const ternjit_tmatmul_bound* bound) {
  try {
    return bound == nullptr ? 0 : bound->bound.bytes();
  } catch (...) {  // a mutex that cannot lock: no exception crosses the C ABI
    return 0;
  }
}

void ternjit_tmatmul_bound_destroy(ternjit_tmatmul_bound* bound) {
  (void)guarded("ternjit_tmatmul_bound_destroy", [&] {
    delete bound;
    return TERNJIT_OK;
  });
}

}  // extern "C"
