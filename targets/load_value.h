// SPDX-License-Identifier: Apache-2.0
// load_value.h - a load-time value of a CPU plan (x86 plans, LLVM programs): a bound parameter
// in its stored form, or a value computed at load. Header-only, like cpu_buffers.h.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ir/interpret.h"
#include "ir/ir.h"
#include "ir/stored_tensor.h"
#include "ir/tensor.h"
#include "targets/common/step_plan.h"
#include "ternjit/result.h"

namespace ternjit::targets {

/// A value known when a kernel is loaded: a parameter kept in its stored form (sharing
/// the bound bytes, never widened) or a value computed by the interpreter at load.
struct LoadValue {
  std::optional<ir::StoredTensor> stored;  ///< a parameter (or zeros standing for one)
  ir::HostTensor computed;                 ///< otherwise

  /// Parameter `name`, read by `f` as type `t` (static), from `params`. An unbound
  /// parameter reads as zeros when `zeros_for_missing` (code that is only described or
  /// emitted). Errors (InvalidInput): no value, or a value of another kind or shape.
  static Result<LoadValue> param(const ir::ParamValues& params, const std::string& name, const ir::Function& f,
                                 const ir::Type& t, bool zeros_for_missing) {
    std::vector<std::int64_t> shape;
    for (const ir::Dim& d : t.shape) shape.push_back(d.extent);
    auto it = params.values.find(name);
    if (it == params.values.end()) {
      if (!zeros_for_missing) return make_error(ErrorCode::InvalidInput, "parameter '" + name + "' has no value");
      return LoadValue{ir::StoredTensor::zeros(t.elem, std::move(shape)), {}};
    }
    if (it->second.kind() != t.elem || it->second.shape() != shape)
      return make_error(ErrorCode::InvalidInput, "parameter '" + name + "' is " + it->second.describe() +
                                                     " but the function reads it as " + ir::type_str(t, f.symbols()));
    return LoadValue{it->second, {}};
  }

  /// The value as a HostTensor (a parameter is decoded: for load-time evaluation).
  [[nodiscard]] ir::HostTensor tensor() const { return stored ? stored->to_host() : computed; }
  /// The bytes a kernel reads (the HostTensor::to_bytes layout).
  [[nodiscard]] std::vector<std::uint8_t> encoded() const { return stored ? stored->to_bytes() : computed.to_bytes(); }
  /// The row-major extents.
  [[nodiscard]] const std::vector<std::int64_t>& shape() const { return stored ? stored->shape() : computed.shape; }
  /// Elements [first, first + out.size()) as int8: a row of a t2 or i8 weight, decoded
  /// from the stored codes or bytes (a computed value's elements are converted).
  void read_int8(std::size_t first, std::span<std::int8_t> out) const {
    if (stored && (stored->kind() == ElemKind::T2 || stored->kind() == ElemKind::I8)) {
      stored->read_int8(first, out);
      return;
    }
    for (std::size_t j = 0; j < out.size(); ++j)
      out[j] = static_cast<std::int8_t>(stored ? stored->at(first + j) : computed.data[first + j]);
  }
};

/// Extends `needed` (by load-time index; resized to plan.load_time.size()) to everything
/// the marked values are computed from and to the other results of their instructions.
void close_load_time_needs(const ir::Function& f, const StepPlan& plan, std::vector<bool>& needed);

/// Evaluates `plan.load_time` of `f` in order: a parameter is taken from `params`
/// (LoadValue::param, zeros for a missing one when `zeros_for_missing`), a pure op by the
/// interpreter on the values before it. Entry k is the value of Slot{Const, k}. With
/// `needed` (the values a target reads), only those and what they are computed from are
/// evaluated (`needed` is closed by close_load_time_needs; the other entries stay empty), so
/// a value no step reads - the transpose of a head matrix read as stored - is never built.
/// Errors: as LoadValue::param, and the interpreter's.
Result<std::vector<LoadValue>> evaluate_load_time(const ir::Function& f, const StepPlan& plan,
                                                  const ir::ParamValues& params, bool zeros_for_missing,
                                                  std::vector<bool>* needed = nullptr);

}  // namespace ternjit::targets
