// SPDX-License-Identifier: Apache-2.0
// engine.cpp - Engine, Program and Kernel (engine.h): front end -> specialize -> pipeline -> target -> load.
//
// An Engine owns its target registry and options (nothing is global: two engines share
// nothing). A Program owns its module, its weights and a specialization cache keyed by
// function + input kinds/shapes. A miss runs the stages, each callable alone:
//   passes::specialize_function (inline calls, bind symbols, require static)
//   -> passes::run_pipeline (the O-level list for the target's TargetInfo)
//   -> Target::compile (an Artifact) -> jit::load (KernelFn + state) -> KernelImpl.
// Weights are frozen when the first kernel is built: kernels read them without locks.
#include "ternjit/engine.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <mutex>

#include "autotune/dispatch.h"
#include "formats/safetensors.h"
#include "ir/bind.h"
#include "ir/dsl/dsl.h"
#include "ir/module_impl.h"
#include "jit/kernel_cache.h"
#include "jit/loader.h"
#include "jit/options.h"
#include "jit/single_flight.h"
#include "jit/thread_pool.h"
#include "jit/weights.h"
#include "passes/pipeline.h"
#include "passes/specialize_shapes.h"
#include "targets/registry.h"

namespace ternjit {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

std::string shape_str(std::span<const std::int64_t> s) {
  std::string r = "[";
  for (std::size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

// "f32[4,64]" (compact, for trace lines).
std::string compact_type(ElemKind k, std::span<const std::int64_t> s) {
  std::string r(elem_name(k));
  r += '[';
  for (std::size_t i = 0; i < s.size(); ++i) r += (i ? "," : "") + std::to_string(s[i]);
  return r + ']';
}

std::string arg_label(const ir::Function& f, std::size_t i) {
  const std::string& name = f.value(f.args()[i]).name;
  return name.empty() ? "arg" + std::to_string(i) : name;
}

// Runs `body`, turning a foreign exception into an Internal error: none crosses the API.
template <class F>
auto guarded(F&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const std::exception& e) {
    return make_error(ErrorCode::Internal, std::string("unexpected exception: ") + e.what());
  } catch (...) {
    return make_error(ErrorCode::Internal, "unexpected exception");
  }
}

// What every Program of an Engine shares with it; kept alive by the programs.
struct EngineShared {
  EngineOptions options;
  targets::TargetRegistry registry;
  const targets::Target* target = nullptr;
  passes::TargetInfo info;
  passes::OptLevel level = passes::OptLevel::O2;
  /// The reference target, for functions an `auto`-chosen target cannot compile (null
  /// when the target was named explicitly: then such a function is an error).
  const targets::Target* fallback = nullptr;
  std::unique_ptr<jit::ThreadPool> pool;  // the default pool (null with a host parallel_for)
  targets::x86::Parallel parallel;        // what CPU kernels run their work on
  std::unique_ptr<jit::KernelCache> disk_cache;  // the on-disk kernel cache (jit/kernel_cache.h)

  [[nodiscard]] bool verbose() const { return options.verbose > 0; }
  // One trace line to the sink (stderr by default, written with one call).
  void trace(const std::string& line) const {
    if (options.trace) {
      options.trace(line);
    } else {
      std::string l = line + "\n";
      std::fputs(l.c_str(), stderr);
    }
  }
};

// The cache key of a call: the function name, then per input its kind, rank and
// extents as raw bytes. Built in a stack buffer (no allocation) unless very long.
class KeyBuilder {
 public:
  KeyBuilder(std::string_view function, std::span<const TensorView> inputs) {
    append(function.data(), function.size());
    const char sep = 0;
    append(&sep, 1);
    for (const TensorView& v : inputs) {
      const char head[2] = {static_cast<char>(v.kind), static_cast<char>(v.shape.size())};
      append(head, 2);
      append(v.shape.data(), v.shape.size() * sizeof(std::int64_t));
    }
  }
  [[nodiscard]] std::string_view view() const {
    return heap_.empty() ? std::string_view(stack_.data(), size_) : std::string_view(heap_);
  }

 private:
  void append(const void* p, std::size_t n) {
    if (heap_.empty() && size_ + n <= stack_.size()) {
      std::memcpy(stack_.data() + size_, p, n);
      size_ += n;
      return;
    }
    if (heap_.empty()) heap_.assign(stack_.data(), size_);
    heap_.append(static_cast<const char*>(p), n);
  }
  std::array<char, 192> stack_;  // only [0, size_) is read
  std::size_t size_ = 0;
  std::string heap_;
};

// One specialization: its signature, the loaded entry, and its trace description.
class KernelImpl final : public Kernel {
 public:
  KernelImpl(std::string function, std::vector<std::string> arg_names, std::vector<TensorView> inputs,
             std::vector<TensorView> outputs, jit::LoadedKernel loaded, std::string trace_desc)
      : function_(std::move(function)),
        arg_names_(std::move(arg_names)),
        inputs_(std::move(inputs)),
        outputs_(std::move(outputs)),
        loaded_(std::move(loaded)),
        trace_desc_(std::move(trace_desc)) {}

  [[nodiscard]] std::span<const TensorView> outputs() const override { return outputs_; }
  [[nodiscard]] KernelFn entry() const override { return loaded_.entry; }
  [[nodiscard]] const void* state() const override { return loaded_.state; }
  [[nodiscard]] const std::string& trace_desc() const { return trace_desc_; }

  Result<void> run(std::span<const TensorView> inputs, std::span<TensorView> outputs) const override {
    return guarded([&]() -> Result<void> {
      if (inputs.size() != inputs_.size())
        return make_error(ErrorCode::InvalidArgument, "'" + function_ + "' takes " + std::to_string(inputs_.size()) +
                                                          " input" + (inputs_.size() == 1 ? "" : "s") + ", got " +
                                                          std::to_string(inputs.size()));
      if (outputs.size() != outputs_.size())
        return make_error(ErrorCode::InvalidArgument, "'" + function_ + "' has " + std::to_string(outputs_.size()) +
                                                          " output" + (outputs_.size() == 1 ? "" : "s") + ", got " +
                                                          std::to_string(outputs.size()) + " output buffers");
      std::vector<void*> buffers;
      buffers.reserve(inputs.size() + outputs.size());
      for (std::size_t i = 0; i < inputs.size(); ++i) {
        TERNJIT_TRY_VOID(check("input " + std::to_string(i) + " ('" + arg_names_[i] + "')", inputs[i], inputs_[i]));
        buffers.push_back(inputs[i].data);
      }
      for (std::size_t j = 0; j < outputs.size(); ++j) {
        TERNJIT_TRY_VOID(check("output " + std::to_string(j), outputs[j], outputs_[j]));
        buffers.push_back(outputs[j].data);
      }
      if (loaded_.run_checked) return loaded_.run_checked(loaded_.state, buffers.data());
      std::int32_t status = loaded_.entry(loaded_.state, buffers.data());
      if (status == 0) return success();
      return make_error(ErrorCode::Internal, "kernel '" + function_ + "' failed with status " + std::to_string(status));
    });
  }

 private:
  Result<void> check(const std::string& what, const TensorView& got, const TensorView& want) const {
    if (got.kind != want.kind || got.shape != want.shape)
      return make_error(ErrorCode::InvalidArgument,
                        what + " of '" + function_ + "' is " + std::string(elem_name(got.kind)) + shape_str(got.shape) +
                            " but the kernel was specialized for " + std::string(elem_name(want.kind)) +
                            shape_str(want.shape));
    std::int64_t n = 1;
    for (std::int64_t d : want.shape) n *= d;
    if (n != 0 && got.data == nullptr)
      return make_error(ErrorCode::InvalidArgument, what + " of '" + function_ + "' has no data (null pointer)");
    return success();
  }

  std::string function_;
  std::vector<std::string> arg_names_;
  std::vector<TensorView> inputs_;   // data null: the signature
  std::vector<TensorView> outputs_;  // data null: the signature
  jit::LoadedKernel loaded_;
  std::string trace_desc_;  // "isa=-,fn=...,shape=...,config=O2"
};

}  // namespace

// ---------------------------------------------------------------- Program

struct Program::Impl {
  Impl(std::shared_ptr<const EngineShared> e, ir::Module m)
      : engine(std::move(e)), module(std::move(m)), weights(module) {}

