// SPDX-License-Identifier: Apache-2.0
// parse.cpp - the IR text parser: a line-aware lexer and a recursive-descent parser.
//
// A function is parsed in two steps. First its text is read into a small syntax tree,
// giving every defined value the id it will get once built (block arguments and
// results are created in text order), so forward references across blocks resolve.
// Then the function is built with Function::append_inst using the declared result
// types; the verifier, run on the whole module afterwards, checks them against
// infer_types and reports every problem at once.
#include "ir/parse.h"

#include <charconv>
#include <limits>
#include <map>
#include <optional>

#include "ir/builder.h"
#include "ir/verify.h"

namespace ternjit::ir {

namespace {

// ---------------------------------------------------------------- lexer

enum class Tok : std::uint8_t {
  Eof, Newline, Ident, AtName, PercentName, CaretName, Number, String,
  LParen, RParen, LBracket, RBracket, LBrace, RBrace, Less, Greater, LessEq, GreaterEq,
  Comma, Colon, Equal, EqEq, Arrow, Percent, Error,
};

struct Token {
  Tok kind = Tok::Eof;
  std::string_view text;  // as written (sigils included)
  std::string value;      // names without sigil, decoded strings, or an Error's message
  std::uint32_t line = 0;
  std::uint32_t col = 0;
};

bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_char(char c) { return is_alpha(c) || is_digit(c) || c == '.'; }
bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!is_digit(c)) return false;
  return true;
}

std::string show_char(char c) {
  auto u = static_cast<unsigned char>(c);
  if (u >= 0x20 && u < 0x7f) return std::string(1, c);
  static constexpr char kHex[] = "0123456789abcdef";
  return std::string("\\x") + kHex[u >> 4] + kHex[u & 15];
}

class Lexer {
 public:
  explicit Lexer(std::string_view src) : src_(src) {}

  std::vector<Token> run() {
    std::vector<Token> out;
    while (i_ < src_.size()) {
      char c = src_[i_];
      if (c == ' ' || c == '\t' || c == '\r') {
        ++i_;
      } else if (c == '\n') {
        out.push_back(make(Tok::Newline, i_, 1));
        ++i_;
        ++line_;
        line_start_ = i_;
      } else if (c == '/' && peek(1) == '/') {
        while (i_ < src_.size() && src_[i_] != '\n') ++i_;
      } else if (c == '"') {
        out.push_back(string());
      } else if (c == '@' || c == '%' || c == '^') {
        out.push_back(sigil_name(c));
      } else if (is_digit(c) || (c == '-' && (is_digit(peek(1)) || peek(1) == '.' || is_alpha(peek(1)))) ||
                 (c == '.' && is_digit(peek(1)))) {
        out.push_back(number());
      } else if (is_alpha(c)) {
        std::size_t start = i_;
        // A '-' between letters joins a word ("tern2-sm", the one spelling of that format).
        while (i_ < src_.size() && (is_name_char(src_[i_]) || (src_[i_] == '-' && is_alpha(peek(1))))) ++i_;
        Token t = make(Tok::Ident, start, i_ - start);
        t.value = std::string(t.text);
        out.push_back(std::move(t));
      } else {
        out.push_back(punct());
      }
      if (!out.empty() && out.back().kind == Tok::Error) return out;
    }
    out.push_back(make(Tok::Eof, i_, 0));
    return out;
  }

 private:
  [[nodiscard]] char peek(std::size_t k) const { return i_ + k < src_.size() ? src_[i_ + k] : '\0'; }

  Token make(Tok kind, std::size_t start, std::size_t len) const {
    Token t;
    t.kind = kind;
    t.text = src_.substr(start, len);
    t.line = line_;
    t.col = static_cast<std::uint32_t>(start - line_start_ + 1);
    return t;
  }
  Token error(std::size_t start, std::string msg) const {
    Token t = make(Tok::Error, start, 1);
    t.value = std::move(msg);
    return t;
  }

