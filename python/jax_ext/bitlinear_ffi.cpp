// SPDX-License-Identifier: Apache-2.0
// bitlinear_ffi.cpp - XLA FFI handlers running ternjit's BitLinear forward and straight-through backward on XLA's CPU buffers.
#include "bitlinear_ffi.h"

#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "layer_sources.h"
#include "ternjit/ternjit.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

/// The functions a layer's program holds, in the order of Layer::function_index.
enum class Function { Forward, Fwd, Bwd };
constexpr std::array<const char*, 3> kFunctionNames = {"BitLinear.forward", "BitLinear.forward.fwd",
                                                       "BitLinear.forward.bwd"};

struct Config {
  std::string activation;
  bool has_bias = false;
  bool ste_clip = false;
  bool int8_dx = false;
  bool int8_dw = false;
  auto operator<=>(const Config&) const = default;
};

/// A failure: a ternjit_status and its message (code 0: none).
struct Failure {
  int32_t code = TERNJIT_OK;
  std::string message;
  bool failed() const { return code != TERNJIT_OK; }
};

/// The failure of the ternjit call that just returned `status`, prefixed with what was done.
Failure ternjit_failure(int32_t status, std::string_view what) {
  return {status, std::string(what) + ": " + ternjit_last_error()};
}

/// One compiled configuration: its program and the indices of its three functions.
struct Layer {
  ternjit_program* program = nullptr;
  std::array<size_t, 3> function_index{};
};

/// The compiled layers of this process, by configuration, and the engine compiling them.
///
/// A handler's only context is XLA's call frame, so the cache is process-wide (the role
/// ternjit.torch's module-level program cache plays for PyTorch). Layers are never destroyed:
/// XLA may call a handler from any of its threads until the process exits, and programs and
/// their kernels are thread-safe.
class LayerCache {
 public:
  /// The layer of `config`, compiled on first use; nullptr with *failure set when that fails.
  const Layer* get(const Config& config, Failure* failure) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = layers_.find(config);
    if (found != layers_.end()) return found->second.get();
    if (!ternjit::framework::known_activation(config.activation)) {
      *failure = {TERNJIT_INVALID_ARGUMENT, "unknown activation '" + config.activation + "' (expected one of " +
                                                ternjit::framework::activation_names() + ")"};
      return nullptr;
    }
    if (engine_ == nullptr) {
      int32_t status = ternjit_engine_create_from_env(&engine_);
      if (status != TERNJIT_OK) {
        *failure = ternjit_failure(status, "creating the ternjit engine");
        engine_ = nullptr;
        return nullptr;
      }
    }
    std::string source =
        ternjit::framework::qat_linear_source("BitLinear", config.has_bias, config.activation, config.ste_clip);
    std::vector<const char*> wrt = {"x", "w"};
    if (config.has_bias) wrt.push_back("b");
    uint32_t flags = (config.int8_dx ? TERNJIT_GRAD_INT8_DX : 0u) | (config.int8_dw ? TERNJIT_GRAD_INT8_DW : 0u);
    auto layer = std::make_unique<Layer>();
    int32_t status = ternjit_compile_grad(engine_, source.data(), source.size(), "<ternjit.jax.bitlinear>",
                                          kFunctionNames[0], wrt.data(), wrt.size(), flags, &layer->program);
    if (status != TERNJIT_OK) {
      *failure = ternjit_failure(status, "compiling the BitLinear layer");
      return nullptr;
    }
    size_t n = ternjit_program_num_functions(layer->program);
    for (size_t f = 0; f < kFunctionNames.size(); ++f) {
      layer->function_index[f] = n;
      for (size_t i = 0; i < n; ++i) {
        const char* name = nullptr;
        if (ternjit_program_function(layer->program, i, &name, nullptr, nullptr) == TERNJIT_OK &&
            std::string_view(name) == kFunctionNames[f])
          layer->function_index[f] = i;
      }
      if (layer->function_index[f] == n) {
        *failure = {TERNJIT_INTERNAL, std::string("the compiled layer has no function '") + kFunctionNames[f] + "'"};
        ternjit_program_destroy(layer->program);
        return nullptr;
      }
    }
    return layers_.emplace(config, std::move(layer)).first->second.get();
  }

 private:
  std::mutex mutex_;
  ternjit_engine* engine_ = nullptr;
  std::map<Config, std::unique_ptr<Layer>> layers_;
};

