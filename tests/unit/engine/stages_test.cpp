// SPDX-License-Identifier: Apache-2.0
// stages_test.cpp - the compile flow's stages called alone (jit/engine_internal.h), the
// print-after hook, the call keys, the registry's fallback rule and option aliases.
#include <doctest/doctest.h>

#include "jit/engine_internal.h"
#include "targets/registry.h"
#include "tests/unit/engine/engine_testing.h"

namespace ternjit {
namespace {

// An engine's shared state as Engine::create builds it, for calling stages directly.
std::shared_ptr<jit::EngineShared> shared_for(const EngineOptions& o) {
  auto s = jit::make_engine_shared(o);
  REQUIRE_MESSAGE(s.ok(), (s.ok() ? "" : s.error().message));
  return *s;
}

TEST_CASE("stages: each stage of the compile flow runs alone, in order") {
  EngineOptions o;
  o.target = "reference";
  o.cache_dir = "off";
  auto engine = shared_for(o);
  auto m = dsl::compile_tri(testing::kBitLinear, "bitlinear.tri");
  REQUIRE(m.ok());
  const std::string fn = "BitLinear.forward";

  auto missing = jit::find_entry(*m, "BitLinear.backward", 1);
  REQUIRE(!missing.ok());
  CHECK(missing.error().code == ErrorCode::NotFound);
  CHECK(missing.error().message.find("functions: BitLinear.forward") != std::string::npos);
  CHECK(jit::find_entry(*m, fn, 2).error().code == ErrorCode::InvalidArgument);
  auto f = jit::find_entry(*m, fn, 1);
  REQUIRE(f.ok());
  const std::vector<std::string> params = jit::params_used(*m, **f);
  CHECK(params == std::vector<std::string>{"BitLinear.gamma", "BitLinear.w", "BitLinear.w_scale"});

  std::vector<float> x(3 * 8);
  const TensorView in{x.data(), ElemKind::F32, {3, 8}};
  jit::Weights::SymbolMap weights;
  weights.emplace("BitLinear.N", std::pair<std::int64_t, std::string>{4, "BitLinear.w"});
  auto bindings = jit::bind_symbols(**f, std::span(&in, 1), weights);
  REQUIRE(bindings.ok());
  CHECK(*bindings == std::map<std::string, std::int64_t>{{"BitLinear.K", 8}, {"BitLinear.M", 3}, {"BitLinear.N", 4}});
  // An input that disagrees with a weight's extent names both.
  weights["BitLinear.K"] = {16, "BitLinear.gamma"};
  auto clash = jit::bind_symbols(**f, std::span(&in, 1), weights);
  REQUIRE(!clash.ok());
  CHECK(clash.error().message.find("from parameter 'BitLinear.gamma'") != std::string::npos);

  auto spec = jit::specialize_module(*engine, *m, fn, *bindings, "");
  REQUIRE(spec.ok());
  CHECK(spec->find_function(fn)->symbols().empty());
  // With the row symbol left free, only M stays symbolic (the run-time-rows analysis).
  auto rows = jit::specialize_module(*engine, *m, fn, *bindings, "M");
  REQUIRE(rows.ok());
  CHECK(rows->find_function(fn)->symbols().size() == 1);

  REQUIRE(jit::optimize(*engine, *spec, fn).ok());
  std::string why;
  auto target = jit::choose_target(*engine, *spec->find_function(fn), &why);
  REQUIRE(target.ok());
  CHECK((*target)->name() == "reference");
  CHECK(why.empty());
  auto decisions = jit::decide(*engine, **target, *spec, fn);
  REQUIRE(decisions.ok());
  CHECK(decisions->empty());  // the reference target decides nothing at compile
  auto compiled = jit::compile_cached(*engine, *spec, fn, /*optimized=*/true, 0);
  REQUIRE(compiled.ok());
  CHECK(compiled->target->name() == "reference");
  CHECK(compiled->artifact.kind == "ir-text");
  CHECK(compiled->artifact.code_is_ir);
  CHECK(compiled->disk == jit::DiskState::Off);
}

TEST_CASE("stages: under auto a refused function goes to the reference target; a named target's refusal is the error") {
  const auto registry = targets::TargetRegistry::create();
  auto named = registry.choose("reference");
  REQUIRE(named.ok());
  CHECK(named->fallback == nullptr);
  CHECK(named->key() == "reference");
  auto picked = registry.choose("auto");
  REQUIRE(picked.ok());
  if (picked->target->name() != "reference") {
    REQUIRE(picked->fallback != nullptr);
    CHECK(picked->fallback->name() == "reference");
    CHECK(picked->key() == std::string(picked->target->name()) + ">reference");
  } else {
    CHECK(picked->fallback == nullptr);
  }
  CHECK(registry.choose("").ok());  // empty = auto
  CHECK(registry.choose("no-such-target").error().code == ErrorCode::NotFound);
}

// BitLinear with K = 8, N = 4 fixed by its scales and the ternary weights drawn.
void bind_bitlinear(Program& p) {
  static std::vector<float> gamma(8, 1.0f), w_scale(4, 0.5f);
  REQUIRE(p.bind("BitLinear.gamma", TensorView{gamma.data(), ElemKind::F32, {8}}).ok());
  REQUIRE(p.bind("BitLinear.w_scale", TensorView{w_scale.data(), ElemKind::F32, {4}}).ok());
  REQUIRE(p.bind_random(1).ok());
}

TEST_CASE("stages: print_after writes the module after the named stages to the trace sink") {
  std::vector<std::string> lines;
  std::mutex mu;
  EngineOptions o;
  o.target = "reference";
  o.cache_dir = "off";
  o.print_after = "optimize";
  o.trace = [&](std::string_view l) {
    std::lock_guard lock(mu);
    lines.emplace_back(l);
  };
  auto e = Engine::create(o);
  REQUIRE(e.ok());
  auto p = e->compile(testing::kBitLinear, "bitlinear.tri");
  REQUIRE(p.ok());
  bind_bitlinear(*p);
  std::vector<float> x(2 * 8, 0.5f);
  std::vector<TensorView> in{{x.data(), ElemKind::F32, {2, 8}}};
  REQUIRE(p->kernel("BitLinear.forward", in).ok());
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].rfind("ternjit_verbose,after_stage,stage=optimize,fn=BitLinear.forward\n", 0) == 0);
  CHECK(lines[0].find("tmatmul") != std::string::npos);  // after the pipeline: the fused matmul

