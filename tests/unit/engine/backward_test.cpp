// SPDX-License-Identifier: Apache-2.0
// backward_test.cpp - ternjit::grad's functions compiled and run on every CPU target against the interpreter.
//
// The module gets `.fwd`/`.bwd` from ternjit::grad and runs through the engine (O2) on
// the reference target, x86 at every ISA with 1 and 2 threads, and llvm, with odd
// shapes and M in {1, 3, 17}, outputs poisoned with NaN. The oracle is ir::interpret of
// the module as written (no pipeline).
// Tolerances: the forward's int8 x ternary accumulation is exact everywhere, but the
// pipeline's int8 rewrite multiplies the exact sum by the scales instead of summing the
// rounded products (ir/README.md, tmatmul), and the targets sum float products in f32
// in their own order. Each gradient element is a sum of at most P = max(M, K, N) f32
// products of O(1) values after a few f32 elementwise steps, so it is off by at most
// about P u sum|terms| (u = 2^-24); with these zero-mean random inputs sum|terms| stays
// within 4 sqrt(P) max|result| of the tensor, giving |got - want| <= 4 P^1.5 u max|want|
// (+ 2^-20 for outputs that are near 0 throughout). A wrong rule or a stale weight
// layout is off by O(max|want|). The BitLinear's `.fwd` (the int8 integer path) must
// also equal the reference target's output bit for bit on every target.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "ir/interpret.h"
#include "ir/module_impl.h"
#include "tests/unit/engine/cpu_targets_testing.h"
#include "tests/unit/engine/engine_testing.h"
#include "ternjit/builder.h"

namespace ternjit {
namespace {

constexpr double kU = 0x1p-24;

// BitNet b1.58's BitLinear on latent float weights (the QAT form).
constexpr const char* kLayer = testing::kQatBitLinear;

// Normalization, softmax, a float matmul by an argument, gelu and a mean.
constexpr const char* kBlock = R"(func @B.forward<M, N>(%x: f32[M, N], %g: f32[N], %v: f32[N, N]) -> f32[M, N] {
^entry:
  %h = rmsnorm %x, %g {eps = 1e-05} : f32[M, N]
  %s = softmax %h {axis = 1} : f32[M, N]
  %m = matmul %s, %v : f32[M, N]
  %a = gelu %m : f32[M, N]
  %r = reduce_mean %a {axis = 1, keepdims = true} : f32[M, 1]
  %o = sub %a, %r : f32[M, N]
  ret %o
}
)";

Module with_grad(const char* text, const char* fn, std::vector<std::string> wrt, bool int8_dx = false,
                 bool int8_dw = false) {
  auto m = Module::from_text(text, "backward_test.tir");
  REQUIRE_MESSAGE(m.ok(), (m.ok() ? "" : render(m.error())));
  GradOptions o;
  o.wrt = std::move(wrt);
  o.int8_dx = int8_dx;
  o.int8_dw = int8_dw;
  auto g = grad(*m, fn, o);
  REQUIRE_MESSAGE(g.ok(), (g.ok() ? "" : render(g.error())));
  return std::move(m).value();
}

// A view of `t` in its own kind (saved tensors may be i8: int8_dw saves the activation codes).
TensorView view_of(ir::HostTensor& t, std::vector<std::uint8_t>& storage) {
  storage = t.to_bytes();
  return TensorView{storage.data(), t.kind, t.shape};
}

