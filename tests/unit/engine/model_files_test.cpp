// SPDX-License-Identifier: Apache-2.0
// model_files_test.cpp - Program::bind_file on GGUF and Hugging Face files through every CPU target; sized binds.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <unistd.h>
#include <vector>

#include "formats/gguf.h"
#include "formats/mapped_file.h"
#include "formats/safetensors.h"
#include "targets/x86/isa.h"
#include "tests/unit/engine/engine_testing.h"
#include "tests/unit/formats/tq_testing.h"

namespace {

using namespace ternjit;
using namespace ternjit::testing;

// A BitLinear-like layer without activation quantization, so x @ W is compared with
// x @ (ggml's dequantized W)^T directly.
constexpr const char* kLayer =
    "layer G {\n"
    "    param w: TernaryTensor[K, N]\n"
    "    param w_scale: Tensor[N]\n"
    "    fn forward(x: Tensor[M, K]) -> Tensor[M, N] {\n"
    "        return (x @ w) * w_scale\n"
    "    }\n"
    "}\n";

// The message of a failed call, or "" (testing::error_of REQUIREs a failure).
std::string message_of(const Result<void>& r) { return r.ok() ? std::string() : r.error().message; }

// Every CPU engine configuration this machine has: the reference, x86 at each ISA it
// runs, LLVM. Unavailable ones are reported and left out.
std::vector<EngineOptions> cpu_configs() {
  std::vector<EngineOptions> out;
  EngineOptions ref;
  ref.target = "reference";
  out.push_back(ref);
  for (targets::x86::Isa isa : targets::x86::kAllIsas) {
    const std::string name(targets::x86::isa_name(isa));
    if (!targets::x86::host_isas().supports(isa)) {
      MESSAGE("x86 path " << name << " skipped: this CPU lacks it");
      continue;
    }
    EngineOptions o;
    o.target = "x86";
    o.target_options = "x86.max_isa=" + name;
    out.push_back(o);
  }
  EngineOptions llvm;
  llvm.target = "llvm";
  out.push_back(llvm);
  std::vector<EngineOptions> available;
  for (EngineOptions& o : out) {
    o.cache_dir = "off";
    auto e = Engine::create(o);
    if (e.ok()) available.push_back(o);
    else MESSAGE("target " << o.target << " skipped: " << e.error().message);
  }
  return available;
}

// Runs G.forward of a bound program at M = 1 and 3 on random x (poisoned outputs) and
// checks x @ W against x @ deq^T (deq: ggml's dequantized [N, K] rows) in double, each
// output within tol(n, sum|x|) of it.
template <class Tol>
void check_against_dequantized(Program& p, std::size_t K, std::size_t N, const std::vector<float>& deq,
                               std::uint64_t seed, Tol tol) {
  for (std::int64_t M : {1, 3}) {
    std::vector<float> x = random_f32(M * static_cast<std::int64_t>(K), seed + static_cast<std::uint64_t>(M));
    std::vector<float> y(static_cast<std::size_t>(M) * N, std::nanf(""));  // poisoned
    std::vector<TensorView> in{view(x, {M, static_cast<std::int64_t>(K)})};
    std::vector<TensorView> out{view(y, {M, static_cast<std::int64_t>(N)})};
    auto r = p.run("G.forward", in, out);
    REQUIRE_MESSAGE(r.ok(), message_of(r));
    for (std::int64_t m = 0; m < M; ++m) {
      for (std::size_t n = 0; n < N; ++n) {
        double want = 0, mag = 0;
        for (std::size_t k = 0; k < K; ++k) {
          want += static_cast<double>(x[static_cast<std::size_t>(m) * K + k]) * deq[n * K + k];
          mag += std::fabs(static_cast<double>(x[static_cast<std::size_t>(m) * K + k]));
        }
        const double got = y[static_cast<std::size_t>(m) * N + n];
        REQUIRE_MESSAGE(std::fabs(got - want) <= tol(n, mag), "m " << m << " n " << n << ": " << got << " vs " << want);
      }
    }
  }
}

}  // namespace

