// SPDX-License-Identifier: Apache-2.0
// print_test.cpp - the canonical printer on IR built with the Builder and by hand.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "ir/builder.h"
#include "ir/parse.h"
#include "ir/print.h"
#include "ir/verify.h"

using ternjit::Diagnostic;
using ternjit::ElemKind;
using ternjit::Error;
using ternjit::ErrorCode;
using ternjit::Result;
using ternjit::Severity;
using ternjit::SourceLoc;
using namespace ternjit::ir;

namespace {

Dim d(std::int64_t e) { return Dim::fixed(e); }
Dim s(SymbolId id) { return Dim::symbolic(id); }
Type ty(ElemKind k, std::vector<Dim> shape) { return Type{k, std::move(shape)}; }

// Adds `f` to `m` and returns the stored copy (builders must work on that one).
Function& add(Module& m, Function f) {
  m.functions().push_back(std::move(f));
  return m.functions().back();
}

template <class T>
T ok(Result<T> r) {
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? std::string() : render(r.error())));
  return std::move(r).value();
}

// print(parse(text)) must be `text` again.
void check_reparse(const std::string& text) {
  auto m = parse_module(text, "reparse.tir");
  REQUIRE_MESSAGE(m.ok(), (m.ok() ? std::string() : render(m.error())));
  CHECK(print_module(m.value()) == text);
}

}  // namespace

TEST_CASE("linear classifier built with the builder prints canonically") {
  Module m;
  m.metadata()["source"] = "linear.tri";
  m.params().push_back(ParamDecl{"LinearClassifier.weights", ty(ElemKind::T2, {d(784), d(10)}), {}, {}});
  m.params().push_back(ParamDecl{"LinearClassifier.bias", ty(ElemKind::F32, {d(10)}), {}, {}});
  Function& f = add(m, Function("LinearClassifier.forward"));
  SymbolId n = f.symbol("N");
  f.add_constraint(Constraint{n, Constraint::Kind::AtLeast, 1});
  BlockId entry = f.add_block();
  ValueId x = f.add_block_arg(entry, ty(ElemKind::F32, {s(n), d(784)}), "x");
  f.set_result_types({ty(ElemKind::F32, {s(n), d(10)})});
  Builder b(m, f);
  b.set_block(entry);
  ValueId w = ok(b.param("LinearClassifier.weights"));
  ValueId mm = ok(b.create1(Op::MatMul, {x, w}));
  ValueId bias = ok(b.param("LinearClassifier.bias"));
  ValueId sum = ok(b.create1(Op::Add, {mm, bias}));
  (void)ok(b.create(Op::Ret, {sum}));

  const std::string expected =
      "meta \"source\" = \"linear.tri\"\n"
      "param @LinearClassifier.weights : t2[784, 10]\n"
      "param @LinearClassifier.bias : f32[10]\n"
      "\n"
      "func @LinearClassifier.forward<N>(%x: f32[N, 784]) -> f32[N, 10] where N >= 1 {\n"
      "^entry:\n"
      "  %0 = param @LinearClassifier.weights : t2[784, 10]\n"
      "  %1 = matmul %x, %0 : f32[N, 10]\n"
      "  %2 = param @LinearClassifier.bias : f32[10]\n"
      "  %3 = add %1, %2 : f32[N, 10]\n"
      "  ret %3\n"
      "}\n";
  CHECK(verify_module(m).empty());
  CHECK(print_module(m) == expected);
  check_reparse(expected);
}

TEST_CASE("unnamed values are numbered in definition order, counting only unnamed ones") {
  Module m;
  Function& f = add(m, Function("f"));
  BlockId entry = f.add_block();
  ValueId a = f.add_block_arg(entry, ty(ElemKind::F32, {d(4)}));       // %0
  ValueId b = f.add_block_arg(entry, ty(ElemKind::F32, {d(4)}), "b");  // %b
  f.set_result_types({ty(ElemKind::F32, {d(4)})});
  Builder bld(m, f);
  bld.set_block(entry);
  ValueId c = ok(bld.create1(Op::Add, {a, b}));  // %1
  f.value(c).name = "sum";
  ValueId e = ok(bld.create1(Op::Mul, {c, a}));  // %1 (the named %sum does not count)
  BlockId next = f.add_block();
  ValueId arg = f.add_block_arg(next, ty(ElemKind::F32, {d(4)}));  // %2
  (void)ok(bld.create(Op::Br, {}, NoAttrs{}, {}, {}, {BlockCall{next, {e}}}));
  bld.set_block(next);
  ValueId g = ok(bld.create1(Op::Neg, {arg}));  // %3
  (void)ok(bld.create(Op::Ret, {g}));

  CHECK(verify_module(m).empty());
  const std::string expected =
      "func @f(%0: f32[4], %b: f32[4]) -> f32[4] {\n"
      "^entry:\n"
      "  %sum = add %0, %b : f32[4]\n"
      "  %1 = mul %sum, %0 : f32[4]\n"
      "  br ^bb1(%1)\n"
      "^bb1(%2: f32[4]):\n"
      "  %3 = neg %2 : f32[4]\n"
      "  ret %3\n"
      "}\n";
  CHECK(print_module(m) == expected);
  check_reparse(expected);
}

