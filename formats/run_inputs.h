// SPDX-License-Identifier: Apache-2.0
// run_inputs.h - the arguments and parameters of one run, from safetensors files, shapes and seeds.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "formats/safetensors.h"
#include "formats/weight_file.h"
#include "ir/bind.h"
#include "ir/interpret.h"
#include "ir/ir.h"
#include "ir/tensor.h"

namespace ternjit::formats {

/// The arguments and parameters of one run of a function.
struct RunInputs {
  std::vector<ir::HostTensor> args;  ///< in argument order
  ir::ParamValues params;        ///< every parameter f reads (directly or via calls), in their own types
  ir::ShapeBindings shapes;         ///< every binding used (given, and derived from files)
};

/// Options of prepare_run.
struct PrepareOptions {
  std::uint64_t seed = 1;           ///< seed of random inputs and parameters
  /// With an inputs file: draw the arguments it lacks at random (from `inputs_seed`),
  /// else each is an error naming the file's closest tensor names. Without an inputs
  /// file every argument is drawn from `seed` (there is no file to be missing from).
  bool random_missing_inputs = false;
  bool random_missing_params = true;  ///< else a missing parameter is an error naming the closest file names
  /// Seed of random parameters (default: `seed`), e.g. `ternjit run --random-missing SEED`.
  std::optional<std::uint64_t> params_seed;
  /// Seed of the random arguments an inputs file lacks (default: `seed`), e.g. `ternjit
  /// run --random-missing-inputs SEED`.
  std::optional<std::uint64_t> inputs_seed;
  /// The inputs file's name in errors (e.g. its path).
  std::string inputs_name = "the inputs file";
  /// Most elements in one tensor: a larger (or overflowing) shape is an error, so a typo
  /// in a shape binding cannot exhaust memory.
  std::int64_t max_elements = std::int64_t{1} << 31;
  /// Most bytes the prepared tensors may take together: 8 per element of every argument
  /// and of every result (a HostTensor holds doubles) plus the stored bytes of every
  /// random parameter (data from the files is shared or mapped, not counted). The whole
  /// plan is summed (overflow-checked) before anything is allocated, so shapes that pass
  /// max_elements but together exceed memory are one error naming the cap, the total,
  /// its parts and the largest tensor, not std::bad_alloc nor seconds of random filling.
  /// `ternjit run` applies the same cap to the engine's input and output buffers
  /// (tensor_bytes).
  std::uint64_t max_bytes = std::uint64_t{4} << 30;
};

/// Bytes of `numel` elements of `kind` held as `bytes_per_element` (0: the kind's packed
/// size, t2 2 bits), or nullopt when that overflows 64 bits.
std::optional<std::uint64_t> tensor_bytes(ElemKind kind, std::int64_t numel, int bytes_per_element = 0);

/// Prepares a run of `f` in `m`. Arguments come from `inputs` by argument name and
/// parameters from the offers of `weights` ("Layer.p", or "p" for the run layer's own;
/// WeightFile says what a safetensors or GGUF file offers and how each converts):
/// float declarations take float tensors, integer ones the same integer dtype, a t2
/// parameter takes I8 values in {-1, 0, 1}, a U8 tensor packed in the format named by
/// metadata "<tensor>.format" (tern2, tern2-sm, tern1.6, bitplane), a GGUF TQ1_0/TQ2_0
/// tensor, a Hugging Face packed weight or a float master weight (ternarized). A scale
/// the file holds for a bound ternary tensor must bind too unless it is all 1
/// (WeightFile::check_scales). Parameters are kept in their own element type
/// (formats::store_weight): data of the declared kind stays in `weights`'s buffers (for
/// a mapped file, its mapping), not copied. Symbolic dims bind from `shapes`, then from the files' shapes;
/// a conflict or an unbound dim of a random tensor is an error naming it. Without
/// `inputs` every argument is drawn from `seed`; with it an argument it lacks is an
/// error naming the closest tensor names unless options.random_missing_inputs. Missing
/// parameters are drawn from `seed` unless the options forbid it. `inputs`/`weights`
/// may be null. Errors are InvalidInput with a message naming the tensor, also when a
/// tensor exceeds options.max_elements or the tensors together options.max_bytes.
Result<RunInputs> prepare_run(const ir::Module& m, const ir::Function& f, const StFile* inputs,
                              const WeightFile* weights, const ir::ShapeBindings& shapes,
                              const PrepareOptions& options);

}  // namespace ternjit::formats
