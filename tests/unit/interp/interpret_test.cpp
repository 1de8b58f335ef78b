// SPDX-License-Identifier: Apache-2.0
// interpret_test.cpp - interpreter binding, parameters, control flow, calls, limits, determinism.
#include "ir/interpret.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "ir/builder.h"
#include "ir/parse.h"
#include "ir/verify.h"

namespace ternjit::ir {
namespace {

Type ty(ElemKind k, std::vector<Dim> dims) { return Type{k, std::move(dims)}; }
Dim fx(std::int64_t e) { return Dim::fixed(e); }

HostTensor tensor(ElemKind k, std::vector<std::int64_t> shape, std::vector<double> v) {
  return HostTensor::from_values(k, std::move(shape), v);
}

template <class T>
T ok(Result<T> r) {
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? std::string() : render(r.error())));
  return std::move(r).value();
}

void expect_eq(const HostTensor& want, const HostTensor& got) {
  auto mm = compare(want, got, 0, 0);
  CHECK_MESSAGE(!mm.has_value(), (mm ? mm->message : std::string()));
}

std::string error_of(const Result<std::vector<HostTensor>>& r) {
  REQUIRE_MESSAGE(!r.ok(), "expected an error");
  return r.error().message;
}

// @add2(%x: f32[N], %y: f32[N]) -> f32[N] { ret add %x, %y } with N a symbol.
struct AddModule {
  Module m;
  AddModule() {
    Function& f = m.functions().emplace_back("add2");
    SymbolId n = f.symbol("N");
    BlockId b = f.add_block("entry");
    ValueId x = f.add_block_arg(b, ty(ElemKind::F32, {Dim::symbolic(n)}), "x");
    ValueId y = f.add_block_arg(b, ty(ElemKind::F32, {Dim::symbolic(n)}), "y");
    f.set_result_types({ty(ElemKind::F32, {Dim::symbolic(n)})});
    Builder bld(m, f);
    bld.set_block(b);
    ValueId s = ok(bld.create1(Op::Add, {x, y}));
    ok(bld.create(Op::Ret, {s}));
  }
};

TEST_CASE("f32_as_f64: f32 values are held and computed in double; other kinds and the quantizers still round") {
  auto parsed = parse_module(R"(func @f(%x: f32[3], %y: f32[3]) -> (f32[3], f32[3], f16[3], f32[3], f32[3]) {
^entry:
  %0 = add %x, %y : f32[3]
  %1 = exp %x : f32[3]
  %2 = cast %0 {to = f16} : f16[3]
  %3 = quantize_int8 %0 : f32[3]
  %4 = matmul %x, %y : f32[]
  %5 = reshape %4 : f32[1]
  %6 = broadcast %5 : f32[3]
  ret %0, %1, %2, %3, %6
}
)", "f64.tir");
  REQUIRE(parsed.ok());
  const Module& m = *parsed;
  // y = 2^-30 is exact in f32, x + y is not: f32 rounds it away, double keeps it.
  const double e = 0x1p-30;
  const std::vector<HostTensor> args{tensor(ElemKind::F32, {3}, {1, 0.5, -2}), tensor(ElemKind::F32, {3}, {e, e, e})};
  InterpretOptions wide;
  wide.f32_as_f64 = true;
  const auto r32 = ok(interpret(m, "f", args, {}));
  const auto r64 = ok(interpret(m, "f", args, {}, wide));
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(r32[0].data[i] == args[0].data[i]);
    CHECK(r64[0].data[i] == args[0].data[i] + e);
    CHECK(r64[1].data[i] == std::exp(args[0].data[i]));  // not rounded to f32
    CHECK(r32[1].data[i] == static_cast<double>(static_cast<float>(std::exp(args[0].data[i]))));
    CHECK(r64[2].data[i] == r32[2].data[i]);  // f16 results round in both modes
    CHECK(r64[3].data[i] == r32[3].data[i]);  // the quantizer reads f32 values
  }
  CHECK(r64[4].data[0] == 1 * e + 0.5 * e - 2 * e);  // the matmul's double sum, unrounded
  // An argument that is no f32 value is accepted only in the double mode.
  const std::vector<HostTensor> off{HostTensor{ElemKind::F32, {3}, {1 + e, 0, 0}}, args[1]};
  CHECK(!interpret(m, "f", off, {}).ok());
  CHECK(interpret(m, "f", off, {}, wide).ok());
}

