// SPDX-License-Identifier: Apache-2.0
// ops.cpp - the ternjit operators of PyTorch's dispatcher: bitlinear and the QAT linear ops.
//
// ternjit::bitlinear (inference) has CPU, CUDA and Meta kernels and an Autograd kernel that
// refuses a backward; ternjit::qat_linear (training) has CPU and Meta kernels and an
// Autograd kernel whose forward and backward are the ops ternjit::qat_linear_fwd and
// ternjit::qat_linear_bwd (the ".fwd" and ".bwd" functions of Engine.compile_grad), so
// AOTAutograd (torch.compile, torch.export) traces a training step through them.
// python/ternjit/torch.py states the semantics; docs/python.md how this library is built
// and found. A warm call is a lookup in the caches below and a call of the kernel's entry
// point: no Python runs on the call path.
//
// The caches are process-wide because the dispatcher calls these kernels as free
// functions: there is no object to hang them on (Python's module kept them as globals too).
#include <dlfcn.h>

#include <array>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include "layer_sources.h"
#include "runtime.h"

namespace ternjit::torch_ext {
namespace {

using WeakImpl = c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>;
using OptTensor = std::optional<at::Tensor>;

// Turns a ternjit failure into the torch exception Python sees: ValueError for bad
// arguments or input, NotImplementedError for an unsupported case, RuntimeError else.
template <class F>
auto guarded(const char* op, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const CallError& e) {
    switch (e.status()) {
      case TERNJIT_INVALID_INPUT:
      case TERNJIT_INVALID_ARGUMENT: TORCH_CHECK_VALUE(false, op, ": ", e.what());
      case TERNJIT_UNSUPPORTED: TORCH_CHECK_NOT_IMPLEMENTED(false, op, ": ", e.what());
      default: TORCH_CHECK(false, op, ": ", e.what());
    }
  }
}

at::ScalarType scalar_type_of(ternjit_dtype dtype) {
  switch (dtype) {
    case TERNJIT_F32: return at::kFloat;
    case TERNJIT_F16: return at::kHalf;
    case TERNJIT_BF16: return at::kBFloat16;
    case TERNJIT_I8: return at::kChar;
    case TERNJIT_U8: return at::kByte;
    case TERNJIT_I32: return at::kInt;
    case TERNJIT_T2: return at::kChar;  // one int8 in {-1, 0, 1} per element
  }
  TORCH_CHECK(false, "ternjit: unknown dtype code ", static_cast<int>(dtype));
}

// The op's result dtype: x's floating dtype, float32 for an integer x.
at::ScalarType result_dtype(const at::Tensor& x) { return x.is_floating_point() ? x.scalar_type() : at::kFloat; }

std::string describe(const at::Tensor& t) {
  std::ostringstream s;
  s << c10::toString(t.scalar_type()) << t.sizes() << " on " << t.device();
  return s.str();
}

// The sizes of the result: x's with the last dim replaced by `n`.
c10::SmallVector<int64_t, 6> result_sizes(const at::Tensor& x, int64_t n) {
  c10::SmallVector<int64_t, 6> sizes(x.sizes().begin(), x.sizes().end());
  sizes.back() = n;
  return sizes;
}

// The rows of x[..., K]: the product of its leading dims.
int64_t lead_rows(const at::Tensor& x) {
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < x.dim(); ++d) rows *= x.size(d);
  return rows;
}

std::vector<c10::SymInt> result_sym_sizes(const at::Tensor& x, const c10::SymInt& n) {
  auto sizes = x.sym_sizes().vec();
  sizes.back() = n;
  return sizes;
}

// The caches below live as long as the process and are never destroyed: at exit, torch's
// and libternjit's own state may already be gone when static destructors would run.

// Where the engines live (per engine string and cuda device).
Engines& engines() {
  static auto* instance = new Engines;
  return *instance;
}

// ----------------------------------------------------------------------------- bitlinear

// One compiled configuration with its parameters bound, and its kernel per row count.
struct BitLinearEntry {
  std::shared_ptr<Program> program;
  // The parameter tensors it was bound from: weak references (a dead tensor's entry is
  // dropped on the next miss), the TensorImpl they pointed to and the version counters.
  std::array<std::optional<WeakImpl>, 4> refs;
  std::array<const c10::TensorImpl*, 4> impls{};
  std::array<uint32_t, 4> versions{};
  int64_t n = 0;
  int64_t k = 0;
  std::mutex mutex;
  std::unordered_map<int64_t, Kernel*> kernels;

  // The kernel for `rows` rows (specialized on first use).
  Kernel& kernel(int64_t rows) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      auto it = kernels.find(rows);
      if (it != kernels.end()) return *it->second;
    }
    Kernel& kernel = program->kernel("BitLinear.forward", {Spec{TERNJIT_F32, {rows, k}}});
    std::lock_guard<std::mutex> lock(mutex);
    kernels.emplace(rows, &kernel);
    return kernel;
  }
};

