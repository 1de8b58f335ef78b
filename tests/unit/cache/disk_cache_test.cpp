// SPDX-License-Identifier: Apache-2.0
// disk_cache_test.cpp - DiskCache: hits, corrupt/unsafe entries, unsafe directories, full disk, LRU, records, merge.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include "tests/unit/cache/cache_testing.h"

namespace ternjit::cache {
namespace {

using testing::LogCapture;
using testing::ScratchDir;
using testing::test_key;

mode_t mode_of(const std::string& path) {
  struct stat st;
  REQUIRE(::lstat(path.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

TEST_CASE("sizes and the default directory") {
  CHECK(parse_size("4096") == 4096u);
  CHECK(parse_size("500M") == 500ull << 20);
  CHECK(parse_size("2G") == 2ull << 30);
  CHECK(parse_size("1KiB") == 1024u);
  CHECK(parse_size("3kb") == 3072u);
  CHECK_FALSE(parse_size("").has_value());
  CHECK_FALSE(parse_size("M").has_value());
  CHECK_FALSE(parse_size("12Q").has_value());
  CHECK_FALSE(parse_size("99999999999999999999").has_value());
  CHECK(default_cache_dir("/x/cache", "/home/u") == "/x/cache/ternjit");
  CHECK(default_cache_dir("relative", "/home/u") == "/home/u/.cache/ternjit");
  CHECK(default_cache_dir("", "/home/u") == "/home/u/.cache/ternjit");
  CHECK(default_cache_dir("", "") == "");
}

TEST_CASE("put then get; absent keys miss quietly; the root and subdirectories are 0700") {
  ScratchDir tmp;
  LogCapture log;
  const std::string root = tmp / "a/b/cache";
  auto c = testing::open_cache(root, log);
  CHECK(mode_of(root) == 0700);
  CHECK(mode_of(root + "/v1/objects") == 0700);
  CHECK(mode_of(root + "/v1/tmp") == 0700);
  CHECK_FALSE(c->get(test_key(1)).has_value());
  REQUIRE(c->put(test_key(1), "hello").ok());
  CHECK(c->get(test_key(1)) == std::optional<std::string>("hello"));
  CHECK(mode_of(testing::entry_path(root, test_key(1))) == 0600);
  CHECK(testing::files_in(root + "/v1/tmp").empty());
  // Replacing is atomic and allowed (same key, same content in practice).
  REQUIRE(c->put(test_key(1), "hello").ok());
  CHECK(log.lines.empty());
  Outcome how = Outcome::Miss;
  int builds = 0;
  auto v = c->get_or_build(test_key(2), [&]() -> Result<std::string> { ++builds; return std::string("built"); }, &how);
  REQUIRE(v.ok());
  CHECK(*v == "built");
  CHECK(how == Outcome::Miss);
  v = c->get_or_build(test_key(2), [&]() -> Result<std::string> { ++builds; return std::string("again"); }, &how);
  CHECK(*v == "built");
  CHECK(how == Outcome::Hit);
  CHECK(builds == 1);
  // A failing build is returned and stores nothing.
  auto e = c->get_or_build(test_key(3), []() -> Result<std::string> { return make_error(ErrorCode::Unsupported, "no"); });
  CHECK_FALSE(e.ok());
  CHECK_FALSE(c->get(test_key(3)).has_value());
}

TEST_CASE("corrupt entries: bit flips, truncation, extension, a wrong key: logged, removed, rebuilt") {
  ScratchDir tmp;
  LogCapture log;
  auto c = testing::open_cache(tmp.path(), log);
  const Key k = test_key(7);
  const std::string path = testing::entry_path(tmp.path(), k);
  REQUIRE(c->put(k, "the payload").ok());
  const std::string good = testing::slurp(path);
  int misses = 0, cases = 0;
  auto expect_miss = [&](const std::string& bad, const char* needle) {
    testing::spit(path, bad);
    log.clear();
    ++cases;
    const bool miss = !c->get(k).has_value();
    misses += miss;
    CHECK_MESSAGE(log.count(needle) == 1, log.all());
    CHECK_MESSAGE(log.count("removed") == 1, log.all());
    CHECK_FALSE(std::filesystem::exists(path));
    // Rebuilt: the next put makes it a hit again.
    REQUIRE(c->put(k, "the payload").ok());
    CHECK(c->get(k) == std::optional<std::string>("the payload"));
  };
  for (std::size_t i = 0; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] = static_cast<char>(bad[i] ^ (1 << (i % 8)));
    expect_miss(bad, "");
  }
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, kEntryHeaderSize - 1, kEntryHeaderSize, good.size() - 1})
    expect_miss(good.substr(0, n), "truncated");
  expect_miss(good + "x", "truncated or extended");
  CHECK(misses == cases);

  // A valid entry of another key under this key's name.
  REQUIRE(c->put(test_key(8), "other").ok());
  testing::spit(path, testing::slurp(testing::entry_path(tmp.path(), test_key(8))));
  log.clear();
  CHECK_FALSE(c->get(k).has_value());
  CHECK_MESSAGE(log.count("holds another key") == 1, log.all());
  CHECK(c->get(test_key(8)) == std::optional<std::string>("other"));
}

TEST_CASE("unsafe entries: world- or group-writable, foreign-owned, symlinked: refused with a warning, then replaced") {
  ScratchDir tmp;
  LogCapture log;
  auto c = testing::open_cache(tmp.path(), log);
  const Key k = test_key(1);
  const std::string path = testing::entry_path(tmp.path(), k);
  REQUIRE(c->put(k, "v").ok());

  for (mode_t m : {mode_t{0666}, mode_t{0620}, mode_t{0602}}) {
    REQUIRE(::chmod(path.c_str(), m) == 0);
    log.clear();
    CHECK_FALSE(c->get(k).has_value());
    CHECK_MESSAGE(log.count("writable by group or others") == 1, log.all());
    CHECK(std::filesystem::exists(path));  // refused, not deleted
    REQUIRE(c->put(k, "v").ok());          // the rebuild replaces it
    CHECK(c->get(k).has_value());
  }

  if (::geteuid() == 0) {
    REQUIRE(::chown(path.c_str(), 65534, 65534) == 0);
    log.clear();
    CHECK_FALSE(c->get(k).has_value());
    CHECK_MESSAGE(log.count("owned by uid 65534") == 1, log.all());
    REQUIRE(c->put(k, "v").ok());
    CHECK(c->get(k).has_value());
  } else {
    MESSAGE("not root: the foreign-owner case needs chown and is skipped");
  }

  // A symlink to a perfectly valid entry elsewhere is still refused.
  const std::string elsewhere = tmp / "elsewhere.tje";
  std::filesystem::copy_file(path, elsewhere);
  std::filesystem::remove(path);
  std::filesystem::create_symlink(elsewhere, path);
  log.clear();
  CHECK_FALSE(c->get(k).has_value());
  CHECK_MESSAGE(log.count("symlink") == 1, log.all());
  REQUIRE(c->put(k, "v").ok());
  CHECK(c->get(k).has_value());
  CHECK_FALSE(std::filesystem::is_symlink(path));

  // Hard links let another name alias the entry.
  std::filesystem::create_hard_link(path, tmp / "alias");
  log.clear();
  CHECK_FALSE(c->get(k).has_value());
  CHECK(log.count("hard links") == 1);
}

TEST_CASE("unsafe directories are refused: symlink, writable by others, foreign owner, symlinked subdirectory") {
  ScratchDir tmp;
  LogCapture log;
  auto open = [&](const std::string& dir, bool shared = false) {
    CacheOptions o;
    o.dir = dir;
    o.shared_group = shared;
    o.log = log.sink();
    return DiskCache::open(o);
  };
  const std::string real = tmp / "real";
  REQUIRE(open(real).ok());
  std::filesystem::create_symlink(real, tmp / "link");
  auto r = open(tmp / "link");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("symlink") != std::string::npos);

