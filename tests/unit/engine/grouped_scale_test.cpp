// SPDX-License-Identifier: Apache-2.0
// grouped_scale_test.cpp - grouped_matmul (per-group weight scales f32[G, N]) on every CPU target.
//
// The layer runs through the engine (O2: quantize_int8 -> grouped integer tmatmul ->
// bias and relu epilogue) on the reference, x86 at every ISA with 1 and 2 threads, and
// llvm, with odd K (a partial last group), odd N and M in {1, 3, 17}, outputs poisoned.
// The oracle is ir::interpret of the module the O2 pipeline makes. The reference target
// and llvm (which sums the groups in double, as the interpreter) match it bit for bit.
// x86 adds the groups' scaled sums in f32 (targets/x86/tmatmul_grouped.cpp), so per row
//   |y - y_ref| <= (G + 9) u (max|s| sum_k (|x_k| + amax/127) + max|b|),    u = 2^-24:
// sum_k |q_k| x_scale <= sum_k (|x_k| + x_scale / 2) bounds sum_g |s_g p_g| x_scale, the
// scaled accumulation is within (G + 1) u of that, and the x_scale, bias and relu f32
// ops add a few u of their terms. The f32-x function (no quantize) adds the float
// kernel's f32 group sums: group u more of the same sum.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "ir/dsl/dsl.h"
#include "ir/interpret.h"
#include "passes/pipeline.h"
#include "passes/specialize_shapes.h"
#include "tests/unit/engine/cpu_targets_testing.h"
#include "tests/unit/engine/engine_testing.h"

