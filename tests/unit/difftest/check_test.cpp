// SPDX-License-Identifier: Apache-2.0
// check_test.cpp - the differential checker catches wrong passes, tolerates rounding, minimizes.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "ir/parse.h"
#include "ir/print.h"
#include "tests/difftest/check.h"
#include "tests/difftest/gen.h"

namespace ternjit::difftest {
namespace {

const std::uint64_t kSeeds[] = {1, 2, 3};

ir::Module parse(const std::string& text) {
  auto m = ir::parse_module(text, "test.tir");
  REQUIRE_MESSAGE(m.ok(), (m.ok() ? std::string() : render(m.error())));
  return std::move(m.value());
}

// Deliberately wrong passes (the checker must catch them).
void add_becomes_sub(ir::Function& f) {
  for (ir::BlockId b : f.blocks())
    for (ir::InstId i : f.insts(b))
      if (f.inst(i).op == ir::Op::Add) f.inst(i).op = ir::Op::Sub;
}
// Moves every float constant by kPpm parts per million and every i32 constant by 1.
template <int kPpm>
void nudge_constants(ir::Function& f) {
  for (ir::BlockId b : f.blocks())
    for (ir::InstId i : f.insts(b)) {
      ir::InstData& in = f.inst(i);
      if (in.op != ir::Op::Const) continue;
      ElemKind k = f.type_of(in.results[0]).elem;
      for (double& v : std::get<ir::ConstAttrs>(in.attrs).values) {
        if (is_float(k)) v = static_cast<double>(static_cast<float>(v * (1 + kPpm * 1e-6)));
        else if (k == ElemKind::I32) v = v + 1;
      }
    }
}

const passes::PassInfo kBreakAdd{"break-add", passes::FunctionPass{&add_becomes_sub}, "add -> sub"};
const passes::PassInfo kNudgeTiny{"nudge-tiny", passes::FunctionPass{&nudge_constants<0>}, "no-op nudge"};
const passes::PassInfo kNudgeBig{"nudge-big", passes::FunctionPass{&nudge_constants<10000>}, "1% nudge"};

TEST_CASE("default levels are O0..O3") {
  auto levels = default_levels();
  REQUIRE(levels.size() == 4);
  CHECK(levels[0].name == "O0");
  CHECK(levels[3].name == "O3");
}

TEST_CASE("an empty pipeline agrees with itself") {
  Level none{"none", {}};
  for (std::uint64_t seed = 0; seed < 20; ++seed) {
    CheckReport r = check_module(generate_program(seed), std::span(&none, 1), kSeeds);
    CHECK(r.original_error.empty());
    CHECK(r.runs == 3);
    CHECK(r.failures.empty());
  }
}

TEST_CASE("a wrong pass is caught, with the level, input seed and first mismatch") {
  ir::Module m = parse(R"(func @main(%x: f32[4], %y: f32[4]) -> f32[4] {
^entry:
  %0 = add %x, %y : f32[4]
  ret %0
}
)");
  Level broken{"broken", {&kBreakAdd}};
  CheckReport r = check_module(m, std::span(&broken, 1), kSeeds);
  CHECK(r.runs == 3);
  REQUIRE(r.failures.size() == 3);
  CHECK(r.failures[0].level == "broken");
  CHECK(r.failures[0].input_seed == 1);
  CHECK(r.failures[0].message.find("result 0: element [") == 0);
  CHECK(r.failures[0].optimized_ir.find("sub %x, %y") != std::string::npos);

  // On random programs, too: most programs add somewhere.
  int caught = 0;
  for (std::uint64_t seed = 0; seed < 40; ++seed)
    caught += check_module(generate_program(seed), std::span(&broken, 1), kSeeds).failures.empty() ? 0 : 1;
  CHECK(caught >= 10);
}

TEST_CASE("integers compare exactly, floats within the tolerance") {
  ir::Module m = parse(R"(func @main(%x: f32[4], %i: i32[4]) -> (f32[4], i32[4]) {
^entry:
  %c = const {value = 0.5} : f32[]
  %0 = mul %x, %c : f32[4]
  %k = const {value = 7} : i32[]
  %1 = add %i, %k : i32[4]
  ret %0, %1
}
)");
  Level tiny{"tiny", {&kNudgeTiny}}, big{"big", {&kNudgeBig}};
  // The integer constant moved by 1: caught exactly, on result 1.
  CheckReport r = check_module(m, std::span(&tiny, 1), kSeeds);
  REQUIRE(r.failures.size() == 3);
  CHECK(r.failures[0].message.find("result 1:") == 0);
  // A 1% float change is caught on result 0.
  ir::Module f = parse(R"(func @main(%x: f32[4]) -> f32[4] {
^entry:
  %c = const {value = 0.75} : f32[]
  %0 = mul %x, %c : f32[4]
  ret %0
}
)");
  CHECK(check_module(f, std::span(&big, 1), kSeeds).failures.size() == 3);
  // An f32 ulp is within the tolerance.
  Tolerance t;
  CHECK(t.rtol > 1e-7);
  CHECK(t.rtol < 1e-3);
}

TEST_CASE("an original program that cannot run is reported apart") {
  ir::Module m = parse(R"(func @main(%x: i32[2]) -> i32[2] {
^entry:
  %z = const {value = 0} : i32[]
  %0 = div %x, %z : i32[2]
  ret %0
}
)");
  Level none{"none", {}};
  CheckReport r = check_module(m, std::span(&none, 1), kSeeds);
  CHECK(!r.original_error.empty());
  CHECK(r.failures.empty());
}

TEST_CASE("minimize shrinks a failing program and keeps it failing") {
  Level broken{"broken", {&kBreakAdd}};
  int shrunk = 0;
  for (std::uint64_t seed = 0; seed < 40 && shrunk < 3; ++seed) {
    ir::Module m = generate_program(seed);
    if (check_module(m, std::span(&broken, 1), kSeeds).failures.empty()) continue;
    ir::Module small = minimize(m, broken, kSeeds);
    INFO("seed " << seed << "\n" << ir::print_module(small));
    CHECK(!check_module(small, std::span(&broken, 1), kSeeds).failures.empty());
    const std::string text = ir::print_module(small);
    CHECK(text.size() < ir::print_module(m).size());
    CHECK(text.find("add ") != std::string::npos);
    ++shrunk;
  }
  CHECK(shrunk == 3);
}

}  // namespace
}  // namespace ternjit::difftest
