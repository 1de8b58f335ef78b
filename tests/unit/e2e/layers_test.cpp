// SPDX-License-Identifier: Apache-2.0
// layers_test.cpp - whole layers from the DSL run on the reference, checked independently.
#include <doctest/doctest.h>

#include <chrono>

#include <cmath>
#include <limits>

#include "formats/run_inputs.h"
#include "ir/bind.h"
#include "ir/dsl/dsl.h"
#include "ir/interpret.h"
#include "ir/parse.h"
#include "ir/print.h"
#include "tests/unit/expect.h"

using namespace ternjit;
using namespace ternjit::ir;
using namespace ternjit::formats;

namespace {

// The predecessor's example, verbatim (tests/dsl/linear_classifier.tri), and a BitLinear layer.
const std::string kLinearClassifier = testing::read_file(TERNJIT_SOURCE_DIR "/tests/dsl/linear_classifier.tri");
const std::string kBitLinear = testing::read_file(TERNJIT_SOURCE_DIR "/tests/dsl/bitlinear.tri");

Module compile(const std::string& src) {
  auto m = dsl::compile_tri(src, "test.tri");
  if (!m.ok()) FAIL(render(m.error()));
  return std::move(m.value());
}

}  // namespace

TEST_CASE("LinearClassifier: parse, print, round-trip, run against an independent matmul") {
  Module m = compile(kLinearClassifier);
  std::string text = print_module(m);
  auto again = parse_module(text, "printed.tir");
  REQUIRE_MESSAGE(again.ok(), (again.ok() ? "" : render(again.error())));
  CHECK(print_module(again.value()) == text);

  const Function* f = m.find_function("LinearClassifier.forward");
  REQUIRE(f);
  for (std::int64_t n : {1, 3}) {
    ShapeBindings shapes;
    shapes.values["N"] = n;
    auto run = prepare_run(m, *f, nullptr, nullptr, shapes, PrepareOptions{42, true, true});
    REQUIRE(run.ok());
    auto out = interpret(m, *f, run->args, run->params);
    REQUIRE(out.ok());
    const HostTensor& x = run->args[0];
    const HostTensor w = run->params.values.at("LinearClassifier.weights").to_host();
    const HostTensor b = run->params.values.at("LinearClassifier.bias").to_host();
    const HostTensor& y = out.value()[0];
    REQUIRE(y.shape == std::vector<std::int64_t>{n, 10});
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < 10; ++j) {
        double acc = 0;
        for (std::int64_t k = 0; k < 784; ++k) acc += x.data[i * 784 + k] * w.data[k * 10 + j];
        float want = static_cast<float>(acc) + static_cast<float>(b.data[j]);
        CHECK(y.data[i * 10 + j] == doctest::Approx(want).epsilon(1e-6));
      }
  }
}

TEST_CASE("LinearClassifier: hand-computed numbers") {
  // x = [1, 2, 0, ..., 0], weights column j: +1 at row 0, -1 at row 1 for j = 0; bias 0.5.
  Module m = compile(kLinearClassifier);
  const Function* f = m.find_function("LinearClassifier.forward");
  std::vector<float> x(784, 0.0f);
  x[0] = 1.0f;
  x[1] = 2.0f;
  std::vector<std::int8_t> w(7840, 0);
  w[0 * 10 + 0] = 1;
  w[1 * 10 + 0] = -1;
  w[1 * 10 + 3] = 1;
  std::vector<float> bias(10, 0.5f);
  ParamValues p;
  p.set("LinearClassifier.weights", HostTensor::from_values(ElemKind::T2, {784, 10}, std::vector<double>(w.begin(), w.end())));
  p.set("LinearClassifier.bias", HostTensor::from_f32({10}, bias));
  std::vector<HostTensor> args{HostTensor::from_f32({1, 784}, x)};
  auto out = interpret(m, *f, args, p);
  REQUIRE(out.ok());
  const auto& y = out.value()[0].data;
  CHECK(y[0] == -0.5);  // 1*1 + 2*(-1) + 0.5
  CHECK(y[3] == 2.5);   // 2*1 + 0.5
  CHECK(y[1] == 0.5);
}

