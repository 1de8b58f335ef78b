// SPDX-License-Identifier: Apache-2.0
// fusion_testing.h - helpers of the fusion tests: apply a pass, count ops, compare interpreter runs.
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <string>

#include "formats/run_inputs.h"
#include "ir/bind.h"
#include "ir/interpret.h"
#include "ir/print.h"
#include "ir/verify.h"
#include "passes/passes.h"
#include "tests/unit/passes/pass_testing.h"

namespace ternjit::testing {

/// A copy of `m` with `pass` run on every function; the result must verify.
template <class Pass>
ir::Module apply(const ir::Module& m, Pass pass) {
  ir::Module out = m;
  for (ir::Function& f : out.functions()) pass(f);
  const auto diags = ir::verify_module(out);
  if (!diags.empty()) FAIL(render(diags[0]) << "\n" << ir::print_module(out));
  return out;
}

/// How many instructions of `op` the module's functions hold.
inline std::size_t count_op(const ir::Module& m, ir::Op op) {
  std::size_t n = 0;
  for (const ir::Function& f : m.functions())
    for (ir::BlockId b : f.blocks())
      for (ir::InstId i : f.insts(b)) n += f.inst(i).op == op ? 1 : 0;
  return n;
}

/// Runs every function of `before` and `after` on the same random inputs and parameters
/// (from `seed`) and checks the results agree within rtol/atol (0: bit-exact). When the
/// reference run fails (e.g. an integer division by zero), the other must fail too.
/// Returns the number of functions compared.
inline int check_same_results(const ir::Module& before, const ir::Module& after, std::uint64_t seed, double rtol,
                              double atol) {
  int compared = 0;
  for (const ir::Function& f : before.functions()) {
    INFO("@", f.name(), " seed ", seed);
    formats::PrepareOptions po;
    po.seed = seed;
    auto inputs = formats::prepare_run(before, f, nullptr, nullptr, small_shapes(before, f), po);
    REQUIRE_MESSAGE(inputs.ok(), (inputs.ok() ? "" : render(inputs.error())));
    const ir::Function* g = after.find_function(f.name());
    REQUIRE(g != nullptr);
    auto want = ir::interpret(before, f, inputs->args, inputs->params);
    auto got = ir::interpret(after, *g, inputs->args, inputs->params);
    REQUIRE(want.ok() == got.ok());
    if (!want.ok()) continue;
    REQUIRE(want->size() == got->size());
    for (std::size_t k = 0; k < want->size(); ++k) {
      auto mismatch = ir::compare((*want)[k], (*got)[k], rtol, atol);
      CHECK_MESSAGE(!mismatch, "result ", k, ": ", (mismatch ? mismatch->message : ""), "\nbefore:\n",
                    ir::print_module(before), "after:\n", ir::print_module(after));
    }
    ++compared;
  }
  return compared;
}

/// A small deterministic generator for test shapes and choices (std distributions are
/// not portable, so plain modular arithmetic on mt19937_64 draws).
class Dice {
 public:
  explicit Dice(std::uint64_t seed) : state_(seed * 0x9e3779b97f4a7c15ULL + 1) {}
  /// A value in [lo, hi].
  std::int64_t in(std::int64_t lo, std::int64_t hi) {
    state_ ^= state_ << 13;
    state_ ^= state_ >> 7;
    state_ ^= state_ << 17;
    return lo + static_cast<std::int64_t>(state_ % static_cast<std::uint64_t>(hi - lo + 1));
  }
  /// True with probability 1/n.
  bool one_in(std::int64_t n) { return in(1, n) == 1; }

 private:
  std::uint64_t state_;
};

}  // namespace ternjit::testing
