// SPDX-License-Identifier: Apache-2.0
// runtime.cpp - engines from the op's engine string, programs and kernels over the C ABI.
#include "runtime.h"

#include <array>

#include <nlohmann/json.hpp>

namespace ternjit::torch_ext {

namespace {

const char* status_name(ternjit_status status) {
  switch (status) {
    case TERNJIT_OK: return "ok";
    case TERNJIT_INVALID_INPUT: return "invalid input";
    case TERNJIT_INVALID_ARGUMENT: return "invalid argument";
    case TERNJIT_NOT_FOUND: return "not found";
    case TERNJIT_UNSUPPORTED: return "unsupported";
    case TERNJIT_UNAVAILABLE: return "unavailable";
    case TERNJIT_IO_ERROR: return "I/O error";
    case TERNJIT_INTERNAL: return "internal error";
  }
  return "unknown status";
}

// The option strings must outlive ternjit_engine_create; this holds them.
struct Options {
  ternjit_engine_options c{};
  std::string target, cache_dir, target_options, tuning;
};

std::string text_field(const nlohmann::json& j, const char* name) {
  auto it = j.find(name);
  if (it == j.end() || it->is_null()) return "";
  if (!it->is_string()) throw CallError(TERNJIT_INVALID_ARGUMENT, std::string("'") + name + "' must be a string");
  return it->get<std::string>();
}

int64_t int_field(const nlohmann::json& j, const char* name, int64_t fallback) {
  auto it = j.find(name);
  if (it == j.end() || it->is_null()) return fallback;
  if (it->is_boolean()) return it->get<bool>() ? 1 : 0;
  if (!it->is_number_integer()) throw CallError(TERNJIT_INVALID_ARGUMENT, std::string("'") + name + "' must be an integer");
  return it->get<int64_t>();
}

// The options of Python's ternjit.Engine, as engine_key() writes them.
void parse_options(const std::string& key, Options& o) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(key);
  } catch (const nlohmann::json::exception& e) {
    throw CallError(TERNJIT_INVALID_ARGUMENT, std::string("not JSON: ") + e.what());
  }
  if (!j.is_object()) throw CallError(TERNJIT_INVALID_ARGUMENT, "not a JSON object");
  static constexpr std::array kKnown = {"target", "opt_level", "threads", "verbose", "cache_dir", "target_options",
                                        "tuning"};
  for (const auto& item : j.items()) {
    bool known = false;
    for (const char* k : kKnown) known = known || item.key() == k;
    if (!known) throw CallError(TERNJIT_INVALID_ARGUMENT, "unknown engine option '" + item.key() + "'");
  }
  o.target = text_field(j, "target");
  o.cache_dir = text_field(j, "cache_dir");
  o.target_options = text_field(j, "target_options");
  o.tuning = text_field(j, "tuning");
  if (!o.target.empty()) o.c.target = o.target.c_str();
  o.c.opt_level = static_cast<int32_t>(int_field(j, "opt_level", o.c.opt_level));
  o.c.threads = static_cast<int32_t>(int_field(j, "threads", o.c.threads));
  o.c.verbose = static_cast<int32_t>(int_field(j, "verbose", o.c.verbose));
}

}  // namespace

void check(ternjit_status status, const std::string& what) {
  if (status == TERNJIT_OK) return;
  const char* message = ternjit_last_error();
  std::string text = what + ((message && *message) ? message : status_name(status));
  throw CallError(status, text + " (ternjit: " + status_name(status) + ")");
}

// ------------------------------------------------------------------------------- engines

std::shared_ptr<Engine> Engine::create(const std::string& key, int cuda_device) {
  ternjit_engine* handle = nullptr;
  if (key.empty() && cuda_device < 0) {
    check(ternjit_engine_create_from_env(&handle), "cannot create the engine from the environment: ");
    return std::shared_ptr<Engine>(new Engine(handle));
  }
  Options o;
  ternjit_engine_options_init(&o.c);
  if (!key.empty()) {
    try {
      parse_options(key, o);
    } catch (const CallError& e) {
      throw CallError(e.status(), "bad ternjit engine string '" + key + "': " + e.what());
    }
  }
  if (cuda_device >= 0) {
    // The op's engine, retargeted: the cuda target on the tensors' device.
    o.target = "cuda";
    o.c.target = o.target.c_str();
    std::string extra = "cuda.device=" + std::to_string(cuda_device);
    o.target_options = o.target_options.empty() ? extra : o.target_options + ";" + extra;
  }
  if (!o.cache_dir.empty()) o.c.cache_dir = o.cache_dir.c_str();
  if (!o.target_options.empty()) o.c.target_options = o.target_options.c_str();
  if (!o.tuning.empty()) o.c.tuning = o.tuning.c_str();
  check(ternjit_engine_create(&o.c, &handle), "cannot create the engine: ");
  return std::shared_ptr<Engine>(new Engine(handle));
}

