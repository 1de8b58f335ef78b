// SPDX-License-Identifier: Apache-2.0
// tmatmul_space.h - the tuning knobs of the x86 ternary matmul: declared ranges and an analytic cost model.
//
// The search space of one (problem, isa) is the cross product of the knob ranges below,
// restricted by the declared constraints, and then by validate(): every config returned
// can be generated, so the tuner never discovers an invalid combination by a crash.
//   variant        int8 x: dot, mask_dot (K <= 131071), amx (isa amx, M >= 16), base3 (K <= 131071,
//                  isa avx512_vnni/amx on a host with AVX512-VBMI, vec 512, no K groups); float x: float
//   vector_bits    256; 512 on the avx512 family
//   n_block        int8: {1,2,3,4} x the group (4 x int32 lanes; base3 5 x); float: {1,2,3,4} x 16 (and lanes)
//   m_block        {1,2,3,4,6,8,12,16}, <= M (a larger block runs as M rows: equivalent, left out)
//   k_unroll       {1, 2, 4}
//   prefetch_bytes {0, 1024, 4096}
//   threads        {1, 2, 4, ...} up to max_threads, and max_threads itself
//   split_k        1; with threads > 1, M <= 4 and K >= 1024 (int8 only): also 2..threads (powers of 2)
// The default configuration (default_config) is always part of the space.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "targets/tuning.h"
#include "targets/x86/isa.h"
#include "targets/x86/tmatmul.h"

namespace ternjit::targets::x86 {

/// Every valid configuration of `problem` on `isa` with at most `max_threads` threads,
/// in a fixed (deterministic) order; default_config(problem, isa, max_threads) included.
std::vector<TMatMulConfig> search_space(const TMatMulProblem& problem, Isa isa, int max_threads);

/// The knob ranges above as text (for `ternjit tune --help` and the README).
std::string describe_space();

/// A cheap analytic estimate of one call's time in nanoseconds: bytes moved (packed
/// weights re-read per row block, x, y, split-K partials) over a nominal bandwidth,
/// and instructions (dot products, decode, padding of the last panel and row block)
/// over a nominal throughput, divided across threads, plus per-thread overhead. Only
/// the ranking matters: the tuner uses it to prune and order candidates.
double estimated_cost(const TMatMulProblem& problem, const TMatMulConfig& config);

/// The tmatmul call `problem` on `isa` with at most `max_threads` threads as a
/// TuningSpace: op "x86.tmatmul", the family text names K, N, kinds and epilogue, the
/// conditions `isa` and `threads` (max_threads); candidates are search_space() with
/// estimated_cost() and the algorithm class (variant and vector width) as their group;
/// valid() parses a config and checks it against the problem, the isa and the thread
/// count; bench() is a TMatMulBench (tmatmul_bench.h), Unavailable when the host cannot
/// run `isa`.
std::unique_ptr<TuningSpace> tmatmul_tuning_space(const TMatMulProblem& problem, Isa isa, int max_threads);

}  // namespace ternjit::targets::x86
