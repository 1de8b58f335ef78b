// SPDX-License-Identifier: Apache-2.0
// loader.cpp - the one C-callable trampoline over every target's kernels, and the status mapping.
#include "jit/loader.h"

#include "ternjit/ternjit.h"

namespace ternjit::jit {

namespace {

std::int32_t trampoline_entry(const void* state, void* const* buffers) noexcept {
  try {
    auto r = static_cast<const Trampoline*>(state)->run(buffers);
    return r.ok() ? TERNJIT_OK : status_of(r.error().code);
  } catch (...) {
    return TERNJIT_INTERNAL;
  }
}

}  // namespace

KernelFn Trampoline::entry() { return &trampoline_entry; }

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
