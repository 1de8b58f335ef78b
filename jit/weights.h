// SPDX-License-Identifier: Apache-2.0
// weights.h - a program's parameter values: conversion from caller buffers, files and seeds.
//
// Weights are kept as ir::StoredTensors in the declared element kind: ternary values at
// 2 bits each (tern2 codes), other kinds as their raw bytes. Bound from a mapped file,
// they point into the mapping instead of copying it. The interpreter decodes a value
// when a `param` reads it; a target packs its own layout from the stored form once, at
// load, never per call.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ir/interpret.h"
#include "ir/ir.h"
#include "formats/weight_file.h"
#include "ternjit/engine.h"
#include "ternjit/result.h"

namespace ternjit::jit {

/// The binding key of symbol `sym` of a declaration in layer `layer`: "Layer.S", or `sym`
/// itself when it is already qualified ("Other.N", a callee's symbol). The key form
/// passes::specialize_function and ir::ShapeBindings::lookup understand.
std::string symbol_key(std::string_view layer, std::string_view sym);

/// The bound parameters of one program and the symbol extents their shapes fix.
/// Not thread-safe: the Program serializes access.
class Weights {
 public:
  /// Symbol extents by key ("Layer.S", see symbol_key), with the parameter that fixed each.
  using SymbolMap = std::map<std::string, std::pair<std::int64_t, std::string>>;

  /// Weights for the parameters declared in `module` (which must outlive this object).
  explicit Weights(const ir::Module& module) : module_(&module) {}

  /// Binds parameter `name` from a caller buffer (copied once, in its stored form: 2 bits
  /// a value for ternary parameters, which are never widened). Plain: the declared kind
  /// (float parameters also take any float kind, rounded; ternary ones take T2 or I8
  /// values in {-1, 0, 1}); packed formats: U8 bytes of a ternary parameter, `shape`
  /// being the logical shape. Errors (InvalidInput unless noted): NotFound for an unknown
  /// parameter (listing them); InvalidArgument for null data, a negative extent, a kind
  /// or format the declaration does not take; a shape that disagrees with the declaration
  /// or with a symbol another parameter fixed (naming both); a value outside {-1, 0, 1}
  /// or an invalid packed code (naming the index); InvalidArgument when `byte_length` is
  /// given and is not what the shape needs in the format. On error nothing changes.
  Result<void> bind(std::string_view name, const TensorView& value, WeightFormat format,
                    std::optional<std::size_t> byte_length);

  /// Binds every parameter `file` offers a tensor for, by full name ("Layer.p") or, when
  /// only one declared parameter has that short name, by short name ("p"); conversions
  /// as formats::WeightFile (safetensors, GGUF, Hugging Face BitNet). Parameters the file
  /// does not hold stay as they are (bind, another file or bind_random may supply them);
  /// the names it offered and nothing bound are kept for missing_hint. Errors: as bind,
  /// naming the file and tensor; InvalidInput when the file holds none of the
  /// parameters, or a scale would be dropped (WeightFile::check_scales). All or nothing.
  /// Tensors stored as they are in the file share its bytes (a mapping stays alive while
  /// bound parameters point into it).
  Result<void> bind_file(const formats::WeightFile& file);

  /// " (did you mean 'x'?)" naming the tensors of bound files that bound nothing and are
  /// closest to `param`, or "".
  [[nodiscard]] std::string missing_hint(const std::string& param) const;

  /// Binds every unbound parameter to HostTensor::random's values (seed mixed with the
  /// parameter's declaration index), drawn straight into the stored form. Errors (InvalidArgument): a parameter whose shape
  /// has a symbol no bound parameter fixes (naming both). All or nothing.
  Result<void> bind_random(std::uint64_t seed);

  /// The values, by parameter name.
  [[nodiscard]] const ir::ParamValues& values() const { return values_; }
  /// The symbol extents fixed by bound parameters.
  [[nodiscard]] SymbolMap symbols() const { return symbols_except({}); }
  /// True when parameter `name` has a value.
  [[nodiscard]] bool is_bound(const std::string& name) const { return values_.values.count(name) != 0; }

 private:
  // The symbols fixed by every bound parameter not in `skip` (consistent by invariant).
  [[nodiscard]] SymbolMap symbols_except(const std::set<std::string>& skip) const;
  // Checks `shape` (of `what`) against decl and `symbols`, then adds decl's symbols to it.
  Result<void> fit_shape(const ir::ParamDecl& decl, const std::vector<std::int64_t>& shape,
                         const std::string& what, SymbolMap& symbols) const;

  const ir::Module* module_;
  ir::ParamValues values_;
  std::vector<std::string> unused_names_;  // offered by bound files, bound to nothing
};

}  // namespace ternjit::jit
