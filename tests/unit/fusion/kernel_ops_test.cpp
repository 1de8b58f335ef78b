// SPDX-License-Identifier: Apache-2.0
// kernel_ops_test.cpp - the kernel ops tmatmul and ewise: type rules, layouts, semantics.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "ir/parse.h"
#include "tests/unit/fusion/fusion_testing.h"

using namespace ternjit;

namespace {

// The first error message of parsing (and verifying) `text`, "" when it is valid.
std::string error_of(const std::string& text) {
  auto m = ir::parse_module(text, "t.tir");
  return m.ok() ? std::string() : m.error().message;
}

std::string func(const std::string& args, const std::string& result, const std::string& body) {
  return "func @f(" + args + ") -> " + result + " {\n^entry:\n" + body + "}\n";
}

}  // namespace

TEST_CASE("tmatmul type rule: operands follow the flags; shapes and kinds are checked") {
  const std::string none = "{x_scale = false, w_scale = false, bias = false, residual = false, act = none}";
  CHECK(error_of(func("%x: i8[2, 3], %w: t2[3, 4]", "f32[2, 4]", "  %y = tmatmul %x, %w " + none +
                                                                      " : f32[2, 4]\n  ret %y\n")) == "");
  CHECK(error_of(func("%x: i8[2, 3], %w: t2[3, 4], %s: f32[2, 1]", "f32[2, 4]",
                      "  %y = tmatmul %x, %w, %s " + none + " : f32[2, 4]\n  ret %y\n"))
            .find("takes 2 operands") != std::string::npos);
  CHECK(error_of(func("%x: i8[2, 3], %w: t2[3, 4], %s: f32[2, 4]", "f32[2, 4]",
                      "  %y = tmatmul %x, %w, %s {x_scale = true, w_scale = false, bias = false, residual = false, "
                      "act = none} : f32[2, 4]\n  ret %y\n"))
            .find("x_scale must be f32[2, 1]") != std::string::npos);
  CHECK(error_of(func("%x: f16[2, 3], %w: t2[3, 4], %b: f32[4]", "f16[2, 4]",
                      "  %y = tmatmul %x, %w, %b {x_scale = false, w_scale = false, bias = true, residual = false, "
                      "act = none} : f16[2, 4]\n  ret %y\n"))
            .find("bias must be f16[4]") != std::string::npos);
  CHECK(error_of(func("%x: f32[2, 5], %w: t2[3, 4]", "f32[2, 4]",
                      "  %y = tmatmul %x, %w " + none + " : f32[2, 4]\n  ret %y\n"))
            .find("needs matching K") != std::string::npos);
  CHECK(error_of(func("%x: i32[2, 3], %w: t2[3, 4]", "f32[2, 4]",
                      "  %y = tmatmul %x, %w " + none + " : f32[2, 4]\n  ret %y\n"))
            .find("i8 or a float kind") != std::string::npos);
  CHECK(error_of(func("%x: f32[2, 3], %w: t2[3, 4]", "f32[2, 4]",
                      "  %y = tmatmul %x, %w {x_scale = false, w_scale = false, bias = false, residual = false, "
                      "act = swish} : f32[2, 4]\n  ret %y\n"))
            .find("unknown activation") != std::string::npos);
}

TEST_CASE("layouts: only t2 has one, only kernels read one, and types compare it") {
  CHECK(error_of(func("%x: f32<tern2>[3]", "f32[3]", "  ret %x\n")).find("only t2 takes a layout") != std::string::npos);
  CHECK(error_of(func("%w: t2<tern2>[3]", "t2<tern2>[3]", "  ret %w\n")) == "");
  CHECK(error_of(func("%w: t2<tern2>[3]", "t2[3]", "  ret %w\n")).find("'ret' value 1 is t2<tern2>[3]") !=
        std::string::npos);
  CHECK(error_of(func("%w: t2<tern2>[3]", "t2<tern2>[3]", "  %n = neg %w : t2<tern2>[3]\n  ret %n\n"))
            .find("cannot read operand 1 of packed layout") != std::string::npos);
  CHECK(error_of("param @w : t2<tern2>[3]\n\n" + func("", "t2[3]", "  %w = param @w : t2[3]\n  ret %w\n"))
            .find("is declared t2<tern2>[3]") != std::string::npos);
  ir::Type a{ElemKind::T2, {ir::Dim::fixed(3)}};
  ir::Type b = a;
  b.layout = WeightFormat::Tern16;
  CHECK_FALSE(a == b);
  CHECK(ir::type_str(b, {}) == "t2<tern1.6>[3]");
  for (WeightFormat l : kAllWeightFormats) CHECK(parse_weight_format(weight_format_name(l)) == l);
}

