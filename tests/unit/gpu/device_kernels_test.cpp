// SPDX-License-Identifier: Apache-2.0
// device_kernels_test.cpp - DeviceKernels (the launch machinery of cuda and hip) on a fake device in host memory: uploads, weights once per Program, parameters, launch order, errors.
//
// The fake GpuApi allocates host memory and records every launch with its parameter
// table read back the way cuLaunchKernel reads it (8-byte pointer slots, a u32 for a
// Scalar), so the plan-to-launch mapping is checked on machines without a GPU. What the
// kernels compute is tests/unit/simt's business.
#include "targets/simt/device_kernels.h"

#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <mutex>

#include "ir/parse.h"
#include "targets/load_value.h"
#include "tests/unit/gpu/gpu_programs.h"

namespace ternjit {
namespace {

using targets::simt::DevicePtr;

struct Launch {
  void* function = nullptr;
  targets::simt::Dim3 grid, block;
  std::vector<std::uint64_t> slots;  // each parameter's first 8 bytes
  void* stream = nullptr;
};

class FakeApi final : public targets::simt::GpuApi {
 public:
  mutable std::mutex mutex;
  mutable std::map<DevicePtr, std::vector<std::uint8_t>> memory;  // allocation -> its bytes
  mutable std::vector<Launch> launches;
  mutable int uploads = 0, frees = 0, syncs = 0;
  mutable bool fail_alloc = false;

  [[nodiscard]] Result<std::shared_ptr<void>> make_current() const override { return std::shared_ptr<void>(); }
  [[nodiscard]] Result<DevicePtr> alloc(std::size_t bytes) const override {
    std::lock_guard lock(mutex);
    if (fail_alloc) return make_error(ErrorCode::Unavailable, "fake: out of device memory");
    std::vector<std::uint8_t> block(bytes + 256, 0xAB);  // poisoned
    // 256-byte aligned like cuMemAlloc: the map key is the aligned address inside the block.
    const auto base = reinterpret_cast<DevicePtr>(block.data());
    const DevicePtr p = (base + 255) & ~DevicePtr{255};
    offsets_[p] = p - base;
    memory.emplace(p, std::move(block));
    return p;
  }
  void free(DevicePtr p) const override {
    std::lock_guard lock(mutex);
    ++frees;
    memory.erase(p);
  }
  std::uint8_t* at(DevicePtr p) const { return memory.at(p).data() + offsets_.at(p); }
  [[nodiscard]] Result<void> upload(DevicePtr dst, const void* src, std::size_t n, void*) const override {
    std::lock_guard lock(mutex);
    ++uploads;
    std::memcpy(at(dst), src, n);
    return success();
  }
  [[nodiscard]] Result<void> download(void* dst, DevicePtr src, std::size_t n, void*) const override {
    std::lock_guard lock(mutex);
    std::memcpy(dst, at(src), n);
    return success();
  }
  [[nodiscard]] Result<void> launch(void* function, const targets::simt::Dim3& g, const targets::simt::Dim3& b,
                                    std::uint32_t, void* stream, void** params) const override {
    std::lock_guard lock(mutex);
    Launch l{function, g, b, {}, stream};
    for (std::size_t i = 0; i < arity_.at(function); ++i) {
      std::uint64_t v = 0;
      std::memcpy(&v, params[i], sizeof v);
      l.slots.push_back(v);
    }
    launches.push_back(l);
    return success();
  }
  [[nodiscard]] Result<void> synchronize(void*) const override {
    ++syncs;
    return success();
  }
  [[nodiscard]] Result<void*> create_stream() const override { return reinterpret_cast<void*>(0x5000); }
  void destroy_stream(void*) const override {}

  std::map<void*, std::size_t> arity_;  // function handle -> parameter count

