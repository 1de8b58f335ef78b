// SPDX-License-Identifier: Apache-2.0
// row_batch.h - the analysis that decides whether a function's row count (M) may be a run-time argument.
//
// Not a pass (it changes nothing): the engine asks it before compiling one kernel per
// M bucket instead of one per M (docs/caching.md, "Run-time rows").
#pragma once

#include <optional>
#include <string>

#include "ir/ir.h"
#include "ternjit/result.h"

namespace ternjit::passes {

/// The candidate row symbol of `f` read off its signature: the one symbol that is the
/// leading extent (axis 0) of every argument and every result and appears at no other
/// axis of any of them. nullopt when there is none or more than one, when `f` has no
/// argument, or when an argument or result is a scalar. Cheap; says nothing about the body.
std::optional<ir::SymbolId> row_symbol_candidate(const ir::Function& f);

/// Success when symbol `rows` of `f` is an independent batch axis of the whole
/// function: computing the function on the first r rows of every argument gives the
/// first r rows of every result, for every r up to the extent. Conservative: anything
/// it does not know is Unsupported with the reason, and the engine then specializes
/// every M as before (never a silent wrong answer). It requires:
///   - one block, no calls (inline first), `rows` nowhere but axis 0 of values;
///   - every argument and result has `rows` at axis 0; constants and parameters never;
///   - every op treats that axis as a batch axis: elementwise ops (operands without
///     the axis broadcast along it: rank below the result's or extent 1 at axis 0),
///     `tmatmul` with a per-row x (x_scale and residual per-row, w and its scales not),
///     `matmul` with a per-row A (rank 2 or 3) and a B without the axis (or both rank 3,
///     the axis their common batch), rmsnorm / quantize / quantize_int8 of rank >= 2
///     (per row of the last axis), softmax and reductions over another axis, transposes
///     keeping axis 0 first, reshapes keeping it leading with the same row length
///     (other dims static), dequantize. ternarize_absmean and tquantize (one scale over
///     the whole tensor) are refused on a per-row value, as are br, cond_br and call.
/// Precondition: `f` verifies.
Result<void> check_row_batch(const ir::Function& f, ir::SymbolId rows);

}  // namespace ternjit::passes
