// SPDX-License-Identifier: Apache-2.0
// cache_cmd.cpp - `ternjit cache ls | stat | verify | prune --max-size | clear | merge OTHER_DIR`.
#include "tools/ternjit/cache_cmd.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <system_error>

#include "cache/artifact_codec.h"
#include "cache/disk_cache.h"
#include "cache/entry.h"
#include "jit/options.h"
#include "tools/ternjit/flags.h"

namespace ternjit::cli {

namespace {

std::string human(std::uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  if (u == 0)
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  else
    std::snprintf(buf, sizeof buf, "%.1f %s", v, kUnits[u]);
  return buf;
}

std::string when(std::int64_t seconds) {
  const std::time_t t = static_cast<std::time_t>(seconds);
  std::tm tm{};
  ::localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

int fail(const std::string& message) {
  std::fprintf(stderr, "error: %s\n", message.c_str());
  return 1;
}

// What `ls` says about a key: the fields a person looks for.
std::string describe(const cache::Key& key) {
  if (key.kind() == "record") {
    auto kernel = cache::Key::parse(key.field("kernel"));
    std::string s = "config=" + std::string(key.field("config"));
    if (kernel) {
      s += " kernel=" + kernel->hex().substr(0, 12);
      // A tuning problem (autotune/records.h; "family" in the older format) names its op
      // and problem; an artifact key its function.
      if (!kernel->field("op").empty())
        s += " op=" + std::string(kernel->field("op")) +
             (kernel->kind() == "tuning_family" ? " family=" + std::string(kernel->field("family"))
                                                : " problem=" + std::string(kernel->field("problem")));
      else
        s += " fn=" + std::string(kernel->field("function"));
    }
    return s;
  }
  std::string s;
  for (const char* f : {"target", "function", "compile_options", "version", "machine"})
    if (!key.field(f).empty()) s += (s.empty() ? "" : " ") + std::string(f) + "=" + std::string(key.field(f));
  return s;
}

// The resource usage an artifact recorded when it was compiled (metadata "usage": the
// GPU targets' registers and spills per kernel), read from the entry at `root`/`path`;
// "" when there is none or the entry does not decode (`verify` reports that).
std::string artifact_usage(const std::string& root, const cache::EntryInfo& e) {
  if (e.kind != cache::EntryKind::Artifact || !e.problem.empty() || e.size > (std::uint64_t{256} << 20)) return "";
  std::ifstream in(std::filesystem::path(root) / e.path, std::ios::binary);
  const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto entry = cache::decode_entry(file);
  if (!entry.ok()) return "";
  auto artifact = cache::decode_artifact(entry->payload);
  if (!artifact.ok()) return "";
  auto it = artifact->metadata.find("usage");
  return it == artifact->metadata.end() ? "" : it->second;
}

void print_json(const nlohmann::json& j) { std::printf("%s\n", j.dump(2).c_str()); }

nlohmann::json stats_json(const cache::Stats& s, bool exists) {
  return {{"directory", s.dir},
          {"exists", exists},
          {"filesystem", s.filesystem},
          {"network_filesystem", s.network_filesystem},
          {"mode", s.shared_group ? "shared-group" : "private"},
          {"artifacts", s.artifacts},
          {"artifact_bytes", s.artifact_bytes},
          {"records", s.records},
          {"record_bytes", s.record_bytes},
          {"temp_files", s.temp_files},
          {"temp_bytes", s.temp_bytes},
          {"default_max_bytes", cache::kDefaultMaxBytes}};
}

void print_stats(const cache::Stats& s, bool json, bool exists) {
  if (json) return print_json(stats_json(s, exists));
  std::printf("directory:   %s%s\n", s.dir.c_str(), exists ? "" : " (does not exist: nothing cached yet)");
  if (exists)
    std::printf("filesystem:  %s%s\n", s.filesystem.c_str(),
                s.network_filesystem ? " (network: cross-machine locking is unreliable)" : "");
  std::printf("mode:        %s\n", s.shared_group ? "shared-group" : "private (owner only)");
  std::printf("artifacts:   %llu (%s)\n", static_cast<unsigned long long>(s.artifacts), human(s.artifact_bytes).c_str());
  std::printf("records:     %llu (%s)\n", static_cast<unsigned long long>(s.records), human(s.record_bytes).c_str());
  std::printf("temp files:  %llu (%s)\n", static_cast<unsigned long long>(s.temp_files), human(s.temp_bytes).c_str());
  std::printf("default cap: %s (TERNJIT_CACHE_MAX_SIZE / EngineOptions::cache_max_bytes)\n",
              human(cache::kDefaultMaxBytes).c_str());
}

// A directory that does not exist holds nothing: every action but merge answers without
// creating it (DiskCache::open would).
int report_missing(const CacheCommandOptions& o, const std::string& dir) {
  if (o.action == "ls") {
    if (o.json) print_json(nlohmann::json::array());
    return 0;
  }
  if (o.action == "stat") {
    cache::Stats s;
    s.dir = dir;
    s.shared_group = o.shared_group;
    print_stats(s, o.json, /*exists=*/false);
    return 0;
  }
  if (o.action == "verify") {
    std::printf("0 entries checked: 0 good, 0 bad (%s does not exist)\n", dir.c_str());
    return 0;
  }
  std::printf("nothing to %s: %s does not exist\n", o.action.c_str(), dir.c_str());
  return 0;
}

}  // namespace

int cmd_cache(const CacheCommandOptions& o) {
  std::string dir = o.dir;
  if (dir.empty()) {
    const char* env = std::getenv("TERNJIT_CACHE_DIR");
    dir = env && *env ? std::string(env) : jit::default_cache_dir();
  }
  if (dir == "off") return fail("the disk cache is off (TERNJIT_CACHE_DIR=off): give --cache-dir DIR");
  std::error_code ec;
  const bool exists = std::filesystem::exists(dir, ec);
  if (ec) return fail("cannot look at '" + dir + "': " + ec.message());
  if (!exists && o.action != "merge") return report_missing(o, dir);
  cache::CacheOptions copts;

  copts.dir = dir;
  copts.shared_group = o.shared_group;
  copts.max_bytes = 0;  // never evict as a side effect of a maintenance command
  auto opened = cache::DiskCache::open(copts);
  if (!opened.ok()) return fail(opened.error().message);
  cache::DiskCache& c = **opened;

  if (o.action == "ls") {
    auto entries = c.list();
    if (!entries.ok()) return fail(entries.error().message);
    if (o.json) {
      nlohmann::json list = nlohmann::json::array();
      for (const cache::EntryInfo& e : *entries) {
        nlohmann::json j = {{"kind", cache::entry_kind_name(e.kind)},
                            {"size", e.size},
                            {"last_used", e.last_used},
                            {"path", e.path},
                            {"problem", e.problem}};
        if (e.key) {
          nlohmann::json fields = nlohmann::json::object();
          for (const char* f : {"target", "function", "compile_options", "version", "machine", "config"})
            if (!e.key->field(f).empty()) fields[f] = std::string(e.key->field(f));
          if (auto kernel = e.key->kind() == "record" ? cache::Key::parse(e.key->field("kernel")) : std::nullopt) {
            fields["kernel"] = kernel->hex();
            for (const char* f : {"op", "problem", "family", "function"})
              if (!kernel->field(f).empty()) fields[f] = std::string(kernel->field(f));
          }
          j["key"] = std::move(fields);
        }
        if (std::string usage = artifact_usage(dir, e); !usage.empty()) j["usage"] = usage;
        list.push_back(std::move(j));
      }
      print_json(list);
      return 0;
    }
    for (const cache::EntryInfo& e : *entries) {
      const std::string usage = artifact_usage(dir, e);
      std::printf("%-8s %10s  %s  %s  %s%s%s%s%s\n", cache::entry_kind_name(e.kind),
                  human(e.size).c_str(), when(e.last_used).c_str(), e.path.c_str(),
                  e.key ? describe(*e.key).c_str() : "", usage.empty() ? "" : " usage: ", usage.c_str(),
                  e.problem.empty() ? "" : "  PROBLEM: ", e.problem.c_str());
    }
    return 0;
  }
  if (o.action == "stat") {
    auto s = c.stats();
    if (!s.ok()) return fail(s.error().message);
    print_stats(*s, o.json, /*exists=*/true);
    return 0;
  }
  if (o.action == "verify") {
    // Beyond the checksum: the artifact decodes and declares the signature its key's
    // specialized IR asks for.
    auto r = c.verify(o.remove_bad, [](const cache::Key& key, std::string_view payload) -> Result<void> {
      TERNJIT_TRY(targets::Artifact a, cache::decode_artifact(payload));
      return cache::check_artifact_entry(a, key.field("ir"), key.field("function"));
    });
    if (!r.ok()) return fail(r.error().message);
    for (const std::string& p : r->problems) std::printf("BAD %s\n", p.c_str());
    std::printf("%llu entries checked: %llu good, %llu bad", static_cast<unsigned long long>(r->checked),
                static_cast<unsigned long long>(r->good), static_cast<unsigned long long>(r->problems.size()));
    if (o.remove_bad) std::printf(", %llu removed", static_cast<unsigned long long>(r->removed));
    std::printf("\n");
    return r->problems.empty() ? 0 : 1;
  }
  if (o.action == "prune") {
    auto max = cache::parse_size(o.max_size);
    if (!max) return fail("--max-size '" + o.max_size + "' is malformed: expected bytes or a size like 500M, 2G");
    auto r = c.prune(*max);
    if (!r.ok()) return fail(r.error().message);
    std::printf("removed %llu artifacts (%s), kept %llu (%s); removed %llu stale temp files\n",
                static_cast<unsigned long long>(r->removed), human(r->removed_bytes).c_str(),
                static_cast<unsigned long long>(r->kept), human(r->kept_bytes).c_str(),
                static_cast<unsigned long long>(r->stale_temps));
    return 0;
  }
  if (o.action == "clear") {
    auto r = c.clear();
    if (!r.ok()) return fail(r.error().message);
    std::printf("cleared %s\n", c.dir().c_str());
    return 0;
  }
  if (o.action == "merge") {
    auto r = c.merge(o.other_dir);
    if (!r.ok()) return fail(r.error().message);
    std::printf("merged tuning records from %s: %llu copied, %llu already present, %llu conflicts (ours kept), "
                "%llu rejected\n",
                o.other_dir.c_str(), static_cast<unsigned long long>(r->copied),
                static_cast<unsigned long long>(r->present), static_cast<unsigned long long>(r->conflicts),
                static_cast<unsigned long long>(r->rejected));
    return 0;
  }
  return fail("unknown cache action '" + o.action + "'");
}

void add_cache_command(CLI::App& app) {
  // The options live as long as the callbacks that read them (owned by the subcommands).
  auto o = std::make_shared<CacheCommandOptions>();
  auto* cmd = app.add_subcommand("cache", "inspect and maintain the on-disk kernel cache (cache/README.md)");
  cmd->require_subcommand(1);
  add_cache_dir_flag(*cmd, o->dir, "--dir");
  cmd->add_flag("--shared-group", o->shared_group, "open a directory shared by a Unix group (cache/README.md)");
  // The actions take the flags of `cache` too, before or after the action's name.
  cmd->fallthrough();
  auto run = [o](const char* action) {
    return [o, action] {
      o->action = action;
      end_command(cmd_cache(*o));
    };
  };
  auto* ls = cmd->add_subcommand("ls", "list every entry: kind, size, last use, file, target/function or config");
  ls->add_flag("--json", o->json, "print a JSON array of entries (kind, size, last_used, path, problem, key fields)");
  ls->callback(run("ls"));
  auto* stat = cmd->add_subcommand("stat", "totals: entries, bytes, records, leftover temp files, filesystem");
  stat->add_flag("--json", o->json, "print the totals as a JSON object");
  stat->callback(run("stat"));
  auto* verify = cmd->add_subcommand("verify", "read and check every entry (checksum, key, owner, mode); exit 1 if any is bad");
  verify->add_flag("--remove", o->remove_bad, "remove the bad entries");
  verify->callback(run("verify"));
  auto* prune = cmd->add_subcommand("prune", "evict least-recently-used artifacts down to a size; drop stale temp files");
  prune->add_option("--max-size", o->max_size, "the size to keep, e.g. 500M or 2G")->required();
  prune->callback(run("prune"));
  cmd->add_subcommand("clear", "remove every entry, record and temp file")->callback(run("clear"));
  auto* merge = cmd->add_subcommand("merge", "copy the tuning records of another cache directory that verify");
  merge->add_option("other_dir", o->other_dir, "the other cache's directory")->required();
  merge->callback(run("merge"));
}

}  // namespace ternjit::cli