TEST_CASE("arguments bind symbols and conflicting extents name the symbol and both sources") {
  AddModule am;
  HostTensor a = tensor(ElemKind::F32, {3}, {1, 2, 3});
  HostTensor b = tensor(ElemKind::F32, {3}, {10, 20, 30});
  auto r = ok(interpret(am.m, "add2", std::vector<HostTensor>{a, b}, {}));
  REQUIRE(r.size() == 1);
  expect_eq(tensor(ElemKind::F32, {3}, {11, 22, 33}), r[0]);

  HostTensor c = tensor(ElemKind::F32, {4}, {1, 2, 3, 4});
  HostTensor d = tensor(ElemKind::F32, {5}, {1, 2, 3, 4, 5});
  CHECK(error_of(interpret(am.m, "add2", std::vector<HostTensor>{c, d}, {})) ==
        "symbol 'N' is 4 from argument %x but 5 from argument %y");
}

TEST_CASE("argument count and kind and rank and static extent and invalid data are errors") {
  AddModule am;
  HostTensor a = tensor(ElemKind::F32, {3}, {1, 2, 3});
  CHECK(error_of(interpret(am.m, "add2", std::vector<HostTensor>{a}, {})) == "@add2 takes 2 arguments, got 1");
  CHECK(error_of(interpret(am.m, "add2", std::vector<HostTensor>{a, tensor(ElemKind::I8, {3}, {1, 2, 3})}, {})) ==
        "argument %y must be f32[N], got i8[3]");
  CHECK(error_of(interpret(am.m, "add2", std::vector<HostTensor>{a, tensor(ElemKind::F32, {3, 1}, {1, 2, 3})}, {})) ==
        "argument %y must be f32[N], got f32[3, 1]");
  HostTensor broken{ElemKind::F32, {3}, {1, 2}};
  CHECK(error_of(interpret(am.m, "add2", std::vector<HostTensor>{a, broken}, {})) ==
        "argument %y f32[3] needs 3 elements, got 2");
  HostTensor not_f16{ElemKind::F32, {3}, {1, 2, 0.1}};
  CHECK(error_of(interpret(am.m, "add2", std::vector<HostTensor>{a, not_f16}, {})) ==
        "argument %y element [2] is 0.1, which is not a f32 value");
  auto missing = interpret(am.m, "nope", std::vector<HostTensor>{}, {});
  REQUIRE(!missing.ok());
  CHECK(missing.error().code == ErrorCode::NotFound);

  // Static dims must match; unnamed arguments are numbered.
  Module m;
  Function& f = m.functions().emplace_back("g");
  BlockId b = f.add_block();
  ValueId x = f.add_block_arg(b, ty(ElemKind::I8, {fx(2), fx(3)}));
  f.set_result_types({ty(ElemKind::I8, {fx(2), fx(3)})});
  Builder bld(m, f);
  bld.set_block(b);
  ok(bld.create(Op::Ret, {x}));
  CHECK(error_of(interpret(m, f, std::vector<HostTensor>{HostTensor::zeros(ElemKind::I8, {2, 4})}, {})) ==
        "argument 1 must be i8[2, 3], got i8[2, 4] (dim 1 is 4, expected 3)");
}

