// SPDX-License-Identifier: Apache-2.0
// ir.cpp - op tables from ops.def, Function/Module storage and type helpers.
#include "ir/ir.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <type_traits>
#include <utility>

namespace ternjit::ir {

namespace {

struct OpInfo {
  std::string_view name;
  int operands;
  int results;
  OpFlags flags;
  AttrsKind attrs;
  OpCategory category;
};

constexpr OpFlags Pure = OpFlags::Pure;
constexpr OpFlags Effect = OpFlags::Effect;
constexpr OpFlags Term = OpFlags::Term;

// The AttrsKind of an attribute struct: its position in Attrs.
template <class T, class... Alts>
constexpr AttrsKind kind_in(const std::variant<Alts...>*) {
  std::size_t i = 0;
  (void)((std::is_same_v<T, Alts> || (++i, false)) || ...);
  return static_cast<AttrsKind>(i);
}
template <class T>
constexpr AttrsKind kAttrsKindOf = kind_in<T>(static_cast<const Attrs*>(nullptr));

// The enumerators name the alternatives in order (code switching on AttrsKind then
// std::get's the struct the enumerator names).
static_assert(std::variant_size_v<Attrs> == static_cast<std::size_t>(AttrsKind::Attention) + 1);
static_assert(kAttrsKindOf<NoAttrs> == AttrsKind::None && kAttrsKindOf<ConstAttrs> == AttrsKind::Const &&
              kAttrsKindOf<ParamAttrs> == AttrsKind::Param && kAttrsKindOf<CallAttrs> == AttrsKind::Call &&
              kAttrsKindOf<CastAttrs> == AttrsKind::Cast && kAttrsKindOf<PermAttrs> == AttrsKind::Perm &&
              kAttrsKindOf<AxisAttrs> == AttrsKind::Axis && kAttrsKindOf<EpsAttrs> == AttrsKind::Eps &&
              kAttrsKindOf<ThresholdAttrs> == AttrsKind::Threshold &&
              kAttrsKindOf<TMatMulAttrs> == AttrsKind::TMatMul && kAttrsKindOf<EwiseAttrs> == AttrsKind::Ewise &&
              kAttrsKindOf<SteAttrs> == AttrsKind::Ste &&
              kAttrsKindOf<SliceAttrs> == AttrsKind::Slice && kAttrsKindOf<RopeAttrs> == AttrsKind::Rope &&
              kAttrsKindOf<LayerAttrs> == AttrsKind::Layer && kAttrsKindOf<AttentionAttrs> == AttrsKind::Attention);

constexpr OpInfo kOpInfo[] = {
#define TERNJIT_OP(name, mnemonic, nops, nres, flags, attrs, category) \
  {mnemonic, nops, nres, flags, kAttrsKindOf<attrs>, OpCategory::category},
#include "ir/ops.def"
#undef TERNJIT_OP
};

constexpr Op kAllOps[] = {
#define TERNJIT_OP(name, mnemonic, nops, nres, flags, attrs, category) Op::name,
#include "ir/ops.def"
#undef TERNJIT_OP
};

const OpInfo& info(Op op) { return kOpInfo[static_cast<std::size_t>(op)]; }

}  // namespace

std::string_view op_name(Op op) { return info(op).name; }
int op_num_operands(Op op) { return info(op).operands; }
int op_num_results(Op op) { return info(op).results; }
OpFlags op_flags(Op op) { return info(op).flags; }
OpCategory op_category(Op op) { return info(op).category; }
AttrsKind attrs_kind(Op op) { return info(op).attrs; }
std::span<const Op> all_ops() { return kAllOps; }

std::optional<Op> parse_op(std::string_view mnemonic) {
  for (Op op : kAllOps)
    if (info(op).name == mnemonic) return op;
  return std::nullopt;
}

bool is_ewise_step_op(Op op) {
  const OpCategory c = op_category(op);
  return c == OpCategory::Binary || c == OpCategory::Unary || c == OpCategory::Activation;
}

bool is_ewise_binary(Op op) { return op_category(op) == OpCategory::Binary; }

// ---------------------------------------------------------------- enums

namespace {

constexpr std::pair<Activation, std::string_view> kActivationNames[] = {
    {Activation::None, "none"}, {Activation::Relu, "relu"},       {Activation::Gelu, "gelu"},
    {Activation::Silu, "silu"}, {Activation::Sigmoid, "sigmoid"}, {Activation::Tanh, "tanh"},
};

}  // namespace

std::string_view activation_name(Activation act) {
  for (const auto& [a, n] : kActivationNames)
    if (a == act) return n;
  return "?";
}

std::optional<Activation> parse_activation(std::string_view name) {
  for (const auto& [a, n] : kActivationNames)
    if (n == name) return a;
  return std::nullopt;
}

std::string_view rope_mode_name(RopeMode mode) { return mode == RopeMode::Neox ? "neox" : "norm"; }

std::optional<RopeMode> parse_rope_mode(std::string_view name) {
  if (name == "norm") return RopeMode::Norm;
  if (name == "neox") return RopeMode::Neox;
  return std::nullopt;
}

std::optional<Op> activation_op(Activation act) {
  switch (act) {
    case Activation::None: return std::nullopt;
    case Activation::Relu: return Op::Relu;
    case Activation::Gelu: return Op::Gelu;
    case Activation::Silu: return Op::Silu;
    case Activation::Sigmoid: return Op::Sigmoid;
    case Activation::Tanh: return Op::Tanh;
  }
  return std::nullopt;
}

std::optional<Activation> activation_of(Op op) {
  switch (op) {
    case Op::Relu: return Activation::Relu;
    case Op::Gelu: return Activation::Gelu;
    case Op::Silu: return Activation::Silu;
    case Op::Sigmoid: return Activation::Sigmoid;
    case Op::Tanh: return Activation::Tanh;
    default: return std::nullopt;
  }
}

// ---------------------------------------------------------------- Type

bool Type::is_static() const {
  return std::all_of(shape.begin(), shape.end(), [](const Dim& d) { return d.is_static(); });
}

std::optional<std::int64_t> Type::static_numel() const {
  if (!is_static()) return std::nullopt;
  return static_dims_product(*this);
}

std::optional<std::int64_t> mul_extents(std::int64_t a, std::int64_t b) {
  std::int64_t p = 0;
  if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &p) || p > kMaxElements) return std::nullopt;
  return p;
}

