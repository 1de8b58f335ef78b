// SPDX-License-Identifier: Apache-2.0
// bench_cmd.h - `ternjit bench`: time one layer's compiled kernel beside the reference target and the machine's
// ceilings.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "targets/registry.h"
#include "tools/ternjit/flags.h"

namespace CLI {
class App;
}

namespace ternjit::cli {

/// Options of `ternjit bench`.
struct BenchCommandOptions {
  std::string file;                 ///< the .tri or .tir input
  FunctionFlags function;           ///< --layer, --function
  std::vector<std::string> shapes;  ///< "M=1,K=64" (repeatable; the one shape-binding rule, resolve_shapes)
  TargetFlags target;               ///< --target (default auto), its options, --threads, -O, --cache-dir
  int warmup = 3;                   ///< untimed calls first
  int reps = 10;                    ///< timed calls at least
  double min_time = 0.5;            ///< seconds: keep repeating until this long has passed (>= reps calls)
  double ref_max_time = 2.0;        ///< seconds: skip the reference when its estimated time is above this
  bool cold = false;                ///< rotate weight copies beyond the last-level cache
  std::uint64_t seed = 1;           ///< random inputs and parameters
  bool json = false;                ///< print one JSON object instead of the table
  std::string plot;                 ///< write a roofline PNG here (needs python3-matplotlib)
};

/// Runs the benchmark on the target the flags name (`registry`: the CLI's) and prints the
/// table (or JSON) to stdout. Returns 0, or 1 after printing an error (bad input, an
/// unavailable target, a kernel that disagrees with the reference, --plot without
/// python3-matplotlib).
int cmd_bench(const BenchCommandOptions& options, const targets::TargetRegistry& registry);

/// Adds the `bench` subcommand to `app` (its callback runs cmd_bench and ends parsing
/// with its status, like `tune`; `registry` must outlive the parse).
void add_bench_command(CLI::App& app, const targets::TargetRegistry& registry);

}  // namespace ternjit::cli
