// SPDX-License-Identifier: Apache-2.0
// specialize_shapes.cpp - bind symbolic dims to extents, check constraints, fold no-op reshapes.
//
// What: specialize_shapes gives symbols of every function the extents the bindings
// name (see specialize_shapes.h for the key rules), checks the constraints of the
// bound symbols, substitutes the extents in every type, drops the bound symbols (the
// others keep their order and are renumbered) with their constraints, and removes
// `reshape`/`broadcast` that became identities (the IR has no shape arithmetic: these
// are what "folding shape arithmetic" leaves). Parameter declarations follow their
// uses. specialize_function inlines calls and keeps one function, so the printed module
// is a self-contained, deterministic cache key.
// Why: code generators want static shapes; the same layer at N=1, 7 and 64 becomes three
// distinct functions with distinct canonical texts (and cache keys).
// Preconditions: verified IR. Errors are the user's bindings (negative values, violated
// constraints, bindings that make a call inconsistent); the module is then unchanged.
// Not in the pass registry (it takes bindings): `ternjit opt --shape` and the engine call it.
//
//   func @f<N, K>(%x: f32[N, K]) -> f32[N, K] where K % 4 == 0 {     with N=2, K=8:
//     %r = reshape %x : f32[N, K]        ->   func @f(%x: f32[2, 8]) -> f32[2, 8] {
//     %y = relu %r : f32[N, K]                  %y = relu %x : f32[2, 8]
//     ret %y                                    ret %y
#include "passes/specialize_shapes.h"

#include <algorithm>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "ir/bind.h"
#include "ir/infer_type.h"
#include "ir/print.h"
#include "ir/verify.h"
#include "passes/passes.h"

