// SPDX-License-Identifier: Apache-2.0
// backend.h - the LLVM-facing half of the llvm target (no LLVM types): IR generation, optimization, emission, LLJIT.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ir/ir.h"
#include "passes/pipeline.h"
#include "targets/llvm/llvm_target.h"
#include "targets/llvm/program.h"
#include "ternjit/result.h"

namespace ternjit::targets::llvmjit {

/// What to emit.
enum class EmitKind : std::uint8_t { Object, Asm, LlvmIr };

/// Where and how to generate code.
struct CodegenOptions {
  std::string triple;    ///< "" = the host (its CPU name and features too)
  std::string cpu;       ///< "" = host CPU (host triple) or "generic"
  std::string features;  ///< extra "+a,-b" features ("" = the CPU's)
  passes::OptLevel opt = passes::OptLevel::O2;
  bool plain_dot = false;  ///< ignore dot product instructions (tests of the fallback)
  bool no_packed = false;  ///< int8 weight panels even where packed 2-bit panels apply (benches, tests)
  /// Most LLVM instructions the generated module may hold before it is optimized (the
  /// target option llvm.max_instructions): LLVM's optimizer is superlinear in a
  /// function's size, so a program unrolled to thousands of steps (a DSL `Block[4096]`
  /// chain: minutes and a gigabyte) is refused in well under a second instead.
  std::uint64_t max_instructions = kDefaultMaxInstructions;
};

/// What a host entry's `par` argument points to (generated code reads these three
/// fields): Parallel::run and its pool, and how many threads run at once. A null `run`
/// runs everything on the calling thread; `par` itself is never null.
struct ParallelArgs {
  void (*run)(void* pool, void (*task)(void* context, std::int64_t i), void* context, std::int64_t n) = nullptr;
  void* pool = nullptr;
  std::int64_t threads = 1;
};

/// Generates the LLVM module of `p` (function `f`), optimizes it and emits `kind`.
/// A module of more than o.max_instructions instructions is an InvalidInput error
/// naming the count, the budget and the option that raises it, before any optimization.
/// `baked` null: the entry is `int entry(void* const* buffers, const void* const*
/// consts, void* scratch, const ParallelArgs* par)` and consts are read through the
/// table; otherwise each const slot's bytes become a constant global and the entry is
/// `int entry(void* const* buffers, void* scratch)` (AOT, one thread). The entry
/// returns 0, or 1 + the index of the step that found a run-time error, whose record
/// (RunError, program.h) is at scratch + p.err_offset. When !p.all_lowered there is no
/// entry; instead every lowered step is `int tj_op_<n>(void* const* ptrs)` (operands,
/// results, temporary, par, error record), returning 0 or 1 (an error recorded).
Result<std::string> generate(const ir::Function& f, const FunctionPlan& p, const std::string& entry,
                             const std::vector<std::vector<std::uint8_t>>* baked, EmitKind kind,
                             const CodegenOptions& o);

/// The weight panel layout the generated code for `o` expects: the int8 panels' column
/// group (16: AVX-512 VNNI, 4: AArch64 dotprod, 1: plain loops) and the packed panels'
/// lanes (16, 8 or 4; 0 with `no_packed`); InvalidArgument for an unknown triple.
Result<PanelLayout> panel_layout(const CodegenOptions& o);

/// A host object linked by its own LLJIT (its own context and session).
class JitObject {
 public:
  virtual ~JitObject() = default;
  /// The address of a defined symbol, or null.
  [[nodiscard]] virtual void* lookup(const std::string& name) = 0;
};

/// Links a relocatable host object in a fresh LLJIT (process symbols such as libm resolve).
Result<std::unique_ptr<JitObject>> jit_link(const std::vector<std::uint8_t>& object);

/// The host's target triple, CPU name and whether it has AVX-512 VNNI / AArch64 dotprod.
std::string host_triple();
/// The host CPU name LLVM detects ("znver4", ...).
std::string host_cpu();

}  // namespace ternjit::targets::llvmjit
