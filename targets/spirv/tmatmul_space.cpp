// SPDX-License-Identifier: Apache-2.0
// tmatmul_space.cpp - the SPIR-V tmatmul tuning space: candidates, a cost estimate, and a bench on random inputs.
#include "targets/spirv/tmatmul_space.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "targets/spirv/shader_compiler.h"

namespace ternjit::targets::spirv {

namespace {

constexpr std::uint32_t kWorkgroups[] = {32, 64, 128, 256};
constexpr std::uint32_t kRows[] = {1, 2, 4, 8, 16};

// One prepared candidate: its kernel and its (rotated) input and output copies.
class Run final : public TuningRun {
 public:
  Run(std::shared_ptr<Kernel> k, std::shared_ptr<std::vector<std::vector<std::uint8_t>>> xs,
      std::shared_ptr<std::vector<float>> scales, std::size_t y_bytes)
      : kernel_(std::move(k)), xs_(std::move(xs)), scales_(std::move(scales)), y_(y_bytes) {}
  void run(int i) const override {
    void* x = (*xs_)[static_cast<std::size_t>(i) % xs_->size()].data();
    void* grouped[3] = {x, scales_->data(), y_.data()};
    void* plain[2] = {x, y_.data()};
    (void)kernel_->run(scales_->empty() ? plain : grouped);
  }

 private:
  std::shared_ptr<Kernel> kernel_;
  std::shared_ptr<std::vector<std::vector<std::uint8_t>>> xs_;
  std::shared_ptr<std::vector<float>> scales_;  // grouped: the scales f32[G, N] (input 1); else empty
  mutable std::vector<std::uint8_t> y_;
};

class Bench final : public TuningBench {
 public:
  Bench(Shader shader, std::shared_ptr<Device> device, const TuningBenchOptions& o)
      : shader_(std::move(shader)), device_(std::move(device)) {
    const TMatMulShape& s = shader_.mm;
    std::mt19937_64 rng(o.seed);
    const std::size_t x_bytes = static_cast<std::size_t>(s.m * s.k) * (s.x == ElemKind::I8 ? 1 : 4);
    const std::size_t copies = std::clamp<std::size_t>(o.rotate_bytes / std::max<std::size_t>(1, x_bytes), 1, 4);
    xs_ = std::make_shared<std::vector<std::vector<std::uint8_t>>>();
    for (std::size_t c = 0; c < copies; ++c) {
      std::vector<std::uint8_t> x(x_bytes);
      if (s.x == ElemKind::I8) {
        for (auto& b : x) b = static_cast<std::uint8_t>(rng() % 255);
      } else {
        std::uniform_real_distribution<float> d(-1, 1);
        for (std::size_t i = 0; i < x.size(); i += 4) {
          const float v = d(rng);
          std::memcpy(&x[i], &v, 4);
        }
      }
      xs_->push_back(std::move(x));
    }
    ir::HostTensor w{ElemKind::T2, {s.k, s.n}, std::vector<double>(static_cast<std::size_t>(s.k * s.n))};
    for (double& v : w.data) v = static_cast<double>(static_cast<int>(rng() % 3) - 1);
    weight_.computed = std::move(w);
    scales_ = std::make_shared<std::vector<float>>();
    if (s.group > 0) {
      std::uniform_real_distribution<float> d(0.001f, 0.1f);
      scales_->resize(static_cast<std::size_t>(ir::grouped_scale_rows(s.k, s.group) * s.n));
      for (float& v : *scales_) v = d(rng);
    }
    program_.plan.in_bytes = {x_bytes};
    if (s.group > 0) program_.plan.in_bytes.push_back(scales_->size() * 4);
    program_.plan.out_bytes = {static_cast<std::size_t>(s.m * s.n) * 4};
    program_.plan.load_time.resize(1);
    program_.shaders = {shader_};
    program_.steps = {CallStep{}};
    module_ = compile_glsl(shader_.glsl, shader_.name);
  }

  [[nodiscard]] Result<std::unique_ptr<TuningRun>> prepare(std::string_view config) const override {
    auto c = parse_config(config);
    if (!c || !config_fits(*c, device_->info(), shader_))
      return make_error(ErrorCode::InvalidArgument, "'" + std::string(config) + "' is not a spirv tmatmul configuration");
    if (!module_.ok()) return module_.error();
    TERNJIT_TRY(auto kernel, Kernel::create(device_, program_, {*module_}, {*c}, {weight_}, {""}, nullptr, nullptr));
    return std::unique_ptr<TuningRun>(
        std::make_unique<Run>(std::move(kernel), xs_, scales_, program_.plan.out_bytes[0]));
  }

