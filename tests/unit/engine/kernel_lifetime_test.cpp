// SPDX-License-Identifier: Apache-2.0
// kernel_lifetime_test.cpp - a kernel handed out by Program::kernel outlives its Program (and Engine) and stays correct.
#include <doctest/doctest.h>

#include <optional>

#include "tests/unit/engine/cpu_targets_testing.h"
#include "tests/unit/engine/engine_testing.h"

namespace ternjit {
namespace {

using testing::BitLinearWeights;
using testing::view;

constexpr std::int64_t kM = 3, kK = 64, kN = 16;

// The kernel of BitLinear.forward for [kM, kK] inputs on a fresh engine and program,
// both destroyed before it returns: only the kernel's own reference keeps them.
std::shared_ptr<const Kernel> orphan_kernel(const EngineOptions& options, BitLinearWeights& w) {
  auto e = Engine::create(options);
  REQUIRE_MESSAGE(e.ok(), (e.ok() ? "" : e.error().message));
  std::optional<Program> p(testing::bitlinear(*e));
  w.bind(*p);
  std::vector<float> shapes_only(static_cast<std::size_t>(kM * kK));
  TensorView in[] = {view(shapes_only, {kM, kK})};
  auto k = p->kernel("BitLinear.forward", in);
  REQUIRE_MESSAGE(k.ok(), (k.ok() ? "" : k.error().message));
  std::shared_ptr<const Kernel> kernel = std::move(k.value());
  p.reset();  // the program first
  return kernel;  // the engine goes with this scope
}

TEST_CASE("a kernel outlives its program and engine: run and the raw entry give the interpreter's result") {
  BitLinearWeights w(kK, kN, 61);
  std::vector<float> x = testing::random_f32(kM * kK, 62);
  for (const testing::CpuTarget& t : testing::cpu_targets()) {
    CAPTURE(t.label);
    std::shared_ptr<const Kernel> k = orphan_kernel(t.options, w);
    REQUIRE(k != nullptr);
    const std::vector<float> want = testing::oracle(w.params(), x, kM, kK);
    std::vector<float> y(static_cast<std::size_t>(kM * kN), -7.0f);
    TensorView in[] = {view(x, {kM, kK})};
    TensorView out[] = {view(y, {kM, kN})};
    auto r = k->run(in, out);
    REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
    CHECK(testing::close(want, y));

    // The plain entry with its state, after the program is gone.
    std::vector<float> direct(static_cast<std::size_t>(kM * kN), -1.0f);
    void* buffers[] = {x.data(), direct.data()};
    CHECK(k->entry()(k->state(), buffers) == 0);
    CHECK(testing::bit_equal(direct, y));
  }
}

TEST_CASE("kernels of one program share its state: each keeps it, the last one frees it") {
  BitLinearWeights w(kK, kN, 71);
  Engine e = testing::reference_engine();
  std::optional<Program> p(testing::bitlinear(e));
  w.bind(*p);
  std::vector<float> x1 = testing::random_f32(1 * kK, 72), x2 = testing::random_f32(2 * kK, 73);
  TensorView in1[] = {view(x1, {1, kK})};
  TensorView in2[] = {view(x2, {2, kK})};
  auto r1 = p->kernel("BitLinear.forward", in1);
  auto r2 = p->kernel("BitLinear.forward", in2);
  auto r1_again = p->kernel("BitLinear.forward", in1);
  REQUIRE((r1.ok() && r2.ok() && r1_again.ok()));
  std::shared_ptr<const Kernel> k1 = r1.value(), k2 = r2.value(), k1_again = r1_again.value();
  CHECK(k1.get() == k1_again.get());  // the same shapes: the same kernel
  p.reset();
  k1.reset();  // one reference gone, two left
  std::vector<float> y(static_cast<std::size_t>(2 * kN));
  TensorView out[] = {view(y, {2, kN})};
  REQUIRE(k2->run(in2, out).ok());
  CHECK(testing::close(testing::oracle(w.params(), x2, 2, kK), y));
  std::vector<float> y1(static_cast<std::size_t>(kN));
  TensorView out1[] = {view(y1, {1, kN})};
  REQUIRE(k1_again->run(in1, out1).ok());
  CHECK(testing::close(testing::oracle(w.params(), x1, 1, kK), y1));
  // Leaving the scope drops the last references; the ASan stage's leak check sees that the
  // program was freed.
}

}  // namespace
}  // namespace ternjit
