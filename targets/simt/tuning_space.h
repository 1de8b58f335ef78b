// SPDX-License-Identifier: Apache-2.0
// tuning_space.h - the SIMT tmatmul knobs (threads per column, columns per block, unroll, rows) as a TuningSpace.
//
// The cuda and hip targets decide at compile (Target::decides_at_compile): the engine asks
// the tuning source for each tmatmul's configuration (SimtOptions::decisions, in
// tmatmul_shapes() order) before generate(). A space's bench runs candidates on a device,
// which only the runtime target has, so the target hands a factory in; without one the
// space is described (candidates, estimates) and its bench is Unavailable.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "targets/simt/generate.h"
#include "targets/tuning.h"

namespace ternjit::targets::simt {

/// Makes the bench of one tmatmul problem (the runtime target's: compile, load, time).
using BenchFactory =
    std::function<Result<std::unique_ptr<TuningBench>>(const TMatMulShape&, const TuningBenchOptions&)>;

/// What a space describes besides the shape.
struct SpaceOptions {
  std::string op = "cuda.tmatmul";  ///< the problem's op family ("cuda.tmatmul", "hip.tmatmul")
  std::string device_key;           ///< the device in the family text ("sm_90", "gfx90a", ...)
  std::uint32_t warp_size = 32;
  bool int_dot = true;
  bool tensor_cores = false;  ///< CUDA sm_80+: the mma.sync form is a candidate (SimtOptions::tensor_cores)
  std::uint32_t multiprocessors = 132;  ///< SMs / CUs (the estimate's parallelism)
  double bandwidth_gbs = 3000;          ///< device memory bandwidth (the estimate's roofline)
};

/// Every configuration the space offers for `s` (config_valid for the warp size); with
/// `tensor_cores`, also the mma forms (M >= 16: cols 2/4/8 warps, rows 1/2, cpt 1/2/4).
std::vector<TMatMulConfig> candidate_configs(const TMatMulShape& s, std::uint32_t warp_size, bool tensor_cores = false);

/// A roofline estimate of one configuration in nanoseconds (weight bytes over the
/// bandwidth, scaled by the fraction of the device the grid fills and by the
/// re-reads of the weights per row pass).
double estimate_ns(const TMatMulShape& s, const TMatMulConfig& c, const SpaceOptions& o);

/// The tuning space of tmatmul `s`.
std::unique_ptr<TuningSpace> make_tmatmul_space(const TMatMulShape& s, const SpaceOptions& o, BenchFactory bench);

}  // namespace ternjit::targets::simt
