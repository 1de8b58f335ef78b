// SPDX-License-Identifier: Apache-2.0
// grad.cpp - ternjit::grad: the public entry to the autodiff pass (passes/autodiff.cpp).
#include "ternjit/builder.h"

#include <algorithm>

#include "ir/module_impl.h"
#include "passes/passes.h"

namespace ternjit {

Result<GradFunctions> grad(Module& module, std::string_view function, const GradOptions& options) {
  ir::Module& m = module.impl().module;
  const ir::Function* f = m.find_function(function);
  if (!f) return make_error(ErrorCode::NotFound, "grad: no function '" + std::string(function) + "'");
  passes::AutodiffOptions o{std::string(function), {}, options.ste_clip, options.int8_dx, options.int8_dw};
  for (const std::string& w : options.wrt)
    o.wrt.push_back(w.starts_with("@") || w.starts_with("%") ? w : "%" + w);

  // The pass differentiates straight-line code: inline the calls (layer composition)
  // into a copy first, so that a failure leaves the module as it was.
  ir::Module work = m;
  const bool has_call = std::any_of(f->blocks().begin(), f->blocks().end(), [&](ir::BlockId b) {
    return std::any_of(f->insts(b).begin(), f->insts(b).end(), [&](ir::InstId i) { return f->inst(i).op == ir::Op::Call; });
  });
  if (has_call) TERNJIT_TRY_VOID(passes::inline_calls(work));
  TERNJIT_TRY(passes::AutodiffResult r, passes::autodiff(work, o));
  m = std::move(work);
  GradFunctions out;
  out.forward = r.forward;
  out.backward = r.backward;
  for (const std::string& w : r.wrt) out.wrt.push_back(w.starts_with("%") ? w.substr(1) : w);
  out.num_saved = r.num_saved;
  return out;
}

}  // namespace ternjit
