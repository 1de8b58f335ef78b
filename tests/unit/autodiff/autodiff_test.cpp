// SPDX-License-Identifier: Apache-2.0
// autodiff_test.cpp - the autodiff pass: every gradient rule against finite differences of the reference, STE semantics, the save policy.
//
// Finite differences, in double. The IR has no f64 kind; the reference interpreter's
// double-precision mode (InterpretOptions::f32_as_f64) holds and computes every f32
// value in double, and both the function and its backward run in it, so the check
// compares the rule itself with the derivative, without f32 rounding. The loss is
// L = sum_k sum_i r_ki y_ki (r random in [-1, 1]), S = sum |r y|. Inputs are f32 values
// in [-2, 2]; the step is h = 2^-16, so x +- h is exact in double. The central
// difference differs from dL/dx by at most
//   (a) rounding: one evaluation of L is a few (< 32) correctly rounded double ops per
//       output plus sums of at most 7^3 terms, each bounded relative to the sum of
//       absolute values: off by at most 1024 u S (u = 2^-53), so the quotient is off by
//       1024 u S / h (about 7.5e-9 S);
//   (b) truncation: h^2 / 6 |L'''|; on these inputs every op's third derivative is at
//       most ~21 (rsqrt at 0.5: 15/8 0.5^-3.5), |r| <= 1, so |L'''| / 6 <= 64 (S + 1)
//       holds with room: 64 h^2 (S + 1) (about 1.5e-8 (S + 1));
//   (c) the gradient's own double rounding: far below (a).
// Tolerance: (1024 u / h + 64 h^2) (S + 1) ~ 2.2e-8 (S + 1), four orders of magnitude
// tighter than the f32 check it replaces (1% of dL/dx plus 1.5e-4 (S + 1)). Kinks (relu,
// abs, max, min, reduce_max) are kept at least 1/171 >> h away from every input by the
// input domain (a lattice of quarters plus a per-argument offset, or evenly spaced
// distinct values).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <numbers>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "formats/run_inputs.h"
#include "ir/builder.h"
#include "ir/interpret.h"
#include "ir/parse.h"
#include "ir/print.h"
#include "ir/verify.h"
#include "passes/passes.h"
#include "passes/pipeline.h"

using namespace ternjit;

namespace {

constexpr double kU = 0x1p-53;
constexpr double kH = 0x1p-16;

ir::Module parse(const std::string& text) {
  auto m = ir::parse_module(text, "autodiff_test.tir");
  REQUIRE_MESSAGE(m.ok(), (m.ok() ? "" : render(m.error())));
  return std::move(m).value();
}

// How float inputs are drawn: uniform in [-1, 1); a lattice of quarters offset by
// (argument + 1) / 32 (so no input, and no difference of two inputs of different
// arguments, is within 1/32 of 0); evenly spaced distinct values in [-1, 1] in random
// order (ties and kinks of max 2 / n apart); or [0.5, 1.5).
enum class Domain { Any, Lattice, Distinct, Positive };

void shape_domain(ir::HostTensor& t, Domain d, int which, std::uint64_t seed) {
  if (!is_float(t.kind)) return;
  const auto n = static_cast<std::size_t>(t.numel());
  std::vector<std::size_t> perm(n);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), std::mt19937_64(seed * 7919 + static_cast<std::uint64_t>(which)));
  for (std::size_t i = 0; i < n; ++i) {
    double& x = t.data[i];
    switch (d) {
      case Domain::Any: break;
      case Domain::Lattice: x = std::round(x * 4) / 4 + (which + 1) / 32.0; break;
      case Domain::Distinct: x = n == 1 ? 0.5 : -1.0 + 2.0 * static_cast<double>(perm[i]) / static_cast<double>(n - 1); break;
      case Domain::Positive: x = 1.0 + x / 2; break;
    }
    x = static_cast<double>(static_cast<float>(x));
  }
}

struct Problem {
  ir::Module m;
  std::vector<ir::HostTensor> args;
  ir::ParamValues params;
};