std::optional<std::int64_t> static_dims_product(const Type& t) {
  std::int64_t n = 1;
  for (const Dim& d : t.shape) {
    if (!d.is_static()) continue;
    auto p = mul_extents(n, d.extent);
    if (!p) return std::nullopt;
    n = *p;
  }
  return n;
}

std::string too_large(const Type& t, std::span<const std::string> symbols) {
  if (static_dims_product(t)) return {};
  return "type " + type_str(t, symbols) + " has more than 2^60 elements";
}

std::string type_str(const Type& t, std::span<const std::string> symbols) {
  std::string s(elem_name(t.elem));
  if (t.layout != WeightFormat::Plain) s += "<" + std::string(weight_format_name(t.layout)) + ">";
  s += '[';
  for (std::size_t i = 0; i < t.shape.size(); ++i) {
    if (i) s += ", ";
    const Dim& d = t.shape[i];
    if (d.is_static()) s += std::to_string(d.extent);
    else if (d.sym.index < symbols.size()) s += symbols[d.sym.index];
    else s += "?" + std::to_string(d.sym.index);
  }
  s += ']';
  return s;
}

bool same_type(const Type& a, std::span<const std::string> sa, const Type& b,
               std::span<const std::string> sb) {
  if (a.elem != b.elem || a.layout != b.layout || a.shape.size() != b.shape.size()) return false;
  for (std::size_t i = 0; i < a.shape.size(); ++i) {
    const Dim& x = a.shape[i];
    const Dim& y = b.shape[i];
    if (x.is_static() != y.is_static()) return false;
    if (x.is_static()) {
      if (x.extent != y.extent) return false;
    } else if (x.sym.index >= sa.size() || y.sym.index >= sb.size() ||
               sa[x.sym.index] != sb[y.sym.index]) {
      return false;
    }
  }
  return true;
}