TEST_CASE("BitLinear: rmsnorm -> quantize_int8 -> ternary matmul -> scale -> relu, by hand") {
  Module m = compile(kBitLinear);
  const Function* f = m.find_function("BitLinear.forward");
  REQUIRE(f);
  // K = 4, N = 2, M = 1. x = [1, -1, 1, -1]: mean(x^2) = 1, so with gamma = 1 and a tiny
  // eps, h = x / sqrt(1 + 1e-5). absmax quantization: s = max|h| / 127, q = +-127, so
  // the fake-quantized row is +-127 * s = +-h[0] (exactly h's magnitude in f32).
  ParamValues p;
  p.set("BitLinear.gamma", HostTensor::from_f32({4}, std::vector<float>{1, 1, 1, 1}));
  p.set("BitLinear.w", HostTensor::from_values(ElemKind::T2, {4, 2}, std::vector<double>{1, 1, -1, 0, 1, 0, 0, -1}));
  p.set("BitLinear.w_scale", HostTensor::from_f32({2}, std::vector<float>{0.5f, 2.0f}));
  std::vector<HostTensor> args{HostTensor::from_f32({1, 4}, std::vector<float>{1, -1, 1, -1})};
  auto out = interpret(m, *f, args, p);
  REQUIRE_MESSAGE(out.ok(), (out.ok() ? "" : render(out.error())));
  float h = static_cast<float>(1.0 / std::sqrt(1.0 + 1e-5));
  float s = h / 127.0f;
  float qv = 127.0f * s;
  // column 0: w = [1, -1, 1, 0] -> q0 - q1 + q2 = 3 qv, times 0.5.
  // column 1: w = [1, 0, 0, -1] -> q0 - q3 = 2 qv, times 2.
  const auto& y = out.value()[0].data;
  CHECK(y[0] == doctest::Approx(static_cast<float>(3.0 * qv) * 0.5f).epsilon(1e-7));
  CHECK(y[1] == doctest::Approx(static_cast<float>(2.0 * qv) * 2.0f).epsilon(1e-7));
  // relu: flip the scale's sign and the output is clamped to zero.
  p.set("BitLinear.w_scale", HostTensor::from_f32({2}, std::vector<float>{-0.5f, 2.0f}));
  auto out2 = interpret(m, *f, args, p);
  REQUIRE(out2.ok());
  CHECK(out2.value()[0].data[0] == 0.0);
  CHECK(out2.value()[0].data[1] == doctest::Approx(static_cast<float>(2.0 * qv) * 2.0f).epsilon(1e-7));
}

TEST_CASE("BitLinear: non-ternary weights in a safetensors file are rejected by index") {
  Module m = compile(kBitLinear);
  const Function* f = m.find_function("BitLinear.forward");
  StFile w;
  std::vector<std::int8_t> bad{1, 0, -1, 2, 0, 0};
  w.tensors.push_back(make_i8_tensor("w", {3, 2}, bad));
  ShapeBindings shapes;
  shapes.values["M"] = 1;
  const WeightFile wf = WeightFile::from_safetensors(w, "w.safetensors");
  auto run = prepare_run(m, *f, nullptr, &wf, shapes, PrepareOptions{});
  REQUIRE_FALSE(run.ok());
  INFO(run.error().message);
  CHECK(run.error().message.find("element [1, 1]") != std::string::npos);

  // The same values packed as tern2 with the format in the metadata load fine.
  StFile packed;
  std::vector<std::int8_t> good{1, 0, -1, 1, 0, 0};
  std::vector<std::uint8_t> bytes{0x86, 0x55};  // codes 2,1,0,2 | 1,1 and padding 1,1
  packed.tensors.push_back(make_u8_tensor("w", {2}, bytes));
  packed.metadata["w.format"] = "tern2";
  packed.metadata["w.shape"] = "3,2";
  const WeightFile packed_file = WeightFile::from_safetensors(packed, "packed.safetensors");
  auto run2 = prepare_run(m, *f, nullptr, &packed_file, shapes, PrepareOptions{});
  REQUIRE_MESSAGE(run2.ok(), (run2.ok() ? "" : run2.error().message));
  const HostTensor t = run2->params.values.at("BitLinear.w").to_host();
  CHECK(t.shape == std::vector<std::int64_t>{3, 2});
  for (std::size_t i = 0; i < good.size(); ++i) CHECK(t.data[i] == good[i]);
}

TEST_CASE("BitLinear: a shape too large or overflowing is an error, not a crash") {
  Module m = compile(kBitLinear);
  const Function* f = m.find_function("BitLinear.forward");
  auto shapes = parse_shape_list("M=1,K=4294967296,N=4294967296");
  REQUIRE(shapes.ok());
  auto run = prepare_run(m, *f, nullptr, nullptr, *shapes, PrepareOptions{});
  REQUIRE_FALSE(run.ok());
  CHECK(run.error().message == "input 'x' of shape [1, 4294967296] has more than 2147483648 elements");
  PrepareOptions big;
  big.max_elements = std::numeric_limits<std::int64_t>::max();
  shapes->values["M"] = std::int64_t{1} << 62;  // x is [2^62, 4]: 2^64 elements overflow
  shapes->values["K"] = 4;
  shapes->values["N"] = 4;
  run = prepare_run(m, *f, nullptr, nullptr, *shapes, big);
  REQUIRE_FALSE(run.ok());
  CHECK(run.error().message == "input 'x' of shape [4611686018427387904, 4] has more than 9223372036854775807 elements");
}

