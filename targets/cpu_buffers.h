// SPDX-License-Identifier: Apache-2.0
// cpu_buffers.h - what CPU kernels (x86 plans, LLVM programs) check and borrow per call:
// the caller's buffers and a per-thread scratch arena. Header-only (the LLVM target,
// which ternjit_targets links, uses it too).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ternjit/result.h"

namespace ternjit::targets {

namespace detail {
inline bool overlaps(const void* a, std::size_t an, const void* b, std::size_t bn) {
  if (an == 0 || bn == 0) return false;
  const auto x = reinterpret_cast<std::uintptr_t>(a), y = reinterpret_cast<std::uintptr_t>(b);
  return x < y + bn && y < x + an;
}
}  // namespace detail

/// An (input, output) pair of buffers that may be one buffer (step_plan.h InPlace).
struct SameBuffer {
  std::size_t input = 0, output = 0;
};

/// Checks a call's `buffers` (inputs then outputs, with these byte sizes): InvalidArgument
/// for a null buffer that should hold data, and for an output overlapping an input or
/// another output. The one exception: output j may be exactly input i (the same address,
/// the same size) where `same` lists (i, j) (a kv_write chain updating a cache in place).
inline Result<void> check_buffers(void* const* buffers, std::span<const std::size_t> in_bytes,
                                  std::span<const std::size_t> out_bytes, std::span<const SameBuffer> same = {}) {
  const std::size_t n_in = in_bytes.size();
  for (std::size_t i = 0; i < n_in; ++i)
    if (buffers[i] == nullptr && in_bytes[i] != 0)
      return make_error(ErrorCode::InvalidArgument, "input " + std::to_string(i) + " is null");
  for (std::size_t j = 0; j < out_bytes.size(); ++j) {
    void* o = buffers[n_in + j];
    if (o == nullptr && out_bytes[j] != 0)
      return make_error(ErrorCode::InvalidArgument, "output " + std::to_string(j) + " is null");
    for (std::size_t i = 0; i < n_in; ++i) {
      if (!detail::overlaps(o, out_bytes[j], buffers[i], in_bytes[i])) continue;
      const bool allowed = o == buffers[i] && out_bytes[j] == in_bytes[i] &&
                           std::any_of(same.begin(), same.end(), [&](const SameBuffer& s) { return s.input == i && s.output == j; });
      if (allowed) continue;
      return make_error(ErrorCode::InvalidArgument,
                        "output " + std::to_string(j) + " overlaps input " + std::to_string(i) +
                            (std::any_of(same.begin(), same.end(), [&](const SameBuffer& s) { return s.input == i && s.output == j; })
                                 ? ": they may be the same buffer (updated in place), not a partial overlap"
                                 : ": only a cache updated in place (a kv_write chain from that input to that output) may share a buffer"));
    }
    for (std::size_t k = 0; k < j; ++k)
      if (detail::overlaps(o, out_bytes[j], buffers[n_in + k], out_bytes[k]))
        return make_error(ErrorCode::InvalidArgument,
                          "output " + std::to_string(j) + " overlaps output " + std::to_string(k));
  }
  return success();
}

/// 64-byte aligned scratch for one call: the calling thread's arena (grown as needed,
/// kept between calls), or a private buffer when that arena is already lent out on this
/// thread (a host running a kernel from inside a kernel's parallel task).
class ScratchLease {
 public:
  explicit ScratchLease(std::size_t bytes) : arena_(thread_arena()), nested_(arena_.in_use) {
    std::vector<std::uint8_t>& v = nested_ ? private_ : arena_.storage;
    if (v.size() < bytes + 64) v.resize(bytes + 64);
    const auto addr = reinterpret_cast<std::uintptr_t>(v.data());
    data_ = v.data() + (64 - addr % 64) % 64;
    arena_.in_use = true;
  }
  ~ScratchLease() {
    if (!nested_) arena_.in_use = false;
  }
  ScratchLease(const ScratchLease&) = delete;
  ScratchLease& operator=(const ScratchLease&) = delete;

  [[nodiscard]] std::uint8_t* data() const { return data_; }

 private:
  struct Arena {
    std::vector<std::uint8_t> storage;
    bool in_use = false;
  };
  static Arena& thread_arena() {
    thread_local Arena arena;
    return arena;
  }
  Arena& arena_;
  bool nested_;
  std::vector<std::uint8_t> private_;
  std::uint8_t* data_ = nullptr;
};

}  // namespace ternjit::targets
