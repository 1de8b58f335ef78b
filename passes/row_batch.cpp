// SPDX-License-Identifier: Apache-2.0
// row_batch.cpp - is the row count (M) an independent batch axis of a function? (row_batch.h)
//
// The engine compiles one kernel per M bucket only for functions this analysis accepts;
// the kernel then runs on the first `rows` rows of every buffer. The rules are per op
// and conservative: an op not listed, or a listed op used in a way not listed, refuses.
//
//   func @f<M>(%x: f32[M, 64]) -> f32[M, 32] {          accepted: every value keeps M
//     %q, %s = quantize %x : i8[M, 64], f32[M, 1]        leading, every op is per row
//     %y = tmatmul %q, %w, %s : f32[M, 32] ...
//   func @g<M>(%x: f32[M, 64]) -> f32[M, 64] {          refused: the scale mixes rows
//     %y = ternarize_absmean %x : f32[M, 64]
#include "passes/row_batch.h"

#include <string>

namespace ternjit::passes {

namespace {

using ir::Op;

Error refuse(const std::string& why) { return make_error(ErrorCode::Unsupported, "rows: " + why); }

// Does `t` mention symbol `s` at any axis?
bool mentions(const ir::Type& t, ir::SymbolId s) {
  for (const ir::Dim& d : t.shape)
    if (!d.is_static() && d.sym == s) return true;
  return false;
}

// Does `t` have `s` at axis 0?
bool row_leading(const ir::Type& t, ir::SymbolId s) {
  return t.rank() >= 1 && !t.shape[0].is_static() && t.shape[0].sym == s;
}

// The static product of dims [1, rank) of `t` (nullopt when one is symbolic).
std::optional<std::int64_t> row_length(const ir::Type& t) {
  std::int64_t n = 1;
  for (std::size_t d = 1; d < t.rank(); ++d) {
    if (!t.shape[d].is_static()) return std::nullopt;
    n *= t.shape[d].extent;
  }
  return n;
}

class Checker {
 public:
  Checker(const ir::Function& f, ir::SymbolId rows) : f_(f), s_(rows) {}

  Result<void> run() {
    if (f_.blocks().size() != 1) return refuse("'" + f_.name() + "' has several blocks");
    for (ir::ValueId a : f_.args())
      if (!row(a)) return refuse("argument " + name(a) + " has no leading '" + sym() + "' axis");
    for (const ir::Type& t : f_.result_types())
      if (!row_leading(t, s_)) return refuse("a result of '" + f_.name() + "' has no leading '" + sym() + "' axis");
    for (ir::InstId i : f_.insts(f_.entry())) {
      const ir::InstData& inst = f_.inst(i);
      // Values may carry the symbol only as their leading axis.
      for (ir::ValueId r : inst.results) {
        const ir::Type& t = f_.type_of(r);
        for (std::size_t d = 1; d < t.rank(); ++d)
          if (!t.shape[d].is_static() && t.shape[d].sym == s_)
            return refuse(std::string(ir::op_name(inst.op)) + " result has '" + sym() + "' at axis " +
                          std::to_string(d));
      }
      TERNJIT_TRY_VOID(check(inst));
    }
    return success();
  }

 private:
  [[nodiscard]] bool row(ir::ValueId v) const { return row_leading(f_.type_of(v), s_); }
  [[nodiscard]] bool touches(ir::ValueId v) const { return mentions(f_.type_of(v), s_); }
  [[nodiscard]] std::string sym() const { return f_.symbol_name(s_); }
  [[nodiscard]] std::string name(ir::ValueId v) const {
    const std::string& n = f_.value(v).name;
    return n.empty() ? "%" + std::to_string(v.index) : "%" + n;
  }
  static Error bad(const ir::InstData& inst, const std::string& why) {
    return refuse(std::string(ir::op_name(inst.op)) + ": " + why);
  }

  // An elementwise operand of a per-row result: per-row with the result's rank, or
  // without the axis and broadcast along it (lower rank, or extent 1 at axis 0).
  [[nodiscard]] bool ewise_operand_ok(ir::ValueId v, std::size_t result_rank) const {
    const ir::Type& t = f_.type_of(v);
    if (row_leading(t, s_)) return t.rank() == result_rank;
    if (mentions(t, s_)) return false;
    return t.rank() < result_rank || (t.shape[0].is_static() && t.shape[0].extent == 1);
  }

