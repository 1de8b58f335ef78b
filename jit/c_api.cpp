// SPDX-License-Identifier: Apache-2.0
// c_api.cpp - the C ABI of ternjit.h over the C++ Engine API: handles, statuses, no exceptions.
//
// Every entry point converts its C arguments, calls the C++ API and turns a failed
// Result into a status code plus a message kept in the thread-local jit::last_error()
// (shared with the kernel trampoline, required by ternjit_last_error). Each entry point
// is wrapped in guarded(), which clears the message first (ternjit.h's last-error rule):
// an exception from anywhere below (std::bad_alloc, a foreign library) becomes
// TERNJIT_INTERNAL with its what() text and never crosses the ABI. The handles and these
// helpers are in jit/c_api_internal.h; the BitNet models' entry points are in
// c_api_bitnet.cpp, DLPack's and the ternary matmul dispatch's in c_api_dlpack.cpp.
#include "ternjit/ternjit.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <exception>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "jit/engine_internal.h"
#include "jit/loader.h"
#include "targets/registry.h"
#include "ternjit/builder.h"
#include "ternjit/engine.h"
#include "ternjit/result.h"
#include "ternjit/types.h"

#ifndef TERNJIT_VERSION_STRING
#error "TERNJIT_VERSION_STRING must be defined by the build (lib/CMakeLists.txt)"
#endif

#include "jit/c_api_internal.h"

static_assert(std::is_same_v<ternjit::KernelFn, ternjit_kernel_fn>, "the C and C++ kernel entry types differ");

namespace ternjit::jit::capi {

void set_error(std::string_view message) noexcept {
  try {
    ternjit::jit::last_error().assign(message);
  } catch (...) {
    ternjit::jit::last_error().clear();  // out of memory while reporting: an empty message, still a status
  }
}

// Records "function: what detail" without allocating before the try (used in handlers).
void set_error(const char* function, const char* what, const char* detail) noexcept {
  try {
    ternjit::jit::last_error().assign(function).append(": ").append(what).append(detail);
  } catch (...) {
    ternjit::jit::last_error().clear();
  }
}

// The C status of an error code: one mapping, shared with the kernel trampolines.
ternjit_status status_of(ErrorCode code) { return static_cast<ternjit_status>(ternjit::jit::status_of(code)); }

// Records `e` (all its diagnostics, `file:line:col: error: ...`) and returns its status.
ternjit_status fail(const Error& e) {
  std::string text = ternjit::render(e);
  while (!text.empty() && text.back() == '\n') text.pop_back();
  set_error(text);
  return status_of(e.code);
}

// Records an API-misuse message "function: message" and returns INVALID_ARGUMENT.
ternjit_status misuse(const char* function, std::string_view message) {
  set_error(std::string(function) + ": " + std::string(message));
  return TERNJIT_INVALID_ARGUMENT;
}

// The C dtype as an element kind; false for a value outside the enum.
bool kind_of(int dtype, ElemKind* out) {
  switch (dtype) {
    case TERNJIT_F32: *out = ElemKind::F32; return true;
    case TERNJIT_F16: *out = ElemKind::F16; return true;
    case TERNJIT_BF16: *out = ElemKind::BF16; return true;
    case TERNJIT_I8: *out = ElemKind::I8; return true;
    case TERNJIT_U8: *out = ElemKind::U8; return true;
    case TERNJIT_I32: *out = ElemKind::I32; return true;
    case TERNJIT_T2: *out = ElemKind::T2; return true;
  }
  return false;
}

// The element kind as a C dtype. Bool has no C dtype: its one byte per element (0 or 1)
// is reported as TERNJIT_U8.
ternjit_dtype dtype_of(ElemKind kind) {
  switch (kind) {
    case ElemKind::F32: return TERNJIT_F32;
    case ElemKind::F16: return TERNJIT_F16;
    case ElemKind::BF16: return TERNJIT_BF16;
    case ElemKind::I8: return TERNJIT_I8;
    case ElemKind::U8: return TERNJIT_U8;
    case ElemKind::I32: return TERNJIT_I32;
    case ElemKind::T2: return TERNJIT_T2;
    case ElemKind::Bool: return TERNJIT_U8;
  }
  return TERNJIT_U8;
}

// The C weight format as a WeightFormat; false for a value outside the enum.
bool weight_format_of(int format, ternjit::WeightFormat* out) {
  switch (format) {
    case TERNJIT_FORMAT_PLAIN: *out = ternjit::WeightFormat::Plain; return true;
    case TERNJIT_FORMAT_TERN2: *out = ternjit::WeightFormat::Tern2; return true;
    case TERNJIT_FORMAT_TERN2_SM: *out = ternjit::WeightFormat::Tern2SM; return true;
    case TERNJIT_FORMAT_TERN1_6: *out = ternjit::WeightFormat::Tern16; return true;
    case TERNJIT_FORMAT_BITPLANE: *out = ternjit::WeightFormat::Bitplane; return true;
  }
  return false;
}

// Checks one dtype/rank/shape triple and builds a TensorView of `data`. `what` names the
// tensor in messages ("input 0"). Returns TERNJIT_OK or a recorded misuse.
ternjit_status make_view(const char* function, const std::string& what, void* data, int dtype,
                         const int64_t* shape, int32_t rank, ternjit::TensorView* out) {
  ElemKind kind{};
  if (!kind_of(dtype, &kind))
    return misuse(function, what + " has an unknown dtype " + std::to_string(dtype));
  if (rank < 0) return misuse(function, what + " has a negative rank " + std::to_string(rank));
  if (rank > 0 && shape == nullptr)
    return misuse(function, what + " has rank " + std::to_string(rank) + " but a null shape");
  out->data = data;
  out->kind = kind;
  out->shape.assign(shape, shape + rank);
  for (int32_t i = 0; i < rank; ++i)
    if (shape[i] < 0)
      return misuse(function, what + " has a negative extent " + std::to_string(shape[i]) + " in dim " +
                                  std::to_string(i));
  return TERNJIT_OK;
}

// Converts `n` C tensors; `kind` is "input" or "output".
ternjit_status make_views(const char* function, const char* kind, const ternjit_tensor* tensors, size_t n,
                          bool need_data, std::vector<ternjit::TensorView>* out) {
  if (n > 0 && tensors == nullptr)
    return misuse(function, std::string(kind) + "s is null but n_" + kind + "s is " + std::to_string(n));
  out->resize(n);
  for (size_t i = 0; i < n; ++i) {
    const std::string what = std::string(kind) + " " + std::to_string(i);
    if (auto s = make_view(function, what, tensors[i].data, raw_enum(tensors[i].dtype), tensors[i].shape,
                           tensors[i].rank, &(*out)[i]);
        s != TERNJIT_OK)
      return s;
    if (need_data && tensors[i].data == nullptr) return misuse(function, what + " has a null data pointer");
  }
  return TERNJIT_OK;
}

}  // namespace ternjit::jit::capi

