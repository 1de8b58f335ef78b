// SPDX-License-Identifier: Apache-2.0
// engine_testing.h - shared helpers of the engine tests: the BitLinear layer, buffers, the oracle.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <unistd.h>
#include <vector>

#include "bitlinear_source.h"
#include "ir/dsl/dsl.h"
#include "passes/pipeline.h"
#include "passes/specialize_shapes.h"
#include "ir/interpret.h"
#include "ir/tensor.h"
#include "ternjit/engine.h"

namespace ternjit::testing {

/// The README's BitLinear layer (BitNet b1.58): rmsnorm, int8 activations, ternary weights
/// (tests/dsl/bitlinear.tri, embedded at build time).
inline constexpr const char* kBitLinear = examples::kBitLinearSource;

/// BitNet b1.58's BitLinear on latent float weights (the QAT form) as IR text:
/// `relu(quantize_int8(x) @ ternarize_absmean(@L.w) + @L.b)`, symbols M, K, N.
inline constexpr const char* kQatBitLinear = R"(param @L.w : f32[K, N]
param @L.b : f32[N]

func @L.forward<M, K, N>(%x: f32[M, K]) -> f32[M, N] {
^entry:
  %w = param @L.w : f32[K, N]
  %q = quantize_int8 %x : f32[M, K]
  %t = ternarize_absmean %w : f32[K, N]
  %y = matmul %q, %t : f32[M, N]
  %b = param @L.b : f32[N]
  %z = add %y, %b : f32[M, N]
  %r = relu %z : f32[M, N]
  ret %r
}
)";

/// Options for a quiet reference engine whose trace lines are collected in `lines`.
struct TraceCapture {
  std::mutex mu;
  std::vector<std::string> lines;

  /// The options with verbose = 1 and a sink appending here.
  EngineOptions options(std::string target = "reference") {
    EngineOptions o;
    o.target = std::move(target);
    o.verbose = 1;
    o.trace = [this](std::string_view line) {
      std::lock_guard lock(mu);
      lines.emplace_back(line);
    };
    return o;
  }
  /// How many collected lines contain `needle`.
  int count(std::string_view needle) {
    std::lock_guard lock(mu);
    int n = 0;
    for (const std::string& l : lines) n += l.find(needle) != std::string::npos;
    return n;
  }
};

/// An engine on the reference target (the test fails if it cannot be created).
inline Engine reference_engine(EngineOptions o = {}) {
  if (o.target == "auto") o.target = "reference";
  auto e = Engine::create(o);
  REQUIRE_MESSAGE(e.ok(), (e.ok() ? "" : e.error().message));
  return std::move(e.value());
}

/// The BitLinear program of `engine` (the test fails if it does not compile).
inline Program bitlinear(Engine& engine) {
  auto p = engine.compile(kBitLinear, "bitlinear.tri");
  REQUIRE_MESSAGE(p.ok(), (p.ok() ? "" : p.error().message));
  return std::move(p.value());
}

/// A float vector as a TensorView (the vector must outlive the view).
inline TensorView view(std::vector<float>& v, std::vector<std::int64_t> shape) {
  return TensorView{v.data(), ElemKind::F32, std::move(shape)};
}
/// An int8 vector as a TensorView of `kind` (T2 or I8).
inline TensorView view(std::vector<std::int8_t>& v, std::vector<std::int64_t> shape, ElemKind kind = ElemKind::T2) {
  return TensorView{v.data(), kind, std::move(shape)};
}
/// A byte vector as a U8 TensorView (packed ternary data).
inline TensorView view(std::vector<std::uint8_t>& v, std::vector<std::int64_t> shape) {
  return TensorView{v.data(), ElemKind::U8, std::move(shape)};
}

/// Random floats in [-1, 1) from HostTensor::random (deterministic).
inline std::vector<float> random_f32(std::int64_t n, std::uint64_t seed) {
  return ir::HostTensor::random(ElemKind::F32, {n}, seed).to_f32();
}
/// Random ternary values from HostTensor::random (deterministic).
inline std::vector<std::int8_t> random_t2(std::int64_t n, std::uint64_t seed) {
  return ir::HostTensor::random(ElemKind::T2, {n}, seed).to_i8();
}

