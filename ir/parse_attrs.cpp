// SPDX-License-Identifier: Apache-2.0
// parse_attrs.cpp - the IR text parser's attribute dictionaries: `{key = value, ...}` into the op's struct.
#include <limits>
#include <optional>

#include "ir/parse_internal.h"

namespace ternjit::ir::parse_detail {

bool Parser::parse_attrs(std::vector<PAttr>& out) {
  next();  // '{'
  if (accept(Tok::RBrace)) return true;
  for (;;) {
    const Token& key = peek();
    if (!expect(Tok::Ident, "an attribute name")) return false;
    for (const PAttr& a : out)
      if (a.key->text == key.text) return fail(key, "attribute " + describe(key) + " is given twice");
    if (!expect(Tok::Equal, "'=' after the attribute name")) return false;
    PAttr a;
    a.key = &key;
    const Token& v = peek();
    a.value.tok = &v;
    if (v.kind == Tok::Number) {
      a.value.kind = PAttrValue::Kind::Number;
      next();
    } else if (v.kind == Tok::Ident) {
      a.value.kind = (v.text == "inf" || v.text == "nan") ? PAttrValue::Kind::Number : PAttrValue::Kind::Word;
      next();
    } else if (v.kind == Tok::LBracket) {
      a.value.kind = PAttrValue::Kind::List;
      next();
      if (!accept(Tok::RBracket)) {
        for (;;) {
          const Token& item = peek();
          PListItem li{&item, false, {}};
          const bool word = item.kind == Tok::Ident && item.text != "inf" && item.text != "nan";
          if (word && toks_[pos_ + 1].kind == Tok::LParen) {
            // word(n, ...): an ewise step.
            next();
            next();
            li.call = true;
            for (;;) {
              const Token& arg = peek();
              if (arg.kind != Tok::Number) return fail(arg, "expected an integer in the step, got " + describe(arg));
              li.args.push_back(&arg);
              next();
              if (accept(Tok::RParen)) break;
              if (!expect(Tok::Comma, "',' or ')' in the step")) return false;
            }
          } else if (item.kind != Tok::Number && !(item.kind == Tok::Ident && !word)) {
            return fail(item, "expected a number in the list, got " + describe(item));
          } else {
            next();
          }
          a.value.items.push_back(std::move(li));
          if (accept(Tok::RBracket)) break;
          if (!expect(Tok::Comma, "',' or ']' in the list")) return false;
        }
      }
    } else {
      return fail(v, "expected an attribute value (a number, a word or a list), got " + describe(v));
    }
    out.push_back(a);
    if (accept(Tok::RBrace)) return true;
    if (!expect(Tok::Comma, "',' or '}' after an attribute")) return false;
  }
}

// Maps the written attributes onto the op's attribute struct: every field is required
// (softmax's keepdims, tmatmul's group and the quantizers' ste_clip are optional), unknown and mistyped fields are errors.
bool Parser::build_attrs(PInst& inst, const Token& op_tok, const Token* brace, const std::vector<PAttr>& attrs) {
  const std::string opq = "'" + std::string(op_name(inst.op)) + "'";
  std::vector<std::string> fields;
  const AttrsKind kind = attrs_kind(inst.op);
  switch (kind) {
    case AttrsKind::None: break;
    case AttrsKind::Param: break;  // written as @name, already in inst.attrs
    case AttrsKind::Call: break;   // written as @callee(...), already in inst.attrs
    case AttrsKind::Const: fields = {"value", "values"}; break;
    case AttrsKind::Cast: fields = {"to"}; break;
    case AttrsKind::Perm: fields = {"perm"}; break;
    case AttrsKind::Axis: fields = {"axis", "keepdims"}; break;
    case AttrsKind::Eps: fields = {"eps"}; break;
    case AttrsKind::Threshold: fields = {"threshold", "ste_clip"}; break;
    case AttrsKind::Ste: fields = {"ste_clip"}; break;
    case AttrsKind::TMatMul: fields = {"x_scale", "w_scale", "group", "bias", "residual", "act"}; break;
    case AttrsKind::Ewise: fields = {"steps"}; break;
    case AttrsKind::Slice: fields = {"axis", "start", "size"}; break;
    case AttrsKind::Rope: fields = {"theta", "mode"}; break;
    case AttrsKind::Layer: fields = {"layer"}; break;
    case AttrsKind::Attention: fields = {"layer", "scale"}; break;
  }
  // softmax, gather and concat carry AxisAttrs without a keepdims field (optional here
  // so that a set flag, which the verifier refuses, still reads back as printed).
  const bool no_keepdims = inst.op == Op::Softmax || inst.op == Op::Gather || inst.op == Op::Concat;
  if (fields.empty() && brace) return fail(*brace, opq + " takes no attributes");
  for (const PAttr& a : attrs) {
    bool known = false;
    for (const std::string& f : fields) known |= a.key->text == f;
    if (!known) {
      std::string list;
      for (std::size_t i = 0; i < fields.size(); ++i) list += (i ? ", '" : "'") + fields[i] + "'";
      return fail(*a.key, "unknown attribute " + describe(*a.key) + " for " + opq + " (expected " + list + ")");
    }
  }
  auto find = [&](std::string_view key) -> const PAttr* {
    for (const PAttr& a : attrs)
      if (a.key->text == key) return &a;
    return nullptr;
  };
  auto missing = [&](const std::string& key) {
    return fail(brace ? *brace : op_tok, opq + " needs attribute '" + key + "'");
  };
  auto get_int = [&](const PAttr& a, std::int64_t& v) {
    if (a.value.kind != PAttrValue::Kind::Number)
      return fail(*a.value.tok, "attribute " + describe(*a.key) + " of " + opq + " must be an integer, got " +
                                    describe(*a.value.tok));
    return parse_int(*a.value.tok, v);
  };
  auto get_double = [&](const PAttr& a, double& v) {
    if (a.value.kind != PAttrValue::Kind::Number)
      return fail(*a.value.tok, "attribute " + describe(*a.key) + " of " + opq + " must be a number, got " +
                                    describe(*a.value.tok));
    return parse_double(*a.value.tok, v);
  };

  // The optional `ste_clip = true | false` of the quantizers (absent: SteClip::Default).
  auto get_ste = [&](SteClip& out) {
    const PAttr* a = find("ste_clip");
    if (!a) return true;
    if (a->value.kind != PAttrValue::Kind::Word || (a->value.tok->text != "true" && a->value.tok->text != "false"))
      return fail(*a->value.tok, "attribute 'ste_clip' of " + opq + " must be true or false, got " + describe(*a->value.tok));
    out = a->value.tok->text == "true" ? SteClip::On : SteClip::Off;
    return true;
  };

  switch (kind) {
    case AttrsKind::None:
      inst.attrs = NoAttrs{};
      return true;
    case AttrsKind::Param:
    case AttrsKind::Call:
      return true;
    case AttrsKind::Const: {
      const PAttr* one = find("value");
      const PAttr* many = find("values");
      if (one && many) return fail(*many->key, "'const' takes 'value' or 'values', not both");
      if (!one && !many) return missing("value");
      ConstAttrs c;
      if (one) {
        c.values.emplace_back();
        if (!get_double(*one, c.values.back())) return false;
      } else {
        if (many->value.kind != PAttrValue::Kind::List)
          return fail(*many->value.tok, "attribute 'values' of 'const' must be a list such as [1, 2], got " +
                                            describe(*many->value.tok));
        for (const PListItem& item : many->value.items) {
          if (item.call) return fail(*item.tok, "expected a number in 'values', got " + describe(*item.tok));
          c.values.emplace_back();
          if (!parse_double(*item.tok, c.values.back())) return false;
        }
      }
      inst.attrs = std::move(c);
      return true;
    }
    case AttrsKind::Cast: {
      const PAttr* to = find("to");
      if (!to) return missing("to");
      auto k = to->value.kind == PAttrValue::Kind::Word ? parse_elem_kind(to->value.tok->text) : std::nullopt;
      if (!k) return fail(*to->value.tok, "unknown element kind " + describe(*to->value.tok) + " for 'to'");
      inst.attrs = CastAttrs{*k};
      return true;
    }
    case AttrsKind::Perm: {
      const PAttr* perm = find("perm");
      if (!perm) return missing("perm");
      if (perm->value.kind != PAttrValue::Kind::List)
        return fail(*perm->value.tok, "attribute 'perm' of 'transpose' must be a list such as [1, 0], got " +
                                          describe(*perm->value.tok));
      PermAttrs p;
      for (const PListItem& item : perm->value.items) {
        if (item.call) return fail(*item.tok, "expected an integer in 'perm', got " + describe(*item.tok));
        p.perm.emplace_back();
        if (!parse_int(*item.tok, p.perm.back())) return false;
      }
      inst.attrs = std::move(p);
      return true;
    }
    case AttrsKind::Axis: {
      AxisAttrs ax;
      const PAttr* axis = find("axis");
      if (!axis) return missing("axis");
      if (!get_int(*axis, ax.axis)) return false;
      const PAttr* keep = find("keepdims");
      if (!keep && !no_keepdims) return missing("keepdims");
      if (keep) {
        if (keep->value.kind != PAttrValue::Kind::Word ||
            (keep->value.tok->text != "true" && keep->value.tok->text != "false"))
          return fail(*keep->value.tok, "attribute 'keepdims' must be true or false, got " + describe(*keep->value.tok));
        ax.keepdims = keep->value.tok->text == "true";
      }
      inst.attrs = ax;
      return true;
    }
    case AttrsKind::Eps: {
      const PAttr* eps = find("eps");
      if (!eps) return missing("eps");
      EpsAttrs e;
      if (!get_double(*eps, e.eps)) return false;
      inst.attrs = e;
      return true;
    }
    case AttrsKind::Threshold: {
      const PAttr* th = find("threshold");
      if (!th) return missing("threshold");
      ThresholdAttrs t;
      if (!get_double(*th, t.threshold) || !get_ste(t.ste_clip)) return false;
      inst.attrs = t;
      return true;
    }
    case AttrsKind::Ste: {
      SteAttrs s;
      if (!get_ste(s.ste_clip)) return false;
      inst.attrs = s;
      return true;
    }
    case AttrsKind::TMatMul: {
      TMatMulAttrs t;
      auto get_bool = [&](const char* key, bool& out) {
        const PAttr* a = find(key);
        if (!a) return missing(key);
        if (a->value.kind != PAttrValue::Kind::Word || (a->value.tok->text != "true" && a->value.tok->text != "false"))
          return fail(*a->value.tok, "attribute '" + std::string(key) + "' must be true or false, got " +
                                         describe(*a->value.tok));
        out = a->value.tok->text == "true";
        return true;
      };
      if (!get_bool("x_scale", t.x_scale) || !get_bool("w_scale", t.w_scale) || !get_bool("bias", t.bias) ||
          !get_bool("residual", t.residual))
        return false;
      // group is optional (absent: 0, no grouping); its range is the verifier's to check.
      if (const PAttr* g = find("group"); g && !get_int(*g, t.group)) return false;
      const PAttr* act = find("act");
      if (!act) return missing("act");
      auto a = act->value.kind == PAttrValue::Kind::Word ? parse_activation(act->value.tok->text) : std::nullopt;
      if (!a)
        return fail(*act->value.tok, "unknown activation " + describe(*act->value.tok) +
                                         " (expected none, relu, gelu, silu, sigmoid or tanh)");
      t.act = *a;
      inst.attrs = t;
      return true;
    }
    case AttrsKind::Ewise: {
      const PAttr* steps = find("steps");
      if (!steps) return missing("steps");
      if (steps->value.kind != PAttrValue::Kind::List)
        return fail(*steps->value.tok, "attribute 'steps' of 'ewise' must be a list such as [mul(0, 1), relu(2)], got " +
                                           describe(*steps->value.tok));
      EwiseAttrs e;
      for (const PListItem& item : steps->value.items) {
        auto op = item.call ? parse_op(item.tok->text) : std::nullopt;
        if (!op || !is_ewise_step_op(*op))
          return fail(*item.tok, "expected an elementwise step such as 'mul(0, 1)', got " + describe(*item.tok));
        const std::size_t want = is_ewise_binary(*op) ? 2 : 1;
        if (item.args.size() != want)
          return fail(*item.tok, "step " + describe(*item.tok) + " takes " + std::to_string(want) + " slot" +
                                     (want == 1 ? "" : "s") + ", got " + std::to_string(item.args.size()));
        EwiseStep st{*op, 0, -1};
        std::int64_t slot = 0;
        for (std::size_t k = 0; k < item.args.size(); ++k) {
          if (!parse_int(*item.args[k], slot)) return false;
          if (slot < 0 || slot > std::numeric_limits<std::int32_t>::max())
            return fail(*item.args[k], "step slot " + describe(*item.args[k]) + " is out of range");
          (k == 0 ? st.a : st.b) = static_cast<std::int32_t>(slot);
        }
        e.steps.push_back(st);
      }
      inst.attrs = std::move(e);
      return true;
    }
    case AttrsKind::Slice: {
      SliceAttrs sl;
      for (auto [key, field] : {std::pair{"axis", &sl.axis}, std::pair{"start", &sl.start}, std::pair{"size", &sl.size}}) {
        const PAttr* a = find(key);
        if (!a) return missing(key);
        if (!get_int(*a, *field)) return false;
      }
      inst.attrs = sl;
      return true;
    }
    case AttrsKind::Rope: {
      RopeAttrs r;
      const PAttr* theta = find("theta");
      if (!theta) return missing("theta");
      if (!get_double(*theta, r.theta)) return false;
      const PAttr* mode = find("mode");
      if (!mode) return missing("mode");
      auto m = mode->value.kind == PAttrValue::Kind::Word ? parse_rope_mode(mode->value.tok->text) : std::nullopt;
      if (!m) return fail(*mode->value.tok, "unknown rope mode " + describe(*mode->value.tok) + " (expected norm or neox)");
      r.mode = *m;
      inst.attrs = r;
      return true;
    }
    case AttrsKind::Layer: {
      LayerAttrs l;
      const PAttr* layer = find("layer");
      if (!layer) return missing("layer");
      if (!get_int(*layer, l.layer)) return false;
      inst.attrs = l;
      return true;
    }
    case AttrsKind::Attention: {
      AttentionAttrs a;
      const PAttr* layer = find("layer");
      if (!layer) return missing("layer");
      if (!get_int(*layer, a.layer)) return false;
      const PAttr* scale = find("scale");
      if (!scale) return missing("scale");
      if (!get_double(*scale, a.scale)) return false;
      inst.attrs = a;
      return true;
    }
  }
  return true;
}

// [results '='] op operands [attrs] [':' types]

}  // namespace ternjit::ir::parse_detail