// Inference tensors carry no version counter (they cannot be changed outside inference mode).
uint32_t version_of(const at::Tensor& t) { return t.is_inference() ? 0 : t._version(); }

// The cache key: configuration, and each parameter's data pointer and layout. A call
// looks up a BitLinearProbe (views of the op's strings, the layout inline: no allocation);
// an entry is stored under a BitLinearKey (its own strings).
template <class Text>
struct BitLinearKeyOf {
  Text engine;
  Text activation;
  double eps = 0;
  int device = -1;  // -1: CPU; else the CUDA device index
  std::array<const void*, 4> data{};
  c10::SmallVector<int64_t, 40> layout;
};
using BitLinearKey = BitLinearKeyOf<std::string>;
using BitLinearProbe = BitLinearKeyOf<std::string_view>;

struct BitLinearKeyHash {
  using is_transparent = void;
  template <class Text>
  size_t operator()(const BitLinearKeyOf<Text>& key) const {
    size_t h = std::hash<std::string_view>()(key.engine) ^ (std::hash<std::string_view>()(key.activation) << 1);
    auto mix = [&h](size_t v) { h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2); };
    mix(std::hash<double>()(key.eps));
    mix(static_cast<size_t>(key.device));
    for (const void* p : key.data) mix(std::hash<const void*>()(p));
    for (int64_t v : key.layout) mix(static_cast<size_t>(v));
    return h;
  }
};

struct BitLinearKeyEqual {
  using is_transparent = void;
  template <class A, class B>
  bool operator()(const BitLinearKeyOf<A>& a, const BitLinearKeyOf<B>& b) const {
    return std::string_view(a.engine) == std::string_view(b.engine) &&
           std::string_view(a.activation) == std::string_view(b.activation) && a.eps == b.eps &&
           a.device == b.device && a.data == b.data && a.layout == b.layout;
  }
};

struct BitLinearCache {
  std::mutex mutex;
  std::unordered_map<BitLinearKey, std::shared_ptr<BitLinearEntry>, BitLinearKeyHash, BitLinearKeyEqual> entries;
};

BitLinearCache& bitlinear_cache() {
  static auto* instance = new BitLinearCache;
  return *instance;
}

bool alive(const BitLinearEntry& entry, const std::array<const at::Tensor*, 4>& tensors) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    const at::Tensor* t = tensors[i];
    if ((t == nullptr) != !entry.refs[i].has_value()) return false;
    if (t == nullptr) continue;
    if (entry.refs[i]->expired() || entry.impls[i] != t->unsafeGetTensorImpl() || entry.versions[i] != version_of(*t)) {
      return false;
    }
  }
  return true;
}

// A parameter as the host f32 values it is bound from; checks its kind and size.
at::Tensor host_f32(const at::Tensor& t, const char* what, bool cuda_allowed) {
  bool device_ok = t.device().is_cpu() || (cuda_allowed && t.device().is_cuda());
  TORCH_CHECK_VALUE(device_ok && t.is_floating_point(), "bitlinear: ", what, " must be a floating ",
                    cuda_allowed ? "CPU or CUDA" : "CPU", " tensor, got ", describe(t));
  return t.to(at::kFloat).reshape({-1}).cpu().contiguous();
}

void check_weight(const at::Tensor& weight, bool cuda_allowed) {
  bool device_ok = weight.device().is_cpu() || (cuda_allowed && weight.device().is_cuda());
  TORCH_CHECK_VALUE(weight.dim() == 2 && weight.scalar_type() == at::kChar && device_ok, "bitlinear: weight must be an int8 ",
                    cuda_allowed ? "CPU or CUDA" : "CPU", " tensor [out_features, in_features] of {-1, 0, 1}, got ",
                    describe(weight));
}

