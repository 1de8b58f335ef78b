// SPDX-License-Identifier: Apache-2.0
// lexer.cpp - splits `.tri` source text into located tokens.
#include "ir/dsl/lexer.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "ir/ir.h"

namespace ternjit::dsl {

namespace {

bool is_ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_ident_char(char c) { return is_ident_start(c) || is_digit(c); }

TokenKind keyword_or_ident(std::string_view s) {
  if (s == "layer") return TokenKind::KwLayer;
  if (s == "param") return TokenKind::KwParam;
  if (s == "fn") return TokenKind::KwFn;
  if (s == "let") return TokenKind::KwLet;
  if (s == "return") return TokenKind::KwReturn;
  if (s == "for") return TokenKind::KwFor;
  return TokenKind::Ident;
}

class Lexer {
 public:
  Lexer(std::string_view src, std::string_view file, std::vector<Diagnostic>& diags)
      : src_(src), file_(file), diags_(diags) {}

  std::vector<Token> run() {
    std::vector<Token> out;
    for (;;) {
      skip_trivia();
      for (Token& t : pending_) out.push_back(std::move(t));
      pending_.clear();
      if (i_ >= src_.size()) break;
      out.push_back(next());
    }
    Token eof;
    eof.kind = TokenKind::Eof;
    eof.line = line_;
    eof.col = col();
    out.push_back(eof);
    return out;
  }

 private:
  [[nodiscard]] std::uint32_t col() const { return static_cast<std::uint32_t>(i_ - line_start_ + 1); }
  [[nodiscard]] char at(std::size_t k) const { return i_ + k < src_.size() ? src_[i_ + k] : '\0'; }

  void error(std::uint32_t line, std::uint32_t col, std::string msg) {
    diags_.push_back(Diagnostic{SourceLoc{std::string(file_), line, col}, Severity::Error,
                                std::move(msg), {}, {}});
  }

  void newline() {
    ++line_;
    line_start_ = i_ + 1;
  }

  // Whitespace and comments. An unterminated block comment is reported at its start
  // and swallows the rest of the input.
  void skip_trivia() {
    while (i_ < src_.size()) {
      char c = src_[i_];
      if (c == '\n') {
        newline();
        ++i_;
      } else if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
        ++i_;
      } else if (c == '/' && at(1) == '/') {
        while (i_ < src_.size() && src_[i_] != '\n') ++i_;
      } else if (c == '/' && at(1) == '*') {
        std::uint32_t l = line_, cc = col();
        i_ += 2;
        bool closed = false;
        while (i_ < src_.size()) {
          if (src_[i_] == '*' && at(1) == '/') {
            i_ += 2;
            closed = true;
            break;
          }
          if (src_[i_] == '\n') newline();
          ++i_;
        }
        if (!closed) {
          error(l, cc, "unterminated block comment: expected '*/' before end of file");
          // An Invalid token where the comment starts lets the parser stop quietly
          // instead of reporting the missing '}'s as new errors.
          Token t;
          t.kind = TokenKind::Invalid;
          t.text = "/*";
          t.line = l;
          t.col = cc;
          pending_.push_back(t);
        }
      } else {
        return;
      }
    }
  }

  // A string literal: '"', printable ASCII other than '"' and '\\', '"', on one line.
  // An unterminated or malformed one is reported and becomes an Invalid token.
  Token string(std::size_t begin, std::uint32_t c) {
    ++i_;
    while (i_ < src_.size() && src_[i_] != '"' && src_[i_] != '\n' && src_[i_] != '\\' &&
           src_[i_] >= 0x20 && src_[i_] < 0x7f)
      ++i_;
    if (i_ >= src_.size() || src_[i_] != '"') {
      error(line_, c, "unterminated string: expected '\"' before the end of the line "
                      "(strings hold printable ASCII without '\\')");
      while (i_ < src_.size() && src_[i_] != '\n') ++i_;
      return make(TokenKind::Invalid, begin, c);
    }
    ++i_;
    Token t = make(TokenKind::String, begin, c);
    t.text = t.text.substr(1, t.text.size() - 2);
    return t;
  }

