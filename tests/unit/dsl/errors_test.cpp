// SPDX-License-Identifier: Apache-2.0
// errors_test.cpp - golden error tests: tests/dsl/errors/*.tri with inline expectations.
//
// Each file lists `// expect-error@LINE:COL: text` (and `// expect-note@LINE:COL: text`)
// lines. compile_tri must fail with exactly those diagnostics (notes included): one at
// each position whose message contains the text, and no other.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "ir/dsl/dsl.h"
#include "ir/dsl/lexer.h"
#include "tests/unit/expect.h"

namespace ternjit::dsl {
namespace {

namespace fs = std::filesystem;

using testing::read_file;

std::vector<fs::path> error_files() { return testing::source_files("tests/dsl/errors", ".tri"); }

}  // namespace

TEST_CASE("errors: every tests/dsl/errors/*.tri reports exactly its expected diagnostics") {
  auto files = error_files();
  // One file per error kind at least; an empty directory must not pass silently.
  REQUIRE(files.size() >= 12);
  for (const fs::path& path : files) {
    const std::string name = path.filename().string();
    INFO("file: ", name);
    const std::string source = read_file(path);
    auto r = compile_tri(source, name);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == ErrorCode::InvalidInput);
    INFO("all diagnostics:\n", render(r.error()));
    // Every diagnostic carries its source line, for render()'s caret.
    for (const Diagnostic& d : r.error().diagnostics) CHECK(d.source_line == source_line(source, d.loc.line));
    testing::check_expected_diagnostics(r.error().diagnostics, source, name, /*check_notes=*/true);
  }
}

TEST_CASE("errors: messages are lowercase, without final period") {
  for (const fs::path& path : error_files()) {
    auto r = compile_tri(read_file(path), path.filename().string());
    REQUIRE_FALSE(r.ok());
    for (const Diagnostic& d : r.error().diagnostics) {
      INFO(d.message);
      REQUIRE(!d.message.empty());
      CHECK_FALSE((d.message.front() >= 'A' && d.message.front() <= 'Z'));
      CHECK(d.message.back() != '.');
    }
  }
}

TEST_CASE("errors: render() shows the source line and a caret under the column") {
  const char* src =
      "layer L {\n"
      "    param w: TernaryTensor[780, 10]\n"
      "    fn forward(x: Tensor[N, 784]) -> Tensor[N, 10] {\n"
      "        return x @ w\n"
      "    }\n"
      "}\n";
  auto r = compile_tri(src, "caret.tri");
  REQUIRE_FALSE(r.ok());
  REQUIRE(r.error().diagnostics.size() == 1);
  CHECK(render(r.error()) ==
        "caret.tri:4:18: error: 'matmul' needs matching K: lhs is f32[N, 784] (K = 784), rhs is "
        "t2[780, 10] (K = 780)\n"
        "        return x @ w\n"
        "                 ^\n");
  CHECK(r.error().message == "caret.tri: 1 error");
}

TEST_CASE("errors: a very long source line is shown as a window around the caret") {
  // A generated 20,000-operand chain is rejected by the nesting limit; its diagnostic must
  // not echo the whole ~80 KB line (it did), but a bounded window with the caret in it.
  std::string chain = "x";
  for (int i = 1; i < 20000; ++i) chain += " + x";
  const std::string src = "layer L {\n fn forward(x: Tensor[4]) -> Tensor[4] {\n  return " + chain + "\n }\n}\n";
  auto r = compile_tri(src, "long.tri");
  REQUIRE_FALSE(r.ok());
  const std::string text = render(r.error());
  CHECK(text.size() < 600);
  std::istringstream lines(text);
  std::string head, shown, caret;
  std::getline(lines, head);
  std::getline(lines, shown);
  std::getline(lines, caret);
  CHECK(head.find("long.tri:3:") == 0);
  CHECK(shown.substr(0, 3) == "...");
  CHECK(shown.substr(shown.size() - 3) == "...");
  REQUIRE(caret.size() >= 4);
  CHECK(caret.back() == '^');
  CHECK(caret.size() <= shown.size());
  // The caret sits under the character the column names: the column counted in the full
  // line equals the caret's position in the window plus the bytes cut off in front.
  const auto col = std::stoul(head.substr(std::string("long.tri:3:").size()));
  const std::string line3 = "  return " + chain;
  const std::size_t in_window = caret.size() - 1 - 3;  // minus the caret and the "..." indent
  const std::string window = shown.substr(3, shown.size() - 6);
  REQUIRE(col - 1 >= in_window);
  CHECK(line3.compare(col - 1 - in_window, window.size(), window) == 0);
}

