// SPDX-License-Identifier: Apache-2.0
// strings_test.cpp - trim, lower, join and split (ir/strings.h).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "ir/strings.h"

using namespace ternjit::ir;

TEST_CASE("trim drops leading and trailing whitespace only") {
  CHECK(trim("") == "");
  CHECK(trim(" \t\n ") == "");
  CHECK(trim("  a b\t\r\n") == "a b");
  CHECK(trim("x") == "x");
}

TEST_CASE("lower lowercases ASCII letters only") {
  CHECK(lower("AVX512_Vnni") == "avx512_vnni");
  CHECK(lower("") == "");
  CHECK(lower("\xC3\x89") == "\xC3\x89");  // bytes >= 0x80 unchanged
}

TEST_CASE("split keeps empty pieces and join undoes it") {
  CHECK(split("", ',').empty());
  CHECK(split("a", ',') == std::vector<std::string>{"a"});
  CHECK(split("a,,b", ',') == std::vector<std::string>{"a", "", "b"});
  CHECK(split(",", ',') == std::vector<std::string>{"", ""});
  CHECK(join({}, ", ") == "");
  CHECK(join({"a", "b", "c"}, ", ") == "a, b, c");
  for (const char* t : {"a", "a,,b", ",", ",x,", "p|q"}) CHECK(join(split(t, ','), ",") == t);
}