  // Every result per-row exactly when the first operand is; the first operand's per-row
  // axis is not the op's own axis (rank >= 2 when the op works along the last axis).
  Result<void> same_rows(const ir::InstData& inst, std::size_t min_rank) const {
    const bool in_row = row(inst.operands[0]);
    for (ir::ValueId r : inst.results)
      if (row(r) != in_row || (!in_row && touches(r))) return bad(inst, "changes which values are per-row");
    if (in_row && f_.type_of(inst.operands[0]).rank() < min_rank)
      return bad(inst, "works along the '" + sym() + "' axis itself");
    return success();
  }

  Result<void> all_free(const ir::InstData& inst) const {
    for (ir::ValueId v : inst.operands)
      if (touches(v)) return bad(inst, "reads a per-row value " + name(v));
    for (ir::ValueId r : inst.results)
      if (touches(r)) return bad(inst, "has a per-row result");
    return success();
  }

  Result<void> check(const ir::InstData& inst) const {
    switch (inst.op) {
      case Op::Const:
      case Op::Param:
        if (touches(inst.results[0])) return bad(inst, "a per-row load-time value");
        return success();
      case Op::Call: return bad(inst, "calls are not analysed (inline them first)");
      case Op::Br:
      case Op::CondBr: return bad(inst, "control flow");
      case Op::Ret:
        for (ir::ValueId v : inst.operands)
          if (!row(v)) return bad(inst, "returns " + name(v) + " without the row axis");
        return success();

      case Op::Add: case Op::Sub: case Op::Mul: case Op::Div: case Op::Max: case Op::Min:
      case Op::Ewise: case Op::Dequantize: {
        const ir::ValueId r = inst.results[0];
        if (!row(r)) return all_free(inst);
        const std::size_t rank = f_.type_of(r).rank();
        for (ir::ValueId v : inst.operands)
          if (!ewise_operand_ok(v, rank)) return bad(inst, "operand " + name(v) + " is not row-aligned");
        return success();
      }
      case Op::Neg: case Op::Abs: case Op::Relu: case Op::Sigmoid: case Op::Tanh: case Op::Gelu:
      case Op::Silu: case Op::Exp: case Op::Log: case Op::Sqrt: case Op::Rsqrt: case Op::Cast:
      case Op::Ternarize:
        return same_rows(inst, 1);
      case Op::QuantizeInt8:
      case Op::Quantize:
        return same_rows(inst, 2);  // per row of the last axis
      case Op::RmsNorm:
        if (touches(inst.operands[1])) return bad(inst, "a per-row gamma");
        return same_rows(inst, 2);
      case Op::TernarizeAbsmean:
      case Op::TQuantize:
        // One scale over the whole tensor: rows are not independent.
        return all_free(inst);
      case Op::Softmax:
      case Op::ReduceSum:
      case Op::ReduceMean:
      case Op::ReduceMax: {
        if (!row(inst.operands[0])) return all_free(inst);
        if (std::get<ir::AxisAttrs>(inst.attrs).axis == 0) return bad(inst, "reduces over the row axis");
        if (!row(inst.results[0])) return bad(inst, "drops the row axis");
        return success();
      }
      case Op::Transpose: {
        if (!row(inst.operands[0])) return all_free(inst);
        const auto& perm = std::get<ir::PermAttrs>(inst.attrs).perm;
        if (perm.empty() || perm[0] != 0) return bad(inst, "moves the row axis");
        return success();
      }
      case Op::Reshape: {
        if (!row(inst.operands[0])) return all_free(inst);
        const ir::Type& in = f_.type_of(inst.operands[0]);
        const ir::Type& out = f_.type_of(inst.results[0]);
        if (!row_leading(out, s_)) return bad(inst, "moves the row axis");
        const auto a = row_length(in), b = row_length(out);
        if (!a || !b || *a != *b) return bad(inst, "changes the row length");
        return success();
      }
      case Op::Broadcast: {
        const ir::ValueId r = inst.results[0];
        if (!row(r)) return all_free(inst);
        if (!ewise_operand_ok(inst.operands[0], f_.type_of(r).rank()))
          return bad(inst, "operand is not row-aligned");
        return success();
      }
      case Op::MatMul: {
        const ir::ValueId a = inst.operands[0], b = inst.operands[1], r = inst.results[0];
        if (!row(a) && !touches(b)) return all_free(inst);
        const std::size_t ra = f_.type_of(a).rank(), rb = f_.type_of(b).rank();
        if (!row(a) || !row(r)) return bad(inst, "the row axis is not A's leading axis");
        if (!touches(b) && rb == 2 && (ra == 2 || ra == 3)) return success();
        if (row(b) && ra == 3 && rb == 3) return success();  // the axis is the common batch
        return bad(inst, "operand ranks " + std::to_string(ra) + " x " + std::to_string(rb) + " not handled");
      }
      case Op::TMatMul: {
        const auto& at = std::get<ir::TMatMulAttrs>(inst.attrs);
        const ir::ValueId x = inst.operands[0], r = inst.results[0];
        if (!row(x)) return all_free(inst);
        if (!row(r) || f_.type_of(x).rank() != f_.type_of(r).rank()) return bad(inst, "result is not per-row");
        if (touches(inst.operands[1])) return bad(inst, "a per-row weight");
        std::size_t k = 2;
        if (at.x_scale && !row(inst.operands[k++])) return bad(inst, "x_scale is not per-row");
        if (at.w_scale && touches(inst.operands[k++])) return bad(inst, "a per-row w_scale");
        if (at.bias && touches(inst.operands[k++])) return bad(inst, "a per-row bias");
        if (at.residual && !row(inst.operands[k++])) return bad(inst, "residual is not per-row");
        return success();
      }
      case Op::Gather: {
        // Rows of the table by per-row ids: per-row exactly when the ids are.
        if (touches(inst.operands[0])) return bad(inst, "a per-row table");
        if (!row(inst.operands[1])) return all_free(inst);
        if (!row(inst.results[0])) return bad(inst, "result is not per-row");
        return success();
      }
      case Op::Slice: {
        if (!row(inst.operands[0])) return all_free(inst);
        if (std::get<ir::SliceAttrs>(inst.attrs).axis == 0) return bad(inst, "slices the row axis");
        return success();
      }
      case Op::Concat: {
        const ir::ValueId r = inst.results[0];
        if (!row(r)) return all_free(inst);
        if (std::get<ir::AxisAttrs>(inst.attrs).axis == 0) return bad(inst, "concatenates along the row axis");
        for (ir::ValueId v : inst.operands)
          if (!row(v)) return bad(inst, "operand " + name(v) + " is not per-row");
        return success();
      }
      case Op::LayerNorm:
        if (touches(inst.operands[1]) || touches(inst.operands[2])) return bad(inst, "a per-row gamma or beta");
        return same_rows(inst, 2);
      case Op::Rope: {
        // Row m is rotated by position pos + m: the first `rows` rows are the same rows of
        // the whole batch.
        if (!row(inst.operands[0])) return all_free(inst);
        if (!row(inst.results[0])) return bad(inst, "result is not per-row");
        return success();
      }
      case Op::CausalSoftmax: {
        // Rank 2 [M, T] only: row m keeps t <= pos + m, whichever rows run.
        if (!row(inst.operands[0])) return all_free(inst);
        if (f_.type_of(inst.operands[0]).rank() != 2 || touches(inst.operands[1]))
          return bad(inst, "the row axis is not the mask's M axis");
        return success();
      }
      case Op::Attention:
        // Its run-time check pos + M <= C needs the call's M, not a bucket's.
        if (row(inst.operands[0])) return bad(inst, "checks pos + M against the cache capacity");
        return all_free(inst);
      case Op::KvWrite:
        // Writes rows into a cache that has no row axis: the cache depends on every row.
        if (row(inst.operands[1]) || touches(inst.operands[0])) return bad(inst, "writes per-row values into a cache");
        return all_free(inst);
    }
    return bad(inst, "unknown op");
  }

