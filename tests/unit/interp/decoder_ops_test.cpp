// SPDX-License-Identifier: Apache-2.0
// decoder_ops_test.cpp - the reference semantics of gather, slice, concat, layernorm, rope,
// causal_softmax, kv_write and attention (ir/README.md "Decoder ops"), checked against
// hand computations and independent loops written here, and their run-time errors.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "ir/interpret.h"
#include "ir/parse.h"

namespace ternjit::ir {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr ElemKind F32 = ElemKind::F32;
constexpr ElemKind F16 = ElemKind::F16;
constexpr ElemKind BF16 = ElemKind::BF16;
constexpr ElemKind I32 = ElemKind::I32;

HostTensor T(ElemKind k, std::vector<std::int64_t> shape, std::vector<double> v) {
  return HostTensor::from_values(k, std::move(shape), v);
}
HostTensor pos(std::int64_t p) { return HostTensor::scalar(I32, static_cast<double>(p)); }

// Parses `text` (one function @f) and interprets @f on `args`.
Result<std::vector<HostTensor>> run(const std::string& text, const std::vector<HostTensor>& args) {
  auto m = parse_module(text, "decoder.tir");
  REQUIRE_MESSAGE(m.ok(), (m.ok() ? std::string() : render(m.error())));
  return interpret(*m, "f", args, ParamValues{});
}

HostTensor run1(const std::string& text, const std::vector<HostTensor>& args) {
  auto r = run(text, args);
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? std::string() : render(r.error())));
  REQUIRE(r->size() == 1);
  return r->front();
}

// The error message of a run that must fail.
std::string run_error(const std::string& text, const std::vector<HostTensor>& args) {
  auto r = run(text, args);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ErrorCode::InvalidInput);
  return r.error().message;
}

void expect_near(const HostTensor& want, const HostTensor& got, double rtol = 0, double atol = 0) {
  auto mm = compare(want, got, rtol, atol);
  CHECK_MESSAGE(!mm.has_value(), (mm ? mm->message : std::string()));
}

std::vector<double> iota(std::int64_t n, double start = 0, double step = 1) {
  std::vector<double> v;
  for (std::int64_t i = 0; i < n; ++i) v.push_back(start + static_cast<double>(i) * step);
  return v;
}

// ---------------------------------------------------------------- gather

TEST_CASE("gather picks table rows by i32 ids of any rank, for every table kind") {
  for (ElemKind k : {F32, F16, BF16}) {
    const std::string kn(elem_name(k));
    CAPTURE(kn);
    const HostTensor table = HostTensor::random(k, {7, 5}, 11);  // odd V and D
    const HostTensor ids = T(I32, {2, 3}, {6, 0, 3, 3, 1, 6});
    const HostTensor got = run1("func @f(%t: " + kn + "[7, 5], %i: i32[2, 3]) -> " + kn + "[2, 3, 5] {\n^entry:\n"
                                "  %0 = gather %t, %i {axis = 0} : " + kn + "[2, 3, 5]\n  ret %0\n}\n",
                                {table, ids});
    REQUIRE(got.shape == std::vector<std::int64_t>{2, 3, 5});
    CHECK(got.kind == k);
    for (std::size_t i = 0; i < 6; ++i)
      for (std::size_t d = 0; d < 5; ++d)
        CHECK(got.data[i * 5 + d] == table.data[static_cast<std::size_t>(ids.data[i]) * 5 + d]);
  }
  // A scalar id gives one row [D].
  const HostTensor row = run1("func @f(%t: f32[3, 2], %i: i32[]) -> f32[2] {\n^entry:\n"
                              "  %0 = gather %t, %i {axis = 0} : f32[2]\n  ret %0\n}\n",
                              {T(F32, {3, 2}, iota(6)), pos(2)});
  expect_near(T(F32, {2}, {4, 5}), row);
}

TEST_CASE("gather: an id outside [0, V) is a run-time error naming the id, its index and V") {
  const std::string text = "func @f(%t: f32[5, 2], %i: i32[3]) -> f32[3, 2] {\n^entry:\n"
                           "  %0 = gather %t, %i {axis = 0} : f32[3, 2]\n  ret %0\n}\n";
  const HostTensor table = T(F32, {5, 2}, iota(10));
  CHECK(run_error(text, {table, T(I32, {3}, {0, 5, 1})}).find("gather: id 5 at index 1 is out of range [0, 5)") !=
        std::string::npos);
  CHECK(run_error(text, {table, T(I32, {3}, {0, 1, -1})}).find("gather: id -1 at index 2 is out of range [0, 5)") !=
        std::string::npos);
}

