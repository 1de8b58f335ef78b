// SPDX-License-Identifier: Apache-2.0
// pass_testing.h - helpers of the pass tests: parse, run passes by name, pick shapes, compare runs.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "ir/bind.h"
#include "ir/interpret.h"
#include "ir/parse.h"
#include "ir/print.h"
#include "passes/pipeline.h"
#include "tests/unit/expect.h"
#include "tests/unit/passes/small_shapes.h"

namespace ternjit::testing {

/// Parses IR text that must be valid.
inline ir::Module parse_ok(std::string_view text, std::string_view name = "test.tir") {
  auto m = ir::parse_module(text, name);
  if (!m.ok()) FAIL(render(m.error()));
  return std::move(m).value();
}

/// Runs a pipeline (verifying after each pass) and returns the log.
inline std::string run_list(ir::Module& m, const std::vector<const passes::PassInfo*>& pipeline) {
  auto report = passes::run_pipeline(m, pipeline, passes::PipelineOptions{});
  REQUIRE(report.ok());
  return report->log;
}

/// Parses `text`, runs the comma-separated passes `names` and prints the result.
inline std::string opt(std::string_view text, std::string_view names) {
  ir::Module m = parse_ok(text);
  auto list = passes::parse_pass_list(names);
  REQUIRE(list.ok());
  run_list(m, *list);
  return ir::print_module(m);
}

/// The parseable .tir inputs of the golden directories under tests/ir/ (not the
/// verifier's error files): roundtrip and every pass directory.
inline std::vector<std::filesystem::path> ir_test_files() {
  std::vector<std::filesystem::path> out;
  for (const auto& dir : std::filesystem::directory_iterator(std::filesystem::path(TERNJIT_SOURCE_DIR) / "tests/ir")) {
    if (!dir.is_directory() || dir.path().filename() == "verify") continue;
    for (const auto& f : std::filesystem::directory_iterator(dir.path()))
      if (f.path().extension() == ".tir" && read_file(f.path()).find("expect-error") == std::string::npos)
        out.push_back(f.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

/// Interpreter limits for tests: a loop driven by a random count stops early.
inline ir::InterpretOptions test_interpret_options() {
  ir::InterpretOptions o;
  o.max_steps = 200'000;
  return o;
}

}  // namespace ternjit::testing
