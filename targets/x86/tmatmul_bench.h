// SPDX-License-Identifier: Apache-2.0
// tmatmul_bench.h - the TuningBench of x86 ternary matmuls: generate, pack, run on rotated random inputs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "targets/tuning.h"
#include "targets/x86/parallel.h"
#include "targets/x86/tmatmul.h"

namespace ternjit::targets::x86 {

/// Runs TMatMulKernels of one problem on a oneTBB arena of `threads` threads. Inputs are
/// random (x, scales, bias, residual; weights in {-1, 0, 1}), rotated through copies
/// (x, packed weights, y) totalling about options.rotate_bytes (at most 16 copies), so a
/// configuration is not flattered by a warm cache.
class TMatMulBench final : public TuningBench {
 public:
  /// Builds the inputs (allocates about 2 x options.rotate_bytes at most).
  TMatMulBench(const TMatMulProblem& problem, int threads, const TuningBenchOptions& options);
  ~TMatMulBench() override;
  TMatMulBench(const TMatMulBench&) = delete;
  TMatMulBench& operator=(const TMatMulBench&) = delete;
  /// Generates the kernel of `config` (TMatMulConfig text) and packs the weights (one
  /// copy per rotation). Thread-safe. Errors: InvalidArgument for a config that does not
  /// parse, is invalid for the problem or uses more threads than the arena has.
  [[nodiscard]] Result<std::unique_ptr<TuningRun>> prepare(std::string_view config) const override;
  /// The Parallel the kernels run on (the arena).
  [[nodiscard]] Parallel parallel() const;
  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace ternjit::targets::x86