// ---------------------------------------------------------------- slice, concat

TEST_CASE("slice takes size elements from start along each axis") {
  const HostTensor x = HostTensor::random(F32, {3, 5, 7}, 3);
  auto at = [&](std::int64_t a, std::int64_t b, std::int64_t c) { return x.data[static_cast<std::size_t>((a * 5 + b) * 7 + c)]; };
  struct Case { int axis; std::int64_t start, size; };
  for (Case c : {Case{0, 1, 2}, Case{1, 2, 3}, Case{2, 6, 1}, Case{2, 0, 7}, Case{1, 5, 0}}) {
    CAPTURE(c.axis);
    CAPTURE(c.start);
    std::vector<std::int64_t> shape{3, 5, 7};
    shape[static_cast<std::size_t>(c.axis)] = c.size;
    const std::string rt = "f32[" + std::to_string(shape[0]) + ", " + std::to_string(shape[1]) + ", " +
                           std::to_string(shape[2]) + "]";
    const HostTensor got = run1("func @f(%x: f32[3, 5, 7]) -> " + rt + " {\n^entry:\n  %0 = slice %x {axis = " +
                                std::to_string(c.axis) + ", start = " + std::to_string(c.start) + ", size = " +
                                std::to_string(c.size) + "} : " + rt + "\n  ret %0\n}\n",
                                {x});
    REQUIRE(got.shape == shape);
    std::size_t n = 0;
    for (std::int64_t a = 0; a < shape[0]; ++a)
      for (std::int64_t b = 0; b < shape[1]; ++b)
        for (std::int64_t k = 0; k < shape[2]; ++k) {
          std::int64_t i[3] = {a, b, k};
          i[c.axis] += c.start;
          CHECK(got.data[n++] == at(i[0], i[1], i[2]));
        }
  }
}

TEST_CASE("concat joins operands along an axis; one operand is the identity") {
  const HostTensor a = T(I32, {2, 1, 3}, iota(6));
  const HostTensor b = T(I32, {2, 2, 3}, iota(12, 100));
  const HostTensor c = T(I32, {2, 3, 3}, iota(18, 200));
  const HostTensor got = run1("func @f(%a: i32[2, 1, 3], %b: i32[2, 2, 3], %c: i32[2, 3, 3]) -> i32[2, 6, 3] {\n"
                              "^entry:\n  %0 = concat %a, %b, %c {axis = 1} : i32[2, 6, 3]\n  ret %0\n}\n",
                              {a, b, c});
  expect_near(T(I32, {2, 6, 3}, {0,   1,   2,   100, 101, 102, 103, 104, 105, 200, 201, 202, 203, 204, 205, 206, 207, 208,
                                 3,   4,   5,   106, 107, 108, 109, 110, 111, 209, 210, 211, 212, 213, 214, 215, 216, 217}),
              got);
  const HostTensor last = run1("func @f(%a: f32[2, 3], %b: f32[2, 2]) -> f32[2, 5] {\n^entry:\n"
                               "  %0 = concat %a, %b {axis = 1} : f32[2, 5]\n  ret %0\n}\n",
                               {T(F32, {2, 3}, iota(6)), T(F32, {2, 2}, iota(4, 10))});
  expect_near(T(F32, {2, 5}, {0, 1, 2, 10, 11, 3, 4, 5, 12, 13}), last);
  const HostTensor one = run1("func @f(%a: f16[3, 2]) -> f16[3, 2] {\n^entry:\n"
                              "  %0 = concat %a {axis = 0} : f16[3, 2]\n  ret %0\n}\n",
                              {T(F16, {3, 2}, iota(6, 0.5))});
  expect_near(T(F16, {3, 2}, iota(6, 0.5)), one);
}

// ---------------------------------------------------------------- layernorm

