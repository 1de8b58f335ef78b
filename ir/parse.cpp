// SPDX-License-Identifier: Apache-2.0
// parse.cpp - the IR text parser: a recursive-descent parser over parse_lexer.cpp's tokens.
//
// A function is parsed in two steps. First its text is read into a small syntax tree,
// giving every defined value the id it will get once built (block arguments and
// results are created in text order), so forward references across blocks resolve.
// Then the function is built with Function::append_inst using the declared result
// types; the verifier, run on the whole module afterwards, checks them against
// infer_types and reports every problem at once. Attribute dictionaries are read in
// parse_attrs.cpp.
#include "ir/parse.h"

#include <charconv>
#include <limits>
#include <map>
#include <optional>

#include "ir/builder.h"
#include "ir/parse_internal.h"
#include "ir/verify.h"

namespace ternjit::ir {

namespace parse_detail {

bool Parser::parse_int(const Token& t, std::int64_t& out) {
  if (t.kind != Tok::Number) return fail(t, "expected an integer, got " + describe(t));
  const char* end = t.text.data() + t.text.size();
  auto r = std::from_chars(t.text.data(), end, out);
  if (r.ec == std::errc::result_out_of_range) return fail(t, "integer " + describe(t) + " is out of range");
  if (r.ec != std::errc() || r.ptr != end) return fail(t, "expected an integer, got " + describe(t));
  return true;
}

bool Parser::parse_double(const Token& t, double& out) {
  bool word = t.kind == Tok::Ident && (t.text == "inf" || t.text == "nan");
  if (t.kind != Tok::Number && !word) return fail(t, "expected a number, got " + describe(t));
  std::string_view s = t.text;
  if (s == "nan" || s == "-nan") {
    out = std::numeric_limits<double>::quiet_NaN();
    return true;
  }
  if (s == "inf" || s == "-inf") {
    out = s[0] == '-' ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
    return true;
  }
  const char* end = s.data() + s.size();
  auto r = std::from_chars(s.data(), end, out);
  if (r.ec == std::errc::result_out_of_range) return fail(t, "number " + describe(t) + " is out of range");
  if (r.ec != std::errc() || r.ptr != end) return fail(t, "invalid number " + describe(t));
  return true;
}

bool Parser::parse_meta(Module& m) {
  next();  // 'meta'
  const Token& key = peek();
  if (!expect(Tok::String, "a quoted key after 'meta'")) return false;
  if (!expect(Tok::Equal, "'=' after the meta key")) return false;
  const Token& value = peek();
  if (!expect(Tok::String, "a quoted value after '='")) return false;
  if (m.metadata().count(key.value)) return fail(key, "duplicate meta key " + std::string(key.text));
  m.metadata()[key.value] = value.value;
  return expect_line_end("the meta value");
}

bool Parser::parse_param(Module& m) {
  const Token& kw = next();  // 'param'
  const Token& name = peek();
  if (!expect(Tok::AtName, "a parameter name such as '@layer.weights'")) return false;
  if (!expect(Tok::Colon, "':' and the parameter type")) return false;
  ParamDecl p;
  p.name = name.value;
  p.loc = loc(kw);
  if (!parse_type(p.type, p.symbols, /*may_declare=*/true, {})) return false;
  m.params().push_back(std::move(p));
  return expect_line_end("the parameter type");
}

// kind '[' dims ']'. In a function, symbols must be listed in its '<...>'; in a
// parameter declaration they are declared in order of first appearance.
bool Parser::parse_type(Type& out, std::vector<std::string>& syms, bool may_declare, const std::string& func) {
  const Token& kind = peek();
  if (kind.kind != Tok::Ident) return fail(kind, "expected a type such as 'f32[N, 4]', got " + describe(kind));
  auto k = parse_elem_kind(kind.text);
  if (!k) return fail(kind, "unknown element kind " + describe(kind) + " (expected t2, i8, u8, i32, f16, bf16, f32 or bool)");
  next();
  out = Type{*k, {}};
  if (peek().kind == Tok::Less) {
    // A packed ternary layout: t2<tern2>[K, N].
    const Token& lt = next();
    const Token& name = peek();
    auto layout = name.kind == Tok::Ident ? parse_weight_format(name.text) : std::nullopt;
    if (!layout)
      return fail(name, "unknown ternary layout " + describe(name) +
                            " (expected plain, tern2, tern2-sm, tern1.6 or bitplane)");
    if (*k != ElemKind::T2) return fail(lt, "only t2 takes a layout, got " + describe(kind));
    next();
    if (!expect(Tok::Greater, "'>' after the layout")) return false;
    out.layout = *layout;
  }
  if (!expect(Tok::LBracket, ("'[' after element kind " + describe(kind)).c_str())) return false;
  if (accept(Tok::RBracket)) return true;
  for (;;) {
    const Token& d = peek();
    if (d.kind == Tok::Number) {
      std::int64_t e = 0;
      if (!parse_int(d, e)) return false;
      if (e < 0) return fail(d, "dimension " + describe(d) + " is negative");
      out.shape.push_back(Dim::fixed(e));
    } else if (d.kind == Tok::Ident) {
      std::uint32_t idx = 0;
      while (idx < syms.size() && syms[idx] != d.text) ++idx;
      if (idx == syms.size()) {
        if (!may_declare)
          return fail(d, "unknown symbol " + describe(d) + ": list it in the '<...>' of @" + func);
        syms.emplace_back(d.text);
      }
      out.shape.push_back(Dim::symbolic(SymbolId(idx)));
    } else {
      return fail(d, "expected a dimension (an integer or a symbol), got " + describe(d));
    }
    next();
    if (accept(Tok::RBracket)) return true;
    if (!expect(Tok::Comma, "',' or ']' in the shape")) return false;
  }
}

bool Parser::parse_constraint(Function& f) {
  const Token& sym = peek();
  if (sym.kind != Tok::Ident) return fail(sym, "expected a constraint such as 'N >= 1', got " + describe(sym));
  auto s = f.find_symbol(sym.text);
  if (!s) return fail(sym, "unknown symbol " + describe(sym) + " in constraint: list it in the '<...>' of @" + f.name());
  next();
  Constraint c;
  c.sym = *s;
  const Token& op = next();
  switch (op.kind) {
    case Tok::Percent: {
      c.kind = Constraint::Kind::MultipleOf;
      if (!parse_int(peek(), c.value)) return false;
      next();
      if (!expect(Tok::EqEq, "'==' in 'N % m == 0'")) return false;
      std::int64_t zero = 0;
      if (!parse_int(peek(), zero)) return false;
      if (zero != 0) return fail(peek(), "expected '0' in 'N % m == 0', got " + describe(peek()));
      next();
      break;
    }
    case Tok::GreaterEq: c.kind = Constraint::Kind::AtLeast; break;
    case Tok::LessEq: c.kind = Constraint::Kind::AtMost; break;
    case Tok::EqEq: c.kind = Constraint::Kind::Equals; break;
    default:
      return fail(op, "expected '%', '>=', '<=' or '==' after " + describe(sym) + ", got " + describe(op));
  }
  if (c.kind != Constraint::Kind::MultipleOf) {
    if (!parse_int(peek(), c.value)) return false;
    next();
  }
  f.add_constraint(c);
  return true;
}

bool Parser::define_value(const Ref& r) {
  auto [it, fresh] = values_.emplace(r.id, ValueDefInfo{next_value_, r.loc});
  if (!fresh) {
    Diagnostic d{r.loc, Severity::Error, "redefinition of value '%" + r.id + "'", {}, {}};
    d.notes.push_back(Diagnostic{it->second.loc, Severity::Note, "previous definition is here", {}, {}});
    diags_.push_back(std::move(d));
    return false;
  }
  ++next_value_;
  return true;
}

bool Parser::parse_ref_list(std::vector<Ref>& out) {
  for (;;) {
    const Token& t = peek();
    if (!expect(Tok::PercentName, "a value such as '%x'")) return false;
    out.push_back(Ref{t.value, loc(t)});
    if (!accept(Tok::Comma)) return true;
  }
}

bool Parser::parse_block_label(PBlock& b, bool entry, const std::string& func, std::vector<std::string>& syms) {
  const Token& label = next();  // ^name
  b.label = label.value;
  if (peek().kind == Tok::LParen) {
    if (entry)
      return fail(peek(), "the entry block takes no arguments in its label: they are the arguments of @" + func);
    next();
    for (;;) {
      const Token& a = peek();
      if (!expect(Tok::PercentName, "a block argument such as '%x: f32[4]'")) return false;
      if (!expect(Tok::Colon, "':' and the argument type")) return false;
      Type t;
      if (!parse_type(t, syms, false, func)) return false;
      Ref r{a.value, loc(a)};
      if (!define_value(r)) return false;
      b.args.emplace_back(std::move(r), std::move(t));
      if (accept(Tok::RParen)) break;
      if (!expect(Tok::Comma, "',' or ')' after a block argument")) return false;
    }
  }
  if (!expect(Tok::Colon, "':' after the block label")) return false;
  return expect_line_end("the block label");
}

bool Parser::parse_inst(PInst& inst, const std::string& func, std::vector<std::string>& syms) {
  inst.loc = loc(peek());
  if (peek().kind == Tok::PercentName) {
    if (!parse_ref_list(inst.results)) return false;
    if (!expect(Tok::Equal, "'=' after the result names")) return false;
  }
  const Token& op_tok = peek();
  if (op_tok.kind != Tok::Ident)
    return fail(op_tok, std::string(inst.results.empty() ? "expected an instruction" : "expected an op after '='") +
                            ", got " + describe(op_tok));
  auto op = parse_op(op_tok.text);
  if (!op) return fail(op_tok, "unknown op " + describe(op_tok));
  inst.op = *op;
  next();

  if (inst.op == Op::Param) {
    const Token& name = peek();
    if (!expect(Tok::AtName, "a parameter name such as '@layer.weights' after 'param'")) return false;
    inst.attrs = ParamAttrs{name.value};
  } else if (inst.op == Op::Call) {
    const Token& callee = peek();
    if (!expect(Tok::AtName, "a function name such as '@f' after 'call'")) return false;
    inst.attrs = CallAttrs{callee.value};
    if (!expect(Tok::LParen, "'(' and the call arguments")) return false;
    if (!accept(Tok::RParen)) {
      if (!parse_ref_list(inst.operands)) return false;
      if (!expect(Tok::RParen, "',' or ')' after a call argument")) return false;
    }
  } else if (peek().kind == Tok::PercentName || peek().kind == Tok::CaretName) {
    // Operands, then successors with their arguments: `cond_br %c, ^a(%x), ^b`.
    for (;;) {
      const Token& t = peek();
      if (t.kind == Tok::PercentName && inst.targets.empty()) {
        inst.operands.push_back(Ref{t.value, loc(t)});
        next();
      } else if (t.kind == Tok::CaretName) {
        next();
        PTarget target{Ref{t.value, loc(t)}, {}};
        if (accept(Tok::LParen) && !accept(Tok::RParen)) {
          if (!parse_ref_list(target.args)) return false;
          if (!expect(Tok::RParen, "',' or ')' after a block argument")) return false;
        }
        inst.targets.push_back(std::move(target));
      } else {
        return fail(t, std::string("expected ") + (inst.targets.empty() ? "a value or a block" : "a block") +
                           " after ',', got " + describe(t));
      }
      if (!accept(Tok::Comma)) break;
    }
  }

  const Token* brace = peek().kind == Tok::LBrace ? &peek() : nullptr;
  std::vector<PAttr> attrs;
  if (brace && !parse_attrs(attrs)) return false;
  if (!build_attrs(inst, op_tok, brace, attrs)) return false;

  if (!inst.results.empty()) {
    if (peek().kind != Tok::Colon)
      return fail(peek(), "expected ':' and the result type after the instruction, got " + describe(peek()));
    next();
    for (;;) {
      Type t;
      if (!parse_type(t, syms, false, func)) return false;
      inst.types.push_back(std::move(t));
      if (!accept(Tok::Comma)) break;
    }
    if (inst.types.size() != inst.results.size())
      return fail_at(inst.loc,
                     std::to_string(inst.results.size()) + " result name" + (inst.results.size() == 1 ? "" : "s") +
                         " but " + std::to_string(inst.types.size()) + " result type" +
                         (inst.types.size() == 1 ? "" : "s"),
                     op_tok);
  } else if (peek().kind == Tok::Colon) {
    return fail(peek(), "'" + std::string(op_name(inst.op)) + "' defines no result here, so it takes no result type");
  }
  if (!expect_line_end("the instruction")) return false;

  if (inst.op == Op::Const && inst.types.size() == 1)
    if (auto* c = std::get_if<ConstAttrs>(&inst.attrs))
      for (double& v : c->values) v = round_to_kind(v, inst.types[0].elem);
  for (const Ref& r : inst.results)
    if (!define_value(r)) return false;
  return true;
}

bool Parser::parse_function(Module& m) {
  const Token& kw = next();  // 'func'
  const Token& name = peek();
  if (!expect(Tok::AtName, "a function name such as '@forward'")) return false;
  Function f(name.value);
  f.set_loc(loc(kw));
  std::vector<std::string> syms;
  values_.clear();
  next_value_ = 0;

  if (accept(Tok::Less)) {
    for (;;) {
      const Token& s = peek();
      if (!expect(Tok::Ident, "a symbol name")) return false;
      for (const std::string& prev : syms)
        if (prev == s.text) return fail(s, "symbol " + describe(s) + " is listed twice");
      syms.emplace_back(s.text);
      f.symbol(s.text);
      if (accept(Tok::Greater)) break;
      if (!expect(Tok::Comma, "',' or '>' in the symbol list")) return false;
    }
  }

  if (!expect(Tok::LParen, "'(' and the function arguments")) return false;
  std::vector<std::pair<Ref, Type>> args;
  if (!accept(Tok::RParen)) {
    for (;;) {
      const Token& a = peek();
      if (!expect(Tok::PercentName, "an argument such as '%x: f32[N]'")) return false;
      if (!expect(Tok::Colon, "':' and the argument type")) return false;
      Type t;
      if (!parse_type(t, syms, false, f.name())) return false;
      Ref r{a.value, loc(a)};
      if (!define_value(r)) return false;
      args.emplace_back(std::move(r), std::move(t));
      if (accept(Tok::RParen)) break;
      if (!expect(Tok::Comma, "',' or ')' after an argument")) return false;
    }
  }

  if (!expect(Tok::Arrow, "'->' and the result types")) return false;
  std::vector<Type> results;
  if (accept(Tok::LParen)) {
    if (!accept(Tok::RParen)) {
      for (;;) {
        Type t;
        if (!parse_type(t, syms, false, f.name())) return false;
        results.push_back(std::move(t));
        if (accept(Tok::RParen)) break;
        if (!expect(Tok::Comma, "',' or ')' in the result types")) return false;
      }
    }
  } else {
    Type t;
    if (!parse_type(t, syms, false, f.name())) return false;
    results.push_back(std::move(t));
  }
  f.set_result_types(std::move(results));

  if (peek().kind == Tok::Ident && peek().text == "where") {
    next();
    for (;;) {
      if (!parse_constraint(f)) return false;
      if (!accept(Tok::Comma)) break;
    }
  }
  if (!expect(Tok::LBrace, ("'{' to open the body of @" + f.name()).c_str())) return false;
  if (!expect_line_end("'{'")) return false;

  // The body: blocks of instructions up to the closing '}'.
  std::vector<PBlock> blocks;
  std::map<std::string, std::size_t> labels;
  auto unterminated = [&] { return fail(kw, "function @" + f.name() + " is missing its closing '}'"); };
  for (;;) {
    const Token& t = peek();
    if (t.kind == Tok::Newline) {
      next();
    } else if (t.kind == Tok::RBrace) {
      next();
      break;
    } else if (t.kind == Tok::Eof || (t.kind == Tok::Ident && t.text == "func" && t.col == 1)) {
      return unterminated();
    } else if (t.kind == Tok::CaretName) {
      if (labels.count(t.value)) return fail(t, "redefinition of block '^" + t.value + "'");
      labels.emplace(t.value, blocks.size());
      blocks.emplace_back();
      if (blocks.size() == 1) {
        // The entry block's arguments are the function's: defined before its body.
        blocks.back().args = args;
      }
      if (!parse_block_label(blocks.back(), blocks.size() == 1, f.name(), syms)) return false;
    } else if (t.kind == Tok::Error) {
      return fail(t, "");
    } else {
      if (blocks.empty())
        return fail(t, "expected a block label such as '^entry:' at the start of the body of @" + f.name() +
                           ", got " + describe(t));
      blocks.back().insts.emplace_back();
      if (!parse_inst(blocks.back().insts.back(), f.name(), syms)) return false;
    }
  }
  if (blocks.empty()) return fail(kw, "function @" + f.name() + " has no blocks: it needs at least '^entry:'");
  if (!expect_line_end("'}'")) return false;

  // Resolve every reference, reporting all unknown ones.
  std::size_t errors = diags_.size();
  auto value_id = [&](const Ref& r) {
    auto it = values_.find(r.id);
    if (it != values_.end()) return ValueId(it->second.index);
    diags_.push_back(Diagnostic{r.loc, Severity::Error, "unknown value '%" + r.id + "'", {}, {}});
    return ValueId{};
  };
  auto block_id = [&](const Ref& r) {
    auto it = labels.find(r.id);
    if (it != labels.end()) return BlockId(static_cast<std::uint32_t>(it->second));
    diags_.push_back(Diagnostic{r.loc, Severity::Error, "unknown block '^" + r.id + "'", {}, {}});
    return BlockId{};
  };
  struct Resolved {
    std::vector<ValueId> operands;
    std::vector<BlockCall> targets;
  };
  std::vector<std::vector<Resolved>> resolved(blocks.size());
  for (std::size_t b = 0; b < blocks.size(); ++b)
    for (const PInst& inst : blocks[b].insts) {
      Resolved r;
      for (const Ref& o : inst.operands) r.operands.push_back(value_id(o));
      for (const PTarget& t : inst.targets) {
        BlockCall c{block_id(t.block), {}};
        for (const Ref& a : t.args) c.args.push_back(value_id(a));
        r.targets.push_back(std::move(c));
      }
      resolved[b].push_back(std::move(r));
    }
  if (diags_.size() != errors) return false;

  // Build in text order, so values and blocks get the ids assigned above.
  auto value_name = [](const std::string& id) { return all_digits(id) ? std::string() : id; };
  for (std::size_t b = 0; b < blocks.size(); ++b) {
    PBlock& pb = blocks[b];
    BlockId bid = f.add_block(pb.label);
    TERNJIT_CHECK(bid.index == b, "parser: block ids are not in text order");
    for (auto& [ref, type] : pb.args) {
      ValueId v = f.add_block_arg(bid, std::move(type), value_name(ref.id));
      TERNJIT_CHECK(v.index == values_.at(ref.id).index, "parser: value ids are not in text order");
    }
    for (std::size_t k = 0; k < pb.insts.size(); ++k) {
      PInst& pi = pb.insts[k];
      InstId i = f.append_inst(bid, pi.op, std::move(resolved[b][k].operands), std::move(pi.types),
                               std::move(pi.attrs), pi.loc, std::move(resolved[b][k].targets));
      const auto& res = f.inst(i).results;
      for (std::size_t r = 0; r < res.size(); ++r) {
        TERNJIT_CHECK(res[r].index == values_.at(pi.results[r].id).index, "parser: value ids are not in text order");
        f.value(res[r]).name = value_name(pi.results[r].id);
      }
    }
  }
  m.functions().push_back(std::move(f));
  return true;
}

std::string Parser::source_line(std::uint32_t line) const {
  std::size_t start = 0;
  for (std::uint32_t l = 1; l < line; ++l) {
    start = text_.find('\n', start);
    if (start == std::string_view::npos) return {};
    ++start;
  }
  std::size_t end = text_.find('\n', start);
  std::string_view s = text_.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
  if (!s.empty() && s.back() == '\r') s.remove_suffix(1);
  return std::string(s);
}

void Parser::fill_source_lines(std::vector<Diagnostic>& diags) const {
  for (Diagnostic& d : diags) {
    if (d.loc.known() && d.loc.file == file_ && d.source_line.empty()) d.source_line = source_line(d.loc.line);
    fill_source_lines(d.notes);
  }
}

Result<Module> Parser::run() {
  toks_ = lex(text_);
  Module m;
  bool ok = true;
  while (ok) {
    const Token& t = peek();
    if (t.kind == Tok::Eof) break;
    if (t.kind == Tok::Newline) {
      next();
    } else if (t.kind == Tok::Ident && t.text == "meta") {
      ok = parse_meta(m);
    } else if (t.kind == Tok::Ident && t.text == "param") {
      ok = parse_param(m);
    } else if (t.kind == Tok::Ident && t.text == "func") {
      ok = parse_function(m);
    } else {
      ok = fail(t, "expected 'meta', 'param' or 'func', got " + describe(t));
    }
  }
  if (ok) diags_ = verify_module(m);
  if (diags_.empty()) return m;
  fill_source_lines(diags_);
  const Diagnostic& first = diags_[0];
  std::string msg = first.loc.file + ":" + std::to_string(first.loc.line) + ":" + std::to_string(first.loc.col) +
                    ": " + first.message;
  if (!first.loc.known()) msg = first.message;
  if (diags_.size() > 1)
    msg += " (and " + std::to_string(diags_.size() - 1) + " more error" + (diags_.size() == 2 ? ")" : "s)");
  return Error{ErrorCode::InvalidInput, std::move(msg), std::move(diags_)};
}

}  // namespace parse_detail

Result<Module> parse_module(std::string_view text, std::string_view file_name) {
  return parse_detail::Parser(text, file_name).run();
}

}  // namespace ternjit::ir