// @lin<K, N>(%x: f32[K]) -> f32[N] { %w = param @w : f32[K, N]; ret matmul %x, %w }
// where K % 4 == 0.
struct LinearModule {
  Module m;
  LinearModule() {
    m.params().push_back(ParamDecl{"w", ty(ElemKind::F32, {Dim::symbolic(SymbolId(0)), Dim::symbolic(SymbolId(1))}),
                                   {"K", "N"}, {}});
    Function& f = m.functions().emplace_back("lin");
    SymbolId k = f.symbol("K");
    SymbolId n = f.symbol("N");
    f.add_constraint(Constraint{k, Constraint::Kind::MultipleOf, 4});
    BlockId b = f.add_block("entry");
    ValueId x = f.add_block_arg(b, ty(ElemKind::F32, {Dim::symbolic(k)}), "x");
    f.set_result_types({ty(ElemKind::F32, {Dim::symbolic(n)})});
    Builder bld(m, f);
    bld.set_block(b);
    ValueId w = ok(bld.param("w"));
    ValueId y = ok(bld.create1(Op::MatMul, {x, w}));
    ok(bld.create(Op::Ret, {y}));
    REQUIRE(verify_module(m).empty());
  }
};

TEST_CASE("parameters bind symbols and are checked by name") {
  LinearModule lm;
  HostTensor x = tensor(ElemKind::F32, {4}, {1, 2, 3, 4});
  ParamValues pv;
  pv.set("w", tensor(ElemKind::F32, {4, 2}, {1, 0, 0, 1, 1, 0, 0, 1}));
  auto r = ok(interpret(lm.m, "lin", std::vector<HostTensor>{x}, pv));
  expect_eq(tensor(ElemKind::F32, {2}, {4, 6}), r[0]);  // N = 2 comes from the parameter only

  CHECK(error_of(interpret(lm.m, "lin", std::vector<HostTensor>{x}, {})) == "no value given for parameter @w");
  ParamValues wrong_kind;
  wrong_kind.set("w", HostTensor::zeros(ElemKind::T2, {4, 2}));
  CHECK(error_of(interpret(lm.m, "lin", std::vector<HostTensor>{x}, wrong_kind)) ==
        "parameter @w must be f32[K, N], got t2[4, 2]");
  ParamValues wrong_shape;
  wrong_shape.set("w", HostTensor::zeros(ElemKind::F32, {8, 2}));
  CHECK(error_of(interpret(lm.m, "lin", std::vector<HostTensor>{x}, wrong_shape)) ==
        "symbol 'K' is 4 from argument %x but 8 from parameter @w");
  ParamValues wrong_rank;
  wrong_rank.set("w", HostTensor::zeros(ElemKind::F32, {8}));
  CHECK(error_of(interpret(lm.m, "lin", std::vector<HostTensor>{x}, wrong_rank)) ==
        "parameter @w must be f32[K, N], got f32[8]");
}

TEST_CASE("function constraints are checked on the bound symbols") {
  LinearModule lm;
  ParamValues pv;
  pv.set("w", HostTensor::zeros(ElemKind::F32, {6, 2}));
  CHECK(error_of(interpret(lm.m, "lin", std::vector<HostTensor>{HostTensor::zeros(ElemKind::F32, {6})}, pv)) ==
        "symbol 'K' is 6 (from argument %x) but @lin requires K % 4 == 0");
}

TEST_CASE("a shape that needs an unbound symbol is an error") {
  Module m;
  Function& f = m.functions().emplace_back("u");
  SymbolId mm = f.symbol("M");
  BlockId b = f.add_block();
  f.set_result_types({ty(ElemKind::F32, {Dim::symbolic(mm)})});
  Builder bld(m, f);
  bld.set_block(b);
  ValueId c = ok(bld.constant(ty(ElemKind::F32, {Dim::symbolic(mm)}), {1.0}));
  ok(bld.create(Op::Ret, {c}));
  CHECK(error_of(interpret(m, f, {}, {})) ==
        "symbol 'M' in the type of the result of 'const' is not bound by any argument or parameter of @u");
}

