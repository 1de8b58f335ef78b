// SPDX-License-Identifier: Apache-2.0
// host_cpu.h - what the host CPU is: model name, memory and the ISA features targets care about.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ternjit::targets {

/// The host processor as targets describe it.
struct HostCpu {
  std::string model;                  ///< "Intel(R) Xeon(R) ..." ("unknown CPU" when not found)
  std::uint64_t memory_bytes = 0;     ///< physical memory (0 when unknown)
  int logical_cores = 0;              ///< online logical processors (0 when unknown)
  std::vector<std::string> features;  ///< ISA features present, in a fixed order ("avx2", "avx512f", ...)

  /// True when `feature` is in `features`.
  [[nodiscard]] bool has(std::string_view feature) const;
  /// The features joined by spaces ("" when none).
  [[nodiscard]] std::string feature_string() const;
};

/// Detects the host CPU: the model from /proc/cpuinfo's "model name" (or the CPUID brand
/// string), memory and cores from sysconf, x86 features from __builtin_cpu_supports
/// (fma f16c avx2 avx512f avx512bw avx512vl avx512vnni avx512bf16 avxvnni amx-tile
/// amx-int8, in that order). Never fails; what it cannot find stays empty or zero.
HostCpu detect_host_cpu();

/// The size in bytes of cpu0's last-level data or unified cache as sysfs lists it in
/// `cache_dir` (index0/, index1/, ... each with level, type and size), 0 when it cannot
/// be read (some VMs expose no cache directory).
std::uint64_t last_level_cache_bytes(const std::string& cache_dir = "/sys/devices/system/cpu/cpu0/cache");

/// The last-level cache size the C library reports (sysconf _SC_LEVEL3_CACHE_SIZE, else
/// _SC_LEVEL2_CACHE_SIZE; glibc reads them from CPUID), 0 when it reports none.
std::uint64_t cpuid_last_level_cache_bytes();

/// What a tool assumes when no probe reports a last-level cache: 32 MiB, a server
/// socket's L3 (docs/cli.md, `bench --cold`).
inline constexpr std::uint64_t kDefaultLastLevelCacheBytes = std::uint64_t{32} << 20;

/// A last-level cache size and where it came from.
struct LastLevelCache {
  std::uint64_t bytes = 0;  ///< never 0
  std::string source;       ///< "sysfs", "cpuid" or "default" (neither probe reported one)
};

/// The first non-zero of `sysfs_bytes` and `cpuid_bytes`, else kDefaultLastLevelCacheBytes,
/// with its source.
LastLevelCache pick_last_level_cache(std::uint64_t sysfs_bytes, std::uint64_t cpuid_bytes);

/// pick_last_level_cache over the host's probes: sysfs, then CPUID, then the default.
LastLevelCache last_level_cache();

}  // namespace ternjit::targets
