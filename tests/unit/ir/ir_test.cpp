// SPDX-License-Identifier: Apache-2.0
// ir_test.cpp - the op facts generated from ops.def: categories, attribute structs, arity.
#include <doctest/doctest.h>

#include "ir/ir.h"

using namespace ternjit::ir;

TEST_CASE("op categories agree with arity, flags and the ewise and activation helpers") {
  for (Op op : all_ops()) {
    CAPTURE(op_name(op));
    const OpCategory c = op_category(op);
    CHECK(is_ewise_binary(op) == (c == OpCategory::Binary));
    CHECK(is_ewise_step_op(op) == (c == OpCategory::Binary || c == OpCategory::Unary || c == OpCategory::Activation));
    CHECK(activation_of(op).has_value() == (c == OpCategory::Activation));
    CHECK(is_terminator(op) == (c == OpCategory::ControlFlow));
    if (c == OpCategory::Binary) CHECK(op_num_operands(op) == 2);
    if (c == OpCategory::Unary || c == OpCategory::Activation || c == OpCategory::Reduction) {
      CHECK(op_num_operands(op) == 1);
      CHECK(op_num_results(op) == 1);
    }
  }
}

TEST_CASE("attrs_kind names the struct an op carries and the struct an Attrs holds") {
  CHECK(attrs_kind(Op::Add) == AttrsKind::None);
  CHECK(attrs_kind(Op::Const) == AttrsKind::Const);
  CHECK(attrs_kind(Op::Softmax) == AttrsKind::Axis);
  CHECK(attrs_kind(Op::ReduceMax) == AttrsKind::Axis);
  CHECK(attrs_kind(Op::TMatMul) == AttrsKind::TMatMul);
  CHECK(attrs_kind(Attrs{EpsAttrs{}}) == AttrsKind::Eps);
  CHECK(attrs_kind(Attrs{}) == AttrsKind::None);
  CHECK(attrs_match(Op::RmsNorm, EpsAttrs{}));
  CHECK_FALSE(attrs_match(Op::RmsNorm, NoAttrs{}));
  CHECK_FALSE(attrs_match(Op::Ternarize, EpsAttrs{}));
  // Every activation is the unary op of the same name, and back.
  for (Op op : all_ops())
    if (auto act = activation_of(op)) CHECK(activation_op(*act) == op);
}
