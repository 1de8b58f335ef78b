// SPDX-License-Identifier: Apache-2.0
// device_kernels.cpp - uploads, scratch and launches of a KernelSet on a CUDA or HIP device; the tmatmul bench.
#include "targets/simt/device_kernels.h"

#include <algorithm>
#include <cstring>
#include <random>

#include "ir/parse.h"

namespace ternjit::targets::simt {

namespace {

// The pointer of a stored upload (every entry a DeviceKernels stores is a DeviceAllocation).
DevicePtr ptr_of(const std::shared_ptr<const void>& p) {
  return static_cast<const DeviceAllocation*>(p.get())->ptr();
}

Result<std::shared_ptr<const void>> upload_bytes(const std::shared_ptr<const GpuApi>& api,
                                                 const std::vector<std::uint8_t>& bytes, void* stream) {
  TERNJIT_TRY(std::shared_ptr<DeviceAllocation> a, DeviceAllocation::make(api, bytes.size()));
  if (!bytes.empty()) TERNJIT_TRY_VOID(api->upload(a->ptr(), bytes.data(), bytes.size(), stream));
  // The host bytes die when this returns: the copy must be complete first.
  TERNJIT_TRY_VOID(api->synchronize(stream));
  return std::shared_ptr<const void>(std::move(a));
}

}  // namespace

Result<std::shared_ptr<DeviceAllocation>> DeviceAllocation::make(std::shared_ptr<const GpuApi> api, std::size_t bytes) {
  // Zero-byte tensors still get a distinct, valid pointer (kernels never read past the end).
  TERNJIT_TRY(DevicePtr p, api->alloc(bytes == 0 ? 16 : bytes));
  return std::shared_ptr<DeviceAllocation>(new DeviceAllocation(std::move(api), p, bytes));
}

DeviceAllocation::~DeviceAllocation() {
  if (auto current = api_->make_current(); current.ok()) api_->free(ptr_);
}

Result<std::shared_ptr<DeviceKernels>> DeviceKernels::create(std::shared_ptr<const GpuApi> api,
                                                             const std::string& device_key, KernelSet kernel_set,
                                                             std::vector<void*> functions,
                                                             std::shared_ptr<const void> module_owner,
                                                             const std::vector<LoadValue>& values,
                                                             DeviceWeights* weights) {
  TERNJIT_CHECK(functions.size() == kernel_set.kernels.size(), "one function handle per launch");
  TERNJIT_CHECK(values.size() == kernel_set.plan.load_time.size(), "one value per load-time slot");
  std::shared_ptr<DeviceKernels> g(new DeviceKernels());
  g->api_ = api;
  g->functions_ = std::move(functions);
  g->module_owner_ = std::move(module_owner);
  TERNJIT_TRY(std::shared_ptr<void> current, api->make_current());
  TERNJIT_TRY(g->stream_, api->create_stream());

  // Load-time values the kernels read directly (Const arguments), once per kernel.
  g->consts_.resize(values.size());
  for (const KernelLaunch& k : kernel_set.kernels)
    for (const KernelArg& a : k.args) {
      if (a.kind != KernelArg::Kind::Const || g->consts_.at(a.index)) continue;
      TERNJIT_TRY(g->consts_[a.index], upload_bytes(api, values[a.index].encoded(), g->stream_));
    }
  // Ternary weights in the generator's layout, once per Program when they are parameters.
  for (const WeightUse& w : kernel_set.weights) {
    auto upload = [&]() -> Result<std::shared_ptr<const void>> {
      TERNJIT_TRY(std::vector<std::uint8_t> packed,
                  pack_ternary_weight(values.at(w.load_time), w.k, w.n, w.layout));
      return upload_bytes(api, packed, g->stream_);
    };
    if (weights && !w.param.empty()) {
      const std::string key = device_key + "/" + w.param + "/" + std::string(layout_name(w.layout));
      TERNJIT_TRY(std::shared_ptr<const void> b, weights->get_or_upload(key, upload));
      g->weights_.push_back(std::move(b));
    } else {
      TERNJIT_TRY(std::shared_ptr<const void> b, upload());
      g->weights_.push_back(std::move(b));
    }
  }
  for (std::size_t bytes : kernel_set.scratch_bytes) {
    TERNJIT_TRY(auto s, DeviceAllocation::make(api, bytes));
    g->scratch_.push_back(std::move(s));
  }
  for (std::size_t bytes : kernel_set.plan.in_bytes) {
    TERNJIT_TRY(auto b, DeviceAllocation::make(api, bytes));
    g->in_.push_back(std::move(b));
  }
  for (std::size_t bytes : kernel_set.plan.out_bytes) {
    TERNJIT_TRY(auto b, DeviceAllocation::make(api, bytes));
    g->out_.push_back(std::move(b));
  }
  g->kernel_set_ = std::move(kernel_set);
  return g;
}

DeviceKernels::~DeviceKernels() {
  if (!stream_) return;
  if (auto current = api_->make_current(); current.ok()) {
    (void)api_->synchronize(stream_);
    api_->destroy_stream(stream_);
  }
}

Result<void> DeviceKernels::enqueue(void* stream, const std::vector<DevicePtr>& inputs,
                                 const std::vector<DevicePtr>& outputs) {
  // One 8-byte slot per parameter; a Scalar is a u32 in the slot's first bytes (the
  // launch reads sizeof(u32) from its address: little-endian hosts only, as the ABI).
  std::vector<std::uint64_t> slots;
  std::vector<void*> params;
  for (std::size_t i = 0; i < kernel_set_.kernels.size(); ++i) {
    const KernelLaunch& k = kernel_set_.kernels[i];
    slots.assign(k.args.size(), 0);
    params.assign(k.args.size(), nullptr);
    for (std::size_t j = 0; j < k.args.size(); ++j) {
      const KernelArg& a = k.args[j];
      DevicePtr p = 0;
      switch (a.kind) {
        case KernelArg::Kind::Input: p = inputs.at(a.index); break;
        case KernelArg::Kind::Output: p = outputs.at(a.index); break;
        case KernelArg::Kind::Const: p = ptr_of(consts_.at(a.index)); break;
        case KernelArg::Kind::Weight: p = ptr_of(weights_.at(a.index)); break;
        case KernelArg::Kind::Scratch: p = scratch_.at(a.index)->ptr(); break;
        case KernelArg::Kind::Scalar: {
          const std::uint32_t v = a.scalar;
          std::memcpy(&slots[j], &v, sizeof v);
          params[j] = &slots[j];
          continue;
        }
      }
      slots[j] = static_cast<std::uint64_t>(p);
      params[j] = &slots[j];
    }
    TERNJIT_TRY_VOID(api_->launch(functions_[i], k.grid, k.block, k.shared_bytes, stream, params.data()));
  }
  return success();
}

Result<void> DeviceKernels::run(void* const* buffers) {
  if (!buffers) return make_error(ErrorCode::InvalidArgument, "gpu run: null buffer table");
  const std::size_t n_in = in_.size(), n_out = out_.size();
  for (std::size_t i = 0; i < n_in + n_out; ++i)
    if (!buffers[i] && (i < n_in ? kernel_set_.plan.in_bytes[i] : kernel_set_.plan.out_bytes[i - n_in]) != 0)
      return make_error(ErrorCode::InvalidArgument, "gpu run: buffer " + std::to_string(i) + " is null");
  std::lock_guard lock(mutex_);
  TERNJIT_TRY(std::shared_ptr<void> current, api_->make_current());
  std::vector<DevicePtr> ins, outs;
  for (std::size_t i = 0; i < n_in; ++i) {
    if (kernel_set_.plan.in_bytes[i] != 0)
      TERNJIT_TRY_VOID(api_->upload(in_[i]->ptr(), buffers[i], kernel_set_.plan.in_bytes[i], stream_));
    ins.push_back(in_[i]->ptr());
  }
  for (const auto& o : out_) outs.push_back(o->ptr());
  TERNJIT_TRY_VOID(enqueue(stream_, ins, outs));
  for (std::size_t j = 0; j < n_out; ++j)
    if (kernel_set_.plan.out_bytes[j] != 0)
      TERNJIT_TRY_VOID(api_->download(buffers[n_in + j], out_[j]->ptr(), kernel_set_.plan.out_bytes[j], stream_));
  return api_->synchronize(stream_);
}

Result<void> DeviceKernels::run_device(void* const* device_buffers) {
  std::lock_guard lock(mutex_);
  TERNJIT_TRY_VOID(launch(stream_, device_buffers));
  TERNJIT_TRY(std::shared_ptr<void> current, api_->make_current());
  return api_->synchronize(stream_);
}

Result<void> DeviceKernels::launch(void* stream, void* const* device_buffers) {
  if (!device_buffers) return make_error(ErrorCode::InvalidArgument, "gpu launch: null buffer table");
  std::vector<DevicePtr> ins, outs;
  for (std::size_t i = 0; i < in_.size(); ++i) ins.push_back(reinterpret_cast<DevicePtr>(device_buffers[i]));
  for (std::size_t j = 0; j < out_.size(); ++j)
    outs.push_back(reinterpret_cast<DevicePtr>(device_buffers[in_.size() + j]));
  for (std::size_t i = 0; i < ins.size() + outs.size(); ++i) {
    const DevicePtr p = i < ins.size() ? ins[i] : outs[i - ins.size()];
    if (p == 0) return make_error(ErrorCode::InvalidArgument, "gpu launch: device buffer " + std::to_string(i) + " is null");
    // Kernels load activations 16 bytes at a time (generate.h, launch conventions): a
    // tensor view at an odd offset is refused, never read misaligned.
    if (p % 16 != 0)
      return make_error(ErrorCode::InvalidArgument, "gpu launch: device buffer " + std::to_string(i) +
                                                        " is not 16-byte aligned (copy the tensor first)");
  }
  TERNJIT_TRY(std::shared_ptr<void> current, api_->make_current());
  return enqueue(stream, ins, outs);
}

namespace {

// The standalone function a bench compiles: f(x) = tmatmul(x, w, scale), the scale an
// f32[N] w_scale, or the grouped f32[G, N] one.
std::string bench_module_text(const TMatMulShape& s) {
  auto dims = [](std::int64_t a, std::int64_t b) { return "[" + std::to_string(a) + ", " + std::to_string(b) + "]"; };
  const std::string x = s.x == ElemKind::I8 ? "i8" : "f32";
  const std::int64_t g = s.group > 0 ? (s.k + s.group - 1) / s.group : 0;
  const std::string scale = s.group > 0 ? "f32" + dims(g, s.n) : "f32[" + std::to_string(s.n) + "]";
  return "param @w : t2" + dims(s.k, s.n) + "\nparam @s : " + scale + "\nfunc @f(%x: " + x + dims(s.m, s.k) +
         ") -> f32" + dims(s.m, s.n) + " {\n^entry:\n  %w = param @w : t2" + dims(s.k, s.n) + "\n  %s = param @s : " +
         scale + "\n  %y = tmatmul %x, %w, %s {x_scale = false, w_scale = true, bias = false, residual = false, " +
         "act = none" + (s.group > 0 ? ", group = " + std::to_string(s.group) : std::string()) + "} : f32" +
         dims(s.m, s.n) + "\n  ret %y\n}\n";
}

class GpuBenchRun final : public TuningRun {
 public:
  GpuBenchRun(LoadedKernel k, std::shared_ptr<ProgramState> state, std::vector<std::shared_ptr<DeviceAllocation>> xs,
              std::shared_ptr<DeviceAllocation> y)
      : kernel_(std::move(k)), state_(std::move(state)), xs_(std::move(xs)), y_(std::move(y)) {}
  void run(int i) const override {
    const auto* s = static_cast<const GpuLoadedState*>(kernel_.state);
    void* buffers[2] = {reinterpret_cast<void*>(xs_[static_cast<std::size_t>(i) % xs_.size()]->ptr()),
                        reinterpret_cast<void*>(y_->ptr())};
    // A failed launch leaves nothing to time; the tuner sees its time, the kernel's
    // errors are reported when the chosen configuration is loaded for real.
    (void)s->kernels->run_device(buffers);
  }

