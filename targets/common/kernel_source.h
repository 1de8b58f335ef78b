// SPDX-License-Identifier: Apache-2.0
// kernel_source.h - what the GPU source generators share (GLSL in spirv/, CUDA C++ / HIP C++ in simt/): the tmatmul
// shape, extents, literals, the elementwise expression table.
//
// Header-only: the spirv target and the SIMT layer are separate libraries, and neither
// links the other.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "ir/ir.h"
#include "targets/common/step_plan.h"

namespace ternjit::targets {

/// The dimensions of one tmatmul (what its tuning space and kernel need).
struct TMatMulShape {
  std::int64_t m = 0, k = 0, n = 0;
  ElemKind x = ElemKind::I8;  ///< activations: i8 or f32
  std::int64_t group = 0;     ///< > 0: a grouped w_scale f32[ceil(K / group), N] scales each group's sum
};

namespace kernel_source {

/// The static extents of `t` (precondition: static shape).
inline std::vector<std::int64_t> extents(const ir::Type& t) {
  std::vector<std::int64_t> e;
  for (const ir::Dim& d : t.shape) e.push_back(d.extent);
  return e;
}

/// The product of `e` (1 for a scalar).
inline std::int64_t numel(const std::vector<std::int64_t>& e) {
  std::int64_t n = 1;
  for (std::int64_t x : e) n *= x;
  return n;
}

/// "123u": an unsigned literal (both languages).
inline std::string u(std::int64_t v) { return std::to_string(v) + "u"; }

/// "'tmatmul'": an op's name quoted for messages.
inline std::string quote(ir::Op op) { return "'" + std::string(ir::op_name(op)) + "'"; }

/// The shape of tmatmul `inst` of `f` (static shapes; precondition: the op is TMatMul).
inline TMatMulShape tmatmul_shape(const ir::Function& f, const ir::InstData& inst) {
  const ir::Type& wt = f.type_of(inst.operands[1]);
  TMatMulShape s;
  s.k = wt.shape[0].extent;
  s.n = wt.shape[1].extent;
  s.m = numel(extents(f.type_of(inst.results[0]))) / s.n;
  s.x = f.type_of(inst.operands[0]).elem;
  s.group = tmatmul_group_scale(inst) ? std::get<ir::TMatMulAttrs>(inst.attrs).group : 0;
  return s;
}

/// Softmax or a reduction along an axis, as [outer, len, inner] (len: the axis).
struct AxisSplit {
  std::int64_t outer = 1, len = 1, inner = 1;
};

/// The axis split of axis op `inst` (AxisAttrs) of `f` over its operand 0.
inline AxisSplit axis_split(const ir::Function& f, const ir::InstData& inst) {
  const std::vector<std::int64_t> in = extents(f.type_of(inst.operands[0]));
  const auto axis = static_cast<std::size_t>(std::get<ir::AxisAttrs>(inst.attrs).axis);
  AxisSplit a;
  a.len = in[axis];
  for (std::size_t d = 0; d < in.size(); ++d) {
    if (d < axis) a.outer *= in[d];
    if (d > axis) a.inner *= in[d];
  }
  return a;
}

/// The elementwise steps of `inst`: an ewise's own, or its one op on operand 0 (and 1).
inline std::vector<ir::EwiseStep> ewise_steps(const ir::InstData& inst) {
  if (inst.op == ir::Op::Ewise) return std::get<ir::EwiseAttrs>(inst.attrs).steps;
  return {ir::EwiseStep{inst.op, 0, ir::is_ewise_binary(inst.op) ? 1 : -1}};
}

/// What one GPU generator admits beyond the rules both share (op_supported,
/// function_supported).
struct OpLimits {
  std::string_view generator;       ///< the messages' prefix: "the simt generator", "the spirv target"
  std::string_view planner_name;    ///< what plannable() calls it: "simt", "spirv"
  std::int64_t max_elems = 0;       ///< the most elements of one tensor, and bytes of an argument or result
  std::string_view max_elems_text;  ///< the same in messages: "2^31"
  std::string_view max_bytes_text;  ///< ... and as bytes: "2 GiB"
  std::string_view kernel_word;     ///< "kernel" or "shader": "no kernel for 'op'"
  /// Also refuses a tmatmul weight [K, N] whose packed form has more than max_elems
  /// bytes, with K padded to a multiple of this (0: no such check).
  std::int64_t packed_weight_k_multiple = 0;
  /// Prefixes the shared row-op rule's own message with `generator` (else it is returned as is).
  bool prefix_row_rule = true;
};

/// Success when a GPU generator with `limits` has a kernel for computed instruction
/// `inst` of `f` (static shapes): tmatmul (i8 or f32 x, t2 weights known at load when
/// `plan` says, f32 result, the epilogue rule of step_plan.h), quantize_int8 of f32
/// rows, and the row ops of row_op_supported (no reduction of a scalar); every tensor
/// non-empty and within max_elems. Else Unsupported naming what is not.
inline Result<void> op_supported(const ir::Function& f, const ir::InstData& inst, const StepPlan* plan,
                                 const OpLimits& limits) {
  auto unsupported = [&](const std::string& why) {
    return make_error(ErrorCode::Unsupported, std::string(limits.generator) + ": " + why);
  };
  const std::string too_large = "a tensor over " + std::string(limits.max_elems_text) + " elements";
  const ir::Type& rt = f.type_of(inst.results[0]);
  for (ir::ValueId v : inst.operands)
    if (f.type_of(v).static_numel().value_or(0) > limits.max_elems) return unsupported(too_large);
  if (rt.static_numel().value_or(0) > limits.max_elems) return unsupported(too_large);
  if (rt.static_numel().value_or(0) == 0) return unsupported("an empty result of " + quote(inst.op));
  switch (inst.op) {
    case ir::Op::TMatMul: {
      const ElemKind xk = f.type_of(inst.operands[0]).elem;
      if (xk != ElemKind::I8 && xk != ElemKind::F32) return unsupported("tmatmul activations must be i8 or f32");
      const ir::Type& wt = f.type_of(inst.operands[1]);
      if (wt.elem != ElemKind::T2) return unsupported("tmatmul weights must be t2");
      if (rt.elem != ElemKind::F32) return unsupported("tmatmul result must be f32");
      if (wt.rank() != 2 || wt.shape[0].extent == 0) return unsupported("tmatmul weight must be a non-empty matrix");
      if (const std::int64_t mult = limits.packed_weight_k_multiple; mult > 0) {
        const std::int64_t kp = (wt.shape[0].extent + mult - 1) / mult * mult;
        if (kp / 4 * wt.shape[1].extent > limits.max_elems) return unsupported("a packed tmatmul weight over 2 GiB");
      }
      // Epilogue operands as row/column views; a grouped w_scale is read per group.
      if (auto r = tmatmul_operands_supported(f, inst); !r.ok()) return unsupported(r.error().message);
      if (plan && !plan->is_load_time(inst.operands[1]))
        return unsupported("tmatmul weights must be known at load (a parameter or constant)");
      return success();
    }
    case ir::Op::QuantizeInt8: {
      const bool all_f32 =
          rt.elem == ElemKind::F32 && std::all_of(inst.operands.begin(), inst.operands.end(),
                                                  [&](ir::ValueId v) { return f.type_of(v).elem == ElemKind::F32; });
      if (!all_f32 || rt.rank() == 0) return unsupported("quantize_int8 is generated for f32 rows only");
      return success();
    }
    default: break;
  }
  if (auto rule = row_op_supported(f, inst)) {
    if (!rule->ok()) return limits.prefix_row_rule ? unsupported(rule->error().message) : *rule;
    const bool reduction = inst.op == ir::Op::RmsNorm || inst.op == ir::Op::Softmax || inst.op == ir::Op::ReduceSum ||
                           inst.op == ir::Op::ReduceMean || inst.op == ir::Op::ReduceMax;
    if (reduction && f.type_of(inst.operands[0]).rank() == 0) return unsupported(quote(inst.op) + " of a scalar");
    return success();
  }
  return unsupported("no " + std::string(limits.kernel_word) + " for " + quote(inst.op));
}

/// Success when a GPU generator with `limits` has a kernel for every computed step of
/// `f` (plannable(), op_supported()) and every argument and result has at most
/// max_elems bytes; else the first reason it has not.
inline Result<void> function_supported(const ir::Function& f, const OpLimits& limits) {
  TERNJIT_TRY_VOID(plannable(f, limits.planner_name));
  const StepPlan plan = plan_steps(f);
  for (const PlannedStep& ps : plan.steps) {
    if (ps.kind != PlannedStep::Kind::Compute) continue;
    TERNJIT_TRY_VOID(op_supported(f, f.inst(ps.inst), &plan, limits));
  }
  auto too_large = [&](const char* what) {
    return make_error(ErrorCode::Unsupported, std::string(limits.generator) + ": " + what + " over " +
                                                  std::string(limits.max_bytes_text));
  };
  for (std::size_t b : plan.in_bytes)
    if (b > static_cast<std::size_t>(limits.max_elems)) return too_large("an argument");
  for (std::size_t b : plan.out_bytes)
    if (b > static_cast<std::size_t>(limits.max_elems)) return too_large("a result");
  return success();
}

/// The language an elementwise expression is written in.
enum class Language : std::uint8_t {
  Simt,  ///< CUDA C++ / HIP C++ over the SIMT prelude's tj_ functions
  Glsl,  ///< GLSL 4.50 over the spirv shaders' *_ref functions
};

/// One elementwise op in both languages: `$a` and `$b` stand for the operands. Both
/// follow ir/interpret_ops.cpp's elementwise() (the helpers named here are each
/// generator's own prelude).
struct ElementwiseSpelling {
  ir::Op op;
  std::string_view simt, glsl;
};

/// Every elementwise op both GPU generators write.
inline constexpr ElementwiseSpelling kElementwiseSpellings[] = {
    {ir::Op::Add, "tj_add($a, $b)", "$a + $b"},
    {ir::Op::Sub, "tj_sub($a, $b)", "$a - $b"},
    {ir::Op::Mul, "tj_mul($a, $b)", "$a * $b"},
    {ir::Op::Div, "tj_div($a, $b)", "$a / $b"},
    {ir::Op::Max, "tj_fmax($a, $b)", "fmax_ref($a, $b)"},
    {ir::Op::Min, "tj_fmin($a, $b)", "fmin_ref($a, $b)"},
    {ir::Op::Neg, "-$a", "-$a"},
    {ir::Op::Abs, "tj_abs($a)", "abs($a)"},
    {ir::Op::Relu, "tj_relu($a)", "relu_ref($a)"},
    {ir::Op::Sigmoid, "tj_sigmoid($a)", "sigmoid_ref($a)"},
    {ir::Op::Tanh, "tj_tanh($a)", "tanh_ref($a)"},
    {ir::Op::Gelu, "tj_gelu($a)", "gelu_ref($a)"},
    {ir::Op::Silu, "tj_silu($a)", "silu_ref($a)"},
    {ir::Op::Exp, "expf($a)", "exp_ref($a)"},
    {ir::Op::Log, "logf($a)", "log($a)"},
    {ir::Op::Sqrt, "sqrtf($a)", "sqrt($a)"},
    {ir::Op::Rsqrt, "tj_div(1.0f, sqrtf($a))", "1.0 / sqrt($a)"},
};

/// The f32 expression of elementwise op `op` on `a` (and `b` for a binary op) in
/// `language`. Precondition: `op` is in kElementwiseSpellings.
inline std::string elementwise(Language language, ir::Op op, const std::string& a, const std::string& b) {
  for (const ElementwiseSpelling& e : kElementwiseSpellings) {
    if (e.op != op) continue;
    const std::string_view pattern = language == Language::Simt ? e.simt : e.glsl;
    std::string out;
    for (std::size_t i = 0; i < pattern.size(); ++i) {
      if (pattern[i] == '$' && i + 1 < pattern.size()) {
        out += pattern[i + 1] == 'a' ? a : b;
        ++i;
      } else {
        out += pattern[i];
      }
    }
    return out;
  }
  TERNJIT_UNREACHABLE("elementwise: " + quote(op) + " is not elementwise");
}

}  // namespace kernel_source

}  // namespace ternjit::targets
