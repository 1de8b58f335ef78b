// SPDX-License-Identifier: Apache-2.0
// thread_pool.cpp - ThreadPool over oneTBB (task_arena + parallel_for).
#include "jit/thread_pool.h"

#include <thread>

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/task_arena.h>

// ThreadSanitizer sees no synchronization inside libtbb (Debian's is not instrumented):
// without these annotations it reports the caller's stack, which workers read through
// the loop's captures, as racing with the caller's later frames. A TSan build tells it
// the happens-before edges TBB provides: spawning a chunk after the caller's writes, and
// returning from parallel_for after every chunk's writes.
#if defined(__SANITIZE_THREAD__)
#define TERNJIT_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TERNJIT_TSAN 1
#endif
#endif
#ifdef TERNJIT_TSAN
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#endif

namespace ternjit::jit {

struct ThreadPool::Impl {
  explicit Impl(int n) : arena(n) {}
  oneapi::tbb::task_arena arena;
};

namespace {

// Parallel::RunFn over a ThreadPool::Impl: one TBB task per index (grain 1: kernels
// already hand in about `threads` chunks).
void run_on_arena(void* pool, targets::Parallel::TaskFn task, void* context, std::int64_t n) {
  auto& arena = *static_cast<oneapi::tbb::task_arena*>(pool);
  // TSan's synchronization addresses: the caller releases `start` and every chunk
  // acquires it; every chunk releases `done` and the caller acquires it. Two addresses,
  // so chunks stay unordered with one another (a race between them is still reported).
  [[maybe_unused]] char start = 0, done = 0;
#ifdef TERNJIT_TSAN
  __tsan_release(&start);
#endif
  arena.execute([&] {
    oneapi::tbb::parallel_for(
        oneapi::tbb::blocked_range<std::int64_t>(0, n, 1),
        [&](const oneapi::tbb::blocked_range<std::int64_t>& r) {
#ifdef TERNJIT_TSAN
          __tsan_acquire(&start);
#endif
          for (std::int64_t i = r.begin(); i != r.end(); ++i) task(context, i);
#ifdef TERNJIT_TSAN
          __tsan_release(&done);
#endif
        },
        oneapi::tbb::simple_partitioner());
  });
#ifdef TERNJIT_TSAN
  __tsan_acquire(&done);
#endif
}

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