TEST_CASE("ewise type rule: steps read earlier slots, keep the kind, and read every operand") {
  CHECK(error_of(func("%a: f32[3], %b: f32[3]", "f32[3]",
                      "  %r = ewise %a, %b {steps = [add(0, 1), relu(2)]} : f32[3]\n  ret %r\n")) == "");
  CHECK(error_of(func("%a: f32[3], %b: f32[3]", "f32[3]", "  %r = ewise %a, %b {steps = [add(0, 2)]} : f32[3]\n  ret %r\n"))
            .find("reads slots (0, 2)") != std::string::npos);
  CHECK(error_of(func("%a: f32[3], %b: f32[3]", "f32[3]", "  %r = ewise %a, %b {steps = [relu(0)]} : f32[3]\n  ret %r\n"))
            .find("operand 2 is not read") != std::string::npos);
  CHECK(error_of(func("%a: f32[3], %b: i8[3]", "f32[3]", "  %r = ewise %a, %b {steps = [add(0, 1)]} : f32[3]\n  ret %r\n"))
            .find("must all have one kind") != std::string::npos);
  CHECK(error_of(func("%a: t2[3]", "t2[3]", "  %r = ewise %a {steps = [add(0, 0)]} : t2[3]\n  ret %r\n"))
            .find("would change the kind to i32") != std::string::npos);
  CHECK(error_of(func("%a: i8[3]", "i8[3]", "  %r = ewise %a {steps = [exp(0)]} : i8[3]\n  ret %r\n"))
            .find("needs a float operand") != std::string::npos);
  CHECK(error_of(func("%a: f32[3]", "f32[3]", "  %r = ewise %a {steps = [cast(0)]} : f32[3]\n  ret %r\n"))
            .find("expected an elementwise step") != std::string::npos);
  CHECK(error_of(func("%a: f32[3]", "f32[3]", "  %r = ewise %a {steps = [add(0)]} : f32[3]\n  ret %r\n"))
            .find("takes 2 slots") != std::string::npos);
  CHECK(error_of(func("%a: f32[3]", "f32[3]", "  %r = ewise %a {steps = []} : f32[3]\n  ret %r\n"))
            .find("at least one step") != std::string::npos);
}

TEST_CASE("tmatmul semantics: exactly the unfused ops on a float path; exact integers on i8") {
  // The same computation written unfused and as one kernel, for each float kind.
  for (const char* k : {"f32", "f16", "bf16"}) {
    CAPTURE(k);
    const std::string K(k);
    const std::string args = "%x: " + K + "[3, 20], %w: t2[20, 5], %g: f32[], %b: " + K + "[5], %r: " + K + "[3, 5]";
    const ir::Module unfused = testing::parse_ok(func(args, K + "[3, 5]",
                                                      "  %y = matmul %x, %w : " + K + "[3, 5]\n"
                                                      "  %c = cast %g {to = " + K + "} : " + K + "[]\n"
                                                      "  %a = mul %y, %c : " + K + "[3, 5]\n"
                                                      "  %d = add %a, %b : " + K + "[3, 5]\n"
                                                      "  %e = add %d, %r : " + K + "[3, 5]\n"
                                                      "  %t = tanh %e : " + K + "[3, 5]\n  ret %t\n"));
    // The kernel rounds the f32 scale to the result kind, as mul with result kind K does.
    const ir::Module fused = testing::parse_ok(func(args, K + "[3, 5]",
                                                    "  %t = tmatmul %x, %w, %g, %b, %r {x_scale = false, w_scale = true, "
                                                    "bias = true, residual = true, act = tanh} : " + K + "[3, 5]\n"
                                                    "  ret %t\n"));
    for (std::uint64_t seed = 1; seed <= 10; ++seed) testing::check_same_results(unfused, fused, seed, 0, 0);
  }
  // i8: the exact integer sum times the scale.
  const ir::Module m = testing::parse_ok(func("%x: i8[1, 3], %w: t2[3, 2], %s: f32[1, 1]", "f32[1, 2]",
                                              "  %y = tmatmul %x, %w, %s {x_scale = true, w_scale = false, bias = false, "
                                              "residual = false, act = relu} : f32[1, 2]\n  ret %y\n"));
  const std::vector<ir::HostTensor> args{ir::HostTensor::from_values(ElemKind::I8, {1, 3}, std::vector<double>{100, -127, 5}),
                                         ir::HostTensor::from_values(ElemKind::T2, {3, 2}, std::vector<double>{1, -1, 1, 1, 0, 1}),
                                         ir::HostTensor::from_values(ElemKind::F32, {1, 1}, std::vector<double>{0.5})};
  auto r = ir::interpret(m, "f", args, {});
  REQUIRE(r.ok());
  // acc = [100 - 127, -100 - 127 + 5] = [-27, -222]; * 0.5 = [-13.5, -111]; relu = [0, 0].
  CHECK(r->front().data == std::vector<double>{0, 0});
  const ir::Module n = testing::parse_ok(func("%x: i8[1, 3], %w: t2[3, 2], %s: f32[1, 1]", "f32[1, 2]",
                                              "  %y = tmatmul %x, %w, %s {x_scale = true, w_scale = false, bias = false, "
                                              "residual = false, act = none} : f32[1, 2]\n  ret %y\n"));
  auto r2 = ir::interpret(n, "f", args, {});
  REQUIRE(r2.ok());
  CHECK(r2->front().data == std::vector<double>{-13.5, -111});
}