  Token string() {
    std::size_t start = i_++;
    std::string value;
    while (i_ < src_.size() && src_[i_] != '"' && src_[i_] != '\n') {
      char c = src_[i_++];
      if (c != '\\') {
        value += c;
        continue;
      }
      char e = i_ < src_.size() ? src_[i_++] : '\0';
      if (e == '"' || e == '\\') value += e;
      else if (e == 'n') value += '\n';
      else if (e == 't') value += '\t';
      else if (e == 'x' && i_ + 2 <= src_.size()) {
        unsigned byte = 0;
        auto r = std::from_chars(src_.data() + i_, src_.data() + i_ + 2, byte, 16);
        if (r.ptr != src_.data() + i_ + 2) return error(i_ - 2, "invalid escape in string: '\\x' needs two hex digits");
        value += static_cast<char>(byte);
        i_ += 2;
      } else {
        return error(i_ - 2, "invalid escape '\\" + show_char(e) + "' in string (use \\\" \\\\ \\n \\t \\xHH)");
      }
    }
    if (i_ >= src_.size() || src_[i_] != '"') return error(start, "unterminated string");
    ++i_;
    Token t = make(Tok::String, start, i_ - start);
    t.value = std::move(value);
    return t;
  }

  Token sigil_name(char sigil) {
    std::size_t start = i_++;
    // @names are global identifiers; %values and ^blocks may start with a digit.
    bool ok = sigil == '@' ? is_alpha(peek(0)) : is_name_char(peek(0));
    if (!ok) {
      if (sigil == '%') return make(Tok::Percent, start, 1);
      return error(start, std::string("expected a name after '") + sigil + "'");
    }
    while (i_ < src_.size() && is_name_char(src_[i_])) ++i_;
    Token t = make(sigil == '@' ? Tok::AtName : sigil == '%' ? Tok::PercentName : Tok::CaretName, start,
                   i_ - start);
    t.value = std::string(t.text.substr(1));
    return t;
  }

  // A number is lexed loosely ('-'? then name characters, with a sign allowed after
  // an exponent 'e'); the parser converts it with from_chars and rejects leftovers.
  Token number() {
    std::size_t start = i_;
    if (src_[i_] == '-') ++i_;
    bool numeric = is_digit(peek(0)) || peek(0) == '.';
    while (i_ < src_.size()) {
      char c = src_[i_];
      if (is_name_char(c)) {
        ++i_;
      } else if (numeric && (c == '+' || c == '-') && (src_[i_ - 1] == 'e' || src_[i_ - 1] == 'E')) {
        ++i_;
      } else {
        break;
      }
    }
    return make(Tok::Number, start, i_ - start);
  }

  Token punct() {
    std::size_t start = i_;
    char c = src_[i_++];
    auto one = [&](Tok k) { return make(k, start, 1); };
    auto two = [&](Tok k) {
      ++i_;
      return make(k, start, 2);
    };
    switch (c) {
      case '(': return one(Tok::LParen);
      case ')': return one(Tok::RParen);
      case '[': return one(Tok::LBracket);
      case ']': return one(Tok::RBracket);
      case '{': return one(Tok::LBrace);
      case '}': return one(Tok::RBrace);
      case ',': return one(Tok::Comma);
      case ':': return one(Tok::Colon);
      case '=': return peek(0) == '=' ? two(Tok::EqEq) : one(Tok::Equal);
      case '<': return peek(0) == '=' ? two(Tok::LessEq) : one(Tok::Less);
      case '>': return peek(0) == '=' ? two(Tok::GreaterEq) : one(Tok::Greater);
      case '-':
        if (peek(0) == '>') return two(Tok::Arrow);
        break;
      default: break;
    }
    return error(start, "unexpected character '" + show_char(c) + "'");
  }

  std::string_view src_;
  std::size_t i_ = 0;
  std::uint32_t line_ = 1;
  std::size_t line_start_ = 0;
};

std::string describe(const Token& t) {
  switch (t.kind) {
    case Tok::Eof: return "end of file";
    case Tok::Newline: return "end of line";
    default: return "'" + std::string(t.text) + "'";
  }
}

