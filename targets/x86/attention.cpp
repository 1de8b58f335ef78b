// SPDX-License-Identifier: Apache-2.0
// attention.cpp - the x86 steps of the transformer ops (rope, layernorm, causal_softmax, attention).
#include "targets/x86/plan_internal.h"

namespace ternjit::targets::x86 {

Result<std::unique_ptr<Step>> lower_attention_op(const LowerContext&) { return std::unique_ptr<Step>(); }

}  // namespace ternjit::targets::x86
