// SPDX-License-Identifier: Apache-2.0
// commands.h - the subcommands of the `ternjit` CLI, each callable alone.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "formats/run_inputs.h"
#include "ir/bind.h"
#include "ir/ir.h"
#include "ir/tensor.h"
#include "targets/target.h"
#include "ternjit/engine.h"
#include "tools/ternjit/flags.h"

namespace ternjit::cli {

/// Options of `ternjit run`.
struct RunOptions {
  std::string file;
  FunctionFlags function;           ///< --layer, --function
  std::vector<std::string> shapes;  ///< "M=4,K=64" (repeatable)
  TargetFlags target;               ///< --target (default auto), its options, --threads, -O, --cache-dir
  std::string weights;      ///< weights file (safetensors or GGUF, by content) or empty
  std::vector<std::string> name_map;  ///< --map rules "PATTERN=TARGET"
  std::optional<std::uint64_t> random_missing;  ///< --random-missing SEED: draw parameters the weights lack
  std::optional<std::uint64_t> random_missing_inputs;  ///< --random-missing-inputs SEED: draw inputs --input lacks
  std::string input;        ///< safetensors path or empty
  std::string output;       ///< safetensors path or empty (then print)
  std::uint64_t seed = 1;
  bool check = false;       ///< --check: compare every output with the reference target's (exit 1 if not)
};

/// Options of `ternjit opt`.
struct OptOptions {
  std::string file;                      ///< the .tir or .tri input
  bool passes_given = false;             ///< --passes was given (maybe empty: print only)
  std::string passes;                    ///< "fold-constants,simplify"
  std::string level;                     ///< -O value ("2", "O2", "balanced"); empty: not given
  bool print_after_all = false;          ///< log the IR after every pass
  std::vector<std::string> print_after;  ///< log the IR after these passes (names)
  bool time_passes = false;              ///< log a per-pass timing table
  std::vector<std::string> shapes;       ///< "N=8", "M=4,K=64"
};

/// Reads a whole file; errors name the path.
Result<std::string> read_text_file(const std::string& path);
/// Loads a `.tri` (DSL) or `.tir` (IR text) file into a verified module.
Result<ir::Module> load_module(const std::string& path);

/// The function a command names (docs/cli.md): with --layer L, "L.F" for --function F
/// (default forward; a full name "L.F" is taken as is); else --function as a full name;
/// else the module's only function. Errors: InvalidArgument when several functions exist
/// and none is named; NotFound naming the function and listing the module's (`file`
/// names it).
Result<std::string> pick_function(const ir::Module& m, const std::string& file, const FunctionFlags& flags);

/// The one shape-binding rule of run, compile, opt, tune and bench. `given` holds the
/// --shape keys: "S" or "Layer.S". A key names a symbol of `m` when a function or
/// parameter declaration of layer L has a symbol S and the key is "L.S" or "S"; a function
/// symbol spelled "X.S" (layer X's S, reached through a call) is named by "X.S" or "S".
/// So `--shape N=4` binds every N, including the "BitLinear.N" a calling layer spells,
/// and `--shape BitLinear.N=4` binds BitLinear's only. Returns `given` plus an explicit
/// "X.S" entry for every such function symbol bound through a bare "S" (what
/// specialize_shapes and prepare_run look up). Errors: InvalidArgument for a key that
/// names no symbol of `m`, listing the symbols it has.
Result<ir::ShapeBindings> resolve_shapes(const ir::Module& m, const std::map<std::string, std::int64_t>& given);

/// --shape flags as given (each "M=4,K=64"; repeatable), joined, parsed
/// (ir::parse_shape_list) and resolved against `m` (resolve_shapes).
Result<ir::ShapeBindings> shape_flags(const ir::Module& m, const std::vector<std::string>& flags);

/// "K=64,M=4" (sorted by name), or "-" when empty: how commands print a binding.
std::string shape_text(const std::map<std::string, std::int64_t>& shapes);

/// `ternjit check FILE`: 0 when the file is valid, else prints diagnostics, 1.
int cmd_check(const std::string& file);
/// `ternjit ir FILE`: prints the canonical IR of the file.
int cmd_ir(const std::string& file);
/// `ternjit opt FILE [--passes=a,b | -O LEVEL] ...`: binds --shape symbols, runs the
/// named passes or the level's pipeline (default -O2; `--passes=` runs none), prints the
/// IR to stdout and the requested log (IR after passes, timings) to stderr.
int cmd_opt(const OptOptions& options);
/// `ternjit run ...`: runs a function on the chosen target (`registry`: the CLI's, for
/// the target flags). Without --weights every
/// parameter is drawn from --seed; with --weights each must be in the file (an error names
/// the closest names there) unless --random-missing SEED is given.
int cmd_run(const RunOptions& options, const targets::TargetRegistry& registry);
/// `ternjit demo`: compiles an embedded BitLinear layer, runs it on the reference and
/// checks the output against an independent computation.
int cmd_demo();

/// `ternjit inspect FILE [--json] [--map RULE...]`: the tensors (name, type, dims, bytes,
/// offset) of a GGUF or safetensors file (told apart by content), its metadata, and what
/// parameters bind from it (names after the map, kinds and shapes in ternjit's orientation).
int cmd_inspect(const std::string& file, bool json, const std::vector<std::string>& name_map);

/// `ternjit info [--json]`: prints every registered target (kind, availability or the
/// reason, memory, device, features) and the one `auto` picks, as a table or JSON.
int cmd_info(bool json = false);

/// `ternjit --version`: the version, the build id and every target with its availability.
std::string version_text();

/// Compiles `m` on `engine` into a Program and binds every prepared parameter (ternary
/// ones as their 2-bit tern2 codes, copied once).
Result<Program> compile_and_bind(Engine& engine, const ir::Module& m, const formats::RunInputs& prepared);

/// A function compiled by an Engine for the shapes of prepared inputs, with the buffers of
/// one call: what `run` runs once and `bench` times. Members are destroyed in reverse
/// order, so the program (and its kernel) goes before its engine.
struct PreparedKernel {
  Engine engine;
  Program program;
  std::shared_ptr<const Kernel> kernel;              ///< of `program`
  std::vector<std::vector<std::uint8_t>> arg_bytes;  ///< the inputs' bytes, in argument order
  std::vector<std::vector<std::uint8_t>> out_bytes;  ///< the outputs' bytes, in result order
  std::vector<TensorView> inputs;                    ///< views of arg_bytes
  std::vector<TensorView> outputs;                   ///< views of out_bytes
  std::vector<void*> buffers;                        ///< inputs then outputs: KernelFn's `buffers`
};

/// Creates an Engine with `options`, compiles and binds (compile_and_bind) and fetches the
/// kernel of `function` for the prepared arguments' shapes; the buffers (inputs copied,
/// outputs zeroed) stay within formats::PrepareOptions::max_bytes together, else
/// InvalidInput naming the tensor. Other errors: the engine's.
Result<PreparedKernel> prepare_kernel(const EngineOptions& options, const ir::Module& m, const std::string& function,
                                      const formats::RunInputs& prepared);

/// The output buffers of `pk` as HostTensors.
Result<std::vector<ir::HostTensor>> kernel_outputs(const PreparedKernel& pk);

/// Runs `function` of `m` through an Engine made with `options` once (prepare_kernel,
/// then Kernel::run) and returns the outputs as HostTensors.
Result<std::vector<ir::HostTensor>> run_on_engine(const EngineOptions& options, const ir::Module& m,
                                                  const std::string& function, const formats::RunInputs& prepared);

/// Compares every output with the reference's and says so on stderr: integer (and bool,
/// ternary) outputs must be equal; a float output agrees element-wise when |actual -
/// expected| <= 1e-4 * (|expected| + max|finite expected over the output|), a NaN or an
/// infinity only with its own class (ir::output_tolerance, ir::compare); the absolute
/// tolerance is at least `abs_floor` (the checked target's TargetDescription::abs_error_floor:
/// spirv's flushed subnormals). False on a mismatch (or a different number of outputs).
bool check_outputs(const std::vector<ir::HostTensor>& expected, const std::vector<ir::HostTensor>& actual,
                   double abs_floor = 0);

/// TargetDescription::abs_error_floor of the target `engine` compiles for.
double abs_error_floor(const Engine& engine);

/// Prints an Error to stderr (rendered diagnostics) and returns 1.
int report(const Error& e);

}  // namespace ternjit::cli
