// SPDX-License-Identifier: Apache-2.0
// verify_test.cpp - one test per verifier check, on IR built without the parser.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "ir/builder.h"
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

Type f32(std::vector<std::int64_t> dims) {
  Type t{ElemKind::F32, {}};
  for (auto e : dims) t.shape.push_back(Dim::fixed(e));
  return t;
}
Type of(ElemKind k, std::vector<std::int64_t> dims) {
  Type t = f32(std::move(dims));
  t.elem = k;
  return t;
}

// A module with one function @f(%x: f32[4]) -> f32[4] and its entry block.
struct Fixture {
  Module m;
  BlockId entry;
  ValueId x;

  Fixture() {
    m.functions().emplace_back("f");
    Function& fn = f();
    entry = fn.add_block();
    x = fn.add_block_arg(entry, f32({4}), "x");
    fn.set_result_types({f32({4})});
  }
  Function& f() { return m.functions()[0]; }
  ValueId add(BlockId b, Op op, std::vector<ValueId> operands, std::vector<Type> types, Attrs attrs = NoAttrs{},
              std::vector<BlockCall> targets = {}) {
    InstId i = f().append_inst(b, op, std::move(operands), std::move(types), std::move(attrs), {}, std::move(targets));
    return f().inst(i).results.empty() ? ValueId{} : f().inst(i).results[0];
  }
  void ret(BlockId b, ValueId v) { add(b, Op::Ret, {v}, {}); }
  std::vector<std::string> messages() {
    std::vector<std::string> out;
    for (const Diagnostic& d : verify_module(m)) out.push_back(d.message);
    return out;
  }
};

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Exactly one diagnostic, whose message contains `part`.
void check_one(Fixture& fx, const std::string& part) {
  auto msgs = fx.messages();
  CAPTURE(msgs);
  REQUIRE(msgs.size() == 1);
  CHECK(contains(msgs[0], part));
}

}  // namespace

TEST_CASE("a valid function has no diagnostics") {
  Fixture fx;
  ValueId y = fx.add(fx.entry, Op::Relu, {fx.x}, {f32({4})});
  fx.ret(fx.entry, y);
  CHECK(verify_module(fx.m).empty());
  CHECK(verify_function(&fx.m, fx.f()).empty());
  CHECK(verify_or_error(fx.m).ok());
}

TEST_CASE("operand arity, with the printed instruction when there is no location") {
  Fixture fx;
  ValueId y = fx.add(fx.entry, Op::Add, {fx.x}, {f32({4})});
  fx.ret(fx.entry, y);
  CHECK(fx.messages() == std::vector<std::string>{"in @f: %0 = add %x : f32[4]: 'add' takes 2 operands, got 1"});
}

TEST_CASE("result arity") {
  Fixture fx;
  fx.add(fx.entry, Op::Neg, {fx.x}, {});
  fx.ret(fx.entry, fx.x);
  check_one(fx, "'neg' defines 1 result, got 0");
}

TEST_CASE("call result count must match the callee") {
  Fixture fx;
  fx.add(fx.entry, Op::Call, {fx.x}, {}, CallAttrs{"f"});  // @f returns one value
  fx.ret(fx.entry, fx.x);
  check_one(fx, "'call' produces 1 result, but 0 are defined");
}

TEST_CASE("attribute alternative") {
  Fixture fx;
  ValueId y = fx.add(fx.entry, Op::Cast, {fx.x}, {f32({4})}, AxisAttrs{});
  fx.ret(fx.entry, y);
  check_one(fx, "'cast' has the wrong kind of attributes");
}

TEST_CASE("result types must equal infer_types") {
  Fixture fx;
  ValueId y = fx.add(fx.entry, Op::Neg, {fx.x}, {of(ElemKind::I8, {4})});
  fx.ret(fx.entry, fx.x);
  (void)y;
  check_one(fx, "'neg' result is f32[4], but i8[4] is declared");
}

