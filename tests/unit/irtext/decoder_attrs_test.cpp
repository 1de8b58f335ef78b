// SPDX-License-Identifier: Apache-2.0
// decoder_attrs_test.cpp - the attribute dictionaries of the decoder ops in IR text: every
// field printed, read back, and each malformed one a located error.
#include <doctest/doctest.h>

#include <string>

#include "ir/parse.h"
#include "ir/print.h"

namespace ternjit::ir {
namespace {

// The first error of parsing one instruction `inst` (with result type `type`) of a
// function over the arguments `args`.
std::string first_error(const std::string& args, const std::string& inst, const std::string& type) {
  const std::string text = "func @f(" + args + ") -> " + type + " {\n^entry:\n  %0 = " + inst + " : " + type +
                           "\n  ret %0\n}\n";
  auto r = parse_module(text, "a.tir");
  REQUIRE_FALSE(r.ok());
  return r.error().message;
}

TEST_CASE("decoder op attributes: missing, unknown and mistyped fields are located errors") {
  const std::string rope_args = "%x: f32[1, 1, 2], %p: i32[]";
  CHECK(first_error(rope_args, "rope %x, %p {theta = 10000, mode = gptj}", "f32[1, 1, 2]") ==
        "a.tir:3:43: unknown rope mode 'gptj' (expected norm or neox)");
  CHECK(first_error(rope_args, "rope %x, %p {theta = 10000}", "f32[1, 1, 2]") ==
        "a.tir:3:20: 'rope' needs attribute 'mode'");
  CHECK(first_error(rope_args, "rope %x, %p {mode = neox}", "f32[1, 1, 2]") ==
        "a.tir:3:20: 'rope' needs attribute 'theta'");
  CHECK(first_error(rope_args, "rope %x, %p {theta = big, mode = neox}", "f32[1, 1, 2]") ==
        "a.tir:3:29: attribute 'theta' of 'rope' must be a number, got 'big'");
  CHECK(first_error(rope_args, "rope %x, %p {theta = 1, mode = neox, layer = 1}", "f32[1, 1, 2]") ==
        "a.tir:3:45: unknown attribute 'layer' for 'rope' (expected 'theta', 'mode')");
  CHECK(first_error(rope_args, "rope %x, %p", "f32[1, 1, 2]") == "a.tir:3:8: 'rope' needs attribute 'theta'");
  const std::string cache = "%c: f32[2, 4, 1, 2], %r: f32[1, 1, 2], %p: i32[]";
  CHECK(first_error(cache, "kv_write %c, %r, %p {}", "f32[2, 4, 1, 2]") ==
        "a.tir:3:28: 'kv_write' needs attribute 'layer'");
  CHECK(first_error(cache, "kv_write %c, %r, %p {layer = 0.5}", "f32[2, 4, 1, 2]").find("a.tir:3:37:") == 0);
  CHECK(first_error("%q: f32[1, 1, 2], %c: f32[2, 4, 1, 2], %p: i32[]", "attention %q, %c, %c, %p {layer = 1}",
                    "f32[1, 1, 2]") == "a.tir:3:33: 'attention' needs attribute 'scale'");
  CHECK(first_error("%x: f32[3, 4]", "slice %x {axis = 1, size = 2}", "f32[3, 2]") ==
        "a.tir:3:17: 'slice' needs attribute 'start'");
  CHECK(first_error("%x: f32[3, 4]", "causal_softmax %x {axis = 1}", "f32[3, 4]") ==
        "a.tir:3:26: 'causal_softmax' takes no attributes");
  // keepdims is read for gather and concat (the verifier, not the parser, refuses it).
  CHECK(first_error("%t: f32[3, 4], %i: i32[2]", "gather %t, %i {axis = 0, keepdims = true}", "f32[2, 4]") ==
        "a.tir:3:3: 'gather' supports only axis = 0 (rows of the table) without keepdims, got axis = 0 with keepdims");
  CHECK(first_error("%x: f32[3, 4]", "concat %x {axis = 0, keepdims = true}", "f32[3, 4]") ==
        "a.tir:3:3: 'concat' does not take keepdims");
}

TEST_CASE("decoder op attributes print every field and read back unchanged") {
  const std::string text =
      "func @f(%x: f32[2, 3, 4], %p: i32[], %c: f16[3, 5, 3, 4], %t: f32[6, 4], %i: i32[]) -> (f32[2, 3, 4], f16[3, 5, 3, 4], "
      "f32[2, 3, 4], f32[2, 1, 4], f32[4]) {\n"
      "^entry:\n"
      "  %0 = rope %x, %p {theta = 1e+06, mode = neox} : f32[2, 3, 4]\n"
      "  %1 = kv_write %c, %0, %p {layer = 2} : f16[3, 5, 3, 4]\n"
      "  %2 = attention %0, %1, %1, %p {layer = 2, scale = -0.125} : f32[2, 3, 4]\n"
      "  %3 = slice %2 {axis = 1, start = 2, size = 1} : f32[2, 1, 4]\n"
      "  %4 = gather %t, %i {axis = 0} : f32[4]\n"
      "  ret %2, %1, %0, %3, %4\n"
      "}\n";
  auto m = parse_module(text, "p.tir");
  REQUIRE_MESSAGE(m.ok(), (m.ok() ? std::string() : m.error().message));
  CHECK(print_module(*m) == text);
  const Function& f = m->functions()[0];
  const auto& insts = f.insts(f.entry());
  CHECK(std::get<RopeAttrs>(f.inst(insts[0]).attrs) == RopeAttrs{1e6, RopeMode::Neox});
  CHECK(std::get<LayerAttrs>(f.inst(insts[1]).attrs) == LayerAttrs{2});
  CHECK(std::get<AttentionAttrs>(f.inst(insts[2]).attrs) == AttentionAttrs{2, -0.125});
  CHECK(std::get<SliceAttrs>(f.inst(insts[3]).attrs) == SliceAttrs{1, 2, 1});
  CHECK(op_category(Op::Rope) == OpCategory::Position);
  CHECK(op_category(Op::Gather) == OpCategory::DataMovement);
  CHECK(op_category(Op::LayerNorm) == OpCategory::Normalization);
  CHECK(parse_rope_mode(rope_mode_name(RopeMode::Norm)) == RopeMode::Norm);
  CHECK(parse_rope_mode("NEOX") == std::nullopt);
}

}  // namespace
}  // namespace ternjit::ir
