// SPDX-License-Identifier: Apache-2.0
// emulated_device_test.cpp - the cuda/hip runtime path (DeviceKernels: uploads, packed weights, parameter tables, launches in plan order, copies back) with its kernels executed by the SIMT emulator, against the interpreter.
//
// The GpuApi here is the SIMT emulator (tests/simt/simt_runtime.h): device memory is
// host memory, and a launch runs the kernel of the generated source compiled by the host
// compiler, with the parameter table DeviceKernels built for cuLaunchKernel. So everything
// the cuda and hip targets do after the driver's module load runs in CI without a GPU.
// ctest: gpu/emulator (SKIPPED without a host C++ compiler).
//
// Tolerances: integer results and f32 epilogues without transcendental activations are
// compared bit for bit (the generator rounds every f32 op like the reference:
// __fmul_rn & co, no contraction); a grouped-scale tmatmul within (G + 2) u
// sum_g |s p_g| (grouped_bound); rmsnorm, softmax and the reductions sum in another
// order than the reference: (len + 64) 2u |want| + 1e-30 per element, u = 2^-24 (the
// bound tests/unit/spirv derives for the same ops).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>

#include "ir/interpret.h"
#include "ir/parse.h"
#include "targets/simt/device_kernels.h"
#include "targets/cuda/cuda_target.h"
#include "tests/simt/simt_runtime.h"
#include "tests/unit/gpu/gpu_programs.h"

namespace ternjit {
namespace {

using targets::simt::DevicePtr;

// Device memory in host memory, launches on the emulator.
class EmulatorApi final : public targets::simt::GpuApi {
 public:
  EmulatorApi(std::shared_ptr<simt_emu::Module> module, std::vector<std::string> names, unsigned warp)
      : module_(std::move(module)), names_(std::move(names)), warp_(warp) {}
  [[nodiscard]] Result<std::shared_ptr<void>> make_current() const override { return std::shared_ptr<void>(); }
  [[nodiscard]] Result<DevicePtr> alloc(std::size_t bytes) const override {
    void* p = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
    if (!p) return make_error(ErrorCode::Unavailable, "emulator: out of memory");
    std::memset(p, 0xAB, bytes);  // uninitialized device memory is poison
    return reinterpret_cast<DevicePtr>(p);
  }
  void free(DevicePtr p) const override { std::free(reinterpret_cast<void*>(p)); }
  [[nodiscard]] Result<void> upload(DevicePtr dst, const void* src, std::size_t n, void*) const override {
    std::memcpy(reinterpret_cast<void*>(dst), src, n);
    return success();
  }
  [[nodiscard]] Result<void> download(void* dst, DevicePtr src, std::size_t n, void*) const override {
    std::memcpy(dst, reinterpret_cast<const void*>(src), n);
    return success();
  }
  [[nodiscard]] Result<void> launch(void* function, const targets::simt::Dim3& g, const targets::simt::Dim3& b,
                                    std::uint32_t, void*, void** params) const override {
    return module_->launch(names_.at(reinterpret_cast<std::size_t>(function)), g, b, warp_, params);
  }
  [[nodiscard]] Result<void> synchronize(void*) const override { return success(); }
  [[nodiscard]] Result<void*> create_stream() const override { return static_cast<void*>(nullptr); }
  void destroy_stream(void*) const override {}

