// SPDX-License-Identifier: Apache-2.0
// row_batch_test.cpp - the run-time rows analysis (passes/row_batch.h): what it accepts, and that it refuses
// every way a function can mix rows.
#include <doctest/doctest.h>

#include <string>

#include "passes/row_batch.h"
#include "tests/unit/passes/pass_testing.h"

using namespace ternjit;
using testing::parse_ok;

namespace {

// The result of check_row_batch on @f of `text` for its symbol M ("" when accepted).
std::string verdict(const std::string& text) {
  ir::Module m = parse_ok(text);
  const ir::Function* f = m.find_function("f");
  REQUIRE(f != nullptr);
  auto cand = passes::row_symbol_candidate(*f);
  if (!cand) return "no candidate";
  CHECK(f->symbol_name(*cand) == "M");
  auto r = passes::check_row_batch(*f, *cand);
  if (r.ok()) return "";
  CHECK(r.error().code == ErrorCode::Unsupported);
  return r.error().message;
}

// A function @f<M> with the given params, argument list, result types and body ending in `ret %r`.
std::string fn(const std::string& args, const std::string& results, const std::string& body,
               const std::string& params = "") {
  return params + "func @f<M>(" + args + ") -> " + results + " {\n^entry:\n" + body + "  ret %r\n}\n";
}

const std::string kBitLinear = R"(param @L.w : f32[64, 32]
param @L.b : f32[32]
param @L.g : f32[64]
)";

}  // namespace

