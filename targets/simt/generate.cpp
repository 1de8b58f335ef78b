// SPDX-License-Identifier: Apache-2.0
// generate.cpp - the SIMT generator's entry: support, tmatmul configurations, and the launch plan of a function
// (prelude.cpp, kernels.cpp and tmatmul.cpp write the kernels).
#include "targets/simt/generate.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <limits>
#include <map>

#include "targets/common/view2d.h"
#include "targets/load_value.h"
#include "targets/simt/generate_internal.h"

namespace ternjit::targets::simt {

using ir::InstId;
using ir::Op;
using ir::ValueId;
using namespace detail;
using kernel_source::extents;
using kernel_source::numel;

namespace {

Error unsupported(const std::string& why) { return make_error(ErrorCode::Unsupported, "the simt generator: " + why); }

std::uint32_t grid_1d(std::int64_t items) {
  return static_cast<std::uint32_t>(std::clamp<std::int64_t>((items + kRowBlock - 1) / kRowBlock, 1, kMaxGrid));
}

// ------------------------------------------------------------------ support

// What the generator admits (kernel_source.h has the rules the spirv target shares).
kernel_source::OpLimits limits() {
  kernel_source::OpLimits l;
  l.generator = "the simt generator";
  l.planner_name = "simt";
  l.max_elems = kMaxElems;
  l.max_elems_text = "2^31";
  l.max_bytes_text = "2 GiB";
  l.kernel_word = "kernel";
  l.packed_weight_k_multiple = kChunk;  // tcodes64: 64 two-bit codes per 16 bytes
  return l;
}

std::uint32_t pow2_floor(std::int64_t v) {
  std::uint32_t p = 1;
  while (static_cast<std::int64_t>(p) * 2 <= v && p < (1u << 30)) p *= 2;
  return p;
}

}  // namespace

std::string_view dialect_name(Dialect d) { return d == Dialect::Cuda ? "cuda" : "hip"; }

std::string config_text(const TMatMulConfig& c) {
  return "tpc=" + std::to_string(c.tpc) + ";cols=" + std::to_string(c.cols) + ";unroll=" + std::to_string(c.unroll) +
         ";rows=" + std::to_string(c.rows) + ";cpt=" + std::to_string(c.cpt) +
         (c.mma != 0 ? ";mma=" + std::to_string(c.mma) : "");
}

std::optional<TMatMulConfig> parse_config(std::string_view text) {
  TMatMulConfig c;
  unsigned tpc = 0, cols = 0, unroll = 0, rows = 0, cpt = 0, mma = 0;
  const std::string t(text);
  int used = 0;
  if (std::sscanf(t.c_str(), "tpc=%u;cols=%u;unroll=%u;rows=%u;cpt=%u%n", &tpc, &cols, &unroll, &rows, &cpt, &used) != 5)
    return std::nullopt;
  if (static_cast<std::size_t>(used) != t.size()) {
    int more = 0;
    if (std::sscanf(t.c_str() + used, ";mma=%u%n", &mma, &more) != 1 || static_cast<std::size_t>(used + more) != t.size())
      return std::nullopt;
  }
  c.mma = mma;
  c.tpc = tpc;
  c.cols = cols;
  c.unroll = unroll;
  c.rows = rows;
  c.cpt = cpt;
  if (config_text(c) != t) return std::nullopt;  // one spelling per configuration
  return c;
}

bool config_valid(const TMatMulConfig& c, const TMatMulShape& s, std::uint32_t warp_size, bool tensor_cores) {
  if (warp_size != 32 && warp_size != 64) return false;
  if (c.mma > 1) return false;
  if (c.mma == 1)
    return tensor_cores && warp_size == 32 && s.x == ElemKind::I8 && s.group == 0 && c.tpc == 32 && c.unroll == 1 &&
           c.cols >= 1 && c.cols <= 8 && (c.rows == 1 || c.rows == 2) && (c.cpt == 1 || c.cpt == 2 || c.cpt == 4);
  if (c.tpc == 0 || c.tpc > 1024 || !std::has_single_bit(c.tpc)) return false;
  if (c.cols == 0 || c.cols > 1024) return false;
  const std::uint64_t block = std::uint64_t{c.tpc} * c.cols;
  if (block > 1024 || block % warp_size != 0) return false;
  if (c.unroll != 1 && c.unroll != 2 && c.unroll != 4) return false;
  if (c.cpt != 1 && c.cpt != 2 && c.cpt != 4) return false;
  return c.rows >= 1 && c.rows <= 8;
}

TMatMulConfig default_config(const TMatMulShape& s, std::uint32_t warp_size, bool tensor_cores) {
  TMatMulConfig c;
  if (tensor_cores && warp_size == 32 && s.x == ElemKind::I8 && s.group == 0 && s.m >= 16) {
    // Tensor cores: a block of up to 4 warps (no more than the column tiles need), each
    // 2 tiles of 8 columns (one tile when N <= 8) by 1 (M < 32) or 2 tiles of 16 rows
    // over the whole K.
    c.tpc = 32;
    c.unroll = 1;
    c.rows = s.m >= 32 ? 2 : 1;
    c.cpt = s.n > 8 ? 2 : 1;
    const std::int64_t tiles = (s.n + 7) / 8;
    c.cols = static_cast<std::uint32_t>(std::clamp<std::int64_t>((tiles + c.cpt - 1) / c.cpt, 1, 4));
    c.mma = 1;
    return c;
  }
  const std::int64_t chunks = std::max<std::int64_t>(1, (s.k + kChunk - 1) / kChunk);
  // Two or more chunks per thread; a whole warp per column unless K is short; split K
  // further (up to 256 threads per column) when N is small, so enough blocks exist.
  const std::uint32_t cap = s.n < 512 ? 256 : warp_size;
  c.tpc = std::clamp<std::uint32_t>(pow2_floor(std::max<std::int64_t>(1, chunks / 2)), 1, cap);
  c.cols = std::max<std::uint32_t>(1, 256 / c.tpc);
  while (std::uint64_t{c.tpc} * c.cols % warp_size != 0) ++c.cols;
  c.unroll = chunks / c.tpc >= 4 ? 2 : 1;
  c.rows = static_cast<std::uint32_t>(std::clamp<std::int64_t>(s.m, 1, 8));
  // Several columns per thread reuse each activation chunk (M > 1: the activations, not
  // the weights, would otherwise dominate the loads).
  c.cpt = s.m >= 4 ? 4 : s.m >= 2 ? 2 : 1;
  return c;
}

Result<void> supported(const ir::Function& f) { return kernel_source::function_supported(f, limits()); }

std::vector<TMatMulShape> tmatmul_shapes(const ir::Function& f) {
  std::vector<TMatMulShape> out;
  const StepPlan plan = plan_steps(f);
  for (const PlannedStep& ps : plan.steps)
    if (ps.kind == PlannedStep::Kind::Compute && f.inst(ps.inst).op == Op::TMatMul)
      out.push_back(kernel_source::tmatmul_shape(f, f.inst(ps.inst)));
  return out;
}

namespace {

// One generate() call: the KernelSet being built and what its steps share (scratch ids,
// packed weights, row sums). Kernels are appended in step order; a tmatmul of i8
// activations may first append the tj_rowsum kernel it reads.
class Generation {
 public:
  Generation(const ir::Function& f, const SimtOptions& options)
      : f_(f),
        options_(options),
        tensor_cores_(options.tensor_cores && options.dialect == Dialect::Cuda && options.warp_size == 32) {
    p_.dialect = options.dialect;
    p_.warp_size = options.warp_size;
    p_.plan = plan_steps(f);
    p_.source = prelude(options);
    find_fused_rowsums();
  }

