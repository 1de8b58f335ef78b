// SPDX-License-Identifier: Apache-2.0
// fuse_elementwise_test.cpp - fuse-elementwise is bit-exact on random elementwise DAGs.
//
// Each case is a random DAG of elementwise ops of one kind (f32, f16, bf16, i32 or
// i8) over broadcast inputs, with random extra uses (returned intermediates, values
// read twice), so that trees of every shape and their boundaries occur. Every ewise
// step computes as the standalone op, so results must be bit-identical (integer
// division by zero must fail in both).
#include <doctest/doctest.h>

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

void build_case(ir::Module& m, testing::Dice& dice) {
  const ElemKind kinds[] = {ElemKind::F32, ElemKind::F16, ElemKind::BF16, ElemKind::I32, ElemKind::I8};
  const ElemKind k = kinds[dice.in(0, 4)];
  ir::Function& f = m.functions().emplace_back("f");
  const ir::BlockId b = f.add_block("entry");
  ir::Builder bld(m, f);
  bld.set_block(b);

  const std::int64_t rows = dice.in(1, 3), cols = dice.in(1, 4);
  std::vector<ir::ValueId> pool;
  const std::vector<std::vector<std::int64_t>> shapes = {{rows, cols}, {cols}, {}, {rows, 1}};
  const std::int64_t inputs = dice.in(1, 3);
  for (std::int64_t i = 0; i < inputs; ++i)
    pool.push_back(f.add_block_arg(b, ty(k, shapes[static_cast<std::size_t>(dice.in(0, 3))])));

  const ir::Op binary[] = {ir::Op::Add, ir::Op::Sub, ir::Op::Mul, ir::Op::Div, ir::Op::Max, ir::Op::Min};
  const ir::Op any_unary[] = {ir::Op::Neg, ir::Op::Abs, ir::Op::Relu};
  const ir::Op float_unary[] = {ir::Op::Sigmoid, ir::Op::Tanh, ir::Op::Gelu, ir::Op::Silu,
                                ir::Op::Exp,     ir::Op::Log,  ir::Op::Sqrt, ir::Op::Rsqrt};
  std::vector<ir::ValueId> results;
  const std::int64_t ops = dice.in(1, 8);
  for (std::int64_t s = 0; s < ops; ++s) {
    // Mostly extend the latest value, so that chains form; sometimes reach back.
    auto pick = [&]() {
      if (!results.empty() && !dice.one_in(3)) return results.back();
      return pool[static_cast<std::size_t>(dice.in(0, static_cast<std::int64_t>(pool.size()) - 1))];
    };
    Result<ir::ValueId> v = make_error(ErrorCode::InvalidArgument, "unset");
    if (dice.one_in(2)) {
      const ir::Op op = binary[dice.in(0, 5)];
      const ir::ValueId a = pick();
      v = bld.create1(op, {a, dice.one_in(5) ? a : pick()});
    } else if (is_float(k) && dice.one_in(2)) {
      v = bld.create1(float_unary[dice.in(0, 7)], {pick()});
    } else {
      v = bld.create1(any_unary[dice.in(0, 2)], {pick()});
    }
    REQUIRE_MESSAGE(v.ok(), (v.ok() ? "" : render(v.error())));
    results.push_back(*v);
    pool.push_back(*v);
  }
  // Return the last value and sometimes an intermediate too (a second use ends a tree).
  std::vector<ir::ValueId> rets{results.back()};
  if (results.size() > 1 && dice.one_in(3)) rets.push_back(results[static_cast<std::size_t>(dice.in(0, ops - 2))]);
  std::vector<ir::Type> rt;
  for (ir::ValueId v : rets) rt.push_back(f.type_of(v));
  f.set_result_types(rt);
  REQUIRE(bld.create(ir::Op::Ret, rets).ok());
  REQUIRE(ir::verify_module(m).empty());
}

}  // namespace

TEST_CASE("fuse-elementwise: random elementwise DAGs stay bit-exact") {
  testing::Dice dice(7);
  std::size_t fused_cases = 0;
  for (int c = 0; c < 400; ++c) {
    ir::Module before;
    build_case(before, dice);
    const ir::Module after = apply(before, passes::fuse_elementwise);
    CAPTURE(ir::print_module(before));
    CAPTURE(ir::print_module(after));
    fused_cases += count_op(after, ir::Op::Ewise) > 0 ? 1 : 0;
    CHECK(ir::print_module(apply(after, passes::fuse_elementwise)) == ir::print_module(after));
    for (std::uint64_t seed = 1; seed <= 2; ++seed) testing::check_same_results(before, after, seed + 3 * c, 0, 0);
  }
  CHECK(fused_cases > 100);
}

TEST_CASE("fuse-elementwise: an ewise step is exactly its standalone op, f16 rounding included") {
  const ir::Module before = testing::parse_ok(R"(func @f(%a: f16[8], %b: f16[8]) -> f16[8] {
^entry:
  %0 = mul %a, %b : f16[8]
  %1 = exp %0 : f16[8]
  %2 = div %1, %b : f16[8]
  ret %2
}
)");
  const ir::Module after = apply(before, passes::fuse_elementwise);
  CHECK(count_op(after, ir::Op::Ewise) == 1);
  CHECK(count_op(after, ir::Op::Mul) == 0);
  for (std::uint64_t seed = 1; seed <= 20; ++seed) testing::check_same_results(before, after, seed, 0, 0);
}