// Runs `fn` on `target` and checks every output against the interpreter's; returns the outputs.
std::vector<std::vector<float>> check_on(Program& p, const std::string& label, const std::string& fn,
                                         std::vector<ir::HostTensor> inputs, const std::vector<ir::HostTensor>& want,
                                         std::int64_t P) {
  CAPTURE(label);
  CAPTURE(fn);
  std::vector<std::vector<std::uint8_t>> in_storage(inputs.size());
  std::vector<TensorView> ins;
  for (std::size_t i = 0; i < inputs.size(); ++i) ins.push_back(view_of(inputs[i], in_storage[i]));
  // Outputs in their own kinds (int8_dw saves i8 codes), poisoned: f32 with NaN, others 0xAB.
  std::vector<std::vector<std::uint8_t>> out_bytes;
  std::vector<TensorView> outs;
  for (const ir::HostTensor& w : want) {
    out_bytes.emplace_back(w.to_bytes().size(), std::uint8_t{0xAB});
    if (w.kind == ElemKind::F32)
      for (std::size_t i = 0; i + 4 <= out_bytes.back().size(); i += 4) {
        const float nan = std::nanf("");
        std::memcpy(out_bytes.back().data() + i, &nan, 4);
      }
  }
  for (std::size_t k = 0; k < want.size(); ++k) outs.push_back(TensorView{out_bytes[k].data(), want[k].kind, want[k].shape});
  auto r = p.run(fn, ins, outs);
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
  std::vector<std::vector<float>> out_storage;
  for (std::size_t k = 0; k < want.size(); ++k) {
    auto got = ir::HostTensor::from_bytes(want[k].kind, want[k].shape, out_bytes[k]);
    REQUIRE_MESSAGE(got.ok(), (got.ok() ? "" : got.error().message));
    out_storage.push_back(got->to_f32());
  }
  for (std::size_t k = 0; k < want.size(); ++k) {
    double max_abs = 0;
    for (double v : want[k].data) max_abs = std::max(max_abs, std::fabs(v));
    const double tol = 4 * std::pow(static_cast<double>(P), 1.5) * kU * max_abs + 0x1p-20;
    for (std::size_t i = 0; i < want[k].data.size(); ++i) {
      INFO("output ", k, " element ", i, ": want ", want[k].data[i], " got ", out_storage[k][i], " tol ", tol);
      CHECK(std::fabs(out_storage[k][i] - want[k].data[i]) <= tol);  // NaN (poison left) fails
    }
  }
  return out_storage;
}

std::vector<ir::HostTensor> interpret(const Module& m, const std::string& fn, const std::vector<ir::HostTensor>& args,
                                      const ir::ParamValues& params) {
  auto out = ir::interpret(ir::unwrap(m), fn, args, params);
  REQUIRE_MESSAGE(out.ok(), (out.ok() ? "" : out.error().message));
  return std::move(out).value();
}

// The interpreter's `fn.fwd` on x, then `fn.bwd` on x, dy and the saved tensors: (the
// forward's results, the gradients); `args_out` receives the backward's arguments.
std::pair<std::vector<ir::HostTensor>, std::vector<ir::HostTensor>> forward_backward(
    const Module& m, const std::string& fn, const ir::HostTensor& x, const ir::HostTensor& dy,
    const ir::ParamValues& params, std::vector<ir::HostTensor>* args_out = nullptr) {
  std::vector<ir::HostTensor> fwd = interpret(m, fn + ".fwd", {x}, params);
  std::vector<ir::HostTensor> args{x, dy};
  args.insert(args.end(), fwd.begin() + 1, fwd.end());
  if (args_out) *args_out = args;
  return {std::move(fwd), interpret(m, fn + ".bwd", args, params)};
}

struct Shape {
  std::int64_t M, K, N;
};
const Shape kShapes[] = {{1, 67, 9}, {3, 100, 33}, {17, 45, 5}};

