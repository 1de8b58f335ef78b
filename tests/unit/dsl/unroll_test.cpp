// SPDX-License-Identifier: Apache-2.0
// unroll_test.cpp - what loops, layer instances, tuples and pow compute (on the interpreter),
// and the bounds of unrolling.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "ir/dsl/dsl.h"
#include "ir/interpret.h"
#include "ir/verify.h"

namespace ternjit::dsl {
namespace {

namespace fs = std::filesystem;

std::string read_tri(const std::string& name) {
  std::ifstream in(fs::path(TERNJIT_SOURCE_DIR) / "tests/dsl" / name, std::ios::binary);
  REQUIRE_MESSAGE(in.good(), "cannot open tests/dsl/" << name);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

ir::Module compile_ok(const std::string& source, const std::string& name) {
  auto r = compile_tri(source, name);
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? std::string() : render(r.error())));
  for (const Diagnostic& d : ir::verify_module(*r)) FAIL_CHECK(render(d));
  return std::move(r).value();
}

std::vector<ir::HostTensor> run(const ir::Module& m, std::string_view fn, const std::vector<ir::HostTensor>& args,
                                const ir::ParamValues& params) {
  auto out = ir::interpret(m, fn, args, params);
  REQUIRE_MESSAGE(out.ok(), (out.ok() ? std::string() : render(out.error())));
  return std::move(out).value();
}

std::vector<double> wave(std::size_t n, double a, double b) {
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = std::sin(a * static_cast<double>(i) + b);
  return v;
}

}  // namespace

TEST_CASE("unroll: loops.tri computes the hand-unrolled loop (carried h and scale, nested, empty)") {
  ir::Module m = compile_ok(read_tri("loops.tri"), "loops.tri");
  const std::int64_t rows = 2, e = 5;
  std::vector<std::vector<double>> s;
  ir::ParamValues params;
  for (int i = 0; i < 4; ++i) {
    s.push_back(wave(e, 0.7, i));
    params.set("Model.blk." + std::to_string(i) + ".s", ir::HostTensor::from_values(ElemKind::F32, {e}, s.back()));
  }
  const std::vector<double> x = wave(rows * e, 0.31, 0.5);
  auto out = run(m, "Model.forward", {ir::HostTensor::from_values(ElemKind::F32, {rows, e}, x)}, params);
  REQUIRE(out.size() == 1);
  // The same arithmetic in f32, op by op, in the loop's order.
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < e; ++c) {
      auto f = [](double v) { return static_cast<double>(static_cast<float>(v)); };
      double h = f(x[r * e + c]), scale = 1.0;
      for (int i = 1; i < 3; ++i) {
        const double t = f(h * f(s[i][c]));
        h = f(t + f(f(s[i - 1][c]) * scale));
        scale *= 2;
      }
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < i + 1; ++j) h = f(h + f(s[i + j][c]));
      CHECK(out[0].data[r * e + c] == f(h * scale));
    }
}

