// SPDX-License-Identifier: Apache-2.0
// target_description.h - one row of the target table (`ternjit info`, Engine::targets()):
// what a code generator says of itself. Its own header so that the target interface
// (targets/target.h) describes itself without the Engine's API.
#pragma once

#include <cstdint>
#include <string>

namespace ternjit {

/// One row of the target table (`ternjit info`).
struct TargetDescription {
  std::string name;         ///< "reference", "x86", "llvm", "cuda", ...
  std::string kind;         ///< "cpu", "gpu", "interpreter"
  bool available = false;
  std::string reason;       ///< why not available (empty when available)
  std::string device;       ///< device name ("Intel Xeon ...", "NVIDIA H100")
  std::uint64_t memory_bytes = 0;
  std::string features;     ///< ISA features or compute capability
  /// How its float results may differ from the reference target's beyond the reordered
  /// f32 sums every compiled target has ("" when nothing more), for `ternjit info`.
  std::string numerics;
  /// An absolute error any float output element may carry on top of `run --check`'s and
  /// `bench`'s relative tolerance: 2^-126 where the device may flush subnormal floats to
  /// zero (spirv), else 0.
  double abs_error_floor = 0;
};

}  // namespace ternjit