TEST_CASE("grad: the BitLinear backward (STE, W^T ternary matmul) on every CPU target, odd shapes, 1 and 2 threads") {
  const Module m = with_grad(kLayer, "L.forward", {"x", "@L.w", "@L.b"});
  std::vector<std::string> skipped;
  const auto targets = testing::cpu_targets(&skipped);
  for (const std::string& s : skipped) MESSAGE("not run: " << s);
  for (const Shape& sh : kShapes) {
    CAPTURE(sh.M);
    CAPTURE(sh.K);
    CAPTURE(sh.N);
    const auto seed = static_cast<std::uint64_t>(sh.M * 1000 + sh.K * 10 + sh.N);
    ir::ParamValues params;
    ir::HostTensor w = ir::HostTensor::random(ElemKind::F32, {sh.K, sh.N}, seed);
    ir::HostTensor b = ir::HostTensor::random(ElemKind::F32, {sh.N}, seed + 1);
    params.set("L.w", w);
    params.set("L.b", b);
    const ir::HostTensor x = ir::HostTensor::random(ElemKind::F32, {sh.M, sh.K}, seed + 2);
    const std::vector<ir::HostTensor> fwd = interpret(m, "L.forward.fwd", {x}, params);
    std::vector<ir::HostTensor> bwd_args{x, ir::HostTensor::random(ElemKind::F32, {sh.M, sh.N}, seed + 3)};
    bwd_args.insert(bwd_args.end(), fwd.begin() + 1, fwd.end());
    const std::vector<ir::HostTensor> bwd = interpret(m, "L.forward.bwd", bwd_args, params);
    const std::int64_t P = std::max({sh.M, sh.K, sh.N});
    std::vector<std::vector<float>> reference_fwd;  // targets[0] is the reference target
    for (const testing::CpuTarget& t : targets) {
      auto e = Engine::create(t.options);
      REQUIRE_MESSAGE(e.ok(), (e.ok() ? "" : e.error().message));
      auto p = e->compile(m);
      REQUIRE_MESSAGE(p.ok(), (p.ok() ? "" : p.error().message));
      std::vector<float> ws = w.to_f32(), bs = b.to_f32();
      REQUIRE(p->bind("L.w", TensorView{ws.data(), ElemKind::F32, w.shape}).ok());
      REQUIRE(p->bind("L.b", TensorView{bs.data(), ElemKind::F32, b.shape}).ok());
      const auto y = check_on(*p, t.label, "L.forward.fwd", {x}, fwd, P);
      // The forward's integer path (int8 x ternary, exact int32 sums, then the f32
      // epilogue) is bit-exact across targets: compared with the reference target's.
      if (t.label == "reference") reference_fwd = y;
      else CHECK_MESSAGE(y == reference_fwd, t.label, ": .fwd differs from the reference target's");
      check_on(*p, t.label, "L.forward.bwd", bwd_args, bwd, P);
    }
  }
}