using namespace ternjit::jit::capi;

namespace {

using ternjit::ElemKind;

// The size of the first ternjit_engine_options (up to `verbose`): callers built against it
// stay valid; later fields are read only when struct_size says the caller has them.
constexpr std::size_t kFirstOptionsSize = offsetof(ternjit_engine_options, max_isa);

// Builds EngineOptions from the C struct (NULL: defaults), checking every field.
ternjit_status engine_options_of(const ternjit_engine_options* c, ternjit::EngineOptions* out) {
  constexpr const char* fn = "ternjit_engine_create";
  if (c == nullptr) return TERNJIT_OK;
  if (c->struct_size < kFirstOptionsSize)
    return misuse(fn, "options.struct_size is " + std::to_string(c->struct_size) + ", expected at least " +
                          std::to_string(kFirstOptionsSize) + " (initialize the options with ternjit_engine_options_init)");
  const auto has = [&](std::size_t end) { return c->struct_size >= end; };
  if (c->opt_level < 0 || c->opt_level > 3)
    return misuse(fn, "options.opt_level must be 0..3, got " + std::to_string(c->opt_level));
  if (c->threads < 0) return misuse(fn, "options.threads must be >= 0, got " + std::to_string(c->threads));
  if (c->target != nullptr) out->target = c->target;
  out->opt_level = c->opt_level;
  out->threads = c->threads;
  if (c->cache_dir != nullptr) out->cache_dir = c->cache_dir;
  out->verbose = c->verbose;
  if (has(offsetof(ternjit_engine_options, max_isa) + sizeof c->max_isa) && c->max_isa != nullptr)
    out->max_isa = c->max_isa;
  if (has(offsetof(ternjit_engine_options, parallel_pool) + sizeof c->parallel_pool)) {
    out->parallel_for = c->parallel_for;
    out->parallel_pool = c->parallel_pool;
  }
  if (has(offsetof(ternjit_engine_options, cache_shared_group) + sizeof c->cache_shared_group)) {
    out->cache_max_bytes = c->cache_max_bytes;
    out->cache_shared_group = c->cache_shared_group != 0;
  }
  if (has(offsetof(ternjit_engine_options, tuning) + sizeof c->tuning)) {
    if (c->target_options != nullptr) out->target_options = c->target_options;
    if (c->tuning != nullptr && *c->tuning != '\0') out->tuning = c->tuning;
  }
  if (has(offsetof(ternjit_engine_options, trace_context) + sizeof c->trace_context) && c->trace != nullptr) {
    out->trace = [trace = c->trace, context = c->trace_context](std::string_view line) {
      trace(context, line.data(), line.size());
    };
  }
  return TERNJIT_OK;
}

CTensorDecl c_decl(ternjit::TensorDecl d) {
  CTensorDecl c{std::move(d), {}, {}};
  for (const ternjit::Dim& dim : c.decl.shape) {
    c.extents.push_back(dim.is_static() ? dim.extent : -1);
    c.symbols.push_back(dim.is_static() ? nullptr : dim.symbol.c_str());
  }
  return c;
}

// Fills `out` from `c` (pointers into c).
void fill_decl(const CTensorDecl& c, ternjit_tensor_decl* out) {
  out->name = c.decl.name.c_str();
  out->dtype = dtype_of(c.decl.kind);
  out->rank = static_cast<int32_t>(c.extents.size());
  out->extents = c.extents.data();
  out->symbols = c.symbols.data();
}

// Argument or result `i` of function `index` (`outputs` picks which) into `out`.
ternjit_status function_decl(const char* fn, const ternjit_program* program, size_t index, size_t i, bool outputs,
                             ternjit_tensor_decl* out) {
  if (program == nullptr) return misuse(fn, "program is null");
  if (out == nullptr) return misuse(fn, "out is null");
  if (index >= program->functions.size())
    return misuse(fn, "function " + std::to_string(index) + " out of range (the program has " +
                          std::to_string(program->functions.size()) + ")");
  const CFunctionDecl& f = program->functions[index];
  const auto& list = outputs ? f.outputs : f.inputs;
  if (i >= list.size())
    return misuse(fn, std::string(outputs ? "result " : "argument ") + std::to_string(i) + " of '" + f.name +
                          "' out of range (it has " + std::to_string(list.size()) + ")");
  fill_decl(list[i], out);
  return TERNJIT_OK;
}

// The features that do not depend on the machine.
constexpr std::string_view kStaticFeatures[] = {
    "safetensors",     // ternjit_bind_weights_file
    "gguf",            // ternjit_bind_weights_file: GGUF TQ1_0/TQ2_0/F32/F16/BF16/Q8_0
    "hf-bitnet",       // ternjit_bind_weights_file: Hugging Face BitNet packed and bf16 checkpoints
    "bind-sized",      // ternjit_bind_weight_sized
    "name-map",        // ternjit_bind_weights_file_mapped
    "autodiff",        // ternjit_compile_grad
    "autodiff-int8-dx",  // ternjit_compile_grad with TERNJIT_GRAD_INT8_DX
    "autodiff-int8-dw",  // ternjit_compile_grad with TERNJIT_GRAD_INT8_DW
    "random-weights",  // ternjit_bind_random
    "bitnet-gguf",     // ternjit_read_bitnet_config / ternjit_write_synthetic_bitnet
    "bitnet-activation",  // ternjit_bitnet_config.ffn_activation (relu^2 / silu)
    "bitnet-dtypes",   // ternjit_bitnet_config.embedding / kv_cache
    "hf-bitnet-dir",   // ternjit_read_hf_bitnet_config / ternjit_bind_hf_bitnet
    "kernel-entry",    // ternjit_get_kernel / ternjit_kernel_entry
    "kernel-retain",   // ternjit_kernel_retain / ternjit_kernel_release
    "dlpack",          // ternjit_run_dlpack / ternjit_tensor_from_dlpack (DLPack 1.x)
    "tmatmul-dispatch",  // ternjit_tmatmul_dispatch
    "tmatmul-bound",     // ternjit_tmatmul_bind and its bound weights
    "tmatmul-q2_0",      // TERNJIT_TMATMUL_W_GGUF_Q2_0
    "tmatmul-x-row-i8",  // TERNJIT_TMATMUL_X_F32_ROW_I8
    "kernel-launch",   // ternjit_kernel_device / ternjit_kernel_launch (GPU targets)
    "builder",         // the C++ ModuleBuilder (libternjit exports the C++ API too)
    "format:plain", "format:tern2", "format:tern2-sm", "format:tern1.6", "format:bitplane",
};

}  // namespace

