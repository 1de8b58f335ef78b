// SPDX-License-Identifier: Apache-2.0
// data_ops_test.cpp - the x86 cast, broadcast and transpose steps (data_ops.cpp) against the interpreter.
//
// These steps do no arithmetic (a cast rounds once, as the interpreter's round_to_kind), so
// every result must equal the interpreter's exactly (NaN meets NaN), on every ISA path and
// thread count, with the outputs poisoned (0xAB bytes) first; no step may be a reference step.
#include <doctest/doctest.h>

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

}  // namespace
}  // namespace ternjit::targets::x86
