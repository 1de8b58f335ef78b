// SPDX-License-Identifier: Apache-2.0
// concurrency_test.cpp - many processes and threads on one cache: 4 x 4 builders, and writers killed with SIGKILL.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <random>
#include <thread>

#include "tests/unit/cache/cache_testing.h"

namespace ternjit::cache {
namespace {

using testing::LogCapture;
using testing::ScratchDir;
using testing::test_key;
using testing::test_payload;

// Payload sizes from 1 KiB to ~600 KiB, so a SIGKILL often lands in the middle of a write.
std::size_t payload_size(int i) { return 1024 + static_cast<std::size_t>(i) * 37 * 1024 % (600 * 1024); }

// Opens the cache in a child process (no doctest there: failures are exit codes).
std::unique_ptr<DiskCache> child_open(const std::string& dir) {
  CacheOptions o;
  o.dir = dir;
  o.log = [](std::string_view) {};
  auto c = DiskCache::open(o);
  if (!c.ok()) ::_exit(20);
  return std::move(c.value());
}

int wait_exit_code(pid_t pid) {
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST_CASE("4 processes x 4 threads build the same and different keys: every result correct, one build and one entry per key") {
  ScratchDir tmp;
  const std::string root = tmp / "cache";
  const std::string builds_log = tmp / "builds.log";
  constexpr int kKeys = 12, kProcs = 4, kThreads = 4;
  std::vector<pid_t> pids;
  for (int p = 0; p < kProcs; ++p) {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      auto cache = child_open(root);
      std::atomic<int> wrong{0};
      std::vector<std::thread> threads;
      for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([&, t] {
          std::vector<int> order(kKeys);
          for (int i = 0; i < kKeys; ++i) order[i] = i;
          std::shuffle(order.begin(), order.end(), std::mt19937(static_cast<unsigned>(p * 131 + t)));
          for (int i : order) {
            auto r = cache->get_or_build(test_key(i), [&]() -> Result<std::string> {
              // A slow "compile", recorded with one O_APPEND write (atomic between processes).
              std::this_thread::sleep_for(std::chrono::milliseconds(15));
              const int fd = ::open(builds_log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
              const std::string line = std::to_string(i) + "\n";
              if (fd >= 0) {
                (void)!::write(fd, line.data(), line.size());
                ::close(fd);
              }
              return test_payload(i, payload_size(i));
            });
            if (!r.ok() || *r != test_payload(i, payload_size(i))) ++wrong;
          }
        });
      for (std::thread& th : threads) th.join();
      ::_exit(wrong.load() == 0 ? 0 : 1);
    }
    pids.push_back(pid);
  }
  for (pid_t pid : pids) CHECK(wait_exit_code(pid) == 0);

  std::map<int, int> builds;
  std::string log = testing::slurp(builds_log);
  for (std::size_t pos = 0, nl; (nl = log.find('\n', pos)) != std::string::npos; pos = nl + 1)
    ++builds[std::stoi(log.substr(pos, nl - pos))];
  CHECK(builds.size() == static_cast<std::size_t>(kKeys));
  for (const auto& [key, n] : builds) CHECK_MESSAGE(n == 1, "key " << key << " was built " << n << " times");
  CHECK(testing::files_in(root + "/v1/objects").size() == static_cast<std::size_t>(kKeys));
  CHECK(testing::files_in(root + "/v1/tmp").empty());
  LogCapture warnings;
  auto cache = testing::open_cache(root, warnings);
  auto v = cache->verify(false);
  REQUIRE(v.ok());
  CHECK(v->good == static_cast<std::uint64_t>(kKeys));
  CHECK(v->problems.empty());
}

TEST_CASE("writers killed with SIGKILL at random points: no reader ever sees a torn entry; every entry verifies") {
  ScratchDir tmp;
  const std::string root = tmp / "cache";
  constexpr int kKeys = 40, kMinRounds = 60, kWriters = 3;
  constexpr std::size_t kWantWrites = 300;
  const std::string counts = tmp / "writes.log";
  std::vector<std::string> payloads;  // made once, inherited by every child
  for (int i = 0; i < kKeys; ++i) payloads.push_back(test_payload(i, payload_size(i)));

  // A reader runs for the whole test: every hit must be exactly the key's payload.
  int stop_pipe[2];
  REQUIRE(::pipe(stop_pipe) == 0);
  const pid_t reader = ::fork();
  REQUIRE(reader >= 0);
  if (reader == 0) {
    ::close(stop_pipe[1]);
    auto cache = child_open(root);
    std::mt19937 rng(7);
    long hits = 0, torn = 0;
    for (;;) {
      pollfd pfd{stop_pipe[0], POLLIN, 0};
      if (::poll(&pfd, 1, 0) > 0) break;  // EOF: the parent is done
      const int i = static_cast<int>(rng() % kKeys);
      if (auto v = cache->get(test_key(i))) {
        ++hits;
        torn += *v != payloads[i];
      }
    }
    std::fprintf(stderr, "reader: %ld hits, %ld torn\n", hits, torn);
    ::_exit(torn == 0 && hits > 0 ? 0 : 1);
  }
  ::close(stop_pipe[0]);

  std::mt19937 rng(12345);
  // At least kMinRounds kills, and until kWantWrites writes completed (a loaded machine
  // writes less per round), within 20 s.
  const auto t0 = std::chrono::steady_clock::now();
  int rounds = 0;
  for (int round = 0;; ++round) {
    if (round >= kMinRounds && (testing::slurp(counts).size() >= kWantWrites ||
                                std::chrono::steady_clock::now() - t0 > std::chrono::seconds(20)))
      break;
    rounds = round + 1;
    std::vector<pid_t> writers;
    for (int w = 0; w < kWriters; ++w) {
      const pid_t pid = ::fork();
      REQUIRE(pid >= 0);
      if (pid == 0) {
        ::close(stop_pipe[1]);
        auto cache = child_open(root);
        std::mt19937 wr(static_cast<unsigned>(round * 10 + w));
        const int fd = ::open(counts.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        for (;;) {
          const int i = static_cast<int>(wr() % kKeys);
          if (!cache->put(test_key(i), payloads[i]).ok()) ::_exit(3);
          (void)!::write(fd, "w", 1);  // one byte per completed write
        }
      }
      writers.push_back(pid);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(1000 + rng() % 10000));
    for (pid_t pid : writers) ::kill(pid, SIGKILL);
    for (pid_t pid : writers) CHECK(wait_exit_code(pid) == 128 + SIGKILL);
  }
  ::close(stop_pipe[1]);
  CHECK(wait_exit_code(reader) == 0);

  const std::size_t writes = testing::slurp(counts).size();
  const std::size_t leftovers = testing::files_in(root + "/v1/tmp").size();
  MESSAGE(writes << " completed writes, " << rounds * kWriters << " kills, " << leftovers
                 << " temp files left by writers killed mid-write");
  CHECK(writes >= 100);

  LogCapture warnings;
  auto cache = testing::open_cache(root, warnings);
  auto v = cache->verify(false);
  REQUIRE(v.ok());
  CHECK(v->checked > 0);
  CHECK_MESSAGE(v->problems.empty(), (v->problems.empty() ? std::string() : v->problems.front()));
  for (int i = 0; i < kKeys; ++i)
    if (auto got = cache->get(test_key(i))) CHECK(*got == payloads[i]);
  CHECK(warnings.lines.empty());
  auto s = cache->stats();
  REQUIRE(s.ok());
  CHECK(s->temp_files == leftovers);
}

}  // namespace
}  // namespace ternjit::cache