namespace ternjit::passes {

namespace {

using Bindings = std::map<std::string, std::int64_t>;


// One InvalidInput error carrying every diagnostic; the message names the first.
Error errors(std::vector<Diagnostic> diags) {
  std::string msg = diags.front().message;
  if (diags.size() > 1) msg += " (and " + std::to_string(diags.size() - 1) + " more)";
  return Error{ErrorCode::InvalidInput, std::move(msg), std::move(diags)};
}

// An error at `loc`, with a note naming the function unless `loc` already is its header.
Diagnostic error_in(const ir::Function& f, const SourceLoc& loc, std::string message) {
  Diagnostic d{loc, Severity::Error, std::move(message), {}, {}};
  const bool at_header = loc.known() && loc.file == f.loc().file && loc.line == f.loc().line;
  if (!at_header) d.notes.push_back(Diagnostic{f.loc(), Severity::Note, "in @" + f.name(), {}, {}});
  return d;
}

// Old symbol index -> its new dim: the bound extent, or the symbol's new index.
struct SymbolPlan {
  std::vector<ir::Dim> map;
  std::vector<std::string> kept;
};

SymbolPlan plan_symbols(const std::vector<std::string>& names, const std::vector<std::optional<std::int64_t>>& value) {
  SymbolPlan p;
  for (std::size_t s = 0; s < names.size(); ++s) {
    if (value[s]) {
      p.map.push_back(ir::Dim::fixed(*value[s]));
    } else {
      p.map.push_back(ir::Dim::symbolic(ir::SymbolId(static_cast<std::uint32_t>(p.kept.size()))));
      p.kept.push_back(names[s]);
    }
  }
  return p;
}

void substitute(ir::Type& t, const std::vector<ir::Dim>& map) {
  for (ir::Dim& d : t.shape)
    if (!d.is_static() && d.sym.index < map.size()) d = map[d.sym.index];
}

// Removes reshape/broadcast whose operand already has the result type (their uses are
// redirected and they are erased all at once: one pass, however many there are).
void fold_identity_shapes(ir::Function& f) {
  std::vector<ir::ValueId> replaced(f.num_values());
  std::vector<ir::InstId> identities;
  for (ir::BlockId b : f.blocks())
    for (ir::InstId i : f.insts(b)) {
      const ir::InstData& d = f.inst(i);
      if (d.op != ir::Op::Reshape && d.op != ir::Op::Broadcast) continue;
      const ir::ValueId from = d.results[0], to = d.operands[0];
      if (!(f.type_of(from) == f.type_of(to))) continue;
      replaced[from.index] = to;
      identities.push_back(i);
    }
  f.erase_insts(identities);
  f.replace_uses(replaced);
}

// After binding, every value must still hold at most ir::kMaxElements elements: bindings
// that make one larger (M = K = 2^32 for an [M, K] input) are the user's error, reported
// at the first such value's definition. False when one was found.
bool check_sizes(const ir::Function& f, std::vector<Diagnostic>& out) {
  for (ir::BlockId b : f.blocks()) {
    auto check = [&](ir::ValueId v, const SourceLoc& loc) {
      std::string big = ir::too_large(f.type_of(v), f.symbols());
      if (big.empty()) return true;
      out.push_back(error_in(f, loc, "after binding, " + ir::FunctionNames(f).value(v) + ": " + big));
      return false;
    };
    for (ir::ValueId v : f.block(b).args)
      if (!check(v, f.loc())) return false;
    for (ir::InstId i : f.insts(b))
      for (ir::ValueId v : f.inst(i).results)
        if (!check(v, f.inst(i).loc)) return false;
  }
  return true;
}

// Binds, checks and rewrites one function; diagnostics of violated constraints go to `out`.
void specialize_one(ir::Function& f, const ir::ShapeBindings& bindings, std::vector<Diagnostic>& out) {
  const std::string_view layer = ir::layer_of(f.name());
  const std::vector<std::string> names = f.symbols();
  std::vector<std::optional<std::int64_t>> value(names.size());
  bool any = false;
  for (std::size_t s = 0; s < names.size(); ++s) {
    value[s] = bindings.lookup(layer, names[s]);
    any = any || value[s].has_value();
  }
  std::vector<ir::Constraint> kept_constraints;
  for (const ir::Constraint& c : f.constraints()) {
    const auto& v = c.sym.index < value.size() ? value[c.sym.index] : std::nullopt;
    if (!v) {
      kept_constraints.push_back(c);
      continue;
    }
    const std::string& name = names[c.sym.index];
    if (!ir::satisfies(*v, c))
      out.push_back(error_in(f, f.loc(), "symbol '" + name + "' = " + std::to_string(*v) + " violates " +
                                             ir::constraint_str(c, name)));
  }
  if (any) {
    const SymbolPlan plan = plan_symbols(names, value);
    for (std::size_t v = 0; v < f.num_values(); ++v) substitute(f.value(ir::ValueId(static_cast<std::uint32_t>(v))).type, plan.map);
    std::vector<ir::Type> results = f.result_types();
    for (ir::Type& t : results) substitute(t, plan.map);
    f.set_result_types(std::move(results));
    for (ir::Constraint& c : kept_constraints) c.sym = plan.map.at(c.sym.index).sym;
    f.set_constraints(std::move(kept_constraints));
    f.set_symbols(plan.kept);
    if (!check_sizes(f, out)) return;
  }
  fold_identity_shapes(f);
}

// A declaration's symbol takes the static extent all its `param` uses agree on; with no
// use, the bound value. A declaration bound past ir::kMaxElements is reported in `out`.
void specialize_decls(ir::Module& m, const ir::ShapeBindings& bindings, std::vector<Diagnostic>& out) {
  for (ir::ParamDecl& p : m.params()) {
    const std::size_t n = p.symbols.size();
    std::vector<std::vector<ir::Dim>> uses(n);  // per declared symbol, every dim using it
    bool used = false;
    for (const ir::Function& f : m.functions())
      for (ir::BlockId b : f.blocks())
        for (ir::InstId i : f.insts(b)) {
          const ir::InstData& d = f.inst(i);
          if (d.op != ir::Op::Param || std::get<ir::ParamAttrs>(d.attrs).name != p.name) continue;
          const ir::Type& t = f.type_of(d.results[0]);
          TERNJIT_CHECK(t.rank() == p.type.rank(), "specialize-shapes: 'param' rank differs from its declaration");
          used = true;
          for (std::size_t k = 0; k < t.rank(); ++k)
            if (!p.type.shape[k].is_static() && p.type.shape[k].sym.index < n)
              uses[p.type.shape[k].sym.index].push_back(t.shape[k]);
        }
    std::vector<std::optional<std::int64_t>> value(n);
    bool any = false;
    for (std::size_t s = 0; s < n; ++s) {
      if (!used) {
        value[s] = bindings.lookup(ir::layer_of(p.name), p.symbols[s]);
      } else if (!uses[s].empty() && uses[s][0].is_static() &&
                 std::all_of(uses[s].begin(), uses[s].end(), [&](const ir::Dim& d) { return d == uses[s][0]; })) {
        value[s] = uses[s][0].extent;
      }
      any = any || value[s].has_value();
    }
    if (!any) continue;
    const SymbolPlan plan = plan_symbols(p.symbols, value);
    substitute(p.type, plan.map);
    p.symbols = plan.kept;
    if (std::string big = ir::too_large(p.type, p.symbols); !big.empty())
      out.push_back(Diagnostic{p.loc, Severity::Error, "after binding, parameter @" + p.name + ": " + big, {}, {}});
  }
}

// After binding, every call must still type-check: a callee bound apart from its caller
// (`{"N": 8}` fixes BitLinear's N but not the caller's `BitLinear.N`) is the user's error.
// So must every grouped tmatmul: G = ceil(K / group) relates two dims the type rule can
// only check once both are static (a GGUF scale bound as `Tensor[G, N]`, K bound elsewhere).
void recheck_calls(const ir::Module& m, std::vector<Diagnostic>& out) {
  for (const ir::Function& f : m.functions())
    for (ir::BlockId b : f.blocks())
      for (ir::InstId i : f.insts(b)) {
        const ir::InstData& d = f.inst(i);
        const bool grouped = d.op == ir::Op::TMatMul && std::get<ir::TMatMulAttrs>(d.attrs).group > 0;
        if (d.op != ir::Op::Call && !grouped) continue;
        std::vector<ir::Type> ops, declared;
        for (ir::ValueId v : d.operands) ops.push_back(f.type_of(v));
        for (ir::ValueId v : d.results) declared.push_back(f.type_of(v));
        auto r = ir::infer_types(&m, f, d.op, ops, d.attrs, declared);
        if (r.ok()) continue;
        if (grouped)
          out.push_back(error_in(f, d.loc, "after binding, " + r.error().message));
        else
          out.push_back(error_in(f, d.loc, "after binding, the call to @" + std::get<ir::CallAttrs>(d.attrs).callee +
                                               " does not type-check (bind caller and callee symbols alike): " +
                                               r.error().message));
      }
}

// After binding, the module must still verify: every op's type rule that a symbol's
// extent can break (rope's even D, a reshape's element count, attention's head split,
// ...) is checked by the verifier, so it is run here as a user-error stage over the
// bound module rather than left to trip the pipeline's verify-after-each (an internal
// error). recheck_calls has already reported the calls with a clearer message; what it
// reported is not repeated.
void reverify(const ir::Module& m, std::vector<Diagnostic>& out) {
  for (const ir::Function& f : m.functions())
    for (Diagnostic& d : ir::verify_function(&m, f)) {
      d.message = "after binding, " + d.message;
      if (d.loc.known() && !(d.loc.file == f.loc().file && d.loc.line == f.loc().line))
        d.notes.push_back(Diagnostic{f.loc(), Severity::Note, "in @" + f.name(), {}, {}});
      out.push_back(std::move(d));
    }
}

// Names of the functions `root` reaches through calls, `root` included.
std::set<std::string> reachable(const ir::Module& m, const std::string& root) {
  std::set<std::string> seen{root};
  std::vector<std::string> work{root};
  while (!work.empty()) {
    const ir::Function* f = m.find_function(work.back());
    work.pop_back();
    if (!f) continue;
    for (ir::BlockId b : f->blocks())
      for (ir::InstId i : f->insts(b)) {
        const ir::InstData& d = f->inst(i);
        if (d.op != ir::Op::Call) continue;
        const std::string& callee = std::get<ir::CallAttrs>(d.attrs).callee;
        if (seen.insert(callee).second) work.push_back(callee);
      }
  }
  return seen;
}

// Keeps the functions named in `keep` and the parameters they read, in module order.
void keep_only(ir::Module& m, const std::set<std::string>& keep) {
  auto& fs = m.functions();
  fs.erase(std::remove_if(fs.begin(), fs.end(), [&](const ir::Function& f) { return !keep.count(f.name()); }),
           fs.end());
  std::set<std::string> read;
  for (const ir::Function& f : fs)
    for (ir::BlockId b : f.blocks())
      for (ir::InstId i : f.insts(b))
        if (f.inst(i).op == ir::Op::Param) read.insert(std::get<ir::ParamAttrs>(f.inst(i).attrs).name);
  auto& ps = m.params();
  ps.erase(std::remove_if(ps.begin(), ps.end(), [&](const ir::ParamDecl& p) { return !read.count(p.name); }),
           ps.end());
}

}  // namespace

Result<void> specialize_shapes(ir::Module& m, const Bindings& bindings) {
  for (const auto& [key, v] : bindings)
    if (v < 0)
      return make_error(ErrorCode::InvalidInput,
                        "shape binding '" + key + "' = " + std::to_string(v) + " is negative");
  const ir::ShapeBindings shapes{bindings};
  ir::Module out = m;
  std::vector<Diagnostic> problems;
  for (ir::Function& f : out.functions()) specialize_one(f, shapes, problems);
  if (!problems.empty()) return errors(std::move(problems));
  specialize_decls(out, shapes, problems);
  recheck_calls(out, problems);
  if (!problems.empty()) return errors(std::move(problems));
  reverify(out, problems);
  if (!problems.empty()) return errors(std::move(problems));
  m = std::move(out);
  return success();
}

Result<ir::Module> specialize_function(const ir::Module& m, std::string_view function, const Bindings& bindings,
                                       bool require_static) {
  const ir::Function* f = m.find_function(function);
  if (!f) return make_error(ErrorCode::NotFound, "no function @" + std::string(function) + " in the module");
  const std::string name = f->name();
  ir::Module out = m;
  keep_only(out, reachable(out, name));
  TERNJIT_TRY_VOID(inline_calls(out));
  keep_only(out, reachable(out, name));
  TERNJIT_TRY_VOID(specialize_shapes(out, bindings));
  if (require_static) {
    const ir::Function& g = *out.find_function(name);
    if (!g.symbols().empty()) {
      std::string list;
      for (const std::string& s : g.symbols()) list += (list.empty() ? "'" : ", '") + s + "'";
      return make_located_error(g.loc(), "@" + name + " is not fully static: bind " + list);
    }
  }
  return out;
}

namespace {

// The bytes of a static type within ir::kMaxElements (no overflow: at most 4 bytes an
// element).
std::int64_t bytes_of(const ir::Type& t) {
  const auto n = t.static_numel();
  TERNJIT_CHECK(n.has_value(), "check_tensor_bytes: a type is not static or too large: " + ir::type_str(t, {}));
  return (*n * elem_bits(t.elem) + 7) / 8;
}

Error too_many_bytes(std::string_view function, const std::string& what, const ir::Type& t, std::int64_t bytes) {
  return make_error(ErrorCode::InvalidArgument, "'" + std::string(function) + "' with these shapes needs " + what +
                                                    " : " + ir::type_str(t, {}) + ", " + std::to_string(bytes) +
                                                    " bytes: more than one tensor may take (" +
                                                    std::to_string(kMaxTensorBytes) + " bytes)");
}

}  // namespace

Result<void> check_tensor_bytes(const ir::Module& m, std::string_view function) {
  const ir::Function* f = m.find_function(function);
  if (!f) return make_error(ErrorCode::NotFound, "no function @" + std::string(function) + " in the module");
  for (const ir::ParamDecl& p : m.params()) {
    if (!p.type.is_static()) continue;  // not read by `function` (specialize_function keeps only those)
    if (const std::int64_t bytes = bytes_of(p.type); bytes > kMaxTensorBytes)
      return too_many_bytes(function, "parameter @" + p.name, p.type, bytes);
  }
  for (ir::BlockId b : f->blocks()) {
    std::vector<ir::ValueId> values(f->block(b).args.begin(), f->block(b).args.end());
    for (ir::InstId i : f->insts(b)) values.insert(values.end(), f->inst(i).results.begin(), f->inst(i).results.end());
    for (ir::ValueId v : values)
      if (const std::int64_t bytes = bytes_of(f->type_of(v)); bytes > kMaxTensorBytes)
        return too_many_bytes(function, ir::FunctionNames(*f).value(v), f->type_of(v), bytes);
  }
  return success();
}

}  // namespace ternjit::passes
