// SPDX-License-Identifier: Apache-2.0
// specialize.cpp - the compile flow of one (function, input shapes), as a list of stages.
//
// Program::Impl::specialize reads top to bottom as the stages (engine_internal.h
// declares each; every one is callable alone):
//   find_entry -> bind_and_freeze (bind_symbols; the weights frozen) -> [a run-time-rows
//   bucket: compile_rows] -> specialize_module -> compile_cached { disk cache, else
//   optimize -> choose_target -> decide -> Target::compile } -> Target::load (tuning at
//   load decided there by the target) -> make_kernel.
// A run-time-rows bucket goes through the same stages with the row symbol left free for
// the analysis (passes::check_row_batch, Target::runtime_rows) and then bound to the
// bucket's bound: one flow, with a rows bound.
#include <algorithm>
#include <map>
#include <optional>

#include "ir/bind.h"
#include "ir/print.h"
#include "jit/engine_internal.h"
#include "passes/pipeline.h"
#include "passes/row_batch.h"
#include "passes/specialize_shapes.h"

namespace ternjit {

namespace jit {

namespace {

// "f32[4,64]" (compact, for trace lines).
std::string compact_type(ElemKind k, std::span<const std::int64_t> s) {
  std::string r(elem_name(k));
  r += '[';
  for (std::size_t i = 0; i < s.size(); ++i) r += (i ? "," : "") + std::to_string(s[i]);
  return r + ']';
}

constexpr const char* kLookupName[] = {"hit", "miss", "wait"};

// A trace field's value: no ',' or newline.
std::string trace_field(std::string s) {
  for (char& c : s) c = c == ',' || c == '\n' ? ';' : c;
  return s;
}

// `e` as Unsupported: a stage that declines for a rows bound (compile_rows).
Error declined(Error e) {
  e.code = ErrorCode::Unsupported;
  return e;
}

}  // namespace

std::vector<std::string> params_used(const ir::Module& m, const ir::Function& f) {
  std::vector<std::string> used;
  std::vector<std::string> seen{f.name()};
  std::vector<const ir::Function*> work{&f};
  while (!work.empty()) {
    const ir::Function* g = work.back();
    work.pop_back();
    for (ir::BlockId b : g->blocks())
      for (ir::InstId i : g->insts(b)) {
        const ir::InstData& inst = g->inst(i);
        if (inst.op == ir::Op::Param) {
          const std::string& name = std::get<ir::ParamAttrs>(inst.attrs).name;
          if (std::find(used.begin(), used.end(), name) == used.end()) used.push_back(name);
        }
        if (inst.op == ir::Op::Call) {
          const std::string& callee = std::get<ir::CallAttrs>(inst.attrs).callee;
          const ir::Function* c = m.find_function(callee);
          if (c && std::find(seen.begin(), seen.end(), callee) == seen.end()) {
            seen.push_back(callee);
            work.push_back(c);
          }
        }
      }
  }
  return used;
}

Result<const ir::Function*> find_entry(const ir::Module& module, std::string_view function, std::size_t n_inputs) {
  const ir::Function* f = module.find_function(function);
  if (!f) {
    std::string have;
    for (const ir::Function& g : module.functions()) have += (have.empty() ? "" : ", ") + g.name();
    return make_error(ErrorCode::NotFound, "no function '" + std::string(function) + "' in the program (functions: " +
                                               (have.empty() ? "none" : have) + ")");
  }
  if (n_inputs != f->args().size())
    return make_error(ErrorCode::InvalidArgument, "'" + f->name() + "' takes " + std::to_string(f->args().size()) +
                                                      " input" + (f->args().size() == 1 ? "" : "s") + ", got " +
                                                      std::to_string(n_inputs));
  return f;
}

Result<std::map<std::string, std::int64_t>> bind_symbols(const ir::Function& f, std::span<const TensorView> inputs,
                                                         const Weights::SymbolMap& weight_symbols) {
  std::map<std::string, std::pair<std::int64_t, std::string>> symbols;
  for (auto& [key, v] : weight_symbols) symbols.emplace(key, std::pair{v.first, "parameter '" + v.second + "'"});
  const std::string_view layer = ir::layer_of(f.name());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const ir::Type& ty = f.type_of(f.args()[i]);
    const std::string what = "input " + std::to_string(i) + " ('" + arg_label(f, i) + "') of '" + f.name() + "'";
    const std::string declared = ir::type_str(ty, f.symbols());
    const TensorView& v = inputs[i];
    if (v.kind != ty.elem)
      return make_error(ErrorCode::InvalidArgument,
                        what + " is " + std::string(elem_name(v.kind)) + " but is declared " + declared);
    if (v.shape.size() != ty.rank())
      return make_error(ErrorCode::InvalidArgument,
                        what + " has shape " + shape_str(v.shape) + " but is declared " + declared);
    for (std::size_t d = 0; d < v.shape.size(); ++d) {
      if (v.shape[d] < 0)
        return make_error(ErrorCode::InvalidArgument,
                          what + " has a negative extent in shape " + shape_str(v.shape));
      const ir::Dim& dim = ty.shape[d];
      if (dim.is_static()) {
        if (dim.extent != v.shape[d])
          return make_error(ErrorCode::InvalidArgument,
                            what + " has shape " + shape_str(v.shape) + " but is declared " + declared);
        continue;
      }
      const std::string& sym = f.symbol_name(dim.sym);
      const std::string key = symbol_key(layer, sym);
      auto it = symbols.find(key);
      if (it != symbols.end() && it->second.first != v.shape[d])
        return make_error(ErrorCode::InvalidArgument,
                          what + " has shape " + shape_str(v.shape) + " (declared " + declared + "): '" + sym +
                              "' is " + std::to_string(v.shape[d]) + " there but " + std::to_string(it->second.first) +
                              " from " + it->second.second);
      symbols.emplace(key, std::pair{v.shape[d], "input " + std::to_string(i) + " ('" + arg_label(f, i) + "')"});
    }
  }
  std::map<std::string, std::int64_t> bindings;
  for (const auto& [key, v] : symbols) bindings.emplace(key, v.first);
  return bindings;
}


Result<ir::Module> specialize_module(const EngineShared& engine, const ir::Module& module, const std::string& function,
                                     std::map<std::string, std::int64_t> bindings, const std::string& rows_symbol) {
  const ir::Function* f = module.find_function(function);
  TERNJIT_CHECK(f != nullptr, "specialize_module: no function '" + function + "'");
  if (!rows_symbol.empty()) bindings.erase(symbol_key(ir::layer_of(function), rows_symbol));
  TERNJIT_TRY(ir::Module spec, passes::specialize_function(module, function, bindings, rows_symbol.empty()));
  if (rows_symbol.empty()) TERNJIT_TRY_VOID(passes::check_tensor_bytes(spec, function));
  engine.after_stage("specialize", function, spec);
  return spec;
}

Result<void> optimize(const EngineShared& engine, ir::Module& module, const std::string& function) {
  passes::PipelineOptions popts;
  TERNJIT_TRY_VOID(passes::run_pipeline(module, passes::default_pipeline(engine.typed.level), popts));
  engine.after_stage("optimize", function, module);
  return success();
}

Result<const targets::Target*> choose_target(const EngineShared& engine, const ir::Function& optimized,
                                             std::string* fallback_why) {
  auto supported = engine.choice.target->check_supported(optimized);
  if (supported.ok()) return engine.choice.target;
  if (engine.choice.fallback == nullptr) return std::move(supported).error();
  *fallback_why = supported.error().message;
  return engine.choice.fallback;
}

Result<std::vector<std::string>> decide(const EngineShared& engine, const targets::Target& target,
                                        const ir::Module& optimized, const std::string& function) {
  std::vector<std::string> decisions;
  if (!target.traits().decides_at_compile) return decisions;
  TERNJIT_TRY(auto spaces, target.tuning_spaces(optimized, function, engine.compile_options(target)));
  for (const auto& space : spaces)
    decisions.push_back(engine.typed.tuning == targets::TuningMode::Off ? space->default_config()
                                                                        : engine.tuning->decide(*space));
  return decisions;
}

namespace {

void trace_fallback(const EngineShared& engine, const std::string& function, const std::string& why) {
  if (engine.verbose())
    engine.trace("ternjit_verbose,fallback,target=" + std::string(engine.choice.target->name()) + ",fn=" + function +
                 ",to=" + std::string(engine.choice.fallback->name()) + ",why=" + why);
}

// What compiles an optimized module: its target (stage 5) and that target's options
// with their decisions (stage 6) and the rows bound.
struct CompilePlan {
  const targets::Target* target = nullptr;
  targets::CompileOptions options;
  std::string fallback_why;  // non-empty: the engine's target refused; why
};

Result<CompilePlan> plan_compile(const EngineShared& engine, const ir::Module& optimized, const std::string& function,
                                 std::int64_t rows_max) {
  const ir::Function* f = optimized.find_function(function);
  TERNJIT_CHECK(f != nullptr, "the pipeline lost '" + function + "'");
  CompilePlan p;
  TERNJIT_TRY(p.target, choose_target(engine, *f, &p.fallback_why));
  if (rows_max > 0 && p.target != engine.choice.target)
    return make_error(ErrorCode::Unsupported, p.fallback_why);
  p.options = engine.compile_options(*p.target);
  p.options.rows_max = rows_max;
  TERNJIT_TRY(p.options.decisions, decide(engine, *p.target, optimized, function));
  return p;
}

Result<targets::Artifact> compile_planned(const EngineShared& engine, const ir::Module& optimized,
                                          const std::string& function, const CompilePlan& p) {
  TERNJIT_TRY(targets::Artifact a, p.target->compile(optimized, function, p.options));
  if (!p.fallback_why.empty()) {
    trace_fallback(engine, function, p.fallback_why);
    a.metadata["fallback"] = p.fallback_why;
  }
  return a;
}

}  // namespace

Result<Compiled> compile_cached(const EngineShared& engine, ir::Module& module, const std::string& function,
                                bool optimized, std::int64_t rows_max) {
  // Keyed before the pipeline (a hit skips it and the target's compile) with the
  // engine's target's options, unless the decisions (made on the optimized module) or
  // the rows analysis needed the pipeline first.
  const bool plan_first = optimized || engine.choice.target->traits().decides_at_compile;
  if (plan_first && !optimized) TERNJIT_TRY_VOID(optimize(engine, module, function));
  std::optional<CompilePlan> plan;
  targets::CompileOptions key_options = engine.compile_options(*engine.choice.target);
  key_options.rows_max = rows_max;
  if (plan_first) {
    TERNJIT_TRY(plan, plan_compile(engine, module, function, rows_max));
    if (plan->target == engine.choice.target) key_options = plan->options;
  }
  Compiled c;
  TERNJIT_TRY(c.artifact, engine.disk_cache->get_or_compile(
                              module, function, key_options,
                              [&]() -> Result<targets::Artifact> {
                                if (!plan) {
                                  TERNJIT_TRY_VOID(optimize(engine, module, function));
                                  TERNJIT_TRY(plan, plan_compile(engine, module, function, rows_max));
                                }
                                return compile_planned(engine, module, function, *plan);
                              },
                              &c.disk));
  auto fb = c.artifact.metadata.find("fallback");
  const bool fell_back = fb != c.artifact.metadata.end() && engine.choice.fallback != nullptr;
  c.target = fell_back ? engine.choice.fallback : engine.choice.target;
  if (c.disk == DiskState::Hit && fell_back) trace_fallback(engine, function, fb->second);
  return c;
}

namespace {

// Stage 6: the kernel's signature (the caller's input kinds and shapes, the specialized
// results) and its trace description.
Result<std::unique_ptr<KernelImpl>> make_kernel(const Program::Impl* program, const EngineShared& engine,
                                                const ir::Function& f,
                                                     const ir::Module& spec, std::span<const TensorView> inputs,
                                                     const Compiled& c, std::unique_ptr<Trampoline> loaded) {
  const ir::Function* sf = spec.find_function(f.name());
  TERNJIT_CHECK(sf != nullptr, "specialize_function lost '" + f.name() + "'");
  std::vector<std::string> names;
  std::vector<TensorView> sig_in, sig_out;
  std::string shape_desc;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    names.push_back(arg_label(f, i));
    sig_in.push_back(TensorView{nullptr, inputs[i].kind, inputs[i].shape});
    shape_desc += (i ? " " : "") + names.back() + ":" + compact_type(inputs[i].kind, inputs[i].shape);
  }
  for (const ir::Type& t : sf->result_types()) {
    std::vector<std::int64_t> shape;
    for (const ir::Dim& d : t.shape) {
      TERNJIT_CHECK(d.is_static(), "specialized result of '" + f.name() + "' is not static");
      shape.push_back(d.extent);
    }
    sig_out.push_back(TensorView{nullptr, t.elem, std::move(shape)});
  }
  const std::string desc = "target=" + std::string(c.target->name()) + ",isa=" + loaded->isa() + ",fn=" + f.name() +
                           ",shape=" + shape_desc + ",config=" + std::string(passes::opt_level_name(engine.typed.level)) +
                           ",disk=" + std::string(disk_state_name(c.disk));
  return std::make_unique<KernelImpl>(program, f.name(), std::move(names), std::move(sig_in), std::move(sig_out),
                                           std::move(loaded), desc);
}

}  // namespace