// @tri(%n: i32[]) -> i32[]: sum of 0..n-1 with a loop carrying (i, acc) as block args.
//   ^entry(%n): %z = const 0; br ^loop(%z, %z)
//   ^loop(%i, %acc): %rem = sub %n, %i; cond_br %rem, ^body, ^exit(%acc)
//   ^body: %acc2 = add %acc, %i; %i2 = add %i, 1; br ^loop(%i2, %acc2)
//   ^exit(%r): ret %r
Module loop_module() {
  Module m;
  Function& f = m.functions().emplace_back("tri");
  const Type s32 = ty(ElemKind::I32, {});
  BlockId entry = f.add_block("entry");
  BlockId loop = f.add_block("loop");
  BlockId body = f.add_block("body");
  BlockId exit = f.add_block("exit");
  ValueId n = f.add_block_arg(entry, s32, "n");
  ValueId i = f.add_block_arg(loop, s32, "i");
  ValueId acc = f.add_block_arg(loop, s32, "acc");
  ValueId r = f.add_block_arg(exit, s32, "r");
  f.set_result_types({s32});
  Builder bld(m, f);
  bld.set_block(entry);
  ValueId z = ok(bld.constant(s32, {0}));
  ok(bld.create(Op::Br, {}, NoAttrs{}, {}, {}, {BlockCall{loop, {z, z}}}));
  bld.set_block(loop);
  ValueId rem = ok(bld.create1(Op::Sub, {n, i}));
  ok(bld.create(Op::CondBr, {rem}, NoAttrs{}, {}, {}, {BlockCall{body, {}}, BlockCall{exit, {acc}}}));
  bld.set_block(body);
  ValueId acc2 = ok(bld.create1(Op::Add, {acc, i}));
  ValueId one = ok(bld.constant(s32, {1}));
  ValueId i2 = ok(bld.create1(Op::Add, {i, one}));
  ok(bld.create(Op::Br, {}, NoAttrs{}, {}, {}, {BlockCall{loop, {i2, acc2}}}));
  bld.set_block(exit);
  ok(bld.create(Op::Ret, {r}));
  REQUIRE(verify_module(m).empty());
  return m;
}

TEST_CASE("multi-block function with cond_br and a loop carrying block arguments") {
  Module m = loop_module();
  auto run = [&](double n) {
    auto r = ok(interpret(m, "tri", std::vector<HostTensor>{HostTensor::scalar(ElemKind::I32, n)}, {}));
    REQUIRE(r.size() == 1);
    return r[0].data.at(0);
  };
  CHECK(run(0) == 0);
  CHECK(run(1) == 0);
  CHECK(run(5) == 10);
  CHECK(run(100) == 4950);

  // A loop that never ends hits the step cap.
  InterpretOptions opts;
  opts.max_steps = 1000;
  auto r = interpret(m, "tri", std::vector<HostTensor>{HostTensor::scalar(ElemKind::I32, -1)}, {}, opts);
  CHECK(error_of(r) ==
        "execution exceeded 1000 instructions (an infinite loop?) in @tri: raise InterpretOptions::max_steps to allow more");
}

TEST_CASE("a loop of large ops stops at the work limit, not hours later (issue 19 item 7)") {
  // A matmul f32[64,64] under a constant-true cond_br: 262,144 multiply-adds per
  // iteration, which 100 million instructions (max_steps) would let run for hours.
  auto m = parse_module(R"(func @spin(%x: f32[64, 64]) -> f32[64, 64] {
^entry:
  br ^loop(%x)
^loop(%a: f32[64, 64]):
  %b = matmul %a, %x : f32[64, 64]
  %c = const {value = 1} : bool[]
  cond_br %c, ^loop(%b), ^done(%b)
^done(%r: f32[64, 64]):
  ret %r
}
)", "spin.tir");
  REQUIRE(m.ok());
  REQUIRE(verify_module(*m).empty());
  const std::vector<HostTensor> args{HostTensor::zeros(ElemKind::F32, {64, 64})};
  // Per iteration: matmul 2 * 4096 operand + 4096 result elements + 64^3 multiply-adds,
  // const 1 result element, cond_br its 1 condition element (ret never runs).
  const std::uint64_t per_iteration = 3 * 4096 + 64 * 64 * 64 + 1 + 1;
  InterpretOptions opts;
  opts.max_work = 10 * per_iteration;  // the matmul of the 11th iteration crosses it
  auto r = interpret(*m, "spin", args, {}, opts);
  CHECK(error_of(r) == "execution exceeded the interpreter's work limit of " + std::to_string(opts.max_work) +
                           " element operations at 'matmul' in @spin (a long loop of large ops?): raise "
                           "InterpretOptions::max_work to allow more");
  // The default budget is documented (interpret.h) and bounds the loop: 2^31 element
  // operations are ~7,800 iterations here (seconds; 2^34 took 43 s on a loaded 2-core
  // machine, issue 33 item 18), where max_steps alone allows 5.6 million.
  CHECK(InterpretOptions{}.max_work == std::uint64_t{1} << 31);
  CHECK(InterpretOptions{}.max_steps == std::uint64_t{1} << 24);
  CHECK(InterpretOptions{}.max_work / per_iteration < InterpretOptions{}.max_steps / 3 / 100);
  // Work within the budget runs: the loop exits at once on a false condition.
  auto once = parse_module(R"(func @once(%x: f32[64, 64]) -> f32[64, 64] {
^entry:
  %b = matmul %x, %x : f32[64, 64]
  ret %b
}
)", "once.tir");
  REQUIRE(once.ok());
  opts.max_work = 3 * 4096 + 64 * 64 * 64 + 4096;  // matmul, then ret's one operand
  CHECK(interpret(*once, "once", args, {}, opts).ok());
  opts.max_work -= 1;
  CHECK(error_of(interpret(*once, "once", args, {}, opts)).find("work limit") != std::string::npos);
}