// Random inputs for @f of `text`: every symbol bound to one of 1, 2, 3, 5, 7 (seeded).
Problem make_problem(const std::string& text, std::uint64_t seed, Domain domain) {
  Problem p{parse(text), {}, {}};
  const ir::Function* f = p.m.find_function("f");
  REQUIRE(f);
  std::mt19937_64 gen(seed);
  const std::int64_t extents[] = {1, 2, 3, 5, 7};
  ir::ShapeBindings shapes;
  for (const ir::ParamDecl& d : p.m.params())
    for (const std::string& s : d.symbols) shapes.values[s] = extents[gen() % 5];
  for (const std::string& s : f->symbols()) shapes.values[s] = extents[gen() % 5];
  formats::PrepareOptions po;
  po.seed = seed;
  auto in = formats::prepare_run(p.m, *f, nullptr, nullptr, shapes, po);
  REQUIRE_MESSAGE(in.ok(), (in.ok() ? "" : render(in.error())));
  p.args = in->args;
  int which = 0;
  for (ir::HostTensor& a : p.args) shape_domain(a, domain, which++, seed);
  for (const auto& [name, stored] : in->params.values) {
    ir::HostTensor t = stored.to_host();
    shape_domain(t, domain, which++, seed);
    p.params.set(name, t);
  }
  return p;
}

// Runs `fn` on the reference, in the double-precision mode when `f64` is set.
std::vector<ir::HostTensor> run(const ir::Module& m, const std::string& fn, const std::vector<ir::HostTensor>& args,
                                const ir::ParamValues& params, bool f64 = false) {
  ir::InterpretOptions options;
  options.f32_as_f64 = f64;
  auto out = ir::interpret(m, fn, args, params, options);
  REQUIRE_MESSAGE(out.ok(), (out.ok() ? "" : render(out.error())));
  return std::move(out).value();
}

// sum r * y over the float results, and S = sum |r y|.
std::pair<double, double> loss(const std::vector<ir::HostTensor>& y, const std::vector<ir::HostTensor>& r) {
  double l = 0, s = 0;
  for (std::size_t k = 0; k < r.size(); ++k)
    for (std::size_t i = 0; i < r[k].data.size(); ++i) {
      l += r[k].data[i] * y[k].data[i];
      s += std::fabs(r[k].data[i] * y[k].data[i]);
    }
  return {l, s};
}

// Runs `result.forward` and `result.backward`: the gradients of sum r * f.
std::vector<ir::HostTensor> gradients(const ir::Module& m, const passes::AutodiffResult& result, const Problem& p,
                                      const std::vector<ir::HostTensor>& r, bool f64 = false) {
  const std::vector<ir::HostTensor> fwd = run(m, result.forward, p.args, p.params, f64);
  const std::vector<ir::HostTensor> plain = run(m, "f", p.args, p.params, f64);
  REQUIRE(fwd.size() == plain.size() + result.num_saved);
  for (std::size_t k = 0; k < plain.size(); ++k) CHECK(!ir::compare(plain[k], fwd[k], 0, 0));  // f.fwd is f, exactly
  std::vector<ir::HostTensor> args = p.args;
  args.insert(args.end(), r.begin(), r.end());
  args.insert(args.end(), fwd.begin() + static_cast<std::ptrdiff_t>(plain.size()), fwd.end());
  return run(m, result.backward, args, p.params, f64);
}

std::vector<ir::HostTensor> random_like(const std::vector<ir::HostTensor>& ys, std::uint64_t seed) {
  std::vector<ir::HostTensor> r;
  for (const ir::HostTensor& y : ys) r.push_back(ir::HostTensor::random(y.kind, y.shape, seed * 31 + r.size()));
  return r;
}

// The argument `name` of `p`, to perturb (parameters are stored in their kind, f32: the
// finite-difference checks differentiate with respect to arguments).
ir::HostTensor& input_of(Problem& p, const ir::Function& f, const std::string& name) {
  for (std::size_t k = 0; k < f.args().size(); ++k)
    if ("%" + f.value(f.args()[k]).name == name) return p.args[k];
  FAIL("no argument " << name);
  return p.args.front();
}