TEST_CASE("grad: int8_dx (dy quantized per row, dx on the int8 ternary kernel) on every CPU target, within its bound") {
  // Each target against the interpreter of the int8_dx module (the tolerance above: the
  // int8 codes are the same everywhere, the int32 sums exact), and the interpreter's
  // int8 dx against the exact one: |dx - dx_exact|[m, k] <= gamma sum_n |T[k, n]| s_m / 2
  // with s_m = max_n |dy'[m, n]| / 127 (dy' = dy masked by relu', what is quantized) and
  // gamma = mean|W|, plus f32 rounding (P u max|dx| as above). dW is the exact one.
  const Module m8 = with_grad(kLayer, "L.forward", {"x", "@L.w"}, true);
  const Module exact = with_grad(kLayer, "L.forward", {"x", "@L.w"}, false);
  std::vector<std::string> skipped;
  const auto targets = testing::cpu_targets(&skipped);
  for (const Shape& sh : kShapes) {
    CAPTURE(sh.M);
    CAPTURE(sh.K);
    CAPTURE(sh.N);
    const auto seed = static_cast<std::uint64_t>(sh.M * 1000 + sh.K * 10 + sh.N + 7);
    ir::ParamValues params;
    ir::HostTensor w = ir::HostTensor::random(ElemKind::F32, {sh.K, sh.N}, seed);
    ir::HostTensor b = ir::HostTensor::random(ElemKind::F32, {sh.N}, seed + 1);
    params.set("L.w", w);
    params.set("L.b", b);
    const ir::HostTensor x = ir::HostTensor::random(ElemKind::F32, {sh.M, sh.K}, seed + 2);
    const ir::HostTensor dy = ir::HostTensor::random(ElemKind::F32, {sh.M, sh.N}, seed + 3);
    const std::vector<ir::HostTensor> fwd = interpret(m8, "L.forward.fwd", {x}, params);
    std::vector<ir::HostTensor> bwd_args{x, dy};
    bwd_args.insert(bwd_args.end(), fwd.begin() + 1, fwd.end());
    const std::vector<ir::HostTensor> bwd = interpret(m8, "L.forward.bwd", bwd_args, params);
    const std::vector<ir::HostTensor> fwd_exact = interpret(exact, "L.forward.fwd", {x}, params);
    std::vector<ir::HostTensor> exact_args{x, dy};
    exact_args.insert(exact_args.end(), fwd_exact.begin() + 1, fwd_exact.end());
    const std::vector<ir::HostTensor> want = interpret(exact, "L.forward.bwd", exact_args, params);
    const std::int64_t P = std::max({sh.M, sh.K, sh.N});

    // The bound, from the layer's definition (relu mask from the forward's output y).
    double gamma = 0;
    for (double v : w.data) gamma += std::fabs(v);
    gamma /= static_cast<double>(w.data.size());
    double max_dx = 0;
    for (double v : want[0].data) max_dx = std::max(max_dx, std::fabs(v));
    bool differs = false;
    for (std::int64_t i = 0; i < sh.M; ++i) {
      double row_max = 0;
      for (std::int64_t n = 0; n < sh.N; ++n)
        if (fwd[0].data[static_cast<std::size_t>(i * sh.N + n)] > 0)
          row_max = std::max(row_max, std::fabs(dy.data[static_cast<std::size_t>(i * sh.N + n)]));
      for (std::int64_t k = 0; k < sh.K; ++k) {
        double nonzero = 0;
        for (std::int64_t n = 0; n < sh.N; ++n)
          // T[k, n] != 0 where |w| / gamma rounds to 1 (0.49: generous at the f32 tie).
          nonzero += std::fabs(w.data[static_cast<std::size_t>(k * sh.N + n)] / gamma) >= 0.49 ? 1 : 0;
        const double bound = gamma * nonzero * row_max / 254 + 4 * std::pow(static_cast<double>(P), 1.5) * kU * max_dx + 0x1p-20;
        const auto at = static_cast<std::size_t>(i * sh.K + k);
        INFO("dx[", i, ", ", k, "]: int8 ", bwd[0].data[at], " exact ", want[0].data[at], " bound ", bound);
        CHECK(std::fabs(bwd[0].data[at] - want[0].data[at]) <= bound);
        differs = differs || bwd[0].data[at] != want[0].data[at];
      }
    }
    CHECK(differs);  // the option changed dx: it is not the exact path under another name
    CHECK(!ir::compare(want[1], bwd[1], 0, 0));  // dW is the exact one, bit for bit

    for (const testing::CpuTarget& t : targets) {
      auto e = Engine::create(t.options);
      REQUIRE_MESSAGE(e.ok(), (e.ok() ? "" : e.error().message));
      auto p = e->compile(m8);
      REQUIRE_MESSAGE(p.ok(), (p.ok() ? "" : p.error().message));
      std::vector<float> ws = w.to_f32(), bs = b.to_f32();
      REQUIRE(p->bind("L.w", TensorView{ws.data(), ElemKind::F32, w.shape}).ok());
      REQUIRE(p->bind("L.b", TensorView{bs.data(), ElemKind::F32, b.shape}).ok());
      check_on(*p, t.label, "L.forward.fwd", {x}, fwd, P);
      check_on(*p, t.label, "L.forward.bwd", bwd_args, bwd, P);
    }
  }
}

