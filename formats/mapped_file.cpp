// SPDX-License-Identifier: Apache-2.0
// mapped_file.cpp - mmap of whole files (POSIX), with a read() fallback.
#include "formats/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <system_error>
#include <vector>

namespace ternjit::formats {

namespace {

Error io_error(const std::string& what, const std::string& path, int err) {
  return make_error(err == ENOENT ? ErrorCode::NotFound : ErrorCode::IoError,
                    "cannot " + what + " '" + path + "': " + std::generic_category().message(err));
}

// Owns one mapping; the SharedBytes aliasing it keep it alive.
class Mapping {
 public:
  Mapping(void* addr, std::size_t size) : addr_(addr), size_(size) {}
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping() { ::munmap(addr_, size_); }
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

}  // namespace

Result<ir::SharedBytes> map_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return io_error("open", path, errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return io_error("examine", path, err);
  }
  if (S_ISREG(st.st_mode) && st.st_size > 0) {
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

}  // namespace ternjit::formats