Type import_type(const Type& t, std::span<const std::string> from, Function& f) {
  Type out = t;
  for (Dim& d : out.shape)
    if (!d.is_static()) d = Dim::symbolic(f.symbol(from[d.sym.index]));
  return out;
}

// ---------------------------------------------------------------- constraints

bool satisfies(std::int64_t x, const Constraint& c) {
  switch (c.kind) {
    case Constraint::Kind::MultipleOf: return c.value > 0 && x % c.value == 0;
    case Constraint::Kind::AtLeast: return x >= c.value;
    case Constraint::Kind::AtMost: return x <= c.value;
    case Constraint::Kind::Equals: return x == c.value;
  }
  return false;
}

std::string constraint_str(const Constraint& c, std::string_view symbol) {
  const std::string s(symbol);
  const std::string v = std::to_string(c.value);
  switch (c.kind) {
    case Constraint::Kind::MultipleOf: return s + " % " + v + " == 0";
    case Constraint::Kind::AtLeast: return s + " >= " + v;
    case Constraint::Kind::AtMost: return s + " <= " + v;
    case Constraint::Kind::Equals: return s + " == " + v;
  }
  return s;
}

// ---------------------------------------------------------------- Function

std::optional<SymbolId> Function::find_symbol(std::string_view name) const {
  for (std::size_t i = 0; i < symbols_.size(); ++i)
    if (symbols_[i] == name) return SymbolId(static_cast<std::uint32_t>(i));
  return std::nullopt;
}

SymbolId Function::symbol(std::string_view name) {
  if (auto s = find_symbol(name)) return *s;
  symbols_.emplace_back(name);
  return SymbolId(static_cast<std::uint32_t>(symbols_.size() - 1));
}

SymbolId Function::add_symbol(std::string name) {
  symbols_.push_back(std::move(name));
  return SymbolId(static_cast<std::uint32_t>(symbols_.size() - 1));
}

std::span<const ValueId> Function::args() const {
  if (layout_.empty()) return {};
  return blocks_.at(layout_[0].index).args;
}

BlockId Function::add_block(std::string name) {
  BlockId id(static_cast<std::uint32_t>(blocks_.size()));
  blocks_.push_back(BlockData{std::move(name), {}, {}});
  layout_.push_back(id);
  return id;
}

ValueId Function::add_block_arg(BlockId b, Type type, std::string name) {
  ValueId v(static_cast<std::uint32_t>(values_.size()));
  BlockData& bd = blocks_.at(b.index);
  values_.push_back(ValueData{std::move(type), std::move(name), ValueDef::BlockArg, InstId{}, b,
                              static_cast<std::uint32_t>(bd.args.size())});
  bd.args.push_back(v);
  return v;
}

InstId Function::make_inst(BlockId b, Op op, std::vector<ValueId> operands,
                           std::vector<Type> result_types, Attrs attrs, SourceLoc loc,
                           std::vector<BlockCall> targets) {
  InstId id(static_cast<std::uint32_t>(insts_.size()));
  InstData data;
  data.op = op;
  data.operands = std::move(operands);
  data.attrs = std::move(attrs);
  // The quantizers' attributes are all optional: NoAttrs stands for their defaults.
  if (attrs_kind(op) == AttrsKind::Ste && std::holds_alternative<NoAttrs>(data.attrs)) data.attrs = SteAttrs{};
  data.targets = std::move(targets);
  data.loc = std::move(loc);
  data.block = b;
  for (std::size_t r = 0; r < result_types.size(); ++r) {
    ValueId v(static_cast<std::uint32_t>(values_.size()));
    values_.push_back(ValueData{std::move(result_types[r]), {}, ValueDef::InstResult, id, BlockId{},
                                static_cast<std::uint32_t>(r)});
    data.results.push_back(v);
  }
  insts_.push_back(std::move(data));
  return id;
}

InstId Function::append_inst(BlockId b, Op op, std::vector<ValueId> operands,
                             std::vector<Type> result_types, Attrs attrs, SourceLoc loc,
                             std::vector<BlockCall> targets) {
  InstId id = make_inst(b, op, std::move(operands), std::move(result_types), std::move(attrs),
                        std::move(loc), std::move(targets));
  blocks_.at(b.index).insts.push_back(id);
  return id;
}