TEST_CASE("grad: int8_dw (dW as an exact int8 x int8 matmul, the gradient quantized per column) on every CPU target, "
          "within its bound") {
  // The interpreter's int8_dw dW against the exact one. x is quantize_int8's: codes
  // xq[m, k] (|xq| <= |x[m, k]| / s_m + 1/2, s_m = max_k |x[m, k]| / 127) times s_m; the
  // pass folds s_m into the gradient, g'[m, n] = dy'[m, n] s_m (dy' = dy masked by relu'),
  // and quantizes g' per column n to steps t_n = max_m |g'[m, n]| / 127, each code within
  // t_n / 2 of g' / t_n. The integer sum is exact, so
  //   |dW - dW_exact|[k, n] <= sum_m |xq[m, k]| t_n / 2
  // plus f32 rounding (the exact path's own and ours: P u max|dW| as above, generous).
  // dx is untouched by the option (bit for bit the exact one) unless int8_dx is also set.
  // Each target runs the int8_dw module (with int8_dx too) against its interpreter.
  const Module m8 = with_grad(kLayer, "L.forward", {"x", "@L.w"}, false, true);
  const Module both = with_grad(kLayer, "L.forward", {"x", "@L.w"}, true, true);
  const Module exact = with_grad(kLayer, "L.forward", {"x", "@L.w"}, false, false);
  std::vector<std::string> skipped;
  const auto targets = testing::cpu_targets(&skipped);
  for (const Shape& sh : kShapes) {
    CAPTURE(sh.M);
    CAPTURE(sh.K);
    CAPTURE(sh.N);
    const auto seed = static_cast<std::uint64_t>(sh.M * 1000 + sh.K * 10 + sh.N + 11);
    ir::ParamValues params;
    ir::HostTensor w = ir::HostTensor::random(ElemKind::F32, {sh.K, sh.N}, seed);
    ir::HostTensor b = ir::HostTensor::random(ElemKind::F32, {sh.N}, seed + 1);
    params.set("L.w", w);
    params.set("L.b", b);
    const ir::HostTensor x = ir::HostTensor::random(ElemKind::F32, {sh.M, sh.K}, seed + 2);
    const ir::HostTensor dy = ir::HostTensor::random(ElemKind::F32, {sh.M, sh.N}, seed + 3);
    std::vector<ir::HostTensor> args8, args_both;
    const auto [fwd, got] = forward_backward(m8, "L.forward", x, dy, params, &args8);
    const auto [fwd_both, got_both] = forward_backward(both, "L.forward", x, dy, params, &args_both);
    const auto [fwd_exact, want] = forward_backward(exact, "L.forward", x, dy, params);
    const std::int64_t P = std::max({sh.M, sh.K, sh.N});
    CHECK(!ir::compare(want[0], got[0], 0, 0));  // dx is the exact one, bit for bit

    double max_dw = 0;
    for (double v : want[1].data) max_dw = std::max(max_dw, std::fabs(v));
    std::vector<double> s(static_cast<std::size_t>(sh.M)), t(static_cast<std::size_t>(sh.N), 0.0);
    for (std::int64_t i = 0; i < sh.M; ++i) {
      double mx = 0;
      for (std::int64_t k = 0; k < sh.K; ++k) mx = std::max(mx, std::fabs(x.data[static_cast<std::size_t>(i * sh.K + k)]));
      s[static_cast<std::size_t>(i)] = mx / 127;
      for (std::int64_t n = 0; n < sh.N; ++n) {
        const auto at = static_cast<std::size_t>(i * sh.N + n);
        if (fwd[0].data[at] > 0) t[static_cast<std::size_t>(n)] = std::max(t[static_cast<std::size_t>(n)], std::fabs(dy.data[at]) * mx / 127 / 127);
      }
    }
    bool differs = false;
    for (std::int64_t k = 0; k < sh.K; ++k)
      for (std::int64_t n = 0; n < sh.N; ++n) {
        double codes = 0;
        for (std::int64_t i = 0; i < sh.M; ++i) {
          const double si = s[static_cast<std::size_t>(i)];
          codes += si > 0 ? std::fabs(x.data[static_cast<std::size_t>(i * sh.K + k)]) / si + 0.5 : 0;
        }
        const double bound = codes * t[static_cast<std::size_t>(n)] / 2 * (1 + 0x1p-20) +
                             4 * std::pow(static_cast<double>(P), 1.5) * kU * max_dw + 0x1p-20;
        const auto at = static_cast<std::size_t>(k * sh.N + n);
        INFO("dW[", k, ", ", n, "]: int8 ", got[1].data[at], " exact ", want[1].data[at], " bound ", bound);
        CHECK(std::fabs(got[1].data[at] - want[1].data[at]) <= bound);
        differs = differs || got[1].data[at] != want[1].data[at];
      }
    if (sh.M > 1) CHECK(differs);  // the option changed dW (M = 1: one code per column, exact up to rounding)
    CHECK(!ir::compare(got[1], got_both[1], 0, 0));  // int8_dx does not change dW

    for (const testing::CpuTarget& t : targets) {
      for (const auto* mod : {&m8, &both}) {
        auto e = Engine::create(t.options);
        REQUIRE_MESSAGE(e.ok(), (e.ok() ? "" : e.error().message));
        auto p = e->compile(*mod);
        REQUIRE_MESSAGE(p.ok(), (p.ok() ? "" : p.error().message));
        std::vector<float> ws = w.to_f32(), bs = b.to_f32();
        REQUIRE(p->bind("L.w", TensorView{ws.data(), ElemKind::F32, w.shape}).ok());
        REQUIRE(p->bind("L.b", TensorView{bs.data(), ElemKind::F32, b.shape}).ok());
        const bool is_both = mod == &both;
        check_on(*p, t.label, "L.forward.fwd", {x}, is_both ? fwd_both : fwd, P);
        check_on(*p, t.label, "L.forward.bwd", is_both ? args_both : args8, is_both ? got_both : got, P);
      }
    }
  }
}

