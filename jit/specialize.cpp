// SPDX-License-Identifier: Apache-2.0
// specialize.cpp - the compile flow of one (function, input shapes), as a list of stages.
//
// Program::Impl::specialize reads top to bottom as the stages, one line each:
//   find the function -> fix every symbol from the weights and inputs (and freeze the
//   weights) -> specialize_function -> check the tensor sizes -> disk cache or { pipeline
//   -> choose the target (the one place the fallback is decided) -> Target::compile } ->
//   Target::load (tuning decided there by the target) -> the kernel with its signature
//   and trace line.
// Each stage is a function of this file, callable alone.
#include <algorithm>
#include <map>

#include "ir/bind.h"
#include "jit/engine_internal.h"
#include "passes/pipeline.h"
#include "passes/row_batch.h"
#include "passes/specialize_shapes.h"

namespace ternjit {

namespace {

using jit::Compiled;
using jit::EngineShared;

// "f32[4,64]" (compact, for trace lines).
std::string compact_type(ElemKind k, std::span<const std::int64_t> s) {
  std::string r(elem_name(k));
  r += '[';
  for (std::size_t i = 0; i < s.size(); ++i) r += (i ? "," : "") + std::to_string(s[i]);
  return r + ']';
}

constexpr const char* kLookupName[] = {"hit", "miss", "wait"};

// The parameters `f` reads, directly or through the functions it calls.
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

// Stage 1: the function called `function`, taking `n_inputs` inputs.
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

// Stage 2: every symbol's extent, from the bound parameters (`symbols`) and the inputs,
// which must agree with each other and with the declarations.
Result<std::map<std::string, std::int64_t>> bind_symbols(const ir::Function& f, std::span<const TensorView> inputs,
                                                         const jit::Weights::SymbolMap& weight_symbols) {
  std::map<std::string, std::pair<std::int64_t, std::string>> symbols;
  for (auto& [key, v] : weight_symbols) symbols.emplace(key, std::pair{v.first, "parameter '" + v.second + "'"});
  const std::string_view layer = ir::layer_of(f.name());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const ir::Type& ty = f.type_of(f.args()[i]);
    const std::string what = "input " + std::to_string(i) + " ('" + jit::arg_label(f, i) + "') of '" + f.name() + "'";
    const std::string declared = ir::type_str(ty, f.symbols());
    const TensorView& v = inputs[i];
    if (v.kind != ty.elem)
      return make_error(ErrorCode::InvalidArgument,
                        what + " is " + std::string(elem_name(v.kind)) + " but is declared " + declared);
    if (v.shape.size() != ty.rank())
      return make_error(ErrorCode::InvalidArgument,
                        what + " has shape " + jit::shape_str(v.shape) + " but is declared " + declared);
    for (std::size_t d = 0; d < v.shape.size(); ++d) {
      if (v.shape[d] < 0)
        return make_error(ErrorCode::InvalidArgument,
                          what + " has a negative extent in shape " + jit::shape_str(v.shape));
      const ir::Dim& dim = ty.shape[d];
      if (dim.is_static()) {
        if (dim.extent != v.shape[d])
          return make_error(ErrorCode::InvalidArgument,
                            what + " has shape " + jit::shape_str(v.shape) + " but is declared " + declared);
        continue;
      }
      const std::string& sym = f.symbol_name(dim.sym);
      const std::string key = jit::symbol_key(layer, sym);
      auto it = symbols.find(key);
      if (it != symbols.end() && it->second.first != v.shape[d])
        return make_error(ErrorCode::InvalidArgument,
                          what + " has shape " + jit::shape_str(v.shape) + " (declared " + declared + "): '" + sym +
                              "' is " + std::to_string(v.shape[d]) + " there but " + std::to_string(it->second.first) +
                              " from " + it->second.second);
      symbols.emplace(key, std::pair{v.shape[d], "input " + std::to_string(i) + " ('" + jit::arg_label(f, i) + "')"});
    }
  }
  std::map<std::string, std::int64_t> bindings;
  for (const auto& [key, v] : symbols) bindings.emplace(key, v.first);
  return bindings;
}

// The one place the fallback is decided: the engine's target when it supports `f`;
// otherwise, for `auto` engines, the reference target (said in the verbose trace, and
// remembered in the artifact so a disk hit loads it the same way); a named target's
// refusal is the error.
Result<const targets::Target*> choose_target(const EngineShared& engine, const ir::Function& f, std::string* why) {
  auto supported = engine.target->check_supported(f);
  if (supported.ok()) return engine.target;
  if (engine.fallback == nullptr) return std::move(supported).error();
  *why = supported.error().message;
  return engine.fallback;
}

void trace_fallback(const EngineShared& engine, const std::string& function, const std::string& why) {
  if (engine.verbose())
    engine.trace("ternjit_verbose,fallback,target=" + std::string(engine.target->name()) + ",fn=" + function +
                 ",to=reference,why=" + why);
}

Result<void> run_pipeline(const EngineShared& engine, ir::Module& spec) {
  passes::PipelineOptions popts;
  TERNJIT_TRY_VOID(passes::run_pipeline(spec, passes::default_pipeline(engine.typed.level), popts));
  return success();
}

// Target choice and compile of the optimized `spec`, with compile-time `decisions`.
Result<targets::Artifact> compile_optimized(const EngineShared& engine, const ir::Module& spec,
                                            const std::string& fname, std::vector<std::string> decisions) {
  const ir::Function* pf = spec.find_function(fname);
  TERNJIT_CHECK(pf != nullptr, "specialize_function lost '" + fname + "'");
  std::string fallback_why;
  TERNJIT_TRY(const targets::Target* target, choose_target(engine, *pf, &fallback_why));
  targets::CompileOptions options = engine.compile_options(*target);
  if (target == engine.target) options.decisions = std::move(decisions);
  TERNJIT_TRY(targets::Artifact a, target->compile(spec, fname, options));
  if (!fallback_why.empty()) {
    trace_fallback(engine, fname, fallback_why);
    a.metadata["fallback"] = fallback_why;
  }
  return a;
}

// The tuning decisions of a target that decides at compile time, for the optimized
// `spec` (none when the target cannot compile it: the fallback decides nothing), and
// their key text.
Result<std::vector<std::string>> decide_at_compile(const EngineShared& engine, const ir::Module& spec,
                                                   const std::string& fname, std::string* key_text) {
  std::vector<std::string> decisions;
  const ir::Function* pf = spec.find_function(fname);
  TERNJIT_CHECK(pf != nullptr, "specialize_function lost '" + fname + "'");
  if (!engine.target->check_supported(*pf).ok()) return decisions;
  TERNJIT_TRY(auto spaces, engine.target->tuning_spaces(spec, fname, engine.compile_options(*engine.target)));
  for (const auto& space : spaces) {
    decisions.push_back(engine.typed.tuning == targets::TuningMode::Off ? space->default_config()
                                                                        : engine.tuning->decide(*space));
    *key_text += space->problem().op + "=" + decisions.back() + ";";
  }
  return decisions;
}

// Stage 4: the artifact from the disk cache, else compiled and stored. Keyed before the
// pipeline (a hit skips the pipeline and the target's compile), except for a target
// that decides at compile time: its key holds the decisions, made after the pipeline.
Result<Compiled> compile_cached(const EngineShared& engine, ir::Module& spec, const std::string& fname) {
  Compiled c;
  if (engine.target->decides_at_compile()) {
    TERNJIT_TRY_VOID(run_pipeline(engine, spec));
    std::string key_text;
    TERNJIT_TRY(auto decisions, decide_at_compile(engine, spec, fname, &key_text));
    TERNJIT_TRY(c.artifact, engine.disk_cache->get_or_compile(
                                spec, fname, [&] { return compile_optimized(engine, spec, fname, decisions); },
                                &c.disk, key_text));
  } else {
    auto compile = [&]() -> Result<targets::Artifact> {
      TERNJIT_TRY_VOID(run_pipeline(engine, spec));
      return compile_optimized(engine, spec, fname, {});
    };
    TERNJIT_TRY(c.artifact, engine.disk_cache->get_or_compile(spec, fname, compile, &c.disk));
  }
  auto fb = c.artifact.metadata.find("fallback");
  c.target = fb != c.artifact.metadata.end() && engine.fallback ? engine.fallback : engine.target;
  if (c.disk == jit::DiskState::Hit && c.target == engine.fallback) trace_fallback(engine, fname, fb->second);
  return c;
}

// Stage 6: the kernel's signature (the caller's input kinds and shapes, the specialized
// results) and its trace description.
Result<std::unique_ptr<jit::KernelImpl>> make_kernel(const EngineShared& engine, const ir::Function& f,
                                                     const ir::Module& spec, std::span<const TensorView> inputs,
                                                     const Compiled& c, std::unique_ptr<jit::Trampoline> loaded) {
  const ir::Function* sf = spec.find_function(f.name());
  TERNJIT_CHECK(sf != nullptr, "specialize_function lost '" + f.name() + "'");
  std::vector<std::string> names;
  std::vector<TensorView> sig_in, sig_out;
  std::string shape_desc;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    names.push_back(jit::arg_label(f, i));
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
                           ",disk=" + std::string(jit::disk_state_name(c.disk));
  return std::make_unique<jit::KernelImpl>(f.name(), std::move(names), std::move(sig_in), std::move(sig_out),
                                           std::move(loaded), desc);
}

}  // namespace

