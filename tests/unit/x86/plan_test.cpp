// SPDX-License-Identifier: Apache-2.0
// plan_test.cpp - whole layers on the x86 target through the Engine, against the interpreter.
//
// The kernels' own tests (tmatmul_*_test.cpp, eltwise_test.cpp) check each op bit for
// bit or within its stated tolerance. Here whole functions run through the engine: the
// plan's buffer assignment, load-time values, weight packing, reference steps, copies
// to outputs, every ISA the host runs, 1 and 2 threads, poisoned outputs.
//
// Tolerance of whole layers: rmsnorm's f32 evaluation differs from the interpreter's
// double one by an ulp or two, which can move an activation across a quantization
// rounding boundary (one int8 step); a tmatmul output then moves by x_scale * w_scale
// per flipped activation. So layers compare within |d| <= 1e-3 * max|y| + 1e-5.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <thread>

#include "ir/dsl/dsl.h"
#include "ir/interpret.h"
#include "ir/module_impl.h"
#include "ir/parse.h"
#include "passes/pipeline.h"
#include "passes/specialize_shapes.h"
#include "targets/x86/isa.h"
#include "targets/x86/plan.h"
#include "targets/x86/x86_target.h"
#include "tests/unit/engine/engine_testing.h"

namespace ternjit {
namespace {

using testing::view;

// The ISAs this host runs, lowest first.
std::vector<std::string> host_isa_names() {
  std::vector<std::string> r;
  for (targets::x86::Isa isa : targets::x86::kAllIsas)
    if (targets::x86::host_isas().supports(isa)) r.emplace_back(targets::x86::isa_name(isa));
  return r;
}

// A host thread pool for EngineOptions::parallel_for: real threads, one per task, so a
// kernel that splits its work is really run concurrently.
std::atomic<int> g_parallel_calls{0};
void thread_per_task(void*, void (*task)(void*, std::int64_t), void* context, std::int64_t n) {
  g_parallel_calls.fetch_add(1);
  std::vector<std::thread> ts;
  for (std::int64_t i = 1; i < n; ++i) ts.emplace_back([=] { task(context, i); });
  task(context, 0);
  for (auto& t : ts) t.join();
}

Engine x86_engine(const std::string& isa, int threads, bool host_pool = false) {
  EngineOptions o;
  o.target = "x86";
  o.max_isa = isa;
  o.threads = threads;
  if (host_pool) o.parallel_for = &thread_per_task;
  auto e = Engine::create(o);
  REQUIRE_MESSAGE(e.ok(), (e.ok() ? "" : e.error().message));
  return std::move(e).value();
}

bool layer_close(const std::vector<float>& want, const std::vector<float>& got, std::string* why) {
  if (want.size() != got.size()) return false;
  float mx = 0;
  for (float v : want) mx = std::max(mx, std::fabs(v));
  const double tol = 1e-3 * mx + 1e-5;
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (!(std::fabs(double(want[i]) - double(got[i])) <= tol)) {
      *why = "element " + std::to_string(i) + ": want " + std::to_string(want[i]) + " got " + std::to_string(got[i]);
      return false;
    }
  }
  return true;
}

TEST_CASE("x86 target: BitLinear through the engine matches the interpreter, every ISA, 1 and 2 threads") {
  if (!targets::x86::host_isas().avx2) {
    MESSAGE("skipped: host lacks AVX2");
    return;
  }
  struct Shape {
    std::int64_t M, K, N;
  };
  // {1, 4099, 4100}: K*N >= 2^24, so the default is variant base3 (1.6-bit) where the host has VBMI.
  const Shape shapes[] = {{1, 64, 16}, {3, 63, 5}, {7, 257, 33}, {33, 130, 257}, {2, 1, 1}, {1, 4099, 4100}};
  for (const std::string& isa : host_isa_names()) {
    for (int threads : {1, 2}) {
      for (const Shape& s : shapes) {
        CAPTURE(isa);
        CAPTURE(threads);
        CAPTURE(s.M);
        CAPTURE(s.K);
        CAPTURE(s.N);
        Engine e = x86_engine(isa, threads, /*host_pool=*/threads == 2);
        Program p = testing::bitlinear(e);
        testing::BitLinearWeights w(s.K, s.N, static_cast<std::uint64_t>(s.M * 131 + s.K));
        w.bind(p);
        std::vector<float> x = testing::random_f32(s.M * s.K, static_cast<std::uint64_t>(s.N + 7));
        std::vector<float> y(static_cast<std::size_t>(s.M * s.N), std::nanf(""));
        TensorView in[] = {view(x, {s.M, s.K})};
        TensorView out[] = {view(y, {s.M, s.N})};
        auto r = p.run("BitLinear.forward", in, out);
        REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
        const std::vector<float> want = testing::oracle(w.params(), x, s.M, s.K, 2);
        std::string why;
        CHECK_MESSAGE(layer_close(want, y, &why), why);
        auto k = p.kernel("BitLinear.forward", in);
        REQUIRE(k.ok());
      }
    }
  }
}

TEST_CASE("x86 target: a host parallel_for is used for kernel work") {
  if (!targets::x86::host_isas().avx2) {
    MESSAGE("skipped: host lacks AVX2");
    return;
  }
  g_parallel_calls = 0;
  Engine e = x86_engine("", 2, /*host_pool=*/true);
  Program p = testing::bitlinear(e);
  testing::BitLinearWeights w(256, 512, 3);
  w.bind(p);
  std::vector<float> x = testing::random_f32(4 * 256, 9);
  std::vector<float> y(4 * 512, std::nanf(""));
  TensorView in[] = {view(x, {4, 256})};
  TensorView out[] = {view(y, {4, 512})};
  REQUIRE(p.run("BitLinear.forward", in, out).ok());
  CHECK(g_parallel_calls.load() > 0);
  std::string why;
  CHECK_MESSAGE(layer_close(testing::oracle(w.params(), x, 4, 256, 2), y, &why), why);
}

TEST_CASE("x86 target: weights are packed once per program, not per specialization or call") {
  if (!targets::x86::host_isas().avx2) {
    MESSAGE("skipped: host lacks AVX2");
    return;
  }
  // Two plans of the same function share one PackCache: the weight is packed once.
  const char* text = R"(param @L.w : t2[40, 24]
param @L.s : f32[24]

func @L.forward(%x: i8[3, 40], %xs: f32[3, 1]) -> f32[3, 24] {
^entry:
  %w = param @L.w : t2[40, 24]
  %s = param @L.s : f32[24]
  %y = tmatmul %x, %w, %xs, %s {x_scale = true, w_scale = true, bias = false, residual = false, act = none} : f32[3, 24]
  ret %y
}
)";
  auto m = ir::parse_module(text, "pack.tir");
  REQUIRE(m.ok());
  ir::ParamValues params;
  params.set("L.w", ir::HostTensor::random(ElemKind::T2, {40, 24}, 1));
  params.set("L.s", ir::HostTensor::random(ElemKind::F32, {24}, 2));
  targets::x86::PackCache packs;
  targets::x86::PlanOptions o;
  o.isa = *targets::x86::best_isa(targets::x86::host_isas());
  auto a = targets::x86::Plan::build(m.value(), "L.forward", params, o, &packs);
  REQUIRE_MESSAGE(a.ok(), (a.ok() ? "" : a.error().message));
  auto b = targets::x86::Plan::build(m.value(), "L.forward", params, o, &packs);
  REQUIRE(b.ok());
  CHECK(packs.packs_made() == 1);

