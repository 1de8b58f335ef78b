// SPDX-License-Identifier: Apache-2.0
// demo.cpp - `ternjit demo`: an embedded BitLinear layer compiled, run and checked.
//
// The check is independent of the compiler: the same layer is computed again below with
// plain loops written from the ops' definitions in ir/README.md (rmsnorm, per-row absmax int8
// quantization, ternary matmul, per-channel scale, relu), and the two must agree.
#include <cmath>
#include <cstdio>

#include "bitlinear_source.h"
#include "ir/bind.h"
#include "ir/dsl/dsl.h"
#include "ir/interpret.h"
#include "ir/print.h"
#include "passes/pipeline.h"
#include "passes/specialize_shapes.h"
#include "tools/ternjit/commands.h"

namespace ternjit::cli {

namespace {

// The layer by hand: returns y[M, N].
std::vector<double> by_hand(const ir::HostTensor& x, const ir::HostTensor& gamma, const ir::HostTensor& w,
                            const ir::HostTensor& scale, std::int64_t M, std::int64_t K, std::int64_t N) {
  std::vector<double> y(static_cast<std::size_t>(M * N));
  std::vector<float> q(static_cast<std::size_t>(K));
  for (std::int64_t m = 0; m < M; ++m) {
    double ms = 0;
    for (std::int64_t k = 0; k < K; ++k) ms += x.data[m * K + k] * x.data[m * K + k];
    ms /= static_cast<double>(K);
    float amax = 0;
    for (std::int64_t k = 0; k < K; ++k) {
      q[k] = static_cast<float>(x.data[m * K + k] / std::sqrt(ms + 1e-5) * gamma.data[k]);
      amax = std::max(amax, std::fabs(q[k]));
    }
    float s = amax / 127.0f;
    for (std::int64_t k = 0; k < K; ++k) {
      float v = s == 0 ? 0.0f : std::nearbyint(q[k] / s);
      q[k] = std::min(127.0f, std::max(-127.0f, v)) * s;
    }
    for (std::int64_t n = 0; n < N; ++n) {
      double acc = 0;
      for (std::int64_t k = 0; k < K; ++k) acc += static_cast<double>(q[k]) * w.data[k * N + n];
      y[m * N + n] = std::max(0.0, static_cast<double>(static_cast<float>(acc)) * scale.data[n]);
    }
  }
  return y;
}

}  // namespace

int cmd_demo() {
  std::printf("== source (tests/dsl/bitlinear.tri, embedded at build time)\n%s\n", examples::kBitLinearSource);
  auto m = dsl::compile_tri(examples::kBitLinearSource, "bitlinear.tri");
  if (!m.ok()) return report(m.error());
  std::printf("== IR\n%s\n", ir::print_module(*m).c_str());

  const std::int64_t M = 3, K = 64, N = 8;
  const ir::Function* f = m->find_function("BitLinear.forward");
  auto shapes = ir::parse_shape_list("M=3,K=64,N=8");
  if (!f || !shapes.ok()) return report(make_error(ErrorCode::Internal, "demo layer missing"));
  auto run = formats::prepare_run(*m, *f, nullptr, nullptr, shapes.value(), formats::PrepareOptions{});
  if (!run.ok()) return report(run.error());
  // What the engine compiles: the layer specialized for these shapes after the O2 pipeline.
  auto spec = passes::specialize_function(*m, "BitLinear.forward", shapes->values, /*require_static=*/true);
  if (!spec.ok()) return report(spec.error());
  auto optimized = passes::run_pipeline(*spec, passes::default_pipeline(passes::OptLevel::O2), {});
  if (!optimized.ok()) return report(optimized.error());
  std::printf("== specialized for M=3 K=64 N=8 and optimized at O2\n%s\n", ir::print_module(*spec).c_str());
  auto options = EngineOptions::from_env();
  if (!options.ok()) return report(options.error());
  options->target = "auto";
  auto out = run_on_engine(*options, *m, "BitLinear.forward", *run);
  if (!out.ok()) return report(out.error());

  const auto& p = run->params.values;
  std::vector<double> want = by_hand(run->args[0], p.at("BitLinear.gamma").to_host(), p.at("BitLinear.w").to_host(),
                                     p.at("BitLinear.w_scale").to_host(), M, K, N);
  const ir::HostTensor& got = (*out)[0];
  double max_err = 0;
  for (std::size_t i = 0; i < want.size(); ++i)
    max_err = std::max(max_err, std::fabs(got.data[i] - want[i]) / std::max(1.0, std::fabs(want[i])));
  std::printf("== run through the engine (target auto): M=%lld K=%lld N=%lld (random inputs, seed 1)\n",
              static_cast<long long>(M), static_cast<long long>(K), static_cast<long long>(N));
  for (std::int64_t r = 0; r < M; ++r) {
    std::printf("  y[%lld] =", static_cast<long long>(r));
    for (std::int64_t c = 0; c < N; ++c) std::printf(" %.5f", got.data[r * N + c]);
    std::printf("\n");
  }
  // Tolerance: the two computations round to f32 at different points (the fused kernel
  // scales an exact int32 sum, the check sums rounded products in double); 1e-5 relative
  // is far below one int8 quantization step.
  bool ok = got.data.size() == want.size() && max_err <= 1e-5;
  std::printf("== check against an independent computation: max relative error %.3g -> %s\n", max_err,
              ok ? "OK" : "MISMATCH");
  return ok ? 0 : 1;
}

}  // namespace ternjit::cli
