// SPDX-License-Identifier: Apache-2.0
// specialize_shapes_test.cpp - specialize_shapes and specialize_function: binding, constraints, determinism.
#include "passes/specialize_shapes.h"

#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <set>
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

namespace ternjit::passes {
namespace {

using namespace spec_testing;

using Bindings = std::map<std::string, std::int64_t>;

ir::Module compile_dsl(const std::string& file) {
  const auto path = std::filesystem::path(TERNJIT_SOURCE_DIR) / "tests/dsl" / file;
  auto r = dsl::compile_tri(testing::read_file(path), file);
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? std::string() : render(r.error())));
  return std::move(r).value();
}

ir::Module specialized(ir::Module m, const Bindings& b) {
  auto r = specialize_shapes(m, b);
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? std::string() : render(r.error())));
  verify_ok(m);
  return m;
}

ir::Module specialized_function(const ir::Module& m, const std::string& func, const Bindings& b) {
  auto r = specialize_function(m, func, b, /*require_static=*/true);
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? std::string() : render(r.error())));
  verify_ok(*r);
  return std::move(r).value();
}

const char* const kGemv = R"(param @W.w : t2[K, N]
param @W.s : f32[N]

func @W.forward<M, K, N>(%x: f32[M, K]) -> f32[M, N] where K % 128 == 0, M >= 1, N <= 4096 {
^entry:
  %w = param @W.w : t2[K, N]
  %y = matmul %x, %w : f32[M, N]
  %s = param @W.s : f32[N]
  %z = mul %y, %s : f32[M, N]
  %r = reshape %z : f32[N, M]
  ret %z
}
)";

TEST_CASE("binding every symbol makes every type static and drops the constraints") {
  const ir::Module m = specialized(parse_ok(kGemv), {{"M", 2}, {"K", 256}, {"N", 8}});
  CHECK(ir::print_module(m) == R"(param @W.w : t2[256, 8]
param @W.s : f32[8]

func @W.forward(%x: f32[2, 256]) -> f32[2, 8] {
^entry:
  %w = param @W.w : t2[256, 8]
  %y = matmul %x, %w : f32[2, 8]
  %s = param @W.s : f32[8]
  %z = mul %y, %s : f32[2, 8]
  %r = reshape %z : f32[8, 2]
  ret %z
}
)");
  check_same_outputs(parse_ok(kGemv), m, "W.forward", "M=2,K=256,N=8", 4);
}

TEST_CASE("a violated constraint is an error naming the symbol, value and constraint") {
  ir::Module m = parse_ok(kGemv);
  const std::string before = ir::print_module(m);
  auto r = specialize_shapes(m, {{"K", 100}, {"N", 8}});
  REQUIRE(!r.ok());
  CHECK(r.error().code == ErrorCode::InvalidInput);
  CHECK(r.error().message == "symbol 'K' = 100 violates K % 128 == 0");
  REQUIRE(r.error().diagnostics.size() == 1);
  CHECK(r.error().diagnostics[0].loc.file == "t.tir");
  CHECK(r.error().diagnostics[0].loc.line == 4);
  CHECK(ir::print_module(m) == before);  // unchanged on error

  // Every violation is reported.
  auto r2 = specialize_shapes(m, {{"K", 100}, {"M", 0}, {"N", 5000}});
  REQUIRE(!r2.ok());
  REQUIRE(r2.error().diagnostics.size() == 3);
  CHECK(r2.error().message == "symbol 'K' = 100 violates K % 128 == 0 (and 2 more)");
  CHECK(r2.error().diagnostics[1].message == "symbol 'M' = 0 violates M >= 1");
  CHECK(r2.error().diagnostics[2].message == "symbol 'N' = 5000 violates N <= 4096");

  auto r3 = specialize_shapes(m, {{"N", -1}});
  REQUIRE(!r3.ok());
  CHECK(r3.error().message == "shape binding 'N' = -1 is negative");
}