TEST_CASE("ret must match the signature") {
  Fixture fx;
  ValueId y = fx.add(fx.entry, Op::ReduceSum, {fx.x}, {f32({})}, AxisAttrs{0, false});
  fx.ret(fx.entry, y);
  check_one(fx, "'ret' value 1 is f32[] but @f returns f32[4]");
  Fixture two;
  two.add(two.entry, Op::Ret, {two.x, two.x}, {});
  check_one(two, "'ret' returns 2 values but @f returns 1");
}

TEST_CASE("operands must be defined, non-erased values") {
  Fixture fx;
  InstId gone = fx.f().append_inst(fx.entry, Op::Neg, {fx.x}, {f32({4})});
  ValueId dead = fx.f().inst(gone).results[0];
  fx.f().erase_inst(gone);
  ValueId y = fx.add(fx.entry, Op::Add, {dead, ValueId(77)}, {f32({4})});
  fx.ret(fx.entry, y);
  auto msgs = fx.messages();
  REQUIRE(msgs.size() == 2);
  CHECK(contains(msgs[0], "operand 1 %?1 is not a defined value"));
  CHECK(contains(msgs[1], "operand 2 %?77 is not a defined value"));
}

TEST_CASE("dominance within a block: a use must follow its definition") {
  Fixture fx;
  ValueId a = fx.add(fx.entry, Op::Neg, {fx.x}, {f32({4})});
  fx.ret(fx.entry, a);
  // Place a user of %a before %a.
  InstId first = fx.f().insts(fx.entry)[0];
  fx.f().insert_inst_before(first, Op::Abs, {a}, {f32({4})});
  check_one(fx, "operand 1 %1 is used before it is defined");

  Fixture self;
  ValueId next = ValueId(static_cast<std::uint32_t>(self.f().num_values()));
  ValueId s = self.add(self.entry, Op::Neg, {next}, {f32({4})});
  REQUIRE(s == next);
  self.ret(self.entry, s);
  check_one(self, "operand 1 %0 is used before it is defined");
}

TEST_CASE("dominance across blocks: definitions and block arguments") {
  // entry -> (b1 | b2) -> b3: b1 does not dominate b2 or b3.
  Fixture fx;
  Function& f = fx.f();
  BlockId b1 = f.add_block(), b2 = f.add_block(), b3 = f.add_block();
  ValueId c = fx.add(fx.entry, Op::Const, {}, {of(ElemKind::Bool, {})}, ConstAttrs{{1}});
  fx.add(fx.entry, Op::CondBr, {c}, {}, NoAttrs{}, {BlockCall{b1, {}}, BlockCall{b2, {}}});
  ValueId v = fx.add(b1, Op::Neg, {fx.x}, {f32({4})});
  fx.add(b1, Op::Br, {}, {}, NoAttrs{}, {BlockCall{b3, {v}}});
  ValueId w = fx.add(b2, Op::Abs, {v}, {f32({4})});  // b1 does not dominate b2
  fx.add(b2, Op::Br, {}, {}, NoAttrs{}, {BlockCall{b3, {w}}});
  ValueId arg = f.add_block_arg(b3, f32({4}));
  ValueId z = fx.add(b3, Op::Add, {arg, fx.x}, {f32({4})});  // entry args dominate all: fine
  ValueId bad = fx.add(b3, Op::Sub, {z, v}, {f32({4})});      // b1 does not dominate b3
  fx.ret(b3, bad);
  auto msgs = fx.messages();
  CAPTURE(msgs);
  REQUIRE(msgs.size() == 2);
  CHECK(contains(msgs[0], "operand 1 %1 is defined in block ^bb1, which does not dominate its use in ^bb2"));
  CHECK(contains(msgs[1], "operand 2 %1 is defined in block ^bb1, which does not dominate its use in ^bb3"));

  // A block argument is visible only in its block and the blocks it dominates.
  Fixture args;
  Function& g = args.f();
  BlockId p = g.add_block(), q = g.add_block();
  ValueId pa = g.add_block_arg(p, f32({4}));
  args.add(args.entry, Op::Br, {}, {}, NoAttrs{}, {BlockCall{p, {args.x}}});
  args.add(p, Op::Br, {}, {}, NoAttrs{}, {BlockCall{q, {}}});
  args.ret(q, pa);  // p dominates q: fine
  CHECK(verify_module(args.m).empty());
  args.add(args.entry, Op::Neg, {pa}, {f32({4})});  // after the entry's terminator, and not dominated
  auto m2 = args.messages();
  CAPTURE(m2);
  REQUIRE(m2.size() == 3);
  CHECK(contains(m2[0], "'br' is a terminator but is not the last instruction of block ^entry"));
  CHECK(contains(m2[1], "block ^entry does not end in a terminator"));
  CHECK(contains(m2[2], "operand 1 %1 is defined in block ^bb1, which does not dominate its use in ^entry"));
}