  Token make(TokenKind k, std::size_t begin, std::uint32_t c) {
    Token t;
    t.kind = k;
    t.text = std::string(src_.substr(begin, i_ - begin));
    t.line = line_;
    t.col = c;
    return t;
  }

  Token next() {
    std::size_t begin = i_;
    std::uint32_t c = col();
    char ch = src_[i_];
    if (is_ident_start(ch)) {
      while (i_ < src_.size() && is_ident_char(src_[i_])) ++i_;
      return make(keyword_or_ident(src_.substr(begin, i_ - begin)), begin, c);
    }
    if (is_digit(ch)) return number(begin, c);
    auto single = [&](TokenKind k) {
      ++i_;
      return make(k, begin, c);
    };
    switch (ch) {
      case '{': return single(TokenKind::LBrace);
      case '}': return single(TokenKind::RBrace);
      case '(': return single(TokenKind::LParen);
      case ')': return single(TokenKind::RParen);
      case '[': return single(TokenKind::LBracket);
      case ']': return single(TokenKind::RBracket);
      case '<': return single(TokenKind::Less);
      case '>': return single(TokenKind::Greater);
      case ',': return single(TokenKind::Comma);
      case ':': return single(TokenKind::Colon);
      case '.':
        if (at(1) == '.') {
          i_ += 2;
          return make(TokenKind::DotDot, begin, c);
        }
        return single(TokenKind::Dot);
      case '"': return string(begin, c);
      case '=': return single(TokenKind::Equal);
      case '+': return single(TokenKind::Plus);
      case '*': return single(TokenKind::Star);
      case '/': return single(TokenKind::Slash);
      case '@': return single(TokenKind::At);
      case '-':
        if (at(1) == '>') {
          i_ += 2;
          return make(TokenKind::Arrow, begin, c);
        }
        return single(TokenKind::Minus);
      default: break;
    }
    // A bad character. A run of non-ASCII bytes (one UTF-8 character or more) is one
    // error, not one per byte.
    auto byte = static_cast<unsigned char>(ch);
    std::string msg;
    if (byte >= 0x80) {
      while (i_ < src_.size() && static_cast<unsigned char>(src_[i_]) >= 0x80) ++i_;
      char buf[8];
      std::snprintf(buf, sizeof buf, "0x%02x", byte);
      msg = std::string("unexpected non-ASCII byte ") + buf + ": expected an identifier, number or operator";
    } else {
      ++i_;
      if (byte < 0x20 || byte == 0x7f) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "0x%02x", byte);
        msg = std::string("unexpected control character ") + buf;
      } else {
        msg = std::string("unexpected character '") + ch + "'";
      }
    }
    error(line_, c, std::move(msg));
    return make(TokenKind::Invalid, begin, c);
  }

  // digits ['.' digits] [('e'|'E') ['+'|'-'] digits]; a '.' not followed by a digit
  // ends the number (so `1.` is Int then Dot). Letters glued to a number are an error.
  Token number(std::size_t begin, std::uint32_t c) {
    bool is_float = false;
    while (is_digit(at(0))) ++i_;
    if (at(0) == '.' && is_digit(at(1))) {
      is_float = true;
      ++i_;
      while (is_digit(at(0))) ++i_;
    }
    if ((at(0) == 'e' || at(0) == 'E') &&
        (is_digit(at(1)) || ((at(1) == '+' || at(1) == '-') && is_digit(at(2))))) {
      is_float = true;
      i_ += is_digit(at(1)) ? 1 : 2;
      while (is_digit(at(0))) ++i_;
    }
    if (is_ident_char(at(0))) {
      while (is_ident_char(at(0))) ++i_;
      Token t = make(TokenKind::Invalid, begin, c);
      error(line_, c, "malformed number '" + t.text + "'");
      return t;
    }
    Token t = make(is_float ? TokenKind::Float : TokenKind::Int, begin, c);
    const char* first = t.text.data();
    const char* last = first + t.text.size();
    if (is_float) {
      auto [p, ec] = std::from_chars(first, last, t.float_value);
      if (ec != std::errc() || p != last) {
        error(line_, c, "float literal '" + t.text + "' is out of range");
        t.kind = TokenKind::Invalid;
      }
    } else {
      auto [p, ec] = std::from_chars(first, last, t.int_value);
      if (ec != std::errc() || p != last) {
        error(line_, c, "integer literal '" + t.text + "' is too large (maximum 9223372036854775807)");
        t.kind = TokenKind::Invalid;
      }
      t.float_value = static_cast<double>(t.int_value);
    }
    return t;
  }

  std::string_view src_;
  std::string_view file_;
  std::vector<Diagnostic>& diags_;
  std::size_t i_ = 0;
  std::size_t line_start_ = 0;
  std::uint32_t line_ = 1;
  std::vector<Token> pending_;  ///< tokens produced while skipping trivia
};

}  // namespace

