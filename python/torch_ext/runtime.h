// SPDX-License-Identifier: Apache-2.0
// runtime.h - the C ABI of libternjit as the PyTorch extension uses it: engines by key, programs, kernels.
//
// Nothing here knows torch: ops.cpp turns tensors into the buffers and specs these take.
// Every failure of the library is thrown as CallError (the C status and ternjit_last_error),
// which ops.cpp turns into a torch exception at the kernel boundary.
#ifndef TERNJIT_PYTHON_TORCH_EXT_RUNTIME_H
#define TERNJIT_PYTHON_TORCH_EXT_RUNTIME_H

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "ternjit/ternjit.h"

namespace ternjit::torch_ext {

/// A failed ternjit call (or a misuse detected here): the status and the message.
class CallError : public std::runtime_error {
 public:
  CallError(ternjit_status status, const std::string& message) : std::runtime_error(message), status_(status) {}
  /// The ternjit_status of the failure.
  ternjit_status status() const { return status_; }

 private:
  ternjit_status status_;
};

/// Throws CallError with `status` and this thread's ternjit_last_error() unless `status` is OK.
/// `what` prefixes the message ("bitlinear: ...").
void check(ternjit_status status, const std::string& what);

/// One engine (owns its handle). Thread-safe, as the C ABI's engine is.
class Engine {
 public:
  /// The engine of an op's `engine` string: "" is ternjit_engine_create_from_env, else a JSON
  /// object of Python's ternjit.Engine options (target, opt_level, threads, verbose, cache_dir,
  /// target_options, tuning). `cuda_device` >= 0 retargets it to the cuda target on that
  /// device (target "cuda", "cuda.device=N" appended to target_options). Throws CallError.
  static std::shared_ptr<Engine> create(const std::string& key, int cuda_device);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;
  ternjit_engine* handle() const { return handle_; }

 private:
  explicit Engine(ternjit_engine* handle) : handle_(handle) {}
  ternjit_engine* handle_;
};

/// The engines of the op, one per (key, cuda device), created on first use.
class Engines {
 public:
  /// The engine for `key` (see Engine::create); the same key returns the same engine.
  std::shared_ptr<Engine> get(const std::string& key, int cuda_device);

 private:
  std::mutex mutex_;
  std::map<std::pair<std::string, int>, std::shared_ptr<Engine>> engines_;
};

/// A tensor's element type and shape, as a kernel takes or returns it.
struct Spec {
  ternjit_dtype dtype = TERNJIT_F32;
  std::vector<int64_t> shape;
  bool operator<(const Spec& other) const {
    return dtype != other.dtype ? dtype < other.dtype : shape < other.shape;
  }
};

/// A tensor as a function declares it: a static extent, or the symbol's name where the
/// extent is -1.
struct Decl {
  ternjit_dtype dtype = TERNJIT_F32;
  std::vector<int64_t> extents;
  std::vector<std::string> symbols;
};

/// One specialization of a function: its entry point and output specs. Owned by its Program.
struct Kernel {
  ternjit_kernel* handle = nullptr;
  ternjit_kernel_fn fn = nullptr;
  const void* state = nullptr;
  std::vector<Spec> outputs;
  /// Serializes GPU launches: a kernel owns its scratch buffers (ternjit_kernel_launch).
  std::mutex launch_mutex;

  /// Calls the entry point on `buffers` (inputs, then outputs). Throws CallError.
  void call(void* const* buffers, const char* what) const;
};

/// A compiled module (owns its handle and keeps its engine alive) and its kernels.
class Program {
 public:
  /// ternjit_compile. Throws CallError.
  static std::shared_ptr<Program> compile(std::shared_ptr<Engine> engine, const std::string& source,
                                          const char* file_name);
  /// ternjit_compile_grad of `function` with respect to `wrt` and `flags`. Throws CallError.
  static std::shared_ptr<Program> compile_grad(std::shared_ptr<Engine> engine, const std::string& source,
                                               const char* file_name, const char* function,
                                               const std::vector<std::string>& wrt, uint32_t flags);
  ~Program();
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;

  /// ternjit_bind_weight_sized with the plain format. Throws CallError.
  void bind(const char* name, const void* data, size_t nbytes, ternjit_dtype dtype, const std::vector<int64_t>& shape);
  /// The kernel of `function` for inputs `specs` (compiled once per specs). The reference
  /// stays valid while the program lives. Throws CallError.
  Kernel& kernel(const std::string& function, const std::vector<Spec>& specs);
  /// The results of `function` as declared (symbolic dims by name). Throws CallError.
  std::vector<Decl> declared_outputs(const std::string& function) const;

 private:
  Program(std::shared_ptr<Engine> engine, ternjit_program* handle) : engine_(std::move(engine)), handle_(handle) {}
  std::shared_ptr<Engine> engine_;
  ternjit_program* handle_;
  std::mutex mutex_;
  std::map<std::pair<std::string, std::vector<Spec>>, std::unique_ptr<Kernel>> kernels_;
};

}  // namespace ternjit::torch_ext

#endif  // TERNJIT_PYTHON_TORCH_EXT_RUNTIME_H