// Checks every gradient of `text`'s @f w.r.t. the arguments `wrt` against central
// differences, all in the reference's double-precision mode.
void check_fd(const std::string& text, const std::vector<std::string>& wrt, Domain domain = Domain::Any) {
  for (std::uint64_t seed : {1, 2, 3}) {
    INFO("seed ", seed);
    Problem p = make_problem(text, seed, domain);
    ir::Module m = p.m;
    auto res = passes::autodiff(m, passes::AutodiffOptions{"f", wrt, false});
    REQUIRE_MESSAGE(res.ok(), (res.ok() ? "" : render(res.error())));
    REQUIRE(ir::verify_module(m).empty());
    const std::vector<ir::HostTensor> y = run(p.m, "f", p.args, p.params, true);
    const std::vector<ir::HostTensor> r = random_like(y, seed);
    const std::vector<ir::HostTensor> g = gradients(m, *res, p, r, true);
    REQUIRE(g.size() == wrt.size());
    const double s = loss(y, r).second;
    const double tol = (1024 * kU / kH + 64 * kH * kH) * (s + 1);
    const ir::Function& f = *p.m.find_function("f");
    std::size_t checked = 0;
    for (std::size_t w = 0; w < wrt.size(); ++w) {
      ir::HostTensor& x = input_of(p, f, wrt[w]);
      REQUIRE(g[w].shape == x.shape);
      for (std::size_t i = 0; i < x.data.size(); ++i) {
        const double x0 = x.data[i];
        auto eval = [&](double v) {
          x.data[i] = v;
          return loss(run(p.m, "f", p.args, p.params, true), r).first;
        };
        const double fd = (eval(x0 + kH) - eval(x0 - kH)) / (2 * kH);
        eval(x0);
        INFO(wrt[w], " element ", i, " of ", x.describe(), ": autodiff ", g[w].data[i], ", finite difference ", fd,
             ", tolerance ", tol);
        CHECK(std::fabs(g[w].data[i] - fd) <= tol);
        ++checked;
      }
    }
    CHECK(checked > 0);
  }
}

// A module with one function @f<M, N> of the given signature and body.
std::string fn(const std::string& signature, const std::string& body, const std::string& params = "") {
  return params + "func @f" + signature + " {\n^entry:\n" + body + "}\n";
}

}  // namespace

TEST_CASE("autodiff: elementwise binary ops with broadcasting match finite differences") {
  for (const char* op : {"add", "sub", "mul", "div"}) {
    INFO(op);
    const std::string o = op;
    // [M, N] with [N] and with [M, 1]: the gradient of the stretched operand is summed.
    check_fd(fn("<M, N>(%a: f32[M, N], %b: f32[N], %c: f32[M, 1]) -> f32[M, N]",
                "  %0 = " + o + " %a, %b : f32[M, N]\n  %1 = " + o + " %0, %c : f32[M, N]\n  ret %1\n"),
             {"%a", "%b", "%c"}, o == "div" ? Domain::Positive : Domain::Any);
  }
  for (const char* op : {"max", "min"}) {
    INFO(op);
    check_fd(fn("<M, N>(%a: f32[M, N], %b: f32[N]) -> f32[M, N]",
                std::string("  %0 = ") + op + " %a, %b : f32[M, N]\n  ret %0\n"),
             {"%a", "%b"}, Domain::Lattice);
  }
}

TEST_CASE("autodiff: unary ops and activations match finite differences") {
  for (const char* op : {"neg", "abs", "relu", "sigmoid", "tanh", "gelu", "silu", "exp", "log", "sqrt", "rsqrt"}) {
    INFO(op);
    const std::string o = op;
    const bool positive = o == "log" || o == "sqrt" || o == "rsqrt";
    const bool kinked = o == "abs" || o == "relu";
    check_fd(fn("<M, N>(%a: f32[M, N]) -> f32[M, N]", "  %0 = " + o + " %a : f32[M, N]\n  ret %0\n"), {"%a"},
             positive ? Domain::Positive : (kinked ? Domain::Lattice : Domain::Any));
  }
  // gelu's derivative switches formulas at |x| = 2^-6: check both sides of it closely.
  check_fd(fn("<N>(%a: f32[N]) -> f32[N]", "  %s = const {value = 0.015} : f32[]\n  %0 = mul %a, %s : f32[N]\n"
                                           "  %1 = gelu %0 : f32[N]\n  ret %1\n"),
           {"%a"});
}

