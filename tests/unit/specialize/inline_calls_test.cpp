// SPDX-License-Identifier: Apache-2.0
// inline_calls_test.cpp - inline-calls: single and multi-block callees, nesting, symbol unification.
#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "../expect.h"
#include "specialize_testing.h"
#include "ir/bind.h"
#include "ir/dsl/dsl.h"
#include "ir/interpret.h"
#include "ir/parse.h"
#include "ir/print.h"
#include "ir/verify.h"
#include "passes/passes.h"
#include "passes/pipeline.h"
#include "passes/specialize_shapes.h"

namespace ternjit::passes {
namespace {

using namespace spec_testing;

int count_calls(const ir::Function& f) {
  int n = 0;
  for (ir::BlockId b : f.blocks())
    for (ir::InstId i : f.insts(b)) n += f.inst(i).op == ir::Op::Call;
  return n;
}

std::string printed(const ir::Module& m, const std::string& func) {
  const ir::Function* f = m.find_function(func);
  REQUIRE(f != nullptr);
  return ir::print_function(&m, *f);
}

TEST_CASE("a single-block callee is spliced in and the call result's name moves over") {
  ir::Module m = parse_ok(R"(func @g<M>(%x: f32[M]) -> f32[M] {
^entry:
  %h = relu %x : f32[M]
  %y = mul %h, %x : f32[M]
  ret %y
}

func @f(%a: f32[4], %b: f32[6]) -> f32[6] {
^entry:
  %r = call @g(%a) : f32[4]
  %s = call @g(%b) : f32[6]
  ret %s
}
)");
  const ir::Module before = m;
  REQUIRE(inline_calls(m).ok());
  verify_ok(m);
  CHECK(printed(m, "f") == R"(func @f(%a: f32[4], %b: f32[6]) -> f32[6] {
^entry:
  %h = relu %a : f32[4]
  %r = mul %h, %a : f32[4]
  %h_1 = relu %b : f32[6]
  %s = mul %h_1, %b : f32[6]
  ret %s
}
)");
  // The callee stays: it is an entry point too.
  CHECK(printed(m, "g") == printed(before, "g"));
  check_same_outputs(before, m, "f", "", 3);

  // Safe to run twice: nothing is left to inline.
  const std::string once = ir::print_module(m);
  REQUIRE(inline_calls(m).ok());
  CHECK(ir::print_module(m) == once);
}

TEST_CASE("a multi-block callee splits the caller's block; ret becomes br to the continuation") {
  ir::Module m = parse_ok(R"(func @pick<N>(%c: bool[], %x: f32[N]) -> f32[N] {
^entry:
  cond_br %c, ^pos, ^neg
^pos:
  %p = relu %x : f32[N]
  ret %p
^neg:
  %n = neg %x : f32[N]
  br ^done(%n)
^done(%d: f32[N]):
  ret %d
}

func @f(%c: bool[], %x: f32[3]) -> f32[3] {
^entry:
  %e = exp %x : f32[3]
  %r = call @pick(%c, %e) : f32[3]
  %t = add %r, %x : f32[3]
  ret %t
}
)");
  const ir::Module before = m;
  REQUIRE(inline_calls(m).ok());
  verify_ok(m);
  CHECK(count_calls(*m.find_function("f")) == 0);
  CHECK(printed(m, "f") == R"(func @f(%c: bool[], %x: f32[3]) -> f32[3] {
^entry:
  %e = exp %x : f32[3]
  cond_br %c, ^pos, ^neg
^bb1(%r: f32[3]):
  %t = add %r, %x : f32[3]
  ret %t
^pos:
  %p = relu %e : f32[3]
  br ^bb1(%p)
^neg:
  %n = neg %e : f32[3]
  br ^done(%n)
^done(%d: f32[3]):
  br ^bb1(%d)
}
)");
  // Both branches agree with the call (random bools cover true and false).
  for (std::uint64_t seed = 1; seed <= 6; ++seed) check_same_outputs(before, m, "f", "", seed);
}

TEST_CASE("nested calls are inlined through every level") {
  ir::Module m = parse_ok(R"(func @k<A>(%x: f32[A]) -> f32[A] {
^entry:
  %y = tanh %x : f32[A]
  ret %y
}

func @g<B>(%x: f32[B]) -> f32[B] {
^entry:
  %y = call @k(%x) : f32[B]
  %z = call @k(%y) : f32[B]
  ret %z
}

func @h<C>(%x: f32[C]) -> f32[C] {
^entry:
  %y = call @g(%x) : f32[C]
  ret %y
}
)");
  const ir::Module before = m;
  REQUIRE(inline_calls(m).ok());
  verify_ok(m);
  for (const ir::Function& f : m.functions()) CHECK(count_calls(f) == 0);
  CHECK(printed(m, "h") == R"(func @h<C>(%x: f32[C]) -> f32[C] {
^entry:
  %y_1 = tanh %x : f32[C]
  %y = tanh %y_1 : f32[C]
  ret %y
}
)");
  check_same_outputs(before, m, "h", "C=3", 5);
}