// ---------------------------------------------------------------- syntax tree

struct Ref {
  std::string id;  // without the sigil
  SourceLoc loc;
};

struct PTarget {
  Ref block;
  std::vector<Ref> args;
};

struct PInst {
  Op op = Op::Const;
  SourceLoc loc;
  std::vector<Ref> results;
  std::vector<Ref> operands;
  std::vector<PTarget> targets;
  Attrs attrs;
  std::vector<Type> types;
};

struct PBlock {
  std::string label;
  std::vector<std::pair<Ref, Type>> args;
  std::vector<PInst> insts;
};

// One item of a list attribute: a number, or `word(n, ...)` (ewise steps).
struct PListItem {
  const Token* tok = nullptr;        // the number or the word
  bool call = false;                 // written as word(args)
  std::vector<const Token*> args;    // the numbers in the parentheses
};

// One attribute as written: `key = value`, where value is a number, a word or a list.
struct PAttrValue {
  enum class Kind : std::uint8_t { Number, Word, List } kind = Kind::Number;
  const Token* tok = nullptr;  // the number or word (List: the '[')
  std::vector<PListItem> items;
};

struct PAttr {
  const Token* key = nullptr;
  PAttrValue value;
};

// ---------------------------------------------------------------- parser

class Parser {
 public:
  Parser(std::string_view text, std::string_view file) : text_(text), file_(file) {}

  Result<Module> run();

 private:
  // Token access.
  const Token& peek() const { return toks_[pos_]; }
  const Token& next() {
    const Token& t = toks_[pos_];
    if (t.kind != Tok::Eof && t.kind != Tok::Error) ++pos_;
    return t;
  }
  bool accept(Tok k) {
    if (peek().kind != k) return false;
    next();
    return true;
  }
  [[nodiscard]] SourceLoc loc(const Token& t) const { return SourceLoc{std::string(file_), t.line, t.col}; }

  // Errors: the first one is kept; `false` propagates up.
  bool fail(const Token& at, std::string msg) { return fail_at(loc(at), std::move(msg), at); }
  bool fail_at(SourceLoc where, std::string msg, const Token& at) {
    if (at.kind == Tok::Error) msg = at.value;  // a lexer error explains itself better
    diags_.push_back(Diagnostic{std::move(where), Severity::Error, std::move(msg), {}, {}});
    return false;
  }
  bool expect(Tok k, const char* what) {
    if (peek().kind == k) {
      next();
      return true;
    }
    return fail(peek(), std::string("expected ") + what + ", got " + describe(peek()));
  }
  bool expect_line_end(const char* after) {
    if (peek().kind == Tok::Eof || accept(Tok::Newline)) return true;
    return fail(peek(), "unexpected " + describe(peek()) + " after " + after);
  }

  // Numbers.
  bool parse_int(const Token& t, std::int64_t& out);
  bool parse_double(const Token& t, double& out);

  // Grammar.
  bool parse_meta(Module& m);
  bool parse_param(Module& m);
  bool parse_type(Type& out, std::vector<std::string>& syms, bool may_declare, const std::string& func);
  bool parse_function(Module& m);
  bool parse_constraint(Function& f);
  bool parse_block_label(PBlock& b, bool entry, const std::string& func, std::vector<std::string>& syms);
  bool parse_inst(PInst& inst, const std::string& func, std::vector<std::string>& syms);
  bool parse_ref_list(std::vector<Ref>& out);
  bool parse_attrs(std::vector<PAttr>& out);
  bool build_attrs(PInst& inst, const Token& op_tok, const Token* brace, const std::vector<PAttr>& attrs);
  bool define_value(const Ref& r);
  void fill_source_lines(std::vector<Diagnostic>& diags) const;
  [[nodiscard]] std::string source_line(std::uint32_t line) const;

  std::string_view text_;
  std::string_view file_;
  std::vector<Token> toks_;
  std::size_t pos_ = 0;
  std::vector<Diagnostic> diags_;

