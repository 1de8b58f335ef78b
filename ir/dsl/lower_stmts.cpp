// SPDX-License-Identifier: Apache-2.0
// lower_stmts.cpp - .tri statements (let, tuples, return, `for` unrolling) and layer instances.
//
// A `for i in lo..hi { ... }` loop is unrolled while lowering: each iteration lowers the
// body with `i` bound to an integer literal. A `let` in the body that rebinds a name of
// the enclosing scope updates it (loop-carried: the next iteration and the code after
// the loop see the new value); other names are local to the iteration. Work is bounded:
// at most kMaxCount iterations per loop, kMaxUnrolledNodes expression nodes per body and
// kMaxModuleNodes per file (instance copies included), each limit a located error.
//
// `param blk: Block[30]` declares 30 parameter namespaces: parameter p of instance i is
// the module parameter `Model.blk.i.p` (Block's types, Block's symbol names: inside
// Model they are Model's symbols of those names). `blk[i].p` reads it; `blk[i](x)` and
// `blk[i].fn(x)` call a copy of Block's function named `Model.blk.i.fn` whose parameter
// reads go to instance i (copies are declared at their first call and lowered last).
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "ir/bind.h"
#include "ir/dsl/lower_internal.h"
#include "ir/print.h"

namespace ternjit::dsl::lower_detail {

namespace {

// The nodes of an expression tree (its height is bounded by the parser, so the
// recursion is too).
std::size_t nodes(const Expr& e) {
  std::size_t n = 1;
  for (const Expr& a : e.args) n += nodes(a);
  for (const Expr& a : e.callee) n += nodes(a);
  return n;
}

std::string types_str(const std::vector<ir::Type>& ts, const ir::Function& f) {
  std::string s = "(";
  for (std::size_t i = 0; i < ts.size(); ++i) s += (i ? ", " : "") + ir::type_str(ts[i], f.symbols());
  return s + ")";
}

// Depth markers of Lowerer::check_instances.
constexpr int kInProgress = -1;
constexpr int kCycle = -2;

}  // namespace

// ---------------------------------------------------------------- bodies

void Lowerer::lower_body(const FnInfo& info, std::size_t func_index, const std::string& prefix) {
  const FnDecl& fd = *info.decl;
  const LayerInfo& layer = layers_.at(info.layer);
  // The body is built in a copy and moved back at the end: lowering may append instance
  // copies to module.functions(), which must not move the function being built.
  ir::Function f = module_.functions()[func_index];
  ir::Builder b(module_, f);
  b.set_block(f.entry());
  b_ = &b;
  f_ = &f;
  layer_ = &layer;
  prefix_ = prefix;
  owner_ = std::string(ir::layer_of(f.name()));
  scope_.clear();
  fresh_.clear();
  used_names_.clear();
  name_suffix_.clear();
  for (ValueId a : f.args()) used_names_.insert(f.value(a).name);
  loop_depth_ = 0;
  body_nodes_ = 0;
  budget_failed_ = false;

  for (const std::string& name : layer.param_order) {
    const ParamInfo& p = layer.params.at(name);
    Binding bind;
    bind.def = p.pos;
    bind.param = prefix + name;
    if (!p.instance_of.empty()) {
      bind.kind = p.ok ? Binding::Kind::Instances : Binding::Kind::Poison;
      bind.layer = p.instance_of;
      bind.count = p.count;
    } else {
      bind.kind = p.ok ? Binding::Kind::Param : Binding::Kind::Poison;
    }
    scope_.emplace(name, bind);
  }
  for (std::size_t i = 0; i < fd.args.size(); ++i) {
    if (info.args[i] == ArgState::Duplicate) continue;
    Binding bind;
    bind.kind = info.args[i] == ArgState::Ok ? Binding::Kind::Value : Binding::Kind::Poison;
    bind.value = f.args()[i];
    bind.def = fd.args[i].pos;
    scope_.emplace(fd.args[i].name, bind);
  }

  bool returned = false;
  for (const Stmt& s : fd.body) {
    if (budget_failed_) break;
    if (returned) {
      if (!s.value) continue;  // already reported by the parser
      error(s.pos, "unreachable statement after 'return' (the 'return' must be the last statement)");
      break;
    }
    switch (s.kind) {
      case StmtKind::Let: lower_let(s); break;
      case StmtKind::For: lower_for(s); break;
      case StmtKind::Return:
        returned = true;
        lower_return(s, info);
        break;
    }
  }
  if (!returned && fd.body_ok && !budget_failed_)
    error(fd.close_pos, "missing 'return' at the end of function '" + fd.name + "'");
  module_.functions()[func_index] = std::move(f);
  b_ = nullptr;
  f_ = nullptr;
  layer_ = nullptr;
}

void Lowerer::lower_return(const Stmt& s, const FnInfo& info) {
  if (!s.value) return;
  const std::size_t n = nodes(*s.value);
  body_nodes_ += n;
  module_nodes_ += n;
  auto v = lower_any(*s.value);
  if (!v || !info.usable) return;
  const FnDecl& fd = *info.decl;
  const std::vector<ir::Type>& rt = info.results;
  std::vector<Val> vals = v->tuple ? v->elems : std::vector<Val>{*v};
  if (vals.size() != rt.size()) {
    error(s.value->pos, "tuple arity mismatch: '" + fd.name + "' returns " + std::to_string(rt.size()) +
                            (rt.size() == 1 ? " value " : " values ") + types_str(rt, *f_) + ", got " +
                            (v->tuple ? "a tuple of " + std::to_string(vals.size()) : std::string("one value")));
    return;
  }
  std::vector<ValueId> ids;
  for (std::size_t i = 0; i < vals.size(); ++i) {
    std::optional<ValueId> id = vals[i].literal ? materialize_like(vals[i], rt[i]) : vals[i].id;
    if (!id) return;
    const ir::Type& got = f_->type_of(*id);
    if (!(got == rt[i])) {
      if (rt.size() == 1)
        error(s.pos, "return type mismatch: '" + fd.name + "' declares " + ir::type_str(rt[i], f_->symbols()) +
                         ", but the returned value is " + ir::type_str(got, f_->symbols()));
      else
        error(s.pos, "return type mismatch: result " + std::to_string(i + 1) + " of '" + fd.name +
                         "' is declared " + ir::type_str(rt[i], f_->symbols()) + ", but the returned value is " +
                         ir::type_str(got, f_->symbols()));
      return;
    }
    ids.push_back(*id);
  }
  auto r = b_->create(Op::Ret, std::move(ids), ir::NoAttrs{}, {}, loc(s.pos));
  if (!r.ok()) ir_error(s.pos, "return", r.error());
}

bool Lowerer::can_bind(const std::string& name, Pos at) {
  auto it = scope_.find(name);
  if (it == scope_.end()) return true;
  const Binding& b = it->second;
  if (b.loop_var) {
    error(at, "cannot rebind the loop variable '" + name + "'", {note(b.def, "'" + name + "' is the variable of this loop")});
    return false;
  }
  // Inside a loop body a value may be bound again (the loop-carried update); a layer
  // parameter or an instance array never.
  if (loop_depth_ > 0 && (b.kind == Binding::Kind::Value || b.kind == Binding::Kind::Literal ||
                          b.kind == Binding::Kind::Poison))
    return true;
  duplicate("", name, at, b.def);
  return false;
}

void Lowerer::bind(const std::string& name, Pos at, const std::optional<Val>& v) {
  Binding bind;
  bind.def = at;
  if (v && v->literal) {
    bind.kind = Binding::Kind::Literal;
    bind.number = v->number;
    bind.is_int = v->is_int;
    bind.text = v->text;
  } else if (v) {
    bind.kind = Binding::Kind::Value;
    bind.value = v->id;
    // Name the value after the `let` unless it already has a name (`let a = x`
    // makes `a` another name for %x).
    // Value names are unique in a function: a name bound again (in a loop) gets a
    // suffix, as the printer would give it (`%h_1`).
    ir::ValueData& vd = f_->value(v->id);
    if (vd.name.empty()) {
      // The next suffix to try is kept per name, so a name bound in every iteration of a
      // long loop costs one probe per binding, not one per earlier binding.
      std::string unique = name;
      std::size_t& k = name_suffix_[name];
      while (used_names_.count(unique)) unique = name + "_" + std::to_string(++k);
      used_names_.insert(unique);
      vd.name = std::move(unique);
    }
  }
  if (scope_.insert_or_assign(name, bind).second && !fresh_.empty()) fresh_.back().push_back(name);
}

void Lowerer::lower_let(const Stmt& s) {
  std::vector<std::pair<std::string, Pos>> names = s.names;
  if (names.empty()) names.emplace_back(s.name, s.name_pos);
  // A `let` that failed to parse has had its one error; its names (if new) stay
  // poisoned so later uses are quiet.
  if (!s.value) {
    for (const auto& [name, at] : names) {
      Binding poison;
      poison.def = at;
      if (scope_.emplace(name, poison).second && !fresh_.empty()) fresh_.back().push_back(name);
    }
    return;
  }
  for (std::size_t i = 0; i < names.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j)
      if (names[j].first == names[i].first) {
        duplicate("", names[i].first, names[i].second, names[j].second);
        return;
      }
    if (!can_bind(names[i].first, names[i].second)) return;
  }
  const std::size_t n = nodes(*s.value);
  body_nodes_ += n;
  module_nodes_ += n;
  auto poison_all = [&] {
    for (const auto& [name, at] : names) bind(name, at, std::nullopt);
  };
  if (s.names.empty()) {
    bind(s.name, s.name_pos, lower_expr(*s.value));
    return;
  }
  auto v = lower_any(*s.value);
  if (!v) return poison_all();
  if (!v->tuple) {
    std::string got = v->literal ? "the number " + v->text : ir::type_str(f_->type_of(v->id), f_->symbols());
    error(s.value->pos, "'let (...)' needs a tuple of " + std::to_string(names.size()) + " values, got " + got);
    return poison_all();
  }
  if (v->elems.size() != names.size()) {
    error(s.value->pos, "tuple arity mismatch: 'let (...)' binds " + std::to_string(names.size()) +
                            " names, but the value is a tuple of " + std::to_string(v->elems.size()));
    return poison_all();
  }
  for (std::size_t i = 0; i < names.size(); ++i) bind(names[i].first, names[i].second, v->elems[i]);
}

