// SPDX-License-Identifier: Apache-2.0
// lower_ops.cpp - .tri indexing `x[i]` and the transformer built-ins (slice, split, concat,
// gather, rope, layernorm, causal_softmax, kv_write, attention).
#include <string>
#include <utility>

#include "ir/dsl/lower_internal.h"
#include "ir/print.h"

namespace ternjit::dsl::lower_detail {

std::optional<Val> Lowerer::lower_index(const Expr& e) {
  const Expr& base = e.args[0];
  if (base.kind == ExprKind::Name) {
    auto it = scope_.find(base.name);
    if (it != scope_.end() && it->second.kind == Binding::Kind::Instances) {
      error(e.pos, "an instance of '" + base.name + "' is not a value: use '" + base.name + "[i].p' for a parameter or '" +
                       base.name + "[i](x)' to call it");
      return std::nullopt;
    }
  }
  auto v = lower_any(base);
  if (!v) return std::nullopt;
  auto idx = const_int(e.args[1], "an index");
  if (!idx) return std::nullopt;
  if (v->tuple) {
    const auto n = static_cast<std::int64_t>(v->elems.size());
    const std::int64_t k = *idx < 0 ? *idx + n : *idx;
    if (k < 0 || k >= n) {
      error(e.args[1].pos, "index " + std::to_string(*idx) + " is out of range for a tuple of " + std::to_string(n) +
                               " values");
      return std::nullopt;
    }
    return v->elems[static_cast<std::size_t>(k)];
  }
  if (v->literal) {
    error(e.pos, "cannot index the number " + v->text);
    return std::nullopt;
  }
  const ir::Type t = f_->type_of(v->id);
  if (t.rank() == 0) {
    error(e.pos, "cannot index the scalar " + ir::type_str(t, f_->symbols()));
    return std::nullopt;
  }
  error(e.pos, "indexing a tensor is not available yet");
  return std::nullopt;
}

}  // namespace ternjit::dsl::lower_detail
