// SPDX-License-Identifier: Apache-2.0
// interpret.cpp - the reference interpreter: binding, block execution and the op switch (see interpret.h).
//
// The numerics of each op family live in interpret_ops.cpp; this file binds arguments
// and parameters, walks the blocks and dispatches one case per op.
#include "ir/interpret.h"

#include <optional>
#include <utility>

#include "ir/builder.h"
#include "ir/interpret_internal.h"

namespace ternjit::ir {

namespace {

using namespace interp;  // NOLINT: the op numerics, private to ir/

// Where a symbol got its extent, for error messages.
struct Binding {
  std::int64_t extent = 0;
  std::string source;  // "argument %x", "parameter @w"
};

// The state of one function activation.
struct Frame {
  const Function& f;
  std::vector<std::optional<Binding>> syms;
  std::vector<std::optional<HostTensor>> values;
};

// What the block loop does after an instruction.
struct Flow {
  enum class Kind : std::uint8_t { Next, Jump, Return };
  Kind kind = Kind::Next;
  BlockId target;
  std::vector<HostTensor> returned;
};

std::string block_str(const Function& f, BlockId b) {
  const std::string& n = f.block(b).name;
  return "^" + (n.empty() ? "bb" + std::to_string(b.index) : n);
}

class Interpreter {
 public:
  Interpreter(const Module& m, const ParamValues& params, const InterpretOptions& options)
      : m_(m), params_(params), options_(options) {}

  Result<std::vector<HostTensor>> run(const Function& f, std::span<const HostTensor> args, int depth);

 private:
  Result<void> bind_dim(Frame& fr, SymbolId sym, std::int64_t extent, const std::string& source,
                        const SourceLoc& loc);
  Result<void> bind_tensor(Frame& fr, const Type& declared, const HostTensor& t, const std::string& what,
                           const SourceLoc& loc);
  Result<void> bind_type(Frame& fr, const Type& declared, ElemKind kind, const Extents& shape, const std::string& what,
                         const SourceLoc& loc);
  Result<void> bind_params(Frame& fr);
  Result<Extents> concrete(const Frame& fr, const Type& t, const SourceLoc& loc, const std::string& what) const;
  Result<Flow> execute(Frame& fr, const InstData& inst, int depth);
  Result<Flow> jump(Frame& fr, const InstData& inst, const BlockCall& call);

