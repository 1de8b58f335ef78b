// SPDX-License-Identifier: Apache-2.0
// matmul_test.cpp - the dense f32 matmul kernel (targets/x86/matmul.h) through x86 plans and the Engine, against the interpreter.
//
// Tolerance. The kernel computes each result as an f32 FMA chain over ascending k; the
// reference (ir/interpret.cpp) sums the exact products in double and rounds once to f32.
// With u = 2^-24 and gamma_K = K u / (1 - K u), the f32 chain is within
// gamma_K * S of the exact sum (S = sum_k |a_ik| |b_kj|; Higham, Accuracy and Stability,
// 3.1: an FMA is one rounding per step, so the plain dot-product bound holds), and the
// reference is within u * |exact| <= u * S of it (its double sum adds about K 2^-53 S,
// below the slack). So every element must satisfy |got - want| <= (gamma_K + u) * S,
// S computed per element in double. Non-finite results must match exactly (NaN where
// the reference has NaN, the same infinity).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <memory>
#include <span>
#include <optional>
#include <string>
#include <vector>

#include "ir/dsl/dsl.h"
#include "ir/interpret.h"
#include "ir/module_impl.h"
#include "ir/parse.h"
#include "passes/pipeline.h"
#include "passes/specialize_shapes.h"
#include "targets/x86/isa.h"
#include "targets/x86/matmul.h"
#include "targets/x86/plan.h"
#include "targets/x86/x86_target.h"
#include "tests/unit/engine/engine_testing.h"
#include "tests/unit/x86/x86_testing.h"
#include "ternjit/builder.h"