TEST_CASE("repeated value names get _1, _2 suffixes; digit-only names get a prefix") {
  Module m;
  Function& f = add(m, Function("dup"));
  BlockId entry = f.add_block();
  ValueId x = f.add_block_arg(entry, ty(ElemKind::F32, {}), "x");
  f.set_result_types({ty(ElemKind::F32, {})});
  Builder b(m, f);
  b.set_block(entry);
  ValueId x1 = ok(b.create1(Op::Neg, {x}));
  f.value(x1).name = "x";  // repeats %x
  ValueId x2 = ok(b.create1(Op::Neg, {x1}));
  f.value(x2).name = "x_1";  // collides with the suffix given to x1
  ValueId x3 = ok(b.create1(Op::Neg, {x2}));
  f.value(x3).name = "x";
  ValueId seven = ok(b.create1(Op::Abs, {x3}));
  f.value(seven).name = "7";
  ValueId odd = ok(b.create1(Op::Abs, {seven}));
  f.value(odd).name = "a-b";
  (void)ok(b.create(Op::Ret, {odd}));

  const std::string expected =
      "func @dup(%x: f32[]) -> f32[] {\n"
      "^entry:\n"
      "  %x_1 = neg %x : f32[]\n"
      "  %x_1_1 = neg %x_1 : f32[]\n"
      "  %x_2 = neg %x_1_1 : f32[]\n"
      "  %v7 = abs %x_2 : f32[]\n"
      "  %a_b = abs %v7 : f32[]\n"
      "  ret %a_b\n"
      "}\n";
  CHECK(print_module(m) == expected);
  check_reparse(expected);
  // Printing is a pure function of the IR.
  CHECK(print_module(m) == print_module(m));
}

TEST_CASE("blocks print their name, else entry and bb<position>, made unique") {
  Module m;
  Function& f = add(m, Function("blocks"));
  BlockId b0 = f.add_block();
  BlockId b1 = f.add_block("bb2");  // a stored name that an unnamed block would also get
  BlockId b2 = f.add_block();
  BlockId b3 = f.add_block("exit");
  f.set_result_types({});
  f.append_inst(b0, Op::Br, {}, {}, NoAttrs{}, {}, {BlockCall{b1, {}}});
  f.append_inst(b1, Op::Br, {}, {}, NoAttrs{}, {}, {BlockCall{b2, {}}});
  f.append_inst(b2, Op::Br, {}, {}, NoAttrs{}, {}, {BlockCall{b3, {}}});
  f.append_inst(b3, Op::Ret, {}, {});
  CHECK(verify_module(m).empty());
  const std::string expected =
      "func @blocks() -> () {\n"
      "^entry:\n"
      "  br ^bb2\n"
      "^bb2:\n"
      "  br ^bb2_1\n"
      "^bb2_1:\n"
      "  br ^exit\n"
      "^exit:\n"
      "  ret\n"
      "}\n";
  CHECK(print_module(m) == expected);
  check_reparse(expected);
}

