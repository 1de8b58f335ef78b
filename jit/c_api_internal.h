// SPDX-License-Identifier: Apache-2.0
// c_api_internal.h - what the C ABI's source files share (jit/c_api.cpp: engines, programs,
// kernels; c_api_bitnet.cpp: BitNet and Hugging Face models; c_api_dlpack.cpp: DLPack and the
// ternary matmul dispatch): the opaque handles of ternjit.h and the helpers every entry
// point uses to report a failure (c_api.cpp says how: a status plus the thread's message).
#pragma once

#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "jit/loader.h"
#include "ternjit/engine.h"
#include "ternjit/result.h"
#include "ternjit/ternjit.h"
#include "ternjit/tmatmul.h"
#include "ternjit/types.h"

// The opaque handles of ternjit.h. A kernel handle is the C++ Kernel itself (owned by
// its Program), so ternjit_kernel is never defined: it is only a pointer type.
struct ternjit_engine {
  explicit ternjit_engine(ternjit::Engine e) : engine(std::move(e)), dispatcher(engine) {}
  ternjit::Engine engine;
  ternjit::TMatMulDispatcher dispatcher;  // ternjit_tmatmul_dispatch; destroyed before the engine
};

// A declaration with the flat arrays ternjit_tensor_decl points into.
struct CTensorDecl {
  ternjit::TensorDecl decl;
  std::vector<int64_t> extents;
  std::vector<const char*> symbols;
};

// A declaration list built once; nothing is resized after the pointers are taken.
struct CFunctionDecl {
  std::string name;
  std::vector<CTensorDecl> inputs, outputs;
};

struct ternjit_program {
  explicit ternjit_program(ternjit::Program p);
  ternjit::Program program;
  std::vector<CFunctionDecl> functions;  // the module never changes: built once
  std::vector<CTensorDecl> params;       // declarations only; the bound state is read live
};

namespace ternjit::jit::capi {

// Sets the thread's last-error message (an empty one if even that runs out of memory).
void set_error(std::string_view message) noexcept;
// Records "function: what detail" without allocating before the try (used in handlers).
void set_error(const char* function, const char* what, const char* detail = "") noexcept;
// The C status of an error code: one mapping, shared with the kernel trampolines.
ternjit_status status_of(ErrorCode code);
// Records `e` (all its diagnostics, `file:line:col: error: ...`) and returns its status.
ternjit_status fail(const Error& e);
// Records an API-misuse message "function: message" and returns INVALID_ARGUMENT.
ternjit_status misuse(const char* function, std::string_view message);
// The C dtype as an element kind; false for a value outside the enum.
bool kind_of(int dtype, ElemKind* out);
// The element kind as a C dtype (Bool, one byte per element, reads as TERNJIT_U8).
ternjit_dtype dtype_of(ElemKind kind);
// The C weight format as a WeightFormat; false for a value outside the enum.
bool weight_format_of(int format, WeightFormat* out);
// Checks one dtype/rank/shape triple and builds a TensorView of `data`; `what` names the
// tensor in messages ("input 0"). Returns TERNJIT_OK or a recorded misuse.
ternjit_status make_view(const char* function, const std::string& what, void* data, int dtype, const int64_t* shape,
                         int32_t rank, TensorView* out);
// Converts `n` C tensors; `kind` is "input" or "output".
ternjit_status make_views(const char* function, const char* kind, const ternjit_tensor* tensors, size_t n,
                          bool need_data, std::vector<TensorView>* out);

// Runs `body` (returning a ternjit_status); no exception escapes.
template <class F>
ternjit_status guarded(const char* function, F&& body) noexcept {
  ternjit::jit::last_error().clear();
  try {
    return body();
  } catch (const std::bad_alloc&) {
    set_error(function, "out of memory");
  } catch (const std::exception& e) {
    set_error(function, "internal error: unexpected exception: ", e.what());
  } catch (...) {
    set_error(function, "internal error: unexpected non-standard exception");
  }
  return TERNJIT_INTERNAL;
}

// The int a C caller stored in an enum, read without an enum-typed load: a value outside
// the enumerators (e.g. (ternjit_dtype)99) is fine in C but undefined to load as the C++ enum.
template <class E>
int raw_enum(const E& e) {
  static_assert(std::is_enum_v<E> && sizeof(E) == sizeof(int));
  int v;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

}  // namespace ternjit::jit::capi
