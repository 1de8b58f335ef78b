// SPDX-License-Identifier: Apache-2.0
// parser.cpp - recursive-descent parser from `.tri` tokens to the syntax tree.
//
// Grammar (newlines matter only in statements, see parse_stmt):
//   file   := layer*
//   layer  := 'layer' IDENT '{' (param | fn)* '}'
//   param  := 'param' IDENT ':' (type | IDENT '[' expr ']')
//   fn     := 'fn' IDENT '(' [arg (',' arg)*] ')' '->' result '{' stmt* '}'
//   result := type | '(' type (',' type)* ')'
//   arg    := IDENT ':' type
//   type   := IDENT ['<' IDENT '>'] '[' [dim (',' dim)*] ']'
//   dim    := INT | IDENT ['.' IDENT]
//   stmt   := 'let' IDENT '=' expr | 'let' '(' IDENT (',' IDENT)* ')' '=' expr
//           | 'return' expr | 'for' IDENT 'in' expr '..' expr '{' stmt* '}'
//   expr   := mul (('+' | '-') mul)*
//   mul    := unary (('@' | '*' | '/') unary)*
//   unary  := '-' unary | primary
//   primary:= atom postfix*
//   atom   := INT | FLOAT | STRING | '(' expr (',' expr)* ')' | '[' [expr (',' expr)*] ']'
//           | IDENT | IDENT '.' IDENT
//           | IDENT ['<' IDENT '>'] '(' args ')' | IDENT '.' IDENT '(' args ')'
//   postfix:= '[' expr ']' | '.' IDENT (after an index) | '(' args ')' (after an index
//             or a member: an instance call)
#include "ir/dsl/parser.h"

#include <algorithm>
#include <utility>

#include "ir/dsl/lexer.h"

namespace ternjit::dsl {

namespace {

// Deeper nesting than this is almost certainly generated garbage; refusing it keeps
// the recursive descent far from the stack limit.
constexpr int kMaxNesting = 256;
// The most nodes on one path of an expression tree. Nesting alone does not bound it:
// `x + x + ... + x` is flat to parse but as deep as it is long to lower.
constexpr int kMaxHeight = 1024;
// The most `for` loops nested in one another (each level is a recursion of the parser
// and of the lowering).
constexpr int kMaxLoopNesting = 16;

class Parser {
 public:
  Parser(std::vector<Token> toks, std::string_view file, std::vector<Diagnostic>& diags)
      : toks_(std::move(toks)), file_(file), diags_(diags) {}

  File run() {
    File f;
    while (!at(TokenKind::Eof)) {
      failed_ = false;
      if (at(TokenKind::KwLayer)) {
        parse_layer(f);
      } else {
        error(peek(), "expected 'layer', got " + describe(peek()));
        sync_top();
      }
    }
    return f;
  }

 private:
  // ---------------------------------------------------------------- tokens

  [[nodiscard]] const Token& peek() const { return toks_[pos_]; }
  [[nodiscard]] const Token& prev() const { return toks_[pos_ == 0 ? 0 : pos_ - 1]; }
  [[nodiscard]] bool at(TokenKind k) const { return peek().kind == k; }
  const Token& advance() {
    const Token& t = toks_[pos_];
    if (t.kind != TokenKind::Eof) ++pos_;
    return t;
  }
  static Pos pos_of(const Token& t) { return Pos{t.line, t.col}; }

  // Reports the first error of the current unit (statement or declaration). An
  // Invalid token was already reported by the lexer, so it only marks the failure.
  void error(const Token& at_tok, std::string msg) {
    // Running into the end of a file that ends in an invalid token (an unterminated
    // comment swallows the rest) is a consequence of that error, not a new one.
    bool after_invalid_end = &at_tok == &toks_.back() && toks_.size() >= 2 &&
                             toks_[toks_.size() - 2].kind == TokenKind::Invalid;
    if (!failed_ && at_tok.kind != TokenKind::Invalid && !after_invalid_end)
      diags_.push_back(Diagnostic{SourceLoc{std::string(file_), at_tok.line, at_tok.col},
                                  Severity::Error, std::move(msg), {}, {}});
    failed_ = true;
  }

