// SPDX-License-Identifier: Apache-2.0
// disk_cache.cpp - DiskCache: checked directories, atomic publication, verified loads, LRU, records.
//
// Invariants:
//  - A file is trusted only after fstat() on the descriptor we read it through (not on
//    a path: no check-then-open race) says it is a regular file we may trust, and
//    decode_entry() verified its header and checksum, and its key bytes equal the key
//    asked for (a collision or a misplaced entry is a miss).
//  - A published name only ever appears through rename() of a completely written temp
//    file of the same filesystem, so a reader sees the old entry, the new one, or none;
//    a writer killed at any point leaves at most a file in tmp/ (removed by prune).
//  - Nothing here is fatal: every problem with an entry is a logged miss.
#include "cache/disk_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <mutex>
#include <thread>
#include <utility>


namespace ternjit::cache {

namespace {

constexpr const char* kObjects = "objects";
constexpr const char* kRecords = "records";
constexpr const char* kTmp = "tmp";
constexpr const char* kLocks = "locks";
constexpr std::string_view kEntrySuffix = ".tje";
constexpr std::string_view kRecordSuffix = ".tjr";
// Larger files are refused without reading them (no artifact is near this).
constexpr std::uint64_t kMaxEntryBytes = std::uint64_t{1} << 32;
constexpr std::int64_t kStaleTempSeconds = 3600;
constexpr const char* kLastPrune = "last-prune";
constexpr std::int64_t kPruneEverySeconds = 60;

std::string errno_text(int e) { return std::strerror(e); }

Error io_error(const std::string& what, int e) {
  return make_error(ErrorCode::IoError, what + ": " + errno_text(e));
}

// An owned file descriptor.
class Fd {
 public:
  Fd() = default;
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

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

bool is_hex32(std::string_view s) {
  return s.size() == 32 && std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

std::string mode_str(mode_t m) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(m & 07777));
  return buf;
}

// The names in directory `dir_fd` (without "." and "..").
Result<std::vector<std::string>> list_dir(int dir_fd, const std::string& path) {
  const int dup_fd = ::openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dup_fd < 0) return io_error("cannot list " + path, errno);
  DIR* d = ::fdopendir(dup_fd);
  if (!d) {
    const int e = errno;
    ::close(dup_fd);
    return io_error("cannot list " + path, e);
  }
  std::vector<std::string> names;
  while (dirent* ent = ::readdir(d)) {
    std::string_view n = ent->d_name;
    if (n != "." && n != "..") names.emplace_back(n);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

// Reads all of `fd` (`size` bytes per fstat); false when it changed size or failed.
bool read_all(int fd, std::uint64_t size, std::string& out) {
  out.resize(size);
  std::uint64_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(fd, out.data() + done, size - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::uint64_t>(n);
  }
  return true;
}

bool write_all(int fd, std::string_view data, int& err) {
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      err = errno;
      return false;
    }
    if (n == 0) {
      err = EIO;
      return false;
    }
    done += static_cast<std::size_t>(n);
  }
  return true;
}

struct FsType {
  const char* name;
  bool network;
};

FsType fs_type(long magic) {
  switch (static_cast<unsigned long>(magic) & 0xffffffffUL) {
    case 0xEF53: return {"ext4", false};
    case 0x01021994: return {"tmpfs", false};
    case 0x58465342: return {"xfs", false};
    case 0x9123683E: return {"btrfs", false};
    case 0x794C7630: return {"overlay", false};
    case 0x2FC12FC1: return {"zfs", false};
    case 0x6969: return {"nfs", true};
    case 0x517B: return {"smb", true};
    case 0xFF534D42: return {"cifs", true};
    case 0xFE534D42: return {"smb2", true};
    case 0x00C36400: return {"ceph", true};
    case 0x5346414F: return {"afs", true};
    case 0x01021997: return {"9p", true};
    case 0x65735546: return {"fuse", true};
    case 0x0BD00BD0: return {"lustre", true};
    case 0x47504653: return {"gpfs", true};
    default: return {"other", false};
  }
}

}  // namespace

std::string default_cache_dir(std::string_view xdg_cache_home, std::string_view home) {
  // XDG: a relative XDG_CACHE_HOME is invalid and must be ignored.
  if (!xdg_cache_home.empty() && xdg_cache_home.front() == '/') return std::string(xdg_cache_home) + "/ternjit";
  if (!home.empty() && home.front() == '/') return std::string(home) + "/.cache/ternjit";
  return {};
}