// A TernaryTensor parameter (t2 weights, no latent float copy in the module) with a
// per-channel scale after the matmul, as bitnet_tri_source's projections are written.
constexpr const char* kTernaryParamLayer = R"(param @T.w : t2[K, N]
param @T.s : f32[N]

func @T.forward<M, K, N>(%x: f32[M, K]) -> f32[M, N] {
^entry:
  %q = quantize_int8 %x : f32[M, K]
  %w = param @T.w : t2[K, N]
  %y = matmul %q, %w : f32[M, N]
  %s = param @T.s : f32[N]
  %z = mul %y, %s : f32[M, N]
  ret %z
}
)";

TEST_CASE("grad: int8_dx and int8_dw act on a TernaryTensor parameter (quantize_int8(x) @ w * s), within their bounds") {
  // The matmul's incoming gradient is g = dy * s (the per-channel scale), so the bounds of
  // docs/training.md hold with g in place of dy:
  //   |dx - dx_exact|[m, k] <= sum_n |T[k, n]| max_n |g[m, n]| / 254
  //   |dW - dW_exact|[k, n] <= t_n / 2 sum_m |xq[m, k]|,  t_n = max_m |g[m, n] x_s[m]| / 127
  // plus f32 rounding (P u max|result| as above). Both must differ from the exact ones:
  // the options act on a t2 parameter as on ternarize_absmean(p).
  const Module m8 = with_grad(kTernaryParamLayer, "T.forward", {"x", "@T.w"}, true, true);
  const Module exact = with_grad(kTernaryParamLayer, "T.forward", {"x", "@T.w"}, false, false);
  std::vector<std::string> skipped;
  const auto targets = testing::cpu_targets(&skipped);
  for (const Shape& sh : kShapes) {
    CAPTURE(sh.M);
    CAPTURE(sh.K);
    CAPTURE(sh.N);
    const auto seed = static_cast<std::uint64_t>(sh.M * 1000 + sh.K * 10 + sh.N + 13);
    ir::ParamValues params;
    const ir::HostTensor w = ir::HostTensor::random(ElemKind::T2, {sh.K, sh.N}, seed);
    const ir::HostTensor s = ir::HostTensor::random(ElemKind::F32, {sh.N}, seed + 1);
    params.set("T.w", w);
    params.set("T.s", s);
    const ir::HostTensor x = ir::HostTensor::random(ElemKind::F32, {sh.M, sh.K}, seed + 2);
    const ir::HostTensor dy = ir::HostTensor::random(ElemKind::F32, {sh.M, sh.N}, seed + 3);
    std::vector<ir::HostTensor> args8;
    const auto [fwd, got] = forward_backward(m8, "T.forward", x, dy, params, &args8);
    const auto [fwd_exact, want] = forward_backward(exact, "T.forward", x, dy, params);
    const std::int64_t P = std::max({sh.M, sh.K, sh.N});
    auto at2 = [](std::int64_t i, std::int64_t j, std::int64_t cols) { return static_cast<std::size_t>(i * cols + j); };
    double max_dx = 0, max_dw = 0;
    for (double v : want[0].data) max_dx = std::max(max_dx, std::fabs(v));
    for (double v : want[1].data) max_dw = std::max(max_dw, std::fabs(v));
    const double round_dx = 4 * std::pow(static_cast<double>(P), 1.5) * kU * max_dx + 0x1p-20;
    const double round_dw = 4 * std::pow(static_cast<double>(P), 1.5) * kU * max_dw + 0x1p-20;

    std::vector<double> xs(static_cast<std::size_t>(sh.M)), t(static_cast<std::size_t>(sh.N), 0.0);
    bool dx_differs = false, dw_differs = false;
    for (std::int64_t i = 0; i < sh.M; ++i) {
      double g_max = 0, x_max = 0;
      for (std::int64_t n = 0; n < sh.N; ++n) g_max = std::max(g_max, std::fabs(dy.data[at2(i, n, sh.N)] * s.data[static_cast<std::size_t>(n)]));
      for (std::int64_t k = 0; k < sh.K; ++k) x_max = std::max(x_max, std::fabs(x.data[at2(i, k, sh.K)]));
      xs[static_cast<std::size_t>(i)] = x_max / 127;
      for (std::int64_t n = 0; n < sh.N; ++n)
        t[static_cast<std::size_t>(n)] = std::max(t[static_cast<std::size_t>(n)],
                                                  std::fabs(dy.data[at2(i, n, sh.N)] * s.data[static_cast<std::size_t>(n)]) * x_max / 127 / 127);
      for (std::int64_t k = 0; k < sh.K; ++k) {
        double nonzero = 0;
        for (std::int64_t n = 0; n < sh.N; ++n) nonzero += w.data[at2(k, n, sh.N)] != 0 ? 1 : 0;
        const double bound = nonzero * g_max / 254 * (1 + 0x1p-20) + round_dx;
        const std::size_t e = at2(i, k, sh.K);
        INFO("dx[", i, ", ", k, "]: int8 ", got[0].data[e], " exact ", want[0].data[e], " bound ", bound);
        CHECK(std::fabs(got[0].data[e] - want[0].data[e]) <= bound);
        dx_differs = dx_differs || got[0].data[e] != want[0].data[e];
      }
    }
    for (std::int64_t k = 0; k < sh.K; ++k)
      for (std::int64_t n = 0; n < sh.N; ++n) {
        double codes = 0;
        for (std::int64_t i = 0; i < sh.M; ++i) {
          const double si = xs[static_cast<std::size_t>(i)];
          codes += si > 0 ? std::fabs(x.data[at2(i, k, sh.K)]) / si + 0.5 : 0;
        }
        const double bound = codes * t[static_cast<std::size_t>(n)] / 2 * (1 + 0x1p-20) + round_dw;
        const std::size_t e = at2(k, n, sh.N);
        INFO("dW[", k, ", ", n, "]: int8 ", got[1].data[e], " exact ", want[1].data[e], " bound ", bound);
        CHECK(std::fabs(got[1].data[e] - want[1].data[e]) <= bound);
        dw_differs = dw_differs || got[1].data[e] != want[1].data[e];
      }
    CHECK_MESSAGE(dx_differs, "int8_dx left dx of a TernaryTensor parameter bit-identical to the exact one");
    if (sh.M > 1) CHECK_MESSAGE(dw_differs, "int8_dw left dW of a TernaryTensor parameter bit-identical to the exact one");

    for (const testing::CpuTarget& target : targets) {
      auto e = Engine::create(target.options);
      REQUIRE_MESSAGE(e.ok(), (e.ok() ? "" : e.error().message));
      auto p = e->compile(m8);
      REQUIRE_MESSAGE(p.ok(), (p.ok() ? "" : p.error().message));
      std::vector<std::int8_t> wv = w.to_i8();
      std::vector<float> sv = s.to_f32();
      REQUIRE(p->bind("T.w", testing::view(wv, w.shape)).ok());
      REQUIRE(p->bind("T.s", TensorView{sv.data(), ElemKind::F32, s.shape}).ok());
      check_on(*p, target.label, "T.forward.fwd", {x}, fwd, P);
      check_on(*p, target.label, "T.forward.bwd", args8, got, P);
    }
  }
}