ternjit_program::ternjit_program(ternjit::Program p) : program(std::move(p)) {
  for (ternjit::FunctionDecl& f : program.functions()) {
    CFunctionDecl c{std::move(f.name), {}, {}};
    for (ternjit::TensorDecl& d : f.inputs) c.inputs.push_back(c_decl(std::move(d)));
    for (ternjit::TensorDecl& d : f.outputs) c.outputs.push_back(c_decl(std::move(d)));
    functions.push_back(std::move(c));
  }
  for (ternjit::ParamInfo& p : program.params()) params.push_back(c_decl(std::move(p.decl)));
}

extern "C" {

uint32_t ternjit_abi_version(void) { return TERNJIT_ABI_VERSION; }

const char* ternjit_version(void) { return TERNJIT_VERSION_STRING; }

int ternjit_has_feature(const char* name) {
  int present = 0;
  const ternjit_status s = guarded("ternjit_has_feature", [&] {
    if (name == nullptr) return misuse("ternjit_has_feature", "name is null");
    const std::string_view n(name);
    for (std::string_view f : kStaticFeatures)
      if (n == f) present = 1;
    constexpr std::string_view kTarget = "target:";
    if (n.substr(0, kTarget.size()) == kTarget) {
      // A fresh registry (no global table): detection runs on every query, which is
      // cheap next to compiling and keeps two engines independent.
      const auto registry = ternjit::targets::TargetRegistry::create();
      present = registry.find(n.substr(kTarget.size())).ok() ? 1 : 0;
    }
    return TERNJIT_OK;
  });
  return s == TERNJIT_OK ? present : 0;
}

const char* ternjit_feature_names(void) {
  // Built once: the registry's table is fixed for a build (availability is not, which is
  // why ternjit_has_feature probes every time).
  static const std::string names = [] {
    std::string s;
    for (std::string_view f : kStaticFeatures) s += (s.empty() ? "" : ",") + std::string(f);
    const auto registry = ternjit::targets::TargetRegistry::create();
    for (const auto& t : registry.all()) s += ",target:" + std::string(t->name());
    return s;
  }();
  return names.c_str();
}

const char* ternjit_last_error(void) { return ternjit::jit::last_error().c_str(); }

void ternjit_engine_options_init(ternjit_engine_options* options) {
  ternjit_engine_options_init_sized(options, sizeof(ternjit_engine_options));
}

void ternjit_engine_options_init_sized(ternjit_engine_options* options, size_t size) {
  ternjit::jit::last_error().clear();
  if (options == nullptr) {
    set_error("ternjit_engine_options_init: options is null");
    return;
  }
  if (size < kFirstOptionsSize) {
    set_error("ternjit_engine_options_init_sized: size " + std::to_string(size) + " is below the first struct's " +
              std::to_string(kFirstOptionsSize) + " bytes");
    return;
  }
  // Every field that ends within the caller's struct gets its default; nothing past it is touched.
  ternjit_engine_options defaults{};
  defaults.struct_size = static_cast<uint32_t>(std::min(size, sizeof(ternjit_engine_options)));
  defaults.target = "auto";
  defaults.opt_level = 2;
  std::memcpy(options, &defaults, defaults.struct_size);
}

ternjit_status ternjit_engine_create(const ternjit_engine_options* options, ternjit_engine** out) {
  return guarded("ternjit_engine_create", [&] {
    if (out == nullptr) return misuse("ternjit_engine_create", "out is null");
    *out = nullptr;
    ternjit::EngineOptions opts;
    if (auto s = engine_options_of(options, &opts); s != TERNJIT_OK) return s;
    auto engine = ternjit::Engine::create(opts);
    if (!engine.ok()) return fail(engine.error());
    *out = new ternjit_engine(std::move(engine).value());
    return TERNJIT_OK;
  });
}

ternjit_status ternjit_engine_create_from_env(ternjit_engine** out) {
  return guarded("ternjit_engine_create_from_env", [&] {
    if (out == nullptr) return misuse("ternjit_engine_create_from_env", "out is null");
    *out = nullptr;
    auto opts = ternjit::EngineOptions::from_env();
    if (!opts.ok()) return fail(opts.error());
    auto engine = ternjit::Engine::create(opts.value());
    if (!engine.ok()) return fail(engine.error());
    *out = new ternjit_engine(std::move(engine).value());
    return TERNJIT_OK;
  });
}

void ternjit_engine_destroy(ternjit_engine* engine) {
  (void)guarded("ternjit_engine_destroy", [&] {
    delete engine;
    return TERNJIT_OK;
  });
}

ternjit_status ternjit_compile(ternjit_engine* engine, const char* source, size_t len, const char* file_name,
                               ternjit_program** out) {
  constexpr const char* fn = "ternjit_compile";
  return guarded(fn, [&] {
    if (out == nullptr) return misuse(fn, "out is null");
    *out = nullptr;
    if (engine == nullptr) return misuse(fn, "engine is null");
    if (source == nullptr && len > 0) return misuse(fn, "source is null but len is " + std::to_string(len));
    const std::string_view text = source == nullptr ? std::string_view() : std::string_view(source, len);
    auto program = engine->engine.compile(text, file_name == nullptr ? "<source>" : file_name);
    if (!program.ok()) return fail(program.error());
    *out = new ternjit_program(std::move(program).value());
    return TERNJIT_OK;
  });
}

ternjit_status ternjit_compile_grad(ternjit_engine* engine, const char* source, size_t len, const char* file_name,
                                    const char* function, const char* const* wrt, size_t n_wrt, uint32_t flags,
                                    ternjit_program** out) {
  constexpr const char* fn = "ternjit_compile_grad";
  return guarded(fn, [&] {
    if (out == nullptr) return misuse(fn, "out is null");
    *out = nullptr;
    if (engine == nullptr) return misuse(fn, "engine is null");
    if (source == nullptr && len > 0) return misuse(fn, "source is null but len is " + std::to_string(len));
    if (function == nullptr) return misuse(fn, "function is null");
    if (wrt == nullptr && n_wrt > 0) return misuse(fn, "wrt is null but n_wrt is " + std::to_string(n_wrt));
    if ((flags & ~(TERNJIT_GRAD_STE_CLIP | TERNJIT_GRAD_INT8_DX | TERNJIT_GRAD_INT8_DW)) != 0)
      return misuse(fn, "unknown flags " + std::to_string(flags));
    ternjit::GradOptions options;
    options.ste_clip = (flags & TERNJIT_GRAD_STE_CLIP) != 0;
    options.int8_dx = (flags & TERNJIT_GRAD_INT8_DX) != 0;
    options.int8_dw = (flags & TERNJIT_GRAD_INT8_DW) != 0;
    for (size_t i = 0; i < n_wrt; ++i) {
      if (wrt[i] == nullptr) return misuse(fn, "wrt[" + std::to_string(i) + "] is null");
      options.wrt.emplace_back(wrt[i]);
    }
    const std::string_view text = source == nullptr ? std::string_view() : std::string_view(source, len);
    auto module = ternjit::Module::from_tri(text, file_name == nullptr ? "<source>" : file_name);
    if (!module.ok()) return fail(module.error());
    auto added = ternjit::grad(*module, function, options);
    if (!added.ok()) return fail(added.error());
    auto program = engine->engine.compile(*module);
    if (!program.ok()) return fail(program.error());
    *out = new ternjit_program(std::move(program).value());
    return TERNJIT_OK;
  });
}

void ternjit_program_destroy(ternjit_program* program) {
  (void)guarded("ternjit_program_destroy", [&] {
    delete program;
    return TERNJIT_OK;
  });
}

namespace {
// ternjit_bind_weight and ternjit_bind_weight_sized: `nbytes` when the caller gave it.
// `dtype` and `format` are the ints the caller stored (raw_enum): passing a C caller's
// out-of-range enum on by value would load it as the C++ enum (undefined; UBSan's enum check
// caught (ternjit_dtype)99 here).
ternjit_status bind_weight(const char* fn, ternjit_program* program, const char* name, const void* data,
                           std::optional<std::size_t> nbytes, int dtype, int format, const int64_t* shape,
                           int32_t rank) {
  if (program == nullptr) return misuse(fn, "program is null");
  if (name == nullptr) return misuse(fn, "name is null");
  if (data == nullptr && nbytes.value_or(1) != 0) return misuse(fn, std::string("data of '") + name + "' is null");
  ternjit::WeightFormat wf{};
  if (!weight_format_of(format, &wf))
    return misuse(fn, "unknown format " + std::to_string(format) + " for '" + name + "'");
  ternjit::TensorView view;
  // The view is only read: Program::bind copies it.
  if (auto s = make_view(fn, std::string("weight '") + name + "'", const_cast<void*>(data), dtype, shape,
                         rank, &view);
      s != TERNJIT_OK)
    return s;
  auto r = nbytes ? program->program.bind(name, view, wf, *nbytes) : program->program.bind(name, view, wf);
  if (!r.ok()) return fail(r.error());
  return TERNJIT_OK;
}
}  // namespace

ternjit_status ternjit_bind_weight(ternjit_program* program, const char* name, const void* data, ternjit_dtype dtype,
                                   ternjit_format format, const int64_t* shape, int32_t rank) {
  constexpr const char* fn = "ternjit_bind_weight";
  return guarded(fn, [&] {
    return bind_weight(fn, program, name, data, std::nullopt, raw_enum(dtype), raw_enum(format), shape, rank);
  });
}

ternjit_status ternjit_bind_weight_sized(ternjit_program* program, const char* name, const void* data, size_t nbytes,
                                         ternjit_dtype dtype, ternjit_format format, const int64_t* shape,
                                         int32_t rank) {
  constexpr const char* fn = "ternjit_bind_weight_sized";
  return guarded(fn, [&] {
    return bind_weight(fn, program, name, data, nbytes, raw_enum(dtype), raw_enum(format), shape, rank);
  });
}

ternjit_status ternjit_bind_weights_file(ternjit_program* program, const char* path) {
  constexpr const char* fn = "ternjit_bind_weights_file";
  return guarded(fn, [&] {
    if (program == nullptr) return misuse(fn, "program is null");
    if (path == nullptr) return misuse(fn, "path is null");
    if (auto r = program->program.bind_file(path); !r.ok()) return fail(r.error());
    return TERNJIT_OK;
  });
}

ternjit_status ternjit_bind_weights_file_mapped(ternjit_program* program, const char* path, const char* const* rules,
                                                size_t n_rules) {
  constexpr const char* fn = "ternjit_bind_weights_file_mapped";
  return guarded(fn, [&] {
    if (program == nullptr) return misuse(fn, "program is null");
    if (path == nullptr) return misuse(fn, "path is null");
    if (rules == nullptr && n_rules != 0) return misuse(fn, "rules is null");
    std::vector<std::string> map;
    for (size_t i = 0; i < n_rules; ++i) {
      if (rules[i] == nullptr) return misuse(fn, "rule " + std::to_string(i) + " is null");
      map.emplace_back(rules[i]);
    }
    if (auto r = program->program.bind_file(path, map); !r.ok()) return fail(r.error());
    return TERNJIT_OK;
  });
}

ternjit_status ternjit_bind_random(ternjit_program* program, uint64_t seed) {
  constexpr const char* fn = "ternjit_bind_random";
  return guarded(fn, [&] {
    if (program == nullptr) return misuse(fn, "program is null");
    if (auto r = program->program.bind_random(seed); !r.ok()) return fail(r.error());
    return TERNJIT_OK;
  });
}

ternjit_status ternjit_run(ternjit_program* program, const char* function, const ternjit_tensor* inputs,
                           size_t n_inputs, ternjit_tensor* outputs, size_t n_outputs) {
  constexpr const char* fn = "ternjit_run";
  return guarded(fn, [&] {
    if (program == nullptr) return misuse(fn, "program is null");
    if (function == nullptr) return misuse(fn, "function is null");
    std::vector<ternjit::TensorView> in;
    std::vector<ternjit::TensorView> out;
    if (auto s = make_views(fn, "input", inputs, n_inputs, /*need_data=*/true, &in); s != TERNJIT_OK) return s;
    if (auto s = make_views(fn, "output", outputs, n_outputs, /*need_data=*/true, &out); s != TERNJIT_OK) return s;
    if (auto r = program->program.run(function, in, out); !r.ok()) return fail(r.error());
    return TERNJIT_OK;
  });
}

ternjit_status ternjit_get_kernel(ternjit_program* program, const char* function, const ternjit_tensor* inputs,
                                  size_t n_inputs, ternjit_kernel** out) {
  constexpr const char* fn = "ternjit_get_kernel";
  return guarded(fn, [&] {
    if (out == nullptr) return misuse(fn, "out is null");
    *out = nullptr;
    if (program == nullptr) return misuse(fn, "program is null");
    if (function == nullptr) return misuse(fn, "function is null");
    std::vector<ternjit::TensorView> in;
    if (auto s = make_views(fn, "input", inputs, n_inputs, /*need_data=*/false, &in); s != TERNJIT_OK) return s;
    auto kernel = program->program.kernel(function, in);
    if (!kernel.ok()) return fail(kernel.error());
    // The handle is the Kernel itself (a jit::KernelImpl, held by the program; retained,
    // by itself); the C API never writes through it.
    *out = reinterpret_cast<ternjit_kernel*>(const_cast<ternjit::Kernel*>(kernel.value().get()));
    return TERNJIT_OK;
  });
}

ternjit_status ternjit_kernel_retain(const ternjit_kernel* kernel) {
  constexpr const char* fn = "ternjit_kernel_retain";
  return guarded(fn, [&] {
    if (kernel == nullptr) return misuse(fn, "kernel is null");
    reinterpret_cast<const ternjit::jit::KernelImpl*>(kernel)->retain();
    return TERNJIT_OK;
  });
}

ternjit_status ternjit_kernel_release(const ternjit_kernel* kernel) {
  constexpr const char* fn = "ternjit_kernel_release";
  return guarded(fn, [&] {
    if (kernel == nullptr) return misuse(fn, "kernel is null");
    if (!reinterpret_cast<const ternjit::jit::KernelImpl*>(kernel)->release())
      return misuse(fn, "the kernel holds no reference (more releases than ternjit_kernel_retain calls)");
    return TERNJIT_OK;
  });
}

size_t ternjit_kernel_num_outputs(const ternjit_kernel* kernel) {
  size_t n = 0;
  (void)guarded("ternjit_kernel_num_outputs", [&] {
    if (kernel == nullptr) return misuse("ternjit_kernel_num_outputs", "kernel is null");
    n = reinterpret_cast<const ternjit::Kernel*>(kernel)->outputs().size();
    return TERNJIT_OK;
  });
  return n;
}

ternjit_status ternjit_kernel_output(const ternjit_kernel* kernel, size_t i, ternjit_dtype* dtype, int32_t* rank,
                                     const int64_t** shape) {
  constexpr const char* fn = "ternjit_kernel_output";
  return guarded(fn, [&] {
    if (kernel == nullptr) return misuse(fn, "kernel is null");
    const auto outs = reinterpret_cast<const ternjit::Kernel*>(kernel)->outputs();
    if (i >= outs.size())
      return misuse(fn, "output " + std::to_string(i) + " out of range (the kernel has " +
                            std::to_string(outs.size()) + ")");
    if (dtype != nullptr) *dtype = dtype_of(outs[i].kind);
    if (rank != nullptr) *rank = static_cast<int32_t>(outs[i].shape.size());
    if (shape != nullptr) *shape = outs[i].shape.data();
    return TERNJIT_OK;
  });
}

ternjit_status ternjit_kernel_device(const ternjit_kernel* kernel, uintptr_t* handles, size_t* count) {
  constexpr const char* fn = "ternjit_kernel_device";
  return guarded(fn, [&] {
    if (kernel == nullptr) return misuse(fn, "kernel is null");
    if (count == nullptr) return misuse(fn, "count is null");
    const auto* k = reinterpret_cast<const ternjit::Kernel*>(kernel);
    // Every Kernel's state is its Trampoline (jit/loader.h).
    const auto& h = static_cast<const ternjit::jit::Trampoline*>(k->state())->device_handles();
    if (h.empty())
      return fail(ternjit::make_error(ternjit::ErrorCode::Unsupported,
                                      std::string(fn) + ": the kernel runs on host memory (a CPU target): no device"));
    const std::size_t room = *count;
    *count = h.size();
    if (room < h.size() || handles == nullptr)
      return misuse(fn, "room for " + std::to_string(room) + " handles, the device has " + std::to_string(h.size()));
    for (std::size_t i = 0; i < h.size(); ++i) handles[i] = h[i];
    return TERNJIT_OK;
  });
}

ternjit_status ternjit_kernel_launch(const ternjit_kernel* kernel, void* stream, void* const* buffers) {
  constexpr const char* fn = "ternjit_kernel_launch";
  return guarded(fn, [&] {
    if (kernel == nullptr) return misuse(fn, "kernel is null");
    // A null stream is the target's business: CUDA's and HIP's legacy default stream
    // (torch's default stream is 0); spirv refuses a null command buffer.
    if (buffers == nullptr) return misuse(fn, "buffers is null");
    const auto* k = reinterpret_cast<const ternjit::Kernel*>(kernel);
    auto r = static_cast<const ternjit::jit::Trampoline*>(k->state())->launch(stream, buffers);
    return r.ok() ? TERNJIT_OK : fail(r.error());
  });
}

ternjit_status ternjit_kernel_entry(const ternjit_kernel* kernel, ternjit_kernel_fn* fn_out, const void** state) {
  constexpr const char* fn = "ternjit_kernel_entry";
  return guarded(fn, [&] {
    if (kernel == nullptr) return misuse(fn, "kernel is null");
    if (fn_out == nullptr) return misuse(fn, "fn is null");
    if (state == nullptr) return misuse(fn, "state is null");
    const auto* k = reinterpret_cast<const ternjit::Kernel*>(kernel);
    // KernelFn and ternjit_kernel_fn are the same type: int32_t(const void*, void* const*).
    *fn_out = k->entry();
    *state = k->state();
    return TERNJIT_OK;
  });
}

size_t ternjit_program_num_functions(const ternjit_program* program) {
  size_t n = 0;
  (void)guarded("ternjit_program_num_functions", [&] {
    if (program == nullptr) return misuse("ternjit_program_num_functions", "program is null");
    n = program->functions.size();
    return TERNJIT_OK;
  });
  return n;
}

ternjit_status ternjit_program_function(const ternjit_program* program, size_t index, const char** name,
                                        size_t* n_inputs, size_t* n_outputs) {
  constexpr const char* fn = "ternjit_program_function";
  return guarded(fn, [&] {
    if (program == nullptr) return misuse(fn, "program is null");
    if (index >= program->functions.size())
      return misuse(fn, "function " + std::to_string(index) + " out of range (the program has " +
                            std::to_string(program->functions.size()) + ")");
    const CFunctionDecl& f = program->functions[index];
    if (name != nullptr) *name = f.name.c_str();
    if (n_inputs != nullptr) *n_inputs = f.inputs.size();
    if (n_outputs != nullptr) *n_outputs = f.outputs.size();
    return TERNJIT_OK;
  });
}

ternjit_status ternjit_program_function_input(const ternjit_program* program, size_t index, size_t i,
                                              ternjit_tensor_decl* out) {
  constexpr const char* fn = "ternjit_program_function_input";
  return guarded(fn, [&] { return function_decl(fn, program, index, i, /*outputs=*/false, out); });
}

ternjit_status ternjit_program_function_output(const ternjit_program* program, size_t index, size_t i,
                                               ternjit_tensor_decl* out) {
  constexpr const char* fn = "ternjit_program_function_output";
  return guarded(fn, [&] { return function_decl(fn, program, index, i, /*outputs=*/true, out); });
}

size_t ternjit_program_num_params(const ternjit_program* program) {
  size_t n = 0;
  (void)guarded("ternjit_program_num_params", [&] {
    if (program == nullptr) return misuse("ternjit_program_num_params", "program is null");
    n = program->params.size();
    return TERNJIT_OK;
  });
  return n;
}

ternjit_status ternjit_program_param(const ternjit_program* program, size_t i, ternjit_tensor_decl* out,
                                     int32_t* bound) {
  constexpr const char* fn = "ternjit_program_param";
  return guarded(fn, [&] {
    if (program == nullptr) return misuse(fn, "program is null");
    if (out == nullptr) return misuse(fn, "out is null");
    if (i >= program->params.size())
      return misuse(fn, "parameter " + std::to_string(i) + " out of range (the program has " +
                            std::to_string(program->params.size()) + ")");
    fill_decl(program->params[i], out);
    if (bound != nullptr) *bound = program->program.params().at(i).bound ? 1 : 0;
    return TERNJIT_OK;
  });
}

}  // extern "C"
