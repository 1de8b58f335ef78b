// SPDX-License-Identifier: Apache-2.0
// data_ops.cpp - the x86 steps of data movement and conversion: cast, broadcast, transpose of any
// rank and permutation, gather, slice, concat and kv_write (plan_internal.h, lower_data_op).
//
// These ops compute no arithmetic (cast rounds once), so every step is exact with the
// interpreter: bit for bit, NaN payloads included where the conversion keeps them.
//   - cast: f32 <-> f16 with F16C (vcvtps2ph round to nearest even, vcvtph2ps exact), f32 <->
//     bf16 with the IR's conversion (ir/numeric.h: round to nearest even, NaN kept quiet),
//     every other pair through ir::round_to_kind on the exact value (float -> int rounds
//     half to even and saturates, NaN -> 0; int -> float rounds to nearest even);
//   - broadcast and transpose: one strided copy of the result (input stride 0 along a
//     broadcast axis), the innermost axis a memcpy, a fill or a strided loop.
//   - gather checks every id before copying rows (an id outside [0, V) is an InvalidInput
//     error naming it); slice and concat copy blocks of lines;
//   - kv_write copies the whole cache only when its result buffer is not its operand's
//     (the planner's in-place chain makes them one), then writes rows [pos, pos + M) of its
//     layer converted to the cache's kind; pos < 0 or pos + M > C is an InvalidInput error.
// Threads split the result in contiguous chunks. Run-time rows: cast, broadcast, gather, and
// slice/concat off axis 0 honour them (their result's axis 0 is the rows axis, the
// operand's axis 0 too or broadcast); a transpose does when it keeps axis 0 first; else
// (and kv_write always: row analysis refuses it) the plan is Unsupported.
#include "targets/x86/intrinsics.h"

#include <algorithm>
#include <cstring>

#include "ir/builder.h"
#include "ir/numeric.h"
#include "targets/x86/elem_io.h"
#include "targets/x86/plan_internal.h"

namespace ternjit::targets::x86 {
namespace {

using ir::Op;
using ir::bf16_bits_to_f32;
using ir::f16_bits_to_f32;
using ir::f32_to_bf16_bits;
using ir::f32_to_f16_bits;

std::vector<std::int64_t> dims_of(const ir::Type& t) {
  std::vector<std::int64_t> s;
  for (const ir::Dim& d : t.shape) s.push_back(d.extent);
  return s;
}

// ---------------------------------------------------------------- cast

__attribute__((target("avx2,f16c,fma"))) void f32_to_f16(const float* s, std::uint16_t* d, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  for (; i < n; ++i) d[i] = f32_to_f16_bits(s[i]);
}

__attribute__((target("avx2,f16c,fma"))) void f16_to_f32(const std::uint16_t* s, float* d, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i))));
  for (; i < n; ++i) d[i] = f16_bits_to_f32(s[i]);
}

void cast_run(ElemKind from, ElemKind to, const std::uint8_t* s, std::uint8_t* d, std::int64_t n) {
  if (from == ElemKind::F32 && to == ElemKind::F16)
    return f32_to_f16(reinterpret_cast<const float*>(s), reinterpret_cast<std::uint16_t*>(d), n);
  if (from == ElemKind::F16 && to == ElemKind::F32)
    return f16_to_f32(reinterpret_cast<const std::uint16_t*>(s), reinterpret_cast<float*>(d), n);
  if (from == ElemKind::F32 && to == ElemKind::BF16) {
    for (std::int64_t i = 0; i < n; ++i) {
      float v;
      std::memcpy(&v, s + 4 * i, 4);
      const std::uint16_t h = f32_to_bf16_bits(v);
      std::memcpy(d + 2 * i, &h, 2);
    }
    return;
  }
  if (from == ElemKind::BF16 && to == ElemKind::F32) {
    for (std::int64_t i = 0; i < n; ++i) {
      std::uint16_t h;
      std::memcpy(&h, s + 2 * i, 2);
      const float v = bf16_bits_to_f32(h);
      std::memcpy(d + 4 * i, &v, 4);
    }
    return;
  }
  if (from == to) {
    std::memcpy(d, s, static_cast<std::size_t>(n * elem_bits(from) / 8));
    return;
  }
  for (std::int64_t i = 0; i < n; ++i) store_elem(to, d, i, load_elem(from, s, i));
}