 private:
  mutable std::map<DevicePtr, std::size_t> offsets_;
};

struct Fixture {
  ir::Module module;
  targets::simt::KernelSet program;
  ir::ParamValues params;
  std::vector<targets::LoadValue> values;
  std::vector<void*> functions;
};

Fixture make_fixture(const std::string& tir, FakeApi& api) {
  auto m = ir::parse_module(tir, "t.tir");
  REQUIRE(m.ok());
  auto p = targets::simt::generate(*m, "f", {});
  REQUIRE_MESSAGE(p.ok(), (p.ok() ? "" : p.error().message));
  Fixture fx{std::move(*m), std::move(*p), {}, {}, {}};
  std::uint64_t seed = 3;
  for (const ir::ParamDecl& d : fx.module.params()) {
    std::vector<std::int64_t> shape;
    for (const ir::Dim& dim : d.type.shape) shape.push_back(dim.extent);
    fx.params.values.emplace(d.name, ir::StoredTensor::random(d.type.elem, shape, seed++));
  }
  auto values = targets::evaluate_load_time(*fx.module.find_function("f"), fx.program.plan, fx.params, false);
  REQUIRE(values.ok());
  fx.values = std::move(*values);
  for (std::size_t i = 0; i < fx.program.kernels.size(); ++i) {
    void* handle = reinterpret_cast<void*>(0x1000 + 16 * i);
    fx.functions.push_back(handle);
    api.arity_[handle] = fx.program.kernels[i].args.size();
  }
  return fx;
}

TEST_CASE("gpu program: launches in plan order with every parameter resolved, weights once per Program") {
  auto api = std::make_shared<FakeApi>();
  Fixture fx = make_fixture(gpu_testing::tmatmul_tir(3, 130, 17, "i8", "relu", true), *api);
  REQUIRE(!fx.program.weights.empty());
  targets::DeviceWeights weights;
  auto g = targets::simt::DeviceKernels::create(api, "fake0", fx.program, fx.functions, nullptr, fx.values, &weights);
  REQUIRE_MESSAGE(g.ok(), (g.ok() ? "" : g.error().message));
  CHECK(weights.size() == fx.program.weights.size());
  const int uploads_after_first = api->uploads;
  // A second kernel of the same Program: the weights are not uploaded again.
  auto g2 = targets::simt::DeviceKernels::create(api, "fake0", fx.program, fx.functions, nullptr, fx.values, &weights);
  REQUIRE(g2.ok());
  CHECK(weights.size() == fx.program.weights.size());
  std::set<std::size_t> consts;
  for (const auto& k : fx.program.kernels)
    for (const auto& a : k.args)
      if (a.kind == targets::simt::KernelArg::Kind::Const) consts.insert(a.index);
  // Load-time values are per kernel, weights per Program: the second create uploads the consts only.
  CHECK(api->uploads - uploads_after_first == static_cast<int>(consts.size()));
  CHECK(uploads_after_first == static_cast<int>(consts.size() + fx.program.weights.size()));
  // Packed weights hold exactly what pack_ternary_weight gives.
  const targets::simt::WeightUse& w = fx.program.weights[0];
  auto packed = targets::simt::pack_ternary_weight(fx.values[w.load_time], w.k, w.n);
  REQUIRE(packed.ok());

  // The host-copy path: inputs uploaded, every kernel launched in order on the kernel's stream.
  std::vector<std::vector<std::uint8_t>> in, out;
  std::vector<void*> buffers;
  for (std::size_t b : fx.program.plan.in_bytes) in.emplace_back(b, std::uint8_t{7});
  for (std::size_t b : fx.program.plan.out_bytes) out.emplace_back(b, std::uint8_t{0});
  for (auto& b : in) buffers.push_back(b.data());
  for (auto& b : out) buffers.push_back(b.data());
  api->launches.clear();
  REQUIRE((*g)->run(buffers.data()).ok());
  REQUIRE(api->launches.size() == fx.program.kernels.size());
  for (std::size_t i = 0; i < fx.program.kernels.size(); ++i) {
    const targets::simt::KernelLaunch& k = fx.program.kernels[i];
    const Launch& l = api->launches[i];
    CAPTURE(k.name);
    CHECK(l.function == fx.functions[i]);
    CHECK(l.grid == k.grid);
    CHECK(l.block == k.block);
    CHECK(l.stream == reinterpret_cast<void*>(0x5000));
    for (std::size_t j = 0; j < k.args.size(); ++j) {
      const targets::simt::KernelArg& a = k.args[j];
      CAPTURE(j);
      switch (a.kind) {
        case targets::simt::KernelArg::Kind::Input:
          CHECK(std::memcmp(api->at(l.slots[j]), in[a.index].data(), in[a.index].size()) == 0);
          break;
        case targets::simt::KernelArg::Kind::Output:
          CHECK(api->memory.count(l.slots[j]) == 1);
          break;
        case targets::simt::KernelArg::Kind::Const: {
          const std::vector<std::uint8_t> want = fx.values[a.index].encoded();
          CHECK(std::memcmp(api->at(l.slots[j]), want.data(), want.size()) == 0);
          break;
        }
        case targets::simt::KernelArg::Kind::Weight: {
          auto p = targets::simt::pack_ternary_weight(fx.values[fx.program.weights[a.index].load_time],
                                                      fx.program.weights[a.index].k, fx.program.weights[a.index].n);
          REQUIRE(p.ok());
          CHECK(std::memcmp(api->at(l.slots[j]), p->data(), p->size()) == 0);
          break;
        }
        case targets::simt::KernelArg::Kind::Scratch:
          CHECK(api->memory.count(l.slots[j]) == 1);
          break;
        case targets::simt::KernelArg::Kind::Scalar:
          CHECK(static_cast<std::uint32_t>(l.slots[j] & 0xffffffffu) == a.scalar);
          break;
      }
      if (a.kind != targets::simt::KernelArg::Kind::Scalar) CHECK(l.slots[j] % 16 == 0);
    }
  }
  // Outputs come back from the device buffers (the fake device left them poisoned).
  for (const auto& o : out)
    for (std::uint8_t b : o) REQUIRE(b == 0xAB);

  // The framework path: the caller's pointers and stream, misaligned or null ones refused.
  alignas(64) static std::uint8_t caller[8][4096];
  std::vector<void*> device(buffers.size());
  for (std::size_t i = 0; i < device.size(); ++i) device[i] = caller[i];
  api->launches.clear();
  REQUIRE((*g)->launch(reinterpret_cast<void*>(0x7000), device.data()).ok());
  REQUIRE(api->launches.size() == fx.program.kernels.size());
  CHECK(api->launches[0].stream == reinterpret_cast<void*>(0x7000));
  for (std::size_t i = 0; i < fx.program.kernels.size(); ++i)
    for (std::size_t j = 0; j < fx.program.kernels[i].args.size(); ++j) {
      const targets::simt::KernelArg& a = fx.program.kernels[i].args[j];
      if (a.kind == targets::simt::KernelArg::Kind::Input)
        CHECK(api->launches[i].slots[j] == reinterpret_cast<std::uint64_t>(device[a.index]));
      if (a.kind == targets::simt::KernelArg::Kind::Output)
        CHECK(api->launches[i].slots[j] == reinterpret_cast<std::uint64_t>(device[in.size() + a.index]));
    }
  device[0] = caller[0] + 4;
  auto misaligned = (*g)->launch(nullptr, device.data());
  REQUIRE(!misaligned.ok());
  CHECK(misaligned.error().message.find("16-byte aligned") != std::string::npos);
  device[0] = nullptr;
  CHECK(!(*g)->launch(nullptr, device.data()).ok());
  CHECK(!(*g)->run(nullptr).ok());
}

TEST_CASE("gpu program: device failures are errors, and everything allocated is freed") {
  auto api = std::make_shared<FakeApi>();
  Fixture fx = make_fixture(gpu_testing::tmatmul_tir(1, 64, 8, "i8", "none", false), *api);
  api->fail_alloc = true;
  auto g = targets::simt::DeviceKernels::create(api, "fake0", fx.program, fx.functions, nullptr, fx.values, nullptr);
  REQUIRE(!g.ok());
  CHECK(g.error().code == ErrorCode::Unavailable);
  api->fail_alloc = false;
  {
    auto ok = targets::simt::DeviceKernels::create(api, "fake0", fx.program, fx.functions, nullptr, fx.values, nullptr);
    REQUIRE(ok.ok());
    CHECK(!api->memory.empty());
  }
  CHECK(api->memory.empty());  // the program and its uploads are gone with the last reference
  // A weight outside {-1, 0, 1} is InvalidInput from the packer, before anything runs.
  std::vector<targets::LoadValue> bad = fx.values;
  const targets::simt::WeightUse& w = fx.program.weights.at(0);
  ir::HostTensor t = bad[w.load_time].tensor();
  t.data[5] = 3;
  bad[w.load_time] = targets::LoadValue{std::nullopt, t};
  auto g3 = targets::simt::DeviceKernels::create(api, "fake0", fx.program, fx.functions, nullptr, bad, nullptr);
  REQUIRE(!g3.ok());
  CHECK(g3.error().code == ErrorCode::InvalidInput);
}

}  // namespace
}  // namespace ternjit