TEST_CASE("autodiff: data movement and matmul (rank 1, batched, broadcast batch) match finite differences") {
  check_fd(fn("<M, N, P>(%a: f32[M, N, P]) -> f32[P, M, N]",
              "  %0 = transpose %a {perm = [2, 0, 1]} : f32[P, M, N]\n  ret %0\n"), {"%a"});
  check_fd(fn("<M>(%a: f32[M, 6]) -> f32[M, 2, 3]", "  %0 = reshape %a : f32[M, 2, 3]\n  %1 = mul %0, %0 : f32[M, 2, 3]\n  ret %1\n"),
           {"%a"});
  check_fd(fn("<M, N>(%a: f32[N], %b: f32[M, 1]) -> f32[M, N]",
              "  %0 = broadcast %a : f32[M, N]\n  %1 = mul %0, %b : f32[M, N]\n  ret %1\n"), {"%a", "%b"});
  check_fd(fn("<M, K, N>(%a: f32[M, K], %b: f32[K, N]) -> f32[M, N]", "  %0 = matmul %a, %b : f32[M, N]\n  ret %0\n"),
           {"%a", "%b"});
  check_fd(fn("<K, N>(%a: f32[K], %b: f32[K, N]) -> f32[N]", "  %0 = matmul %a, %b : f32[N]\n  ret %0\n"), {"%a", "%b"});
  check_fd(fn("<M, K>(%a: f32[M, K], %b: f32[K]) -> f32[M]", "  %0 = matmul %a, %b : f32[M]\n  ret %0\n"), {"%a", "%b"});
  check_fd(fn("<K>(%a: f32[K], %b: f32[K]) -> f32[]", "  %0 = matmul %a, %b : f32[]\n  ret %0\n"), {"%a", "%b"});
  check_fd(fn("<B, M, K, N>(%a: f32[B, M, K], %b: f32[K, N]) -> f32[B, M, N]",
              "  %0 = matmul %a, %b : f32[B, M, N]\n  ret %0\n"), {"%a", "%b"});
  check_fd(fn("<B, M, K, N>(%a: f32[1, M, K], %b: f32[B, K, N]) -> f32[B, M, N]",
              "  %0 = matmul %a, %b : f32[B, M, N]\n  ret %0\n"), {"%a", "%b"});
}

TEST_CASE("autodiff: reductions, softmax and rmsnorm match finite differences") {
  for (const char* op : {"reduce_sum", "reduce_mean", "reduce_max"}) {
    for (int axis : {0, 1}) {
      for (bool keep : {false, true}) {
        INFO(op, " axis ", axis, " keepdims ", keep);
        const std::string out = keep ? (axis == 0 ? "f32[1, N]" : "f32[M, 1]") : (axis == 0 ? "f32[N]" : "f32[M]");
        check_fd(fn("<M, N>(%a: f32[M, N]) -> " + out,
                    std::string("  %0 = ") + op + " %a {axis = " + std::to_string(axis) +
                        ", keepdims = " + (keep ? "true" : "false") + "} : " + out + "\n  ret %0\n"),
                 {"%a"}, std::string(op) == "reduce_max" ? Domain::Distinct : Domain::Any);
      }
    }
  }
  for (int axis : {0, 1})
    check_fd(fn("<M, N>(%a: f32[M, N]) -> f32[M, N]",
                "  %0 = softmax %a {axis = " + std::to_string(axis) + "} : f32[M, N]\n  ret %0\n"), {"%a"});
  check_fd(fn("<M, N>(%a: f32[M, N], %g: f32[N]) -> f32[M, N]",
              "  %0 = rmsnorm %a, %g {eps = 1e-05} : f32[M, N]\n  ret %0\n"), {"%a", "%g"});
  // A value used twice (the adjoints add up) and a 3-D rmsnorm.
  check_fd(fn("<B, M, N>(%a: f32[B, M, N], %g: f32[N]) -> f32[B, M, N]",
              "  %0 = rmsnorm %a, %g {eps = 1e-05} : f32[B, M, N]\n  %1 = mul %0, %a : f32[B, M, N]\n  ret %1\n"),
           {"%a", "%g"});
}

TEST_CASE("autodiff: kernel ops (ewise, a float tmatmul with its whole epilogue) match finite differences") {
  check_fd(fn("<M, N>(%a: f32[M, N], %b: f32[N]) -> f32[M, N]",
              "  %0 = ewise %a, %b {steps = [mul(0, 1), tanh(2), add(3, 0)]} : f32[M, N]\n  ret %0\n"),
           {"%a", "%b"});
  for (const char* act : {"none", "relu", "gelu", "silu", "sigmoid", "tanh"}) {
    INFO(act);
    const std::string params = "param @L.w : t2[K, N]\n\n";
    check_fd(fn("<M, K, N>(%x: f32[M, K], %xs: f32[M, 1], %ws: f32[N], %b: f32[N], %r: f32[M, N]) -> f32[M, N]",
                "  %w = param @L.w : t2[K, N]\n"
                "  %0 = tmatmul %x, %w, %xs, %ws, %b, %r {x_scale = true, w_scale = true, bias = true, residual = true, act = " +
                    std::string(act) + "} : f32[M, N]\n  ret %0\n",
                params),
             {"%x", "%xs", "%ws", "%b", "%r"}, std::string(act) == "relu" ? Domain::Lattice : Domain::Any);
  }
}

