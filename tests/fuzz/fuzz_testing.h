// SPDX-License-Identifier: Apache-2.0
// fuzz_testing.h - what the libFuzzer harnesses share: input as text, a finding as an abort.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "ir/parse.h"
#include "ir/print.h"
#include "ir/verify.h"

namespace ternjit::fuzz {

/// The fuzzer's bytes as text (the front ends take any bytes).
inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

/// A broken invariant: print it and abort, which libFuzzer reports as a crash with the
/// input that caused it.
[[noreturn]] inline void finding(const std::string& what) {
  std::fprintf(stderr, "ternjit fuzz finding: %s\n", what.c_str());
  std::abort();
}

/// `m` (what `what` produced) verifies, and its canonical print parses back to the
/// same text; a finding otherwise.
inline void check_verifies_and_round_trips(const ir::Module& m, const std::string& what) {
  if (auto diags = ir::verify_module(m); !diags.empty())
    finding(what + " does not verify: " + render(diags[0]));
  const std::string text = ir::print_module(m);
  auto back = ir::parse_module(text, "printed.tir");
  if (!back.ok()) finding(what + ", printed, does not parse: " + back.error().message + "\n" + text);
  if (ir::print_module(*back) != text) finding(what + ", printed, does not round-trip:\n" + text);
}

}  // namespace ternjit::fuzz
