// SPDX-License-Identifier: Apache-2.0
// disk_cache.h - the on-disk store: artifacts and tuning records, atomic, checksummed, shared, capped.
//
// Layout under the root (README.md has the why of each rule):
//   ROOT/v1/objects/<key hex>.tje              one artifact entry per key (entry.h format)
//   ROOT/v1/records/<kernel hex>-<record hex>.tjr  one tuning record per (kernel key, config)
//   ROOT/v1/tmp/                               entries being written (then renamed into place)
//   ROOT/v1/locks/<00..ff>.lock                flock stripes: one compile per key at a time
// Every directory is opened with O_NOFOLLOW and checked (owner, mode) and every file is
// opened relative to its directory's descriptor with O_NOFOLLOW and checked before a
// byte is trusted. All methods are safe to call from several threads and processes.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cache/entry.h"
#include "cache/key.h"
#include "ternjit/result.h"

namespace ternjit::cache {

/// The default cap on artifact bytes (1 GiB).
inline constexpr std::uint64_t kDefaultMaxBytes = std::uint64_t{1} << 30;

/// Where warnings go: one line without '\n', possibly from several threads at once.
using LogFn = std::function<void(std::string_view)>;

/// How to open a cache directory.
struct CacheOptions {
  std::string dir;                             ///< the cache root (created 0700 when missing)
  std::uint64_t max_bytes = kDefaultMaxBytes;  ///< cap on artifact bytes, enforced by LRU eviction; 0: no cap
  /// Shared-group mode: the directories may be group-writable (created 02770) and entries
  /// written by other users of the directory's group are accepted. Still refused: symlinks,
  /// anything writable by others, entries of another group.
  bool shared_group = false;
  LogFn log;                  ///< warnings ("ternjit: cache: ..."); empty: stderr
  int lock_timeout_ms = 60000;  ///< longest wait for another thread/process building the same key
};

/// The default root: `xdg_cache_home`/ternjit when that is an absolute path (XDG base
/// directory rules), else `home`/.cache/ternjit; "" when neither is usable. The caller
/// reads the environment (jit/options.cpp).
std::string default_cache_dir(std::string_view xdg_cache_home, std::string_view home);

/// Parses a size: a number with an optional K, M, G or T suffix (powers of 1024, an
/// optional trailing 'B' or 'iB'): "500M", "2G", "4096". Nullopt when malformed.
std::optional<std::uint64_t> parse_size(std::string_view text);

/// How get_or_build produced its value.
enum class Outcome : std::uint8_t {
  Hit,   ///< loaded from a verified entry
  Miss,  ///< built (and stored, unless storing failed, which was logged)
};

/// One file of the store, as `ternjit cache ls` shows it.
struct EntryInfo {
  std::string path;             ///< relative to the root ("v1/objects/<hex>.tje")
  EntryKind kind = EntryKind::Artifact;
  std::uint64_t size = 0;       ///< file size in bytes
  std::int64_t last_used = 0;   ///< modification time, seconds since the epoch (touched on every hit)
  std::optional<Key> key;       ///< the stored key when the header and key decode
  std::string problem;          ///< why the entry would be refused ("" when its header looks fine)
};

/// Totals for `ternjit cache stat`.
struct Stats {
  std::string dir;                  ///< the root
  std::string filesystem;           ///< "ext4", "tmpfs", "nfs", ... (statfs)
  bool network_filesystem = false;  ///< NFS, SMB, ...: warned about at open
  bool shared_group = false;        ///< opened in shared-group mode
  std::uint64_t max_bytes = 0;      ///< the cap this DiskCache was opened with (0: none)
  std::uint64_t artifacts = 0, artifact_bytes = 0;  ///< artifact entries and their bytes
  std::uint64_t records = 0, record_bytes = 0;      ///< tuning records and their bytes
  std::uint64_t temp_files = 0, temp_bytes = 0;  ///< in-flight writes or leftovers of killed writers
};

/// What verify found.
struct VerifyReport {
  std::uint64_t checked = 0;          ///< entry files looked at
  std::uint64_t good = 0;             ///< of which verified
  std::vector<std::string> problems;  ///< "v1/objects/<hex>.tje: checksum mismatch"
  std::uint64_t removed = 0;          ///< bad entries removed (verify(true))
};

/// What prune did.
struct PruneReport {
  std::uint64_t removed = 0, removed_bytes = 0;  ///< artifacts evicted
  std::uint64_t kept = 0, kept_bytes = 0;        ///< artifacts left
  std::uint64_t stale_temps = 0;  ///< temp files older than an hour, removed
};

/// What merge did, record by record.
struct MergeReport {
  std::uint64_t copied = 0;     ///< new here, verified, stored
  std::uint64_t present = 0;    ///< already here with the same measurements
  std::uint64_t conflicts = 0;  ///< already here with other measurements (ours kept: records are append-only)
  std::uint64_t rejected = 0;   ///< failed verification in OTHER_DIR (logged)
};

/// One tuning record of a kernel.
struct TuningRecord {
  std::string config;        ///< the configuration ("tile_m=4,unroll=2")
  std::string measurements;  ///< what the tuner measured (text, e.g. JSON)
};

/// An opened, checked cache directory. Create with open(); move-only through unique_ptr.
class DiskCache {
 public:
  /// Creates (0700, or 02770 in shared-group mode) and checks the root and its v1/
  /// subdirectories. Errors (IoError) name the path and the reason: a symlink, not a
  /// directory, owned by another user, writable by group/others, or a failing syscall.
  /// Logs a warning when the root is on a network filesystem (NFS, SMB, ...), where
  /// locking and rename semantics are weaker.
  static Result<std::unique_ptr<DiskCache>> open(CacheOptions options);
  /// Closes the directory descriptors.
  ~DiskCache();
  DiskCache(const DiskCache&) = delete;
  DiskCache& operator=(const DiskCache&) = delete;

