// SPDX-License-Identifier: Apache-2.0
// program.h - the LLVM target's plan of one specialized function (no LLVM types): slots and steps.
//
// analyze() builds on the walk every CPU target shares (targets/common/step_plan.h):
//   - load-time values (param, const, and pure ops whose operands are all load-time)
//     become const slots, evaluated when a kernel is loaded (or baked into an AOT
//     object); a tmatmul weight [K, N] gets two extra const slots: its panel and its
//     column sums (i32[Np], for the u8 x s8 VNNI bias correction). The panel holds
//     groups of G columns (G = 16 for AVX-512 VNNI, 4 for AArch64 sdot, 1 otherwise):
//     byte (j / G) * Kp * G + (k / 4) * G * 4 + (j % G) * 4 + k % 4 is w[k, j], zero for
//     k >= K or j >= N, with Kp = K rounded up to kKPad and Np = N rounded up to G (for
//     G = 1 that is simply the [N, Kp] transpose);
//   - reshape and tpack alias their operand;
//   - every op with an LLVM generator becomes a Lowered step (one LLVM function each);
//   - any other op becomes a Reference step (host JIT only: run by the interpreter);
//   - returned values not computed in place become copies.
// The same walk runs at compile time and at load time, so the slot numbers agree.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ir/interpret.h"
#include "ir/ir.h"
#include "targets/common/step_plan.h"
#include "ternjit/result.h"

namespace ternjit::targets::llvmjit {

/// Where a value's bytes are during a call (the shared plan's slots; Const indexes the
/// program's const slots: the load-time values in plan order, then panels and column sums).
using LocKind = SlotKind;
using Loc = Slot;

/// Rows of a tmatmul weight panel are padded to a multiple of this many bytes.
inline constexpr std::int64_t kKPad = 64;

/// The padded row length of a weight panel for reduction length K.
inline std::int64_t padded_k(std::int64_t k) { return (k + kKPad - 1) / kKPad * kKPad; }
/// N rounded up to a whole number of column groups.
inline std::int64_t padded_n(std::int64_t n, int group) { return (n + group - 1) / group * group; }
/// The panel byte of weight w[k, j].
inline std::int64_t panel_index(std::int64_t k, std::int64_t j, std::int64_t kp, int group) {
  return (j / group) * kp * group + (k / 4) * group * 4 + (j % group) * 4 + k % 4;
}

/// A load-time value: the function value, or a form of a [K, N] tmatmul weight.
struct ConstSlot {
  enum class Form : std::uint8_t {
    Value,   ///< the value's bytes
    Panel,   ///< int8 [Np * Kp] in column groups (file comment)
    ColSum,  ///< int32 [Np]: sum over k of w[k, n] (0 for padding)
  };
  ir::ValueId value;  ///< the load-time value
  Form form = Form::Value;
};

/// One step of a call.
struct ProgramStep {
  enum class Kind : std::uint8_t { Lowered, Reference, Copy } kind = Kind::Lowered;
  ir::InstId inst;               ///< the instruction (Lowered, Reference)
  std::vector<Loc> in;           ///< operands (Lowered tmatmul: the weight is its panel, its column sums last)
  std::vector<Loc> out;          ///< results
  std::size_t tmp_offset = 0;    ///< Lowered: scratch bytes it may use as a temporary
  std::size_t copy_bytes = 0;    ///< Copy: bytes from in[0] to out[0]
  std::string symbol;            ///< Lowered: "tj_op_<n>"
  std::string summary;           ///< the instruction as text
};

/// The plan of one function.
struct Program {
  std::size_t n_in = 0, n_out = 0;
  std::vector<std::size_t> in_bytes, out_bytes;
  std::vector<ConstSlot> consts;
  std::vector<ProgramStep> steps;
  std::size_t scratch_bytes = 0;
  bool all_lowered = true;  ///< no Reference step: the whole function is one LLVM entry
  int group = 1;            ///< the column group G of every weight panel
};

/// Success when the LLVM generator lowers instruction `i` of `f` (static shapes), else
/// Unsupported saying why (the op then runs as a reference step on the host).
Result<void> lowerable(const ir::Function& f, ir::InstId i);

/// Success when `f` can be compiled at all (one block, no calls, static shapes).
Result<void> program_supported(const ir::Function& f);

/// Plans `f` (see the file comment) with weight panels in column groups of `group`.
Result<Program> analyze(const ir::Function& f, int group);

/// The row-major extents of a static type.
std::vector<std::int64_t> extents_of(const ir::Type& t);
/// The byte size of a static type.
std::size_t bytes_of(const ir::Type& t);

/// Evaluates every load-time value of `f` with `params` and returns the bytes of each
/// const slot of `p` (InvalidInput for a missing or mismatched parameter). With
/// `zeros_for_missing`, an unbound parameter reads as zeros (emitting text only).
Result<std::vector<std::vector<std::uint8_t>>> const_bytes(const ir::Function& f, const Program& p,
                                                           const ir::ParamValues& params, bool zeros_for_missing);

}  // namespace ternjit::targets::llvmjit
