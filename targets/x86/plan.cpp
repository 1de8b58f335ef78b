// SPDX-License-Identifier: Apache-2.0
// plan.cpp - building and running x86 plans (plan.h): value locations, load-time values, steps.
#include "targets/x86/plan.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>
#include <set>

#include "ir/numeric.h"
#include "ir/print.h"
#include "targets/common/step_plan.h"
#include "targets/cpu_buffers.h"
#include "targets/load_value.h"
#include "targets/x86/eltwise.h"
#include "targets/x86/matmul.h"
#include "targets/x86/plan_adaptive.h"
#include "targets/x86/plan_internal.h"
#include "targets/x86/plan_steps.h"
#include "targets/x86/tmatmul_space.h"

namespace ternjit::targets::x86 {

// ---------------------------------------------------------------- PackCache

Result<std::shared_ptr<const PackedWeights>> PackCache::get_or_pack(const std::string& key,
                                                                    const std::function<Result<PackedWeights>()>& pack) {
  // Packing runs under the lock: a second plan wanting the same weight waits instead of
  // packing it again (packing happens at load time only).
  std::lock_guard lock(mu_);
  auto it = packs_.find(key);
  if (it != packs_.end()) return it->second;
  TERNJIT_TRY(PackedWeights p, pack());
  auto shared = std::make_shared<const PackedWeights>(std::move(p));
  packs_.emplace(key, shared);
  ++made_;
  return shared;
}

std::shared_ptr<const MatMulPackedB> PackCache::get_or_pack_matmul(const std::string& key,
                                                                    const std::function<MatMulPackedB()>& pack) {
  std::lock_guard lock(mu_);
  auto it = matmul_packs_.find(key);
  if (it != matmul_packs_.end()) return it->second;
  auto shared = std::make_shared<const MatMulPackedB>(pack());
  matmul_packs_.emplace(key, shared);
  ++made_;
  return shared;
}

std::size_t PackCache::packs_made() const {
  std::lock_guard lock(mu_);
  return made_;
}

namespace {
std::size_t pack_bytes(const PackedWeights& w) {
  std::size_t n = w.storage.capacity();
  for (const PackedWeights& part : w.parts) n += pack_bytes(part);
  return n;
}
}  // namespace

std::size_t PackCache::host_bytes() const {
  std::lock_guard lock(mu_);
  std::size_t n = 0;
  for (const auto& [key, w] : packs_) n += pack_bytes(*w);
  for (const auto& [key, b] : matmul_packs_) n += b->data.capacity() * sizeof(float);
  return n;
}

namespace {

using ir::InstId;
using ir::Op;
using ir::ValueId;


}  // namespace

Result<void> plan_supported(const ir::Function& f) { return plannable(f, "x86"); }

// ---------------------------------------------------------------- Plan

struct Plan::Impl {
  std::size_t n_in = 0, n_out = 0;
  std::vector<std::size_t> in_bytes, out_bytes;
  std::vector<ConstValue> consts;
  std::vector<std::unique_ptr<Step>> steps;
  std::size_t scratch_bytes = 0;
  std::map<std::string, std::string> configs;
  std::int64_t rows_max = 0;
  std::vector<SameBuffer> in_place;  // (input, output) pairs that may be one buffer (step_plan.h InPlace)
  bool adaptive = false;                     // PlanOptions::adaptive_parallel
  std::int64_t adaptive_max_ns = 0;          // PlanOptions::adaptive_max_parallel_ns
  std::unique_ptr<SplitChooser[]> choosers;  // one per step when adaptive
};

Plan::Plan(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Plan::~Plan() = default;

const std::map<std::string, std::string>& Plan::configs() const { return impl_->configs; }

std::vector<StepCode> Plan::describe() const {
  std::vector<StepCode> out;
  for (const auto& s : impl_->steps) out.push_back(s->describe());
  return out;
}


std::int64_t Plan::rows_max() const { return impl_->rows_max; }

std::vector<bool> Plan::steps_run_serially() const {
  std::vector<bool> r(impl_->steps.size(), false);
  if (impl_->choosers)
    for (std::size_t i = 0; i < r.size(); ++i) r[i] = impl_->choosers[i].prefers_serial();
  return r;
}

namespace {

// The pool as one step sees it on a parallel call: forwards to the real pool and counts
// the forks (a step calls for_each from its own thread only, so a plain count).
struct CountedPool {
  const Parallel* real;
  int forks = 0;
  static void run(void* self, Parallel::TaskFn task, void* context, std::int64_t n) {
    auto* c = static_cast<CountedPool*>(self);
    ++c->forks;
    c->real->run(c->real->pool, task, context, n);
  }
};

// Runs the steps, each on the pool or inline as its SplitChooser says, timing the calls it
// asks for (two steady_clock reads, ~35 ns each on the loaded Zen 4 VM: 0.2% of the 30 us
// of a 2560 x 2560 layer at M = 1; a step that did not fork on its last call is not timed).
Result<void> run_adaptive(const Plan::Impl& p, const Frame& fr, const Parallel& parallel) {
  static constexpr Parallel kInline{};
  for (std::size_t i = 0; i < p.steps.size(); ++i) {
    SplitChooser& chooser = p.choosers[i];
    const SplitChooser::Call c = chooser.begin(p.adaptive_max_ns);
    CountedPool counted{&parallel};
    const Parallel via{parallel.threads, &CountedPool::run, &counted};
    Frame f = fr;
    f.parallel = c.serial ? &kInline : &via;
    using Clock = std::chrono::steady_clock;
    const Clock::time_point t0 = c.timed ? Clock::now() : Clock::time_point{};
    // A failed step is not a sample (end() is not called: a later call moves its window).
    TERNJIT_TRY_VOID(p.steps[i]->run(f));
    const std::int64_t ns = c.timed ? std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count() : 0;
    chooser.end(c, ns, counted.forks > 0, p.adaptive_max_ns);
  }
  return success();
}

}  // namespace

std::size_t Plan::load_time_evaluated() const {
  return static_cast<std::size_t>(std::count_if(impl_->consts.begin(), impl_->consts.end(),
                                                [](const ConstValue& c) { return c.evaluated; }));
}

Result<void> Plan::run(void* const* buffers, const Parallel& parallel, std::int64_t rows) const {
  const Impl& p = *impl_;
  const bool scaled = rows > 0 && rows != p.rows_max;
  if (rows < 0 || (rows > 0 && (p.rows_max == 0 || rows > p.rows_max)))
    return make_error(ErrorCode::InvalidArgument, "x86 plan: " + std::to_string(rows) + " rows, compiled for " +
                                                      (p.rows_max == 0 ? std::string("static rows")
                                                                       : "at most " + std::to_string(p.rows_max)));
  if (scaled) {
    // Every argument and result is rows-leading: this call's buffers are that prefix.
    auto prefix = [&](std::vector<std::size_t> bytes) {
      for (std::size_t& b : bytes) b = b / static_cast<std::size_t>(p.rows_max) * static_cast<std::size_t>(rows);
      return bytes;
    };
    TERNJIT_TRY_VOID(check_buffers(buffers, prefix(p.in_bytes), prefix(p.out_bytes), p.in_place));
  } else {
    TERNJIT_TRY_VOID(check_buffers(buffers, p.in_bytes, p.out_bytes, p.in_place));
  }
  const ScratchLease lease(p.scratch_bytes);
  std::uint8_t* scratch = lease.data();
  const Frame fr{buffers, p.n_in, scratch, &p.consts, &parallel, scaled ? rows : 0, p.rows_max};
  if (p.adaptive && parallel.threads > 1 && parallel.run != nullptr) return run_adaptive(p, fr, parallel);
  for (const auto& s : p.steps) TERNJIT_TRY_VOID(s->run(fr));
  return success();
}

namespace {

// Builds a Plan::Impl on the shared walk (targets/common/step_plan.h): evaluates the
// load-time values, then lowers each planned step in order.
class Builder {
 public:
  Builder(const ir::Function& f, const ir::ParamValues& params, const PlanOptions& o, PackCache* packs)
      : f_(f), params_(params), o_(o), packs_(packs), names_(f), plan_(plan_steps(f)) {
    for (ir::InstId i : f_.insts(f_.entry()))
      for (ValueId v : f_.inst(i).operands) ++uses_[v.index];
    find_int8_matmuls();
    // Scratch regions are reused by liveness (step_plan.h), so the reads that fusion moves
    // later than the IR shows are declared and the plan made again: a fused transpose's
    // source is read by its matmuls, an int8 chain's a, b, u, t by its last instruction.
    // (Which values are load-time does not depend on them, so is_const() above stays true.)
    std::vector<ExtraRead> extra;
    for (ir::InstId i : f_.insts(f_.entry())) {
      const ir::InstData& inst = f_.inst(i);
      if (inst.op != Op::Transpose || !transpose_fused(inst)) continue;
      const ValueId src = *transposed_source(inst.results[0]);
      for (ir::InstId j : f_.insts(f_.entry()))
        for (ValueId v : f_.inst(j).operands)
          if (v == inst.results[0]) extra.push_back({src, j});
    }
    for (const auto& [last, c] : int8_chains_) {
      const ir::InstId at{last};
      for (ValueId v : {c.a, c.b, c.t}) extra.push_back({v, at});
      if (c.u) extra.push_back({*c.u, at});
    }
    if (!extra.empty()) plan_ = plan_steps(f_, extra);
  }

  Result<std::unique_ptr<Plan::Impl>> build() {
    impl_ = std::make_unique<Plan::Impl>();
    impl_->n_in = plan_.in_bytes.size();
    impl_->n_out = plan_.out_bytes.size();
    impl_->in_bytes = plan_.in_bytes;
    impl_->out_bytes = plan_.out_bytes;
    for (const InPlace& ip : plan_.in_place) impl_->in_place.push_back({ip.input, ip.output});
    impl_->rows_max = o_.rows_max;
    if (o_.rows_max > 0) TERNJIT_TRY_VOID(check_rows_leading());
    // Load-time values in definition order: Slot{Const, k} is consts[k]. Describe-only
    // plans (foreign ISA) read an unbound parameter as zeros.
    TERNJIT_TRY_VOID(evaluate_needed_load_time());
    for (const PlannedStep& s : plan_.steps) {
      if (s.kind == PlannedStep::Kind::Copy) {
        const ValueId v = f_.inst(f_.insts(f_.entry()).back()).operands[s.ret_index];
        impl_->steps.push_back(std::make_unique<CopyStep>(operand_loc(v), s.out[0], s.bytes,
                                                          "result " + std::to_string(s.ret_index) + " = " +
                                                              names_.value(v)));
        continue;
      }
      TERNJIT_TRY_VOID(lower(s.inst, f_.inst(s.inst)));
    }
    impl_->scratch_bytes = plan_.scratch_bytes;
    return std::move(impl_);
  }

 private:
  [[nodiscard]] bool is_const(ValueId v) const { return plan_.is_load_time(v); }
  [[nodiscard]] const ConstValue& cval(ValueId v) const { return impl_->consts[plan_.slot(v).index]; }

  // Loc of a const operand that a kernel reads as raw bytes (encoded on first use).
  Loc const_bytes(ValueId v) {
    ConstValue& c = impl_->consts[plan_.slot(v).index];
    TERNJIT_CHECK(c.evaluated, "x86 plan: a step reads a load-time value that was not evaluated");
    if (!c.has_bytes) {
      // A bound parameter of a byte-aligned kind is read where it is stored (its bytes
      // are the encoding: stored_tensor.h); anything else is encoded once.
      const std::optional<ir::StoredTensor>& st = c.value.stored;
      if (st && st->kind() != ElemKind::T2 && st->bytes().size() == static_bytes(f_.type_of(v))) {
        c.data = st->bytes().data();
      } else {
        c.bytes = c.value.encoded();
        c.data = c.bytes.data();
      }
      c.has_bytes = true;
    }
    return plan_.slot(v);
  }

  Loc operand_loc(ValueId v) { return is_const(v) ? const_bytes(v) : plan_.slot(v); }

  std::string summary(InstId i) const { return ir::print_inst(f_, names_, i); }

  // What identifies a load-time value for packing: "param @L.w", or
  // "tquantize.7(param @L.w)#0" for result 0 of a pure op of load-time values.
  std::string load_time_expr(const LoadTimeValue& v) const {
    const ir::InstData& inst = f_.inst(v.inst);
    if (inst.op == Op::Param) return "param @" + std::get<ir::ParamAttrs>(inst.attrs).name;
    std::string expr = std::string(ir::op_name(inst.op)) + "." + std::to_string(v.inst.index) + "(";
    for (std::size_t k = 0; k < inst.operands.size(); ++k) expr += (k ? ", " : "") + cval(inst.operands[k]).expr;
    return expr + ")#" + std::to_string(v.result);
  }

  // The load-time values this plan reads, evaluated in definition order (Slot{Const, k}
  // is consts[k]); the others are left unevaluated. A value is read when a step takes it
  // as an operand, when it is returned, or when a read value is computed from it; a
  // `transpose(p)` that a dense matmul reads through p (fused_param_transpose) is not,
  // so a transposed copy of a 656 MB embedding table is never made. Describe-only plans
  // (foreign ISA) read an unbound parameter as zeros.
  Result<void> evaluate_needed_load_time() {
    const std::size_t n = plan_.load_time.size();
    std::vector<bool> needed(n, false);
    auto need = [&](ValueId v) {
      if (is_const(v)) needed[plan_.slot(v).index] = true;
    };
    for (InstId i : f_.insts(f_.entry())) {
      const ir::InstData& inst = f_.inst(i);
      if (!inst.results.empty() && is_const(inst.results[0])) continue;  // load-time itself
      if (inst.op == Op::Reshape) continue;  // an alias: its users decide
      for (std::size_t k = 0; k < inst.operands.size(); ++k) {
        if (k == 1 && fused_param_transpose(inst)) {
          need(*fused_param_transpose(inst));
          continue;
        }
        need(inst.operands[k]);
      }
    }
    // Aliases of load-time values (reshape) read by a step: their source.
    for (InstId i : f_.insts(f_.entry())) {
      const ir::InstData& inst = f_.inst(i);
      if (inst.op == Op::Reshape && !is_const(inst.results[0]) && is_const(inst.operands[0])) need(inst.operands[0]);
    }
    TERNJIT_TRY(std::vector<LoadValue> values,
                evaluate_load_time(f_, plan_, params_, o_.allow_foreign_isa, &needed));  // closes `needed`
    impl_->consts.resize(n);
    for (std::size_t k = 0; k < n; ++k) {
      impl_->consts[k].evaluated = needed[k];
      impl_->consts[k].expr = load_time_expr(plan_.load_time[k]);
      impl_->consts[k].value = std::move(values[k]);
    }
    return success();
  }

  // p when `inst` is a dense `matmul(a, transpose(p))` of an f32 A (rank 2, or rank 3 by a
  // rank-2 B) whose B is the transpose (perm [1, 0]) of a load-time p [N, K] of f32, f16 or
  // bf16: the kernel reads p as stored, with swapped strides (the head `h @ transpose(embd)`).
  [[nodiscard]] std::optional<ValueId> fused_param_transpose(const ir::InstData& inst) const {
    if (inst.op != Op::MatMul) return std::nullopt;
    const ir::Type& at = f_.type_of(inst.operands[0]);
    const ir::Type& ct = f_.type_of(inst.results[0]);
    const ValueId b = inst.operands[1];
    if (at.elem != ElemKind::F32 || ct.elem != ElemKind::F32 || at.rank() < 2 || at.rank() > 3 || !is_const(b))
      return std::nullopt;
    if (at.static_numel().value_or(0) < 1 || ct.static_numel().value_or(0) < 1 || ct.rank() != at.rank())
      return std::nullopt;
    // An A that is itself a per-call transpose is read through its source by lower_matmul
    // (transpose_fused counts on it): that matmul stays on the GEMM path.
    if (transposed_source(inst.operands[0])) return std::nullopt;
    const ir::ValueData& d = f_.value(b);
    if (d.def != ir::ValueDef::InstResult) return std::nullopt;
    const ir::InstData& t = f_.inst(d.inst);
    if (t.op != Op::Transpose || std::get<ir::PermAttrs>(t.attrs).perm != std::vector<std::int64_t>{1, 0})
      return std::nullopt;
    const ir::Type& pt = f_.type_of(t.operands[0]);
    if (pt.elem != ElemKind::F32 && pt.elem != ElemKind::F16 && pt.elem != ElemKind::BF16) return std::nullopt;
    return t.operands[0];
  }

  // Run-time rows: every argument and result has axis 0 of extent rows_max.
  Result<void> check_rows_leading() const {
    auto leading = [&](const ir::Type& t) { return t.rank() >= 1 && t.shape[0].extent == o_.rows_max; };
    for (ValueId a : f_.args())
      if (!leading(f_.type_of(a)))
        return make_error(ErrorCode::InvalidInput, "x86 plan: an argument of '" + f_.name() +
                                                       "' has no leading axis of the " + std::to_string(o_.rows_max) +
                                                       " run-time rows");
    for (const ir::Type& t : f_.result_types())
      if (!leading(t))
        return make_error(ErrorCode::InvalidInput, "x86 plan: a result of '" + f_.name() +
                                                       "' has no leading axis of the " + std::to_string(o_.rows_max) +
                                                       " run-time rows");
    return success();
  }

  Result<void> lower(InstId i, const ir::InstData& inst) {
    if (int8_skipped_.contains(i.index)) return success();  // computed by its chain's Int8MatMulStep
    if (auto it = int8_chains_.find(i.index); it != int8_chains_.end()) return lower_int8_matmul(i, it->second);
    if (auto p = fused_param_transpose(inst)) return lower_param_transpose_matmul(i, inst, *p);
    if (inst.op == Op::MatMul && matmul_kernel_supported(inst)) return lower_matmul(i, inst);
    // A transpose whose every use is a matmul reading it through its source (trans_a /
    // trans_b) computes nothing.
    if (inst.op == Op::Transpose && transpose_fused(inst)) return success();
    if (inst.op == Op::Transpose) {
      const ir::Type& xt = f_.type_of(inst.operands[0]);
      const auto eb = static_cast<std::size_t>(elem_bits(xt.elem) / 8);
      if (xt.rank() == 2 && (eb == 1 || eb == 2 || eb == 4) && elem_bits(xt.elem) % 8 == 0 &&
          std::get<ir::PermAttrs>(inst.attrs).perm == std::vector<std::int64_t>{1, 0}) {
        impl_->steps.push_back(std::make_unique<TransposeStep>(operand_loc(inst.operands[0]), plan_.slot(inst.results[0]),
                                                               xt.shape[0].extent, xt.shape[1].extent, eb, summary(i)));
        return success();
      }
    }
    if (inst.op == Op::TMatMul) {
      // Every tmatmul step is numbered in order, whether it gets a kernel or not, so a
      // configuration key ("tmatmul.0") names the same instruction every time.
      const std::string key = "tmatmul." + std::to_string(tmatmul_count_++);
      if (is_const(inst.operands[1])) return lower_tmatmul(i, inst, key);
    }
    if (lowered_by_step_files(inst.op)) {
      LowerContext ctx{f_, i, o_.isa, o_.allow_foreign_isa, o_.rows_max, {}, {}, summary(i)};
      for (ValueId v : inst.operands) ctx.in.push_back(operand_loc(v));
      for (ValueId r : inst.results) ctx.out.push_back(plan_.slot(r));
      TERNJIT_TRY(std::unique_ptr<Step> step, lower_data_op(ctx));
      if (!step) {
        TERNJIT_TRY(step, lower_attention_op(ctx));
      }
      if (step) {
        impl_->steps.push_back(std::move(step));
        return success();
      }
    }
    if (eltwise_supported(f_, i).ok()) {
      TERNJIT_TRY(auto k, generate_eltwise(f_, i, o_.isa, o_.allow_foreign_isa, o_.rows_max > 0));
      std::vector<Loc> in, out;
      for (ValueId v : inst.operands) in.push_back(operand_loc(v));
      for (ValueId r : inst.results) out.push_back(plan_.slot(r));
      impl_->steps.push_back(std::make_unique<EltwiseStep>(std::string(ir::op_name(inst.op)), std::move(k),
                                                           std::move(in), std::move(out), summary(i)));
      return success();
    }
    return lower_reference(i, inst);
  }

  // The source x of `v = transpose %x` when v is computed per call and the transpose
  // swaps x's last two axes (so the matmul can read x with swapped strides), else nullopt. A load-time transpose is
  // evaluated once at load and read as it is.
  [[nodiscard]] std::optional<ValueId> transposed_source(ValueId v) const {
    if (is_const(v)) return std::nullopt;
    const ir::ValueData& d = f_.value(v);
    if (d.def != ir::ValueDef::InstResult) return std::nullopt;
    const ir::InstData& t = f_.inst(d.inst);
    if (t.op != Op::Transpose) return std::nullopt;
    // The last two axes swapped: [1, 0] of a matrix, [0, 2, 1] of a batch of them.
    const std::vector<std::int64_t>& perm = std::get<ir::PermAttrs>(t.attrs).perm;
    const std::size_t rank = f_.type_of(t.operands[0]).rank();
    if (!(rank == 2 && perm == std::vector<std::int64_t>{1, 0}) &&
        !(rank == 3 && perm == std::vector<std::int64_t>{0, 2, 1}))
      return std::nullopt;
    return t.operands[0];
  }

  // The matmuls the kernel takes: f32 x f32 -> f32 with operands of rank 2 or 3 (the
  // result's rank the larger: a batch axis on one or both, NumPy-broadcast when it is 1
  // or missing), M, K, N and the batch >= 1. Everything else (integers, bf16/f16, rank 1
  // or rank > 3 operands, empty) stays a reference step.
  [[nodiscard]] bool matmul_kernel_supported(const ir::InstData& inst) const {
    const ir::Type& at = f_.type_of(inst.operands[0]);
    const ir::Type& bt = f_.type_of(inst.operands[1]);
    const ir::Type& ct = f_.type_of(inst.results[0]);
    // B f32, or a load-time f16/bf16 B widened once when it is packed.
    const bool b_ok = bt.elem == ElemKind::F32 ||
                      (is_const(inst.operands[1]) && (bt.elem == ElemKind::F16 || bt.elem == ElemKind::BF16));
    if (at.elem != ElemKind::F32 || !b_ok || ct.elem != ElemKind::F32) return false;
    if (at.rank() < 2 || at.rank() > 3 || bt.rank() < 2 || bt.rank() > 3) return false;
    if (ct.rank() != std::max(at.rank(), bt.rank())) return false;
    return at.static_numel().value_or(0) >= 1 && bt.static_numel().value_or(0) >= 1 &&
           ct.static_numel().value_or(0) >= 1;
  }

  // Whether transpose `inst` is only read by kernel matmuls (through its source).
  [[nodiscard]] bool transpose_fused(const ir::InstData& inst) const {
    const ValueId r = inst.results[0];
    if (is_const(r) || !transposed_source(r)) return false;
    std::size_t fused = 0;
    for (ir::InstId j : f_.insts(f_.entry())) {
      const ir::InstData& user = f_.inst(j);
      for (ValueId v : user.operands) {
        if (v != r) continue;
        if (user.op != Op::MatMul || !(matmul_kernel_supported(user) || int8_matmuls_.contains(j.index))) return false;
        ++fused;
      }
    }
    return fused == uses_.at(r.index);
  }

  Result<void> lower_matmul(InstId i, const ir::InstData& inst) {
    const ir::Type& at = f_.type_of(inst.operands[0]);
    const ir::Type& bt = f_.type_of(inst.operands[1]);
    const ir::Type& ct = f_.type_of(inst.results[0]);
    MatMulProblem p;
    p.M = at.shape[at.rank() - 2].extent;
    p.K = at.shape[at.rank() - 1].extent;
    p.N = bt.shape[bt.rank() - 1].extent;
    if (ct.rank() == 3) {
      p.batch = ct.shape[0].extent;
      p.a_batched = at.rank() == 3 && at.shape[0].extent > 1;
      p.b_batched = bt.rank() == 3 && bt.shape[0].extent > 1;
    }
    ValueId a = inst.operands[0], b = inst.operands[1];
    if (auto src = transposed_source(a)) {
      a = *src;
      p.trans_a = true;
    }
    if (auto src = transposed_source(b)) {
      b = *src;
      p.trans_b = true;
    }
    // A batch of A's rows by one B is one taller matrix (row-major rows stay in order).
    if (p.a_batched && !p.b_batched && !p.trans_a) {
      p.M *= p.batch;
      p.batch = 1;
      p.a_batched = false;
    }
    // Run-time rows: A's rows (one matrix, not transposed) may be fewer per call.
    if (o_.rows_max > 0 && (p.batch != 1 || p.trans_a || is_const(a) || !is_const(b)))
      return make_error(ErrorCode::Unsupported, "x86 plan: run-time rows through this matmul: " + summary(i));
    TERNJIT_TRY(auto kernel, MatMulKernel::create(p, o_.isa, o_.allow_foreign_isa));
    std::shared_ptr<const MatMulPackedB> packed;
    if (is_const(b)) {
      const Loc l = const_bytes(b);
      const std::uint8_t* bytes = impl_->consts[l.index].data;
      const std::size_t n = static_cast<std::size_t>((p.b_batched ? p.batch : 1) * p.K * p.N);
      const ElemKind bk = f_.type_of(b).elem;
      TERNJIT_CHECK(static_bytes(f_.type_of(b)) == n * static_cast<std::size_t>(elem_bits(bk) / 8),
                    "matmul: load-time b has the wrong size");
      auto do_pack = [&] {
        // f16/bf16 values widen exactly to f32 (the kernel's panels are f32).
        std::vector<float> values(n);
        if (bk == ElemKind::F32) {
          std::memcpy(values.data(), bytes, n * 4);
        } else {
          for (std::size_t k = 0; k < n; ++k) {
            std::uint16_t h;
            std::memcpy(&h, bytes + 2 * k, 2);
            values[k] = bk == ElemKind::F16 ? ir::f16_bits_to_f32(h) : ir::bf16_bits_to_f32(h);
          }
        }
        return kernel->pack_b(values.data());
      };
      // Shared by every specialization of the program (the layout does not depend on M).
      if (packs_) packed = packs_->get_or_pack_matmul(cval(b).expr + "|" + kernel->pack_signature(), do_pack);
      else packed = std::make_shared<const MatMulPackedB>(do_pack());
    }
    const Loc bl = packed ? plan_.slot(b) : operand_loc(b);
    impl_->steps.push_back(std::make_unique<MatMulStep>(std::move(kernel), std::move(packed), operand_loc(a), bl,
                                                        plan_.slot(inst.results[0]), summary(i)));
    return success();
  }

  // `matmul(a, transpose(p))` with p a load-time [N, K] (fused_param_transpose): p is read as
  // stored and the transpose is never evaluated. f32 p: the GEMM kernel with trans_b, p packed
  // once into its panels; f16/bf16 p: the dense NK kernel (dense.cpp) streaming p's rows,
  // widened in registers (no f32 or transposed copy of the table).
  Result<void> lower_param_transpose_matmul(InstId i, const ir::InstData& inst, ValueId pv) {
    const ir::Type& pt = f_.type_of(pv);
    const std::int64_t N = pt.shape[0].extent, K = pt.shape[1].extent;
    const std::int64_t M = f_.type_of(inst.operands[0]).static_numel().value_or(0) / K;
    if (pt.elem != ElemKind::F32) {
      LowerContext ctx{f_, i, o_.isa, o_.allow_foreign_isa, o_.rows_max, {}, {}, summary(i)};
      TERNJIT_TRY(auto step, make_dense_nk_step(ctx, M, K, N, pt.elem, operand_loc(inst.operands[0]), const_bytes(pv),
                                                plan_.slot(inst.results[0])));
      impl_->steps.push_back(std::move(step));
      return success();
    }
    MatMulProblem p;
    p.M = M;
    p.K = K;
    p.N = N;
    p.trans_b = true;
    TERNJIT_TRY(auto kernel, MatMulKernel::create(p, o_.isa, o_.allow_foreign_isa));
    const std::uint8_t* bytes = impl_->consts[const_bytes(pv).index].data;
    auto do_pack = [&] {
      std::vector<float> values(static_cast<std::size_t>(N * K));
      std::memcpy(values.data(), bytes, values.size() * 4);
      return kernel->pack_b(values.data());
    };
    std::shared_ptr<const MatMulPackedB> packed =
        packs_ ? packs_->get_or_pack_matmul(cval(pv).expr + "|T|" + kernel->pack_signature(), do_pack)
               : std::make_shared<const MatMulPackedB>(do_pack());
    impl_->steps.push_back(std::make_unique<MatMulStep>(std::move(kernel), std::move(packed),
                                                        operand_loc(inst.operands[0]), plan_.slot(pv),
                                                        plan_.slot(inst.results[0]), summary(i)));
    return success();
  }

  // ------------------------------------------------ the int8 weight-gradient matmul
  // `matmul(transpose %a, transpose %b) : i32[K, N]` of i8 %a [M, K], %b [N, M], cast to
  // f32, then multiplied by u f32[K, 1] (optional) and t f32[1, N] (or [N]), in that order
  // (as `mul`s or one `ewise` of them; what autodiff's int8_dw emits), each intermediate
  // read once: one Int8MatMulStep at the chain's last instruction (a, b, u, t are declared
  // read there, ExtraRead, so their scratch stays live until then), the others skipped.
  struct Int8Chain {
    InstId matmul;
    ValueId a, b, t, c;
    std::optional<ValueId> u;
    bool a_km = false;  // a is At [K, M]
  };
  [[nodiscard]] std::optional<InstId> only_user(ValueId v) const {
    if (is_const(v) || uses_.contains(v.index) == false || uses_.at(v.index) != 1) return std::nullopt;
    for (InstId j : f_.insts(f_.entry()))
      for (ValueId o : f_.inst(j).operands)
        if (o == v) return j;
    return std::nullopt;
  }
  void find_int8_matmuls() {
    for (InstId i : f_.insts(f_.entry())) {
      const ir::InstData& mm = f_.inst(i);
      if (mm.op != Op::MatMul) continue;
      const ir::Type& rt = f_.type_of(mm.results[0]);
      // A through its transpose's source (i8 [M, K]) or as it is (i8 [K, M], a_km).
      std::optional<ValueId> a = transposed_source(mm.operands[0]);
      const bool a_km = !a && !is_const(mm.operands[0]);
      if (a_km) a = mm.operands[0];
      const auto b = transposed_source(mm.operands[1]);
      if (!a || !b || rt.elem != ElemKind::I32 || rt.rank() != 2 || !rt.is_static()) continue;
      const ir::Type& at = f_.type_of(*a);
      const ir::Type& bt = f_.type_of(*b);
      if (at.elem != ElemKind::I8 || bt.elem != ElemKind::I8 || at.rank() != 2 || bt.rank() != 2) continue;
      const std::int64_t K = rt.shape[0].extent, N = rt.shape[1].extent;
      if (at.shape[a_km ? 1 : 0].extent < 1 || K < 1 || N < 1) continue;
      // The cast, then the multipliers in order.
      auto cast = only_user(mm.results[0]);
      if (!cast || f_.inst(*cast).op != Op::Cast || f_.type_of(f_.inst(*cast).results[0]).elem != ElemKind::F32) continue;
      std::vector<InstId> chain{i, *cast};
      std::vector<ValueId> muls;
      ValueId cur = f_.inst(*cast).results[0];
      while (auto u = only_user(cur)) {
        const ir::InstData& d = f_.inst(*u);
        std::vector<ValueId> found;
        if (d.op == Op::Mul && d.operands[0] != d.operands[1]) {
          found.push_back(d.operands[0] == cur ? d.operands[1] : d.operands[0]);
        } else if (d.op == Op::Ewise) {
          const std::int32_t nops = static_cast<std::int32_t>(d.operands.size());
          std::int32_t prev = -1;
          for (std::int32_t k = 0; k < nops; ++k)
            if (d.operands[static_cast<std::size_t>(k)] == cur) prev = prev == -1 ? k : -2;
          const auto& steps = std::get<ir::EwiseAttrs>(d.attrs).steps;
          for (std::size_t s = 0; prev >= 0 && s < steps.size(); ++s) {
            const ir::EwiseStep& st = steps[s];
            const std::int32_t other = st.a == prev ? st.b : st.b == prev ? st.a : -1;
            if (st.op != Op::Mul || other < 0 || other >= nops || d.operands[static_cast<std::size_t>(other)] == cur) {
              prev = -1;
              break;
            }
            found.push_back(d.operands[static_cast<std::size_t>(other)]);
            prev = nops + static_cast<std::int32_t>(s);
          }
          if (prev < 0) found.clear();
        }
        if (found.empty()) break;
        muls.insert(muls.end(), found.begin(), found.end());
        chain.push_back(*u);
        cur = d.results[0];
      }
      const ir::Type& ct = f_.type_of(cur);
      if (chain.size() < 3 || muls.size() > 2 || ct.elem != ElemKind::F32 || ct.shape != rt.shape) continue;
      auto is_f32 = [&](ValueId v, std::vector<ir::Dim> shape) {
        const ir::Type& t = f_.type_of(v);
        return t.elem == ElemKind::F32 && t.shape == shape;
      };
      const ir::Dim k = rt.shape[0], n = rt.shape[1], one = ir::Dim::fixed(1);
      const ValueId t = muls.back();
      if (!is_f32(t, {one, n}) && !is_f32(t, {n})) continue;
      if (muls.size() == 2 && !is_f32(muls[0], {k, one})) continue;
      Int8Chain c{i, *a, *b, t, cur, std::nullopt, a_km};
      if (muls.size() == 2) c.u = muls[0];
      int8_matmuls_.insert(i.index);
      for (std::size_t s = 0; s + 1 < chain.size(); ++s) int8_skipped_.insert(chain[s].index);
      int8_chains_.emplace(chain.back().index, c);
    }
  }
  Result<void> lower_int8_matmul(InstId i, const Int8Chain& c) {
    const ir::Type& at = f_.type_of(c.a);
    const ir::Type& rt = f_.type_of(c.c);
    Int8MatMulProblem p{at.shape[c.a_km ? 1 : 0].extent, rt.shape[0].extent, rt.shape[1].extent, c.u.has_value(), c.a_km};
    TERNJIT_TRY(auto kernel, Int8MatMulKernel::create(p, o_.isa, o_.allow_foreign_isa));
    std::optional<Loc> u;
    if (c.u) u = operand_loc(*c.u);
    impl_->steps.push_back(std::make_unique<Int8MatMulStep>(std::move(kernel), operand_loc(c.a), operand_loc(c.b), u,
                                                            operand_loc(c.t), plan_.slot(c.c),
                                                            summary(c.matmul) + " ... " + summary(i)));
    return success();
  }

  Result<void> lower_reference(InstId i, const ir::InstData& inst) {
    if (o_.rows_max > 0)  // the reference step runs the static shapes: all rows
      return make_error(ErrorCode::Unsupported, "x86 plan: run-time rows through a reference step: " + summary(i));
    std::vector<Loc> in, out;
    std::vector<ir::Type> in_types;
    std::vector<std::size_t> out_bytes;
    for (ValueId v : inst.operands) {
      in.push_back(plan_.slot(v));  // consts are passed as tensors, not bytes
      in_types.push_back(f_.type_of(v));
    }
    for (ValueId r : inst.results) {
      out.push_back(plan_.slot(r));
      out_bytes.push_back(static_bytes(f_.type_of(r)));
    }
    impl_->steps.push_back(std::make_unique<ReferenceStep>(ir::single_inst_module(f_, inst), std::move(in),
                                                           std::move(in_types), std::move(out), std::move(out_bytes),
                                                           std::string(ir::op_name(inst.op)), summary(i)));
    return success();
  }

  Result<void> lower_tmatmul(InstId i, const ir::InstData& inst, const std::string& key) {
    const auto& a = std::get<ir::TMatMulAttrs>(inst.attrs);
    const ir::Type& xt = f_.type_of(inst.operands[0]);
    const ir::Type& wt = f_.type_of(inst.operands[1]);
    const ir::Type& yt = f_.type_of(inst.results[0]);
    TMatMulProblem p;
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
    if (a.w_scale) p.w_scale_per_channel = a.group == 0 && f_.type_of(inst.operands[next++]).rank() == 1;
    p.w_scale_group = a.group;
    p.bias = a.bias;
    p.residual = a.residual;
    p.relu = a.act == ir::Activation::Relu;
    p.runtime_rows = o_.rows_max > 0;
    if (p.runtime_rows && p.x_kind != ElemKind::I8)
      return make_error(ErrorCode::Unsupported, "x86 plan: run-time rows of a float tmatmul: " + summary(i));
    if (p.M == 0 || p.K == 0 || p.N == 0) return lower_reference(i, inst);  // empty: nothing to generate
    // Grouped scales are generated for i8 and f32 x (tmatmul_grouped.cpp); bf16/f16 x
    // would round every group's partial result to its kind.
    if (p.w_scale_group > 0 && p.x_kind != ElemKind::I8 && p.x_kind != ElemKind::F32) return lower_reference(i, inst);

    // The configuration: given by the caller, else asked of the tuning source (the
    // space also reaches o_.spaces when the caller collects them), else the default.
    TMatMulConfig cfg;
    auto given = o_.configs.find(key);
    if (given != o_.configs.end()) {
      TERNJIT_TRY(cfg, TMatMulConfig::parse(given->second));
    } else if (o_.tuning || o_.spaces) {
      auto space = tmatmul_tuning_space(p, o_.isa, o_.threads);
      const std::string decided = o_.tuning ? o_.tuning->decide(*space) : space->default_config();
      if (o_.spaces) o_.spaces->push_back(std::move(space));
      TERNJIT_TRY(cfg, TMatMulConfig::parse(decided));
    } else {
      cfg = default_config(p, o_.isa, o_.threads);
    }
    TERNJIT_TRY(auto kernel, TMatMulKernel::create(p, cfg, o_.allow_foreign_isa));
    impl_->configs.emplace(key, kernel->config().str());

    const ConstValue& wc = cval(inst.operands[1]);
    const std::string pack_key = wc.expr + "|" + kernel->pack_signature();
    auto do_pack = [&]() -> Result<PackedWeights> {
      // A bound ternary weight is packed straight from its 2-bit codes; a computed one
      // (a load-time tquantize, say) from its values.
      const std::optional<ir::StoredTensor>& stored = wc.value.stored;
      if (stored && stored->kind() == ElemKind::T2)
        return kernel->pack(TernaryWeights::tern2(stored->bytes().span(), static_cast<std::size_t>(stored->numel())));
      return kernel->pack(wc.tensor().to_i8());
    };
    std::shared_ptr<const PackedWeights> packed;
    if (packs_) {
      TERNJIT_TRY(packed, packs_->get_or_pack(pack_key, do_pack));
    } else {
      TERNJIT_TRY(PackedWeights pw, do_pack());
      packed = std::make_shared<const PackedWeights>(std::move(pw));
    }

    std::vector<Loc> locs;
    locs.push_back(operand_loc(inst.operands[0]));
    for (std::size_t k = 2; k < inst.operands.size(); ++k) locs.push_back(operand_loc(inst.operands[k]));
    const ValueId y = inst.results[0];
    locs.push_back(plan_.slot(y));
    impl_->steps.push_back(std::make_unique<TMatMulStep>(std::move(kernel), std::move(packed), locs, summary(i)));

    // An activation the kernel does not apply runs in place right after it.
    if (a.act != ir::Activation::None && a.act != ir::Activation::Relu) {
      const auto act = ir::activation_op(a.act);
      TERNJIT_CHECK(act.has_value(), "tmatmul activation without an op");
      TERNJIT_TRY(auto k, generate_activation(*act, yt.elem, yt.static_numel().value_or(0), o_.isa,
                                              o_.allow_foreign_isa, o_.rows_max));
      impl_->steps.push_back(std::make_unique<EltwiseStep>(std::string(ir::activation_name(a.act)), std::move(k),
                                                           std::vector<Loc>{plan_.slot(y)},
                                                           std::vector<Loc>{plan_.slot(y)},
                                                           "epilogue activation of " + names_.value(y)));
    }
    return success();
  }

  const ir::Function& f_;
  const ir::ParamValues& params_;
  const PlanOptions& o_;
  PackCache* packs_;
  ir::FunctionNames names_;
  StepPlan plan_;
  std::unique_ptr<Plan::Impl> impl_;
  std::map<std::uint32_t, std::size_t> uses_;  // operand uses by ValueId::index (ret included)
  int tmatmul_count_ = 0;
  std::set<std::uint32_t> int8_matmuls_;          // InstId::index of the fused int8 matmuls
  std::set<std::uint32_t> int8_skipped_;          // the rest of their chains but the last
  std::map<std::uint32_t, Int8Chain> int8_chains_;  // by the chain's last InstId::index
};

}  // namespace

Result<std::unique_ptr<Plan>> Plan::build(const ir::Module& m, std::string_view function, const ir::ParamValues& params,
                                          const PlanOptions& options, PackCache* packs) {
  const ir::Function* f = m.find_function(function);
  if (!f) return make_error(ErrorCode::NotFound, "no function '" + std::string(function) + "' to compile");
  TERNJIT_TRY_VOID(plan_supported(*f));
  if (!options.allow_foreign_isa && !host_isas().supports(options.isa))
    return make_error(ErrorCode::Unavailable,
                      "this CPU cannot run x86 code path '" + std::string(isa_name(options.isa)) + "'");
  Builder b(*f, params, options, packs);
  TERNJIT_TRY(auto impl, b.build());
  impl->adaptive = options.adaptive_parallel;
  impl->adaptive_max_ns = options.adaptive_max_parallel_ns;
  if (impl->adaptive) impl->choosers = std::make_unique<SplitChooser[]>(impl->steps.size());
  return std::unique_ptr<Plan>(new Plan(std::move(impl)));
}

}  // namespace ternjit::targets::x86
