// SPDX-License-Identifier: Apache-2.0
// fuzz_dsl.cpp - libFuzzer harness: the .tri front end (lexer, parser, lowering) on any bytes.
//
// Invariants: compile_tri never crashes, hangs or trips a sanitizer; an error carries
// located diagnostics; a module it returns verifies and prints to text that parses back.
#include "ir/dsl/dsl.h"
#include "tests/fuzz/fuzz_testing.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ternjit;
  auto m = dsl::compile_tri(fuzz::as_text(data, size), "fuzz.tri");
  if (!m.ok()) {
    if (m.error().diagnostics.empty()) fuzz::finding("a DSL error without diagnostics: " + m.error().message);
    return 0;
  }
  fuzz::check_verifies_and_round_trips(*m, "the module compile_tri made");
  return 0;
}
