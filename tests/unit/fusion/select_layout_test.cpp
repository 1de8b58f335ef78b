// SPDX-License-Identifier: Apache-2.0
// select_layout_test.cpp - select-layout repacks load-time weights once, per target layout.
#include <doctest/doctest.h>

#include <string>

#include "tests/unit/fusion/fusion_testing.h"

using namespace ternjit;
using testing::apply;
using testing::count_op;

namespace {

const char* kText = R"(param @w : t2[8, 4]
param @latent : f32[8, 4]

func @f(%x: f32[2, 8], %q: i8[2, 8], %s: f32[2, 1], %v: t2[8, 4]) -> (f32[2, 4], f32[2, 4], f32[2, 4], f32[2, 4]) {
^entry:
  %w = param @w : t2[8, 4]
  %a = tmatmul %x, %w {x_scale = false, w_scale = false, bias = false, residual = false, act = none} : f32[2, 4]
  %b = tmatmul %q, %w, %s {x_scale = true, w_scale = false, bias = false, residual = false, act = relu} : f32[2, 4]
  %p = param @latent : f32[8, 4]
  %t, %g = tquantize %p : t2[8, 4], f32[]
  %c = tmatmul %x, %t, %g {x_scale = false, w_scale = true, bias = false, residual = false, act = none} : f32[2, 4]
  %d = tmatmul %x, %v {x_scale = false, w_scale = false, bias = false, residual = false, act = none} : f32[2, 4]
  ret %a, %b, %c, %d
}
)";

passes::TargetInfo target(WeightFormat layout) {
  passes::TargetInfo t;
  t.weight_layout = layout;
  return t;
}

}  // namespace

TEST_CASE("select-layout: each load-time weight is packed once, and values are unchanged") {
  const ir::Module before = testing::parse_ok(kText);
  for (WeightFormat layout : kAllWeightFormats) {
    CAPTURE(std::string(weight_format_name(layout)));
    const passes::TargetInfo t = target(layout);
    const ir::Module after = apply(before, [&](ir::Function& f) { passes::select_layout(f, t); });
    if (layout == WeightFormat::Plain) {
      CHECK(ir::print_module(after) == ir::print_module(before));
      continue;
    }
    // @w (shared by two kernels) and the tquantize of @latent; not the argument %v.
    CHECK(count_op(after, ir::Op::TPack) == 2);
    const ir::Function& f = after.functions()[0];
    for (ir::InstId i : f.insts(f.entry())) {
      const ir::InstData& d = f.inst(i);
      if (d.op != ir::Op::TMatMul) continue;
      const bool from_arg = f.value(d.operands[1]).def == ir::ValueDef::BlockArg;
      CHECK(f.type_of(d.operands[1]).layout == (from_arg ? WeightFormat::Plain : layout));
    }
    CHECK(ir::print_module(apply(after, [&](ir::Function& g) { passes::select_layout(g, t); })) ==
          ir::print_module(after));
    for (std::uint64_t seed = 1; seed <= 3; ++seed) testing::check_same_results(before, after, seed, 0, 0);
  }
}

TEST_CASE("select-layout: the printed form carries the layout in the type") {
  const ir::Module before = testing::parse_ok(R"(param @w : t2[16, 2]

func @f(%x: f32[1, 16]) -> f32[1, 2] {
^entry:
  %w = param @w : t2[16, 2]
  %y = tmatmul %x, %w {x_scale = false, w_scale = false, bias = false, residual = false, act = none} : f32[1, 2]
  ret %y
}
)");
  const passes::TargetInfo t = target(WeightFormat::Bitplane);
  const ir::Module after = apply(before, [&](ir::Function& f) { passes::select_layout(f, t); });
  CHECK(ir::print_module(after) == R"(param @w : t2[16, 2]

func @f(%x: f32[1, 16]) -> f32[1, 2] {
^entry:
  %w = param @w : t2[16, 2]
  %0 = tpack %w {layout = bitplane} : t2<bitplane>[16, 2]
  %y = tmatmul %x, %0 {x_scale = false, w_scale = false, bias = false, residual = false, act = none} : f32[1, 2]
  ret %y
}
)");
}
