// SPDX-License-Identifier: Apache-2.0
// program.cpp - planning a function for the LLVM target (program.h) and evaluating its load-time values.
#include "targets/llvm/program.h"

#include <algorithm>
#include <cstring>
#include <span>
#include <map>

#include "ir/print.h"
#include "targets/common/tern2_pack.h"
#include "targets/load_value.h"

namespace ternjit::targets::llvmjit {

using ir::InstId;
using ir::Op;
using ir::ValueId;

namespace {

constexpr std::size_t kAlign = 64;
std::size_t align_up(std::size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

std::string quote(Op op) { return "'" + std::string(ir::op_name(op)) + "'"; }

Error unsupported(const std::string& why) { return make_error(ErrorCode::Unsupported, why); }

}  // namespace

std::vector<std::int64_t> extents_of(const ir::Type& t) {
  std::vector<std::int64_t> s;
  for (const ir::Dim& d : t.shape) s.push_back(d.extent);
  return s;
}

std::size_t bytes_of(const ir::Type& t) { return static_bytes(t); }

Result<void> lowerable(const ir::Function& f, InstId i) {
  const ir::InstData& inst = f.inst(i);
  auto kind = [&](ValueId v) { return f.type_of(v).elem; };
  const ir::Type& rt = f.type_of(inst.results[0]);
  if (rt.static_numel().value_or(0) == 0) return unsupported("empty result");
  switch (inst.op) {
    case Op::TMatMul: {
      const ElemKind xk = kind(inst.operands[0]), wk = kind(inst.operands[1]);
      if (xk != ElemKind::I8 && xk != ElemKind::F32) return unsupported("tmatmul activations must be i8 or f32");
      if (wk != ElemKind::T2 && wk != ElemKind::I8) return unsupported("tmatmul weights must be t2 or i8");
      if (rt.elem != ElemKind::F32) return unsupported("tmatmul result must be f32");
      if (f.type_of(inst.operands[1]).rank() != 2 || f.type_of(inst.operands[1]).shape[0].extent == 0)
        return unsupported("tmatmul weight must be a non-empty matrix");
      return tmatmul_operands_supported(f, inst);  // the epilogue rule spirv shares (step_plan.h)
    }
    case Op::Cast:
      if (kind(inst.operands[0]) == ElemKind::T2 || rt.elem == ElemKind::T2) return unsupported("cast of packed t2");
      return success();
    case Op::Broadcast: case Op::Transpose:
      if (rt.elem == ElemKind::T2) return unsupported(quote(inst.op) + " of packed t2");
      return success();
    case Op::Gather:
      if (kind(inst.operands[0]) == ElemKind::T2 || kind(inst.operands[1]) != ElemKind::I32)
        return unsupported("gather of a t2 table or by non-i32 ids");
      if (std::get<ir::AxisAttrs>(inst.attrs).axis != 0) return unsupported("gather along an axis other than 0");
      return success();
    case Op::Slice: case Op::Concat:
      if (rt.elem == ElemKind::T2) return unsupported(quote(inst.op) + " of packed t2");
      return success();
    case Op::LayerNorm: case Op::CausalSoftmax:
      for (ValueId v : inst.operands)
        if (!is_float(kind(v)) && kind(v) != ElemKind::I32) return unsupported(quote(inst.op) + " of a non-float operand");
      if (!is_float(rt.elem)) return unsupported(quote(inst.op) + " with a non-float result");
      if (inst.op == Op::CausalSoftmax && kind(inst.operands[1]) != ElemKind::I32) return unsupported("pos must be i32");
      return success();
    case Op::Rope:
      if (!is_float(kind(inst.operands[0])) || kind(inst.operands[1]) != ElemKind::I32)
        return unsupported("rope of a non-float x or a non-i32 pos");
      if (f.type_of(inst.operands[0]).rank() != 3 || f.type_of(inst.operands[0]).shape[2].extent % 2 != 0)
        return unsupported("rope needs x [M, H, D] with D even");
      return success();
    case Op::KvWrite:
      if (!is_float(kind(inst.operands[0])) || !is_float(kind(inst.operands[1])) || kind(inst.operands[2]) != ElemKind::I32)
        return unsupported("kv_write of a non-float cache or rows, or a non-i32 pos");
      return success();
    case Op::Attention: {
      if (kind(inst.operands[0]) != ElemKind::F32 || !is_float(kind(inst.operands[1])) ||
          !is_float(kind(inst.operands[2])) || kind(inst.operands[3]) != ElemKind::I32 || rt.elem != ElemKind::F32)
        return unsupported("attention of a non-f32 q, non-float caches or a non-i32 pos");
      const std::int64_t hq = f.type_of(inst.operands[0]).shape[1].extent, hkv = f.type_of(inst.operands[1]).shape[2].extent;
      if (hkv == 0 || hq % hkv != 0) return unsupported("attention: HQ is not a multiple of HKV");
      return success();
    }
    case Op::MatMul: {
      for (ValueId v : inst.operands)
        if (!is_float(kind(v))) return unsupported("matmul operands must be f32, f16 or bf16");
      if (rt.elem != ElemKind::F32) return unsupported("matmul result must be f32");
      if (f.type_of(inst.operands[0]).shape.back().extent == 0) return unsupported("matmul with K = 0");
      return success();
    }
    default: break;
  }
  if (auto rule = row_op_supported(f, inst)) return *rule;  // the rule spirv shares (step_plan.h)
  return unsupported("no LLVM generator for " + quote(inst.op));
}

Result<void> program_supported(const ir::Function& f) { return plannable(f, "llvm"); }

PackedTile packed_tile(std::int64_t m, int lanes) {
  // 4 x RB x CV vector accumulators: 16 where there are 32 vector registers (AVX-512
  // zmm, L = 16; AArch64 NEON, L = 4): at M < 4 one row of 4 groups (each weight vector
  // read once per row), else 4 rows of one group (each decode shared by 4 rows). Measured
  // on Zen 4 at M = 128 (bench_llvm): 3 x 2 and 2 x 2 tie with 4 x 1, 6 x 1 spills (3x
  // slower). L = 8 is x86 ymm (AVX-VNNI, AVX2), 16 registers: 8 accumulators (16 spilled
  // half of them in the emitted loop).
  if (lanes == 8) return m < 4 ? PackedTile{1, 2} : PackedTile{2, 1};
  if (m < 4) return {1, 4};
  return {4, 1};
}

bool packed_tmatmul(const ir::Function& f, const ir::InstData& inst, const PanelLayout& layout) {
  return layout.lanes > 0 && inst.op == Op::TMatMul && f.type_of(inst.operands[0]).elem == ElemKind::I8 &&
         f.type_of(inst.operands[1]).elem == ElemKind::T2 && std::get<ir::TMatMulAttrs>(inst.attrs).group == 0;
}

Result<FunctionPlan> analyze(const ir::Function& f, const PanelLayout& layout) {
  TERNJIT_TRY_VOID(program_supported(f));
  const int group = layout.group;
  // The shared walk decides slots, load-time values, aliases and copies; this adds the
  // weight panels and column sums and decides what is lowered.
  const StepPlan plan = plan_steps(f);
  FunctionPlan p;
  p.group = group;
  p.lanes = layout.lanes;
  p.n_in = plan.in_bytes.size();
  p.n_out = plan.out_bytes.size();
  p.in_bytes = plan.in_bytes;
  p.out_bytes = plan.out_bytes;
  for (const InPlace& ip : plan.in_place) p.in_place.push_back({ip.input, ip.output});
  for (const LoadTimeValue& v : plan.load_time) p.consts.push_back({v.value, ConstSlot::Form::Value});
  std::map<std::uint32_t, std::size_t> panels;  // weight value -> const slot of its panel (column sums next)
  std::map<std::pair<std::uint32_t, int>, std::size_t> packs;  // (weight value, CV) -> its packed slot
  std::size_t top = plan.scratch_bytes;
  ir::FunctionNames names(f);
  int lowered = 0;
  for (const PlannedStep& ps : plan.steps) {
    PlanStep s;
    s.in = ps.in;
    s.out = ps.out;
    if (ps.kind == PlannedStep::Kind::Copy) {
      s.kind = PlanStep::Kind::Copy;
      s.copy_bytes = ps.bytes;
      s.summary = "result " + std::to_string(ps.ret_index) + " = " +
                  names.value(f.inst(f.insts(f.entry()).back()).operands[ps.ret_index]);
      p.steps.push_back(std::move(s));
      continue;
    }
    const ir::InstData& inst = f.inst(ps.inst);
    s.inst = ps.inst;
    s.summary = ir::print_inst(f, names, ps.inst);
    bool lower = lowerable(f, ps.inst).ok();
    if (inst.op == Op::TMatMul && !plan.is_load_time(inst.operands[1])) lower = false;  // weights must be load-time
    const std::int64_t tK = inst.op == Op::TMatMul ? f.type_of(inst.operands[1]).shape[0].extent : 0;
    const std::int64_t tM = inst.op == Op::TMatMul ? f.type_of(inst.operands[0]).static_numel().value_or(0) / tK : 0;
    if (lower && packed_tmatmul(f, inst, layout)) {
      const ValueId w = plan.load_time[plan.slot(inst.operands[1]).index].value;
      const PackedLayout pl{layout.lanes, packed_tile(tM, layout.lanes).cv};
      auto it = packs.find({w.index, pl.cv});
      if (it == packs.end()) {
        p.consts.push_back({w, ConstSlot::Form::Packed, pl});
        it = packs.emplace(std::make_pair(w.index, pl.cv), p.consts.size() - 1).first;
      }
      s.in[1] = Loc{LocKind::Const, it->second};
      s.packed = true;
    } else if (lower && inst.op == Op::TMatMul) {
      // The weight's load-time value.
      const ValueId w = plan.load_time[plan.slot(inst.operands[1]).index].value;
      auto it = panels.find(w.index);
      if (it == panels.end()) {
        p.consts.push_back({w, ConstSlot::Form::Panel});
        p.consts.push_back({w, ConstSlot::Form::ColSum});
        it = panels.emplace(w.index, p.consts.size() - 2).first;
      }
      s.in[1] = Loc{LocKind::Const, it->second};
      s.in.push_back(Loc{LocKind::Const, it->second + 1});
    }
    if (lower && inst.op == Op::MatMul) {
      // The head form matmul(x, transpose(P)), P a load-time [N, K]: read P as stored.
      const ValueId t = inst.operands[1];
      const ir::ValueData& td = f.value(t);
      const ir::InstData* tr = td.def == ir::ValueDef::InstResult ? &f.inst(td.inst) : nullptr;
      if (tr && tr->op == Op::Transpose && std::get<ir::PermAttrs>(tr->attrs).perm == std::vector<std::int64_t>{1, 0} &&
          plan.is_load_time(tr->operands[0])) {
        s.in[1] = plan.slot(tr->operands[0]);
        s.rhs_transposed = true;
        s.tmp_offset = top;  // x widened to f64
        top = align_up(top + static_cast<std::size_t>(8 * f.type_of(inst.operands[0]).static_numel().value_or(0)) + kAlign);
      } else {  // N f64 accumulators of one output row
        s.tmp_offset = top;
        top = align_up(top + static_cast<std::size_t>(8 * f.type_of(t).shape.back().extent) + kAlign);
      }
    }
    if (lower && inst.op == Op::Attention) {  // per task: the scores of one row (C f64) and the accumulator (D f64)
      const ir::Type& c = f.type_of(inst.operands[1]);
      s.tmp_offset = top;
      top = align_up(top + static_cast<std::size_t>(kAttentionTasks * 8 * (c.shape[1].extent + c.shape[3].extent)) + kAlign);
    }
    if (lower) {
      s.kind = PlanStep::Kind::Lowered;
      s.symbol = "tj_op_" + std::to_string(lowered++);
      if (inst.op == Op::TMatMul) {  // the activations repacked as [M, Kp] (int8 paths), packed: their row sums next
        s.tmp_offset = top;
        top = align_up(top + static_cast<std::size_t>(tM * padded_k(tK)) + kAlign);
        if (s.packed) top = align_up(top + static_cast<std::size_t>(4 * tM) + kAlign);
      }
    } else {
      s.kind = PlanStep::Kind::Reference;
      p.all_lowered = false;
    }
    p.steps.push_back(std::move(s));
  }
  p.err_offset = top;
  top = align_up(top + kErrorRecordBytes);
  p.scratch_bytes = top;
  return p;
}

namespace {

// The load-time values the plan reads: those of the const slots it reads (and does not
// take from a pack cache). evaluate_load_time adds what they are computed from; a value no
// step reads (the transpose of a head matrix read as stored, the f32 form of a weight read
// as panels) is never evaluated, so loading a model does not build a transposed copy of
// its embedding.
std::vector<bool> needed_load_time(const StepPlan& plan, const FunctionPlan& p, const std::vector<bool>& used,
                                   const std::vector<bool>* skip) {
  std::vector<bool> need(plan.load_time.size(), false);
  for (std::size_t slot = 0; slot < p.consts.size(); ++slot)
    if (used[slot] && !(skip && (*skip)[slot])) need[plan.slot(p.consts[slot].value).index] = true;
  return need;
}

}  // namespace

std::string run_error_message(const ir::Function& f, InstId i, const std::int64_t* record) {
  const ir::InstData& inst = f.inst(i);
  const std::string op(ir::op_name(inst.op));
  auto s = [](std::int64_t v) { return std::to_string(v); };
  switch (static_cast<RunError>(record[0])) {
    case RunError::GatherId:
      return op + ": id " + s(record[1]) + " at index " + s(record[2]) + " is out of range [0, " +
             s(f.type_of(inst.operands[0]).shape[0].extent) + ")";
    case RunError::NegativePos: return op + ": pos " + s(record[1]) + " is negative (pos must be >= 0)";
    case RunError::CacheRows: {
      // The rows [pos, pos + M) of operand 1 (kv_write's rows) or 0 (attention's q).
      const std::int64_t m = f.type_of(inst.operands[inst.operands.size() == 3 ? 1 : 0]).shape[0].extent;
      const std::int64_t c = f.type_of(inst.operands[inst.operands.size() == 3 ? 0 : 1]).shape[1].extent;
      const std::int64_t pos = record[1];
      return op + ": rows [pos, pos + M) = [" + s(pos) + ", " + s(pos + m) + ") do not fit the cache capacity C = " + s(c) +
             " (pos " + s(pos) + ", M " + s(m) + ")";
    }
    case RunError::None: break;
  }
  return op + ": run-time error " + s(record[0]);
}

std::optional<ir::StoredTensor> stored_param(const ir::Function& f, const FunctionPlan& p, std::size_t slot,
                                             const ir::ParamValues& params) {
  const ConstSlot& c = p.consts.at(slot);
  if (c.form != ConstSlot::Form::Value || f.value(c.value).def != ir::ValueDef::InstResult) return std::nullopt;
  const ir::InstData& def = f.inst(f.value(c.value).inst);
  if (def.op != Op::Param) return std::nullopt;
  auto it = params.values.find(std::get<ir::ParamAttrs>(def.attrs).name);
  const ir::Type& t = f.type_of(c.value);
  if (it == params.values.end() || it->second.kind() != t.elem || it->second.kind() == ElemKind::T2 ||
      it->second.shape() != extents_of(t) || !it->second.bytes().owned())
    return std::nullopt;
  return it->second;
}

std::string pack_key(const ir::Function& f, const FunctionPlan& p, std::size_t slot) {
  const ConstSlot& c = p.consts.at(slot);
  if (c.form == ConstSlot::Form::Value || f.value(c.value).def != ir::ValueDef::InstResult) return "";
  const ir::InstData& def = f.inst(f.value(c.value).inst);
  if (def.op != Op::Param) return "";
  std::string k = "param @" + std::get<ir::ParamAttrs>(def.attrs).name + "|";
  switch (c.form) {
    case ConstSlot::Form::Panel: return k + "panel:g=" + std::to_string(p.group);
    case ConstSlot::Form::ColSum: return k + "colsum:g=" + std::to_string(p.group);
    case ConstSlot::Form::Packed:
      return k + "packed:l=" + std::to_string(c.packed.lanes) + ",cv=" + std::to_string(c.packed.cv);
    case ConstSlot::Form::Value: break;
  }
  return "";
}

Result<std::vector<std::vector<std::uint8_t>>> const_bytes(const ir::Function& f, const FunctionPlan& p,
                                                           const ir::ParamValues& params, bool zeros_for_missing,
                                                           const std::vector<bool>* skip) {
  // Parameters stay in their stored form (sharing the bound bytes); computed values are
  // owned. The same shared walk as analyze(), so the load-time values are the same.
  const StepPlan plan = plan_steps(f);
  // A slot no step reads (a weight whose tmatmuls read its panel) stays empty: the
  // kernel would otherwise hold an int8 copy of every ternary weight (4x its packed bytes).
  std::vector<bool> used(p.consts.size(), false);
  for (const PlanStep& s : p.steps)
    for (const Loc& l : s.in)
      if (l.kind == LocKind::Const) used[l.index] = true;
  std::vector<bool> need = needed_load_time(plan, p, used, skip);
  TERNJIT_TRY(const std::vector<LoadValue> vals, evaluate_load_time(f, plan, params, zeros_for_missing, &need));
  std::map<std::uint32_t, const LoadValue*> by_value;
  for (std::size_t k = 0; k < plan.load_time.size(); ++k) by_value[plan.load_time[k].value.index] = &vals[k];
  std::vector<std::vector<std::uint8_t>> out;
  for (std::size_t slot = 0; slot < p.consts.size(); ++slot) {
    const ConstSlot& c = p.consts[slot];
    if (!used[slot] || (skip && (*skip)[slot])) {
      out.emplace_back();
      continue;
    }
    const LoadValue& t = *by_value.at(c.value.index);
    if (c.form == ConstSlot::Form::Value) {
      out.push_back(t.encoded());
      continue;
    }
    // A t2/i8 weight [K, N]: decoded a row at a time from its stored form.
    const auto K = static_cast<std::size_t>(t.shape()[0]), N = static_cast<std::size_t>(t.shape()[1]);
    const std::int64_t Kp = padded_k(t.shape()[0]);
    if (c.form == ConstSlot::Form::Packed) {
      // Four rows (one step) at a time: their codes (w + 1) across the padded columns,
      // then each group's 4 x G bytes with the x86 i8 panels' interleave (the same
      // layout; targets/common/tern2_pack.h): in group g of panel p, lane l's byte of row
      // k holds the codes of columns p*NB + g*G + f*L + l, f = 0..3 (PackedLayout), at
      // byte 4 l + k % 4. A bound t2 weight's codes come straight from its 2-bit fields
      // (never widened through a value per weight), else from its values. Rows k >= K and
      // columns j >= N hold code 1 (weight 0), the fill of steps past K.
      const PackedLayout& pl = c.packed;
      const std::int64_t n64 = t.shape()[1], G = pl.group(), NB = pl.nb(), L = pl.lanes;
      const std::int64_t npad = padded_n(n64, static_cast<int>(G));
      std::vector<std::uint8_t> b(static_cast<std::size_t>(packed_bytes(t.shape()[0], n64, pl)), 0x55);
      std::vector<std::uint8_t> code(static_cast<std::size_t>(4 * npad), 1);
      const bool t2 = t.stored && t.stored->kind() == ElemKind::T2;
      std::vector<std::int8_t> row(t2 ? 0 : N);
      const std::int64_t steps = (static_cast<std::int64_t>(K) + 3) / 4;
      // Where every row starts on a tern2 byte, the groups inside N of steps inside K are
      // interleaved straight from the tern2 bytes; the codes are made only from `lo` on.
      const std::uint8_t* src = t2 ? t.stored->bytes().span().data() : nullptr;
      const auto nfull = static_cast<std::int64_t>(t2 ? tern2_direct_columns(N, static_cast<int>(L)) : 0);
      for (std::int64_t step = 0; step < steps; ++step) {
        const std::int64_t lo = 4 * step + 4 <= static_cast<std::int64_t>(K) ? nfull : 0;
        for (std::size_t kk = 0; kk < 4; ++kk) {
          const std::size_t k = 4 * static_cast<std::size_t>(step) + kk;
          std::uint8_t* rc = code.data() + kk * static_cast<std::size_t>(npad);
          if (k >= K) {
            std::memset(rc, 1, N);  // columns past N already hold 1
            continue;
          }
          std::size_t bad = N;  // the first non-ternary column, if any
          if (t2) {
            bad = tern2_first_invalid(src, k * N, N);
            const auto from = static_cast<std::size_t>(lo);
            tern2_fields(src, k * N + from, N - from, rc + from);
          } else {
            t.read_int8(k * N, row);
            for (std::size_t n = 0; n < N; ++n) {
              rc[n] = static_cast<std::uint8_t>(row[n] + 1);
              if (bad == N && (row[n] < -1 || row[n] > 1)) bad = n;
            }
          }
          if (bad != N)
            return make_error(ErrorCode::InvalidInput, "llvm: weight [" + std::to_string(k) + ", " +
                                                           std::to_string(bad) + "] is not -1, 0 or 1");
        }
        for (std::int64_t p0 = 0; p0 < npad; p0 += NB) {
          const std::int64_t width = std::min(NB, npad - p0);
          std::uint8_t* dst = b.data() + p0 * (Kp / 4) + step * width;
          for (std::int64_t g0 = 0; g0 < width; g0 += G) {
            const std::int64_t c0 = p0 + g0;
            if (c0 + G <= lo) {
              interleave_tern2_group(src, N, static_cast<std::size_t>(4 * step), static_cast<std::size_t>(c0),
                                     static_cast<int>(L), dst + g0);
            } else {
              interleave_codes4(code.data() + c0, npad, static_cast<int>(L), dst + g0);
            }
          }
        }
      }
      out.push_back(std::move(b));
      continue;
    }
    const auto Np = static_cast<std::size_t>(padded_n(t.shape()[1], p.group));
    std::vector<std::int8_t> row(N);
    std::vector<std::uint8_t> b;
    if (c.form == ConstSlot::Form::Panel) {
      b.assign(Np * static_cast<std::size_t>(Kp), 0);
      std::vector<std::size_t> col(N);  // panel_index(0, n), then + the k part
      for (std::size_t n = 0; n < N; ++n)
        col[n] = static_cast<std::size_t>(panel_index(0, static_cast<std::int64_t>(n), Kp, p.group));
      for (std::size_t k = 0; k < K; ++k) {
        const auto kpart = static_cast<std::size_t>(panel_index(static_cast<std::int64_t>(k), 0, Kp, p.group));
        t.read_int8(k * N, row);
        for (std::size_t n = 0; n < N; ++n) b[col[n] + kpart] = static_cast<std::uint8_t>(row[n]);
      }
    } else {
      std::vector<std::int32_t> sum(Np, 0);
      for (std::size_t k = 0; k < K; ++k) {
        t.read_int8(k * N, row);
        for (std::size_t n = 0; n < N; ++n) sum[n] += row[n];
      }
      b.resize(Np * 4);
      std::memcpy(b.data(), sum.data(), b.size());
    }
    out.push_back(std::move(b));
  }
  return out;
}

}  // namespace ternjit::targets::llvmjit