  Result<KernelSet> run() {
    std::size_t index = 0;
    for (const PlannedStep& ps : p_.plan.steps) {
      const std::size_t step = index++;
      if (ps.kind == PlannedStep::Kind::Copy) {
        KernelLaunch k;
        k.name = "tj_copy_" + std::to_string(step);
        k.op = "copy";
        k.block = {kRowBlock, 1, 1};
        k.grid = {grid_1d(static_cast<std::int64_t>(ps.bytes)), 1, 1};
        k.args = {slot_arg(ps.in[0], ps.bytes), slot_arg(ps.out[0], ps.bytes)};
        add(std::move(k), copy_kernel("tj_copy_" + std::to_string(step), ps.bytes));
        continue;
      }
      TERNJIT_TRY_VOID(compute_step(ps, step));
    }
    // HIP counts threads per grid dimension in 32 bits (grid x block < 2^32); CUDA's
    // grid.x stops at 2^31 - 1. Both hold for the shapes supported() admits; checked,
    // not assumed.
    for (const KernelLaunch& k : p_.kernels)
      if (std::uint64_t{k.grid.x} * k.block.x >= (std::uint64_t{1} << 32) || k.grid.x >= (1u << 31) ||
          k.grid.y > kMaxGrid)
        return unsupported("kernel " + k.name + " needs a grid of more than 2^32 threads");
    return std::move(p_);
  }

