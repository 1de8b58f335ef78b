// SPDX-License-Identifier: Apache-2.0
// files_test.cpp - runs tests/ir/roundtrip (byte-exact round trips) and tests/ir/verify
// (inline `// expect-error@LINE:COL: text` expectations) through the parser.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "ir/parse.h"
#include "ir/print.h"

using ternjit::Diagnostic;
using ternjit::ElemKind;
using ternjit::Error;
using ternjit::ErrorCode;
using ternjit::Result;
using ternjit::Severity;
using ternjit::SourceLoc;
using namespace ternjit::ir;

namespace {

namespace fs = std::filesystem;

std::vector<fs::path> tir_files(const std::string& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(fs::path(TERNJIT_SOURCE_DIR) / dir))
    if (e.is_regular_file() && e.path().extension() == ".tir") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

struct Expectation {
  std::uint32_t line = 0;
  std::uint32_t col = 0;
  std::string text;
};

// `// expect-error@LINE:COL: text` anywhere in a line.
std::vector<Expectation> expectations(const std::string& src) {
  std::vector<Expectation> out;
  std::istringstream in(src);
  std::string line;
  const std::string tag = "// expect-error@";
  while (std::getline(in, line)) {
    auto at = line.find(tag);
    if (at == std::string::npos) continue;
    Expectation e;
    std::istringstream spec(line.substr(at + tag.size()));
    char colon1 = 0, colon2 = 0;
    spec >> e.line >> colon1 >> e.col >> colon2;
    REQUIRE_MESSAGE((colon1 == ':' && colon2 == ':'), "malformed expectation: " << line);
    std::getline(spec, e.text);
    auto first = e.text.find_first_not_of(' ');
    e.text = first == std::string::npos ? "" : e.text.substr(first);
    while (!e.text.empty() && (e.text.back() == ' ' || e.text.back() == '\r')) e.text.pop_back();
    out.push_back(e);
  }
  return out;
}

}  // namespace

TEST_CASE("tests/ir/roundtrip: print(parse(text)) == text byte for byte") {
  auto files = tir_files("tests/ir/roundtrip");
  CHECK(files.size() >= 5);
  for (const fs::path& p : files) {
    CAPTURE(p.filename().string());
    std::string text = read_file(p);
    auto m = parse_module(text, p.filename().string());
    REQUIRE_MESSAGE(m.ok(), (m.ok() ? std::string() : render(m.error())));
    CHECK(print_module(m.value()) == text);
  }
}

TEST_CASE("tests/ir/verify: diagnostics match the expect-error lines exactly") {
  auto files = tir_files("tests/ir/verify");
  CHECK(files.size() >= 6);
  for (const fs::path& p : files) {
    const std::string name = p.filename().string();
    CAPTURE(name);
    std::string text = read_file(p);
    auto expected = expectations(text);
    CHECK_MESSAGE(!expected.empty(), "a verify test needs at least one expect-error line");
    auto r = parse_module(text, name);
    std::vector<Diagnostic> diags = r.ok() ? std::vector<Diagnostic>{} : r.error().diagnostics;
    std::vector<bool> used(diags.size(), false);
    for (const Expectation& e : expected) {
      bool found = false;
      for (std::size_t i = 0; i < diags.size() && !found; ++i) {
        if (used[i] || diags[i].loc.line != e.line || diags[i].loc.col != e.col) continue;
        if (diags[i].loc.file != name || diags[i].message.find(e.text) == std::string::npos) continue;
        used[i] = found = true;
      }
      CHECK_MESSAGE(found, name << ":" << e.line << ":" << e.col << ": expected error containing '" << e.text
                                << "'" << (r.ok() ? std::string() : "; got:\n" + render(r.error())));
    }
    for (std::size_t i = 0; i < diags.size(); ++i)
      CHECK_MESSAGE(used[i], "unexpected diagnostic: " << render(diags[i]));
  }
}