TEST_CASE("layernorm over the last axis: (x - mean) / sqrt(var + eps) * gamma + beta") {
  // Row [1, 2, 3, 6]: mean 3, var (4 + 1 + 0 + 9) / 4 = 3.5.
  const HostTensor got = run1("func @f(%x: f32[2, 4], %g: f32[4], %b: f32[4]) -> f32[2, 4] {\n^entry:\n"
                              "  %0 = layernorm %x, %g, %b {eps = 0.5} : f32[2, 4]\n  ret %0\n}\n",
                              {T(F32, {2, 4}, {1, 2, 3, 6, 5, 5, 5, 5}), T(F32, {4}, {1, 2, 0.5, -1}),
                               T(F32, {4}, {0, 0.25, 1, 3})});
  const double s = 1 / std::sqrt(3.5 + 0.5);  // = 0.5
  expect_near(T(F32, {2, 4}, {-2 * s * 1 + 0, -1 * s * 2 + 0.25, 0 + 1, 3 * s * -1 + 3,  // row 1
                              0, 0.25, 1, 3}),                                           // constant row: beta
              got);
  // f16 operands give an f16 result rounded once.
  const HostTensor h = run1("func @f(%x: f16[1, 3], %g: f16[3], %b: f16[3]) -> f16[1, 3] {\n^entry:\n"
                            "  %0 = layernorm %x, %g, %b {eps = 0} : f16[1, 3]\n  ret %0\n}\n",
                            {T(F16, {1, 3}, {1, 2, 3}), T(F16, {3}, {1, 1, 1}), T(F16, {3}, {0, 0, 0})});
  const double r = std::sqrt(1.5);  // var = 2/3: 1 / sqrt(2/3)
  expect_near(T(F16, {1, 3}, {-r, 0, r}), h);
}

// ---------------------------------------------------------------- rope

// x [M, 1, 4], theta = 100: pair i has freq 100^(-2i/4), i.e. 1 and 0.1.
HostTensor rope_by_hand(const HostTensor& x, std::int64_t p0, bool neox) {
  HostTensor r = x;
  const double freq[2] = {1.0, 0.1};
  for (std::int64_t m = 0; m < x.shape[0]; ++m) {
    for (int i = 0; i < 2; ++i) {
      const double angle = static_cast<double>(p0 + m) * freq[i];
      const int ja = neox ? i : 2 * i, jb = neox ? i + 2 : 2 * i + 1;
      const double a = x.data[static_cast<std::size_t>(m * 4 + ja)], b = x.data[static_cast<std::size_t>(m * 4 + jb)];
      r.data[static_cast<std::size_t>(m * 4 + ja)] = static_cast<float>(a * std::cos(angle) - b * std::sin(angle));
      r.data[static_cast<std::size_t>(m * 4 + jb)] = static_cast<float>(a * std::sin(angle) + b * std::cos(angle));
    }
  }
  return r;
}

TEST_CASE("rope rotates pairs (2i, 2i+1) in mode norm and (i, i + D/2) in mode neox at positions pos + m") {
  const HostTensor x = T(F32, {3, 1, 4}, {1, 0, 0.5, -2, 0.25, 3, -1, 1, 2, 2, -0.5, 0.75});
  for (const bool neox : {false, true}) {
    CAPTURE(neox);
    const std::string text = std::string("func @f(%x: f32[3, 1, 4], %p: i32[]) -> f32[3, 1, 4] {\n^entry:\n") +
                             "  %0 = rope %x, %p {theta = 100, mode = " + (neox ? "neox" : "norm") +
                             "} : f32[3, 1, 4]\n  ret %0\n}\n";
    for (std::int64_t p : {0, 5, 4097}) {
      CAPTURE(p);
      // The reference computes in double and rounds once; the hand values too, with the
      // frequencies written out, so they agree to an f32 ulp (pow(100, -0.5) may differ
      // from 0.1 in its last double bit).
      expect_near(rope_by_hand(x, p, neox), run1(text, {x, pos(p)}), 2e-7, 1e-7);
    }
  }
  // Position 0 is the identity.
  const HostTensor x0 = T(F32, {1, 2, 4}, iota(8, -3));
  expect_near(x0, run1("func @f(%x: f32[1, 2, 4], %p: i32[]) -> f32[1, 2, 4] {\n^entry:\n"
                       "  %0 = rope %x, %p {theta = 500000, mode = norm} : f32[1, 2, 4]\n  ret %0\n}\n",
                       {x0, pos(0)}));
}

TEST_CASE("rope: a negative position is a run-time error") {
  CHECK(run_error("func @f(%x: f32[1, 1, 2], %p: i32[]) -> f32[1, 1, 2] {\n^entry:\n"
                  "  %0 = rope %x, %p {theta = 10000, mode = neox} : f32[1, 1, 2]\n  ret %0\n}\n",
                  {T(F32, {1, 1, 2}, {1, 2}), pos(-1)})
            .find("rope: pos -1 is negative (pos must be >= 0)") != std::string::npos);
}

