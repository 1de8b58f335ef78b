// SPDX-License-Identifier: Apache-2.0
// runtime_rows_test.cpp - run-time rows on x86: one warm Program serving every M from its bucket's kernel.
//
// Every M from 1 to 40 and 100, 128, 129, 300 runs through one Program (1 and 2 threads,
// outputs poisoned with NaN) and must give:
//   - bit for bit what the M-specialized kernel gives (EngineOptions::runtime_rows =
//     false), for every function below;
//   - bit for bit what the reference target gives, for the integer path (quantize, then
//     the i8 tmatmul with x_scale, w_scale, bias, residual and relu: exact integer sums,
//     then the same f32 operations in the same order, plan_test.cpp's argument);
//   - within plan_test.cpp's layer tolerance (|d| <= 1e-3 max|y| + 1e-5: rmsnorm in f32
//     against the interpreter's double can move one int8 step; the dense f32 matmul's
//     FMA chain against the double sum is far inside it at K = 60) for the others.
// A new M in a bucket compiles nothing (the trace says the bucket was a hit); a function
// the analysis refuses stays correct and specialized; a Kernel still checks its buffers
// against its own M exactly.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ir/parse.h"
#include "targets/x86/isa.h"
#include "targets/x86/x86_target.h"
#include "ternjit/builder.h"
#include "tests/unit/engine/engine_testing.h"

namespace ternjit {
namespace {

using testing::view;

// The integer path as the fusion passes leave it, with a residual input.
constexpr const char* kIntPath = R"(param @L.w : f32[100, 50]
param @L.b : f32[50]

func @L.forward<M>(%x: f32[M, 100], %res: f32[M, 50]) -> f32[M, 50] {
^entry:
  %w = param @L.w : f32[100, 50]
  %t, %g = tquantize %w : t2[100, 50], f32[]
  %q, %s = quantize %x : i8[M, 100], f32[M, 1]
  %b = param @L.b : f32[50]
  %y = tmatmul %q, %t, %s, %g, %b, %res {x_scale = true, w_scale = true, bias = true, residual = true, act = relu} : f32[M, 50]
  ret %y
}
)";

// Two BitLinear layers composed, with a bias and a residual, a gelu and a rank-3 view.
constexpr const char* kMlp = R"(layer Up {
    param gamma: Tensor[70]
    param w: TernaryTensor[70, 90]
    param w_scale: Tensor[90]
    fn forward(x: Tensor[M, 70]) -> Tensor[M, 90] {
        let h = rmsnorm(x, gamma, 1e-5)
        let q = quantize_int8(h)
        return relu(q @ w * w_scale)
    }
}

layer Down {
    param w: TernaryTensor[90, 70]
    param b: Tensor[70]
    fn forward(x: Tensor[M, 70]) -> Tensor[M, 70] {
        let h = Up.forward(x)
        let q = quantize_int8(h)
        return gelu(q @ w + b) + x
    }
}
)";

// A dense f32 matmul by a load-time weight (the x86 MatMulKernel), with a bias and relu.
constexpr const char* kDense = R"(layer D {
    param w: Tensor[60, 30]
    param b: Tensor[30]
    fn forward(x: Tensor[M, 60]) -> Tensor[M, 30] {
        return relu(x @ w + b)
    }
}
)";

// A layer whose rows are not independent: a softmax over the rows.
constexpr const char* kMixed = R"(layer Mix {
    param w: TernaryTensor[40, 24]
    fn forward(x: Tensor[M, 40]) -> Tensor[M, 24] {
        return softmax(quantize_int8(x) @ w, 0)
    }
}
)";

Engine make_engine(const std::string& target, int threads, bool runtime_rows, testing::TraceCapture* trace = nullptr) {
  EngineOptions o = trace ? trace->options(target) : EngineOptions{};
  o.target = target;
  o.threads = threads;
  o.runtime_rows = runtime_rows;
  o.cache_dir = "off";
  auto e = Engine::create(o);
  REQUIRE_MESSAGE(e.ok(), (e.ok() ? "" : e.error().message));
  return std::move(e).value();
}

