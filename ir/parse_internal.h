// SPDX-License-Identifier: Apache-2.0
// parse_internal.h - the IR text parser's tokens, syntax tree and Parser class, shared by its files.
//
// parse_lexer.cpp turns text into tokens, parse.cpp reads modules, functions, types and
// instructions, and parse_attrs.cpp reads attribute dictionaries into the op's struct.
// Callers use parse.h's parse_module.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ir/ir.h"

namespace ternjit::ir::parse_detail {

// ---------------------------------------------------------------- lexer

/// The kind of a token.
enum class Tok : std::uint8_t {
  Eof, Newline, Ident, AtName, PercentName, CaretName, Number, String,
  LParen, RParen, LBracket, RBracket, LBrace, RBrace, Less, Greater, LessEq, GreaterEq,
  Comma, Colon, Equal, EqEq, Arrow, Percent, Error,
};

/// One token with its 1-based line and column.
struct Token {
  Tok kind = Tok::Eof;
  std::string_view text;  // as written (sigils included)
  std::string value;      // names without sigil, decoded strings, or an Error's message
  std::uint32_t line = 0;
  std::uint32_t col = 0;
};

/// The tokens of `src`, ending in Eof, or at the first Error token (its value says why).
std::vector<Token> lex(std::string_view src);
/// A token for a message: "end of file", "end of line" or the text in quotes.
std::string describe(const Token& t);
/// True for a non-empty run of decimal digits (a value id such as %12).
bool all_digits(std::string_view s);

// ---------------------------------------------------------------- syntax tree

/// A reference to a value or block as written: id without sigil, and where.
struct Ref {
  std::string id;  // without the sigil
  SourceLoc loc;
};

/// A successor as written: the block and its arguments.
struct PTarget {
  Ref block;
  std::vector<Ref> args;
};

/// An instruction as written, before references are resolved.
struct PInst {
  Op op = Op::Const;
  SourceLoc loc;
  std::vector<Ref> results;
  std::vector<Ref> operands;
  std::vector<PTarget> targets;
  Attrs attrs;
  std::vector<Type> types;
};

/// A block as written: label, arguments and instructions.
struct PBlock {
  std::string label;
  std::vector<std::pair<Ref, Type>> args;
  std::vector<PInst> insts;
};

/// One item of a list attribute: a number, or `word(n, ...)` (ewise steps).
struct PListItem {
  const Token* tok = nullptr;        // the number or the word
  bool call = false;                 // written as word(args)
  std::vector<const Token*> args;    // the numbers in the parentheses
};

/// One attribute as written: `key = value`, where value is a number, a word or a list.
struct PAttrValue {
  enum class Kind : std::uint8_t { Number, Word, List } kind = Kind::Number;
  const Token* tok = nullptr;  // the number or word (List: the '[')
  std::vector<PListItem> items;
};

/// A `key = value` pair of an attribute dictionary.
struct PAttr {
  const Token* key = nullptr;
  PAttrValue value;
};


// ---------------------------------------------------------------- parser

/// Reads a module's text: the first syntax error ends parsing; then the verifier reports
/// every problem of the built module.
class Parser {
 public:
  Parser(std::string_view text, std::string_view file) : text_(text), file_(file) {}

  /// Parses and verifies the whole text; the errors with their source lines otherwise.
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


}  // namespace ternjit::ir::parse_detail
