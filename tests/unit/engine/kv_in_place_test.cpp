// SPDX-License-Identifier: Apache-2.0
// kv_in_place_test.cpp - the host-owned KV cache through Program::run (docs/bitnet.md): the
// same buffer as input cache and output cache is updated in place and computes exactly
// what distinct buffers compute, on the reference target and every CPU target here; any
// other overlap of an output with an input is an error naming both.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "ternjit/engine.h"

namespace ternjit {
namespace {

// Two layers: each writes its rows at [pos, pos + 2) of its layer, then attends.
constexpr const char* kStep = R"(func @step(%x: f32[2, 1, 4], %pos: i32[], %kc: f32[2, 6, 1, 4]) -> (f32[2, 6, 1, 4], f32[2, 1, 4]) {
^entry:
  %k0 = kv_write %kc, %x, %pos {layer = 0} : f32[2, 6, 1, 4]
  %a0 = attention %x, %k0, %k0, %pos {layer = 0, scale = 0.5} : f32[2, 1, 4]
  %k1 = kv_write %k0, %a0, %pos {layer = 1} : f32[2, 6, 1, 4]
  %a1 = attention %a0, %k1, %k1, %pos {layer = 1, scale = 0.5} : f32[2, 1, 4]
  ret %k1, %a1
}
)";

// The same, but the input cache is also read by an attention: it must stay intact.
constexpr const char* kShared = R"(func @step(%x: f32[2, 1, 4], %pos: i32[], %kc: f32[2, 6, 1, 4]) -> (f32[2, 6, 1, 4], f32[2, 1, 4]) {
^entry:
  %s = attention %x, %kc, %kc, %pos {layer = 1, scale = 0.5} : f32[2, 1, 4]
  %k0 = kv_write %kc, %s, %pos {layer = 0} : f32[2, 6, 1, 4]
  ret %k0, %s
}
)";

bool has(const Error& e, const std::string& s) { return e.message.find(s) != std::string::npos; }

TEST_CASE("kv cache: one buffer as input and output cache is updated in place, as distinct buffers compute") {
  auto m = Module::from_text(kStep, "step.tir");
  REQUIRE_MESSAGE(m.ok(), (m.ok() ? "" : m.error().message));
  for (const char* target : {"reference", "x86", "llvm"}) {
    CAPTURE(target);
    EngineOptions o;
    o.target = target;
    o.cache_dir = "off";
    auto e = Engine::create(o);
    if (!e.ok()) {
      MESSAGE("target " << target << " not available here: " << e.error().message);
      continue;
    }
    auto p = e->compile(*m);
    REQUIRE_MESSAGE(p.ok(), (p.ok() ? "" : p.error().message));
    // The cache holds 2 tokens per layer; rows from pos + M on are NaN (never read).
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> cache(2 * 6 * 4, nan);
    for (int l = 0; l < 2; ++l)
      for (int t = 0; t < 2; ++t)
        for (int d = 0; d < 4; ++d) cache[static_cast<std::size_t>((l * 6 + t) * 4 + d)] = 0.25f * static_cast<float>(l + t - d);
    std::vector<float> x = {0.5f, -1.0f, 0.25f, 2.0f, -0.75f, 1.5f, 0.125f, -0.5f};
    std::int32_t pos = 2;
    auto run = [&](float* kc_in, float* kc_out, float* a_out) {
      const TensorView in[] = {{x.data(), ElemKind::F32, {2, 1, 4}}, {&pos, ElemKind::I32, {}},
                               {kc_in, ElemKind::F32, {2, 6, 1, 4}}};
      TensorView out[] = {{kc_out, ElemKind::F32, {2, 6, 1, 4}}, {a_out, ElemKind::F32, {2, 1, 4}}};
      return p->run("step", in, out);
    };
    // Distinct buffers: the input cache is left as it was.
    std::vector<float> in_copy = cache, out_cache(cache.size(), 7.0f), out_a(8, 7.0f);
    REQUIRE(run(in_copy.data(), out_cache.data(), out_a.data()).ok());
    CHECK(std::memcmp(in_copy.data(), cache.data(), cache.size() * 4) == 0);
    // Rows 2 and 3 of layer 0 are x; the rows before pos are kept; a is finite.
    CHECK(out_cache[(0 * 6 + 2) * 4 + 1] == -1.0f);
    CHECK(out_cache[(1 * 6 + 0) * 4 + 3] == cache[(1 * 6 + 0) * 4 + 3]);
    for (float v : out_a) CHECK(std::isfinite(v));
    // One buffer: bit for bit the same cache and attention output.
    std::vector<float> shared = cache, a2(8, 7.0f);
    auto r = run(shared.data(), shared.data(), a2.data());
    REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
    CHECK(std::memcmp(shared.data() + 0, out_cache.data(), 2 * 4 * 4 * 4) == 0);  // rows < pos + M of layer 0
    CHECK(std::memcmp(shared.data() + 24, out_cache.data() + 24, 4 * 4 * 4) == 0);  // of layer 1
    CHECK(std::memcmp(a2.data(), out_a.data(), a2.size() * 4) == 0);
    // A partial overlap of the output cache with the input cache is an error naming both.
    std::vector<float> big(cache.size() + 4, 0.0f);
    std::memcpy(big.data(), cache.data(), cache.size() * 4);
    auto partial = run(big.data(), big.data() + 4, a2.data());
    REQUIRE(!partial.ok());
    CHECK(has(partial.error(), "output 0 overlaps input 2"));
    // The attention output over the input x: not an in-place pair.
    std::vector<float> xa = x;
    const TensorView in[] = {{xa.data(), ElemKind::F32, {2, 1, 4}}, {&pos, ElemKind::I32, {}},
                             {cache.data(), ElemKind::F32, {2, 6, 1, 4}}};
    TensorView out[] = {{out_cache.data(), ElemKind::F32, {2, 6, 1, 4}}, {xa.data(), ElemKind::F32, {2, 1, 4}}};
    auto over = p->run("step", in, out);
    REQUIRE(!over.ok());
    CHECK(has(over.error(), "output 1 overlaps input 0"));
  }
}

TEST_CASE("kv cache: an input cache read elsewhere may not be the output buffer") {
  auto m = Module::from_text(kShared, "shared.tir");
  REQUIRE_MESSAGE(m.ok(), (m.ok() ? "" : m.error().message));
  for (const char* target : {"reference", "x86", "llvm"}) {
    CAPTURE(target);
    EngineOptions o;
    o.target = target;
    o.cache_dir = "off";
    auto e = Engine::create(o);
    if (!e.ok()) continue;
    auto p = e->compile(*m);
    REQUIRE(p.ok());
    std::vector<float> cache(48, 0.5f), x(8, 1.0f), a(8);
    std::int32_t pos = 0;
    const TensorView in[] = {{x.data(), ElemKind::F32, {2, 1, 4}}, {&pos, ElemKind::I32, {}},
                             {cache.data(), ElemKind::F32, {2, 6, 1, 4}}};
    TensorView out[] = {{cache.data(), ElemKind::F32, {2, 6, 1, 4}}, {a.data(), ElemKind::F32, {2, 1, 4}}};
    auto r = p->run("step", in, out);
    REQUIRE(!r.ok());
    CHECK(has(r.error(), "output 0 overlaps input 2"));
    std::vector<float> other(48);
    out[0].data = other.data();
    CHECK(p->run("step", in, out).ok());
  }
}

}  // namespace
}  // namespace ternjit