 private:
  LoadedKernel kernel_;
  std::shared_ptr<ProgramState> state_;
  std::vector<std::shared_ptr<DeviceAllocation>> xs_;
  std::shared_ptr<DeviceAllocation> y_;
};

class GpuBench final : public TuningBench {
 public:
  GpuBench(const Target& target, TargetOptions options, TMatMulShape shape, TuningBenchOptions bench)
      : target_(target), options_(std::move(options)), shape_(shape), bench_(bench) {}

  [[nodiscard]] Result<std::unique_ptr<TuningRun>> prepare(std::string_view config) const override {
    if (!parse_config(config))
      return make_error(ErrorCode::InvalidArgument, "'" + std::string(config) + "' is not a SIMT tmatmul configuration");
    TERNJIT_TRY(ir::Module m, ir::parse_module(bench_module_text(shape_), "<tmatmul bench>"));
    CompileOptions co;
    co.target = options_;
    co.decisions = {std::string(config)};
    co.tuning = TuningMode::Off;
    TERNJIT_TRY(Artifact a, target_.compile(m, "f", co));
    ir::ParamValues params;
    const ir::Function& f = *m.find_function("f");
    std::uint64_t seed = bench_.seed;
    for (const ir::ParamDecl& d : m.params()) {
      std::vector<std::int64_t> dims;
      for (const ir::Dim& dim : d.type.shape) dims.push_back(dim.extent);
      params.values.emplace(d.name, ir::StoredTensor::random(d.type.elem, dims, seed++));
    }
    std::shared_ptr<ProgramState> state = target_.new_program_state();
    LoadContext lc;
    lc.params = &params;
    lc.state = state.get();
    lc.options = options_;
    lc.tuning = TuningMode::Off;
    TERNJIT_TRY(LoadedKernel k, target_.load(a, lc));
    const auto* loaded = static_cast<const GpuLoadedState*>(k.state);
    const std::shared_ptr<const GpuApi>& api = loaded->kernels->api();
    TERNJIT_TRY(BufferSizes sizes, buffer_sizes(f));
    const std::size_t x_bytes = sizes.in.at(0);
    const std::size_t copies = std::clamp<std::size_t>(bench_.rotate_bytes / std::max<std::size_t>(1, x_bytes), 1, 8);
    std::vector<std::shared_ptr<DeviceAllocation>> xs;
    TERNJIT_TRY(std::shared_ptr<void> current, api->make_current());
    TERNJIT_TRY(void* stream, api->create_stream());
    std::shared_ptr<void> stream_guard(stream, [api](void* st) { api->destroy_stream(st); });
    for (std::size_t c = 0; c < copies; ++c) {
      const ir::HostTensor x = ir::HostTensor::random(shape_.x, {shape_.m, shape_.k}, seed++);
      const std::vector<std::uint8_t> bytes = x.to_bytes();
      TERNJIT_TRY(auto buffer, DeviceAllocation::make(api, bytes.size()));
      TERNJIT_TRY_VOID(api->upload(buffer->ptr(), bytes.data(), bytes.size(), stream));
      TERNJIT_TRY_VOID(api->synchronize(stream));
      xs.push_back(std::move(buffer));
    }
    TERNJIT_TRY(auto y, DeviceAllocation::make(api, sizes.out.at(0)));
    return std::unique_ptr<TuningRun>(std::make_unique<GpuBenchRun>(std::move(k), std::move(state), std::move(xs),
                                                                     std::move(y)));
  }

 private:
  const Target& target_;
  TargetOptions options_;
  TMatMulShape shape_;
  TuningBenchOptions bench_;
};

}  // namespace

BenchFactory make_gpu_bench_factory(const Target& target, TargetOptions options) {
  return [&target, options](const TMatMulShape& s,
                            const TuningBenchOptions& o) -> Result<std::unique_ptr<TuningBench>> {
    TERNJIT_TRY_VOID(target.available());
    return std::unique_ptr<TuningBench>(std::make_unique<GpuBench>(target, options, s, o));
  };
}

}  // namespace ternjit::targets::simt
