// SPDX-License-Identifier: Apache-2.0
// loader.h - the C-callable trampoline around a target's loaded kernel, and error codes as ternjit_status.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "targets/target.h"
#include "ternjit/engine.h"
#include "ternjit/result.h"

namespace ternjit::jit {

/// A target's LoadedKernel behind the KernelFn convention of engine.h: `entry(state,
/// buffers)` never throws and returns 0 or a ternjit_status; `run` keeps the message.
class Trampoline {
 public:
  /// `rows` > 0: a kernel compiled for run-time rows (LoadedKernel::run_rows) called
  /// with that many rows.
  explicit Trampoline(targets::LoadedKernel loaded, std::int64_t rows = 0) : loaded_(std::move(loaded)), rows_(rows) {}
  /// The C-callable entry; its state argument is `this` (state()).
  [[nodiscard]] static KernelFn entry();
  [[nodiscard]] const void* state() const { return this; }
  /// The kernel's computation with its error message.
  [[nodiscard]] Result<void> run(void* const* buffers) const {
    return rows_ > 0 ? loaded_.run_rows(loaded_.state, buffers, rows_) : loaded_.run(loaded_.state, buffers);
  }
  /// The code path the target reported ("avx512_vnni", "-").
  [[nodiscard]] const std::string& isa() const { return loaded_.isa; }
  /// The framework launch path of a GPU target (LoadedKernel::launch). Errors:
  /// Unsupported for a kernel of a CPU target.
  [[nodiscard]] Result<void> launch(void* stream, void* const* device_buffers) const {
    if (!loaded_.launch)
      return make_error(ErrorCode::Unsupported, "this kernel's target ('" + loaded_.isa +
                                                    "' code) runs on host memory: it has no device launch");
    return loaded_.launch(loaded_.state, stream, device_buffers);
  }
  /// LoadedKernel::device_handles (empty for a CPU target).
  [[nodiscard]] const std::vector<std::uintptr_t>& device_handles() const { return loaded_.device_handles; }

 private:
  targets::LoadedKernel loaded_;
  std::int64_t rows_ = 0;
};

/// The ternjit_status value (ternjit.h) of an error code: InvalidInput 1 ... Internal 7.
std::int32_t status_of(ErrorCode code);

/// Records a kernel entry's failure as the thread's message ("kernel: " + the rendered
/// error) and returns its ternjit_status; never throws (the message is empty when even
/// that allocation fails).
std::int32_t kernel_failed(const Error& error) noexcept;

/// The calling thread's message behind ternjit_last_error(): every C entry point and every
/// call of a kernel entry clears it when it starts and sets it when it fails (ternjit.h).
std::string& last_error() noexcept;

}  // namespace ternjit::jit