  // And the plan computes the interpreter's result bit for bit (integer accumulation,
  // f32 epilogue in the same order).
  std::vector<std::int8_t> x(3 * 40);
  const ir::HostTensor xt = ir::HostTensor::random(ElemKind::I8, {3, 40}, 5);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<std::int8_t>(xt.data[i]);
  const ir::HostTensor xs = ir::HostTensor::random(ElemKind::F32, {3, 1}, 6);
  std::vector<float> xsv(xs.data.begin(), xs.data.end());
  std::vector<float> y(3 * 24, std::nanf(""));
  void* buffers[] = {x.data(), xsv.data(), y.data()};
  targets::x86::Parallel par;
  REQUIRE(a.value()->run(buffers, par).ok());
  auto want = ir::interpret(m.value(), "L.forward", std::vector<ir::HostTensor>{xt, xs}, params);
  REQUIRE(want.ok());
  for (std::size_t i = 0; i < y.size(); ++i) {
    CAPTURE(i);
    const float expect = static_cast<float>(want.value()[0].data[i]);
    CHECK(std::memcmp(&y[i], &expect, sizeof expect) == 0);
  }

  // Overlapping input and output buffers are refused, not computed wrongly.
  void* aliased[] = {x.data(), xsv.data(), x.data()};
  auto r = a.value()->run(aliased, par);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("overlaps") != std::string::npos);
}