LayerCache& layer_cache() {
  static LayerCache* cache = new LayerCache();  // deliberately never destroyed (see LayerCache)
  return *cache;
}

thread_local std::string last_error;

std::string dims_text(const int64_t* dims, size_t rank) {
  std::string text = "[";
  for (size_t i = 0; i < rank; ++i) text += (i ? ", " : "") + std::to_string(dims[i]);
  return text + "]";
}

const char* ternjit_dtype_name(int32_t dtype) {
  switch (dtype) {
    case TERNJIT_F32: return "f32";
    case TERNJIT_F16: return "f16";
    case TERNJIT_BF16: return "bf16";
    case TERNJIT_I8: return "i8";
    case TERNJIT_U8: return "u8";
    case TERNJIT_I32: return "i32";
    case TERNJIT_T2: return "t2 (int8)";
    default: return "?";
  }
}

/// The ternjit dtype of an XLA buffer for an argument declared `declared`: f32 stays f32 and an
/// int8 buffer carries a t2 tensor one value per byte; anything else is refused.
bool buffer_dtype(ffi::DataType type, int32_t declared, ternjit_dtype* out) {
  if (type == ffi::DataType::F32 && declared == TERNJIT_F32) {
    *out = TERNJIT_F32;
    return true;
  }
  if (type == ffi::DataType::S8 && (declared == TERNJIT_T2 || declared == TERNJIT_I8)) {
    *out = static_cast<ternjit_dtype>(declared);
    return true;
  }
  return false;
}

ffi::Error to_ffi_error(const Failure& failure) {
  ffi::ErrorCode code = ffi::ErrorCode::kInternal;
  switch (failure.code) {
    case TERNJIT_INVALID_INPUT:
    case TERNJIT_INVALID_ARGUMENT: code = ffi::ErrorCode::kInvalidArgument; break;
    case TERNJIT_NOT_FOUND: code = ffi::ErrorCode::kNotFound; break;
    case TERNJIT_UNSUPPORTED: code = ffi::ErrorCode::kUnimplemented; break;
    case TERNJIT_UNAVAILABLE: code = ffi::ErrorCode::kUnavailable; break;
    default: break;
  }
  return ffi::Error(code, "ternjit.jax.bitlinear: " + failure.message);
}