TEST_CASE("rope: an odd symbolic head dim is a run-time error") {
  CHECK(run_error("func @f<D>(%x: f32[1, 1, D], %p: i32[]) -> f32[1, 1, D] {\n^entry:\n"
                  "  %0 = rope %x, %p {theta = 10000, mode = norm} : f32[1, 1, D]\n  ret %0\n}\n",
                  {T(F32, {1, 1, 3}, {1, 2, 3}), pos(0)})
            .find("rope: head dim D = 3 is odd") != std::string::npos);
}

// ---------------------------------------------------------------- causal_softmax

TEST_CASE("causal_softmax keeps t <= pos + m, zeroes the rest and never reads them") {
  // Masked entries hold NaN and inf: they must not reach the kept ones.
  const HostTensor x = T(F32, {2, 2, 4}, {1, 2, kNaN, kInf, 0, 0, 0, kNaN,  // batch 0
                                          3, -1, kNaN, kInf, -1, 1, 2, 5});  // batch 1
  auto sm = [](std::vector<double> v) {
    double mx = -kInf, s = 0;
    for (double a : v) mx = std::max(mx, a);
    for (double& a : v) s += (a = std::exp(a - mx));
    for (double& a : v) a = static_cast<float>(a / s);
    return v;
  };
  const std::string text = "func @f(%x: f32[2, 2, 4], %p: i32[]) -> f32[2, 2, 4] {\n^entry:\n"
                           "  %0 = causal_softmax %x, %p : f32[2, 2, 4]\n  ret %0\n}\n";
  {  // pos 1: row 0 keeps t <= 1, row 1 keeps t <= 2.
    const HostTensor got = run1(text, {x, pos(1)});
    auto r0 = sm({1, 2}), r1 = sm({0, 0, 0}), r2 = sm({3, -1}), r3 = sm({-1, 1, 2});
    expect_near(T(F32, {2, 2, 4}, {r0[0], r0[1], 0, 0, r1[0], r1[1], r1[2], 0, r2[0], r2[1], 0, 0, r3[0], r3[1], r3[2], 0}),
                got, 1e-7);
  }
  {  // pos 0: row 0 keeps only t = 0 (exactly 1), row 1 keeps t <= 1.
    const HostTensor got = run1(text, {x, pos(0)});
    auto r1 = sm({0, 0}), r3 = sm({-1, 1});
    expect_near(T(F32, {2, 2, 4}, {1, 0, 0, 0, r1[0], r1[1], 0, 0, 1, 0, 0, 0, r3[0], r3[1], 0, 0}), got, 1e-7);
  }
  {  // pos past T: every entry kept (the row has no more than T entries).
    const HostTensor y = HostTensor::random(F32, {3, 5}, 9);
    const HostTensor got = run1("func @f(%x: f32[3, 5], %p: i32[]) -> f32[3, 5] {\n^entry:\n"
                                "  %0 = causal_softmax %x, %p : f32[3, 5]\n  ret %0\n}\n",
                                {y, pos(100)});
    for (int r = 0; r < 3; ++r) {
      auto want = sm(std::vector<double>(y.data.begin() + r * 5, y.data.begin() + r * 5 + 5));
      for (int t = 0; t < 5; ++t) CHECK(got.data[static_cast<std::size_t>(r * 5 + t)] == doctest::Approx(want[static_cast<std::size_t>(t)]).epsilon(1e-7));
    }
  }
  CHECK(run_error(text, {x, pos(-2)}).find("causal_softmax: pos -2 is negative") != std::string::npos);
}

// ---------------------------------------------------------------- kv_write

