// SPDX-License-Identifier: Apache-2.0
// kernel_cache.h - the Engine's on-disk kernel cache: keys from specialized IR, artifacts through DiskCache.
//
// The key of a kernel is the canonical text of the specialized module before the pass
// pipeline, the function, the target's name, features and device, the opt level, the
// typed compile options (targets::compile_options_key: level, threads, tuning mode, the
// target's own options), the ternjit version and the build id
// (cache/key.h). A hit skips the pass pipeline and the target's compile; the loader
// still runs. Every disk problem is a warning and a compile without the cache, never an
// error of the kernel (cache/README.md).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "cache/disk_cache.h"
#include "cache/key.h"
#include "ir/ir.h"
#include "passes/pipeline.h"
#include "targets/target.h"
#include "ternjit/engine.h"
#include "ternjit/result.h"

namespace ternjit::jit {

/// How the disk cache served one kernel (the `disk=` field of the verbose trace).
enum class DiskState : std::uint8_t {
  Off,   ///< no disk cache (turned off, or the directory was refused: warned once)
  Hit,   ///< loaded from a verified entry: no pipeline, no target compile
  Miss,  ///< compiled, then stored
};

/// "off", "hit" or "miss".
std::string_view disk_state_name(DiskState state);

/// The disk-cache settings of an engine.
struct KernelCacheConfig {
  bool enabled = true;              ///< false: every lookup is DiskState::Off
  cache::CacheOptions disk;         ///< directory, cap, shared-group mode, warning sink
  std::string opt_level;            ///< "O2"
  std::string compile_options;      ///< targets::compile_options_key(...) + ";fallback=..."
  std::string version;              ///< key field "version" (cache::ternjit_version() by default)
  std::string build_id;             ///< key field "build_id"; empty: cache::build_id(), computed on first use
};

/// The configuration of `options` for target `target` compiling with `compile` (as the
/// engine resolved them): cache_dir "off" disables, "" means default_cache_dir()
/// (jit/options.h); warnings go to `log`.
KernelCacheConfig kernel_cache_config(const EngineOptions& options, std::string_view target,
                                      const targets::CompileOptions& compile, cache::LogFn log);

/// One engine's view of the disk cache, for one target. Thread-safe. The directory is
/// opened on first use; when that fails the cache warns once and stays off.
class KernelCache {
 public:
  /// `target` must outlive the cache.
  KernelCache(KernelCacheConfig config, const targets::Target& target);

  /// The artifact of `function` of `specialized` (shapes bound, pipeline NOT run): from
  /// the disk when a verified entry exists, else from `compile()` (which may modify
  /// `specialized`: the key is computed before it runs), stored afterwards. Errors only
  /// come from `compile`. `state` (optional) says which happened.
  /// `tuning`: the compile-time tuning decisions (key field "tuning"; "" for targets that
  /// decide at load).
  Result<targets::Artifact> get_or_compile(const ir::Module& specialized, std::string_view function,
                                           const std::function<Result<targets::Artifact>()>& compile,
                                           DiskState* state = nullptr, std::string_view tuning = {});

  /// The key get_or_compile uses for `function` of `specialized` with `tuning` decisions.
  cache::Key key_of(const ir::Module& specialized, std::string_view function, std::string_view tuning = {});

  /// The opened store, or null when the cache is off or its directory was refused.
  cache::DiskCache* disk();

 private:
  KernelCacheConfig config_;
  const targets::Target& target_;
  std::once_flag opened_;
  std::unique_ptr<cache::DiskCache> disk_;
  void warn(const std::string& message) const;

  std::once_flag described_;
  std::string features_, device_, build_id_;
  std::string toolchain_;  // Target::toolchain(): driver / compiler versions
};

}  // namespace ternjit::jit
