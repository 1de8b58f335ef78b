// SPDX-License-Identifier: Apache-2.0
// kv_decode_test.cpp - the KV cache convention end to end (docs/bitnet.md): a one-block
// decoder (gather, rmsnorm, projections, neox RoPE, kv_write, attention, head) run as
// prefill + decode steps with the host-owned caches updated in place equals running the
// whole sequence at once, bit for bit on each target; rows past pos + M hold NaN and are
// never read; the CPU targets agree with the reference within a stated tolerance.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "ternjit/engine.h"

namespace ternjit {
namespace {

constexpr int kV = 11, kE = 8, kC = 8;  // vocabulary, width, cache capacity; 2 query heads, 1 KV head of 4

constexpr const char* kModel = R"(param @T.embd : f32[11, 8]
param @T.g : f32[8]
param @T.wq : f32[8, 8]
param @T.wk : f32[8, 4]
param @T.wv : f32[8, 4]
param @T.wo : f32[8, 8]
param @T.head : f32[8, 11]

func @step<M>(%ids: i32[M], %pos: i32[], %kc: f32[1, 8, 1, 4], %vc: f32[1, 8, 1, 4]) -> (f32[M, 11], f32[1, 8, 1, 4], f32[1, 8, 1, 4]) {
^entry:
  %embd = param @T.embd : f32[11, 8]
  %h = gather %embd, %ids {axis = 0} : f32[M, 8]
  %g = param @T.g : f32[8]
  %n = rmsnorm %h, %g {eps = 1e-05} : f32[M, 8]
  %wq = param @T.wq : f32[8, 8]
  %q2 = matmul %n, %wq : f32[M, 8]
  %q3 = reshape %q2 : f32[M, 2, 4]
  %q = rope %q3, %pos {theta = 10000, mode = neox} : f32[M, 2, 4]
  %wk = param @T.wk : f32[8, 4]
  %k2 = matmul %n, %wk : f32[M, 4]
  %k3 = reshape %k2 : f32[M, 1, 4]
  %k = rope %k3, %pos {theta = 10000, mode = neox} : f32[M, 1, 4]
  %wv = param @T.wv : f32[8, 4]
  %v2 = matmul %n, %wv : f32[M, 4]
  %v = reshape %v2 : f32[M, 1, 4]
  %kc1 = kv_write %kc, %k, %pos {layer = 0} : f32[1, 8, 1, 4]
  %vc1 = kv_write %vc, %v, %pos {layer = 0} : f32[1, 8, 1, 4]
  %a = attention %q, %kc1, %vc1, %pos {layer = 0, scale = 0.5} : f32[M, 2, 4]
  %a2 = reshape %a : f32[M, 8]
  %wo = param @T.wo : f32[8, 8]
  %o = matmul %a2, %wo : f32[M, 8]
  %h2 = add %h, %o : f32[M, 8]
  %head = param @T.head : f32[8, 11]
  %logits = matmul %h2, %head : f32[M, 11]
  ret %logits, %kc1, %vc1
}
)";

struct Caches {
  std::vector<float> k, v;
  Caches() : k(kC * 4, std::numeric_limits<float>::quiet_NaN()), v(kC * 4, std::numeric_limits<float>::quiet_NaN()) {}
};

// One step: ids at pos, the caches updated in place (the same buffers in and out).
std::vector<float> step(Program& p, const std::vector<std::int32_t>& ids, std::int32_t pos, Caches& c) {
  const auto m = static_cast<std::int64_t>(ids.size());
  std::vector<float> logits(static_cast<std::size_t>(m * kV));
  const TensorView in[] = {{const_cast<std::int32_t*>(ids.data()), ElemKind::I32, {m}},
                           {&pos, ElemKind::I32, {}},
                           {c.k.data(), ElemKind::F32, {1, kC, 1, 4}},
                           {c.v.data(), ElemKind::F32, {1, kC, 1, 4}}};
  TensorView out[] = {{logits.data(), ElemKind::F32, {m, kV}},
                      {c.k.data(), ElemKind::F32, {1, kC, 1, 4}},
                      {c.v.data(), ElemKind::F32, {1, kC, 1, 4}}};
  auto r = p.run("step", in, out);
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
  return logits;
}

TEST_CASE("kv cache: prefill then decode steps equal the whole sequence, bit for bit on each target") {
  auto m = Module::from_text(kModel, "decoder.tir");
  REQUIRE_MESSAGE(m.ok(), (m.ok() ? "" : m.error().message));
  const std::vector<std::int32_t> ids = {3, 7, 1, 9, 4, 10};
  std::vector<float> reference_full;
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
    REQUIRE(p->bind_random(5).ok());
    Caches full;
    const std::vector<float> all = step(*p, ids, 0, full);
    for (float x : all) REQUIRE(std::isfinite(x));
    // Prefill 3 tokens, then decode the other 3 one at a time.
    Caches inc;
    std::vector<float> got = step(*p, {ids[0], ids[1], ids[2]}, 0, inc);
    for (std::int32_t t = 3; t < 6; ++t) {
      const std::vector<float> one = step(*p, {ids[static_cast<std::size_t>(t)]}, t, inc);
      got.insert(got.end(), one.begin(), one.end());
    }
    REQUIRE(got.size() == all.size());
    CHECK(std::memcmp(got.data(), all.data(), all.size() * 4) == 0);
    // The caches: rows [0, 6) the same bits, rows 6 and 7 still the NaN they held.
    CHECK(std::memcmp(inc.k.data(), full.k.data(), 6 * 4 * 4) == 0);
    CHECK(std::memcmp(inc.v.data(), full.v.data(), 6 * 4 * 4) == 0);
    CHECK(std::isnan(inc.k[6 * 4]));
    CHECK(std::isnan(full.v[7 * 4 + 3]));
    // Across targets, within f32 rounding: every value is a short sum (K <= 8 terms) of
    // products of values of magnitude <= ~4 (random weights in [-1, 1], normalized rows),
    // computed in another order or with FMA: a few ulps of a sum of |terms| <= ~100,
    // so 1e-4 absolute plus 1e-5 relative covers it with margin.
    if (reference_full.empty()) {
      reference_full = all;
    } else {
      for (std::size_t i = 0; i < all.size(); ++i)
        CHECK(std::abs(all[i] - reference_full[i]) <= 1e-4 + 1e-5 * std::abs(reference_full[i]));
    }
  }
}

}  // namespace
}  // namespace ternjit
