// SPDX-License-Identifier: Apache-2.0
// targets.cpp - the differential test across targets: engines against the reference interpreter.
#include "tests/difftest/targets.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <sstream>

#include "ir/module_impl.h"
#include "targets/x86/isa.h"
#include "ternjit/engine.h"

namespace ternjit::difftest {

namespace {

std::string one_line(std::string s) {
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

}  // namespace

std::optional<std::string> compare_target_results(const std::vector<ir::HostTensor>& want,
                                                  const std::vector<ir::HostTensor>& got,
                                                  const std::vector<double>& bounds, const TargetTolerance& tol) {
  if (want.size() != got.size())
    return "expected " + std::to_string(want.size()) + " results, got " + std::to_string(got.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    const bool exact = is_integer(want[i].kind) || want[i].kind == ElemKind::Bool || want[i].kind == ElemKind::T2;
    const bool half = want[i].kind == ElemKind::F16 || want[i].kind == ElemKind::BF16;
    const double bound = i < bounds.size() ? std::max(1.0, bounds[i]) : 1.0;
    const double rtol = exact ? 0 : half ? tol.half_rtol : tol.rtol;
    const double atol = exact ? 0 : (half ? tol.half_rtol : tol.atol) * bound;
    auto mm = ir::compare(want[i], got[i], rtol, atol);
    if (!mm) continue;
    std::string what = mm->message;
    if (mm->reason == ir::Mismatch::Reason::Kind || mm->reason == ir::Mismatch::Reason::Shape)
      what += " (expected " + want[i].describe() + ", got " + got[i].describe() + ")";
    return "result " + std::to_string(i) + ": " + what;
  }
  return std::nullopt;
}

std::vector<TargetConfig> available_targets(std::vector<std::string>* skipped) {
  std::vector<TargetConfig> out;
  EngineOptions probe;
  probe.target = "reference";
  probe.cache_dir = "off";
  auto engine = Engine::create(probe);
  if (!engine.ok()) return out;
  for (const TargetDescription& t : engine->targets()) {
    if (t.name == "reference") continue;
    if (!t.available) {
      if (skipped) skipped->push_back(t.name + ": " + t.reason);
      continue;
    }
    if (t.name != "x86") {
      out.push_back(TargetConfig{t.name, t.name, "", 1});
      continue;
    }
    // The x86 target at each ISA cap this CPU runs (a higher cap would run the same code).
    const targets::x86::IsaSupport& host = targets::x86::host_isas();
    for (targets::x86::Isa isa : targets::x86::kAllIsas) {
      const std::string name(targets::x86::isa_name(isa));
      if (!host.supports(isa)) {
        if (skipped) skipped->push_back("x86/" + name + ": this CPU cannot run it");
        continue;
      }
      out.push_back(TargetConfig{"x86/" + name, "x86", "x86.max_isa=" + name, 1});
    }
  }
  return out;
}

Result<std::vector<TargetConfig>> select_targets(std::span<const TargetConfig> all, const std::string& names) {
  std::vector<TargetConfig> out;
  std::stringstream ss(names);
  for (std::string item; std::getline(ss, item, ',');) {
    bool any = false;
    for (const TargetConfig& t : all)
      if (t.name == item || t.name.rfind(item + "/", 0) == 0) out.push_back(t), any = true;
    if (!any) {
      std::string have;
      for (const TargetConfig& t : all) have += (have.empty() ? "" : ", ") + t.name;
      return make_error(ErrorCode::InvalidArgument,
                        "target '" + item + "' is not available here (available: " + have + ")");
    }
  }
  return out;
}

std::vector<std::pair<std::size_t, std::size_t>> kv_in_place_pairs(const ir::Module& m) {
  std::vector<std::pair<std::size_t, std::size_t>> pairs;
  const ir::Function* f = m.find_function(kMainFunction);
  if (f == nullptr || f->blocks().size() != 1) return pairs;
  const std::vector<ir::InstId> order(f->insts(f->entry()).begin(), f->insts(f->entry()).end());
  if (order.empty() || f->inst(order.back()).op != ir::Op::Ret) return pairs;
  // The positions of the instructions reading each value (once per operand slot).
  std::vector<std::vector<std::size_t>> readers(f->num_values());
  for (std::size_t p = 0; p < order.size(); ++p)
    for (ir::ValueId o : f->inst(order[p]).operands) readers[o.index].push_back(p);
  auto is_kv_write = [&](std::size_t p) { return f->inst(order[p]).op == ir::Op::KvWrite; };
  auto position = [&](ir::InstId i) {
    return static_cast<std::size_t>(std::find(order.begin(), order.end(), i) - order.begin());
  };
  const std::span<const ir::ValueId> args = f->args();
  const std::vector<ir::ValueId>& rets = f->inst(order.back()).operands;
  std::vector<bool> arg_taken(args.size(), false);
  for (std::size_t j = 0; j < rets.size(); ++j) {
    const ir::ValueId last = rets[j];
    // Returned once, read by no other kv_write.
    std::size_t ret_reads = 0;
    bool ok = true;
    for (std::size_t p : readers[last.index]) {
      if (p == order.size() - 1) ++ret_reads;
      else ok = ok && !is_kv_write(p);
    }
    ok = ok && ret_reads == 1;
    ir::ValueId cur = last;
    bool any_write = false;
    while (ok) {
      const ir::ValueData& d = f->value(cur);
      if (d.def == ir::ValueDef::BlockArg) break;
      if (f->inst(d.inst).op != ir::Op::KvWrite) {
        ok = false;
        break;
      }
      any_write = true;
      const std::size_t w = position(d.inst);
      const ir::ValueId prev = f->inst(d.inst).operands[0];
      if (f->value(prev).def == ir::ValueDef::BlockArg) {
        ok = readers[prev.index].size() == 1;  // only this write reads the argument
      } else {
        std::size_t next_writes = 0;
        for (std::size_t p : readers[prev.index]) {
          if (p == w) ++next_writes;
          else ok = ok && p < w && !is_kv_write(p);
        }
        ok = ok && next_writes == 1;
      }
      cur = prev;
    }
    if (!ok || !any_write) continue;
    const std::size_t i = f->value(cur).index;
    if (arg_taken[i]) continue;
    arg_taken[i] = true;
    pairs.emplace_back(i, j);
  }
  return pairs;
}

namespace {

// A program compiled by a configuration's engine, its parameters bound (the Engine keeps
// its state behind a pointer, so moving it keeps the Program valid).
struct Prepared {
  Engine engine;
  Program program;
};

Result<Prepared> prepare(const TargetConfig& config, const ir::Module& m, const Inputs& inputs) {
  EngineOptions o;
  o.target = config.target;
  o.target_options = config.target_options;
  o.threads = config.threads;
  o.cache_dir = "off";
  TERNJIT_TRY(Engine engine, Engine::create(o));
  TERNJIT_TRY(Program program, engine.compile(ir::wrap(m)));
  for (const auto& [name, t] : inputs.params.values) {
    const bool ternary = t.kind() == ElemKind::T2;
    const TensorView view{const_cast<std::uint8_t*>(t.bytes().data()), ternary ? ElemKind::U8 : t.kind(), t.shape()};
    TERNJIT_TRY_VOID(program.bind(name, view, ternary ? WeightFormat::Tern2 : WeightFormat::Plain));
  }
  return Prepared{std::move(engine), std::move(program)};
}

// Runs @main of a prepared program (run_on_target's second half).
Result<std::vector<ir::HostTensor>> run_prepared(Program& program, const ir::Module& m, const Inputs& inputs,
                                                 bool in_place) {
  std::vector<std::vector<std::uint8_t>> arg_bytes;
  std::vector<TensorView> args;
  for (const ir::HostTensor& t : inputs.args) arg_bytes.push_back(t.to_bytes());
  for (std::size_t i = 0; i < inputs.args.size(); ++i)
    args.push_back(TensorView{arg_bytes[i].data(), inputs.args[i].kind, inputs.args[i].shape});
  TERNJIT_TRY(const std::shared_ptr<const Kernel> kernel, program.kernel(kMainFunction, args));
  std::vector<std::vector<std::uint8_t>> out_bytes;
  std::vector<TensorView> outs;
  for (const TensorView& spec : kernel->outputs()) {
    // Poison: NaN in every float lane (0xFF bytes), all-ones integers.
    std::size_t n = 1;
    for (std::int64_t d : spec.shape) n *= static_cast<std::size_t>(d);
    out_bytes.emplace_back(n * static_cast<std::size_t>(std::max(elem_bits(spec.kind) / 8, 1)), std::uint8_t{0xFF});
  }
  for (std::size_t i = 0; i < out_bytes.size(); ++i)
    outs.push_back(TensorView{out_bytes[i].data(), kernel->outputs()[i].kind, kernel->outputs()[i].shape});
  // One buffer as argument i and result j: the result is read back from the argument's bytes.
  std::vector<std::vector<std::uint8_t>*> result_bytes;
  for (auto& b : out_bytes) result_bytes.push_back(&b);
  if (in_place)
    for (auto [i, j] : kv_in_place_pairs(m)) {
      outs[j].data = arg_bytes[i].data();
      result_bytes[j] = &arg_bytes[i];
    }
  TERNJIT_TRY_VOID(kernel->run(args, outs));
  std::vector<ir::HostTensor> result;
  for (std::size_t i = 0; i < outs.size(); ++i) {
    TERNJIT_TRY(ir::HostTensor t, ir::HostTensor::from_bytes(outs[i].kind, outs[i].shape, *result_bytes[i]));
    result.push_back(std::move(t));
  }
  return result;
}

}  // namespace

Result<std::vector<ir::HostTensor>> run_on_target(const TargetConfig& config, const ir::Module& m,
                                                  const Inputs& inputs, bool in_place) {
  TERNJIT_TRY(Prepared p, prepare(config, m, inputs));
  return run_prepared(p.program, m, inputs, in_place);
}

CheckReport check_targets(const ir::Module& m, std::span<const TargetConfig> targets,
                          std::span<const std::uint64_t> input_seeds, const TargetTolerance& tol) {
  CheckReport rep;
  const std::vector<double> bounds = output_bounds(m);
  const Reference ref = reference_results(m, input_seeds);
  if (!ref.error.empty()) {
    rep.original_error = ref.error;
    return rep;
  }
  const bool in_place = !kv_in_place_pairs(m).empty();
  for (const TargetConfig& t : targets) {
    for (std::size_t s = 0; s < input_seeds.size(); ++s) {
      // One compile per target and seed: the parameters differ per input seed.
      auto p = prepare(t, m, ref.inputs[s]);
      auto r = p.ok() ? run_prepared(p->program, m, ref.inputs[s], false) : Result<std::vector<ir::HostTensor>>(p.error());
      // A target that refuses the program (an op it has no code for: spirv) is not
      // wrong: the program is not its own. Every seed has the same shapes, so the
      // refusal holds for all of them.
      if (!r.ok() && r.error().code == ErrorCode::Unsupported) {
        rep.unsupported.push_back(Failure{t.name, input_seeds[s], one_line(r.error().message), {}});
        break;
      }
      ++rep.runs;
      std::optional<std::string> verdict =
          r.ok() ? compare_target_results(ref.expected[s], *r, bounds, tol) : "target failed: " + one_line(render(r.error()));
      if (verdict) rep.failures.push_back(Failure{t.name, input_seeds[s], *verdict, {}});
      if (in_place && p.ok()) {  // the same program with the caches updated in place
        ++rep.runs;
        auto q = run_prepared(p->program, m, ref.inputs[s], true);
        std::optional<std::string> v = q.ok() ? compare_target_results(ref.expected[s], *q, bounds, tol)
                                              : "target failed: " + one_line(render(q.error()));
        if (v) rep.failures.push_back(Failure{t.name + " in place", input_seeds[s], *v, {}});
      }
    }
  }
  return rep;
}

ir::Module minimize_on_target(const ir::Module& m, const TargetConfig& target,
                              std::span<const std::uint64_t> input_seeds, const TargetTolerance& tol) {
  return minimize_with(m, [&](const ir::Module& c) {
    CheckReport r = check_targets(c, std::span<const TargetConfig>(&target, 1), input_seeds, tol);
    return r.original_error.empty() && !r.failures.empty();
  });
}

}  // namespace ternjit::difftest
