// SPDX-License-Identifier: Apache-2.0
// data_ops_test.cpp - the x86 cast, broadcast and transpose steps (data_ops.cpp) against the interpreter.
//
// These steps do no arithmetic (a cast rounds once, as the interpreter's round_to_kind), so
// every result must equal the interpreter's exactly (NaN meets NaN), on every ISA path and
// thread count, with the outputs poisoned (0xAB bytes) first; no step may be a reference step.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "ir/builder.h"
#include "tests/unit/x86/plan_check.h"

namespace ternjit::targets::x86 {
namespace {

using testing::ty;

const ElemKind kKinds[] = {ElemKind::F32, ElemKind::F16, ElemKind::BF16, ElemKind::I32,
                           ElemKind::I8,  ElemKind::U8,  ElemKind::Bool};

// Values of `kind` for `n` elements: random ones spread wide (saturating every integer
// kind), plus the special values and rounding ties a conversion must get right.
ir::HostTensor source(ElemKind kind, std::int64_t n, std::uint64_t seed) {
  ir::HostTensor t = ir::HostTensor::random(ElemKind::F32, {n}, seed);
  const double inf = std::numeric_limits<double>::infinity();
  const double specials[] = {0.0,    -0.0, 0.5,        1.5,         2.5,      -2.5,      127.5,     -128.5,
                             255.5,  300,  -70000.5,   65504,       65520,    1e-8,      3e38,      -inf,
                             inf,    std::numeric_limits<double>::quiet_NaN(), 2147483647.0, 1.0 + 0x1p-11,
                             1.0 + 0x1p-8 + 0x1p-20, 16777217.0};
  for (std::size_t i = 0; i < t.data.size(); ++i) {
    double v = t.data[i] * (i % 3 == 0 ? 70000.0 : i % 3 == 1 ? 300.0 : 3.0);
    if (i % 5 == 0) v = specials[(i / 5) % std::size(specials)];
    t.data[i] = ir::round_to_kind(v, kind);  // a value of the kind
  }
  t.kind = kind;
  return t;
}

TEST_CASE("data ops: cast between every pair of kinds is exact, specials and ties included [avx2] [avx512]") {
  for (Isa isa : testing::step_isas()) {
    for (ElemKind from : kKinds) {
      for (ElemKind to : kKinds) {
        for (std::int64_t n : {1, 7, 8, 17, 70003}) {
          const ir::HostTensor x = source(from, n, static_cast<std::uint64_t>(n) * 31 + 7);
          const std::string text = "func @f(%x: " + ty(from, {n}) + ") -> " + ty(to, {n}) +
                                   " {\n^entry:\n  %y = cast %x {to = " + std::string(elem_name(to)) + "} : " + ty(to, {n}) + "\n  ret %y\n}\n";
          for (int threads : {1, 2}) {
            const std::string what = std::string(isa_name(isa)) + " " + std::string(elem_name(from)) + " -> " +
                                     std::string(elem_name(to)) + " n=" + std::to_string(n) +
                                     " threads=" + std::to_string(threads);
            const auto r = testing::run_plan(text, {x}, {}, isa, threads, what);
            REQUIRE(r.run_status.ok());
            testing::check_exact(r.want[0], r.got[0], what);
            testing::check_no_reference_step(r.steps, what);
          }
        }
      }
    }
  }
}

TEST_CASE("data ops: broadcast of every pattern, rank 1 to 4, 1-, 2- and 4-byte kinds [avx2] [avx512]") {
  struct Case {
    std::vector<std::int64_t> in, out;
  };
  const Case cases[] = {{{1}, {9}},          {{3}, {5, 3}},           {{5, 1}, {5, 7}},        {{1, 7}, {4, 7}},
                        {{1, 1}, {3, 2}},    {{2, 1, 3}, {2, 5, 3}},  {{1, 4, 1}, {3, 4, 6}},  {{6}, {2, 3, 6}},
                        {{3, 1, 1, 5}, {3, 2, 4, 5}}, {{1, 2, 1, 1}, {2, 2, 3, 70}}, {{7, 1}, {7, 20000}}};
  std::uint64_t seed = 3;
  for (Isa isa : testing::step_isas()) {
    for (const Case& c : cases) {
      for (ElemKind k : {ElemKind::F32, ElemKind::BF16, ElemKind::I8}) {
        const ir::HostTensor x = ir::HostTensor::random(k, c.in, seed++);
        const std::string text = "func @f(%x: " + ty(k, c.in) + ") -> " + ty(k, c.out) +
                                 " {\n^entry:\n  %y = broadcast %x : " + ty(k, c.out) + "\n  ret %y\n}\n";
        for (int threads : {1, 2}) {
          const std::string what = std::string(isa_name(isa)) + " " + ty(k, c.in) + " -> " + ty(k, c.out) +
                                   " threads=" + std::to_string(threads);
          const auto r = testing::run_plan(text, {x}, {}, isa, threads, what);
          REQUIRE(r.run_status.ok());
          testing::check_exact(r.want[0], r.got[0], what);
          testing::check_no_reference_step(r.steps, what);
        }
      }
    }
  }
}

TEST_CASE("data ops: transpose by every permutation of rank 1 to 4, odd extents [avx2] [avx512]") {
  const std::vector<std::int64_t> shapes[] = {{7}, {3, 5}, {1, 9}, {33, 17}, {2, 3, 5}, {4, 1, 7}, {2, 3, 4, 5},
                                              {3, 1, 5, 2}};
  std::uint64_t seed = 100;
  for (Isa isa : testing::step_isas()) {
    for (const auto& s : shapes) {
      std::vector<std::int64_t> perm(s.size());
      std::iota(perm.begin(), perm.end(), 0);
      do {
        std::vector<std::int64_t> out(s.size());
        for (std::size_t d = 0; d < s.size(); ++d) out[d] = s[static_cast<std::size_t>(perm[d])];
        std::string ps;
        for (std::size_t d = 0; d < perm.size(); ++d) ps += (d ? ", " : "") + std::to_string(perm[d]);
        for (ElemKind k : {ElemKind::F32, ElemKind::F16, ElemKind::I8}) {
          const ir::HostTensor x = ir::HostTensor::random(k, s, seed++);
          // A value computed per call (x + x would change kinds' values: a negation keeps them exact).
          const std::string text = "func @f(%x: " + ty(k, s) + ") -> " + ty(k, out) +
                                   " {\n^entry:\n  %y = transpose %x {perm = [" + ps + "]} : " + ty(k, out) +
                                   "\n  ret %y\n}\n";
          const int threads = static_cast<int>(seed % 2) + 1;
          const std::string what = std::string(isa_name(isa)) + " " + ty(k, s) + " perm [" + ps + "] threads=" +
                                   std::to_string(threads);
          const auto r = testing::run_plan(text, {x}, {}, isa, threads, what);
          REQUIRE(r.run_status.ok());
          testing::check_exact(r.want[0], r.got[0], what);
          testing::check_no_reference_step(r.steps, what);
        }
      } while (std::next_permutation(perm.begin(), perm.end()));
    }
  }
}

// Run-time rows (PlanOptions::rows_max): cast, broadcast, a transpose keeping axis 0 first,
// gather by per-row ids, slice and concat off axis 0, layernorm and the dense head compute
// only the call's first rows (rope, causal_softmax, kv_write and attention read a scalar
// `pos` argument, which no run-time-rows function has: check_rows_leading refuses it), each row what the full call gives it
// (bit for bit: every element is computed the same way whatever the row count).
TEST_CASE("data ops: cast, broadcast, transpose, gather, slice, concat, layernorm and the dense head honour run-time "
          "rows [avx2] [avx512]") {
  const char* text = R"(param @P.t : f16[9, 6]

param @P.g : f32[6]

func @f(%x: f32[5, 6], %y: f32[5, 1], %ids: i32[5]) -> (f16[5, 6], f32[5, 7], f32[5, 3, 2], f32[5, 9], f16[5, 6], f32[5, 7], f32[5, 6]) {
^entry:
  %p = param @P.t : f16[9, 6]
  %g = gather %p, %ids {axis = 0} : f16[5, 6]
  %sl = slice %x {axis = 1, start = 2, size = 3} : f32[5, 3]
  %cc = concat %sl, %y, %sl {axis = 1} : f32[5, 7]
  %gm = param @P.g : f32[6]
  %ln = layernorm %x, %gm, %gm {eps = 1e-05} : f32[5, 6]
  %c = cast %x {to = f16} : f16[5, 6]
  %b = broadcast %y : f32[5, 7]
  %r = reshape %x : f32[5, 2, 3]
  %t = transpose %r {perm = [0, 2, 1]} : f32[5, 3, 2]
  %pt = transpose %p {perm = [1, 0]} : f16[6, 9]
  %h = matmul %x, %pt : f32[5, 9]
  ret %c, %b, %t, %h, %g, %cc, %ln
}
)";
  auto m = ir::parse_module(text, "rows.tir");
  REQUIRE(m.ok());
  ir::ParamValues params;
  params.set("P.t", ir::HostTensor::random(ElemKind::F16, {9, 6}, 3));
  params.set("P.g", ir::HostTensor::random(ElemKind::F32, {6}, 6));
  const ir::HostTensor x = ir::HostTensor::random(ElemKind::F32, {5, 6}, 4), y = ir::HostTensor::random(ElemKind::F32, {5, 1}, 5);
  const ir::HostTensor ids{ElemKind::I32, {5}, {3, 0, 8, 1, 5}};
  const std::size_t out_bytes[] = {5 * 6 * 2, 5 * 7 * 4, 5 * 6 * 4, 5 * 9 * 4, 5 * 6 * 2, 5 * 7 * 4, 5 * 6 * 4};
  for (Isa isa : testing::step_isas()) {
    PlanOptions o;
    o.isa = isa;
    o.rows_max = 5;
    auto plan = Plan::build(m.value(), "f", params, o, nullptr);
    REQUIRE_MESSAGE(plan.ok(), (plan.ok() ? "" : plan.error().message));
    auto run = [&](std::int64_t rows) {
      std::vector<std::uint8_t> xb = x.to_bytes(), yb = y.to_bytes(), ib = ids.to_bytes();
      std::vector<std::vector<std::uint8_t>> outs;
      for (std::size_t b : out_bytes) outs.emplace_back(b, 0xAB);
      void* bufs[] = {xb.data(),      yb.data(),      ib.data(),      outs[0].data(), outs[1].data(),
                      outs[2].data(), outs[3].data(), outs[4].data(), outs[5].data(), outs[6].data()};
      REQUIRE(plan.value()->run(bufs, testing::std_threads(2), rows).ok());
      return outs;
    };
    const auto full = run(5);
    for (std::int64_t rows = 1; rows <= 5; ++rows) {
      const auto part = run(rows);
      for (std::size_t j = 0; j < std::size(out_bytes); ++j) {
        const std::size_t n = out_bytes[j] / 5 * static_cast<std::size_t>(rows);
        CHECK_MESSAGE(std::equal(part[j].begin(), part[j].begin() + static_cast<std::ptrdiff_t>(n), full[j].begin()),
                      isa_name(isa) << " rows " << rows << " result " << j);
        // Rows past the call's are not written.
        CHECK_MESSAGE(std::all_of(part[j].begin() + static_cast<std::ptrdiff_t>(n), part[j].end(),
                                  [](std::uint8_t v) { return v == 0xAB; }),
                      isa_name(isa) << " rows " << rows << " result " << j);
      }
    }
    // And the full call is the interpreter's (the head within the dense bound, the rest exact).
    auto want = ir::interpret(m.value(), "f", std::vector<ir::HostTensor>{x, y, ids}, params);
    REQUIRE(want.ok());
    for (std::size_t j : {0, 1, 2, 4, 5, 6}) {
      auto got = ir::HostTensor::from_bytes(want.value()[j].kind, want.value()[j].shape, full[j]);
      REQUIRE(got.ok());
      testing::check_exact(want.value()[j], got.value(), "full rows");
    }
  }
}

}  // namespace
}  // namespace ternjit::targets::x86