/// The BitLinear weights for K x N, with the oracle's ParamValues.
struct BitLinearWeights {
  std::int64_t K = 0, N = 0;
  std::vector<float> gamma, w_scale;
  std::vector<std::int8_t> w;

  BitLinearWeights(std::int64_t k, std::int64_t n, std::uint64_t seed)
      : K(k), N(n), gamma(random_f32(k, seed)), w_scale(random_f32(n, seed + 1)), w(random_t2(k * n, seed + 2)) {}

  /// Binds all three parameters from plain buffers.
  void bind(Program& p) {
    auto a = p.bind("BitLinear.gamma", view(gamma, {K}));
    REQUIRE_MESSAGE(a.ok(), (a.ok() ? "" : a.error().message));
    auto b = p.bind("BitLinear.w", view(w, {K, N}));
    REQUIRE_MESSAGE(b.ok(), (b.ok() ? "" : b.error().message));
    auto c = p.bind("BitLinear.w_scale", view(w_scale, {N}));
    REQUIRE_MESSAGE(c.ok(), (c.ok() ? "" : c.error().message));
  }
  /// The same values as interpreter parameters.
  [[nodiscard]] ir::ParamValues params() const {
    ir::ParamValues pv;
    pv.set("BitLinear.gamma", ir::HostTensor::from_f32({K}, gamma));
    ir::HostTensor wt = ir::HostTensor::from_i8({K, N}, w);
    wt.kind = ElemKind::T2;
    pv.set("BitLinear.w", std::move(wt));
    pv.set("BitLinear.w_scale", ir::HostTensor::from_f32({N}, w_scale));
    return pv;
  }
};

/// The oracle: ir::interpret of BitLinear.forward on x. With `level` set, on the module
/// the engine's stages make at that level for the reference target (specialize_function,
/// then the pipeline): the engine must match it bit for bit. Without, on the source
/// module as written (O2's int8 fusion rounds differently by a few ulps: compare with
/// `close`).
inline std::vector<float> oracle(const ir::ParamValues& params, const std::vector<float>& x, std::int64_t M,
                                 std::int64_t K, std::optional<int> level = 2) {
  auto m = dsl::compile_tri(kBitLinear, "bitlinear.tri");
  REQUIRE(m.ok());
  const ir::Module* run_on = &m.value();
  std::optional<ir::Module> spec;
  if (level) {
    const std::int64_t N = params.values.at("BitLinear.w_scale").shape().at(0);
    auto s = passes::specialize_function(*m, "BitLinear.forward",
                                         {{"BitLinear.M", M}, {"BitLinear.K", K}, {"BitLinear.N", N}}, true);
    REQUIRE_MESSAGE(s.ok(), (s.ok() ? "" : s.error().message));
    auto r = passes::run_pipeline(*s, passes::default_pipeline(static_cast<passes::OptLevel>(*level)),
                                  passes::PipelineOptions{});
    REQUIRE(r.ok());
    spec.emplace(std::move(s.value()));
    run_on = &*spec;
  }
  std::vector<ir::HostTensor> args{ir::HostTensor::from_f32({M, K}, x)};
  auto out = ir::interpret(*run_on, "BitLinear.forward", args, params);
  REQUIRE_MESSAGE(out.ok(), (out.ok() ? "" : out.error().message));
  return (*out)[0].to_f32();
}

/// True when every element agrees within numpy.isclose(rtol=1e-5, atol=1e-5).
inline bool close(const std::vector<float>& want, const std::vector<float>& got) {
  if (want.size() != got.size()) return false;
  for (std::size_t i = 0; i < want.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= 1e-5 + 1e-5 * std::fabs(want[i]))) return false;
  return true;
}

/// True when the two float vectors are bit-identical.
inline bool bit_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

/// A fresh empty directory under the system temp dir, removed by the destructor.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    static int counter = 0;
    path = std::filesystem::temp_directory_path() /
           ("ternjit_engine_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

/// REQUIREs that `r` failed and returns its message (for CHECKs on the wording).
template <class R>
std::string error_of(const R& r) {
  REQUIRE_FALSE(r.ok());
  return r.error().message;
}

}  // namespace ternjit::testing
