// SPDX-License-Identifier: Apache-2.0
// lower.cpp - checks a parsed `.tri` file and lowers its layers to an IR module.
//
// Phases: (1) register layers and the symbol names each one uses; (2) declare
// parameters; (3) declare every function's signature, so calls can be typed in any
// order; (4) reject call cycles; (5) lower each body through ir::Builder. A failed
// expression yields no value and poisons what depends on it (a `let` bound to it, a
// return), so each mistake is reported once. Built-in functions are lowered in
// lower_builtins.cpp.
#include "ir/dsl/lower.h"

#include <algorithm>
#include <utility>

#include "ir/dsl/lower_internal.h"
#include "ir/bind.h"
#include "ir/print.h"

namespace ternjit::dsl {

namespace lower_detail {

namespace {

std::string qualify(const std::string& callee_layer, const std::string& sym,
                    const std::string& caller_layer) {
  std::string q = sym.find('.') == std::string::npos ? callee_layer + "." + sym : sym;
  if (q.size() > caller_layer.size() && q.compare(0, caller_layer.size(), caller_layer) == 0 &&
      q[caller_layer.size()] == '.')
    q.erase(0, caller_layer.size() + 1);
  return q;
}

}  // namespace

ir::Module Lowerer::run() {
  declare_layers();
  for (LayerInfo* l : layer_order_) declare_params(*l);
  check_instances();
  for (LayerInfo* l : layer_order_) declare_instances(*l, l->decl->name + ".", 0);
  // Past kMaxInstances the remaining instances are not declared, so a body reading one
  // would report its parameter as unknown, ahead of the limit when the body comes first
  // in the file: the limit is the file's error, and no body is lowered.
  if (instances_failed_) return std::move(module_);
  for (LayerInfo* l : layer_order_) declare_fns(*l);
  check_cycles();
  for (std::size_t i = 0; i < fns_.size(); ++i) {
    if (fns_[i].func_index == SIZE_MAX) continue;
    const std::size_t before = diags_.size();
    lower_body(fns_[i], fns_[i].func_index, fns_[i].layer + ".");
    fns_[i].body_failed = diags_.size() != before;
  }
  // Instance copies, in the order of their first call (lowering one may ask for more).
  // A copy of a body that failed is skipped: it would repeat the same errors.
  for (std::size_t k = 0; k < pending_.size(); ++k) {
    const PendingCopy c = pending_[k];
    if (fns_[c.fn].body_failed) continue;
    if (module_nodes_ > kMaxModuleNodes) {
      error(c.requested, "the copies of layer functions for instances exceed the budget of " +
                             std::to_string(kMaxModuleNodes) + " expression nodes per file (at '" +
                             module_.functions()[c.func_index].name() + "')");
      break;
    }
    lower_body(fns_[c.fn], c.func_index, c.prefix);
  }
  return std::move(module_);
}

// ---------------------------------------------------------------- diagnostics

void Lowerer::error(Pos p, std::string msg, std::vector<Diagnostic> notes) {
  diags_.push_back(Diagnostic{loc(p), Severity::Error, std::move(msg), {}, std::move(notes)});
}

Diagnostic Lowerer::note(Pos p, std::string msg) const {
  return Diagnostic{loc(p), Severity::Note, std::move(msg), {}, {}};
}

void Lowerer::duplicate(std::string_view what, const std::string& name, Pos at, Pos first) {
  std::string kind = what.empty() ? std::string() : std::string(what) + " ";
  error(at, "duplicate definition of " + kind + "'" + name + "'",
        {note(first, "'" + name + "' first defined here")});
}

void Lowerer::ir_error(Pos p, std::string_view what, const Error& e) {
  std::string msg = e.diagnostics.empty() ? e.message : e.diagnostics.front().message;
  if (const Builtin* b = find_builtin(what)) {
    std::string ir_name = "'" + std::string(ir::op_name(b->op)) + "'";
    if (msg.compare(0, ir_name.size(), ir_name) == 0)
      msg = "'" + std::string(b->name) + "'" + msg.substr(ir_name.size());
  }
  if (msg.empty() || (msg.front() != '\'' && msg.front() != '@'))
    msg = "in '" + std::string(what) + "': " + msg;
  error(p, std::move(msg));
}

// ---------------------------------------------------------------- declarations

void Lowerer::declare_layers() {
  for (const LayerDecl& l : file_.layers) {
    // A declaration the parser could not read fully has had its one error, so it
    // is not reported as a duplicate too (here and for parameters and functions).
    auto it = layers_.find(l.name);
    if (it != layers_.end()) {
      if (l.ok) duplicate("layer", l.name, l.pos, it->second.decl->pos);
      continue;
    }
    LayerInfo& info = layers_[l.name];
    info.decl = &l;
    auto add_syms = [&](const std::optional<TypeExpr>& t) {
      if (!t) return;
      for (const DimExpr& d : t->dims)
        if (!d.symbol.empty() && d.symbol.find('.') == std::string::npos) info.symbols.insert(d.symbol);
    };
    for (const ParamDecl& p : l.params) add_syms(p.type);
    for (const FnDecl& f : l.fns) {
      for (const ArgDecl& a : f.args) add_syms(a.type);
      add_syms(f.result);
    }
    layer_order_.push_back(&info);
  }
}

template <class SymFn>
std::optional<ir::Type> Lowerer::resolve_type(const TypeExpr& t, const std::string& layer, SymFn&& sym) {
  ir::Type out;
  if (t.ternary) {
    out.elem = ElemKind::T2;
  } else if (!t.elem.empty()) {
    auto k = find_kind(kTensorKinds, t.elem);
    if (!k) {
      error(t.elem_pos, "unknown element type '" + t.elem + "' (expected one of " +
                            kind_list(kTensorKinds) + ")");
      return std::nullopt;
    }
    out.elem = *k;
  }
  for (const DimExpr& d : t.dims) {
    if (d.symbol.empty()) {
      out.shape.push_back(ir::Dim::fixed(d.extent));
      continue;
    }
    std::string name = d.symbol;
    if (auto dot = name.find('.'); dot != std::string::npos) {
      std::string owner = name.substr(0, dot), s = name.substr(dot + 1);
      auto it = layers_.find(owner);
      if (it == layers_.end()) {
        error(d.pos, "unknown layer '" + owner + "' in dimension '" + name + "'");
        return std::nullopt;
      }
      if (!it->second.symbols.count(s)) {
        error(d.pos, "layer '" + owner + "' has no symbol '" + s + "'");
        return std::nullopt;
      }
      // A layer naming its own symbol qualified means the plain symbol.
      if (owner == layer) name = s;
    }
    out.shape.push_back(ir::Dim::symbolic(sym(name)));
  }
  if (!ir::static_dims_product(out)) {
    // Symbols print as '?' here (they are not all in one table yet); the dims are the user's.
    error(t.pos, "type has more than 2^60 elements: the product of its extents is too large");
    return std::nullopt;
  }
  return out;
}

void Lowerer::declare_params(LayerInfo& l) {
  const std::string& lname = l.decl->name;
  for (const ParamDecl& p : l.decl->params) {
    if (auto it = l.params.find(p.name); it != l.params.end()) {
      if (p.type) duplicate("parameter", p.name, p.pos, it->second.pos);
      continue;
    }
    ParamInfo& info = l.params[p.name];
    l.param_order.push_back(p.name);
    info.ir_name = lname + "." + p.name;
    info.pos = p.pos;
    info.instance_of = p.instance_of;  // checked by check_instances
    if (!p.type) continue;
    std::vector<std::string> syms;
    auto t = resolve_type(*p.type, lname, [&](const std::string& s) {
      auto it = std::find(syms.begin(), syms.end(), s);
      if (it == syms.end()) it = syms.insert(syms.end(), s);
      return ir::SymbolId(static_cast<std::uint32_t>(it - syms.begin()));
    });
    if (!t) continue;
    module_.params().push_back(ir::ParamDecl{info.ir_name, std::move(*t), std::move(syms), loc(p.pos)});
    l.param_decls.push_back(module_.params().back());
    info.ok = true;
  }
}

void Lowerer::declare_fns(LayerInfo& l) {
  const std::string& lname = l.decl->name;
  for (const FnDecl& fd : l.decl->fns) {
    if (auto it = l.fns.find(fd.name); it != l.fns.end()) {
      if (fd.header_ok) duplicate("function", fd.name, fd.pos, fns_[it->second].decl->pos);
      continue;
    }
    l.fns[fd.name] = fns_.size();
    FnInfo& info = fns_.emplace_back();
    info.decl = &fd;
    info.layer = lname;
    info.ir_name = lname + "." + fd.name;
    if (!fd.header_ok) continue;

    ir::Function f(info.ir_name);
    f.set_loc(loc(fd.pos));
    ir::BlockId entry = f.add_block("entry");
    bool ok = true;
    std::map<std::string, Pos> seen;
    for (const ArgDecl& a : fd.args) {
      ArgState state = ArgState::Ok;
      if (auto p = l.params.find(a.name); p != l.params.end()) {
        duplicate("argument", a.name, a.pos, p->second.pos);
        state = ArgState::Duplicate;
      } else if (auto s = seen.find(a.name); s != seen.end()) {
        duplicate("argument", a.name, a.pos, s->second);
        state = ArgState::Duplicate;
      }
      seen.emplace(a.name, a.pos);
      std::optional<ir::Type> t;
      if (a.type) t = resolve_type(*a.type, lname, [&](const std::string& s) { return f.symbol(s); });
      if (!t) {
        state = ArgState::BadType;
        ok = false;
      }
      // A broken argument still takes its slot (typed f32[]) so indices line up;
      // the module is discarded anyway because an error was reported.
      f.add_block_arg(entry, t ? *t : ir::Type{}, state == ArgState::Ok ? a.name : std::string());
      info.args.push_back(state);
    }
    std::vector<const TypeExpr*> written;
    if (fd.tuple_result) {
      for (const auto& r : fd.results) written.push_back(r ? &*r : nullptr);
    } else {
      written.push_back(fd.result ? &*fd.result : nullptr);
    }
    for (const TypeExpr* r : written) {
      std::optional<ir::Type> t;
      if (r) t = resolve_type(*r, lname, [&](const std::string& s) { return f.symbol(s); });
      if (t) info.results.push_back(std::move(*t));
      else ok = false;
    }
    if (ok) f.set_result_types(info.results);
    info.usable = ok;
    info.func_index = module_.functions().size();
    info.signature = f;
    module_.functions().push_back(std::move(f));
  }
}

// ---------------------------------------------------------------- call resolution

CallTarget Lowerer::resolve_call(const LayerInfo& current, const Expr& e) const {
  CallTarget t;
  auto in_layer = [&](const LayerInfo& l, const std::string& fn, Pos pos) {
    if (!l.decl->ok) {
      t.kind = CallTarget::Kind::Poison;
      return;
    }
    auto it = l.fns.find(fn);
    if (it == l.fns.end()) {
      t.err_pos = pos;
      t.err = "layer '" + l.decl->name + "' has no function '" + fn + "'";
      return;
    }
    t.kind = CallTarget::Kind::Fn;
    t.fn = it->second;
  };
  if (!e.member.empty()) {
    auto it = layers_.find(e.name);
    if (it == layers_.end()) {
      t.err_pos = e.pos;
      t.err = "unknown layer '" + e.name + "'";
      return t;
    }
    in_layer(it->second, e.member, e.member_pos);
    return t;
  }
  if (auto it = current.fns.find(e.name); it != current.fns.end()) {
    t.kind = CallTarget::Kind::Fn;
    t.fn = it->second;
    return t;
  }
  if (auto it = layers_.find(e.name); it != layers_.end()) {
    in_layer(it->second, "forward", e.pos);
    return t;
  }
  if (const Builtin* b = find_builtin(e.name)) {
    t.kind = CallTarget::Kind::Builtin;
    t.builtin = b;
    return t;
  }
  t.err_pos = e.pos;
  t.err = "unknown function '" + e.name + "'";
  return t;
}

// ---------------------------------------------------------------- call cycles

void Lowerer::collect_calls(const LayerInfo& l, const Expr& e, std::vector<CallEdge>& out) const {
  if (e.kind == ExprKind::Call && !e.callee.empty()) {
    const Expr& c = e.callee[0];
    if (const LayerInfo* il = instance_layer_of(l, c.kind == ExprKind::Member ? c.args[0] : c)) {
      auto it = il->fns.find(c.kind == ExprKind::Member ? c.member : "forward");
      if (it != il->fns.end()) out.push_back({it->second, e.pos});
    }
    for (const Expr& a : e.callee) collect_calls(l, a, out);
  } else if (e.kind == ExprKind::Call) {
    CallTarget t = resolve_call(l, e);
    if (t.kind == CallTarget::Kind::Fn) out.push_back({t.fn, e.pos});
  }
  for (const Expr& a : e.args) collect_calls(l, a, out);
}

void Lowerer::collect_stmt_calls(const LayerInfo& l, const std::vector<Stmt>& body,
                                 std::vector<CallEdge>& out) const {
  for (const Stmt& s : body) {
    if (s.value) collect_calls(l, *s.value, out);
    if (s.kind == StmtKind::For) collect_stmt_calls(l, s.body, out);
  }
}

void Lowerer::check_cycles() {
  std::vector<std::vector<CallEdge>> edges(fns_.size());
  for (std::size_t i = 0; i < fns_.size(); ++i) {
    if (!fns_[i].decl->header_ok) continue;
    const LayerInfo& l = layers_.at(fns_[i].layer);
    collect_stmt_calls(l, fns_[i].decl->body, edges[i]);
  }
  // A depth-first search with an explicit stack (a chain of calls is as long as the
  // file makes it); `path` holds the functions on the stack with their next edge.
  enum Color : char { White, Gray, Black };
  std::vector<char> color(fns_.size(), White);
  std::vector<std::pair<std::size_t, std::size_t>> path;
  for (std::size_t root = 0; root < fns_.size(); ++root) {
    if (color[root] != White) continue;
    color[root] = Gray;
    path.emplace_back(root, 0);
    while (!path.empty()) {
      auto& [n, next] = path.back();
      if (next == edges[n].size()) {
        color[n] = Black;
        path.pop_back();
        continue;
      }
      const CallEdge& e = edges[n][next++];
      if (color[e.to] == Gray) {
        std::string chain;
        auto start = std::find_if(path.begin(), path.end(), [&](const auto& p) { return p.first == e.to; });
        for (auto it = start; it != path.end(); ++it) chain += "'" + fns_[it->first].ir_name + "' -> ";
        chain += "'" + fns_[e.to].ir_name + "'";
        error(e.pos, "recursive call: " + chain + " (recursion is not supported)");
      } else if (color[e.to] == White) {
        color[e.to] = Gray;
        path.emplace_back(e.to, 0);
      }
    }
  }
}

// ---------------------------------------------------------------- bodies

std::optional<Val> Lowerer::lower_expr(const Expr& e) {
  auto v = lower_any(e);
  if (v && v->tuple) {
    error(e.pos, "expected one value here, got a tuple of " + std::to_string(v->elems.size()) +
                     " values (bind its elements with 'let (a, b, ...) = ...')");
    return std::nullopt;
  }
  return v;
}

std::optional<Val> Lowerer::lower_any(const Expr& e) {
  switch (e.kind) {
    case ExprKind::Name: return lower_name(e);
    case ExprKind::Number: return Val::literal_at(e.number, e.is_int, e.text, e.pos);
    case ExprKind::Neg: {
      auto x = lower_expr(e.args[0]);
      if (!x) return std::nullopt;
      if (x->literal) {
        x->number = -x->number;
        x->text = "-" + x->text;
        x->pos = e.pos;
        return x;
      }
      return value_or_error(b_->create1(Op::Neg, {x->id}, ir::NoAttrs{}, {}, loc(e.pos)), e.pos, "-");
    }
    case ExprKind::Binary: {
      auto a = lower_expr(e.args[0]);
      if (!a) return std::nullopt;
      auto b = lower_expr(e.args[1]);
      if (!b) return std::nullopt;
      if (a->literal && b->literal) return fold(e, *a, *b);
      static constexpr Op kOps[] = {Op::Add, Op::Sub, Op::Mul, Op::Div, Op::MatMul};
      auto id = binary(kOps[static_cast<std::size_t>(e.op)], *a, *b, e.pos, binary_op_spelling(e.op));
      if (!id) return std::nullopt;
      return value(*id);
    }
    case ExprKind::Call: return lower_call(e);
    case ExprKind::Index: return lower_index(e);
    case ExprKind::Member: return lower_member(e);
    case ExprKind::Tuple: {
      Val t;
      t.tuple = true;
      t.pos = e.pos;
      for (const Expr& a : e.args) {
        auto v = lower_expr(a);
        if (!v) return std::nullopt;
        t.elems.push_back(std::move(*v));
      }
      return t;
    }
    case ExprKind::List:
      error(e.pos, "a list of dims is only an argument of 'reshape'");
      return std::nullopt;
    case ExprKind::String:
      error(e.pos, "a string is only an argument of 'rope' (its mode)");
      return std::nullopt;
  }
  return std::nullopt;
}

std::optional<Val> Lowerer::fold(const Expr& e, const Val& a, const Val& b) {
  Val r;
  r.literal = true;
  r.pos = e.pos;
  r.is_int = a.is_int && b.is_int && e.op != BinaryOp::Div;
  switch (e.op) {
    case BinaryOp::Add: r.number = a.number + b.number; break;
    case BinaryOp::Sub: r.number = a.number - b.number; break;
    case BinaryOp::Mul: r.number = a.number * b.number; break;
    case BinaryOp::Div:
      if (b.number == 0) {
        error(e.pos, "division by zero in '" + a.text + " / " + b.text + "'");
        return std::nullopt;
      }
      r.number = a.number / b.number;
      break;
    case BinaryOp::MatMul:
      error(e.pos, "'@' needs tensor operands, got the numbers " + a.text + " and " + b.text);
      return std::nullopt;
  }
  r.text = ir::format_double(r.number);
  return r;
}

Val Lowerer::value(ValueId id) {
  Val v;
  v.id = id;
  return v;
}

std::optional<Val> Lowerer::value_or_error(Result<ValueId> r, Pos p, std::string_view what) {
  if (!r.ok()) {
    ir_error(p, what, r.error());
    return std::nullopt;
  }
  return value(r.value());
}

std::optional<Val> Lowerer::lower_name(const Expr& e) {
  auto it = scope_.find(e.name);
  if (it == scope_.end()) {
    error(e.pos, "unknown name '" + e.name + "'");
    return std::nullopt;
  }
  const Binding& bind = it->second;
  switch (bind.kind) {
    case Binding::Kind::Value: return value(bind.value);
    case Binding::Kind::Param:
      // One `param` per use; CSE merges them later.
      return value_or_error(b_->param(bind.param, loc(e.pos)), e.pos, e.name);
    case Binding::Kind::Literal: return Val::literal_at(bind.number, bind.is_int, bind.text, e.pos);
    case Binding::Kind::Instances:
      error(e.pos, "'" + e.name + "' is an array of " + std::to_string(bind.count) + " '" + bind.layer +
                       "' instances, not a value: use '" + e.name + "[i].p' for a parameter or '" + e.name +
                       "[i](x)' to call one");
      return std::nullopt;
    case Binding::Kind::Poison: return std::nullopt;
  }
  return std::nullopt;
}

std::optional<ValueId> Lowerer::materialize(const Val& v, ElemKind k) {
  if (!v.literal) return v.id;
  auto r = b_->constant(ir::Type{k, {}}, {v.number}, loc(v.pos));
  if (!r.ok()) {
    ir_error(v.pos, "const", r.error());
    return std::nullopt;
  }
  return r.value();
}

std::optional<ValueId> Lowerer::materialize_like(const Val& v, const ir::Type& other) {
  auto k = literal_kind(v, other);
  if (!k) return std::nullopt;
  return materialize(v, *k);
}

std::optional<ElemKind> Lowerer::literal_kind(const Val& lit, const ir::Type& other) {
  ElemKind k = other.elem;
  if (is_float(k)) return k;
  if (!lit.is_int) {
    error(lit.pos, "float literal " + lit.text + " used with an integer operand of type " +
                       ir::type_str(other, f_->symbols()) + ": expected an integer literal");
    return std::nullopt;
  }
  if (k == ElemKind::T2 || k == ElemKind::Bool) k = ElemKind::I32;
  if (ir::round_to_kind(lit.number, k) != lit.number) {
    error(lit.pos, "integer literal " + lit.text + " is out of range for " +
                       std::string(elem_name(k)));
    return std::nullopt;
  }
  return k;
}

std::optional<ValueId> Lowerer::binary(Op op, const Val& a, const Val& b, Pos pos, std::string_view what) {
  std::optional<ValueId> x, y;
  if (a.literal && b.literal) {
    // Only maximum/minimum get here (operators fold two literals): f32 scalars.
    x = materialize_default(a);
    if (x) y = materialize_default(b);
  } else if (a.literal) {
    x = materialize_like(a, f_->type_of(b.id));
    y = b.id;
  } else if (b.literal) {
    x = a.id;
    y = materialize_like(b, f_->type_of(a.id));
  } else {
    x = a.id;
    y = b.id;
  }
  if (!x || !y) return std::nullopt;
  auto r = b_->create1(op, {*x, *y}, ir::NoAttrs{}, {}, loc(pos));
  if (!r.ok()) {
    ir_error(pos, what, r.error());
    return std::nullopt;
  }
  return r.value();
}

std::optional<ValueId> Lowerer::tensor_arg(const Expr& e) {
  auto v = lower_expr(e);
  if (!v) return std::nullopt;
  return v->literal ? materialize_default(*v) : v->id;
}

std::optional<Val> Lowerer::lower_call(const Expr& e) {
  if (!e.callee.empty()) {
    // blk[i](args) calls the instance's `forward`, blk[i].fn(args) its `fn`.
    const Expr& c = e.callee[0];
    const Expr& chain = c.kind == ExprKind::Member ? c.args[0] : c;
    auto inst = instance_ref(chain);
    if (!inst) return std::nullopt;
    const std::string fn = c.kind == ExprKind::Member ? c.member : "forward";
    auto callee = instance_callee(*inst, fn, c.kind == ExprKind::Member ? c.member_pos : e.pos);
    if (!callee) return std::nullopt;
    return call_fn(e, *callee, inst->shown + (c.kind == ExprKind::Member ? "." + fn : ""));
  }
  CallTarget t = resolve_call(*layer_, e);
  switch (t.kind) {
    case CallTarget::Kind::Error: error(t.err_pos, t.err); return std::nullopt;
    case CallTarget::Kind::Poison: return std::nullopt;
    case CallTarget::Kind::Builtin: return lower_builtin(*t.builtin, e);
    case CallTarget::Kind::Fn: break;
  }
  std::string shown = e.member.empty() ? e.name : e.name + "." + e.member;
  if (e.has_type_arg) {
    error(e.type_arg_pos, "'" + shown + "' does not take an element type");
    return std::nullopt;
  }
  auto callee = plain_callee(t.fn, e.pos);
  if (!callee) return std::nullopt;
  return call_fn(e, *callee, shown);
}

std::optional<Val> Lowerer::call_fn(const Expr& e, const Callee& target, const std::string& shown) {
  const FnInfo& callee = fns_[target.fn];
  if (!callee.usable) return std::nullopt;
  const ir::Function& cf = *callee.signature;
  auto formals = cf.args();

  std::vector<ValueId> args;
  for (std::size_t i = 0; i < e.args.size(); ++i) {
    auto v = lower_expr(e.args[i]);
    if (!v) return std::nullopt;
    std::optional<ValueId> id;
    if (!v->literal) id = v->id;
    else if (i < formals.size()) id = materialize_like(*v, cf.type_of(formals[i]));
    else id = materialize_default(*v);
    if (!id) return std::nullopt;
    args.push_back(*id);
  }

  // Result types for infer_types: callee symbols bound by the arguments map to the
  // caller's dims (first occurrence; infer_types checks the rest), and symbols the
  // arguments do not bind (extents fixed by the callee's parameters) become caller
  // symbols qualified by the callee's layer, e.g. `BitLinear.N`.
  std::map<std::uint32_t, ir::Dim> bound;
  for (std::size_t i = 0; i < std::min(formals.size(), args.size()); ++i) {
    const ir::Type& ft = cf.type_of(formals[i]);
    const ir::Type& at = f_->type_of(args[i]);
    if (ft.rank() != at.rank()) continue;
    for (std::size_t d = 0; d < ft.rank(); ++d)
      if (!ft.shape[d].is_static()) bound.emplace(ft.shape[d].sym.index, at.shape[d]);
  }
  std::vector<ir::Type> declared;
  for (const ir::Type& rt : cf.result_types()) {
    ir::Type t2 = rt;
    for (ir::Dim& d : t2.shape) {
      if (d.is_static()) continue;
      auto it = bound.find(d.sym.index);
      if (it != bound.end()) d = it->second;
      else d = ir::Dim::symbolic(f_->symbol(qualify(target.layer, cf.symbol_name(d.sym), owner_)));
    }
    declared.push_back(std::move(t2));
  }
  auto r = b_->create(Op::Call, std::move(args), ir::CallAttrs{target.ir_name}, std::move(declared), loc(e.pos));
  if (!r.ok()) {
    ir_error(e.pos, shown, r.error());
    return std::nullopt;
  }
  TERNJIT_CHECK(!r.value().empty(), "a usable DSL function has a result");
  if (r.value().size() == 1) return value(r.value()[0]);
  Val t;
  t.tuple = true;
  t.pos = e.pos;
  for (ValueId id : r.value()) t.elems.push_back(value(id));
  return t;
}

}  // namespace lower_detail

ir::Module lower_file(const File& file, std::string_view file_name, std::vector<Diagnostic>& diags) {
  return lower_detail::Lowerer(file, file_name, diags).run();
}

}  // namespace ternjit::dsl
