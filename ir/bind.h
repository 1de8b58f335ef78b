// SPDX-License-Identifier: Apache-2.0
// bind.h - turn files, shape lists and seeds into the arguments and parameters of a run.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "ir/interpret.h"
#include "ir/ir.h"
#include "ir/safetensors.h"
#include "ir/tensor.h"

namespace ternjit::ir {

/// Concrete values of symbolic dims. Keys are "Layer.S" (one layer's symbol) or a bare
/// "S" (any layer's symbol S that has no layer-specific value). Layers are the part of
/// a function or parameter name before the first '.'.
struct ShapeBindings {
  std::map<std::string, std::int64_t> values;

  /// The value of `symbol` in `layer`, if bound ("Layer.S" first, then "S").
  [[nodiscard]] std::optional<std::int64_t> lookup(std::string_view layer, std::string_view symbol) const;
};

/// Parses "M=4,K=64" (also "BitLinear.K=64"); extents must be positive integers.
Result<ShapeBindings> parse_shape_list(std::string_view text);

/// The layer part of a qualified name ("BitLinear.forward" -> "BitLinear").
std::string_view layer_of(std::string_view qualified_name);

/// "784,10" -> {784, 10} (the `<tensor>.shape` metadata form); "" -> {}; nullopt unless
/// every item is a non-negative integer.
std::optional<std::vector<std::int64_t>> parse_dims(std::string_view text);

/// A per-tensor seed derived from a user seed and a salt (splitmix64 finalizer), so the
/// tensors drawn from one seed are decorrelated and stable across runs.
std::uint64_t derive_seed(std::uint64_t seed, std::uint64_t salt);

/// The arguments and parameters of one run of a function.
struct RunInputs {
  std::vector<HostTensor> args;  ///< in argument order
  ParamValues params;            ///< every parameter f reads (directly or via calls)
  ShapeBindings shapes;          ///< every binding used (given, and derived from files)
};

/// Options of prepare_run.
struct PrepareOptions {
  std::uint64_t seed = 1;           ///< seed of random inputs and parameters
  bool random_missing_inputs = true;  ///< else a missing input is an error
  bool random_missing_params = true;  ///< else a missing parameter is an error
};

/// Prepares a run of `f` in `m`. Arguments come from `inputs` by argument name and
/// parameters from `weights` ("Layer.p", or "p" for the run layer's own), converted to
/// the declared kinds: float declarations take F32/F16/BF16 tensors, integer ones the
/// same integer dtype, a t2 parameter takes I8 values in {-1, 0, 1} or a U8 tensor
/// packed in the format named by metadata "<tensor>.format" (tern2, tern2-sm,
/// tern1.6, bitplane). Symbolic dims bind from `shapes`, then from the files' shapes;
/// a conflict or an unbound dim of a random tensor is an error naming it. Missing
/// tensors are drawn from `seed` unless the options forbid it. `inputs`/`weights`
/// may be null. Errors are InvalidInput with a message naming the tensor.
Result<RunInputs> prepare_run(const Module& m, const Function& f, const StFile* inputs,
                              const StFile* weights, const ShapeBindings& shapes,
                              const PrepareOptions& options);

}  // namespace ternjit::ir