// ---------------------------------------------------------------- for loops

void Lowerer::lower_for(const Stmt& s) {
  if (!s.value || !s.upper) return poison_lets(s.body);  // the header's error is reported
  auto lo = const_int(*s.value, "'for' range start");
  std::optional<std::int64_t> hi;
  if (lo) hi = const_int(*s.upper, "'for' range end");
  if (!lo || !hi) return poison_lets(s.body);
  if (*lo < 0 || *hi < *lo) {
    error(s.value->pos, "'for' range " + std::to_string(*lo) + ".." + std::to_string(*hi) +
                            " must satisfy 0 <= start <= end");
    return poison_lets(s.body);
  }
  if (*hi - *lo > kMaxCount) {
    error(s.upper->pos, "'for' loop runs " + std::to_string(*hi - *lo) + " iterations, more than the limit of " +
                            std::to_string(kMaxCount));
    return poison_lets(s.body);
  }
  if (auto it = scope_.find(s.name); it != scope_.end()) {
    duplicate("", s.name, s.name_pos, it->second.def);
    return poison_lets(s.body);
  }
  ++loop_depth_;
  for (std::int64_t k = *lo; k < *hi; ++k) {
    if (body_nodes_ > kMaxUnrolledNodes) {
      error(s.pos, "unrolling 'for " + s.name + "' exceeds the budget of " + std::to_string(kMaxUnrolledNodes) +
                       " expression nodes per function (reached at " + s.name + " = " + std::to_string(k) +
                       "): use fewer iterations or a smaller body");
      budget_failed_ = true;
      break;
    }
    // Names first bound in the iteration are recorded (fresh_) and dropped at its end;
    // names of the enclosing scope are updated in place (loop-carried). No copy of the
    // scope per iteration: a long function before a long loop stays linear.
    fresh_.emplace_back(1, s.name);
    // Each iteration counts as a node too, so nested loops with empty bodies are bounded.
    ++body_nodes_;
    ++module_nodes_;
    Binding iv;
    iv.kind = Binding::Kind::Literal;
    iv.number = static_cast<double>(k);
    iv.is_int = true;
    iv.text = std::to_string(k);
    iv.loop_var = true;
    iv.def = s.name_pos;
    scope_[s.name] = iv;
    const std::size_t before = diags_.size();
    lower_loop_body(s.body);
    const bool failed = diags_.size() != before;
    for (std::size_t d = before; d < diags_.size(); ++d)
      diags_[d].notes.push_back(note(s.pos, "in iteration " + s.name + " = " + std::to_string(k) + " of this loop"));
    for (const std::string& name : fresh_.back()) scope_.erase(name);
    fresh_.pop_back();
    if (failed || budget_failed_) {
      // One report per mistake, not one per iteration.
      poison_lets(s.body);
      break;
    }
  }
  --loop_depth_;
}

