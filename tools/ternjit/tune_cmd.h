// SPDX-License-Identifier: Apache-2.0
// tune_cmd.h - `ternjit tune`: search kernel configurations of one layer over shapes, store the winners.
#pragma once

#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace ternjit::cli {

/// Options of `ternjit tune`.
struct TuneCommandOptions {
  std::string file;                  ///< the .tri or .tir input
  std::string layer;                 ///< --layer L: the function "L.<fn>"
  std::string fn = "forward";        ///< with --layer: the layer's function
  std::string function;              ///< --function F: a function by its full name
  std::vector<std::string> shapes;   ///< "M=1,8,32" (several values: one tuning per value), "K=64,N=16"
  std::string budget = "60s";        ///< time budget of the whole command ("60s", "2m", "500ms", "90")
  std::string strategy = "halving";  ///< exhaustive, random or halving
  std::string target = "x86";        ///< the target whose tuning spaces are searched
  std::string target_options;        ///< "TARGET.NAME=VALUE;..." (validated by the target)
  std::string max_isa;               ///< shorthand for x86.max_isa ("" = the best the host runs)
  int threads = 1;                   ///< threads the kernels are tuned for
  int trials = 0;                    ///< trial budget per kernel (0: the strategy's default)
  unsigned long long seed = 1;       ///< random choices of the search
  std::string level = "O2";          ///< pipeline level
  std::string cache_dir;             ///< where records go ("" = the default cache dir; "off": not stored)
  bool mpi = false;                  ///< split candidates across MPI ranks (mpirun -n R ternjit tune ... --mpi)
  bool quiet = false;                ///< no progress output
};

/// Runs the tuning and prints the table (shapes x kernels x chosen config x speedup over
/// the default configuration) to stdout; progress to stderr (a bar on a terminal,
/// plain lines otherwise). Returns 0, or 1 after printing an error.
int cmd_tune(const TuneCommandOptions& options);

/// Adds the `tune` subcommand to `app` (its callback runs cmd_tune and ends parsing
/// with its status, like `compile`).
void add_tune_command(CLI::App& app);

}  // namespace ternjit::cli
