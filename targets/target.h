// SPDX-License-Identifier: Apache-2.0
// target.h - the Target interface every code generator implements, and Artifact, its output.
//
// A target turns a specialized module (static shapes, pipeline already run) into an
// Artifact: plain data that a loader (jit/loader.cpp) turns into a callable kernel and
// that a cache can store. Compiling and loading are separate so tests can inspect what
// a target emits on machines that cannot run it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "ir/ir.h"
#include "passes/pipeline.h"
#include "passes/target_info.h"
#include "ternjit/engine.h"
#include "ternjit/result.h"

namespace ternjit::targets {

/// What an Artifact's bytes are.
enum class ArtifactKind : std::uint8_t {
  Interpreted,  ///< canonical IR text, executed by the reference interpreter
  MachineCode,  ///< position-independent host machine code (x86)
  Object,       ///< a relocatable object file (LLVM AOT)
  Ptx,          ///< NVIDIA PTX text
  Hsaco,        ///< AMD code object
  Spirv,        ///< SPIR-V binary module
};

/// "interpreted", "machine-code", "object", "ptx", "hsaco" or "spirv".
std::string_view artifact_kind_name(ArtifactKind kind);

/// A compiled kernel as data: what the loader needs and what the cache stores.
struct Artifact {
  ArtifactKind kind = ArtifactKind::Interpreted;
  std::vector<std::uint8_t> bytes;              ///< the code (or IR text for Interpreted)
  std::string entry;                            ///< entry symbol (Interpreted: the function name)
  std::map<std::string, std::string> metadata;  ///< launch metadata (grid, isa, ...), sorted
};

/// How a target compiles one specialized function.
struct CompileOptions {
  passes::OptLevel opt_level = passes::OptLevel::O2;  ///< the level the pipeline ran at
  int threads = 0;                                    ///< 0: the target's default
  std::string max_isa;                                ///< x86: highest code path ("" = best available)
};

/// The broad class of a target.
enum class TargetKind : std::uint8_t { Interpreter, Cpu, Gpu };

/// "interpreter", "cpu" or "gpu".
std::string_view target_kind_name(TargetKind kind);

/// One code generator. Implementations are stateless after construction apart from
/// what they detected about the machine, and every method is safe to call from several
/// threads at once. Inheritance depth is one: `FooTarget : Target`.
class Target {
 public:
  virtual ~Target() = default;

  /// The registry name ("reference", "x86", "cuda", ...).
  [[nodiscard]] virtual std::string_view name() const = 0;
  /// Interpreter, CPU or GPU.
  [[nodiscard]] virtual TargetKind kind() const = 0;
  /// Success when the target can compile and run here; otherwise an Unavailable error
  /// saying why (no libnvrtc found, no device, CPU lacks AVX2, ...).
  [[nodiscard]] virtual Result<void> available() const = 0;
  /// The device description for `ternjit info` (name, kind, availability, memory,
  /// features), filled whether or not the target is available.
  [[nodiscard]] virtual TargetDescription describe() const = 0;
  /// What the pass pipeline may know about this target (weight layout, int8 dot).
  [[nodiscard]] virtual passes::TargetInfo info() const = 0;
  /// Success when every op of `f` can be compiled; otherwise an Unsupported error
  /// naming the first op that cannot.
  [[nodiscard]] virtual Result<void> check_supported(const ir::Function& f) const = 0;
  /// Compiles function `function` of `specialized` (fully static, pipeline already run
  /// with info()). Errors: NotFound for an unknown function, Unsupported as
  /// check_supported, Unavailable/Internal for toolchain failures (with their log as notes).
  [[nodiscard]] virtual Result<Artifact> compile(const ir::Module& specialized, std::string_view function,
                                                 const CompileOptions& options) const = 0;
};

}  // namespace ternjit::targets
