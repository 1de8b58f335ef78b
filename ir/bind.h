// SPDX-License-Identifier: Apache-2.0
// bind.h - shape bindings of symbolic dims, qualified names, and seeds derived per tensor.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ternjit/result.h"

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

/// The Levenshtein distance between two names (insertions, deletions and substitutions of
/// one byte each cost 1). O(|a| * |b|) time, O(|b|) memory.
std::size_t edit_distance(std::string_view a, std::string_view b);

/// Up to `max` names of `candidates` closest to `name`, nearest first (ties in candidate
/// order): within max(2, |name| / 4) edits of the whole name, or within max(1, |leaf| / 4)
/// edits of its last dot-separated part (a prefix apart, scored one more). For "did you
/// mean" notes.
std::vector<std::string> closest_names(std::string_view name, const std::vector<std::string>& candidates,
                                       std::size_t max = 3);

/// " (did you mean 'a' or 'b'?)" for closest_names(name, candidates), or "" when none is close.
std::string did_you_mean(std::string_view name, const std::vector<std::string>& candidates);

/// A per-tensor seed derived from a user seed and a salt (splitmix64 finalizer), so the
/// tensors drawn from one seed are decorrelated and stable across runs.
std::uint64_t derive_seed(std::uint64_t seed, std::uint64_t salt);

}  // namespace ternjit::ir