Program compile(Engine& e, const char* source, bool ir_text) {
  Result<Program> p = ir_text ? [&] {
    auto m = Module::from_text(source, "rows.tir");
    REQUIRE_MESSAGE(m.ok(), (m.ok() ? "" : m.error().message));
    return e.compile(m.value());
  }()
                              : e.compile(source, "rows.tri");
  REQUIRE_MESSAGE(p.ok(), (p.ok() ? "" : p.error().message));
  if (source == testing::kBitLinear) {
    testing::BitLinearWeights(100, 37, 7).bind(p.value());  // K = 100, N = 37
  } else {
    auto b = p.value().bind_random(7);
    REQUIRE_MESSAGE(b.ok(), (b.ok() ? "" : b.error().message));
  }
  return std::move(p).value();
}

// One function of a program: its name, and per input the row length (inputs are [M, len]).
struct Fn {
  const char* source;
  bool ir_text;
  std::string name;
  std::vector<std::int64_t> in_len;
};

// Runs `fn` for M rows on `p` with inputs from `seed`, outputs poisoned; the output.
std::vector<float> run(Program& p, const Fn& fn, std::int64_t M, std::uint64_t seed, std::string* err = nullptr) {
  std::vector<std::vector<float>> ins;
  std::vector<TensorView> views;
  for (std::size_t i = 0; i < fn.in_len.size(); ++i)
    ins.push_back(testing::random_f32(M * fn.in_len[i], seed * 31 + i));
  for (std::size_t i = 0; i < fn.in_len.size(); ++i) views.push_back(view(ins[i], {M, fn.in_len[i]}));
  auto k = p.kernel(fn.name, views);
  if (!k.ok()) {
    if (err) *err = k.error().message;
    return {};
  }
  const TensorView& o = k.value()->outputs()[0];
  std::int64_t n = 1;
  for (std::int64_t d : o.shape) n *= d;
  std::vector<float> y(static_cast<std::size_t>(n), std::nanf(""));
  TensorView out[] = {view(y, o.shape)};
  auto r = k.value()->run(views, out);
  if (!r.ok()) {
    if (err) *err = r.error().message;
    return {};
  }
  return y;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
}

bool layer_close(const std::vector<float>& want, const std::vector<float>& got) {
  if (want.size() != got.size()) return false;
  float mx = 0;
  for (float v : want) mx = std::max(mx, std::fabs(v));
  for (std::size_t i = 0; i < want.size(); ++i)
    if (!(std::fabs(double(want[i]) - double(got[i])) <= 1e-3 * mx + 1e-5)) return false;
  return true;
}

std::vector<std::int64_t> row_counts() {
  std::vector<std::int64_t> ms;
  for (std::int64_t m = 1; m <= 40; ++m) ms.push_back(m);
  for (std::int64_t m : {100, 128, 129, 300}) ms.push_back(m);
  return ms;
}

bool host_ok() {
  if (targets::x86::host_isas().avx2) return true;
  MESSAGE("skipped: host lacks AVX2");
  return false;
}

}  // namespace