  std::shared_ptr<const EngineShared> engine;
  const ir::Module module;  // never changes after construction; weights_ points into it
  std::mutex weights_mu;    // guards weights and frozen
  jit::Weights weights;
  bool frozen = false;      // set when the first kernel is built; weights immutable after
  jit::SingleFlightCache<KernelImpl> cache;
  targets::x86::PackCache packs;  // weights packed once, shared by every specialization

  Result<void> check_not_frozen(std::string_view what) const {
    if (!frozen) return success();
    return make_error(ErrorCode::InvalidArgument,
                      std::string(what) + ": the weights are frozen once a kernel has been specialized; bind every "
                                          "parameter before the first kernel() or run()");
  }

  Result<std::unique_ptr<KernelImpl>> specialize(std::string_view function, std::span<const TensorView> inputs);
};

namespace {

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

}  // namespace

Result<std::unique_ptr<KernelImpl>> Program::Impl::specialize(std::string_view function,
                                                              std::span<const TensorView> inputs) {
  const ir::Function* f = module.find_function(function);
  if (!f) {
    std::string have;
    for (const ir::Function& g : module.functions()) have += (have.empty() ? "" : ", ") + g.name();
    return make_error(ErrorCode::NotFound, "no function '" + std::string(function) + "' in the program (functions: " +
                                               (have.empty() ? "none" : have) + ")");
  }
  const std::string fname = f->name();
  if (inputs.size() != f->args().size())
    return make_error(ErrorCode::InvalidArgument, "'" + fname + "' takes " + std::to_string(f->args().size()) +
                                                      " input" + (f->args().size() == 1 ? "" : "s") + ", got " +
                                                      std::to_string(inputs.size()));

  // Symbol extents: from the bound parameters, then from the inputs (which must agree).
  // One critical section from reading the weights to freezing them, so a concurrent
  // bind cannot slip in between.
  std::unique_lock lock(weights_mu);
  std::map<std::string, std::pair<std::int64_t, std::string>> symbols;
  for (const std::string& p : params_used(module, *f))
    if (!weights.is_bound(p))
      return make_error(ErrorCode::InvalidArgument, "parameter '" + p + "' of '" + fname +
                                                        "' is not bound: call bind, bind_file or bind_random first");
  for (auto& [key, v] : weights.symbols()) symbols.emplace(key, std::pair{v.first, "parameter '" + v.second + "'"});
  const std::string_view layer = ir::layer_of(fname);
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const ir::Type& ty = f->type_of(f->args()[i]);
    const std::string what = "input " + std::to_string(i) + " ('" + arg_label(*f, i) + "') of '" + fname + "'";
    const std::string declared = ir::type_str(ty, f->symbols());
    const TensorView& v = inputs[i];
    if (v.kind != ty.elem)
      return make_error(ErrorCode::InvalidArgument, what + " is " + std::string(elem_name(v.kind)) +
                                                        " but is declared " + declared);
    if (v.shape.size() != ty.rank())
      return make_error(ErrorCode::InvalidArgument, what + " has shape " + shape_str(v.shape) + " but is declared " +
                                                        declared);
    for (std::size_t d = 0; d < v.shape.size(); ++d) {
      if (v.shape[d] < 0)
        return make_error(ErrorCode::InvalidArgument, what + " has a negative extent in shape " + shape_str(v.shape));
      const ir::Dim& dim = ty.shape[d];
      if (dim.is_static()) {
        if (dim.extent != v.shape[d])
          return make_error(ErrorCode::InvalidArgument, what + " has shape " + shape_str(v.shape) +
                                                            " but is declared " + declared);
        continue;
      }
      const std::string& sym = f->symbol_name(dim.sym);
      const std::string key = jit::symbol_key(layer, sym);
      auto it = symbols.find(key);
      if (it != symbols.end() && it->second.first != v.shape[d])
        return make_error(ErrorCode::InvalidArgument,
                          what + " has shape " + shape_str(v.shape) + " (declared " + declared + "): '" + sym + "' is " +
                              std::to_string(v.shape[d]) + " there but " + std::to_string(it->second.first) + " from " +
                              it->second.second);
      symbols.emplace(key, std::pair{v.shape[d], "input " + std::to_string(i) + " ('" + arg_label(*f, i) + "')"});
    }
  }
  // From here on kernels may hold the weights: no more binding.
  frozen = true;
  lock.unlock();

