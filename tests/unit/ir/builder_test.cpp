// SPDX-License-Identifier: Apache-2.0
// builder_test.cpp - round_to_kind: correct rounding from double into every kind.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "ir/builder.h"

using ternjit::ElemKind;
using ternjit::ir::round_to_kind;

TEST_CASE("round_to_kind: f16/bf16 round a double once, with no double-rounding error") {
  // 1 + 2^-11 is the f16 tie between 1 and 1 + 2^-10; a hair above it must round up.
  // Through float the hair (2^-30) is lost and the tie rounds to even (1.0): wrong.
  const double above_f16_tie = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -30);
  CHECK(round_to_kind(above_f16_tie, ElemKind::F16) == 1.0 + std::ldexp(1.0, -10));
  CHECK(round_to_kind(1.0 + std::ldexp(1.0, -11), ElemKind::F16) == 1.0);  // exact tie: even
  const double above_bf16_tie = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -30);
  CHECK(round_to_kind(above_bf16_tie, ElemKind::BF16) == 1.0 + std::ldexp(1.0, -7));
  CHECK(round_to_kind(-above_bf16_tie, ElemKind::BF16) == -(1.0 + std::ldexp(1.0, -7)));
  const double below_tie = 1.0 + std::ldexp(1.0, -11) - std::ldexp(1.0, -30);
  CHECK(round_to_kind(below_tie, ElemKind::F16) == 1.0);
  CHECK(round_to_kind(65504.0, ElemKind::F16) == 65504.0);
  CHECK(std::isinf(round_to_kind(65520.0, ElemKind::F16)));
  CHECK(std::isinf(round_to_kind(1e300, ElemKind::BF16)));
  CHECK(round_to_kind(std::ldexp(1.0, -25) + std::ldexp(1.0, -60), ElemKind::F16) == std::ldexp(1.0, -24));
  CHECK(std::isnan(round_to_kind(std::nan(""), ElemKind::F16)));
}

TEST_CASE("round_to_kind: integers round half to even and saturate") {
  CHECK(round_to_kind(2.5, ElemKind::I8) == 2);
  CHECK(round_to_kind(3.5, ElemKind::I8) == 4);
  CHECK(round_to_kind(-2.5, ElemKind::I32) == -2);
  CHECK(round_to_kind(300, ElemKind::I8) == 127);
  CHECK(round_to_kind(-300, ElemKind::U8) == 0);
  CHECK(round_to_kind(5, ElemKind::T2) == 1);
  CHECK(round_to_kind(std::nan(""), ElemKind::I32) == 0);
  CHECK(round_to_kind(0.25, ElemKind::Bool) == 1);
  CHECK(round_to_kind(0.1, ElemKind::F32) == static_cast<double>(0.1f));
}