namespace ternjit {
namespace {

using testing::view;

constexpr const char* kLayer = R"(
layer GLinear {
    param w: TernaryTensor[K, N]
    param s: Tensor[G, N]
    param t: Tensor[H, N]
    param b: Tensor[N]
    fn forward(x: Tensor[M, K]) -> Tensor[M, N] {
        return relu(grouped_matmul(quantize_int8(x), w, s, 32) + b)
    }
    fn float_path(x: Tensor[M, K]) -> Tensor[M, N] {
        return grouped_matmul(x, w, s, 32) + b
    }
    fn gguf(x: Tensor[M, K]) -> Tensor[M, N] {
        return grouped_matmul(quantize_int8(x), w, t)
    }
}
)";

constexpr double kU = 0x1p-24;

struct Weights {
  std::int64_t K, N, G, H;
  std::vector<std::int8_t> w;
  std::vector<float> s, t, b;
  Weights(std::int64_t k, std::int64_t n, std::uint64_t seed)
      : K(k), N(n), G((k + 31) / 32), H((k + 255) / 256), w(testing::random_t2(k * n, seed)),
        s(testing::random_f32(G * n, seed + 1)), t(testing::random_f32(H * n, seed + 2)),
        b(testing::random_f32(n, seed + 3)) {}
  void bind(Program& p) {
    for (auto r : {p.bind("GLinear.w", view(w, {K, N})), p.bind("GLinear.s", view(s, {G, N})),
                   p.bind("GLinear.t", view(t, {H, N})), p.bind("GLinear.b", view(b, {N}))})
      REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
  }
  ir::ParamValues params() const {
    ir::ParamValues pv;
    ir::HostTensor wt = ir::HostTensor::from_i8({K, N}, w);
    wt.kind = ElemKind::T2;
    pv.set("GLinear.w", std::move(wt));
    pv.set("GLinear.s", ir::HostTensor::from_f32({G, N}, s));
    pv.set("GLinear.t", ir::HostTensor::from_f32({H, N}, t));
    pv.set("GLinear.b", ir::HostTensor::from_f32({N}, b));
    return pv;
  }
};

// ir::interpret of `fn` after specialization and the O2 pipeline.
std::vector<float> oracle(const Weights& wt, const std::string& fn, const std::vector<float>& x, std::int64_t M) {
  auto m = dsl::compile_tri(kLayer, "glinear.tri");
  REQUIRE(m.ok());
  auto s = passes::specialize_function(*m, fn,
                                       {{"GLinear.M", M}, {"GLinear.K", wt.K}, {"GLinear.N", wt.N},
                                        {"GLinear.G", wt.G}, {"GLinear.H", wt.H}},
                                       true);
  REQUIRE_MESSAGE(s.ok(), (s.ok() ? "" : s.error().message));
  passes::PipelineOptions popts;
  REQUIRE(passes::run_pipeline(*s, passes::default_pipeline(passes::OptLevel::O2), popts).ok());
  std::vector<ir::HostTensor> args{ir::HostTensor::from_f32({M, wt.K}, x)};
  auto out = ir::interpret(*s, fn, args, wt.params());
  REQUIRE_MESSAGE(out.ok(), (out.ok() ? "" : out.error().message));
  return (*out)[0].to_f32();
}

TEST_CASE("grouped_matmul: every CPU target against the interpreter, odd shapes, 1 and 2 threads") {
  std::vector<std::string> skipped;
  const auto targets = testing::cpu_targets(&skipped);
  for (const std::string& s : skipped) MESSAGE("not run: " << s);
  struct Shape {
    std::int64_t M, K, N;
  };
  const Shape shapes[] = {{1, 100, 9}, {3, 67, 33}, {17, 300, 5}, {1, 513, 65}};
  for (const testing::CpuTarget& t : targets) {
    auto e = Engine::create(t.options);
    REQUIRE_MESSAGE(e.ok(), (e.ok() ? "" : e.error().message));
    for (const Shape& sh : shapes) {
      auto p = e->compile(kLayer, "glinear.tri");  // one program per weight shape
      REQUIRE_MESSAGE(p.ok(), (p.ok() ? "" : p.error().message));
      Weights wt(sh.K, sh.N, static_cast<std::uint64_t>(sh.K * 7 + sh.N));
      wt.bind(*p);
      std::vector<float> x = testing::random_f32(sh.M * sh.K, static_cast<std::uint64_t>(sh.M + 40));
      for (const std::string fn : {"GLinear.forward", "GLinear.float_path", "GLinear.gguf"}) {
        CAPTURE(t.label);
        CAPTURE(fn);
        CAPTURE(sh.M);
        CAPTURE(sh.K);
        CAPTURE(sh.N);
        std::vector<float> y(static_cast<std::size_t>(sh.M * sh.N), std::nanf(""));
        TensorView in[] = {view(x, {sh.M, sh.K})};
        TensorView out[] = {view(y, {sh.M, sh.N})};
        auto r = p->run(fn, in, out);
        REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
        const std::vector<float> want = oracle(wt, fn, x, sh.M);
        if (t.options.target != "x86") {
          CHECK(testing::bit_equal(want, y));
          continue;
        }
        const bool gguf = fn == "GLinear.gguf";
        const std::int64_t groups = gguf ? wt.H : wt.G, group = gguf ? 256 : 32;
        const std::vector<float>& scales = gguf ? wt.t : wt.s;
        double smax = 0, bmax = 0;
        for (float v : scales) smax = std::max(smax, std::fabs(double{v}));
        for (float v : wt.b) bmax = std::max(bmax, std::fabs(double{v}));
        int bad = 0;
        for (std::int64_t m = 0; m < sh.M; ++m) {
          double sum = 0, amax = 0;
          for (std::int64_t k = 0; k < sh.K; ++k) amax = std::max(amax, std::fabs(double{x[static_cast<std::size_t>(m * sh.K + k)]}));
          for (std::int64_t k = 0; k < sh.K; ++k) sum += std::fabs(double{x[static_cast<std::size_t>(m * sh.K + k)]}) + amax / 127;
          const double factor = static_cast<double>(groups + 9) + (fn == "GLinear.float_path" ? static_cast<double>(group) : 0.0);
          const double tol = factor * kU * (smax * sum + bmax);
          for (std::int64_t n = 0; n < sh.N; ++n) {
            const std::size_t i = static_cast<std::size_t>(m * sh.N + n);
            if (!(std::fabs(double{y[i]} - double{want[i]}) <= tol) && bad++ < 3)
              FAIL_CHECK("m=" << m << " n=" << n << ": want " << want[i] << " got " << y[i] << " tolerance " << tol);
          }
        }
        CHECK(bad == 0);
      }
    }
  }
}

TEST_CASE("grouped_matmul: a scale whose G is not ceil(K / group) is an error after binding") {
  Engine e = testing::reference_engine();
  auto p = e.compile(kLayer, "glinear.tri");
  REQUIRE(p.ok());
  Weights wt(67, 5, 9);
  std::vector<float> bad_s = testing::random_f32(4 * 5, 1);  // G = 4, but ceil(67 / 32) = 3
  for (auto r : {p->bind("GLinear.w", view(wt.w, {67, 5})), p->bind("GLinear.s", view(bad_s, {4, 5})),
                 p->bind("GLinear.t", view(wt.t, {1, 5})), p->bind("GLinear.b", view(wt.b, {5}))})
    REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
  std::vector<float> x = testing::random_f32(2 * 67, 2), y(10);
  TensorView in[] = {view(x, {2, 67})};
  TensorView out[] = {view(y, {2, 5})};
  const std::string msg = testing::error_of(p->run("GLinear.forward", in, out));
  CHECK(msg.find("grouped w_scale needs G = ceil(K / group) = ceil(67 / 32) = 3 rows, got f32[4, 5]") !=
        std::string::npos);
}

}  // namespace
}  // namespace ternjit
