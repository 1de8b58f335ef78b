// SPDX-License-Identifier: Apache-2.0
// ceilings_test.cpp - the roofline probes of targets/x86/ceilings.h: what stream_sum adds,
// the work each probe counts, its path choice and its errors. No timing threshold.
#include "targets/x86/ceilings.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <fstream>
#include <memory>
#include <random>
#include <vector>

#include "targets/host_cpu.h"
#include "tests/unit/x86/x86_testing.h"

namespace {

using namespace ternjit;
using namespace ternjit::targets;
using namespace ternjit::targets::x86;

// stream_sum's contract, written out: 64-bit words over whole vector blocks (256 bytes
// with AVX-512 loads, 128 with AVX2), then the tail byte by byte.
std::uint64_t expected_sum(const std::uint8_t* p, std::size_t n) {
  const std::size_t block = host_isas().avx512 ? 256 : 128;
  const std::size_t whole = n / block * block;
  std::uint64_t s = 0;
  for (std::size_t i = 0; i < whole; i += 8) {
    std::uint64_t w = 0;
    std::memcpy(&w, p + i, 8);
    s += w;
  }
  for (std::size_t i = whole; i < n; ++i) s += p[i];
  return s;
}

CeilingOptions quick() {
  CeilingOptions o;
  o.warmup = 0;
  o.min_reps = 2;
  o.max_reps = 3;
  o.max_seconds = 0;
  return o;
}

}  // namespace

TEST_CASE("stream_sum adds the 64-bit words of whole blocks and the tail bytes") {
  if (!host_isas().avx2) {
    MESSAGE("skipped: host lacks AVX2");
    return;
  }
  constexpr std::size_t kMax = 4096 + 300;
  struct Free {
    void operator()(std::uint8_t* p) const { std::free(p); }
  };
  // aligned_alloc's size must be a multiple of the alignment (ASan refuses 4460 bytes).
  constexpr std::size_t kAlloc = (kMax + 64 + 63) / 64 * 64;
  std::unique_ptr<std::uint8_t, Free> buf(static_cast<std::uint8_t*>(std::aligned_alloc(64, kAlloc)));
  REQUIRE(buf != nullptr);
  std::mt19937_64 rng(7);
  for (std::size_t i = 0; i < kMax + 64; ++i) buf.get()[i] = static_cast<std::uint8_t>(rng());
  for (std::size_t n : {0, 1, 7, 64, 127, 128, 129, 255, 256, 257, 1000, 4096, 4096 + 259}) {
    CAPTURE(n);
    CHECK(stream_sum(buf.get(), n) == expected_sum(buf.get(), n));
  }
}

TEST_CASE("the read-bandwidth probe reads whole pages per thread and times every rep") {
  if (!host_isas().avx2) {
    MESSAGE("skipped: host lacks AVX2");
    return;
  }
  for (int threads : {1, 2, 3}) {
    CAPTURE(threads);
    const std::size_t bytes = (std::size_t{1} << 20) + 5;
    auto r = measure_read_bandwidth(testing::std_threads(threads), bytes, quick());
    REQUIRE(r.ok());
    // Rounded up to 4 KiB pages per thread, never less than asked.
    const auto chunk = static_cast<std::size_t>(r->work) / static_cast<std::size_t>(threads);
    CHECK(r->work >= static_cast<double>(bytes));
    CHECK(chunk % 4096 == 0);
    CHECK(chunk * static_cast<std::size_t>(threads) == static_cast<std::size_t>(r->work));
    CHECK(r->work - static_cast<double>(bytes) < 4096.0 * threads);
    CHECK(r->reps >= 2);
    CHECK(r->reps <= 3);
    CHECK(r->min_ns > 0);
    CHECK(r->median_ns >= r->min_ns);
    CHECK(r->rate() == doctest::Approx(r->work / r->median_ns));
    CHECK(r->best_rate() >= r->rate());
  }
  auto empty = measure_read_bandwidth(Parallel{}, 0, quick());
  REQUIRE_FALSE(empty.ok());
  CHECK(empty.error().code == ErrorCode::InvalidArgument);
}