/// Runs `function` of the configured layer on XLA's buffers: checks every argument against the
/// declaration, fetches the kernel for the shapes (ternjit_get_kernel keeps it per shape), checks
/// the results XLA allocated against the kernel's outputs, and calls the kernel entry.
Failure run_layer(Function function, const Config& config, ffi::RemainingArgs args, ffi::RemainingRets rets) {
  Failure failure;
  const Layer* layer = layer_cache().get(config, &failure);
  if (layer == nullptr) return failure;
  const char* name = kFunctionNames[static_cast<size_t>(function)];
  size_t index = layer->function_index[static_cast<size_t>(function)];
  size_t n_inputs = 0;
  size_t n_outputs = 0;
  int32_t status = ternjit_program_function(layer->program, index, nullptr, &n_inputs, &n_outputs);
  if (status != TERNJIT_OK) return ternjit_failure(status, "reading the layer's declaration");
  if (args.size() != n_inputs || rets.size() != n_outputs)
    return {TERNJIT_INVALID_ARGUMENT, std::string("'") + name + "' takes " + std::to_string(n_inputs) +
                                          " arguments and " + std::to_string(n_outputs) + " results, got " +
                                          std::to_string(args.size()) + " and " + std::to_string(rets.size()) +
                                          " (has_bias is " + (config.has_bias ? "true" : "false") + ")"};

  std::vector<ternjit_tensor> inputs(n_inputs);
  std::vector<void*> buffers;
  buffers.reserve(n_inputs + n_outputs);
  for (size_t i = 0; i < n_inputs; ++i) {
    auto buffer = args.get<ffi::AnyBuffer>(i);
    if (buffer.has_error()) return {TERNJIT_INVALID_ARGUMENT, "argument " + std::to_string(i) + ": " +
                                                                  buffer.error().message()};
    ternjit_tensor_decl decl{};
    status = ternjit_program_function_input(layer->program, index, i, &decl);
    if (status != TERNJIT_OK) return ternjit_failure(status, "reading the layer's declaration");
    ternjit_dtype dtype{};
    if (!buffer_dtype(buffer->element_type(), decl.dtype, &dtype))
      return {TERNJIT_INVALID_ARGUMENT, "argument " + std::to_string(i) + " ('" + decl.name + "') of '" + name +
                                            "' must be " + ternjit_dtype_name(decl.dtype) + ", got XLA type " +
                                            std::to_string(static_cast<int>(buffer->element_type()))};
    auto dims = buffer->dimensions();
    inputs[i] = {buffer->untyped_data(), dtype, static_cast<int32_t>(dims.size()), dims.begin()};
    buffers.push_back(buffer->untyped_data());
  }
  ternjit_kernel* kernel = nullptr;
  status = ternjit_get_kernel(layer->program, name, inputs.data(), inputs.size(), &kernel);
  if (status != TERNJIT_OK) return ternjit_failure(status, std::string("specializing '") + name + "'");

  for (size_t i = 0; i < n_outputs; ++i) {
    auto buffer = rets.get<ffi::AnyBuffer>(i);
    if (buffer.has_error()) return {TERNJIT_INVALID_ARGUMENT, "result " + std::to_string(i) + ": " +
                                                                  buffer.error().message()};
    ternjit_dtype dtype{};
    int32_t rank = 0;
    const int64_t* shape = nullptr;
    status = ternjit_kernel_output(kernel, i, &dtype, &rank, &shape);
    if (status != TERNJIT_OK) return ternjit_failure(status, "reading the kernel's outputs");
    auto dims = (*buffer)->dimensions();
    ternjit_dtype got{};
    bool same = buffer_dtype((*buffer)->element_type(), dtype, &got) && dims.size() == static_cast<size_t>(rank);
    for (int32_t d = 0; same && d < rank; ++d) same = dims[d] == shape[d];
    if (!same)
      return {TERNJIT_INVALID_ARGUMENT, "result " + std::to_string(i) + " of '" + name + "' must be " +
                                            ternjit_dtype_name(dtype) + dims_text(shape, rank) + ", XLA allocated " +
                                            dims_text(dims.begin(), dims.size())};
    buffers.push_back((*buffer)->untyped_data());
  }
  ternjit_kernel_fn entry = nullptr;
  const void* state = nullptr;
  status = ternjit_kernel_entry(kernel, &entry, &state);
  if (status != TERNJIT_OK) return ternjit_failure(status, "fetching the kernel entry");
  status = entry(state, buffers.data());
  if (status != TERNJIT_OK) return ternjit_failure(status, std::string("running '") + name + "'");
  return {};
}

ffi::Error handle(Function function, ffi::RemainingArgs args, ffi::RemainingRets rets, std::string_view activation,
                  bool has_bias, bool ste_clip, bool int8_dx, bool int8_dw) {
  Config config{std::string(activation), has_bias, ste_clip, int8_dx, int8_dw};
  Failure failure = run_layer(function, config, args, rets);
  return failure.failed() ? to_ffi_error(failure) : ffi::Error::Success();
}

ffi::Error forward(ffi::RemainingArgs args, ffi::RemainingRets rets, std::string_view activation, bool has_bias,
                   bool ste_clip, bool int8_dx, bool int8_dw) {
  return handle(Function::Forward, args, rets, activation, has_bias, ste_clip, int8_dx, int8_dw);
}

ffi::Error fwd(ffi::RemainingArgs args, ffi::RemainingRets rets, std::string_view activation, bool has_bias,
               bool ste_clip, bool int8_dx, bool int8_dw) {
  return handle(Function::Fwd, args, rets, activation, has_bias, ste_clip, int8_dx, int8_dw);
}

ffi::Error bwd(ffi::RemainingArgs args, ffi::RemainingRets rets, std::string_view activation, bool has_bias,
               bool ste_clip, bool int8_dx, bool int8_dw) {
  return handle(Function::Bwd, args, rets, activation, has_bias, ste_clip, int8_dx, int8_dw);
}

