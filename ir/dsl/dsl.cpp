// SPDX-License-Identifier: Apache-2.0
// dsl.cpp - the `.tri` front end entry points: parse_tri and compile_tri.
#include "ir/dsl/dsl.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "ir/dsl/lexer.h"
#include "ir/dsl/lower.h"
#include "ir/dsl/parser.h"

namespace ternjit::dsl {

namespace {

void fill_source_lines(Diagnostic& d, std::string_view source, std::string_view file_name) {
  if (d.loc.known() && d.loc.file == file_name && d.source_line.empty())
    d.source_line = std::string(source_line(source, d.loc.line));
  for (Diagnostic& n : d.notes) fill_source_lines(n, source, file_name);
}

// Sorts by position (stable, so one position keeps its report order), caps the
// count, fills in source lines and wraps the result in an Error.
Error make_diagnostics_error(std::vector<Diagnostic> diags, std::string_view source,
                             std::string_view file_name) {
  std::stable_sort(diags.begin(), diags.end(), [](const Diagnostic& a, const Diagnostic& b) {
    return std::pair(a.loc.line, a.loc.col) < std::pair(b.loc.line, b.loc.col);
  });
  std::size_t total = diags.size();
  if (diags.size() > kMaxDiagnostics) diags.resize(kMaxDiagnostics);
  for (Diagnostic& d : diags) fill_source_lines(d, source, file_name);
  std::string msg = std::string(file_name) + ": " + std::to_string(total) +
                    (total == 1 ? " error" : " errors");
  if (total > kMaxDiagnostics) msg += " (first " + std::to_string(kMaxDiagnostics) + " shown)";
  return Error{ErrorCode::InvalidInput, std::move(msg), std::move(diags)};
}

}  // namespace

Result<File> parse_tri(std::string_view source, std::string_view file_name) {
  ParseOutput p = parse_file(source, file_name);
  if (!p.diagnostics.empty()) return make_diagnostics_error(std::move(p.diagnostics), source, file_name);
  return std::move(p.file);
}

Result<ir::Module> compile_tri(std::string_view source, std::string_view file_name) {
  ParseOutput p = parse_file(source, file_name);
  // Check even when parsing failed: the parser keeps what it could read and marks
  // the rest, so semantic errors in the intact statements are reported too.
  ir::Module m = lower_file(p.file, file_name, p.diagnostics);
  if (!p.diagnostics.empty()) return make_diagnostics_error(std::move(p.diagnostics), source, file_name);
  return m;
}

}  // namespace ternjit::dsl
