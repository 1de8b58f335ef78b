// SPDX-License-Identifier: Apache-2.0
// eltwise.cpp - generators of the non-matmul x86 kernels: elementwise/ewise loops, quantize, rmsnorm, softmax, reductions.
//
// Kernel shapes (each one JIT function; C++ loops the outer dims and splits the work
// over Parallel):
//   ewise      fn(ptrs, out, nvec, tail): one contiguous run of the output; each
//              operand is either contiguous along it or one broadcast element (the
//              NumPy broadcast is collapsed into outer dims + this inner run).
//   rows       fn(x, out, aux, rows): ops over the last axis (quantize, rmsnorm,
//              softmax, reductions), the row length baked in; 4-way unrolled passes.
//   columns    fn(x, out, outer): softmax/reductions over a middle axis, vectorised
//              across the contiguous inner extent.
// Tails use AVX-512 opmasks, or on AVX2 vmaskmovps (f32) and per-element inserts and
// extracts (16-bit kinds, int8), so no access leaves the tensors.
//
// Numerics versus ir/interpret.cpp: the standalone binary ops and ewise steps compute in
// f32 and round to the result kind after every step (as the reference does); the f32
// IEEE ops and max/min are bit-exact. Transcendentals use vmath.h's polynomials.
// Reductions, softmax and rmsnorm accumulate in f32 (the reference in double); rmsnorm
// multiplies by 1/sqrt(mean + eps) instead of dividing; softmax multiplies by 1/sum.
// bf16 stores round with an integer sequence, not vcvtneps2bf16: that instruction
// flushes f32 subnormals to zero, which the reference rounding does not.
// The row and column kernels are emitted in eltwise_rows.cpp.
#include "targets/x86/eltwise.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <stdexcept>
#include <string>
#include <variant>

#include "targets/x86/eltwise_internal.h"

