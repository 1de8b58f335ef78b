// SPDX-License-Identifier: Apache-2.0
// cache_testing.h - shared helpers of the cache tests: temp directories, captured warnings, payloads.
#pragma once

#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cache/disk_cache.h"
#include "cache/key.h"

namespace ternjit::testing {

/// A fresh directory under /tmp, removed (recursively) when it goes out of scope.
class ScratchDir {
 public:
  ScratchDir() {
    std::string tmpl = "/tmp/ternjit-cache-test-XXXXXX";
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    path_ = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  /// The directory.
  [[nodiscard]] const std::string& path() const { return path_; }
  /// A path inside it.
  [[nodiscard]] std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

/// Warning lines collected from a cache (thread-safe).
struct LogCapture {
  std::mutex mu;
  std::vector<std::string> lines;

  /// A sink appending here.
  cache::LogFn sink() {
    return [this](std::string_view l) {
      std::lock_guard lock(mu);
      lines.emplace_back(l);
    };
  }
  /// How many lines contain `needle`.
  int count(std::string_view needle) {
    std::lock_guard lock(mu);
    int n = 0;
    for (const std::string& l : lines) n += l.find(needle) != std::string::npos;
    return n;
  }
  /// Every line, joined (for failure messages).
  std::string all() {
    std::lock_guard lock(mu);
    std::string s;
    for (const std::string& l : lines) s += l + "\n";
    return s;
  }
  void clear() {
    std::lock_guard lock(mu);
    lines.clear();
  }
};

/// Opens a cache at `dir` with warnings into `log` (the test fails if it cannot).
inline std::unique_ptr<cache::DiskCache> open_cache(const std::string& dir, LogCapture& log,
                                                    std::uint64_t max_bytes = cache::kDefaultMaxBytes,
                                                    bool shared_group = false) {
  cache::CacheOptions o;
  o.dir = dir;
  o.max_bytes = max_bytes;
  o.shared_group = shared_group;
  o.log = log.sink();
  auto c = cache::DiskCache::open(o);
  REQUIRE_MESSAGE(c.ok(), (c.ok() ? "" : c.error().message));
  return std::move(c.value());
}

/// The i-th test key.
inline cache::Key test_key(int i) { return cache::Key("artifact", {{"test", std::to_string(i)}}); }

/// A deterministic payload of `size` bytes for key i (xorshift bytes).
inline std::string test_payload(int i, std::size_t size) {
  std::string s(size, '\0');
  std::uint64_t x = 0x9E3779B97F4A7C15ull * static_cast<std::uint64_t>(i + 1);
  for (char& c : s) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    c = static_cast<char>(x & 0xff);
  }
  return s;
}

/// The whole content of a file.
inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

/// Replaces a file's content.
inline void spit(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

/// The entry file of `key` under cache root `dir`.
inline std::string entry_path(const std::string& dir, const cache::Key& key) {
  return dir + "/v1/objects/" + key.hex() + ".tje";
}

/// The file names in `dir` (empty when it does not exist).
inline std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) out.push_back(e.path().filename().string());
  return out;
}

}  // namespace ternjit::testing
