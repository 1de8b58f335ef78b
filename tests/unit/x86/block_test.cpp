// SPDX-License-Identifier: Apache-2.0
// block_test.cpp - a small decoder block using every op of issue 14 (gather, cast, rmsnorm, quantize,
// tmatmul, reshape, rope, kv_write, attention, layernorm, slice, concat, broadcast, transpose,
// causal_softmax, the head `h @ transpose(embd)`) specialized, optimized (O2) and compiled for x86:
// the code `ternjit compile --emit asm` lists has no reference step on any ISA, and the plan
// computes what the interpreter computes (1 and 2 threads, M = 1 and 3, f16 caches in place).
//
// Tolerance. The block chains f32 matmuls, norms and an attention: the f32 kernels differ from
// the double reference by a few ulps per op, and rmsnorm -> quantize can move an activation
// across an int8 rounding boundary (one int8 step, as plan_test.cpp states), which moves a
// tmatmul output by x_scale * w_scale. So logits compare within 1e-3 * max|logits| + 1e-5, and
// the f16 caches within 2^-9 * |want| + 1e-3 * max|cache row| (one f16 rounding on a value
// carrying the upstream error).
#include <doctest/doctest.h>

#include <cmath>
#include <map>

#include "ir/parse.h"
#include "passes/pipeline.h"
#include "passes/specialize_shapes.h"
#include "targets/x86/x86_target.h"
#include "tests/unit/x86/plan_check.h"