TEST_CASE("attributes print in a fixed order with every field") {
  Module m;
  Function& f = add(m, Function("attrs"));
  BlockId e = f.add_block();
  ValueId x = f.add_block_arg(e, ty(ElemKind::F32, {d(2), d(3)}), "x");
  ValueId g = f.add_block_arg(e, ty(ElemKind::F32, {d(3)}), "g");
  f.set_result_types({});
  Builder b(m, f);
  b.set_block(e);
  (void)ok(b.constant(ty(ElemKind::F32, {}), {2.5}));
  (void)ok(b.constant(ty(ElemKind::F32, {d(3)}), {0.1, 1e-6, -3}));
  (void)ok(b.constant(ty(ElemKind::I8, {d(2)}), {-128, 3.6}));  // rounds to 4
  (void)ok(b.constant(ty(ElemKind::F16, {}), {0.1}));           // nearest f16
  (void)ok(b.constant(ty(ElemKind::F32, {d(3)}), {std::numeric_limits<double>::infinity(),
                                                  -std::numeric_limits<double>::infinity(),
                                                  -std::numeric_limits<double>::quiet_NaN()}));
  (void)ok(b.create1(Op::Cast, {x}, CastAttrs{ElemKind::I8}));
  (void)ok(b.create1(Op::Transpose, {x}, PermAttrs{{1, 0}}));
  (void)ok(b.create1(Op::ReduceSum, {x}, AxisAttrs{1, false}));
  (void)ok(b.create1(Op::ReduceMax, {x}, AxisAttrs{0, true}));
  (void)ok(b.create1(Op::Softmax, {x}, AxisAttrs{1, false}));
  (void)ok(b.create1(Op::RmsNorm, {x, g}, EpsAttrs{1e-6}));
  (void)ok(b.create1(Op::Ternarize, {x}, ThresholdAttrs{0.05}));
  (void)ok(b.create(Op::Ret, {}));
  CHECK(verify_module(m).empty());
  const std::string expected =
      "func @attrs(%x: f32[2, 3], %g: f32[3]) -> () {\n"
      "^entry:\n"
      "  %0 = const {value = 2.5} : f32[]\n"
      "  %1 = const {values = [0.1, 1e-06, -3]} : f32[3]\n"
      "  %2 = const {values = [-128, 4]} : i8[2]\n"
      "  %3 = const {value = 0.099975586} : f16[]\n"
      "  %4 = const {values = [inf, -inf, nan]} : f32[3]\n"
      "  %5 = cast %x {to = i8} : i8[2, 3]\n"
      "  %6 = transpose %x {perm = [1, 0]} : f32[3, 2]\n"
      "  %7 = reduce_sum %x {axis = 1, keepdims = false} : f32[2]\n"
      "  %8 = reduce_max %x {axis = 0, keepdims = true} : f32[1, 3]\n"
      "  %9 = softmax %x {axis = 1} : f32[2, 3]\n"
      "  %10 = rmsnorm %x, %g {eps = 1e-06} : f32[2, 3]\n"
      "  %11 = ternarize %x {threshold = 0.05} : f32[2, 3]\n"
      "  ret\n"
      "}\n";
  CHECK(print_module(m) == expected);
  check_reparse(expected);
}

TEST_CASE("number formatting") {
  CHECK(format_double(1e-6) == "1e-06");
  CHECK(format_double(0.5) == "0.5");
  CHECK(format_double(3) == "3");
  CHECK(format_double(0.1) == "0.1");
  CHECK(format_double(std::numeric_limits<double>::infinity()) == "inf");
  CHECK(format_double(-std::numeric_limits<double>::infinity()) == "-inf");
  CHECK(format_double(-std::numeric_limits<double>::quiet_NaN()) == "nan");
  // Float kinds print the shortest text that reads back to the same f32.
  CHECK(format_value(static_cast<float>(0.1), ElemKind::F32) == "0.1");
  CHECK(format_value(static_cast<float>(1.0 / 3.0), ElemKind::F32) == "0.33333334");
  CHECK(format_value(1e10, ElemKind::F32) == "1e+10");
  CHECK(format_value(-0.0, ElemKind::F32) == "-0");
  // Integer kinds print integers, also where a double would use an exponent.
  CHECK(format_value(-2147483648.0, ElemKind::I32) == "-2147483648");
  CHECK(format_value(1.0, ElemKind::T2) == "1");
  // A value the kind cannot hold is shown in full rather than hidden.
  CHECK(format_value(2.5, ElemKind::I8) == "2.5");
  CHECK(format_value(0.1, ElemKind::F32) == "0.1");  // the double 0.1, not an f32
}

TEST_CASE("signatures: symbols, zero and several results, constraints") {
  Module m;
  Function& f = add(m, Function("sig"));
  SymbolId n = f.symbol("N");
  SymbolId k = f.symbol("K");
  f.set_constraints({{k, Constraint::Kind::MultipleOf, 128},
                     {n, Constraint::Kind::AtLeast, 1},
                     {n, Constraint::Kind::AtMost, 4096},
                     {k, Constraint::Kind::Equals, 256}});
  BlockId e = f.add_block();
  ValueId x = f.add_block_arg(e, ty(ElemKind::F32, {s(n), s(k)}), "x");
  f.set_result_types({ty(ElemKind::I8, {s(n), s(k)}), ty(ElemKind::F32, {s(n), d(1)})});
  Builder b(m, f);
  b.set_block(e);
  auto qs = ok(b.create(Op::Quantize, {x}));
  REQUIRE(qs.size() == 2);
  (void)ok(b.create(Op::Ret, {qs[0], qs[1]}));
  CHECK(verify_module(m).empty());
  const std::string expected =
      "func @sig<N, K>(%x: f32[N, K]) -> (i8[N, K], f32[N, 1]) where K % 128 == 0, N >= 1, N <= 4096, K == 256 {\n"
      "^entry:\n"
      "  %0, %1 = quantize %x : i8[N, K], f32[N, 1]\n"
      "  ret %0, %1\n"
      "}\n";
  CHECK(print_function(&m, f) == expected);
  check_reparse(expected);
}

