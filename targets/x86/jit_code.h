// SPDX-License-Identifier: Apache-2.0
// jit_code.h - the Xbyak code buffer every x86 generator emits into (W^X, never RWX).
//
// Include only from generator .cpp files: xbyak.h is a large header.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include <xbyak/xbyak.h>

#include "ternjit/result.h"

namespace ternjit::targets::x86 {

/// An Xbyak CodeGenerator whose pages are mapped read-write while emitting and turned
/// read-execute by finalize(); they are never writable and executable at once.
class JitCode : public Xbyak::CodeGenerator {
 public:
  explicit JitCode(std::size_t max_bytes = 64 * 1024) : Xbyak::CodeGenerator(max_bytes, Xbyak::DontSetProtectRWE) {}

  /// Resolves labels and makes the code executable; returns the entry point.
  template <class Fn>
  Fn finalize() {
    ready();
    // readyRE() would only re-protect AutoGrow buffers: flip this one to read-execute here.
    setProtectModeRE();
    return getCode<Fn>();
  }
  /// The emitted bytes (valid after finalize()).
  [[nodiscard]] std::span<const std::uint8_t> bytes() const { return {getCode(), getSize()}; }
};

/// Runs `emit()` (which may throw Xbyak::Error or std::exception) and turns a failure
/// into an Internal error naming `what`.
template <class F>
Result<void> emit_guarded(const std::string& what, F&& emit) {
  try {
    emit();
    return success();
  } catch (const Xbyak::Error& e) {
    return make_error(ErrorCode::Internal, what + ": code generation failed: " + e.what());
  } catch (const std::exception& e) {
    return make_error(ErrorCode::Internal, what + ": code generation failed: " + e.what());
  }
}

}  // namespace ternjit::targets::x86
