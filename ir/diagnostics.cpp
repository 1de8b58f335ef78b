// SPDX-License-Identifier: Apache-2.0
// diagnostics.cpp - rendering of Diagnostic/Error and element-kind spellings.
#include "ternjit/result.h"
#include "ternjit/types.h"

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
    out += d.source_line;
    out += '\n';
    // The caret sits under byte column `col`; tabs are kept so the caret lines up.
    for (std::uint32_t i = 1; i < d.loc.col && i - 1 < d.source_line.size(); ++i)
      out += d.source_line[i - 1] == '\t' ? '\t' : ' ';
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
