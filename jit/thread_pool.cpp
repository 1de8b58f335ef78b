// SPDX-License-Identifier: Apache-2.0
// thread_pool.cpp - ThreadPool over oneTBB (task_arena + parallel_for).
#include "jit/thread_pool.h"

#include <thread>

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/task_arena.h>

// ThreadSanitizer sees no synchronization inside libtbb (Debian's is not instrumented),
// and oneTBB's header code, inlined into our objects, hands pooled task objects and the
// partitioner's stack-resident tree nodes between threads through those invisible waits:
// TSan reported them as races with the caller's later frames however the loop body was
// annotated. So a TSan build (the TSan stage of tools/dev, tests/sanitizers.md) runs the
// same contract on std::threads it can see: n tasks over min(threads, n) workers that
// take indices from an atomic counter, joined before returning. A race between two
// chunks, or between a chunk and the caller, is then reported like any other.
#if defined(__SANITIZE_THREAD__)
#define TERNJIT_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TERNJIT_TSAN 1
#endif
#endif
#ifdef TERNJIT_TSAN
#include <algorithm>
#include <atomic>
#include <vector>
#endif

namespace ternjit::jit {

struct ThreadPool::Impl {
  explicit Impl(int n) : arena(n) {}
  oneapi::tbb::task_arena arena;
};

namespace {

#ifndef TERNJIT_TSAN
// Parallel::RunFn over a ThreadPool::Impl: one TBB task per index (grain 1: kernels
// already hand in about `threads` chunks).
void run_on_arena(void* pool, targets::Parallel::TaskFn task, void* context, std::int64_t n) {
  auto& arena = *static_cast<oneapi::tbb::task_arena*>(pool);
  arena.execute([&] {
    oneapi::tbb::parallel_for(
        oneapi::tbb::blocked_range<std::int64_t>(0, n, 1),
        [&](const oneapi::tbb::blocked_range<std::int64_t>& r) {
          for (std::int64_t i = r.begin(); i != r.end(); ++i) task(context, i);
        },
        oneapi::tbb::simple_partitioner());
  });
}
#else
// The TSan build's RunFn (see the top of the file): the caller is one of the workers.
void run_on_arena(void* pool, targets::Parallel::TaskFn task, void* context, std::int64_t n) {
  auto& arena = *static_cast<oneapi::tbb::task_arena*>(pool);
  const std::int64_t workers = std::min<std::int64_t>(std::max(arena.max_concurrency(), 1), n);
  std::atomic<std::int64_t> next{0};
  const auto work = [&] {
    for (std::int64_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) task(context, i);
  };
  std::vector<std::thread> helpers;
  for (std::int64_t w = 1; w < workers; ++w) helpers.emplace_back(work);
  work();
  for (std::thread& t : helpers) t.join();
}
#endif

}  // namespace

int ThreadPool::default_threads() {
  const unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(hw);
}

ThreadPool::ThreadPool(int threads) : threads_(threads > 0 ? threads : default_threads()) {
  if (threads_ > 1) impl_ = std::make_unique<Impl>(threads_);
}

ThreadPool::~ThreadPool() = default;

targets::Parallel ThreadPool::parallel() const {
  targets::Parallel p;
  p.threads = threads_;
  if (impl_) {
    p.run = &run_on_arena;
    p.pool = &impl_->arena;
  }
  return p;
}

}  // namespace ternjit::jit
