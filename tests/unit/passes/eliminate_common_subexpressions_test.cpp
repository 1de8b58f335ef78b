// SPDX-License-Identifier: Apache-2.0
// eliminate_common_subexpressions_test.cpp - sharing of identical pure instructions under dominance.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "tests/unit/passes/pass_testing.h"

using namespace ternjit;
using testing::opt;

namespace {

// @f(%x: f32[4]) over `blocks` + 1 blocks chained by br (^entry, ^b1 .. ^b<blocks>). With
// `exps`, every block but the last computes its own `exp %x` and the last returns
// %e<blocks-1> + %e1; without, the blocks hold only their br and the last returns %x.
std::string block_chain(int blocks, bool exps) {
  auto exp = [&](int k) { return exps ? "  %e" + std::to_string(k) + " = exp %x : f32[4]\n" : std::string(); };
  std::string text = "func @f(%x: f32[4]) -> f32[4] {\n^entry:\n" + exp(0) + "  br ^b1\n";
  for (int k = 1; k < blocks; ++k)
    text += "^b" + std::to_string(k) + ":\n" + exp(k) + "  br ^b" + std::to_string(k + 1) + "\n";
  text += "^b" + std::to_string(blocks) + ":\n";
  text += exps ? "  %s = add %e" + std::to_string(blocks - 1) + ", %e1 : f32[4]\n  ret %s\n}\n" : "  ret %x\n}\n";
  return text;
}

}  // namespace

TEST_CASE("a duplicate add is shared") {
  const std::string out = opt(R"(func @f(%x: f32[4], %y: f32[4]) -> f32[4] {
^entry:
  %0 = add %x, %y : f32[4]
  %1 = add %x, %y : f32[4]
  %2 = mul %0, %1 : f32[4]
  ret %2
}
)", "eliminate-common-subexpressions");
  CHECK(out == R"(func @f(%x: f32[4], %y: f32[4]) -> f32[4] {
^entry:
  %0 = add %x, %y : f32[4]
  %1 = mul %0, %0 : f32[4]
  ret %1
}
)");
}

TEST_CASE("a dominating block's value is reused; a sibling's is not") {
  const char* text = R"(func @f(%c: bool[], %x: f32[4]) -> (f32[4], f32[4]) {
^entry:
  cond_br %c, ^a, ^b
^a:
  %a1 = exp %x : f32[4]
  br ^join
^b:
  %b1 = exp %x : f32[4]
  br ^join
^join:
  %j1 = exp %x : f32[4]
  %j2 = exp %x : f32[4]
  ret %j1, %j2
}
)";
  const std::string out = opt(text, "eliminate-common-subexpressions");
  CHECK(out.find("%a1 = exp") != std::string::npos);
  CHECK(out.find("%b1 = exp") != std::string::npos);
  CHECK(out.find("%j1 = exp") != std::string::npos);
  CHECK(out.find("%j2") == std::string::npos);
  CHECK(out.find("ret %j1, %j1") != std::string::npos);
}

TEST_CASE("the entry block dominates a loop body; a later block's value is not used before it") {
  const char* text = R"(func @f(%x: f32[4], %n: i32[]) -> f32[4] {
^entry:
  %one = const {value = 1} : i32[]
  %e = tanh %x : f32[4]
  br ^loop(%x, %one)
^loop(%acc: f32[4], %i: i32[]):
  %one_again = const {value = 1} : i32[]
  %next = add %i, %one_again : i32[]
  %t = tanh %x : f32[4]
  %s = add %acc, %t : f32[4]
  %left = sub %n, %next : i32[]
  cond_br %left, ^loop(%s, %next), ^done
^done:
  %t2 = tanh %x : f32[4]
  %r = add %s, %t2 : f32[4]
  ret %r
}
)";
  const std::string out = opt(text, "eliminate-common-subexpressions");
  CHECK(out.find("%one_again") == std::string::npos);
  CHECK(out.find("%next = add %i, %one") != std::string::npos);
  CHECK(out.find("%s = add %acc, %e") != std::string::npos);
  CHECK(out.find("%r = add %s, %e") != std::string::npos);
}

TEST_CASE("constants are compared bit for bit and with their types") {
  const std::string out = opt(R"(func @f() -> (f32[], f32[], f32[], f16[], f32[], f32[]) {
^entry:
  %a = const {value = 0} : f32[]
  %b = const {value = -0} : f32[]
  %c = const {value = 0} : f32[]
  %d = const {value = 0} : f16[]
  %e = const {value = nan} : f32[]
  %f = const {value = nan} : f32[]
  ret %a, %b, %c, %d, %e, %f
}
)", "eliminate-common-subexpressions");
  CHECK(out.find("ret %a, %b, %a, %d, %e, %e") != std::string::npos);
}

// A chain of blocks makes the dominator tree as deep as the function is long: the walk
// recursed once per block and overflowed the stack at 30,000 blocks.
TEST_CASE("30,000 blocks chained by br: every block's duplicate is shared, without recursion") {
  ir::Module m = testing::parse_ok(block_chain(30000, true));
  testing::run_list(m, {passes::find_pass("eliminate-common-subexpressions")});
  const ir::Function& f = m.functions()[0];
  int exps = 0;
  for (ir::BlockId b : f.blocks())
    for (ir::InstId i : f.insts(b)) exps += f.inst(i).op == ir::Op::Exp;
  CHECK(exps == 1);
  const ir::InstData& add = f.inst(f.insts(f.blocks().back())[0]);
  REQUIRE(add.op == ir::Op::Add);
  CHECK(add.operands[0] == add.operands[1]);
}

// The fuzz finding behind that test (issue 19, item 4): the O2 pipeline, verified after
// every pass, over the bare chain (each block only its br), and the result is still %x.
TEST_CASE("the O2 pipeline over 30,000 blocks chained by br keeps the IR valid and the result") {
  ir::Module m = testing::parse_ok(block_chain(30000, false));
  testing::run_list(m, passes::default_pipeline(passes::OptLevel::O2));
  const std::vector<float> x = {1.5f, -2.0f, 0.0f, 7.25f};
  const std::vector<ir::HostTensor> args = {ir::HostTensor::from_f32({4}, x)};
  auto out = ir::interpret(m, "f", args, ir::ParamValues{});
  REQUIRE_MESSAGE(out.ok(), (out.ok() ? "" : out.error().message));
  REQUIRE(out->size() == 1);
  CHECK(out->front().to_f32() == x);
}

// Many distinct constants of one type share a key without their values: each was
// compared with all the others before (quadratic).
TEST_CASE("distinct constants are told apart by their key; equal ones are shared") {
  std::string text = "func @f(%x: f32[]) -> f32[] {\n^entry:\n";
  std::string acc = "%x";
  for (int k = 0; k < 2000; ++k) {
    const std::string c = "%c" + std::to_string(k), d = "%d" + std::to_string(k), s = "%s" + std::to_string(k);
    text += "  " + c + " = const {value = " + std::to_string(k) + "} : f32[]\n";
    text += "  " + d + " = const {value = " + std::to_string(k) + "} : f32[]\n";
    text += "  " + s + " = add " + c + ", " + d + " : f32[]\n";
  }
  text += "  ret %s1999\n}\n";
  ir::Module m = testing::parse_ok(text);
  testing::run_list(m, {passes::find_pass("eliminate-common-subexpressions")});
  const ir::Function& f = m.functions()[0];
  int consts = 0;
  for (ir::InstId i : f.insts(f.entry())) consts += f.inst(i).op == ir::Op::Const;
  CHECK(consts == 2000);
}
