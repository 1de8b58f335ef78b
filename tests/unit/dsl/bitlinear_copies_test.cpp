// SPDX-License-Identifier: Apache-2.0
// bitlinear_copies_test.cpp - every copy of the BitLinear layer equals tests/dsl/bitlinear.tri.
//
// C++ code in the tree uses the header generated from that file (bitlinear_source.h).
// What must stand alone keeps a copy: the installed Python module, the install consumer
// programs (built against an installed package only) and the README. Each copy is the
// layer text, the file without its leading comment lines.
#include <doctest/doctest.h>

#include <string>
#include <string_view>

#include "bitlinear_source.h"
#include "tests/unit/expect.h"

namespace {

using ternjit::testing::read_file;

std::string source_path(std::string_view rel) { return std::string(TERNJIT_SOURCE_DIR "/") + std::string(rel); }

// The text between the first `open` and the next `close` after it ("" if absent).
std::string between(const std::string& text, std::string_view open, std::string_view close) {
  const auto start = text.find(open);
  if (start == std::string::npos) return {};
  const auto from = start + open.size();
  const auto end = text.find(close, from);
  return end == std::string::npos ? std::string() : text.substr(from, end - from);
}

// A C string literal split over lines ("...\n" "...\n"), unescaped.
std::string c_literal(const std::string& lines) {
  std::string out;
  bool in_string = false;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const char c = lines[i];
    if (c == '"') {
      in_string = !in_string;
    } else if (in_string && c == '\\' && i + 1 < lines.size()) {
      const char e = lines[++i];
      out += e == 'n' ? '\n' : e;
    } else if (in_string) {
      out += c;
    }
  }
  return out;
}

// The canonical layer text: the file without its leading `//` lines.
std::string layer_text() {
  std::string text = read_file(source_path("tests/dsl/bitlinear.tri"));
  while (text.rfind("//", 0) == 0) text.erase(0, text.find('\n') + 1);
  return text;
}

}  // namespace

TEST_CASE("bitlinear_source.h is tests/dsl/bitlinear.tri byte for byte") {
  CHECK(std::string(ternjit::examples::kBitLinearSource) == read_file(source_path("tests/dsl/bitlinear.tri")));
  CHECK(layer_text().rfind("layer BitLinear {", 0) == 0);
}

TEST_CASE("the stand-alone copies of the BitLinear layer equal tests/dsl/bitlinear.tri") {
  const std::string want = layer_text();
  CHECK(between(read_file(source_path("python/ternjit/torch.py")), "BITLINEAR_SOURCE = \"\"\"\\\n", "\"\"\"") == want);
  CHECK(between(read_file(source_path("tests/install/consumer/main.cpp")), "kSource = R\"(", ")\";") == want);
  CHECK(c_literal(between(read_file(source_path("tests/install/consumer/main.c")), "kSource[] =", ";")) == want);
  CHECK(between(read_file(source_path("README.md")), "(`tests/dsl/bitlinear.tri`):\n\n```\n", "```") == want);
}