TEST_CASE("kv_write writes rows pos + m of one layer, rounding to the cache kind; the rest is unchanged") {
  // f16: 1 + 2^-11 ties to 1; 1 + 3 * 2^-11 ties to even 1 + 2^-9; 65519 -> 65504; 65520 -> inf.
  // bf16: 1 + 2^-8 ties to 1; 1 + 3 * 2^-8 -> 1 + 2^-6; the f32 max rounds to inf.
  struct Case { ElemKind kind; std::vector<double> in, want; };
  const double f32max = std::numeric_limits<float>::max();
  for (const Case& c : {Case{F16, {1 + std::ldexp(1, -11), 1 + 3 * std::ldexp(1, -11), 65519, 65520},
                             {1, 1 + std::ldexp(1, -9), 65504, kInf}},
                        Case{BF16, {1 + std::ldexp(1, -8), 1 + 3 * std::ldexp(1, -8), -f32max, 0.1},
                             {1, 1 + std::ldexp(1, -6), -kInf, 0.10009765625}},
                        Case{F32, {0.1, -2, 3.5, 1e30}, {static_cast<float>(0.1), -2, 3.5, static_cast<float>(1e30)}}}) {
    const std::string kn(elem_name(c.kind));
    CAPTURE(kn);
    // cache [L=3, C=5, H=1, D=2], rows [M=2, 1, 2] into layer 1 at pos 2 (rows 2 and 3).
    const HostTensor cache = HostTensor::random(c.kind, {3, 5, 1, 2}, 5);
    const HostTensor got = run1("func @f(%c: " + kn + "[3, 5, 1, 2], %r: f32[2, 1, 2], %p: i32[]) -> " + kn +
                                "[3, 5, 1, 2] {\n^entry:\n  %0 = kv_write %c, %r, %p {layer = 1} : " + kn +
                                "[3, 5, 1, 2]\n  ret %0\n}\n",
                                {cache, T(F32, {2, 1, 2}, c.in), pos(2)});
    HostTensor want = cache;
    for (std::size_t j = 0; j < 4; ++j) want.data[(1 * 5 + 2) * 2 + j] = c.want[j];
    REQUIRE(got.kind == c.kind);
    for (std::size_t i = 0; i < want.data.size(); ++i) {
      CAPTURE(i);
      CHECK(got.data[i] == want.data[i]);
    }
  }
  // Rows already of the cache's kind; M = 0 writes nothing; the last rows of the capacity.
  const HostTensor cache = HostTensor::random(F16, {1, 3, 2, 1}, 8);
  const std::string t16 = "func @f(%c: f16[1, 3, 2, 1], %r: f16[1, 2, 1], %p: i32[]) -> f16[1, 3, 2, 1] {\n^entry:\n"
                          "  %0 = kv_write %c, %r, %p {layer = 0} : f16[1, 3, 2, 1]\n  ret %0\n}\n";
  HostTensor want = cache;
  want.data[4] = 0.5;
  want.data[5] = -0.25;
  expect_near(want, run1(t16, {cache, T(F16, {1, 2, 1}, {0.5, -0.25}), pos(2)}));
  expect_near(cache, run1("func @f(%c: f16[1, 3, 2, 1], %r: f32[0, 2, 1], %p: i32[]) -> f16[1, 3, 2, 1] {\n^entry:\n"
                          "  %0 = kv_write %c, %r, %p {layer = 0} : f16[1, 3, 2, 1]\n  ret %0\n}\n",
                          {cache, T(F32, {0, 2, 1}, {}), pos(3)}));
}

TEST_CASE("kv_write: pos < 0, rows past the capacity and a layer past L are run-time errors") {
  const std::string text = "func @f<L>(%c: f32[L, 4, 1, 1], %r: f32[2, 1, 1], %p: i32[]) -> f32[L, 4, 1, 1] {\n"
                           "^entry:\n  %0 = kv_write %c, %r, %p {layer = 1} : f32[L, 4, 1, 1]\n  ret %0\n}\n";
  const HostTensor rows = T(F32, {2, 1, 1}, {1, 2});
  const HostTensor cache = HostTensor::zeros(F32, {2, 4, 1, 1});
  CHECK(run_error(text, {cache, rows, pos(-1)}).find("kv_write: pos -1 is negative") != std::string::npos);
  CHECK(run_error(text, {cache, rows, pos(3)})
            .find("kv_write: rows [pos, pos + M) = [3, 5) do not fit the cache capacity C = 4 (pos 3, M 2)") !=
        std::string::npos);
  CHECK(run_error(text, {cache, rows, pos(2147483647)}).find("do not fit the cache capacity C = 4") != std::string::npos);
  CHECK(run_error(text, {HostTensor::zeros(F32, {1, 4, 1, 1}), rows, pos(0)})
            .find("kv_write: layer 1 is out of range [0, 1) for the cache [1, 4, 1, 1]") != std::string::npos);
  // pos + M == C is the last valid write.
  CHECK(run(text, {cache, rows, pos(2)}).ok());
}