void Lowerer::lower_loop_body(const std::vector<Stmt>& body) {
  for (const Stmt& s : body) {
    if (budget_failed_) return;
    switch (s.kind) {
      case StmtKind::Let: lower_let(s); break;
      case StmtKind::For: lower_for(s); break;
      case StmtKind::Return:
        if (s.value) error(s.pos, "'return' inside a 'for' body: return after the loop");
        return;
    }
  }
}

void Lowerer::poison_lets(const std::vector<Stmt>& body) {
  for (const Stmt& s : body) {
    if (s.kind == StmtKind::For) {
      poison_lets(s.body);
      continue;
    }
    if (s.kind != StmtKind::Let) continue;
    std::vector<std::pair<std::string, Pos>> names = s.names;
    if (names.empty()) names.emplace_back(s.name, s.name_pos);
    for (const auto& [name, at] : names) {
      auto it = scope_.find(name);
      if (it == scope_.end()) continue;  // local to the body: gone already
      if (it->second.kind == Binding::Kind::Value || it->second.kind == Binding::Kind::Literal)
        if (!it->second.loop_var) it->second.kind = Binding::Kind::Poison;
    }
  }
}

// ---------------------------------------------------------------- compile-time integers

std::optional<std::int64_t> Lowerer::const_int(const Expr& e, const std::string& what) {
  if (e.kind == ExprKind::Name) {
    auto it = scope_.find(e.name);
    if (it != scope_.end() && it->second.kind == Binding::Kind::Poison) return std::nullopt;
  }
  auto c = const_number(e);
  if (!c || !c->is_int) {
    std::string got = c ? c->text : (e.kind == ExprKind::Name ? "'" + e.name + "'" : "an expression");
    error(e.pos, what + " must be an integer literal (or a loop variable), got " + got);
    return std::nullopt;
  }
  // 2^53: every integer up to it is exact in the double the literal is held in.
  if (!(std::fabs(c->value) <= 9007199254740992.0)) {
    error(e.pos, what + " " + c->text + " is too large");
    return std::nullopt;
  }
  return static_cast<std::int64_t>(c->value);
}