  // Reports "expected <what>, got <next token>". Inside a statement (outside
  // parentheses) a next token on a later line means the line ended too early, which
  // is reported where the line ends: "got end of line".
  void unexpected(const std::string& what) {
    if (in_stmt_ && nesting_ == 0 && pos_ > 0 && peek().line != prev().line) {
      Token end = prev();
      end.col += static_cast<std::uint32_t>(end.text.size());
      end.kind = TokenKind::Eof;  // a position, not an invalid token
      error(end, "expected " + what + ", got end of line");
      return;
    }
    error(peek(), "expected " + what + ", got " + describe(peek()));
  }

  // Consumes a token of kind `k`, or reports "expected <k> <context>, got <tok>".
  bool expect(TokenKind k, const std::string& context) {
    if (at(k)) {
      advance();
      return true;
    }
    unexpected(std::string(token_kind_name(k)) + " " + context);
    return false;
  }

  // ---------------------------------------------------------------- recovery

  // Top level: skip to the next `layer` outside any braces.
  void sync_top() {
    int depth = 0;
    std::size_t start = pos_;
    while (!at(TokenKind::Eof)) {
      if (depth == 0 && at(TokenKind::KwLayer) && pos_ != start) return;
      if (at(TokenKind::LBrace)) ++depth;
      if (at(TokenKind::RBrace)) depth = std::max(0, depth - 1);
      advance();
    }
  }

  // Inside a layer: skip to the next member keyword or the layer's `}`, stepping over
  // whole `{...}` groups (the body of a function whose header was broken).
  void sync_member() {
    int depth = 0;
    while (!at(TokenKind::Eof)) {
      if (depth == 0 && (at(TokenKind::KwParam) || at(TokenKind::KwFn) ||
                         at(TokenKind::KwLayer) || at(TokenKind::RBrace)))
        return;
      if (at(TokenKind::LBrace)) ++depth;
      if (at(TokenKind::RBrace)) --depth;
      advance();
    }
  }

  // Inside a body: skip the rest of the line the error happened on (ending early at
  // the function's `}`), so the next statement starts on a fresh line.
  void sync_stmt() {
    std::uint32_t line = prev().line;
    while (!at(TokenKind::Eof) && !at(TokenKind::RBrace) && peek().line <= line) advance();
  }

  // ---------------------------------------------------------------- declarations

  void parse_layer(File& f) {
    advance();  // 'layer'
    LayerDecl layer;
    layer.pos = pos_of(prev());
    if (!at(TokenKind::Ident)) {
      error(peek(), "expected a layer name after 'layer', got " + describe(peek()));
      sync_top();
      return;
    }
    layer.name = peek().text;
    layer.pos = pos_of(advance());
    if (!expect(TokenKind::LBrace, "after layer name '" + layer.name + "'")) {
      layer.ok = false;
      f.layers.push_back(std::move(layer));
      sync_top();
      return;
    }
    for (;;) {
      if (at(TokenKind::RBrace)) {
        advance();
        break;
      }
      failed_ = false;
      if (at(TokenKind::Eof) || at(TokenKind::KwLayer)) {
        error(peek(), "expected '}' to close layer '" + layer.name + "', got " + describe(peek()));
        break;
      }
      std::size_t before = pos_;
      bool ok = false;
      if (at(TokenKind::KwParam)) {
        ok = parse_param(layer);
      } else if (at(TokenKind::KwFn)) {
        ok = parse_fn(layer);
      } else {
        error(peek(), "expected 'param', 'fn' or '}' in layer '" + layer.name + "', got " +
                          describe(peek()));
      }
      if (!ok) {
        if (pos_ == before) advance();
        sync_member();
      }
    }
    f.layers.push_back(std::move(layer));
  }

