// SPDX-License-Identifier: Apache-2.0
// llvm_target.h - the LLVM ORC target (host LLJIT, AOT objects for any triple); no LLVM headers.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "ir/interpret.h"
#include "targets/parallel.h"
#include "targets/target.h"
#include "ternjit/result.h"

namespace ternjit::targets {

/// The LLVM target ("llvm"): lowers the kernel ops to LLVM IR, optimizes it at the
/// pipeline's level and emits a host relocatable object (artifact kind "llvm-object") that its
/// load() links with its own LLJIT (llvmjit::load_kernel). Options: triple and cpu, for
/// emit ("asm", "llvm", "obj"; objects come with a C header).
std::unique_ptr<Target> make_llvm_target();

}  // namespace ternjit::targets

namespace ternjit::targets::llvmjit {

/// The llvm target's artifact kind: a relocatable host object with its IR and symbol as metadata.
inline constexpr std::string_view kArtifactKind = "llvm-object";

/// A loaded host kernel. Thread-safe: run() only reads the kernel.
class Kernel {
 public:
  virtual ~Kernel() = default;
  /// Runs on `buffers` (inputs in argument order, then outputs in result order).
  [[nodiscard]] virtual Result<void> run(void* const* buffers) const = 0;
};

/// The llvm target's ProgramState: weight panels (int8, column sums, packed 2-bit) of
/// parameters by parameter and layout, shared by every kernel of one Program (a new
/// batch size packs nothing new). Thread-safe.
class PackCache final : public ProgramState {
 public:
  /// The bytes under `key`, or null.
  [[nodiscard]] std::shared_ptr<const std::vector<std::uint8_t>> find(const std::string& key) const;
  /// Stores `bytes` under `key` unless present; returns what the cache holds.
  std::shared_ptr<const std::vector<std::uint8_t>> insert(const std::string& key,
                                                          std::shared_ptr<const std::vector<std::uint8_t>> bytes);
  /// How many panels were stored (tests check that a weight is packed once per layout).
  [[nodiscard]] std::size_t packs_made() const;
  /// The bytes of the stored panels.
  [[nodiscard]] std::size_t host_bytes() const override;

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<const std::vector<std::uint8_t>>> packs_;
  std::size_t made_ = 0;
};

/// Links an llvm Object artifact in its own LLJIT and binds its load-time values from
/// `params` (which must outlive the kernel, as must `packs`). Packed tmatmuls split
/// their work over `parallel` (its pool must outlive the kernel; the default runs
/// inline). With `packs`, weight panels of parameters come from that Program's cache
/// (made once per layout). Errors: InvalidInput (bad artifact, missing parameter),
/// Unavailable (LLJIT failure).
Result<std::shared_ptr<const Kernel>> load_kernel(const Artifact& artifact, const ir::ParamValues& params,
                                                  const Parallel& parallel = {}, PackCache* packs = nullptr);

/// What `emit` produces.
enum class EmitWhat : std::uint8_t { LlvmIr, Asm, Object };

/// The default budget of LLVM instructions a generated module may hold before it is
/// optimized (the target option llvm.max_instructions, CodegenOptions::max_instructions):
/// 2^15 (32,768): three times what the 2-block decoder of tests/dsl/bitnet_tiny.tri
/// generates (10,907), while a `Block[4096]` chain of elementwise steps (40,991) already
/// took 16 s of CPU to optimize on the 2-core VM that measured it.
inline constexpr std::uint64_t kDefaultMaxInstructions = std::uint64_t{1} << 15;

/// Ahead-of-time / text output for one function of a specialized module.
struct EmitRequest {
  std::string triple;  ///< "" = host
  std::string cpu;     ///< "" = host CPU or "generic"
  passes::OptLevel opt = passes::OptLevel::O2;
  EmitWhat what = EmitWhat::Object;
  /// Weights to bake into the object as constants; null: the entry takes a const table.
  const ir::ParamValues* params = nullptr;
  std::string symbol;  ///< entry symbol ("" = the function name with '.' -> '_')
  bool no_packed = false;  ///< int8 weight panels instead of packed 2-bit ones
  /// The generated module's instruction budget (CodegenOptions::max_instructions).
  std::uint64_t max_instructions = kDefaultMaxInstructions;
};

/// The result of emit: the bytes (object, assembly or IR text) and, for objects, a C header.
struct Emitted {
  std::string bytes;
  std::string header;  ///< declares the entry and its buffer layout
  std::string symbol;  ///< the entry symbol
  std::size_t scratch_bytes = 0;
};

/// Emits function `function` of `specialized` (pipeline already run). With params the
/// object is self-contained: `int SYMBOL(void* const* buffers, void* scratch)` (0, or 1 +
/// the step that found a run-time error: the header's SYMBOL_ERROR_OFFSET). Errors:
/// NotFound, Unsupported (an op without a generator when baking an entry), InvalidInput.
Result<Emitted> emit(const ir::Module& specialized, std::string_view function, const EmitRequest& request);

}  // namespace ternjit::targets::llvmjit