InstId Function::insert_inst_before(InstId before, Op op, std::vector<ValueId> operands,
                                    std::vector<Type> result_types, Attrs attrs, SourceLoc loc) {
  BlockId b = insts_.at(before.index).block;
  TERNJIT_CHECK(b.valid(), "insert_inst_before: anchor instruction is erased");
  InstId id = make_inst(b, op, std::move(operands), std::move(result_types), std::move(attrs),
                        std::move(loc), {});
  auto& order = blocks_.at(b.index).insts;
  order.insert(std::find(order.begin(), order.end(), before), id);
  return id;
}

void Function::erase_inst(InstId i) {
  InstData& d = insts_.at(i.index);
  if (d.erased) return;
  auto& order = blocks_.at(d.block.index).insts;
  order.erase(std::remove(order.begin(), order.end(), i), order.end());
  d.erased = true;
  d.block = BlockId{};
}

void Function::erase_insts(std::span<const InstId> insts) {
  std::vector<BlockId> touched;
  for (InstId i : insts) {
    InstData& d = insts_.at(i.index);
    if (d.erased) continue;
    touched.push_back(d.block);
    d.erased = true;
    d.block = BlockId{};
  }
  std::sort(touched.begin(), touched.end());
  touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
  for (BlockId b : touched) {
    auto& order = blocks_.at(b.index).insts;
    order.erase(std::remove_if(order.begin(), order.end(), [&](InstId i) { return insts_[i.index].erased; }),
                order.end());
  }
}

void Function::erase_block(BlockId b) { erase_blocks({&b, 1}); }

void Function::erase_blocks(std::span<const BlockId> blocks) {
  std::vector<char> gone(blocks_.size(), 0);
  for (BlockId b : blocks) {
    TERNJIT_CHECK(!layout_.empty() && layout_[0] != b, "erase_block: cannot erase the entry block");
    for (InstId i : blocks_.at(b.index).insts) {
      insts_.at(i.index).erased = true;
      insts_.at(i.index).block = BlockId{};
    }
    blocks_.at(b.index).insts.clear();
    gone[b.index] = 1;
  }
  layout_.erase(std::remove_if(layout_.begin(), layout_.end(), [&](BlockId b) { return gone[b.index] != 0; }),
                layout_.end());
}

void Function::replace_all_uses(ValueId from, ValueId to) {
  for (InstData& d : insts_) {
    if (d.erased) continue;
    for (ValueId& v : d.operands)
      if (v == from) v = to;
    for (BlockCall& c : d.targets)
      for (ValueId& v : c.args)
        if (v == from) v = to;
  }
}

void Function::replace_uses(std::span<const ValueId> with) {
  auto resolve = [&](ValueId v) {
    while (v.index < with.size() && with[v.index].valid()) v = with[v.index];
    return v;
  };
  for (InstData& d : insts_) {
    if (d.erased) continue;
    for (ValueId& v : d.operands) v = resolve(v);
    for (BlockCall& c : d.targets)
      for (ValueId& v : c.args) v = resolve(v);
  }
}

std::optional<InstId> Function::terminator(BlockId b) const {
  const auto& order = blocks_.at(b.index).insts;
  if (order.empty() || !is_terminator(insts_.at(order.back().index).op)) return std::nullopt;
  return order.back();
}

// ---------------------------------------------------------------- Module

const Function* Module::find_function(std::string_view name) const {
  for (const Function& f : functions_)
    if (f.name() == name) return &f;
  return nullptr;
}

Function* Module::find_function(std::string_view name) {
  for (Function& f : functions_)
    if (f.name() == name) return &f;
  return nullptr;
}

const ParamDecl* Module::find_param(std::string_view name) const {
  for (const ParamDecl& p : params_)
    if (p.name == name) return &p;
  return nullptr;
}

void check_failed(const char* cond, const char* file, int line, const std::string& msg) {
  std::fprintf(stderr, "ternjit internal error: %s:%d: check '%s' failed: %s\n", file, line, cond,
               msg.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace ternjit::ir
