// SPDX-License-Identifier: Apache-2.0
// module_api.cpp - the public Module handle and the C++ ModuleBuilder/FunctionBuilder.
#include <algorithm>

#include "ir/builder.h"
#include "ir/dsl/dsl.h"
#include "ir/module_impl.h"
#include "ir/parse.h"
#include "ir/print.h"
#include "ir/verify.h"

namespace ternjit {

// ---------------------------------------------------------------- Module

Module::Module(std::unique_ptr<detail::ModuleImpl> impl) : impl_(std::move(impl)) {}
Module::Module(Module&&) noexcept = default;
Module& Module::operator=(Module&&) noexcept = default;
Module::~Module() = default;

std::string Module::to_text() const { return ir::print_module(impl_->module); }

Result<Module> Module::from_text(std::string_view text, std::string_view file_name) {
  TERNJIT_TRY(auto m, ir::parse_module(text, file_name));
  return ir::wrap(std::move(m));
}

Result<Module> Module::from_tri(std::string_view source, std::string_view file_name) {
  TERNJIT_TRY(auto m, dsl::compile_tri(source, file_name));
  return ir::wrap(std::move(m));
}

// ---------------------------------------------------------------- builders

namespace detail {

SourceLoc to_loc(const std::source_location& l) {
  return SourceLoc{l.file_name(), static_cast<std::uint32_t>(l.line()),
                   static_cast<std::uint32_t>(l.column() ? l.column() : 1)};
}

struct BuilderImpl {
  ir::Module module;
  std::optional<Error> first_error;
  std::vector<bool> finished;  // per function: ret seen

  void record(Error e) {
    if (!first_error) first_error = std::move(e);
  }
  void record(const std::source_location& loc, std::string msg) {
    record(make_located_error(to_loc(loc), std::move(msg)));
  }

  ir::Function& fn(std::uint32_t f) { return module.functions().at(f); }

  std::optional<ir::ValueId> get(std::uint32_t f, Value v) {
    if (!v.valid() || v.id >= fn(f).num_values()) return std::nullopt;
    return ir::ValueId(v.id);
  }

  // Creates an op on already-valid operands; records the first error.
  std::vector<Value> make(std::uint32_t f, ir::Op op, const std::vector<Value>& operands,
                          ir::Attrs attrs, const std::source_location& loc,
                          std::vector<ir::Type> declared = {}) {
    if (finished.at(f)) {
      record(loc, "function @" + fn(f).name() + " already returned");
      return {};
    }
    std::vector<ir::ValueId> ids;
    for (Value v : operands) {
      auto id = get(f, v);
      if (!id) return {};  // an earlier failure produced `v`: already recorded
      ids.push_back(*id);
    }
    ir::Builder b(module, fn(f));
    b.set_block(fn(f).entry());
    auto r = b.create(op, std::move(ids), std::move(attrs), std::move(declared), to_loc(loc));
    if (!r.ok()) {
      record(std::move(r).error());
      return {};
    }
    std::vector<Value> out;
    for (ir::ValueId v : r.value()) out.push_back(Value{v.index});
    return out;
  }

  Value make1(std::uint32_t f, ir::Op op, const std::vector<Value>& operands, ir::Attrs attrs,
              const std::source_location& loc) {
    auto r = make(f, op, operands, std::move(attrs), loc);
    return r.size() == 1 ? r[0] : Value{};
  }

  // Normalizes a possibly negative axis against the rank of `x`.
  std::optional<std::int64_t> axis(std::uint32_t f, Value x, int axis,
                                   const std::source_location& loc) {
    auto id = get(f, x);
    if (!id) return std::nullopt;
    auto rank = static_cast<std::int64_t>(fn(f).type_of(*id).rank());
    std::int64_t a = axis < 0 ? axis + rank : axis;
    if (a < 0 || a >= rank) {
      record(loc, "axis " + std::to_string(axis) + " is out of range for rank " +
                      std::to_string(rank));
      return std::nullopt;
    }
    return a;
  }