TEST_CASE("GGUF TQ1_0/TQ2_0 (v2 and v3): x @ W on every CPU target equals x @ (dequantized W)^T") {
  TempDir dir;
  const std::vector<EngineOptions> configs = cpu_configs();
  for (formats::GgufTensorType type : {formats::GgufTensorType::TQ2_0, formats::GgufTensorType::TQ1_0}) {
    for (std::uint32_t version : {3u, 2u}) {
      // Odd N (element by element), N % 64 == 0 (the 64-row word transposes), N % 4 == 0.
      const std::size_t K = 512, N = type == formats::GgufTensorType::TQ2_0 ? (version == 3 ? 7 : 64) : 12;
      std::vector<int> values(K * N);
      const std::vector<std::int8_t> t2 = random_t2(static_cast<std::int64_t>(K * N), 21 + version);
      for (std::size_t i = 0; i < values.size(); ++i) values[i] = t2[i];
      std::vector<float> scales;  // uniform along K, one d per row
      for (std::size_t n = 0; n < N; ++n) scales.insert(scales.end(), 2, 0.01f * static_cast<float>(n + 1));
      const formats::GgufTensor w = make_tq_tensor("G.w", type, K, N, values, scales);
      auto image = formats::serialize_gguf({}, std::vector{w});
      REQUIRE(image.ok());
      image.value()[4] = static_cast<std::uint8_t>(version);  // v2 and v3 share the little-endian layout
      const std::string path = (dir.path / ("w" + std::to_string(version) + ".bin")).string();
      REQUIRE(formats::write_file_atomic(path, image.value()).ok());
      const std::vector<float> deq = formats::dequantize_gguf(w).value();

      for (const EngineOptions& o : configs) {
        CAPTURE(o.target);
        CAPTURE(o.target_options);
        CAPTURE(formats::gguf_type_name(type));
        CAPTURE(version);
        Engine engine = Engine::create(o).value();
        auto p = engine.compile(kLayer, "g.tri");
        REQUIRE(p.ok());
        const auto bound = p->bind_file(path);
        REQUIRE_MESSAGE(bound.ok(), message_of(bound));
        // Any f32 summation order of K products of x with -1/0/1 errs by at most
        // (K - 1) u sum|x|, and the scale multiply by u |y|: (K + 1) u sum|x| |d|.
        check_against_dequantized(*p, K, N, deq, 5, [&](std::size_t n, double mag) {
          return static_cast<double>(K + 1) * std::ldexp(1.0, -24) * mag * scales[n * 2] + 1e-30;
        });
      }
    }
  }
}