  REQUIRE(::chmod(real.c_str(), 0777) == 0);
  r = open(real);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("writable by group or others") != std::string::npos);
  // Shared-group mode accepts a group-writable root, never a world-writable one.
  CHECK_FALSE(open(real, true).ok());
  REQUIRE(::chmod(real.c_str(), 02770) == 0);
  CHECK_FALSE(open(real).ok());
  CHECK(open(real, true).ok());
  REQUIRE(::chmod(real.c_str(), 0700) == 0);
  CHECK(open(real).ok());

  if (::geteuid() == 0) {
    REQUIRE(::chown(real.c_str(), 65534, 65534) == 0);
    r = open(real);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message.find("owned by uid 65534") != std::string::npos);
    REQUIRE(::chown(real.c_str(), 0, 0) == 0);
  }

  const std::string objects = real + "/v1/objects";
  std::filesystem::remove_all(objects);
  std::filesystem::create_directory(tmp / "evil");
  std::filesystem::create_symlink(tmp / "evil", objects);
  r = open(real);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("v1/objects is a symlink") != std::string::npos);
}

TEST_CASE("shared-group mode: group-readable files of the cache's group are accepted, others' refused") {
  ScratchDir tmp;
  LogCapture log;
  auto c = testing::open_cache(tmp / "shared", log, kDefaultMaxBytes, /*shared_group=*/true);
  CHECK(mode_of(tmp / "shared/v1/objects") == 02770);
  const Key k = test_key(3);
  REQUIRE(c->put(k, "v").ok());
  const std::string path = testing::entry_path(tmp / "shared", k);
  CHECK(mode_of(path) == 0640);
  REQUIRE(::chmod(path.c_str(), 0660) == 0);
  CHECK(c->get(k).has_value());
  REQUIRE(::chmod(path.c_str(), 0662) == 0);
  CHECK_FALSE(c->get(k).has_value());
  CHECK(log.count("writable by others") == 1);
  if (::geteuid() == 0) {
    REQUIRE(c->put(k, "v").ok());
    struct stat dir_st;
    REQUIRE(::stat((tmp / "shared").c_str(), &dir_st) == 0);
    // Another member of the group wrote it: accepted.
    REQUIRE(::chown(path.c_str(), 65534, dir_st.st_gid) == 0);
    CHECK(c->get(k).has_value());
    // Someone outside the group: refused.
    REQUIRE(::chown(path.c_str(), 65534, 65534) == 0);
    CHECK_FALSE(c->get(k).has_value());
  }
}