namespace ternjit::targets::x86 {
namespace {

// V = 40 tokens, E = 32, HQ = 4, HKV = 2, D = 8, C = 12, one layer.
const char* kBlock = R"(param @B.embd : f16[40, 32]
param @B.attn_norm : f32[32]
param @B.wq : t2[32, 32]
param @B.wq_s : f32[32]
param @B.wk : f32[32, 16]
param @B.wv : f32[32, 16]
param @B.wo : f32[32, 32]
param @B.ln_g : f32[32]
param @B.ln_b : f32[32]
param @B.bias : f32[1, 32]

func @block<M>(%ids: i32[M], %pos: i32[], %kc: f16[1, 12, 2, 8], %vc: f16[1, 12, 2, 8]) -> (f32[M, 40], f16[1, 12, 2, 8], f16[1, 12, 2, 8], f32[M, 12]) {
^entry:
  %embd = param @B.embd : f16[40, 32]
  %an = param @B.attn_norm : f32[32]
  %wq = param @B.wq : t2[32, 32]
  %wqs = param @B.wq_s : f32[32]
  %wk = param @B.wk : f32[32, 16]
  %wv = param @B.wv : f32[32, 16]
  %wo = param @B.wo : f32[32, 32]
  %lg = param @B.ln_g : f32[32]
  %lb = param @B.ln_b : f32[32]
  %bias = param @B.bias : f32[1, 32]
  %e = gather %embd, %ids {axis = 0} : f16[M, 32]
  %h = cast %e {to = f32} : f32[M, 32]
  %n = rmsnorm %h, %an {eps = 1e-05} : f32[M, 32]
  %xq, %xs = quantize %n : i8[M, 32], f32[M, 1]
  %q0 = tmatmul %xq, %wq, %xs, %wqs {x_scale = true, w_scale = true, bias = false, residual = false, act = none} : f32[M, 32]
  %q1 = reshape %q0 : f32[M, 4, 8]
  %q = rope %q1, %pos {theta = 500000, mode = norm} : f32[M, 4, 8]
  %k0 = matmul %n, %wk : f32[M, 16]
  %k1 = reshape %k0 : f32[M, 2, 8]
  %k = rope %k1, %pos {theta = 500000, mode = neox} : f32[M, 2, 8]
  %v0 = matmul %n, %wv : f32[M, 16]
  %v = reshape %v0 : f32[M, 2, 8]
  %kc2 = kv_write %kc, %k, %pos {layer = 0} : f16[1, 12, 2, 8]
  %vc2 = kv_write %vc, %v, %pos {layer = 0} : f16[1, 12, 2, 8]
  %a = attention %q, %kc2, %vc2, %pos {layer = 0, scale = 0.35355339059327373} : f32[M, 4, 8]
  %a2 = reshape %a : f32[M, 32]
  %o = matmul %a2, %wo : f32[M, 32]
  %h2 = add %h, %o : f32[M, 32]
  %bb = broadcast %bias : f32[M, 32]
  %h3 = add %h2, %bb : f32[M, 32]
  %ln = layernorm %h3, %lg, %lb {eps = 1e-05} : f32[M, 32]
  %s0 = slice %ln {axis = 1, start = 0, size = 12} : f32[M, 12]
  %s1 = slice %ln {axis = 1, start = 12, size = 20} : f32[M, 20]
  %cc = concat %s1, %s0 {axis = 1} : f32[M, 32]
  %t3 = reshape %cc : f32[M, 4, 8]
  %t4 = transpose %t3 {perm = [1, 0, 2]} : f32[4, M, 8]
  %t5 = transpose %t4 {perm = [1, 0, 2]} : f32[M, 4, 8]
  %fin = reshape %t5 : f32[M, 32]
  %et = transpose %embd {perm = [1, 0]} : f16[32, 40]
  %logits = matmul %fin, %et : f32[M, 40]
  %sc = slice %logits {axis = 1, start = 0, size = 12} : f32[M, 12]
  %sm = causal_softmax %sc, %pos : f32[M, 12]
  ret %logits, %kc2, %vc2, %sm
}
)";

ir::ParamValues block_params() {
  ir::ParamValues p;
  std::uint64_t seed = 500;
  p.set("B.embd", ir::HostTensor::random(ElemKind::F16, {40, 32}, seed++));
  p.set("B.attn_norm", ir::HostTensor::random(ElemKind::F32, {32}, seed++));
  p.set("B.wq", ir::HostTensor::random(ElemKind::T2, {32, 32}, seed++));
  p.set("B.wq_s", ir::HostTensor::random(ElemKind::F32, {32}, seed++));
  p.set("B.wk", ir::HostTensor::random(ElemKind::F32, {32, 16}, seed++));
  p.set("B.wv", ir::HostTensor::random(ElemKind::F32, {32, 16}, seed++));
  p.set("B.wo", ir::HostTensor::random(ElemKind::F32, {32, 32}, seed++));
  p.set("B.ln_g", ir::HostTensor::random(ElemKind::F32, {32}, seed++));
  p.set("B.ln_b", ir::HostTensor::random(ElemKind::F32, {32}, seed++));
  p.set("B.bias", ir::HostTensor::random(ElemKind::F32, {1, 32}, seed++));
  return p;
}

TEST_CASE("x86 block: a decoder block of every issue-14 op compiles at O2 with no reference step and matches the "
          "interpreter [avx2] [avx512]") {
  auto mod = ir::parse_module(kBlock, "block.tir");
  REQUIRE_MESSAGE(mod.ok(), (mod.ok() ? "" : mod.error().message));
  const ir::ParamValues params = block_params();
  for (Isa isa : testing::step_isas()) {
    for (std::int64_t M : {1, 3}) {
      CAPTURE(isa_name(isa));
      CAPTURE(M);
      auto spec = passes::specialize_function(mod.value(), "block", {{"M", M}}, true);
      REQUIRE_MESSAGE(spec.ok(), (spec.ok() ? "" : spec.error().message));
      passes::PipelineOptions po;
      REQUIRE(passes::run_pipeline(spec.value(), passes::default_pipeline(passes::OptLevel::O2), po).ok());
      auto steps = describe_code(spec.value(), "block", isa_name(isa), 2);
      REQUIRE_MESSAGE(steps.ok(), (steps.ok() ? "" : steps.error().message));
      testing::check_no_reference_step(steps.value(), "block");
      std::map<std::string, int> ops;
      for (const StepCode& st : steps.value()) ++ops[st.op];
      for (const char* op : {"gather", "cast", "tmatmul", "rope", "kv_write", "attention", "layernorm", "slice",
                             "concat", "causal_softmax", "matmul"})
        CHECK_MESSAGE(ops.count(op), "no " << op << " step");

      // Run the optimized plan against the interpreter on the unoptimized block.
      PlanOptions o;
      o.isa = isa;
      auto plan = Plan::build(spec.value(), "block", params, o, nullptr);
      REQUIRE_MESSAGE(plan.ok(), (plan.ok() ? "" : plan.error().message));
      auto ref_mod = passes::specialize_function(mod.value(), "block", {{"M", M}}, true);
      REQUIRE(ref_mod.ok());
      for (std::int64_t pos : {std::int64_t{0}, 12 - M}) {
        ir::HostTensor ids{ElemKind::I32, {M}, {}};
        for (std::int64_t i = 0; i < M; ++i) ids.data.push_back(static_cast<double>((7 * i + 3 + pos) % 40));
        const ir::HostTensor p{ElemKind::I32, {}, {static_cast<double>(pos)}};
        const ir::HostTensor kc = ir::HostTensor::random(ElemKind::F16, {1, 12, 2, 8}, 9 + static_cast<std::uint64_t>(pos));
        const ir::HostTensor vc = ir::HostTensor::random(ElemKind::F16, {1, 12, 2, 8}, 19 + static_cast<std::uint64_t>(pos));
        auto want = ir::interpret(ref_mod.value(), "block", std::vector<ir::HostTensor>{ids, p, kc, vc}, params);
        REQUIRE_MESSAGE(want.ok(), (want.ok() ? "" : want.error().message));
        for (int threads : {1, 2}) {
          for (bool in_place : {false, true}) {
          // Distinct output buffers (poisoned), then the caches in place: each output cache
          // buffer is its input buffer (the KV cache convention: the plan's in-place
          // kv_write chain, which must run and give the same values).
          std::vector<std::uint8_t> ib = ids.to_bytes(), kb = kc.to_bytes(), vb = vc.to_bytes();
          std::vector<std::uint8_t> ko(kb.size(), 0xAB), vo(vb.size(), 0xAB);
          std::int32_t p32 = static_cast<std::int32_t>(pos);
          std::vector<std::uint8_t> lb(static_cast<std::size_t>(M * 40 * 4), 0xAB), sb(static_cast<std::size_t>(M * 12 * 4), 0xAB);
          std::uint8_t* kout = in_place ? kb.data() : ko.data();
          std::uint8_t* vout = in_place ? vb.data() : vo.data();
          void* bufs[] = {ib.data(), &p32, kb.data(), vb.data(), lb.data(), kout, vout, sb.data()};
          auto r = plan.value()->run(bufs, testing::std_threads(threads));
          REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
          if (!in_place) {
            kb = ko;
            vb = vo;
          }
          auto logits = ir::HostTensor::from_bytes(ElemKind::F32, {M, 40}, lb);
          auto kgot = ir::HostTensor::from_bytes(ElemKind::F16, {1, 12, 2, 8}, kb);
          auto vgot = ir::HostTensor::from_bytes(ElemKind::F16, {1, 12, 2, 8}, vb);
          auto smgot = ir::HostTensor::from_bytes(ElemKind::F32, {M, 12}, sb);
          REQUIRE((logits.ok() && kgot.ok() && vgot.ok() && smgot.ok()));
          auto close = [](const ir::HostTensor& w, const ir::HostTensor& g, double rel, const char* what) {
            double mx = 0;
            for (double v : w.data) mx = std::max(mx, std::fabs(v));
            testing::check_close(w, g, [&](std::size_t i) { return rel * std::fabs(w.data[i]) + 1e-3 * mx + 1e-5; },
                                 what);
          };
          close(want.value()[0], logits.value(), 0, "logits");
          close(want.value()[1], kgot.value(), 0x1p-9, "k cache");
          close(want.value()[2], vgot.value(), 0x1p-9, "v cache");
          close(want.value()[3], smgot.value(), 0, "causal softmax of the logits");
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace ternjit::targets::x86
