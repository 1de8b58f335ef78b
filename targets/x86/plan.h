// SPDX-License-Identifier: Apache-2.0
// plan.h - an x86-compiled function: load-time values, generated kernels and the steps that run them.
//
// build() walks a specialized, optimized, single-block function once:
//   - load-time values (const, param, and pure ops of those such as tquantize of a
//     param) are evaluated when the plan is built, never per call;
//   - each tmatmul becomes a TMatMulKernel whose ternary weight is packed once into the
//     kernel's interleaved layout (shared through a PackCache by every plan of a
//     program); an activation other than relu becomes an in-place eltwise step after it;
//   - quantize, rmsnorm, softmax, ewise, reductions and the elementwise ops become
//     EltwiseKernels (eltwise.h);
//   - reshape aliases its operand's buffer (row-major data is unchanged);
//   - each f32 matmul of rank 2 or 3 becomes a MatMulKernel (matmul.h), reading a transpose that
//     feeds it from its source (the transpose then runs no step when matmuls are its
//     only users) and a load-time right operand (f32, or f16/bf16 widened) packed once;
//     `matmul(a, transpose(p))` of a load-time p [N, K] reads p as stored: f32 p packed from
//     p itself, f16/bf16 p streamed by the dense NK kernel (dense.cpp); the transpose is never
//     evaluated (only the load-time values some step reads are);
//   - cast, broadcast and transpose of any rank are copy/convert steps (data_ops.cpp);
//   - any other op (rank-1 or integer matmul, ...) runs through the
//     reference implementation of that one op - shown as "reference" in describe().
// run() is thread-safe: the plan is immutable but for each step's adaptive choice (atomics,
// plan_adaptive.h); per-call intermediates live in a thread-local scratch arena.
// With PlanOptions::adaptive_parallel a step runs its parallel work either on the pool or
// inline, and both compute the same bits: inline, a step sees Parallel{} (1 thread), which
// changes only how its kernel partitions independent work (output panels and row blocks
// of tmatmul/matmul/dense, rows or blocks of eltwise, chunks of copies, rows and head groups
// of attention); no reduction is split by the thread count (tmatmul's split-K count is the
// configuration's, its partials summed in the same order; matmul's K blocks do not depend
// on it), and tests/unit/x86/plan_adaptive_test.cpp checks every step kind bit for bit.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "ir/interpret.h"
#include "ir/ir.h"
#include "targets/target.h"
#include "targets/tuning.h"
#include "targets/x86/isa.h"
#include "targets/x86/matmul.h"
#include "targets/x86/parallel.h"
#include "targets/x86/tmatmul.h"
#include "targets/x86/x86_target.h"
#include "ternjit/result.h"

namespace ternjit::targets::x86 {

/// Packed weights shared by the plans of one program: keyed by the weight's load-time
/// expression ("param @L.w") and the kernel's pack signature. Thread-safe. The x86
/// target's ProgramState.
class PackCache final : public ProgramState {
 public:
  /// The packed weights for `key`, calling `pack` only when absent.
  Result<std::shared_ptr<const PackedWeights>> get_or_pack(const std::string& key,
                                                           const std::function<Result<PackedWeights>()>& pack);
  /// The same for a dense matmul's load-time B (MatMulKernel::pack_b).
  std::shared_ptr<const MatMulPackedB> get_or_pack_matmul(const std::string& key,
                                                          const std::function<MatMulPackedB()>& pack);
  /// How many packs were made, of both kinds (tests check that a weight is packed once).
  [[nodiscard]] std::size_t packs_made() const;
  /// The bytes the packs hold (their storage, grouped parts included).
  [[nodiscard]] std::size_t host_bytes() const override;

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<const PackedWeights>> packs_;
  std::map<std::string, std::shared_ptr<const MatMulPackedB>> matmul_packs_;
  std::size_t made_ = 0;
};

/// How a plan is built.
struct PlanOptions {
  Isa isa = Isa::Avx2;            ///< code path for every kernel
  int threads = 1;                ///< threads the kernels split work for
  bool allow_foreign_isa = false; ///< generate code the host cannot run (describe only)
  /// TMatMulConfig text per tmatmul, by its order in the function ("tmatmul.0", ...);
  /// absent: asked of `tuning`, else default_config.
  std::map<std::string, std::string> configs;
  /// Decides each tmatmul's configuration not in `configs` (null: default_config).
  const TuningSource* tuning = nullptr;
  /// When not null, every tmatmul's TuningSpace is appended here (ternjit tune, tests).
  std::vector<std::unique_ptr<TuningSpace>>* spaces = nullptr;
  /// > 0: run-time rows (Target::runtime_rows). Axis 0 of every argument and result has
  /// this extent, and run() may be given fewer rows: every step then computes only the
  /// first rows of axis 0 of the values it reads and writes. A function with a step that
  /// cannot (a reference step, a float tmatmul, a batched or transposed-A matmul) is Unsupported.
  std::int64_t rows_max = 0;
  /// Per step, run the step's parallel work inline (Parallel{}) while its parallel runs
  /// measure slower than its serial ones (plan_adaptive.h: a small step on a pool whose
  /// fork/join costs more than the split saves). Only with a `parallel` of 2+ threads and
  /// a pool. False: every step runs on the `parallel` given to run(), as before.
  bool adaptive_parallel = false;
  /// A step whose parallel estimate is this many ns or more is never run serially to find
  /// out: at 2 ms, a pool whose fork/join costs up to ~1 ms is still caught (the probes of
  /// a step under it cost at most ~1% of its time once settled: plan_adaptive.h).
  std::int64_t adaptive_max_parallel_ns = 2'000'000;
};

/// One compiled function.
class Plan {
 public:
  /// Builds the plan of `function` in `m`. Errors: NotFound (no such function),
  /// Unsupported (several blocks, calls, a non-static type), InvalidInput (a parameter
  /// missing from `params`, a weight value outside {-1, 0, 1}), Unavailable (isa not
  /// runnable here and !allow_foreign_isa).
  static Result<std::unique_ptr<Plan>> build(const ir::Module& m, std::string_view function,
                                             const ir::ParamValues& params, const PlanOptions& options,
                                             PackCache* packs);
  ~Plan();
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;

  /// Runs on `buffers` (inputs in argument order, then outputs in result order). `rows`
  /// > 0 (a plan built with rows_max): the call's row count, 1 <= rows <= rows_max, every
  /// buffer holding that many rows; InvalidArgument outside that range.
  [[nodiscard]] Result<void> run(void* const* buffers, const Parallel& parallel, std::int64_t rows = 0) const;
  /// PlanOptions::rows_max of the build (0: static rows).
  [[nodiscard]] std::int64_t rows_max() const;
  /// The steps with their generated code, for `--emit asm`.
  [[nodiscard]] std::vector<StepCode> describe() const;
  /// How many load-time values the build evaluated or bound (a value no step reads, such as
  /// the transpose of a table a dense kernel reads as stored, is not): tests check it.
  [[nodiscard]] std::size_t load_time_evaluated() const;
  /// The configuration chosen for each tmatmul ("tmatmul.0" -> config text).
  [[nodiscard]] const std::map<std::string, std::string>& configs() const;
  /// Per step, whether it runs its parallel work inline now (PlanOptions::adaptive_parallel;
  /// all false without it). For tests and diagnostics: it changes as calls are measured.
  [[nodiscard]] std::vector<bool> steps_run_serially() const;

  struct Impl;

 private:
  explicit Plan(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// Whether `f` can be planned: Unsupported naming the first reason otherwise.
Result<void> plan_supported(const ir::Function& f);

}  // namespace ternjit::targets::x86
