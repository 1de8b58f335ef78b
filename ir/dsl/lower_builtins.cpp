// SPDX-License-Identifier: Apache-2.0
// lower_builtins.cpp - the .tri built-in functions (relu, sum, rmsnorm, cast<T>, ...) and their lowering.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "ir/bind.h"
#include "ir/print.h"

#include "ir/dsl/lower_internal.h"

namespace ternjit::dsl::lower_detail {

namespace {

// grouped_matmul's group without a fourth argument, and the largest it accepts (so that
// group * 127 fits the integer path's exact int32 group sums with room to spare).
constexpr std::int64_t kDefaultScaleGroup = 256;
constexpr std::int64_t kMaxScaleGroup = std::int64_t{1} << 24;
// concat's operands (and its axis): a bound like every other count in the language.
constexpr int kMaxConcatArgs = static_cast<int>(kMaxCount) + 1;

constexpr Builtin kBuiltins[] = {
    {"relu", BuiltinKind::Unary, Op::Relu, 1, 1},
    {"sigmoid", BuiltinKind::Unary, Op::Sigmoid, 1, 1},
    {"tanh", BuiltinKind::Unary, Op::Tanh, 1, 1},
    {"gelu", BuiltinKind::Unary, Op::Gelu, 1, 1},
    {"silu", BuiltinKind::Unary, Op::Silu, 1, 1},
    {"exp", BuiltinKind::Unary, Op::Exp, 1, 1},
    {"log", BuiltinKind::Unary, Op::Log, 1, 1},
    {"sqrt", BuiltinKind::Unary, Op::Sqrt, 1, 1},
    {"rsqrt", BuiltinKind::Unary, Op::Rsqrt, 1, 1},
    {"abs", BuiltinKind::Unary, Op::Abs, 1, 1},
    {"quantize_int8", BuiltinKind::Quantizer, Op::QuantizeInt8, 1, 2},
    {"ternarize_absmean", BuiltinKind::Quantizer, Op::TernarizeAbsmean, 1, 2},
    {"maximum", BuiltinKind::Binary, Op::Max, 2, 2},
    {"minimum", BuiltinKind::Binary, Op::Min, 2, 2},
    {"softmax", BuiltinKind::Axis, Op::Softmax, 2, 2},
    {"sum", BuiltinKind::Axis, Op::ReduceSum, 2, 2},
    {"mean", BuiltinKind::Axis, Op::ReduceMean, 2, 2},
    {"max", BuiltinKind::Axis, Op::ReduceMax, 2, 2},
    {"rmsnorm", BuiltinKind::RmsNorm, Op::RmsNorm, 3, 3},
    {"transpose", BuiltinKind::Transpose, Op::Transpose, 1, 1},
    {"ternarize", BuiltinKind::Ternarize, Op::Ternarize, 2, 3},
    {"dequantize", BuiltinKind::Dequantize, Op::Dequantize, 1, 2},
    {"cast", BuiltinKind::Cast, Op::Cast, 1, 1},
    {"grouped_matmul", BuiltinKind::GroupedMatMul, Op::TMatMul, 3, 4},
    {"reshape", BuiltinKind::Reshape, Op::Reshape, 2, 2},
    {"pow", BuiltinKind::Pow, Op::Mul, 2, 2},
    {"square", BuiltinKind::Pow, Op::Mul, 1, 1},
    {"slice", BuiltinKind::Slice, Op::Slice, 4, 4},
    {"split", BuiltinKind::Split, Op::Slice, 3, 3},
    {"concat", BuiltinKind::Concat, Op::Concat, 2, kMaxConcatArgs},
    {"gather", BuiltinKind::Decoder, Op::Gather, 2, 2},
    {"rope", BuiltinKind::Decoder, Op::Rope, 3, 4},
    {"layernorm", BuiltinKind::Decoder, Op::LayerNorm, 4, 4},
    {"causal_softmax", BuiltinKind::Decoder, Op::CausalSoftmax, 2, 2},
    {"kv_write", BuiltinKind::Decoder, Op::KvWrite, 4, 4},
    {"attention", BuiltinKind::Decoder, Op::Attention, 6, 6},
};

// pow's exponent range: enough for any polynomial a model writes, and few multiplications.
constexpr std::int64_t kMaxPowExponent = 16;

std::string plural(std::size_t n, std::string_view word) {
  return std::to_string(n) + " " + std::string(word) + (n == 1 ? "" : "s");
}

}  // namespace

const Builtin* find_builtin(std::string_view name) {
  for (const Builtin& b : kBuiltins)
    if (b.name == name) return &b;
  return nullptr;
}

std::optional<ConstNumber> Lowerer::const_number(const Expr& e) const {
  if (e.kind == ExprKind::Number) return ConstNumber{e.number, e.is_int, e.text};
  if (e.kind == ExprKind::Neg) {
    auto c = const_number(e.args[0]);
    if (c) {
      c->value = -c->value;
      c->text = "-" + c->text;
    }
    return c;
  }
  if (e.kind == ExprKind::Name) {
    auto it = scope_.find(e.name);
    if (it != scope_.end() && it->second.kind == Binding::Kind::Literal)
      return ConstNumber{it->second.number, it->second.is_int, it->second.text};
  }
  if (e.kind == ExprKind::Binary && e.op != BinaryOp::MatMul) {
    // Arithmetic on compile-time numbers (`i + 1`, `2 * eps`), folded as the operators
    // fold literals: in double, integers stay integers except under '/'.
    auto a = const_number(e.args[0]);
    auto b = a ? const_number(e.args[1]) : std::nullopt;
    if (!a || !b) return std::nullopt;
    ConstNumber r;
    r.is_int = a->is_int && b->is_int && e.op != BinaryOp::Div;
    switch (e.op) {
      case BinaryOp::Add: r.value = a->value + b->value; break;
      case BinaryOp::Sub: r.value = a->value - b->value; break;
      case BinaryOp::Mul: r.value = a->value * b->value; break;
      case BinaryOp::Div:
        if (b->value == 0) return std::nullopt;
        r.value = a->value / b->value;
        break;
      case BinaryOp::MatMul: return std::nullopt;
    }
    r.text = ir::format_double(r.value);
    return r;
  }
  return std::nullopt;
}

std::optional<ConstNumber> Lowerer::number_arg(const Builtin& bi, const Expr& e, std::string_view what, bool need_int) {
  auto c = const_number(e);
  if (c && (!need_int || c->is_int)) return c;
  std::string want = need_int ? "an integer literal" : "a number literal";
  std::string got = c ? c->text : (e.kind == ExprKind::Name ? "'" + e.name + "'" : "an expression");
  error(e.pos, "'" + std::string(bi.name) + "' " + std::string(what) + " must be " + want +
                   ", got " + got);
  return std::nullopt;
}

std::optional<Val> Lowerer::lower_builtin(const Builtin& bi, const Expr& e) {
  const std::string name(bi.name);
  const auto n = static_cast<int>(e.args.size());
  if (n < bi.min_args || n > bi.max_args) {
    std::string takes = bi.min_args == bi.max_args
                            ? plural(static_cast<std::size_t>(bi.min_args), "argument")
                        : bi.max_args > bi.min_args + 1
                            ? std::to_string(bi.min_args) + " to " +
                                  plural(static_cast<std::size_t>(bi.max_args), "argument")
                            : std::to_string(bi.min_args) + " or " +
                                  plural(static_cast<std::size_t>(bi.max_args), "argument");
    error(e.pos, "'" + name + "' takes " + takes + ", got " + std::to_string(n));
    return std::nullopt;
  }
  ElemKind cast_to = ElemKind::F32;
  if (bi.kind == BuiltinKind::Cast) {
    if (!e.has_type_arg) {
      error(e.pos, "'cast' needs an element type: expected cast<T>(x) with T one of " +
                       kind_list(kCastKinds));
      return std::nullopt;
    }
    auto k = find_kind(kCastKinds, e.type_arg);
    if (!k) {
      error(e.type_arg_pos, "unknown element type '" + e.type_arg + "' (expected one of " +
                                kind_list(kCastKinds) + ")");
      return std::nullopt;
    }
    cast_to = *k;
  } else if (e.has_type_arg) {
    error(e.type_arg_pos, "'" + name + "' does not take an element type");
    return std::nullopt;
  }

  const SourceLoc at = loc(e.pos);
  switch (bi.kind) {
    case BuiltinKind::Reshape: return lower_reshape(bi, e);
    case BuiltinKind::Pow: return lower_pow(bi, e);
    case BuiltinKind::Slice:
    case BuiltinKind::Split:
    case BuiltinKind::Concat: return lower_slicing(bi, e);
    case BuiltinKind::Decoder: return lower_decoder(bi, e);
    case BuiltinKind::Unary: {
      auto x = tensor_arg(e.args[0]);
      if (!x) return std::nullopt;
      return value_or_error(b_->create1(bi.op, {*x}, ir::NoAttrs{}, {}, at), e.pos, name);
    }
    case BuiltinKind::Quantizer: {
      // quantize_int8(x) / ternarize_absmean(x), and the STE-clipped forms
      // quantize_int8(x, ste_clip) / ternarize_absmean(x, ste_clip) (ste_clip: 0 or 1, a
      // literal; ir/README.md "Gradients").
      auto x = tensor_arg(e.args[0]);
      if (!x) return std::nullopt;
      ir::SteAttrs ste;
      if (n == 2) {
        auto clip = number_arg(bi, e.args[1], "ste_clip", true);
        if (!clip) return std::nullopt;
        if (clip->value != 0 && clip->value != 1) {
          error(e.args[1].pos, "'" + name + "' ste_clip must be 0 or 1, got " + clip->text);
          return std::nullopt;
        }
        ste.ste_clip = clip->value == 1 ? ir::SteClip::On : ir::SteClip::Off;
      }
      return value_or_error(b_->create1(bi.op, {*x}, ste, {}, at), e.pos, name);
    }
    case BuiltinKind::Binary: {
      auto a = lower_expr(e.args[0]);
      if (!a) return std::nullopt;
      auto b = lower_expr(e.args[1]);
      if (!b) return std::nullopt;
      auto id = binary(bi.op, *a, *b, e.pos, name);
      if (!id) return std::nullopt;
      return value(*id);
    }
    case BuiltinKind::Axis: {
      auto x = tensor_arg(e.args[0]);
      if (!x) return std::nullopt;
      auto axis = number_arg(bi, e.args[1], "axis", true);
      if (!axis) return std::nullopt;
      // A negative axis counts from the end. The range is checked on the literal's
      // double value: converting one outside int64 (a folded or huge literal) is UB.
      const ir::Type& xt = f_->type_of(*x);
      const auto rank = static_cast<std::int64_t>(xt.rank());
      if (!(axis->value >= static_cast<double>(-rank) && axis->value < static_cast<double>(rank))) {
        error(e.args[1].pos, "'" + name + "' axis " + axis->text + " is out of range for " +
                                 ir::type_str(xt, f_->symbols()) + " (rank " + std::to_string(rank) + ")");
        return std::nullopt;
      }
      const auto written = static_cast<std::int64_t>(axis->value);
      const std::int64_t normalized = written < 0 ? written + rank : written;
      return value_or_error(b_->create1(bi.op, {*x}, ir::AxisAttrs{normalized, false}, {}, at), e.pos, name);
    }
    case BuiltinKind::RmsNorm: {
      auto x = tensor_arg(e.args[0]);
      if (!x) return std::nullopt;
      auto gamma = tensor_arg(e.args[1]);
      if (!gamma) return std::nullopt;
      auto eps = number_arg(bi, e.args[2], "eps", false);
      if (!eps) return std::nullopt;
      return value_or_error(b_->create1(Op::RmsNorm, {*x, *gamma}, ir::EpsAttrs{eps->value}, {}, at),
                            e.pos, name);
    }
    case BuiltinKind::Transpose: {
      auto x = tensor_arg(e.args[0]);
      if (!x) return std::nullopt;
      ir::PermAttrs perm;
      for (std::size_t i = f_->type_of(*x).rank(); i > 0; --i)
        perm.perm.push_back(static_cast<std::int64_t>(i - 1));
      return value_or_error(b_->create1(Op::Transpose, {*x}, std::move(perm), {}, at), e.pos, name);
    }
    case BuiltinKind::Ternarize: {
      auto x = tensor_arg(e.args[0]);
      if (!x) return std::nullopt;
      auto th = number_arg(bi, e.args[1], "threshold", false);
      if (!th) return std::nullopt;
      if (th->value < 0) {
        error(e.args[1].pos, "'ternarize' threshold must be >= 0, got " + th->text);
        return std::nullopt;
      }
      ir::ThresholdAttrs attrs{th->value};
      if (n == 3) {  // ternarize(x, threshold, ste_clip)
        auto clip = number_arg(bi, e.args[2], "ste_clip", true);
        if (!clip) return std::nullopt;
        if (clip->value != 0 && clip->value != 1) {
          error(e.args[2].pos, "'ternarize' ste_clip must be 0 or 1, got " + clip->text);
          return std::nullopt;
        }
        attrs.ste_clip = clip->value == 1 ? ir::SteClip::On : ir::SteClip::Off;
      }
      return value_or_error(b_->create1(Op::Ternarize, {*x}, attrs, {}, at), e.pos, name);
    }
    case BuiltinKind::Dequantize: {
      if (n == 1) {
        // dequantize(x) of a float tensor is the identity: the value is already real.
        auto v = lower_expr(e.args[0]);
        if (!v) return std::nullopt;
        if (v->literal) return v;
        const ir::Type& t = f_->type_of(v->id);
        if (!is_float(t.elem)) {
          error(e.pos, "'dequantize' with one argument needs a float tensor, got " +
                           ir::type_str(t, f_->symbols()) + " (pass the scale: dequantize(q, scale))");
          return std::nullopt;
        }
        return v;
      }
      auto q = tensor_arg(e.args[0]);
      if (!q) return std::nullopt;
      auto s = lower_expr(e.args[1]);
      if (!s) return std::nullopt;
      auto scale = s->literal ? materialize(*s, ElemKind::F32) : s->id;
      if (!scale) return std::nullopt;
      return value_or_error(b_->create1(Op::Dequantize, {*q, *scale}, ir::NoAttrs{}, {}, at), e.pos, name);
    }
    case BuiltinKind::Cast: {
      auto x = tensor_arg(e.args[0]);
      if (!x) return std::nullopt;
      return value_or_error(b_->create1(Op::Cast, {*x}, ir::CastAttrs{cast_to}, {}, at), e.pos, name);
    }
    case BuiltinKind::GroupedMatMul: {
      // grouped_matmul(x, w, scale[, group]): x @ w with scale[g, n] applied to the sum over
      // group g of K (group consecutive k; 256 by default, GGUF's TQ1_0/TQ2_0 block).
      auto x = tensor_arg(e.args[0]);
      if (!x) return std::nullopt;
      auto w = tensor_arg(e.args[1]);
      if (!w) return std::nullopt;
      auto scale = tensor_arg(e.args[2]);
      if (!scale) return std::nullopt;
      ir::TMatMulAttrs attrs;
      attrs.w_scale = true;
      attrs.group = kDefaultScaleGroup;
      if (n == 4) {
        auto g = number_arg(bi, e.args[3], "group", true);
        if (!g) return std::nullopt;
        // Checked on the literal's double value: a huge one must not be converted (UB).
        if (!(g->value >= 1 && g->value <= static_cast<double>(kMaxScaleGroup))) {
          error(e.args[3].pos, "'grouped_matmul' group must be in [1, " + std::to_string(kMaxScaleGroup) + "], got " +
                                   g->text);
          return std::nullopt;
        }
        attrs.group = static_cast<std::int64_t>(g->value);
      }
      return value_or_error(b_->create1(Op::TMatMul, {*x, *w, *scale}, attrs, {}, at), e.pos, name);
    }
  }
  return std::nullopt;
}

std::optional<Val> Lowerer::lower_reshape(const Builtin& bi, const Expr& e) {
  // reshape(x, [d0, d1, ...]): each dim an integer >= 0, a symbol of the function
  // (`M`, `Layer.S`) or, once, -1: the extent that keeps the number of elements.
  auto x = tensor_arg(e.args[0]);
  if (!x) return std::nullopt;
  const Expr& list = e.args[1];
  if (list.kind != ExprKind::List) {
    error(list.pos, "'reshape' shape must be a list of dims, as in [M, 20, 128]");
    return std::nullopt;
  }
  const ir::Type xt = f_->type_of(*x);
  ir::Type out = xt;
  out.shape.clear();
  std::optional<std::size_t> infer;
  for (const Expr& d : list.args) {
    std::string sym;
    if (d.kind == ExprKind::Name) {
      auto it = scope_.find(d.name);
      if (it != scope_.end() && it->second.kind == Binding::Kind::Poison) return std::nullopt;
      if (it == scope_.end()) sym = d.name;
      else if (it->second.kind != Binding::Kind::Literal) {
        error(d.pos, "'reshape' dim '" + d.name + "' names a value: a dim is an integer, -1 or a symbol");
        return std::nullopt;
      }
    } else if (d.kind == ExprKind::Member && d.args[0].kind == ExprKind::Name) {
      sym = d.args[0].name == owner_ ? d.member : d.args[0].name + "." + d.member;
    }
    if (!sym.empty()) {
      auto id = f_->find_symbol(sym);
      if (!id) {
        error(d.pos, "unknown symbol '" + sym + "' in 'reshape' (a dim is an integer, -1 or a symbol of the function)" +
                         ir::did_you_mean(sym, f_->symbols()));
        return std::nullopt;
      }
      out.shape.push_back(ir::Dim::symbolic(*id));
      continue;
    }
    auto v = const_int(d, "a 'reshape' dim");
    if (!v) return std::nullopt;
    if (*v == -1) {
      if (infer) {
        error(d.pos, "'reshape' takes at most one -1 dim");
        return std::nullopt;
      }
      infer = out.shape.size();
      out.shape.push_back(ir::Dim::fixed(1));
      continue;
    }
    if (*v < 0) {
      error(d.pos, "'reshape' dim " + std::to_string(*v) + " must be >= 0 (or -1: inferred)");
      return std::nullopt;
    }
    out.shape.push_back(ir::Dim::fixed(*v));
  }
  if (infer) {
    // The -1 dim: the static quotient when the symbols match, or the one symbol left
    // over when the static parts match.
    std::vector<std::uint32_t> in_syms, out_syms;
    for (const ir::Dim& d : xt.shape)
      if (!d.is_static()) in_syms.push_back(d.sym.index);
    for (const ir::Dim& d : out.shape)
      if (!d.is_static()) out_syms.push_back(d.sym.index);
    std::sort(in_syms.begin(), in_syms.end());
    std::sort(out_syms.begin(), out_syms.end());
    std::vector<std::uint32_t> left;
    std::set_difference(in_syms.begin(), in_syms.end(), out_syms.begin(), out_syms.end(), std::back_inserter(left));
    const auto pin = ir::static_dims_product(xt), pout = ir::static_dims_product(out);
    const bool subset = std::includes(in_syms.begin(), in_syms.end(), out_syms.begin(), out_syms.end());
    if (subset && pin && pout && *pout != 0 && left.empty() && *pin % *pout == 0) {
      out.shape[*infer] = ir::Dim::fixed(*pin / *pout);
    } else if (subset && pin && pout && left.size() == 1 && *pin == *pout) {
      out.shape[*infer] = ir::Dim::symbolic(ir::SymbolId(left[0]));
    } else {
      std::string want = "[";
      for (std::size_t i = 0; i < list.args.size(); ++i)
        want += (i ? ", " : "") + (i == *infer                  ? std::string("-1")
                                 : out.shape[i].is_static() ? std::to_string(out.shape[i].extent)
                                                            : f_->symbol_name(out.shape[i].sym));
      error(list.pos, "'reshape' cannot infer the -1 dim: no extent turns " + ir::type_str(xt, f_->symbols()) +
                          " into " + want + "] with the same number of elements");
      return std::nullopt;
    }
  }
  return value_or_error(b_->create1(Op::Reshape, {*x}, ir::NoAttrs{}, {out}, loc(e.pos)), e.pos, bi.name);
}

std::optional<Val> Lowerer::lower_pow(const Builtin& bi, const Expr& e) {
  // pow(x, n) for an integer literal n in [-16, 16], and square(x) = pow(x, 2): n
  // multiplications at most, by repeated squaring (x^13 = x^8 * x^4 * x); a negative n
  // is 1 / x^|n| and n = 0 is ones. There is no IR pow: each target runs the muls.
  const std::string name(bi.name);
  std::int64_t n = 2;
  if (bi.max_args == 2) {
    auto c = number_arg(bi, e.args[1], "exponent", true);
    if (!c) return std::nullopt;
    if (!(c->value >= -kMaxPowExponent && c->value <= kMaxPowExponent)) {
      error(e.args[1].pos, "'pow' exponent " + c->text + " is out of range [" + std::to_string(-kMaxPowExponent) +
                               ", " + std::to_string(kMaxPowExponent) + "]");
      return std::nullopt;
    }
    n = static_cast<std::int64_t>(c->value);
  }
  auto v = lower_expr(e.args[0]);
  if (!v) return std::nullopt;
  if (v->literal) {
    // A literal stays a literal, folded in double like the operators.
    Val r = *v;
    r.number = std::pow(v->number, static_cast<double>(n));
    r.is_int = v->is_int && n >= 0;
    r.text = ir::format_double(r.number);
    r.pos = e.pos;
    return r;
  }
  const ir::Type t = f_->type_of(v->id);
  if (!is_float(t.elem)) {
    error(e.pos, "'" + name + "' needs a float tensor, got " + ir::type_str(t, f_->symbols()));
    return std::nullopt;
  }
  const SourceLoc at = loc(e.pos);
  auto one = [&]() { return b_->constant(ir::Type{t.elem, {}}, {1.0}, at); };
  std::optional<ValueId> result;
  if (n == 0) {
    auto c = one();
    if (!c.ok()) return value_or_error(c, e.pos, name);
    if (t.rank() == 0) return value(c.value());
    return value_or_error(b_->create1(Op::Broadcast, {c.value()}, ir::NoAttrs{}, {t}, at), e.pos, name);
  }
  ValueId base = v->id;
  for (std::int64_t k = n < 0 ? -n : n;;) {
    if (k & 1) {
      if (!result) {
        result = base;
      } else {
        auto r = b_->create1(Op::Mul, {*result, base}, ir::NoAttrs{}, {}, at);
        if (!r.ok()) return value_or_error(r, e.pos, name);
        result = r.value();
      }
    }
    k >>= 1;
    if (k == 0) break;
    auto sq = b_->create1(Op::Mul, {base, base}, ir::NoAttrs{}, {}, at);
    if (!sq.ok()) return value_or_error(sq, e.pos, name);
    base = sq.value();
  }
  if (n < 0) {
    auto c = one();
    if (!c.ok()) return value_or_error(c, e.pos, name);
    return value_or_error(b_->create1(Op::Div, {c.value(), *result}, ir::NoAttrs{}, {}, at), e.pos, name);
  }
  return value(*result);
}

}  // namespace ternjit::dsl::lower_detail