TEST_CASE("GGUF bind errors: varying scales for Tensor[N], a dropped scale, a missing parameter's closest names") {
  TempDir dir;
  Engine engine = reference_engine();
  const std::size_t K = 512, N = 4;
  std::vector<int> values(K * N, 1);
  std::vector<float> varying{1, 2, 1, 1, 1, 1, 1, 1};
  const std::string vary_path = (dir.path / "vary.gguf").string();
  REQUIRE(formats::write_gguf(vary_path, {}, std::vector{make_tq_tensor("G.w", formats::GgufTensorType::TQ2_0, K, N, values, varying)}).ok());
  auto p = engine.compile(kLayer, "g.tri");
  REQUIRE(p.ok());
  const std::string vary = message_of(p->bind_file(vary_path));
  CHECK(vary.find("vary along K (row 0: d = 1 in block 0, 2 in block 1)") != std::string::npos);

  // A layer without a scale parameter cannot take scales other than 1.
  const std::string uniform_path = (dir.path / "u.gguf").string();
  REQUIRE(formats::write_gguf(uniform_path, {}, std::vector{make_tq_tensor("w", formats::GgufTensorType::TQ2_0, K, N, values, std::vector<float>(8, 0.5f))}).ok());
  auto noscale = engine.compile("layer H {\n param w: TernaryTensor[K, N]\n fn forward(x: Tensor[M, K]) -> Tensor[M, N] { return x @ w }\n}\n", "h.tri");
  REQUIRE(noscale.ok());
  const std::string dropped = message_of(noscale->bind_file(uniform_path));
  CHECK(dropped.find("TQ2_0 tensor 'w' has block scales other than 1, and no parameter 'w_scale' takes them") !=
        std::string::npos);

  // A parameter the file lacks: the run names it and the file's closest tensor.
  auto typo = engine.compile("layer G {\n param w: TernaryTensor[K, N]\n param w_scale: Tensor[N]\n param w_bias: Tensor[N]\n"
                             " fn forward(x: Tensor[M, K]) -> Tensor[M, N] { return (x @ w) * w_scale + w_bias }\n}\n",
                             "g.tri");
  REQUIRE(typo.ok());
  formats::StFile extra;
  extra.tensors.push_back(formats::make_f32_tensor("G.w_biass", {4}, std::vector<float>(4, 0.0f)));
  extra.tensors.push_back(formats::make_f32_tensor("G.w_scale", {4}, std::vector<float>(4, 0.5f)));
  const std::string extra_path = (dir.path / "extra.safetensors").string();
  REQUIRE(formats::write_safetensors(extra_path, extra).ok());
  REQUIRE(typo->bind_file(uniform_path).ok());
  REQUIRE(typo->bind_file(extra_path).ok());
  std::vector<float> x(K, 1.0f), y(N);
  std::vector<TensorView> in{view(x, {1, static_cast<std::int64_t>(K)})};
  std::vector<TensorView> out{view(y, {1, static_cast<std::int64_t>(N)})};
  const std::string missing = message_of(typo->run("G.forward", in, out));
  CHECK(missing.find("parameter 'G.w_bias' of 'G.forward' is not bound") != std::string::npos);
  CHECK(missing.find("(did you mean 'G.w_biass'?)") != std::string::npos);  // bound names are not suggested
}

TEST_CASE("Hugging Face packed checkpoint with a name map through Program::bind_file") {
  TempDir dir;
  const std::int64_t K = 8, N = 8;
  std::vector<std::int8_t> w = random_t2(N * K, 4);  // nn.Linear layout [N, K]
  std::vector<std::uint8_t> packed(static_cast<std::size_t>(N / 4 * K), 0);
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t k = 0; k < K; ++k)
      packed[static_cast<std::size_t>((n % 2) * K + k)] |=
          static_cast<std::uint8_t>((w[static_cast<std::size_t>(n * K + k)] + 1) << (2 * (n / 2)));
  formats::StFile st;
  st.tensors.push_back(formats::make_u8_tensor("model.layers.0.mlp.down_proj.weight", {N / 4, K}, packed));
  st.tensors.push_back(formats::make_f32_tensor("model.layers.0.mlp.down_proj.weight_scale", {1}, std::vector<float>{2.0f}));
  const std::string path = (dir.path / "model.safetensors").string();
  REQUIRE(formats::write_safetensors(path, st).ok());
  Engine engine = reference_engine();
  auto p = engine.compile(kLayer, "g.tri");
  REQUIRE(p.ok());
  const std::vector<std::string> map{"model.layers.0.mlp.down_proj.weight=G.w"};
  const auto bound = p->bind_file(path, map);
  REQUIRE_MESSAGE(bound.ok(), message_of(bound));
  std::vector<float> x = random_f32(K, 3), y(static_cast<std::size_t>(N));
  std::vector<TensorView> in{view(x, {1, K})};
  std::vector<TensorView> out{view(y, {1, N})};
  REQUIRE(p->run("G.forward", in, out).ok());
  for (std::int64_t n = 0; n < N; ++n) {
    double want = 0, mag = 0;
    for (std::int64_t k = 0; k < K; ++k) {
      want += x[static_cast<std::size_t>(k)] * w[static_cast<std::size_t>(n * K + k)] / 2.0;
      mag += std::fabs(x[static_cast<std::size_t>(k)]);
    }
    CHECK(std::fabs(y[static_cast<std::size_t>(n)] - want) <= static_cast<double>(K + 1) * std::ldexp(1.0, -24) * mag);
  }
}

