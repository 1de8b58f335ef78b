// SPDX-License-Identifier: Apache-2.0
// lexer.h - splits `.tri` source text into located tokens.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ternjit/result.h"

namespace ternjit::dsl {

/// The kinds of token. Keywords are recognised by the lexer; `Tensor` and
/// `TernaryTensor` are ordinary identifiers (the parser gives them meaning).
enum class TokenKind : std::uint8_t {
  Ident,     ///< [A-Za-z_][A-Za-z0-9_]*
  Int,       ///< decimal digits
  Float,     ///< digits '.' digits, and/or an exponent: 0.5, 1e-5, 2.5E3
  KwLayer,   ///< layer
  KwParam,   ///< param
  KwFn,      ///< fn
  KwLet,     ///< let
  KwReturn,  ///< return
  KwFor,     ///< for (`in` stays an identifier: the parser reads it in a `for` header)
  String,    ///< "text" on one line, printable ASCII without '"' or '\\'; `text` holds the contents
  LBrace,    ///< {
  RBrace,    ///< }
  LParen,    ///< (
  RParen,    ///< )
  LBracket,  ///< [
  RBracket,  ///< ]
  Less,      ///< <
  Greater,   ///< >
  Comma,     ///< ,
  Colon,     ///< :
  Dot,       ///< .
  DotDot,    ///< .. (a range: `for i in 0..4`)
  Arrow,     ///< ->
  Equal,     ///< =
  Plus,      ///< +
  Minus,     ///< -
  Star,      ///< *
  Slash,     ///< /
  At,        ///< @
  Invalid,   ///< a character or number the lexer rejected (already reported)
  Eof,       ///< end of input (always the last token)
};

/// One token: its kind, its exact spelling and where it starts (1-based line and
/// byte column). For Int, `int_value` holds the value; for Float and Int,
/// `float_value` holds the value as a double.
struct Token {
  TokenKind kind = TokenKind::Eof;
  std::string text;
  std::uint32_t line = 0;
  std::uint32_t col = 0;
  std::int64_t int_value = 0;
  double float_value = 0.0;
};

/// Tokenizes `source`. Comments (`// ...` to end of line, `/* ... */`, not nested)
/// and whitespace are skipped. Problems (a bad character, a malformed number, an
/// unterminated block comment) are appended to `diags` as errors located in
/// `file_name` (source lines are not filled in here); a bad character or number
/// becomes an Invalid token so the parser can resynchronize without reporting it
/// again. The result always ends with one Eof token.
std::vector<Token> lex(std::string_view source, std::string_view file_name,
                       std::vector<Diagnostic>& diags);

/// The shortest `.tri` number literal that lex() reads back as exactly `v` (a Float token:
/// std::to_chars' shortest round-trip digits, "0.06", "1e-07", "1e+300", with ".0" added to
/// bare digits so that any magnitude stays a float, "12345678901234567168.0"). Every finite
/// non-negative double has one, subnormals included. Precondition: `v` is finite and not
/// negative (a literal has no sign); generated source checks its values before (our bug
/// otherwise: aborts).
std::string float_literal(double v);

/// How a token kind is written in messages: "'{'", "'let'", "identifier", "end of file".
std::string_view token_kind_name(TokenKind k);

/// Describes a token for "got ..." in messages: "'foo'", "'12'", "'+'", "end of file".
std::string describe(const Token& t);

/// The text of 1-based line `line` of `source` without its line terminator
/// ("" when out of range). Used to fill Diagnostic::source_line.
std::string_view source_line(std::string_view source, std::uint32_t line);

}  // namespace ternjit::dsl
