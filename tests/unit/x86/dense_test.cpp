// SPDX-License-Identifier: Apache-2.0
// dense_test.cpp - `matmul(a f32, transpose(p))` of a load-time p [N, K] read as stored (dense.cpp,
// the output head) and a load-time f16/bf16 B widened into the GEMM's panels, against the interpreter.
//
// Tolerance. Each result is an f32 sum of K FMA terms in some order (vector lanes, then the
// lanes added); any order of K terms is within gamma_K * S of the exact sum (Higham 3.1,
// S = sum_k |a_mk| |p_nk|, gamma_K = K u / (1 - K u), u = 2^-24); the reference rounds
// its exact double sum once (u * S more). So |got - want| <= (gamma_K + u) * S per element,
// S computed by the interpreter on |a| and |p|. f16/bf16 values widen to f32 exactly, so
// the bound is the same for every kind of p.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "tests/unit/x86/plan_check.h"

namespace ternjit::targets::x86 {
namespace {

using testing::ty;

constexpr double kU = 0x1p-24;

struct Shape {
  std::int64_t B, M, K, N;  // B = 0: A is rank 2
};

std::string head_text(const Shape& s, ElemKind pk, bool also_return_transpose) {
  const std::vector<std::int64_t> a = s.B ? std::vector<std::int64_t>{s.B, s.M, s.K} : std::vector<std::int64_t>{s.M, s.K};
  const std::vector<std::int64_t> c = s.B ? std::vector<std::int64_t>{s.B, s.M, s.N} : std::vector<std::int64_t>{s.M, s.N};
  const std::string pt = ty(pk, {s.N, s.K});
  std::string r = "param @P.w : " + pt + "\n\nfunc @f(%a: " + ty(ElemKind::F32, a) + ") -> ";
  r += also_return_transpose ? "(" + ty(ElemKind::F32, c) + ", " + ty(pk, {s.K, s.N}) + ")" : ty(ElemKind::F32, c);
  r += " {\n^entry:\n  %p = param @P.w : " + pt + "\n  %t = transpose %p {perm = [1, 0]} : " + ty(pk, {s.K, s.N}) +
       "\n  %c = matmul %a, %t : " + ty(ElemKind::F32, c) + "\n  ret %c" + (also_return_transpose ? ", %t" : "") +
       "\n}\n";
  return r;
}

ir::HostTensor abs_of(ir::HostTensor t) {
  for (double& v : t.data) v = std::fabs(v);
  return t;
}

// The per-element bound (gamma_K + u) * S of the file comment.
std::vector<double> bound(const std::string& text, const ir::HostTensor& a, const ir::HostTensor& p, std::int64_t K) {
  auto m = ir::parse_module(text, "bound.tir");
  REQUIRE(m.ok());
  ir::ParamValues ap;
  ap.set("P.w", abs_of(p));
  auto s = ir::interpret(m.value(), "f", std::vector<ir::HostTensor>{abs_of(a)}, ap);
  REQUIRE(s.ok());
  const double gamma = static_cast<double>(K) * kU / (1 - static_cast<double>(K) * kU);
  std::vector<double> b = s.value()[0].data;
  for (double& v : b) v *= gamma + kU;
  return b;
}

TEST_CASE("dense head: matmul(a, transpose(p)) reads p [N, K] as stored, f16/bf16/f32, odd shapes, 1 and 2 threads "
          "[avx2] [avx512]") {
  // M: 1 (GEMV), tails of the 2- and 4-row tiles, >= 16 (blocks of 256 rows of p widened for
  // the GEMM, a shorter last block); K: 1, < one vector, tails of 8/16; N: tails of the
  // 4/8-row tiles, several thread chunks (K = 3: 10922 rows a chunk).
  const Shape shapes[] = {{0, 1, 1, 1},    {0, 1, 67, 9},  {0, 1, 700, 257}, {0, 3, 100, 33}, {0, 5, 17, 13},
                          {0, 13, 385, 65}, {0, 2, 3, 25000}, {0, 4, 16, 8},  {2, 3, 33, 17},  {3, 1, 40, 70},
                          {0, 9, 70, 600},  {0, 16, 5, 256}, {4, 5, 19, 300}, {0, 17, 33, 513},
                          {0, 1, 128, 31},  {0, 1, 2573, 45}};  // M = 1 row form: whole 128-value blocks, + 8s + a tail
  std::uint64_t seed = 41;
  for (Isa isa : testing::step_isas()) {
    for (const Shape& s : shapes) {
      for (ElemKind pk : {ElemKind::F16, ElemKind::BF16, ElemKind::F32}) {
        const std::vector<std::int64_t> ashape =
            s.B ? std::vector<std::int64_t>{s.B, s.M, s.K} : std::vector<std::int64_t>{s.M, s.K};
        const ir::HostTensor a = ir::HostTensor::random(ElemKind::F32, ashape, seed++);
        const ir::HostTensor p = ir::HostTensor::random(pk, {s.N, s.K}, seed++);
        ir::ParamValues params;
        params.set("P.w", p);
        const std::string text = head_text(s, pk, false);
        const std::vector<double> tol = bound(text, a, p, s.K);
        for (int threads : {1, 2}) {
          const std::string what = std::string(isa_name(isa)) + " p " + std::string(elem_name(pk)) +
                                   " B=" + std::to_string(s.B) + " M=" + std::to_string(s.M) + " K=" +
                                   std::to_string(s.K) + " N=" + std::to_string(s.N) + " threads=" +
                                   std::to_string(threads);
          const auto r = testing::run_plan(text, {a}, params, isa, threads, what);
          REQUIRE_MESSAGE(r.run_status.ok(), what << ": " << r.run_status.error().message);
          testing::check_close(r.want[0], r.got[0], [&](std::size_t i) { return tol[i]; }, what);
          testing::check_no_reference_step(r.steps, what);
          // Only p is a load-time value the plan holds: the transpose is never evaluated.
          CHECK_MESSAGE(r.load_time_evaluated == 1, what);
          bool matmul = false;
          for (const StepCode& st : r.steps) matmul |= st.op == "matmul";
          CHECK_MESSAGE(matmul, what);
        }
      }
    }
  }
}

TEST_CASE("dense head: M = 1 gives each row of a 2..15-row call bit for bit (decode equals prefill) [avx2] "
          "[avx512]") {
  // The decoder's guarantee (docs/bitnet.md): a decode step's logits are the same bits as
  // the same row of a prefill of fewer than 16 rows, so the M = 1 kernel must sum every
  // result in the order of the larger tiles.
  std::uint64_t seed = 900;
  for (Isa isa : testing::step_isas()) {
    for (ElemKind pk : {ElemKind::F16, ElemKind::BF16}) {
      for (const Shape& s : {Shape{0, 5, 2573, 45}, Shape{0, 15, 300, 37}, Shape{0, 2, 67, 9}}) {
        const ir::HostTensor a = ir::HostTensor::random(ElemKind::F32, {s.M, s.K}, seed++);
        const ir::HostTensor p = ir::HostTensor::random(pk, {s.N, s.K}, seed++);
        ir::ParamValues params;
        params.set("P.w", p);
        const std::string what = std::string(isa_name(isa)) + " " + std::string(elem_name(pk)) + " M=" +
                                 std::to_string(s.M) + " K=" + std::to_string(s.K);
        const auto all = testing::run_plan(head_text(s, pk, false), {a}, params, isa, 2, what);
        REQUIRE_MESSAGE(all.run_status.ok(), what);
        for (std::int64_t m = 0; m < s.M; ++m) {
          ir::HostTensor row = ir::HostTensor::random(ElemKind::F32, {1, s.K}, 1);
          for (std::int64_t k = 0; k < s.K; ++k)
            row.data[static_cast<std::size_t>(k)] = a.data[static_cast<std::size_t>(m * s.K + k)];
          const auto one = testing::run_plan(head_text(Shape{0, 1, s.K, s.N}, pk, false), {row}, params, isa, 1, what);
          REQUIRE_MESSAGE(one.run_status.ok(), what);
          for (std::int64_t n = 0; n < s.N; ++n) {
            const double x = all.got[0].data[static_cast<std::size_t>(m * s.N + n)];
            const double y = one.got[0].data[static_cast<std::size_t>(n)];
            REQUIRE_MESSAGE(x == y, what << " row " << m << " column " << n << ": " << x << " vs " << y);
          }
        }
      }
    }
  }
}

TEST_CASE("dense head: a transpose of p also returned is evaluated once and both results are right [avx2] [avx512]") {
  const Shape s{0, 2, 19, 11};
  for (Isa isa : testing::step_isas()) {
    const ir::HostTensor a = ir::HostTensor::random(ElemKind::F32, {s.M, s.K}, 5);
    const ir::HostTensor p = ir::HostTensor::random(ElemKind::F16, {s.N, s.K}, 6);
    ir::ParamValues params;
    params.set("P.w", p);
    const std::string text = head_text(s, ElemKind::F16, true);
    const std::vector<double> tol = bound(head_text(s, ElemKind::F16, false), a, p, s.K);
    const auto r = testing::run_plan(text, {a}, params, isa, 2, isa_name(isa).data());
    REQUIRE(r.run_status.ok());
    testing::check_close(r.want[0], r.got[0], [&](std::size_t i) { return tol[i]; }, "head");
    testing::check_exact(r.want[1], r.got[1], "returned transpose");
    CHECK(r.load_time_evaluated == 2);
  }
}

TEST_CASE("dense head: NaN and Inf in a or p propagate as in the reference [avx2] [avx512]") {
  const Shape s{0, 3, 37, 21};
  for (Isa isa : testing::step_isas()) {
    for (ElemKind pk : {ElemKind::F16, ElemKind::BF16}) {
      ir::HostTensor a = ir::HostTensor::random(ElemKind::F32, {s.M, s.K}, 7);
      ir::HostTensor p = ir::HostTensor::random(pk, {s.N, s.K}, 8);
      a.data[5] = std::numeric_limits<double>::quiet_NaN();                 // row 0: NaN everywhere
      a.data[static_cast<std::size_t>(s.K + 36)] = std::numeric_limits<double>::infinity();  // row 1, tail k
      p.data[static_cast<std::size_t>(4 * s.K + 2)] = -std::numeric_limits<double>::infinity();  // column 4
      ir::ParamValues params;
      params.set("P.w", p);
      const std::string text = head_text(s, pk, false);
      const auto r = testing::run_plan(text, {a}, params, isa, 1, "nan");
      REQUIRE(r.run_status.ok());
      const std::vector<double> tol = bound(text, a, p, s.K);
      testing::check_close(r.want[0], r.got[0], [&](std::size_t i) { return std::isfinite(tol[i]) ? tol[i] : 0.0; },
                           std::string(isa_name(isa)) + " " + std::string(elem_name(pk)));
    }
  }
}

TEST_CASE("dense head: a per-call transposed A with a transposed load-time p runs on the GEMM path, right "
          "[avx2] [avx512]") {
  // transpose(at) @ transpose(p): the A transpose computes no step (the GEMM reads at with
  // swapped strides), so this matmul must not take the dense NK path (difftest seed 703).
  for (Isa isa : testing::step_isas()) {
    for (ElemKind pk : {ElemKind::F32, ElemKind::F16, ElemKind::BF16}) {
      const std::int64_t M = 3, K = 7, N = 5;
      const std::string text = "param @P.w : " + ty(pk, {N, K}) + "\n\nfunc @f(%at: " + ty(ElemKind::F32, {K, M}) +
                               ") -> " + ty(ElemKind::F32, {M, N}) + " {\n^entry:\n  %a = transpose %at {perm = [1, 0]} : " +
                               ty(ElemKind::F32, {M, K}) + "\n  %p = param @P.w : " + ty(pk, {N, K}) +
                               "\n  %t = transpose %p {perm = [1, 0]} : " + ty(pk, {K, N}) + "\n  %c = matmul %a, %t : " +
                               ty(ElemKind::F32, {M, N}) + "\n  ret %c\n}\n";
      const ir::HostTensor at = ir::HostTensor::random(ElemKind::F32, {K, M}, 31);
      const ir::HostTensor p = ir::HostTensor::random(pk, {N, K}, 32);
      ir::ParamValues params;
      params.set("P.w", p);
      auto m = ir::parse_module(text, "ta.tir");
      REQUIRE(m.ok());
      ir::ParamValues ap;
      ap.set("P.w", abs_of(p));
      auto s = ir::interpret(m.value(), "f", std::vector<ir::HostTensor>{abs_of(at)}, ap);
      REQUIRE(s.ok());
      const double gamma = static_cast<double>(K) * kU / (1 - static_cast<double>(K) * kU);
      const auto r = testing::run_plan(text, {at}, params, isa, 2, "trans a");
      REQUIRE(r.run_status.ok());
      testing::check_close(r.want[0], r.got[0], [&](std::size_t i) { return (gamma + kU) * s.value()[0].data[i]; },
                           std::string(isa_name(isa)) + " " + std::string(elem_name(pk)));
      testing::check_no_reference_step(r.steps, "trans a");
    }
  }
}

TEST_CASE("dense: a load-time f16/bf16 B [K, N] is widened into the GEMM's panels once [avx2] [avx512]") {
  const Shape shapes[] = {{0, 1, 67, 9}, {0, 7, 130, 65}};
  std::uint64_t seed = 91;
  for (Isa isa : testing::step_isas()) {
    for (const Shape& s : shapes) {
      for (ElemKind bk : {ElemKind::F16, ElemKind::BF16}) {
        const std::string text = "param @P.w : " + ty(bk, {s.K, s.N}) + "\n\nfunc @f(%a: " + ty(ElemKind::F32, {s.M, s.K}) +
                                 ") -> " + ty(ElemKind::F32, {s.M, s.N}) + " {\n^entry:\n  %p = param @P.w : " +
                                 ty(bk, {s.K, s.N}) + "\n  %c = matmul %a, %p : " + ty(ElemKind::F32, {s.M, s.N}) +
                                 "\n  ret %c\n}\n";
        const ir::HostTensor a = ir::HostTensor::random(ElemKind::F32, {s.M, s.K}, seed++);
        const ir::HostTensor p = ir::HostTensor::random(bk, {s.K, s.N}, seed++);
        ir::ParamValues params;
        params.set("P.w", p);
        const std::vector<double> tol = bound(text, a, p, s.K);
        for (int threads : {1, 2}) {
          const std::string what = std::string(isa_name(isa)) + " " + std::string(elem_name(bk)) + " M=" +
                                   std::to_string(s.M) + " threads=" + std::to_string(threads);
          const auto r = testing::run_plan(text, {a}, params, isa, threads, what);
          REQUIRE(r.run_status.ok());
          testing::check_close(r.want[0], r.got[0], [&](std::size_t i) { return tol[i]; }, what);
          testing::check_no_reference_step(r.steps, what);
        }
      }
    }
  }
}

}  // namespace
}  // namespace ternjit::targets::x86
