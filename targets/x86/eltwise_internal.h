// SPDX-License-Identifier: Apache-2.0
// eltwise_internal.h - what an x86 eltwise kernel computes (Spec), shared by eltwise.cpp and eltwise_rows.cpp.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/ir.h"
#include "targets/x86/jit_code.h"
#include "targets/x86/vmath.h"

namespace ternjit::targets::x86::eltwise_detail {

/// A static shape.
using Extents = std::vector<std::int64_t>;

/// The kernel shape an op is generated as: ewise loops, or row/column kernels over an axis.
enum class Family : std::uint8_t { Ewise, Quantize, RmsNorm, Softmax, Reduce };

/// Bytes per element of the kinds eltwise kernels load and store (f32, 16-bit floats, i8).
inline int elem_size(ElemKind k) { return k == ElemKind::F32 ? 4 : (k == ElemKind::I8 ? 1 : 2); }

/// What one kernel computes, extracted from the IR (or built for an activation).
struct Spec {
  Family family = Family::Ewise;
  ir::Op op = ir::Op::Add;
  std::vector<ElemKind> in_kinds;
  std::vector<Extents> in_shapes;
  std::vector<ElemKind> out_kinds;
  std::vector<Extents> out_shapes;
  std::vector<ir::EwiseStep> steps;  // Ewise
  bool round_steps = false;          // round to the kind between ewise steps
  std::int64_t outer = 1, len = 1, inner = 1;  // axis view of the operand
  double eps = 0;
  bool fake_quant = false;  // quantize_int8: float output q * s
  /// Run-time rows (plan.h, PlanOptions::rows_max): axis 0 of every operand is the row
  /// axis and run() may get fewer rows; an ewise loop never merges it with the axes after.
  bool keep_rows = false;
};

/// Row kernel fn(x, out, aux, rows) (rdi, rsi, rdx, rcx): quantize, rmsnorm, softmax and
/// reductions over the last axis of `s`, the row length baked in.
void emit_rows(JitCode& c, VecAsm& va, const Spec& s);
/// Column kernel fn(x, out, outer) (rdi, rsi, rdx): softmax and reductions over a middle
/// axis of `s`, vectorised across the contiguous inner extent.
void emit_columns(JitCode& c, VecAsm& va, const Spec& s);

}  // namespace ternjit::targets::x86::eltwise_detail