  const ir::Function& f_;
  ir::SymbolId s_;
};

}  // namespace

std::optional<ir::SymbolId> row_symbol_candidate(const ir::Function& f) {
  if (f.args().empty()) return std::nullopt;
  std::optional<ir::SymbolId> cand;
  auto lead = [&](const ir::Type& t) -> bool {
    if (t.rank() == 0 || t.shape[0].is_static()) return false;
    if (!cand) cand = t.shape[0].sym;
    return t.shape[0].sym == *cand;
  };
  for (ir::ValueId a : f.args())
    if (!lead(f.type_of(a))) return std::nullopt;
  for (const ir::Type& t : f.result_types())
    if (!lead(t)) return std::nullopt;
  auto elsewhere = [&](const ir::Type& t) {
    for (std::size_t d = 1; d < t.rank(); ++d)
      if (!t.shape[d].is_static() && t.shape[d].sym == *cand) return true;
    return false;
  };
  for (ir::ValueId a : f.args())
    if (elsewhere(f.type_of(a))) return std::nullopt;
  for (const ir::Type& t : f.result_types())
    if (elsewhere(t)) return std::nullopt;
  return cand;
}

Result<void> check_row_batch(const ir::Function& f, ir::SymbolId rows) { return Checker(f, rows).run(); }

}  // namespace ternjit::passes
