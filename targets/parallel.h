// SPDX-License-Identifier: Apache-2.0
// parallel.h - how CPU kernels run work on several threads: a plain-C parallel-for.
#pragma once

#include <cstdint>
#include <utility>

namespace ternjit::targets {

/// A parallel loop provider, in the style of pthreadpool/XNNPACK: `run(pool, task,
/// context, n)` must call `task(context, i)` exactly once for each i in [0, n), on any
/// threads, and return after all calls returned. `threads` is how many run at once
/// (kernels split their work into about that many chunks, or a small multiple).
/// The default (threads 1, run null) runs inline on the calling thread.
struct Parallel {
  using TaskFn = void (*)(void* context, std::int64_t i);
  using RunFn = void (*)(void* pool, TaskFn task, void* context, std::int64_t n);

  int threads = 1;
  RunFn run = nullptr;
  void* pool = nullptr;

  /// Calls f(i) for i in [0, n): inline when n <= 1, threads <= 1 or run is null.
  template <class F>
  void for_each(std::int64_t n, F&& f) const {
    if (n <= 0) return;
    if (n == 1 || threads <= 1 || run == nullptr) {
      for (std::int64_t i = 0; i < n; ++i) f(i);
      return;
    }
    auto* fp = &f;
    run(pool, [](void* c, std::int64_t i) { (*static_cast<decltype(fp)>(c))(i); }, fp, n);
  }
};

}  // namespace ternjit::targets
