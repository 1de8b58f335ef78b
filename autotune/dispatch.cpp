// SPDX-License-Identifier: Apache-2.0
// dispatch.cpp - tuning records applied to x86 artifacts at load (dispatch.h).
#include "autotune/dispatch.h"

#include <set>
#include <string_view>

#include "autotune/tmatmul_bench.h"
#include "ir/parse.h"
#include "targets/x86/tmatmul_space.h"

namespace ternjit::autotune {

namespace x86 = targets::x86;
using ir::Op;

std::vector<std::pair<std::string, x86::TMatMulProblem>> tmatmul_problems(const ir::Module& m,
                                                                          std::string_view function) {
  std::vector<std::pair<std::string, x86::TMatMulProblem>> out;
  const ir::Function* f = m.find_function(function);
  if (!f || f->blocks().size() != 1) return out;
  // Mirrors targets/x86/plan.cpp: a pure op of load-time values is evaluated at load
  // (not numbered); every other tmatmul is numbered in order and gets a kernel when its
  // weight is a load-time value.
  std::set<std::uint32_t> load_time;
  int count = 0;
  for (ir::InstId i : f->insts(f->entry())) {
    const ir::InstData& inst = f->inst(i);
    bool all_const = true;
    for (ir::ValueId v : inst.operands) all_const = all_const && load_time.count(v.index) > 0;
    if (ir::op_flags(inst.op) == ir::OpFlags::Pure && all_const) {
      for (ir::ValueId r : inst.results) load_time.insert(r.index);
      continue;
    }
    if (inst.op != Op::TMatMul) continue;
    const std::string key = "tmatmul." + std::to_string(count++);
    if (!load_time.count(inst.operands[1].index)) continue;
    const auto& a = std::get<ir::TMatMulAttrs>(inst.attrs);
    const ir::Type& xt = f->type_of(inst.operands[0]);
    const ir::Type& wt = f->type_of(inst.operands[1]);
    const ir::Type& yt = f->type_of(inst.results[0]);
    if (wt.rank() != 2 || !wt.shape[0].is_static() || !wt.shape[1].is_static()) continue;
    x86::TMatMulProblem p;
    p.K = wt.shape[0].extent;
    p.N = wt.shape[1].extent;
    const std::int64_t xn = xt.static_numel().value_or(0);
    p.M = p.K == 0 ? 0 : xn / p.K;
    p.x_kind = xt.elem;
    p.out_kind = yt.elem;
    std::size_t next = 2;
    p.x_scale = a.x_scale;
    if (a.x_scale) ++next;
    p.w_scale = a.w_scale;
    if (a.w_scale) p.w_scale_per_channel = f->type_of(inst.operands[next++]).rank() == 1;
    p.bias = a.bias;
    p.residual = a.residual;
    p.relu = a.act == ir::Activation::Relu;
    if (p.M < 1 || p.K < 1 || p.N < 1) continue;
    out.emplace_back(key, p);
  }
  return out;
}

Result<std::vector<DispatchEntry>> apply_tuning(targets::Artifact& artifact, const DispatchOptions& o) {
  std::vector<DispatchEntry> out;
  auto isa_it = artifact.metadata.find("isa");
  if (o.mode == "off" || isa_it == artifact.metadata.end()) return out;
  auto isa = x86::parse_isa(isa_it->second);
  if (!isa) return out;
  int threads = 1;
  if (auto t = artifact.metadata.find("threads"); t != artifact.metadata.end())
    threads = std::max(1, std::atoi(t->second.c_str()));
  const std::string text(artifact.bytes.begin(), artifact.bytes.end());
  TERNJIT_TRY(ir::Module m, ir::parse_module(text, "<artifact " + artifact.entry + ">"));
  for (auto& [key, p] : tmatmul_problems(m, artifact.entry)) {
    DispatchEntry e;
    e.key = key;
    e.problem = p;
    e.decision = decide(o.disk, p, *isa, threads);
    if (o.mode == "tune" && o.disk && e.decision.source != DecisionSource::Exact) {
      // Tune at first call: a short halving search, stored, then decided again (so the
      // choice is the same one a later "cached" load makes).
      BenchOptions bo;
      bo.threads = threads;
      bo.rotate_bytes = std::size_t{16} << 20;
      TMatMulEvaluator eval(p, bo);
      TuneOptions to;
      to.strategy = Strategy::Halving;
      to.budget_s = o.tune_budget_s;
      to.max_trials = o.tune_max_trials;
      to.compile_threads = 1;
      const x86::TMatMulConfig def = x86::default_config(p, *isa, threads);
      auto r = tune(p, x86::search_space(p, *isa, threads), def, eval, to);
      if (r.ok() && store_result(*o.disk, p, *isa, threads, *r).ok()) {
        e.tuned_now = true;
        e.decision = decide(o.disk, p, *isa, threads);
      }
    }
    artifact.metadata[key] = e.decision.config.str();
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace ternjit::autotune