TEST_CASE("partial binding keeps the other symbols, renumbered, with their constraints") {
  const ir::Module m = specialized(parse_ok(kGemv), {{"K", 128}});
  const ir::Function& f = m.functions()[0];
  CHECK(f.symbols() == std::vector<std::string>{"M", "N"});
  CHECK(ir::print_module(m) == R"(param @W.w : t2[128, N]
param @W.s : f32[N]

func @W.forward<M, N>(%x: f32[M, 128]) -> f32[M, N] where M >= 1, N <= 4096 {
^entry:
  %w = param @W.w : t2[128, N]
  %y = matmul %x, %w : f32[M, N]
  %s = param @W.s : f32[N]
  %z = mul %y, %s : f32[M, N]
  %r = reshape %z : f32[N, M]
  ret %z
}
)");
  // The rest can be bound later; the result equals binding everything at once.
  const ir::Module all = specialized(m, {{"M", 2}, {"N", 8}, {"K", 999}});
  CHECK(ir::print_module(all) == ir::print_module(specialized(parse_ok(kGemv), {{"M", 2}, {"K", 128}, {"N", 8}})));
}

TEST_CASE("layer-qualified keys; reshape and broadcast that became identities are removed") {
  const std::string text = R"(func @A.f<N, K>(%x: f32[N, K], %b: f32[1, K]) -> f32[K, N] {
^entry:
  %r = reshape %x : f32[K, N]
  %c = broadcast %b : f32[N, K]
  %s = transpose %c {perm = [1, 0]} : f32[K, N]
  %t = add %r, %s : f32[K, N]
  ret %t
}

func @B.f<N>(%x: f32[N]) -> f32[N] {
^entry:
  ret %x
}
)";
  // "A.N" binds only layer A's N; "K" binds every K.
  const ir::Module m = specialized(parse_ok(text), {{"A.N", 1}, {"K", 1}});
  CHECK(ir::print_module(m) == R"(func @A.f(%x: f32[1, 1], %b: f32[1, 1]) -> f32[1, 1] {
^entry:
  %s = transpose %b {perm = [1, 0]} : f32[1, 1]
  %t = add %x, %s : f32[1, 1]
  ret %t
}

func @B.f<N>(%x: f32[N]) -> f32[N] {
^entry:
  ret %x
}
)");
  check_same_outputs(parse_ok(text), m, "A.f", "A.N=1,K=1", 1);
}

TEST_CASE("qualified symbols: BitLinear.N binds the callee's N and the caller's BitLinear.N") {
  const ir::Module mlp = compile_dsl("mlp_composition.tri");
  const ir::Module m = specialized(mlp, {{"BitLinear.N", 16}, {"K", 32}});
  const std::string text = ir::print_module(m);
  CHECK(text.find("param @BitLinear.w : t2[32, 16]") != std::string::npos);
  CHECK(text.find("param @MLP.w_out : f32[16, 10]") != std::string::npos);
  CHECK(text.find("func @BitLinear.forward<M>(%x: f32[M, 32]) -> f32[M, 16] {") != std::string::npos);
  CHECK(text.find("func @MLP.forward<B, T>(%x: f32[B, 32], %ctx: f32[T, 32]) -> f32[B, 10] {") != std::string::npos);
  check_same_outputs(mlp, m, "MLP.forward", "B=2,T=3,K=32,N=16,BitLinear.N=16", 7);

  // Binding the callee's N alone leaves the calls inconsistent: an error, not bad IR.
  ir::Module bad = mlp;
  auto r = specialize_shapes(bad, {{"N", 16}});
  REQUIRE(!r.ok());
  CHECK(r.error().message.find("after binding, the call to @BitLinear.forward does not type-check") == 0);
  CHECK(r.error().diagnostics.size() == 2);
}