namespace {

// Independent reference values of the quantizers (ir/README.md), in plain C++.
std::vector<double> quantize_int8_rows(const std::vector<double>& x, std::size_t cols) {
  std::vector<double> out(x.size());
  for (std::size_t r = 0; r * cols < x.size(); ++r) {
    float mx = 0;
    for (std::size_t c = 0; c < cols; ++c) mx = std::max(mx, std::fabs(static_cast<float>(x[r * cols + c])));
    const float s = mx / 127.0f;
    for (std::size_t c = 0; c < cols; ++c) {
      const float q = s == 0 ? 0.0f : std::clamp(std::nearbyint(static_cast<float>(x[r * cols + c]) / s), -127.0f, 127.0f);
      out[r * cols + c] = static_cast<double>(q * s);
    }
  }
  return out;
}

std::vector<double> ternarize_absmean(const std::vector<double>& w, double* mean = nullptr) {
  double sum = 0;
  for (double v : w) sum += std::fabs(v);
  const float g = static_cast<float>(sum / static_cast<double>(w.size()));
  if (mean) *mean = g;
  std::vector<double> out(w.size());
  for (std::size_t i = 0; i < w.size(); ++i)
    out[i] = g == 0 ? 0.0 : static_cast<double>(std::clamp(std::nearbyint(static_cast<float>(w[i]) / g), -1.0f, 1.0f) * g);
  return out;
}

double gelu_derivative(double z) {
  return 0.5 * (1 + std::erf(z / std::sqrt(2.0))) + z * std::exp(-z * z / 2) / std::sqrt(2 * std::numbers::pi);
}

// The BitLinear layer of the QAT use: quantize_int8 activations, ternarize_absmean
// latent weights (with the attributes `ste`, e.g. " {ste_clip = true}"), bias, activation.
std::string bitlinear(const std::string& act, const std::string& ste = "") {
  return "param @L.w : f32[K, N]\nparam @L.b : f32[N]\n\n" +
         fn("<M, K, N>(%x: f32[M, K]) -> f32[M, N]",
            "  %w = param @L.w : f32[K, N]\n  %q = quantize_int8 %x : f32[M, K]\n"
            "  %t = ternarize_absmean %w" + ste + " : f32[K, N]\n  %y = matmul %q, %t : f32[M, N]\n"
            "  %b = param @L.b : f32[N]\n  %z = add %y, %b : f32[M, N]\n  %r = " + act + " %z : f32[M, N]\n  ret %r\n");
}

}  // namespace

TEST_CASE("autodiff: straight-through estimators pass the gradient, clipped to the range on request") {
  // The op's ste_clip attribute decides; where it is absent, the pass option does.
  for (const char* attr : {"", ", ste_clip = true", ", ste_clip = false"})
  for (bool option : {false, true}) {
    const bool clip = std::string(attr).empty() ? option : std::string(attr).find("true") != std::string::npos;
    INFO("attribute '", attr, "' option ", option);
    // ternarize (range |x| <= 1) of 2x, times a.
    const std::string text = fn("<N>(%x: f32[N], %a: f32[N]) -> f32[N]",
                                "  %c = const {value = 2} : f32[]\n  %0 = mul %x, %c : f32[N]\n"
                                "  %1 = ternarize %0 {threshold = 0.5" + std::string(attr) +
                                    "} : f32[N]\n  %2 = mul %1, %a : f32[N]\n  ret %2\n");
    for (std::uint64_t seed : {1, 2}) {
      Problem p = make_problem(text, seed, Domain::Any);
      ir::Module m = p.m;
      auto res = passes::autodiff(m, passes::AutodiffOptions{"f", {"%x"}, option});
      REQUIRE(res.ok());
      const auto r = random_like(run(m, "f", p.args, p.params), seed);
      const auto g = gradients(m, *res, p, r);
      std::size_t clipped = 0;
      for (std::size_t i = 0; i < g[0].data.size(); ++i) {
        const bool in_range = std::fabs(2 * p.args[0].data[i]) <= 1;
        clipped += in_range ? 0 : 1;
        const double want = (clip && !in_range) ? 0.0 : r[0].data[i] * p.args[1].data[i] * 2;
        CHECK(g[0].data[i] == doctest::Approx(want).epsilon(1e-6));
      }
      if (seed == 1) CHECK(clipped > 0);  // the clipped case is exercised
    }
  }
}