TEST_CASE("sized bind: a buffer shorter or longer than the format needs is refused before reading") {
  Engine engine = reference_engine();
  Program p = bitlinear(engine);
  std::vector<std::uint8_t> ten(10, 0x55);
  const std::string msg = message_of(p.bind("BitLinear.w", view(ten, {64, 16}), WeightFormat::Tern2, ten.size()));
  CHECK(msg == "parameter 'BitLinear.w': shape [64, 16] in 'tern2' needs 256 bytes, the buffer has 10");
  std::vector<std::uint8_t> exact(256, 0x55);
  CHECK(p.bind("BitLinear.w", view(exact, {64, 16}), WeightFormat::Tern2, exact.size()).ok());
  CHECK(!p.bind("BitLinear.w", view(exact, {64, 16}), WeightFormat::Tern2, exact.size() + 1).ok());
  std::vector<float> gamma(64, 1.0f);
  CHECK(p.bind("BitLinear.gamma", view(gamma, {64}), WeightFormat::Plain, 256).ok());
  CHECK(message_of(p.bind("BitLinear.gamma", view(gamma, {64}), WeightFormat::Plain, 255)).find("needs 256 bytes") !=
        std::string::npos);
}

TEST_CASE("GGUF scales varying along K bind Tensor[G, N] and run as grouped_matmul on every CPU target") {
  // ggml dequantizes block b of row n as d[n, b] * value; the layer consumes the block
  // scales with grouped_matmul (group 256, the TQ block), so x @ W must equal
  // x @ (dequantized W)^T within float rounding on every target.
  constexpr const char* kGrouped =
      "layer G {\n"
      "    param w: TernaryTensor[K, N]\n"
      "    param w_scale: Tensor[G, N]\n"
      "    fn forward(x: Tensor[M, K]) -> Tensor[M, N] {\n"
      "        return grouped_matmul(x, w, w_scale)\n"
      "    }\n"
      "}\n";
  TempDir dir;
  const std::vector<EngineOptions> configs = cpu_configs();
  for (formats::GgufTensorType type : {formats::GgufTensorType::TQ2_0, formats::GgufTensorType::TQ1_0}) {
    const std::size_t K = 768, G = 3, N = 5;
    std::vector<int> values(K * N);
    const std::vector<std::int8_t> t2 = random_t2(static_cast<std::int64_t>(K * N), 77);
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = t2[i];
    std::vector<float> scales;  // row n, block b: distinct along K
    for (std::size_t n = 0; n < N; ++n)
      for (std::size_t b = 0; b < G; ++b) scales.push_back(0.01f * static_cast<float>(n + 1) * static_cast<float>(b + 2));
    const formats::GgufTensor w = make_tq_tensor("G.w", type, K, N, values, scales);
    const std::string path = (dir.path / (std::string(formats::gguf_type_name(type)) + ".gguf")).string();
    REQUIRE(formats::write_gguf(path, {}, std::vector{w}).ok());
    const std::vector<float> deq = formats::dequantize_gguf(w).value();
    double smax = 0;
    for (float s : scales) smax = std::max(smax, static_cast<double>(std::fabs(s)));

    for (const EngineOptions& o : configs) {
      CAPTURE(o.target);
      CAPTURE(o.target_options);
      CAPTURE(formats::gguf_type_name(type));
      Engine engine = Engine::create(o).value();
      auto p = engine.compile(kGrouped, "g.tri");
      REQUIRE(p.ok());
      const auto bound = p->bind_file(path);
      REQUIRE_MESSAGE(bound.ok(), message_of(bound));
      // Each group's f32 sum of x * (-1/0/1) errs by (K/G - 1) u sum|x_g|, its scale
      // multiply and the G-term f32 sum of scaled groups add (G + 1) u: at most
      // (K + G + 1) u sum|x| max|s| in any summation order.
      check_against_dequantized(*p, K, N, deq, 9, [&](std::size_t, double mag) {
        return static_cast<double>(K + G + 1) * std::ldexp(1.0, -24) * mag * smax + 1e-30;
      });
    }
  }
}