TEST_CASE("an op's shape rule that a binding breaks is a located user error, not invalid IR (issue 33 item 5)") {
  // rope needs an even D and attention HQ a multiple of HKV: checks that only bind in
  // the verifier. specialize_shapes runs it, so the pipeline never sees such a module
  // (before, `run --shape D=3` aborted: "the IR is invalid after pass 'inline-calls'").
  const std::string text = R"(func @f<M, H, D>(%x: f32[M, H, D], %p: i32[]) -> f32[M, H, D] {
^entry:
  %y = rope %x, %p {theta = 10000, mode = norm} : f32[M, H, D]
  ret %y
}

func @g<HQ>(%q: f32[1, HQ, 4], %kc: f32[1, 8, 2, 4], %vc: f32[1, 8, 2, 4], %p: i32[]) -> f32[1, HQ, 4] {
^entry:
  %a = attention %q, %kc, %vc, %p {layer = 0, scale = 0.5} : f32[1, HQ, 4]
  ret %a
}
)";
  ir::Module m = parse_ok(text);
  const std::string before = ir::print_module(m);
  auto r = specialize_shapes(m, {{"M", 2}, {"H", 1}, {"D", 3}, {"HQ", 3}});
  REQUIRE(!r.ok());
  CHECK(r.error().code == ErrorCode::InvalidInput);
  CHECK(r.error().message == "after binding, 'rope' needs an even head dim D, got f32[2, 1, 3] (and 1 more)");
  REQUIRE(r.error().diagnostics.size() == 2);
  const Diagnostic& rope = r.error().diagnostics[0];
  CHECK(rope.loc.line == 3);
  CHECK(rope.loc.col == 3);
  REQUIRE(rope.notes.size() == 1);
  CHECK(rope.notes[0].message == "in @f");
  const Diagnostic& attention = r.error().diagnostics[1];
  CHECK(attention.loc.line == 9);
  CHECK(attention.message.find("after binding, 'attention' needs the query heads HQ = 3 to be a multiple of the "
                               "cache heads HKV = 2") == 0);
  CHECK(ir::print_module(m) == before);  // unchanged on error

  // specialize_function (the engine's and `run`'s path) reports the same.
  auto f = specialize_function(parse_ok(text), "f", {{"M", 2}, {"H", 1}, {"D", 5}}, true);
  REQUIRE(!f.ok());
  CHECK(f.error().message == "after binding, 'rope' needs an even head dim D, got f32[2, 1, 5]");
  // Even D (and HQ = 4) specialize and verify.
  auto ok = specialize_function(parse_ok(text), "g", {{"HQ", 4}}, true);
  REQUIRE(ok.ok());
  CHECK(ir::verify_module(*ok).empty());
  CHECK(specialize_function(parse_ok(text), "f", {{"M", 2}, {"H", 1}, {"D", 4}}, true).ok());
}

TEST_CASE("keys that match nothing change nothing; binding twice with the same keys changes nothing") {
  // The pass ignores unknown keys (the CLI rejects them first: tools/ternjit resolve_shapes).
  auto parsed = ir::parse_module(kGemv, "gemv.tir");
  REQUIRE(parsed.ok());
  const std::string original = ir::print_module(*parsed);
  CHECK(ir::print_module(specialized(*parsed, {{"X", 3}, {"W.Q", 5}})) == original);
  const Bindings all = {{"M", 2}, {"K", 256}, {"N", 8}};
  const ir::Module once = specialized(*parsed, all);
  CHECK(ir::print_module(once) != original);
  CHECK(ir::print_module(specialized(once, all)) == ir::print_module(once));
}

TEST_CASE("parameter declarations follow their uses") {
  const std::string text = R"(param @p : f32[K]
param @q : f32[K, J]

func @f<N>(%x: f32[N]) -> f32[N] {
^entry:
  %a = param @p : f32[N]
  %b = add %x, %a : f32[N]
  ret %b
}

func @g<K>(%x: f32[K]) -> f32[K] {
^entry:
  %a = param @p : f32[K]
  %b = mul %x, %a : f32[K]
  ret %b
}
)";
  // Uses disagree (N unbound in @f): @p stays symbolic. @q has no use: bound by name.
  ir::Module m = specialized(parse_ok(text), {{"K", 3}, {"J", 2}});
  CHECK(ir::print_module(m).rfind("param @p : f32[K]\nparam @q : f32[3, 2]\n", 0) == 0);
  // Once all uses agree, the declaration is static.
  m = specialized(m, {{"N", 3}});
  CHECK(ir::print_module(m).rfind("param @p : f32[3]\nparam @q : f32[3, 2]\n", 0) == 0);
}

