// SPDX-License-Identifier: Apache-2.0
// step_plan_test.cpp - the shared CPU-target walk (targets/common/step_plan.h) and the option helpers of target.h.
#include <doctest/doctest.h>

#include "ir/parse.h"
#include "targets/common/step_plan.h"
#include "targets/target.h"

namespace ternjit {
namespace {

using targets::PlannedStep;
using targets::Slot;
using targets::SlotKind;

ir::Module parse(const char* text) {
  auto m = ir::parse_module(text, "plan.tir");
  REQUIRE_MESSAGE(m.ok(), (m.ok() ? "" : m.error().message));
  return std::move(m.value());
}

// The value named `name` in `f`.
ir::ValueId value(const ir::Function& f, const std::string& name) {
  for (std::uint32_t i = 0; i < f.num_values(); ++i)
    if (f.value(ir::ValueId{i}).name == name) return ir::ValueId{i};
  FAIL("no value %" << name);
  return ir::ValueId{0};
}

constexpr const char* kLayer = R"(param @L.w : t2[8, 4]
param @L.s : f32[8, 4]

func @f(%x: f32[2, 8]) -> (f32[2, 4], f32[2, 4], t2[8, 4]) {
^entry:
  %w = param @L.w : t2[8, 4]
  %wp = tpack %w {layout = tern2} : t2<tern2>[8, 4]
  %s = param @L.s : f32[8, 4]
  %s2 = mul %s, %s : f32[8, 4]
  %y = matmul %x, %s2 : f32[2, 4]
  %r = reshape %y : f32[2, 4]
  %z = relu %r : f32[2, 4]
  ret %z, %r, %w
}
)";

TEST_CASE("step plan: load-time values, aliases, outputs written in place, copies") {
  ir::Module m = parse(kLayer);
  const ir::Function& f = m.functions()[0];
  REQUIRE(targets::plannable(f, "test").ok());
  const targets::StepPlan p = targets::plan_steps(f);
  CHECK(p.in_bytes == std::vector<std::size_t>{64});
  CHECK(p.out_bytes == std::vector<std::size_t>{32, 32, 32});
  // Load-time: the two params and the pure op of them, in definition order.
  REQUIRE(p.load_time.size() == 3);
  CHECK(p.load_time[0].value == value(f, "w"));
  CHECK(p.load_time[1].value == value(f, "s"));
  CHECK(p.load_time[2].value == value(f, "s2"));
  CHECK(p.slot(value(f, "s2")) == Slot{SlotKind::Const, 2});
  // tpack aliases even a load-time operand (a bound weight is never copied).
  CHECK(p.slot(value(f, "wp")) == p.slot(value(f, "w")));
  // %z is returned first as result 0: computed straight into output 0. %y is returned
  // through the reshape alias as result 1: it lives in scratch and is copied.
  CHECK(p.slot(value(f, "z")) == Slot{SlotKind::Out, 0});
  CHECK(p.slot(value(f, "y")).kind == SlotKind::Scratch);
  CHECK(p.slot(value(f, "r")) == p.slot(value(f, "y")));
  CHECK(p.scratch_bytes == targets::kScratchAlign);
  // Steps: matmul, relu, then the copies of results 1 (scratch) and 2 (a const).
  REQUIRE(p.steps.size() == 4);
  CHECK(p.steps[0].kind == PlannedStep::Kind::Compute);
  CHECK(f.inst(p.steps[0].inst).op == ir::Op::MatMul);
  CHECK(p.steps[0].in == std::vector<Slot>{{SlotKind::Arg, 0}, {SlotKind::Const, 2}});
  CHECK(f.inst(p.steps[1].inst).op == ir::Op::Relu);
  CHECK(p.steps[1].out == std::vector<Slot>{{SlotKind::Out, 0}});
  CHECK(p.steps[2].kind == PlannedStep::Kind::Copy);
  CHECK(p.steps[2].ret_index == 1);
  CHECK(p.steps[2].bytes == 32);
  CHECK(p.steps[3].kind == PlannedStep::Kind::Copy);
  CHECK(p.steps[3].in == std::vector<Slot>{{SlotKind::Const, 0}});
  CHECK(p.steps[3].out == std::vector<Slot>{{SlotKind::Out, 2}});
  // Run twice: the same plan.
  const targets::StepPlan q = targets::plan_steps(f);
  CHECK(q.slot_of == p.slot_of);
  CHECK(q.scratch_bytes == p.scratch_bytes);
}

TEST_CASE("step plan: what cannot be planned names the target and the reason") {
  ir::Module m = parse(R"(func @g<N>(%x: f32[N]) -> f32[N] {
^entry:
  %y = relu %x : f32[N]
  ret %y
}
)");
  auto r = targets::plannable(m.functions()[0], "cpu9");
  REQUIRE(!r.ok());
  CHECK(r.error().code == ErrorCode::Unsupported);
  CHECK(r.error().message.find("the cpu9 target needs static shapes") != std::string::npos);
}

TEST_CASE("target options: split by target, and the options' one key text") {
  auto s = targets::split_target_options(" x86.max_isa = avx2 ;; llvm.cpu=znver4;llvm.triple=aarch64-linux-gnu ");
  REQUIRE(s.ok());
  CHECK(s->size() == 2);
  CHECK(s->at("x86").get("max_isa") == "avx2");
  CHECK(s->at("llvm").get("cpu") == "znver4");
  CHECK(s->at("llvm").get("nothing").empty());
  CHECK(targets::split_target_options("")->empty());
  for (const char* bad : {"max_isa=avx2", "x86.max_isa", ".x=1", "x86.=1", "x86.a=1;x86.a=2"}) {
    INFO(bad);
    auto e = targets::split_target_options(bad);
    REQUIRE(!e.ok());
    CHECK(e.error().code == ErrorCode::InvalidArgument);
  }
  targets::CompileOptions o;
  o.threads = 2;
  o.tuning = targets::TuningMode::Tune;
  o.target = s->at("llvm");
  CHECK(targets::compile_options_key("llvm", o) ==
        "opt=O2;threads=2;tuning=tune;llvm.cpu=znver4;llvm.triple=aarch64-linux-gnu");
  CHECK(targets::parse_tuning_mode("cached") == targets::TuningMode::Cached);
  CHECK(!targets::parse_tuning_mode("sometimes"));
}

}  // namespace
}  // namespace ternjit