// Compiles the configuration and binds its parameters (a cache miss).
std::shared_ptr<BitLinearEntry> compile_bitlinear(const at::Tensor& weight, const at::Tensor& weight_scale,
                                                  const OptTensor& bias, const OptTensor& norm_weight, double eps,
                                                  const std::string& activation, const std::string& engine,
                                                  int device) {
  bool cuda = device >= 0;
  int64_t n = weight.size(0), k = weight.size(1);
  TORCH_CHECK_VALUE(framework::known_activation(activation), "bitlinear: unknown activation '", activation,
                    "' (expected one of ", framework::activation_names(), ")");
  at::Tensor scale = host_f32(weight_scale, "weight_scale", cuda);
  TORCH_CHECK_VALUE(scale.numel() == 1 || scale.numel() == n, "bitlinear: weight_scale must have 1 or ", n,
                    " (out_features) values, got ", weight_scale.sizes());
  if (scale.numel() == 1) scale = scale.expand({n}).contiguous();
  at::Tensor w = weight.t().cpu().contiguous();  // [out, in] -> the layer's w[K, N]
  if (w.numel() > 0) {
    int64_t lo = w.min().item<int64_t>(), hi = w.max().item<int64_t>();
    TORCH_CHECK_VALUE(lo >= -1 && hi <= 1, "bitlinear: weight has values outside {-1, 0, 1} (range [", lo, ", ",
                      hi, "])");
  }
  at::Tensor b, g;
  if (bias) {
    b = host_f32(*bias, "bias", cuda);
    TORCH_CHECK_VALUE(b.numel() == n, "bitlinear: bias must have ", n, " values, got ", bias->sizes());
  }
  if (norm_weight) {
    g = host_f32(*norm_weight, "norm_weight", cuda);
    TORCH_CHECK_VALUE(g.numel() == k, "bitlinear: norm_weight must have ", k, " values, got ", norm_weight->sizes());
  }
  auto entry = std::make_shared<BitLinearEntry>();
  entry->n = n;
  entry->k = k;
  guarded("bitlinear", [&] {
    auto eng = engines().get(engine, device);
    entry->program = Program::compile(
        eng, framework::bitlinear_source(norm_weight.has_value(), bias.has_value(), activation, eps),
        "<ternjit::bitlinear>");
    // ternjit copies what it binds (and uploads it once on a GPU target).
    entry->program->bind("BitLinear.w", w.data_ptr(), w.nbytes(), TERNJIT_T2, {k, n});
    entry->program->bind("BitLinear.w_scale", scale.data_ptr(), scale.nbytes(), TERNJIT_F32, {n});
    if (bias) entry->program->bind("BitLinear.bias", b.data_ptr(), b.nbytes(), TERNJIT_F32, {n});
    if (norm_weight) entry->program->bind("BitLinear.gamma", g.data_ptr(), g.nbytes(), TERNJIT_F32, {k});
  });
  return entry;
}

// The compiled configuration for these parameters: a lookup when warm.
std::shared_ptr<BitLinearEntry> bitlinear_entry(const at::Tensor& weight, const at::Tensor& weight_scale,
                                                const OptTensor& bias, const OptTensor& norm_weight, double eps,
                                                c10::string_view activation, c10::string_view engine, int device) {
  std::array<const at::Tensor*, 4> tensors = {&weight, &weight_scale, bias ? &*bias : nullptr,
                                              norm_weight ? &*norm_weight : nullptr};
  BitLinearProbe probe{engine, activation, eps, device, {}, {}};
  for (size_t i = 0; i < tensors.size(); ++i) {
    const at::Tensor* t = tensors[i];
    if (t == nullptr) {
      probe.layout.push_back(-1);
      continue;
    }
    probe.data[i] = t->data_ptr();
    probe.layout.push_back(static_cast<int64_t>(t->scalar_type()));
    probe.layout.push_back(static_cast<int64_t>(t->device().type()) * 1024 + t->device().index());
    probe.layout.push_back(t->dim());
    probe.layout.append(t->sizes().begin(), t->sizes().end());
    probe.layout.append(t->strides().begin(), t->strides().end());
  }
  auto& cache = bitlinear_cache();
  {
    std::lock_guard<std::mutex> lock(cache.mutex);
    auto it = cache.entries.find(probe);
    if (it != cache.entries.end() && alive(*it->second, tensors)) return it->second;
  }
  BitLinearKey key{std::string(engine), std::string(activation), eps, device, probe.data, probe.layout};
  auto entry = compile_bitlinear(weight, weight_scale, bias, norm_weight, eps, key.activation, key.engine, device);
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i] == nullptr) continue;
    entry->refs[i] = WeakImpl(tensors[i]->getIntrusivePtr());
    entry->impls[i] = tensors[i]->unsafeGetTensorImpl();
    entry->versions[i] = version_of(*tensors[i]);
  }
  std::lock_guard<std::mutex> lock(cache.mutex);
  // Entries whose parameters died go now (a miss is rare; a sweep is cheap beside a compile).
  for (auto it = cache.entries.begin(); it != cache.entries.end();) {
    bool dead = false;
    for (const auto& ref : it->second->refs) dead = dead || (ref && ref->expired());
    it = dead ? cache.entries.erase(it) : std::next(it);
  }
  cache.entries[std::move(key)] = entry;
  return entry;
}

void check_bitlinear_args(const at::Tensor& x, const at::Tensor& weight, bool cuda_allowed) {
  TORCH_CHECK_VALUE(x.dim() >= 1, "bitlinear: x must have at least one dimension");
  check_weight(weight, cuda_allowed);
  TORCH_CHECK_VALUE(x.size(-1) == weight.size(1), "bitlinear expects x[..., ", weight.size(1), "], got x[..., ",
                    x.size(-1), "]");
}