TEST_CASE("loops: a header's arguments dominate the body") {
  Fixture fx;
  Function& f = fx.f();
  BlockId head = f.add_block("head"), body = f.add_block("body"), exit = f.add_block("exit");
  ValueId acc = f.add_block_arg(head, f32({4}), "acc");
  fx.add(fx.entry, Op::Br, {}, {}, NoAttrs{}, {BlockCall{head, {fx.x}}});
  ValueId c = fx.add(head, Op::Const, {}, {of(ElemKind::I32, {})}, ConstAttrs{{0}});
  fx.add(head, Op::CondBr, {c}, {}, NoAttrs{}, {BlockCall{body, {}}, BlockCall{exit, {}}});
  ValueId n = fx.add(body, Op::Tanh, {acc}, {f32({4})});
  fx.add(body, Op::Br, {}, {}, NoAttrs{}, {BlockCall{head, {n}}});
  fx.ret(exit, acc);
  CHECK(verify_module(fx.m).empty());
}

TEST_CASE("every block ends in exactly one terminator") {
  Fixture missing;
  missing.add(missing.entry, Op::Neg, {missing.x}, {f32({4})});
  check_one(missing, "block ^entry does not end in a terminator (ret, br or cond_br)");

  Fixture middle;
  middle.ret(middle.entry, middle.x);
  middle.ret(middle.entry, middle.x);
  check_one(middle, "'ret' is a terminator but is not the last instruction of block ^entry");

  Fixture empty;
  empty.ret(empty.entry, empty.x);
  empty.f().add_block("lonely");
  check_one(empty, "block ^lonely of @f is empty: it must end in a terminator");
}

TEST_CASE("branch targets, argument counts and types") {
  Fixture fx;
  Function& f = fx.f();
  BlockId t = f.add_block("t");
  f.add_block_arg(t, f32({4}));
  fx.ret(t, fx.x);
  BlockId u = f.add_block("u");
  ValueId c = fx.add(fx.entry, Op::Const, {}, {of(ElemKind::I32, {})}, ConstAttrs{{1}});
  fx.add(fx.entry, Op::CondBr, {c}, {}, NoAttrs{}, {BlockCall{t, {}}, BlockCall{u, {c}}});
  fx.add(u, Op::Br, {}, {}, NoAttrs{}, {BlockCall{t, {c}}});
  auto msgs = fx.messages();
  CAPTURE(msgs);
  REQUIRE(msgs.size() == 3);
  CHECK(contains(msgs[0], "block ^t takes 1 argument, got 0"));
  CHECK(contains(msgs[1], "block ^u takes 0 arguments, got 1"));
  CHECK(contains(msgs[2], "argument 1 of ^t is f32[4], got %0 : i32[]"));

  Fixture missing;
  missing.add(missing.entry, Op::Br, {}, {}, NoAttrs{}, {BlockCall{BlockId(9), {}}});
  check_one(missing, "branch target ^?9 is not a block of @f");

  Fixture none;
  none.add(none.entry, Op::Br, {}, {}, NoAttrs{}, {});
  check_one(none, "'br' needs 1 successor block, got 0");

  Fixture stray;
  BlockId s = stray.f().add_block();
  stray.ret(s, stray.x);
  ValueId y = stray.add(stray.entry, Op::Neg, {stray.x}, {f32({4})}, NoAttrs{}, {BlockCall{s, {}}});
  stray.ret(stray.entry, y);
  check_one(stray, "'neg' needs 0 successor blocks, got 1");
}

