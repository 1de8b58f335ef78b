// SPDX-License-Identifier: Apache-2.0
// simplify_test.cpp - the simplify rule table and the identities it applies (and refuses).
#include <doctest/doctest.h>

#include <regex>
#include <set>
#include <string>

#include "passes/simplify_internal.h"
#include "tests/unit/passes/pass_testing.h"

using namespace ternjit;
using testing::opt;

namespace {

// A function of `x: T` returning `body`'s last value %r, simplified and cleaned up.
std::string simplified(const std::string& args, const std::string& result, const std::string& body) {
  const std::string symbols = args.find('N') != std::string::npos ? "<N>" : "";
  const std::string text = "func @f" + symbols + "(" + args + ") -> " + result + " {\n^entry:\n" + body + "  ret %r\n}\n";
  return opt(text, "simplify,eliminate-dead-code");
}

bool returns(const std::string& out, const std::string& value) {
  return out.find("  ret " + value + "\n") != std::string::npos;
}

}  // namespace

TEST_CASE("the rule table: unique kebab-case names, every entry complete") {
  const std::regex kebab("[a-z]+(-[a-z]+)*");
  std::set<std::string_view> names;
  REQUIRE(!passes::simplify_rules().empty());
  for (const passes::SimplifyRule& r : passes::simplify_rules()) {
    INFO("rule ", std::string(r.name));
    CHECK(std::regex_match(std::string(r.name), kebab));
    CHECK(names.insert(r.name).second);
    CHECK(static_cast<bool>(r.match));
    CHECK(static_cast<bool>(r.rewrite));
  }
}

TEST_CASE("identities that hold for every value are applied") {
  const std::string x = "%x: f32[2, 3]", t = "f32[2, 3]";
  CHECK(returns(simplified(x, t, "  %c = const {value = 1} : f32[]\n  %r = mul %x, %c : f32[2, 3]\n"), "%x"));
  CHECK(returns(simplified(x, t, "  %c = const {value = 1} : f32[3]\n  %r = mul %c, %x : f32[2, 3]\n"), "%x"));
  CHECK(returns(simplified(x, t, "  %c = const {value = 1} : f32[]\n  %r = div %x, %c : f32[2, 3]\n"), "%x"));
  CHECK(returns(simplified(x, t, "  %c = const {value = -0} : f32[]\n  %r = add %x, %c : f32[2, 3]\n"), "%x"));
  CHECK(returns(simplified(x, t, "  %c = const {value = 0} : f32[]\n  %r = sub %x, %c : f32[2, 3]\n"), "%x"));
  CHECK(returns(simplified(x, t, "  %n = neg %x : f32[2, 3]\n  %r = neg %n : f32[2, 3]\n"), "%x"));
  CHECK(returns(simplified(x, t, "  %a = transpose %x {perm = [1, 0]} : f32[3, 2]\n"
                                 "  %r = transpose %a {perm = [1, 0]} : f32[2, 3]\n"), "%x"));
  CHECK(returns(simplified(x, t, "  %r = cast %x {to = f32} : f32[2, 3]\n"), "%x"));
  CHECK(returns(simplified(x, t, "  %r = reshape %x : f32[2, 3]\n"), "%x"));
  CHECK(returns(simplified(x, t, "  %r = broadcast %x : f32[2, 3]\n"), "%x"));
  CHECK(returns(simplified(x, t, "  %a = relu %x : f32[2, 3]\n  %r = relu %a : f32[2, 3]\n"), "%a"));
  // Integers: any zero is an identity of add/sub, and x * 0 is 0 (of the result type).
  CHECK(returns(simplified("%i: i8[4]", "i8[4]", "  %z = const {value = 0} : i8[]\n  %r = add %z, %i : i8[4]\n"), "%i"));
  const std::string zero = simplified("%i: i32[N]", "i32[N]", "  %z = const {value = 0} : i32[]\n  %r = mul %i, %z : i32[N]\n");
  CHECK(zero.find("const {value = 0} : i32[N]") != std::string::npos);
  CHECK(zero.find("mul") == std::string::npos);
}

TEST_CASE("rewrites that would change a value, a kind or a shape are refused") {
  // x + (+0) maps -0 to +0; x - (-0) too; float x * 0 is NaN for inf and NaN.
  CHECK(!returns(simplified("%x: f32[4]", "f32[4]", "  %c = const {value = 0} : f32[]\n  %r = add %x, %c : f32[4]\n"), "%x"));
  CHECK(!returns(simplified("%x: f32[4]", "f32[4]", "  %c = const {value = -0} : f32[]\n  %r = sub %x, %c : f32[4]\n"), "%x"));
  CHECK(simplified("%x: f32[4]", "f32[4]", "  %c = const {value = 0} : f32[]\n  %r = mul %x, %c : f32[4]\n").find("mul") !=
        std::string::npos);
  // An integer zero added to a float converts to +0.
  CHECK(simplified("%x: f32[4]", "f32[4]", "  %c = const {value = 0} : i32[]\n  %r = add %x, %c : f32[4]\n").find("add") !=
        std::string::npos);
  // Broadcasting and promotion change the type.
  CHECK(simplified("%x: f32[4]", "f32[2, 4]", "  %c = const {value = 1} : f32[2, 4]\n  %r = mul %x, %c : f32[2, 4]\n")
            .find("mul") != std::string::npos);
  CHECK(simplified("%x: i8[4]", "i32[4]", "  %c = const {value = 1} : i32[]\n  %r = mul %x, %c : i32[4]\n").find("mul") !=
        std::string::npos);
  // Transposes whose perms do not compose to the identity.
  CHECK(simplified("%x: f32[2, 2, 2]", "f32[2, 2, 2]",
                   "  %a = transpose %x {perm = [1, 2, 0]} : f32[2, 2, 2]\n"
                   "  %r = transpose %a {perm = [1, 2, 0]} : f32[2, 2, 2]\n")
            .find("transpose %a") != std::string::npos);
  // A cast to another kind, a relu of a neg.
  CHECK(simplified("%x: f32[4]", "bf16[4]", "  %r = cast %x {to = bf16} : bf16[4]\n").find("cast") != std::string::npos);
  CHECK(simplified("%x: f32[4]", "f32[4]", "  %n = neg %x : f32[4]\n  %r = relu %n : f32[4]\n").find("neg") !=
        std::string::npos);
}

TEST_CASE("a symbolic shape is fine as long as the types match exactly") {
  const std::string out = simplified("%x: f32[N, 8]", "f32[N, 8]",
                                     "  %one = const {value = 1} : f32[8]\n  %a = mul %x, %one : f32[N, 8]\n"
                                     "  %b = neg %a : f32[N, 8]\n  %r = neg %b : f32[N, 8]\n");
  CHECK(returns(out, "%x"));
}

TEST_CASE("a 20,000-long chain of x * 1 collapses to x in one run") {
  std::string text = "func @f(%x: f32[4]) -> f32[4] {\n^entry:\n  %one = const {value = 1} : f32[]\n";
  std::string prev = "%x";
  for (int k = 0; k < 20000; ++k) {
    const std::string v = "%m" + std::to_string(k);
    text += "  " + v + " = mul " + prev + ", %one : f32[4]\n";
    prev = v;
  }
  text += "  %r = relu " + prev + " : f32[4]\n  ret %r\n}\n";
  const std::string out = opt(text, "simplify,eliminate-dead-code");
  CHECK(out == "func @f(%x: f32[4]) -> f32[4] {\n^entry:\n  %r = relu %x : f32[4]\n  ret %r\n}\n");
}
