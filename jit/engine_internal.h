// SPDX-License-Identifier: Apache-2.0
// engine_internal.h - what Engine, Program and the specialization flow share inside jit/.
#pragma once

#include <array>
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
  /// The engine's target and, under `auto`, the reference target for the functions it
  /// cannot compile (TargetRegistry::choose).
  targets::TargetChoice choice;
  std::unique_ptr<ThreadPool> pool;              ///< the default pool (null with a host parallel_for)
  targets::Parallel parallel;                    ///< what CPU kernels run their work on
  /// The on-disk kernel cache (kernel_cache.h), also the targets' side files
  /// (targets::LoadContext::side_files).
  std::unique_ptr<KernelCache> disk_cache;
  std::unique_ptr<autotune::RecordSource> tuning;  ///< where targets ask for configurations

  [[nodiscard]] bool verbose() const { return options.verbose > 0; }
  /// One trace line to the sink (stderr by default, written with one call).
  void trace(const std::string& line) const;
  /// The options `target` compiles and loads with (no decisions, no rows bound).
  [[nodiscard]] targets::CompileOptions compile_options(const targets::Target& target) const;
  /// The stage hook: when EngineOptions::print_after names `stage` (or "all"), the
  /// module as that stage left it, as one trace line per IR line block.
  void after_stage(std::string_view stage, const std::string& function, const ir::Module& module) const;
};

/// The key of a call in a Program's kernel cache: the function name, then per input its
/// kind, rank and extents as raw bytes; with `row_bucket` > 0, axis 0 of every input is
/// that bucket's bound instead of its extent (the M bucket's key). Built in a stack
/// buffer (no allocation) unless very long: the hot path of Program::kernel.
class CallKey {
 public:
  CallKey(std::string_view function, std::span<const TensorView> inputs, std::int64_t row_bucket = 0);
  [[nodiscard]] std::string_view view() const {
    return heap_.empty() ? std::string_view(stack_.data(), size_) : std::string_view(heap_);
  }

 private:
  void append(const void* p, std::size_t n);
  std::array<char, 192> stack_;  // only [0, size_) is read
  std::size_t size_ = 0;
  std::string heap_;
};

/// An engine's shared state from `options` (what Engine::create wraps): the registry,
/// the validated options, the target choice, the thread pool, the disk cache and the
/// tuning source. Errors: as Engine::create.
Result<std::shared_ptr<EngineShared>> make_engine_shared(const EngineOptions& options);

/// One specialization: its signature, the loaded entry, and its trace description. Owned
/// by its Program's cache; Program::kernel hands it out sharing the Program's ownership.
class KernelImpl final : public Kernel {
 public:
  /// `program`: the Program::Impl whose cache will own it (the owner that shared() shares).
  KernelImpl(const Program::Impl* program, std::string function, std::vector<std::string> arg_names,
             std::vector<TensorView> inputs, std::vector<TensorView> outputs, std::unique_ptr<Trampoline> loaded,
             std::string trace_desc);

  [[nodiscard]] std::span<const TensorView> outputs() const override { return outputs_; }
  [[nodiscard]] KernelFn entry() const override { return Trampoline::entry(); }
  [[nodiscard]] const void* state() const override { return loaded_->state(); }
  [[nodiscard]] const std::string& trace_desc() const { return trace_desc_; }
  Result<void> run(std::span<const TensorView> inputs, std::span<TensorView> outputs) const override;

  /// This kernel sharing the ownership of its Program's state (as Program::kernel hands it
  /// out). Precondition: the Program's state is still alive (held by its Program or by
  /// another reference to one of its kernels).
  [[nodiscard]] std::shared_ptr<const Kernel> shared() const;
  /// The C ABI's counted references (ternjit_kernel_retain / ternjit_kernel_release): while
  /// the count is above zero the kernel holds its Program's state itself. release() is false
  /// when no reference was held; the last release may free this object (callers touch
  /// nothing of it afterwards).
  void retain() const;
  bool release() const;

 private:
  Result<void> check(const std::string& what, const TensorView& got, const TensorView& want) const;

