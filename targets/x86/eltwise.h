// SPDX-License-Identifier: Apache-2.0
// eltwise.h - the non-matmul kernel ops as x86 machine code: quantize, rmsnorm, softmax,
// fused elementwise loops, reductions, and the vector math (exp, tanh, erf...) they share.
//
// Each generator turns one IR op with static shapes into a kernel whose semantics are
// the IR's (ir/interpret.cpp): integer results (quantize's int8 values) bit-exact;
// f32 results of +, -, *, /, max, min, neg, abs, relu, sqrt bit-exact (same f32
// operations in the same order); transcendental ones (exp, log, tanh, sigmoid, gelu,
// silu, rsqrt) and reductions (the reference accumulates in double) within a stated
// relative tolerance, documented in tests. Float kinds f32, bf16, f16 (loaded as f32,
// stored rounded to nearest even); integer ewise is not generated (Unsupported).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ir/ir.h"
#include "targets/x86/isa.h"
#include "targets/x86/parallel.h"
#include "ternjit/result.h"

namespace ternjit::targets::x86 {

/// One generated non-matmul kernel. Thread-safe after creation.
class EltwiseKernel {
 public:
  virtual ~EltwiseKernel() = default;
  /// Runs on the op's buffers: `inputs` in operand order, `outputs` in result order,
  /// each contiguous row-major with the static shapes of the op (broadcasting per the
  /// IR's NumPy rules where the op allows it).
  /// With `rows_max` > 0 (a kernel generated with keep_rows), only the first `rows` of
  /// the `rows_max` rows of axis 0 are computed (0 < rows <= rows_max).
  virtual void run(std::span<const void* const> inputs, std::span<void* const> outputs, const Parallel& parallel,
                   std::int64_t rows = 0, std::int64_t rows_max = 0) const = 0;
  /// Label + bytes of each generated blob, for --emit asm.
  struct CodeBlob {
    std::string label;
    std::span<const std::uint8_t> code;
  };
  [[nodiscard]] virtual std::vector<CodeBlob> code() const = 0;
  /// One line: what was generated ("rmsnorm rows=4 cols=2560 vec=512").
  [[nodiscard]] virtual std::string describe() const = 0;
};

/// Whether generate_eltwise handles instruction `inst` of `f` (static shapes assumed):
/// Unsupported naming the reason otherwise. Handled: quantize (per-row absmax int8,
/// f32 x), rmsnorm, softmax (any axis), ewise, the standalone elementwise ops
/// (add sub mul div max min neg abs relu sigmoid tanh gelu silu exp log sqrt rsqrt),
/// reduce_sum / reduce_mean / reduce_max (any axis, keepdims or not), on float kinds.
Result<void> eltwise_supported(const ir::Function& f, ir::InstId inst);

/// Generates the kernel of instruction `inst` of `f` for `isa` (<= the host's unless
/// `allow_foreign_isa`). `keep_rows`: axis 0 of every operand is a row axis that run()
/// may shorten (its rows argument). Errors: Unsupported as eltwise_supported, and with
/// keep_rows an op whose rows are not independent (reduced over or moved axis 0) or an
/// elementwise loop with nothing but the row axis.
Result<std::unique_ptr<EltwiseKernel>> generate_eltwise(const ir::Function& f, ir::InstId inst, Isa isa,
                                                        bool allow_foreign_isa = false, bool keep_rows = false);

/// A standalone activation applied in place to n contiguous values of `kind` (the
/// x86 plan's step after a tmatmul whose act is not None/Relu). `rows` > 1: the n values
/// are that many rows that run() may shorten (n a multiple of rows).
Result<std::unique_ptr<EltwiseKernel>> generate_activation(ir::Op act, ElemKind kind, std::int64_t n, Isa isa,
                                                           bool allow_foreign_isa = false, std::int64_t rows = 0);

}  // namespace ternjit::targets::x86
