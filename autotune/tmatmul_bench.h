// SPDX-License-Identifier: Apache-2.0
// tmatmul_bench.h - the Evaluator of x86 ternary matmuls: generate, pack, run on rotated random inputs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "autotune/tuner.h"
#include "targets/x86/parallel.h"
#include "targets/x86/tmatmul.h"

namespace ternjit::autotune {

/// How TMatMulEvaluator runs candidates.
struct BenchOptions {
  int threads = 1;  ///< the pool's threads (configs may use up to this many)
  /// Inputs (x, packed weights, y) are rotated through copies totalling about this many
  /// bytes (at most 16 copies), so a configuration is not flattered by a warm cache.
  std::size_t rotate_bytes = std::size_t{64} << 20;
  std::uint64_t seed = 1;  ///< the random inputs
};

/// Measures TMatMulKernels of one problem on a oneTBB arena of options.threads threads.
/// Inputs are random (x, scales, bias, residual; weights in {-1, 0, 1}).
class TMatMulEvaluator final : public Evaluator {
 public:
  /// Builds the inputs (allocates about 2 x options.rotate_bytes at most).
  TMatMulEvaluator(const targets::x86::TMatMulProblem& problem, const BenchOptions& options);
  ~TMatMulEvaluator() override;
  TMatMulEvaluator(const TMatMulEvaluator&) = delete;
  TMatMulEvaluator& operator=(const TMatMulEvaluator&) = delete;

  /// Generates the kernel and packs the weights (one copy per rotation). Thread-safe.
  Result<std::unique_ptr<Prepared>> prepare(const targets::x86::TMatMulConfig& config) const override;
  /// Times the kernel (autotune::measure), rotating inputs call by call.
  Result<Measurement> measure(const Prepared& candidate, const MeasureOptions& options) const override;

  /// The Parallel the kernels run on (the arena).
  [[nodiscard]] targets::x86::Parallel parallel() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace ternjit::autotune