namespace ternjit::targets::x86 {

using namespace eltwise_detail;

namespace {

using ir::Op;
using Xbyak::Xmm;

constexpr int kMaxOperands = 16;
constexpr int kValueRegs = 8;  // vector registers 0..7 hold ewise step results
// Work below this many elements runs on the calling thread.
constexpr std::int64_t kMinParallelElems = 32 * 1024;
// Ewise runs longer than this are split so that one long row can use several threads.
constexpr std::int64_t kEwiseBlock = 16 * 1024;

bool is_wide(Isa isa) { return isa == Isa::Avx512 || isa == Isa::Avx512Vnni || isa == Isa::Amx; }

std::int64_t numel(const Extents& s) {
  std::int64_t n = 1;
  for (std::int64_t e : s) n *= e;
  return n;
}

std::string extents_str(const Extents& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

Error unsupported(std::string msg) { return make_error(ErrorCode::Unsupported, std::move(msg)); }

// The largest number of step results live at once while evaluating `steps` (the last
// one is live until the store).
int max_live(const std::vector<ir::EwiseStep>& steps, int n_in) {
  const int n = static_cast<int>(steps.size());
  std::vector<int> last(static_cast<std::size_t>(n), -1);
  for (int j = 0; j < n; ++j)
    for (int s : {steps[static_cast<std::size_t>(j)].a, steps[static_cast<std::size_t>(j)].b})
      if (s >= n_in) last[static_cast<std::size_t>(s - n_in)] = j;
  last[static_cast<std::size_t>(n - 1)] = n;
  int best = 0;
  for (int j = 0; j < n; ++j) {
    // Live while computing step j: earlier results used at j or later, plus j's own.
    int live = 1;
    for (int i = 0; i < j; ++i)
      if (last[static_cast<std::size_t>(i)] >= j) ++live;
    best = std::max(best, live);
  }
  return best;
}

Result<Extents> static_extents(const ir::Type& t, const char* what) {
  if (!t.is_static()) return unsupported(std::string("eltwise: the ") + what + " has a symbolic shape");
  Extents e;
  for (const ir::Dim& d : t.shape) e.push_back(d.extent);
  return e;
}

void set_axis_view(Spec& s, const Extents& shape, std::size_t axis) {
  s.outer = s.len = s.inner = 1;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (d < axis) s.outer *= shape[d];
    else if (d == axis) s.len = shape[d];
    else s.inner *= shape[d];
  }
}

Result<Spec> analyze(const ir::Function& f, ir::InstId id) {
  const ir::InstData& inst = f.inst(id);
  Spec s;
  s.op = inst.op;
  const std::string name = "'" + std::string(ir::op_name(inst.op)) + "'";
  if (ir::is_ewise_step_op(inst.op) || inst.op == Op::Ewise) {
    s.family = Family::Ewise;
  } else if (ir::op_category(inst.op) == ir::OpCategory::Reduction) {
    s.family = Family::Reduce;
  } else {
    switch (inst.op) {
      case Op::Quantize: case Op::QuantizeInt8: s.family = Family::Quantize; break;
      case Op::RmsNorm: s.family = Family::RmsNorm; break;
      case Op::Softmax: s.family = Family::Softmax; break;
      default: return unsupported("eltwise: " + name + " is not an eltwise op");
    }
  }
  for (ir::ValueId v : inst.operands) {
    const ir::Type& t = f.type_of(v);
    TERNJIT_TRY(Extents e, static_extents(t, "operand"));
    if (!is_float(t.elem))
      return unsupported("eltwise: " + name + " with " + std::string(elem_name(t.elem)) +
                         " operands is not generated (float kinds only)");
    s.in_kinds.push_back(t.elem);
    s.in_shapes.push_back(std::move(e));
  }
  for (ir::ValueId v : inst.results) {
    const ir::Type& t = f.type_of(v);
    TERNJIT_TRY(Extents e, static_extents(t, "result"));
    s.out_kinds.push_back(t.elem);
    s.out_shapes.push_back(std::move(e));
  }
  if (s.family != Family::Quantize || inst.op == Op::QuantizeInt8)
    if (s.out_kinds.size() != 1 || !is_float(s.out_kinds[0]))
      return unsupported("eltwise: " + name + " must have one float result");

  switch (s.family) {
    case Family::Ewise: {
      const int n_in = static_cast<int>(s.in_kinds.size());
      if (n_in > kMaxOperands) return unsupported("eltwise: 'ewise' with more than 16 operands");
      if (inst.op == Op::Ewise) {
        s.steps = std::get<ir::EwiseAttrs>(inst.attrs).steps;
        if (s.steps.empty()) return unsupported("eltwise: 'ewise' without steps");
      } else {
        s.steps = {ir::EwiseStep{inst.op, 0, n_in == 2 ? 1 : -1}};
      }
      if (max_live(s.steps, n_in) > kValueRegs)
        return unsupported("eltwise: 'ewise' keeps more than 8 intermediate values live");
      for (const ElemKind k : s.in_kinds)
        if (inst.op != Op::Ewise && !ir::is_ewise_binary(inst.op) && k != s.out_kinds[0])
          return unsupported("eltwise: " + name + " changes the element kind");
      s.round_steps = s.out_kinds[0] != ElemKind::F32 && s.steps.size() > 1;
      break;
    }
    case Family::Quantize: {
      if (s.in_shapes[0].empty()) return unsupported("eltwise: " + name + " of a scalar");
      s.fake_quant = inst.op == Op::QuantizeInt8;
      if (!s.fake_quant && (s.out_kinds[0] != ElemKind::I8 || s.out_kinds[1] != ElemKind::F32))
        return unsupported("eltwise: 'quantize' must give i8 values and f32 scales");
      set_axis_view(s, s.in_shapes[0], s.in_shapes[0].size() - 1);
      break;
    }
    case Family::RmsNorm: {
      if (s.in_shapes[0].empty()) return unsupported("eltwise: 'rmsnorm' of a scalar");
      set_axis_view(s, s.in_shapes[0], s.in_shapes[0].size() - 1);
      s.eps = std::get<ir::EpsAttrs>(inst.attrs).eps;
      break;
    }
    case Family::Softmax: case Family::Reduce: {
      const auto& ax = std::get<ir::AxisAttrs>(inst.attrs);
      if (ax.axis < 0 || ax.axis >= static_cast<std::int64_t>(s.in_shapes[0].size()))
        return unsupported("eltwise: " + name + " axis out of range");
      set_axis_view(s, s.in_shapes[0], static_cast<std::size_t>(ax.axis));
      if (s.family == Family::Reduce && s.out_kinds[0] != s.in_kinds[0])
        return unsupported("eltwise: " + name + " changes the element kind");
      if (inst.op == Op::ReduceMax && s.len == 0 && s.outer * s.inner > 0)
        return unsupported("eltwise: 'reduce_max' over an empty axis has no maximum");
      break;
    }
  }
  return s;
}

// ---------------------------------------------------------------- ewise broadcast plan

// The output as [outer dims..., inner]: each operand's element stride per dim (0 where
// broadcast), the inner run contiguous (stride 1) or one broadcast element (stride 0).
struct Bcast {
  Extents dims;
  std::vector<Extents> strides;
  std::vector<bool> scalar_inner;
};

// keep_rows: output axis 0 (the run-time row axis) stays a dim of its own.
Bcast plan_broadcast(const std::vector<Extents>& in_shapes, const Extents& out, bool keep_rows = false) {
  const std::size_t n = in_shapes.size(), rank = out.size();
  std::vector<Extents> st(n, Extents(rank, 0));
  for (std::size_t k = 0; k < n; ++k) {
    const Extents& s = in_shapes[k];
    const std::size_t off = rank - s.size();
    std::int64_t stride = 1;
    for (std::size_t d = s.size(); d-- > 0;) {
      st[k][off + d] = s[d] == 1 ? 0 : stride;
      stride *= s[d];
    }
  }
  Bcast b;
  b.strides.assign(n, {});
  for (std::size_t d = 0; d < rank; ++d) {
    if (out[d] == 1) continue;
    const bool merge = !b.dims.empty() && !(keep_rows && d == 1 && out[0] != 1) && [&] {
      for (std::size_t k = 0; k < n; ++k)
        if (b.strides[k].back() != st[k][d] * out[d]) return false;
      return true;
    }();
    if (merge) {
      b.dims.back() *= out[d];
      for (std::size_t k = 0; k < n; ++k) b.strides[k].back() = st[k][d];
    } else {
      b.dims.push_back(out[d]);
      for (std::size_t k = 0; k < n; ++k) b.strides[k].push_back(st[k][d]);
    }
  }
  if (b.dims.empty()) {  // one element
    b.dims = {1};
    for (std::size_t k = 0; k < n; ++k) b.strides[k] = {1};
  }
  for (std::size_t k = 0; k < n; ++k) b.scalar_inner.push_back(b.strides[k].back() == 0);
  return b;
}

// ---------------------------------------------------------------- code generation

// The elementwise unary/binary op of one step into dst; temps are vector regs 10..13.
void emit_step_op(JitCode& c, VecAsm& va, Op op, const Xmm& dst, const Xmm& a, const Xmm& b) {
  const Xmm t0 = va.v(10), t1 = va.v(11), t2 = va.v(12), t3 = va.v(13);
  switch (op) {
    case Op::Add: c.vaddps(dst, a, b); return;
    case Op::Sub: c.vsubps(dst, a, b); return;
    case Op::Mul: c.vmulps(dst, a, b); return;
    case Op::Div: c.vdivps(dst, a, b); return;
    case Op::Max: va.max_ieee(dst, a, b, t0); return;
    case Op::Min: va.max_ieee(dst, a, b, t0, /*is_min=*/true); return;
    case Op::Neg: c.vxorps(dst, a, va.cb(0x8000'0000u)); return;
    case Op::Abs: c.vandps(dst, a, va.cb(0x7FFF'FFFFu)); return;
    case Op::Relu: va.relu(dst, a, t0); return;
    case Op::Sigmoid: va.sigmoid(dst, a, t0, t1, t2); return;
    case Op::Silu: va.sigmoid(dst, a, t0, t1, t2, /*silu=*/true); return;
    case Op::Tanh: va.tanh(dst, a, t0, t1, t2); return;
    case Op::Gelu: va.gelu(dst, a, t0, t1, t2, t3); return;
    case Op::Exp: va.exp(dst, a, t0, t1); return;
    case Op::Log: va.log(dst, a, t0, t1, t2); return;
    case Op::Sqrt: c.vsqrtps(dst, a); return;
    case Op::Rsqrt:
      c.vsqrtps(t0, a);
      c.vmovaps(dst, va.c(1.0f));
      c.vdivps(dst, dst, t0);
      return;
    default: throw std::runtime_error("not an ewise step op");
  }
}

// fn(const void* const* ptrs, void* out, int64 nvec, int64 tail): nvec full vectors,
// then (tail != 0) the baked tail of `tail_lanes` elements.
void emit_ewise(JitCode& c, VecAsm& va, const Spec& s, const Bcast& bc, int tail_lanes) {
  const int n_in = static_cast<int>(s.in_kinds.size());
  const int n_steps = static_cast<int>(s.steps.size());
  const ElemKind out_kind = s.out_kinds[0];
  std::vector<int> last(static_cast<std::size_t>(n_steps), -1);
  for (int j = 0; j < n_steps; ++j)
    for (int sl : {s.steps[static_cast<std::size_t>(j)].a, s.steps[static_cast<std::size_t>(j)].b})
      if (sl >= n_in) last[static_cast<std::size_t>(sl - n_in)] = j;

  auto body = [&](bool tail) {
    std::vector<int> reg(static_cast<std::size_t>(n_steps), -1);
    std::array<bool, kValueRegs> used{};
    auto operand = [&](int slot, int into) -> Xmm {
      if (slot >= n_in) return va.v(reg[static_cast<std::size_t>(slot - n_in)]);
      const auto k = static_cast<std::size_t>(slot);
      c.mov(c.rax, c.ptr[c.rdi + 8 * slot]);
      const ElemKind kind = s.in_kinds[k];
      if (bc.scalar_inner[k]) va.load(va.v(into), kind, c.rax, LoadMode::Broadcast);
      else va.load(va.v(into), kind, c.rax + c.r8 * elem_size(kind), tail ? LoadMode::Tail : LoadMode::Full);
      return va.v(into);
    };
    for (int j = 0; j < n_steps; ++j) {
      const ir::EwiseStep& st = s.steps[static_cast<std::size_t>(j)];
      const Xmm a = operand(st.a, 8);
      const Xmm b = st.b >= 0 ? operand(st.b, 9) : a;
      int r = 0;
      while (used[static_cast<std::size_t>(r)]) ++r;  // max_live() bounds this
      used[static_cast<std::size_t>(r)] = true;
      reg[static_cast<std::size_t>(j)] = r;
      emit_step_op(c, va, st.op, va.v(r), a, b);
      if (s.round_steps && j + 1 < n_steps) va.round_to_kind(va.v(r), out_kind, va.v(10));
      for (int i = 0; i < j; ++i)
        if (last[static_cast<std::size_t>(i)] == j) used[static_cast<std::size_t>(reg[static_cast<std::size_t>(i)])] = false;
    }
    va.store(c.rsi + c.r8 * elem_size(out_kind), out_kind, va.v(reg.back()), tail, va.v(10));
  };

  Xbyak::Label loop, tail_part, done;
  if (tail_lanes) va.set_tail(tail_lanes);
  c.xor_(c.r8, c.r8);
  c.test(c.rdx, c.rdx);
  c.jz(tail_part);
  c.L(loop);
  body(false);
  c.add(c.r8, va.lanes());
  c.dec(c.rdx);
  c.jnz(loop);
  c.L(tail_part);
  if (tail_lanes) {
    c.test(c.rcx, c.rcx);
    c.jz(done);
    body(true);
  }
  c.L(done);
  c.vzeroupper();
  c.ret();
}

// ---------------------------------------------------------------- kernels

using EwiseFn = void (*)(const void* const* ptrs, void* out, std::int64_t nvec, std::int64_t tail);
using RowFn = void (*)(const void* x, void* out, void* aux, std::int64_t rows);
using ColFn = void (*)(const void* x, void* out, std::int64_t outer);

// Splits [0, n) into about `parallel.threads * 4` chunks when there is enough work.
template <class F>
void split(const Parallel& parallel, std::int64_t n, std::int64_t work, F&& f) {
  std::int64_t chunks = 1;
  if (parallel.threads > 1 && work >= kMinParallelElems) chunks = std::min<std::int64_t>(n, parallel.threads * 4);
  parallel.for_each(chunks, [&](std::int64_t c) { f(n * c / chunks, n * (c + 1) / chunks); });
}

class Kernel final : public EltwiseKernel {
 public:
  Kernel(Spec spec, Isa isa) : spec_(std::move(spec)), isa_(isa) {}

  Result<void> generate() {
    const bool wide = is_wide(isa_);
    const int lanes = wide ? 16 : 8;
    const std::string isa_label = wide ? "avx512" : "avx2";
    label_ = std::string(ir::op_name(spec_.op)) + "_" + std::string(elem_name(spec_.out_kinds[0])) + "_" +
             extents_str(spec_.in_shapes.empty() ? Extents{} : spec_.in_shapes[0]) + "__" + isa_label;
    desc_ = std::string(ir::op_name(spec_.op)) + " " + std::string(elem_name(spec_.out_kinds[0]));
    std::size_t bytes = 16 * 1024;
    if (spec_.family == Family::Ewise) {
      bc_ = plan_broadcast(spec_.in_shapes, spec_.out_shapes[0], spec_.keep_rows);
      // The row axis alone would make the inner run (and its baked tail) vary with rows.
      if (spec_.keep_rows && spec_.out_shapes[0][0] != 1 && bc_.dims.size() < 2)
        return unsupported("eltwise: run-time rows of an elementwise loop without a row length");
      bytes += spec_.steps.size() * 4096;
      desc_ += " shape=" + extents_str(spec_.out_shapes[0]) + " run=" + std::to_string(bc_.dims.back()) +
               " steps=" + std::to_string(spec_.steps.size());
    } else {
      rows_kernel_ = spec_.inner == 1;
      desc_ += " outer=" + std::to_string(spec_.outer) + " len=" + std::to_string(spec_.len) +
               " inner=" + std::to_string(spec_.inner);
    }
    desc_ += " vec=" + std::to_string(lanes * 32);
    code_ = std::make_unique<JitCode>(bytes);
    return emit_guarded("eltwise " + label_, [&] {
      code_->setDefaultJmpNEAR(true);
      VecAsm va(*code_, isa_);
      switch (spec_.family) {
        case Family::Ewise:
          emit_ewise(*code_, va, spec_, bc_, static_cast<int>(bc_.dims.back() % lanes));
          break;
        default:
          if (spec_.outer * spec_.len * spec_.inner == 0) break;  // run() handles empty tensors alone
          if (rows_kernel_) emit_rows(*code_, va, spec_);
          else emit_columns(*code_, va, spec_);
          break;
      }
      va.emit_constants();
      code_->ret();  // keeps the buffer non-empty for kernels that emitted nothing
      fn_ = code_->finalize<void*>();
    });
  }

  void run(std::span<const void* const> inputs, std::span<void* const> outputs, const Parallel& parallel,
           std::int64_t rows, std::int64_t rows_max) const override {
    // Run-time rows: axis 0 is the outermost, so fewer rows is a shorter outer loop.
    const bool scaled = rows > 0 && rows != rows_max;
    TERNJIT_CHECK(!scaled || (spec_.keep_rows && rows < rows_max &&
                              spec_.out_shapes[0].size() >= 1 && spec_.out_shapes[0][0] == rows_max),
                  "eltwise: run-time rows on a kernel not generated for them");
    switch (spec_.family) {
      case Family::Ewise: run_ewise(inputs, outputs[0], parallel, scaled ? rows : 0); return;
      default: break;
    }
    const auto* x = static_cast<const std::uint8_t*>(inputs[0]);
    auto* out = static_cast<std::uint8_t*>(outputs[0]);
    const int xs = elem_size(spec_.in_kinds[0]), os = elem_size(spec_.out_kinds[0]);
    const std::int64_t outer = scaled ? spec_.outer / rows_max * rows : spec_.outer, len = spec_.len,
                       inner = spec_.inner;
    if (outer * inner == 0) return;
    if (len == 0) {
      fill_empty(outputs);
      return;
    }
    if (rows_kernel_) {
      const auto fn = reinterpret_cast<RowFn>(fn_);
      split(parallel, outer, outer * len, [&](std::int64_t r0, std::int64_t r1) {
        if (r0 == r1) return;
        void* aux = nullptr;
        if (spec_.family == Family::Quantize && !spec_.fake_quant)
          aux = static_cast<std::uint8_t*>(outputs[1]) + r0 * 4;
        if (spec_.family == Family::RmsNorm) aux = const_cast<void*>(inputs[1]);
        const std::int64_t out_row = spec_.family == Family::Reduce ? 1 : len;
        fn(x + r0 * len * xs, out + r0 * out_row * os, aux, r1 - r0);
      });
      return;
    }
    const auto fn = reinterpret_cast<ColFn>(fn_);
    split(parallel, outer, outer * len * inner, [&](std::int64_t o0, std::int64_t o1) {
      if (o0 == o1) return;
      const std::int64_t out_outer = spec_.family == Family::Reduce ? inner : len * inner;
      fn(x + o0 * len * inner * xs, out + o0 * out_outer * os, o1 - o0);
    });
  }

  [[nodiscard]] std::vector<CodeBlob> code() const override { return {CodeBlob{label_, code_->bytes()}}; }
  [[nodiscard]] std::string describe() const override { return desc_; }

 private:
  // An axis of extent 0: sums are 0, means NaN (0 / 0), quantize scales 0.
  void fill_empty(std::span<void* const> outputs) const {
    const ElemKind k = spec_.out_kinds[0];
    const std::int64_t n = spec_.outer * spec_.inner;
    if (spec_.family == Family::Quantize) {
      if (!spec_.fake_quant) std::memset(outputs[1], 0, static_cast<std::size_t>(spec_.outer) * 4);
      return;
    }
    if (spec_.family != Family::Reduce) return;  // softmax / rmsnorm: the output is empty too
    auto* out = static_cast<std::uint8_t*>(outputs[0]);
    if (spec_.op != Op::ReduceMean) {
      std::memset(out, 0, static_cast<std::size_t>(n * elem_size(k)));
      return;
    }
    for (std::int64_t i = 0; i < n; ++i) {
      if (k == ElemKind::F32) {
        const std::uint32_t nan = 0x7FC0'0000u;
        std::memcpy(out + i * 4, &nan, 4);
      } else {
        const std::uint16_t nan = k == ElemKind::BF16 ? 0x7FC0 : 0x7E00;
        std::memcpy(out + i * 2, &nan, 2);
      }
    }
  }

  // rows > 0: only that many rows of output axis 0 (bc_.dims[0], never merged).
  void run_ewise(std::span<const void* const> inputs, void* output, const Parallel& parallel, std::int64_t rows) const {
    const std::int64_t total = rows > 0 ? numel(spec_.out_shapes[0]) / spec_.out_shapes[0][0] * rows
                                        : numel(spec_.out_shapes[0]);
    if (total == 0) return;
    const auto fn = reinterpret_cast<EwiseFn>(fn_);
    const std::size_t n_in = spec_.in_kinds.size();
    const std::int64_t inner = bc_.dims.back();
    const std::int64_t outer = total / inner;
    const std::int64_t lanes = is_wide(isa_) ? 16 : 8;
    const std::int64_t block = inner <= kEwiseBlock ? inner : kEwiseBlock;  // a multiple of lanes
    const std::int64_t nb = (inner + block - 1) / block;
    const std::size_t outer_rank = bc_.dims.size() - 1;
    const int os = elem_size(spec_.out_kinds[0]);
    split(parallel, outer * nb, total, [&](std::int64_t u0, std::int64_t u1) {
      std::array<const void*, kMaxOperands> ptrs{};
      for (std::int64_t u = u0; u < u1; ++u) {
        const std::int64_t o = u / nb, j0 = (u % nb) * block, n = std::min(inner - j0, block);
        std::array<std::int64_t, kMaxOperands> off{};
        std::int64_t rest = o;
        for (std::size_t d = outer_rank; d-- > 0;) {
          const std::int64_t idx = rest % bc_.dims[d];
          rest /= bc_.dims[d];
          for (std::size_t k = 0; k < n_in; ++k) off[k] += idx * bc_.strides[k][d];
        }
        for (std::size_t k = 0; k < n_in; ++k) {
          const std::int64_t e = off[k] + (bc_.scalar_inner[k] ? 0 : j0);
          ptrs[k] = static_cast<const std::uint8_t*>(inputs[k]) + e * elem_size(spec_.in_kinds[k]);
        }
        fn(ptrs.data(), static_cast<std::uint8_t*>(output) + (o * inner + j0) * os, n / lanes, n % lanes);
      }
    });
  }

  Spec spec_;
  Isa isa_;
  Bcast bc_;
  bool rows_kernel_ = false;
  std::unique_ptr<JitCode> code_;
  void* fn_ = nullptr;
  std::string label_, desc_;
};

Result<void> check_isa(Isa isa, bool allow_foreign_isa) {
  if (!allow_foreign_isa && !host_isas().supports(isa))
    return make_error(ErrorCode::Unavailable, "eltwise: this CPU cannot run " + std::string(isa_name(isa)) + " code");
  return success();
}

}  // namespace

Result<void> eltwise_supported(const ir::Function& f, ir::InstId inst) {
  TERNJIT_TRY(Spec s, analyze(f, inst));
  (void)s;
  return success();
}

Result<std::unique_ptr<EltwiseKernel>> generate_eltwise(const ir::Function& f, ir::InstId inst, Isa isa,
                                                        bool allow_foreign_isa, bool keep_rows) {
  TERNJIT_TRY_VOID(check_isa(isa, allow_foreign_isa));
  TERNJIT_TRY(Spec s, analyze(f, inst));
  if (keep_rows) {
    // Rows are independent only when the op's own axis is not axis 0 and every result
    // keeps axis 0 (checked here too, not only by passes::check_row_batch).
    const Extents& in0 = s.in_shapes[0];
    if (in0.empty() || s.out_shapes[0].empty() || s.out_shapes[0][0] != in0[0])
      return unsupported("eltwise: run-time rows need axis 0 on the operand and the result");
    if (s.family != Family::Ewise && s.outer % std::max<std::int64_t>(in0[0], 1) != 0)
      return unsupported("eltwise: run-time rows of an op over the row axis");
    if (s.family != Family::Ewise && in0.size() < 2)
      return unsupported("eltwise: run-time rows of an op over the row axis");
    s.keep_rows = true;
  }
  auto k = std::make_unique<Kernel>(std::move(s), isa);
  TERNJIT_TRY_VOID(k->generate());
  return std::unique_ptr<EltwiseKernel>(std::move(k));
}

Result<std::unique_ptr<EltwiseKernel>> generate_activation(ir::Op act, ElemKind kind, std::int64_t n, Isa isa,
                                                           bool allow_foreign_isa, std::int64_t rows) {
  TERNJIT_TRY_VOID(check_isa(isa, allow_foreign_isa));
  if (!ir::is_ewise_step_op(act) || ir::is_ewise_binary(act))
    return unsupported("eltwise: '" + std::string(ir::op_name(act)) + "' is not a unary elementwise op");
  if (!is_float(kind)) return unsupported("eltwise: activations on " + std::string(elem_name(kind)) + " values");
  if (n < 0) return make_error(ErrorCode::InvalidArgument, "eltwise: negative activation length");
  Spec s;
  s.family = Family::Ewise;
  s.op = act;
  s.in_kinds = {kind};
  s.in_shapes = {{n}};
  s.out_kinds = {kind};
  s.out_shapes = {{n}};
  if (rows > 1) {
    if (n % rows != 0) return make_error(ErrorCode::InvalidArgument, "eltwise: activation rows do not divide n");
    s.in_shapes = {{rows, n / rows}};
    s.out_shapes = s.in_shapes;
    s.keep_rows = true;
  }
  s.steps = {ir::EwiseStep{act, 0, -1}};
  auto k = std::make_unique<Kernel>(std::move(s), isa);
  TERNJIT_TRY_VOID(k->generate());
  return std::unique_ptr<EltwiseKernel>(std::move(k));
}

}  // namespace ternjit::targets::x86
