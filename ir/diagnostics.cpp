// SPDX-License-Identifier: Apache-2.0
// diagnostics.cpp - rendering of Diagnostic/Error and element-kind spellings.
#include "ternjit/result.h"
#include "ternjit/types.h"

#include <algorithm>
#include <string_view>
#include <utility>

namespace ternjit {

namespace {

std::string_view severity_word(Severity s) {
  switch (s) {
    case Severity::Error: return "error";
    case Severity::Warning: return "warning";
    case Severity::Note: return "note";
  }
  return "error";
}

// The length of the valid UTF-8 sequence of 2 to 4 bytes starting at `i`, else 0.
std::size_t utf8_length(std::string_view s, std::size_t i) {
  const auto byte = [&](std::size_t j) { return static_cast<unsigned char>(s[j]); };
  const unsigned char lead = byte(i);
  const std::size_t n = lead >= 0xC2 && lead <= 0xDF ? 2 : lead >= 0xE0 && lead <= 0xEF ? 3
                        : lead >= 0xF0 && lead <= 0xF4 ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (std::size_t j = 1; j < n; ++j)
    if ((byte(i + j) & 0xC0) != 0x80) return 0;
  // Overlong 3/4-byte forms, UTF-16 surrogates and code points past U+10FFFF are not text.
  if ((lead == 0xE0 && byte(i + 1) < 0xA0) || (lead == 0xED && byte(i + 1) >= 0xA0) ||
      (lead == 0xF0 && byte(i + 1) < 0x90) || (lead == 0xF4 && byte(i + 1) >= 0x90))
    return 0;
  return n;
}

// The source line as it is shown, and the caret line under byte column `col`: control
// bytes, DEL and bytes that are not valid UTF-8 are written as \xNN (so binary garbage never
// reaches the terminal raw); tabs are kept, and the caret counts one column per character.
std::pair<std::string, std::string> display_line(std::string_view line, std::uint32_t col) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string shown, caret;
  for (std::size_t i = 0; i < line.size();) {
    const unsigned char c = static_cast<unsigned char>(line[i]);
    std::size_t n = 1;
    std::string piece;
    if (c == '\t' || (c >= 0x20 && c < 0x7F)) {
      piece.assign(1, static_cast<char>(c));
    } else if (c >= 0x80 && (n = utf8_length(line, i)) != 0) {
      piece.assign(line.substr(i, n));
    } else {
      n = 1;
      piece = {'\\', 'x', kHex[c >> 4], kHex[c & 15]};
    }
    if (i + 1 < col) {
      const std::size_t width = c == '\t' ? 1 : n > 1 ? 1 : piece.size();
      caret.append(width, c == '\t' ? '\t' : ' ');
    }
    shown += piece;
    i += n;
  }
  return {std::move(shown), std::move(caret)};
}

// A source line longer than this is shown as a window of about this many bytes around the
// caret, with "..." where it was cut: a generated 80 KB expression line must not flood the
// terminal with one diagnostic.
constexpr std::size_t kMaxShownLine = 160;

// The part of `line` rendered for a caret at byte column `col`: the whole line when it is
// short, else a window around the caret that starts and ends on UTF-8 sequence boundaries.
// `col` is rebased onto the window; `cut_front` / `cut_back` tell where "..." goes.
struct LineWindow {
  std::string_view text;
  std::uint32_t col = 0;
  bool cut_front = false, cut_back = false;
};

LineWindow line_window(std::string_view line, std::uint32_t col) {
  if (line.size() <= kMaxShownLine) return {line, col, false, false};
  const auto continuation = [&](std::size_t i) {
    return i < line.size() && (static_cast<unsigned char>(line[i]) & 0xC0) == 0x80;
  };
  const std::size_t at = col == 0 ? 0 : std::min<std::size_t>(col - 1, line.size());
  std::size_t begin = at > kMaxShownLine / 2 ? at - kMaxShownLine / 2 : 0;
  while (begin > 0 && continuation(begin)) --begin;
  std::size_t end = std::min(line.size(), begin + kMaxShownLine);
  while (end < line.size() && continuation(end)) ++end;
  return {line.substr(begin, end - begin), static_cast<std::uint32_t>(col - begin), begin > 0, end < line.size()};
}

void render_into(const Diagnostic& d, std::string& out) {
  if (!d.loc.file.empty()) {
    out += d.loc.file;
    out += ':';
  }
  if (d.loc.known()) {
    out += std::to_string(d.loc.line) + ":" + std::to_string(d.loc.col) + ":";
  }
  if (!out.empty() && out.back() == ':') out += ' ';
  out += severity_word(d.severity);
  out += ": ";
  out += d.message;
  out += '\n';
  if (!d.source_line.empty() && d.loc.known()) {
    // The caret sits under byte column `col`; tabs are kept so the caret lines up.
    const LineWindow w = line_window(d.source_line, d.loc.col);
    auto [shown, caret] = display_line(w.text, w.col);
    if (w.cut_front) out += "...";
    out += shown;
    if (w.cut_back) out += "...";
    out += '\n';
    if (w.cut_front) out += "   ";
    out += caret;
    out += "^\n";
  }
  for (const Diagnostic& n : d.notes) render_into(n, out);
}

}  // namespace

std::string render(const Diagnostic& d) {
  std::string out;
  render_into(d, out);
  return out;
}

std::string render(const Error& e) {
  if (e.diagnostics.empty()) return "error: " + e.message + "\n";
  std::string out;
  for (const Diagnostic& d : e.diagnostics) render_into(d, out);
  return out;
}

std::string_view elem_name(ElemKind k) {
  switch (k) {
    case ElemKind::T2: return "t2";
    case ElemKind::I8: return "i8";
    case ElemKind::U8: return "u8";
    case ElemKind::I32: return "i32";
    case ElemKind::F16: return "f16";
    case ElemKind::BF16: return "bf16";
    case ElemKind::F32: return "f32";
    case ElemKind::Bool: return "bool";
  }
  return "?";
}

std::optional<ElemKind> parse_elem_kind(std::string_view s) {
  for (ElemKind k : kAllElemKinds)
    if (elem_name(k) == s) return k;
  if (s == "float32") return ElemKind::F32;
  return std::nullopt;
}

std::string_view weight_format_name(WeightFormat f) {
  switch (f) {
    case WeightFormat::Plain: return "plain";
    case WeightFormat::Tern2: return "tern2";
    case WeightFormat::Tern2SM: return "tern2-sm";
    case WeightFormat::Tern16: return "tern1.6";
    case WeightFormat::Bitplane: return "bitplane";
  }
  return "?";
}

std::optional<WeightFormat> parse_weight_format(std::string_view s) {
  for (WeightFormat f : kAllWeightFormats)
    if (weight_format_name(f) == s) return f;
  return std::nullopt;
}

}  // namespace ternjit