TEST_CASE("the int8-dot ceiling counts 2 ops per multiply-add on every path the host runs") {
  const IsaSupport& host = host_isas();
  // Multiply-adds per call per thread: 2^16 iterations of 12 chains of 64 (zmm vpdpbusd)
  // or 32 (ymm vpdpbusd) lanes, or 10 chains of 32 (avx2 maddubs).
  struct Path {
    Isa isa;
    bool runs;
    double macs;
  };
  const double iters = 65536;
  for (const Path& p :
       {Path{Isa::Avx512Vnni, host.avx512_vnni, 12 * 64 * iters}, Path{Isa::AvxVnni, host.avx_vnni, 12 * 32 * iters},
        Path{Isa::Avx2, host.avx2, 10 * 32 * iters}}) {
    CAPTURE(isa_name(p.isa));
    for (int threads : {1, 2}) {
      auto r = measure_int8_dot(testing::std_threads(threads), p.isa, quick());
      if (!p.runs) {
        REQUIRE_FALSE(r.ok());
        CHECK(r.error().code == ErrorCode::Unavailable);
        continue;
      }
      REQUIRE(r.ok());
      CHECK(r->work == 2 * p.macs * threads);
      CHECK(r->min_ns > 0);
      CHECK(r->median_ns >= r->min_ns);
    }
  }
}

TEST_CASE("dot_ceiling_isa picks the best int8 dot under the cap") {
  const IsaSupport& host = host_isas();
  if (!host.avx2) {
    CHECK_FALSE(dot_ceiling_isa().has_value());
    return;
  }
  CHECK(dot_ceiling_isa(Isa::Avx2) == Isa::Avx2);
  CHECK(dot_ceiling_isa(Isa::Avx512) == (host.avx_vnni ? Isa::AvxVnni : Isa::Avx2));
  CHECK(dot_ceiling_isa(Isa::Amx) == (host.avx512_vnni ? Isa::Avx512Vnni : host.avx_vnni ? Isa::AvxVnni : Isa::Avx2));
  CHECK(dot_ceiling_isa(Isa::Avx512Vnni) == dot_ceiling_isa(Isa::Amx));
}

TEST_CASE("the last-level cache falls back to CPUID, then a documented default, and says which (issue 33 item 17)") {
  // A VM whose sysfs lists no cache (or a level of size 0) made `bench --cold` say "not
  // beyond the last-level cache: the layer is too small" for a cache of 0 MiB.
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("ternjit_llc_" + std::to_string(static_cast<long>(::getpid())));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  CHECK(last_level_cache_bytes(dir.string()) == 0);  // no index directories
  auto level = [&](int index, const char* lvl, const char* type, const char* size) {
    const std::filesystem::path d = dir / ("index" + std::to_string(index));
    std::filesystem::create_directories(d);
    std::ofstream(d / "level") << lvl << "\n";
    std::ofstream(d / "type") << type << "\n";
    std::ofstream(d / "size") << size << "\n";
  };
  level(0, "1", "Data", "48K");
  level(1, "1", "Instruction", "64K");
  level(2, "2", "Unified", "2048K");
  level(3, "3", "Unified", "0K");  // listed without a size: not the last level
  CHECK(last_level_cache_bytes(dir.string()) == std::uint64_t{2} << 20);
  level(3, "3", "Unified", "480M");
  CHECK(last_level_cache_bytes(dir.string()) == std::uint64_t{480} << 20);
  std::filesystem::remove_all(dir);

  CHECK(pick_last_level_cache(7 << 20, 9 << 20).bytes == std::uint64_t{7} << 20);
  CHECK(pick_last_level_cache(7 << 20, 9 << 20).source == "sysfs");
  CHECK(pick_last_level_cache(0, 9 << 20).bytes == std::uint64_t{9} << 20);
  CHECK(pick_last_level_cache(0, 9 << 20).source == "cpuid");
  CHECK(pick_last_level_cache(0, 0).bytes == kDefaultLastLevelCacheBytes);
  CHECK(pick_last_level_cache(0, 0).source == "default");
  CHECK(kDefaultLastLevelCacheBytes == std::uint64_t{32} << 20);  // docs/cli.md says so
  const LastLevelCache host = last_level_cache();
  CHECK(host.bytes > 0);
  CHECK((host.source == "sysfs" || host.source == "cpuid" || host.source == "default"));
}

TEST_CASE("last_level_cache_bytes reads sysfs") {
  if (!std::filesystem::exists("/sys/devices/system/cpu/cpu0/cache/index0/size")) {
    MESSAGE("skipped: no /sys/devices/system/cpu/cpu0/cache (the probe reports 0)");
    CHECK(last_level_cache_bytes() == 0);
    return;
  }
  const std::uint64_t llc = last_level_cache_bytes();
  CHECK(llc >= 64 * 1024);               // no last-level cache is smaller
  CHECK(llc <= std::uint64_t{4} << 30);  // nor above 4 GiB
  CHECK(llc % 1024 == 0);                // sysfs gives K or M
}
