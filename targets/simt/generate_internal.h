// SPDX-License-Identifier: Apache-2.0
// generate_internal.h - what the generator's files share: text helpers, limits, the kernel writers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "targets/common/kernel_source.h"
#include "targets/simt/generate.h"

namespace ternjit::targets::simt::detail {

using kernel_source::quote;
using kernel_source::u;

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

/// The f32 expression of elementwise `op` on `a` (and `b`).
std::string apply(ir::Op op, const std::string& a, const std::string& b);
/// A kernel's opening line: extern "C" __global__ with its launch bound and parameters.
std::string head(const std::string& name, std::uint32_t block, const std::vector<std::string>& p);

/// prelude.cpp: the text every translation unit of options `o` starts with.
std::string prelude(const SimtOptions& o);
/// prelude.cpp: what the mma.sync kernels add (CUDA only; once, before the first of them).
std::string mma_helpers();

/// kernels.cpp: quantize (`fake`: quantize_int8) of [rows, k], one block per row;
/// `rowsum`: also the row sums of q.
std::string quantize_kernel(const std::string& name, std::int64_t rows, std::int64_t k, bool fake, bool rowsum);
/// kernels.cpp: rmsnorm of [rows, d], one block per row.
std::string rmsnorm_kernel(const std::string& name, std::int64_t rows, std::int64_t d, double eps);
/// kernels.cpp: softmax or a reduction along the middle axis of [outer, len, inner].
std::string axis_kernel(const std::string& name, ir::Op op, std::int64_t outer, std::int64_t len, std::int64_t inner);
/// kernels.cpp: an elementwise chain over `items` elements, rows of `cols`, operands
/// read through their [rows, cols] strides `views`.
std::string ewise_kernel(const std::string& name, const std::vector<ir::EwiseStep>& steps,
                         const std::vector<std::pair<std::int64_t, std::int64_t>>& views, std::int64_t items,
                         std::int64_t cols);
/// kernels.cpp: a byte copy of `bytes`.
std::string copy_kernel(const std::string& name, std::size_t bytes);

/// tmatmul.cpp: the tmatmul kernel in the mma.sync form (tmma2 weights).
std::string mma_kernel(const std::string& name, const TMatMulShape& s, const TMatMulConfig& c,
                       const std::vector<EpilogueRead>& epilogue, ir::Activation act);
/// tmatmul.cpp: the tmatmul kernel with dp4a (i8 x) or f32 sums (tcodes64 weights).
std::string tmatmul_kernel(const std::string& name, const TMatMulShape& s, const TMatMulConfig& c,
                           const std::vector<EpilogueRead>& epilogue, ir::Activation act);
/// tmatmul.cpp: the row sums per group of i8 activations [m, k].
std::string rowsum_kernel(const std::string& name, std::int64_t m, std::int64_t k, std::int64_t group);

}  // namespace ternjit::targets::simt::detail