  o.print_after = "all";
  lines.clear();
  auto all = Engine::create(o);
  REQUIRE(all.ok());
  auto q = all->compile(testing::kBitLinear, "bitlinear.tri");
  REQUIRE(q.ok());
  bind_bitlinear(*q);
  REQUIRE(q->kernel("BitLinear.forward", in).ok());
  REQUIRE(lines.size() == 2);
  CHECK(lines[0].find("stage=specialize") != std::string::npos);
  CHECK(lines[1].find("stage=optimize") != std::string::npos);

  o.print_after = "optimize,lowering";
  auto bad = Engine::create(o);
  REQUIRE(!bad.ok());
  CHECK(bad.error().message.find("unknown stage 'lowering'") != std::string::npos);
}

TEST_CASE("stages: one call key; the bucket key replaces axis 0 by the bound") {
  std::vector<std::int64_t> a{5, 64}, b{7, 64}, c{5, 32};
  const TensorView in5{nullptr, ElemKind::F32, a}, in7{nullptr, ElemKind::F32, b}, k32{nullptr, ElemKind::F32, c};
  CHECK(jit::CallKey("f", std::span(&in5, 1)).view() != jit::CallKey("f", std::span(&in7, 1)).view());
  CHECK(jit::CallKey("f", std::span(&in5, 1), 8).view() == jit::CallKey("f", std::span(&in7, 1), 8).view());
  CHECK(jit::CallKey("f", std::span(&in5, 1), 8).view() != jit::CallKey("f", std::span(&k32, 1), 8).view());
  CHECK(jit::CallKey("f", std::span(&in5, 1), 8).view() != jit::CallKey("g", std::span(&in5, 1), 8).view());
  // A bucket's key is the exact key of a call with M at the bound.
  std::vector<std::int64_t> d{8, 64};
  const TensorView in8{nullptr, ElemKind::F32, d};
  CHECK(jit::CallKey("f", std::span(&in5, 1), 8).view() == jit::CallKey("f", std::span(&in8, 1)).view());
  // Long keys leave the stack buffer and stay equal by content.
  const std::string long_name(300, 'x');
  CHECK(jit::CallKey(long_name, std::span(&in5, 1)).view() == jit::CallKey(long_name, std::span(&in5, 1)).view());
  CHECK(jit::CallKey(long_name, std::span(&in5, 1)).view().size() == 300 + 1 + 2 + 16);
}

TEST_CASE("stages: option aliases come from the targets that declare them") {
  const auto registry = targets::TargetRegistry::create();
  for (const targets::RegistryAlias& a : registry.option_aliases()) {
    INFO(a.name);
    const targets::Target* t = registry.lookup(a.target);
    REQUIRE(t != nullptr);
    CHECK(registry.find_alias(a.name) != nullptr);
    CHECK_FALSE(a.help.empty());
    // The alias names one of the target's own options (a value it may still refuse, but
    // never as an unknown option), unlike a name the target does not take.
    targets::TargetOptions given;
    given.values[a.option] = "definitely-not-a-value";
    auto parsed = t->parse_options(given);
    if (!parsed.ok()) CHECK(parsed.error().message.find("unknown " + a.target + " option") == std::string::npos);
    targets::TargetOptions unknown;
    unknown.values["no_such_option"] = "1";
    CHECK(t->parse_options(unknown).error().code == ErrorCode::InvalidArgument);
  }
  CHECK(registry.find_alias("no_such_alias") == nullptr);
  // EngineOptions::max_isa goes through the alias: it must agree with the full spelling.
  if (const targets::RegistryAlias* a = registry.find_alias("max_isa")) {
    EngineOptions o;
    o.max_isa = "avx2";
    o.target_options = a->target + "." + a->option + "=avx512";
    auto t = jit::validate_options(o, registry);
    REQUIRE(!t.ok());
    CHECK(t.error().message.find("contradicts target option " + a->target + "." + a->option + "=avx512") !=
          std::string::npos);
    o.target_options.clear();
    auto ok = jit::validate_options(o, registry);
    REQUIRE(ok.ok());
    CHECK(ok->target_options.at(a->target).get(a->option) == "avx2");
  }
}

}  // namespace
}  // namespace ternjit
