// SPDX-License-Identifier: Apache-2.0
// epilogue_internal.h - the tmatmul epilogue matcher, shared by fuse-epilogue and fuse-elementwise.
#pragma once

#include <optional>

#include "ir/ir.h"

namespace ternjit::passes {

/// How `user` would be absorbed into the epilogue of the tmatmul `mm`.
struct EpilogueMatch {
  ir::TMatMulAttrs attrs;  ///< mm's attributes with the new slot (or activation) set
  ir::ValueId operand;     ///< the new epilogue operand; invalid for an activation
};

/// Whether the tmatmul `mm` can absorb `user` exactly (fuse_epilogue.cpp): `user` is
/// the only use of mm's result; it is `mul` by a per-row [..., 1] (x_scale), per-channel
/// [N] or scalar (w_scale) f32 tensor, `add` of a bias [N] or a residual of the result
/// type, or relu/gelu/silu/sigmoid/tanh; its result has mm's result type; the slot is
/// free and no later epilogue step is set, so the fixed epilogue order
/// (x_scale, w_scale, bias, residual, act) is kept. Precondition: verified IR.
std::optional<EpilogueMatch> match_epilogue(const ir::Function& f, ir::InstId mm, ir::InstId user);

}  // namespace ternjit::passes