 private:
  // Quantized activations an ungrouped dp4a i8 tmatmul of this program reads: their
  // quantize kernel writes the row sums too (no tj_rowsum kernel for them). The mma
  // form reads no row sums. An invalid decision is refused later, in tmatmul_config.
  void find_fused_rowsums() {
    std::map<std::uint32_t, bool> quantized;  // values computed by a quantize step
    std::size_t t = 0;
    for (const PlannedStep& ps : p_.plan.steps) {
      if (ps.kind != PlannedStep::Kind::Compute) continue;
      const ir::InstData& inst = f_.inst(ps.inst);
      if (inst.op == Op::Quantize) quantized[inst.results[0].index] = true;
      if (inst.op != Op::TMatMul) continue;
      const TMatMulShape s = kernel_source::tmatmul_shape(f_, inst);
      TMatMulConfig c = default_config(s, options_.warp_size, tensor_cores_);
      if (t < options_.decisions.size() && !options_.decisions[t].empty())
        if (auto parsed = parse_config(options_.decisions[t])) c = *parsed;
      ++t;
      if (s.x == ElemKind::I8 && s.group == 0 && c.mma == 0 && quantized.count(inst.operands[0].index))
        fuse_rowsum_[inst.operands[0].index] = true;
    }
  }

  // The kernel argument of slot `s`, a scratch slot of at least `bytes` bytes.
  KernelArg slot_arg(const Slot& s, std::size_t bytes) {
    switch (s.kind) {
      case SlotKind::Arg: return {KernelArg::Kind::Input, s.index, 0};
      case SlotKind::Out: return {KernelArg::Kind::Output, s.index, 0};
      case SlotKind::Const: return {KernelArg::Kind::Const, s.index, 0};
      case SlotKind::Scratch: break;
    }
    auto [it, fresh] = scratch_of_.try_emplace(s.index, p_.scratch_bytes.size());
    if (fresh) p_.scratch_bytes.push_back(0);
    p_.scratch_bytes[it->second] = std::max(p_.scratch_bytes[it->second], bytes);
    return {KernelArg::Kind::Scratch, it->second, 0};
  }

  std::size_t new_scratch(std::size_t bytes) {
    p_.scratch_bytes.push_back(bytes);
    return p_.scratch_bytes.size() - 1;
  }

  void add(KernelLaunch k, const std::string& source) {
    p_.source += "\n" + source;
    p_.kernels.push_back(std::move(k));
  }

  Result<void> compute_step(const PlannedStep& ps, std::size_t step) {
    const ir::InstData& inst = f_.inst(ps.inst);
    KernelLaunch k;
    k.name = "tj_" + std::string(ir::op_name(inst.op)) + "_" + std::to_string(step);
    k.inst = ps.inst;
    k.op = std::string(ir::op_name(inst.op));
    k.block = {kRowBlock, 1, 1};
    std::vector<KernelArg> ins, outs;
    for (std::size_t i = 0; i < ps.in.size(); ++i)
      ins.push_back(slot_arg(ps.in[i], static_bytes(f_.type_of(inst.operands[i]))));
    for (std::size_t j = 0; j < ps.out.size(); ++j)
      outs.push_back(slot_arg(ps.out[j], static_bytes(f_.type_of(inst.results[j]))));
    if (inst.op == Op::TMatMul) {
      TERNJIT_TRY(std::string src, tmatmul_step(k, ps, step, ins, outs));
      add(std::move(k), src);
      return success();
    }
    k.args = ins;
    k.args.insert(k.args.end(), outs.begin(), outs.end());
    const std::string src = row_or_elementwise_step(k, inst);
    add(std::move(k), src);
    return success();
  }

  // The [rows, cols] strides of value `v` read at each element of `inst`'s result.
  std::pair<std::int64_t, std::int64_t> view(const ir::InstData& inst, ValueId v) const {
    return *targets::view2d(extents(f_.type_of(inst.results[0])), extents(f_.type_of(v)));
  }

  // The epilogue operands of tmatmul `inst` with their strides, each appended to `args`.
  std::vector<EpilogueRead> epilogue(const ir::InstData& inst, const std::vector<KernelArg>& ins,
                                     std::vector<KernelArg>& args) const {
    std::vector<EpilogueRead> ep;
    for (const TMatMulEpilogueOperand& e : tmatmul_epilogue(inst)) {
      const auto [rs, cs] = view(inst, inst.operands[e.operand]);
      ep.push_back({e.op, rs, cs});
      args.push_back(ins[e.operand]);
    }
    return ep;
  }