TEST_CASE("pos is an i32 scalar argument: another kind or shape is a binding error") {
  const std::string text = "func @f(%c: f32[1, 4, 1, 1], %r: f32[1, 1, 1], %p: i32[]) -> f32[1, 4, 1, 1] {\n"
                           "^entry:\n  %0 = kv_write %c, %r, %p {layer = 0} : f32[1, 4, 1, 1]\n  ret %0\n}\n";
  const HostTensor cache = HostTensor::zeros(F32, {1, 4, 1, 1});
  const HostTensor rows = T(F32, {1, 1, 1}, {7});
  CHECK(run_error(text, {cache, rows, HostTensor::scalar(F32, 1)}).find("argument %p must be i32[], got f32[]") !=
        std::string::npos);
  CHECK(run_error(text, {cache, rows, T(I32, {1}, {1})}).find("argument %p must be i32[], got i32[1]") !=
        std::string::npos);
  const HostTensor got = run1(text, {cache, rows, pos(3)});
  CHECK(got.data == std::vector<double>{0, 0, 0, 7});
}

// ---------------------------------------------------------------- attention

// An independent attention: for each (m, h) the scores over t <= pos + m, softmax,
// weighted sum, all in double, with the query head h reading cache head h / (HQ / HKV).
HostTensor attention_by_hand(const HostTensor& q, const HostTensor& kc, const HostTensor& vc, std::int64_t p0,
                             std::int64_t layer, double scale) {
  const std::int64_t M = q.shape[0], HQ = q.shape[1], D = q.shape[2];
  const std::int64_t C = kc.shape[1], HKV = kc.shape[2];
  HostTensor out = HostTensor::zeros(F32, q.shape);
  for (std::int64_t m = 0; m < M; ++m)
    for (std::int64_t h = 0; h < HQ; ++h) {
      const std::int64_t kvh = h / (HQ / HKV);
      std::vector<double> s;
      for (std::int64_t t = 0; t <= p0 + m; ++t) {
        double dot = 0;
        for (std::int64_t d = 0; d < D; ++d)
          dot += q.data[static_cast<std::size_t>((m * HQ + h) * D + d)] *
                 kc.data[static_cast<std::size_t>(((layer * C + t) * HKV + kvh) * D + d)];
        s.push_back(scale * dot);
      }
      double mx = -kInf, sum = 0;
      for (double v : s) mx = std::max(mx, v);
      for (double& v : s) sum += (v = std::exp(v - mx));
      for (std::int64_t d = 0; d < D; ++d) {
        double acc = 0;
        for (std::size_t t = 0; t < s.size(); ++t)
          acc += s[t] / sum * vc.data[static_cast<std::size_t>(((layer * C + static_cast<std::int64_t>(t)) * HKV + kvh) * D + d)];
        out.data[static_cast<std::size_t>((m * HQ + h) * D + d)] = static_cast<float>(acc);
      }
    }
  return out;
}

TEST_CASE("attention by hand: uniform and 3:1 weights over two cache rows") {
  // One query row at pos 1 reads cache rows 0 and 1: k0 = (1, 0), k1 = (0, 1),
  // v0 = (1, 2), v1 = (3, 4). Head 0: q = 0, weights 1/2 each -> (2, 3). Head 1:
  // q = (ln 3, 0), scores ln 3 and 0, weights 3/4, 1/4 -> (1.5, 2.5). HKV = 1: both
  // query heads read cache head 0.
  const HostTensor q = T(F32, {1, 2, 2}, {0, 0, std::log(3.0), 0});
  const HostTensor kc = T(F32, {1, 3, 1, 2}, {1, 0, 0, 1, kNaN, kNaN});  // row 2 is never read
  const HostTensor vc = T(F32, {1, 3, 1, 2}, {1, 2, 3, 4, kNaN, kNaN});
  const HostTensor got = run1("func @f(%q: f32[1, 2, 2], %k: f32[1, 3, 1, 2], %v: f32[1, 3, 1, 2], %p: i32[]) -> "
                              "f32[1, 2, 2] {\n^entry:\n  %0 = attention %q, %k, %v, %p {layer = 0, scale = 1} : "
                              "f32[1, 2, 2]\n  ret %0\n}\n",
                              {q, kc, vc, pos(1)});
  expect_near(T(F32, {1, 2, 2}, {2, 3, 1.5, 2.5}), got, 1e-6);
}