// ---------------------------------------------------------------- indexing and members

std::optional<Val> Lowerer::lower_member(const Expr& e) {
  const Expr& base = e.args[0];
  if (base.kind == ExprKind::Name) {
    auto it = scope_.find(base.name);
    if (it != scope_.end() && it->second.kind == Binding::Kind::Instances) {
      error(base.pos, "'" + base.name + "' is an array of " + std::to_string(it->second.count) + " '" +
                          it->second.layer + "' instances: index it, as in '" + base.name + "[0]." + e.member + "'");
      return std::nullopt;
    }
    error(e.member_pos, "'" + base.name + "." + e.member + "' is not a value: expected '(' to call '" + base.name +
                            "." + e.member + "'");
    return std::nullopt;
  }
  auto inst = instance_ref(base);
  if (!inst) return std::nullopt;
  const LayerInfo& l = *inst->layer;
  auto it = l.params.find(e.member);
  if (it == l.params.end()) {
    std::string hint = l.fns.count(e.member) ? " ('" + e.member + "' is a function: call it, as in '" + inst->shown +
                                                   "." + e.member + "(x)')"
                                             : ir::did_you_mean(e.member, l.param_order);
    error(e.member_pos, "layer '" + l.decl->name + "' has no parameter '" + e.member + "'" + hint);
    return std::nullopt;
  }
  if (!it->second.instance_of.empty()) {
    error(e.member_pos, "'" + inst->shown + "." + e.member + "' is an array of " + std::to_string(it->second.count) +
                            " '" + it->second.instance_of + "' instances: index it");
    return std::nullopt;
  }
  if (!it->second.ok) return std::nullopt;
  return value_or_error(b_->param(inst->prefix + e.member, loc(e.member_pos)), e.member_pos, e.member);
}