Result<std::unique_ptr<jit::KernelImpl>> Program::Impl::specialize(std::string_view function,
                                                                   std::span<const TensorView> inputs) {
  TERNJIT_TRY(const ir::Function* f, find_entry(module, function, inputs.size()));
  TERNJIT_TRY(auto bindings, bind_and_freeze(*f, inputs));
  // A new M served by its bucket's run-time-rows kernel when the function takes one.
  if (engine->options.runtime_rows && engine->target->has_runtime_rows()) {
    TERNJIT_TRY(auto by_rows, specialize_rows(*f, inputs, bindings));
    if (by_rows) return by_rows;
  }
  TERNJIT_TRY(ir::Module spec, passes::specialize_function(module, f->name(), bindings, /*require_static=*/true));
  TERNJIT_TRY_VOID(passes::check_tensor_bytes(spec, f->name()));
  TERNJIT_TRY(Compiled compiled, compile_cached(*engine, spec, f->name()));
  TERNJIT_TRY(auto loaded, load(compiled));
  return make_kernel(*engine, *f, spec, inputs, compiled, std::move(loaded));
}

Result<std::map<std::string, std::int64_t>> Program::Impl::bind_and_freeze(const ir::Function& f,
                                                                          std::span<const TensorView> inputs) {
  // One critical section from reading the weights to freezing them, so a concurrent bind
  // cannot slip in between.
  std::lock_guard lock(weights_mu);
  for (const std::string& p : params_used(module, f))
    if (!weights.is_bound(p))
      return make_error(ErrorCode::InvalidArgument, "parameter '" + p + "' of '" + f.name() +
                                                        "' is not bound: call bind, bind_file or bind_random first" +
                                                        weights.missing_hint(p));
  TERNJIT_TRY(auto bindings, bind_symbols(f, inputs, weights.symbols()));
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
  const std::string key = jit::bucket_key(f.name(), inputs, bucket);
  jit::Lookup how = jit::Lookup::Hit;
  TERNJIT_TRY(const jit::RowsKernel* rk, row_buckets.get(
                                             key,
                                             [&]() -> Result<std::unique_ptr<jit::RowsKernel>> {
                                               return build_rows_kernel(f, f.symbol_name(*sym), bindings, bucket);
                                             },
                                             how));
  if (!rk->refused.empty()) {
    if (engine->verbose())
      engine->trace("ternjit_verbose,rows,fn=" + f.name() + ",rows=" + std::to_string(rows) +
                    ",bucket=" + std::to_string(bucket) + ",lookup=" + kLookupName[static_cast<int>(how)] +
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
  const jit::RowsKernel* rk = row_buckets.find(jit::bucket_key(function, inputs, bucket));
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
    const char* lookup = kLookupName[static_cast<int>(how)];
    engine->trace("ternjit_verbose,rows,fn=" + std::string(function) + ",rows=" + std::to_string(rows) +
                  ",bucket=" + std::to_string(bucket) + ",lookup=" + lookup + ",kernel=shared");
    std::string shape_desc;
    for (std::size_t i = 0; i < inputs.size(); ++i)
      shape_desc += (i ? " " : "") + rk.arg_names[i] + ":" + compact_type(inputs[i].kind, inputs[i].shape);
    desc = rk.desc + ",fn=" + std::string(function) + ",shape=" + shape_desc + ",rows=" + std::to_string(rows) +
           ",bucket=" + std::to_string(bucket) + ",bucket_lookup=" + lookup;
  }
  return std::make_unique<jit::KernelImpl>(std::string(function), rk.arg_names, std::move(sig_in), std::move(sig_out),
                                           std::make_unique<jit::Trampoline>(rk.loaded, rows), std::move(desc));
}

// The bucket's kernel: the function specialized but for the row symbol -> pipeline ->
// passes::check_row_batch -> Target::runtime_rows -> rows bound to the bucket's bound
// -> disk cache or Target::compile (rows_max) -> Target::load. Anything that refuses
// (or fails) gives a refusal, and the caller specializes that M as before, where a
// real error is reported the usual way.
std::unique_ptr<jit::RowsKernel> Program::Impl::build_rows_kernel(const ir::Function& f, const std::string& row_symbol,
                                                                  std::map<std::string, std::int64_t> bindings,
                                                                  std::int64_t rows_max) {
  auto refuse = [&](std::string why) {
    for (char& c : why) c = c == ',' || c == '\n' ? ';' : c;
    auto k = std::make_unique<jit::RowsKernel>();
    k->refused = why.empty() ? "refused" : why;
    return k;
  };
  const std::string key = jit::symbol_key(ir::layer_of(f.name()), row_symbol);
  bindings.erase(key);
  const std::string fname = f.name();
  auto sm = passes::specialize_function(module, fname, bindings, /*require_static=*/false);
  if (!sm.ok()) return refuse(sm.error().message);
  ir::Module spec = std::move(sm).value();
  {
    const ir::Function* sf = spec.find_function(fname);
    if (sf == nullptr || sf->symbols().size() != 1) return refuse("symbols besides '" + row_symbol + "' stay unbound");
  }
  if (auto p = run_pipeline(*engine, spec); !p.ok()) return refuse(p.error().message);
  const ir::Function* of = spec.find_function(fname);
  if (of == nullptr || of->symbols().size() != 1) return refuse("the pipeline changed the symbols");
  const ir::SymbolId sid{0};
  if (auto ok = passes::check_row_batch(*of, sid); !ok.ok()) return refuse(ok.error().message);
  const targets::Target& target = *engine->target;
  if (!target.runtime_rows(*of, sid)) return refuse("target " + std::string(target.name()) + " runs it with static rows");
  ir::Module st = spec;
  if (auto b = passes::specialize_shapes(st, {{key, rows_max}}); !b.ok()) return refuse(b.error().message);
  if (auto b = passes::check_tensor_bytes(st, fname); !b.ok()) return refuse(b.error().message);
  const ir::Function* stf = st.find_function(fname);
  if (stf == nullptr || !stf->symbols().empty()) return refuse("not static after binding the rows");
  if (auto ok = target.check_supported(*stf); !ok.ok()) return refuse(ok.error().message);
  targets::CompileOptions options = engine->compile_options(target);
  options.rows_max = rows_max;
  jit::Compiled c;
  c.target = &target;
  // Keyed by the optimized module (the pipeline ran for the analysis) and the bound.
  auto art = engine->disk_cache->get_or_compile(
      st, fname, [&] { return target.compile(st, fname, options); }, &c.disk,
      "rows<=" + std::to_string(rows_max) + ";");
  if (!art.ok()) return refuse(art.error().message);
  c.artifact = std::move(art).value();
  auto rm = c.artifact.metadata.find("rows_max");
  if (rm == c.artifact.metadata.end() || rm->second != std::to_string(rows_max))
    return refuse("the artifact is not compiled for " + std::to_string(rows_max) + " run-time rows");
  auto loaded = load_kernel(c);
  if (!loaded.ok()) return refuse(loaded.error().message);
  if (loaded.value().run_rows == nullptr) return refuse("the loaded kernel has no run-time rows");
  auto k = std::make_unique<jit::RowsKernel>();
  k->loaded = std::move(loaded).value();
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
  const bool primary = c.target == engine->target;
  targets::LoadContext ctx;
  ctx.params = &weights.values();  // frozen: immutable while kernels live
  ctx.parallel = engine->parallel;
  ctx.adaptive_parallel = engine->options.adaptive_parallel;
  ctx.state = primary ? target_state.get() : fallback_state.get();
  ctx.options = engine->compile_options(*c.target).target;
  ctx.tuning = engine->typed.tuning;
  ctx.tuning_source = engine->tuning.get();
  ctx.cache_dir = engine->cache_dir;
  return c.target->load(c.artifact, ctx);
}

namespace jit {

std::string bucket_key(std::string_view function, std::span<const TensorView> inputs, std::int64_t bucket) {
  std::string key(function);
  key.push_back('\0');
  for (const TensorView& v : inputs) {
    key.push_back(static_cast<char>(v.kind));
    key.push_back(static_cast<char>(v.shape.size()));
    for (std::size_t d = 0; d < v.shape.size(); ++d) {
      const std::int64_t e = d == 0 ? bucket : v.shape[d];
      key.append(reinterpret_cast<const char*>(&e), sizeof e);
    }
  }
  return key;
}

std::int64_t row_bucket(std::int64_t rows) {
  if (rows <= 1) return 1;
  if (rows <= 4) return 4;
  std::int64_t b = 8;
  while (b < rows && b <= (std::int64_t{1} << 61)) b *= 2;
  return b < rows ? rows : b;
}

}  // namespace jit

}  // namespace ternjit