std::optional<std::uint64_t> parse_size(std::string_view t) {
  std::uint64_t v = 0;
  std::size_t i = 0;
  for (; i < t.size() && t[i] >= '0' && t[i] <= '9'; ++i) {
    if (v > (UINT64_MAX - 9) / 10) return std::nullopt;
    v = v * 10 + static_cast<std::uint64_t>(t[i] - '0');
  }
  if (i == 0) return std::nullopt;
  std::string_view rest = t.substr(i);
  int shift = 0;
  if (!rest.empty()) {
    switch (rest.front()) {
      case 'k': case 'K': shift = 10; break;
      case 'm': case 'M': shift = 20; break;
      case 'g': case 'G': shift = 30; break;
      case 't': case 'T': shift = 40; break;
      case 'b': case 'B': break;
      default: return std::nullopt;
    }
    if (shift) rest.remove_prefix(1);
    if (rest == "iB" || rest == "B" || rest == "b") rest = {};
    if (!rest.empty()) return std::nullopt;
  }
  if (shift && v > (UINT64_MAX >> shift)) return std::nullopt;
  return v << shift;
}

// ---------------------------------------------------------------- Impl

struct DiskCache::Impl {
  CacheOptions options;
  Fd root, v1, objects, records, tmp, locks;
  gid_t dir_gid = 0;  // the root's group (shared-group mode accepts entries of it)
  std::atomic<std::uint64_t> temp_counter{0};
  std::atomic<std::uint64_t> written_since_prune{0};
  std::atomic<bool> pruned_once{false};
  std::mutex prune_mu;  // one automatic prune per process at a time

  void warn(const std::string& message) const {
    const std::string line = "ternjit: cache: " + message;
    if (options.log) {
      options.log(line);
    } else {
      const std::string l = line + "\n";
      std::fputs(l.c_str(), stderr);
    }
  }

  [[nodiscard]] std::string rel(const char* sub, std::string_view name) const {
    return options.dir + "/v1/" + sub + "/" + std::string(name);
  }

  // Why a directory (fstat of its descriptor) must not be used; "" when fine.
  [[nodiscard]] std::string dir_problem(const struct stat& st) const {
    if (!S_ISDIR(st.st_mode)) return "is not a directory";
    if (options.shared_group) {
      if (st.st_mode & S_IWOTH) return "is writable by others (mode " + mode_str(st.st_mode) + ")";
      if (st.st_uid != ::geteuid() && !in_my_groups(st.st_gid))
        return "is owned by uid " + std::to_string(st.st_uid) + " and group " + std::to_string(st.st_gid) +
               ", which you are not in (shared-group mode)";
      return {};
    }
    if (st.st_uid != ::geteuid())
      return "is owned by uid " + std::to_string(st.st_uid) + ", not by you (uid " + std::to_string(::geteuid()) +
             "); use shared-group mode for a cache several users share";
    if (st.st_mode & (S_IWGRP | S_IWOTH))
      return "is writable by group or others (mode " + mode_str(st.st_mode) +
             "); chmod go-w it, or use shared-group mode";
    return {};
  }

  // Why a file (fstat of the descriptor it is read through) must not be trusted.
  [[nodiscard]] std::string file_problem(const struct stat& st) const {
    if (!S_ISREG(st.st_mode)) return "is not a regular file";
    if (st.st_nlink != 1) return "has " + std::to_string(st.st_nlink) + " hard links";
    if (options.shared_group) {
      if (st.st_mode & S_IWOTH) return "is writable by others (mode " + mode_str(st.st_mode) + ")";
      if (st.st_uid != ::geteuid() && st.st_gid != dir_gid)
        return "is owned by uid " + std::to_string(st.st_uid) + " of group " + std::to_string(st.st_gid) +
               ", not the cache's group " + std::to_string(dir_gid);
      return {};
    }
    if (st.st_uid != ::geteuid())
      return "is owned by uid " + std::to_string(st.st_uid) + ", not by you (uid " + std::to_string(::geteuid()) + ")";
    if (st.st_mode & (S_IWGRP | S_IWOTH)) return "is writable by group or others (mode " + mode_str(st.st_mode) + ")";
    return {};
  }

  static bool in_my_groups(gid_t g) {
    if (g == ::getegid()) return true;
    gid_t groups[256];
    const int n = ::getgroups(256, groups);
    for (int i = 0; i < n; ++i)
      if (groups[i] == g) return true;
    return false;
  }

  [[nodiscard]] mode_t dir_mode() const { return options.shared_group ? 02770 : 0700; }
  [[nodiscard]] mode_t file_mode() const { return options.shared_group ? 0640 : 0600; }

