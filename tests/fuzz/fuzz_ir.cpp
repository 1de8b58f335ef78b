// SPDX-License-Identifier: Apache-2.0
// fuzz_ir.cpp - libFuzzer harness: the IR text parser and the verifier on any bytes.
//
// Invariants: parse_module never crashes, hangs or trips a sanitizer; a module it
// returns verifies, and its canonical print parses back to the same text.
#include "ir/parse.h"
#include "tests/fuzz/fuzz_testing.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ternjit;
  auto m = ir::parse_module(fuzz::as_text(data, size), "fuzz.tir");
  if (!m.ok()) return 0;
  fuzz::check_verifies_and_round_trips(*m, "a parsed module");
  return 0;
}
