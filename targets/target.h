// SPDX-License-Identifier: Apache-2.0
// target.h - the Target interface every code generator implements: options, compile, load, emit.
//
// A target turns a specialized module (static shapes, pipeline already run) into an
// Artifact: plain data that the cache stores and that the same target's load() turns
// into a callable kernel. Compiling and loading are separate methods so tests inspect
// what a target emits on machines that cannot run it. A target keeps what several
// kernels of one Program share (packed weight panels, device-resident weights) in a
// ProgramState it creates; jit/ holds it for the Program and never looks inside.
// targets/README.md says what a new target writes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ir/interpret.h"
#include "ir/ir.h"
#include "passes/pipeline.h"
#include "targets/ceilings.h"
#include "targets/parallel.h"
#include "targets/tuning.h"
#include "ternjit/result.h"
#include "ternjit/target_description.h"

namespace ternjit::targets {

/// A compiled kernel as data: what the target's load() needs and what the cache stores.
/// What the bytes are is the target's business: it names their kind (its
/// TargetTraits::artifact_kind, e.g. "cubin") and its load() refuses any other.
struct Artifact {
  std::string kind;                             ///< the compiling target's artifact kind
  std::vector<std::uint8_t> bytes;              ///< the code, or the module's IR text (code_is_ir)
  /// The bytes are the specialized module's canonical IR text (the reference and x86
  /// targets regenerate their code from it at load); other targets keep that text in
  /// metadata "ir" when they keep it at all. The disk cache checks a stored entry's
  /// signature against it (cache::check_artifact_signature).
  bool code_is_ir = false;
  std::string entry;                            ///< entry symbol (IR-text artifacts: the function name)
  std::map<std::string, std::string> metadata;  ///< launch metadata (grid, isa, ...), sorted
};

/// True when `kind` may name an artifact kind: 1-32 characters of [a-z0-9_-] (what the
/// disk cache's codec accepts).
bool valid_artifact_kind(std::string_view kind);

/// InvalidInput unless `artifact` is of `kind` (a target's load() calls it first).
Result<void> check_artifact_kind(const Artifact& artifact, std::string_view kind, std::string_view target);

/// A target's own options, validated by the target (Target::parse_options): sorted
/// name/value pairs without the target prefix ("max_isa" -> "avx2").
struct TargetOptions {
  std::map<std::string, std::string> values;
  /// The value of `name`, or "" when not given.
  [[nodiscard]] std::string get(std::string_view name) const;
};

/// Splits an options string "x86.max_isa=avx2;cuda.arch=sm_90" into the entries of each
/// target name ("x86" -> {"max_isa" -> "avx2"}). Whitespace around entries is ignored, an
/// empty string gives an empty map. Errors (InvalidArgument): an entry without a target
/// prefix or '=', an empty name, or one named twice.
Result<std::map<std::string, TargetOptions>> split_target_options(std::string_view text);

/// How a target compiles one specialized function: everything but the module that
/// changes the artifact. key() is its one text in the disk cache's key.
struct CompileOptions {
  passes::OptLevel opt_level = passes::OptLevel::O2;  ///< the level the pipeline ran at
  int threads = 0;                                    ///< 0: the target's default
  TargetOptions target;                               ///< this target's own options (parsed by it)
  TuningMode tuning = TuningMode::Cached;             ///< how tuning sources are consulted
  /// For a target whose traits say decides_at_compile: the configuration of each of its
  /// tuning_spaces(), in order, decided by the engine before compile() (a new tuning
  /// record gives a new key, so a new artifact, never a stale hit).
  std::vector<std::string> decisions;
  /// > 0: compile for run-time rows (Target::runtime_rows said yes): axis 0 of every
  /// argument and result is the row count, bound to this upper bound in the module; the
  /// loaded kernel has LoadedKernel::run_rows.
  std::int64_t rows_max = 0;

