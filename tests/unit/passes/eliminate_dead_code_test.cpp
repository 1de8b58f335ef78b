// SPDX-License-Identifier: Apache-2.0
// eliminate_dead_code_test.cpp - eliminate-dead-code: unused pure values, effects, unreachable blocks.
#include <doctest/doctest.h>

#include <string>

#include "tests/unit/passes/pass_testing.h"

using namespace ternjit;
using testing::opt;

TEST_CASE("an unused add is removed; used values, calls and terminators stay") {
  const char* text = R"(func @f(%x: f32[4]) -> f32[4] {
^entry:
  %unused = add %x, %x : f32[4]
  %r = call @g(%x) : f32[4]
  %0 = mul %x, %x : f32[4]
  ret %0
}

func @g(%x: f32[4]) -> f32[4] {
^entry:
  ret %x
}
)";
  const std::string out = opt(text, "eliminate-dead-code");
  CHECK(out.find("%unused") == std::string::npos);
  CHECK(out.find("%r = call @g(%x)") != std::string::npos);
  CHECK(out.find("mul %x, %x") != std::string::npos);
}

TEST_CASE("dead chains go entirely, whatever the block order") {
  const char* text = R"(func @f(%x: f32[4]) -> f32[4] {
^entry:
  br ^b2
^b1:
  %c = exp %b : f32[4]
  ret %x
^b2:
  %a = neg %x : f32[4]
  %b = relu %a : f32[4]
  br ^b1
}
)";
  const std::string out = opt(text, "eliminate-dead-code");
  CHECK(out == R"(func @f(%x: f32[4]) -> f32[4] {
^entry:
  br ^b2
^b1:
  ret %x
^b2:
  br ^b1
}
)");
}

TEST_CASE("unreachable blocks are removed, reachable ones kept") {
  const char* text = R"(func @f(%c: bool[], %x: f32[4]) -> f32[4] {
^entry:
  cond_br %c, ^yes, ^no
^orphan:
  %0 = neg %x : f32[4]
  br ^yes
^yes:
  ret %x
^no:
  ret %x
}
)";
  const std::string out = opt(text, "eliminate-dead-code");
  CHECK(out.find("^orphan") == std::string::npos);
  CHECK(out.find("^yes:") != std::string::npos);
  CHECK(out.find("^no:") != std::string::npos);
}

TEST_CASE("20,000 dead instructions and 20,000 unreachable blocks go in one run") {
  std::string text = "func @f(%x: f32[4]) -> f32[4] {\n^entry:\n";
  for (int k = 0; k < 20000; ++k) text += "  %d" + std::to_string(k) + " = exp %x : f32[4]\n";
  text += "  ret %x\n";
  for (int k = 0; k < 20000; ++k) text += "^u" + std::to_string(k) + ":\n  ret %x\n";
  text += "}\n";
  CHECK(opt(text, "eliminate-dead-code") == "func @f(%x: f32[4]) -> f32[4] {\n^entry:\n  ret %x\n}\n");
}