  // The configuration of tmatmul `t`: its decision, else the default.
  Result<TMatMulConfig> tmatmul_config(const TMatMulShape& s, std::size_t t) const {
    if (t >= options_.decisions.size() || options_.decisions[t].empty())
      return default_config(s, options_.warp_size, tensor_cores_);
    auto parsed = parse_config(options_.decisions[t]);
    if (!parsed || !config_valid(*parsed, s, options_.warp_size, tensor_cores_))
      return make_error(ErrorCode::InvalidArgument, "the simt generator: tmatmul configuration '" +
                                                        options_.decisions[t] + "' is not valid here");
    return *parsed;
  }

  // The weights index of load-time value `lt` packed in `layout`: once per distinct pair.
  std::size_t weight(std::size_t lt, const TMatMulShape& s, WeightLayout layout) {
    auto [it, fresh] = weight_of_.try_emplace(std::make_pair(lt, layout), p_.weights.size());
    if (fresh) {
      WeightUse wu;
      wu.load_time = lt;
      wu.k = s.k;
      wu.n = s.n;
      wu.layout = layout;
      const ir::InstData& def = f_.inst(p_.plan.load_time[lt].inst);
      if (def.op == Op::Param) wu.param = std::get<ir::ParamAttrs>(def.attrs).name;
      p_.weights.push_back(std::move(wu));
    }
    return it->second;
  }

  // The scratch id of the row sums (per group) of i8 activations `x` of tmatmul `s`:
  // computed once per activation value and group, by a tj_rowsum kernel added here
  // unless the quantize kernel that wrote `x` computed them.
  std::size_t rowsums(const PlannedStep& ps, std::size_t step, ValueId x, const KernelArg& x_arg,
                      const TMatMulShape& s) {
    const std::int64_t group = s.group > 0 ? s.group : s.k;
    const auto key = std::make_pair(x.index, group);
    if (auto it = rowsum_of_.find(key); it != rowsum_of_.end()) return it->second;
    const std::int64_t groups = ir::grouped_scale_rows(s.k, group);
    const std::size_t id = new_scratch(static_cast<std::size_t>(s.m * groups) * 4);
    KernelLaunch r;
    r.name = "tj_rowsum_" + std::to_string(step);
    r.op = "rowsum";
    r.inst = ps.inst;
    r.block = {kRowBlock, 1, 1};
    r.grid = {static_cast<std::uint32_t>(groups), static_cast<std::uint32_t>(std::min(s.m, kMaxGrid)), 1};
    r.args = {x_arg, {KernelArg::Kind::Scratch, id, 0}};
    const std::string src = rowsum_kernel(r.name, s.m, s.k, group);
    add(std::move(r), src);
    rowsum_of_.emplace(key, id);
    return id;
  }

  // A tmatmul: its configuration, its packed weight, the mma.sync or the dp4a / f32 form.
  Result<std::string> tmatmul_step(KernelLaunch& k, const PlannedStep& ps, std::size_t step,
                                   const std::vector<KernelArg>& ins, const std::vector<KernelArg>& outs) {
    const ir::InstData& inst = f_.inst(ps.inst);
    const auto& a = std::get<ir::TMatMulAttrs>(inst.attrs);
    const TMatMulShape s = kernel_source::tmatmul_shape(f_, inst);
    const std::size_t t = p_.tmatmuls.size();
    TERNJIT_TRY(const TMatMulConfig c, tmatmul_config(s, t));
    p_.tmatmuls.push_back(s);
    p_.configs.push_back(c);
    k.tmatmul = static_cast<std::int64_t>(t);
    const WeightLayout layout = c.mma != 0 ? WeightLayout::Mma2 : WeightLayout::Codes64;
    std::vector<KernelArg> args = {ins[0], {KernelArg::Kind::Weight, weight(ps.in[1].index, s, layout), 0}};
    if (c.mma != 0) {
      // Weights decoded to -1/0/1: no row sums.
      const std::vector<EpilogueRead> ep = epilogue(inst, ins, args);
      args.push_back(outs[0]);
      k.args = std::move(args);
      const std::int64_t tiles = (s.n + 7) / 8, per_block = std::int64_t{c.cols} * c.cpt;
      const std::int64_t row_passes = ((s.m + 15) / 16 + c.rows - 1) / c.rows;
      k.block = {32 * c.cols, 1, 1};
      k.grid = {static_cast<std::uint32_t>((tiles + per_block - 1) / per_block),
                static_cast<std::uint32_t>(std::min<std::int64_t>(row_passes, kMaxGrid)), 1};
      if (!mma_helpers_emitted_) {
        p_.source += "\n" + mma_helpers();
        mma_helpers_emitted_ = true;
      }
      return mma_kernel(k.name, s, c, ep, a.act);
    }
    if (s.x == ElemKind::I8)
      args.push_back({KernelArg::Kind::Scratch, rowsums(ps, step, inst.operands[0], ins[0], s), 0});
    if (auto gs = tmatmul_group_scale(inst)) args.push_back(ins[*gs]);
    const std::vector<EpilogueRead> ep = epilogue(inst, ins, args);
    args.push_back(outs[0]);
    k.args = std::move(args);
    k.block = {c.tpc * c.cols, 1, 1};
    k.grid = {static_cast<std::uint32_t>((s.n + std::int64_t{c.cols} * c.cpt - 1) / (std::int64_t{c.cols} * c.cpt)),
              static_cast<std::uint32_t>(std::min<std::int64_t>((s.m + c.rows - 1) / c.rows, kMaxGrid)), 1};
    return tmatmul_kernel(k.name, s, c, ep, a.act);
  }