at::Tensor bitlinear_cpu(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& weight_scale,
                         const OptTensor& bias, const OptTensor& norm_weight, double norm_eps,
                         c10::string_view activation, c10::string_view engine) {
  check_bitlinear_args(x, weight, false);
  auto entry = bitlinear_entry(weight, weight_scale, bias, norm_weight, norm_eps, activation, engine, -1);
  at::Tensor x2 = (x.scalar_type() == at::kFloat && x.is_contiguous()) ? x : x.to(at::kFloat).contiguous();
  // A fresh output every call: nothing a caller (or a traced graph) holds is ever reused.
  at::Tensor y = at::empty(result_sizes(x, entry->n), x2.options().dtype(at::kFloat));
  int64_t rows = lead_rows(x);
  if (rows > 0) {
    guarded("bitlinear", [&] {
      Kernel& kernel = entry->kernel(rows);
      std::array<void*, 2> buffers = {x2.data_ptr(), y.data_ptr()};
      kernel.call(buffers.data(), "");
    });
  }
  return result_dtype(x) == at::kFloat ? y : y.to(result_dtype(x));
}

void require_cuda_target() {
  if (ternjit_has_feature("target:cuda")) return;
  // The reason, from the library itself.
  ternjit_engine_options options;
  ternjit_engine_options_init(&options);
  options.target = "cuda";
  ternjit_engine* engine = nullptr;
  ternjit_status status = ternjit_engine_create(&options, &engine);
  std::string reason = status == TERNJIT_OK ? "the library has no cuda target" : ternjit_last_error();
  ternjit_engine_destroy(engine);
  TORCH_CHECK(false, "bitlinear on CUDA tensors needs the cuda target: ", reason, " (ternjit: unavailable)");
}

// The op on CUDA tensors: the cuda target's kernel enqueued on torch's current stream of
// x's device, on x's and a fresh output's device memory (no host copy, no synchronization).
at::Tensor bitlinear_cuda(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& weight_scale,
                          const OptTensor& bias, const OptTensor& norm_weight, double norm_eps,
                          c10::string_view activation, c10::string_view engine) {
  require_cuda_target();
  check_bitlinear_args(x, weight, true);
  TORCH_CHECK_VALUE(x.device().is_cuda(), "bitlinear: x must be a CUDA tensor here, got ", describe(x));
  c10::DeviceGuard device_guard(x.device());
  auto entry = bitlinear_entry(weight, weight_scale, bias, norm_weight, norm_eps, activation, engine, x.get_device());
  at::Tensor x2 = x.to(at::kFloat).contiguous();
  if (reinterpret_cast<uintptr_t>(x2.data_ptr()) % 16 != 0) x2 = x2.clone();  // the kernels load 16 bytes at a time
  at::Tensor y = at::empty(result_sizes(x, entry->n), x2.options().dtype(at::kFloat));
  int64_t rows = lead_rows(x);
  if (rows > 0) {
    c10::impl::VirtualGuardImpl impl(c10::DeviceType::CUDA);
    void* stream = impl.getStream(x.device()).native_handle();
    guarded("bitlinear", [&] {
      Kernel& kernel = entry->kernel(rows);
      std::array<void*, 2> buffers = {x2.data_ptr(), y.data_ptr()};
      // One launch of a kernel at a time (it owns its scratch); stream order does the rest.
      std::lock_guard<std::mutex> lock(kernel.launch_mutex);
      check(ternjit_kernel_launch(kernel.handle, stream, buffers.data()), "");
    });
  }
  return result_dtype(x) == at::kFloat ? y : y.to(result_dtype(x));
}

at::Tensor bitlinear_meta(const at::Tensor& x, const at::Tensor& weight, const at::Tensor&, const OptTensor&,
                          const OptTensor&, double, c10::string_view, c10::string_view) {
  TORCH_CHECK_VALUE(x.dim() >= 1, "bitlinear: x must have at least one dimension");
  TORCH_CHECK_VALUE(weight.dim() == 2, "bitlinear: weight must be [out_features, in_features], got ", weight.sizes());
  return at::empty_symint(result_sym_sizes(x, weight.sym_size(0)), x.options().dtype(result_dtype(x)));
}

const c10::TypedOperatorHandle<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, const OptTensor&,
                                          const OptTensor&, double, c10::string_view, c10::string_view)>&
bitlinear_op() {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("ternjit::bitlinear", "")
                       .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, const OptTensor&,
                                         const OptTensor&, double, c10::string_view, c10::string_view)>();
  return op;
}

// BitLinear is inference only: its weights are fixed ternary values and the op has no
// gradient formula. Where autograd would record it, the result gets this node, whose
// backward says so (rather than silently cutting the graph).
class BitLinearInferenceOnly : public torch::autograd::Function<BitLinearInferenceOnly> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext*, const at::Tensor& x, const at::Tensor& weight,
                            const at::Tensor& weight_scale, const OptTensor& bias, const OptTensor& norm_weight,
                            double norm_eps, const std::string& activation, const std::string& engine) {
    at::AutoDispatchBelowADInplaceOrView below;
    return bitlinear_op().call(x, weight, weight_scale, bias, norm_weight, norm_eps, activation, engine);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext*, torch::autograd::variable_list) {
    TORCH_CHECK(false, "ternjit::bitlinear (ternjit.torch.BitLinear) is inference only and has no gradient: "
                       "train with ternjit.torch.QATLinear and export with QATLinear.to_bitlinear(), or run "
                       "BitLinear under torch.no_grad()");
  }
};