TEST_CASE("each call site binds the callee's symbols to its own dims (mlp_composition.tri)") {
  const auto path = std::filesystem::path(TERNJIT_SOURCE_DIR) / "tests/dsl/mlp_composition.tri";
  auto compiled = dsl::compile_tri(testing::read_file(path), "mlp_composition.tri");
  REQUIRE_MESSAGE(compiled.ok(), (compiled.ok() ? std::string() : render(compiled.error())));
  ir::Module m = std::move(compiled).value();
  const ir::Module before = m;
  REQUIRE(inline_calls(m).ok());
  verify_ok(m);
  const ir::Function& mlp = *m.find_function("MLP.forward");
  CHECK(count_calls(mlp) == 0);
  // No new symbols: M binds to B at one site and to T at the other, K to K, and N
  // (fixed by the parameters) to the caller's BitLinear.N through the call's result type.
  CHECK(mlp.symbols() == std::vector<std::string>{"B", "K", "T", "BitLinear.N"});
  const std::string text = printed(m, "MLP.forward");
  CHECK(text.find("%h = rmsnorm %x, %0 {eps = 1e-05} : f32[B, K]") != std::string::npos);
  CHECK(text.find("%h_1 = rmsnorm %ctx, %4 {eps = 1e-05} : f32[T, K]") != std::string::npos);
  CHECK(text.find("param @BitLinear.w : t2[K, BitLinear.N]") != std::string::npos);
  CHECK(text.find("%hx = relu") != std::string::npos);
  CHECK(text.find("%hc = relu") != std::string::npos);
  for (std::uint64_t seed = 1; seed <= 3; ++seed)
    check_same_outputs(before, m, "MLP.forward", "B=2,T=3,K=8,N=4,BitLinear.N=4", seed);
}

TEST_CASE("symbols only parameters determine become fresh, layer-qualified caller symbols") {
  ir::Module m = parse_ok(R"(param @Lay.v : f32[H]

func @Lay.g<M, H>(%x: f32[M]) -> f32[M] where M % 2 == 0, H >= 1 {
^entry:
  %w = param @Lay.v : f32[H]
  %s = reduce_sum %w {axis = 0, keepdims = false} : f32[]
  %y = add %x, %s : f32[M]
  ret %y
}

func @Top.f<N>(%x: f32[N], %z: f32[6]) -> f32[N] {
^entry:
  %a = call @Lay.g(%x) : f32[N]
  %b = call @Lay.g(%z) : f32[6]
  ret %a
}
)");
  const ir::Module before = m;
  REQUIRE(inline_calls(m).ok());
  verify_ok(m);
  CHECK(printed(m, "Top.f") == R"(func @Top.f<N, Lay.H, Lay.H_1>(%x: f32[N], %z: f32[6]) -> f32[N] where N % 2 == 0, Lay.H >= 1, Lay.H_1 >= 1 {
^entry:
  %w = param @Lay.v : f32[Lay.H]
  %s = reduce_sum %w {axis = 0, keepdims = false} : f32[]
  %a = add %x, %s : f32[N]
  %w_1 = param @Lay.v : f32[Lay.H_1]
  %s_1 = reduce_sum %w_1 {axis = 0, keepdims = false} : f32[]
  %b = add %z, %s_1 : f32[6]
  ret %a
}
)");
  check_same_outputs(before, m, "Top.f", "N=4,H=5", 2);
}

TEST_CASE("a call whose callee constraint fails for its static dims stays a call") {
  ir::Module m = parse_ok(R"(func @g<M>(%x: f32[M]) -> f32[M] where M % 2 == 0 {
^entry:
  %y = relu %x : f32[M]
  ret %y
}

func @f(%x: f32[3], %z: f32[4]) -> f32[4] {
^entry:
  %a = call @g(%x) : f32[3]
  %b = call @g(%z) : f32[4]
  ret %b
}
)");
  REQUIRE(inline_calls(m).ok());
  verify_ok(m);
  CHECK(printed(m, "f") == R"(func @f(%x: f32[3], %z: f32[4]) -> f32[4] {
^entry:
  %a = call @g(%x) : f32[3]
  %b = relu %z : f32[4]
  ret %b
}
)");
}