class CastStep final : public Step {
 public:
  CastStep(ElemKind from, ElemKind to, std::int64_t n, std::int64_t rows_max, Loc in, Loc out, std::string summary)
      : from_(from), to_(to), n_(n), rows_max_(rows_max), in_(in), out_(out), summary_(std::move(summary)) {}
  Result<void> run(const Frame& fr) const override {
    const std::int64_t n = fr.rows > 0 ? n_ / rows_max_ * fr.rows : n_;
    const auto* s = static_cast<const std::uint8_t*>(fr.ptr(in_));
    auto* d = static_cast<std::uint8_t*>(fr.ptr(out_));
    constexpr std::int64_t kChunk = 1 << 16;
    const std::int64_t sb = elem_bits(from_) / 8, db = elem_bits(to_) / 8;
    fr.parallel->for_each((n + kChunk - 1) / kChunk, [&](std::int64_t t) {
      const std::int64_t i0 = t * kChunk, len = std::min(kChunk, n - i0);
      cast_run(from_, to_, s + i0 * sb, d + i0 * db, len);
    });
    return success();
  }
  [[nodiscard]] StepCode describe() const override {
    return StepCode{"cast", summary_,
                    "cast " + std::string(elem_name(from_)) + " -> " + std::string(elem_name(to_)) +
                        " n=" + std::to_string(n_) + (from_ == ElemKind::F16 || to_ == ElemKind::F16 ? " f16c" : ""),
                    {}};
  }

 private:
  ElemKind from_, to_;
  std::int64_t n_, rows_max_;
  Loc in_, out_;
  std::string summary_;
};

// ---------------------------------------------------------------- strided copies

// The result (shape `out`) of reading the operand at element offset sum_d idx[d] * in_st[d].
class StridedCopyStep final : public Step {
 public:
  StridedCopyStep(std::string op, std::vector<std::int64_t> out, std::vector<std::int64_t> in_st, std::size_t eb,
                  Loc in, Loc o, std::string summary)
      : op_(std::move(op)), out_(std::move(out)), st_(std::move(in_st)), eb_(eb), in_(in), o_(o),
        summary_(std::move(summary)) {}
  Result<void> run(const Frame& fr) const override {
    std::vector<std::int64_t> shape = out_;
    if (fr.rows > 0) shape[0] = shape[0] / fr.rows_max * fr.rows;
    const auto* s = static_cast<const std::uint8_t*>(fr.ptr(in_));
    auto* d = static_cast<std::uint8_t*>(fr.ptr(o_));
    const std::size_t r = shape.size();
    const std::int64_t inner = r == 0 ? 1 : shape[r - 1];
    const std::int64_t inner_st = r == 0 ? 0 : st_[r - 1];
    std::int64_t lines = 1;
    for (std::size_t k = 0; k + 1 < r; ++k) lines *= shape[k];
    const std::int64_t per_task = std::max<std::int64_t>(1, (1 << 16) / std::max<std::int64_t>(inner, 1));
    fr.parallel->for_each((lines + per_task - 1) / per_task, [&](std::int64_t t) {
      const std::int64_t l0 = t * per_task, l1 = std::min(lines, l0 + per_task);
      for (std::int64_t l = l0; l < l1; ++l) {
        // The source offset of line l (its index over the outer axes).
        std::int64_t rem = l, off = 0;
        for (std::size_t k = r - 1; k-- > 0;) {
          off += rem % shape[k] * st_[k];
          rem /= shape[k];
        }
        copy_line(s + static_cast<std::size_t>(off) * eb_, d + static_cast<std::size_t>(l * inner) * eb_, inner,
                  inner_st);
      }
    });
    return success();
  }
  [[nodiscard]] StepCode describe() const override {
    std::string dims;
    for (std::int64_t e : out_) dims += (dims.empty() ? "" : "x") + std::to_string(e);
    return StepCode{op_, summary_, op_ + " strided copy " + dims + " bytes=" + std::to_string(eb_), {}};
  }