TEST_CASE("autodiff: a BitLinear layer (STE quantizers) has torch's STE gradients, unfused and after the fusion passes") {
  for (const char* act : {"relu", "gelu"}) {
    for (bool fused : {false, true}) {
      // The clipping by the pass option (no attribute), then by the ternarize_absmean's
      // attribute against the opposite option (the fusion carries it to tquantize).
      for (int how : {0, 1, 2, 3}) {
        const bool by_attr = how >= 2, clip = how % 2 == 1;
        const bool option = by_attr ? !clip : clip;
        const std::string ste = by_attr ? (clip ? " {ste_clip = true}" : " {ste_clip = false}") : "";
        INFO(act, fused ? " fused" : " unfused", " ste_clip ", clip, by_attr ? " by attribute" : " by option");
        std::size_t seeds_used = 0;
        for (std::uint64_t seed : {1, 2, 3, 4}) {
          Problem p = make_problem(bitlinear(act, ste), seed, Domain::Any);
          ir::Module m = p.m;
          if (fused) {
            auto list = passes::parse_pass_list("fuse-quantization,fuse-epilogue");
            REQUIRE(list.ok());
            REQUIRE(passes::run_pipeline(m, *list, passes::PipelineOptions{}).ok());
            const std::string printed = ir::print_module(m);
            REQUIRE(printed.find("tmatmul") != std::string::npos);
            REQUIRE(printed.find("tquantize") != std::string::npos);
            if (by_attr) REQUIRE(printed.find(clip ? "tquantize %w {ste_clip = true}" : "tquantize %w {ste_clip = false}") != std::string::npos);
          }
          auto res = passes::autodiff(m, passes::AutodiffOptions{"f", {"%x", "@L.w", "@L.b"}, option});
          REQUIRE_MESSAGE(res.ok(), (res.ok() ? "" : render(res.error())));
          const auto y = run(p.m, "f", p.args, p.params);
          const auto r = random_like(y, seed);
          const auto g = gradients(m, *res, p, r);

          // The reference: Q = quantize_int8(x), T = ternarize_absmean(W), z = Q T + b,
          // gz = r act'(z), dx = gz T^T, dW = Q^T gz (times |W| <= mean|W| when clipped),
          // db = sum over rows of gz; in double.
          const auto M = static_cast<std::size_t>(p.args[0].shape[0]), K = static_cast<std::size_t>(p.args[0].shape[1]);
          const ir::HostTensor w = p.params.values.at("L.w").to_host(), b = p.params.values.at("L.b").to_host();
          const auto N = static_cast<std::size_t>(w.shape[1]);
          const std::vector<double> q = quantize_int8_rows(p.args[0].data, K);
          double mean = 0;
          const std::vector<double> t = ternarize_absmean(w.data, &mean);
          std::vector<double> gz(M * N);
          bool near_kink = false;
          for (std::size_t i = 0; i < M; ++i)
            for (std::size_t n = 0; n < N; ++n) {
              double z = b.data[n];
              for (std::size_t k = 0; k < K; ++k) z += q[i * K + k] * t[k * N + n];
              near_kink = near_kink || (std::string(act) == "relu" && std::fabs(z) < 1e-4);
              gz[i * N + n] = r[0].data[i * N + n] * (std::string(act) == "relu" ? (z > 0 ? 1.0 : 0.0) : gelu_derivative(z));
            }
          if (near_kink) continue;  // f32 and double may disagree on relu's side of 0
          ++seeds_used;
          for (std::size_t i = 0; i < M; ++i)
            for (std::size_t k = 0; k < K; ++k) {
              double want = 0, bound = 0;
              for (std::size_t n = 0; n < N; ++n) {
                want += gz[i * N + n] * t[k * N + n];
                bound += std::fabs(gz[i * N + n] * t[k * N + n]);
              }
              INFO("dx[", i, ", ", k, "]");
              CHECK(std::fabs(g[0].data[i * K + k] - want) <= 1e-4 * bound + 1e-6);
            }
          for (std::size_t k = 0; k < K; ++k)
            for (std::size_t n = 0; n < N; ++n) {
              double want = 0, bound = 0;
              for (std::size_t i = 0; i < M; ++i) {
                want += q[i * K + k] * gz[i * N + n];
                bound += std::fabs(q[i * K + k] * gz[i * N + n]);
              }
              if (clip && std::fabs(w.data[k * N + n]) > mean) want = bound = 0;
              INFO("dW[", k, ", ", n, "]");
              CHECK(std::fabs(g[1].data[k * N + n] - want) <= 1e-4 * bound + 1e-6);
            }
          for (std::size_t n = 0; n < N; ++n) {
            double want = 0, bound = 0;
            for (std::size_t i = 0; i < M; ++i) {
              want += gz[i * N + n];
              bound += std::fabs(gz[i * N + n]);
            }
            CHECK(std::fabs(g[2].data[n] - want) <= 1e-4 * bound + 1e-6);
          }
        }
        CHECK(seeds_used >= 2);
      }
    }
  }
}