at::Tensor bitlinear_autograd(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& weight_scale,
                              const OptTensor& bias, const OptTensor& norm_weight, double norm_eps,
                              c10::string_view activation, c10::string_view engine) {
  bool wants_grad = at::GradMode::is_enabled() &&
                    (x.requires_grad() || weight_scale.requires_grad() || (bias && bias->requires_grad()) ||
                     (norm_weight && norm_weight->requires_grad()));
  if (!wants_grad) {
    at::AutoDispatchBelowADInplaceOrView below;
    return bitlinear_op().call(x, weight, weight_scale, bias, norm_weight, norm_eps, activation, engine);
  }
  return BitLinearInferenceOnly::apply(x, weight, weight_scale, bias, norm_weight, norm_eps, std::string(activation),
                                       std::string(engine));
}

// ----------------------------------------------------------------------------- QAT

struct QatConfig {
  std::string engine;
  std::string activation;
  bool bias = false;
  bool ste_clip = false;
  bool int8_dx = false;
  bool int8_dw = false;
  bool operator<(const QatConfig& o) const {
    return std::tie(engine, activation, bias, ste_clip, int8_dx, int8_dw) <
           std::tie(o.engine, o.activation, o.bias, o.ste_clip, o.int8_dx, o.int8_dw);
  }
};

// One compile_grad program: "QATLinear.forward", ".fwd" and ".bwd"; the weights are
// arguments (they change every optimizer step), so nothing is bound.
struct QatProgram {
  std::shared_ptr<Program> program;
  std::vector<Decl> fwd_outputs;  // y, then the saved tensors
};

std::shared_ptr<QatProgram> qat_program(const QatConfig& config) {
  static auto* mutex = new std::mutex;
  static auto* programs = new std::map<QatConfig, std::shared_ptr<QatProgram>>;
  {
    std::lock_guard<std::mutex> lock(*mutex);
    auto it = programs->find(config);
    if (it != programs->end()) return it->second;
  }
  TORCH_CHECK_VALUE(framework::known_activation(config.activation), "qat_linear: unknown activation '",
                    config.activation, "' (expected one of ", framework::activation_names(), ")");
  auto p = std::make_shared<QatProgram>();
  guarded("qat_linear", [&] {
    std::vector<std::string> wrt = {"x", "w"};
    if (config.bias) wrt.push_back("b");
    uint32_t flags = (config.int8_dx ? TERNJIT_GRAD_INT8_DX : 0u) | (config.int8_dw ? TERNJIT_GRAD_INT8_DW : 0u);
    // The clipping is the quantizer's attribute in the source.
    p->program = Program::compile_grad(engines().get(config.engine, -1),
                                       framework::qat_linear_source("QATLinear", config.bias, config.activation, config.ste_clip),
                                       "qat_linear.tri", "QATLinear.forward", wrt, flags);
    p->fwd_outputs = p->program->declared_outputs("QATLinear.forward.fwd");
  });
  std::lock_guard<std::mutex> lock(*mutex);
  return programs->emplace(config, p).first->second;
}

QatConfig qat_config(const OptTensor& bias, c10::string_view activation, bool ste_clip, bool int8_dx, bool int8_dw,
                     c10::string_view engine) {
  return QatConfig{std::string(engine), std::string(activation), bias.has_value(), ste_clip, int8_dx, int8_dw};
}

void check_qat_args(const at::Tensor& x, const at::Tensor& weight, const OptTensor& bias) {
  TORCH_CHECK_VALUE(x.dim() >= 1, "qat_linear: x must have at least one dimension");
  TORCH_CHECK_VALUE(weight.dim() == 2, "qat_linear: weight must be [out_features, in_features], got ", weight.sizes());
  TORCH_CHECK_VALUE(x.size(-1) == weight.size(1), "qat_linear expects x[..., ", weight.size(1), "], got x[..., ",
                    x.size(-1), "]");
  TORCH_CHECK_VALUE(!bias || bias->numel() == weight.size(0), "qat_linear: bias must have ", weight.size(0),
                    " values, got ", bias ? bias->sizes() : at::IntArrayRef());
}