  std::map<std::string, std::int64_t> bindings;
  for (const auto& [key, v] : symbols) bindings.emplace(key, v.first);
  TERNJIT_TRY(ir::Module spec, passes::specialize_function(module, fname, bindings, /*require_static=*/true));
  // The disk cache is keyed on `spec` before the pipeline; a hit skips the pipeline, the
  // support check and the target's compile (jit/kernel_cache.h).
  const targets::Target* target = engine->target;
  jit::DiskState disk = jit::DiskState::Off;
  auto compile = [&]() -> Result<targets::Artifact> {
    passes::PipelineOptions popts;
    popts.target = engine->info;
    TERNJIT_TRY_VOID(passes::run_pipeline(spec, passes::default_pipeline(engine->level, engine->info), popts));
    const ir::Function* pf = spec.find_function(fname);
    TERNJIT_CHECK(pf != nullptr, "specialize_function lost '" + fname + "'");
    std::string fallback_why;
    if (auto supported = target->check_supported(*pf); !supported.ok()) {
      // `auto` promises a kernel: what the chosen target cannot compile runs on the
      // reference interpreter (said in the verbose trace). A named target is an error.
      if (engine->fallback == nullptr) return std::move(supported).error();
      fallback_why = supported.error().message;
      if (engine->verbose())
        engine->trace("ternjit_verbose,fallback,target=" + std::string(target->name()) + ",fn=" + fname +
                      ",to=reference,why=" + fallback_why);
      target = engine->fallback;
    }
    targets::CompileOptions copts;
    copts.opt_level = engine->level;
    copts.threads = engine->parallel.threads;
    copts.max_isa = engine->options.max_isa;
    TERNJIT_TRY(targets::Artifact a, target->compile(spec, fname, copts));
    // Remembered in the cached artifact, so a disk hit knows (and traces) it too.
    if (!fallback_why.empty()) a.metadata["fallback"] = fallback_why;
    return a;
  };
  TERNJIT_TRY(targets::Artifact artifact, engine->disk_cache->get_or_compile(spec, fname, compile, &disk));
  if (auto fb = artifact.metadata.find("fallback");
      disk == jit::DiskState::Hit && fb != artifact.metadata.end() && engine->fallback) {
    if (engine->verbose())
      engine->trace("ternjit_verbose,fallback,target=" + std::string(target->name()) + ",fn=" + fname +
                    ",to=reference,why=" + fb->second);
    target = engine->fallback;
  }
  // Tuning records choose each x86 tmatmul's configuration, on disk hits too (autotune/dispatch.h).
  if (engine->options.tuning != "off" && target->name() == "x86") {
    autotune::DispatchOptions dopts;
    dopts.mode = engine->options.tuning;
    dopts.disk = engine->disk_cache->disk();
    if (auto tuned = autotune::apply_tuning(artifact, dopts); !tuned.ok() && engine->verbose())
      engine->trace("ternjit_verbose,tuning,fn=" + fname + ",error=" + tuned.error().message);
  }
  const ir::Function* sf = spec.find_function(fname);
  TERNJIT_CHECK(sf != nullptr, "specialize_function lost '" + fname + "'");
  jit::LoadContext ctx;
  ctx.params = &weights.values();  // frozen above: immutable while kernels live
  ctx.parallel = engine->parallel;
  ctx.packs = &packs;
  TERNJIT_TRY(jit::LoadedKernel loaded, jit::load(artifact, ctx));