TEST_CASE("autodiff: costly values are saved by the forward, cheap ones recomputed") {
  ir::Module m = parse(fn("<M, K, N>(%x: f32[M, K], %w: f32[K, N]) -> f32[M, N]",
                          "  %0 = matmul %x, %w : f32[M, N]\n  %1 = softmax %0 {axis = 1} : f32[M, N]\n"
                          "  %2 = relu %1 : f32[M, N]\n  ret %2\n"));
  auto res = passes::autodiff(m, passes::AutodiffOptions{"f", {}, false});
  REQUIRE(res.ok());
  CHECK(res->wrt == std::vector<std::string>{"%x", "%w"});
  CHECK(res->num_saved == 1);  // softmax's result; the matmul is needed only to recompute it
  const ir::Function& fwd = *m.find_function("f.fwd");
  const ir::Function& bwd = *m.find_function("f.bwd");
  CHECK(fwd.result_types().size() == 2);
  std::map<ir::Op, int> ops;
  for (ir::InstId i : bwd.insts(bwd.entry())) ++ops[bwd.inst(i).op];
  CHECK(ops[ir::Op::Softmax] == 0);
  CHECK(ops[ir::Op::MatMul] == 2);  // dx and dw, no recomputed forward matmul
  CHECK(ops[ir::Op::Relu] == 1);    // relu's mask: recomputed from the saved softmax
  int fwd_matmuls = 0;
  for (ir::InstId i : fwd.insts(fwd.entry())) fwd_matmuls += fwd.inst(i).op == ir::Op::MatMul;
  CHECK(fwd_matmuls == 1);  // the saved value is the forward's own, not a second copy

  // Values that depend on no argument (tquantize of a parameter) are load-time values:
  // recomputed, never saved, so the transposed ternary weight stays load-time.
  ir::Module q = parse("param @L.w : f32[K, N]\n\n" +
                       fn("<M, K, N>(%x: f32[M, K]) -> f32[M, N]",
                          "  %w = param @L.w : f32[K, N]\n  %t, %g = tquantize %w : t2[K, N], f32[]\n"
                          "  %y = tmatmul %x, %t, %g {x_scale = false, w_scale = true, bias = false, residual = false, "
                          "act = none} : f32[M, N]\n  ret %y\n"));
  auto r3 = passes::autodiff(q, passes::AutodiffOptions{"f", {"%x", "@L.w"}, false});
  REQUIRE(r3.ok());
  CHECK(r3->num_saved == 0);
  const ir::Function& qb = *q.find_function("f.bwd");
  for (ir::ValueId a : qb.args()) CHECK(qb.type_of(a).elem == ElemKind::F32);
  bool transposed_weight = false;
  for (ir::InstId i : qb.insts(qb.entry()))
    transposed_weight = transposed_weight || (qb.inst(i).op == ir::Op::Transpose && qb.type_of(qb.inst(i).results[0]).elem == ElemKind::T2);
  CHECK(transposed_weight);

  // Elementwise only: nothing saved, and the forward is the function itself.
  ir::Module e = parse(fn("<N>(%x: f32[N], %w: f32[N]) -> f32[N]", "  %0 = mul %x, %w : f32[N]\n  %1 = tanh %0 : f32[N]\n  ret %1\n"));
  auto r2 = passes::autodiff(e, passes::AutodiffOptions{"f", {"%w"}, false});
  REQUIRE(r2.ok());
  CHECK(r2->num_saved == 0);
  CHECK(e.find_function("f.bwd")->args().size() == 3);  // x, w, d_result
}