  const Module& m_;
  const ParamValues& params_;
  const InterpretOptions& options_;
  std::uint64_t steps_ = 0;
  std::uint64_t work_ = 0;  // InterpretOptions::max_work
};

Result<void> Interpreter::bind_dim(Frame& fr, SymbolId sym, std::int64_t extent, const std::string& source,
                                   const SourceLoc& loc) {
  if (sym.index >= fr.syms.size())
    return fail_at(loc, "@" + fr.f.name() + " uses an undeclared symbol #" + std::to_string(sym.index));
  std::optional<Binding>& b = fr.syms[sym.index];
  if (!b) {
    b = Binding{extent, source};
  } else if (b->extent != extent) {
    return fail_at(loc, "symbol '" + fr.f.symbol_name(sym) + "' is " + std::to_string(b->extent) + " from " +
                            b->source + " but " + std::to_string(extent) + " from " + source);
  }
  return success();
}

Result<void> Interpreter::bind_tensor(Frame& fr, const Type& declared, const HostTensor& t,
                                      const std::string& what, const SourceLoc& loc) {
  if (options_.f32_as_f64 && t.kind == ElemKind::F32) {
    // Any double is an f32 value in this mode: validate everything but representability.
    HostTensor rounded = t;
    for (double& v : rounded.data) v = static_cast<double>(static_cast<float>(v));
    if (auto v = validate(rounded, what); !v.ok()) return fail_at(loc, v.error().message);
  } else if (auto v = validate(t, what); !v.ok()) {
    return fail_at(loc, v.error().message);
  }
  return bind_type(fr, declared, t.kind, t.shape, what, loc);
}

Result<void> Interpreter::bind_type(Frame& fr, const Type& declared, ElemKind kind, const Extents& shape,
                                    const std::string& what, const SourceLoc& loc) {
  const std::string want = type_str(declared, fr.f.symbols());
  const std::string got = extents_str(kind, shape);
  if (kind != declared.elem || shape.size() != declared.rank()) return fail_at(loc, what + " must be " + want + ", got " + got);
  for (std::size_t d = 0; d < declared.rank(); ++d) {
    const Dim& dim = declared.shape[d];
    if (dim.is_static()) {
      if (dim.extent != shape[d])
        return fail_at(loc, what + " must be " + want + ", got " + got + " (dim " + std::to_string(d) + " is " +
                                std::to_string(shape[d]) + ", expected " + std::to_string(dim.extent) + ")");
    } else {
      TERNJIT_TRY_VOID(bind_dim(fr, dim.sym, shape[d], what, loc));
    }
  }
  return success();
}

Result<void> Interpreter::bind_params(Frame& fr) {
  for (BlockId b : fr.f.blocks()) {
    for (InstId i : fr.f.insts(b)) {
      const InstData& inst = fr.f.inst(i);
      if (inst.op != Op::Param) continue;
      const auto* p = std::get_if<ParamAttrs>(&inst.attrs);
      if (!p || inst.results.size() != 1) return fail_at(inst.loc, "malformed 'param' instruction");
      auto it = params_.values.find(p->name);
      if (it == params_.values.end()) return fail_at(inst.loc, "no value given for parameter @" + p->name);
      // A stored value satisfies its invariant by construction: only kind and shape are checked.
      const StoredTensor& v = it->second;
      TERNJIT_TRY_VOID(bind_type(fr, fr.f.type_of(inst.results[0]), v.kind(), v.shape(), "parameter @" + p->name, inst.loc));
    }
  }
  return success();
}

Result<Extents> Interpreter::concrete(const Frame& fr, const Type& t, const SourceLoc& loc,
                                      const std::string& what) const {
  Extents out;
  out.reserve(t.rank());
  std::int64_t n = 1;
  for (const Dim& d : t.shape) {
    std::int64_t e = d.extent;
    if (!d.is_static()) {
      if (d.sym.index >= fr.syms.size())
        return fail_at(loc, "@" + fr.f.name() + " uses an undeclared symbol #" + std::to_string(d.sym.index));
      if (!fr.syms[d.sym.index])
        return fail_at(loc, "symbol '" + fr.f.symbol_name(d.sym) + "' in the type of " + what +
                                " is not bound by any argument or parameter of @" + fr.f.name());
      e = fr.syms[d.sym.index]->extent;
    }
    if (e != 0 && n > options_.max_elements / e)
      return fail_at(loc, what + " of type " + type_str(t, fr.f.symbols()) + " has more than " +
                              std::to_string(options_.max_elements) + " elements (the interpreter's limit)");
    n *= e;
    out.push_back(e);
  }
  return out;
}

Result<std::vector<HostTensor>> Interpreter::run(const Function& f, std::span<const HostTensor> args,
                                                 int depth) {
  if (depth > options_.max_call_depth)
    return fail_at(f.loc(), "calls nest deeper than " + std::to_string(options_.max_call_depth) +
                                " levels (entering @" + f.name() + ")");
  if (f.blocks().empty()) return fail_at(f.loc(), "@" + f.name() + " has no body");
  Frame fr{f, std::vector<std::optional<Binding>>(f.symbols().size()),
           std::vector<std::optional<HostTensor>>(f.num_values())};

  // Bind symbols from the arguments, then from the parameters the function reads.
  const auto formals = f.args();
  if (formals.size() != args.size())
    return fail_at(f.loc(), "@" + f.name() + " takes " + std::to_string(formals.size()) + " argument" +
                                (formals.size() == 1 ? "" : "s") + ", got " + std::to_string(args.size()));
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& name = f.value(formals[i]).name;
    const std::string what = name.empty() ? "argument " + std::to_string(i + 1) : "argument %" + name;
    TERNJIT_TRY_VOID(bind_tensor(fr, f.type_of(formals[i]), args[i], what, f.loc()));
  }
  TERNJIT_TRY_VOID(bind_params(fr));
  for (const Constraint& c : f.constraints()) {
    if (c.sym.index >= fr.syms.size() || !fr.syms[c.sym.index]) continue;  // unbound: checked where used
    const Binding& b = *fr.syms[c.sym.index];
    if (!satisfies(b.extent, c))
      return fail_at(f.loc(), "symbol '" + f.symbol_name(c.sym) + "' is " + std::to_string(b.extent) + " (from " +
                                  b.source + ") but @" + f.name() + " requires " + constraint_str(c, f.symbol_name(c.sym)));
  }
  for (std::size_t i = 0; i < args.size(); ++i) fr.values[formals[i].index] = args[i];

