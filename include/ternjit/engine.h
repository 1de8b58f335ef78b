// SPDX-License-Identifier: Apache-2.0
// engine.h - the C++ embedding API: Engine -> Program -> Kernel (compile once per shape).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <string_view>
#include <vector>

#include "ternjit/builder.h"
#include "ternjit/result.h"
#include "ternjit/target_description.h"
#include "ternjit/types.h"

namespace ternjit {

/// How an Engine compiles. Built explicitly; from_env() is the only reader of the
/// environment in the library.
struct EngineOptions {
  std::string target = "auto";  ///< "auto" or a registered target name ("reference", ...)
  int opt_level = 2;            ///< 0..3 (none, conservative, balanced, aggressive)
  int threads = 0;              ///< 0: the target's default (x86: every online core)
  /// Options of individual targets, each parsed and validated by its target:
  /// "TARGET.NAME=VALUE" entries separated by ';' ("x86.max_isa=avx2;llvm.cpu=znver4").
  /// Each target documents its own (targets/<name>/README.md; `ternjit info --json`
  /// lists them). An unknown target, option or value is an error of Engine::create.
  std::string target_options;
  /// An alias of the target option that declares the short name "max_isa" (x86's:
  /// "x86.max_isa=..."), kept for callers of this older field; "" = none. Both given:
  /// they must agree.
  std::string max_isa;
  /// A host-provided parallel loop for kernel work (as XNNPACK takes a pthreadpool):
  /// parallel_for(pool, task, context, n) must call task(context, i) once for every i
  /// in [0, n), from any threads, and return when all calls returned. Null: the
  /// engine's own oneTBB arena of `threads` threads.
  void (*parallel_for)(void* pool, void (*task)(void* context, std::int64_t i), void* context, std::int64_t n) = nullptr;
  void* parallel_pool = nullptr;  ///< first argument of parallel_for
  /// The on-disk kernel cache (cache/README.md): empty: $XDG_CACHE_HOME/ternjit (else
  /// ~/.cache/ternjit); "off": no disk cache; else the directory (created 0700).
  std::string cache_dir;
  std::uint64_t cache_max_bytes = 0;  ///< cap on cached artifacts, LRU-evicted; 0: the default (1 GiB)
  /// Accept a cache directory shared by a Unix group: group-writable directories and
  /// entries written by other members of the directory's group (never world-writable ones).
  bool cache_shared_group = false;
  /// "cached" (the default): use the tuning records `ternjit tune` stored in the disk cache
  /// that were measured under this engine's conditions (exact shape, else the nearest
  /// tuned shape, else the default; autotune/README.md); "off": default configurations;
  /// "tune": tune at first call what has no record.
  std::string tuning = "cached";
  /// Serve a new row count M from its M bucket's kernel, compiled once per bucket for
  /// run-time rows (docs/caching.md), where the function and the target allow it;
  /// false: specialize every M (the kernels of both ways compute the same bits).
  bool runtime_rows = true;
  /// Per step of a compiled kernel, run its parallel work on the calling thread while its
  /// parallel runs measure slower than its serial ones (a small layer on a pool whose
  /// threads take longer to wake than the layer takes), re-checked now and then; the
  /// results are the same bits either way. CPU targets with 2+ threads (x86); false: every
  /// step's work goes to the pool (docs/threading.md).
  bool adaptive_parallel = true;
  int verbose = 0;              ///< 1: one trace line per compile/specialization/hit on stderr
  /// Stages of the compile flow after which the module is written to the trace sink
  /// (comma-separated: "specialize", "optimize", or "all"; "" none), as the pass
  /// pipeline's --print-after does for passes.
  std::string print_after;
  /// Where trace lines go (one line per call, without '\n'); empty: stderr. Called from
  /// whichever thread compiles or looks up, possibly concurrently.
  std::function<void(std::string_view)> trace;
  /// The environment variables from_env() took values from, each with its value
  /// ({"TERNJIT_TARGET", "tpu"}, ...). When Engine::create refuses a field whose value is
  /// still its variable's (a flag or the caller did not replace it), the error starts with
  /// the variable and its escaped value (`TERNJIT_TARGET='tpu': unknown target ...`).
  /// Empty for options made in code.
  std::vector<std::pair<std::string, std::string>> env_values;