TEST_CASE("the entry block is not a branch target") {
  Fixture fx;
  BlockId b = fx.f().add_block();
  fx.add(fx.entry, Op::Br, {}, {}, NoAttrs{}, {BlockCall{b, {}}});
  fx.add(b, Op::Br, {}, {}, NoAttrs{}, {BlockCall{fx.entry, {fx.x}}});
  check_one(fx, "branch to the entry block ^entry: the entry block cannot be a branch target");
}

TEST_CASE("unreachable blocks are allowed") {
  Fixture fx;
  fx.ret(fx.entry, fx.x);
  BlockId dead = fx.f().add_block("dead");
  BlockId dead2 = fx.f().add_block("dead2");
  ValueId y = fx.add(dead, Op::Neg, {fx.x}, {f32({4})});
  fx.add(dead, Op::Br, {}, {}, NoAttrs{}, {BlockCall{dead2, {}}});
  fx.ret(dead2, y);
  CHECK(verify_module(fx.m).empty());
}

TEST_CASE("symbols in every type index the function's table") {
  Fixture fx;
  Function& f = fx.f();
  f.symbol("N");
  Type bad{ElemKind::F32, {Dim::symbolic(SymbolId(3))}};
  ValueId y = fx.add(fx.entry, Op::Const, {}, {bad}, ConstAttrs{{0}});
  (void)y;
  fx.ret(fx.entry, fx.x);
  f.add_constraint(Constraint{SymbolId(8), Constraint::Kind::AtLeast, 1});
  auto msgs = fx.messages();
  CAPTURE(msgs);
  REQUIRE(msgs.size() == 2);
  CHECK(contains(msgs[0], "a constraint of @f names a symbol outside the function's table"));
  CHECK(contains(msgs[1], "result %0 has a type that uses a symbol outside the table of @f"));

  Fixture sig;
  sig.f().set_result_types({bad});
  sig.f().add_block_arg(sig.entry, bad, "y");
  sig.add(sig.entry, Op::Ret, {sig.x}, {});
  auto m2 = sig.messages();
  CAPTURE(m2);
  REQUIRE(m2.size() == 2);
  CHECK(contains(m2[0], "result type 1 of @f uses a symbol outside the function's table (0 symbols)"));
  CHECK(contains(m2[1], "argument %y of block ^entry has type f32[?3], which uses a symbol outside the table"));
}

TEST_CASE("function names are unique and valid") {
  Fixture fx;
  fx.ret(fx.entry, fx.x);
  Function copy = fx.f();
  copy.set_loc(SourceLoc{"m.tir", 9, 1});
  fx.f().set_loc(SourceLoc{"m.tir", 1, 1});
  fx.m.functions().push_back(copy);
  auto diags = verify_module(fx.m);
  REQUIRE(diags.size() == 1);
  CHECK(diags[0].message == "function @f is defined twice");
  CHECK(diags[0].loc.line == 9);
  REQUIRE(diags[0].notes.size() == 1);
  CHECK(diags[0].notes[0].loc.line == 1);

  Fixture bad;
  bad.ret(bad.entry, bad.x);
  bad.f().set_name("no spaces");
  check_one(bad, "function name 'no spaces' is not a valid name");

  Module m;
  m.functions().emplace_back("empty");
  auto d2 = verify_module(m);
  REQUIRE(d2.size() == 1);
  CHECK(d2[0].message == "in @empty: function @empty has no blocks: it needs an entry block");
}