TEST_CASE("grad: int8_dw refuses a static row count whose int32 sum could overflow, bounds a symbolic one") {
  constexpr const char* big = R"(param @L.w : f32[3, 2]

func @L.forward(%x: f32[131072, 3]) -> f32[131072, 2] {
^entry:
  %w = param @L.w : f32[3, 2]
  %q = quantize_int8 %x : f32[131072, 3]
  %t = ternarize_absmean %w : f32[3, 2]
  %y = matmul %q, %t : f32[131072, 2]
  ret %y
}
)";
  auto m = Module::from_text(big, "big.tir");
  REQUIRE_MESSAGE(m.ok(), (m.ok() ? "" : render(m.error())));
  GradOptions o;
  o.wrt = {"@L.w"};
  o.int8_dw = true;
  auto r = grad(*m, "L.forward", o);
  REQUIRE(!r.ok());
  CHECK(r.error().message.find("131072 rows") != std::string::npos);
  o.int8_dw = false;
  CHECK(grad(*m, "L.forward", o).ok());  // the exact path has no such limit
  // Symbolic M: the backward gets the constraint M <= 131071.
  const Module sym = with_grad(kLayer, "L.forward", {"@L.w"}, false, true);
  CHECK(sym.to_text().find("M <= 131071") != std::string::npos);
}