TEST_CASE("x86 target: a composed layer with transposes and dense f32 matmuls runs") {
  if (!targets::x86::host_isas().avx2) {
    MESSAGE("skipped: host lacks AVX2");
    return;
  }
  // MLP (tests/dsl/mlp_composition.tri): two BitLinear calls, softmax(hx @ transpose(hc)),
  // dense matmuls: the f32 matmul kernels (matmul.h), one reading transpose(hc) in place.
  const std::string src = std::string(testing::kBitLinear) + R"(
layer MLP {
    param w_out: Tensor[BitLinear.N, 10]
    fn forward(x: Tensor[B, K], ctx: Tensor[T, K]) -> Tensor[B, 10] {
        let hx = BitLinear.forward(x)
        let hc = BitLinear(ctx)
        let scores = softmax(hx @ transpose(hc), -1)
        return (scores @ hc) @ w_out
    }
}
)";
  for (const std::string& isa : host_isa_names()) {
    CAPTURE(isa);
    Engine e = x86_engine(isa, 2);
    auto prog = e.compile(src, "mlp.tri");
    REQUIRE_MESSAGE(prog.ok(), (prog.ok() ? "" : prog.error().message));
    Program p = std::move(prog).value();
    const std::int64_t B = 3, T = 5, K = 33, N = 17;
    testing::BitLinearWeights w(K, N, 4);
    w.bind(p);
    std::vector<float> wout = testing::random_f32(N * 10, 8);
    REQUIRE(p.bind("MLP.w_out", view(wout, {N, 10})).ok());
    std::vector<float> x = testing::random_f32(B * K, 1), ctx = testing::random_f32(T * K, 2);
    std::vector<float> y(B * 10, std::nanf(""));
    TensorView in[] = {view(x, {B, K}), view(ctx, {T, K})};
    TensorView out[] = {view(y, {B, 10})};
    auto r = p.run("MLP.forward", in, out);
    REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));

    Engine ref = testing::reference_engine();
    auto prog2 = ref.compile(src, "mlp.tri");
    REQUIRE(prog2.ok());
    Program q = std::move(prog2).value();
    w.bind(q);
    REQUIRE(q.bind("MLP.w_out", view(wout, {N, 10})).ok());
    std::vector<float> want(B * 10, std::nanf(""));
    TensorView out2[] = {view(want, {B, 10})};
    REQUIRE(q.run("MLP.forward", in, out2).ok());
    std::string why;
    CHECK_MESSAGE(layer_close(want, y, &why), why);
  }
}

TEST_CASE("x86 target: auto falls back to the interpreter for control flow; a named target refuses") {
  const char* text = R"(func @f(%x: f32[4], %c: i32[]) -> f32[4] {
^entry:
  cond_br %c, ^a, ^b
^a:
  %y = relu %x : f32[4]
  ret %y
^b:
  %z = neg %x : f32[4]
  ret %z
}
)";
  auto m = ir::parse_module(text, "cf.tir");
  REQUIRE(m.ok());
  const Module mod = ir::wrap(std::move(m).value());
  EngineOptions o;
  o.target = "x86";
  auto named = Engine::create(o);
  if (!named.ok()) {
    MESSAGE("skipped: x86 target unavailable: " << named.error().message);
    return;
  }
  auto pn = named.value().compile(mod);
  REQUIRE(pn.ok());
  std::vector<float> x = {1, -2, 3, -4};
  std::vector<std::int32_t> c = {1};
  std::vector<float> y(4, std::nanf(""));
  TensorView in[] = {view(x, {4}), TensorView{c.data(), ElemKind::I32, {}}};
  TensorView out[] = {view(y, {4})};
  auto r = pn.value().run("f", in, out);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("single-block") != std::string::npos);

  testing::TraceCapture trace;
  EngineOptions a = trace.options();
  a.target = "auto";
  auto ea = Engine::create(a);
  REQUIRE(ea.ok());
  auto pa = ea.value().compile(mod);
  REQUIRE(pa.ok());
  REQUIRE(pa.value().run("f", in, out).ok());
  CHECK(y == std::vector<float>{1, 0, 3, 0});
  CHECK(trace.count("fallback,target=x86") == 1);
}

TEST_CASE("x86 target: describe_code generates code for every ISA, runnable here or not") {
  auto m = dsl::compile_tri(testing::kBitLinear, "bitlinear.tri");
  REQUIRE(m.ok());
  std::map<std::string, std::int64_t> b = {{"BitLinear.M", 2}, {"BitLinear.K", 64}, {"BitLinear.N", 16}};
  auto spec = passes::specialize_function(m.value(), "BitLinear.forward", b, true);
  REQUIRE_MESSAGE(spec.ok(), (spec.ok() ? "" : spec.error().message));
  passes::PipelineOptions po;
  REQUIRE(passes::run_pipeline(spec.value(), passes::default_pipeline(passes::OptLevel::O2), po).ok());
  for (targets::x86::Isa isa : targets::x86::kAllIsas) {
    CAPTURE(targets::x86::isa_name(isa));
    auto steps = targets::x86::describe_code(spec.value(), "BitLinear.forward", targets::x86::isa_name(isa), 1);
    REQUIRE_MESSAGE(steps.ok(), (steps.ok() ? "" : steps.error().message));
    bool tm = false;
    for (const auto& s : steps.value()) {
      if (s.op != "tmatmul") continue;
      tm = true;
      CHECK(s.config.find(std::string("isa=") + std::string(targets::x86::isa_name(isa))) != std::string::npos);
      REQUIRE_FALSE(s.blobs.empty());
      CHECK_FALSE(s.blobs[0].code.empty());
    }
    CHECK(tm);
  }
}

}  // namespace
}  // namespace ternjit