TEST_CASE("parameter names are unique and their symbols in range") {
  Fixture fx;
  fx.ret(fx.entry, fx.x);
  fx.m.params().push_back(ParamDecl{"w", f32({4}), {}, SourceLoc{"p.tir", 1, 1}});
  fx.m.params().push_back(ParamDecl{"w", f32({4}), {}, SourceLoc{"p.tir", 2, 1}});
  fx.m.params().push_back(ParamDecl{"v", Type{ElemKind::T2, {Dim::symbolic(SymbolId(1))}}, {"K"}, SourceLoc{"p.tir", 3, 1}});
  auto diags = verify_module(fx.m);
  REQUIRE(diags.size() == 2);
  CHECK(diags[0].message == "parameter @w is declared twice");
  CHECK(diags[0].loc.line == 2);
  CHECK(diags[1].message == "parameter @v has a type that uses a symbol outside its table (1 symbol)");
  CHECK(diags[1].loc.line == 3);
}

TEST_CASE("param and call are checked against the module") {
  Fixture fx;
  fx.m.params().push_back(ParamDecl{"w", f32({8}), {}, {}});
  fx.add(fx.entry, Op::Param, {}, {f32({4})}, ParamAttrs{"w"});
  fx.add(fx.entry, Op::Param, {}, {f32({4})}, ParamAttrs{"nope"});
  fx.add(fx.entry, Op::Call, {fx.x}, {f32({4})}, CallAttrs{"ghost"});
  fx.ret(fx.entry, fx.x);
  auto msgs = fx.messages();
  CAPTURE(msgs);
  REQUIRE(msgs.size() == 3);
  CHECK(contains(msgs[0], "'param' @w is declared f32[8] but used as f32[4]"));
  CHECK(contains(msgs[1], "unknown parameter @nope"));
  CHECK(contains(msgs[2], "unknown function @ghost"));
}

TEST_CASE("const values must be representable in the kind") {
  struct Case {
    ElemKind kind;
    double value;
    bool valid;
  };
  const double inf = std::numeric_limits<double>::infinity();
  const Case cases[] = {
      {ElemKind::I8, 2.5, false},   {ElemKind::I8, 128, false},   {ElemKind::I8, -128, true},
      {ElemKind::U8, -1, false},    {ElemKind::T2, 2, false},     {ElemKind::T2, -1, true},
      {ElemKind::Bool, 2, false},   {ElemKind::Bool, 1, true},    {ElemKind::I32, 2147483648.0, false},
      {ElemKind::F32, 0.1, false},  {ElemKind::F32, 0.5, true},   {ElemKind::F32, inf, true},
      {ElemKind::F32, std::nan(""), true}, {ElemKind::F16, 70000, false}, {ElemKind::F16, 65504, true},
      {ElemKind::BF16, 1.00390625, false}, {ElemKind::BF16, 1.0078125, true}, {ElemKind::I32, std::nan(""), false},
  };
  for (const Case& c : cases) {
    CAPTURE(elem_name(c.kind));
    CAPTURE(c.value);
    Fixture fx;
    fx.add(fx.entry, Op::Const, {}, {of(c.kind, {2})}, ConstAttrs{{0, c.value}});
    fx.ret(fx.entry, fx.x);
    auto msgs = fx.messages();
    if (c.valid) {
      CHECK(msgs.empty());
    } else {
      REQUIRE(msgs.size() == 1);
      CHECK(contains(msgs[0], "(element 1) is not representable in " + std::string(elem_name(c.kind))));
    }
  }
  Fixture t2;
  t2.add(t2.entry, Op::Const, {}, {of(ElemKind::T2, {})}, ConstAttrs{{3}});
  t2.ret(t2.entry, t2.x);
  check_one(t2, "'const' value 3 is not representable in t2 (-1, 0 or 1)");
}

TEST_CASE("value names are unique within a function") {
  Fixture fx;
  ValueId a = fx.add(fx.entry, Op::Neg, {fx.x}, {f32({4})});
  fx.f().value(a).name = "x";
  fx.ret(fx.entry, a);
  check_one(fx, "value name '%x' is already used in @f");
}