TEST_CASE("block arguments are assigned in parallel on a back edge") {
  // @swap(%a: f32[], %b: f32[], %k: i32[]) swaps a and b k times via ^loop(%x, %y, %k) -> ^loop(%y, %x, %k-1).
  Module m;
  Function& f = m.functions().emplace_back("swap");
  const Type sf = ty(ElemKind::F32, {});
  const Type si = ty(ElemKind::I32, {});
  BlockId entry = f.add_block("entry");
  BlockId loop = f.add_block("loop");
  BlockId body = f.add_block("body");
  BlockId done = f.add_block("done");
  ValueId a = f.add_block_arg(entry, sf, "a");
  ValueId b = f.add_block_arg(entry, sf, "b");
  ValueId k = f.add_block_arg(entry, si, "k");
  ValueId x = f.add_block_arg(loop, sf, "x");
  ValueId y = f.add_block_arg(loop, sf, "y");
  ValueId kk = f.add_block_arg(loop, si, "kk");
  f.set_result_types({sf, sf});
  Builder bld(m, f);
  bld.set_block(entry);
  ok(bld.create(Op::Br, {}, NoAttrs{}, {}, {}, {BlockCall{loop, {a, b, k}}}));
  bld.set_block(loop);
  ok(bld.create(Op::CondBr, {kk}, NoAttrs{}, {}, {}, {BlockCall{body, {}}, BlockCall{done, {}}}));
  bld.set_block(body);
  ValueId one = ok(bld.constant(si, {1}));
  ValueId k2 = ok(bld.create1(Op::Sub, {kk, one}));
  ok(bld.create(Op::Br, {}, NoAttrs{}, {}, {}, {BlockCall{loop, {y, x, k2}}}));
  bld.set_block(done);
  ok(bld.create(Op::Ret, {x, y}));
  REQUIRE(verify_module(m).empty());

  auto run = [&](double times) {
    return ok(interpret(m, f,
                        std::vector<HostTensor>{HostTensor::scalar(ElemKind::F32, 1), HostTensor::scalar(ElemKind::F32, 2),
                                                HostTensor::scalar(ElemKind::I32, times)},
                        {}));
  };
  auto r3 = run(3);
  CHECK(r3[0].data[0] == 2);
  CHECK(r3[1].data[0] == 1);
  auto r4 = run(4);
  CHECK(r4[0].data[0] == 1);
  CHECK(r4[1].data[0] == 2);
}

