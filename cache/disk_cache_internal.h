// SPDX-License-Identifier: Apache-2.0
// disk_cache_internal.h - DiskCache's layout constants, file helpers and Impl, shared by its files.
//
// disk_cache.cpp opens the cache and gets, puts and merges entries and records;
// disk_cache_files.cpp reads, checks and writes single files; disk_cache_maintenance.cpp
// lists, verifies, evicts and clears.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cache/disk_cache.h"

namespace ternjit::cache {

namespace disk_detail {

// The layout under <dir>/v1 and its limits.
inline constexpr const char* kObjects = "objects";
inline constexpr const char* kRecords = "records";
inline constexpr const char* kTmp = "tmp";
inline constexpr const char* kLocks = "locks";
inline constexpr std::string_view kEntrySuffix = ".tje";
inline constexpr std::string_view kRecordSuffix = ".tjr";
// Larger files are refused without reading them (no artifact is near this).
inline constexpr std::uint64_t kMaxEntryBytes = std::uint64_t{1} << 32;
inline constexpr std::int64_t kStaleTempSeconds = 3600;
inline constexpr const char* kLastPrune = "last-prune";
inline constexpr std::int64_t kPruneEverySeconds = 60;

/// strerror(e).
std::string errno_text(int e);
/// An IoError "what: strerror(e)".
Error io_error(const std::string& what, int e);

/// An owned file descriptor (closed on destruction).
class Fd {
 public:
  Fd() = default;
  /// Takes ownership of `fd` (-1: none).
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  [[nodiscard]] int get() const { return fd_; }
  [[nodiscard]] bool valid() const { return fd_ >= 0; }
  /// Gives up ownership (the caller closes).
  int release() { return std::exchange(fd_, -1); }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

/// True when `s` ends with `suffix`.
bool ends_with(std::string_view s, std::string_view suffix);
/// True for 32 lowercase hex digits (an entry's key hash).
bool is_hex32(std::string_view s);
/// A mode as four octal digits ("0700").
std::string mode_str(mode_t m);
/// The names in directory `dir_fd` (without "." and ".."), sorted; `path` names it in errors.
Result<std::vector<std::string>> list_dir(int dir_fd, const std::string& path);
/// Reads all of `fd` (`size` bytes per fstat); false when it changed size or failed.
bool read_all(int fd, std::uint64_t size, std::string& out);
/// Writes all of `data` to `fd`; false with `err` set on failure.
bool write_all(int fd, std::string_view data, int& err);

/// A filesystem's name and whether it is a network one (locking is unreliable there).
struct FsType {
  const char* name;
  bool network;
};
/// The filesystem of a statfs f_type magic number ("other" when unknown).
FsType fs_type(long magic);

/// A verified record and the kernel key bytes it belongs to.
struct CheckedRecord {
  TuningRecord record;
  std::string kernel;
};
/// Checks a record file's bytes against its name; the record on success.
Result<CheckedRecord> check_record(std::string_view bytes, std::string_view name);

}  // namespace disk_detail

/// The open cache: checked directory handles, options and eviction state.
struct DiskCache::Impl {
  CacheOptions options;
  disk_detail::Fd root, v1, objects, records, tmp, locks;
  gid_t dir_gid = 0;  // the root's group (shared-group mode accepts entries of it)
  std::atomic<std::uint64_t> temp_counter{0};
  std::atomic<std::uint64_t> written_since_prune{0};
  std::atomic<bool> pruned_once{false};
  std::mutex prune_mu;  // one automatic prune per process at a time

  /// Logs a warning through options.log, else to stderr.
  void warn(const std::string& message) const;

  /// The path of `name` in subdirectory `sub` of v1, for messages.
  [[nodiscard]] std::string rel(const char* sub, std::string_view name) const {
    return options.dir + "/v1/" + sub + "/" + std::string(name);
  }

  /// Why a directory (fstat of its descriptor) must not be used; "" when fine.
  [[nodiscard]] std::string dir_problem(const struct stat& st) const;

  /// Why a file (fstat of the descriptor it is read through) must not be trusted.
  [[nodiscard]] std::string file_problem(const struct stat& st) const;

  /// True when the process is in group `g` (effective or supplementary).
  static bool in_my_groups(gid_t g);

  /// Directory and file modes: private, or group-shared (setgid directories).
  [[nodiscard]] mode_t dir_mode() const { return options.shared_group ? 02770 : 0700; }
  [[nodiscard]] mode_t file_mode() const { return options.shared_group ? 0640 : 0600; }

  /// Opens (creating when missing) directory `name` under `parent`, and checks it.
  Result<disk_detail::Fd> open_dir(int parent, const char* name, const std::string& path) const;

  /// A trusted entry file read whole (no more than `max_bytes`: a larger one is removed
  /// unread). Nullopt when absent (`absent` set) or refused/corrupt (logged; corrupt ones removed).
  std::optional<std::string> read_entry(int dir_fd, const char* sub, const std::string& name, bool* absent,
                                        std::uint64_t max_bytes = disk_detail::kMaxEntryBytes);

  /// The payload of the objects/ entry of `key` when it is of `kind` (DiskCache::get,
  /// get_file): refused, corrupt or foreign entries are logged misses (corrupt ones removed).
  std::optional<std::string> get_object(EntryKind kind, const Key& key, std::uint64_t max_bytes,
                                        const std::function<Result<void>(std::string_view)>& check);
  /// Publishes `payload` as the objects/ entry of `key` of `kind` (DiskCache::put, put_file).
  Result<void> put_object(EntryKind kind, const Key& key, std::string_view payload);

  /// Removes a corrupt entry, unless the name now points at another file (a concurrent
  /// writer replaced it with a good one).
  void drop(int dir_fd, const char* sub, const std::string& name, const struct stat& read_st, const std::string& why);

  /// Writes `bytes` to a new temp file; returns its name.
  Result<std::string> write_temp(std::string_view stem, std::string_view bytes);

  /// Evicts least recently used artifacts down to `max_bytes` (never `keep`) and stale temps.
  Result<PruneReport> prune(std::uint64_t max_bytes, const std::string& keep);

  /// One automatic eviction pass when this process wrote an eighth of the cap since its
  /// last one, or at its first put unless any process pruned in the last kPruneEverySeconds
  /// (v1/last-prune's mtime says when): many short-lived processes that each write a
  /// little still keep the cap, without each scanning a large directory. Never evicts
  /// `just_written` (file times are coarse: it may tie with older entries).
  void maybe_prune(std::uint64_t written, const std::string& just_written);
};

}  // namespace ternjit::cache
