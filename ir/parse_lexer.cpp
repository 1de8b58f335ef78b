// SPDX-License-Identifier: Apache-2.0
// parse_lexer.cpp - the IR text lexer: line-aware tokens with sigils, numbers and strings.
#include <charconv>

#include "ir/parse_internal.h"

namespace ternjit::ir::parse_detail {

namespace {

bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_char(char c) { return is_alpha(c) || is_digit(c) || c == '.'; }

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

}  // namespace

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!is_digit(c)) return false;
  return true;
}

std::vector<Token> lex(std::string_view src) { return Lexer(src).run(); }

std::string describe(const Token& t) {
  switch (t.kind) {
    case Tok::Eof: return "end of file";
    case Tok::Newline: return "end of line";
    default: return "'" + std::string(t.text) + "'";
  }
}

}  // namespace ternjit::ir::parse_detail