 private:
  std::shared_ptr<simt_emu::Module> module_;
  std::vector<std::string> names_;
  unsigned warp_;
};

// Runs `p` (dialect and warp from `options`) through DeviceKernels on the emulator, twice,
// against the interpreter.
// The grouped-scale tmatmul's bound per element (as tests/unit/spirv and tests/unit/simt
// derive it): each group's int32 sum p_g is exact, y = sum_g float(p_g) s[g, n] in f32
// ascending g errs by at most (G + 2) u sum_g |s[g, n] p_g|.
std::vector<double> grouped_bound(const ir::HostTensor& x, const ir::HostTensor& w, const ir::HostTensor& sc,
                                  std::int64_t group) {
  const std::int64_t M = x.shape[0], K = x.shape[1], N = w.shape[1], G = sc.shape[0];
  std::vector<double> out(static_cast<std::size_t>(M * N), 0.0);
  for (std::int64_t m = 0; m < M; ++m)
    for (std::int64_t n = 0; n < N; ++n) {
      double acc = 0;
      for (std::int64_t g = 0; g < G; ++g) {
        double p = 0;
        for (std::int64_t k = g * group; k < std::min(K, (g + 1) * group); ++k)
          p += x.data[static_cast<std::size_t>(m * K + k)] * w.data[static_cast<std::size_t>(k * N + n)];
        acc += std::fabs(sc.data[static_cast<std::size_t>(g * N + n)] * p);
      }
      out[static_cast<std::size_t>(m * N + n)] = static_cast<double>(G + 2) * 0x1p-24 * acc;
    }
  return out;
}

void check_program(const gpu_testing::Program& p, const targets::simt::SimtOptions& options, bool exact_floats,
                   std::int64_t group = 0) {
  CAPTURE(p.name);
  CAPTURE(targets::simt::dialect_name(options.dialect));
  auto program = targets::simt::generate(p.module, p.function, options);
  REQUIRE_MESSAGE(program.ok(), (program.ok() ? "" : program.error().message));
  std::vector<std::string> names;
  std::vector<void*> functions;
  for (std::size_t i = 0; i < program->kernels.size(); ++i) {
    names.push_back(program->kernels[i].name);
    functions.push_back(reinterpret_cast<void*>(i));
  }
  auto module = simt_emu::Module::build(program->source, names, simt_emu::find_compiler());
  REQUIRE_MESSAGE(module.ok(), (module.ok() ? "" : module.error().message));
  auto api = std::make_shared<EmulatorApi>(*module, names, options.warp_size);

  const ir::Function& f = *p.module.find_function(p.function);
  std::uint64_t seed = 11;
  const ir::ParamValues params = gpu_testing::random_params(p.module, seed);
  const std::vector<ir::HostTensor> args = gpu_testing::random_args(f, seed);
  auto want = ir::interpret(p.module, p.function, args, params);
  REQUIRE_MESSAGE(want.ok(), (want.ok() ? "" : want.error().message));
  std::vector<double> per;  // a grouped tmatmul's element-wise bound of result 0
  if (group > 0)
    per = grouped_bound(args[0], params.values.at("w").to_host(), params.values.at("s").to_host(), group);
  auto values = targets::evaluate_load_time(f, program->plan, params, false);
  REQUIRE(values.ok());
  targets::DeviceWeights weights;
  auto g = targets::simt::DeviceKernels::create(api, "emu", *program, functions, nullptr, *values, &weights);
  REQUIRE_MESSAGE(g.ok(), (g.ok() ? "" : g.error().message));

  gpu_testing::HostBuffers buffers(args, *want);
  const auto& out = buffers.out;
  for (int rep = 0; rep < 2; ++rep) {  // twice: scratch of the first call must not leak into the second
    buffers.poison(rep ? 0xA5 : 0x5A);
    auto r = (*g)->run(buffers.pointers.data());
    REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
    for (std::size_t j = 0; j < out.size(); ++j) {
      const ir::HostTensor& w = (*want)[j];
      CAPTURE(j);
      if (w.kind != ElemKind::F32 || (exact_floats && per.empty())) {
        CHECK_MESSAGE(w.to_bytes() == out[j], "result " << j << " differs (bit for bit expected)");
        continue;
      }
      std::vector<float> got(w.data.size());
      std::memcpy(got.data(), out[j].data(), got.size() * 4);
      const double len = static_cast<double>(w.shape.empty() ? 1 : w.shape.back());
      for (std::size_t i = 0; i < got.size(); ++i) {
        if (std::isnan(w.data[i]) && std::isnan(got[i])) continue;
        const double bound = !per.empty() ? per[i]
                                          : (len + 64) * 2 * 0x1p-24 * std::fabs(w.data[i]) + 1e-30 +
                                                (len + 64) * 2 * 0x1p-24 * len;
        CHECK_MESSAGE(std::fabs(got[i] - w.data[i]) <= bound,
                      "result " << j << "[" << i << "] = " << got[i] << ", want " << w.data[i]);
      }
    }
  }
}

gpu_testing::Program ir_program(const std::string& name, const std::string& tir) {
  auto m = ir::parse_module(tir, name + ".tir");
  REQUIRE(m.ok());
  return gpu_testing::Program{name, std::move(*m), "f", true};
}

TEST_CASE("gpu program on the SIMT emulator: tmatmul bit for bit (grouped: the derived bound), CUDA and HIP [emulator]") {
  const std::vector<gpu_testing::Program> programs = [] {
    std::vector<gpu_testing::Program> v;
    v.push_back(ir_program("tmatmul i8 M=1 relu", gpu_testing::tmatmul_tir(1, 37, 21, "i8", "relu", false)));
    v.push_back(ir_program("tmatmul i8 M=3 epilogue", gpu_testing::tmatmul_tir(3, 130, 17, "i8", "none", true)));
    v.push_back(ir_program("grouped i8", gpu_testing::grouped_tir(3, 300, 17, 256, "i8")));
    return v;
  }();
  for (const auto& p : programs) {
    const std::int64_t group = p.name.rfind("grouped", 0) == 0 ? 256 : 0;  // grouped: the derived bound
    targets::simt::SimtOptions cuda;
    check_program(p, cuda, true, group);
    targets::simt::SimtOptions hip;
    hip.dialect = targets::simt::Dialect::Hip;
    hip.warp_size = 64;
    check_program(p, hip, true, group);
  }
  // The CUDA tensor-core form (M >= 16): its tmma2 weights packed and uploaded by
  // DeviceKernels, its kernels on the emulator; grouped stays on dp4a.
  const gpu_testing::Program mma = ir_program("tmatmul i8 M=17 mma", gpu_testing::tmatmul_tir(17, 300, 13, "i8", "relu", true));
  targets::simt::SimtOptions tc;
  tc.tensor_cores = true;
  auto gen = targets::simt::generate(mma.module, mma.function, tc);
  REQUIRE(gen.ok());
  REQUIRE(gen->configs.at(0).mma == 1);
  REQUIRE(gen->weights.at(0).layout == targets::simt::WeightLayout::Mma2);
  check_program(mma, tc, true);
  check_program(ir_program("grouped i8 M=20", gpu_testing::grouped_tir(20, 300, 17, 256, "i8")), tc, true, 256);
}

TEST_CASE("gpu program on the SIMT emulator: a BitLinear layer (rmsnorm, quantize, tmatmul) and row ops [emulator]") {
  targets::simt::SimtOptions cuda;
  // tests/dsl/bitlinear.tri through the O2 pipeline.
  int layers = 0;
  for (const gpu_testing::Program& p : gpu_testing::programs())
    if (p.name.rfind("bitlinear.tri", 0) == 0) {
      check_program(p, cuda, false);
      ++layers;
    }
  CHECK(layers == 2);
  for (auto& [name, tir] : gpu_testing::ir_programs()) {
    if (name != "softmax and reductions" && name != "rmsnorm" && name != "quantize") continue;
    check_program(ir_program(name, tir), cuda, name == "quantize");
  }
}

}  // namespace
}  // namespace ternjit
