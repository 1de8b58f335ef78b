// SPDX-License-Identifier: Apache-2.0
// loader.cpp - the one C-callable trampoline over every target's kernels, and the status mapping.
#include "jit/loader.h"

#include <exception>
#include <string_view>

#include "ternjit/ternjit.h"

namespace ternjit::jit {

namespace {

// Records a failed call's message; an allocation failure leaves it empty (the status still says).
void record(std::string_view message) noexcept {
  try {
    last_error().assign(message);
  } catch (...) {
    last_error().clear();
  }
}

std::int32_t trampoline_entry(const void* state, void* const* buffers) noexcept {
  last_error().clear();
  try {
    auto r = static_cast<const Trampoline*>(state)->run(buffers);
    if (r.ok()) return TERNJIT_OK;
    return kernel_failed(r.error());
  } catch (const std::exception& e) {
    record(std::string("kernel: internal error: unexpected exception: ") + e.what());
  } catch (...) {
    record("kernel: internal error: unexpected non-standard exception");
  }
  return TERNJIT_INTERNAL;
}

}  // namespace

KernelFn Trampoline::entry() { return &trampoline_entry; }

std::int32_t kernel_failed(const Error& error) noexcept {
  try {
    std::string text = "kernel: " + render(error);
    while (!text.empty() && text.back() == '\n') text.pop_back();
    record(text);
  } catch (...) {
    last_error().clear();
  }
  return status_of(error.code);
}

std::string& last_error() noexcept {
  // The only per-thread state of the library (ternjit_last_error needs one per thread).
  thread_local std::string message;
  return message;
}

std::int32_t status_of(ErrorCode code) {
  switch (code) {
    case ErrorCode::InvalidInput: return TERNJIT_INVALID_INPUT;
    case ErrorCode::InvalidArgument: return TERNJIT_INVALID_ARGUMENT;
    case ErrorCode::NotFound: return TERNJIT_NOT_FOUND;
    case ErrorCode::Unsupported: return TERNJIT_UNSUPPORTED;
    case ErrorCode::Unavailable: return TERNJIT_UNAVAILABLE;
    case ErrorCode::IoError: return TERNJIT_IO_ERROR;
    case ErrorCode::Internal: return TERNJIT_INTERNAL;
  }
  return TERNJIT_INTERNAL;
}

}  // namespace ternjit::jit
