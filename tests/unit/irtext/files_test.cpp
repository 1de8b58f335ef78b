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
#include "tests/unit/expect.h"

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

std::vector<fs::path> tir_files(const std::string& dir) { return ternjit::testing::source_files(dir, ".tir"); }

using ternjit::testing::read_file;

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
    auto r = parse_module(text, name);
    std::vector<Diagnostic> diags = r.ok() ? std::vector<Diagnostic>{} : r.error().diagnostics;
    ternjit::testing::check_expected_diagnostics(diags, text, name, /*check_notes=*/false);
  }
}
