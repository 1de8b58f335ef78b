// SPDX-License-Identifier: Apache-2.0
// print.cpp - the canonical text printer for modules, functions, instructions and types.
#include "ir/print.h"

#include <charconv>
#include <cmath>
#include <map>
#include <set>

namespace ternjit::ir {

namespace {

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.';
}

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

// A stored name made printable: characters outside [A-Za-z0-9_.] become '_'. A value
// name made of digits only would read back as a number, so it gets a 'v' prefix.
std::string sanitize(std::string_view name, bool is_value) {
  std::string s(name);
  for (char& c : s)
    if (!is_name_char(c)) c = '_';
  if (is_value && all_digits(s)) s.insert(s.begin(), 'v');
  return s;
}

// Hands out unique spellings: the first request for a base gets it, later ones get
// base_1, base_2, ... skipping spellings already taken.
std::string escape(std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (c == '"') out += "\\\"";
    else if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (u < 0x20 || u == 0x7f) {
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string join_values(const FunctionNames& names, std::span<const ValueId> vs) {
  std::string s;
  for (std::size_t i = 0; i < vs.size(); ++i) {
    if (i) s += ", ";
    s += names.value(vs[i]);
  }
  return s;
}

std::string block_call_str(const FunctionNames& names, const BlockCall& c) {
  std::string s = names.block(c.block);
  if (!c.args.empty()) s += "(" + join_values(names, c.args) + ")";
  return s;
}

std::string int_list(const std::vector<std::int64_t>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// The attribute dictionary of an instruction, "" when the op prints none. The fields
// of each alternative print in a fixed order and always (see ir/README.md).
std::string attrs_str(const InstData& d, ElemKind const_kind) {
  struct Visitor {
    const InstData& d;
    ElemKind kind;
    std::string operator()(const NoAttrs&) const { return ""; }
    std::string operator()(const ParamAttrs&) const { return ""; }  // printed as @name
    std::string operator()(const CallAttrs&) const { return ""; }   // printed as @callee
    std::string operator()(const ConstAttrs& c) const {
      if (c.values.size() == 1) return "{value = " + format_value(c.values[0], kind) + "}";
      std::string s = "{values = [";
      for (std::size_t i = 0; i < c.values.size(); ++i)
        s += (i ? ", " : "") + format_value(c.values[i], kind);
      return s + "]}";
    }
    std::string operator()(const CastAttrs& c) const {
      return "{to = " + std::string(elem_name(c.to)) + "}";
    }
    std::string operator()(const PermAttrs& p) const { return "{perm = " + int_list(p.perm) + "}"; }
    std::string operator()(const AxisAttrs& a) const {
      std::string s = "{axis = " + std::to_string(a.axis);
      // softmax, gather and concat have no keepdims field; a set flag is invalid IR but is
      // shown, not hidden.
      const bool has_keepdims = d.op != Op::Softmax && d.op != Op::Gather && d.op != Op::Concat;
      if (has_keepdims || a.keepdims) s += a.keepdims ? ", keepdims = true" : ", keepdims = false";
      return s + "}";
    }
    std::string operator()(const EpsAttrs& e) const { return "{eps = " + format_double(e.eps) + "}"; }
    std::string operator()(const ThresholdAttrs& t) const {
      return "{threshold = " + format_double(t.threshold) + ste(t.ste_clip, ", ") + "}";
    }
    std::string operator()(const SteAttrs& s) const {
      return s.ste_clip == SteClip::Default ? "" : "{" + ste(s.ste_clip, "") + "}";
    }
    // The ste_clip field, written only when set.
    static std::string ste(SteClip c, const char* sep) {
      if (c == SteClip::Default) return "";
      return sep + std::string("ste_clip = ") + (c == SteClip::On ? "true" : "false");
    }
    std::string operator()(const TMatMulAttrs& t) const {
      auto flag = [](bool b) { return b ? "true" : "false"; };
 // group is printed only when set, so ungrouped tmatmuls read as before.
      return std::string("{x_scale = ") + flag(t.x_scale) + ", w_scale = " + flag(t.w_scale) +
             (t.group != 0 ? ", group = " + std::to_string(t.group) : std::string()) + ", bias = " + flag(t.bias) + ", residual = " + flag(t.residual) +
             ", act = " + std::string(activation_name(t.act)) + "}";
    }
    std::string operator()(const EwiseAttrs& e) const {
      std::string s = "{steps = [";
      for (std::size_t i = 0; i < e.steps.size(); ++i) {
        const EwiseStep& st = e.steps[i];
        s += (i ? ", " : "") + std::string(op_name(st.op)) + "(" + std::to_string(st.a);
        if (st.b >= 0 || is_ewise_binary(st.op)) s += ", " + std::to_string(st.b);
        s += ")";
      }
      return s + "]}";
    }
    std::string operator()(const SliceAttrs& sl) const {
      return "{axis = " + std::to_string(sl.axis) + ", start = " + std::to_string(sl.start) +
             ", size = " + std::to_string(sl.size) + "}";
    }
    std::string operator()(const RopeAttrs& r) const {
      return "{theta = " + format_double(r.theta) + ", mode = " + std::string(rope_mode_name(r.mode)) + "}";
    }
    std::string operator()(const LayerAttrs& l) const { return "{layer = " + std::to_string(l.layer) + "}"; }
    std::string operator()(const AttentionAttrs& a) const {
      return "{layer = " + std::to_string(a.layer) + ", scale = " + format_double(a.scale) + "}";
    }
  };
  return std::visit(Visitor{d, const_kind}, d.attrs);
}

// A constraint with its symbol's name ("?7" for an index outside the table).
std::string constraint_text(const Constraint& c, std::span<const std::string> syms) {
  return constraint_str(c, c.sym.index < syms.size() ? syms[c.sym.index] : "?" + std::to_string(c.sym.index));
}

bool value_in_range(const Function& f, ValueId v) { return v.valid() && v.index < f.num_values(); }

}  // namespace

// ---------------------------------------------------------------- numbers

std::string format_double(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

std::string format_value(double v, ElemKind k) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  if (is_integer(k)) {
    // Integral values within int64 print exactly; anything else is invalid for the kind
    // (the verifier says so) and prints as a double so that nothing is hidden.
    if (v == std::trunc(v) && std::fabs(v) < 9.2e18) return std::to_string(static_cast<std::int64_t>(v));
    return format_double(v);
  }
  auto f = static_cast<float>(v);
  if (static_cast<double>(f) != v) return format_double(v);  // not an f32 value: invalid, shown in full
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, f);
  return std::string(buf, r.ptr);
}

std::string print_type(const Type& t, std::span<const std::string> symbols) { return type_str(t, symbols); }

// ---------------------------------------------------------------- names

FunctionNames::FunctionNames(const Function& f) : values_(f.num_values()), blocks_(f.num_blocks()) {
  UniqueNames block_names;
  auto layout = f.blocks();
  for (std::size_t pos = 0; pos < layout.size(); ++pos) {
    BlockId b = layout[pos];
    if (!b.valid() || b.index >= blocks_.size() || !blocks_[b.index].empty()) continue;
    const std::string& stored = f.block(b).name;
    std::string base = !stored.empty() ? sanitize(stored, false)
                                       : (pos == 0 ? std::string("entry") : "bb" + std::to_string(pos));
    blocks_[b.index] = "^" + block_names.take(base);
  }

  UniqueNames value_names;
  std::uint32_t number = 0;
  auto define = [&](ValueId v) {
    if (!value_in_range(f, v) || !values_[v.index].empty()) return;
    const std::string& stored = f.value(v).name;
    if (stored.empty()) values_[v.index] = "%" + std::to_string(number++);
    else values_[v.index] = "%" + value_names.take(sanitize(stored, true));
  };
  for (BlockId b : layout) {
    if (!b.valid() || b.index >= f.num_blocks()) continue;
    for (ValueId v : f.block(b).args) define(v);
    for (InstId i : f.insts(b)) {
      if (!i.valid() || i.index >= f.num_insts()) continue;
      for (ValueId v : f.inst(i).results) define(v);
    }
  }
}

std::string FunctionNames::value(ValueId v) const {
  if (v.valid() && v.index < values_.size() && !values_[v.index].empty()) return values_[v.index];
  return v.valid() ? "%?" + std::to_string(v.index) : std::string("%?");
}

std::string FunctionNames::block(BlockId b) const {
  if (b.valid() && b.index < blocks_.size() && !blocks_[b.index].empty()) return blocks_[b.index];
  return b.valid() ? "^?" + std::to_string(b.index) : std::string("^?");
}

// ---------------------------------------------------------------- printing

std::string print_inst(const Function& f, const FunctionNames& names, InstId i) {
  const InstData& d = f.inst(i);
  auto syms = std::span<const std::string>(f.symbols());
  std::string s;
  if (!d.results.empty()) s = join_values(names, d.results) + " = ";
  s += op_name(d.op);

  // param and call name their target with @; every other op lists its operands, then
  // its successors (br, cond_br).
  if (d.op == Op::Param) {
    if (const auto* p = std::get_if<ParamAttrs>(&d.attrs)) s += " @" + p->name;
  } else if (d.op == Op::Call) {
    const auto* c = std::get_if<CallAttrs>(&d.attrs);
    s += " @" + (c ? c->callee : std::string("?")) + "(" + join_values(names, d.operands) + ")";
  } else {
    if (!d.operands.empty()) s += " " + join_values(names, d.operands);
    for (std::size_t t = 0; t < d.targets.size(); ++t)
      s += (t || !d.operands.empty() ? ", " : " ") + block_call_str(names, d.targets[t]);
  }

  ElemKind kind = ElemKind::F32;
  if (!d.results.empty() && value_in_range(f, d.results[0])) kind = f.type_of(d.results[0]).elem;
  std::string attrs = attrs_str(d, kind);
  if (!attrs.empty()) s += " " + attrs;

  if (!d.results.empty()) {
    s += " : ";
    for (std::size_t r = 0; r < d.results.size(); ++r) {
      if (r) s += ", ";
      s += value_in_range(f, d.results[r]) ? type_str(f.type_of(d.results[r]), syms) : "?";
    }
  }
  return s;
}

std::string print_function(const Module* /*m*/, const Function& f) {
  FunctionNames names(f);
  auto syms = std::span<const std::string>(f.symbols());
  std::string s = "func @" + f.name();
  if (!syms.empty()) {
    s += "<";
    for (std::size_t i = 0; i < syms.size(); ++i) s += (i ? ", " : "") + syms[i];
    s += ">";
  }
  s += "(";
  auto args = f.args();
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (i) s += ", ";
    s += names.value(args[i]) + ": " +
         (value_in_range(f, args[i]) ? type_str(f.type_of(args[i]), syms) : std::string("?"));
  }
  s += ") -> ";
  const auto& rt = f.result_types();
  if (rt.size() == 1) {
    s += type_str(rt[0], syms);
  } else {
    s += "(";
    for (std::size_t i = 0; i < rt.size(); ++i) s += (i ? ", " : "") + type_str(rt[i], syms);
    s += ")";
  }
  if (!f.constraints().empty()) {
    s += " where ";
    for (std::size_t i = 0; i < f.constraints().size(); ++i)
      s += (i ? ", " : "") + constraint_text(f.constraints()[i], syms);
  }
  s += " {\n";

  auto layout = f.blocks();
  for (std::size_t pos = 0; pos < layout.size(); ++pos) {
    BlockId b = layout[pos];
    if (!b.valid() || b.index >= f.num_blocks()) {
      s += "^?:\n";
      continue;
    }
    s += names.block(b);
    // The entry block's arguments are the function's, printed in the signature.
    const auto& bargs = f.block(b).args;
    if (pos != 0 && !bargs.empty()) {
      s += "(";
      for (std::size_t i = 0; i < bargs.size(); ++i) {
        if (i) s += ", ";
        s += names.value(bargs[i]) + ": " +
             (value_in_range(f, bargs[i]) ? type_str(f.type_of(bargs[i]), syms) : std::string("?"));
      }
      s += ")";
    }
    s += ":\n";
    for (InstId i : f.insts(b)) {
      s += "  ";
      s += (i.valid() && i.index < f.num_insts()) ? print_inst(f, names, i) : std::string("<bad instruction>");
      s += "\n";
    }
  }
  s += "}\n";
  return s;
}

std::string print_module(const Module& m) {
  std::string s;
  for (const auto& [key, value] : m.metadata()) s += "meta " + escape(key) + " = " + escape(value) + "\n";
  for (const ParamDecl& p : m.params())
    s += "param @" + p.name + " : " + type_str(p.type, p.symbols) + "\n";
  bool first = s.empty();
  for (const Function& f : m.functions()) {
    if (!first) s += "\n";
    first = false;
    s += print_function(&m, f);
  }
  return s;
}

}  // namespace ternjit::ir