// @inner<N>(%v: f32[N]) -> f32[N] { ret relu %v }
// @outer(%a: f32[2, 3]) -> f32[6] { %r = reshape %a : f32[6]; %c = call @inner(%r); ret %c }
TEST_CASE("call interprets the callee with its symbols rebound from the call's operands") {
  Module m;
  m.functions().emplace_back("inner");
  m.functions().emplace_back("outer");
  {
    Function& g = m.functions()[0];
    SymbolId n = g.symbol("N");
    BlockId b = g.add_block();
    ValueId v = g.add_block_arg(b, ty(ElemKind::F32, {Dim::symbolic(n)}), "v");
    g.set_result_types({ty(ElemKind::F32, {Dim::symbolic(n)})});
    Builder bld(m, g);
    bld.set_block(b);
    ValueId r = ok(bld.create1(Op::Relu, {v}));
    ok(bld.create(Op::Ret, {r}));
  }
  Function& f = m.functions()[1];
  BlockId b = f.add_block();
  ValueId a = f.add_block_arg(b, ty(ElemKind::F32, {fx(2), fx(3)}), "a");
  f.set_result_types({ty(ElemKind::F32, {fx(6)})});
  Builder bld(m, f);
  bld.set_block(b);
  ValueId r = ok(bld.create1(Op::Reshape, {a}, NoAttrs{}, {ty(ElemKind::F32, {fx(6)})}));
  ValueId c = ok(bld.create1(Op::Call, {r}, CallAttrs{"inner"}));
  ok(bld.create(Op::Ret, {c}));
  REQUIRE(verify_module(m).empty());

  auto out = ok(interpret(m, f, std::vector<HostTensor>{tensor(ElemKind::F32, {2, 3}, {-1, 2, -3, 4, -5, 6})}, {}));
  expect_eq(tensor(ElemKind::F32, {6}, {0, 2, 0, 4, 0, 6}), out[0]);
  // The callee runs on its own too, with another N.
  auto direct = ok(interpret(m, "inner", std::vector<HostTensor>{tensor(ElemKind::F32, {2}, {-7, 7})}, {}));
  expect_eq(tensor(ElemKind::F32, {2}, {0, 7}), direct[0]);
}

TEST_CASE("unbounded recursion and unknown callees are errors") {
  Module m;
  Function& f = m.functions().emplace_back("self");
  BlockId b = f.add_block();
  ValueId x = f.add_block_arg(b, ty(ElemKind::F32, {}), "x");
  f.set_result_types({ty(ElemKind::F32, {})});
  Builder bld(m, f);
  bld.set_block(b);
  ValueId c = ok(bld.create1(Op::Call, {x}, CallAttrs{"self"}));
  ok(bld.create(Op::Ret, {c}));
  InterpretOptions opts;
  opts.max_call_depth = 10;
  CHECK(error_of(interpret(m, f, std::vector<HostTensor>{HostTensor::scalar(ElemKind::F32, 1)}, {}, opts)) ==
        "calls nest deeper than 10 levels (entering @self)");

  // Rename the callee after building: the call now names a missing function.
  Module m2;
  Function& g = m2.functions().emplace_back("g");
  BlockId gb = g.add_block();
  g.set_result_types({});
  g.append_inst(gb, Op::Call, {}, {}, CallAttrs{"missing"});
  g.append_inst(gb, Op::Ret, {}, {});
  auto r = interpret(m2, g, {}, {});
  REQUIRE(!r.ok());
  CHECK(r.error().code == ErrorCode::NotFound);
  CHECK(r.error().message == "call to unknown function @missing");
}

TEST_CASE("malformed IR is an error and not a crash") {
  Module m;
  Function& f = m.functions().emplace_back("bad");
  BlockId b = f.add_block("entry");
  ValueId x = f.add_block_arg(b, ty(ElemKind::F32, {}), "x");
  f.set_result_types({ty(ElemKind::F32, {})});
  f.append_inst(b, Op::Neg, {x}, {ty(ElemKind::F32, {})});  // no terminator
  CHECK(error_of(interpret(m, f, std::vector<HostTensor>{HostTensor::scalar(ElemKind::F32, 1)}, {})) ==
        "block ^entry of @bad has no terminator");

  Module m2;
  Function& g = m2.functions().emplace_back("undef");
  BlockId gb = g.add_block();
  g.set_result_types({ty(ElemKind::F32, {})});
  ValueId later = g.add_block_arg(g.add_block(), ty(ElemKind::F32, {}));
  g.append_inst(gb, Op::Ret, {later}, {});
  CHECK(error_of(interpret(m2, g, {}, {})) == "'ret' uses a value before it is defined");

  Module m3;
  Function& h = m3.functions().emplace_back("empty");
  CHECK(error_of(interpret(m3, h, {}, {})) == "@empty has no body");
}

