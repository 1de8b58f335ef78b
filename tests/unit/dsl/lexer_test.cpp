// SPDX-License-Identifier: Apache-2.0
// lexer_test.cpp - tokens, positions, comments, numbers and bad characters.
#include "ir/dsl/lexer.h"

#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace ternjit::dsl {
namespace {

std::vector<Token> lex_ok(std::string_view src) {
  std::vector<Diagnostic> diags;
  auto toks = lex(src, "t.tri", diags);
  CHECK(diags.empty());
  return toks;
}

std::vector<TokenKind> kinds(const std::vector<Token>& toks) {
  std::vector<TokenKind> k;
  for (const Token& t : toks) k.push_back(t.kind);
  return k;
}

TEST_CASE("lexer: tokens carry kind, text, line and column") {
  auto toks = lex_ok("layer L {\n  param w: TernaryTensor[784, N]\n}");
  using K = TokenKind;
  CHECK(kinds(toks) == std::vector<K>{K::KwLayer, K::Ident, K::LBrace, K::KwParam, K::Ident,
                                       K::Colon, K::Ident, K::LBracket, K::Int, K::Comma,
                                       K::Ident, K::RBracket, K::RBrace, K::Eof});
  CHECK(toks[1].text == "L");
  CHECK(toks[1].line == 1);
  CHECK(toks[1].col == 7);
  CHECK(toks[3].line == 2);
  CHECK(toks[3].col == 3);
  CHECK(toks[6].text == "TernaryTensor");
  CHECK(toks[6].col == 12);
  CHECK(toks[8].int_value == 784);
  CHECK(toks[8].col == 26);
  CHECK(toks[12].line == 3);
  CHECK(toks[12].col == 1);
}

TEST_CASE("lexer: operators, arrow and keywords") {
  auto toks = lex_ok("fn f(x) -> { let y = -x @ w * 2 / 3 + 1 - z return y . < > }");
  using K = TokenKind;
  CHECK(kinds(toks) == std::vector<K>{K::KwFn, K::Ident, K::LParen, K::Ident, K::RParen, K::Arrow,
                                       K::LBrace, K::KwLet, K::Ident, K::Equal, K::Minus, K::Ident,
                                       K::At, K::Ident, K::Star, K::Int, K::Slash, K::Int, K::Plus,
                                       K::Int, K::Minus, K::Ident, K::KwReturn, K::Ident, K::Dot,
                                       K::Less, K::Greater, K::RBrace, K::Eof});
  CHECK(toks[5].text == "->");
  CHECK(toks[5].col == 9);
}

TEST_CASE("lexer: for, ranges (0..4 is Int DotDot Int), strings") {
  auto toks = lex_ok("for i in 0..4 { rope(x, p, 1.5, \"neox\") } 1. .");
  using K = TokenKind;
  CHECK(kinds(toks) == std::vector<K>{K::KwFor, K::Ident, K::Ident, K::Int, K::DotDot, K::Int, K::LBrace,
                                       K::Ident, K::LParen, K::Ident, K::Comma, K::Ident, K::Comma, K::Float,
                                       K::Comma, K::String, K::RParen, K::RBrace, K::Int, K::Dot, K::Dot, K::Eof});
  CHECK(toks[2].text == "in");
  CHECK(toks[4].col == 11);
  CHECK(toks[15].text == "neox");
  CHECK(toks[15].col == 33);
  CHECK(describe(toks[15]) == "'\"neox\"'");
  // An unterminated string (or one holding a backslash) is an error at its quote, and
  // the rest of its line is skipped.
  for (const char* bad : {"let s = \"neox\nlet t = 1", "let s = \"a\\b\""}) {
    std::vector<Diagnostic> diags;
    auto t = lex(bad, "t.tri", diags);
    REQUIRE(diags.size() == 1);
    CHECK(diags[0].loc.col == 9);
    CHECK(diags[0].message.find("unterminated string") == 0);
    CHECK(t[3].kind == K::Invalid);
  }
}

TEST_CASE("lexer: line and block comments are skipped, positions stay right") {
  auto toks = lex_ok("// header\na /* one\ntwo */ b // tail\n/**/c");
  REQUIRE(toks.size() == 4);
  CHECK(toks[0].text == "a");
  CHECK(toks[0].line == 2);
  CHECK(toks[0].col == 1);
  CHECK(toks[1].text == "b");
  CHECK(toks[1].line == 3);
  CHECK(toks[1].col == 8);
  CHECK(toks[2].text == "c");
  CHECK(toks[2].line == 4);
  CHECK(toks[2].col == 5);
  CHECK(toks[3].kind == TokenKind::Eof);
}

TEST_CASE("lexer: numbers") {
  auto toks = lex_ok("1e-5 0.5 784 2.5E3 1e+2 7");
  REQUIRE(toks.size() == 7);
  CHECK(toks[0].kind == TokenKind::Float);
  CHECK(toks[0].float_value == doctest::Approx(1e-5));
  CHECK(toks[0].text == "1e-5");
  CHECK(toks[1].kind == TokenKind::Float);
  CHECK(toks[1].float_value == 0.5);
  CHECK(toks[2].kind == TokenKind::Int);
  CHECK(toks[2].int_value == 784);
  CHECK(toks[3].kind == TokenKind::Float);
  CHECK(toks[3].float_value == 2500.0);
  CHECK(toks[4].float_value == 100.0);
  CHECK(toks[5].kind == TokenKind::Int);
  CHECK(toks[5].float_value == 7.0);

  // `1.` is an integer followed by a dot; a letter glued to a number is an error.
  auto t2 = lex_ok("1.x");
  CHECK(kinds(t2) == std::vector<TokenKind>{TokenKind::Int, TokenKind::Dot, TokenKind::Ident,
                                            TokenKind::Eof});
  std::vector<Diagnostic> diags;
  auto bad = lex("x = 1e", "t.tri", diags);
  REQUIRE(diags.size() == 1);
  CHECK(diags[0].message == "malformed number '1e'");
  CHECK(diags[0].loc.col == 5);
  CHECK(bad[2].kind == TokenKind::Invalid);
  diags.clear();
  (void)lex("99999999999999999999", "t.tri", diags);
  REQUIRE(diags.size() == 1);
  CHECK(diags[0].message.find("too large") != std::string::npos);
}

TEST_CASE("lexer: bad characters are reported and become Invalid tokens") {
  std::vector<Diagnostic> diags;
  auto toks = lex("a $ b\n  # c \xc3\xa9", "bad.tri", diags);
  REQUIRE(diags.size() == 3);
  CHECK(diags[0].loc.file == "bad.tri");
  CHECK(diags[0].loc.line == 1);
  CHECK(diags[0].loc.col == 3);
  CHECK(diags[0].message == "unexpected character '$'");
  CHECK(diags[1].loc.line == 2);
  CHECK(diags[1].loc.col == 3);
  CHECK(diags[1].message == "unexpected character '#'");
  CHECK(diags[2].loc.col == 7);
  CHECK(diags[2].message.find("non-ASCII byte 0xc3") != std::string::npos);
  using K = TokenKind;
  CHECK(kinds(toks) == std::vector<K>{K::Ident, K::Invalid, K::Ident, K::Invalid, K::Ident,
                                       K::Invalid, K::Eof});
}

TEST_CASE("lexer: unterminated block comment is an error at its start") {
  std::vector<Diagnostic> diags;
  auto toks = lex("a\n  /* never\n closed", "t.tri", diags);
  REQUIRE(diags.size() == 1);
  CHECK(diags[0].loc.line == 2);
  CHECK(diags[0].loc.col == 3);
  CHECK(diags[0].message.find("unterminated block comment") == 0);
  REQUIRE(toks.size() == 3);
  CHECK(toks[1].kind == TokenKind::Invalid);
  CHECK(toks[2].kind == TokenKind::Eof);
}

TEST_CASE("lexer: source_line returns one line without its terminator") {
  std::string_view src = "one\r\ntwo\nthree";
  CHECK(source_line(src, 1) == "one");
  CHECK(source_line(src, 2) == "two");
  CHECK(source_line(src, 3) == "three");
  CHECK(source_line(src, 4).empty());
  CHECK(source_line(src, 0).empty());
}

TEST_CASE("lexer: float_literal reads back as exactly its value, as one Float token") {
  std::vector<double> values{0.0, 0.06, 0.04, 1e-7, 1e300, 500000.0, 1e-5, 1.0, 123.0,
                             1.2345678901234567e19,  // bare digits past int64: a Float, not an Int
                             std::numeric_limits<double>::max(), std::numeric_limits<double>::min(),
                             std::numeric_limits<double>::denorm_min(), 2.5e-310};
  std::mt19937_64 rng(33);
  while (values.size() < 2000) {
    // Random bit patterns with the sign cleared: every exponent, subnormals included.
    const double v = std::bit_cast<double>(rng() & ~(std::uint64_t{1} << 63));
    if (std::isfinite(v)) values.push_back(v);
  }
  for (const double v : values) {
    const std::string text = float_literal(v);
    CAPTURE(text);
    auto toks = lex_ok(text);
    REQUIRE(toks.size() == 2);
    CHECK(toks[0].kind == TokenKind::Float);
    CHECK(toks[0].text == text);
    CHECK(std::bit_cast<std::uint64_t>(toks[0].float_value) == std::bit_cast<std::uint64_t>(v));
  }
  CHECK(float_literal(0.06) == "0.06");
  CHECK(float_literal(1e300) == "1e+300");
  CHECK(float_literal(500000.0) == "5e+05");
  CHECK(float_literal(123.0) == "123.0");
}

}  // namespace
}  // namespace ternjit::dsl