  // Per function: defined value ids -> creation index (and where), block labels.
  struct ValueDefInfo {
    std::uint32_t index;
    SourceLoc loc;
  };
  std::map<std::string, ValueDefInfo> values_;
  std::uint32_t next_value_ = 0;
};

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
// (softmax's keepdims is optional), unknown and mistyped fields are errors.
bool Parser::build_attrs(PInst& inst, const Token& op_tok, const Token* brace, const std::vector<PAttr>& attrs) {
  const std::string opq = "'" + std::string(op_name(inst.op)) + "'";
  std::vector<std::string> fields;
  switch (attrs_index_for(inst.op)) {
    case 1: fields = {"value", "values"}; break;
    case 4: fields = {"to"}; break;
    case 5: fields = {"perm"}; break;
    case 6: fields = {"axis", "keepdims"}; break;
    case 7: fields = {"eps"}; break;
    case 8: fields = {"threshold"}; break;
    case 9: fields = {"x_scale", "w_scale", "bias", "residual", "act"}; break;
    case 10: fields = {"steps"}; break;
    case 11: fields = {"layout"}; break;
    default: break;
  }
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

  switch (attrs_index_for(inst.op)) {
    case 1: {
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
    case 4: {
      const PAttr* to = find("to");
      if (!to) return missing("to");
      auto k = to->value.kind == PAttrValue::Kind::Word ? parse_elem_kind(to->value.tok->text) : std::nullopt;
      if (!k) return fail(*to->value.tok, "unknown element kind " + describe(*to->value.tok) + " for 'to'");
      inst.attrs = CastAttrs{*k};
      return true;
    }
    case 5: {
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
    case 6: {
      AxisAttrs ax;
      const PAttr* axis = find("axis");
      if (!axis) return missing("axis");
      if (!get_int(*axis, ax.axis)) return false;
      const PAttr* keep = find("keepdims");
      if (!keep && inst.op != Op::Softmax) return missing("keepdims");
      if (keep) {
        if (keep->value.kind != PAttrValue::Kind::Word ||
            (keep->value.tok->text != "true" && keep->value.tok->text != "false"))
          return fail(*keep->value.tok, "attribute 'keepdims' must be true or false, got " + describe(*keep->value.tok));
        ax.keepdims = keep->value.tok->text == "true";
      }
      inst.attrs = ax;
      return true;
    }
    case 7: {
      const PAttr* eps = find("eps");
      if (!eps) return missing("eps");
      EpsAttrs e;
      if (!get_double(*eps, e.eps)) return false;
      inst.attrs = e;
      return true;
    }
    case 8: {
      const PAttr* th = find("threshold");
      if (!th) return missing("threshold");
      ThresholdAttrs t;
      if (!get_double(*th, t.threshold)) return false;
      inst.attrs = t;
      return true;
    }
    case 9: {
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
    case 10: {
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
    case 11: {
      const PAttr* layout = find("layout");
      if (!layout) return missing("layout");
      auto l = layout->value.kind == PAttrValue::Kind::Word ? parse_weight_format(layout->value.tok->text)
                                                            : std::nullopt;
      if (!l)
        return fail(*layout->value.tok, "unknown ternary layout " + describe(*layout->value.tok) +
                                            " (expected plain, tern2, tern2-sm, tern1.6 or bitplane)");
      inst.attrs = LayoutAttrs{*l};
      return true;
    }
    default:
      inst.attrs = NoAttrs{};
      return true;
  }
}

// [results '='] op operands [attrs] [':' types]
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
  if (inst.op != Op::Param && inst.op != Op::Call && !build_attrs(inst, op_tok, brace, attrs)) return false;
  if (brace && (inst.op == Op::Param || inst.op == Op::Call))
    return fail(*brace, "'" + std::string(op_name(inst.op)) + "' takes no attributes");

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
  toks_ = Lexer(text_).run();
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

}  // namespace

Result<Module> parse_module(std::string_view text, std::string_view file_name) {
  return Parser(text, file_name).run();
}

}  // namespace ternjit::ir
