// SPDX-License-Identifier: Apache-2.0
// tune_cmd.h - `ternjit tune`: search kernel configurations of one layer over shapes, store the winners.
#pragma once

#include <string>
#include <vector>

#include "targets/registry.h"
#include "tools/ternjit/flags.h"

namespace CLI {
class App;
}

namespace ternjit::cli {

/// Options of `ternjit tune`.
struct TuneCommandOptions {
  std::string file;                  ///< the .tri or .tir input
  FunctionFlags function;            ///< --layer, --function
  std::vector<std::string> shapes;   ///< "M=1,8,32" (several values: one tuning per value), "K=64,N=16"
  std::string budget = "60s";        ///< time budget of the whole command ("60s", "2m", "500ms", "90")
  std::string strategy = "halving";  ///< exhaustive, random or halving
  TargetFlags target;                ///< --target (default auto), its options, --threads, -O, --cache-dir
  int trials = 0;                    ///< trial budget per kernel (0: the strategy's default)
  unsigned long long seed = 1;       ///< random choices of the search
  bool mpi = false;                  ///< split candidates across MPI ranks (mpirun -n R ternjit tune ... --mpi)
  bool quiet = false;                ///< no progress output
  /// Measure nothing: list, for each tunable kernel of each shape, the records in the
  /// cache that apply under this machine and these options, those that do not and why,
  /// and the decision an engine makes from them (check_records).
  bool check = false;
};

/// Runs the tuning on the target the flags name (`registry`: the CLI's) and prints the
/// table (shapes x kernels x chosen config x speedup over the default configuration) to
/// stdout; progress to stderr (a bar on a terminal, plain lines otherwise). Returns 0,
/// or 1 after printing an error. With `check`: the records report instead (nothing is
/// measured or stored); 0 when every kernel has a record that applies (exact or nearest
/// M), else 1 after saying how many have none.
int cmd_tune(const TuneCommandOptions& options, const targets::TargetRegistry& registry);

/// Adds the `tune` subcommand to `app` (its callback runs cmd_tune and ends parsing
/// with its status, like `compile`; `registry` must outlive the parse).
void add_tune_command(CLI::App& app, const targets::TargetRegistry& registry);

}  // namespace ternjit::cli