  bool parse_param(LayerDecl& layer) {
    advance();  // 'param'
    if (!at(TokenKind::Ident)) {
      error(peek(), "expected a parameter name after 'param', got " + describe(peek()));
      return false;
    }
    ParamDecl p;
    p.name = peek().text;
    p.pos = pos_of(advance());
    layer.params.push_back(p);
    if (!expect(TokenKind::Colon, "after parameter name '" + p.name + "'")) return false;
    if (at(TokenKind::Ident) && peek().text != "Tensor" && peek().text != "TernaryTensor" &&
        toks_[pos_ + 1].kind == TokenKind::LBracket) {
      // An array of layer instances: `param blk: Block[30]`.
      ParamDecl& d = layer.params.back();
      d.instance_of = peek().text;
      d.instance_pos = pos_of(advance());
      advance();  // '['
      ++nesting_;
      auto count = parse_expr();
      --nesting_;
      if (!count) return false;
      if (!expect(TokenKind::RBracket, "after the instance count of '" + d.name + "'")) return false;
      d.count = std::move(*count);
      return true;
    }
    auto t = parse_type();
    if (!t) return false;
    layer.params.back().type = std::move(*t);
    return true;
  }

  bool parse_fn(LayerDecl& layer) {
    advance();  // 'fn'
    if (!at(TokenKind::Ident)) {
      error(peek(), "expected a function name after 'fn', got " + describe(peek()));
      return false;
    }
    FnDecl fn;
    fn.name = peek().text;
    fn.pos = pos_of(advance());
    fn.header_ok = false;
    layer.fns.push_back(fn);
    FnDecl& f = layer.fns.back();
    const std::string q = "'" + f.name + "'";
    if (!expect(TokenKind::LParen, "after function name " + q)) return false;
    if (!at(TokenKind::RParen)) {
      for (;;) {
        if (!at(TokenKind::Ident)) {
          error(peek(), "expected an argument name in the argument list of " + q + ", got " +
                            describe(peek()));
          return false;
        }
        ArgDecl a;
        a.name = peek().text;
        a.pos = pos_of(advance());
        if (!expect(TokenKind::Colon, "after argument name '" + a.name + "'")) return false;
        auto t = parse_type();
        if (!t) return false;
        a.type = std::move(*t);
        f.args.push_back(std::move(a));
        if (at(TokenKind::Comma)) {
          advance();
          continue;
        }
        if (!at(TokenKind::RParen)) {
          error(peek(), "expected ',' or ')' after argument '" + f.args.back().name + "', got " +
                            describe(peek()));
          return false;
        }
        break;
      }
    }
    advance();  // ')'
    if (!expect(TokenKind::Arrow, "and a result type after the arguments of " + q)) return false;
    if (at(TokenKind::LParen)) {
      // A tuple of results: `-> (T1, T2)`.
      advance();
      f.tuple_result = true;
      for (;;) {
        auto rt = parse_type();
        if (!rt) return false;
        f.results.emplace_back(std::move(*rt));
        if (at(TokenKind::Comma)) {
          advance();
          continue;
        }
        if (!expect(TokenKind::RParen, "to close the result types of " + q)) return false;
        break;
      }
      f.result = f.results.front();
    } else {
      auto rt = parse_type();
      if (!rt) return false;
      f.result = std::move(*rt);
    }
    if (!expect(TokenKind::LBrace, "to open the body of " + q)) return false;
    f.header_ok = true;
    f.close_pos = parse_block(f.body, f.body_ok, "function " + q);
    return true;
  }

