// SPDX-License-Identifier: Apache-2.0
// tmatmul.h - the ternary matmul dispatch from C++: a kernel for a descriptor, without .tri text.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "ternjit/engine.h"
#include "ternjit/result.h"
#include "ternjit/ternjit.h"

namespace ternjit {

/// The descriptor, call arguments and kernel entry are the C ABI's (ternjit.h, "the
/// ternary matmul dispatch"): one definition for both languages.
using TMatMulDesc = ::ternjit_tmatmul_desc;
using TMatMulArgs = ::ternjit_tmatmul_args;
using TMatMulFn = ::ternjit_tmatmul_fn;

/// A dispatched kernel: the entry and its state, valid while the dispatcher lives.
struct TMatMulKernel {
  TMatMulFn fn = nullptr;
  const void* state = nullptr;
  /// Runs one call; returns 0 or a ternjit_status (the message: ternjit_last_error()).
  std::int32_t operator()(const TMatMulArgs& args) const { return fn(state, &args); }
};

/// A weight with its scale and bias bound once to a descriptor's kernel (TMatMulDispatcher::bind):
/// calls pass only x (x_scale, residual), args.w, args.w_scale and args.bias null. Move-only;
/// the kernel is valid while this object lives; the dispatcher (and its engine) must outlive it.
class TMatMulBound {
 public:
  ~TMatMulBound();
  TMatMulBound(TMatMulBound&&) noexcept;
  TMatMulBound& operator=(TMatMulBound&&) noexcept;

  /// The entry and its state. Thread-safe.
  [[nodiscard]] TMatMulKernel kernel() const;
  /// Host bytes held resident: the stored weight, scales and bias plus the panels the
  /// kernels packed from them so far (ternjit_tmatmul_bound_bytes).
  [[nodiscard]] std::size_t bytes() const;

  /// Internal.
  struct Impl;
  explicit TMatMulBound(std::unique_ptr<Impl> impl);

 private:
  std::unique_ptr<Impl> impl_;
};

/// Kernels by descriptor over an Engine: the first dispatch of a descriptor generates the
/// layer's IR and compiles it through the engine's flow (cache, tuning, run-time rows);
/// later ones are a lookup. Thread-safe. The engine must outlive the dispatcher; a
/// descriptor with `threads` other than the engine's compiles on an engine of its own
/// made with the same options and that thread count.
class TMatMulDispatcher {
 public:
  explicit TMatMulDispatcher(Engine& engine);
  ~TMatMulDispatcher();
  TMatMulDispatcher(TMatMulDispatcher&&) noexcept;
  TMatMulDispatcher& operator=(TMatMulDispatcher&&) noexcept;

  /// A descriptor with the defaults of ternjit_tmatmul_desc_init and the given shape.
  static TMatMulDesc desc(std::int64_t m, std::int64_t k, std::int64_t n);

  /// The kernel of `desc`. Errors: InvalidArgument (a field out of range or an unknown
  /// enum value), Unsupported (a combination the engine does not compute, named).
  Result<TMatMulKernel> dispatch(const TMatMulDesc& desc);

  /// Binds `w` (`w_bytes`: exactly what the format needs), `w_scale` and `bias` (each
  /// non-null exactly when `desc` asks for it) to the kernel of `desc`; the buffers may be
  /// freed after. Errors: as dispatch; InvalidArgument (a null or wrong-sized buffer, one
  /// the descriptor does not take), InvalidInput (weight bytes that are not ternary, named).
  Result<TMatMulBound> bind(const TMatMulDesc& desc, const void* w, std::size_t w_bytes, const float* w_scale,
                            const float* bias);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace ternjit