std::int64_t row_bucket(std::int64_t rows) {
  if (rows <= 1) return 1;
  if (rows <= 4) return 4;
  std::int64_t b = 8;
  while (b < rows && b <= (std::int64_t{1} << 61)) b *= 2;
  return b < rows ? rows : b;
}


}  // namespace jit

Result<std::unique_ptr<jit::KernelImpl>> Program::Impl::specialize(std::string_view function,
                                                                   std::span<const TensorView> inputs) {
  TERNJIT_TRY(const ir::Function* f, jit::find_entry(module, function, inputs.size()));
  TERNJIT_TRY(auto bindings, bind_and_freeze(*f, inputs));
  // A new M served by its bucket's run-time-rows kernel when the function takes one.
  if (engine->options.runtime_rows && engine->choice.target->traits().runtime_rows) {
    TERNJIT_TRY(auto by_rows, specialize_rows(*f, inputs, bindings));
    if (by_rows) return by_rows;
  }
  TERNJIT_TRY(ir::Module spec, jit::specialize_module(*engine, module, f->name(), bindings, ""));
  TERNJIT_TRY(jit::Compiled compiled, jit::compile_cached(*engine, spec, f->name(), /*optimized=*/false, 0));
  TERNJIT_TRY(auto loaded, load(compiled));
  return jit::make_kernel(this, *engine, *f, spec, inputs, compiled, std::move(loaded));
}

