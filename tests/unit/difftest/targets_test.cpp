// SPDX-License-Identifier: Apache-2.0
// targets_test.cpp - the differential test across targets: generator options, comparison, engine runs.
#include <doctest/doctest.h>

#include <string>

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
    CHECK(r.runs == 2);
    CHECK_MESSAGE(r.failures.empty(), (r.failures.empty() ? "" : r.failures[0].message));
  }
  const TargetConfig bogus{"bogus", "no-such-target", "", 1};
  CheckReport r = check_targets(generate_program(1, target_gen_options()), std::span(&bogus, 1), kSeeds);
  REQUIRE(r.failures.size() == 2);
  CHECK(r.failures[0].level == "bogus");
  CHECK(r.failures[0].message.find("target failed") == 0);
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
