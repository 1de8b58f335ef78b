// SPDX-License-Identifier: Apache-2.0
// disk_cache_maintenance.cpp - DiskCache upkeep: list, stats, verify, LRU eviction (automatic and asked), clear.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statfs.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <utility>

#include "cache/disk_cache_internal.h"

namespace ternjit::cache {

using namespace disk_detail;

void DiskCache::Impl::maybe_prune(std::uint64_t written, const std::string& just_written) {
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
          if (sub == kObjects) info.kind = h->kind;  // an artifact or a target's file
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
        } else if (e->kind == EntryKind::Record) {
          problem = "holds a record, not an artifact";
        } else if (auto k = Key::parse(e->key); !k) {
          problem = "holds a malformed key";
        } else if (k->hex() + std::string(kEntrySuffix) != name) {
          problem = "holds another key than its name says";
        } else if (check_payload && e->kind == EntryKind::Artifact) {
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