Result<std::map<std::string, std::int64_t>> Program::Impl::bind_and_freeze(const ir::Function& f,
                                                                          std::span<const TensorView> inputs) {
  // One critical section from reading the weights to freezing them, so a concurrent bind
  // cannot slip in between.
  std::lock_guard lock(weights_mu);
  for (const std::string& p : jit::params_used(module, f))
    if (!weights.is_bound(p))
      return make_error(ErrorCode::InvalidArgument, "parameter '" + p + "' of '" + f.name() +
                                                        "' is not bound: call bind, bind_file or bind_random first" +
                                                        weights.missing_hint(p));
  TERNJIT_TRY(auto bindings, jit::bind_symbols(f, inputs, weights.symbols()));
  frozen = true;  // from here on kernels may hold the weights: no more binding
  return bindings;
}

Result<std::unique_ptr<jit::KernelImpl>> Program::Impl::specialize_rows(
    const ir::Function& f, std::span<const TensorView> inputs, const std::map<std::string, std::int64_t>& bindings) {
  const std::optional<ir::SymbolId> sym = passes::row_symbol_candidate(f);
  // bind_symbols checked that every input has rank >= 1 and agrees on axis 0.
  if (!sym || inputs.empty() || inputs[0].shape.empty() || inputs[0].shape[0] < 1)
    return std::unique_ptr<jit::KernelImpl>();
  const std::int64_t rows = inputs[0].shape[0];
  const std::int64_t bucket = jit::row_bucket(rows);
  const jit::CallKey key(f.name(), inputs, bucket);
  jit::Lookup how = jit::Lookup::Hit;
  TERNJIT_TRY(const jit::RowsKernel* rk, row_buckets.get(
                                             key.view(),
                                             [&]() -> Result<std::unique_ptr<jit::RowsKernel>> {
                                               auto k = compile_rows(f, f.symbol_name(*sym), bindings, bucket);
                                               if (k.ok() || k.error().code != ErrorCode::Unsupported) return k;
                                               auto refusal = std::make_unique<jit::RowsKernel>();
                                               refusal->refused = jit::trace_field(k.error().message);
                                               if (refusal->refused.empty()) refusal->refused = "refused";
                                               return refusal;
                                             },
                                             how));
  if (!rk->refused.empty()) {
    if (engine->verbose())
      engine->trace("ternjit_verbose,rows,fn=" + f.name() + ",rows=" + std::to_string(rows) +
                    ",bucket=" + std::to_string(bucket) + ",lookup=" + jit::kLookupName[static_cast<int>(how)] +
                    ",kernel=specialized,why=" + rk->refused);
    return std::unique_ptr<jit::KernelImpl>();
  }
  return bucket_kernel(f.name(), inputs, *rk, bucket, how);
}