/// The binding all three handlers share: buffers as remaining arguments and results (the bias
/// and the saved tensors vary in number), the configuration as attributes.
auto binding() {
  return ffi::Ffi::Bind()
      .RemainingArgs()
      .RemainingRets()
      .Attr<std::string_view>("activation")
      .Attr<bool>("has_bias")
      .Attr<bool>("ste_clip")
      .Attr<bool>("int8_dx")
      .Attr<bool>("int8_dw");
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(ternjit_jax_bitlinear_forward, forward, binding());
XLA_FFI_DEFINE_HANDLER_SYMBOL(ternjit_jax_bitlinear_fwd, fwd, binding());
XLA_FFI_DEFINE_HANDLER_SYMBOL(ternjit_jax_bitlinear_bwd, bwd, binding());

extern "C" int32_t ternjit_jax_bitlinear_describe(const ternjit_jax_config* config, int64_t rows, int64_t k,
                                                  int64_t n, ternjit_jax_output* outputs, size_t capacity,
                                                  size_t* count) {
  last_error.clear();
  auto fail = [](const Failure& failure) {
    last_error = failure.message;
    return failure.code;
  };
  if (config == nullptr || config->activation == nullptr || count == nullptr || (outputs == nullptr && capacity > 0))
    return fail({TERNJIT_INVALID_ARGUMENT, "ternjit_jax_bitlinear_describe: null config, activation or output"});
  Config key{config->activation, config->has_bias != 0, config->ste_clip != 0, config->int8_dx != 0,
             config->int8_dw != 0};
  Failure failure;
  const Layer* layer = layer_cache().get(key, &failure);
  if (layer == nullptr) return fail(failure);
  const char* name = kFunctionNames[static_cast<size_t>(Function::Fwd)];
  size_t index = layer->function_index[static_cast<size_t>(Function::Fwd)];
  const int64_t x_shape[2] = {rows, k};
  const int64_t w_shape[2] = {k, n};
  const int64_t b_shape[1] = {n};
  std::vector<ternjit_tensor> inputs = {{nullptr, TERNJIT_F32, 2, x_shape}, {nullptr, TERNJIT_F32, 2, w_shape}};
  if (key.has_bias) inputs.push_back({nullptr, TERNJIT_F32, 1, b_shape});
  ternjit_kernel* kernel = nullptr;
  int32_t status = ternjit_get_kernel(layer->program, name, inputs.data(), inputs.size(), &kernel);
  if (status != TERNJIT_OK) return fail(ternjit_failure(status, std::string("specializing '") + name + "'"));
  *count = ternjit_kernel_num_outputs(kernel);
  if (*count > capacity)
    return fail({TERNJIT_INVALID_ARGUMENT, "'" + std::string(name) + "' has " + std::to_string(*count) +
                                               " outputs, room for " + std::to_string(capacity)});
  for (size_t i = 0; i < *count; ++i) {
    ternjit_dtype dtype{};
    int32_t rank = 0;
    const int64_t* shape = nullptr;
    status = ternjit_kernel_output(kernel, i, &dtype, &rank, &shape);
    if (status != TERNJIT_OK) return fail(ternjit_failure(status, "reading the kernel's outputs"));
    ternjit_tensor_decl decl{};
    status = ternjit_program_function_output(layer->program, index, i, &decl);
    if (status != TERNJIT_OK) return fail(ternjit_failure(status, "reading the layer's declaration"));
    if (rank > 4) return fail({TERNJIT_INTERNAL, "output " + std::to_string(i) + " has rank " + std::to_string(rank)});
    outputs[i].dtype = dtype;
    outputs[i].rank = rank;
    for (int32_t d = 0; d < rank; ++d) outputs[i].shape[d] = shape[d];
    // A saved tensor indexed by the rows of x first is one slice per row: vmap folds it.
    outputs[i].per_row = decl.rank > 0 && decl.symbols[0] != nullptr && std::string_view(decl.symbols[0]) == "M";
  }
  return TERNJIT_OK;
}

extern "C" const char* ternjit_jax_last_error(void) { return last_error.c_str(); }