TEST_CASE("errors: notes render with their own line and caret") {
  const char* src =
      "layer L {\n"
      "  param w: Tensor[4]\n"
      "  param w: Tensor[4]\n"
      "}\n";
  auto r = compile_tri(src, "dup.tri");
  REQUIRE_FALSE(r.ok());
  CHECK(render(r.error()) ==
        "dup.tri:3:9: error: duplicate definition of parameter 'w'\n"
        "  param w: Tensor[4]\n"
        "        ^\n"
        "dup.tri:2:9: note: 'w' first defined here\n"
        "  param w: Tensor[4]\n"
        "        ^\n");
}

TEST_CASE("errors: at most kMaxDiagnostics are reported, sorted by position") {
  std::string src = "layer L {\n  fn f(x: Tensor[N]) -> Tensor[N] {\n";
  for (int i = 0; i < 25; ++i) src += "    let a" + std::to_string(i) + " = nope" + std::to_string(i) + "\n";
  src += "    return x\n  }\n}\n";
  auto r = compile_tri(src, "many.tri");
  REQUIRE_FALSE(r.ok());
  const auto& diags = r.error().diagnostics;
  REQUIRE(diags.size() == kMaxDiagnostics);
  CHECK(r.error().message == "many.tri: 25 errors (first 20 shown)");
  for (std::size_t i = 0; i < diags.size(); ++i) {
    CHECK(diags[i].loc.line == 3 + i);
    CHECK(diags[i].message == "unknown name 'nope" + std::to_string(i) + "'");
  }
}

TEST_CASE("errors: a syntax error and type errors in one file are all reported") {
  const char* src =
      "layer L {\n"
      "  param w: TernaryTensor[8, 4]\n"
      "  fn f(x: Tensor[N, 4]) -> Tensor[N, 4] {\n"
      "    let a = x @ w\n"        // shape error
      "    let b = (x +\n"         // syntax error (reported at the next line's `let`)
      "    let c = a + b\n"        // a and b are poisoned: no follow-on errors
      "    return relu(x, 1)\n"    // arity error
      "  }\n"
      "}\n";
  auto r = compile_tri(src, "mix.tri");
  REQUIRE_FALSE(r.ok());
  const auto& d = r.error().diagnostics;
  REQUIRE(d.size() == 3);
  CHECK(d[0].loc.line == 4);
  CHECK(d[0].message.find("'matmul' needs matching K") == 0);
  CHECK(d[1].loc.line == 6);
  CHECK(d[1].message == "expected an expression, got 'let'");
  CHECK(d[2].loc.line == 7);
  CHECK(d[2].message == "'relu' takes 1 argument, got 2");
}

TEST_CASE("errors: every prefix and every one-line deletion of the examples fails cleanly") {
  // Robustness: broken input of every shape gives diagnostics (or a module), never a
  // crash, and every diagnostic is located in the file.
  std::size_t checked = 0;
  for (const char* name : {"linear_classifier.tri", "bitlinear.tri", "mlp_composition.tri",
                           "all_builtins.tri", "several_layers.tri"}) {
    const std::string src = read_file(fs::path(TERNJIT_SOURCE_DIR) / "tests/dsl" / name);
    std::vector<std::string> variants;
    for (std::size_t n = 0; n < src.size(); n += 3) variants.push_back(src.substr(0, n));
    for (std::size_t start = 0; start < src.size();) {
      std::size_t end = src.find('\n', start);
      if (end == std::string::npos) break;
      variants.push_back(src.substr(0, start) + src.substr(end + 1));
      start = end + 1;
    }
    for (const std::string& v : variants) {
      auto r = compile_tri(v, "cut.tri");
      ++checked;
      if (r.ok()) continue;
      REQUIRE(!r.error().diagnostics.empty());
      REQUIRE(r.error().diagnostics.size() <= kMaxDiagnostics);
      for (const Diagnostic& d : r.error().diagnostics) {
        INFO(v, "\n", render(d));
        CHECK(d.loc.file == "cut.tri");
        CHECK(d.loc.line >= 1);
        CHECK(d.loc.col >= 1);
      }
    }
  }
  CHECK(checked > 500);
}

}  // namespace ternjit::dsl