TEST_CASE("unroll: each instance copy reads its own weights (Model.blk.i.* = Block.* with those values)") {
  ir::Module m = compile_ok(read_tri("instances.tri"), "instances.tri");
  const std::int64_t rows = 3, e = 8, v = 4;
  ir::ParamValues params;
  std::vector<std::vector<double>> norm, w;
  for (int i = 0; i < 3; ++i) {
    norm.push_back(wave(e, 0.9, i));
    w.push_back(wave(e * e, 1.3, 2 * i));
    for (double& t : w.back()) t = t > 0.3 ? 1 : t < -0.3 ? -1 : 0;
    const std::string p = "Model.blk." + std::to_string(i) + ".";
    params.set(p + "norm", ir::HostTensor::from_values(ElemKind::F32, {e}, norm[i]));
    params.set(p + "w", ir::HostTensor::from_values(ElemKind::T2, {e, e}, w[i]));
  }
  params.set("Model.head", ir::HostTensor::from_values(ElemKind::F32, {e, v}, wave(e * v, 0.4, 1)));
  const ir::HostTensor x = ir::HostTensor::from_values(ElemKind::F32, {rows, e}, wave(rows * e, 0.2, 0.1));
  auto got = run(m, "Model.forward", {x}, params);

  // The same with the block functions of Block itself, bound to one instance's values at
  // a time: g = rmsnorm(x, norm2); y0 = Block(g) [blk 0]; (a, b) = Block.twice(y0) [blk 1].
  auto as_block = [&](int i) {
    ir::ParamValues p;
    p.set("Block.norm", ir::HostTensor::from_values(ElemKind::F32, {e}, norm[i]));
    p.set("Block.w", ir::HostTensor::from_values(ElemKind::T2, {e, e}, w[i]));
    return p;
  };
  const std::string src =
      "layer N {\n  param g: Tensor[E]\n  fn f(x: Tensor[M, E]) -> Tensor[M, E] {\n    return rmsnorm(x, g, 1e-5)\n  }\n}\n";
  ir::Module nm = compile_ok(src, "n.tri");
  ir::ParamValues np;
  np.set("N.g", ir::HostTensor::from_values(ElemKind::F32, {e}, norm[2]));
  auto g = run(nm, "N.f", {x}, np);
  auto y0 = run(m, "Block.forward", {g[0]}, as_block(0));
  auto ab = run(m, "Block.twice", {y0[0]}, as_block(1));
  REQUIRE(ab.size() == 2);
  // (a + b) @ head: compare the sum, which the module computes before the head.
  ir::Module sm = compile_ok(
      "layer S {\n  param head: Tensor[E, V]\n  fn f(a: Tensor[M, E], b: Tensor[M, E]) -> Tensor[M, V] {\n"
      "    return (a + b) @ head\n  }\n}\n",
      "s.tri");
  ir::ParamValues sp;
  sp.set("S.head", ir::HostTensor::from_values(ElemKind::F32, {e, v}, wave(e * v, 0.4, 1)));
  auto want = run(sm, "S.f", {ab[0], ab[1]}, sp);
  CHECK(got[0].data == want[0].data);
  // Swapping two instances' weights changes the result: the copies do read their own.
  ir::ParamValues swapped = params;
  swapped.set("Model.blk.0.w", ir::HostTensor::from_values(ElemKind::T2, {e, e}, w[1]));
  swapped.set("Model.blk.1.w", ir::HostTensor::from_values(ElemKind::T2, {e, e}, w[0]));
  CHECK(run(m, "Model.forward", {x}, swapped)[0].data != got[0].data);
}

TEST_CASE("unroll: pow(x, n) for every n in [-16, 16] is x^n within the rounding of its multiplications") {
  for (int n = -16; n <= 16; ++n) {
    INFO("n = ", n);
    const std::string src = "layer P {\n  fn f(x: Tensor[K]) -> Tensor[K] {\n    return pow(x, " + std::to_string(n) +
                            ")\n  }\n}\n";
    ir::Module m = compile_ok(src, "p.tri");
    std::vector<double> x = wave(16, 0.61, 0.2);
    for (double& t : x) t = static_cast<double>(static_cast<float>(1.0 + 0.5 * t));  // in [0.5, 1.5]
    auto out = run(m, "P.f", {ir::HostTensor::from_values(ElemKind::F32, {16}, x)}, {});
    // At most 2 * log2(16) = 8 f32 multiplications (and one division), each within
    // 2^-24 relative: 10 * 2^-24 bounds the relative error.
    for (std::size_t i = 0; i < x.size(); ++i) {
      const double want = std::pow(x[i], n);
      CHECK(std::fabs(out[0].data[i] - want) <= 10 * std::ldexp(1.0, -24) * std::fabs(want));
    }
  }
  // pow(x, 0) is ones even where x is NaN or infinite (no x * 0).
  ir::Module m = compile_ok("layer P {\n  fn f(x: Tensor[K]) -> Tensor[K] {\n    return pow(x, 0)\n  }\n}\n", "p.tri");
  const std::vector<double> special{NAN, INFINITY};
  auto out = run(m, "P.f", {ir::HostTensor::from_values(ElemKind::F32, {2}, special)}, {});
  CHECK(out[0].data == std::vector<double>{1.0, 1.0});
}