  std::vector<std::string> names;
  std::vector<TensorView> sig_in, sig_out;
  std::string shape_desc;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    names.push_back(arg_label(*f, i));
    sig_in.push_back(TensorView{nullptr, inputs[i].kind, inputs[i].shape});
    shape_desc += (i ? " " : "") + names.back() + ":" + compact_type(inputs[i].kind, inputs[i].shape);
  }
  for (const ir::Type& t : sf->result_types()) {
    std::vector<std::int64_t> shape;
    for (const ir::Dim& d : t.shape) {
      TERNJIT_CHECK(d.is_static(), "specialized result of '" + fname + "' is not static");
      shape.push_back(d.extent);
    }
    sig_out.push_back(TensorView{nullptr, t.elem, std::move(shape)});
  }
  auto isa = artifact.metadata.find("isa");
  std::string desc = "target=" + std::string(target->name()) +
                     ",isa=" + (isa == artifact.metadata.end() ? std::string("-") : isa->second) + ",fn=" + fname +
                     ",shape=" + shape_desc + ",config=" + std::string(passes::opt_level_name(engine->level)) +
                     ",disk=" + std::string(jit::disk_state_name(disk));
  return std::make_unique<KernelImpl>(fname, std::move(names), std::move(sig_in), std::move(sig_out),
                                      std::move(loaded), std::move(desc));
}