TEST_CASE("module layout: meta sorted and escaped, params, blank lines between functions") {
  Module m;
  m.metadata()["z"] = "last";
  m.metadata()["a"] = "quote \" backslash \\ newline \n tab \t bell \x07";
  Type pt = ty(ElemKind::T2, {Dim::symbolic(SymbolId(0)), d(8), Dim::symbolic(SymbolId(1))});
  m.params().push_back(ParamDecl{"L.w", pt, {"K", "M"}, {}});
  for (const char* name : {"one", "two"}) {
    Function& f = add(m, Function(name));
    BlockId e = f.add_block();
    f.set_result_types({});
    f.append_inst(e, Op::Ret, {}, {});
  }
  const std::string expected =
      "meta \"a\" = \"quote \\\" backslash \\\\ newline \\n tab \\t bell \\x07\"\n"
      "meta \"z\" = \"last\"\n"
      "param @L.w : t2[K, 8, M]\n"
      "\n"
      "func @one() -> () {\n"
      "^entry:\n"
      "  ret\n"
      "}\n"
      "\n"
      "func @two() -> () {\n"
      "^entry:\n"
      "  ret\n"
      "}\n";
  CHECK(print_module(m) == expected);
  auto back = ok(parse_module(expected, "m.tir"));
  CHECK(back.metadata() == m.metadata());
  REQUIRE(back.params().size() == 1);
  CHECK(back.params()[0].symbols == std::vector<std::string>{"K", "M"});
  CHECK(back.params()[0].type == pt);
  CHECK(print_module(back) == expected);

  CHECK(print_module(Module{}).empty());
  Module only_meta;
  only_meta.metadata()["k"] = "v";
  CHECK(print_module(only_meta) == "meta \"k\" = \"v\"\n");
}

TEST_CASE("print_type uses the symbol table") {
  std::vector<std::string> syms{"N", "K"};
  CHECK(print_type(ty(ElemKind::BF16, {s(SymbolId(1)), d(3)}), syms) == "bf16[K, 3]");
  CHECK(print_type(ty(ElemKind::Bool, {}), syms) == "bool[]");
  CHECK(print_type(ty(ElemKind::U8, {s(SymbolId(5))}), syms) == "u8[?5]");
}

TEST_CASE("the printer shows malformed IR without crashing") {
  Module m;
  Function& f = add(m, Function("broken"));
  BlockId e = f.add_block();
  ValueId x = f.add_block_arg(e, ty(ElemKind::F32, {d(4)}), "x");
  f.set_result_types({});
  InstId gone = f.append_inst(e, Op::Neg, {x}, {ty(ElemKind::F32, {d(4)})});
  ValueId dead = f.inst(gone).results[0];
  f.erase_inst(gone);
  f.append_inst(e, Op::Add, {x, dead, ValueId(99)}, {ty(ElemKind::F32, {d(4)})});
  f.append_inst(e, Op::Br, {}, {}, NoAttrs{}, {}, {BlockCall{BlockId(7), {x}}});
  FunctionNames names(f);
  CHECK(names.value(dead) == "%?1");
  CHECK(names.block(BlockId(7)) == "^?7");
  CHECK(print_function(&m, f) ==
        "func @broken(%x: f32[4]) -> () {\n"
        "^entry:\n"
        "  %0 = add %x, %?1, %?99 : f32[4]\n"
        "  br ^?7(%x)\n"
        "}\n");
  CHECK(print_inst(f, names, f.insts(e)[0]) == "%0 = add %x, %?1, %?99 : f32[4]");
}

TEST_CASE("a function without blocks prints an empty body") {
  Module m;
  Function& f = add(m, Function("empty"));
  f.set_result_types({ty(ElemKind::F32, {})});
  CHECK(print_module(m) == "func @empty() -> f32[] {\n}\n");
}