TEST_CASE("run-time rows: every M through one warm Program equals the M-specialized kernel and the reference") {
  if (!host_ok()) return;
  const Fn fns[] = {
      {kIntPath, true, "L.forward", {100, 50}},
      {testing::kBitLinear, false, "BitLinear.forward", {100}},
      {kMlp, false, "Down.forward", {70}},
      {kDense, false, "D.forward", {60}},
  };
  for (int threads : {1, 2}) {
    for (const Fn& fn : fns) {
      CAPTURE(threads);
      CAPTURE(fn.name);
      testing::TraceCapture trace;
      Engine rows_e = make_engine("x86", threads, true, &trace);
      Engine spec_e = make_engine("x86", threads, false);
      Engine ref_e = make_engine("reference", 1, false);
      Program rows_p = compile(rows_e, fn.source, fn.ir_text);
      Program spec_p = compile(spec_e, fn.source, fn.ir_text);
      Program ref_p = compile(ref_e, fn.source, fn.ir_text);
      for (std::int64_t M : row_counts()) {
        CAPTURE(M);
        std::string err;
        const std::vector<float> got = run(rows_p, fn, M, static_cast<std::uint64_t>(M), &err);
        REQUIRE_MESSAGE(!got.empty(), err);
        const std::vector<float> spec = run(spec_p, fn, M, static_cast<std::uint64_t>(M), &err);
        REQUIRE_MESSAGE(!spec.empty(), err);
        const std::vector<float> ref = run(ref_p, fn, M, static_cast<std::uint64_t>(M), &err);
        REQUIRE_MESSAGE(!ref.empty(), err);
        CHECK(same_bits(spec, got));
        if (fn.ir_text) CHECK(same_bits(ref, got));
        else CHECK(layer_close(ref, got));
      }
      // Every M was served by a shared bucket kernel: 1, 4, 8, 16, 32, 64, 128, 256, 512.
      CHECK(trace.count("ternjit_verbose,rows,") == static_cast<int>(row_counts().size()));
      CHECK(trace.count(",kernel=specialized") == 0);
      CHECK(trace.count(",lookup=miss,kernel=shared") == 9);
    }
  }
}

TEST_CASE("run-time rows: a new M in a bucket compiles nothing, and its Kernel checks buffers against its own M") {
  if (!host_ok()) return;
  testing::TraceCapture trace;
  Engine e = make_engine("x86", 1, true, &trace);
  Program p = compile(e, testing::kBitLinear, false);
  const Fn fn{testing::kBitLinear, false, "BitLinear.forward", {100}};
  REQUIRE(!run(p, fn, 5, 1).empty());
  CHECK(trace.count("lookup=miss,kernel=shared") == 1);
  REQUIRE(!run(p, fn, 7, 2).empty());  // same bucket (5-8)
  CHECK(trace.count("rows=7,bucket=8,lookup=hit,kernel=shared") == 1);
  CHECK(trace.count(",lookup=miss") == 1);
  CHECK(trace.count("bucket_lookup=hit") == 1);  // the specialize line of M = 7

  // The Kernel of M = 7 takes exactly [7, 100] -> [7, N]: a bucket-sized buffer is an error.
  std::vector<float> x7 = testing::random_f32(7 * 100, 3), x8 = testing::random_f32(8 * 100, 3);
  TensorView in7[] = {view(x7, {7, 100})};
  auto k = p.kernel("BitLinear.forward", in7);
  REQUIRE(k.ok());
  const std::int64_t N = k.value()->outputs()[0].shape[1];
  CHECK(k.value()->outputs()[0].shape[0] == 7);
  std::vector<float> y8(static_cast<std::size_t>(8 * N)), y7(static_cast<std::size_t>(7 * N));
  TensorView in8[] = {view(x8, {8, 100})};
  TensorView out8[] = {view(y8, {8, N})}, out7[] = {view(y7, {7, N})};
  CHECK(!k.value()->run(in7, out8).ok());
  CHECK(!k.value()->run(in8, out7).ok());
  CHECK(k.value()->run(in7, out7).ok());
}

