// SPDX-License-Identifier: Apache-2.0
// verify.cpp - checks every IR invariant and reports all problems as diagnostics.
//
// The verifier never trusts its input: ids may be out of range, instructions erased,
// terminators missing. Every check guards what it reads, so a malformed function yields
// diagnostics, never a crash. Type rules are not repeated here: each instruction's
// result types are compared with infer_types (ir/infer_type.cpp).
#include "ir/verify.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "ir/builder.h"
#include "ir/infer_type.h"
#include "ir/print.h"

namespace ternjit::ir {

namespace {

std::string q(Op op) { return "'" + std::string(op_name(op)) + "'"; }

std::string plural(std::size_t n, const char* word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

bool valid_global_name(std::string_view s) {
  if (s.empty()) return false;
  auto c0 = s[0];
  if (!((c0 >= 'a' && c0 <= 'z') || (c0 >= 'A' && c0 <= 'Z') || c0 == '_')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.';
  });
}

bool symbols_in_range(const Type& t, std::size_t nsyms) {
  return std::all_of(t.shape.begin(), t.shape.end(),
                     [&](const Dim& d) { return d.is_static() || (d.sym.valid() && d.sym.index < nsyms); });
}

// Only t2 has storage layouts; any other kind must be Plain.
bool layout_ok(const Type& t) { return t.layout == WeightFormat::Plain || t.elem == ElemKind::T2; }

Diagnostic error_at(SourceLoc loc, std::string msg) {
  return Diagnostic{std::move(loc), Severity::Error, std::move(msg), {}, {}};
}

// Where a value is defined: its block's layout position and its position in the block
// (-1 for a block argument).
struct Def {
  int block_pos = -1;
  int inst_pos = -1;
  bool defined = false;
};

class FunctionVerifier {
 public:
  FunctionVerifier(const Module* m, const Function& f, std::vector<Diagnostic>& out)
      : m_(m), f_(f), out_(out) {}

  void run();

 private:
  // Reporting: at the instruction's location, else prefixed with the function and the
  // printed instruction so that builder-made IR still says where.
  void report_inst(InstId i, const std::string& msg) {
    const InstData& d = f_.inst(i);
    if (d.loc.known()) out_.push_back(error_at(d.loc, msg));
    else out_.push_back(error_at({}, "in @" + f_.name() + ": " + print_inst(f_, names(), i) + ": " + msg));
  }
  void report_func(const std::string& msg) {
    if (f_.loc().known()) out_.push_back(error_at(f_.loc(), msg));
    else out_.push_back(error_at({}, "in @" + f_.name() + ": " + msg));
  }

  bool check_layout();
  void collect_defs();
  void check_signature();
  void check_value_names();
  void compute_dominators();
  [[nodiscard]] bool dominates(int a, int b) const;
  void check_block(int pos);
  void check_inst(int block_pos, int inst_pos, InstId i);
  [[nodiscard]] bool is_defined(ValueId v) const {
    return v.valid() && v.index < f_.num_values() && defs_[v.index].defined;
  }
  void check_use(InstId user, int block_pos, int inst_pos, ValueId v, const std::string& what);
  void check_targets(InstId i);
  void check_const(InstId i);
  void check_types(InstId i);