std::optional<Lowerer::InstanceRef> Lowerer::instance_ref(const Expr& e) {
  if (e.kind != ExprKind::Index) {
    error(e.pos, "expected a layer instance, as in 'blk[i]'");
    return std::nullopt;
  }
  const Expr& base = e.args[0];
  InstanceRef r;
  std::string array;  // IR prefix of the array: "Model.blk"
  std::int64_t count = 0;
  if (base.kind == ExprKind::Name) {
    auto it = scope_.find(base.name);
    if (it == scope_.end()) {
      error(base.pos, "unknown name '" + base.name + "'");
      return std::nullopt;
    }
    const Binding& b = it->second;
    if (b.kind == Binding::Kind::Poison) return std::nullopt;
    if (b.kind != Binding::Kind::Instances) {
      error(e.pos, "'" + base.name + "' is not an array of layer instances: only an instance 'blk[i]' has "
                   "parameters and functions");
      return std::nullopt;
    }
    r.layer = &layers_.at(b.layer);
    array = b.param;
    count = b.count;
    r.shown = base.name;
  } else if (base.kind == ExprKind::Member && base.args[0].kind == ExprKind::Index) {
    auto outer = instance_ref(base.args[0]);
    if (!outer) return std::nullopt;
    auto it = outer->layer->params.find(base.member);
    if (it == outer->layer->params.end() || it->second.instance_of.empty()) {
      error(base.member_pos, "layer '" + outer->layer->decl->name + "' has no instance array '" + base.member + "'");
      return std::nullopt;
    }
    if (!it->second.ok) return std::nullopt;
    r.layer = &layers_.at(it->second.instance_of);
    array = outer->prefix + base.member;
    count = it->second.count;
    r.shown = outer->shown + "." + base.member;
  } else {
    error(e.pos, "expected a layer instance, as in 'blk[i]'");
    return std::nullopt;
  }
  auto idx = const_int(e.args[1], "an instance index");
  if (!idx) return std::nullopt;
  if (*idx < 0 || *idx >= count) {
    error(e.args[1].pos, "index " + std::to_string(*idx) + " is out of range for '" + r.shown + "' (" +
                             std::to_string(count) + " instances of '" + r.layer->decl->name + "')");
    return std::nullopt;
  }
  r.prefix = array + "." + std::to_string(*idx) + ".";
  r.shown += "[" + std::to_string(*idx) + "]";
  return r;
}

const LayerInfo* Lowerer::instance_layer_of(const LayerInfo& l, const Expr& e) const {
  if (e.kind != ExprKind::Index) return nullptr;
  const Expr& base = e.args[0];
  const LayerInfo* owner = nullptr;
  std::string name;
  if (base.kind == ExprKind::Name) {
    owner = &l;
    name = base.name;
  } else if (base.kind == ExprKind::Member) {
    owner = instance_layer_of(l, base.args[0]);
    name = base.member;
  }
  if (!owner) return nullptr;
  auto it = owner->params.find(name);
  if (it == owner->params.end() || !it->second.ok || it->second.instance_of.empty()) return nullptr;
  return &layers_.at(it->second.instance_of);
}

std::optional<Callee> Lowerer::copy_for(std::size_t fn, const std::string& prefix, Pos pos) {
  const FnInfo& info = fns_[fn];
  if (!info.usable) return std::nullopt;
  std::string name = prefix + info.decl->name;
  if (name == info.ir_name) return Callee{fn, name, info.layer};
  if (copies_.find(name) == copies_.end()) {
    ir::Function f = *info.signature;
    f.set_name(name);
    copies_.emplace(name, module_.functions().size());
    pending_.push_back(PendingCopy{fn, module_.functions().size(), prefix, pos});
    module_.functions().push_back(std::move(f));
  }
  return Callee{fn, name, std::string(ir::layer_of(name))};
}

std::optional<Callee> Lowerer::instance_callee(const InstanceRef& inst, const std::string& fn, Pos pos) {
  auto it = inst.layer->fns.find(fn);
  if (it == inst.layer->fns.end()) {
    std::vector<std::string> names;
    for (const auto& [n, i] : inst.layer->fns) names.push_back(n);
    error(pos, "layer '" + inst.layer->decl->name + "' has no function '" + fn + "'" + ir::did_you_mean(fn, names));
    return std::nullopt;
  }
  return copy_for(it->second, inst.prefix, pos);
}

std::optional<Callee> Lowerer::plain_callee(std::size_t fn, Pos pos) {
  // A function of the layer being lowered runs with the same weights: inside an
  // instance copy, its copy for the same instance.
  if (fns_[fn].layer == layer_->decl->name) return copy_for(fn, prefix_, pos);
  return Callee{fn, fns_[fn].ir_name, fns_[fn].layer};
}

