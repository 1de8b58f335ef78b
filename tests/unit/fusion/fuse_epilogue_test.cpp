// SPDX-License-Identifier: Apache-2.0
// fuse_epilogue_test.cpp - fuse-epilogue is bit-exact on random chains after a tmatmul.
//
// Each case is a tmatmul (int8 with its activation scale, or a float kernel of f32,
// f16 or bf16) followed by a random chain of scales, bias and residual adds,
// activations and ops the epilogue cannot take (sub, a second scale, a kind change).
// The pass must keep results bit-identical (epilogue steps compute as the standalone
// ops), and every op of the chain must either remain or appear as a set slot.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "ir/builder.h"
#include "tests/unit/fusion/fusion_testing.h"

using namespace ternjit;
using testing::apply;
using testing::count_op;

namespace {

ir::Type ty(ElemKind k, std::vector<std::int64_t> dims) {
  ir::Type t{k, {}};
  for (std::int64_t d : dims) t.shape.push_back(ir::Dim::fixed(d));
  return t;
}

// The number of epilogue slots set (activation included) over every tmatmul.
std::size_t slots_set(const ir::Module& m) {
  std::size_t n = 0;
  for (const ir::Function& f : m.functions())
    for (ir::BlockId b : f.blocks())
      for (ir::InstId i : f.insts(b))
        if (const auto* a = std::get_if<ir::TMatMulAttrs>(&f.inst(i).attrs))
          n += static_cast<std::size_t>(a->num_epilogue()) + (a->act != ir::Activation::None ? 1 : 0);
  return n;
}

// One random case; returns the number of chain ops.
std::size_t build_case(ir::Module& m, testing::Dice& dice) {
  const std::int64_t rows = dice.in(1, 3), k = dice.in(1, 24), n = dice.in(1, 5);
  const bool int8 = dice.one_in(2);
  const ElemKind kinds[] = {ElemKind::F32, ElemKind::F16, ElemKind::BF16};
  const ElemKind xk = int8 ? ElemKind::I8 : kinds[dice.in(0, 2)];

  ir::Function& f = m.functions().emplace_back("f");
  const ir::BlockId b = f.add_block("entry");
  ir::Builder bld(m, f);
  bld.set_block(b);
  auto arg = [&](ir::Type t) { return f.add_block_arg(b, std::move(t)); };
  auto ok = [](Result<ir::ValueId> v) {
    REQUIRE_MESSAGE(v.ok(), (v.ok() ? "" : render(v.error())));
    return *v;
  };

  const ir::ValueId x = arg(ty(xk, {rows, k}));
  const ir::ValueId w = arg(ty(ElemKind::T2, {k, n}));
  ir::TMatMulAttrs attrs;
  std::vector<ir::ValueId> operands{x, w};
  if (int8) {
    operands.push_back(arg(ty(ElemKind::F32, {rows, 1})));
    attrs.x_scale = true;
  }
  ir::ValueId y = ok(bld.create1(ir::Op::TMatMul, operands, attrs));

  const std::size_t length = static_cast<std::size_t>(dice.in(1, 5));
  for (std::size_t s = 0; s < length; ++s) {
    const ir::Type yt = f.type_of(y);
    const ElemKind yk = yt.elem;
    const bool left = dice.one_in(2);  // which side y is on (both commute exactly)
    auto binary = [&](ir::Op op, ir::ValueId other) {
      return ok(bld.create1(op, left ? std::vector<ir::ValueId>{y, other} : std::vector<ir::ValueId>{other, y}));
    };
    switch (dice.in(0, 8)) {
      case 0: y = binary(ir::Op::Mul, arg(ty(ElemKind::F32, {rows, 1}))); break;  // x_scale shape
      case 1: y = binary(ir::Op::Mul, arg(ty(ElemKind::F32, {n}))); break;
      case 2: y = binary(ir::Op::Mul, arg(ty(ElemKind::F32, {}))); break;
      case 3: y = binary(ir::Op::Add, arg(ty(yk, {n}))); break;
      case 4: y = binary(ir::Op::Add, arg(ty(yk, {rows, n}))); break;
      case 5: y = binary(ir::Op::Sub, arg(ty(yk, {n}))); break;
      case 6: y = binary(ir::Op::Add, arg(ty(ElemKind::F32, {rows, n}))); break;  // may change the kind
      default: {
        const ir::Op acts[] = {ir::Op::Relu, ir::Op::Gelu, ir::Op::Silu, ir::Op::Sigmoid, ir::Op::Tanh};
        y = ok(bld.create1(acts[dice.in(0, 4)], {y}));
        break;
      }
    }
  }
  f.set_result_types({f.type_of(y)});
  REQUIRE(bld.create(ir::Op::Ret, {y}).ok());
  REQUIRE(ir::verify_module(m).empty());
  return length;
}

}  // namespace

TEST_CASE("fuse-epilogue: random chains stay bit-exact and every op is kept or absorbed") {
  testing::Dice dice(42);
  std::size_t absorbed = 0, total = 0;
  for (int c = 0; c < 300; ++c) {
    ir::Module before;
    const std::size_t length = build_case(before, dice);
    const std::size_t base_slots = slots_set(before);
    const ir::Module after = apply(before, passes::fuse_epilogue);
    CAPTURE(ir::print_module(before));
    CAPTURE(ir::print_module(after));
    // Exactly one tmatmul remains; the chain ops are either still there or slots.
    CHECK(count_op(after, ir::Op::TMatMul) == 1);
    const ir::Function& g = after.functions()[0];
    const std::size_t remaining = g.insts(g.entry()).size() - 2;  // all but the tmatmul and the ret
    CHECK(remaining + (slots_set(after) - base_slots) == length);
    absorbed += length - remaining;
    total += length;
    CHECK(ir::print_module(apply(after, passes::fuse_epilogue)) == ir::print_module(after));
    for (std::uint64_t seed = 1; seed <= 2; ++seed) testing::check_same_results(before, after, seed + 7 * c, 0, 0);
  }
  // The generator must exercise the pass: many chains start with something absorbable.
  CHECK(absorbed * 5 > total);
  CHECK(absorbed < total);
}

TEST_CASE("fuse-epilogue: the full BitLinear epilogue in one kernel") {
  const ir::Module before = testing::parse_ok(R"(func @f(%q: i8[3, 16], %w: t2[16, 4], %s: f32[3, 1], %g: f32[4], %b: f32[4], %r: f32[3, 4]) -> f32[3, 4] {
^entry:
  %y = tmatmul %q, %w, %s {x_scale = true, w_scale = false, bias = false, residual = false, act = none} : f32[3, 4]
  %a = mul %y, %g : f32[3, 4]
  %c = add %b, %a : f32[3, 4]
  %d = add %c, %r : f32[3, 4]
  %e = silu %d : f32[3, 4]
  ret %e
}
)");
  const ir::Module after = apply(before, passes::fuse_epilogue);
  CHECK(ir::print_module(after) == R"(func @f(%q: i8[3, 16], %w: t2[16, 4], %s: f32[3, 1], %g: f32[4], %b: f32[4], %r: f32[3, 4]) -> f32[3, 4] {
^entry:
  %e = tmatmul %q, %w, %s, %g, %b, %r {x_scale = true, w_scale = true, bias = true, residual = true, act = silu} : f32[3, 4]
  ret %e
}
)");
  for (std::uint64_t seed = 1; seed <= 5; ++seed) testing::check_same_results(before, after, seed, 0, 0);
}
