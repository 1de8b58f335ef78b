// SPDX-License-Identifier: Apache-2.0
// builder.h - internal IR builder: creates type-checked instructions in a Function.
#pragma once

#include <string>
#include <vector>

#include "ir/infer_type.h"
#include "ir/ir.h"

namespace ternjit::ir {

/// Appends instructions to a block of `f`, inferring and checking result types with
/// infer_types. Every failure is an InvalidInput Error with one Diagnostic located at
/// the `loc` passed in (the caller's DSL position or C++ source line).
/// The module must outlive the builder; `f` must be an element of m.functions() or a
/// function that will be added to `m` (param/call look-ups go through `m`).
class Builder {
 public:
  Builder(const Module& m, Function& f) : m_(m), f_(f) {}

  /// Sets the block new instructions are appended to.
  void set_block(BlockId b) { block_ = b; }
  [[nodiscard]] BlockId block() const { return block_; }
  [[nodiscard]] Function& function() { return f_; }

  /// Creates `op` on `operands`; returns all its results. For an op whose attributes are
  /// all optional (SteAttrs: the quantizers), NoAttrs{} means the defaults.
  Result<std::vector<ValueId>> create(Op op, std::vector<ValueId> operands, Attrs attrs = NoAttrs{},
                                      std::vector<Type> declared = {}, SourceLoc loc = {},
                                      std::vector<BlockCall> targets = {});
  /// Like create, for ops with exactly one result.
  Result<ValueId> create1(Op op, std::vector<ValueId> operands, Attrs attrs = NoAttrs{},
                          std::vector<Type> declared = {}, SourceLoc loc = {});
  /// A constant of `type`; one value is a splat. Values are rounded to the kind.
  Result<ValueId> constant(Type type, std::vector<double> values, SourceLoc loc = {});
  /// Reads module parameter `name` (its type is imported into f's symbols).
  Result<ValueId> param(const std::string& name, SourceLoc loc = {});

 private:
  const Module& m_;
  Function& f_;
  BlockId block_;
};

/// Rounds `v` to a value exactly representable in `k` (f32/f16/bf16 round to nearest
/// even; integer kinds round half to even and saturate; t2 clamps to [-1, 1];
/// bool is v != 0). NaN stays NaN for floats and becomes 0 for integers.
double round_to_kind(double v, ElemKind k);

}  // namespace ternjit::ir
