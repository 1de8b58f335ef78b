// SPDX-License-Identifier: Apache-2.0
// cache_cmd.h - `ternjit cache`: list, inspect, verify, prune, clear and merge the on-disk kernel cache.
#pragma once

#include <cstdint>
#include <string>

namespace CLI {
class App;
}

namespace ternjit::cli {

/// Options of `ternjit cache ACTION`.
struct CacheCommandOptions {
  std::string action;        ///< "ls", "stat", "verify", "prune", "clear" or "merge"
  std::string dir;           ///< --cache-dir (or --dir); empty: TERNJIT_CACHE_DIR, else the default directory
  bool shared_group = false; ///< --shared-group: open in shared-group mode
  bool remove_bad = false;   ///< verify --remove
  std::string max_size;      ///< prune --max-size ("500M")
  std::string other_dir;     ///< merge OTHER_DIR
  bool json = false;         ///< ls/stat --json
};

/// Runs one action on the cache directory and prints its result to stdout (warnings and
/// errors to stderr). Returns 0, or 1 on an error (and for verify, when an entry is bad).
/// A directory that does not exist is never created, except by merge: the other actions
/// report it as empty.
int cmd_cache(const CacheCommandOptions& options);

/// Adds the `cache` subcommand (and its ls, stat, verify, prune, clear and merge
/// subcommands) to `app`; when parsed, its callback runs cmd_cache and ends parsing with
/// the exit status (CLI::Success for 0, CLI::RuntimeError otherwise), as add_compile_command.
void add_cache_command(CLI::App& app);

}  // namespace ternjit::cli