  // Statements up to the closing '}' (consumed), whose position is returned. A
  // missing '}' is reported at what comes instead (a member keyword or the end of
  // the file), which is left for the caller; `ok` is cleared when a statement failed.
  Pos parse_block(std::vector<Stmt>& body, bool& ok, const std::string& what) {
    for (;;) {
      if (at(TokenKind::RBrace)) return pos_of(advance());
      failed_ = false;
      if (at(TokenKind::Eof) || at(TokenKind::KwFn) || at(TokenKind::KwParam) ||
          at(TokenKind::KwLayer)) {
        // A missing '}': report it, and let the layer loop handle what follows.
        error(peek(), "expected '}' to close " + what + ", got " + describe(peek()));
        ok = false;
        return pos_of(peek());
      }
      std::size_t before = pos_;
      in_stmt_ = true;
      bool stmt_ok = parse_stmt(body);
      in_stmt_ = false;
      if (!stmt_ok) {
        ok = false;
        if (pos_ == before) advance();
        sync_stmt();
      }
    }
  }

  std::optional<TypeExpr> parse_type() {
    if (!at(TokenKind::Ident) || (peek().text != "Tensor" && peek().text != "TernaryTensor")) {
      error(peek(), "expected a type ('Tensor' or 'TernaryTensor'), got " + describe(peek()));
      return std::nullopt;
    }
    TypeExpr t;
    t.ternary = peek().text == "TernaryTensor";
    t.pos = pos_of(advance());
    if (at(TokenKind::Less)) {
      if (t.ternary) {
        error(peek(), "expected '[' after 'TernaryTensor' (it takes no element type), got '<'");
        return std::nullopt;
      }
      advance();
      if (!at(TokenKind::Ident)) {
        error(peek(), "expected an element type after 'Tensor<', got " + describe(peek()));
        return std::nullopt;
      }
      t.elem = peek().text;
      t.elem_pos = pos_of(advance());
      if (!expect(TokenKind::Greater, "after 'Tensor<" + t.elem + "'")) return std::nullopt;
    }
    const char* name = t.ternary ? "TernaryTensor" : "Tensor";
    if (!expect(TokenKind::LBracket, std::string("after '") + name + "'")) return std::nullopt;
    if (at(TokenKind::RBracket)) {
      advance();
      return t;
    }
    for (;;) {
      DimExpr d;
      d.pos = pos_of(peek());
      if (at(TokenKind::Int)) {
        d.extent = advance().int_value;
      } else if (at(TokenKind::Ident)) {
        d.symbol = advance().text;
        if (at(TokenKind::Dot)) {
          advance();
          if (!at(TokenKind::Ident)) {
            error(peek(), "expected a symbol name after '" + d.symbol + ".', got " +
                              describe(peek()));
            return std::nullopt;
          }
          d.symbol += "." + advance().text;
        }
      } else {
        error(peek(), "expected a dimension (an integer or a symbol name), got " +
                          describe(peek()));
        return std::nullopt;
      }
      t.dims.push_back(std::move(d));
      if (at(TokenKind::Comma)) {
        advance();
        continue;
      }
      if (!at(TokenKind::RBracket)) {
        error(peek(), "expected ',' or ']' after a dimension, got " + describe(peek()));
        return std::nullopt;
      }
      advance();
      return t;
    }
  }

  // ---------------------------------------------------------------- statements