TEST_CASE("recursion stops at the depth limit and leaves a call") {
  ir::Module m = parse_ok(R"(func @f(%c: i32[], %x: f32[2]) -> f32[2] {
^entry:
  cond_br %c, ^again, ^stop
^again:
  %one = const {value = 1} : i32[]
  %d = sub %c, %one : i32[]
  %y = call @f(%d, %x) : f32[2]
  %z = relu %y : f32[2]
  ret %z
^stop:
  ret %x
}
)");
  const ir::Module before = m;
  REQUIRE(inline_calls(m).ok());
  verify_ok(m);
  CHECK(count_calls(m.functions()[0]) == 1);
  // The original call and 7 nested copies were inlined (8 levels), adding %z_1..%z_8.
  const std::string once = ir::print_module(m);
  CHECK(once.find("%z_8 = relu") != std::string::npos);
  CHECK(once.find("%z_9") == std::string::npos);
  for (double depth : {0.0, 3.0, 20.0}) {
    const std::vector<ir::HostTensor> args{ir::HostTensor::scalar(ElemKind::I32, depth),
                                           ir::HostTensor::random(ElemKind::F32, {2}, 9)};
    auto want = ir::interpret(before, "f", args, {});
    auto got = ir::interpret(m, "f", args, {});
    REQUIRE(want.ok());
    REQUIRE(got.ok());
    CHECK(!ir::compare((*want)[0], (*got)[0], 0, 0));
  }
}

// `layers` functions @l0 .. @l<layers-1>, each calling the next `fanout` times in a
// chain (the last applies relu): fanout^(layers-1) leaf copies when inlined.
std::string call_tree(int layers, int fanout) {
  std::string text;
  for (int l = 0; l < layers; ++l) {
    text += "func @l" + std::to_string(l) + "(%x: f32[4]) -> f32[4] {\n^entry:\n";
    if (l + 1 == layers) {
      text += "  %y = relu %x : f32[4]\n  ret %y\n}\n\n";
      continue;
    }
    std::string prev = "%x";
    for (int k = 0; k < fanout; ++k) {
      const std::string v = "%c" + std::to_string(k);
      text += "  " + v + " = call @l" + std::to_string(l + 1) + "(" + prev + ") : f32[4]\n";
      prev = v;
    }
    text += "  ret " + prev + "\n}\n\n";
  }
  return text;
}

// 9 layers each calling the next 4 times would inline 4^8 copies; `opt -O2` hung.
TEST_CASE("a call tree too large to inline is an error naming the size") {
  ir::Module m = parse_ok(call_tree(9, 4));
  auto r = inline_calls(m);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ErrorCode::InvalidInput);
  CHECK(r.error().message.find("inlining @l") != std::string::npos);
  CHECK(r.error().message.find("would grow it past 65536 instructions") != std::string::npos);
  REQUIRE(r.error().diagnostics.size() == 1);
  CHECK(r.error().diagnostics[0].loc.line > 0);  // at the call
}

// 20 layers each calling the next twice: specialize_function inlines 8 levels (2^8
// calls stay), and the pipeline's inline-calls used to start afresh from there.
TEST_CASE("the size bound holds across specialize_function and the pipeline") {
  ir::Module m = parse_ok(call_tree(20, 2));
  auto spec = specialize_function(m, "l0", {}, /*require_static=*/true);
  REQUIRE_MESSAGE(spec.ok(), (spec.ok() ? std::string() : render(spec.error())));
  const auto& pipeline = default_pipeline(OptLevel::O2);
  auto r = run_pipeline(*spec, pipeline, PipelineOptions{});
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("would grow it past 65536 instructions") != std::string::npos);
}

TEST_CASE("a call tree within the bound inlines completely and computes the same") {
  ir::Module m = parse_ok(call_tree(7, 4));  // 4^6 = 4096 leaves
  const ir::Module before = m;
  REQUIRE(inline_calls(m).ok());
  verify_ok(m);
  CHECK(count_calls(*m.find_function("l0")) == 0);
  check_same_outputs(before, m, "l0", "", 3);
}

TEST_CASE("a module without calls is unchanged") {
  const std::string text = R"(func @f<N>(%x: f32[N]) -> f32[N] {
^entry:
  %y = relu %x : f32[N]
  ret %y
}
)";
  ir::Module m = parse_ok(text);
  REQUIRE(inline_calls(m).ok());
  CHECK(ir::print_module(m) == text);
}

}  // namespace
}  // namespace ternjit::passes