Engine::~Engine() { ternjit_engine_destroy(handle_); }

std::shared_ptr<Engine> Engines::get(const std::string& key, int cuda_device) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto& slot = engines_[{key, cuda_device}];
  if (!slot) slot = Engine::create(key, cuda_device);
  return slot;
}

// ------------------------------------------------------------------------------- programs

void Kernel::call(void* const* buffers, const char* what) const { check(static_cast<ternjit_status>(fn(state, buffers)), what); }

std::shared_ptr<Program> Program::compile(std::shared_ptr<Engine> engine, const std::string& source,
                                          const char* file_name) {
  ternjit_program* handle = nullptr;
  check(ternjit_compile(engine->handle(), source.data(), source.size(), file_name, &handle), "");
  return std::shared_ptr<Program>(new Program(std::move(engine), handle));
}

std::shared_ptr<Program> Program::compile_grad(std::shared_ptr<Engine> engine, const std::string& source,
                                               const char* file_name, const char* function,
                                               const std::vector<std::string>& wrt, uint32_t flags) {
  std::vector<const char*> names;
  for (const auto& w : wrt) names.push_back(w.c_str());
  ternjit_program* handle = nullptr;
  check(ternjit_compile_grad(engine->handle(), source.data(), source.size(), file_name, function, names.data(),
                             names.size(), flags, &handle),
        "");
  return std::shared_ptr<Program>(new Program(std::move(engine), handle));
}

Program::~Program() { ternjit_program_destroy(handle_); }

void Program::bind(const char* name, const void* data, size_t nbytes, ternjit_dtype dtype,
                   const std::vector<int64_t>& shape) {
  check(ternjit_bind_weight_sized(handle_, name, data, nbytes, dtype, TERNJIT_FORMAT_PLAIN, shape.data(),
                                  static_cast<int32_t>(shape.size())),
        "");
}

Kernel& Program::kernel(const std::string& function, const std::vector<Spec>& specs) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto key = std::make_pair(function, specs);
  auto it = kernels_.find(key);
  if (it != kernels_.end()) return *it->second;
  std::vector<ternjit_tensor> inputs;
  for (const auto& s : specs) {
    inputs.push_back(ternjit_tensor{nullptr, s.dtype, static_cast<int32_t>(s.shape.size()), s.shape.data()});
  }
  auto kernel = std::make_unique<Kernel>();
  check(ternjit_get_kernel(handle_, function.c_str(), inputs.data(), inputs.size(), &kernel->handle), "");
  size_t n = ternjit_kernel_num_outputs(kernel->handle);
  for (size_t i = 0; i < n; ++i) {
    Spec out;
    int32_t rank = 0;
    const int64_t* shape = nullptr;
    check(ternjit_kernel_output(kernel->handle, i, &out.dtype, &rank, &shape), "");
    out.shape.assign(shape, shape + rank);
    kernel->outputs.push_back(std::move(out));
  }
  check(ternjit_kernel_entry(kernel->handle, &kernel->fn, &kernel->state), "");
  return *kernels_.emplace(std::move(key), std::move(kernel)).first->second;
}

std::vector<Decl> Program::declared_outputs(const std::string& function) const {
  size_t n = ternjit_program_num_functions(handle_);
  for (size_t f = 0; f < n; ++f) {
    const char* name = nullptr;
    size_t n_outputs = 0;
    check(ternjit_program_function(handle_, f, &name, nullptr, &n_outputs), "");
    if (function != name) continue;
    std::vector<Decl> decls;
    for (size_t i = 0; i < n_outputs; ++i) {
      ternjit_tensor_decl d{};
      check(ternjit_program_function_output(handle_, f, i, &d), "");
      Decl decl;
      decl.dtype = d.dtype;
      for (int32_t r = 0; r < d.rank; ++r) {
        decl.extents.push_back(d.extents[r]);
        decl.symbols.emplace_back(d.symbols[r] ? d.symbols[r] : "");
      }
      decls.push_back(std::move(decl));
    }
    return decls;
  }
  throw CallError(TERNJIT_NOT_FOUND, "no function '" + function + "' in the program");
}

}  // namespace ternjit::torch_ext