TEST_CASE("autodiff: misuse and what it cannot differentiate are errors, and the module is unchanged") {
  const std::string base = fn("<N>(%x: f32[N], %i: i32[N]) -> f32[N]", "  %0 = exp %x : f32[N]\n  ret %0\n");
  auto expect_error = [](const std::string& text, passes::AutodiffOptions o, ErrorCode code, const std::string& part) {
    ir::Module m = parse(text);
    const std::string before = ir::print_module(m);
    auto r = passes::autodiff(m, o);
    REQUIRE(!r.ok());
    CHECK(r.error().code == code);
    INFO(r.error().message);
    CHECK(r.error().message.find(part) != std::string::npos);
    CHECK(ir::print_module(m) == before);
  };
  expect_error(base, {"g", {}, false}, ErrorCode::NotFound, "no function @g");
  expect_error(base, {"f", {"%y"}, false}, ErrorCode::InvalidInput, "no argument named '%y'");
  expect_error(base, {"f", {"%i"}, false}, ErrorCode::InvalidInput, "'%i' is not a float");
  expect_error(base, {"f", {"@p"}, false}, ErrorCode::InvalidInput, "unknown parameter '@p'");
  expect_error("param @p : i8[4]\n\n" + base, {"f", {"@p"}, false}, ErrorCode::InvalidInput, "only float and t2");
  expect_error("param @p : f32[4]\n\n" + base, {"f", {"@p"}, false}, ErrorCode::InvalidInput, "not read");
  expect_error("func @g(%x: f32[4]) -> f32[4] {\n^entry:\n  ret %x\n}\n\n" +
                   fn("(%x: f32[4]) -> f32[4]", "  %0 = call @g(%x) : f32[4]\n  ret %0\n"),
               {"f", {}, false}, ErrorCode::InvalidInput, "inline-calls");
  expect_error(fn("(%x: f32[4]) -> f32[4]", "  br ^b\n^b:\n  ret %x\n"), {"f", {}, false}, ErrorCode::InvalidInput,
               "control flow");
  // Twice: the functions exist already.
  ir::Module m = parse(base);
  REQUIRE(passes::autodiff(m, passes::AutodiffOptions{"f", {"%x"}, false}).ok());
  auto again = passes::autodiff(m, passes::AutodiffOptions{"f", {"%x"}, false});
  REQUIRE(!again.ok());
  CHECK(again.error().message.find("exists already") != std::string::npos);
}

TEST_CASE("autodiff (registered): differentiates what it can, leaves the rest, and a second run changes nothing") {
  ir::Module m = parse("func @g(%i: i32[4]) -> i32[4] {\n^entry:\n  ret %i\n}\n\n" +
                       fn("<N>(%x: f32[N]) -> f32[N]", "  %0 = sigmoid %x : f32[N]\n  ret %0\n"));
  REQUIRE(passes::autodiff(m).ok());
  CHECK(m.find_function("f.bwd"));
  CHECK(m.find_function("f.fwd"));
  CHECK(!m.find_function("g.bwd"));
  const std::string once = ir::print_module(m);
  REQUIRE(passes::autodiff(m).ok());
  CHECK(ir::print_module(m) == once);
  CHECK(ir::verify_module(m).empty());
}

TEST_CASE("autodiff: dequantize's scale gradient, and casts round the gradient to the kind in between") {
  // q is an i8 argument (no gradient); the scale's is sum(g q) over the broadcast axis.
  check_fd(fn("<M, K>(%q: i8[M, K], %s: f32[M, 1]) -> f32[M, K]", "  %0 = dequantize %q, %s : f32[M, K]\n  ret %0\n"),
           {"%s"});
  // f32 -> f16 -> f32: the gradient is the f32 one rounded to f16 (as torch's .half()).
  const std::string text = fn("<N>(%x: f32[N]) -> f32[N]", "  %0 = cast %x {to = f16} : f16[N]\n"
                                                          "  %1 = cast %0 {to = f32} : f32[N]\n  ret %1\n");
  Problem p = make_problem(text, 5, Domain::Any);
  ir::Module m = p.m;
  auto res = passes::autodiff(m, passes::AutodiffOptions{"f", {"%x"}, false});
  REQUIRE(res.ok());
  const auto r = random_like(run(m, "f", p.args, p.params), 5);
  const auto g = gradients(m, *res, p, r);
  REQUIRE(g[0].kind == ElemKind::F32);
  for (std::size_t i = 0; i < g[0].data.size(); ++i) CHECK(g[0].data[i] == ir::round_to_kind(r[0].data[i], ElemKind::F16));
}
