// SPDX-License-Identifier: Apache-2.0
// simt_runtime.h - the host side of the SIMT emulator: compile generated CUDA/HIP source on the CPU, launch its kernels.
//
// build() writes the exact text of a KernelSet's source to a temporary directory,
// compiles it with the host C++ compiler against tests/simt/simt_emu.h into a shared
// object and dlopens it. launch() runs one kernel: each block's threads are fibers
// (Boost.Context) on the calling thread, blocks one after another; a barrier or
// shuffle that can never complete is a Internal error naming the kernel ("deadlock").
// run_program() runs a whole launch plan the way the cuda/hip targets do: buffers
// with a guard page right after their last 16-byte granule (an overread faults), load-time
// values uploaded as LoadValue::encoded() bytes, weights packed by
// simt::pack_ternary_weight, scratch poisoned with 0xAB.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "targets/simt/generate.h"
#include "targets/load_value.h"
#include "ternjit/result.h"

namespace ternjit::simt_emu {

/// The host compiler to use: $TERNJIT_SIMT_CXX, else g++, else clang++-19, else clang++
/// found on PATH; "" when there is none.
std::string find_compiler();

/// A compiled and loaded translation unit of generated kernels.
class Module {
 public:
  /// Compiles `source` (plus one entry point per name in `kernels`) with `compiler`.
  /// Errors: Unavailable when the compiler fails (its output in the message).
  static Result<std::shared_ptr<Module>> build(const std::string& source, const std::vector<std::string>& kernels,
                                               const std::string& compiler);
  ~Module();
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  /// Runs kernel `name` over `grid` x `block` with warps of `warp` lanes; params[i]
  /// points at parameter i. Errors: NotFound (no such kernel), Internal (a deadlock or
  /// a misused primitive, the reason in the message).
  Result<void> launch(const std::string& name, const targets::simt::Dim3& grid, const targets::simt::Dim3& block,
                      unsigned warp, void** params) const;

 private:
  Module() = default;
  void* handle_ = nullptr;
  std::string dir_;
};

/// Runs `program` on `module` (built from program.source): `inputs` are the argument
/// bytes, `outputs` are filled (resized to plan.out_bytes, poisoned with 0x5A first).
Result<void> run_program(const Module& module, const targets::simt::KernelSet& program,
                         const std::vector<targets::LoadValue>& load_values,
                         const std::vector<std::vector<std::uint8_t>>& inputs,
                         std::vector<std::vector<std::uint8_t>>& outputs);

}  // namespace ternjit::simt_emu