// Runs `function` on `inputs` (tensor, dtype as the kernel takes it); returns fresh outputs.
std::vector<at::Tensor> run_function(Program& program, const std::string& function,
                                     const std::vector<std::pair<at::Tensor, ternjit_dtype>>& inputs) {
  std::vector<Spec> specs;
  std::vector<at::Tensor> keep;
  std::vector<void*> buffers;
  for (const auto& [t, dtype] : inputs) {
    keep.push_back(t.contiguous());
    specs.push_back(Spec{dtype, keep.back().sizes().vec()});
    buffers.push_back(keep.back().data_ptr());
  }
  std::vector<at::Tensor> outs;
  guarded("qat_linear", [&] {
    Kernel& kernel = program.kernel(function, specs);
    for (const auto& spec : kernel.outputs) {
      outs.push_back(at::empty(spec.shape, at::TensorOptions().dtype(scalar_type_of(spec.dtype))));
      buffers.push_back(outs.back().data_ptr());
    }
    kernel.call(buffers.data(), "");
  });
  return outs;
}

// x [.., K] -> f32 [M, K]; weight [N, K] -> f32 [K, N] (the layer's w); bias -> f32 [N].
std::vector<std::pair<at::Tensor, ternjit_dtype>> qat_inputs(const at::Tensor& x, const at::Tensor& weight,
                                                             const OptTensor& bias) {
  std::vector<std::pair<at::Tensor, ternjit_dtype>> in = {
      {x.reshape({-1, x.size(-1)}).to(at::kFloat), TERNJIT_F32},
      {weight.to(at::kFloat).t().contiguous(), TERNJIT_F32}};
  if (bias) in.emplace_back(bias->to(at::kFloat).reshape({-1}), TERNJIT_F32);
  return in;
}

at::Tensor qat_result(const at::Tensor& y, const at::Tensor& x) {
  return y.reshape(result_sizes(x, y.size(-1))).to(result_dtype(x));
}

// qat_linear (`function` "QATLinear.forward") or qat_linear_fwd (".fwd"): y in x's shape
// and dtype, then (.fwd) the saved tensors as the kernel returns them.
std::vector<at::Tensor> run_qat(const char* function, const at::Tensor& x, const at::Tensor& weight,
                                const OptTensor& bias, const QatConfig& config) {
  check_qat_args(x, weight, bias);
  auto p = qat_program(config);
  TORCH_CHECK_VALUE(lead_rows(x) > 0, "qat_linear: x has no rows");
  auto outs = run_function(*p->program, function, qat_inputs(x, weight, bias));
  outs.at(0) = qat_result(outs[0], x);
  return outs;
}

at::Tensor qat_linear_cpu(const at::Tensor& x, const at::Tensor& weight, const OptTensor& bias,
                          c10::string_view activation, bool ste_clip, bool int8_dx, bool int8_dw,
                          c10::string_view engine) {
  return run_qat("QATLinear.forward", x, weight, bias,
                 qat_config(bias, activation, ste_clip, int8_dx, int8_dw, engine))[0];
}

std::vector<at::Tensor> qat_linear_fwd_cpu(const at::Tensor& x, const at::Tensor& weight, const OptTensor& bias,
                                           c10::string_view activation, bool ste_clip, bool int8_dx, bool int8_dw,
                                           c10::string_view engine) {
  return run_qat("QATLinear.forward.fwd", x, weight, bias,
                 qat_config(bias, activation, ste_clip, int8_dx, int8_dw, engine));
}

std::vector<at::Tensor> qat_linear_bwd_cpu(const at::Tensor& grad, const at::Tensor& x, const at::Tensor& weight,
                                           const OptTensor& bias, at::TensorList saved, c10::string_view activation,
                                           bool ste_clip, bool int8_dx, bool int8_dw, c10::string_view engine) {
  check_qat_args(x, weight, bias);
  auto p = qat_program(qat_config(bias, activation, ste_clip, int8_dx, int8_dw, engine));
  TORCH_CHECK_VALUE(saved.size() + 1 == p->fwd_outputs.size(), "qat_linear_bwd: expected ",
                    p->fwd_outputs.size() - 1, " saved tensors (what qat_linear_fwd returns after y), got ",
                    saved.size());
  TORCH_CHECK_VALUE(grad.numel() == lead_rows(x) * weight.size(0), "qat_linear_bwd: grad must have the ",
                    "result's shape, got ", grad.sizes());
  auto in = qat_inputs(x, weight, bias);
  in.emplace_back(grad.reshape({-1, weight.size(0)}).to(at::kFloat), TERNJIT_F32);
  for (size_t i = 0; i < saved.size(); ++i) in.emplace_back(saved[i], p->fwd_outputs[i + 1].dtype);
  auto grads = run_function(*p->program, "QATLinear.forward.bwd", in);
  std::vector<at::Tensor> out = {grads.at(0).reshape(x.sizes()).to(result_dtype(x)),
                                 grads.at(1).t().contiguous().to(weight.scalar_type())};
  if (bias) out.push_back(grads.at(2).reshape(bias->sizes()).to(bias->scalar_type()));
  return out;
}

