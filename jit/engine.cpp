// SPDX-License-Identifier: Apache-2.0
// engine.cpp - Engine, Program and Kernel (engine.h): the public objects over the stages of jit/specialize.cpp.
//
// An Engine owns its target registry, typed options, thread pool, disk cache and tuning
// source (nothing is global: two engines share nothing). A Program owns its module, its
// weights, the targets' per-Program state and a specialization cache keyed by function +
// input kinds/shapes; a miss runs Program::Impl::specialize (jit/specialize.cpp).
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

#include "formats/safetensors.h"
#include "ir/dsl/dsl.h"
#include "ir/module_impl.h"
#include "ir/print.h"
#include "jit/engine_internal.h"

namespace ternjit {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
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

}  // namespace

namespace jit {

std::string shape_str(std::span<const std::int64_t> s) {
  std::string r = "[";
  for (std::size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

std::string arg_label(const ir::Function& f, std::size_t i) {
  const std::string& name = f.value(f.args()[i]).name;
  return name.empty() ? "arg" + std::to_string(i) : name;
}

void EngineShared::trace(const std::string& line) const {
  if (options.trace) {
    options.trace(line);
  } else {
    std::string l = line + "\n";
    std::fputs(l.c_str(), stderr);
  }
}

void EngineShared::after_stage(std::string_view stage, const std::string& function, const ir::Module& module) const {
  if (typed.print_after.empty()) return;
  if (std::find(typed.print_after.begin(), typed.print_after.end(), "all") == typed.print_after.end() &&
      std::find(typed.print_after.begin(), typed.print_after.end(), stage) == typed.print_after.end())
    return;
  trace("ternjit_verbose,after_stage,stage=" + std::string(stage) + ",fn=" + function + "\n" +
        ir::print_module(module));
}

CallKey::CallKey(std::string_view function, std::span<const TensorView> inputs, std::int64_t row_bucket) {
  append(function.data(), function.size());
  const char sep = 0;
  append(&sep, 1);
  for (const TensorView& v : inputs) {
    const char head[2] = {static_cast<char>(v.kind), static_cast<char>(v.shape.size())};
    append(head, 2);
    if (row_bucket > 0 && !v.shape.empty()) {
      append(&row_bucket, sizeof row_bucket);
      append(v.shape.data() + 1, (v.shape.size() - 1) * sizeof(std::int64_t));
    } else {
      append(v.shape.data(), v.shape.size() * sizeof(std::int64_t));
    }
  }
}

void CallKey::append(const void* p, std::size_t n) {
  if (n == 0) return;  // a scalar's empty shape: p may be null, which memcpy must not see
  if (heap_.empty() && size_ + n <= stack_.size()) {
    std::memcpy(stack_.data() + size_, p, n);
    size_ += n;
    return;
  }
  if (heap_.empty()) heap_.assign(stack_.data(), size_);
  heap_.append(static_cast<const char*>(p), n);
}

targets::CompileOptions EngineShared::compile_options(const targets::Target& t) const {
  targets::CompileOptions o;
  o.opt_level = typed.level;
  o.threads = parallel.threads;
  auto it = typed.target_options.find(t.name());
  if (it != typed.target_options.end()) o.target = it->second;
  o.tuning = typed.tuning;
  return o;
}

KernelImpl::KernelImpl(const Program::Impl* program, std::string function, std::vector<std::string> arg_names,
                       std::vector<TensorView> inputs, std::vector<TensorView> outputs,
                       std::unique_ptr<Trampoline> loaded, std::string trace_desc)
    : program_(program),
      function_(std::move(function)),
      arg_names_(std::move(arg_names)),
      inputs_(std::move(inputs)),
      outputs_(std::move(outputs)),
      loaded_(std::move(loaded)),
      trace_desc_(std::move(trace_desc)) {}

Result<void> KernelImpl::run(std::span<const TensorView> inputs, std::span<TensorView> outputs) const {
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
    return loaded_->run(buffers.data());
  });
}

std::shared_ptr<const Kernel> KernelImpl::shared() const {
  // Aliasing: the pointer is this kernel, the ownership its Program's state.
  return std::shared_ptr<const Kernel>(program_->shared_from_this(), this);
}

void KernelImpl::retain() const {
  std::lock_guard lock(retain_mu_);
  if (retained_++ == 0) self_ = shared();
}

bool KernelImpl::release() const {
  std::shared_ptr<const Kernel> last;  // dropped after the lock: it may free this object
  {
    std::lock_guard lock(retain_mu_);
    if (retained_ == 0) return false;
    if (--retained_ == 0) last = std::move(self_);
  }
  return true;
}

Result<void> KernelImpl::check(const std::string& what, const TensorView& got, const TensorView& want) const {
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

}  // namespace jit

// ---------------------------------------------------------------- Program

Program::Impl::Impl(std::shared_ptr<const jit::EngineShared> e, ir::Module m)
    : engine(std::move(e)), module(std::move(m)), weights(module) {
  target_state = engine->choice.target->new_program_state();
  if (engine->choice.fallback) fallback_state = engine->choice.fallback->new_program_state();
}

Result<void> Program::Impl::check_not_frozen(std::string_view what) const {
  if (!frozen) return success();
  return make_error(ErrorCode::InvalidArgument,
                    std::string(what) + ": the weights are frozen once a kernel has been specialized; bind every "
                                        "parameter before the first kernel() or run()");
}

Program::~Program() = default;
Program::Program(Program&&) noexcept = default;
Program& Program::operator=(Program&&) noexcept = default;
Program::Program(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

Result<void> Program::bind(std::string_view name, const TensorView& value, WeightFormat format) {
  return guarded([&]() -> Result<void> {
    std::lock_guard lock(impl_->weights_mu);
    TERNJIT_TRY_VOID(impl_->check_not_frozen("bind '" + std::string(name) + "'"));
    return impl_->weights.bind(name, value, format, std::nullopt);
  });
}

Result<void> Program::bind(std::string_view name, const TensorView& value, WeightFormat format,
                           std::size_t byte_length) {
  return guarded([&]() -> Result<void> {
    std::lock_guard lock(impl_->weights_mu);
    TERNJIT_TRY_VOID(impl_->check_not_frozen("bind '" + std::string(name) + "'"));
    return impl_->weights.bind(name, value, format, byte_length);
  });
}

Result<void> Program::bind_file(const std::string& path, std::span<const std::string> name_map) {
  return guarded([&]() -> Result<void> {
    TERNJIT_TRY(formats::NameMap names, formats::NameMap::parse(name_map));
    TERNJIT_TRY(formats::WeightFile file, formats::WeightFile::open(path, names));
    std::lock_guard lock(impl_->weights_mu);
    TERNJIT_TRY_VOID(impl_->check_not_frozen("bind_file '" + path + "'"));
    return impl_->weights.bind_file(file);
  });
}

Result<void> Program::bind_random(std::uint64_t seed) {
  return guarded([&]() -> Result<void> {
    std::lock_guard lock(impl_->weights_mu);
    TERNJIT_TRY_VOID(impl_->check_not_frozen("bind_random"));
    return impl_->weights.bind_random(seed);
  });
}

namespace {

// An IR type as the public declaration: symbols by name, in the table that owns them.
TensorDecl decl_of(std::string name, const ir::Type& type, const auto& symbol_name) {
  TensorDecl d{std::move(name), type.elem, {}};
  for (const ir::Dim& dim : type.shape)
    d.shape.push_back(dim.is_static() ? Dim(dim.extent) : Dim(std::string(symbol_name(dim.sym))));
  return d;
}

}  // namespace

std::vector<FunctionDecl> Program::functions() const {
  std::vector<FunctionDecl> out;
  for (const ir::Function& f : impl_->module.functions()) {
    const auto symbol = [&](ir::SymbolId s) -> const std::string& { return f.symbol_name(s); };
    FunctionDecl fd{f.name(), {}, {}};
    for (ir::ValueId v : f.args()) fd.inputs.push_back(decl_of(f.value(v).name, f.value(v).type, symbol));
    for (const ir::Type& t : f.result_types()) fd.outputs.push_back(decl_of("", t, symbol));
    out.push_back(std::move(fd));
  }
  return out;
}

std::vector<ParamInfo> Program::params() const {
  std::vector<ParamInfo> out;
  std::lock_guard lock(impl_->weights_mu);
  for (const ir::ParamDecl& p : impl_->module.params()) {
    const auto symbol = [&](ir::SymbolId s) -> const std::string& { return p.symbols.at(s.index); };
    out.push_back(ParamInfo{decl_of(p.name, p.type, symbol), impl_->weights.is_bound(p.name)});
  }
  return out;
}

std::size_t Program::resident_bytes() const {
  std::size_t n = 0;
  {
    std::lock_guard lock(impl_->weights_mu);
    for (const auto& [name, value] : impl_->weights.values().values) n += value.bytes().size();
  }
  for (const auto* state : {impl_->target_state.get(), impl_->fallback_state.get()})
    if (state != nullptr) n += state->host_bytes();
  return n;
}

Result<std::shared_ptr<const Kernel>> Program::kernel(std::string_view function, std::span<const TensorView> inputs) {
  TERNJIT_TRY(const jit::KernelImpl* k, impl_->kernel(function, inputs));
  return std::shared_ptr<const Kernel>(impl_, k);  // aliasing: shares the Program's state
}

Result<const jit::KernelImpl*> Program::Impl::kernel(std::string_view function, std::span<const TensorView> inputs) {
  const jit::EngineShared& shared = *engine;
  const jit::CallKey key(function, inputs);
  if (!shared.verbose()) {
    // The hot path: one shared lock and one lookup.
    if (const jit::KernelImpl* k = cache.find(key.view())) return k;
  }
  return guarded([&]() -> Result<const jit::KernelImpl*> {
    const Clock::time_point t0 = Clock::now();
    jit::Lookup how = jit::Lookup::Hit;
    auto r = cache.get(
        key.view(),
        [&]() -> Result<std::unique_ptr<jit::KernelImpl>> {
          // A new M in a compiled bucket: no binding, no pipeline, no code (specialize.cpp).
          if (auto k = from_bucket(function, inputs)) return k;
          return specialize(function, inputs);
        },
        how);
    if (shared.verbose()) {
      const double ms = ms_since(t0);
      char msbuf[32];
      std::snprintf(msbuf, sizeof msbuf, "%.4g", ms);
      static constexpr const char* kHow[] = {"hit", "miss", "wait"};
      if (r.ok()) {
        shared.trace(std::string("ternjit_verbose,specialize,") + kHow[static_cast<int>(how)] + "," +
                     r.value()->trace_desc() + ",ms=" + msbuf);
      } else {
        std::string msg = r.error().message;
        for (char& c : msg) c = c == ',' || c == '\n' ? ';' : c;
        shared.trace("ternjit_verbose,specialize,error,target=" + std::string(shared.choice.target->name()) +
                     ",fn=" + std::string(function) + ",ms=" + msbuf + ",error=" + msg);
      }
    }
    if (!r.ok()) return std::move(r).error();
    return r.value();
  });
}

Result<void> Program::run(std::string_view function, std::span<const TensorView> inputs,
                          std::span<TensorView> outputs) {
  // The Program holds the kernel for the call: no reference is taken.
  TERNJIT_TRY(const jit::KernelImpl* k, impl_->kernel(function, inputs));
  return k->run(inputs, outputs);
}

// ---------------------------------------------------------------- Engine

struct Engine::Impl {
  std::shared_ptr<jit::EngineShared> shared;
  std::string target_name;
};

namespace jit {

Result<std::shared_ptr<EngineShared>> make_engine_shared(const EngineOptions& options) {
  auto shared = std::make_shared<EngineShared>(EngineShared{options, targets::TargetRegistry::create()});
  auto typed = validate_options(options, shared->registry);
  if (!typed.ok()) return name_env_variable(typed.error(), options, shared->registry);
  shared->typed = *typed;
  auto choice = shared->registry.choose(options.target);
  if (!choice.ok()) return name_env_variable(choice.error(), options, shared->registry);
  shared->choice = *choice;
  if (options.parallel_for != nullptr) {
    shared->parallel.threads = options.threads > 0 ? options.threads : ThreadPool::default_threads();
    shared->parallel.run = options.parallel_for;
    shared->parallel.pool = options.parallel_pool;
  } else {
    shared->pool = std::make_unique<ThreadPool>(options.threads);
    shared->parallel = shared->pool->parallel();
  }
  // Opened on first use; its warnings go where trace lines go (the engine outlives it).
  const EngineShared* sp = shared.get();
  KernelCacheConfig cache_config =
      kernel_cache_config(options, [sp](std::string_view line) { sp->trace(std::string(line)); });
  shared->disk_cache = std::make_unique<KernelCache>(std::move(cache_config), shared->choice);
  // Targets ask it for each tunable kernel's configuration (autotune/dispatch.h).
  autotune::DispatchOptions dopts;
  dopts.mode = shared->typed.tuning;
  dopts.disk = [sp] { return sp->disk_cache->disk(); };  // opened on first use
  if (shared->verbose()) {
    // Every record of the problem that does not apply is said, with why, before the decision.
    dopts.scope = autotune::RecordScope::Explain;
    dopts.on_decision = [sp](const targets::TuningProblem& p, const autotune::Decision& d, bool tuned_now) {
      for (const autotune::SkippedRecord& s : d.skipped)
        sp->trace("ternjit_verbose,tuning,skipped,op=" + p.op + ",problem=" + p.label + ",record_m=" +
                  std::to_string(s.record.M) + (s.record.legacy ? ",legacy=1" : "") + ",why=" + s.why +
                  ",config=" + s.record.config);
      sp->trace("ternjit_verbose,tuning,op=" + p.op + ",problem=" + p.label + ",source=" +
                std::string(autotune::decision_source_name(d.source)) + (tuned_now ? ",tuned_now=1" : "") +
                ",applicable=" + std::to_string(d.applicable) + ",skipped=" + std::to_string(d.skipped.size()) +
                ",config=" + d.config);
    };
  }
  shared->tuning = std::make_unique<autotune::RecordSource>(std::move(dopts));
  return shared;
}

}  // namespace jit

Result<Engine> Engine::create(const EngineOptions& options) {
  return guarded([&]() -> Result<Engine> {
    TERNJIT_TRY(std::shared_ptr<jit::EngineShared> shared, jit::make_engine_shared(options));
    auto impl = std::make_unique<Impl>();
    impl->target_name = std::string(shared->choice.target->name());
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

Program make_program(const std::shared_ptr<jit::EngineShared>& shared, ir::Module m, std::string_view source_name,
                     Clock::time_point t0) {
  if (shared->verbose()) {
    char msbuf[32];
    std::snprintf(msbuf, sizeof msbuf, "%.4g", ms_since(t0));
    shared->trace("ternjit_verbose,compile,target=" + std::string(shared->choice.target->name()) +
                  ",src=" + std::string(source_name) + ",functions=" + std::to_string(m.functions().size()) +
                  ",params=" + std::to_string(m.params().size()) +
                  ",config=" + std::string(passes::opt_level_name(shared->typed.level)) + ",ms=" + msbuf);
  }
  return Program(std::make_shared<Program::Impl>(shared, std::move(m)));
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
