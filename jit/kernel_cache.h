// SPDX-License-Identifier: Apache-2.0
// kernel_cache.h - the Engine's on-disk kernel cache: keys from specialized IR, artifacts through DiskCache.
//
// The key of a kernel is the canonical text of the specialized module (before the pass
// pipeline, or after it where compile-time decisions or a rows bound needed it), the
// function, the engine's targets (TargetChoice::key(): "x86>reference" under auto), the
// target's machine text (Target::cache_key_text(): device, features, toolchain), the
// compile options (CompileOptions::key(): level, threads, tuning mode, the target's
// options, decisions, rows bound), the ternjit version and the build id (cache/key.h).
// A hit skips the pass pipeline and the target's compile; the loader still runs. Every disk problem is a warning and a compile without the cache, never an
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
#include "targets/registry.h"
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
  std::string version;              ///< key field "version" (cache::ternjit_version() by default)
  std::string build_id;             ///< key field "build_id"; empty: cache::build_id(), computed on first use
};

/// The disk-cache configuration of `options`: cache_dir "off" disables, "" means
/// default_cache_dir() (jit/options.h); warnings go to `log`.
KernelCacheConfig kernel_cache_config(const EngineOptions& options, cache::LogFn log);

/// One engine's view of the disk cache, for its targets: artifacts, and the files targets
/// keep beside them (targets::SideFiles, as cache::DiskCache::get_file / put_file).
/// Thread-safe. The directory is opened on first use; when that fails the cache warns
/// once and stays off, for artifacts and side files alike.
class KernelCache final : public targets::SideFiles {
 public:
  /// The targets of `targets` must outlive the cache.
  KernelCache(KernelCacheConfig config, targets::TargetChoice targets);

  /// The artifact of `function` of `module` (shapes bound) compiled with `options`:
  /// from the disk when a verified entry exists, else from `compile()` (which may modify
  /// `module`: the key is computed before it runs), stored afterwards. Errors only come
  /// from `compile`. `state` (optional) says which happened.
  Result<targets::Artifact> get_or_compile(const ir::Module& module, std::string_view function,
                                           const targets::CompileOptions& options,
                                           const std::function<Result<targets::Artifact>()>& compile,
                                           DiskState* state = nullptr);

  /// The key get_or_compile uses.
  cache::Key key_of(const ir::Module& module, std::string_view function, const targets::CompileOptions& options);

  /// The opened store, or null when the cache is off or its directory was refused.
  cache::DiskCache* disk();
  /// False when the engine turned the cache off (cache_dir "off").
  [[nodiscard]] bool enabled() const { return config_.enabled; }

  /// targets::SideFiles over the store (key: cache::target_file_key with this engine's
  /// version); a disabled or refused cache has no side files (reads miss, writes store nothing).
  [[nodiscard]] const std::string& where() const override { return config_.disk.dir; }
  [[nodiscard]] std::optional<std::string> read(
      std::string_view name, std::string_view identity, std::uint64_t max_bytes,
      const std::function<Result<void>(std::string_view)>& check) const override;
  Result<void> write(std::string_view name, std::string_view identity, std::string_view bytes) const override;

 private:
  KernelCacheConfig config_;
  targets::TargetChoice targets_;
  mutable std::once_flag opened_;
  mutable std::unique_ptr<cache::DiskCache> disk_;
  [[nodiscard]] cache::DiskCache* open_disk() const;
  void warn(const std::string& message) const;

  std::once_flag described_;
  std::string machine_, build_id_;  // Target::cache_key_text() of the engine's target; build_id()
};

}  // namespace ternjit::jit