TEST_CASE("row batch: a fused BitLinear with rmsnorm, quantize, bias, residual and gelu is per-row") {
  CHECK(verdict(fn("%x: f32[M, 64], %res: f32[M, 32]", "f32[M, 32]", R"(  %g = param @L.g : f32[64]
  %h = rmsnorm %x, %g {eps = 1e-05} : f32[M, 64]
  %w = param @L.w : f32[64, 32]
  %t, %s0 = tquantize %w : t2[64, 32], f32[]
  %q, %s = quantize %h : i8[M, 64], f32[M, 1]
  %b = param @L.b : f32[32]
  %y = tmatmul %q, %t, %s, %s0, %b, %res {x_scale = true, w_scale = true, bias = true, residual = true, act = gelu} : f32[M, 32]
  %r = softmax %y {axis = 1} : f32[M, 32]
)", kBitLinear)) == "");
}

TEST_CASE("row batch: elementwise ops with operands broadcast along the rows, reshapes and transposes that keep them") {
  CHECK(verdict(fn("%x: f32[M, 4, 8]", "f32[M, 32]", R"(  %c = const {value = 2} : f32[8]
  %a = mul %x, %c : f32[M, 4, 8]
  %o = const {value = 1} : f32[1, 4, 8]
  %b = add %a, %o : f32[M, 4, 8]
  %t = transpose %b {perm = [0, 2, 1]} : f32[M, 8, 4]
  %u = reduce_sum %t {axis = 2, keepdims = true} : f32[M, 8, 1]
  %v = exp %u : f32[M, 8, 1]
  %r = reshape %t : f32[M, 32]
)")) == "");
}

TEST_CASE("row batch: every way to mix rows is refused") {
  SUBCASE("a reduction over the rows") {
    CHECK(verdict(fn("%x: f32[M, 8]", "f32[M, 8]", R"(  %s = reduce_sum %x {axis = 0, keepdims = true} : f32[1, 8]
  %r = add %x, %s : f32[M, 8]
)")).find("reduce_sum") != std::string::npos);
  }
  SUBCASE("a softmax over the rows") {
    CHECK(verdict(fn("%x: f32[M, 8]", "f32[M, 8]", "  %r = softmax %x {axis = 0} : f32[M, 8]\n")).find("softmax") !=
          std::string::npos);
  }
  SUBCASE("a transpose that moves the row axis") {
    CHECK(verdict(fn("%x: f32[M, 8]", "f32[M, 8]", R"(  %t = transpose %x {perm = [1, 0]} : f32[8, M]
  %r = transpose %t {perm = [1, 0]} : f32[M, 8]
)")).find("axis 1") != std::string::npos);
  }
  SUBCASE("reshapes keeping the row length pass, one moving the row axis does not") {
    CHECK(verdict(fn("%x: f32[M, 8]", "f32[M, 8]", R"(  %t = reshape %x : f32[M, 2, 4]
  %u = reshape %t : f32[M, 4, 2]
  %r = reshape %u : f32[M, 8]
)")) == "");
    CHECK(verdict(fn("%x: f32[M, 8]", "f32[M, 8]", R"(  %t = reshape %x : f32[8, M]
  %r = reshape %t : f32[M, 8]
)")) != "");
  }
  SUBCASE("rmsnorm and quantize of a rank-1 value work along the rows themselves") {
    CHECK(verdict(R"(param @L.g : f32[M]
func @f<M>(%x: f32[M]) -> i8[M] {
^entry:
  %q, %s = quantize %x : i8[M], f32[1]
  ret %q
}
)") != "");
    CHECK(verdict(fn("%x: f32[M]", "f32[M]", "  %r = quantize_int8 %x : f32[M]\n")).find("axis itself") !=
          std::string::npos);
  }
  SUBCASE("ternarize_absmean: one scale over all rows") {
    CHECK(verdict(fn("%x: f32[M, 8]", "f32[M, 8]", "  %r = ternarize_absmean %x : f32[M, 8]\n"))
              .find("ternarize_absmean") != std::string::npos);
  }
  SUBCASE("a matmul whose rows are the contraction") {
    CHECK(verdict(fn("%x: f32[M, 8], %y: f32[M, 8]", "f32[M, M]", R"(  %t = transpose %y {perm = [1, 0]} : f32[8, M]
  %r = matmul %x, %t : f32[M, M]
)")) == "no candidate");
    CHECK(verdict(fn("%x: f32[M, 8], %y: f32[M, 8]", "f32[M, 8]", R"(  %t = transpose %x {perm = [1, 0]} : f32[8, M]
  %z = matmul %t, %y : f32[8, 8]
  %r = matmul %x, %z : f32[M, 8]
)")) != "");
  }
  SUBCASE("a call is not analysed") {
    CHECK(verdict(R"(func @g<M>(%x: f32[M, 8]) -> f32[M, 8] {
^entry:
  ret %x
}

func @f<M>(%x: f32[M, 8]) -> f32[M, 8] {
^entry:
  %r = call @g(%x) : f32[M, 8]
  ret %r
}
)").find("call") != std::string::npos);
  }
  SUBCASE("a load-time value or broadcast along the rows from a value with its own leading extent") {
    CHECK(verdict(fn("%x: f32[M, 8]", "f32[M, 8]", R"(  %c = const {value = 1} : f32[3, 8]
  %s = reduce_sum %c {axis = 0, keepdims = true} : f32[1, 8]
  %r = add %x, %s : f32[M, 8]
)")) == "");  // extent 1 at axis 0: broadcast along rows, fine
  }
}

TEST_CASE("row batch: the candidate is the one symbol leading every argument and result") {
  auto cand = [](const std::string& text) {
    ir::Module m = parse_ok(text);
    auto c = passes::row_symbol_candidate(*m.find_function("f"));
    return c ? m.find_function("f")->symbol_name(*c) : std::string("-");
  };
  CHECK(cand("func @f<M, K>(%x: f32[M, K]) -> f32[M, K] {\n^entry:\n  ret %x\n}\n") == "M");
  CHECK(cand("func @f<M, K>(%x: f32[M, K], %y: f32[K, M]) -> f32[M, K] {\n^entry:\n  ret %x\n}\n") == "-");
  CHECK(cand("func @f<M, B>(%x: f32[M, 4], %y: f32[B, 4]) -> f32[M, 4] {\n^entry:\n  ret %x\n}\n") == "-");
  CHECK(cand("func @f<M>(%x: f32[M, 4], %y: f32[4]) -> f32[M, 4] {\n^entry:\n  ret %x\n}\n") == "-");
  CHECK(cand("func @f(%x: f32[3, 4]) -> f32[3, 4] {\n^entry:\n  ret %x\n}\n") == "-");
  CHECK(cand("func @f<M>(%x: f32[M, M]) -> f32[M, M] {\n^entry:\n  ret %x\n}\n") == "-");
  CHECK(cand("func @f<M>() -> f32[M] {\n^entry:\n  %r = const {value = 0} : f32[M]\n  ret %r\n}\n") == "-");
}