  const Program::Impl* program_;
  mutable std::mutex retain_mu_;
  mutable std::size_t retained_ = 0;
  mutable std::shared_ptr<const Kernel> self_;  // set while retained_ > 0
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

/// The M bucket of `rows` >= 1: 1, then 4 (2-4), then the next power of two (5-8,
/// 9-16, ...): the row counts one run-time-rows kernel serves, compiled for the bound.
std::int64_t row_bucket(std::int64_t rows);

/// What the compile stage produced: the artifact and the target that compiled (and loads) it.
struct Compiled {
  targets::Artifact artifact;
  const targets::Target* target = nullptr;
  DiskState disk = DiskState::Off;
};

// ---------------------------------------------------------------- the stages
// The compile flow of one (function, input shapes), jit/specialize.cpp, one function a
// stage; Program::Impl::specialize calls them in this order. Each is callable alone
// (tests do); EngineOptions::print_after prints the module after the ones that change it.

/// Stage 1: the function called `function`, taking `n_inputs` inputs. Errors: NotFound
/// listing the functions, InvalidArgument for another input count.
Result<const ir::Function*> find_entry(const ir::Module& module, std::string_view function, std::size_t n_inputs);

/// The parameters `f` reads, directly or through the functions it calls.
std::vector<std::string> params_used(const ir::Module& module, const ir::Function& f);

/// Stage 2: every symbol's extent ("Layer.N" -> 64), from the bound parameters'
/// `weight_symbols` and the inputs, which must agree with each other and with the
/// declarations (InvalidArgument naming the input, its shape and the declaration).
Result<std::map<std::string, std::int64_t>> bind_symbols(const ir::Function& f, std::span<const TensorView> inputs,
                                                         const Weights::SymbolMap& weight_symbols);

/// Stage 3: `function` alone with the symbols of `bindings` fixed (every symbol when
/// `rows_symbol` is empty; all but that one otherwise) and its tensor sizes checked.
/// Hook stage "specialize".
Result<ir::Module> specialize_module(const EngineShared& engine, const ir::Module& module, const std::string& function,
                                     std::map<std::string, std::int64_t> bindings, const std::string& rows_symbol);

/// Stage 4: the pass pipeline at the engine's level (target-independent: a fallback
/// target compiles the same optimized module). Hook stage "optimize".
Result<void> optimize(const EngineShared& engine, ir::Module& module, const std::string& function);

/// Stage 5: which target compiles `optimized`: the engine's when it supports it,
/// otherwise its fallback (the reference target under `auto`, said in the verbose trace
/// and recorded in the artifact as metadata "fallback"); a named target's refusal is the
/// error (Unsupported).
Result<const targets::Target*> choose_target(const EngineShared& engine, const ir::Function& optimized,
                                             std::string* fallback_why);

/// Stage 6: a target's compile-time tuning decisions for `optimized` (its traits say
/// decides_at_compile): one configuration per tuning space, from the tuning source
/// (defaults with tuning off). None for other targets.
Result<std::vector<std::string>> decide(const EngineShared& engine, const targets::Target& target,
                                        const ir::Module& optimized, const std::string& function);

/// Stage 7: the artifact of `function` of `module` from the disk cache, else optimized
/// (unless `optimized`), given a target (stages 4-6) and compiled by it, and stored. The
/// key is the module as given plus the compile options (CompileOptions::key(), with the
/// decisions when made first): a hit skips the pipeline and the target's compile. With
/// `rows_max` > 0 (the module has its rows bound to it, already optimized) only the
/// engine's own target may compile it (Unsupported otherwise).
Result<Compiled> compile_cached(const EngineShared& engine, ir::Module& module, const std::string& function,
                                bool optimized, std::int64_t rows_max);

/// "[2, 3]".
std::string shape_str(std::span<const std::int64_t> shape);
/// The name of argument `i` of `f` ("arg<i>" when unnamed).
std::string arg_label(const ir::Function& f, std::size_t i);

}  // namespace ternjit::jit

namespace ternjit {

/// A Program's state: its module, weights, targets' per-Program state and kernels. Owned
/// through shared_ptr by the Program and by every kernel handed out (Program::kernel).
struct Program::Impl : std::enable_shared_from_this<Program::Impl> {
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
  /// The kernel of `function` for `inputs` from the cache, specialized on a miss
  /// (Program::kernel without the shared reference; it lives as long as this object).
  Result<const jit::KernelImpl*> kernel(std::string_view function, std::span<const TensorView> inputs);
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
  /// The bucket's kernel through the same stages, with the rows bound to `rows_max`:
  /// jit/specialize.cpp. A stage that declines for the bound gives an Unsupported error,
  /// which becomes the bucket's refusal; other errors are errors.
  Result<std::unique_ptr<jit::RowsKernel>> compile_rows(const ir::Function& f, const std::string& row_symbol,
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