  // Every other op: quantize, rmsnorm, softmax and the reductions, the elementwise ops
  // (k.args holds the operands then the results).
  std::string row_or_elementwise_step(KernelLaunch& k, const ir::InstData& inst) {
    const auto out = extents(f_.type_of(inst.results[0]));
    const std::int64_t items = numel(out);
    const std::int64_t cols = out.empty() ? 1 : out.back();
    switch (inst.op) {
      case Op::Quantize:
      case Op::QuantizeInt8: {
        const std::int64_t rows = items / cols;
        const bool rowsum = inst.op == Op::Quantize && fuse_rowsum_.count(inst.results[0].index) > 0;
        k.grid = {static_cast<std::uint32_t>(std::min(rows, kMaxGrid)), 1, 1};
        if (rowsum) {
          const std::size_t id = new_scratch(static_cast<std::size_t>(rows) * 4);
          rowsum_of_.emplace(std::make_pair(inst.results[0].index, cols), id);
          k.args.push_back({KernelArg::Kind::Scratch, id, 0});
        }
        return quantize_kernel(k.name, rows, cols, inst.op == Op::QuantizeInt8, rowsum);
      }
      case Op::RmsNorm: {
        const std::int64_t rows = items / cols;
        k.grid = {static_cast<std::uint32_t>(std::min(rows, kMaxGrid)), 1, 1};
        return rmsnorm_kernel(k.name, rows, cols, std::get<ir::EpsAttrs>(inst.attrs).eps);
      }
      case Op::Softmax:
      case Op::ReduceSum:
      case Op::ReduceMean:
      case Op::ReduceMax: {
        const kernel_source::AxisSplit a = kernel_source::axis_split(f_, inst);
        k.grid = {grid_1d(a.outer * a.inner), 1, 1};
        return axis_kernel(k.name, inst.op, a.outer, a.len, a.inner);
      }
      default: break;
    }
    std::vector<std::pair<std::int64_t, std::int64_t>> views;
    for (ValueId v : inst.operands) views.push_back(view(inst, v));
    k.grid = {grid_1d(items), 1, 1};
    return ewise_kernel(k.name, kernel_source::ewise_steps(inst), views, items, cols);
  }

  const ir::Function& f_;
  const SimtOptions& options_;
  const bool tensor_cores_;
  KernelSet p_;
  std::map<std::size_t, std::size_t> scratch_of_;  // plan scratch offset -> scratch id
  std::map<std::pair<std::size_t, WeightLayout>, std::size_t> weight_of_;  // (load-time index, layout) -> weights index
  std::map<std::pair<std::uint32_t, std::int64_t>, std::size_t> rowsum_of_;  // (x value, group) -> scratch id
  std::map<std::uint32_t, bool> fuse_rowsum_;  // quantize result value -> its kernel writes the row sums
  bool mma_helpers_emitted_ = false;
};

}  // namespace

Result<KernelSet> generate(const ir::Module& specialized, std::string_view function, const SimtOptions& options) {
  const ir::Function* f = specialized.find_function(function);
  if (f == nullptr) return make_error(ErrorCode::NotFound, "no function @" + std::string(function));
  if (options.warp_size != 32 && options.warp_size != 64)
    return make_error(ErrorCode::InvalidArgument, "the simt generator: warp size " +
                                                      std::to_string(options.warp_size) + " (32 or 64)");
  TERNJIT_TRY_VOID(supported(*f));
  return Generation(*f, options).run();
}

}  // namespace ternjit::targets::simt