namespace ternjit::targets::x86 {
namespace {

constexpr double kU = 0x1p-24;

// How the operands reach the matmul.
enum class Form { Plain, TransA, TransB, TransBoth, ParamB, ParamTransB };

const char* form_name(Form f) {
  switch (f) {
    case Form::Plain: return "a @ b";
    case Form::TransA: return "transpose(at) @ b";
    case Form::TransB: return "a @ transpose(bt)";
    case Form::TransBoth: return "transpose(at) @ transpose(bt)";
    case Form::ParamB: return "a @ param";
    case Form::ParamTransB: return "a @ transpose(param)";
  }
  return "?";
}

std::string dims(std::int64_t r, std::int64_t c) { return "f32[" + std::to_string(r) + ", " + std::to_string(c) + "]"; }

// The module of one case: @f(a-or-at [, b-or-bt]) -> c, with b a parameter @P.w for the Param forms.
std::string module_text(Form f, std::int64_t M, std::int64_t K, std::int64_t N) {
  const bool ta = f == Form::TransA || f == Form::TransBoth;
  const bool tb = f == Form::TransB || f == Form::TransBoth;
  std::string s;
  if (f == Form::ParamB) s += "param @P.w : " + dims(K, N) + "\n\n";
  if (f == Form::ParamTransB) s += "param @P.w : " + dims(N, K) + "\n\n";
  s += "func @f(%a: " + (ta ? dims(K, M) : dims(M, K));
  if (f != Form::ParamB && f != Form::ParamTransB) s += ", %b: " + (tb ? dims(N, K) : dims(K, N));
  s += ") -> " + dims(M, N) + " {\n^entry:\n";
  std::string a = "%a", b = "%b";
  if (ta) {
    s += "  %at = transpose %a {perm = [1, 0]} : " + dims(M, K) + "\n";
    a = "%at";
  }
  if (f == Form::ParamB) s += "  %b = param @P.w : " + dims(K, N) + "\n";
  if (f == Form::ParamTransB) s += "  %b = param @P.w : " + dims(N, K) + "\n";
  if (tb || f == Form::ParamTransB) {
    s += "  %bt = transpose %b {perm = [1, 0]} : " + dims(K, N) + "\n";
    b = "%bt";
  }
  s += "  %c = matmul " + a + ", " + b + " : " + dims(M, N) + "\n  ret %c\n}\n";
  return s;
}

struct Shape {
  std::int64_t M, K, N;
};

// Checks `got` against the interpreter's `want` within (gamma_K + u) * S per element.
void check_matmul(const std::vector<double>& want, std::span<const float> got, const std::vector<double>& s,
                  std::int64_t K, const std::string& what) {
  const double gamma = static_cast<double>(K) * kU / (1 - static_cast<double>(K) * kU);
  int bad = 0;
  for (std::size_t i = 0; i < want.size() && bad < 5; ++i) {
    const double w = want[i], g = got[i];
    bool ok = false;
    if (std::isnan(w)) ok = std::isnan(g);
    else if (std::isinf(w)) ok = g == w;
    else ok = std::isfinite(g) && std::fabs(g - w) <= (gamma + kU) * s[i];
    if (!ok) {
      ++bad;
      FAIL_CHECK(what << ": element " << i << " want " << w << " got " << g << " tol " << (gamma + kU) * s[i]);
    }
  }
}

// Runs `text`'s @f on the x86 plan for `isa` and `threads` with NaN-poisoned output and
// checks it against ir::interpret; returns the plan's step descriptions.
std::vector<StepCode> run_case(const std::string& text, const std::vector<ir::HostTensor>& args,
                               const ir::HostTensor* bparam, Isa isa, int threads, std::int64_t MN, std::int64_t K,
                               const std::string& what, std::size_t misalign = 0, PackCache* packs = nullptr) {
  auto m = ir::parse_module(text, "matmul_test.tir");
  REQUIRE_MESSAGE(m.ok(), what << ": " << text);
  ir::ParamValues params;
  if (bparam) params.set("P.w", *bparam);
  PlanOptions o;
  o.isa = isa;
  o.threads = threads;
  auto plan = Plan::build(m.value(), "f", params, o, packs);
  REQUIRE_MESSAGE(plan.ok(), what << ": " << (plan.ok() ? "" : plan.error().message));
  auto want = ir::interpret(m.value(), "f", args, params);
  REQUIRE_MESSAGE(want.ok(), what << ": " << (want.ok() ? "" : want.error().message));

  std::vector<std::vector<float>> in;
  std::vector<void*> buffers;
  for (const ir::HostTensor& t : args) in.push_back(t.to_f32());
  for (auto& v : in) buffers.push_back(v.data());
  // The output 64-byte aligned (+ `misalign` floats): a large C written in one K block
  // takes the streaming stores only when its rows are aligned.
  const std::size_t bytes = (static_cast<std::size_t>(MN) + misalign + 16) * 4 / 64 * 64 + 64;
  std::unique_ptr<float, decltype(&std::free)> out(static_cast<float*>(std::aligned_alloc(64, bytes)), &std::free);
  std::span<float> c(out.get() + misalign, static_cast<std::size_t>(MN));
  std::fill(c.begin(), c.end(), std::nanf(""));
  buffers.push_back(c.data());
  const Parallel par = testing::std_threads(threads);
  auto r = plan.value()->run(buffers.data(), par);
  REQUIRE_MESSAGE(r.ok(), what << ": " << (r.ok() ? "" : r.error().message));

  // S = sum_k |a_ik| |b_kj|: the same function on the operands' absolute values.
  auto abs_of = [](ir::HostTensor t) {
    for (double& v : t.data) v = std::fabs(v);
    return t;
  };
  std::vector<ir::HostTensor> abs_args;
  for (const ir::HostTensor& t : args) abs_args.push_back(abs_of(t));
  ir::ParamValues abs_params;
  if (bparam) abs_params.set("P.w", abs_of(*bparam));
  auto sums = ir::interpret(m.value(), "f", abs_args, abs_params);
  REQUIRE(sums.ok());
  const std::vector<double>& s = sums.value()[0].data;
  check_matmul(want.value()[0].data, c, s, K, what);
  return plan.value()->describe();
}

std::vector<Isa> host_gemm_isas() {
  std::vector<Isa> r;
  for (Isa isa : {Isa::Avx2, Isa::Avx512})
    if (host_isas().supports(isa)) r.push_back(isa);
    else MESSAGE("skipped for " << isa_name(isa) << ": host lacks it");
  return r;
}

// The kernel step is a "matmul" step and nothing runs as a reference step (a transpose
// feeding it is read through its source, a load-time one evaluated at load).
void check_no_reference(const std::vector<StepCode>& steps, const std::string& what) {
  bool kernel = false;
  for (const StepCode& st : steps) {
    CHECK_MESSAGE(st.op.find("(reference)") == std::string::npos, what << ": step " << st.op << " " << st.summary);
    if (st.op == "matmul") {
      kernel = true;
      CHECK_FALSE(st.blobs.empty());
    }
  }
  CHECK_MESSAGE(kernel, what << ": no matmul kernel step");
}

TEST_CASE("matmul: the kernel matches the interpreter, odd shapes, transposed and load-time operands, 1 and 2 threads "
          "[avx2] [avx512]") {
  // M: 1, tails of the 6-row panel, >= 4 panels (B packed per call); N: tails of the
  // 16/64-column panel, fewer panels than threads; K: 1, tails, > 192 (K blocks of 128
  // with a shorter last block, 16-row blocks when B is read in place), one block (<= 192).
  const Shape shapes[] = {{1, 1, 1},    {1, 67, 9},   {1, 700, 257}, {3, 100, 33}, {7, 5, 257},  {6, 256, 64},
                          {13, 385, 65}, {17, 45, 5}, {33, 1, 130},  {24, 300, 16}, {64, 700, 200}, {2, 3, 1000}};
  std::uint64_t seed = 11;
  for (Isa isa : host_gemm_isas()) {
    for (const Shape& sh : shapes) {
      for (Form f : {Form::Plain, Form::TransA, Form::TransB, Form::TransBoth, Form::ParamB, Form::ParamTransB}) {
        const bool ta = f == Form::TransA || f == Form::TransBoth;
        const bool tb = f == Form::TransB || f == Form::TransBoth || f == Form::ParamTransB;
        std::vector<ir::HostTensor> args{ir::HostTensor::random(ElemKind::F32, ta ? std::vector<std::int64_t>{sh.K, sh.M}
                                                                                  : std::vector<std::int64_t>{sh.M, sh.K},
                                                                 seed++)};
        ir::HostTensor b = ir::HostTensor::random(ElemKind::F32, tb ? std::vector<std::int64_t>{sh.N, sh.K}
                                                                   : std::vector<std::int64_t>{sh.K, sh.N},
                                                  seed++);
        const bool param = f == Form::ParamB || f == Form::ParamTransB;
        if (!param) args.push_back(b);
        for (int threads : {1, 2}) {
          const std::string what = std::string(isa_name(isa)) + " " + form_name(f) + " M=" + std::to_string(sh.M) +
                                   " K=" + std::to_string(sh.K) + " N=" + std::to_string(sh.N) +
                                   " threads=" + std::to_string(threads);
          const auto steps = run_case(module_text(f, sh.M, sh.K, sh.N), args, param ? &b : nullptr, isa, threads,
                                      sh.M * sh.N, sh.K, what);
          check_no_reference(steps, what);
        }
      }
    }
  }
}

// A batched case: the module text, its arguments' shapes and the parameter's (empty: none).
struct BatchedCase {
  const char* name;
  std::string text;
  std::vector<std::vector<std::int64_t>> args;
  std::vector<std::int64_t> param;
};

std::string type_of(const std::vector<std::int64_t>& shape) {
  std::string s = "f32[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::vector<BatchedCase> batched_cases(std::int64_t B, std::int64_t M, std::int64_t K, std::int64_t N) {
  using V = std::vector<std::int64_t>;
  const std::string out = type_of({B, M, N});
  auto plain = [&](const char* name, V a, V b) {
    return BatchedCase{name,
                       "func @f(%a: " + type_of(a) + ", %b: " + type_of(b) + ") -> " + out +
                           " {\n^entry:\n  %c = matmul %a, %b : " + out + "\n  ret %c\n}\n",
                       {a, b},
                       {}};
  };
  std::vector<BatchedCase> r;
  r.push_back(plain("a[B] @ b[B]", {B, M, K}, {B, K, N}));
  r.push_back(plain("a[B] @ b", {B, M, K}, {K, N}));
  r.push_back(plain("a @ b[B]", {M, K}, {B, K, N}));
  r.push_back(plain("a[1] @ b[B]", {1, M, K}, {B, K, N}));
  r.push_back(BatchedCase{"transpose(at[B]) @ transpose(bt[B])",
                          "func @f(%a: " + type_of({B, K, M}) + ", %b: " + type_of({B, N, K}) + ") -> " + out +
                              " {\n^entry:\n  %at = transpose %a {perm = [0, 2, 1]} : " + type_of({B, M, K}) +
                              "\n  %bt = transpose %b {perm = [0, 2, 1]} : " + type_of({B, K, N}) +
                              "\n  %c = matmul %at, %bt : " + out + "\n  ret %c\n}\n",
                          {{B, K, M}, {B, N, K}},
                          {}});
  r.push_back(BatchedCase{"transpose(at[B]) @ b",
                          "func @f(%a: " + type_of({B, K, M}) + ", %b: " + type_of({K, N}) + ") -> " + out +
                              " {\n^entry:\n  %at = transpose %a {perm = [0, 2, 1]} : " + type_of({B, M, K}) +
                              "\n  %c = matmul %at, %b : " + out + "\n  ret %c\n}\n",
                          {{B, K, M}, {K, N}},
                          {}});
  r.push_back(BatchedCase{"a[B] @ param[B]",
                          "param @P.w : " + type_of({B, K, N}) + "\n\nfunc @f(%a: " + type_of({B, M, K}) + ") -> " +
                              out + " {\n^entry:\n  %b = param @P.w : " + type_of({B, K, N}) +
                              "\n  %c = matmul %a, %b : " + out + "\n  ret %c\n}\n",
                          {{B, M, K}},
                          {B, K, N}});
  return r;
}

TEST_CASE("matmul: batched (rank 3) operands, broadcast and transposed, match the interpreter [avx2] [avx512]") {
  const Shape shapes[] = {{1, 67, 9}, {7, 300, 70}, {13, 5, 129}};
  std::uint64_t seed = 900;
  for (Isa isa : host_gemm_isas()) {
    for (const Shape& sh : shapes) {
      for (std::int64_t B : {1, 3}) {
        for (const BatchedCase& bc : batched_cases(B, sh.M, sh.K, sh.N)) {
          std::vector<ir::HostTensor> args;
          for (const auto& shape : bc.args) args.push_back(ir::HostTensor::random(ElemKind::F32, shape, seed++));
          std::optional<ir::HostTensor> param;
          if (!bc.param.empty()) param = ir::HostTensor::random(ElemKind::F32, bc.param, seed++);
          for (int threads : {1, 2}) {
            const std::string what = std::string(isa_name(isa)) + " " + bc.name + " B=" + std::to_string(B) +
                                     " M=" + std::to_string(sh.M) + " K=" + std::to_string(sh.K) +
                                     " N=" + std::to_string(sh.N) + " threads=" + std::to_string(threads);
            const auto steps =
                run_case(bc.text, args, param ? &*param : nullptr, isa, threads, B * sh.M * sh.N, sh.K, what);
            check_no_reference(steps, what);
          }
        }
      }
    }
  }
}

TEST_CASE("matmul: a C of >= 16 MiB in one K block (streaming stores), aligned or not [avx2] [avx512]") {
  // 700 x 6144 f32 = 16.4 MiB, K = 7: one K block; rows of 6144 floats are 64-byte
  // multiples, so an aligned output takes vmovntps and one offset by a float does not.
  const std::int64_t M = 700, K = 7, N = 6144;
  std::uint64_t seed = 700;
  for (Isa isa : host_gemm_isas()) {
    for (Form f : {Form::Plain, Form::TransA}) {
      const bool ta = f == Form::TransA;
      const std::vector<ir::HostTensor> args{
          ir::HostTensor::random(ElemKind::F32, ta ? std::vector<std::int64_t>{K, M} : std::vector<std::int64_t>{M, K},
                                 seed++),
          ir::HostTensor::random(ElemKind::F32, {K, N}, seed++)};
      for (int threads : {1, 2}) {
        for (std::size_t misalign : {0, 1}) {
          const std::string what = std::string(isa_name(isa)) + " " + form_name(f) +
                                   " threads=" + std::to_string(threads) + " misalign=" + std::to_string(misalign);
          run_case(module_text(f, M, K, N), args, nullptr, isa, threads, M * N, K, what, misalign);
        }
      }
    }
  }
}

TEST_CASE("matmul: a load-time B is packed once per program, whatever M [avx2] [avx512]") {
  const std::int64_t K = 70, N = 33;
  const ir::HostTensor w = ir::HostTensor::random(ElemKind::F32, {K, N}, 77);
  for (Isa isa : host_gemm_isas()) {
    PackCache packs;
    for (std::int64_t M : {1, 7, 30}) {
      const std::string what = std::string(isa_name(isa)) + " M=" + std::to_string(M);
      const std::vector<ir::HostTensor> args{ir::HostTensor::random(ElemKind::F32, {M, K}, 78 + static_cast<std::uint64_t>(M))};
      run_case(module_text(Form::ParamB, M, K, N), args, &w, isa, 1, M * N, K, what, 0, &packs);
    }
    CHECK(packs.packs_made() == 1);
  }
}

TEST_CASE("matmul: NaN and Inf in the operands propagate as in the reference [avx2] [avx512]") {
  // Rows of a and columns of b carrying NaN, +Inf, -Inf, and an Inf meeting a zero (NaN
  // in the reference: 0 * Inf), in the column tails and across K blocks.
  const Shape shapes[] = {{7, 300, 37}, {25, 600, 70}, {1, 9, 17}};
  std::uint64_t seed = 500;
  for (Isa isa : host_gemm_isas()) {
    for (const Shape& sh : shapes) {
      for (Form f : {Form::Plain, Form::TransBoth, Form::ParamB}) {
        const bool ta = f == Form::TransBoth, tb = f == Form::TransBoth;
        std::vector<float> a = ir::HostTensor::random(ElemKind::F32, {sh.M * sh.K}, seed++).to_f32();
        std::vector<float> b = ir::HostTensor::random(ElemKind::F32, {sh.K * sh.N}, seed++).to_f32();
        auto at = [&](std::int64_t i, std::int64_t k) -> float& { return ta ? a[k * sh.M + i] : a[i * sh.K + k]; };
        auto bt = [&](std::int64_t k, std::int64_t j) -> float& { return tb ? b[j * sh.K + k] : b[k * sh.N + j]; };
        const float inf = std::numeric_limits<float>::infinity();
        at(0, sh.K - 1) = std::nanf("");
        if (sh.M > 2) {
          at(2, sh.K / 2) = inf;
          bt(sh.K / 2, 0) = 0.0F;  // Inf * 0 = NaN at (2, 0), Inf elsewhere in row 2
        }
        if (sh.M > 5) at(5, 0) = -inf;
        bt(sh.K - 1, sh.N - 1) = inf;  // the last column (a tail on every panel width)
        if (sh.N > 3) bt(0, 3) = std::nanf("");
        const std::vector<std::int64_t> ashape = ta ? std::vector<std::int64_t>{sh.K, sh.M}
                                                    : std::vector<std::int64_t>{sh.M, sh.K};
        const std::vector<std::int64_t> bshape = tb ? std::vector<std::int64_t>{sh.N, sh.K}
                                                    : std::vector<std::int64_t>{sh.K, sh.N};
        std::vector<ir::HostTensor> args{ir::HostTensor::from_f32(ashape, a)};
        const ir::HostTensor bt_tensor = ir::HostTensor::from_f32(bshape, b);
        if (f != Form::ParamB) args.push_back(bt_tensor);
        for (int threads : {1, 2}) {
          const std::string what = std::string(isa_name(isa)) + " " + form_name(f) + " M=" + std::to_string(sh.M) +
                                   " K=" + std::to_string(sh.K) + " N=" + std::to_string(sh.N) +
                                   " threads=" + std::to_string(threads);
          run_case(module_text(f, sh.M, sh.K, sh.N), args, f == Form::ParamB ? &bt_tensor : nullptr, isa, threads,
                   sh.M * sh.N, sh.K, what);
        }
      }
    }
  }
}

TEST_CASE("matmul: forms the kernel does not take stay reference steps and are right") {
  if (!host_isas().avx2) {
    MESSAGE("skipped: host lacks AVX2");
    return;
  }
  // Rank-1 and rank-4 operands: the reference step, never a wrong answer.
  const char* text = R"(func @f(%x: f32[2, 1, 3, 5], %y: f32[2, 2, 5, 4], %v: f32[5]) -> (f32[2, 2, 3, 4], f32[2, 1, 3]) {
^entry:
  %z = matmul %x, %y : f32[2, 2, 3, 4]
  %g = matmul %x, %v : f32[2, 1, 3]
  ret %z, %g
}
)";
  auto m = ir::parse_module(text, "matmul_test.tir");
  REQUIRE_MESSAGE(m.ok(), (m.ok() ? "" : m.error().message));
  PlanOptions o;
  auto plan = Plan::build(m.value(), "f", {}, o, nullptr);
  REQUIRE_MESSAGE(plan.ok(), (plan.ok() ? "" : plan.error().message));
  int reference = 0;
  for (const StepCode& st : plan.value()->describe()) reference += st.op == "matmul (reference)";
  CHECK(reference == 2);
  std::vector<ir::HostTensor> args{ir::HostTensor::random(ElemKind::F32, {2, 1, 3, 5}, 1),
                                   ir::HostTensor::random(ElemKind::F32, {2, 2, 5, 4}, 2),
                                   ir::HostTensor::random(ElemKind::F32, {5}, 3)};
  auto want = ir::interpret(m.value(), "f", args, {});
  REQUIRE(want.ok());
  std::vector<std::vector<float>> in;
  std::vector<void*> buffers;
  for (const ir::HostTensor& t : args) in.push_back(t.to_f32());
  for (auto& v : in) buffers.push_back(v.data());
  std::vector<float> z(48, std::nanf("")), g(6, std::nanf(""));
  buffers.push_back(z.data());
  buffers.push_back(g.data());
  REQUIRE(plan.value()->run(buffers.data(), Parallel{}).ok());
  CHECK(z == want.value()[0].to_f32());  // the reference step is the interpreter itself
  CHECK(g == want.value()[1].to_f32());
}