std::vector<Token> lex(std::string_view source, std::string_view file_name,
                       std::vector<Diagnostic>& diags) {
  return Lexer(source, file_name, diags).run();
}

std::string float_literal(double v) {
  TERNJIT_CHECK(std::isfinite(v) && !std::signbit(v), "a .tri literal is finite and has no sign");
  char buf[64];  // the shortest form of a double: at most 24 characters
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  std::string text(buf, r.ptr);
  // Bare digits lex as an Int, which must fit int64; with ".0" they are a Float of any size.
  if (text.find_first_of(".e") == std::string::npos) text += ".0";
  return text;
}

std::string_view token_kind_name(TokenKind k) {
  switch (k) {
    case TokenKind::Ident: return "identifier";
    case TokenKind::Int: return "integer";
    case TokenKind::Float: return "number";
    case TokenKind::KwLayer: return "'layer'";
    case TokenKind::KwParam: return "'param'";
    case TokenKind::KwFn: return "'fn'";
    case TokenKind::KwLet: return "'let'";
    case TokenKind::KwReturn: return "'return'";
    case TokenKind::KwFor: return "'for'";
    case TokenKind::String: return "string";
    case TokenKind::DotDot: return "'..'";
    case TokenKind::LBrace: return "'{'";
    case TokenKind::RBrace: return "'}'";
    case TokenKind::LParen: return "'('";
    case TokenKind::RParen: return "')'";
    case TokenKind::LBracket: return "'['";
    case TokenKind::RBracket: return "']'";
    case TokenKind::Less: return "'<'";
    case TokenKind::Greater: return "'>'";
    case TokenKind::Comma: return "','";
    case TokenKind::Colon: return "':'";
    case TokenKind::Dot: return "'.'";
    case TokenKind::Arrow: return "'->'";
    case TokenKind::Equal: return "'='";
    case TokenKind::Plus: return "'+'";
    case TokenKind::Minus: return "'-'";
    case TokenKind::Star: return "'*'";
    case TokenKind::Slash: return "'/'";
    case TokenKind::At: return "'@'";
    case TokenKind::Invalid: return "invalid token";
    case TokenKind::Eof: return "end of file";
  }
  return "?";
}

std::string describe(const Token& t) {
  if (t.kind == TokenKind::Eof) return "end of file";
  if (t.kind == TokenKind::String) return "'\"" + t.text + "\"'";
  return "'" + t.text + "'";
}

std::string_view source_line(std::string_view source, std::uint32_t line) {
  if (line == 0) return {};
  std::size_t start = 0;
  for (std::uint32_t l = 1; l < line; ++l) {
    std::size_t nl = source.find('\n', start);
    if (nl == std::string_view::npos) return {};
    start = nl + 1;
  }
  std::size_t end = source.find('\n', start);
  std::string_view s = source.substr(start, end == std::string_view::npos ? source.size() - start
                                                                          : end - start);
  if (!s.empty() && s.back() == '\r') s.remove_suffix(1);
  return s;
}

}  // namespace ternjit::dsl
