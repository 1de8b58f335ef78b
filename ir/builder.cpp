// SPDX-License-Identifier: Apache-2.0
// builder.cpp - internal IR builder with type inference and located errors.
#include "ir/builder.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "ir/numeric.h"

namespace ternjit::ir {

namespace {

// Rounds a double to float with round-to-odd: exact when representable, otherwise the
// float toward zero with its last significand bit forced to 1. Rounding that result
// again, to nearest-even, into a format with at least 2 fewer significand bits (f16:
// 11, bf16: 8, float: 24) gives the correctly rounded result: no double-rounding error
// (Boldo & Melquiond, "When double rounding is odd", 2005).
float round_to_odd_float(double v) {
  if (std::isnan(v)) return static_cast<float>(v);
  if (std::fabs(v) > static_cast<double>(std::numeric_limits<float>::max()))
    return v > 0 ? std::numeric_limits<float>::infinity() : -std::numeric_limits<float>::infinity();
  float f = static_cast<float>(v);
  if (static_cast<double>(f) == v) return f;
  if (std::fabs(static_cast<double>(f)) > std::fabs(v)) f = std::nextafter(f, 0.0f);
  std::uint32_t bits = 0;
  std::memcpy(&bits, &f, sizeof bits);
  bits |= 1u;
  std::memcpy(&f, &bits, sizeof bits);
  return f;
}

}  // namespace

double round_to_kind(double v, ElemKind k) {
  auto int_range = [&](double lo, double hi) {
    if (std::isnan(v)) return 0.0;
    double r = std::nearbyint(v);  // default rounding mode: half to even
    return r < lo ? lo : (r > hi ? hi : r);
  };
  switch (k) {
    case ElemKind::F32: return static_cast<double>(static_cast<float>(v));
    case ElemKind::F16: return static_cast<double>(round_to_f16(round_to_odd_float(v)));
    case ElemKind::BF16: return static_cast<double>(round_to_bf16(round_to_odd_float(v)));
    case ElemKind::I32: return int_range(-2147483648.0, 2147483647.0);
    case ElemKind::I8: return int_range(-128.0, 127.0);
    case ElemKind::U8: return int_range(0.0, 255.0);
    case ElemKind::T2: return int_range(-1.0, 1.0);
    case ElemKind::Bool: return (v != 0 && !std::isnan(v)) ? 1.0 : 0.0;
  }
  return v;
}

Result<std::vector<ValueId>> Builder::create(Op op, std::vector<ValueId> operands, Attrs attrs,
                                             std::vector<Type> declared, SourceLoc loc,
                                             std::vector<BlockCall> targets) {
  TERNJIT_CHECK(block_.valid(), "Builder::create without a block");
  // The quantizers' attributes are all optional: NoAttrs stands for their defaults (as
  // in Function::append_inst).
  if (attrs_kind(op) == AttrsKind::Ste && std::holds_alternative<NoAttrs>(attrs)) attrs = SteAttrs{};
  std::vector<Type> types;
  types.reserve(operands.size());
  for (ValueId v : operands) {
    if (!v.valid() || v.index >= f_.num_values())
      return make_located_error(loc, "'" + std::string(op_name(op)) + "' operand is not a value");
    types.push_back(f_.type_of(v));
  }
  auto inferred = infer_types(&m_, f_, op, types, attrs, declared);
  if (!inferred.ok()) return make_located_error(loc, inferred.error().message);
  InstId i = f_.append_inst(block_, op, std::move(operands), std::move(inferred.value()),
                            std::move(attrs), std::move(loc), std::move(targets));
  return f_.inst(i).results;
}

Result<ValueId> Builder::create1(Op op, std::vector<ValueId> operands, Attrs attrs,
                                 std::vector<Type> declared, SourceLoc loc) {
  SourceLoc where = loc;
  TERNJIT_TRY(auto results, create(op, std::move(operands), std::move(attrs), std::move(declared),
                                   std::move(loc)));
  if (results.size() != 1)
    return make_located_error(where, "'" + std::string(op_name(op)) + "' has " +
                                         std::to_string(results.size()) + " results, expected 1");
  return results[0];
}

Result<ValueId> Builder::constant(Type type, std::vector<double> values, SourceLoc loc) {
  for (double& v : values) v = round_to_kind(v, type.elem);
  return create1(Op::Const, {}, ConstAttrs{std::move(values)}, {std::move(type)}, std::move(loc));
}

Result<ValueId> Builder::param(const std::string& name, SourceLoc loc) {
  const ParamDecl* d = m_.find_param(name);
  if (!d) return make_located_error(loc, "unknown parameter @" + name);
  Type t = import_type(d->type, d->symbols, f_);
  return create1(Op::Param, {}, ParamAttrs{name}, {std::move(t)}, std::move(loc));
}

}  // namespace ternjit::ir