std::unique_ptr<jit::KernelImpl> Program::Impl::from_bucket(std::string_view function,
                                                            std::span<const TensorView> inputs) {
  if (!engine->options.runtime_rows || inputs.empty() || inputs[0].shape.empty() || inputs[0].shape[0] < 1)
    return nullptr;
  const std::int64_t rows = inputs[0].shape[0];
  for (const TensorView& v : inputs)
    if (v.shape.empty() || v.shape[0] != rows) return nullptr;  // specialize says what is wrong
  const std::int64_t bucket = jit::row_bucket(rows);
  const jit::RowsKernel* rk = row_buckets.find(jit::CallKey(function, inputs, bucket).view());
  if (rk == nullptr || !rk->refused.empty()) return nullptr;
  return bucket_kernel(function, inputs, *rk, bucket, jit::Lookup::Hit);
}

std::unique_ptr<jit::KernelImpl> Program::Impl::bucket_kernel(std::string_view function,
                                                              std::span<const TensorView> inputs,
                                                              const jit::RowsKernel& rk, std::int64_t bucket,
                                                              jit::Lookup how) const {
  const std::int64_t rows = inputs[0].shape[0];
  std::vector<TensorView> sig_in, sig_out = rk.outputs;
  sig_in.reserve(inputs.size());
  for (const TensorView& v : inputs) sig_in.push_back(TensorView{nullptr, v.kind, v.shape});
  for (TensorView& o : sig_out) o.shape[0] = rows;  // every result is rows-leading
  std::string desc;
  if (engine->verbose()) {  // the trace line's text: built only when someone reads it
    const char* lookup = jit::kLookupName[static_cast<int>(how)];
    engine->trace("ternjit_verbose,rows,fn=" + std::string(function) + ",rows=" + std::to_string(rows) +
                  ",bucket=" + std::to_string(bucket) + ",lookup=" + lookup + ",kernel=shared");
    std::string shape_desc;
    for (std::size_t i = 0; i < inputs.size(); ++i)
      shape_desc += (i ? " " : "") + rk.arg_names[i] + ":" + jit::compact_type(inputs[i].kind, inputs[i].shape);
    desc = rk.desc + ",fn=" + std::string(function) + ",shape=" + shape_desc + ",rows=" + std::to_string(rows) +
           ",bucket=" + std::to_string(bucket) + ",bucket_lookup=" + lookup;
  }
  return std::make_unique<jit::KernelImpl>(this, std::string(function), rk.arg_names, std::move(sig_in), std::move(sig_out),
                                           std::make_unique<jit::Trampoline>(rk.loaded, rows), std::move(desc));
}