  BlockId block = f.entry();
  for (;;) {
    bool jumped = false;
    for (InstId id : f.insts(block)) {
      if (++steps_ > options_.max_steps)
        return fail_at(f.inst(id).loc, "execution exceeded " + std::to_string(options_.max_steps) +
                                           " instructions (an infinite loop?) in @" + f.name() + ": raise " +
                                           options_.max_steps_name + " to allow more");
      TERNJIT_TRY(Flow flow, execute(fr, f.inst(id), depth));
      if (flow.kind == Flow::Kind::Return) {
        // Verified IR returns the declared result types; check their concrete shapes.
        const auto& rt = f.result_types();
        if (rt.size() != flow.returned.size())
          return fail_at(f.inst(id).loc, "'ret' returns " + std::to_string(flow.returned.size()) +
                                             " values but @" + f.name() + " returns " + std::to_string(rt.size()));
        for (std::size_t r = 0; r < rt.size(); ++r) {
          TERNJIT_TRY(Extents shape, concrete(fr, rt[r], f.inst(id).loc, "result " + std::to_string(r + 1)));
          TERNJIT_CHECK(flow.returned[r].kind == rt[r].elem && flow.returned[r].shape == shape,
                        "@" + f.name() + " returns " + flow.returned[r].describe() + " for result type " +
                            extents_str(rt[r].elem, shape));
        }
        return std::move(flow.returned);
      }
      if (flow.kind == Flow::Kind::Jump) {
        block = flow.target;
        jumped = true;
        break;
      }
    }
    if (!jumped) return fail_at(f.loc(), "block " + block_str(f, block) + " of @" + f.name() + " has no terminator");
  }
}

Result<Flow> Interpreter::jump(Frame& fr, const InstData& inst, const BlockCall& call) {
  const Function& f = fr.f;
  if (!call.block.valid() || call.block.index >= f.num_blocks())
    return fail_at(inst.loc, q(inst.op) + " jumps to a block that does not exist");
  const auto& params = f.block(call.block).args;
  if (params.size() != call.args.size())
    return fail_at(inst.loc, q(inst.op) + " passes " + std::to_string(call.args.size()) + " arguments to " +
                                 block_str(f, call.block) + ", which takes " + std::to_string(params.size()));
  // Read every argument before writing any block parameter: a loop back-edge may pass
  // the block's own parameters in a different order (parallel assignment).
  std::vector<HostTensor> vals;
  for (ValueId v : call.args) {
    if (!v.valid() || v.index >= fr.values.size() || !fr.values[v.index])
      return fail_at(inst.loc, q(inst.op) + " passes a value before it is defined");
    vals.push_back(*fr.values[v.index]);
  }
  for (std::size_t i = 0; i < params.size(); ++i) {
    const Type& t = f.type_of(params[i]);
    TERNJIT_TRY(Extents shape, concrete(fr, t, inst.loc, "block argument"));
    TERNJIT_CHECK(vals[i].kind == t.elem && vals[i].shape == shape,
                  q(inst.op) + " passes " + vals[i].describe() + " to a block argument of type " +
                      extents_str(t.elem, shape));
    fr.values[params[i].index] = std::move(vals[i]);
  }
  return Flow{Flow::Kind::Jump, call.block, {}};
}

Result<Flow> Interpreter::execute(Frame& fr, const InstData& inst, int depth) {
  const Function& f = fr.f;
  // Cheap structural checks, so that unverified IR gives an error rather than UB.
  const int want_ops = op_num_operands(inst.op), want_res = op_num_results(inst.op);
  if ((want_ops >= 0 && inst.operands.size() != static_cast<std::size_t>(want_ops)) ||
      (want_res >= 0 && inst.results.size() != static_cast<std::size_t>(want_res)) ||
      !attrs_match(inst.op, inst.attrs))
    return fail_at(inst.loc, "malformed " + q(inst.op) + " instruction (operand, result or attribute mismatch)");
  std::vector<const HostTensor*> ops;
  for (ValueId v : inst.operands) {
    if (!v.valid() || v.index >= fr.values.size() || !fr.values[v.index])
      return fail_at(inst.loc, q(inst.op) + " uses a value before it is defined");
    ops.push_back(&*fr.values[v.index]);
  }
  // Concrete result shapes (also bounds the size of every tensor created below).
  std::vector<Extents> shapes;
  for (std::size_t r = 0; r < inst.results.size(); ++r) {
    TERNJIT_TRY(Extents s, concrete(fr, f.type_of(inst.results[r]), inst.loc,
                                    "the result of " + q(inst.op)));
    shapes.push_back(std::move(s));
  }
  // The work of this instruction (InterpretOptions::max_work), counted before it runs.
  // Each count is at most max_elements (2^28 by default) and K too, so nothing wraps.
  std::uint64_t work = 0;
  for (const HostTensor* t : ops) work += t->data.size();
  for (const Extents& s : shapes) work += static_cast<std::uint64_t>(numel(s));
  if ((inst.op == Op::MatMul || inst.op == Op::TMatMul) && !ops[0]->shape.empty() && !shapes.empty())
    work += static_cast<std::uint64_t>(numel(shapes[0])) * static_cast<std::uint64_t>(ops[0]->shape.back());
  // attention reads up to C cache rows of D elements for each of its M * HQ rows.
  if (inst.op == Op::Attention && !shapes.empty() && ops[1]->shape.size() == 4)
    work += static_cast<std::uint64_t>(numel(shapes[0])) * static_cast<std::uint64_t>(ops[1]->shape[1]) * 2;
  work_ += work;
  if (work_ > options_.max_work)
    return fail_at(inst.loc, "execution exceeded the interpreter's work limit of " + std::to_string(options_.max_work) +
                                 " element operations at " + q(inst.op) + " in @" + f.name() +
                                 " (a long loop of large ops?): raise " + options_.max_work_name + " to allow more");
  auto kind = [&](std::size_t r = 0) { return f.type_of(inst.results.at(r)).elem; };
  auto axis_of = [&](const HostTensor& t) -> Result<std::size_t> {
    const auto& ax = std::get<AxisAttrs>(inst.attrs);
    if (ax.axis < 0 || ax.axis >= static_cast<std::int64_t>(t.shape.size()))
      return fail_at(inst.loc, q(inst.op) + " axis " + std::to_string(ax.axis) + " is out of range for " +
                                   t.describe());
    return static_cast<std::size_t>(ax.axis);
  };

  std::vector<HostTensor> out;
  switch (inst.op) {
    // ---------------------------------------------------------------- structure
    case Op::Const: {
      const auto& c = std::get<ConstAttrs>(inst.attrs);
      const std::int64_t n = numel(shapes[0]);
      if (c.values.size() != 1 && static_cast<std::int64_t>(c.values.size()) != n)
        return fail_at(inst.loc, "'const' has " + std::to_string(c.values.size()) + " values but " +
                                     extents_str(kind(), shapes[0]) + " needs " + std::to_string(n));
      HostTensor t = HostTensor::zeros(kind(), shapes[0]);
      for (std::size_t i = 0; i < t.data.size(); ++i)
        t.data[i] = round_to_kind(c.values.size() == 1 ? c.values[0] : c.values[i], t.kind);
      out.push_back(std::move(t));
      break;
    }
    case Op::Param: {
      const auto& p = std::get<ParamAttrs>(inst.attrs);
      auto it = params_.values.find(p.name);
      TERNJIT_CHECK(it != params_.values.end(), "parameter @" + p.name + " was not bound up front");
      out.push_back(it->second.to_host());  // decoded for this one evaluation
      break;
    }
    case Op::Call: {
      const auto& c = std::get<CallAttrs>(inst.attrs);
      const Function* callee = m_.find_function(c.callee);
      if (!callee) {
        Error e = fail_at(inst.loc, "call to unknown function @" + c.callee);
        e.code = ErrorCode::NotFound;
        return e;
      }
      std::vector<HostTensor> args;
      for (const HostTensor* t : ops) args.push_back(*t);
      TERNJIT_TRY(out, run(*callee, args, depth + 1));
      // The callee may bind result symbols the call site could not see (from its
      // parameters), so a disagreement here is an input error, not our bug.
      if (out.size() != inst.results.size())
        return fail_at(inst.loc, "@" + c.callee + " returned " + std::to_string(out.size()) +
                                     " values but the call expects " + std::to_string(inst.results.size()));
      for (std::size_t r = 0; r < out.size(); ++r)
        if (out[r].kind != kind(r) || out[r].shape != shapes[r])
          return fail_at(inst.loc, "@" + c.callee + " returned " + out[r].describe() + " as result " +
                                       std::to_string(r + 1) + " but the call expects " +
                                       extents_str(kind(r), shapes[r]));
      break;
    }
    case Op::Ret: {
      Flow flow{Flow::Kind::Return, {}, {}};
      for (const HostTensor* t : ops) flow.returned.push_back(*t);
      return flow;
    }
    case Op::Br:
      if (inst.targets.size() != 1) return fail_at(inst.loc, "'br' needs 1 target");
      return jump(fr, inst, inst.targets[0]);
    case Op::CondBr: {
      if (inst.targets.size() != 2) return fail_at(inst.loc, "'cond_br' needs 2 targets");
      if (ops[0]->data.size() != 1 || !ops[0]->shape.empty())
        return fail_at(inst.loc, "'cond_br' condition must be a scalar, got " + ops[0]->describe());
      return jump(fr, inst, inst.targets[ops[0]->data[0] != 0 ? 0 : 1]);
    }

    // ---------------------------------------------------------------- elementwise
    case Op::Add: case Op::Sub: case Op::Mul: case Op::Div: case Op::Max: case Op::Min:
    case Op::Neg: case Op::Abs: case Op::Relu: case Op::Sigmoid: case Op::Tanh: case Op::Gelu:
    case Op::Silu: case Op::Exp: case Op::Log: case Op::Sqrt: case Op::Rsqrt: {
      TERNJIT_TRY(auto r, elementwise(inst, inst.op, *ops[0], ops.size() > 1 ? ops[1] : nullptr, kind(),
                                      options_.f32_as_f64));
      out.push_back(std::move(r));
      break;
    }
    case Op::Cast:
      out.push_back(cast(*ops[0], std::get<CastAttrs>(inst.attrs).to, options_.f32_as_f64));
      break;

    // ---------------------------------------------------------------- shape
    case Op::Transpose: {
      const auto& perm = std::get<PermAttrs>(inst.attrs).perm;
      std::vector<bool> seen(perm.size(), false);
      bool ok = perm.size() == ops[0]->shape.size();
      for (std::size_t i = 0; ok && i < perm.size(); ++i) {
        ok = perm[i] >= 0 && perm[i] < static_cast<std::int64_t>(perm.size()) && !seen[static_cast<std::size_t>(perm[i])];
        if (ok) seen[static_cast<std::size_t>(perm[i])] = true;
      }
      if (!ok) return fail_at(inst.loc, "'transpose' permutation does not fit " + ops[0]->describe());
      out.push_back(transpose(*ops[0], perm));
      break;
    }
    case Op::Reshape: {
      TERNJIT_CHECK(numel(shapes[0]) == ops[0]->numel(),
                    "'reshape' of " + ops[0]->describe() + " to " + index_str(shapes[0]) + " changes the size");
      out.push_back(HostTensor{ops[0]->kind, shapes[0], ops[0]->data});
      break;
    }
    case Op::Broadcast: out.push_back(broadcast_to(*ops[0], shapes[0])); break;

    // ---------------------------------------------------------------- linear algebra
    case Op::MatMul: out.push_back(matmul(*ops[0], *ops[1], kind(), options_.f32_as_f64)); break;
    case Op::ReduceSum: case Op::ReduceMean: case Op::ReduceMax: {
      TERNJIT_TRY(std::size_t axis, axis_of(*ops[0]));
      TERNJIT_TRY(auto r,
                  reduce(inst, *ops[0], axis, std::get<AxisAttrs>(inst.attrs).keepdims, kind(), options_.f32_as_f64));
      out.push_back(std::move(r));
      break;
    }
    case Op::Softmax: {
      TERNJIT_TRY(std::size_t axis, axis_of(*ops[0]));
      out.push_back(softmax(*ops[0], axis, kind(), options_.f32_as_f64));
      break;
    }
    case Op::RmsNorm:
      out.push_back(rmsnorm(*ops[0], *ops[1], std::get<EpsAttrs>(inst.attrs).eps, kind(), options_.f32_as_f64));
      break;

    // ---------------------------------------------------------------- quantization
    case Op::QuantizeInt8: case Op::Ternarize: case Op::TernarizeAbsmean: case Op::Quantize: case Op::TQuantize: {
      std::vector<ElemKind> kinds;
      for (std::size_t r = 0; r < inst.results.size(); ++r) kinds.push_back(kind(r));
      out = quantization(inst, *ops[0], kinds);
      break;
    }
    case Op::Dequantize: {
      TERNJIT_TRY(auto r, dequantize(inst, *ops[0], *ops[1], kind(), options_.f32_as_f64));
      out.push_back(std::move(r));
      break;
    }

    // ---------------------------------------------------------------- kernel ops
    case Op::TMatMul: {
      if (ops.size() != 2 + static_cast<std::size_t>(std::get<TMatMulAttrs>(inst.attrs).num_epilogue()))
        return fail_at(inst.loc, "malformed 'tmatmul' instruction (operand count does not match its attributes)");
      TERNJIT_TRY(auto r, tmatmul(inst, std::get<TMatMulAttrs>(inst.attrs), ops, kind(), options_.f32_as_f64));
      out.push_back(std::move(r));
      break;
    }
    case Op::Ewise: {
      TERNJIT_TRY(auto r, ewise(inst, std::get<EwiseAttrs>(inst.attrs), ops, kind(), options_.f32_as_f64));
      out.push_back(std::move(r));
      break;
    }

    // ---------------------------------------------------------------- decoder ops
    case Op::Gather: {
      TERNJIT_TRY(auto r, gather(inst, *ops[0], *ops[1]));
      out.push_back(std::move(r));
      break;
    }
    case Op::Slice: {
      const auto& sl = std::get<SliceAttrs>(inst.attrs);
      const auto rank = static_cast<std::int64_t>(ops[0]->shape.size());
      if (sl.axis < 0 || sl.axis >= rank || sl.start < 0 || sl.size < 0 ||
          sl.start > ops[0]->shape[static_cast<std::size_t>(sl.axis)] - sl.size)
        return fail_at(inst.loc, "'slice' of " + std::to_string(sl.size) + " elements from " +
                                     std::to_string(sl.start) + " along axis " + std::to_string(sl.axis) +
                                     " does not fit " + ops[0]->describe());
      out.push_back(slice(*ops[0], static_cast<std::size_t>(sl.axis), sl.start, sl.size));
      break;
    }
    case Op::Concat: {
      TERNJIT_TRY(std::size_t axis, axis_of(*ops[0]));
      out.push_back(concat(ops, axis));
      break;
    }
    case Op::LayerNorm:
      out.push_back(layernorm(*ops[0], *ops[1], *ops[2], std::get<EpsAttrs>(inst.attrs).eps, kind(), options_.f32_as_f64));
      break;
    case Op::Rope: {
      TERNJIT_TRY(auto r, rope(inst, std::get<RopeAttrs>(inst.attrs), *ops[0], *ops[1], options_.f32_as_f64));
      out.push_back(std::move(r));
      break;
    }
    case Op::CausalSoftmax: {
      TERNJIT_TRY(auto r, causal_softmax(inst, *ops[0], *ops[1], kind(), options_.f32_as_f64));
      out.push_back(std::move(r));
      break;
    }
    case Op::KvWrite: {
      TERNJIT_TRY(auto r, kv_write(inst, std::get<LayerAttrs>(inst.attrs).layer, *ops[0], *ops[1], *ops[2],
                                   options_.f32_as_f64));
      out.push_back(std::move(r));
      break;
    }
    case Op::Attention: {
      TERNJIT_TRY(auto r, attention(inst, std::get<AttentionAttrs>(inst.attrs), *ops[0], *ops[1], *ops[2], *ops[3],
                                    options_.f32_as_f64));
      out.push_back(std::move(r));
      break;
    }
  }

  TERNJIT_CHECK(out.size() == inst.results.size(), q(inst.op) + " produced the wrong number of results");
  for (std::size_t r = 0; r < out.size(); ++r) {
    TERNJIT_CHECK(out[r].kind == kind(r) && out[r].shape == shapes[r] &&
                      out[r].data.size() == static_cast<std::size_t>(numel(shapes[r])),
                  q(inst.op) + " computed " + out[r].describe() + " but its type is " +
                      extents_str(kind(r), shapes[r]));
    fr.values[inst.results[r].index] = std::move(out[r]);
  }
  return Flow{};
}

}  // namespace