// ---------------------------------------------------------------- instance arrays

int Lowerer::instance_depth(LayerInfo& l, int level, std::map<const LayerInfo*, int>& memo) {
  if (auto it = memo.find(&l); it != memo.end()) return it->second == kInProgress ? kCycle : it->second;
  memo[&l] = kInProgress;
  int depth = 0;
  for (const std::string& name : l.param_order) {
    ParamInfo& p = l.params.at(name);
    if (p.instance_of.empty() || !p.ok) continue;
    LayerInfo& sub = layers_.at(p.instance_of);
    const int d = level >= kMaxInstanceDepth ? kMaxInstanceDepth : instance_depth(sub, level + 1, memo);
    if (d == kCycle) {
      error(p.pos, "instance array '" + name + "' of layer '" + l.decl->name + "' holds '" + p.instance_of +
                       "', which contains '" + l.decl->name + "': instance arrays cannot form a cycle");
      p.ok = false;
    } else if (d + 1 > kMaxInstanceDepth) {
      error(p.pos, "instance arrays nest more than " + std::to_string(kMaxInstanceDepth) + " levels deep through '" +
                       name + "' of layer '" + l.decl->name + "'");
      p.ok = false;
    } else {
      depth = std::max(depth, d + 1);
    }
  }
  memo[&l] = depth;
  return depth;
}

void Lowerer::check_instances() {
  std::vector<std::string> layer_names;
  for (const LayerInfo* l : layer_order_) layer_names.push_back(l->decl->name);
  for (LayerInfo* l : layer_order_) {
    for (const ParamDecl& d : l->decl->params) {
      if (d.instance_of.empty()) continue;
      ParamInfo& p = l->params.at(d.name);
      if (!(p.pos == d.pos) || !d.count) continue;  // a duplicate, or a parse error (reported)
      if (!layers_.count(d.instance_of)) {
        error(d.instance_pos, "unknown layer '" + d.instance_of + "' in the instance array '" + d.name + "'" +
                                  ir::did_you_mean(d.instance_of, layer_names));
        continue;
      }
      const Expr& c = *d.count;
      if (c.kind != ExprKind::Number || !c.is_int) {
        std::string got = c.kind == ExprKind::Number ? c.text
                          : c.kind == ExprKind::Name ? "'" + c.name + "'"
                                                     : std::string("an expression");
        error(c.pos, "the instance count of '" + d.name + "' must be an integer literal, got " + got);
        continue;
      }
      if (!(c.number >= 1 && c.number <= static_cast<double>(kMaxCount))) {
        error(c.pos, "the instance count " + c.text + " of '" + d.name + "' is out of range [1, " +
                         std::to_string(kMaxCount) + "]");
        continue;
      }
      p.count = static_cast<std::int64_t>(c.number);
      p.ok = true;
    }
  }
  std::map<const LayerInfo*, int> memo;
  for (LayerInfo* l : layer_order_) instance_depth(*l, 0, memo);
}

void Lowerer::declare_instances(const LayerInfo& l, const std::string& prefix, int depth) {
  TERNJIT_CHECK(depth <= kMaxInstanceDepth, "instance depth is checked by check_instances");
  if (instances_failed_) return;
  for (const std::string& name : l.param_order) {
    const ParamInfo& p = l.params.at(name);
    if (p.instance_of.empty() || !p.ok) continue;
    const LayerInfo& sub = layers_.at(p.instance_of);
    for (std::int64_t k = 0; k < p.count; ++k) {
      instances_ += 1 + sub.param_decls.size();
      if (instances_ > kMaxInstances) {
        if (!instances_failed_)
          error(p.pos, "the instance arrays of this file declare more than " + std::to_string(kMaxInstances) +
                           " instances and parameters");
        instances_failed_ = true;
        return;
      }
      const std::string pfx = prefix + name + "." + std::to_string(k) + ".";
      for (const ir::ParamDecl& d : sub.param_decls) {
        ir::ParamDecl copy = d;
        copy.name = pfx + d.name.substr(sub.decl->name.size() + 1);
        module_.params().push_back(std::move(copy));
      }
      declare_instances(sub, pfx, depth + 1);
      if (instances_failed_) return;
    }
  }
}

}  // namespace ternjit::dsl::lower_detail