TEST_CASE("matmul: a BitLinear backward runs its dense matmuls as kernels through the Engine [avx2] [avx512]") {
  auto mod = Module::from_text(ternjit::testing::kQatBitLinear, "qat.tir");
  REQUIRE(mod.ok());
  GradOptions go;
  go.wrt = {"x", "@L.w"};
  REQUIRE(grad(*mod, "L.forward", go).ok());
  const std::int64_t K = 67, N = 33;
  for (Isa isa : host_gemm_isas()) {
    for (std::int64_t M : {1, 17}) {
      CAPTURE(isa_name(isa));
      CAPTURE(M);
      // The code `ternjit compile --emit asm` lists: the backward after the pipeline.
      std::map<std::string, std::int64_t> bind = {{"M", M}, {"K", K},
                                                  {"N", N}};
      const ir::Module& im = ir::unwrap(*mod);
      auto spec = passes::specialize_function(im, "L.forward.bwd", bind, true);
      REQUIRE_MESSAGE(spec.ok(), (spec.ok() ? "" : spec.error().message));
      auto target = make_x86_target();
      passes::PipelineOptions po;
      REQUIRE(passes::run_pipeline(spec.value(), passes::default_pipeline(passes::OptLevel::O2), po).ok());
      auto steps = describe_code(spec.value(), "L.forward.bwd", isa_name(isa), 2);
      REQUIRE_MESSAGE(steps.ok(), (steps.ok() ? "" : steps.error().message));
      int kernels = 0;
      for (const StepCode& st : steps.value()) {
        CHECK_MESSAGE(st.op != "matmul (reference)", st.summary);
        CHECK_MESSAGE(st.op != "transpose (reference)", st.summary);
        kernels += st.op == "matmul";
      }
      CHECK(kernels >= 1);

      // And it runs through the Engine (x86, this isa, 2 threads) like the interpreter.
      EngineOptions eo;
      eo.target = "x86";
      eo.max_isa = std::string(isa_name(isa));
      eo.threads = 2;
      auto e = Engine::create(eo);
      REQUIRE(e.ok());
      auto p = e->compile(*mod);
      REQUIRE_MESSAGE(p.ok(), (p.ok() ? "" : p.error().message));
      const auto seed = static_cast<std::uint64_t>(M * 31 + 7);
      ir::ParamValues params;
      ir::HostTensor w = ir::HostTensor::random(ElemKind::F32, {K, N}, seed);
      ir::HostTensor b = ir::HostTensor::random(ElemKind::F32, {N}, seed + 1);
      params.set("L.w", w);
      params.set("L.b", b);
      std::vector<float> ws = w.to_f32(), bs = b.to_f32();
      REQUIRE(p->bind("L.w", TensorView{ws.data(), ElemKind::F32, w.shape}).ok());
      REQUIRE(p->bind("L.b", TensorView{bs.data(), ElemKind::F32, b.shape}).ok());
      const ir::HostTensor x = ir::HostTensor::random(ElemKind::F32, {M, K}, seed + 2);
      auto fwd = ir::interpret(im, "L.forward.fwd", std::vector<ir::HostTensor>{x}, params);
      REQUIRE(fwd.ok());
      std::vector<ir::HostTensor> args{x, ir::HostTensor::random(ElemKind::F32, {M, N}, seed + 3)};
      args.insert(args.end(), fwd.value().begin() + 1, fwd.value().end());
      auto want = ir::interpret(im, "L.forward.bwd", args, params);
      REQUIRE(want.ok());
      std::vector<std::vector<float>> in_storage;
      std::vector<TensorView> ins;
      for (const ir::HostTensor& t : args) in_storage.push_back(t.to_f32());
      for (std::size_t i = 0; i < args.size(); ++i)
        ins.push_back(TensorView{in_storage[i].data(), ElemKind::F32, args[i].shape});
      std::vector<std::vector<float>> out_storage;
      std::vector<TensorView> outs;
      for (const ir::HostTensor& t : want.value()) out_storage.emplace_back(static_cast<std::size_t>(t.numel()), std::nanf(""));
      for (std::size_t k = 0; k < want.value().size(); ++k)
        outs.push_back(TensorView{out_storage[k].data(), ElemKind::F32, want.value()[k].shape});
      auto r = p->run("L.forward.bwd", ins, outs);
      REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
      // As backward_test.cpp: every gradient is a sum of at most P = max(M, K, N) f32
      // products after a few f32 elementwise steps: |d| <= 4 P^1.5 u max|want| + 2^-20.
      const double P = static_cast<double>(std::max({M, K, N}));
      for (std::size_t k = 0; k < want.value().size(); ++k) {
        double mx = 0;
        for (double v : want.value()[k].data) mx = std::max(mx, std::fabs(v));
        const double tol = 4 * std::pow(P, 1.5) * kU * mx + 0x1p-20;
        for (std::size_t i = 0; i < want.value()[k].data.size(); ++i)
          CHECK_MESSAGE(std::fabs(out_storage[k][i] - want.value()[k].data[i]) <= tol,
                        "output " << k << " element " << i << " want " << want.value()[k].data[i] << " got "
                                  << out_storage[k][i]);
      }
    }
  }
}

}  // namespace
}  // namespace ternjit::targets::x86