TEST_CASE("three independent problems give three diagnostics") {
  Fixture fx;
  Function& f = fx.f();
  ValueId a = fx.add(fx.entry, Op::Add, {fx.x, fx.x}, {of(ElemKind::I8, {4})});  // wrong type
  ValueId b = fx.add(fx.entry, Op::Const, {}, {of(ElemKind::T2, {})}, ConstAttrs{{5}});  // not ternary
  (void)a;
  (void)b;
  fx.ret(fx.entry, fx.x);
  f.add_block("empty");  // no terminator
  auto diags = verify_module(fx.m);
  CHECK(diags.size() == 3);
  auto r = verify_or_error(fx.m);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ErrorCode::InvalidInput);
  CHECK(r.error().diagnostics.size() == 3);
  CHECK(contains(r.error().message, "(and 2 more errors)"));
}

TEST_CASE("diagnostics are located at the instruction's loc when it is known") {
  Fixture fx;
  InstId i = fx.f().append_inst(fx.entry, Op::Neg, {fx.x}, {of(ElemKind::I8, {4})}, NoAttrs{},
                                SourceLoc{"k.cpp", 42, 7});
  (void)i;
  fx.ret(fx.entry, fx.x);
  auto diags = verify_module(fx.m);
  REQUIRE(diags.size() == 1);
  CHECK(diags[0].loc.file == "k.cpp");
  CHECK(diags[0].loc.line == 42);
  CHECK(diags[0].loc.col == 7);
  CHECK(diags[0].message == "'neg' result is f32[4], but i8[4] is declared");
  CHECK(diags[0].severity == Severity::Error);
}

TEST_CASE("malformed layouts are reported, not crashed on") {
  Fixture fx;
  InstId i = fx.f().append_inst(fx.entry, Op::Neg, {fx.x}, {f32({4})});
  fx.ret(fx.entry, fx.x);
  fx.f().block(fx.entry).insts.push_back(i);  // listed twice
  check_one(fx, "instruction appears twice in the layout");

  Fixture er;
  InstId j = er.f().append_inst(er.entry, Op::Neg, {er.x}, {f32({4})});
  er.ret(er.entry, er.x);
  er.f().inst(j).erased = true;  // erased but still listed
  check_one(er, "erased instruction is still in block ^entry");
}

// Dominance was a walk up the dominator tree per use: 100,000 blocks in a chain, each
// using an entry value, took 13.6 s. With pre/post numbers each use is two comparisons.
TEST_CASE("verify: a 100,000-block chain whose blocks use an entry value") {
  constexpr std::uint32_t kBlocks = 100000;
  Function f("chain");
  std::vector<BlockId> blocks{f.add_block("entry")};
  const ValueId x = f.add_block_arg(blocks[0], f32({4}), "x");
  for (std::uint32_t k = 1; k <= kBlocks; ++k) blocks.push_back(f.add_block());
  for (std::uint32_t k = 0; k < kBlocks; ++k) {
    f.append_inst(blocks[k], Op::Relu, {x}, {f32({4})});
    f.append_inst(blocks[k], Op::Br, {}, {}, NoAttrs{}, {}, {BlockCall{blocks[k + 1], {}}});
  }
  const ValueId last = f.inst(f.insts(blocks[kBlocks - 1])[0]).results[0];
  f.append_inst(blocks[kBlocks], Op::Ret, {last}, {});
  f.set_result_types({f32({4})});
  CHECK(verify_function(nullptr, f).empty());
  // A use in a block the definition does not dominate is still found: the last block
  // uses a value of a block that is not on its path (a side branch).
  const BlockId side = f.add_block();
  const InstId side_relu = f.append_inst(side, Op::Relu, {x}, {f32({4})});
  f.append_inst(side, Op::Ret, {f.inst(side_relu).results[0]}, {});
  f.inst(f.insts(blocks[kBlocks])[0]).operands[0] = f.inst(side_relu).results[0];
  auto diags = verify_function(nullptr, f);
  REQUIRE(diags.size() == 1);
  CHECK(diags[0].message.find("does not dominate") != std::string::npos);
}