TEST_CASE("attention: GQA maps query head h to cache head h / (HQ / HKV); rows past pos + m are never read") {
  for (ElemKind k : {F32, F16, BF16}) {
    const std::string kn(elem_name(k));
    CAPTURE(kn);
    // L = 2, C = 7, HKV = 2, D = 3 (odd); HQ = 6 (g = 3); M = 3 at pos 2: rows 0..4 are read.
    HostTensor kc = HostTensor::random(k, {2, 7, 2, 3}, 21);
    HostTensor vc = HostTensor::random(k, {2, 7, 2, 3}, 22);
    for (std::size_t t = 5; t < 7; ++t)  // layer 1, rows 5 and 6: poison
      for (std::size_t j = 0; j < 6; ++j) kc.data[((1 * 7 + t) * 2) * 3 + j] = vc.data[((1 * 7 + t) * 2) * 3 + j] = kNaN;
    const HostTensor q = HostTensor::random(F32, {3, 6, 3}, 23);
    const std::string ct = kn + "[2, 7, 2, 3]";
    const HostTensor got = run1("func @f(%q: f32[3, 6, 3], %k: " + ct + ", %v: " + ct + ", %p: i32[]) -> f32[3, 6, 3] {\n"
                                "^entry:\n  %0 = attention %q, %k, %v, %p {layer = 1, scale = 0.577} : f32[3, 6, 3]\n"
                                "  ret %0\n}\n",
                                {q, kc, vc, pos(2)});
    expect_near(attention_by_hand(q, kc, vc, 2, 1, 0.577), got, 1e-6, 1e-7);
    // The mapping itself: a value cache holding 10 in head 0 and 20 in head 1 gives 10
    // for query heads 0..2 and 20 for 3..5.
    HostTensor v2 = vc;
    for (std::size_t i = 0; i < v2.data.size(); ++i) v2.data[i] = (i / 3) % 2 == 0 ? 10 : 20;
    const HostTensor mapped = run1("func @f(%q: f32[3, 6, 3], %k: " + ct + ", %v: " + ct +
                                   ", %p: i32[]) -> f32[3, 6, 3] {\n^entry:\n"
                                   "  %0 = attention %q, %k, %v, %p {layer = 0, scale = 0.577} : f32[3, 6, 3]\n"
                                   "  ret %0\n}\n",
                                   {q, kc, v2, pos(0)});
    for (std::size_t i = 0; i < mapped.data.size(); ++i) {
      CAPTURE(i);
      CHECK(mapped.data[i] == doctest::Approx((i / 3) % 6 < 3 ? 10 : 20).epsilon(1e-6));
    }
  }
}

TEST_CASE("attention: pos < 0, rows past the capacity, a layer past L and HQ % HKV are run-time errors") {
  const std::string text =
      "func @f<L, HQ>(%q: f32[2, HQ, 2], %k: f32[L, 4, 2, 2], %v: f32[L, 4, 2, 2], %p: i32[]) -> f32[2, HQ, 2] {\n"
      "^entry:\n  %0 = attention %q, %k, %v, %p {layer = 1, scale = 1} : f32[2, HQ, 2]\n  ret %0\n}\n";
  const HostTensor q = HostTensor::random(F32, {2, 4, 2}, 1);
  const HostTensor c = HostTensor::random(F32, {2, 4, 2, 2}, 2);
  CHECK(run_error(text, {q, c, c, pos(-3)}).find("attention: pos -3 is negative") != std::string::npos);
  CHECK(run_error(text, {q, c, c, pos(3)}).find("attention: rows [pos, pos + M) = [3, 5) do not fit the cache capacity C = 4") !=
        std::string::npos);
  const HostTensor c1 = HostTensor::random(F32, {1, 4, 2, 2}, 2);
  CHECK(run_error(text, {q, c1, c1, pos(0)}).find("attention: layer 1 is out of range [0, 1)") != std::string::npos);
  CHECK(run_error(text, {HostTensor::random(F32, {2, 3, 2}, 1), c, c, pos(0)})
            .find("attention: query heads HQ = 3 are not a multiple of the cache heads HKV = 2") != std::string::npos);
  CHECK(run(text, {q, c, c, pos(2)}).ok());
}

}  // namespace
}  // namespace ternjit::ir
