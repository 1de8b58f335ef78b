// SPDX-License-Identifier: Apache-2.0
// specialize_testing.h - helpers shared by the inline-calls and specialize-shapes tests.
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <string>

#include "formats/run_inputs.h"
#include "ir/bind.h"
#include "ir/interpret.h"
#include "ir/parse.h"
#include "ir/print.h"
#include "ir/verify.h"

namespace ternjit::passes::spec_testing {

/// Parses IR text; fails the test with the diagnostics otherwise.
inline ir::Module parse_ok(const std::string& text) {
  auto r = ir::parse_module(text, "t.tir");
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? std::string() : render(r.error())));
  return std::move(r).value();
}

/// Fails the test with every verifier diagnostic and the IR.
inline void verify_ok(const ir::Module& m) {
  for (const Diagnostic& d : ir::verify_module(m)) FAIL_CHECK(render(d) << "\n" << ir::print_module(m));
}

/// Runs `func` of both modules on the same random inputs (shapes from `shapes`) and
/// requires bit-identical outputs.
inline void check_same_outputs(const ir::Module& before, const ir::Module& after, const std::string& func,
                               const std::string& shapes, std::uint64_t seed) {
  auto sb = ir::parse_shape_list(shapes);
  REQUIRE(sb.ok());
  formats::PrepareOptions popts;
  popts.seed = seed;
  auto run = formats::prepare_run(before, *before.find_function(func), nullptr, nullptr, sb.value(), popts);
  REQUIRE_MESSAGE(run.ok(), (run.ok() ? std::string() : render(run.error())));
  auto want = ir::interpret(before, func, run->args, run->params);
  REQUIRE_MESSAGE(want.ok(), (want.ok() ? std::string() : render(want.error())));
  auto got = ir::interpret(after, func, run->args, run->params);
  REQUIRE_MESSAGE(got.ok(), (got.ok() ? std::string() : render(got.error())));
  REQUIRE(got->size() == want->size());
  for (std::size_t i = 0; i < got->size(); ++i) {
    auto mismatch = ir::compare((*want)[i], (*got)[i], 0, 0);
    CHECK_MESSAGE(!mismatch, "result " << i << ": " << (mismatch ? mismatch->message : ""));
  }
}

}  // namespace ternjit::passes::spec_testing
