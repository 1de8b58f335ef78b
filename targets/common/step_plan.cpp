// SPDX-License-Identifier: Apache-2.0
// step_plan.cpp - the shared walk of CPU targets (step_plan.h).
#include "targets/common/step_plan.h"

#include "targets/common/view2d.h"
#include "targets/load_value.h"

#include <algorithm>
#include <map>

namespace ternjit::targets {

using ir::InstId;
using ir::Op;
using ir::ValueId;

namespace {

std::size_t align_up(std::size_t n) { return (n + kScratchAlign - 1) / kScratchAlign * kScratchAlign; }

std::string quote(Op op) { return "'" + std::string(ir::op_name(op)) + "'"; }

// Ops whose result is never computed into an output buffer: load-time values and aliases.
bool defines_no_bytes(Op op) { return op == Op::Param || op == Op::Const || op == Op::Reshape; }

}  // namespace

std::size_t static_bytes(const ir::Type& t) {
  return static_cast<std::size_t>(t.static_numel().value_or(0)) * static_cast<std::size_t>(elem_bits(t.elem) / 8);
}

Result<void> plannable(const ir::Function& f, std::string_view target) {
  const std::string who = "the " + std::string(target) + " target";
  if (f.blocks().size() != 1)
    return make_error(ErrorCode::Unsupported, who + " compiles single-block functions; '" + f.name() + "' has " +
                                                  std::to_string(f.blocks().size()) +
                                                  " blocks left after optimization (control flow)");
  for (InstId i : f.insts(f.entry())) {
    const ir::InstData& inst = f.inst(i);
    if (inst.op == Op::Call)
      return make_error(ErrorCode::Unsupported, who + " needs calls inlined; '" + f.name() + "' still has a " +
                                                    quote(inst.op));
    for (ValueId r : inst.results)
      if (!f.type_of(r).static_numel())
        return make_error(ErrorCode::Unsupported, who + " needs static shapes; a result of " + quote(inst.op) +
                                                      " in '" + f.name() + "' is not static");
  }
  for (ValueId a : f.args())
    if (!f.type_of(a).static_numel())
      return make_error(ErrorCode::Unsupported,
                        who + " needs static shapes; an argument of '" + f.name() + "' is not static");
  return success();
}

namespace {

// The per-call scratch: 64-byte aligned regions, reused once their value is dead.
// First fit over the live regions sorted by offset (a call's plan has at most a few
// thousand values, so the quadratic walk costs nothing next to compiling them).
class ScratchAllocator {
 public:
  // A region of `bytes` overlapping no live region; it is live until release_dead(k)
  // with k >= last_read.
  std::size_t allocate(std::size_t bytes, std::size_t last_read) {
    const std::size_t size = align_up(bytes);
    if (size == 0) return 0;  // an empty value has no bytes to overlap
    std::size_t at = 0;
    for (const Region& r : live_) {  // sorted by offset
      if (r.offset >= at + size) break;
      at = std::max(at, r.offset + r.size);
    }
    live_.insert(std::upper_bound(live_.begin(), live_.end(), at,
                                  [](std::size_t off, const Region& r) { return off < r.offset; }),
                 Region{at, size, last_read});
    high_ = std::max(high_, at + size);
    return at;
  }
  // Frees the regions whose last read is at or before position `k`.
  void release_dead(std::size_t k) {
    std::erase_if(live_, [&](const Region& r) { return r.last_read <= k; });
  }
  [[nodiscard]] std::size_t high_water() const { return high_; }

