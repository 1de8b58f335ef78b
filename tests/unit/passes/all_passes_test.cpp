// SPDX-License-Identifier: Apache-2.0
// all_passes_test.cpp - properties of every registered pass and level over the IR test files:
// running twice changes nothing, and interpreter results stay the same.
#include <doctest/doctest.h>

#include <set>
#include <string>
#include <vector>

#include "formats/run_inputs.h"
#include "ir/interpret.h"
#include "ir/print.h"
#include "passes/pipeline.h"
#include "tests/unit/passes/pass_testing.h"

using namespace ternjit;

namespace {

// The passes that must keep results bit-identical (they never reassociate or fuse).
const std::set<std::string_view> kExactPasses = {"fold-constants", "eliminate-dead-code",
                                                 "eliminate-common-subexpressions", "simplify"};

double rtol_for(ElemKind k) {
  switch (k) {
    case ElemKind::F32: return 1e-5;
    case ElemKind::F16: case ElemKind::BF16: return 1e-2;
    default: return 0;
  }
}

struct Run {
  std::string function;
  std::vector<ir::HostTensor> outputs;
  formats::RunInputs inputs;
};

// Runs every function of `m` that runs on small random inputs (one whose reference
// run fails, e.g. a loop whose count is random, is left out).
std::vector<Run> run_all(const ir::Module& m, std::uint64_t seed) {
  std::vector<Run> runs;
  for (const ir::Function& f : m.functions()) {
    formats::PrepareOptions po;
    po.seed = seed;
    auto inputs = formats::prepare_run(m, f, nullptr, nullptr, testing::small_shapes(m, f), po);
    if (!inputs.ok()) continue;
    auto out = ir::interpret(m, f, inputs->args, inputs->params, testing::test_interpret_options());
    if (!out.ok()) continue;
    runs.push_back(Run{f.name(), std::move(out).value(), std::move(inputs).value()});
  }
  return runs;
}

// Checks that `after` computes what `runs` recorded on the same inputs.
void check_same_results(const ir::Module& after, const std::vector<Run>& runs, bool exact) {
  for (const Run& r : runs) {
    INFO("function @", r.function);
    const ir::Function* f = after.find_function(r.function);
    if (!f) continue;  // e.g. inlined away
    auto out = ir::interpret(after, *f, r.inputs.args, r.inputs.params, testing::test_interpret_options());
    REQUIRE_MESSAGE(out.ok(), (out.ok() ? "" : render(out.error())));
    REQUIRE(out->size() == r.outputs.size());
    for (std::size_t k = 0; k < out->size(); ++k) {
      const double rtol = exact ? 0 : rtol_for(r.outputs[k].kind);
      auto mismatch = ir::compare(r.outputs[k], (*out)[k], rtol, rtol / 10);
      CHECK_MESSAGE(!mismatch, "result ", k, ": ", (mismatch ? mismatch->message : ""));
    }
  }
}

std::string label(const std::filesystem::path& p) { return p.parent_path().filename().string() + "/" + p.filename().string(); }

}  // namespace

TEST_CASE("every pass: a second run changes nothing, and the IR stays valid") {
  for (const auto& path : testing::ir_test_files()) {
    const std::string text = testing::read_file(path);
    for (const passes::PassInfo& p : passes::all_passes()) {
      INFO(label(path), " with ", std::string(p.name));
      ir::Module m = testing::parse_ok(text, path.filename().string());
      testing::run_list(m, {&p});
      const std::string once = ir::print_module(m);
      testing::run_list(m, {&p});
      CHECK(ir::print_module(m) == once);
      // The printed result is canonical text: it parses back to itself.
      CHECK(ir::print_module(testing::parse_ok(once)) == once);
    }
  }
}

TEST_CASE("every pass and every level keeps the reference results") {
  std::size_t compared = 0;
  for (const auto& path : testing::ir_test_files()) {
    const std::string text = testing::read_file(path);
    const ir::Module original = testing::parse_ok(text, path.filename().string());
    for (std::uint64_t seed : {1, 2}) {
      const std::vector<Run> runs = run_all(original, seed);
      compared += runs.size();
      for (const passes::PassInfo& p : passes::all_passes()) {
        INFO(label(path), " seed ", seed, " with ", std::string(p.name));
        ir::Module m = original;
        testing::run_list(m, {&p});
        check_same_results(m, runs, kExactPasses.contains(p.name));
      }
      for (passes::OptLevel l : {passes::OptLevel::O1, passes::OptLevel::O2, passes::OptLevel::O3}) {
        INFO(label(path), " seed ", seed, " at ", std::string(passes::opt_level_name(l)));
        ir::Module m = original;
        testing::run_list(m, passes::default_pipeline(l));
        check_same_results(m, runs, false);
      }
    }
  }
  CHECK(compared > 20);
}
