// SPDX-License-Identifier: Apache-2.0
// loader.h - turns a target's Artifact into a callable kernel entry (KernelFn + state).
#pragma once

#include <memory>
#include <vector>

#include "ir/interpret.h"
#include "targets/target.h"
#include "targets/x86/plan.h"
#include "ternjit/engine.h"
#include "ternjit/result.h"

namespace ternjit::jit {

/// What a loaded kernel may refer to besides its artifact. Everything pointed to must
/// outlive the LoadedKernel.
struct LoadContext {
  const ir::ParamValues* params = nullptr;  ///< the program's weights (frozen once kernels exist)
  targets::x86::Parallel parallel;          ///< how CPU kernels run on several threads
  targets::x86::PackCache* packs = nullptr; ///< packed weights shared by a program's x86 plans (may be null)
};

/// A kernel ready to call: `entry(state, buffers)` with the KernelFn convention of
/// engine.h. `run_checked` is the same computation returning a Result with a message
/// (entry only gives a status code); null when the artifact kind has none.
struct LoadedKernel {
  KernelFn entry = nullptr;      ///< C-callable, never throws, returns 0 or a ternjit_status
  const void* state = nullptr;   ///< the first argument of entry and run_checked
  /// entry's computation with the error message kept (Kernel::run uses it); may be null.
  Result<void> (*run_checked)(const void* state, void* const* buffers) = nullptr;
  std::shared_ptr<const void> owner;  ///< keeps `state` (and any code pages) alive
};

/// Loads `artifact`. Interpreted: parses the IR text, finds the entry function (which
/// must be fully static) and returns a trampoline that decodes the buffers into
/// HostTensors, runs ir::interpret with `context.params` and encodes the results into
/// the output buffers. MachineCode (x86): parses the IR text, builds the x86 plan with
/// the artifact's "isa" (and per-tmatmul configurations) - generating the machine code
/// and packing the weights - and returns its trampoline. Errors: InvalidInput for an
/// artifact that does not parse or lacks its entry; Unavailable when this CPU cannot
/// run the artifact's ISA. Object (llvm): links the object into its own LLJIT
/// (targets/llvm/README.md). Unsupported for artifact kinds this build cannot load yet.
Result<LoadedKernel> load(const targets::Artifact& artifact, const LoadContext& context);

/// The ternjit_status value (ternjit.h) of an error code: InvalidInput 1 ... Internal 7.
std::int32_t status_of(ErrorCode code);

}  // namespace ternjit::jit
