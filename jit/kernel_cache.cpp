// SPDX-License-Identifier: Apache-2.0
// kernel_cache.cpp - KernelCache: the engine's keys, artifact (de)serialization and disk lookups.
#include "jit/kernel_cache.h"

#include <cstdio>

#include "cache/artifact_codec.h"
#include "ir/print.h"
#include "jit/options.h"

namespace ternjit::jit {

std::string_view disk_state_name(DiskState state) {
  switch (state) {
    case DiskState::Off: return "off";
    case DiskState::Hit: return "hit";
    case DiskState::Miss: return "miss";
  }
  return "?";
}

KernelCacheConfig kernel_cache_config(const EngineOptions& o, cache::LogFn log) {
  KernelCacheConfig c;
  c.enabled = o.cache_dir != "off";
  c.disk.dir = o.cache_dir.empty() ? default_cache_dir() : o.cache_dir;
  c.disk.max_bytes = o.cache_max_bytes == 0 ? cache::kDefaultMaxBytes : o.cache_max_bytes;
  c.disk.shared_group = o.cache_shared_group;
  c.disk.log = std::move(log);
  c.version = std::string(cache::ternjit_version());
  return c;
}

KernelCache::KernelCache(KernelCacheConfig config, targets::TargetChoice targets)
    : config_(std::move(config)), targets_(targets) {}

cache::DiskCache* KernelCache::disk() { return open_disk(); }

cache::DiskCache* KernelCache::open_disk() const {
  if (!config_.enabled) return nullptr;
  std::call_once(opened_, [&] {
    auto d = cache::DiskCache::open(config_.disk);
    if (d.ok()) {
      disk_ = std::move(d.value());
      return;
    }
    warn(d.error().message + "; compiling without the disk cache");
  });
  return disk_.get();
}

std::optional<std::string> KernelCache::read(std::string_view name, std::string_view identity,
                                             std::uint64_t max_bytes,
                                             const std::function<Result<void>(std::string_view)>& check) const {
  cache::DiskCache* d = open_disk();
  if (d == nullptr) return std::nullopt;
  return d->get_file(cache::target_file_key(name, identity, config_.version), max_bytes, check);
}

Result<void> KernelCache::write(std::string_view name, std::string_view identity, std::string_view bytes) const {
  cache::DiskCache* d = open_disk();
  if (d == nullptr) return success();  // off, or refused (said once): nothing is stored
  return d->put_file(cache::target_file_key(name, identity, config_.version), bytes);
}

void KernelCache::warn(const std::string& message) const {
  const std::string line = "ternjit: cache: " + message;
  if (config_.disk.log) {
    config_.disk.log(line);
  } else {
    std::fputs((line + "\n").c_str(), stderr);
  }
}

cache::Key KernelCache::key_of(const ir::Module& module, std::string_view function,
                               const targets::CompileOptions& options) {
  std::call_once(described_, [&] {
    machine_ = targets_.target->cache_key_text();
    build_id_ = config_.build_id.empty() ? cache::build_id() : config_.build_id;
  });
  cache::ArtifactKeyInputs in;
  in.ir = ir::print_module(module);
  in.function = std::string(function);
  in.target = targets_.key();
  in.machine = machine_;
  in.compile_options = options.key();
  in.version = config_.version;
  in.build_id = build_id_;
  return cache::artifact_key(in);
}

Result<targets::Artifact> KernelCache::get_or_compile(const ir::Module& module, std::string_view function,
                                                      const targets::CompileOptions& options,
                                                      const std::function<Result<targets::Artifact>()>& compile,
                                                      DiskState* state) {
  if (state) *state = DiskState::Off;
  cache::DiskCache* d = disk();
  if (!d) return compile();
  const cache::Key key = key_of(module, function, options);
  std::optional<targets::Artifact> compiled;
  cache::Outcome how = cache::Outcome::Miss;
  auto bytes = d->get_or_build(
      key,
      [&]() -> Result<std::string> {
        TERNJIT_TRY(targets::Artifact a, compile());
        std::string encoded = cache::encode_artifact(a);
        compiled = std::move(a);
        return encoded;
      },
      &how);
  if (!bytes.ok()) return std::move(bytes).error();
  if (compiled) {
    if (state) *state = DiskState::Miss;
    return std::move(*compiled);
  }
  // The entry verified, but its payload must still decode and describe this kernel (a
  // codec bug or change, or an entry written for another signature): else drop it and
  // compile as if it had not been there.
  auto artifact = cache::decode_artifact(*bytes);
  Result<void> usable = artifact.ok() ? cache::check_artifact_signature(*artifact, module, function)
                                      : Result<void>(artifact.error());
  if (usable.ok()) {
    if (state) *state = DiskState::Hit;
    return artifact;
  }
  d->remove(key, usable.error().message);
  if (state) *state = DiskState::Miss;
  TERNJIT_TRY(targets::Artifact a, compile());
  if (auto stored = d->put(key, cache::encode_artifact(a)); !stored.ok())
    warn(stored.error().message + "; the kernel is used without being cached");
  return a;
}

}  // namespace ternjit::jit
