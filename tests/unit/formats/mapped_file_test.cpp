// SPDX-License-Identifier: Apache-2.0
// mapped_file_test.cpp - release_mapped_pages: a file mapping's resident pages are dropped and
// read back the same; memory that is not a file mapping is never touched. map_file refuses
// what is not a regular file (a FIFO without blocking, /dev/zero without reading it).
#include "formats/mapped_file.h"

#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace ternjit::formats {
namespace {

// Resident bytes of the mapping that starts at `addr`, from /proc/self/smaps.
std::size_t resident_of(const void* addr) {
  std::ifstream in("/proc/self/smaps");
  std::string line;
  bool inside = false;
  const auto want = reinterpret_cast<std::uintptr_t>(addr);
  while (std::getline(in, line)) {
    const auto dash = line.find('-');
    if (dash != std::string::npos && dash < 17 && line.find(' ') > dash) {
      inside = std::stoull(line.substr(0, dash), nullptr, 16) == want;
    } else if (inside && line.rfind("Rss:", 0) == 0) {
      return std::stoull(line.substr(4)) * 1024;
    }
  }
  return 0;
}

TEST_CASE("release_mapped_pages drops a file mapping's resident pages; they read back the same; heap is left alone") {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("ternjit_release_" + std::to_string(::getpid()) + ".bin")).string();
  constexpr std::size_t kBytes = 8 << 20;
  {
    std::vector<std::uint8_t> data(kBytes);
    for (std::size_t i = 0; i < kBytes; ++i) data[i] = static_cast<std::uint8_t>(i * 131 + (i >> 12));
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(data.data()), kBytes);
  }
  auto m = map_file(path);
  REQUIRE(m.ok());
  const std::uint8_t* p = m->data();
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < kBytes; ++i) sum += p[i];  // every page resident
  CHECK(resident_of(p) >= kBytes * 9 / 10);
  // The middle of the mapping: only whole pages inside the span.
  const std::size_t released = release_mapped_pages(m->span().subspan(100, kBytes - 200));
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  CHECK(released == kBytes - 2 * page);
  CHECK(resident_of(p) <= 4 * page);
  std::uint64_t again = 0;
  for (std::size_t i = 0; i < kBytes; ++i) again += p[i];
  CHECK(again == sum);
  // Not a file mapping: nothing happens (MADV_DONTNEED would zero anonymous memory).
  std::vector<std::uint8_t> heap(kBytes, 7);
  CHECK(release_mapped_pages(heap) == 0);
  CHECK(heap[kBytes / 2] == 7);
  CHECK(release_mapped_pages({}) == 0);
  std::filesystem::remove(path);
}


TEST_CASE("map_file refuses a FIFO, a device and a directory by name and type, without reading or blocking") {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("ternjit_nonregular_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto refused = [](const std::string& path, const std::string& type) {
    auto r = map_file(path);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == ErrorCode::IoError);
    INFO(r.error().message);
    CHECK(r.error().message.find("'" + path + "'") != std::string::npos);
    CHECK(r.error().message.find(type + ", not a regular file") != std::string::npos);
  };
  // A FIFO without a writer: a blocking open (or a read to EOF) would never return.
  const std::string fifo = (dir / "pipe").string();
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  refused(fifo, "a FIFO (named pipe)");
  // /dev/zero never ends: reading it to EOF ran out of memory.
  if (std::filesystem::exists("/dev/zero")) refused("/dev/zero", "a character device");
  refused(dir.string(), "a directory");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ternjit::formats