TEST_CASE("tensors beyond the element limit are errors") {
  Module m;
  Function& f = m.functions().emplace_back("big");
  BlockId b = f.add_block();
  f.set_result_types({ty(ElemKind::F32, {fx(1000), fx(1000)})});
  Builder bld(m, f);
  bld.set_block(b);
  ValueId c = ok(bld.constant(ty(ElemKind::F32, {fx(1000), fx(1000)}), {0.0}));
  ok(bld.create(Op::Ret, {c}));
  InterpretOptions opts;
  opts.max_elements = 1000;
  CHECK(error_of(interpret(m, f, {}, {}, opts)) ==
        "the result of 'const' of type f32[1000, 1000] has more than 1000 elements (the interpreter's limit)");
  CHECK(interpret(m, f, {}, {}).ok());
}

TEST_CASE("the interpreter is deterministic: the same inputs give bit-identical outputs") {
  // @net(%x: f32[4, 16]) -> (f32[4, 8], f32[4]) with a matmul against a parameter, gelu,
  // softmax, rmsnorm and a reduction.
  Module m;
  m.params().push_back(ParamDecl{"w", ty(ElemKind::T2, {fx(16), fx(8)}), {}, {}});
  m.params().push_back(ParamDecl{"g", ty(ElemKind::F32, {fx(8)}), {}, {}});
  Function& f = m.functions().emplace_back("net");
  BlockId b = f.add_block();
  ValueId x = f.add_block_arg(b, ty(ElemKind::F32, {fx(4), fx(16)}), "x");
  f.set_result_types({ty(ElemKind::F32, {fx(4), fx(8)}), ty(ElemKind::F32, {fx(4)})});
  Builder bld(m, f);
  bld.set_block(b);
  ValueId w = ok(bld.param("w"));
  ValueId g = ok(bld.param("g"));
  ValueId q = ok(bld.create1(Op::QuantizeInt8, {x}));
  ValueId y = ok(bld.create1(Op::MatMul, {q, w}));
  ValueId a = ok(bld.create1(Op::Gelu, {y}));
  ValueId n = ok(bld.create1(Op::RmsNorm, {a, g}, EpsAttrs{1e-5}));
  ValueId s = ok(bld.create1(Op::Softmax, {n}, AxisAttrs{1, false}));
  ValueId sum = ok(bld.create1(Op::ReduceMean, {a}, AxisAttrs{1, false}));
  ok(bld.create(Op::Ret, {s, sum}));
  REQUIRE(verify_module(m).empty());

  ParamValues pv;
  pv.set("w", HostTensor::random(ElemKind::T2, {16, 8}, 11));
  pv.set("g", HostTensor::random(ElemKind::F32, {8}, 12));
  const std::vector<HostTensor> args{HostTensor::random(ElemKind::F32, {4, 16}, 13)};
  auto r1 = ok(interpret(m, f, args, pv));
  auto r2 = ok(interpret(m, f, args, pv));
  REQUIRE(r1.size() == 2);
  REQUIRE(r2.size() == 2);
  for (std::size_t i = 0; i < r1.size(); ++i) {
    CHECK(r1[i].shape == r2[i].shape);
    REQUIRE(r1[i].data.size() == r2[i].data.size());
    CHECK(std::memcmp(r1[i].data.data(), r2[i].data.data(), r1[i].data.size() * sizeof(double)) == 0);
  }
  // Softmax rows sum to 1.
  for (int row = 0; row < 4; ++row) {
    double total = 0;
    for (int j = 0; j < 8; ++j) total += r1[0].data[static_cast<std::size_t>(row * 8 + j)];
    CHECK(total == doctest::Approx(1.0).epsilon(1e-6));
  }
}

}  // namespace
}  // namespace ternjit::ir