  /// "opt=O2;threads=2;tuning=cached;max_isa=avx2" plus ";decisions=a|b" and
  /// ";rows<=16" when set: every field above, in this order, canonical (target options
  /// sorted by name). The engine's disk-cache key holds it whole (jit/kernel_cache.h).
  [[nodiscard]] std::string key() const;
};

/// Per-Program state a target keeps (packed weights, device buffers). Created by
/// Target::new_program_state, owned by the Program, passed to every load of that Program.
class ProgramState {
 public:
  virtual ~ProgramState() = default;
  /// Host bytes it holds (packed weight panels); device memory is not counted.
  [[nodiscard]] virtual std::size_t host_bytes() const { return 0; }
};

/// The files a target keeps beside its artifacts in the engine's kernel cache (spirv: the
/// Vulkan pipeline-cache blob). jit/ implements it over the disk cache, so each such file
/// gets exactly an artifact's trust: a checked directory (the same refusal of a
/// world-writable or foreign root), a regular file the user owns opened without following
/// links, a size bound, a checksum and the whole key compared (cache/README.md). A target
/// never opens a path in the cache directory itself. Thread-safe.
class SideFiles {
 public:
  virtual ~SideFiles() = default;
  /// What names the store (its directory): a target that remembers per store what it read
  /// or wrote tells two engines' stores apart by it.
  [[nodiscard]] virtual const std::string& where() const = 0;
  /// The bytes stored as file `name` ("spirv.vulkan-pipelines") of `identity` (what the
  /// content depends on: the device and driver), or nullopt: none, no usable store, or
  /// refused or damaged (said as a warning, damaged files removed). Nothing larger than
  /// `max_bytes` is read, and bytes `check` refuses count as damaged (its message is the
  /// warning's reason).
  [[nodiscard]] virtual std::optional<std::string> read(
      std::string_view name, std::string_view identity, std::uint64_t max_bytes,
      const std::function<Result<void>(std::string_view)>& check) const = 0;
  /// Stores `bytes` as file `name` of `identity`, atomically; stores nothing (and says
  /// nothing more) when the store is unusable, which it said when it was refused. Errors:
  /// the write failed (IoError).
  virtual Result<void> write(std::string_view name, std::string_view identity, std::string_view bytes) const = 0;
};

/// What a kernel may refer to besides its artifact. Everything pointed to must outlive
/// the LoadedKernel.
struct LoadContext {
  const ir::ParamValues* params = nullptr;  ///< the program's weights (frozen once kernels exist)
  Parallel parallel;                        ///< how CPU kernels run on several threads
  /// CPU targets: per step, run its parallel work inline while its parallel runs measure
  /// slower than its serial ones (EngineOptions::adaptive_parallel; x86: plan_adaptive.h).
  bool adaptive_parallel = false;
  ProgramState* state = nullptr;            ///< this target's state of the Program (may be null)
  TargetOptions options;                    ///< this target's options
  TuningMode tuning = TuningMode::Cached;   ///< how `tuning_source` is consulted
  const TuningSource* tuning_source = nullptr;  ///< where load-time decisions come from (null: defaults)
  /// Where the target keeps its load-time caches (spirv: the Vulkan pipeline-cache blob):
  /// the engine's kernel cache (EngineOptions::cache_dir, TERNJIT_CACHE_DIR, the XDG
  /// default); null when caching is off. Valid during load() only.
  const SideFiles* side_files = nullptr;
};

/// A kernel ready to call: `run(state, buffers)` with buffers = input data pointers in
/// argument order, then output pointers in result order. jit/ wraps it into the
/// C-callable KernelFn (exceptions and status codes are its business, not the target's).
struct LoadedKernel {
  Result<void> (*run)(const void* state, void* const* buffers) = nullptr;
  /// A kernel compiled with CompileOptions::rows_max: `run` on buffers holding only the
  /// first `rows` (1 <= rows <= rows_max) rows of axis 0 of every argument and result.
  /// Null otherwise.
  Result<void> (*run_rows)(const void* state, void* const* buffers, std::int64_t rows) = nullptr;
  const void* state = nullptr;        ///< the first argument of run
  std::shared_ptr<const void> owner;  ///< keeps `state` (and any code pages) alive
  std::string isa;                    ///< the code path it runs ("avx512_vnni", "-"), for trace lines
  /// GPU targets: the framework launch path (targets/README.md, "GPU targets"): enqueues
  /// the kernel on the caller's `stream` (Vulkan: a VkCommandBuffer in the recording
  /// state) reading and writing the caller's device buffers (Vulkan: VkBuffer handles),
  /// inputs then outputs, and returns without waiting. Null for CPU targets.
  Result<void> (*launch)(const void* state, void* stream, void* const* device_buffers) = nullptr;
  /// GPU targets: the device the kernel runs on as native handles, for the caller to
  /// allocate its buffers and record on (Vulkan: VkInstance, VkPhysicalDevice, VkDevice,
  /// VkQueue, the queue family index). Empty for CPU targets.
  std::vector<std::uintptr_t> device_handles;
};

/// What Target::emit returns.
struct Emitted {
  std::string text;    ///< the emitted text, or the bytes of a binary form
  bool binary = false; ///< `text` holds bytes (an object file): write it to a file, not a terminal
  /// Files that belong with a binary form, by suffix (".h" -> a C header for an object).
  std::map<std::string, std::string> companions;
};

/// The broad class of a target.
enum class TargetKind : std::uint8_t { Interpreter, Cpu, Gpu };

/// "interpreter", "cpu" or "gpu".
std::string_view target_kind_name(TargetKind kind);

/// The limits of a device that decide its kernels' launch geometry.
struct DeviceLimits {
  std::uint32_t max_workgroup_invocations = 0;  ///< threads per workgroup / block
  std::uint32_t max_workgroup_size_x = 0;       ///< the x extent of a workgroup / block
  std::uint32_t max_shared_bytes = 0;           ///< shared (workgroup-local) memory per workgroup
  std::uint64_t max_buffer_bytes = 0;           ///< the largest buffer a binding reaches (Vulkan)
};

/// One device of a GPU target's API as `ternjit info` lists it (spirv: a Vulkan physical
/// device; cuda and hip: a GPU of their runtime). Plain data, filled by Target::devices().
struct DeviceDescription {
  std::uint32_t index = 0;           ///< what the target's `device` option takes
  std::string name;                  ///< "NVIDIA H100", "llvmpipe (LLVM 15.0.6, 256 bits)"
  std::string type;                  ///< "discrete gpu", "integrated gpu", "virtual gpu", "cpu" or "other"
  std::string driver;                ///< driver name and version text
  std::string api;                   ///< the API and its version ("Vulkan 1.3.230", "CUDA 12.4")
  std::uint64_t memory_bytes = 0;    ///< device-local memory (the largest heap)
  std::uint32_t subgroup_size = 0;   ///< subgroup / warp / wavefront width (0: unknown)
  bool int_dot = false;              ///< an int8x4 dot product instruction (OpSDot, dp4a)
  bool int_dot_accelerated = false;  ///< ... that the device reports as accelerated
  DeviceLimits limits;               ///< launch limits
  bool selected = false;             ///< the device the target uses by default
};

/// What the engine needs to know of a target beyond its methods, as one value, fixed at
/// construction (from what the target detected about the machine).
struct TargetTraits {
  TargetKind kind = TargetKind::Cpu;  ///< interpreter, CPU or GPU
  /// What compile() produces and load() takes ("ir-text", "x86-plan", "object", "cubin",
  /// "hsaco", "spirv-modules"): valid_artifact_kind(), unique to the target.
  std::string_view artifact_kind;
  /// The target's tuning decisions shape the code compile() emits (GPU tiles): the
  /// engine runs the pipeline, asks the tuning source for every space of
  /// tuning_spaces() and hands the answers to compile() in CompileOptions::decisions
  /// (so they are part of the key). False: the target decides at load.
  bool decides_at_compile = false;
  /// runtime_rows() may say yes; false spares the engine the analysis (every M specialized).
  bool runtime_rows = false;
  /// GPU targets: this machine may have a hardware device for the target, decided
  /// cheaply without loading a driver; `auto` passes over a target without one without
  /// probing it (available() and describe() still probe when asked). False for the rest.
  bool may_have_gpu = false;
};

/// A short spelling of one of a target's options where options are given: an
/// EngineOptions / C options field of the same name, a `ternjit` flag (`--` + name with
/// '_' as '-'). `max_isa=avx2` means the entry `x86.max_isa=avx2`.
struct OptionAlias {
  std::string_view name;    ///< "max_isa"
  std::string_view option;  ///< the target's option it sets ("max_isa")
  std::string_view help;    ///< one line for --help
};

/// One code generator. Implementations are stateless after construction apart from
/// what they detected about the machine, and every method is safe to call from several
/// threads at once. Inheritance depth is one: `FooTarget : Target`.
class Target {
 public:
  virtual ~Target() = default;