 private:
  void copy_line(const std::uint8_t* s, std::uint8_t* d, std::int64_t n, std::int64_t st) const {
    if (st == 1) {
      std::memcpy(d, s, static_cast<std::size_t>(n) * eb_);
      return;
    }
    switch (eb_) {
      case 1: line<std::uint8_t>(s, d, n, st); break;
      case 2: line<std::uint16_t>(s, d, n, st); break;
      default: line<std::uint32_t>(s, d, n, st); break;
    }
  }
  template <class T>
  static void line(const std::uint8_t* s, std::uint8_t* d, std::int64_t n, std::int64_t st) {
    const T* src = reinterpret_cast<const T*>(s);
    T* dst = reinterpret_cast<T*>(d);
    for (std::int64_t i = 0; i < n; ++i) dst[i] = src[i * st];
  }
  std::string op_;
  std::vector<std::int64_t> out_, st_;
  std::size_t eb_;
  Loc in_, o_;
  std::string summary_;
};

// ---------------------------------------------------------------- decoder data ops

// An i32 scalar operand (`pos`) read when the step runs.
std::int64_t read_pos(const Frame& fr, const Loc& l) {
  std::int32_t v;
  std::memcpy(&v, fr.ptr(l), 4);
  return v;
}

// `gather %table, %ids {axis = 0}`: rows of a [V, D] table by i32 ids; every id is checked
// before any row is copied (an id outside [0, V) is an InvalidInput error naming it).
class GatherStep final : public Step {
 public:
  GatherStep(std::int64_t n_ids, std::int64_t V, std::size_t row_bytes, std::int64_t rows_max, Loc table, Loc ids,
             Loc out, std::string summary)
      : n_(n_ids), v_(V), row_bytes_(row_bytes), rows_max_(rows_max), table_(table), ids_(ids), out_(out),
        summary_(std::move(summary)) {}
  Result<void> run(const Frame& fr) const override {
    const std::int64_t n = fr.rows > 0 ? n_ / rows_max_ * fr.rows : n_;
    const auto* ids = static_cast<const std::int32_t*>(fr.ptr(ids_));
    for (std::int64_t i = 0; i < n; ++i)
      if (ids[i] < 0 || ids[i] >= v_)
        return make_error(ErrorCode::InvalidInput, "gather: id " + std::to_string(ids[i]) + " at index " +
                                                       std::to_string(i) + " is out of range [0, " +
                                                       std::to_string(v_) + ")");
    const auto* t = static_cast<const std::uint8_t*>(fr.ptr(table_));
    auto* o = static_cast<std::uint8_t*>(fr.ptr(out_));
    const std::int64_t per_task = std::max<std::int64_t>(1, (1 << 16) / static_cast<std::int64_t>(row_bytes_ + 1));
    fr.parallel->for_each((n + per_task - 1) / per_task, [&](std::int64_t k) {
      for (std::int64_t i = k * per_task; i < std::min(n, (k + 1) * per_task); ++i)
        std::memcpy(o + static_cast<std::size_t>(i) * row_bytes_, t + static_cast<std::size_t>(ids[i]) * row_bytes_,
                    row_bytes_);
    });
    return success();
  }
  [[nodiscard]] StepCode describe() const override {
    return StepCode{"gather", summary_,
                    "gather rows of " + std::to_string(row_bytes_) + " bytes, ids=" + std::to_string(n_) +
                        " V=" + std::to_string(v_) + " (ids checked first)",
                    {}};
  }

 private:
  std::int64_t n_, v_;
  std::size_t row_bytes_;
  std::int64_t rows_max_;
  Loc table_, ids_, out_;
  std::string summary_;
};

