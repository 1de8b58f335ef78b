// SPDX-License-Identifier: Apache-2.0
// check.cpp - the differential check: interpret a module before and after a pass pipeline.
#include "tests/difftest/check.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <optional>
#include <set>

#include "ir/interpret.h"
#include "ir/parse.h"
#include "ir/print.h"
#include "tests/difftest/gen.h"

namespace ternjit::difftest {

namespace {

Result<std::vector<ir::HostTensor>> run_main(const ir::Module& m, const Inputs& in) {
  return ir::interpret(m, kMainFunction, in.args, in.params);
}

std::string one_line(std::string s) {
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

// The first disagreement between expected and actual results, if any.
std::optional<std::string> compare_results(const std::vector<ir::HostTensor>& want,
                                           const std::vector<ir::HostTensor>& got,
                                           const std::vector<double>& bounds, const Tolerance& tol) {
  if (want.size() != got.size())
    return "expected " + std::to_string(want.size()) + " results, got " + std::to_string(got.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    bool exact = is_integer(want[i].kind);
    double bound = i < bounds.size() ? std::max(1.0, bounds[i]) : 1.0;
    auto mm = ir::compare(want[i], got[i], exact ? 0 : tol.rtol, exact ? 0 : tol.atol * bound);
    if (!mm) continue;
    std::string what = mm->message;
    if (mm->reason == ir::Mismatch::Reason::Kind || mm->reason == ir::Mismatch::Reason::Shape)
      what += " (expected " + want[i].describe() + ", got " + got[i].describe() + ")";
    return "result " + std::to_string(i) + ": " + what;
  }
  return std::nullopt;
}

// ---------------------------------------------------------------- minimization helpers

// Use counts of every value of f (operands and branch arguments of laid-out instructions).
std::vector<int> use_counts(const ir::Function& f) {
  std::vector<int> uses(f.num_values(), 0);
  for (ir::BlockId b : f.blocks())
    for (ir::InstId i : f.insts(b)) {
      const ir::InstData& in = f.inst(i);
      for (ir::ValueId v : in.operands) ++uses[v.index];
      for (const ir::BlockCall& t : in.targets)
        for (ir::ValueId v : t.args) ++uses[v.index];
    }
  return uses;
}

// Erases pure instructions whose results are all unused, until none is left.
void prune(ir::Function& f) {
  for (bool changed = true; changed;) {
    changed = false;
    std::vector<int> uses = use_counts(f);
    for (ir::BlockId b : f.blocks()) {
      std::vector<ir::InstId> insts(f.insts(b).begin(), f.insts(b).end());
      for (auto it = insts.rbegin(); it != insts.rend(); ++it) {
        const ir::InstData& in = f.inst(*it);
        if (ir::op_flags(in.op) != ir::OpFlags::Pure) continue;
        bool used = false;
        for (ir::ValueId r : in.results) used = used || uses[r.index] > 0;
        if (used) continue;
        for (ir::ValueId o : in.operands) --uses[o.index];
        f.erase_inst(*it);
        changed = true;
      }
    }
  }
}

// Removes dead code and unused parameter declarations (and, with `drop_args`, unused
// arguments of @main, which renumbers the input seeds of those after them), then
// normalizes the module by printing and parsing it. nullopt when that fails.
std::optional<ir::Module> normalize(ir::Module m, bool drop_args = false) {
  ir::Function* f = m.find_function(kMainFunction);
  prune(*f);
  std::vector<int> uses = use_counts(*f);
  auto& args = f->block(f->entry()).args;
  if (drop_args)
    args.erase(std::remove_if(args.begin(), args.end(), [&](ir::ValueId v) { return uses[v.index] == 0; }),
               args.end());
  std::set<std::string> read;
  for (const ir::Function& g : m.functions())
    for (ir::BlockId b : g.blocks())
      for (ir::InstId i : g.insts(b))
        if (g.inst(i).op == ir::Op::Param) read.insert(std::get<ir::ParamAttrs>(g.inst(i).attrs).name);
  auto& params = m.params();
  params.erase(std::remove_if(params.begin(), params.end(),
                              [&](const ir::ParamDecl& p) { return !read.count(p.name); }),
               params.end());
  auto parsed = ir::parse_module(ir::print_module(m), "minimized.tir");
  if (!parsed.ok()) return std::nullopt;
  return std::move(parsed.value());
}

bool still_fails(const ir::Module& m, const Level& level, std::span<const std::uint64_t> seeds,
                 const Tolerance& tol) {
  CheckReport r = check_module(m, std::span<const Level>(&level, 1), seeds, tol);
  return r.original_error.empty() && !r.failures.empty();
}

// Candidate: @main without result j.
std::optional<ir::Module> drop_result(const ir::Module& m, std::size_t j) {
  ir::Module c = m;
  ir::Function& f = *c.find_function(kMainFunction);
  if (f.result_types().size() < 2) return std::nullopt;
  for (ir::BlockId b : f.blocks()) {
    auto t = f.terminator(b);
    if (!t || f.inst(*t).op != ir::Op::Ret) continue;
    auto& ops = f.inst(*t).operands;
    ops.erase(ops.begin() + static_cast<std::ptrdiff_t>(j));
  }
  auto types = f.result_types();
  types.erase(types.begin() + static_cast<std::ptrdiff_t>(j));
  f.set_result_types(types);
  std::vector<double> bounds = output_bounds(m);
  bounds.erase(bounds.begin() + static_cast<std::ptrdiff_t>(j));
  std::string text;
  for (double b : bounds) {
    char buf[32];
    auto res = std::to_chars(buf, buf + sizeof buf, b);
    text += (text.empty() ? "" : ",") + std::string(buf, res.ptr);
  }
  c.metadata()[std::string(kBoundsKey)] = text;
  return normalize(std::move(c));
}

// Candidate: instruction number `n` of @main (layout order) replaced by one of its
// operands of the same type, else by new arguments; a cond_br becomes a br to its
// successor number `side`.
std::optional<ir::Module> drop_inst(const ir::Module& m, std::size_t n, std::size_t side) {
  ir::Module c = m;
  ir::Function& f = *c.find_function(kMainFunction);
  std::vector<ir::InstId> all;
  for (ir::BlockId b : f.blocks())
    for (ir::InstId i : f.insts(b)) all.push_back(i);
  if (n >= all.size()) return std::nullopt;
  ir::InstId i = all[n];
  ir::InstData in = f.inst(i);
  if (in.op == ir::Op::CondBr) {  // keep one side of the diamond
    f.erase_inst(i);
    f.append_inst(in.block, ir::Op::Br, {}, {}, ir::NoAttrs{}, {}, {in.targets.at(side)});
    return normalize(std::move(c));
  }
  if (side != 0 || in.results.empty() || ir::op_flags(in.op) == ir::OpFlags::Term) return std::nullopt;
  for (ir::ValueId r : in.results) {
    const ir::Type& t = f.type_of(r);
    std::optional<ir::ValueId> repl;
    for (ir::ValueId o : in.operands)
      if (f.type_of(o) == t) repl = o;
    if (!repl) {
      if (!t.is_static()) return std::nullopt;
      repl = f.add_block_arg(f.entry(), t);
    }
    f.replace_all_uses(r, *repl);
  }
  f.erase_inst(i);
  return normalize(std::move(c));
}

std::size_t count_insts(const ir::Module& m) {
  const ir::Function& f = *m.find_function(kMainFunction);
  std::size_t n = 0;
  for (ir::BlockId b : f.blocks()) n += f.insts(b).size();
  return n;
}

}  // namespace

std::vector<Level> default_levels() {
  std::vector<Level> out;
  for (passes::OptLevel l : {passes::OptLevel::O0, passes::OptLevel::O1, passes::OptLevel::O2, passes::OptLevel::O3})
    out.push_back(Level{std::string(passes::opt_level_name(l)), passes::default_pipeline(l)});
  return out;
}

Reference reference_results(const ir::Module& m, std::span<const std::uint64_t> input_seeds) {
  Reference ref;
  for (std::uint64_t seed : input_seeds) {
    ref.inputs.push_back(make_inputs(m, seed));
    auto r = run_main(m, ref.inputs.back());
    if (!r.ok()) {
      ref.error = "input seed " + std::to_string(seed) + ": " + one_line(render(r.error()));
      return ref;
    }
    ref.expected.push_back(std::move(r.value()));
  }
  return ref;
}

CheckReport check_module(const ir::Module& m, std::span<const Level> levels,
                         std::span<const std::uint64_t> input_seeds, const Tolerance& tol) {
  CheckReport rep;
  const std::vector<double> bounds = output_bounds(m);
  Reference ref = reference_results(m, input_seeds);
  if (!ref.error.empty()) {
    rep.original_error = ref.error;
    return rep;
  }
  const std::vector<Inputs>& inputs = ref.inputs;
  const std::vector<std::vector<ir::HostTensor>>& expected = ref.expected;
  const std::string original = ir::print_module(m);
  // Levels often produce the same module: compare each distinct text once.
  std::map<std::string, std::vector<std::optional<std::string>>> seen;
  for (const Level& level : levels) {
    ir::Module opt = m;
    passes::PipelineOptions po;
    po.verify_each = true;
    auto pr = passes::run_pipeline(opt, level.passes, po);
    std::string text = pr.ok() ? ir::print_module(opt) : std::string();
    std::vector<std::optional<std::string>> verdicts;
    if (!pr.ok()) {
      verdicts.assign(input_seeds.size(), "pipeline failed: " + one_line(render(pr.error())));
    } else if (text == original) {
      verdicts.assign(input_seeds.size(), std::nullopt);  // the interpreter is deterministic
    } else if (auto it = seen.find(text); it != seen.end()) {
      verdicts = it->second;
    } else {
      for (std::size_t s = 0; s < input_seeds.size(); ++s) {
        auto r = run_main(opt, inputs[s]);
        if (!r.ok()) verdicts.push_back("optimized module failed to run: " + one_line(render(r.error())));
        else verdicts.push_back(compare_results(expected[s], r.value(), bounds, tol));
      }
      seen.emplace(text, verdicts);
    }
    for (std::size_t s = 0; s < input_seeds.size(); ++s) {
      ++rep.runs;
      if (verdicts[s]) rep.failures.push_back(Failure{level.name, input_seeds[s], *verdicts[s], text});
    }
  }
  return rep;
}

ir::Module minimize(const ir::Module& m, const Level& level, std::span<const std::uint64_t> input_seeds,
                    const Tolerance& tol) {
  if (!still_fails(m, level, input_seeds, tol)) return m;
  return minimize_with(m, [&](const ir::Module& c) { return still_fails(c, level, input_seeds, tol); });
}

ir::Module minimize_with(const ir::Module& m, const std::function<bool(const ir::Module&)>& fails) {
  ir::Module cur = m;
  for (bool progress = true; progress;) {
    progress = false;
    for (std::size_t j = cur.find_function(kMainFunction)->result_types().size(); j-- > 0;) {
      auto c = drop_result(cur, j);
      if (c && fails(*c)) cur = std::move(*c), progress = true;
    }
    // Later instructions first: dropping a use early makes its operands dead too.
    for (std::size_t n = count_insts(cur); n-- > 0;) {
      if (n >= count_insts(cur)) continue;
      for (std::size_t side = 0; side < 2; ++side) {
        auto c = drop_inst(cur, n, side);
        if (c && fails(*c)) {
          cur = std::move(*c);
          progress = true;
          break;
        }
      }
    }
  }
  // Unused arguments last: dropping them changes the other arguments' values.
  if (auto c = normalize(cur, true); c && fails(*c)) cur = std::move(*c);
  return cur;
}

}  // namespace ternjit::difftest