at::Tensor qat_linear_meta(const at::Tensor& x, const at::Tensor& weight, const OptTensor&, c10::string_view, bool,
                           bool, bool, c10::string_view) {
  TORCH_CHECK_VALUE(x.dim() >= 1 && weight.dim() == 2, "qat_linear: x must be [..., K] and weight [N, K]");
  return at::empty_symint(result_sym_sizes(x, weight.sym_size(0)), x.options().dtype(result_dtype(x)));
}

std::vector<at::Tensor> qat_linear_fwd_meta(const at::Tensor& x, const at::Tensor& weight, const OptTensor& bias,
                                            c10::string_view activation, bool ste_clip, bool int8_dx, bool int8_dw,
                                            c10::string_view engine) {
  TORCH_CHECK_VALUE(x.dim() >= 1 && weight.dim() == 2, "qat_linear: x must be [..., K] and weight [N, K]");
  auto p = qat_program(qat_config(bias, activation, ste_clip, int8_dx, int8_dw, engine));
  // The saved tensors' shapes from their declarations: M rows, K = in, N = out features.
  c10::SymInt rows = 1;
  for (int64_t d = 0; d + 1 < x.dim(); ++d) rows = rows * x.sym_size(d);
  std::vector<at::Tensor> outs = {at::empty_symint(result_sym_sizes(x, weight.sym_size(0)),
                                                   x.options().dtype(result_dtype(x)))};
  for (size_t i = 1; i < p->fwd_outputs.size(); ++i) {
    const Decl& decl = p->fwd_outputs[i];
    std::vector<c10::SymInt> sizes;
    for (size_t d = 0; d < decl.extents.size(); ++d) {
      const std::string& s = decl.symbols[d];
      if (s.empty()) {
        sizes.emplace_back(decl.extents[d]);
      } else if (s == "M") {
        sizes.push_back(rows);
      } else if (s == "K") {
        sizes.push_back(x.sym_size(-1));
      } else {
        TORCH_CHECK(s == "N", "qat_linear: a saved tensor has an unexpected symbolic dim '", s, "'");
        sizes.push_back(weight.sym_size(0));
      }
    }
    outs.push_back(at::empty_symint(sizes, x.options().dtype(scalar_type_of(decl.dtype))));
  }
  return outs;
}

std::vector<at::Tensor> qat_linear_bwd_meta(const at::Tensor&, const at::Tensor& x, const at::Tensor& weight,
                                            const OptTensor& bias, at::TensorList, c10::string_view, bool, bool, bool,
                                            c10::string_view) {
  std::vector<at::Tensor> out = {at::empty_symint(x.sym_sizes(), x.options().dtype(result_dtype(x))),
                                 at::empty_symint(weight.sym_sizes(), weight.options())};
  if (bias) out.push_back(at::empty_symint(bias->sym_sizes(), bias->options()));
  return out;
}

using QatSignature = std::vector<at::Tensor>(const at::Tensor&, const at::Tensor&, const OptTensor&,
                                             c10::string_view, bool, bool, bool, c10::string_view);
using QatBwdSignature = std::vector<at::Tensor>(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                                const OptTensor&, at::TensorList, c10::string_view, bool, bool, bool,
                                                c10::string_view);
using QatPlainSignature = at::Tensor(const at::Tensor&, const at::Tensor&, const OptTensor&, c10::string_view, bool,
                                     bool, bool, c10::string_view);

// The training op's autograd formula: forward through qat_linear_fwd (y and what the
// backward needs), backward through qat_linear_bwd (the straight-through gradients).
class QatLinearFunction : public torch::autograd::Function<QatLinearFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const OptTensor& bias, const std::string& activation, bool ste_clip, bool int8_dx,
                            bool int8_dw, const std::string& engine) {
    static auto fwd = c10::Dispatcher::singleton().findSchemaOrThrow("ternjit::qat_linear_fwd", "").typed<QatSignature>();
    std::vector<at::Tensor> outs;
    {
      at::AutoDispatchBelowADInplaceOrView below;
      outs = fwd.call(x, weight, bias, activation, ste_clip, int8_dx, int8_dw, engine);
    }
    std::vector<at::Tensor> keep = {x, weight};
    if (bias) keep.push_back(*bias);
    keep.insert(keep.end(), outs.begin() + 1, outs.end());
    ctx->save_for_backward(keep);
    ctx->saved_data["activation"] = activation;
    ctx->saved_data["engine"] = engine;
    ctx->saved_data["flags"] = static_cast<int64_t>(ste_clip) | (int8_dx << 1) | (int8_dw << 2);
    ctx->saved_data["bias"] = bias.has_value();
    return outs[0];
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    static auto bwd =
        c10::Dispatcher::singleton().findSchemaOrThrow("ternjit::qat_linear_bwd", "").typed<QatBwdSignature>();
    auto saved = ctx->get_saved_variables();
    bool has_bias = ctx->saved_data["bias"].toBool();
    int64_t flags = ctx->saved_data["flags"].toInt();
    OptTensor bias = has_bias ? OptTensor(saved[2]) : std::nullopt;
    size_t first = has_bias ? 3 : 2;
    std::vector<at::Tensor> rest(saved.begin() + static_cast<std::ptrdiff_t>(first), saved.end());
    torch::autograd::variable_list out(8);
    if (!grads[0].defined()) return out;
    auto g = bwd.call(grads[0], saved[0], saved[1], bias, rest, ctx->saved_data["activation"].toStringRef(),
                      (flags & 1) != 0, (flags & 2) != 0, (flags & 4) != 0, ctx->saved_data["engine"].toStringRef());
    out[0] = g[0];
    out[1] = g[1];
    if (has_bias) out[2] = g[2];
    return out;
  }
};

