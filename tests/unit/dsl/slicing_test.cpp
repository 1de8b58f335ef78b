// SPDX-License-Identifier: Apache-2.0
// slicing_test.cpp - what x[i], slice, split, concat and reshape lower to, checked by value
// on the interpreter (the offsets and axes the DSL computes, negative ones included).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "ir/dsl/dsl.h"
#include "ir/interpret.h"
#include "ir/verify.h"

namespace ternjit::dsl {
namespace {

std::vector<ir::HostTensor> run_src(const std::string& body, const std::vector<ir::HostTensor>& args,
                                    const std::string& result) {
  const std::string src = "layer S {\n  fn f(x: Tensor[3, 4, 6]) -> " + result + " {\n" + body + "\n  }\n}\n";
  auto m = compile_tri(src, "s.tri");
  REQUIRE_MESSAGE(m.ok(), (m.ok() ? std::string() : render(m.error())));
  for (const Diagnostic& d : ir::verify_module(*m)) FAIL_CHECK(render(d));
  auto out = ir::interpret(*m, "S.f", args, {});
  REQUIRE_MESSAGE(out.ok(), (out.ok() ? std::string() : render(out.error())));
  return std::move(out).value();
}

// x[a, b, c] = 100 a + 10 b + c: every element names its own index.
ir::HostTensor indexed() {
  std::vector<double> v;
  for (int a = 0; a < 3; ++a)
    for (int b = 0; b < 4; ++b)
      for (int c = 0; c < 6; ++c) v.push_back(100 * a + 10 * b + c);
  return ir::HostTensor::from_values(ElemKind::F32, {3, 4, 6}, v);
}

}  // namespace

TEST_CASE("slicing: x[i] is row i of the leading axis (negative from the end), chained indexes go deeper") {
  const ir::HostTensor x = indexed();
  auto out = run_src("    return (x[1], x[-1], x[2][3], x[0][-1][5])", {x},
                     "(Tensor[4, 6], Tensor[4, 6], Tensor[6], Tensor[])");
  for (int b = 0; b < 4; ++b)
    for (int c = 0; c < 6; ++c) {
      CHECK(out[0].data[b * 6 + c] == 100 + 10 * b + c);
      CHECK(out[1].data[b * 6 + c] == 200 + 10 * b + c);
    }
  for (int c = 0; c < 6; ++c) CHECK(out[2].data[c] == 230 + c);
  CHECK(out[3].data[0] == 35);
}

TEST_CASE("slicing: slice, split and concat take their offsets along the axis written (negative normalized)") {
  const ir::HostTensor x = indexed();
  auto out = run_src(
      "    let (a, b, c) = split(x, -1, 3)\n"
      "    let s = slice(x, 1, 1, 2)\n"
      "    return (concat(c, a, b, -1), s, concat(x, x, 0))",
      {x}, "(Tensor[3, 4, 6], Tensor[3, 2, 6], Tensor[6, 4, 6])");
  for (int a = 0; a < 3; ++a)
    for (int b = 0; b < 4; ++b)
      for (int c = 0; c < 6; ++c) {
        // concat(c, a, b) rotates the three 2-wide column blocks: column c reads (c + 4) % 6.
        CHECK(out[0].data[(a * 4 + b) * 6 + c] == 100 * a + 10 * b + (c + 4) % 6);
        CHECK(out[2].data[((a + 3) * 4 + b) * 6 + c] == 100 * a + 10 * b + c);
      }
  for (int a = 0; a < 3; ++a)
    for (int b = 0; b < 2; ++b)
      for (int c = 0; c < 6; ++c) CHECK(out[1].data[(a * 2 + b) * 6 + c] == 100 * a + 10 * (b + 1) + c);
}

TEST_CASE("slicing: reshape keeps row-major order and infers its -1") {
  const ir::HostTensor x = indexed();
  auto out = run_src("    return reshape(x, [-1, 12])[1]", {x}, "Tensor[12]");
  // Row 1 of [6, 12] is elements 12..23 of the row-major order of [3, 4, 6].
  for (int k = 0; k < 12; ++k) {
    const int flat = 12 + k;
    CHECK(out[0].data[k] == 100 * (flat / 24) + 10 * (flat % 24 / 6) + flat % 6);
  }
}

}  // namespace ternjit::dsl
