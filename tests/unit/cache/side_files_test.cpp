// SPDX-License-Identifier: Apache-2.0
// side_files_test.cpp - targets' side files (DiskCache::get_file / put_file, jit::KernelCache as targets::SideFiles):
// an artifact's checks and refusals for every file a target keeps in the cache (issue 33 item 8).
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>

#include "cache/entry.h"
#include "jit/kernel_cache.h"
#include "tests/unit/cache/cache_testing.h"

namespace ternjit::cache {
namespace {

using testing::LogCapture;
using testing::ScratchDir;

const Key kBlobKey = target_file_key("test.blob", "device=1", "v");

std::string blob_path(const ScratchDir& dir) { return testing::entry_path(dir.path(), kBlobKey); }

TEST_CASE("side files: stored and read back as target-file entries, listed and verified, never served as artifacts") {
  ScratchDir dir;
  LogCapture log;
  auto c = testing::open_cache(dir.path(), log);
  CHECK_FALSE(c->get_file(kBlobKey, 1 << 20).has_value());  // absent: a quiet miss
  CHECK(log.lines.empty());
  REQUIRE(c->put_file(kBlobKey, "blob bytes").ok());
  CHECK(c->get_file(kBlobKey, 1 << 20) == std::optional<std::string>("blob bytes"));
  auto listed = c->list();
  REQUIRE(listed.ok());
  REQUIRE(listed->size() == 1);
  CHECK((*listed)[0].kind == EntryKind::TargetFile);
  CHECK((*listed)[0].problem.empty());
  // verify applies an artifact's payload check to artifacts only.
  auto report = c->verify(false, [](const Key&, std::string_view) -> Result<void> {
    return make_error(ErrorCode::InvalidInput, "not an artifact payload");
  });
  REQUIRE(report.ok());
  CHECK(report->good == 1);
  // The artifact lookup of the same key refuses it (and removes the misplaced entry).
  CHECK_FALSE(c->get(kBlobKey).has_value());
  CHECK(log.count("holds a target-file, not an artifact") == 1);
  CHECK_FALSE(std::filesystem::exists(blob_path(dir)));
}

TEST_CASE("side files: the size bound, the payload check, symlinks, FIFOs and hard links are refused with a message") {
  ScratchDir dir;
  LogCapture log;
  auto c = testing::open_cache(dir.path(), log);
  const auto timed = [&](const char* what, const char* message) {
    CAPTURE(what);
    log.clear();
    const auto t0 = std::chrono::steady_clock::now();
    CHECK_FALSE(c->get_file(kBlobKey, 1 << 20).has_value());
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
    CHECK_MESSAGE(log.count(message) == 1, log.all());
  };
  // Larger than max_bytes: removed unread (a sparse 1 GiB file takes no time).
  testing::spit(blob_path(dir), "");
  std::filesystem::resize_file(blob_path(dir), std::uint64_t{1} << 30);
  timed("sparse 1 GiB", "larger than 1048576 bytes");
  CHECK_FALSE(std::filesystem::exists(blob_path(dir)));
  // A symlink to /dev/zero: never followed.
  std::filesystem::create_symlink("/dev/zero", blob_path(dir));
  timed("symlink to /dev/zero", "is a symlink: refused");
  std::filesystem::remove(blob_path(dir));
  // A FIFO: opened without blocking, refused as not a regular file.
  REQUIRE(::mkfifo(blob_path(dir).c_str(), 0600) == 0);
  timed("FIFO", "is not a regular file: refused");
  std::filesystem::remove(blob_path(dir));
  // A hard link to a good entry elsewhere.
  REQUIRE(c->put_file(kBlobKey, "good").ok());
  std::filesystem::create_hard_link(blob_path(dir), dir / "elsewhere");
  timed("hard link", "has 2 hard links");
  std::filesystem::remove(dir / "elsewhere");
  // The target's own check of the payload: a refusal is a damaged file, removed.
  log.clear();
  CHECK_FALSE(c->get_file(kBlobKey, 1 << 20, [](std::string_view p) -> Result<void> {
                 if (p == "good") return make_error(ErrorCode::InvalidInput, "header names another device");
                 return success();
               }).has_value());
  CHECK_MESSAGE(log.count("header names another device: removed") == 1, log.all());
  CHECK_FALSE(std::filesystem::exists(blob_path(dir)));
  // A put replaces whatever stands at the name (rename never follows it).
  std::filesystem::create_symlink("/dev/zero", blob_path(dir));
  REQUIRE(c->put_file(kBlobKey, "fresh").ok());
  CHECK(std::filesystem::is_regular_file(std::filesystem::symlink_status(blob_path(dir))));
  CHECK(c->get_file(kBlobKey, 1 << 20) == std::optional<std::string>("fresh"));
}

TEST_CASE("side files through jit::KernelCache: a refused root gets none read or written; off has none") {
  ScratchDir dir;
  {
    LogCapture log;
    auto c = testing::open_cache(dir.path(), log);  // the layout
  }
  REQUIRE(::chmod(dir.path().c_str(), 0777) == 0);
  LogCapture log;
  EngineOptions o;
  o.cache_dir = dir.path();
  jit::KernelCache kc(jit::kernel_cache_config(o, log.sink()), targets::TargetChoice{});
  CHECK(kc.enabled());
  CHECK_FALSE(kc.read("test.blob", "device=1", 1 << 20, {}).has_value());
  CHECK(kc.write("test.blob", "device=1", "bytes").ok());  // nothing stored, nothing more said
  CHECK(log.count("writable by group or others") == 1);  // said once for both
  std::size_t files = 0;
  for (const auto& f : std::filesystem::recursive_directory_iterator(dir.path())) files += f.is_regular_file();
  CHECK(files == 0);

  o.cache_dir = "off";
  jit::KernelCache off(jit::kernel_cache_config(o, log.sink()), targets::TargetChoice{});
  CHECK_FALSE(off.enabled());
  CHECK(off.write("test.blob", "device=1", "bytes").ok());
  CHECK_FALSE(off.read("test.blob", "device=1", 1 << 20, {}).has_value());
}

}  // namespace
}  // namespace ternjit::cache
