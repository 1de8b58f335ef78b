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

KernelCacheConfig kernel_cache_config(const EngineOptions& o, std::string_view target,
                                      const targets::CompileOptions& compile, cache::LogFn log) {
  KernelCacheConfig c;
  c.enabled = o.cache_dir != "off";
  c.disk.dir = o.cache_dir.empty() ? default_cache_dir() : o.cache_dir;
  c.disk.max_bytes = o.cache_max_bytes == 0 ? cache::kDefaultMaxBytes : o.cache_max_bytes;
  c.disk.shared_group = o.cache_shared_group;
  c.disk.log = std::move(log);
  c.opt_level = std::string(passes::opt_level_name(compile.opt_level));
  // Every typed option that can change the artifact (one function derives the text). An
  // `auto` engine may give a function its target cannot compile to the reference
  // interpreter (jit/specialize.cpp), a named target refuses it: the two must not share
  // that entry.
  const bool fallback = o.target.empty() || o.target == "auto";
  c.compile_options = targets::compile_options_key(target, compile) + ";fallback=" + (fallback ? "reference" : "none");
  c.version = std::string(cache::ternjit_version());
  return c;
}

KernelCache::KernelCache(KernelCacheConfig config, const targets::Target& target)
    : config_(std::move(config)), target_(target) {}

cache::DiskCache* KernelCache::disk() {
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

void KernelCache::warn(const std::string& message) const {
  const std::string line = "ternjit: cache: " + message;
  if (config_.disk.log) {
    config_.disk.log(line);
  } else {
    std::fputs((line + "\n").c_str(), stderr);
  }
}

cache::Key KernelCache::key_of(const ir::Module& specialized, std::string_view function, std::string_view tuning) {
  std::call_once(described_, [&] {
    const TargetDescription d = target_.describe();
    features_ = d.features;
    device_ = d.device;
    toolchain_ = target_.toolchain();
    build_id_ = config_.build_id.empty() ? cache::build_id() : config_.build_id;
  });
  cache::ArtifactKeyInputs in;
  in.ir = ir::print_module(specialized);
  in.function = std::string(function);
  in.target = std::string(target_.name());
  in.features = features_;
  in.device = device_;
  in.toolchain = toolchain_;
  in.opt_level = config_.opt_level;
  in.compile_options = config_.compile_options;
  in.tuning = std::string(tuning);
  in.version = config_.version;
  in.build_id = build_id_;
  return cache::artifact_key(in);
}

Result<targets::Artifact> KernelCache::get_or_compile(const ir::Module& specialized, std::string_view function,
                                                      const std::function<Result<targets::Artifact>()>& compile,
                                                      DiskState* state, std::string_view tuning) {
  if (state) *state = DiskState::Off;
  cache::DiskCache* d = disk();
  if (!d) return compile();
  const cache::Key key = key_of(specialized, function, tuning);
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
  Result<void> usable = artifact.ok() ? cache::check_artifact_signature(*artifact, specialized, function)
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