Program::~Program() = default;
Program::Program(Program&&) noexcept = default;
Program& Program::operator=(Program&&) noexcept = default;
Program::Program(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Result<void> Program::bind(std::string_view name, const TensorView& value, WeightFormat format) {
  return guarded([&]() -> Result<void> {
    std::lock_guard lock(impl_->weights_mu);
    TERNJIT_TRY_VOID(impl_->check_not_frozen("bind '" + std::string(name) + "'"));
    return impl_->weights.bind(name, value, format);
  });
}

Result<void> Program::bind_file(const std::string& safetensors_path) {
  return guarded([&]() -> Result<void> {
    TERNJIT_TRY(formats::StFile file, formats::read_safetensors(safetensors_path));
    std::lock_guard lock(impl_->weights_mu);
    TERNJIT_TRY_VOID(impl_->check_not_frozen("bind_file '" + safetensors_path + "'"));
    return impl_->weights.bind_file(file, safetensors_path);
  });
}

Result<void> Program::bind_random(std::uint64_t seed) {
  return guarded([&]() -> Result<void> {
    std::lock_guard lock(impl_->weights_mu);
    TERNJIT_TRY_VOID(impl_->check_not_frozen("bind_random"));
    return impl_->weights.bind_random(seed);
  });
}

Result<const Kernel*> Program::kernel(std::string_view function, std::span<const TensorView> inputs) {
  const EngineShared& engine = *impl_->engine;
  KeyBuilder key(function, inputs);
  if (!engine.verbose()) {
    // The hot path: one shared lock and one lookup.
    if (const KernelImpl* k = impl_->cache.find(key.view())) return k;
  }
  return guarded([&]() -> Result<const Kernel*> {
    const Clock::time_point t0 = Clock::now();
    jit::Lookup how = jit::Lookup::Hit;
    auto r = impl_->cache.get(key.view(), [&] { return impl_->specialize(function, inputs); }, how);
    if (engine.verbose()) {
      const double ms = ms_since(t0);
      char msbuf[32];
      std::snprintf(msbuf, sizeof msbuf, "%.4g", ms);
      static constexpr const char* kHow[] = {"hit", "miss", "wait"};
      if (r.ok()) {
        engine.trace(std::string("ternjit_verbose,specialize,") + kHow[static_cast<int>(how)] + "," +
                     r.value()->trace_desc() + ",ms=" + msbuf);
      } else {
        std::string msg = r.error().message;
        for (char& c : msg) c = c == ',' || c == '\n' ? ';' : c;
        engine.trace("ternjit_verbose,specialize,error,target=" + std::string(engine.target->name()) +
                     ",fn=" + std::string(function) + ",ms=" + msbuf + ",error=" + msg);
      }
    }
    if (!r.ok()) return std::move(r).error();
    return static_cast<const Kernel*>(r.value());
  });
}

Result<void> Program::run(std::string_view function, std::span<const TensorView> inputs,
                          std::span<TensorView> outputs) {
  TERNJIT_TRY(const Kernel* k, kernel(function, inputs));
  return k->run(inputs, outputs);
}

// ---------------------------------------------------------------- Engine

struct Engine::Impl {
  std::shared_ptr<EngineShared> shared;
  std::string target_name;
};

Result<Engine> Engine::create(const EngineOptions& options) {
  return guarded([&]() -> Result<Engine> {
    TERNJIT_TRY_VOID(jit::validate_options(options));
    auto shared = std::make_shared<EngineShared>(EngineShared{options, targets::TargetRegistry::create(), nullptr, {}, {}});
    TERNJIT_TRY(const targets::Target* target,
                shared->registry.resolve(options.target.empty() ? std::string_view("auto") : options.target));
    shared->target = target;
    shared->info = target->info();
    shared->level = jit::opt_level_of(options);
    if ((options.target.empty() || options.target == "auto") && target->name() != "reference") {
      auto ref = shared->registry.find("reference");
      if (ref.ok()) shared->fallback = ref.value();
    }
    if (options.parallel_for != nullptr) {
      shared->parallel.threads = options.threads > 0 ? options.threads : jit::ThreadPool::default_threads();
      shared->parallel.run = options.parallel_for;
      shared->parallel.pool = options.parallel_pool;
    } else {
      shared->pool = std::make_unique<jit::ThreadPool>(options.threads);
      shared->parallel = shared->pool->parallel();
    }
    // Opened on first use; its warnings go where trace lines go (the engine outlives it).
    const EngineShared* sp = shared.get();
    shared->disk_cache = std::make_unique<jit::KernelCache>(
        jit::kernel_cache_config(options, shared->level, shared->parallel.threads,
                                 [sp](std::string_view line) { sp->trace(std::string(line)); }),
        *target);
    auto impl = std::make_unique<Impl>();
    impl->target_name = std::string(target->name());
    impl->shared = std::move(shared);
    return Engine(std::move(impl));
  });
}

Engine::~Engine() = default;
Engine::Engine(Engine&&) noexcept = default;
Engine& Engine::operator=(Engine&&) noexcept = default;
Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

const EngineOptions& Engine::options() const { return impl_->shared->options; }
const std::string& Engine::target_name() const { return impl_->target_name; }

std::vector<TargetDescription> Engine::targets() const {
  std::vector<TargetDescription> out;
  for (const auto& t : impl_->shared->registry.all()) {
    TargetDescription d = t->describe();
    auto ok = t->available();
    d.available = ok.ok();
    d.reason = ok.ok() ? std::string() : ok.error().message;
    out.push_back(std::move(d));
  }
  return out;
}

namespace {

Program make_program(const std::shared_ptr<EngineShared>& shared, ir::Module m, std::string_view source_name,
                     Clock::time_point t0) {
  if (shared->verbose()) {
    char msbuf[32];
    std::snprintf(msbuf, sizeof msbuf, "%.4g", ms_since(t0));
    shared->trace("ternjit_verbose,compile,target=" + std::string(shared->target->name()) +
                  ",src=" + std::string(source_name) + ",functions=" + std::to_string(m.functions().size()) +
                  ",params=" + std::to_string(m.params().size()) +
                  ",config=" + std::string(passes::opt_level_name(shared->level)) + ",ms=" + msbuf);
  }
  return Program(std::make_unique<Program::Impl>(shared, std::move(m)));
}

}  // namespace

Result<Program> Engine::compile(std::string_view source, std::string_view file_name) {
  return guarded([&]() -> Result<Program> {
    const Clock::time_point t0 = Clock::now();
    TERNJIT_TRY(ir::Module m, dsl::compile_tri(source, file_name));
    return make_program(impl_->shared, std::move(m), file_name, t0);
  });
}

Result<Program> Engine::compile(const Module& module) {
  return guarded([&]() -> Result<Program> {
    const Clock::time_point t0 = Clock::now();
    return make_program(impl_->shared, ir::unwrap(module), "<module>", t0);
  });
}

}  // namespace ternjit
