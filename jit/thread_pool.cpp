// SPDX-License-Identifier: Apache-2.0
// thread_pool.cpp - ThreadPool over oneTBB (task_arena + parallel_for).
#include "jit/thread_pool.h"

#include <thread>

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/task_arena.h>

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
  arena.execute([&] {
    oneapi::tbb::parallel_for(
        oneapi::tbb::blocked_range<std::int64_t>(0, n, 1),
        [&](const oneapi::tbb::blocked_range<std::int64_t>& r) {
          for (std::int64_t i = r.begin(); i != r.end(); ++i) task(context, i);
        },
        oneapi::tbb::simple_partitioner());
  });
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
