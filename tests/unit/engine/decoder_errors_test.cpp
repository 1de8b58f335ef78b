// SPDX-License-Identifier: Apache-2.0
// decoder_errors_test.cpp - run-time range errors of the decoder ops (an id outside the
// table, pos < 0, rows past the KV cache's capacity) come back from Program::run as an
// error status naming the op and the values, on the reference target and on every CPU
// target this machine has (their kernels or reference steps), never as an abort.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "ternjit/engine.h"

namespace ternjit {
namespace {

constexpr const char* kStep = R"(func @step(%ids: i32[2], %pos: i32[], %t: f32[5, 4], %kc: f32[1, 4, 1, 4]) -> (f32[1, 4, 1, 4], f32[2, 1, 4]) {
^entry:
  %e = gather %t, %ids {axis = 0} : f32[2, 4]
  %r = reshape %e : f32[2, 1, 4]
  %q = rope %r, %pos {theta = 10000, mode = norm} : f32[2, 1, 4]
  %k = kv_write %kc, %q, %pos {layer = 0} : f32[1, 4, 1, 4]
  %a = attention %q, %k, %k, %pos {layer = 0, scale = 0.5} : f32[2, 1, 4]
  ret %k, %a
}
)";

TEST_CASE("decoder ops: run-time range errors are error statuses from Program::run on every CPU target") {
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
    std::vector<float> table(20);
    for (std::size_t i = 0; i < table.size(); ++i) table[i] = 0.125f * static_cast<float>(i);
    std::vector<float> cache(16, 0.0f), out_cache(16), out_a(8);
    auto run = [&](std::int32_t id0, std::int32_t id1, std::int32_t pos) {
      std::int32_t ids[2] = {id0, id1};
      const TensorView in[] = {{ids, ElemKind::I32, {2}}, {&pos, ElemKind::I32, {}}, {table.data(), ElemKind::F32, {5, 4}},
                               {cache.data(), ElemKind::F32, {1, 4, 1, 4}}};
      TensorView out[] = {{out_cache.data(), ElemKind::F32, {1, 4, 1, 4}}, {out_a.data(), ElemKind::F32, {2, 1, 4}}};
      return p->run("step", in, out);
    };
    REQUIRE(run(1, 4, 2).ok());  // rows 2 and 3 of capacity 4
    // The written rows are the gathered rows, rotated (row 2 of the output cache holds
    // table row 1 at position 2; its norm is kept by the rotation).
    double n_in = 0, n_out = 0;
    for (int j = 0; j < 4; ++j) {
      n_in += table[4 + j] * table[4 + j];
      n_out += out_cache[8 + j] * out_cache[8 + j];
    }
    CHECK(n_out == doctest::Approx(n_in).epsilon(1e-5));
    auto bad_id = run(1, 5, 0);
    REQUIRE_FALSE(bad_id.ok());
    CHECK(bad_id.error().message.find("gather: id 5 at index 1 is out of range [0, 5)") != std::string::npos);
    auto bad_pos = run(0, 1, -1);
    REQUIRE_FALSE(bad_pos.ok());
    CHECK(bad_pos.error().message.find("pos -1 is negative") != std::string::npos);
    auto full = run(0, 1, 3);
    REQUIRE_FALSE(full.ok());
    CHECK(full.error().message.find("rows [pos, pos + M) = [3, 5) do not fit the cache capacity C = 4") !=
          std::string::npos);
  }
}

}  // namespace
}  // namespace ternjit