  ir::Type to_type(ir::Function& f, ElemKind kind, const Shape& shape) {
    ir::Type t{kind, {}};
    for (const Dim& d : shape)
      t.shape.push_back(d.is_static() ? ir::Dim::fixed(d.extent) : ir::Dim::symbolic(f.symbol(d.symbol)));
    return t;
  }
};

}  // namespace detail

ModuleBuilder::ModuleBuilder() : impl_(std::make_unique<detail::BuilderImpl>()) {}
ModuleBuilder::~ModuleBuilder() = default;

void ModuleBuilder::param(const std::string& name, ElemKind kind, const Shape& shape,
                          std::source_location loc) {
  if (impl_->module.find_param(name)) {
    impl_->record(loc, "parameter @" + name + " is already declared");
    return;
  }
  ir::ParamDecl d;
  d.name = name;
  d.type.elem = kind;
  d.loc = detail::to_loc(loc);
  for (const Dim& dim : shape) {
    if (dim.is_static()) {
      if (dim.extent < 0) impl_->record(loc, "parameter @" + name + " has a negative dim");
      d.type.shape.push_back(ir::Dim::fixed(dim.extent));
      continue;
    }
    auto it = std::find(d.symbols.begin(), d.symbols.end(), dim.symbol);
    if (it == d.symbols.end()) it = d.symbols.insert(d.symbols.end(), dim.symbol);
    d.type.shape.push_back(ir::Dim::symbolic(ir::SymbolId(static_cast<std::uint32_t>(it - d.symbols.begin()))));
  }
  impl_->module.params().push_back(std::move(d));
}

FunctionBuilder ModuleBuilder::function(const std::string& name, std::source_location loc) {
  if (impl_->module.find_function(name)) impl_->record(loc, "function @" + name + " is already defined");
  ir::Function f(name);
  f.set_loc(detail::to_loc(loc));
  f.add_block();
  impl_->module.functions().push_back(std::move(f));
  impl_->finished.push_back(false);
  return FunctionBuilder(impl_.get(), static_cast<std::uint32_t>(impl_->module.functions().size() - 1));
}

Result<Module> ModuleBuilder::finish(std::source_location loc) {
  auto impl = std::exchange(impl_, std::make_unique<detail::BuilderImpl>());
  if (impl->first_error) return std::move(*impl->first_error);
  for (std::size_t i = 0; i < impl->finished.size(); ++i)
    if (!impl->finished[i])
      return make_located_error(detail::to_loc(loc), "function @" + impl->fn(static_cast<std::uint32_t>(i)).name() +
                                                         " has no 'ret'");
  TERNJIT_TRY_VOID(ir::verify_or_error(impl->module));
  return ir::wrap(std::move(impl->module));
}

// ---------------------------------------------------------------- FunctionBuilder

using ir::Op;

Value FunctionBuilder::arg(const std::string& name, ElemKind kind, const Shape& shape, Loc loc) {
  ir::Function& f = b_->fn(f_);
  if (!f.insts(f.entry()).empty()) {
    b_->record(loc, "argument '" + name + "' declared after the first instruction");
    return {};
  }
  for (ir::ValueId a : f.args())
    if (f.value(a).name == name) {
      b_->record(loc, "argument '" + name + "' is already declared");
      return {};
    }
  ir::Type t = b_->to_type(f, kind, shape);
  return Value{f.add_block_arg(f.entry(), std::move(t), name).index};
}

Value FunctionBuilder::param(const std::string& name, Loc loc) {
  ir::Builder b(b_->module, b_->fn(f_));
  b.set_block(b_->fn(f_).entry());
  auto r = b.param(name, detail::to_loc(loc));
  if (!r.ok()) {
    b_->record(std::move(r).error());
    return {};
  }
  return Value{r.value().index};
}

Value FunctionBuilder::constant(double value, ElemKind kind, Loc loc) {
  return constant(std::vector<double>{value}, kind, Shape{}, loc);
}

Value FunctionBuilder::constant(const std::vector<double>& values, ElemKind kind, const Shape& shape,
                                Loc loc) {
  ir::Function& f = b_->fn(f_);
  ir::Builder b(b_->module, f);
  b.set_block(f.entry());
  auto r = b.constant(b_->to_type(f, kind, shape), values, detail::to_loc(loc));
  if (!r.ok()) {
    b_->record(std::move(r).error());
    return {};
  }
  return Value{r.value().index};
}

Value FunctionBuilder::matmul(Value a, Value b, Loc loc) { return b_->make1(f_, Op::MatMul, {a, b}, ir::NoAttrs{}, loc); }
Value FunctionBuilder::add(Value a, Value b, Loc loc) { return b_->make1(f_, Op::Add, {a, b}, ir::NoAttrs{}, loc); }
Value FunctionBuilder::sub(Value a, Value b, Loc loc) { return b_->make1(f_, Op::Sub, {a, b}, ir::NoAttrs{}, loc); }
Value FunctionBuilder::mul(Value a, Value b, Loc loc) { return b_->make1(f_, Op::Mul, {a, b}, ir::NoAttrs{}, loc); }
Value FunctionBuilder::div(Value a, Value b, Loc loc) { return b_->make1(f_, Op::Div, {a, b}, ir::NoAttrs{}, loc); }
Value FunctionBuilder::maximum(Value a, Value b, Loc loc) { return b_->make1(f_, Op::Max, {a, b}, ir::NoAttrs{}, loc); }
Value FunctionBuilder::minimum(Value a, Value b, Loc loc) { return b_->make1(f_, Op::Min, {a, b}, ir::NoAttrs{}, loc); }
Value FunctionBuilder::neg(Value x, Loc loc) { return b_->make1(f_, Op::Neg, {x}, ir::NoAttrs{}, loc); }
Value FunctionBuilder::abs(Value x, Loc loc) { return b_->make1(f_, Op::Abs, {x}, ir::NoAttrs{}, loc); }
Value FunctionBuilder::relu(Value x, Loc loc) { return b_->make1(f_, Op::Relu, {x}, ir::NoAttrs{}, loc); }
Value FunctionBuilder::sigmoid(Value x, Loc loc) { return b_->make1(f_, Op::Sigmoid, {x}, ir::NoAttrs{}, loc); }
Value FunctionBuilder::tanh(Value x, Loc loc) { return b_->make1(f_, Op::Tanh, {x}, ir::NoAttrs{}, loc); }
Value FunctionBuilder::gelu(Value x, Loc loc) { return b_->make1(f_, Op::Gelu, {x}, ir::NoAttrs{}, loc); }
Value FunctionBuilder::silu(Value x, Loc loc) { return b_->make1(f_, Op::Silu, {x}, ir::NoAttrs{}, loc); }
Value FunctionBuilder::exp(Value x, Loc loc) { return b_->make1(f_, Op::Exp, {x}, ir::NoAttrs{}, loc); }
Value FunctionBuilder::log(Value x, Loc loc) { return b_->make1(f_, Op::Log, {x}, ir::NoAttrs{}, loc); }
Value FunctionBuilder::sqrt(Value x, Loc loc) { return b_->make1(f_, Op::Sqrt, {x}, ir::NoAttrs{}, loc); }
Value FunctionBuilder::quantize_int8(Value x, Loc loc) { return b_->make1(f_, Op::QuantizeInt8, {x}, ir::SteAttrs{}, loc); }
Value FunctionBuilder::ternarize_absmean(Value x, Loc loc) {
  return b_->make1(f_, Op::TernarizeAbsmean, {x}, ir::SteAttrs{}, loc);
}
Value FunctionBuilder::dequantize(Value q, Value s, Loc loc) { return b_->make1(f_, Op::Dequantize, {q, s}, ir::NoAttrs{}, loc); }

Value FunctionBuilder::cast(Value x, ElemKind to, Loc loc) {
  return b_->make1(f_, Op::Cast, {x}, ir::CastAttrs{to}, loc);
}

Value FunctionBuilder::ternarize(Value x, double threshold, Loc loc) {
  return b_->make1(f_, Op::Ternarize, {x}, ir::ThresholdAttrs{threshold}, loc);
}

Value FunctionBuilder::transpose(Value x, Loc loc) {
  auto id = b_->get(f_, x);
  if (!id) return {};
  std::vector<std::int64_t> perm(b_->fn(f_).type_of(*id).rank());
  for (std::size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<std::int64_t>(perm.size() - 1 - i);
  return b_->make1(f_, Op::Transpose, {x}, ir::PermAttrs{perm}, loc);
}

Value FunctionBuilder::sum(Value x, int axis, bool keepdims, Loc loc) {
  auto a = b_->axis(f_, x, axis, loc);
  return a ? b_->make1(f_, Op::ReduceSum, {x}, ir::AxisAttrs{*a, keepdims}, loc) : Value{};
}

Value FunctionBuilder::mean(Value x, int axis, bool keepdims, Loc loc) {
  auto a = b_->axis(f_, x, axis, loc);
  return a ? b_->make1(f_, Op::ReduceMean, {x}, ir::AxisAttrs{*a, keepdims}, loc) : Value{};
}

Value FunctionBuilder::max(Value x, int axis, bool keepdims, Loc loc) {
  auto a = b_->axis(f_, x, axis, loc);
  return a ? b_->make1(f_, Op::ReduceMax, {x}, ir::AxisAttrs{*a, keepdims}, loc) : Value{};
}

Value FunctionBuilder::softmax(Value x, int axis, Loc loc) {
  auto a = b_->axis(f_, x, axis, loc);
  return a ? b_->make1(f_, Op::Softmax, {x}, ir::AxisAttrs{*a, false}, loc) : Value{};
}

Value FunctionBuilder::rmsnorm(Value x, Value gamma, double eps, Loc loc) {
  return b_->make1(f_, Op::RmsNorm, {x, gamma}, ir::EpsAttrs{eps}, loc);
}

Value FunctionBuilder::gather(Value table, Value ids, Loc loc) {
  return b_->make1(f_, Op::Gather, {table, ids}, ir::AxisAttrs{0, false}, loc);
}

Value FunctionBuilder::slice(Value x, int axis, std::int64_t start, std::int64_t size, Loc loc) {
  auto a = b_->axis(f_, x, axis, loc);
  return a ? b_->make1(f_, Op::Slice, {x}, ir::SliceAttrs{*a, start, size}, loc) : Value{};
}

Value FunctionBuilder::concat(const std::vector<Value>& xs, int axis, Loc loc) {
  if (xs.empty()) {
    b_->record(loc, "'concat' needs at least one operand");
    return {};
  }
  auto a = b_->axis(f_, xs[0], axis, loc);
  return a ? b_->make1(f_, Op::Concat, xs, ir::AxisAttrs{*a, false}, loc) : Value{};
}

Value FunctionBuilder::layernorm(Value x, Value gamma, Value beta, double eps, Loc loc) {
  return b_->make1(f_, Op::LayerNorm, {x, gamma, beta}, ir::EpsAttrs{eps}, loc);
}

Value FunctionBuilder::rope(Value x, Value pos, double theta, RopeMode mode, Loc loc) {
  const ir::RopeMode m = mode == RopeMode::Neox ? ir::RopeMode::Neox : ir::RopeMode::Norm;
  return b_->make1(f_, Op::Rope, {x, pos}, ir::RopeAttrs{theta, m}, loc);
}

Value FunctionBuilder::causal_softmax(Value x, Value pos, Loc loc) {
  return b_->make1(f_, Op::CausalSoftmax, {x, pos}, ir::NoAttrs{}, loc);
}

Value FunctionBuilder::kv_write(Value cache, Value rows, Value pos, std::int64_t layer, Loc loc) {
  return b_->make1(f_, Op::KvWrite, {cache, rows, pos}, ir::LayerAttrs{layer}, loc);
}

Value FunctionBuilder::attention(Value q, Value k_cache, Value v_cache, Value pos, std::int64_t layer, double scale,
                                 Loc loc) {
  return b_->make1(f_, Op::Attention, {q, k_cache, v_cache, pos}, ir::AttentionAttrs{layer, scale}, loc);
}

std::vector<Value> FunctionBuilder::call(const std::string& function, const std::vector<Value>& args,
                                         Loc loc) {
  return b_->make(f_, Op::Call, args, ir::CallAttrs{function}, loc);
}

void FunctionBuilder::ret(const std::vector<Value>& values, Loc loc) {
  ir::Function& f = b_->fn(f_);
  std::vector<ir::Type> types;
  for (Value v : values) {
    auto id = b_->get(f_, v);
    if (!id) {
      b_->finished.at(f_) = true;  // the failure that made `v` is already recorded
      return;
    }
    types.push_back(f.type_of(*id));
  }
  f.set_result_types(std::move(types));
  b_->make(f_, Op::Ret, values, ir::NoAttrs{}, loc);
  b_->finished.at(f_) = true;
}

}  // namespace ternjit