  // A statement ends at the end of its line (or at the body's '}'); an expression
  // continues onto the next line only inside parentheses, as in Python. Whatever
  // fails, the statement is kept without a value so later stages stay quiet.
  bool parse_stmt(std::vector<Stmt>& body) {
    nesting_ = 0;
    depth_ = 0;
    Stmt s;
    s.pos = pos_of(peek());
    if (at(TokenKind::KwLet)) {
      advance();
      s.kind = StmtKind::Let;
      if (at(TokenKind::LParen)) {
        // `let (a, b) = value`: the names of a tuple's elements.
        advance();
        ++nesting_;
        for (;;) {
          if (!at(TokenKind::Ident)) {
            unexpected("a name in 'let (...)'");
            body.push_back(s);
            return false;
          }
          s.names.emplace_back(peek().text, pos_of(peek()));
          advance();
          if (at(TokenKind::Comma)) {
            advance();
            continue;
          }
          if (!at(TokenKind::RParen)) {
            unexpected("',' or ')' in 'let (...)'");
            body.push_back(s);
            return false;
          }
          advance();
          break;
        }
        --nesting_;
        s.name_pos = s.names.front().second;
        body.push_back(s);
        if (!expect(TokenKind::Equal, "after 'let (...)'")) return false;
      } else {
        if (!at(TokenKind::Ident)) {
          unexpected("a name after 'let'");
          return false;
        }
        s.name = peek().text;
        s.name_pos = pos_of(advance());
        body.push_back(s);
        if (!expect(TokenKind::Equal, "after 'let " + s.name + "'")) return false;
      }
    } else if (at(TokenKind::KwReturn)) {
      advance();
      s.kind = StmtKind::Return;
      body.push_back(s);
    } else if (at(TokenKind::KwFor)) {
      return parse_for(body);
    } else {
      error(peek(), "expected a statement ('let', 'return' or 'for'), got " + describe(peek()));
      return false;
    }
    auto e = parse_expr();
    if (!e) return false;
    if (!end_of_stmt()) return false;
    body.back().value = std::move(*e);
    return true;
  }

  // The statement must end here: at the end of its line, a '}' or the end of the file.
  bool end_of_stmt() {
    if (!at(TokenKind::RBrace) && !at(TokenKind::Eof) && peek().line == prev().line) {
      error(peek(), "expected the end of the line after the statement, got " + describe(peek()));
      return false;
    }
    return true;
  }

  // `for i in lo..hi { body }`. A header that fails to parse skips its whole body (the
  // braces matched), so the body's '}' does not close the function.
  bool parse_for(std::vector<Stmt>& body) {
    Stmt s;
    s.kind = StmtKind::For;
    s.pos = pos_of(advance());  // 'for'
    body.push_back(s);
    auto header = [&]() -> bool {
      if (loop_nesting_ >= kMaxLoopNesting) {
        error(prev(), "'for' loops are nested too deeply (more than " + std::to_string(kMaxLoopNesting) +
                          " levels)");
        return false;
      }
      if (!at(TokenKind::Ident)) {
        unexpected("a loop variable after 'for'");
        return false;
      }
      Stmt& f = body.back();
      f.name = peek().text;
      f.name_pos = pos_of(advance());
      if (!at(TokenKind::Ident) || peek().text != "in") {
        unexpected("'in' after 'for " + f.name + "'");
        return false;
      }
      advance();
      auto lo = parse_expr();
      if (!lo) return false;
      if (!expect(TokenKind::DotDot, "in the range of 'for " + f.name + "' (as in 0..4)")) return false;
      auto hi = parse_expr();
      if (!hi) return false;
      f.value = std::move(*lo);
      f.upper = std::move(*hi);
      return expect(TokenKind::LBrace, "to open the body of 'for " + f.name + "'");
    };
    if (!header()) {
      body.back().value.reset();
      skip_for_body();
      return true;  // reported; the statement is kept without a value
    }
    ++loop_nesting_;
    bool ok = true;
    parse_block(body.back().body, ok, "the body of 'for " + body.back().name + "'");
    --loop_nesting_;
    body.back().body_ok = ok;
    return end_of_stmt();
  }

  // After a broken `for` header: skips the rest of the line and, when it opened a
  // brace, everything up to the matching '}'.
  void skip_for_body() {
    std::uint32_t line = prev().line;
    int depth = 0;
    while (!at(TokenKind::Eof) && peek().line <= line && !(depth == 0 && at(TokenKind::RBrace))) {
      if (at(TokenKind::LBrace)) ++depth;
      advance();
    }
    while (depth > 0 && !at(TokenKind::Eof) && !at(TokenKind::KwFn) && !at(TokenKind::KwLayer) &&
           !at(TokenKind::KwParam)) {
      if (at(TokenKind::LBrace)) ++depth;
      if (at(TokenKind::RBrace)) --depth;
      advance();
    }
  }

