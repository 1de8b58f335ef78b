// SPDX-License-Identifier: Apache-2.0
// x86_testing.h - what the x86 kernel tests share: a Parallel that really runs on several threads.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "targets/x86/parallel.h"

namespace ternjit::targets::x86::testing {

/// Parallel::RunFn on plain std::threads started per call: the thread count is the pool
/// pointer's value; the workers pull indices from a shared counter, so tasks really run
/// concurrently (the tests' races show up, TSan sees everything).
inline void std_thread_run(void* pool, Parallel::TaskFn task, void* context, std::int64_t n) {
  const auto threads = static_cast<int>(reinterpret_cast<std::intptr_t>(pool));
  std::atomic<std::int64_t> next{0};
  auto worker = [&] {
    for (std::int64_t i = next++; i < n; i = next++) task(context, i);
  };
  std::vector<std::thread> ts;
  for (int t = 1; t < threads; ++t) ts.emplace_back(worker);
  worker();
  for (auto& t : ts) t.join();
}

/// A Parallel of `threads` std::threads (1: everything inline).
inline Parallel std_threads(int threads) {
  if (threads <= 1) return Parallel{};
  return Parallel{threads, &std_thread_run, reinterpret_cast<void*>(static_cast<std::intptr_t>(threads))};
}

}  // namespace ternjit::targets::x86::testing