  const Module* m_;
  const Function& f_;
  std::vector<Diagnostic>& out_;
  // Printed names, computed on the first diagnostic only: valid IR never pays for them.
  const FunctionNames& names() {
    if (!names_) names_.emplace(f_);
    return *names_;
  }
  std::optional<FunctionNames> names_;
  std::vector<BlockId> layout_;      // valid, distinct blocks in layout order
  std::vector<int> pos_of_block_;    // block index -> layout position, -1 when not laid out
  std::vector<Def> defs_;            // by value index
  std::vector<int> idom_;            // by layout position; -1 when unreachable
  std::vector<int> enter_, leave_;   // by layout position: dominator-tree pre/post numbers
  std::vector<std::vector<int>> succs_;
};

void FunctionVerifier::run() {
  if (!valid_global_name(f_.name()))
    report_func("function name '" + f_.name() + "' is not a valid name ([A-Za-z_][A-Za-z0-9_.]*)");
  if (!check_layout()) return;
  collect_defs();
  check_signature();
  check_value_names();
  compute_dominators();
  for (std::size_t p = 0; p < layout_.size(); ++p) check_block(static_cast<int>(p));
}

// Blocks and instructions must be well-formed ids, laid out once. Everything later
// relies on this, so a failure here stops the function's verification.
bool FunctionVerifier::check_layout() {
  if (f_.blocks().empty()) {
    report_func("function @" + f_.name() + " has no blocks: it needs an entry block");
    return false;
  }
  bool ok = true;
  pos_of_block_.assign(f_.num_blocks(), -1);
  for (BlockId b : f_.blocks()) {
    if (!b.valid() || b.index >= f_.num_blocks()) {
      report_func("the layout of @" + f_.name() + " names block " +
                  (b.valid() ? std::to_string(b.index) : std::string("<invalid>")) + ", which does not exist");
      ok = false;
      continue;
    }
    if (pos_of_block_[b.index] >= 0) {
      report_func("block " + names().block(b) + " appears twice in the layout of @" + f_.name());
      ok = false;
      continue;
    }
    pos_of_block_[b.index] = static_cast<int>(layout_.size());
    layout_.push_back(b);
  }
  if (!ok) return false;
  std::vector<bool> placed(f_.num_insts(), false);
  for (BlockId b : layout_) {
    for (InstId i : f_.insts(b)) {
      if (!i.valid() || i.index >= f_.num_insts()) {
        report_func("block " + names().block(b) + " lists an instruction that does not exist");
        ok = false;
      } else if (placed[i.index]) {
        report_inst(i, "instruction appears twice in the layout");
        ok = false;
      } else if (f_.inst(i).erased) {
        report_inst(i, "erased instruction is still in block " + names().block(b));
        ok = false;
      } else if (f_.inst(i).block != b) {
        report_inst(i, "instruction in block " + names().block(b) + " records another block");
        ok = false;
      }
      if (i.valid() && i.index < f_.num_insts()) placed[i.index] = true;
    }
  }
  return ok;
}

void FunctionVerifier::collect_defs() {
  defs_.assign(f_.num_values(), Def{});
  auto define = [&](ValueId v, int bpos, int ipos, auto&& complain) {
    if (!v.valid() || v.index >= f_.num_values()) {
      complain("defines a value id that does not exist");
      return;
    }
    if (defs_[v.index].defined) {
      complain("defines " + names().value(v) + " a second time");
      return;
    }
    defs_[v.index] = Def{bpos, ipos, true};
  };
  for (std::size_t p = 0; p < layout_.size(); ++p) {
    BlockId b = layout_[p];
    const auto& args = f_.block(b).args;
    for (std::size_t a = 0; a < args.size(); ++a) {
      define(args[a], static_cast<int>(p), -1,
             [&](const std::string& m) { report_func("block " + names().block(b) + " argument " + m); });
      if (args[a].valid() && args[a].index < f_.num_values()) {
        const ValueData& vd = f_.value(args[a]);
        if (vd.def != ValueDef::BlockArg || vd.block != b || vd.index != a)
          report_func("block " + names().block(b) + " argument " + names().value(args[a]) +
                      " does not record itself as that argument");
      }
    }
    auto insts = f_.insts(b);
    for (std::size_t k = 0; k < insts.size(); ++k) {
      InstId i = insts[k];
      const auto& results = f_.inst(i).results;
      for (std::size_t r = 0; r < results.size(); ++r) {
        define(results[r], static_cast<int>(p), static_cast<int>(k),
               [&](const std::string& m) { report_inst(i, "instruction " + m); });
        if (results[r].valid() && results[r].index < f_.num_values()) {
          const ValueData& vd = f_.value(results[r]);
          if (vd.def != ValueDef::InstResult || vd.inst != i || vd.index != r)
            report_inst(i, "result " + names().value(results[r]) + " does not record this instruction");
        }
      }
    }
  }
}

// Symbols of the signature, constraints and block arguments index f's table.
void FunctionVerifier::check_signature() {
  const std::size_t nsyms = f_.symbols().size();
  std::set<std::string> seen;
  for (const std::string& s : f_.symbols())
    if (!seen.insert(s).second) report_func("symbol '" + s + "' is declared twice in @" + f_.name());
  for (std::size_t r = 0; r < f_.result_types().size(); ++r)
    if (!symbols_in_range(f_.result_types()[r], nsyms))
      report_func("result type " + std::to_string(r + 1) + " of @" + f_.name() +
                  " uses a symbol outside the function's table (" + std::to_string(nsyms) + " symbols)");
  for (const Constraint& c : f_.constraints()) {
    if (!c.sym.valid() || c.sym.index >= nsyms)
      report_func("a constraint of @" + f_.name() + " names a symbol outside the function's table");
    else if (c.kind == Constraint::Kind::MultipleOf && c.value <= 0)
      report_func("constraint '" + f_.symbols()[c.sym.index] + " % " + std::to_string(c.value) +
                  " == 0' needs a positive divisor");
  }
  for (BlockId b : layout_)
    for (ValueId v : f_.block(b).args)
      if (v.valid() && v.index < f_.num_values() && !symbols_in_range(f_.type_of(v), nsyms))
        report_func("argument " + names().value(v) + " of block " + names().block(b) + " has type " +
                    type_str(f_.type_of(v), f_.symbols()) + ", which uses a symbol outside the table");
  for (BlockId b : layout_)
    for (ValueId v : f_.block(b).args)
      if (v.valid() && v.index < f_.num_values() && !layout_ok(f_.type_of(v)))
        report_func("argument " + names().value(v) + " of block " + names().block(b) +
                    " has a ternary layout but is not t2");
  for (std::size_t r = 0; r < f_.result_types().size(); ++r)
    if (!layout_ok(f_.result_types()[r]))
      report_func("result type " + std::to_string(r + 1) + " of @" + f_.name() + " has a ternary layout but is not t2");
  for (std::size_t r = 0; r < f_.result_types().size(); ++r)
    if (std::string big = too_large(f_.result_types()[r], f_.symbols()); !big.empty())
      report_func("result " + std::to_string(r + 1) + " of @" + f_.name() + ": " + big);
  for (BlockId b : layout_)
    for (ValueId v : f_.block(b).args)
      if (v.valid() && v.index < f_.num_values())
        if (std::string big = too_large(f_.type_of(v), f_.symbols()); !big.empty())
          report_func("argument " + names().value(v) + " of block " + names().block(b) + ": " + big);
}

void FunctionVerifier::check_value_names() {
  std::set<std::string> seen;
  for (BlockId b : layout_) {
    for (ValueId v : f_.block(b).args) {
      if (!v.valid() || v.index >= f_.num_values()) continue;
      const std::string& n = f_.value(v).name;
      if (!n.empty() && !seen.insert(n).second)
        report_func("value name '%" + n + "' is used twice in @" + f_.name() + " (block " + names().block(b) +
                    " argument)");
    }
    for (InstId i : f_.insts(b))
      for (ValueId v : f_.inst(i).results) {
        if (!v.valid() || v.index >= f_.num_values()) continue;
        const std::string& n = f_.value(v).name;
        if (!n.empty() && !seen.insert(n).second)
          report_inst(i, "value name '%" + n + "' is already used in @" + f_.name());
      }
  }
}

// Cooper, Harvey, Kennedy, "A Simple, Fast Dominance Algorithm" (2001), over layout
// positions. Unreachable blocks keep idom -1.
void FunctionVerifier::compute_dominators() {
  const std::size_t n = layout_.size();
  succs_.assign(n, {});
  for (std::size_t p = 0; p < n; ++p)
    for (InstId i : f_.insts(layout_[p]))
      for (const BlockCall& c : f_.inst(i).targets)
        if (c.block.valid() && c.block.index < pos_of_block_.size() && pos_of_block_[c.block.index] >= 0)
          succs_[p].push_back(pos_of_block_[c.block.index]);

  // Reverse post-order by an iterative DFS from the entry.
  std::vector<int> order;
  std::vector<char> state(n, 0);  // 0 unvisited, 1 on stack, 2 done
  std::vector<std::pair<int, std::size_t>> stack{{0, 0}};
  state[0] = 1;
  while (!stack.empty()) {
    auto& [node, next] = stack.back();
    if (next < succs_[node].size()) {
      int s = succs_[node][next++];
      if (state[s] == 0) {
        state[s] = 1;
        stack.emplace_back(s, 0);
      }
    } else {
      state[node] = 2;
      order.push_back(node);
      stack.pop_back();
    }
  }
  std::reverse(order.begin(), order.end());
  std::vector<int> rpo_index(n, -1);
  for (std::size_t k = 0; k < order.size(); ++k) rpo_index[order[k]] = static_cast<int>(k);
  std::vector<std::vector<int>> preds(n);
  for (std::size_t p = 0; p < n; ++p)
    if (rpo_index[p] >= 0)
      for (int s : succs_[p]) preds[s].push_back(static_cast<int>(p));

  idom_.assign(n, -1);
  idom_[0] = 0;
  auto intersect = [&](int a, int b) {
    while (a != b) {
      while (rpo_index[a] > rpo_index[b]) a = idom_[a];
      while (rpo_index[b] > rpo_index[a]) b = idom_[b];
    }
    return a;
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (std::size_t k = 1; k < order.size(); ++k) {
      int b = order[k];
      int new_idom = -1;
      for (int p : preds[b]) {
        if (idom_[p] < 0) continue;
        new_idom = new_idom < 0 ? p : intersect(p, new_idom);
      }
      if (new_idom >= 0 && idom_[b] != new_idom) {
        idom_[b] = new_idom;
        changed = true;
      }
    }
  }

  // Number the dominator tree in pre- and post-order (an explicit stack: a chain of
  // blocks makes the tree as deep as the function is long), so that dominates() is two
  // comparisons instead of a walk up the tree per use.
  std::vector<std::vector<int>> children(n);
  for (std::size_t k = 1; k < order.size(); ++k) children[idom_[order[k]]].push_back(order[k]);
  enter_.assign(n, -1);
  leave_.assign(n, -1);
  int clock = 0;
  std::vector<std::pair<int, std::size_t>> walk{{0, 0}};
  enter_[0] = clock++;
  while (!walk.empty()) {
    auto& [node, next] = walk.back();
    if (next < children[node].size()) {
      const int c = children[node][next++];
      enter_[c] = clock++;
      walk.emplace_back(c, 0);
    } else {
      leave_[node] = clock++;
      walk.pop_back();
    }
  }
}

bool FunctionVerifier::dominates(int a, int b) const {
  if (idom_[b] < 0) return true;   // everything dominates unreachable code
  if (idom_[a] < 0) return false;  // unreachable code dominates nothing reachable
  return enter_[a] <= enter_[b] && leave_[b] <= leave_[a];
}

void FunctionVerifier::check_block(int pos) {
  BlockId b = layout_[pos];
  auto insts = f_.insts(b);
  if (insts.empty()) {
    report_func("block " + names().block(b) + " of @" + f_.name() + " is empty: it must end in a terminator");
    return;
  }
  for (std::size_t k = 0; k < insts.size(); ++k) {
    InstId i = insts[k];
    bool last = k + 1 == insts.size();
    if (is_terminator(f_.inst(i).op) && !last)
      report_inst(i, q(f_.inst(i).op) + " is a terminator but is not the last instruction of block " +
                         names().block(b));
    if (last && !is_terminator(f_.inst(i).op))
      report_inst(i, "block " + names().block(b) + " does not end in a terminator (ret, br or cond_br)");
    check_inst(pos, static_cast<int>(k), i);
  }
}

void FunctionVerifier::check_use(InstId user, int block_pos, int inst_pos, ValueId v, const std::string& what) {
  if (!is_defined(v)) {
    report_inst(user, what + " " + names().value(v) + " is not a defined value");
    return;
  }
  const Def& d = defs_[v.index];
  if (d.block_pos == block_pos) {
    if (d.inst_pos >= inst_pos) report_inst(user, what + " " + names().value(v) + " is used before it is defined");
    return;
  }
  if (!dominates(d.block_pos, block_pos))
    report_inst(user, what + " " + names().value(v) + " is defined in block " + names().block(layout_[d.block_pos]) +
                          ", which does not dominate its use in " + names().block(layout_[block_pos]));
}

void FunctionVerifier::check_inst(int block_pos, int inst_pos, InstId i) {
  const InstData& d = f_.inst(i);
  bool sound = true;  // arity, attributes and operands are usable by infer_types

  int want_ops = op_num_operands(d.op);
  if (want_ops >= 0 && static_cast<int>(d.operands.size()) != want_ops) {
    report_inst(i, q(d.op) + " takes " + plural(static_cast<std::size_t>(want_ops), "operand") + ", got " +
                       std::to_string(d.operands.size()));
    sound = false;
  }
  int want_res = op_num_results(d.op);
  if (want_res >= 0 && static_cast<int>(d.results.size()) != want_res) {
    report_inst(i, q(d.op) + " defines " + plural(static_cast<std::size_t>(want_res), "result") + ", got " +
                       std::to_string(d.results.size()));
    sound = false;
  }
  if (!attrs_match(d.op, d.attrs)) {
    report_inst(i, q(d.op) + " has the wrong kind of attributes");
    sound = false;
  }
  for (std::size_t k = 0; k < d.operands.size(); ++k) {
    check_use(i, block_pos, inst_pos, d.operands[k], "operand " + std::to_string(k + 1));
    // A dominance error still leaves a typed operand; an undefined one has no type.
    if (!is_defined(d.operands[k])) sound = false;
  }
  for (const BlockCall& c : d.targets)
    for (std::size_t k = 0; k < c.args.size(); ++k)
      check_use(i, block_pos, inst_pos, c.args[k], "branch argument " + std::to_string(k + 1));
  for (ValueId v : d.results)
    if (v.valid() && v.index < f_.num_values() && !symbols_in_range(f_.type_of(v), f_.symbols().size())) {
      report_inst(i, "result " + names().value(v) + " has a type that uses a symbol outside the table of @" +
                         f_.name());
      sound = false;
    }
  for (ValueId v : d.results)
    if (v.valid() && v.index < f_.num_values())
      if (std::string big = too_large(f_.type_of(v), f_.symbols()); !big.empty()) {
        report_inst(i, "result " + names().value(v) + ": " + big);
        sound = false;
      }
  for (ValueId v : d.operands)
    if (v.valid() && v.index < f_.num_values() &&
        (!symbols_in_range(f_.type_of(v), f_.symbols().size()) || !static_dims_product(f_.type_of(v))))
      sound = false;  // reported where the value is defined
  check_targets(i);
  if (d.op == Op::Const && sound) check_const(i);
  if (sound) check_types(i);
}

void FunctionVerifier::check_targets(InstId i) {
  const InstData& d = f_.inst(i);
  std::size_t want = d.op == Op::Br ? 1 : d.op == Op::CondBr ? 2 : 0;
  if (d.targets.size() != want) {
    report_inst(i, q(d.op) + " needs " + plural(want, "successor block") + ", got " +
                       std::to_string(d.targets.size()));
  }
  for (const BlockCall& c : d.targets) {
    if (!c.block.valid() || c.block.index >= pos_of_block_.size() || pos_of_block_[c.block.index] < 0) {
      report_inst(i, "branch target " + names().block(c.block) + " is not a block of @" + f_.name());
      continue;
    }
    if (pos_of_block_[c.block.index] == 0) {
      report_inst(i, "branch to the entry block " + names().block(c.block) +
                         ": the entry block cannot be a branch target");
      continue;
    }
    const auto& params = f_.block(c.block).args;
    if (params.size() != c.args.size()) {
      report_inst(i, "block " + names().block(c.block) + " takes " + plural(params.size(), "argument") +
                         ", got " + std::to_string(c.args.size()));
      continue;
    }
    for (std::size_t k = 0; k < params.size(); ++k) {
      ValueId a = c.args[k], p = params[k];
      if (!a.valid() || a.index >= f_.num_values() || !p.valid() || p.index >= f_.num_values()) continue;
      if (!(f_.type_of(a) == f_.type_of(p)))
        report_inst(i, "argument " + std::to_string(k + 1) + " of " + names().block(c.block) + " is " +
                           type_str(f_.type_of(p), f_.symbols()) + ", got " + names().value(a) + " : " +
                           type_str(f_.type_of(a), f_.symbols()));
    }
  }
}

// The builder and parser round const values to the kind; IR built otherwise may not.
void FunctionVerifier::check_const(InstId i) {
  const InstData& d = f_.inst(i);
  if (d.results.size() != 1 || !d.results[0].valid() || d.results[0].index >= f_.num_values()) return;
  ElemKind k = f_.type_of(d.results[0]).elem;
  const auto& values = std::get<ConstAttrs>(d.attrs).values;
  for (std::size_t n = 0; n < values.size(); ++n) {
    double v = values[n];
    bool ok = (is_float(k) && std::isnan(v)) || round_to_kind(v, k) == v;
    if (!ok) {
      std::string msg = "'const' value " + format_double(v);
      if (values.size() > 1) msg += " (element " + std::to_string(n) + ")";
      msg += " is not representable in " + std::string(elem_name(k));
      if (k == ElemKind::T2) msg += " (-1, 0 or 1)";
      report_inst(i, msg);
      return;  // one report per const is enough
    }
  }
}

void FunctionVerifier::check_types(InstId i) {
  const InstData& d = f_.inst(i);
  if (d.op == Op::Call && m_) {
    // infer_types reads the callee's signature; a malformed one is reported when the
    // callee itself is verified.
    if (const auto* c = std::get_if<CallAttrs>(&d.attrs)) {
      if (const Function* callee = m_->find_function(c->callee)) {
        const std::size_t n = callee->symbols().size();
        for (ValueId a : callee->args())
          if (!a.valid() || a.index >= callee->num_values() || !symbols_in_range(callee->type_of(a), n)) return;
        for (const Type& t : callee->result_types())
          if (!symbols_in_range(t, n)) return;
      }
    }
  }
  if (d.op == Op::Ret)
    for (const Type& t : f_.result_types())
      if (!symbols_in_range(t, f_.symbols().size())) return;  // reported with the signature
  std::vector<Type> operand_types, result_types;
  for (ValueId v : d.operands) operand_types.push_back(f_.type_of(v));
  for (ValueId v : d.results) {
    if (!v.valid() || v.index >= f_.num_values()) return;
    result_types.push_back(f_.type_of(v));
  }
  auto inferred = infer_types(m_, f_, d.op, operand_types, d.attrs, result_types);
  if (!inferred.ok()) {
    report_inst(i, inferred.error().message);
    return;
  }
  if (inferred.value().size() != d.results.size())
    report_inst(i, q(d.op) + " produces " + plural(inferred.value().size(), "result") + ", but " +
                       std::to_string(d.results.size()) + " are defined");
}

std::string located_message(const Diagnostic& d) {
  std::string s;
  if (!d.loc.file.empty()) s += d.loc.file + ":";
  if (d.loc.known()) s += std::to_string(d.loc.line) + ":" + std::to_string(d.loc.col) + ":";
  if (!s.empty()) s += " ";
  return s + d.message;
}

}  // namespace

std::vector<Diagnostic> verify_function(const Module* m, const Function& f) {
  std::vector<Diagnostic> out;
  FunctionVerifier(m, f, out).run();
  return out;
}

std::vector<Diagnostic> verify_module(const Module& m) {
  std::vector<Diagnostic> out;
  auto report = [&](const SourceLoc& loc, const std::string& msg) {
    out.push_back(error_at(loc, msg));
  };

  std::map<std::string, const ParamDecl*> params;
  for (const ParamDecl& p : m.params()) {
    if (!valid_global_name(p.name))
      report(p.loc, "parameter name '" + p.name + "' is not a valid name ([A-Za-z_][A-Za-z0-9_.]*)");
    auto [it, fresh] = params.emplace(p.name, &p);
    if (!fresh) {
      Diagnostic d = error_at(p.loc, "parameter @" + p.name + " is declared twice");
      if (it->second->loc.known())
        d.notes.push_back(Diagnostic{it->second->loc, Severity::Note, "first declared here", {}, {}});
      out.push_back(std::move(d));
    }
    if (!layout_ok(p.type)) report(p.loc, "parameter @" + p.name + " has a ternary layout but is not t2");
    if (!symbols_in_range(p.type, p.symbols.size()))
      report(p.loc, "parameter @" + p.name + " has a type that uses a symbol outside its table (" +
                        plural(p.symbols.size(), "symbol") + ")");
    else if (std::string big = too_large(p.type, p.symbols); !big.empty())
      report(p.loc, "parameter @" + p.name + ": " + big);
  }

  std::map<std::string, const Function*> funcs;
  for (const Function& f : m.functions()) {
    auto [it, fresh] = funcs.emplace(f.name(), &f);
    if (fresh) continue;
    std::string msg = "function @" + f.name() + " is defined twice";
    Diagnostic d = error_at(f.loc(), f.loc().known() ? msg : "in @" + f.name() + ": " + msg);
    if (it->second->loc().known())
      d.notes.push_back(Diagnostic{it->second->loc(), Severity::Note, "first defined here", {}, {}});
    out.push_back(std::move(d));
  }

  for (const Function& f : m.functions()) {
    auto diags = verify_function(&m, f);
    out.insert(out.end(), std::make_move_iterator(diags.begin()), std::make_move_iterator(diags.end()));
  }
  return out;
}

Result<void> verify_or_error(const Module& m) {
  auto diags = verify_module(m);
  if (diags.empty()) return success();
  std::string msg = located_message(diags[0]);
  if (diags.size() > 1) msg += " (and " + plural(diags.size() - 1, "more error") + ")";
  return Error{ErrorCode::InvalidInput, std::move(msg), std::move(diags)};
}

}  // namespace ternjit::ir
