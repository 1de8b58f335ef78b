// SPDX-License-Identifier: Apache-2.0
// lower_ops.cpp - .tri indexing `x[i]` and the transformer built-ins (slice, split, concat,
// gather, rope, layernorm, causal_softmax, kv_write, attention).
#include <string>
#include <utility>

#include "ir/dsl/lower_internal.h"
#include "ir/print.h"

namespace ternjit::dsl::lower_detail {

std::optional<Val> Lowerer::lower_index(const Expr& e) {
  const Expr& base = e.args[0];
  if (base.kind == ExprKind::Name) {
    auto it = scope_.find(base.name);
    if (it != scope_.end() && it->second.kind == Binding::Kind::Instances) {
      error(e.pos, "an instance of '" + base.name + "' is not a value: use '" + base.name + "[i].p' for a parameter or '" +
                       base.name + "[i](x)' to call it");
      return std::nullopt;
    }
  }
  auto v = lower_any(base);
  if (!v) return std::nullopt;
  auto idx = const_int(e.args[1], "an index");
  if (!idx) return std::nullopt;
  if (v->tuple) {
    const auto n = static_cast<std::int64_t>(v->elems.size());
    const std::int64_t k = *idx < 0 ? *idx + n : *idx;
    if (k < 0 || k >= n) {
      error(e.args[1].pos, "index " + std::to_string(*idx) + " is out of range for a tuple of " + std::to_string(n) +
                               " values");
      return std::nullopt;
    }
    return v->elems[static_cast<std::size_t>(k)];
  }
  if (v->literal) {
    error(e.pos, "cannot index the number " + v->text);
    return std::nullopt;
  }
  const ir::Type t = f_->type_of(v->id);
  if (t.rank() == 0) {
    error(e.pos, "cannot index the scalar " + ir::type_str(t, f_->symbols()));
    return std::nullopt;
  }
  return index_tensor(v->id, *idx, e);
}

std::optional<Val> Lowerer::index_tensor(ValueId x, std::int64_t k, const Expr& e) {
  // x[k]: a slice of one element along the leading axis, then a reshape that drops it.
  // A negative k counts from the end of a static extent.
  const ir::Type t = f_->type_of(x);
  const ir::Dim d0 = t.shape[0];
  if (k < 0 && d0.is_static()) k += d0.extent;
  if (k < 0 || (d0.is_static() && k >= d0.extent)) {
    const std::string written = e.args[1].kind == ExprKind::Number ? e.args[1].text : std::to_string(k);
    error(e.args[1].pos, "index " + written + " is out of range for axis 0 of " + ir::type_str(t, f_->symbols()) +
                             (d0.is_static() ? "" : " (a negative index needs a static extent)"));
    return std::nullopt;
  }
  const SourceLoc at = loc(e.pos);
  auto s = b_->create1(Op::Slice, {x}, ir::SliceAttrs{0, k, 1}, {}, at);
  if (!s.ok()) return value_or_error(s, e.pos, "[]");
  ir::Type out = t;
  out.shape.erase(out.shape.begin());
  return value_or_error(b_->create1(Op::Reshape, {s.value()}, ir::NoAttrs{}, {out}, at), e.pos, "[]");
}

std::optional<ValueId> Lowerer::pos_arg(const Expr& e) {
  auto v = lower_expr(e);
  if (!v) return std::nullopt;
  if (!v->literal) return v->id;
  if (!v->is_int) {
    error(e.pos, "a position must be an i32 scalar or an integer literal, got " + v->text);
    return std::nullopt;
  }
  return materialize(*v, ElemKind::I32);
}

std::optional<std::int64_t> Lowerer::axis_arg(const Builtin& bi, const Expr& e, const ir::Type& t) {
  auto axis = number_arg(bi, e, "axis", true);
  if (!axis) return std::nullopt;
  // Checked on the literal's double value: converting one outside int64 is UB.
  const auto rank = static_cast<std::int64_t>(t.rank());
  if (!(axis->value >= static_cast<double>(-rank) && axis->value < static_cast<double>(rank))) {
    error(e.pos, "'" + std::string(bi.name) + "' axis " + axis->text + " is out of range for " +
                     ir::type_str(t, f_->symbols()) + " (rank " + std::to_string(rank) + ")");
    return std::nullopt;
  }
  const auto written = static_cast<std::int64_t>(axis->value);
  return written < 0 ? written + rank : written;
}

std::optional<Val> Lowerer::lower_slicing(const Builtin& bi, const Expr& e) {
  const std::string name(bi.name);
  const SourceLoc at = loc(e.pos);
  if (bi.kind == BuiltinKind::Concat) {
    // concat(a, b, ..., axis): the axis is the last argument.
    std::vector<ValueId> xs;
    for (std::size_t i = 0; i + 1 < e.args.size(); ++i) {
      auto x = tensor_arg(e.args[i]);
      if (!x) return std::nullopt;
      xs.push_back(*x);
    }
    auto axis = axis_arg(bi, e.args.back(), f_->type_of(xs.front()));
    if (!axis) return std::nullopt;
    return value_or_error(b_->create1(Op::Concat, std::move(xs), ir::AxisAttrs{*axis, false}, {}, at), e.pos, name);
  }
  auto x = tensor_arg(e.args[0]);
  if (!x) return std::nullopt;
  const ir::Type t = f_->type_of(*x);
  auto axis = axis_arg(bi, e.args[1], t);
  if (!axis) return std::nullopt;
  const ir::Dim d = t.shape[static_cast<std::size_t>(*axis)];
  if (bi.kind == BuiltinKind::Split) {
    auto n = const_int(e.args[2], "'split' count");
    if (!n) return std::nullopt;
    if (*n < 1 || *n > kMaxCount) {
      error(e.args[2].pos, "'split' count " + std::to_string(*n) + " is out of range [1, " + std::to_string(kMaxCount) + "]");
      return std::nullopt;
    }
    if (!d.is_static() || d.extent % *n != 0) {
      error(e.args[2].pos, "'split' needs axis " + std::to_string(*axis) + " of " + ir::type_str(t, f_->symbols()) +
                               " to be a static extent divisible by " + std::to_string(*n));
      return std::nullopt;
    }
    const std::int64_t size = d.extent / *n;
    Val tuple;
    tuple.tuple = true;
    tuple.pos = e.pos;
    for (std::int64_t k = 0; k < *n; ++k) {
      auto r = b_->create1(Op::Slice, {*x}, ir::SliceAttrs{*axis, k * size, size}, {}, at);
      if (!r.ok()) return value_or_error(r, e.pos, name);
      tuple.elems.push_back(value(r.value()));
    }
    if (*n == 1) return tuple.elems.front();
    return tuple;
  }
  auto start = const_int(e.args[2], "'slice' start");
  if (!start) return std::nullopt;
  auto size = const_int(e.args[3], "'slice' size");
  if (!size) return std::nullopt;
  if (*start < 0 || *size < 0 || (d.is_static() && *start + *size > d.extent)) {
    error(e.args[2].pos, "'slice' range [" + std::to_string(*start) + ", " + std::to_string(*start + *size) +
                             ") is out of range for axis " + std::to_string(*axis) + " of " +
                             ir::type_str(t, f_->symbols()));
    return std::nullopt;
  }
  return value_or_error(b_->create1(Op::Slice, {*x}, ir::SliceAttrs{*axis, *start, *size}, {}, at), e.pos, name);
}

std::optional<Val> Lowerer::lower_decoder(const Builtin& bi, const Expr& e) {
  const std::string name(bi.name);
  const SourceLoc at = loc(e.pos);
  std::vector<ValueId> ops;
  // The leading tensor operands of each op, then its positions, then its literals.
  auto tensors = [&](std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
      auto x = tensor_arg(e.args[i]);
      if (!x) return false;
      ops.push_back(*x);
    }
    return true;
  };
  auto position = [&](std::size_t i) {
    auto p = pos_arg(e.args[i]);
    if (p) ops.push_back(*p);
    return p.has_value();
  };
  auto create = [&](ir::Attrs attrs) { return value_or_error(b_->create1(bi.op, ops, std::move(attrs), {}, at), e.pos, name); };
  switch (bi.op) {
    case Op::Gather:
      if (!tensors(2)) return std::nullopt;
      return create(ir::AxisAttrs{0, false});
    case Op::Rope: {
      // rope(x, pos, theta[, "norm" | "neox"]): llama.cpp's pairings; "norm" (llama's, the
      // IR's default) when left out. llama.cpp's `bitnet` architecture is "neox".
      if (!tensors(1) || !position(1)) return std::nullopt;
      auto theta = number_arg(bi, e.args[2], "theta", false);
      if (!theta) return std::nullopt;
      if (!(theta->value > 0)) {
        error(e.args[2].pos, "'rope' theta must be > 0, got " + theta->text);
        return std::nullopt;
      }
      ir::RopeAttrs attrs{theta->value, ir::RopeMode::Norm};
      if (e.args.size() == 4) {
        const Expr& m = e.args[3];
        auto mode = m.kind == ExprKind::String ? ir::parse_rope_mode(m.text) : std::nullopt;
        if (!mode) {
          std::string got = m.kind == ExprKind::String ? "\"" + m.text + "\"" : "an expression";
          error(m.pos, "'rope' mode must be \"norm\" or \"neox\", got " + got);
          return std::nullopt;
        }
        attrs.mode = *mode;
      }
      return create(attrs);
    }
    case Op::LayerNorm: {
      if (!tensors(3)) return std::nullopt;
      auto eps = number_arg(bi, e.args[3], "eps", false);
      if (!eps) return std::nullopt;
      return create(ir::EpsAttrs{eps->value});
    }
    case Op::CausalSoftmax:
      if (!tensors(1) || !position(1)) return std::nullopt;
      return create(ir::NoAttrs{});
    case Op::KvWrite: {
      // kv_write(cache, rows, pos, layer): the layer a literal or a loop variable.
      if (!tensors(2) || !position(2)) return std::nullopt;
      auto layer = const_int(e.args[3], "'kv_write' layer");
      if (!layer) return std::nullopt;
      return create(ir::LayerAttrs{*layer});
    }
    case Op::Attention: {
      // attention(q, k_cache, v_cache, pos, layer, scale).
      if (!tensors(3) || !position(3)) return std::nullopt;
      auto layer = const_int(e.args[4], "'attention' layer");
      if (!layer) return std::nullopt;
      auto scale = number_arg(bi, e.args[5], "scale", false);
      if (!scale) return std::nullopt;
      return create(ir::AttentionAttrs{*layer, scale->value});
    }
    default: break;
  }
  TERNJIT_UNREACHABLE("lower_decoder: not a decoder built-in");
}

}  // namespace ternjit::dsl::lower_detail
