// SPDX-License-Identifier: Apache-2.0
// small_shapes.h - small symbol values for running IR on random inputs (pass tests, fuzz_pipeline).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "ir/bind.h"

namespace ternjit::testing {

/// A small extent for every symbol of `f` and of the parameters of `m`, satisfying f's
/// constraints (2 unless a constraint says otherwise), keyed by bare symbol name.
inline ir::ShapeBindings small_shapes(const ir::Module& m, const ir::Function& f) {
  ir::ShapeBindings b;
  for (const ir::ParamDecl& p : m.params())
    for (const std::string& s : p.symbols) b.values[s] = 2;
  for (const std::string& s : f.symbols()) b.values[s] = 2;
  for (const ir::Constraint& c : f.constraints()) {
    std::int64_t& v = b.values[f.symbol_name(c.sym)];
    switch (c.kind) {
      case ir::Constraint::Kind::Equals: v = c.value; break;
      case ir::Constraint::Kind::AtLeast: v = std::max(v, c.value); break;
      case ir::Constraint::Kind::AtMost: v = std::min(v, c.value); break;
      case ir::Constraint::Kind::MultipleOf: v = (v + c.value - 1) / c.value * c.value; break;
    }
  }
  return b;
}

}  // namespace ternjit::testing
