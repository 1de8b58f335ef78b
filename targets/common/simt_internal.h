// SPDX-License-Identifier: Apache-2.0
// simt_internal.h - what simt_source.cpp and simt_tmatmul.cpp share: text helpers, limits, the tmatmul kernel writers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "targets/common/simt_source.h"

namespace ternjit::targets::simt::detail {

// Kernels index with 32-bit unsigned integers: every tensor stays below 2^31 elements
// and every buffer below 2^31 bytes.
constexpr std::int64_t kMaxElems = (std::int64_t{1} << 31) - 1024;
// The block of the row kernels (quantize, rmsnorm, rowsum) and of the 1-D kernels: a
// multiple of both warp sizes.
constexpr std::uint32_t kRowBlock = 256;
// The largest grid.y (and the 1-D kernels' grid.x): kernels loop past it.
constexpr std::int64_t kMaxGrid = 65535;
// Weights per 16-byte chunk of the weight layout.
constexpr std::int64_t kChunk = 64;

/// An epilogue operand of a tmatmul: the op that applies it and its [rows, cols] strides.
struct EpilogueRead {
  ir::Op op;
  std::int64_t row_stride, col_stride;
};

/// "123u": an unsigned literal.
std::string u(std::int64_t v);
/// The f32 expression of elementwise `op` on `a` (and `b`).
std::string apply(ir::Op op, const std::string& a, const std::string& b);
/// A kernel's opening line: extern "C" __global__ with its launch bound and parameters.
std::string head(const std::string& name, std::uint32_t block, const std::vector<std::string>& p);

// simt_tmatmul.cpp: the tmatmul kernels (dp4a / f32 sums, the mma.sync form) and the row-sum kernel.
std::string mma_kernel(const std::string& name, const TMatMulShape& s, const TMatMulConfig& c,
                       const std::vector<EpilogueRead>& epilogue, ir::Activation act);
std::string tmatmul_kernel(const std::string& name, const TMatMulShape& s, const TMatMulConfig& c,
                           const std::vector<EpilogueRead>& epilogue, ir::Activation act);
std::string rowsum_kernel(const std::string& name, std::int64_t m, std::int64_t k, std::int64_t group);

}  // namespace ternjit::targets::simt::detail
