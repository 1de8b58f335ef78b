// SPDX-License-Identifier: Apache-2.0
// targets_test.cpp - the differential test across targets: generator options, comparison, engine runs.
#include <doctest/doctest.h>

#include <string>
#include <utility>
#include <vector>

#include "ir/interpret.h"
#include "ir/parse.h"
#include "ir/print.h"
#include "tests/difftest/targets.h"

namespace ternjit::difftest {
namespace {

const std::uint64_t kSeeds[] = {1, 2};

TEST_CASE("target mode programs have one block and quantizers on unrounded values") {
  for (std::uint64_t seed = 1; seed <= 300; ++seed) {
    ir::Module m = generate_program(seed, target_gen_options());
    for (const ir::Function& f : m.functions()) CHECK_MESSAGE(f.num_blocks() == 1, ir::print_module(m));
  }
  // The defaults are unchanged: the pass test still sees control flow.
  int multi = 0;
  for (std::uint64_t seed = 1; seed <= 100; ++seed) {
    const ir::Module m = generate_program(seed);
    for (const ir::Function& f : m.functions()) multi += f.num_blocks() > 1;
  }
  CHECK(multi > 0);
}

TEST_CASE("the target comparison: integers exactly, floats within the argued tolerance") {
  const std::vector<ir::HostTensor> want{ir::HostTensor::from_f32({2}, std::vector<float>{1.0f, -3.0f}),
                                         ir::HostTensor::from_i32({1}, std::vector<std::int32_t>{7})};
  std::vector<ir::HostTensor> got = want;
  CHECK_FALSE(compare_target_results(want, got, {}).has_value());
  got[0].data[1] = -3.0 * (1 + 1e-5);  // an accumulation-order difference: agrees
  CHECK_FALSE(compare_target_results(want, got, {}).has_value());
  got[0].data[1] = -3.01;  // a miscompile: does not
  auto mm = compare_target_results(want, got, {});
  REQUIRE(mm.has_value());
  CHECK(mm->find("result 0") == 0);
  got[0] = want[0];
  got[1].data[0] = 8;  // integers are exact
  REQUIRE(compare_target_results(want, got, {}).has_value());
  CHECK(compare_target_results(want, got, {})->find("result 1") == 0);
  // The bound scales the absolute tolerance (cancellation in a large-magnitude chain).
  got[1] = want[1];
  got[0].data[0] = 1.0 + 5e-3;
  CHECK(compare_target_results(want, got, {}).has_value());
  CHECK_FALSE(compare_target_results(want, got, {100.0, 1.0}).has_value());
}

TEST_CASE("check_targets runs programs through an engine and reports its errors per target") {
  const TargetConfig reference{"reference", "reference", "", 1};
  for (std::uint64_t seed = 1; seed <= 10; ++seed) {
    ir::Module m = generate_program(seed, target_gen_options());
    CheckReport r = check_targets(m, std::span(&reference, 1), kSeeds);
    CHECK(r.original_error.empty());
    CHECK(r.runs == (kv_in_place_pairs(m).empty() ? 2 : 4));  // a cache in place: a second run per seed
    CHECK_MESSAGE(r.failures.empty(), (r.failures.empty() ? "" : r.failures[0].message));
  }
  const TargetConfig bogus{"bogus", "no-such-target", "", 1};
  const ir::Module one = generate_program(1, target_gen_options());
  CheckReport r = check_targets(one, std::span(&bogus, 1), kSeeds);
  REQUIRE(r.failures.size() == 2);  // one per seed (no engine: no in-place run either)
  CHECK(r.failures[0].level == "bogus");
  CHECK(r.failures[0].message.find("target failed") == 0);
}

// A decoder step of two layers (tests/unit/engine/kv_in_place_test.cpp): the cache argument
// %kc is written at layer 0, read, written at layer 1 and returned as result 0.
constexpr const char* kChain = R"(meta "difftest.ranges" = "pos:0:4"
func @main(%x: f32[2, 1, 4], %pos: i32[], %kc: f32[2, 6, 1, 4]) -> (f32[2, 6, 1, 4], f32[2, 1, 4]) {
^entry:
  %k0 = kv_write %kc, %x, %pos {layer = 0} : f32[2, 6, 1, 4]
  %a0 = attention %x, %k0, %k0, %pos {layer = 0, scale = 0.5} : f32[2, 1, 4]
  %k1 = kv_write %k0, %a0, %pos {layer = 1} : f32[2, 6, 1, 4]
  %a1 = attention %a0, %k1, %k1, %pos {layer = 1, scale = 0.5} : f32[2, 1, 4]
  ret %k1, %a1
}
)";

ir::Module parse(const std::string& text) {
  auto m = ir::parse_module(text, "kv.tir");
  REQUIRE_MESSAGE(m.ok(), (m.ok() ? std::string() : render(m.error())));
  return std::move(m.value());
}

TEST_CASE("kv_in_place_pairs: the caches the KV convention lets a caller pass as one buffer") {
  using Pairs = std::vector<std::pair<std::size_t, std::size_t>>;
  CHECK(kv_in_place_pairs(parse(kChain)) == Pairs{{2, 0}});
  const std::string head = "func @main(%x: f32[2, 1, 4], %pos: i32[], %kc: f32[2, 6, 1, 4]) -> ";
  // The argument is read by an attention too: never written.
  CHECK(kv_in_place_pairs(parse(head + "(f32[2, 6, 1, 4], f32[2, 1, 4]) {\n^entry:\n"
                                       "  %s = attention %x, %kc, %kc, %pos {layer = 1, scale = 0.5} : f32[2, 1, 4]\n"
                                       "  %k0 = kv_write %kc, %s, %pos {layer = 0} : f32[2, 6, 1, 4]\n"
                                       "  ret %k0, %s\n}\n"))
            .empty());
  // Two writes of one argument (a fork), and the cache before the second write read after it.
  CHECK(kv_in_place_pairs(parse(head + "(f32[2, 6, 1, 4], f32[2, 6, 1, 4]) {\n^entry:\n"
                                       "  %k0 = kv_write %kc, %x, %pos {layer = 0} : f32[2, 6, 1, 4]\n"
                                       "  %k1 = kv_write %kc, %x, %pos {layer = 1} : f32[2, 6, 1, 4]\n"
                                       "  ret %k0, %k1\n}\n"))
            .empty());
  CHECK(kv_in_place_pairs(parse(head + "(f32[2, 6, 1, 4], f32[2, 1, 4]) {\n^entry:\n"
                                       "  %k0 = kv_write %kc, %x, %pos {layer = 0} : f32[2, 6, 1, 4]\n"
                                       "  %k1 = kv_write %k0, %x, %pos {layer = 1} : f32[2, 6, 1, 4]\n"
                                       "  %a = attention %x, %k0, %k0, %pos {layer = 0, scale = 0.5} : f32[2, 1, 4]\n"
                                       "  ret %k1, %a\n}\n"))
            .empty());
  // Returned twice: one buffer cannot be two results.
  CHECK(kv_in_place_pairs(parse(head + "(f32[2, 6, 1, 4], f32[2, 6, 1, 4]) {\n^entry:\n"
                                       "  %k0 = kv_write %kc, %x, %pos {layer = 0} : f32[2, 6, 1, 4]\n"
                                       "  ret %k0, %k0\n}\n"))
            .empty());
}

TEST_CASE("check_targets runs a program with a cache to update in place twice: distinct buffers and one buffer") {
  const ir::Module m = parse(kChain);
  std::vector<TargetConfig> targets = {TargetConfig{"reference", "reference", "", 1}};
  for (const TargetConfig& t : available_targets())
    if (t.name == "llvm" || t.name == "x86/avx2") targets.push_back(t);
  for (const TargetConfig& t : targets) {
    CAPTURE(t.name);
    CheckReport r = check_targets(m, std::span(&t, 1), kSeeds);
    CHECK(r.original_error.empty());
    CHECK(r.runs == 4);
    CHECK_MESSAGE(r.failures.empty(), (r.failures.empty() ? "" : r.failures[0].level + ": " + r.failures[0].message));
    // The in-place run gives the interpreter's cache: the rows written and the rows kept.
    auto got = run_on_target(t, m, make_inputs(m, 1), true);
    REQUIRE_MESSAGE(got.ok(), (got.ok() ? std::string() : got.error().message));
    auto want = ir::interpret(m, "main", make_inputs(m, 1).args, {});
    REQUIRE(want.ok());
    CHECK_FALSE(compare_target_results(*want, *got, {}).has_value());
  }
}

TEST_CASE("available_targets: x86 at each ISA cap this CPU runs, then the other targets; select by name") {
  std::vector<std::string> skipped;
  const std::vector<TargetConfig> all = available_targets(&skipped);
  for (const TargetConfig& t : all) CHECK(t.name != "reference");
  CHECK(all.size() + skipped.size() >= 6);  // five x86 caps and llvm, available or not
  if (all.empty()) return;
  auto one = select_targets(all, all.front().name);
  REQUIRE(one.ok());
  CHECK(one->size() == 1);
  CHECK_FALSE(select_targets(all, "no-such-target").ok());
}

}  // namespace
}  // namespace ternjit::difftest
