// SPDX-License-Identifier: Apache-2.0
// registry_test.cpp - the pass table: names, files, entry points and look-up.
#include <doctest/doctest.h>

#include <filesystem>
#include <regex>
#include <set>
#include <string>

#include "passes/passes.h"

using namespace ternjit;

TEST_CASE("every registered pass has a kebab-case name equal to its file stem") {
  const std::regex kebab("[a-z][a-z0-9]*(-[a-z0-9]+)*");
  REQUIRE(!passes::all_passes().empty());
  std::set<std::string_view> seen;
  for (const passes::PassInfo& p : passes::all_passes()) {
    INFO("pass ", std::string(p.name));
    CHECK(std::regex_match(std::string(p.name), kebab));
    CHECK(seen.insert(p.name).second);
    CHECK(!p.summary.empty());
    std::string stem(p.name);
    for (char& c : stem)
      if (c == '-') c = '_';
    CHECK(std::filesystem::exists(std::filesystem::path(TERNJIT_SOURCE_DIR) / "passes" / (stem + ".cpp")));
    const bool has_fn = std::visit([](auto fn) { return fn != nullptr; }, p.fn);
    CHECK(has_fn);
  }
}

TEST_CASE("find_pass finds every registered pass and nothing else") {
  for (const passes::PassInfo& p : passes::all_passes()) CHECK(passes::find_pass(p.name) == &p);
  for (std::string_view name : {"fold-constants", "eliminate-dead-code", "eliminate-common-subexpressions", "simplify"})
    CHECK(passes::find_pass(name) != nullptr);
  CHECK(passes::find_pass("") == nullptr);
  CHECK(passes::find_pass("none") == nullptr);
  CHECK(passes::find_pass("Fold-Constants") == nullptr);
  CHECK(passes::find_pass("fold_constants") == nullptr);
}
