// SPDX-License-Identifier: Apache-2.0
// engine_internal.h - what Engine, Program and the specialization flow share inside jit/.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "autotune/dispatch.h"
#include "ir/ir.h"
#include "jit/kernel_cache.h"
#include "jit/loader.h"
#include "jit/options.h"
#include "jit/single_flight.h"
#include "jit/thread_pool.h"
#include "jit/weights.h"
#include "targets/registry.h"
#include "ternjit/engine.h"

namespace ternjit::jit {

/// What every Program of an Engine shares with it; kept alive by the programs.
struct EngineShared {
  EngineOptions options;
  targets::TargetRegistry registry;
  TypedOptions typed;
  const targets::Target* target = nullptr;
  /// The reference target, for functions an `auto`-chosen target cannot compile (null
  /// when the target was named explicitly: then such a function is an error).
  const targets::Target* fallback = nullptr;
  std::unique_ptr<ThreadPool> pool;              ///< the default pool (null with a host parallel_for)
  targets::Parallel parallel;                    ///< what CPU kernels run their work on
  std::unique_ptr<KernelCache> disk_cache;       ///< the on-disk kernel cache (kernel_cache.h)
  std::string cache_dir;  ///< its directory, resolved once ("" when off): targets::LoadContext::cache_dir
  std::unique_ptr<autotune::RecordSource> tuning;  ///< where targets ask for configurations

  [[nodiscard]] bool verbose() const { return options.verbose > 0; }
  /// One trace line to the sink (stderr by default, written with one call).
  void trace(const std::string& line) const;
  /// The options `target` compiles and loads with.
  [[nodiscard]] targets::CompileOptions compile_options(const targets::Target& target) const;
};

/// One specialization: its signature, the loaded entry, and its trace description.
class KernelImpl final : public Kernel {
 public:
  KernelImpl(std::string function, std::vector<std::string> arg_names, std::vector<TensorView> inputs,
             std::vector<TensorView> outputs, std::unique_ptr<Trampoline> loaded, std::string trace_desc);

  [[nodiscard]] std::span<const TensorView> outputs() const override { return outputs_; }
  [[nodiscard]] KernelFn entry() const override { return Trampoline::entry(); }
  [[nodiscard]] const void* state() const override { return loaded_->state(); }
  [[nodiscard]] const std::string& trace_desc() const { return trace_desc_; }
  Result<void> run(std::span<const TensorView> inputs, std::span<TensorView> outputs) const override;

 private:
  Result<void> check(const std::string& what, const TensorView& got, const TensorView& want) const;

  std::string function_;
  std::vector<std::string> arg_names_;
  std::vector<TensorView> inputs_;   // data null: the signature
  std::vector<TensorView> outputs_;  // data null: the signature
  std::unique_ptr<Trampoline> loaded_;
  std::string trace_desc_;  // "target=x86,isa=...,fn=...,shape=...,config=O2,disk=miss"
};

/// One kernel compiled for run-time rows: the M bucket's kernel, shared by the Kernel of
/// every M in the bucket (docs/caching.md), or the bucket's refusal.
struct RowsKernel {
  std::string refused;               ///< non-empty: why every M of the bucket is specialized
  targets::LoadedKernel loaded;      ///< has run_rows
  std::vector<TensorView> outputs;   ///< result kinds and shapes for rows_max rows
  std::int64_t rows_max = 0;
  std::string desc;                  ///< "target=x86,isa=...,config=O2,disk=miss"
  std::vector<std::string> arg_names;  ///< the function's argument labels
};

/// The key of the M bucket `bucket` of a call of `function` on `inputs` (each with the
/// row axis at axis 0): as the exact key, with axis 0 at the bucket's bound.
std::string bucket_key(std::string_view function, std::span<const TensorView> inputs, std::int64_t bucket);

/// The M bucket of `rows` >= 1: 1, then 4 (2-4), then the next power of two (5-8,
/// 9-16, ...): the row counts one run-time-rows kernel serves, compiled for the bound.
std::int64_t row_bucket(std::int64_t rows);

/// What the compile stage produced: the artifact and the target that compiled (and loads) it.
struct Compiled {
  targets::Artifact artifact;
  const targets::Target* target = nullptr;
  DiskState disk = DiskState::Off;
};

/// "[2, 3]".
std::string shape_str(std::span<const std::int64_t> shape);
/// The name of argument `i` of `f` ("arg<i>" when unnamed).
std::string arg_label(const ir::Function& f, std::size_t i);

}  // namespace ternjit::jit

namespace ternjit {

/// A Program's state: its module, weights, targets' per-Program state and kernels.
struct Program::Impl {
  Impl(std::shared_ptr<const jit::EngineShared> e, ir::Module m);

  std::shared_ptr<const jit::EngineShared> engine;
  const ir::Module module;  // never changes after construction; weights points into it
  std::mutex weights_mu;    // guards weights and frozen
  jit::Weights weights;
  bool frozen = false;      // set when the first kernel is built; weights immutable after
  jit::SingleFlightCache<jit::KernelImpl> cache;
  /// Run-time-rows kernels by function + input kinds and shapes with the row axis set to its bucket.
  jit::SingleFlightCache<jit::RowsKernel> row_buckets;
  /// The engine target's and the fallback's per-Program state (either may be null).
  std::unique_ptr<targets::ProgramState> target_state, fallback_state;

  Result<void> check_not_frozen(std::string_view what) const;
  /// The compile flow of one (function, input shapes): jit/specialize.cpp.
  Result<std::unique_ptr<jit::KernelImpl>> specialize(std::string_view function, std::span<const TensorView> inputs);
  /// The fast path of a new M: the Kernel of `inputs` from an already compiled M bucket
  /// of `function` (null when there is none: then specialize decides). Checks that the
  /// inputs agree on axis 0; everything else is in the bucket's key.
  std::unique_ptr<jit::KernelImpl> from_bucket(std::string_view function, std::span<const TensorView> inputs);
  /// The Kernel of `inputs` from the bucket's kernel `rk` (`how` it was found).
  std::unique_ptr<jit::KernelImpl> bucket_kernel(std::string_view function, std::span<const TensorView> inputs,
                                                 const jit::RowsKernel& rk, std::int64_t bucket, jit::Lookup how) const;
  /// The kernel of `inputs` served by its M bucket's run-time-rows kernel (compiled on
  /// the bucket's first use), or null when `f` or the bucket does not take run-time rows.
  Result<std::unique_ptr<jit::KernelImpl>> specialize_rows(const ir::Function& f, std::span<const TensorView> inputs,
                                                           const std::map<std::string, std::int64_t>& bindings);
  /// Compiles and loads the bucket's kernel: jit/specialize.cpp.
  std::unique_ptr<jit::RowsKernel> build_rows_kernel(const ir::Function& f, const std::string& row_symbol,
                                                     std::map<std::string, std::int64_t> bindings,
                                                     std::int64_t rows_max);
  /// Checks every parameter `f` reads is bound, fixes every symbol from the weights and
  /// `inputs`, and freezes the weights.
  Result<std::map<std::string, std::int64_t>> bind_and_freeze(const ir::Function& f, std::span<const TensorView> inputs);
  /// Loads `c` with its target, this Program's state for it and the engine's tuning source.
  Result<std::unique_ptr<jit::Trampoline>> load(const jit::Compiled& c);
  /// The same, as the target's LoadedKernel.
  Result<targets::LoadedKernel> load_kernel(const jit::Compiled& c);
};

}  // namespace ternjit