at::Tensor qat_linear_autograd(const at::Tensor& x, const at::Tensor& weight, const OptTensor& bias,
                               c10::string_view activation, bool ste_clip, bool int8_dx, bool int8_dw,
                               c10::string_view engine) {
  bool wants_grad = at::GradMode::is_enabled() &&
                    (x.requires_grad() || weight.requires_grad() || (bias && bias->requires_grad()));
  if (!wants_grad) {
    // No backward will run: the plain forward, without the saved tensors .fwd returns.
    static auto plain =
        c10::Dispatcher::singleton().findSchemaOrThrow("ternjit::qat_linear", "").typed<QatPlainSignature>();
    at::AutoDispatchBelowADInplaceOrView below;
    return plain.call(x, weight, bias, activation, ste_clip, int8_dx, int8_dw, engine);
  }
  return QatLinearFunction::apply(x, weight, bias, std::string(activation), ste_clip, int8_dx, int8_dw,
                                  std::string(engine));
}

}  // namespace
}  // namespace ternjit::torch_ext

TORCH_LIBRARY(ternjit, m) {
  const std::vector<at::Tag> tags = {at::Tag::pt2_compliant_tag};
  m.def("bitlinear(Tensor x, Tensor weight, Tensor weight_scale, Tensor? bias, Tensor? norm_weight, float norm_eps, "
        "str activation, str engine) -> Tensor",
        tags);
  m.def("qat_linear(Tensor x, Tensor weight, Tensor? bias, str activation, bool ste_clip, bool int8_dx, "
        "bool int8_dw, str engine) -> Tensor",
        tags);
  m.def("qat_linear_fwd(Tensor x, Tensor weight, Tensor? bias, str activation, bool ste_clip, bool int8_dx, "
        "bool int8_dw, str engine) -> Tensor[]",
        tags);
  m.def("qat_linear_bwd(Tensor grad, Tensor x, Tensor weight, Tensor? bias, Tensor[] saved, str activation, "
        "bool ste_clip, bool int8_dx, bool int8_dw, str engine) -> Tensor[]",
        tags);
}

TORCH_LIBRARY_IMPL(ternjit, CPU, m) {
  using namespace ternjit::torch_ext;
  m.impl("bitlinear", &bitlinear_cpu);
  m.impl("qat_linear", &qat_linear_cpu);
  m.impl("qat_linear_fwd", &qat_linear_fwd_cpu);
  m.impl("qat_linear_bwd", &qat_linear_bwd_cpu);
}

TORCH_LIBRARY_IMPL(ternjit, CUDA, m) { m.impl("bitlinear", &ternjit::torch_ext::bitlinear_cuda); }

TORCH_LIBRARY_IMPL(ternjit, Meta, m) {
  using namespace ternjit::torch_ext;
  m.impl("bitlinear", &bitlinear_meta);
  m.impl("qat_linear", &qat_linear_meta);
  m.impl("qat_linear_fwd", &qat_linear_fwd_meta);
  m.impl("qat_linear_bwd", &qat_linear_bwd_meta);
}

TORCH_LIBRARY_IMPL(ternjit, Autograd, m) {
  using namespace ternjit::torch_ext;
  m.impl("bitlinear", &bitlinear_autograd);
  m.impl("qat_linear", &qat_linear_autograd);
  // The pieces of qat_linear's formula are not differentiable themselves (their results
  // never require grad); qat_linear is the differentiable op.
  m.impl("qat_linear_fwd", torch::CppFunction::makeFallthrough());
  m.impl("qat_linear_bwd", torch::CppFunction::makeFallthrough());
}

/// The address of ternjit_version in the libternjit this extension calls: ternjit.torch
/// compares it with the ctypes-loaded library's, so both use one instance.
extern "C" __attribute__((visibility("default"))) const void* ternjit_torch_libternjit_symbol() {
  return reinterpret_cast<const void*>(&ternjit_version);
}

/// The file of that libternjit (for messages), or "" if the loader cannot say.
extern "C" __attribute__((visibility("default"))) const char* ternjit_torch_libternjit_path() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<const void*>(&ternjit_version), &info) == 0 || info.dli_fname == nullptr) return "";
  return info.dli_fname;
}