  // ---------------------------------------------------------------- expressions

  // True when the next token may continue the expression: it is on the same line,
  // or we are inside parentheses.
  [[nodiscard]] bool continues() const { return nesting_ > 0 || peek().line == prev().line; }

  // `e` with its height set from its operands, or an error at `e` when the tree gets
  // taller than kMaxHeight.
  std::optional<Expr> sized(Expr e) {
    for (const Expr& a : e.args) e.height = std::max(e.height, a.height + 1);
    for (const Expr& a : e.callee) e.height = std::max(e.height, a.height + 1);
    if (e.height <= kMaxHeight) return e;
    Token at_tok = peek();
    at_tok.line = e.pos.line;
    at_tok.col = e.pos.col;
    at_tok.kind = TokenKind::Eof;  // a position, not an invalid token
    error(at_tok, "expression is too deep (more than " + std::to_string(kMaxHeight) +
                      " levels of operators and calls): split it with 'let'");
    return std::nullopt;
  }

  std::optional<Expr> binary(BinaryOp op, Pos pos, Expr lhs, Expr rhs) {
    Expr e;
    e.kind = ExprKind::Binary;
    e.op = op;
    e.pos = pos;
    e.args.push_back(std::move(lhs));
    e.args.push_back(std::move(rhs));
    return sized(std::move(e));
  }

  std::optional<Expr> parse_expr() {
    auto lhs = parse_mul();
    if (!lhs) return std::nullopt;
    while ((at(TokenKind::Plus) || at(TokenKind::Minus)) && continues()) {
      BinaryOp op = at(TokenKind::Plus) ? BinaryOp::Add : BinaryOp::Sub;
      Pos p = pos_of(advance());
      auto rhs = parse_mul();
      if (!rhs) return std::nullopt;
      lhs = binary(op, p, std::move(*lhs), std::move(*rhs));
      if (!lhs) return std::nullopt;
    }
    return lhs;
  }

  std::optional<Expr> parse_mul() {
    auto lhs = parse_unary();
    if (!lhs) return std::nullopt;
    while ((at(TokenKind::At) || at(TokenKind::Star) || at(TokenKind::Slash)) && continues()) {
      BinaryOp op = at(TokenKind::At) ? BinaryOp::MatMul
                    : at(TokenKind::Star) ? BinaryOp::Mul
                                          : BinaryOp::Div;
      Pos p = pos_of(advance());
      auto rhs = parse_unary();
      if (!rhs) return std::nullopt;
      lhs = binary(op, p, std::move(*lhs), std::move(*rhs));
      if (!lhs) return std::nullopt;
    }
    return lhs;
  }

  std::optional<Expr> parse_unary() {
    if (++depth_ > kMaxNesting) {
      error(peek(), "expression is nested too deeply (more than " + std::to_string(kMaxNesting) +
                        " levels)");
      return std::nullopt;
    }
    std::optional<Expr> r;
    if (at(TokenKind::Minus)) {
      Expr e;
      e.kind = ExprKind::Neg;
      e.pos = pos_of(advance());
      auto operand = parse_unary();
      if (operand) {
        e.args.push_back(std::move(*operand));
        r = sized(std::move(e));
      }
    } else {
      r = parse_primary();
    }
    --depth_;
    return r;
  }

  std::optional<Expr> parse_primary() {
    auto e = parse_atom();
    if (!e) return std::nullopt;
    return parse_postfix(std::move(*e));
  }

