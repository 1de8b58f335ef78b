// SPDX-License-Identifier: Apache-2.0
// registry.cpp - the table of every pass, by name: one line per pass, no self-registration.
#include "passes/passes.h"

namespace ternjit::passes {

namespace {

// Pass-name order is the order `ternjit opt --help` and tests list them in.
const PassInfo kPasses[] = {
    {"fold-constants", &fold_constants, "fold instructions whose operands are constants"},
    {"eliminate-dead-code", &eliminate_dead_code, "remove unused pure instructions and unreachable blocks"},
    {"eliminate-common-subexpressions", &eliminate_common_subexpressions, "share identical pure instructions"},
    {"simplify", &simplify, "local algebraic rewrites (x*1, x+0, transpose(transpose(x)), ...)"},
    {"inline-calls", &inline_calls, "replace every call by a copy of the callee's body"},
    {"fuse-quantization", &fuse_quantization, "turn quantize/ternarize chains and ternary matmuls into tmatmul"},
    {"fuse-epilogue", &fuse_epilogue, "fold scales, bias, residual and activation into the tmatmul before them"},
    {"fuse-elementwise", &fuse_elementwise, "merge chains of single-use elementwise ops into one ewise loop"},
    {"autodiff", static_cast<FallibleModulePass>(&autodiff), "add @f.fwd and @f.bwd: reverse-mode gradients of each float function"},
};

}  // namespace

std::span<const PassInfo> all_passes() { return kPasses; }

const PassInfo* find_pass(std::string_view name) {
  for (const PassInfo& p : all_passes())
    if (p.name == name) return &p;
  return nullptr;
}

}  // namespace ternjit::passes
