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

/// The size in bytes of cpu0's last-level data or unified cache (sysfs
/// /sys/devices/system/cpu/cpu0/cache), 0 when it cannot be read.
std::uint64_t last_level_cache_bytes();

}  // namespace ternjit::targets