  /// The root directory.
  [[nodiscard]] const std::string& dir() const;

  /// The payload of the artifact entry of `key`, or nullopt on a miss. An entry that is
  /// unsafe (symlink, foreign owner, writable by others) is refused and logged; one that is
  /// corrupt, truncated or holds another key is logged and removed. A hit marks the
  /// entry as recently used.
  std::optional<std::string> get(const Key& key);
  /// Publishes `payload` as the entry of `key` (temp file + one atomic rename), then
  /// evicts least-recently-used entries when over the cap. Errors: IoError (disk full,
  /// EFBIG, permissions); nothing partial is ever visible.
  Result<void> put(const Key& key, std::string_view payload);
  /// get(key), else build() under a per-key lock (so concurrent threads and processes
  /// build once and the others load), then put. A failing put is logged, not returned;
  /// a failing build is returned. `how` (optional) says which happened.
  Result<std::string> get_or_build(const Key& key, const std::function<Result<std::string>()>& build,
                                   Outcome* how = nullptr);
  /// Removes the entry of `key` (for a payload its user found unusable). Logged.
  void remove(const Key& key, std::string_view why);

  /// A file a target keeps beside its artifacts (entry kind TargetFile, in objects/: the
  /// same directory checks, file checks, checksum, full key comparison, refusals and
  /// logging as get(), and evicted like artifacts), or nullopt. A file larger than
  /// `max_bytes` (or the entry limit) is removed without being read, and so is one whose
  /// payload `check` (when given) refuses, with its message.
  std::optional<std::string> get_file(const Key& key, std::uint64_t max_bytes,
                                      const std::function<Result<void>(std::string_view)>& check = {});
  /// Publishes a target's file under `key` as put() publishes an artifact (temp file + one
  /// atomic rename; counted against the cap). Errors: as put().
  Result<void> put_file(const Key& key, std::string_view payload);

  /// Stores the tuning record (kernel_key, config). Append-only: when a verified record
  /// for the pair exists it is kept and the result is false; true when stored.
  Result<bool> put_record(const Key& kernel_key, std::string_view config, std::string_view measurements);
  /// Every verified record of `kernel_key`, sorted by config. Bad records are logged and removed.
  Result<std::vector<TuningRecord>> records(const Key& kernel_key);
  /// Copies the records of the cache at `other_dir` that verify and are new here.
  Result<MergeReport> merge(const std::string& other_dir);

  /// Every entry file (artifacts, then records), sorted by path.
  Result<std::vector<EntryInfo>> list();
  /// Totals.
  Result<Stats> stats();
  /// Reads and checks every entry completely (owner and mode, header, checksum, key hash
  /// = file name) and, when given, runs `check_payload` on each artifact's key and payload
  /// (e.g. decode_artifact); `remove_bad` deletes the bad ones.
  Result<VerifyReport> verify(bool remove_bad,
                              const std::function<Result<void>(const Key&, std::string_view)>& check_payload = {});
  /// Evicts least-recently-used artifacts until they total at most `max_bytes`, and
  /// removes temp files older than an hour (left by killed writers). Records are kept.
  Result<PruneReport> prune(std::uint64_t max_bytes);
  /// Removes every entry, record, temp and lock file.
  Result<void> clear();

  /// Internal.
  struct Impl;

 private:
  explicit DiskCache(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ternjit::cache