  /// The registry name ("reference", "x86", "cuda", ...).
  [[nodiscard]] virtual std::string_view name() const = 0;
  /// Its kind, artifact kind and what the engine plans around (fixed at construction).
  [[nodiscard]] virtual TargetTraits traits() const = 0;
  /// traits().kind.
  [[nodiscard]] TargetKind kind() const { return traits().kind; }
  /// Success when the target can compile and run here; otherwise an Unavailable error
  /// saying why (no libnvrtc found, no device, CPU lacks AVX2, ...).
  [[nodiscard]] virtual Result<void> available() const = 0;
  /// The device description for `ternjit info` (name, kind, availability, memory,
  /// features), filled whether or not the target is available.
  [[nodiscard]] virtual TargetDescription describe() const = 0;
  /// GPU targets: every device of the target's API on this machine, in the order its
  /// `device` option indexes them; empty for CPU targets and where the API is
  /// unavailable (available() says why). Probes the driver like describe().
  [[nodiscard]] virtual std::vector<DeviceDescription> devices() const { return {}; }
  /// The target's options that have a short spelling (OptionAlias). Default: none.
  [[nodiscard]] virtual std::vector<OptionAlias> option_aliases() const { return {}; }
  /// Validates this target's options (the entries of its prefix in the options string).
  /// Errors (InvalidArgument): an unknown name or a bad value, listing what is accepted.
  [[nodiscard]] virtual Result<TargetOptions> parse_options(const TargetOptions& given) const = 0;
  /// Success when every op of `f` can be compiled; otherwise an Unsupported error
  /// naming the first op that cannot.
  [[nodiscard]] virtual Result<void> check_supported(const ir::Function& f) const = 0;
  /// Compiles function `function` of `specialized` (fully static, pipeline already run).
  /// Errors: NotFound for an unknown function, Unsupported as
  /// check_supported, Unavailable/Internal for toolchain failures (with their log as notes).
  [[nodiscard]] virtual Result<Artifact> compile(const ir::Module& specialized, std::string_view function,
                                                 const CompileOptions& options) const = 0;
  /// Run-time rows (docs/caching.md): true when this target can compile `optimized`
  /// (pipeline run; every symbol static but `rows`, which passes::check_row_batch
  /// accepted) once for an upper bound of rows (CompileOptions::rows_max) and run it on
  /// fewer (LoadedKernel::run_rows). A target may still refuse in compile() or load()
  /// with Unsupported (then the engine specializes every row count). Asked only when
  /// traits().runtime_rows. Default: false.
  [[nodiscard]] virtual bool runtime_rows(const ir::Function& optimized, ir::SymbolId rows) const {
    (void)optimized;
    (void)rows;
    return false;
  }
  /// A fresh state for one Program's kernels (null when the target keeps none).
  [[nodiscard]] virtual std::unique_ptr<ProgramState> new_program_state() const { return nullptr; }
  /// Loads an artifact this target compiled. Errors: InvalidInput for an artifact that
  /// does not decode or lacks its entry, or whose entry is not fully static; InvalidInput
  /// for a parameter missing from context.params; Unavailable when this machine cannot
  /// run it (another CPU's ISA, no device).
  [[nodiscard]] virtual Result<LoadedKernel> load(const Artifact& artifact, const LoadContext& context) const = 0;
  /// The tunable kernel calls of `function` of `specialized` (pipeline already run), as
  /// load() or compile() would ask about them, in the same order. Default: none.
  [[nodiscard]] virtual Result<std::vector<std::unique_ptr<TuningSpace>>> tuning_spaces(
      const ir::Module& specialized, std::string_view function, const CompileOptions& options) const;
  /// The forms emit() produces ("asm", "llvm", "obj", "ptx", "spirv", ...); "ir" is the
  /// caller's business and never listed.
  [[nodiscard]] virtual std::vector<std::string_view> emit_forms() const = 0;
  /// The code of `function` of `specialized` (pipeline already run) in form `what`.
  /// `params` (may be null) are weights to bake into self-contained forms (objects).
  /// Errors: InvalidArgument for a form not in emit_forms(), as compile otherwise.
  [[nodiscard]] virtual Result<Emitted> emit(const ir::Module& specialized, std::string_view function,
                                             std::string_view what, const CompileOptions& options,
                                             const ir::ParamValues* params) const = 0;
  /// CPU targets: the machine's ceilings for this target's kernels (targets/ceilings.h),
  /// measured now on `parallel`: a streaming read of `read_bytes` bytes and the fastest
  /// int8-dot loop `options` (this target's validated options) allow. `ternjit bench`
  /// prints a kernel beside them. Default: Unsupported.
  [[nodiscard]] virtual Result<Ceilings> measure_ceilings(const Parallel& parallel, std::size_t read_bytes,
                                                          const TargetOptions& options,
                                                          const CeilingOptions& how) const;
  /// The tuning spaces this target declares, described for `ternjit tune --help` (their
  /// knobs and what each candidate means); "" when it declares none (the default).
  [[nodiscard]] virtual std::string describe_tuning() const { return {}; }
  /// Everything about this machine that changes what compile() produces, as one text:
  /// the disk-cache key's `machine` field. Default: "device=<describe().device>;
  /// features=<describe().features>"; GPU targets add their driver and compiler
  /// versions ("nvrtc 13.0; cuda driver 12.4").
  [[nodiscard]] virtual std::string cache_key_text() const;
};

/// A digest of an artifact's code bytes (FNV-1a 64, 16 hex digits). A target that puts
/// it in its artifact's metadata as "bytes_digest" has damaged code bytes detected by
/// the disk cache before load (cache::check_artifact_signature) and by its own load().
std::string bytes_digest(const std::vector<std::uint8_t>& bytes);

/// The byte sizes of a fully static function's arguments and results, for loaders.
/// Errors: InvalidInput naming `function` when a type is not fully static.
struct BufferSizes {
  std::vector<std::size_t> in, out;
};
Result<BufferSizes> buffer_sizes(const ir::Function& function);

/// Parses an Interpreted or Plan artifact's IR text and finds its entry. Errors:
/// InvalidInput when it does not parse or lacks the entry.
Result<ir::Module> parse_artifact_module(const Artifact& artifact);

}  // namespace ternjit::targets