// `slice` and `concat` along an axis: each of `outer` lines of the result is the operands'
// blocks of `block[j]` bytes (at `offset[j]` bytes within their own lines of `line[j]`).
class BlockCopyStep final : public Step {
 public:
  struct Part {
    Loc loc;
    std::size_t offset, block, line;
  };
  BlockCopyStep(std::string op, std::vector<Part> parts, std::int64_t outer, std::int64_t rows_max, Loc out,
                std::string summary)
      : op_(std::move(op)), parts_(std::move(parts)), outer_(outer), rows_max_(rows_max), out_(out),
        summary_(std::move(summary)) {
    for (const Part& p : parts_) out_line_ += p.block;
  }
  Result<void> run(const Frame& fr) const override {
    const std::int64_t outer = fr.rows > 0 ? outer_ / rows_max_ * fr.rows : outer_;
    auto* o = static_cast<std::uint8_t*>(fr.ptr(out_));
    std::vector<const std::uint8_t*> src;
    for (const Part& p : parts_) src.push_back(static_cast<const std::uint8_t*>(fr.ptr(p.loc)));
    const std::int64_t per_task = std::max<std::int64_t>(1, (1 << 16) / static_cast<std::int64_t>(out_line_ + 1));
    fr.parallel->for_each((outer + per_task - 1) / per_task, [&](std::int64_t k) {
      for (std::int64_t l = k * per_task; l < std::min(outer, (k + 1) * per_task); ++l) {
        std::uint8_t* d = o + static_cast<std::size_t>(l) * out_line_;
        for (std::size_t j = 0; j < parts_.size(); ++j) {
          const Part& p = parts_[j];
          if (p.block) std::memcpy(d, src[j] + static_cast<std::size_t>(l) * p.line + p.offset, p.block);
          d += p.block;
        }
      }
    });
    return success();
  }
  [[nodiscard]] StepCode describe() const override {
    return StepCode{op_, summary_,
                    op_ + " block copy lines=" + std::to_string(outer_) + " line=" + std::to_string(out_line_) +
                        " bytes parts=" + std::to_string(parts_.size()),
                    {}};
  }

 private:
  std::string op_;
  std::vector<Part> parts_;
  std::int64_t outer_, rows_max_;
  Loc out_;
  std::size_t out_line_ = 0;
  std::string summary_;
};

// `kv_write %cache, %rows, %pos {layer = i}`: the result is the cache with rows [pos, pos + M)
// of layer i replaced by `rows` converted to the cache's kind (round to nearest even; f16
// overflow gives Inf). When the result's buffer is not the operand's (the planner's in-place
// chain makes them equal), the whole cache is copied first. pos < 0 or pos + M > C is an
// InvalidInput error (nothing is written).
class KvWriteStep final : public Step {
 public:
  KvWriteStep(ElemKind cache_kind, ElemKind rows_kind, std::int64_t L, std::int64_t C, std::int64_t row_len,
              std::int64_t M, std::int64_t layer, Loc cache, Loc rows, Loc pos, Loc out, std::string summary)
      : ck_(cache_kind), rk_(rows_kind), l_(L), c_(C), row_len_(row_len), m_(M), layer_(layer), cache_(cache),
        rows_(rows), pos_(pos), out_(out), summary_(std::move(summary)) {}
  Result<void> run(const Frame& fr) const override {
    const std::int64_t pos = read_pos(fr, pos_);
    if (pos < 0)
      return make_error(ErrorCode::InvalidInput,
                        "kv_write: pos " + std::to_string(pos) + " is negative (pos must be >= 0)");
    if (m_ > c_ - pos)
      return make_error(ErrorCode::InvalidInput, "kv_write: rows [pos, pos + M) = [" + std::to_string(pos) + ", " +
                                                     std::to_string(pos + m_) + ") do not fit the cache capacity C = " +
                                                     std::to_string(c_) + " (pos " + std::to_string(pos) + ", M " +
                                                     std::to_string(m_) + ")");
    const auto* in = static_cast<const std::uint8_t*>(fr.ptr(cache_));
    auto* out = static_cast<std::uint8_t*>(fr.ptr(out_));
    const std::size_t eb = static_cast<std::size_t>(elem_bits(ck_) / 8);
    if (in != out) {
      const std::size_t total = static_cast<std::size_t>(l_ * c_ * row_len_) * eb;
      constexpr std::size_t kChunk = std::size_t{1} << 20;
      fr.parallel->for_each(static_cast<std::int64_t>((total + kChunk - 1) / kChunk), [&](std::int64_t k) {
        const std::size_t o = static_cast<std::size_t>(k) * kChunk;
        std::memcpy(out + o, in + o, std::min(kChunk, total - o));
      });
    }
    const auto* rows = static_cast<const std::uint8_t*>(fr.ptr(rows_));
    const std::size_t rb = static_cast<std::size_t>(elem_bits(rk_) / 8);
    for (std::int64_t m = 0; m < m_; ++m) {
      std::uint8_t* d = out + static_cast<std::size_t>((layer_ * c_ + pos + m) * row_len_) * eb;
      const std::uint8_t* s = rows + static_cast<std::size_t>(m * row_len_) * rb;
      cast_run(rk_, ck_, s, d, row_len_);
    }
    return success();
  }
  [[nodiscard]] StepCode describe() const override {
    return StepCode{"kv_write", summary_,
                    "kv_write rows=" + std::to_string(m_) + "x" + std::to_string(row_len_) + " " +
                        std::string(elem_name(rk_)) + " -> " + std::string(elem_name(ck_)) + " layer=" +
                        std::to_string(layer_) + " (cache copied only when out != in)",
                    {}};
  }

