// SPDX-License-Identifier: Apache-2.0
// thread_pool.h - the engine's default kernel thread pool: a oneTBB arena of a fixed size.
#pragma once

#include <memory>

#include "targets/parallel.h"

namespace ternjit::jit {

/// A oneTBB task_arena with `threads` slots (0: every online core). Why oneTBB: it is
/// the well-kept composable pool (an arena limits this engine's kernels to their thread
/// count without oversubscribing a host that also uses TBB), it is in Debian, and it
/// needs no global state from us. Each engine owns its own pool.
class ThreadPool {
 public:
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  /// What `threads = 0` means: the online logical cores (at least 1).
  static int default_threads();
  /// The thread count (>= 1).
  [[nodiscard]] int threads() const { return threads_; }
  /// The plain-C parallel-for kernels call (targets/x86/parallel.h), running on this pool.
  [[nodiscard]] targets::Parallel parallel() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int threads_ = 1;
};

}  // namespace ternjit::jit