TEST_CASE("grad: a normalization block's backward on every CPU target, odd shapes, 1 and 2 threads") {
  const Module m = with_grad(kBlock, "B.forward", {"x", "g", "v"});
  const auto targets = testing::cpu_targets();
  for (const Shape& sh : kShapes) {
    CAPTURE(sh.M);
    CAPTURE(sh.N);
    const auto seed = static_cast<std::uint64_t>(sh.M * 1000 + sh.N);
    std::vector<ir::HostTensor> args{ir::HostTensor::random(ElemKind::F32, {sh.M, sh.N}, seed),
                                     ir::HostTensor::random(ElemKind::F32, {sh.N}, seed + 1),
                                     ir::HostTensor::random(ElemKind::F32, {sh.N, sh.N}, seed + 2)};
    const std::vector<ir::HostTensor> fwd = interpret(m, "B.forward.fwd", args, {});
    std::vector<ir::HostTensor> bwd_args = args;
    bwd_args.push_back(ir::HostTensor::random(ElemKind::F32, {sh.M, sh.N}, seed + 3));
    bwd_args.insert(bwd_args.end(), fwd.begin() + 1, fwd.end());
    const std::vector<ir::HostTensor> bwd = interpret(m, "B.forward.bwd", bwd_args, {});
    for (const testing::CpuTarget& t : targets) {
      auto e = Engine::create(t.options);
      REQUIRE(e.ok());
      auto p = e->compile(m);
      REQUIRE_MESSAGE(p.ok(), (p.ok() ? "" : p.error().message));
      check_on(*p, t.label, "B.forward.fwd", args, fwd, std::max(sh.M, sh.N));
      check_on(*p, t.label, "B.forward.bwd", bwd_args, bwd, std::max(sh.M, sh.N));
    }
  }
}

TEST_CASE("grad: misuse is an error and leaves the module unchanged") {
  auto m = Module::from_text(kLayer, "backward_test.tir");
  REQUIRE(m.ok());
  const std::string before = m->to_text();
  auto missing = grad(*m, "L.nope");
  REQUIRE(!missing.ok());
  CHECK(missing.error().code == ErrorCode::NotFound);
  GradOptions o;
  o.wrt = {"y"};
  auto bad = grad(*m, "L.forward", o);
  REQUIRE(!bad.ok());
  CHECK(bad.error().message.find("no argument named '%y'") != std::string::npos);
  CHECK(m->to_text() == before);
  auto ok = grad(*m, "L.forward");
  REQUIRE(ok.ok());
  CHECK(ok->wrt == std::vector<std::string>{"x", "@L.w", "@L.b"});
  CHECK(ok->backward == "L.forward.bwd");
}

}  // namespace
}  // namespace ternjit
