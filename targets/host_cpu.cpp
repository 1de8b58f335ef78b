// SPDX-License-Identifier: Apache-2.0
// host_cpu.cpp - host CPU detection: /proc/cpuinfo or CPUID for the name, sysconf, __builtin_cpu_supports.
#include "targets/host_cpu.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "ir/strings.h"

namespace ternjit::targets {

namespace {

std::string model_from_proc() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    auto colon = line.find(':');
    if (colon != std::string::npos) return std::string(ir::trim(std::string_view(line).substr(colon + 1)));
  }
  return {};
}

std::string model_from_cpuid() {
#if defined(__x86_64__) || defined(__i386__)
  // Leaves 0x80000002..4 hold the 48-byte brand string (Intel SDM vol. 2A, CPUID).
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(0x80000000u, &eax, &ebx, &ecx, &edx) == 0 || eax < 0x80000004u) return {};
  char brand[49] = {};
  for (unsigned leaf = 0; leaf < 3; ++leaf) {
    unsigned regs[4] = {};
    __get_cpuid(0x80000002u + leaf, &regs[0], &regs[1], &regs[2], &regs[3]);
    std::memcpy(brand + 16 * leaf, regs, sizeof regs);
  }
  return std::string(ir::trim(brand));
#else
  return {};
#endif
}

std::vector<std::string> x86_features() {
  std::vector<std::string> out;
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) && !defined(__clang__))
  // GCC's __builtin_cpu_supports also checks that the OS saves the wider registers
  // (XCR0), so a feature listed here is usable, not just present in CPUID.
  __builtin_cpu_init();
#define TERNJIT_FEATURE(name) \
  if (__builtin_cpu_supports(name)) out.emplace_back(name)
  TERNJIT_FEATURE("fma");
  TERNJIT_FEATURE("f16c");
  TERNJIT_FEATURE("avx2");
  TERNJIT_FEATURE("avx512f");
  TERNJIT_FEATURE("avx512bw");
  TERNJIT_FEATURE("avx512vl");
  TERNJIT_FEATURE("avx512vnni");
  TERNJIT_FEATURE("avx512bf16");
  TERNJIT_FEATURE("avxvnni");
  TERNJIT_FEATURE("amx-tile");
  TERNJIT_FEATURE("amx-int8");
#undef TERNJIT_FEATURE
#elif defined(__x86_64__) || defined(__i386__)
  // Clang before 16 lacks the avxvnni/amx names; list the ones every version knows.
  __builtin_cpu_init();
  if (__builtin_cpu_supports("fma")) out.emplace_back("fma");
  if (__builtin_cpu_supports("avx2")) out.emplace_back("avx2");
  if (__builtin_cpu_supports("avx512f")) out.emplace_back("avx512f");
  if (__builtin_cpu_supports("avx512bw")) out.emplace_back("avx512bw");
  if (__builtin_cpu_supports("avx512vl")) out.emplace_back("avx512vl");
  if (__builtin_cpu_supports("avx512vnni")) out.emplace_back("avx512vnni");
#endif
  return out;
}

}  // namespace

bool HostCpu::has(std::string_view feature) const {
  return std::find(features.begin(), features.end(), feature) != features.end();
}

std::string HostCpu::feature_string() const {
  std::string s;
  for (const std::string& f : features) s += (s.empty() ? "" : " ") + f;
  return s;
}

HostCpu detect_host_cpu() {
  HostCpu cpu;
  cpu.model = model_from_proc();
  if (cpu.model.empty()) cpu.model = model_from_cpuid();
  if (cpu.model.empty()) cpu.model = "unknown CPU";
  long pages = sysconf(_SC_PHYS_PAGES);
  long page_size = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page_size > 0) cpu.memory_bytes = static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page_size);
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  cpu.logical_cores = cores > 0 ? static_cast<int>(cores) : 0;
  cpu.features = x86_features();
  return cpu;
}

std::uint64_t last_level_cache_bytes(const std::string& cache_dir) {
  std::uint64_t best = 0;
  int best_level = 0;
  for (int index = 0; index < 16; ++index) {
    const std::string dir = cache_dir + "/index" + std::to_string(index) + "/";
    std::ifstream level_file(dir + "level"), type_file(dir + "type"), size_file(dir + "size");
    int level = 0;
    std::string type, size;
    if (!(level_file >> level) || !(type_file >> type) || !(size_file >> size)) break;
    if (type == "Instruction" || size.empty()) continue;
    std::uint64_t bytes = std::strtoull(size.c_str(), nullptr, 10);
    switch (size.back()) {
      case 'K': bytes <<= 10; break;
      case 'M': bytes <<= 20; break;
      case 'G': bytes <<= 30; break;
      default: break;
    }
    // A level some VMs list with size 0 is no cache: it must not hide the one below it.
    if (bytes == 0) continue;
    if (level > best_level || (level == best_level && bytes > best)) {
      best_level = level;
      best = bytes;
    }
  }
  return best;
}

std::uint64_t cpuid_last_level_cache_bytes() {
  for (const int name : {_SC_LEVEL3_CACHE_SIZE, _SC_LEVEL2_CACHE_SIZE})
    if (const long bytes = sysconf(name); bytes > 0) return static_cast<std::uint64_t>(bytes);
  return 0;
}

LastLevelCache pick_last_level_cache(std::uint64_t sysfs_bytes, std::uint64_t cpuid_bytes) {
  if (sysfs_bytes > 0) return {sysfs_bytes, "sysfs"};
  if (cpuid_bytes > 0) return {cpuid_bytes, "cpuid"};
  return {kDefaultLastLevelCacheBytes, "default"};
}

LastLevelCache last_level_cache() {
  return pick_last_level_cache(last_level_cache_bytes(), cpuid_last_level_cache_bytes());
}

}  // namespace ternjit::targets