TEST_CASE("BitLinear: tensors within the element limit but together past the byte cap are an error (issue 19 item 6)") {
  // M=2^30, K=1: 2^30 elements pass max_elements (2^31), but the input as doubles needs
  // 8 GiB, which threw std::bad_alloc (an abort in `ternjit run`) on smaller machines.
  Module m = compile(kBitLinear);
  const Function* f = m.find_function("BitLinear.forward");
  auto shapes = parse_shape_list("M=1073741824,K=1,N=1");
  REQUIRE(shapes.ok());
  auto run = prepare_run(m, *f, nullptr, nullptr, *shapes, PrepareOptions{});
  REQUIRE_FALSE(run.ok());
  CHECK(run.error().message ==
        "the run's tensors need 17179869193 bytes together (inputs 8589934592 bytes, random parameters 9 bytes, "
        "outputs 8589934592 bytes; the largest, input 'x' of shape [1073741824, 1], 8589934592 bytes), over the "
        "run's limit of 4294967296 bytes; nothing was allocated");
  CHECK(PrepareOptions{}.max_bytes == std::uint64_t{4} << 30);
  // The cap counts every tensor: x [16, 64] as doubles (8192 bytes), gamma f32 [64] (256),
  // w t2 [64, 64] (1024, 2 bits a value), w_scale f32 [64] (256) and the output [16, 64]
  // as doubles (8192): one byte less is too little.
  PrepareOptions small;
  small.max_bytes = 8192 + 256 + 1024 + 256 + 8192 - 1;
  shapes = parse_shape_list("M=16,K=64,N=64");
  REQUIRE(shapes.ok());
  run = prepare_run(m, *f, nullptr, nullptr, *shapes, small);
  REQUIRE_FALSE(run.ok());
  CHECK(run.error().message.find("the run's tensors need 17920 bytes together (inputs 8192 bytes, random parameters "
                                 "1536 bytes, outputs 8192 bytes; ") == 0);
  small.max_bytes = 8192 + 256 + 1024 + 256 + 8192;  // all fit exactly
  CHECK(prepare_run(m, *f, nullptr, nullptr, *shapes, small).ok());
  // tensor_bytes: element sizes, t2 packed 4 a byte, overflow.
  CHECK(tensor_bytes(ElemKind::F32, 10) == 40u);
  CHECK(tensor_bytes(ElemKind::T2, 9) == 3u);
  CHECK(tensor_bytes(ElemKind::F32, 10, 8) == 80u);
  CHECK_FALSE(tensor_bytes(ElemKind::F32, std::int64_t{1} << 62, 8).has_value());
}

TEST_CASE("the byte cap is charged for the whole run before anything is allocated (issue 33 item 19)") {
  // 4096 random parameters of 64 MB each: one at a time, the first 64 were drawn (4 GiB,
  // ~50 s) before the cap said no. Now the sum of the plan is refused at once.
  std::string src = "layer Many {\n";
  for (int i = 0; i < 4096; ++i) src += "    param p" + std::to_string(i) + ": Tensor[N]\n";
  src += "    fn forward(x: Tensor[N]) -> Tensor[N] {\n        let s0 = x + p0\n";
  for (int i = 1; i < 4096; ++i)
    src += "        let s" + std::to_string(i) + " = s" + std::to_string(i - 1) + " + p" + std::to_string(i) + "\n";
  src += "        return s4095\n    }\n}\n";
  Module m = compile(src);
  const Function* f = m.find_function("Many.forward");
  REQUIRE(f != nullptr);
  auto shapes = parse_shape_list("N=16777216");
  REQUIRE(shapes.ok());
  const auto start = std::chrono::steady_clock::now();
  auto run = prepare_run(m, *f, nullptr, nullptr, *shapes, PrepareOptions{});
  REQUIRE_FALSE(run.ok());
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
  CHECK(run.error().message ==
        "the run's tensors need 275146342400 bytes together (inputs 134217728 bytes, random parameters "
        "274877906944 bytes, outputs 134217728 bytes; the largest, input 'x' of shape [16777216], 134217728 bytes), "
        "over the run's limit of 4294967296 bytes; nothing was allocated");
  // A size past 2^64 is refused, not wrapped: x of 2^61 elements as doubles, with
  // element and byte limits lifted.
  shapes = parse_shape_list("N=2305843009213693952");
  REQUIRE(shapes.ok());
  PrepareOptions no_cap;
  no_cap.max_elements = std::int64_t{1} << 62;
  no_cap.max_bytes = ~std::uint64_t{0};
  run = prepare_run(m, *f, nullptr, nullptr, *shapes, no_cap);
  REQUIRE_FALSE(run.ok());
  CHECK(run.error().message.find("the run's tensors need more than 2^64 bytes together") == 0);
  CHECK(run.error().message.find("the largest, input 'x' of shape [2305843009213693952], more than 2^64 bytes") !=
        std::string::npos);
}