TEST_CASE("run-time rows: functions the analysis or the target refuse stay correct and specialized") {
  if (!host_ok()) return;
  struct Case {
    Fn fn;
    const char* why;  // in the trace's refusal ("" when there is no candidate at all)
  };
  const Case cases[] = {
      {{kMixed, false, "Mix.forward", {40}}, "softmax"},
      // f32 x @ ternary w: a float tmatmul, whose kernels bake their M tail.
      {{R"(layer F {
    param w: TernaryTensor[40, 24]
    fn forward(x: Tensor[M, 40]) -> Tensor[M, 24] { return x @ w }
})", false, "F.forward", {40}}, "static rows"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.fn.name);
    testing::TraceCapture trace;
    Engine e = make_engine("x86", 2, true, &trace);
    Engine ref_e = make_engine("reference", 1, false);
    Program p = compile(e, c.fn.source, false);
    Program ref_p = compile(ref_e, c.fn.source, false);
    for (std::int64_t M : {1, 3, 5, 6, 17}) {
      CAPTURE(M);
      std::string err;
      const std::vector<float> got = run(p, c.fn, M, 9, &err);
      REQUIRE_MESSAGE(!got.empty(), err);
      const std::vector<float> ref = run(ref_p, c.fn, M, 9, &err);
      CHECK(layer_close(ref, got));
    }
    CHECK(trace.count(",kernel=shared") == 0);
    CHECK(trace.count(",kernel=specialized,why=") == 5);
    CHECK(trace.count(c.why) >= 1);
  }
}

}  // namespace ternjit

namespace ternjit {

TEST_CASE("run-time rows: TERNJIT_RUNTIME_ROWS turns them off; other values are errors") {
  ::setenv("TERNJIT_RUNTIME_ROWS", "0", 1);
  auto off = EngineOptions::from_env();
  ::setenv("TERNJIT_RUNTIME_ROWS", "yes", 1);
  auto bad = EngineOptions::from_env();
  ::unsetenv("TERNJIT_RUNTIME_ROWS");
  REQUIRE(off.ok());
  CHECK(!off.value().runtime_rows);
  CHECK(EngineOptions{}.runtime_rows);
  REQUIRE(!bad.ok());
  CHECK(bad.error().message.find("TERNJIT_RUNTIME_ROWS") != std::string::npos);
}

}  // namespace ternjit

namespace ternjit {

TEST_CASE("run-time rows: an x86 artifact's rows_max is validated at load, and run_rows checks its rows") {
  if (!host_ok()) return;
  auto target = targets::make_x86_target();
  auto m = ir::parse_module(R"(func @f(%x: f32[4, 8]) -> f32[4, 8] {
^entry:
  %r = relu %x : f32[4, 8]
  ret %r
}
)",
                            "f.tir");
  REQUIRE(m.ok());
  targets::CompileOptions co;
  co.rows_max = 4;
  auto a = target->compile(m.value(), "f", co);
  REQUIRE(a.ok());
  CHECK(a->metadata.at("rows_max") == "4");
  ir::ParamValues params;
  targets::LoadContext ctx;
  ctx.params = &params;
  auto k = target->load(a.value(), ctx);
  REQUIRE_MESSAGE(k.ok(), (k.ok() ? "" : k.error().message));
  REQUIRE(static_cast<bool>(k->run_rows));
  std::vector<float> x(32, -1.0f), y(32, std::nanf(""));
  for (int i = 0; i < 32; ++i) x[static_cast<std::size_t>(i)] = static_cast<float>(i % 3) - 1.0f;
  void* buffers[] = {x.data(), y.data()};
  REQUIRE(k->run_rows(k->state, buffers, 3).ok());
  for (int i = 0; i < 24; ++i) CHECK(y[static_cast<std::size_t>(i)] == std::max(0.0f, x[static_cast<std::size_t>(i)]));
  for (int i = 24; i < 32; ++i) CHECK(std::isnan(y[static_cast<std::size_t>(i)]));  // row 3 untouched
  CHECK(!k->run_rows(k->state, buffers, 5).ok());
  CHECK(!k->run_rows(k->state, buffers, -1).ok());
  for (const char* bad : {"x", "0", "-4", "4x", ""}) {
    CAPTURE(bad);
    targets::Artifact t = a.value();
    t.metadata["rows_max"] = bad;
    auto r = target->load(t, ctx);
    REQUIRE(!r.ok());
    CHECK(r.error().code == ErrorCode::InvalidInput);
  }
  targets::Artifact wrong = a.value();
  wrong.metadata["rows_max"] = "8";  // not the leading extent of the arguments
  CHECK(!target->load(wrong, ctx).ok());
}

}  // namespace ternjit