 private:
  struct Region {
    std::size_t offset, size, last_read;
  };
  std::vector<Region> live_;
  std::size_t high_ = 0;
};

}  // namespace

StepPlan plan_steps(const ir::Function& f, std::span<const ExtraRead> extra_reads) {
  StepPlan p;
  p.slot_of.resize(f.num_values());
  std::vector<bool> defined(f.num_values(), false);
  auto put = [&](ValueId v, Slot s) {
    p.slot_of[v.index] = s;
    defined[v.index] = true;
  };
  const auto args = f.args();
  for (std::size_t i = 0; i < args.size(); ++i) {
    put(args[i], {SlotKind::Arg, i});
    p.in_bytes.push_back(static_bytes(f.type_of(args[i])));
  }
  for (const ir::Type& t : f.result_types()) p.out_bytes.push_back(static_bytes(t));
  const auto insts = f.insts(f.entry());
  TERNJIT_CHECK(!insts.empty() && f.inst(insts.back()).op == Op::Ret, "plan_steps: the block does not end in ret");

  // Liveness: the position of the last instruction reading each value's bytes. An alias
  // (reshape) is read through its root, so a read of the alias keeps the root live.
  std::vector<std::size_t> position(f.num_insts(), 0);
  std::vector<std::uint32_t> root(f.num_values());
  std::vector<std::size_t> last_read(f.num_values(), 0);
  for (std::uint32_t v = 0; v < f.num_values(); ++v) root[v] = v;
  for (std::size_t k = 0; k < insts.size(); ++k) {
    const ir::InstData& inst = f.inst(insts[k]);
    position[insts[k].index] = k;
    for (ValueId v : inst.operands) last_read[root[v.index]] = std::max(last_read[root[v.index]], k);
    if (inst.op == Op::Reshape) root[inst.results[0].index] = root[inst.operands[0].index];
    for (ValueId r : inst.results) last_read[r.index] = std::max(last_read[r.index], k);  // dead results: freed at once
  }
  for (const ExtraRead& e : extra_reads) {
    TERNJIT_CHECK(e.value.index < f.num_values() && e.at.index < f.num_insts(), "plan_steps: a bad extra read");
    std::size_t& l = last_read[root[e.value.index]];
    l = std::max(l, position[e.at.index]);
  }

  // The first ret operand j computed by a step is computed straight into output j.
  std::map<std::uint32_t, std::size_t> claimed;
  const ir::InstData& ret = f.inst(insts.back());
  for (std::size_t j = 0; j < ret.operands.size(); ++j) {
    const ValueId v = ret.operands[j];
    const ir::ValueData& d = f.value(v);
    if (d.def != ir::ValueDef::InstResult || claimed.count(v.index)) continue;
    if (defines_no_bytes(f.inst(d.inst).op)) continue;
    claimed.emplace(v.index, j);
  }

  // kv_write in place. A value is load-time as the walk below decides (param, or a pure op
  // of load-time values): such bytes are constants, never written.
  std::vector<bool> load_time(f.num_values(), false);
  std::vector<std::size_t> uses(f.num_values(), 0);
  for (InstId i : insts) {
    const ir::InstData& inst = f.inst(i);
    for (ValueId v : inst.operands) ++uses[v.index];
    const bool lt = inst.op == Op::Param ||
                    (inst.op != Op::Ret && ir::op_flags(inst.op) == ir::OpFlags::Pure &&
                     std::all_of(inst.operands.begin(), inst.operands.end(), [&](ValueId v) { return load_time[v.index]; }));
    for (ValueId r : inst.results) load_time[r.index] = lt;
  }
  auto find = [&](std::uint32_t v) {
    while (root[v] != v) v = root[v];
    return v;
  };
  auto is_arg = [&](std::uint32_t v) { return f.value(ValueId{v}).def != ir::ValueDef::InstResult; };
  // A kv_write whose cache bytes nobody reads after it writes them in place: its result
  // joins the cache's root (the chain's last read becomes the root's). A chain starting at
  // an argument read only there is kept only if it reaches a ret operand it can live in.
  std::vector<std::uint32_t> arg_chains;  // argument roots, with the first kv_write result
  std::map<std::uint32_t, std::uint32_t> first_of_chain;
  for (std::size_t k = 0; k < insts.size(); ++k) {
    const ir::InstData& inst = f.inst(insts[k]);
    if (inst.op != Op::KvWrite || load_time[inst.results[0].index]) continue;
    const ValueId c = inst.operands[0];
    const std::uint32_t rc = find(c.index);
    if (load_time[c.index] || last_read[rc] != k) continue;
    if (is_arg(rc) && !first_of_chain.contains(rc)) {
      if (rc != c.index || uses[c.index] != 1) continue;  // an argument read (or aliased) elsewhere stays intact
      arg_chains.push_back(rc);
      first_of_chain[rc] = inst.results[0].index;
    }
    const std::uint32_t r = inst.results[0].index;
    root[r] = rc;
    last_read[rc] = std::max(last_read[rc], last_read[r]);
  }
  std::map<std::uint32_t, std::size_t> chain_out;  // argument root -> the output its chain lives in
  for (std::uint32_t a : arg_chains) {
    std::optional<std::size_t> out;
    for (std::size_t j = 0; j < ret.operands.size(); ++j) {
      const std::uint32_t v = ret.operands[j].index;
      if (v != a && find(v) == a) {
        auto it = claimed.find(v);
        if (it != claimed.end() && it->second == j && f.inst(f.value(ret.operands[j]).inst).op == Op::KvWrite) out = j;
        else out.reset();
        break;
      }
    }
    if (out) {
      chain_out[a] = *out;
      p.in_place.push_back({f.value(ValueId{a}).index, *out});
      continue;
    }
    // No output to live in: the chain starts at its first result instead (a region of the
    // scratch; the first kv_write copies the argument there).
    const std::uint32_t r0 = first_of_chain.at(a);
    for (std::uint32_t v = 0; v < f.num_values(); ++v)
      if (v != a && v != r0 && find(v) == a) root[v] = r0;
    root[r0] = r0;
    last_read[r0] = last_read[a];
  }

  ScratchAllocator scratch;
  auto result_slot = [&](ValueId r) -> Slot {
    auto it = claimed.find(r.index);
    if (it != claimed.end()) return {SlotKind::Out, it->second};
    return {SlotKind::Scratch, scratch.allocate(static_bytes(f.type_of(r)), last_read[r.index])};
  };

  for (std::size_t k = 0; k < insts.size(); ++k) {
    const InstId i = insts[k];
    const ir::InstData& inst = f.inst(i);
    if (inst.op == Op::Ret) {
      for (std::size_t j = 0; j < inst.operands.size(); ++j) {
        const Slot s = p.slot(inst.operands[j]);
        if (s.kind == SlotKind::Out && s.index == j) continue;
        PlannedStep c;
        c.kind = PlannedStep::Kind::Copy;
        c.in = {s};
        c.out = {Slot{SlotKind::Out, j}};
        c.bytes = p.out_bytes[j];
        c.ret_index = j;
        p.steps.push_back(std::move(c));
      }
      continue;
    }
    for (ValueId v : inst.operands) TERNJIT_CHECK(defined[v.index], "plan_steps: a value is used before it is defined");
    const bool all_load_time =
        std::all_of(inst.operands.begin(), inst.operands.end(), [&](ValueId v) { return p.is_load_time(v); });
    if (inst.op == Op::Param || (ir::op_flags(inst.op) == ir::OpFlags::Pure && all_load_time)) {
      for (std::size_t j = 0; j < inst.results.size(); ++j) {
        p.load_time.push_back({inst.results[j], i, j});
        put(inst.results[j], {SlotKind::Const, p.load_time.size() - 1});
      }
      continue;
    }
    if (inst.op == Op::Reshape) {
      put(inst.results[0], p.slot(inst.operands[0]));
      continue;
    }
    PlannedStep s;
    s.inst = i;
    for (ValueId v : inst.operands) s.in.push_back(p.slot(v));
    if (inst.op == Op::KvWrite && find(inst.results[0].index) != inst.results[0].index) {
      // In place: the chain's bytes (its root's, or the output an argument chain lives in).
      const std::uint32_t rt = find(inst.results[0].index);
      auto out = chain_out.find(rt);
      put(inst.results[0], out != chain_out.end() ? Slot{SlotKind::Out, out->second} : p.slot(ValueId{rt}));
      s.out.push_back(p.slot(inst.results[0]));
      p.steps.push_back(std::move(s));
      scratch.release_dead(k);
      continue;
    }
    // The results are placed while the operands are still live (they are released
    // below), so a step never writes over what it reads.
    for (ValueId r : inst.results) {
      put(r, result_slot(r));
      s.out.push_back(p.slot(r));
    }
    p.steps.push_back(std::move(s));
    scratch.release_dead(k);
  }
  p.scratch_bytes = scratch.high_water();
  return p;
}

void close_load_time_needs(const ir::Function& f, const StepPlan& plan, std::vector<bool>& needed) {
  needed.resize(plan.load_time.size(), false);
  for (std::size_t k = plan.load_time.size(); k-- > 0;) {
    if (!needed[k]) continue;
    const LoadTimeValue& v = plan.load_time[k];
    // The results of one instruction are consecutive entries, evaluated together.
    for (std::size_t j = k - v.result; j < plan.load_time.size() && plan.load_time[j].inst == v.inst; ++j)
      needed[j] = true;
    for (ValueId a : f.inst(v.inst).operands) needed[plan.slot(a).index] = true;
  }
}

Result<std::vector<LoadValue>> evaluate_load_time(const ir::Function& f, const StepPlan& plan,
                                                  const ir::ParamValues& params, bool zeros_for_missing,
                                                  std::vector<bool>* needed) {
  if (needed) close_load_time_needs(f, plan, *needed);
  std::vector<LoadValue> values(plan.load_time.size());
  for (std::size_t k = 0; k < plan.load_time.size(); ++k) {
    const LoadTimeValue& v = plan.load_time[k];
    if (v.result != 0) continue;  // evaluated with result 0 of its instruction
    if (needed && !(*needed)[k]) continue;
    const ir::InstData& inst = f.inst(v.inst);
    if (inst.op == Op::Param) {
      TERNJIT_TRY(values[k], LoadValue::param(params, std::get<ir::ParamAttrs>(inst.attrs).name, f,
                                              f.type_of(inst.results[0]), zeros_for_missing));
      continue;
    }
    const ir::Module sm = ir::single_inst_module(f, inst);
    std::vector<ir::HostTensor> args;
    for (ValueId a : inst.operands) args.push_back(values[plan.slot(a).index].tensor());
    TERNJIT_TRY(auto outs, ir::interpret(sm, sm.functions()[0], args, ir::ParamValues{}));
    TERNJIT_CHECK(outs.size() == inst.results.size(), "load-time evaluation returned the wrong number of results");
    for (std::size_t j = 0; j < outs.size(); ++j) values[k + j].computed = std::move(outs[j]);
  }
  return values;
}

std::vector<TMatMulEpilogueOperand> tmatmul_epilogue(const ir::InstData& inst) {
  const auto& a = std::get<ir::TMatMulAttrs>(inst.attrs);
  const std::optional<std::size_t> grouped = tmatmul_group_scale(inst);
  std::vector<TMatMulEpilogueOperand> out;
  const std::pair<bool, Op> flags[] = {
      {a.x_scale, Op::Mul}, {a.w_scale, Op::Mul}, {a.bias, Op::Add}, {a.residual, Op::Add}};
  std::size_t next = 2;
  for (const auto& [present, op] : flags) {
    if (!present) continue;
    if (next != grouped) out.push_back({next, op});
    ++next;
  }
  return out;
}

std::optional<std::size_t> tmatmul_group_scale(const ir::InstData& inst) {
  const auto& a = std::get<ir::TMatMulAttrs>(inst.attrs);
  if (a.group <= 0 || !a.w_scale) return std::nullopt;
  return a.x_scale ? 3 : 2;
}

Result<void> tmatmul_operands_supported(const ir::Function& f, const ir::InstData& inst) {
  auto unsupported = [](const std::string& why) -> Result<void> { return make_error(ErrorCode::Unsupported, why); };
  auto extents = [](const ir::Type& t) {
    std::vector<std::int64_t> e;
    for (const ir::Dim& d : t.shape) e.push_back(d.extent);
    return e;
  };
  const auto out = extents(f.type_of(inst.results[0]));
  for (const TMatMulEpilogueOperand& e : tmatmul_epilogue(inst)) {
    const ir::Type& t = f.type_of(inst.operands[e.operand]);
    if (t.elem != ElemKind::F32) return unsupported("tmatmul epilogue operands must be f32");
    if (!view2d(out, extents(t))) return unsupported("tmatmul epilogue broadcast is not a row/column pattern");
  }
  if (const auto at = tmatmul_group_scale(inst)) {
    const ir::Type& w = f.type_of(inst.operands[1]);
    const ir::Type& s = f.type_of(inst.operands[*at]);
    const std::int64_t group = std::get<ir::TMatMulAttrs>(inst.attrs).group;
    if (w.rank() != 2) return unsupported("tmatmul weight must be a matrix");
    const std::int64_t k = w.shape[0].extent, n = w.shape[1].extent;
    if (s.elem != ElemKind::F32) return unsupported("tmatmul grouped w_scale must be f32");
    if (s.rank() != 2 || s.shape[0].extent != ir::grouped_scale_rows(k, group) || s.shape[1].extent != n)
      return unsupported("tmatmul grouped w_scale must be f32[ceil(K / group), N]");
  }
  return success();
}

std::optional<Result<void>> row_op_supported(const ir::Function& f, const ir::InstData& inst) {
  using ir::Op;
  auto unsupported = [](const std::string& why) -> Result<void> { return make_error(ErrorCode::Unsupported, why); };
  auto extents = [](const ir::Type& t) {
    std::vector<std::int64_t> e;
    for (const ir::Dim& d : t.shape) e.push_back(d.extent);
    return e;
  };
  auto kind = [&](ir::ValueId v) { return f.type_of(v).elem; };
  const ir::Type& rt = f.type_of(inst.results[0]);
  auto all_f32 = [&] {
    return rt.elem == ElemKind::F32 &&
           std::all_of(inst.operands.begin(), inst.operands.end(), [&](ir::ValueId v) { return kind(v) == ElemKind::F32; });
  };
  auto views_ok = [&] {
    const auto out = extents(rt);
    return std::all_of(inst.operands.begin(), inst.operands.end(),
                       [&](ir::ValueId v) { return view2d(out, extents(f.type_of(v))).has_value(); });
  };
  switch (inst.op) {
    case Op::Quantize:
      if (kind(inst.operands[0]) != ElemKind::F32 || rt.elem != ElemKind::I8 || kind(inst.results[1]) != ElemKind::F32 ||
          rt.rank() == 0)
        return unsupported("quantize must be f32 -> i8, f32");
      return success();
    case Op::RmsNorm:
    case Op::Softmax:
    case Op::ReduceSum:
    case Op::ReduceMean:
    case Op::ReduceMax:
      if (!all_f32()) return unsupported(quote(inst.op) + " is generated for f32 only");
      if (f.type_of(inst.operands[0]).static_numel().value_or(0) == 0) return unsupported("empty operand");
      return success();
    case Op::Ewise:
      if (!all_f32()) return unsupported("ewise is generated for f32 only");
      if (!views_ok()) return unsupported("ewise broadcast is not a row/column pattern");
      return success();
    default: break;
  }
  if (ir::is_ewise_step_op(inst.op)) {
    if (!all_f32()) return unsupported(quote(inst.op) + " is generated for f32 only");
    if (!views_ok()) return unsupported(quote(inst.op) + " broadcast is not a row/column pattern");
    return success();
  }
  return std::nullopt;
}

}  // namespace ternjit::targets
