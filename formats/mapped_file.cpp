// SPDX-License-Identifier: Apache-2.0
// mapped_file.cpp - mmap of whole files (POSIX), with a read() fallback.
#include "formats/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <system_error>
#include <vector>

namespace ternjit::formats {

namespace {

Error io_error(const std::string& what, const std::string& path, int err) {
  return make_error(err == ENOENT ? ErrorCode::NotFound : ErrorCode::IoError,
                    "cannot " + what + " '" + path + "': " + std::generic_category().message(err));
}

// The live read-only file mappings [begin, end): release_mapped_pages acts on these only
// (madvise(MADV_DONTNEED) would zero anonymous memory).
std::mutex g_maps_mutex;
std::map<std::uintptr_t, std::uintptr_t> g_maps;

// Owns one mapping; the SharedBytes aliasing it keep it alive.
class Mapping {
 public:
  Mapping(void* addr, std::size_t size) : addr_(addr), size_(size) {
    std::lock_guard<std::mutex> lock(g_maps_mutex);
    g_maps[reinterpret_cast<std::uintptr_t>(addr)] = reinterpret_cast<std::uintptr_t>(addr) + size;
  }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping() {
    {
      std::lock_guard<std::mutex> lock(g_maps_mutex);
      g_maps.erase(reinterpret_cast<std::uintptr_t>(addr_));
    }
    ::munmap(addr_, size_);
  }
  [[nodiscard]] std::span<const std::uint8_t> bytes() const { return {static_cast<const std::uint8_t*>(addr_), size_}; }

 private:
  void* addr_;
  std::size_t size_;
};

// read(2) until end of file, retrying EINTR. Returns 0 or an errno.
int read_all(int fd, std::vector<std::uint8_t>& out) {
  std::uint8_t chunk[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n == 0) return 0;
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    out.insert(out.end(), chunk, chunk + n);
  }
}

// What a non-regular file is, for the error that refuses it.
const char* file_type_name(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

}  // namespace

Result<ir::SharedBytes> map_file(const std::string& path) {
  // O_NONBLOCK: opening a FIFO without a writer would block forever; the fstat below then
  // refuses it (on a regular file the flag changes nothing).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return io_error("open", path, errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return io_error("examine", path, err);
  }
  // Only regular files: their size is known and bounds what is read. A device (/dev/zero),
  // a FIFO or a socket would be read to an end that may never come.
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return make_error(ErrorCode::IoError, "cannot read '" + path + "': it is " + file_type_name(st.st_mode) +
                                              ", not a regular file");
  }
  if (st.st_size > 0) {
    const auto size = static_cast<std::size_t>(st.st_size);
    void* addr = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (addr != MAP_FAILED) {
      ::close(fd);  // the mapping holds its own reference to the file
      auto mapping = std::make_shared<const Mapping>(addr, size);
      const auto bytes = mapping->bytes();
      return ir::SharedBytes(std::move(mapping), bytes);
    }
  }
  std::vector<std::uint8_t> data;
  const int err = read_all(fd, data);
  ::close(fd);
  if (err != 0) return io_error("read", path, err);
  return ir::SharedBytes::adopt(std::move(data));
}

std::size_t release_mapped_pages(std::span<const std::uint8_t> bytes) {
  if (bytes.empty()) return 0;
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto b = reinterpret_cast<std::uintptr_t>(bytes.data()), e = b + bytes.size();
  const std::uintptr_t lo = (b + page - 1) / page * page, hi = e / page * page;  // whole pages inside
  if (lo >= hi) return 0;
  std::lock_guard<std::mutex> lock(g_maps_mutex);  // held: the mapping cannot go away meanwhile
  auto it = g_maps.upper_bound(b);
  if (it == g_maps.begin()) return 0;
  --it;
  if (b < it->first || e > it->second) return 0;  // not inside one file mapping
  // A read-only private file mapping never written: dropping its pages loses nothing, the
  // next read faults them in again from the file.
  if (::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED) != 0) return 0;
  return hi - lo;
}

namespace {

// write(2) all of `bytes`, retrying short writes and EINTR. Returns 0 or an errno.
int write_all(int fd, std::span<const std::uint8_t> bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    bytes = bytes.subspan(static_cast<std::size_t>(n));
  }
  return 0;
}

Error write_error(const std::string& what, const std::string& path, int err) {
  return make_error(ErrorCode::IoError, "cannot " + what + " '" + path + "': " + std::generic_category().message(err));
}

}  // namespace

Result<ExclusiveTemp> create_temp_beside(const std::string& path) {
  // O_EXCL makes the temporary ours alone; the pid separates processes and the attempt
  // number separates concurrent writers of the same path within one process.
  ExclusiveTemp t;
  int open_err = 0;
  for (int attempt = 0; attempt < 100 && t.fd < 0; ++attempt) {
    t.path = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(attempt);
    t.fd = ::open(t.path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    open_err = t.fd < 0 ? errno : 0;
    if (t.fd < 0 && open_err != EEXIST) break;
  }
  if (t.fd < 0) return write_error("create a temporary file for", path, open_err);
  return t;
}

Result<void> write_file_atomic(const std::string& path, std::span<const std::uint8_t> bytes) {
  TERNJIT_TRY(const ExclusiveTemp tf, create_temp_beside(path));
  const int fd = tf.fd;
  const std::string& temp = tf.path;
  int err = write_all(fd, bytes);
  // fsync before rename: otherwise a crash can leave the new name pointing at an
  // empty or partial file on some file systems.
  if (err == 0 && ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err == 0 && std::rename(temp.c_str(), path.c_str()) != 0) err = errno;
  if (err != 0) {
    ::unlink(temp.c_str());
    return write_error("write", path, err);
  }
  return success();
}

}  // namespace ternjit::formats