TEST_CASE("unroll: a 4096-iteration loop within the node budget lowers; the budget error names the loop") {
  // 4096 iterations of 7 nodes: 28672 nodes, under the 65536 budget.
  std::string ok = "layer L {\n  fn f(x: Tensor[K]) -> Tensor[K] {\n    let h = x\n    for i in 0..4096 {\n"
                   "      let h = h + x * 0.5\n    }\n    return h\n  }\n}\n";
  ir::Module m = compile_ok(ok, "ok.tri");
  CHECK(m.find_function("L.f")->num_insts() > 4096 * 2);
  // 4 iterations of 2 nested loops of 4096 each overruns it.
  std::string big = "layer L {\n  fn f(x: Tensor[K]) -> Tensor[K] {\n    let h = x\n    for i in 0..4 {\n"
                    "      for j in 0..4096 {\n        let h = h + x * 0.5\n      }\n    }\n    return h\n  }\n}\n";
  auto r = compile_tri(big, "big.tri");
  REQUIRE_FALSE(r.ok());
  REQUIRE(r.error().diagnostics.size() == 1);
  CHECK(r.error().diagnostics[0].message.find("exceeds the budget of 65536 expression nodes") != std::string::npos);
}

TEST_CASE("unroll: nested loops with empty bodies count their iterations (no 4096^16 hang)") {
  std::string src = "layer L {\n  fn f(x: Tensor[K]) -> Tensor[K] {\n";
  for (int i = 0; i < 16; ++i) src += "for i" + std::to_string(i) + " in 0..4096 {\n";
  for (int i = 0; i < 16; ++i) src += "}\n";
  src += "    return x\n  }\n}\n";
  auto r = compile_tri(src, "empty.tri");
  REQUIRE_FALSE(r.ok());
  REQUIRE(r.error().diagnostics.size() == 1);
  CHECK(r.error().diagnostics[0].message.find("exceeds the budget") != std::string::npos);
}

TEST_CASE("unroll: instance arrays that would declare too many parameters are an error, not a hang") {
  // 4096 x 4096 instances nested: far over 2^14, refused at the outer declaration.
  std::string src =
      "layer A {\n  param w: Tensor[4]\n}\nlayer B {\n  param a: A[4096]\n}\nlayer C {\n  param b: B[4096]\n}\n";
  auto r = compile_tri(src, "many.tri");
  REQUIRE_FALSE(r.ok());
  bool found = false;
  for (const Diagnostic& d : r.error().diagnostics)
    found |= d.message.find("instances and parameters") != std::string::npos;
  CHECK(found);
}

TEST_CASE("unroll: past 65536 instances the first error is the limit, not an unknown parameter of a later instance") {
  // Each Leaf instance counts 2 (itself and its parameter): 8 arrays of 4096 are exactly
  // 65536 and lower; a 9th is past the limit. The body that reads the last instance comes
  // before that declaration in the file, so a bogus "unknown parameter" sorted first.
  auto source = [](int arrays) {
    std::string s = "layer Leaf {\n  param w: Tensor[4]\n  fn forward(x: Tensor[4]) -> Tensor[4] {\n"
                    "    return x * w\n  }\n}\nlayer Top {\n";
    for (int a = 1; a <= arrays; ++a) s += "  param blk" + std::to_string(a) + ": Leaf[4096]\n";
    s += "  fn forward(x: Tensor[4]) -> Tensor[4] {\n    return blk" + std::to_string(arrays) +
         "[4095].forward(x)\n  }\n}\n";
    return s;
  };
  auto within = compile_tri(source(8), "within.tri");
  CHECK_MESSAGE(within.ok(), (within.ok() ? std::string() : render(within.error())));
  auto past = compile_tri(source(9), "past.tri");
  REQUIRE_FALSE(past.ok());
  const std::vector<Diagnostic>& d = past.error().diagnostics;
  REQUIRE(!d.empty());
  CAPTURE(render(past.error()));
  CHECK(d[0].message.find("more than 65536 instances and parameters") != std::string::npos);
  for (const Diagnostic& e : d) CHECK(e.message.find("unknown parameter") == std::string::npos);
}

}  // namespace ternjit::dsl
