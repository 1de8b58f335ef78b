// SPDX-License-Identifier: Apache-2.0
// disk_cache_files.cpp - DiskCache's single files: checked directories and entries, temp files, helpers.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "cache/disk_cache_internal.h"

namespace ternjit::cache {

namespace disk_detail {

std::string errno_text(int e) { return std::strerror(e); }

Error io_error(const std::string& what, int e) {
  return make_error(ErrorCode::IoError, what + ": " + errno_text(e));
}

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

}  // namespace disk_detail

using namespace disk_detail;

void DiskCache::Impl::warn(const std::string& message) const {
  const std::string line = "ternjit: cache: " + message;
  if (options.log) {
    options.log(line);
  } else {
    const std::string l = line + "\n";
    std::fputs(l.c_str(), stderr);
  }
}

std::string DiskCache::Impl::dir_problem(const struct stat& st) const {
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

std::string DiskCache::Impl::file_problem(const struct stat& st) const {
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

bool DiskCache::Impl::in_my_groups(gid_t g) {
  if (g == ::getegid()) return true;
  gid_t groups[256];
  const int n = ::getgroups(256, groups);
  for (int i = 0; i < n; ++i)
    if (groups[i] == g) return true;
  return false;
}

Result<Fd> DiskCache::Impl::open_dir(int parent, const char* name, const std::string& path) const {
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

std::optional<std::string> DiskCache::Impl::read_entry(int dir_fd, const char* sub, const std::string& name, bool* absent,
                                                       std::uint64_t max_bytes) {
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
  if (size > max_bytes) {
    drop(dir_fd, sub, name, st, "larger than " + std::to_string(max_bytes) + " bytes");
    return std::nullopt;
  }
  if (!read_all(fd.get(), size, bytes)) {
    drop(dir_fd, sub, name, st, "short read (truncated while reading)");
    return std::nullopt;
  }
  return bytes;
}

void DiskCache::Impl::drop(int dir_fd, const char* sub, const std::string& name, const struct stat& read_st, const std::string& why) {
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

Result<std::string> DiskCache::Impl::write_temp(std::string_view stem, std::string_view bytes) {
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

}  // namespace ternjit::cache
