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
//     G = 1 that is simply the [N, Kp] transpose). A t2 weight of an i8-activation
//     tmatmul without grouped scale instead gets ONE packed slot: 2-bit codes
//     (w + 1) in the interleaved layout of PackedLayout (below), decoded in registers;
//   - reshape aliases its operand;
//   - matmul(x, transpose(P)) with P a load-time [N, K] reads P as stored (the head of a
//     model: an f16 [V, E] embedding): the transposed value is then read by no step, and
//     a load-time value no step needs is neither evaluated nor kept at load;
//   - every op with an LLVM generator becomes a Lowered step (one LLVM function each);
//   - any other op becomes a Reference step (host JIT only: run by the interpreter);
//   - returned values not computed in place become copies.
// The same walk runs at compile time and at load time, so the slot numbers agree.
#pragma once

#include <cstddef>
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/interpret.h"
#include "ir/ir.h"
#include "ir/stored_tensor.h"
#include "targets/common/step_plan.h"
#include "targets/cpu_buffers.h"
#include "ternjit/result.h"

namespace ternjit::targets::llvmjit {

/// Where a value's bytes are during a call (the shared plan's slots; Const indexes the
/// plan's const slots: the load-time values in plan order, then panels and column sums).
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

/// The packed 2-bit weight panels of the i8 x t2 tmatmul (the x86 target's idea, in
/// LLVM IR). L = int32 lanes of the dot product vector (16: AVX-512 VNNI zmm, 8:
/// AVX-VNNI ymm or the portable path on x86, 4: AArch64 sdot / portable elsewhere),
/// G = 4 L columns = one "group" = one vector of G bytes, NB = CV * G columns = one
/// panel (CV groups, chosen per M: packed_tile). N is padded to Npad = whole groups,
/// K to Kp (kKPad). Panel p (columns p*NB ..) is one contiguous run of Kp / 4 steps;
/// step s holds W = min(NB, Npad - p*NB) bytes: W / G groups of G bytes. In byte b of
/// group g of step s, the 2-bit field f (bits 2f, 2f+1) is the code w + 1 of
///     column p*NB + g*G + f*L + b/4,   row k = 4s + b%4.
/// So a vector of G packed bytes decodes ((v >> 2f) & 3, or v & (3 << 2f) kept in
/// place) into 4 vectors whose 32-bit lane l holds 4 consecutive k of column
/// g*G + f*L + l: the operand of a dot product against a broadcast 4-byte piece of an
/// activation row. Padding (k >= K, j >= N) holds code 1 (weight 0); the activations
/// are zero-padded to Kp anyway.
struct PackedLayout {
  int lanes = 0;  ///< L (0: no packed panels on this target)
  int cv = 1;     ///< groups per panel
  [[nodiscard]] std::int64_t group() const { return 4 * static_cast<std::int64_t>(lanes); }
  [[nodiscard]] std::int64_t nb() const { return group() * cv; }
};

/// Rows per register block and groups per panel of the packed kernel for M rows and L lanes.
struct PackedTile {
  int rows = 1;  ///< RB
  int cv = 1;    ///< CV
};
PackedTile packed_tile(std::int64_t m, int lanes);

/// Bytes of a packed panel set: Kp / 4 steps of Npad bytes.
inline std::int64_t packed_bytes(std::int64_t k, std::int64_t n, const PackedLayout& l) {
  return padded_k(k) / 4 * padded_n(n, static_cast<int>(l.group()));
}
/// Where w[k, j] lives in a packed panel set: the byte and the field's shift (2f).
struct PackedAt {
  std::int64_t byte;
  int shift;
};
inline PackedAt packed_index(std::int64_t k, std::int64_t j, std::int64_t kp, std::int64_t n, const PackedLayout& l) {
  const std::int64_t G = l.group(), NB = l.nb(), npad = padded_n(n, static_cast<int>(G));
  const std::int64_t p = j / NB, width = std::min(NB, npad - p * NB), jj = j % NB;
  const std::int64_t g = jj / G, f = (jj % G) / l.lanes, lane = jj % l.lanes;
  return {p * (kp / 4) * NB + (k / 4) * width + g * G + lane * 4 + k % 4, static_cast<int>(2 * f)};
}

/// A load-time value: the function value, or a form of a [K, N] tmatmul weight.
struct ConstSlot {
  enum class Form : std::uint8_t {
    Value,   ///< the value's bytes
    Panel,   ///< int8 [Np * Kp] in column groups (file comment)
    ColSum,  ///< int32 [Np]: sum over k of w[k, n] (0 for padding)
    Packed,  ///< 2-bit codes [Kp / 4 * Npad] in the PackedLayout `packed`
  };
  ir::ValueId value;  ///< the load-time value
  Form form = Form::Value;
  PackedLayout packed;  ///< Packed: the layout
};

/// How a target lays out weight panels: the int8 panels' column group and the packed
/// panels' lanes (0: none; every tmatmul then reads int8 panels).
struct PanelLayout {
  int group = 1;
  int lanes = 0;
};

/// What a generated step found wrong at run time (the first i64 of its error record,
/// followed by up to 3 values): the call stops and returns an InvalidInput error with
/// the interpreter's message (run_error_message).
enum class RunError : std::int64_t {
  None = 0,
  GatherId = 1,       ///< {id, index}: "gather: id X at index I is out of range [0, V)"
  NegativePos = 2,    ///< {pos}: "<op>: pos P is negative (pos must be >= 0)"
  CacheRows = 3,      ///< {pos}: "<op>: rows [pos, pos + M) = [..) do not fit the cache capacity C = .."
};

/// At most this many tasks share an attention step's (row, head) pairs (each has its own
/// scores and accumulator in the step's temporary).
inline constexpr std::int64_t kAttentionTasks = 8;

/// Bytes of a step's error record (4 x i64).
inline constexpr std::size_t kErrorRecordBytes = 32;

/// One step of a call.
struct PlanStep {
  enum class Kind : std::uint8_t { Lowered, Reference, Copy } kind = Kind::Lowered;
  ir::InstId inst;               ///< the instruction (Lowered, Reference)
  std::vector<Loc> in;           ///< operands (Lowered tmatmul: the weight is its panel, its column sums last
                                 ///< (int8 panels) or its packed panel alone)
  bool packed = false;           ///< Lowered tmatmul on packed 2-bit panels
  bool rhs_transposed = false;   ///< Lowered matmul(x, transpose(P)), P load-time [N, K]: in[1] is P as stored
  std::vector<Loc> out;          ///< results
  std::size_t tmp_offset = 0;    ///< Lowered: scratch bytes it may use as a temporary
  std::size_t copy_bytes = 0;    ///< Copy: bytes from in[0] to out[0]
  std::string symbol;            ///< Lowered: "tj_op_<n>"
  std::string summary;           ///< the instruction as text
};

/// The plan of one function.
struct FunctionPlan {
  std::size_t n_in = 0, n_out = 0;
  std::vector<std::size_t> in_bytes, out_bytes;
  std::vector<ConstSlot> consts;
  std::vector<PlanStep> steps;
  std::size_t scratch_bytes = 0;
  std::size_t err_offset = 0;  ///< the steps' error record in the scratch (kErrorRecordBytes)
  bool all_lowered = true;  ///< no Reference step: the whole function is one LLVM entry
  int group = 1;            ///< the column group G of every int8 weight panel
  int lanes = 0;            ///< the lanes L of every packed panel (0: none)
  std::vector<SameBuffer> in_place;  ///< (input, output) pairs that may be one buffer (step_plan.h InPlace)
};

/// Success when the LLVM generator lowers instruction `i` of `f` (static shapes), else
/// Unsupported saying why (the op then runs as a reference step on the host).
Result<void> lowerable(const ir::Function& f, ir::InstId i);

/// Success when `f` can be compiled at all (one block, no calls, static shapes).
Result<void> program_supported(const ir::Function& f);

/// True when tmatmul `inst` of `f` reads a packed 2-bit panel under `layout`: i8
/// activations, a t2 weight, no grouped scale, and a target with packed lanes.
bool packed_tmatmul(const ir::Function& f, const ir::InstData& inst, const PanelLayout& layout);

/// Plans `f` (see the file comment) with weight panels laid out as `layout` says.
Result<FunctionPlan> analyze(const ir::Function& f, const PanelLayout& layout);

/// The message of run-time error `record` (RunError and its values) of instruction `i`,
/// worded as ir/interpret.cpp words it.
std::string run_error_message(const ir::Function& f, ir::InstId i, const std::int64_t* record);

/// The row-major extents of a static type.
std::vector<std::int64_t> extents_of(const ir::Type& t);
/// The byte size of a static type.
std::size_t bytes_of(const ir::Type& t);

/// Evaluates every load-time value of `f` with `params` and returns the bytes of each
/// const slot of `p` (InvalidInput for a missing or mismatched parameter). With
/// `zeros_for_missing`, an unbound parameter reads as zeros (emitting text only). Slots
/// no step reads, and slots with `skip[slot]` set (their bytes come from elsewhere: a
/// Program's pack cache), are left empty.
Result<std::vector<std::vector<std::uint8_t>>> const_bytes(const ir::Function& f, const FunctionPlan& p,
                                                           const ir::ParamValues& params, bool zeros_for_missing,
                                                           const std::vector<bool>* skip = nullptr);

/// The stored tensor of const slot `slot` when the kernel can read its bytes where they
/// are: a Value slot of a parameter bound in `params` with the function's kind and shape,
/// any kind but t2 (whose stored codes are packed). Copies share the bytes, so a kernel
/// holding it reads a 656 MB embedding without copying it. Otherwise nullopt (the slot's
/// bytes come from const_bytes, which also reports a missing or mismatched parameter).
std::optional<ir::StoredTensor> stored_param(const ir::Function& f, const FunctionPlan& p, std::size_t slot,
                                             const ir::ParamValues& params);

/// What identifies a weight panel slot across the specializations of one Program (the
/// same parameter in the same layout), or "" for slots that are not shared: values, and
/// panels of computed (non-parameter) weights.
std::string pack_key(const ir::Function& f, const FunctionPlan& p, std::size_t slot);

}  // namespace ternjit::targets::llvmjit