  // Opens (creating when missing) directory `name` under `parent`, and checks it.
  Result<Fd> open_dir(int parent, const char* name, const std::string& path) const {
    if (::mkdirat(parent, name, dir_mode()) == 0) {
      // mkdir applies the umask; set the exact mode (setgid in shared mode).
      Fd fd(::openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (fd.valid()) (void)::fchmod(fd.get(), dir_mode());
    } else if (errno != EEXIST) {
      return io_error("cannot create " + path, errno);
    }
    Fd fd(::openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd.valid()) {
      const int e = errno;
      if (e == ELOOP || e == ENOTDIR)
        return make_error(ErrorCode::IoError, path + " is a symlink or not a directory: refused");
      return io_error("cannot open " + path, e);
    }
    struct stat st;
    if (::fstat(fd.get(), &st) != 0) return io_error("cannot stat " + path, errno);
    if (std::string p = dir_problem(st); !p.empty()) return make_error(ErrorCode::IoError, path + " " + p + ": refused");
    return fd;
  }

  // A trusted, verified entry file read whole. Nullopt when absent (`absent` set) or
  // refused/corrupt (logged; corrupt ones removed).
  std::optional<std::string> read_entry(int dir_fd, const char* sub, const std::string& name, bool* absent) {
    if (absent) *absent = false;
    const std::string path = rel(sub, name);
    Fd fd(::openat(dir_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
    if (!fd.valid()) {
      const int e = errno;
      if (e == ENOENT) {
        if (absent) *absent = true;
      } else if (e == ELOOP) {
        warn(path + " is a symlink: refused (it will be replaced)");
      } else {
        warn("cannot open " + path + ": " + errno_text(e) + "; treated as a miss");
      }
      return std::nullopt;
    }
    struct stat st;
    if (::fstat(fd.get(), &st) != 0) {
      warn("cannot stat " + path + ": " + errno_text(errno) + "; treated as a miss");
      return std::nullopt;
    }
    if (std::string p = file_problem(st); !p.empty()) {
      warn(path + " " + p + ": refused (it will be replaced)");
      return std::nullopt;
    }
    const auto size = static_cast<std::uint64_t>(st.st_size);
    std::string bytes;
    if (size > kMaxEntryBytes) {
      drop(dir_fd, sub, name, st, "larger than " + std::to_string(kMaxEntryBytes) + " bytes");
      return std::nullopt;
    }
    if (!read_all(fd.get(), size, bytes)) {
      drop(dir_fd, sub, name, st, "short read (truncated while reading)");
      return std::nullopt;
    }
    return bytes;
  }

  // Removes a corrupt entry, unless the name now points at another file (a concurrent
  // writer replaced it with a good one).
  void drop(int dir_fd, const char* sub, const std::string& name, const struct stat& read_st, const std::string& why) {
    struct stat now;
    const std::string path = rel(sub, name);
    if (::fstatat(dir_fd, name.c_str(), &now, AT_SYMLINK_NOFOLLOW) == 0 && now.st_ino == read_st.st_ino &&
        now.st_dev == read_st.st_dev) {
      ::unlinkat(dir_fd, name.c_str(), 0);
      warn(path + ": " + why + ": removed (will be rebuilt)");
    } else {
      warn(path + ": " + why + ": treated as a miss");
    }
  }

  // Writes `bytes` to a new temp file; returns its name.
  Result<std::string> write_temp(std::string_view stem, std::string_view bytes) {
    for (int attempt = 0; attempt < 16; ++attempt) {
      const std::string name = std::string(stem) + "." + std::to_string(::getpid()) + "." +
                               std::to_string(temp_counter.fetch_add(1)) + ".tmp";
      Fd fd(::openat(tmp.get(), name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, file_mode()));
      if (!fd.valid()) {
        if (errno == EEXIST) continue;  // another PID namespace used the name
        return io_error("cannot create a temp file in " + options.dir + "/v1/tmp", errno);
      }
      if (options.shared_group) (void)::fchmod(fd.get(), file_mode());
      int err = 0;
      if (!write_all(fd.get(), bytes, err)) {
        ::unlinkat(tmp.get(), name.c_str(), 0);
        return io_error("cannot write " + options.dir + "/v1/tmp/" + name + " (" + std::to_string(bytes.size()) +
                            " bytes)",
                        err);
      }
      // No fsync: after a power loss a torn file fails its checksum and is rebuilt; a
      // killed process loses nothing (the page cache survives it).
      if (::close(fd.release()) != 0) {
        const int e = errno;
        ::unlinkat(tmp.get(), name.c_str(), 0);
        return io_error("cannot write " + options.dir + "/v1/tmp/" + name, e);
      }
      return name;
    }
    return make_error(ErrorCode::IoError, "cannot find a free temp file name in " + options.dir + "/v1/tmp");
  }

  Result<PruneReport> prune(std::uint64_t max_bytes, const std::string& keep);

  // One automatic eviction pass when this process wrote an eighth of the cap since its
  // last one, or at its first put unless any process pruned in the last kPruneEverySeconds
  // (v1/last-prune's mtime says when): many short-lived processes that each write a
  // little still keep the cap, without each scanning a large directory. Never evicts
  // `just_written` (file times are coarse: it may tie with older entries).
  void maybe_prune(std::uint64_t written, const std::string& just_written) {
    if (options.max_bytes == 0) return;
    const std::uint64_t total = written_since_prune.fetch_add(written) + written;
    const bool first = !pruned_once.load();
    if (!first && total < std::max<std::uint64_t>(options.max_bytes / 8, 1)) return;
    std::unique_lock lock(prune_mu, std::try_to_lock);
    if (!lock.owns_lock()) return;
    pruned_once.store(true);
    struct stat st;
    if (first && total < options.max_bytes / 8 && ::fstatat(v1.get(), kLastPrune, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        std::time(nullptr) - st.st_mtim.tv_sec < kPruneEverySeconds)
      return;
    written_since_prune.store(0);
    auto r = prune(options.max_bytes, just_written);
    if (!r.ok()) warn("eviction failed: " + r.error().message);
    Fd marker(::openat(v1.get(), kLastPrune, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, file_mode()));
    if (marker.valid()) (void)::futimens(marker.get(), nullptr);
  }
};

DiskCache::DiskCache(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DiskCache::~DiskCache() = default;

const std::string& DiskCache::dir() const { return impl_->options.dir; }

Result<std::unique_ptr<DiskCache>> DiskCache::open(CacheOptions options) {
  if (options.dir.empty())
    return make_error(ErrorCode::InvalidArgument, "no cache directory: set TERNJIT_CACHE_DIR, XDG_CACHE_HOME or HOME");
  while (options.dir.size() > 1 && options.dir.back() == '/') options.dir.pop_back();
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  const std::string& dir = impl->options.dir;

  // Create missing parents 0700 (XDG: ~/.cache is 0700 too); existing ones are left alone.
  for (std::size_t pos = 1; pos < dir.size(); ++pos) {
    pos = dir.find('/', pos);
    if (pos == std::string::npos) break;
    const std::string parent = dir.substr(0, pos);
    if (::mkdir(parent.c_str(), 0700) != 0 && errno != EEXIST && errno != EACCES && errno != EROFS)
      return io_error("cannot create " + parent, errno);
  }
  if (::mkdir(dir.c_str(), impl->dir_mode()) == 0) {
    Fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (fd.valid()) (void)::fchmod(fd.get(), impl->dir_mode());
  } else if (errno != EEXIST) {
    return io_error("cannot create the cache directory " + dir, errno);
  }
  impl->root = Fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!impl->root.valid()) {
    const int e = errno;
    if (e == ELOOP || e == ENOTDIR)
      return make_error(ErrorCode::IoError, "the cache directory " + dir + " is a symlink or not a directory: refused");
    return io_error("cannot open the cache directory " + dir, e);
  }
  struct stat st;
  if (::fstat(impl->root.get(), &st) != 0) return io_error("cannot stat " + dir, errno);
  if (std::string p = impl->dir_problem(st); !p.empty())
    return make_error(ErrorCode::IoError, "the cache directory " + dir + " " + p + ": refused");
  impl->dir_gid = st.st_gid;

  TERNJIT_TRY(impl->v1, impl->open_dir(impl->root.get(), "v1", dir + "/v1"));
  TERNJIT_TRY(impl->objects, impl->open_dir(impl->v1.get(), kObjects, dir + "/v1/objects"));
  TERNJIT_TRY(impl->records, impl->open_dir(impl->v1.get(), kRecords, dir + "/v1/records"));
  TERNJIT_TRY(impl->tmp, impl->open_dir(impl->v1.get(), kTmp, dir + "/v1/tmp"));
  TERNJIT_TRY(impl->locks, impl->open_dir(impl->v1.get(), kLocks, dir + "/v1/locks"));

  struct statfs sfs;
  if (::fstatfs(impl->root.get(), &sfs) == 0) {
    const FsType t = fs_type(sfs.f_type);
    if (t.network)
      impl->warn(dir + " is on a network filesystem (" + std::string(t.name) +
                 "): entries stay verified, but locking between machines is unreliable and several "
                 "machines may compile the same kernel; prefer a local directory");
  }
  return std::unique_ptr<DiskCache>(new DiskCache(std::move(impl)));
}

std::optional<std::string> DiskCache::get(const Key& key) {
  Impl& m = *impl_;
  const std::string name = key.hex() + std::string(kEntrySuffix);
  auto bytes = m.read_entry(m.objects.get(), kObjects, name, nullptr);
  if (!bytes) return std::nullopt;
  auto entry = decode_entry(*bytes);
  std::string problem;
  if (!entry.ok()) {
    problem = entry.error().message;
  } else if (entry->kind != EntryKind::Artifact) {
    problem = "holds a record, not an artifact";
  } else if (entry->key != key.bytes()) {
    problem = "holds another key (hash collision or misplaced entry)";
  }
  if (!problem.empty()) {
    struct stat st;
    if (::fstatat(m.objects.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) m.drop(m.objects.get(), kObjects, name, st, problem);
    return std::nullopt;
  }
  // Mark as recently used for LRU eviction (best effort: a foreign entry in shared mode
  // may not let us).
  (void)::utimensat(m.objects.get(), name.c_str(), nullptr, AT_SYMLINK_NOFOLLOW);
  return std::string(entry->payload);
}

Result<void> DiskCache::put(const Key& key, std::string_view payload) {
  Impl& m = *impl_;
  const std::string stem = key.hex();
  const std::string bytes = encode_entry(EntryKind::Artifact, key, payload);
  TERNJIT_TRY(std::string temp, m.write_temp(stem, bytes));
  const std::string name = stem + std::string(kEntrySuffix);
  if (::renameat(m.tmp.get(), temp.c_str(), m.objects.get(), name.c_str()) != 0) {
    const int e = errno;
    ::unlinkat(m.tmp.get(), temp.c_str(), 0);
    return io_error("cannot publish " + m.rel(kObjects, name), e);
  }
  m.maybe_prune(bytes.size(), name);
  return success();
}

Result<std::string> DiskCache::get_or_build(const Key& key, const std::function<Result<std::string>()>& build,
                                            Outcome* how) {
  Impl& m = *impl_;
  if (how) *how = Outcome::Hit;
  if (auto hit = get(key)) return std::move(*hit);

  // One of 256 lock stripes (by the key hash): a thread or process building a key makes
  // the others wait and then load its entry instead of building it again. The lock is a
  // performance measure only; correctness never depends on it (the files are never reused).
  const std::string lock_name = key.hex().substr(0, 2) + ".lock";
  Fd lock_fd(::openat(m.locks.get(), lock_name.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, m.file_mode()));
  bool locked = false;
  if (lock_fd.valid()) {
    const auto t0 = std::chrono::steady_clock::now();
    auto nap = std::chrono::microseconds(100);
    for (;;) {
      if (::flock(lock_fd.get(), LOCK_EX | LOCK_NB) == 0) {
        locked = true;
        break;
      }
      if (errno != EWOULDBLOCK && errno != EINTR) break;
      if (std::chrono::steady_clock::now() - t0 > std::chrono::milliseconds(m.options.lock_timeout_ms)) {
        m.warn("waited " + std::to_string(m.options.lock_timeout_ms) + " ms for " + m.rel(kLocks, lock_name) +
               "; building without it");
        break;
      }
      std::this_thread::sleep_for(nap);
      nap = std::min(nap * 2, std::chrono::microseconds(10000));
    }
    if (locked) {
      if (auto hit = get(key)) {
        ::flock(lock_fd.get(), LOCK_UN);
        return std::move(*hit);
      }
    }
  }
  if (how) *how = Outcome::Miss;
  auto built = build();
  if (built.ok()) {
    auto stored = put(key, *built);
    if (!stored.ok()) m.warn(stored.error().message + "; the kernel is used without being cached");
  }
  if (locked) ::flock(lock_fd.get(), LOCK_UN);
  return built;
}

void DiskCache::remove(const Key& key, std::string_view why) {
  Impl& m = *impl_;
  const std::string name = key.hex() + std::string(kEntrySuffix);
  if (::unlinkat(m.objects.get(), name.c_str(), 0) == 0)
    m.warn(m.rel(kObjects, name) + ": " + std::string(why) + ": removed (will be rebuilt)");
}

// ---------------------------------------------------------------- records

namespace {

std::string record_name(const Key& kernel_key, const Key& rkey) {
  return kernel_key.hex() + "-" + rkey.hex() + std::string(kRecordSuffix);
}

// A verified record and the kernel key bytes it belongs to.
struct CheckedRecord {
  TuningRecord record;
  std::string kernel;
};

// Checks a record file's bytes against its name; the record on success.
Result<CheckedRecord> check_record(std::string_view bytes, std::string_view name) {
  auto bad = [](const std::string& m) { return make_error(ErrorCode::InvalidInput, m); };
  TERNJIT_TRY(EntryView e, decode_entry(bytes));
  if (e.kind != EntryKind::Record) return bad("holds an artifact, not a record");
  auto rkey = Key::parse(e.key);
  if (!rkey || rkey->kind() != "record" || rkey->fields().size() != 2 || rkey->fields()[0].name != "kernel" ||
      rkey->fields()[1].name != "config")
    return bad("holds a malformed record key");
  const std::string expect = hex(hash128(rkey->field("kernel"))) + "-" + rkey->hex() + std::string(kRecordSuffix);
  if (expect != name) return bad("holds another key than its name says (" + expect + ")");
  return CheckedRecord{TuningRecord{std::string(rkey->field("config")), std::string(e.payload)},
                       std::string(rkey->field("kernel"))};
}

}  // namespace

Result<bool> DiskCache::put_record(const Key& kernel_key, std::string_view config, std::string_view measurements) {
  Impl& m = *impl_;
  const Key rkey = record_key(kernel_key, config);
  const std::string name = record_name(kernel_key, rkey);
  const std::string bytes = encode_entry(EntryKind::Record, rkey, measurements);
  TERNJIT_TRY(std::string temp, m.write_temp(rkey.hex(), bytes));
  // Append-only: publish only when no record of the pair exists.
  if (::renameat2(m.tmp.get(), temp.c_str(), m.records.get(), name.c_str(), RENAME_NOREPLACE) == 0) return true;
  int e = errno;
  if (e == EINVAL || e == ENOSYS) {
    // No RENAME_NOREPLACE on this filesystem: link() fails on an existing name as well.
    if (::linkat(m.tmp.get(), temp.c_str(), m.records.get(), name.c_str(), 0) == 0) {
      ::unlinkat(m.tmp.get(), temp.c_str(), 0);
      return true;
    }
    e = errno;
  }
  if (e != EEXIST) {
    ::unlinkat(m.tmp.get(), temp.c_str(), 0);
    return io_error("cannot publish " + m.rel(kRecords, name), e);
  }
  // One exists: keep it if it verifies, else replace it.
  if (auto existing = m.read_entry(m.records.get(), kRecords, name, nullptr);
      existing && check_record(*existing, name).ok()) {
    ::unlinkat(m.tmp.get(), temp.c_str(), 0);
    return false;
  }
  m.warn(m.rel(kRecords, name) + " does not verify: replaced");
  if (::renameat(m.tmp.get(), temp.c_str(), m.records.get(), name.c_str()) != 0) {
    e = errno;
    ::unlinkat(m.tmp.get(), temp.c_str(), 0);
    return io_error("cannot publish " + m.rel(kRecords, name), e);
  }
  return true;
}

Result<std::vector<TuningRecord>> DiskCache::records(const Key& kernel_key) {
  Impl& m = *impl_;
  TERNJIT_TRY(std::vector<std::string> names, list_dir(m.records.get(), m.options.dir + "/v1/records"));
  const std::string prefix = kernel_key.hex() + "-";
  std::vector<TuningRecord> out;
  for (const std::string& name : names) {
    if (name.rfind(prefix, 0) != 0 || !ends_with(name, kRecordSuffix)) continue;
    auto bytes = m.read_entry(m.records.get(), kRecords, name, nullptr);
    if (!bytes) continue;
    auto rec = check_record(*bytes, name);
    if (!rec.ok()) {
      struct stat st;
      if (::fstatat(m.records.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0)
        m.drop(m.records.get(), kRecords, name, st, rec.error().message);
      continue;
    }
    // The name carries only the kernel key's hash: the stored bytes must be our key.
    if (rec->kernel != kernel_key.bytes()) continue;
    out.push_back(std::move(rec->record));
  }
  std::sort(out.begin(), out.end(), [](const TuningRecord& a, const TuningRecord& b) { return a.config < b.config; });
  return out;
}

Result<MergeReport> DiskCache::merge(const std::string& other_dir) {
  Impl& m = *impl_;
  MergeReport report;
  const std::string other_records = other_dir + "/v1/records";
  Fd dir(::open(other_records.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir.valid()) return io_error("cannot open " + other_records, errno);
  TERNJIT_TRY(std::vector<std::string> names, list_dir(dir.get(), other_records));
  for (const std::string& name : names) {
    if (!ends_with(name, kRecordSuffix)) continue;
    const std::string path = other_records + "/" + name;
    Fd fd(::openat(dir.get(), name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
    struct stat st;
    std::string bytes;
    std::string problem;
    if (!fd.valid()) {
      problem = errno == ELOOP ? "is a symlink" : "cannot be opened: " + errno_text(errno);
    } else if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
      problem = "is not a regular file";
    } else if (static_cast<std::uint64_t>(st.st_size) > kMaxEntryBytes ||
               !read_all(fd.get(), static_cast<std::uint64_t>(st.st_size), bytes)) {
      problem = "cannot be read whole";
    }
    Result<CheckedRecord> rec = make_error(ErrorCode::InvalidInput, problem);
    if (problem.empty()) rec = check_record(bytes, name);
    if (!rec.ok()) {
      m.warn("merge: " + path + " " + (problem.empty() ? "does not verify: " : "") + rec.error().message +
             ": skipped");
      ++report.rejected;
      continue;
    }
    // Publish from the verified parts, as put_record does.
    auto kernel = Key::parse(rec->kernel);
    if (!kernel) {
      m.warn("merge: " + path + " holds a malformed kernel key: skipped");
      ++report.rejected;
      continue;
    }
    auto existing = m.read_entry(m.records.get(), kRecords, name, nullptr);
    if (existing && check_record(*existing, name).ok()) {
      if (decode_entry(*existing)->payload == rec->record.measurements)
        ++report.present;
      else
        ++report.conflicts;
      continue;
    }
    TERNJIT_TRY(bool stored, put_record(*kernel, rec->record.config, rec->record.measurements));
    stored ? ++report.copied : ++report.present;
  }
  return report;
}

// ---------------------------------------------------------------- maintenance

Result<std::vector<EntryInfo>> DiskCache::list() {
  Impl& m = *impl_;
  std::vector<EntryInfo> out;
  for (const char* sub : {kObjects, kRecords}) {
    const int dir_fd = sub == kObjects ? m.objects.get() : m.records.get();
    TERNJIT_TRY(std::vector<std::string> names, list_dir(dir_fd, m.options.dir + "/v1/" + sub));
    for (const std::string& name : names) {
      EntryInfo info;
      info.path = std::string("v1/") + sub + "/" + name;
      info.kind = sub == kObjects ? EntryKind::Artifact : EntryKind::Record;
      Fd fd(::openat(dir_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
      struct stat st;
      if (!fd.valid()) {
        info.problem = errno == ELOOP ? "symlink" : errno_text(errno);
        out.push_back(std::move(info));
        continue;
      }
      if (::fstat(fd.get(), &st) != 0) continue;
      info.size = static_cast<std::uint64_t>(st.st_size);
      info.last_used = st.st_mtim.tv_sec;
      info.problem = m.file_problem(st);
      std::string header;
      if (info.problem.empty()) {
        if (!read_all(fd.get(), std::min<std::uint64_t>(info.size, kEntryHeaderSize), header) ||
            header.size() < kEntryHeaderSize) {
          info.problem = "truncated header";
        } else if (auto h = decode_entry_header(header, info.size); !h.ok()) {
          info.problem = h.error().message;
        } else {
          std::string key(h->key_size, '\0');
          const ssize_t n = ::pread(fd.get(), key.data(), key.size(), kEntryHeaderSize);
          if (n == static_cast<ssize_t>(key.size())) info.key = Key::parse(key);
          if (!info.key) info.problem = "malformed key";
        }
      }
      out.push_back(std::move(info));
    }
  }
  return out;
}

Result<Stats> DiskCache::stats() {
  Impl& m = *impl_;
  Stats s;
  s.dir = m.options.dir;
  s.shared_group = m.options.shared_group;
  s.max_bytes = m.options.max_bytes;
  struct statfs sfs;
  if (::fstatfs(m.root.get(), &sfs) == 0) {
    const FsType t = fs_type(sfs.f_type);
    s.filesystem = t.name;
    s.network_filesystem = t.network;
  }
  struct Sub {
    int fd;
    const char* name;
    std::uint64_t* count;
    std::uint64_t* bytes;
  };
  for (const Sub& sub : {Sub{m.objects.get(), kObjects, &s.artifacts, &s.artifact_bytes},
                         Sub{m.records.get(), kRecords, &s.records, &s.record_bytes},
                         Sub{m.tmp.get(), kTmp, &s.temp_files, &s.temp_bytes}}) {
    TERNJIT_TRY(std::vector<std::string> names, list_dir(sub.fd, m.options.dir + "/v1/" + sub.name));
    for (const std::string& name : names) {
      struct stat st;
      if (::fstatat(sub.fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
      ++*sub.count;
      *sub.bytes += static_cast<std::uint64_t>(st.st_size);
    }
  }
  return s;
}

Result<VerifyReport> DiskCache::verify(bool remove_bad,
                                      const std::function<Result<void>(const Key&, std::string_view)>& check_payload) {
  Impl& m = *impl_;
  VerifyReport report;
  for (const char* sub : {kObjects, kRecords}) {
    const int dir_fd = sub == kObjects ? m.objects.get() : m.records.get();
    const bool is_objects = sub == kObjects;
    TERNJIT_TRY(std::vector<std::string> names, list_dir(dir_fd, m.options.dir + "/v1/" + sub));
    for (const std::string& name : names) {
      ++report.checked;
      const std::string path = std::string("v1/") + sub + "/" + name;
      std::string problem;
      Fd fd(::openat(dir_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
      struct stat st;
      std::string bytes;
      if (!fd.valid()) {
        if (errno == ENOENT) {  // removed meanwhile (eviction, another verify)
          --report.checked;
          continue;
        }
        problem = errno == ELOOP ? "is a symlink" : "cannot be opened: " + errno_text(errno);
      } else if (::fstat(fd.get(), &st) != 0) {
        problem = "cannot be stat'ed: " + errno_text(errno);
      } else if (problem = m.file_problem(st); !problem.empty()) {
      } else if (static_cast<std::uint64_t>(st.st_size) > kMaxEntryBytes ||
                 !read_all(fd.get(), static_cast<std::uint64_t>(st.st_size), bytes)) {
        problem = "cannot be read whole";
      } else if (is_objects) {
        if (!ends_with(name, kEntrySuffix) || !is_hex32(name.substr(0, name.size() - kEntrySuffix.size()))) {
          problem = "is not named <32 hex digits>.tje";
        } else if (auto e = decode_entry(bytes); !e.ok()) {
          problem = e.error().message;
        } else if (e->kind != EntryKind::Artifact) {
          problem = "holds a record, not an artifact";
        } else if (auto k = Key::parse(e->key); !k) {
          problem = "holds a malformed key";
        } else if (k->hex() + std::string(kEntrySuffix) != name) {
          problem = "holds another key than its name says";
        } else if (check_payload) {
          if (auto ok = check_payload(*k, e->payload); !ok.ok()) problem = ok.error().message;
        }
      } else if (auto r = check_record(bytes, name); !r.ok()) {
        problem = r.error().message;
      }
      if (problem.empty()) {
        ++report.good;
        continue;
      }
      report.problems.push_back(path + ": " + problem);
      if (remove_bad && ::unlinkat(dir_fd, name.c_str(), 0) == 0) ++report.removed;
    }
  }
  return report;
}

Result<PruneReport> DiskCache::prune(std::uint64_t max_bytes) { return impl_->prune(max_bytes, ""); }

Result<PruneReport> DiskCache::Impl::prune(std::uint64_t max_bytes, const std::string& keep) {
  Impl& m = *this;
  PruneReport report;
  struct Item {
    std::int64_t mtime_ns;
    std::uint64_t size;
    std::string name;
  };
  std::vector<Item> items;
  std::uint64_t total = 0;
  TERNJIT_TRY(std::vector<std::string> names, list_dir(m.objects.get(), m.options.dir + "/v1/objects"));
  for (std::string& name : names) {
    struct stat st;
    if (::fstatat(m.objects.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    const std::int64_t t = std::int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    items.push_back(Item{t, static_cast<std::uint64_t>(st.st_size), std::move(name)});
    total += static_cast<std::uint64_t>(st.st_size);
  }
  // Oldest use first; the name breaks ties so the order is deterministic.
  std::sort(items.begin(), items.end(),
            [](const Item& a, const Item& b) { return a.mtime_ns != b.mtime_ns ? a.mtime_ns < b.mtime_ns : a.name < b.name; });
  for (const Item& it : items) {
    if (max_bytes == 0 || total <= max_bytes || it.name == keep) {
      ++report.kept;
      report.kept_bytes += it.size;
      continue;
    }
    if (::unlinkat(m.objects.get(), it.name.c_str(), 0) == 0 || errno == ENOENT) {
      ++report.removed;
      report.removed_bytes += it.size;
      total -= it.size;
    }
  }
  // Temp files of writers killed mid-write; a live writer finishes in far less than an hour.
  TERNJIT_TRY(std::vector<std::string> temps, list_dir(m.tmp.get(), m.options.dir + "/v1/tmp"));
  const std::int64_t now = static_cast<std::int64_t>(std::time(nullptr));
  for (const std::string& name : temps) {
    struct stat st;
    if (::fstatat(m.tmp.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (now - st.st_mtim.tv_sec > kStaleTempSeconds && ::unlinkat(m.tmp.get(), name.c_str(), 0) == 0)
      ++report.stale_temps;
  }
  return report;
}

Result<void> DiskCache::clear() {
  Impl& m = *impl_;
  for (const auto& [fd, sub] : {std::pair{m.objects.get(), kObjects}, std::pair{m.records.get(), kRecords},
                                std::pair{m.tmp.get(), kTmp}, std::pair{m.locks.get(), kLocks}}) {
    TERNJIT_TRY(std::vector<std::string> names, list_dir(fd, m.options.dir + "/v1/" + sub));
    for (const std::string& name : names)
      if (::unlinkat(fd, name.c_str(), 0) != 0 && errno != ENOENT)
        return io_error("cannot remove " + m.rel(sub, name), errno);
  }
  return success();
}

}  // namespace ternjit::cache