TEST_CASE("a full disk (RLIMIT_FSIZE, SIGXFSZ ignored): the write fails with EFBIG, nothing is published, the build is still used") {
  ScratchDir tmp;
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    // The child: a cache whose files may not exceed 4 KiB.
    int failures = 0;
    auto fail = [&](const char* what) {
      std::fprintf(stderr, "full-disk child: %s\n", what);
      ++failures;
    };
    ::signal(SIGXFSZ, SIG_IGN);
    LogCapture log;
    CacheOptions o;
    o.dir = tmp.path();
    o.log = log.sink();
    auto c = DiskCache::open(o);
    if (!c.ok()) ::_exit(10);
    rlimit lim{4096, 4096};
    ::setrlimit(RLIMIT_FSIZE, &lim);
    const std::string big(64 * 1024, 'x');
    auto put = (*c)->put(test_key(1), big);
    if (put.ok()) fail("put of 64 KiB succeeded");
    else if (put.error().message.find("File too large") == std::string::npos) fail(put.error().message.c_str());
    if ((*c)->get(test_key(1)).has_value()) fail("a failed put is visible");
    if (!testing::files_in(tmp / "v1/tmp").empty()) fail("a temp file was left behind");
    Outcome how = Outcome::Hit;
    auto built = (*c)->get_or_build(test_key(2), [&]() -> Result<std::string> { return big; }, &how);
    if (!built.ok() || *built != big || how != Outcome::Miss) fail("get_or_build did not return the build");
    if (log.count("File too large") != 1) fail("the failed store was not logged once");
    if (!(*c)->put(test_key(3), "small").ok()) fail("a small put failed");
    if (!(*c)->get(test_key(3)).has_value()) fail("a small entry is not readable");
    ::_exit(failures == 0 ? 0 : 1);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("LRU: prune evicts the least recently used; a hit refreshes; puts keep the cap") {
  ScratchDir tmp;
  LogCapture log;
  auto c = testing::open_cache(tmp.path(), log, /*max_bytes=*/0);
  const std::string payload(1000, 'p');
  for (int i = 0; i < 10; ++i) {
    REQUIRE(c->put(test_key(i), payload).ok());
    // Distinct, increasing last-use times.
    const timespec t[2] = {{1000000 + i, 0}, {1000000 + i, 0}};
    REQUIRE(::utimensat(AT_FDCWD, testing::entry_path(tmp.path(), test_key(i)).c_str(), t, 0) == 0);
  }
  CHECK(c->get(test_key(0)).has_value());  // now the most recent
  const std::uint64_t entry_size = std::filesystem::file_size(testing::entry_path(tmp.path(), test_key(0)));
  auto r = c->prune(5 * entry_size);
  REQUIRE(r.ok());
  CHECK(r->removed == 5);
  CHECK(r->kept == 5);
  CHECK(c->get(test_key(0)).has_value());
  for (int i = 1; i <= 5; ++i) CHECK_FALSE(c->get(test_key(i)).has_value());
  for (int i = 6; i < 10; ++i) CHECK(c->get(test_key(i)).has_value());

  ScratchDir tmp2;
  auto capped = testing::open_cache(tmp2.path(), log, /*max_bytes=*/3 * entry_size);
  for (int i = 0; i < 12; ++i) REQUIRE(capped->put(test_key(i), payload).ok());
  auto s = capped->stats();
  REQUIRE(s.ok());
  CHECK(s->artifact_bytes <= 3 * entry_size);
  CHECK(s->artifacts >= 1);
  CHECK(capped->get(test_key(11)).has_value());  // the newest survives
}

TEST_CASE("records: one per (kernel, config), append-only; list, verify, clear") {
  ScratchDir tmp;
  LogCapture log;
  auto c = testing::open_cache(tmp.path(), log);
  const Key kernel = test_key(42);
  auto put = c->put_record(kernel, "tile=4", R"({"median_us": 12.5})");
  REQUIRE(put.ok());
  CHECK(*put);
  put = c->put_record(kernel, "tile=4", R"({"median_us": 99})");
  REQUIRE(put.ok());
  CHECK_FALSE(*put);  // kept the first
  REQUIRE(c->put_record(kernel, "tile=2", R"({"median_us": 20})").ok());
  REQUIRE(c->put_record(test_key(43), "tile=4", "{}").ok());
  auto recs = c->records(kernel);
  REQUIRE(recs.ok());
  REQUIRE(recs->size() == 2);
  CHECK((*recs)[0].config == "tile=2");
  CHECK((*recs)[1].config == "tile=4");
  CHECK((*recs)[1].measurements == R"({"median_us": 12.5})");

  REQUIRE(c->put(test_key(1), "artifact").ok());
  auto listing = c->list();
  REQUIRE(listing.ok());
  CHECK(listing->size() == 4);
  for (const EntryInfo& e : *listing) {
    CHECK(e.problem.empty());
    CHECK(e.key.has_value());
  }
  auto v = c->verify(false);
  REQUIRE(v.ok());
  CHECK(v->checked == 4);
  CHECK(v->good == 4);

  // A corrupt record is dropped by records() and reported by verify.
  const std::string rec_dir = tmp / "v1/records";
  std::string victim;
  for (const std::string& n : testing::files_in(rec_dir))
    if (n.rfind(kernel.hex(), 0) == 0) victim = rec_dir + "/" + n;
  std::string bytes = testing::slurp(victim);
  bytes[bytes.size() / 2] ^= 4;
  testing::spit(victim, bytes);
  v = c->verify(false);
  CHECK(v->problems.size() == 1);
  recs = c->records(kernel);
  CHECK(recs->size() == 1);
  CHECK(log.count("removed") == 1);

  auto s = c->stats();
  REQUIRE(s.ok());
  CHECK(s->artifacts == 1);
  CHECK(s->records == 2);
  REQUIRE(c->clear().ok());
  s = c->stats();
  CHECK(s->artifacts == 0);
  CHECK(s->records == 0);
}

TEST_CASE("merge: copies the records that verify and are new; keeps ours on conflict; rejects bad ones") {
  ScratchDir a_dir, b_dir;
  LogCapture log;
  auto a = testing::open_cache(a_dir.path(), log);
  auto b = testing::open_cache(b_dir.path(), log);
  const Key kernel = test_key(1);
  REQUIRE(a->put_record(kernel, "same", "1").ok());
  REQUIRE(a->put_record(kernel, "conflict", "ours").ok());
  REQUIRE(b->put_record(kernel, "same", "1").ok());
  REQUIRE(b->put_record(kernel, "conflict", "theirs").ok());
  REQUIRE(b->put_record(kernel, "new", "3").ok());
  REQUIRE(b->put_record(test_key(2), "bad", "4").ok());
  // Corrupt one of b's records, and plant a symlink and a stray file.
  const std::string b_rec = b_dir / "v1/records";
  for (const std::string& n : testing::files_in(b_rec))
    if (n.rfind(test_key(2).hex(), 0) == 0) {
      std::string bytes = testing::slurp(b_rec + "/" + n);
      bytes.back() ^= 1;
      testing::spit(b_rec + "/" + n, bytes);
    }
  std::filesystem::create_symlink("/etc/passwd", b_rec + "/" + kernel.hex() + "-" + std::string(32, '0') + ".tjr");
  testing::spit(b_rec + "/junk.tjr", "junk");
  log.clear();
  auto r = a->merge(b_dir.path());
  REQUIRE(r.ok());
  CHECK(r->copied == 1);
  CHECK(r->present == 1);
  CHECK(r->conflicts == 1);
  CHECK(r->rejected == 3);
  CHECK_MESSAGE(log.count("merge:") == 3, log.all());
  auto recs = a->records(kernel);
  REQUIRE(recs.ok());
  REQUIRE(recs->size() == 3);
  CHECK((*recs)[0].config == "conflict");
  CHECK((*recs)[0].measurements == "ours");
  CHECK((*recs)[1].config == "new");
  CHECK(a->records(test_key(2))->empty());
  // Merging again copies nothing.
  r = a->merge(b_dir.path());
  CHECK(r->copied == 0);
  CHECK_FALSE(a->merge(a_dir / "missing").ok());
}

}  // namespace
}  // namespace ternjit::cache