  // `[a, b, ...]` or `(a, b, ...)` after its opening token (consumed): the elements up
  // to `close`. `lone` is set when a parenthesis held one element without a comma.
  bool parse_elements(std::vector<Expr>& out, TokenKind close, const std::string& what, bool& lone) {
    ++nesting_;
    lone = false;
    if (!(close == TokenKind::RBracket && at(TokenKind::RBracket))) {
      for (;;) {
        auto a = parse_expr();
        if (!a) return false;
        out.push_back(std::move(*a));
        if (at(TokenKind::Comma)) {
          advance();
          continue;
        }
        if (!at(close)) {
          unexpected("',' or " + std::string(token_kind_name(close)) + " " + what);
          return false;
        }
        lone = out.size() == 1;
        break;
      }
    }
    advance();  // the closing token
    --nesting_;
    return true;
  }

  std::optional<Expr> parse_atom() {
    if (at(TokenKind::Int) || at(TokenKind::Float)) {
      const Token& t = advance();
      Expr e;
      e.kind = ExprKind::Number;
      e.pos = pos_of(t);
      e.text = t.text;
      e.number = t.float_value;
      e.is_int = t.kind == TokenKind::Int;
      return e;
    }
    if (at(TokenKind::String)) {
      const Token& t = advance();
      Expr e;
      e.kind = ExprKind::String;
      e.pos = pos_of(t);
      e.text = t.text;
      return e;
    }
    if (at(TokenKind::LParen)) {
      // `(e)` groups; `(a, b, ...)` is a tuple.
      Expr e;
      e.kind = ExprKind::Tuple;
      e.pos = pos_of(advance());
      bool lone = false;
      if (!parse_elements(e.args, TokenKind::RParen, "to close '('", lone)) return std::nullopt;
      if (lone) return std::move(e.args.front());
      return sized(std::move(e));
    }
    if (at(TokenKind::LBracket)) {
      Expr e;
      e.kind = ExprKind::List;
      e.pos = pos_of(advance());
      bool lone = false;
      if (!parse_elements(e.args, TokenKind::RBracket, "in the list", lone)) return std::nullopt;
      return sized(std::move(e));
    }
    if (!at(TokenKind::Ident)) {
      unexpected("an expression");
      return std::nullopt;
    }
    Expr e;
    e.name = peek().text;
    e.pos = pos_of(advance());
    std::string shown = e.name;
    if (at(TokenKind::Dot)) {
      advance();
      if (!at(TokenKind::Ident)) {
        unexpected("a name after '" + e.name + ".'");
        return std::nullopt;
      }
      e.member = peek().text;
      e.member_pos = pos_of(advance());
      shown += "." + e.member;
      if (!at(TokenKind::LParen) || !continues()) {
        // `Layer.S` (a qualified symbol, in a list of dims) or a misuse the lowering
        // reports: a Member of the Name.
        Expr base;
        base.kind = ExprKind::Name;
        base.name = e.name;
        base.pos = e.pos;
        Expr m;
        m.kind = ExprKind::Member;
        m.pos = e.member_pos;
        m.member = e.member;
        m.member_pos = e.member_pos;
        m.args.push_back(std::move(base));
        return sized(std::move(m));
      }
    } else if (at(TokenKind::Less)) {
      advance();
      e.has_type_arg = true;
      if (!at(TokenKind::Ident)) {
        unexpected("an element type after '" + e.name + "<'");
        return std::nullopt;
      }
      e.type_arg = peek().text;
      e.type_arg_pos = pos_of(advance());
      shown += "<" + e.type_arg + ">";
      if (!expect(TokenKind::Greater, "after '" + e.name + "<" + e.type_arg + "'"))
        return std::nullopt;
      if (!at(TokenKind::LParen)) {
        unexpected("'(' to call '" + shown + "'");
        return std::nullopt;
      }
    }
    if (!at(TokenKind::LParen)) {
      e.kind = ExprKind::Name;
      return e;
    }
    e.kind = ExprKind::Call;
    advance();  // '('
    bool lone = false;
    if (!at(TokenKind::RParen)) {
      if (!parse_elements(e.args, TokenKind::RParen, "in the arguments of '" + shown + "'", lone))
        return std::nullopt;
    } else {
      advance();
    }
    return sized(std::move(e));
  }