// The stages with the row symbol free for the analysis, then bound to `rows_max`.
Result<std::unique_ptr<jit::RowsKernel>> Program::Impl::compile_rows(const ir::Function& f,
                                                                     const std::string& row_symbol,
                                                                     std::map<std::string, std::int64_t> bindings,
                                                                     std::int64_t rows_max) {
  const std::string fname = f.name();
  const std::string key = jit::symbol_key(ir::layer_of(fname), row_symbol);
  auto sm = jit::specialize_module(*engine, module, fname, bindings, row_symbol);
  if (!sm.ok()) return jit::declined(std::move(sm).error());
  ir::Module spec = std::move(sm).value();
  auto symbols_left = [&](std::string_view stage) -> Result<void> {
    const ir::Function* sf = spec.find_function(fname);
    if (sf == nullptr || sf->symbols().size() != 1)
      return make_error(ErrorCode::Unsupported, "symbols besides '" + row_symbol + "' stay unbound " + std::string(stage));
    return success();
  };
  TERNJIT_TRY_VOID(symbols_left("after specialization"));
  if (auto p = jit::optimize(*engine, spec, fname); !p.ok()) return jit::declined(std::move(p).error());
  TERNJIT_TRY_VOID(symbols_left("after the pipeline"));
  const ir::SymbolId sid{0};
  const targets::Target& target = *engine->choice.target;
  if (auto ok = passes::check_row_batch(*spec.find_function(fname), sid); !ok.ok())
    return jit::declined(std::move(ok).error());
  if (!target.runtime_rows(*spec.find_function(fname), sid))
    return make_error(ErrorCode::Unsupported, "target " + std::string(target.name()) + " runs it with static rows");
  if (auto b = passes::specialize_shapes(spec, {{key, rows_max}}); !b.ok()) return jit::declined(std::move(b).error());
  if (auto b = passes::check_tensor_bytes(spec, fname); !b.ok()) return jit::declined(std::move(b).error());
  const ir::Function* stf = spec.find_function(fname);
  if (stf == nullptr || !stf->symbols().empty())
    return make_error(ErrorCode::Unsupported, "not static after binding the rows");
  TERNJIT_TRY(jit::Compiled c, jit::compile_cached(*engine, spec, fname, /*optimized=*/true, rows_max));
  auto rm = c.artifact.metadata.find("rows_max");
  if (rm == c.artifact.metadata.end() || rm->second != std::to_string(rows_max))
    return make_error(ErrorCode::Unsupported,
                      "the artifact is not compiled for " + std::to_string(rows_max) + " run-time rows");
  TERNJIT_TRY(targets::LoadedKernel loaded, load_kernel(c));
  if (loaded.run_rows == nullptr) return make_error(ErrorCode::Unsupported, "the loaded kernel has no run-time rows");
  auto k = std::make_unique<jit::RowsKernel>();
  k->loaded = std::move(loaded);
  k->rows_max = rows_max;
  for (const ir::Type& t : stf->result_types()) {
    std::vector<std::int64_t> shape;
    for (const ir::Dim& d : t.shape) shape.push_back(d.extent);
    k->outputs.push_back(TensorView{nullptr, t.elem, std::move(shape)});
  }
  for (std::size_t i = 0; i < f.args().size(); ++i) k->arg_names.push_back(jit::arg_label(f, i));
  k->desc = "target=" + std::string(target.name()) + ",isa=" + k->loaded.isa +
            ",config=" + std::string(passes::opt_level_name(engine->typed.level)) +
            ",disk=" + std::string(jit::disk_state_name(c.disk));
  return k;
}

Result<std::unique_ptr<jit::Trampoline>> Program::Impl::load(const jit::Compiled& c) {
  TERNJIT_TRY(targets::LoadedKernel loaded, load_kernel(c));
  return std::make_unique<jit::Trampoline>(std::move(loaded));
}

Result<targets::LoadedKernel> Program::Impl::load_kernel(const jit::Compiled& c) {
  const bool primary = c.target == engine->choice.target;
  targets::LoadContext ctx;
  ctx.params = &weights.values();  // frozen: immutable while kernels live
  ctx.parallel = engine->parallel;
  ctx.adaptive_parallel = engine->options.adaptive_parallel;
  ctx.state = primary ? target_state.get() : fallback_state.get();
  ctx.options = engine->compile_options(*c.target).target;
  ctx.tuning = engine->typed.tuning;
  ctx.tuning_source = engine->tuning.get();
  // Side files go through the disk cache, which refuses what it refuses for artifacts.
  ctx.side_files = engine->disk_cache->enabled() ? engine->disk_cache.get() : nullptr;
  return c.target->load(c.artifact, ctx);
}

}  // namespace ternjit
