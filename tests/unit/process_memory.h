// SPDX-License-Identifier: Apache-2.0
// process_memory.h - this test process's resident memory and its peak, from /proc/self/status.
#pragma once

#include <doctest/doctest.h>

#include <fstream>
#include <string>

namespace ternjit::testing {

/// VmRSS and VmHWM (the peak) of this process, in bytes.
struct Memory {
  double rss = 0, peak = 0;
};

/// The current VmRSS and VmHWM (a test fails when /proc/self/status has no VmRSS).
inline Memory memory() {
  Memory m;
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) m.rss = std::stod(line.substr(6)) * 1024;
    if (line.rfind("VmHWM:", 0) == 0) m.peak = std::stod(line.substr(6)) * 1024;
  }
  REQUIRE(m.rss > 0);
  return m;
}

/// Resets VmHWM to the current VmRSS (Linux's clear_refs "5"), so a peak reached before
/// cannot hide the next one; where that is not allowed the peak stays as it was.
inline void reset_peak() { std::ofstream("/proc/self/clear_refs") << "5"; }

}  // namespace ternjit::testing