 private:
  ElemKind ck_, rk_;
  std::int64_t l_, c_, row_len_, m_, layer_;
  Loc cache_, rows_, pos_, out_;
  std::string summary_;
};

std::vector<std::int64_t> row_major_strides(const std::vector<std::int64_t>& s) {
  std::vector<std::int64_t> st(s.size(), 1);
  for (std::size_t d = s.size(); d-- > 1;) st[d - 1] = st[d] * s[d];
  return st;
}

bool byte_kind(ElemKind k) { return k != ElemKind::T2; }

}  // namespace

bool lowered_by_step_files(ir::Op op) {
  switch (op) {
    case Op::Cast:
    case Op::Broadcast:
    case Op::Transpose:
    case Op::Gather:
    case Op::Slice:
    case Op::Concat:
    case Op::KvWrite:
    case Op::LayerNorm:
    case Op::Rope:
    case Op::CausalSoftmax:
    case Op::Attention: return true;
    default: return false;
  }
}

Result<std::unique_ptr<Step>> lower_data_op(const LowerContext& ctx) {
  const ir::InstData& inst = ctx.f.inst(ctx.inst);
  auto unsupported_rows = [&]() -> Result<std::unique_ptr<Step>> {
    return make_error(ErrorCode::Unsupported, "x86 plan: run-time rows through " + ctx.summary);
  };
  switch (inst.op) {
    case Op::Cast: {
      const ir::Type& xt = ctx.f.type_of(inst.operands[0]);
      const ir::Type& rt = ctx.f.type_of(inst.results[0]);
      if (!byte_kind(xt.elem) || !byte_kind(rt.elem)) return std::unique_ptr<Step>();
      const std::int64_t n = rt.static_numel().value_or(0);
      if (n == 0) return std::unique_ptr<Step>();
      if (ctx.rows_max > 0 && (rt.rank() == 0 || rt.shape[0].extent != ctx.rows_max)) return unsupported_rows();
      return std::unique_ptr<Step>(
          std::make_unique<CastStep>(xt.elem, rt.elem, n, ctx.rows_max, ctx.in[0], ctx.out[0], ctx.summary));
    }
    case Op::Broadcast:
    case Op::Transpose: {
      const ir::Type& xt = ctx.f.type_of(inst.operands[0]);
      const ir::Type& rt = ctx.f.type_of(inst.results[0]);
      if (!byte_kind(xt.elem) || rt.static_numel().value_or(0) == 0 || rt.rank() == 0) return std::unique_ptr<Step>();
      const std::vector<std::int64_t> in = dims_of(xt), out = dims_of(rt);
      const std::vector<std::int64_t> ist = row_major_strides(in);
      std::vector<std::int64_t> st(out.size(), 0);
      if (inst.op == Op::Transpose) {
        const auto& perm = std::get<ir::PermAttrs>(inst.attrs).perm;
        for (std::size_t d = 0; d < out.size(); ++d) st[d] = ist[static_cast<std::size_t>(perm[d])];
        if (ctx.rows_max > 0 && (perm[0] != 0 || out[0] != ctx.rows_max)) return unsupported_rows();
      } else {
        // NumPy broadcasting: the operand's axes line up with the result's last ones; an
        // axis of extent 1 (or missing) is read with stride 0.
        const std::size_t lead = out.size() - in.size();
        for (std::size_t d = 0; d < in.size(); ++d) st[lead + d] = in[d] == 1 ? 0 : ist[d];
        if (ctx.rows_max > 0 && out[0] != ctx.rows_max) return unsupported_rows();
      }
      return std::unique_ptr<Step>(std::make_unique<StridedCopyStep>(
          std::string(ir::op_name(inst.op)), out, st, static_cast<std::size_t>(elem_bits(xt.elem) / 8), ctx.in[0],
          ctx.out[0], ctx.summary));
    }
    case Op::Gather: {
      const ir::Type& tt = ctx.f.type_of(inst.operands[0]);
      const ir::Type& it = ctx.f.type_of(inst.operands[1]);
      if (!byte_kind(tt.elem) || tt.rank() != 2 || it.elem != ElemKind::I32 || std::get<ir::AxisAttrs>(inst.attrs).axis != 0)
        return std::unique_ptr<Step>();
      const std::int64_t n = it.static_numel().value_or(0);
      if (ctx.rows_max > 0 && (it.rank() == 0 || it.shape[0].extent != ctx.rows_max)) return unsupported_rows();
      const auto row_bytes = static_cast<std::size_t>(tt.shape[1].extent * elem_bits(tt.elem) / 8);
      return std::unique_ptr<Step>(std::make_unique<GatherStep>(n, tt.shape[0].extent, row_bytes, ctx.rows_max,
                                                                ctx.in[0], ctx.in[1], ctx.out[0], ctx.summary));
    }
    case Op::Slice:
    case Op::Concat: {
      const ir::Type& rt = ctx.f.type_of(inst.results[0]);
      if (!byte_kind(rt.elem) || rt.rank() == 0) return std::unique_ptr<Step>();
      const auto axis = static_cast<std::size_t>(inst.op == Op::Slice ? std::get<ir::SliceAttrs>(inst.attrs).axis
                                                                       : std::get<ir::AxisAttrs>(inst.attrs).axis);
      if (ctx.rows_max > 0 && (axis == 0 || rt.shape[0].extent != ctx.rows_max)) return unsupported_rows();
      std::int64_t outer = 1, inner = 1;
      for (std::size_t k = 0; k < axis; ++k) outer *= rt.shape[k].extent;
      for (std::size_t k = axis + 1; k < rt.rank(); ++k) inner *= rt.shape[k].extent;
      const auto eb = static_cast<std::size_t>(elem_bits(rt.elem) / 8);
      std::vector<BlockCopyStep::Part> parts;
      if (inst.op == Op::Slice) {
        const auto& a = std::get<ir::SliceAttrs>(inst.attrs);
        const std::int64_t len = ctx.f.type_of(inst.operands[0]).shape[axis].extent;
        parts.push_back({ctx.in[0], static_cast<std::size_t>(a.start * inner) * eb,
                         static_cast<std::size_t>(a.size * inner) * eb, static_cast<std::size_t>(len * inner) * eb});
      } else {
        for (std::size_t j = 0; j < inst.operands.size(); ++j) {
          const std::int64_t len = ctx.f.type_of(inst.operands[j]).shape[axis].extent;
          const auto line = static_cast<std::size_t>(len * inner) * eb;
          parts.push_back({ctx.in[j], 0, line, line});
        }
      }
      return std::unique_ptr<Step>(std::make_unique<BlockCopyStep>(std::string(ir::op_name(inst.op)), std::move(parts),
                                                                   outer, ctx.rows_max, ctx.out[0], ctx.summary));
    }
    case Op::KvWrite: {
      const ir::Type& ct = ctx.f.type_of(inst.operands[0]);
      const ir::Type& rt = ctx.f.type_of(inst.operands[1]);
      if (ctx.rows_max > 0) return unsupported_rows();
      return std::unique_ptr<Step>(std::make_unique<KvWriteStep>(
          ct.elem, rt.elem, ct.shape[0].extent, ct.shape[1].extent, ct.shape[2].extent * ct.shape[3].extent,
          rt.shape[0].extent, std::get<ir::LayerAttrs>(inst.attrs).layer, ctx.in[0], ctx.in[1], ctx.in[2], ctx.out[0],
          ctx.summary));
    }
    default: break;
  }
  return std::unique_ptr<Step>();
}

}  // namespace ternjit::targets::x86