 private:
  Shader shader_;
  std::shared_ptr<Device> device_;
  ShaderSet program_;
  LoadValue weight_;
  std::shared_ptr<std::vector<std::vector<std::uint8_t>>> xs_;
  std::shared_ptr<std::vector<float>> scales_;
  Result<std::vector<std::uint32_t>> module_ = std::vector<std::uint32_t>{};
};

class Space final : public TuningSpace {
 public:
  Space(const Shader& shader, std::shared_ptr<Device> device, const DeviceInfo* info, bool int_dot)
      : device_(std::move(device)) {
    shader_ = tmatmul_bench_shader(shader.mm, int_dot);
    if (info) info_ = *info;
    else {  // Vulkan's guaranteed minimums
      info_.max_workgroup_invocations = 128;
      info_.max_workgroup_size_x = 128;
    }
    const TMatMulShape& s = shader.mm;
    problem_.op = "spirv.tmatmul";
    problem_.family = "K=" + std::to_string(s.k) + ";N=" + std::to_string(s.n) +
                      ";x=" + std::string(s.x == ElemKind::I8 ? "i8" : "f32") +
                      (s.group > 0 ? ";group=" + std::to_string(s.group) : std::string()) +
                      ";dot=" + (int_dot ? "sdot" : "scalar") + ";device=" + (info ? info->key() : std::string("-"));
    problem_.m = s.m;
    problem_.label = "M=" + std::to_string(s.m) + " K=" + std::to_string(s.k) + " N=" + std::to_string(s.n) + " " +
                     (s.x == ElemKind::I8 ? "i8" : "f32") + "->f32" +
                     (s.group > 0 ? " group=" + std::to_string(s.group) : std::string()) + " on " +
                     (info ? info->name : std::string("-"));
  }
  [[nodiscard]] const TuningProblem& problem() const override { return problem_; }
  [[nodiscard]] std::string default_config() const override { return config_text(spirv::default_config(shader_)); }
  [[nodiscard]] std::vector<TuningCandidate> candidates() const override {
    std::vector<TuningCandidate> out;
    const TMatMulShape& s = shader_.mm;
    for (std::uint32_t wg : kWorkgroups)
      for (std::uint32_t tm : kRows) {
        const ShaderConfig c{wg, tm};
        if (tm > 1 && tm > static_cast<std::uint32_t>(s.m)) continue;
        if (!config_fits(c, info_, shader_)) continue;
        // Estimate: weight words are read once per row tile; idle lanes of the last
        // workgroup and row tile are wasted work.
        const double tiles = std::ceil(static_cast<double>(s.m) / tm);
        const double lanes = std::ceil(static_cast<double>(s.n) / wg) * wg;
        const double est = tiles * lanes * (static_cast<double>(s.k) / 16.0) * (1.0 + 0.25 * tm);
        out.push_back({config_text(c), est, "wg"});
      }
    return out;
  }
  [[nodiscard]] bool valid(std::string_view config) const override {
    auto c = parse_config(config);
    return c && config_fits(*c, info_, shader_);
  }
  [[nodiscard]] Result<std::unique_ptr<TuningBench>> bench(const TuningBenchOptions& options) const override {
    if (!device_) return make_error(ErrorCode::Unavailable, "no Vulkan device to bench spirv tmatmul candidates on");
    return std::unique_ptr<TuningBench>(std::make_unique<Bench>(shader_, device_, options));
  }

 private:
  Shader shader_;
  std::shared_ptr<Device> device_;
  DeviceInfo info_;
  TuningProblem problem_;
};

}  // namespace

ShaderConfig default_config(const Shader& shader) {
  ShaderConfig c;
  if (shader.tmatmul) c.rows = shader.mm.m == 1 ? 1 : 4;
  return c;
}

std::unique_ptr<TuningSpace> make_tmatmul_space(const Shader& shader, std::shared_ptr<Device> device,
                                                const DeviceInfo* info, bool int_dot) {
  return std::make_unique<Space>(shader, std::move(device), info, int_dot);
}

}  // namespace ternjit::targets::spirv
