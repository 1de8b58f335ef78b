// SPDX-License-Identifier: Apache-2.0
// expect.h - shared test helpers: read files, and match diagnostics against inline
// `// expect-error@LINE:COL: text` / `// expect-note@LINE:COL: text` lines.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "ternjit/result.h"

namespace ternjit::testing {

/// The whole content of a file ("" if unreadable: the caller's checks then fail).
inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// The files with extension `ext` directly under TERNJIT_SOURCE_DIR/`dir`, sorted.
inline std::vector<std::filesystem::path> source_files(const std::string& dir, const std::string& ext) {
  std::vector<std::filesystem::path> out;
  for (const auto& e : std::filesystem::directory_iterator(std::filesystem::path(TERNJIT_SOURCE_DIR) / dir))
    if (e.is_regular_file() && e.path().extension() == ext) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

/// One inline expectation.
struct Expectation {
  bool note = false;
  std::uint32_t line = 0;
  std::uint32_t col = 0;
  std::string text;
  bool matched = false;
};

/// Every `// expect-error@L:C: text` and `// expect-note@L:C: text` in `source`.
inline std::vector<Expectation> expectations(const std::string& source) {
  static const std::regex re(R"(// expect-(error|note)@(\d+):(\d+): (.*?)\s*$)");
  std::vector<Expectation> out;
  std::istringstream in(source);
  std::string line;
  while (std::getline(in, line)) {
    std::smatch m;
    if (!std::regex_search(line, m, re)) continue;
    out.push_back(Expectation{m[1] == "note", static_cast<std::uint32_t>(std::stoul(m[2])),
                              static_cast<std::uint32_t>(std::stoul(m[3])), m[4], false});
  }
  return out;
}

/// Checks that `diagnostics` (from compiling `source` named `name`) are exactly the
/// expectations: each at its line and column with the text in its message, located
/// in `name`, and no other. Notes are matched only when `check_notes`.
inline void check_expected_diagnostics(const std::vector<Diagnostic>& diagnostics, const std::string& source,
                                       const std::string& name, bool check_notes) {
  auto want = expectations(source);
  REQUIRE_MESSAGE(!want.empty(), name << " has no expect-error line");
  auto match = [&](const Diagnostic& d, bool note) {
    INFO("reported: ", render(d));
    CHECK(d.loc.file == name);
    for (Expectation& e : want) {
      if (e.matched || e.note != note || e.line != d.loc.line || e.col != d.loc.col) continue;
      if (d.message.find(e.text) == std::string::npos) continue;
      e.matched = true;
      return;
    }
    FAIL_CHECK("unexpected " << (note ? "note" : "error") << " at " << d.loc.line << ":" << d.loc.col << ": "
                             << d.message);
  };
  for (const Diagnostic& d : diagnostics) {
    CHECK(d.severity == Severity::Error);
    match(d, false);
    if (check_notes)
      for (const Diagnostic& n : d.notes) match(n, true);
  }
  for (const Expectation& e : want)
    if (check_notes || !e.note)
      CHECK_MESSAGE(e.matched, name << ": missing " << (e.note ? "note" : "error") << " at " << e.line << ":"
                                    << e.col << ": " << e.text);
}

}  // namespace ternjit::testing