  // Indexing `e[i]`, members of an instance `blk[i].p` and instance calls
  // `blk[i](args)` / `blk[i].fn(args)`, on the same line (or inside parentheses).
  std::optional<Expr> parse_postfix(Expr e) {
    for (;;) {
      if (at(TokenKind::LBracket) && continues()) {
        Expr ix;
        ix.kind = ExprKind::Index;
        ix.pos = pos_of(advance());
        ix.name = e.name;
        ++nesting_;
        auto idx = parse_expr();
        if (!idx) return std::nullopt;
        if (!expect(TokenKind::RBracket, "to close the index")) return std::nullopt;
        --nesting_;
        ix.args.push_back(std::move(e));
        ix.args.push_back(std::move(*idx));
        auto sz = sized(std::move(ix));
        if (!sz) return std::nullopt;
        e = std::move(*sz);
        continue;
      }
      if (at(TokenKind::Dot) && continues() && e.kind == ExprKind::Index) {
        advance();
        if (!at(TokenKind::Ident)) {
          unexpected("a parameter or function name after '.'");
          return std::nullopt;
        }
        Expr m;
        m.kind = ExprKind::Member;
        m.member = peek().text;
        m.member_pos = pos_of(advance());
        m.pos = m.member_pos;
        m.name = e.name;
        m.args.push_back(std::move(e));
        auto sz = sized(std::move(m));
        if (!sz) return std::nullopt;
        e = std::move(*sz);
        continue;
      }
      if (at(TokenKind::LParen) && continues() &&
          (e.kind == ExprKind::Index || (e.kind == ExprKind::Member && e.args[0].kind == ExprKind::Index))) {
        Expr c;
        c.kind = ExprKind::Call;
        advance();  // '('
        // Diagnostics about the call point at the start of its callee: `blk` of blk[i](x).
        const Expr* root = &e;
        while (!root->args.empty() && (root->kind == ExprKind::Index || root->kind == ExprKind::Member))
          root = &root->args[0];
        c.pos = root->pos;
        c.name = e.name;
        if (e.kind == ExprKind::Member) c.member = e.member;
        c.callee.push_back(std::move(e));
        bool lone = false;
        if (!at(TokenKind::RParen)) {
          if (!parse_elements(c.args, TokenKind::RParen, "in the arguments of the instance call", lone))
            return std::nullopt;
        } else {
          advance();
        }
        auto sz = sized(std::move(c));
        if (!sz) return std::nullopt;
        e = std::move(*sz);
        continue;
      }
      return e;
    }
  }

  std::vector<Token> toks_;
  std::string_view file_;
  std::vector<Diagnostic>& diags_;
  std::size_t pos_ = 0;
  bool failed_ = false;  ///< the current unit has reported its one error
  int nesting_ = 0;      ///< open parentheses in the current statement
  int depth_ = 0;        ///< recursion depth of parse_unary
  bool in_stmt_ = false; ///< parsing a statement (where line ends matter)
  int loop_nesting_ = 0; ///< enclosing `for` bodies
};

}  // namespace

ParseOutput parse_file(std::string_view source, std::string_view file_name) {
  ParseOutput out;
  std::vector<Token> toks = lex(source, file_name, out.diagnostics);
  out.file = Parser(std::move(toks), file_name, out.diagnostics).run();
  std::stable_sort(out.diagnostics.begin(), out.diagnostics.end(),
                   [](const Diagnostic& a, const Diagnostic& b) {
                     return std::pair(a.loc.line, a.loc.col) < std::pair(b.loc.line, b.loc.col);
                   });
  return out;
}

}  // namespace ternjit::dsl
