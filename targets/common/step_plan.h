// SPDX-License-Identifier: Apache-2.0
// step_plan.h - the one walk of a function that CPU targets share: support, load-time values, slots, aliases, copies.
//
// plan_steps() walks a single-block, fully static function once and decides, for every
// value, where its bytes live during a call:
//   - arguments are input buffers, and the first ret operand j computed by a step is
//     computed straight into output buffer j;
//   - load-time values (param, const, and pure ops whose operands are all load-time) are
//     const slots, evaluated once when a kernel is loaded (or baked into an AOT object);
//   - reshape of a computed value aliases its operand (row-major data is unchanged);
//   - every other result gets a 64-byte aligned region of the per-call scratch, reused by
//     liveness: a region is free again after the last step that reads its value (through
//     any alias), and a step's results never overlap its operands or each other, so a
//     chain of N ops needs a few of its largest values, not their sum;
//   - kv_write updates in place: its result takes its cache operand's bytes when nothing
//     reads them after it (the step then has in[0] == out[0]); a chain of kv_writes from an
//     argument read only by the first, reaching ret operand j, lives in output j: the
//     first step reads the argument and writes output j (copying the cache unless the two
//     are one buffer, which StepPlan::in_place allows the caller), the others in place;
//   - a returned value not computed in place is copied to its output.
// What a target does with each computed instruction (generate a kernel, or run the
// reference implementation of that one op) is the target's choice: the plan lists the
// instructions in order with their operand and result slots. The x86 plan and the LLVM
// program are both built on it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ir/ir.h"
#include "ternjit/result.h"

namespace ternjit::targets {

/// Where a value's bytes are during a call.
enum class SlotKind : std::uint8_t { Arg, Out, Scratch, Const };

/// A value's location: buffer index (Arg/Out), byte offset (Scratch) or load-time index (Const).
struct Slot {
  SlotKind kind = SlotKind::Scratch;
  std::size_t index = 0;
  friend bool operator==(const Slot&, const Slot&) = default;
};

/// One thing a call does, in order.
struct PlannedStep {
  enum class Kind : std::uint8_t {
    Compute,  ///< instruction `inst`: the target lowers it (kernel or reference)
    Copy,     ///< copy `bytes` from in[0] to out[0] (a returned value not computed in place)
  };
  Kind kind = Kind::Compute;
  ir::InstId inst;           ///< Compute: the instruction
  std::vector<Slot> in;      ///< operand slots (Compute) or the source (Copy)
  std::vector<Slot> out;     ///< result slots (Compute) or the output (Copy)
  std::size_t bytes = 0;     ///< Copy: bytes copied
  std::size_t ret_index = 0; ///< Copy: which result
};

/// A load-time value: defined by `inst` (param, const or a pure op of load-time values).
struct LoadTimeValue {
  ir::ValueId value;
  ir::InstId inst;
  std::size_t result = 0;  ///< which result of `inst`
};

/// Input buffer `input` may be the same buffer as output `output`: a kv_write chain from
/// argument `input` reaches ret operand `output` and lives in that output (its first
/// kv_write copies the input unless the two are one buffer).
struct InPlace {
  std::size_t input = 0, output = 0;
  friend bool operator==(const InPlace&, const InPlace&) = default;
};

/// The plan of one function.
struct StepPlan {
  std::vector<std::size_t> in_bytes, out_bytes;  ///< buffer sizes, inputs then outputs
  std::vector<LoadTimeValue> load_time;          ///< in definition order; Slot{Const, k} is load_time[k]
  std::vector<PlannedStep> steps;                ///< in execution order
  std::vector<Slot> slot_of;                     ///< by ValueId::index (meaningful for defined values)
  std::size_t scratch_bytes = 0;                 ///< per-call scratch (a multiple of kScratchAlign)
  std::vector<InPlace> in_place;                 ///< the (input, output) pairs that may be one buffer

  /// The slot of `v`.
  [[nodiscard]] Slot slot(ir::ValueId v) const { return slot_of[v.index]; }
  /// True when `v` is a load-time value.
  [[nodiscard]] bool is_load_time(ir::ValueId v) const { return slot_of[v.index].kind == SlotKind::Const; }
};

/// Scratch regions start at multiples of this many bytes.
inline constexpr std::size_t kScratchAlign = 64;

/// The byte size of a fully static type (0 when it is not static).
std::size_t static_bytes(const ir::Type& t);

/// Success when `f` can be planned: one block, no calls, static argument and result
/// types. Otherwise Unsupported naming `target` and the first reason.
Result<void> plannable(const ir::Function& f, std::string_view target);

/// The op rule the targets generating one kernel per op on [rows, cols] views share
/// (llvm, spirv), for the ops whose rule they agree on: quantize (f32 -> i8, f32 of rank
/// >= 1), rmsnorm, softmax and the reductions (f32, a non-empty operand), ewise and the
/// elementwise step ops (f32, every broadcast a row/column pattern, view2d.h). Success
/// or Unsupported with the reason; nullopt for any other op (the target's own rule).
std::optional<Result<void>> row_op_supported(const ir::Function& f, const ir::InstData& inst);

/// One epilogue operand of a tmatmul that is broadcast to its result: operand index
/// `operand` (x_scale, w_scale, bias, residual, in that order) applied as `op` (mul or add).
struct TMatMulEpilogueOperand {
  std::size_t operand = 0;
  ir::Op op = ir::Op::Mul;
};

/// The operands of tmatmul `inst` applied after the accumulation, in order. A grouped
/// w_scale (`group > 0`: f32[G, N], read per group by the accumulation) is not one of
/// them: tmatmul_group_scale() names it.
std::vector<TMatMulEpilogueOperand> tmatmul_epilogue(const ir::InstData& inst);

/// The operand index of tmatmul `inst`'s grouped w_scale, or nullopt when it has none.
std::optional<std::size_t> tmatmul_group_scale(const ir::InstData& inst);

/// The epilogue rule of the targets generating a tmatmul kernel per op on [rows, cols]
/// views (llvm, spirv; the GPU targets): every tmatmul_epilogue() operand is f32 and
/// broadcasts to the result as a row/column pattern (view2d.h); a grouped w_scale is
/// f32[G, N] with G = ceil(K / group), never checked as a broadcast. Success or
/// Unsupported with the reason. Precondition: `inst` is a tmatmul of a static function.
Result<void> tmatmul_operands_supported(const ir::Function& f, const ir::InstData& inst);

/// A read the IR does not show: the step of instruction `at` reads `value` although `at`
/// does not name it. A target that fuses instructions passes these so the value's region
/// stays live until the fused step runs (x86: a transpose read through its source by a
/// matmul, the int8 weight-gradient chain computed at its last instruction).
struct ExtraRead {
  ir::ValueId value;
  ir::InstId at;
};

/// Plans `f` (see the file comment). Precondition: plannable(f); every ExtraRead names a
/// value of `f` and an instruction of its block.
StepPlan plan_steps(const ir::Function& f, std::span<const ExtraRead> extra_reads = {});

}  // namespace ternjit::targets