  /// Defaults overridden by TERNJIT_TARGET, TERNJIT_OPT_LEVEL (also O2/balanced...),
  /// TERNJIT_THREADS, TERNJIT_TARGET_OPTIONS, TERNJIT_MAX_ISA, TERNJIT_CACHE_DIR (also "off"), TERNJIT_CACHE_MAX_SIZE
  /// (bytes, or 500M, 2G...), TERNJIT_CACHE_SHARED_GROUP (0/1), TERNJIT_RUNTIME_ROWS (0/1), TERNJIT_ADAPTIVE_PARALLEL (0/1), TERNJIT_TUNING,
  /// TERNJIT_VERBOSE and TERNJIT_PRINT_AFTER. A malformed
  /// value is an error naming the variable and its value; the target, target options,
  /// max_isa and print stages are checked by Engine::create (a later flag may replace
  /// them), whose error names the variable a refused value came from (env_values).
  static Result<EngineOptions> from_env();
};

/// A caller-owned tensor view: row-major, contiguous.
struct TensorView {
  void* data = nullptr;
  ElemKind kind = ElemKind::F32;  ///< T2 buffers hold one int8 in {-1, 0, 1} per element
  std::vector<std::int64_t> shape;
};

/// The calling convention of a fetched kernel: `buffers` = input data pointers in
/// argument order, then output data pointers in result order. Returns 0 or a
/// ternjit_status code. Thread-safe.
using KernelFn = std::int32_t (*)(const void* state, void* const* buffers);

/// One function specialized for one set of input shapes. Program::kernel hands it out as a
/// shared_ptr that shares ownership of the Program's state (module, weights, the targets'
/// code and per-Program state, the engine's pool): a kernel held after its Program was
/// destroyed or moved from stays valid and computes the same results, and the Program's
/// memory is freed when its last kernel is released.
class Kernel {
 public:
  virtual ~Kernel() = default;
  /// Output kinds and shapes.
  [[nodiscard]] virtual std::span<const TensorView> outputs() const = 0;
  /// The plain function pointer and its state, valid while this kernel is held (any
  /// shared_ptr to it), or while its Program lives.
  [[nodiscard]] virtual KernelFn entry() const = 0;
  [[nodiscard]] virtual const void* state() const = 0;
  /// Runs on caller buffers (inputs, then outputs), checking kinds and shapes.
  virtual Result<void> run(std::span<const TensorView> inputs, std::span<TensorView> outputs) const = 0;
};

class Engine;

/// A declared tensor of a program: its name (an argument's or parameter's; "" for a
/// result), element kind and shape, each dim a static extent or a symbol name.
struct TensorDecl {
  std::string name;
  ElemKind kind = ElemKind::F32;
  Shape shape;
};

/// A function of a program as declared: "Layer.fn", its arguments and its results.
struct FunctionDecl {
  std::string name;
  std::vector<TensorDecl> inputs;
  std::vector<TensorDecl> outputs;
};

/// A parameter of a program ("Layer.param", its declared type) and whether a value is bound.
struct ParamInfo {
  TensorDecl decl;
  bool bound = false;
};

/// A compiled module with its bound weights. Thread-safe: concurrent first calls with
/// the same shapes build once (the others wait); later calls are a lookup.
class Program {
 public:
  ~Program();
  Program(Program&&) noexcept;
  Program& operator=(Program&&) noexcept;

  /// Binds parameter `name` ("Layer.param") from memory (copied once in its stored form:
  /// ternary values at 2 bits each; repacked for the target once). `value.data` must hold
  /// exactly the bytes `value.shape` needs in `format` (ternjit_bind_weight lists them).
  Result<void> bind(std::string_view name, const TensorView& value, WeightFormat format = WeightFormat::Plain);
  /// As bind, and `value.data` holds `byte_length` bytes: anything but exactly what the
  /// shape needs in `format` is an InvalidArgument error, nothing read.
  Result<void> bind(std::string_view name, const TensorView& value, WeightFormat format, std::size_t byte_length);
  /// Binds every parameter a weights file holds: safetensors, GGUF (TQ1_0/TQ2_0 ternary
  /// with their scales as "<name>_scale", F32/F16/BF16/Q8_0) or a Hugging Face BitNet
  /// checkpoint, told apart by content (formats/README.md). `name_map` rules
  /// ("model.layers.{i}.mlp.up_proj.weight=L{i}.w") rename file tensors first. The file
  /// is memory-mapped: tensors usable as they are (tern2-packed ternary, floats of the
  /// declared kind) are not copied, and the mapping lives while they are bound, so the
  /// file must not be modified in place meanwhile (replacing it by rename is safe).
  /// Parameters the file lacks stay unbound (the error of the first run names the closest
  /// tensors the file had); a scale the file holds for a bound ternary tensor must bind
  /// too unless it is all 1.
  Result<void> bind_file(const std::string& path, std::span<const std::string> name_map = {});
  /// Binds every still-unbound parameter to random values drawn from `seed`.
  Result<void> bind_random(std::uint64_t seed);

  /// The kernel of `function` for these input shapes (data pointers are ignored): the same
  /// shapes give the same kernel. The pointer shares ownership of this Program's state, so
  /// the kernel outlives the Program when held longer (Kernel).
  Result<std::shared_ptr<const Kernel>> kernel(std::string_view function, std::span<const TensorView> inputs);
  /// Specializes (once) and runs.
  Result<void> run(std::string_view function, std::span<const TensorView> inputs, std::span<TensorView> outputs);

  /// Host bytes the bound parameters hold as the kernels read them: their stored form
  /// (ternary at 2 bits a value; a mapped file's tensors included) plus the panels the
  /// targets packed from them so far (made when a kernel is first built). Device-resident
  /// copies (GPU targets) are not counted.
  [[nodiscard]] std::size_t resident_bytes() const;

  /// The module's functions in declaration order (fixed for the program's life).
  [[nodiscard]] std::vector<FunctionDecl> functions() const;
  /// The module's parameters in declaration order, with their bound state now.
  [[nodiscard]] std::vector<ParamInfo> params() const;

  /// Internal.
  struct Impl;
  explicit Program(std::shared_ptr<Impl> impl);

 private:
  std::shared_ptr<Impl> impl_;  // shared with the kernels handed out
};

/// Composes the front end, the pass pipeline, the target registry, the on-disk kernel
/// cache and the tuning records. Two engines in one process share nothing.
class Engine {
 public:
  /// Creates an engine; an unknown or unavailable target is an error that says why.
  static Result<Engine> create(const EngineOptions& options);
  ~Engine();
  Engine(Engine&&) noexcept;
  Engine& operator=(Engine&&) noexcept;

  /// The options it was made with, and the target `auto` resolved to.
  [[nodiscard]] const EngineOptions& options() const;
  [[nodiscard]] const std::string& target_name() const;
  /// Every registered target, available or not, with the reason.
  [[nodiscard]] std::vector<TargetDescription> targets() const;

  /// Compiles `.tri` source.
  Result<Program> compile(std::string_view source, std::string_view file_name = "<source>");
  /// Compiles a builder-made or parsed module.
  Result<Program> compile(const Module& module);

  /// Internal.
  struct Impl;

 private:
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ternjit