TEST_CASE("specialization at N=1, 7, 64 gives distinct texts, identical on every run") {
  const ir::Module lc = compile_dsl("linear_classifier.tri");
  std::set<std::string> texts;
  for (std::int64_t n : {1, 7, 64}) {
    const std::string a = ir::print_module(specialized_function(lc, "LinearClassifier.forward", {{"N", n}}));
    const std::string b = ir::print_module(specialized_function(lc, "LinearClassifier.forward", {{"N", n}}));
    CHECK(a == b);
    CHECK(a.find("f32[" + std::to_string(n) + ", 784]") != std::string::npos);
    texts.insert(a);
  }
  CHECK(texts.size() == 3);
  // Running specialize_shapes again on a specialized module changes nothing.
  ir::Module once = specialized_function(lc, "LinearClassifier.forward", {{"N", 7}});
  const std::string text = ir::print_module(once);
  REQUIRE(specialize_shapes(once, {{"N", 7}}).ok());
  CHECK(ir::print_module(once) == text);
}

TEST_CASE("specialize_function inlines calls, keeps only what the function reads, and verifies") {
  const ir::Module mlp = compile_dsl("mlp_composition.tri");
  const Bindings b{{"B", 1}, {"T", 7}, {"K", 64}, {"BitLinear.N", 16}};
  const ir::Module m = specialized_function(mlp, "MLP.forward", b);
  REQUIRE(m.functions().size() == 1);
  const ir::Function& f = m.functions()[0];
  CHECK(f.name() == "MLP.forward");
  CHECK(f.symbols().empty());
  for (const ir::ParamDecl& p : m.params()) CHECK_MESSAGE(p.type.is_static(), p.name);
  CHECK(m.params().size() == 4);
  check_same_outputs(mlp, m, "MLP.forward", "B=1,T=7,K=64,N=16,BitLinear.N=16", 11);
  check_same_outputs(mlp, m, "MLP.forward", "B=1,T=7,K=64,N=16,BitLinear.N=16", 12);

  // Only BitLinear.forward: MLP's parameter is dropped.
  const ir::Module bl = specialized_function(mlp, "BitLinear.forward", {{"M", 4}, {"K", 64}, {"N", 16}});
  CHECK(bl.params().size() == 3);
  CHECK(bl.find_param("MLP.w_out") == nullptr);
}

TEST_CASE("specialize_function errors: unknown function, unbound symbols when static is required") {
  const ir::Module mlp = compile_dsl("mlp_composition.tri");
  auto missing = specialize_function(mlp, "MLP.backward", {}, false);
  REQUIRE(!missing.ok());
  CHECK(missing.error().code == ErrorCode::NotFound);
  CHECK(missing.error().message == "no function @MLP.backward in the module");

  auto partial = specialize_function(mlp, "MLP.forward", {{"B", 1}, {"K", 64}}, true);
  REQUIRE(!partial.ok());
  CHECK(partial.error().code == ErrorCode::InvalidInput);
  CHECK(partial.error().message == "@MLP.forward is not fully static: bind 'T', 'BitLinear.N'");

  // Without require_static the partially bound function is returned, and verifies.
  auto ok = specialize_function(mlp, "MLP.forward", {{"B", 1}, {"K", 64}}, false);
  REQUIRE(ok.ok());
  verify_ok(*ok);
  CHECK(ok->functions()[0].symbols() == std::vector<std::string>{"T", "BitLinear.N"});
}

}  // namespace
}  // namespace ternjit::passes
