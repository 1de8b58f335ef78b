// SPDX-License-Identifier: Apache-2.0
// tbb_parallel.h - the x86 benches' Parallel (targets/parallel.h) over a oneTBB arena, as the engine's default pool.
#pragma once

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/partitioner.h>
#include <tbb/task_arena.h>

#include <cstdint>

#include "targets/parallel.h"

namespace ternjit::bench {

/// Parallel::RunFn over the tbb::task_arena `pool`: each index once, statically partitioned.
inline void tbb_run(void* pool, targets::Parallel::TaskFn task, void* context, std::int64_t n) {
  static_cast<tbb::task_arena*>(pool)->execute([&] {
    tbb::parallel_for(
        tbb::blocked_range<std::int64_t>(0, n, 1),
        [&](const tbb::blocked_range<std::int64_t>& r) {
          for (std::int64_t i = r.begin(); i < r.end(); ++i) task(context, i);
        },
        tbb::static_partitioner());
  });
}

/// A Parallel over a oneTBB arena of 2 threads for `threads` >= 2 (the benches' machines
/// have 2 cores), inline for 1. The arena lives for the process.
inline targets::Parallel parallel_for_threads(int threads) {
  static tbb::task_arena two(2);
  if (threads <= 1) return targets::Parallel{};
  return targets::Parallel{2, &tbb_run, &two};
}

}  // namespace ternjit::bench
