// SPDX-License-Identifier: Apache-2.0
// builder_test.cpp - the public C++ builder makes the same IR as the DSL, with located errors.
#include <doctest/doctest.h>

#include "ternjit/builder.h"
#include "tests/unit/expect.h"

using namespace ternjit;

namespace {

const std::string kLinearClassifier = testing::read_file(TERNJIT_SOURCE_DIR "/tests/dsl/linear_classifier.tri");

}  // namespace

TEST_CASE("builder: LinearClassifier built in C++ prints like the DSL's") {
  ModuleBuilder mb;
  mb.param("LinearClassifier.weights", ElemKind::T2, {784, 10});
  mb.param("LinearClassifier.bias", ElemKind::F32, {10});
  FunctionBuilder f = mb.function("LinearClassifier.forward");
  Value x = f.arg("x", ElemKind::F32, {"N", 784});
  // One call per statement: C++ leaves the order of argument evaluation unspecified.
  Value w = f.param("LinearClassifier.weights");
  Value xw = f.matmul(x, w);
  Value bias = f.param("LinearClassifier.bias");
  Value y = f.add(xw, bias);
  f.ret({y});
  auto built = mb.finish();
  REQUIRE_MESSAGE(built.ok(), (built.ok() ? "" : render(built.error())));

  auto from_dsl = Module::from_tri(kLinearClassifier, "linear.tri");
  REQUIRE(from_dsl.ok());
  // The DSL records where the module came from in metadata; the functions and
  // parameters must be identical text.
  std::string dsl_text = from_dsl->to_text();
  std::string body = dsl_text.substr(dsl_text.find("param @"));
  CHECK(built->to_text() == body);

  // And the text parses back to the same module.
  auto reparsed = Module::from_text(built->to_text());
  REQUIRE(reparsed.ok());
  CHECK(reparsed->to_text() == built->to_text());
}

TEST_CASE("builder: a shape mismatch is reported at the caller's C++ line") {
  ModuleBuilder mb;
  mb.param("L.w", ElemKind::T2, {780, 10});
  FunctionBuilder f = mb.function("L.forward");
  Value x = f.arg("x", ElemKind::F32, {"N", 784});
  const int line = __LINE__ + 1;
  Value bad = f.matmul(x, f.param("L.w"));
  CHECK_FALSE(bad.valid());
  f.ret({bad});
  auto r = mb.finish();
  REQUIRE_FALSE(r.ok());
  REQUIRE(r.error().diagnostics.size() == 1);
  const Diagnostic& d = r.error().diagnostics[0];
  CHECK(d.loc.file.find("builder_test.cpp") != std::string::npos);
  CHECK(d.loc.line == static_cast<std::uint32_t>(line));
  CHECK(d.message.find("'matmul' needs matching K") != std::string::npos);
  CHECK(render(r.error()).find("builder_test.cpp:" + std::to_string(line) + ":") != std::string::npos);
}

TEST_CASE("builder: misuse is an error, never a crash") {
  SUBCASE("unknown parameter") {
    ModuleBuilder mb;
    FunctionBuilder f = mb.function("F.forward");
    f.ret({f.param("nope")});
    auto r = mb.finish();
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message.find("unknown parameter @nope") != std::string::npos);
  }
  SUBCASE("missing ret") {
    ModuleBuilder mb;
    FunctionBuilder f = mb.function("F.forward");
    (void)f.arg("x", ElemKind::F32, {4});
    auto r = mb.finish();
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message.find("has no 'ret'") != std::string::npos);
  }
  SUBCASE("axis out of range") {
    ModuleBuilder mb;
    FunctionBuilder f = mb.function("F.forward");
    Value x = f.arg("x", ElemKind::F32, {4, 5});
    f.ret({f.softmax(x, 2)});
    auto r = mb.finish();
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message.find("axis 2 is out of range") != std::string::npos);
  }
  SUBCASE("duplicate function and parameter") {
    ModuleBuilder mb;
    mb.param("p", ElemKind::F32, {1});
    mb.param("p", ElemKind::F32, {1});
    auto r = mb.finish();
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message.find("already declared") != std::string::npos);
  }
  SUBCASE("a composed call and every builder op verify") {
    ModuleBuilder mb;
    mb.param("Inner.gamma", ElemKind::F32, {"K"});
    FunctionBuilder inner = mb.function("Inner.forward");
    Value a = inner.arg("a", ElemKind::F32, {"M", "K"});
    inner.ret({inner.rmsnorm(a, inner.param("Inner.gamma"), 1e-5)});
    FunctionBuilder outer = mb.function("Outer.forward");
    Value x = outer.arg("x", ElemKind::F32, {"M", 8});
    Value h = outer.call("Inner.forward", {x})[0];
    Value t = outer.transpose(outer.tanh(outer.gelu(outer.silu(outer.sigmoid(outer.relu(h))))));
    Value s = outer.sum(outer.exp(outer.abs(outer.neg(t))), -1, true);
    Value m = outer.mean(outer.sqrt(outer.exp(outer.log(outer.exp(s)))), 0);
    Value q = outer.dequantize(outer.cast(outer.ternarize(h, 0.1), ElemKind::I8), outer.constant(0.5));
    Value z = outer.sub(outer.mul(outer.quantize_int8(q), outer.constant(2.0)), outer.ternarize_absmean(q));
    Value w = outer.minimum(outer.maximum(outer.softmax(outer.div(z, outer.constant(3.0)), -1), z), z);
    outer.ret({w, m, outer.max(w, 1)});
    auto r = mb.finish();
    REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : render(r.error())));
    auto back = Module::from_text(r->to_text());
    REQUIRE_MESSAGE(back.ok(), (back.ok() ? "" : render(back.error())));
    CHECK(back->to_text() == r->to_text());
  }
}
