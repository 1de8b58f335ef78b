// SPDX-License-Identifier: Apache-2.0
// disk_cache.cpp - DiskCache: opening, atomic publication, verified loads, locks, records and merge.
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
// Single files are read and written in disk_cache_files.cpp; listing, verification,
// eviction and clearing are in disk_cache_maintenance.cpp.
#include "cache/disk_cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statfs.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <thread>
#include <utility>

#include "cache/disk_cache_internal.h"

namespace ternjit::cache {

using namespace disk_detail;

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
  return impl_->get_object(EntryKind::Artifact, key, kMaxEntryBytes, {});
}

Result<void> DiskCache::put(const Key& key, std::string_view payload) {
  return impl_->put_object(EntryKind::Artifact, key, payload);
}

std::optional<std::string> DiskCache::get_file(const Key& key, std::uint64_t max_bytes,
                                               const std::function<Result<void>(std::string_view)>& check) {
  return impl_->get_object(EntryKind::TargetFile, key, std::min(max_bytes, kMaxEntryBytes), check);
}

Result<void> DiskCache::put_file(const Key& key, std::string_view payload) {
  return impl_->put_object(EntryKind::TargetFile, key, payload);
}

std::optional<std::string> DiskCache::Impl::get_object(EntryKind kind, const Key& key, std::uint64_t max_bytes,
                                                       const std::function<Result<void>(std::string_view)>& check) {
  Impl& m = *this;
  const std::string name = key.hex() + std::string(kEntrySuffix);
  auto bytes = m.read_entry(m.objects.get(), kObjects, name, nullptr, max_bytes);
  if (!bytes) return std::nullopt;
  Result<std::string_view> payload = decode_entry_of(*bytes, kind, key);
  if (payload.ok() && check) {
    if (auto ok = check(payload.value()); !ok.ok()) payload = std::move(ok).error();
  }
  if (!payload.ok()) {
    struct stat st;
    if (::fstatat(m.objects.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0)
      m.drop(m.objects.get(), kObjects, name, st, payload.error().message);
    return std::nullopt;
  }
  // Mark as recently used for LRU eviction (best effort: a foreign entry in shared mode
  // may not let us).
  (void)::utimensat(m.objects.get(), name.c_str(), nullptr, AT_SYMLINK_NOFOLLOW);
  return std::string(payload.value());
}

Result<void> DiskCache::Impl::put_object(EntryKind kind, const Key& key, std::string_view payload) {
  Impl& m = *this;
  const std::string stem = key.hex();
  const std::string bytes = encode_entry(kind, key, payload);
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

}  // namespace

Result<CheckedRecord> disk_detail::check_record(std::string_view bytes, std::string_view name) {
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

}  // namespace ternjit::cache