void ParamValues::set(const std::string& name, const HostTensor& t) {
  values.insert_or_assign(name, StoredTensor::from_host(t));
}

Result<std::vector<HostTensor>> interpret(const Module& m, const Function& f, std::span<const HostTensor> args,
                                          const ParamValues& params, const InterpretOptions& options) {
  Interpreter interp(m, params, options);
  return interp.run(f, args, 0);
}

Result<std::vector<HostTensor>> interpret(const Module& m, std::string_view func_name,
                                          std::span<const HostTensor> args, const ParamValues& params,
                                          const InterpretOptions& options) {
  const Function* f = m.find_function(func_name);
  if (!f) return make_error(ErrorCode::NotFound, "no function @" + std::string(func_name) + " in the module");
  return interpret(m, *f, args, params, options);
}

Module single_inst_module(const Function& f, const InstData& inst) {
  Module m;
  Function g("step");
  const BlockId b = g.add_block();
  std::vector<ValueId> ops;
  for (ValueId v : inst.operands) ops.push_back(g.add_block_arg(b, f.type_of(v)));
  std::vector<Type> rt;
  for (ValueId r : inst.results) rt.push_back(f.type_of(r));
  const InstId i = g.append_inst(b, inst.op, ops, rt, inst.attrs);
  g.append_inst(b, Op::Ret, g.inst(i).results, {});
  g.set_result_types(rt);
  m.functions().push_back(std::move(g));
  return m;
}

}  // namespace ternjit::ir
