// SPDX-License-Identifier: Apache-2.0
// parse_test.cpp - the IR text parser: round trips of every op, structure, and errors.
#include <doctest/doctest.h>

#include <map>

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

std::string wrap(const std::string& args, const std::string& results, const std::string& body) {
  return "func @t(" + args + ") -> " + results + " {\n^entry:\n" + body + "}\n";
}

// One canonical module per op, each using the op at least once. A new op in ops.def
// without an entry here fails "every op round-trips".
const std::map<std::string, std::string>& op_cases() {
  static const std::map<std::string, std::string> cases = [] {
    std::map<std::string, std::string> c;
    c["const"] = wrap("", "(f32[2], i32[], t2[3], bool[2])",
                      "  %0 = const {values = [1.5, -2]} : f32[2]\n"
                      "  %1 = const {value = -7} : i32[]\n"
                      "  %2 = const {values = [-1, 0, 1]} : t2[3]\n"
                      "  %3 = const {values = [1, 0]} : bool[2]\n"
                      "  ret %0, %1, %2, %3\n");
    c["param"] =
        "param @w : t2[N, 4]\n\n"
        "func @t<N>() -> t2[N, 4] {\n^entry:\n  %0 = param @w : t2[N, 4]\n  ret %0\n}\n";
    c["call"] =
        "func @callee<B>(%a: f32[B, 2]) -> (f32[B, 2], f32[2, B]) {\n^entry:\n"
        "  %0 = transpose %a {perm = [1, 0]} : f32[2, B]\n  ret %a, %0\n}\n\n"
        "func @t(%x: f32[5, 2]) -> f32[2, 5] {\n^entry:\n"
        "  %0, %1 = call @callee(%x) : f32[5, 2], f32[2, 5]\n  call @none()\n  ret %1\n}\n\n"
        "func @none() -> () {\n^entry:\n  ret\n}\n";
    c["ret"] = wrap("%a: f32[], %b: i8[3]", "(i8[3], f32[])", "  ret %b, %a\n");
    c["br"] = wrap("%a: f32[]", "f32[]", "  br ^next(%a, %a)\n^next(%p: f32[], %q: f32[]):\n  br ^last\n^last:\n  ret %p\n");
    c["cond_br"] = wrap("%c: i32[], %a: f32[]", "f32[]",
                        "  cond_br %c, ^yes(%a), ^no\n^yes(%0: f32[]):\n  ret %0\n^no:\n  ret %a\n");
    for (const char* op : {"add", "sub", "mul", "div", "max", "min"})
      c[op] = wrap("%a: f32[3, 4], %b: f32[4], %i: i8[2], %j: i32[1]", "(f32[3, 4], i32[2])",
                   std::string("  %0 = ") + op + " %a, %b : f32[3, 4]\n  %1 = " + op +
                       " %i, %j : i32[2]\n  ret %0, %1\n");
    for (const char* op : {"neg", "abs", "relu"})
      c[op] = wrap("%a: bf16[2], %i: i8[2]", "(bf16[2], i8[2])",
                   std::string("  %0 = ") + op + " %a : bf16[2]\n  %1 = " + op + " %i : i8[2]\n  ret %0, %1\n");
    for (const char* op : {"sigmoid", "tanh", "gelu", "silu", "exp", "log", "sqrt", "rsqrt"})
      c[op] = wrap("%a: f16[2, 2]", "f16[2, 2]", std::string("  %0 = ") + op + " %a : f16[2, 2]\n  ret %0\n");
    c["cast"] = wrap("%a: f32[3]", "(t2[3], bool[3])",
                     "  %0 = cast %a {to = t2} : t2[3]\n  %1 = cast %0 {to = bool} : bool[3]\n  ret %0, %1\n");
    c["transpose"] = wrap("%a: f32[2, 3, 4]", "f32[4, 2, 3]",
                          "  %0 = transpose %a {perm = [2, 0, 1]} : f32[4, 2, 3]\n  ret %0\n");
    c["reshape"] = "func @t<N>(%a: f32[N, 6]) -> f32[3, N, 2] {\n^entry:\n"
                   "  %0 = reshape %a : f32[3, N, 2]\n  ret %0\n}\n";
    c["broadcast"] = wrap("%a: f32[1, 4]", "f32[2, 3, 4]", "  %0 = broadcast %a : f32[2, 3, 4]\n  ret %0\n");
    c["matmul"] = wrap("%a: f32[2, 5, 3], %b: t2[3, 4], %v: i8[3], %w: t2[3, 4]", "(f32[2, 5, 4], i32[4])",
                       "  %0 = matmul %a, %b : f32[2, 5, 4]\n  %1 = matmul %v, %w : i32[4]\n  ret %0, %1\n");
    for (const char* op : {"reduce_sum", "reduce_mean", "reduce_max"})
      c[op] = wrap("%a: f32[2, 3]", "(f32[2], f32[1, 3])",
                   std::string("  %0 = ") + op + " %a {axis = 1, keepdims = false} : f32[2]\n  %1 = " + op +
                       " %a {axis = 0, keepdims = true} : f32[1, 3]\n  ret %0, %1\n");
    c["softmax"] = wrap("%a: f32[2, 3]", "f32[2, 3]", "  %0 = softmax %a {axis = 0} : f32[2, 3]\n  ret %0\n");
    c["rmsnorm"] = wrap("%a: f32[2, 3], %g: f32[3]", "f32[2, 3]",
                        "  %0 = rmsnorm %a, %g {eps = 1e-05} : f32[2, 3]\n  ret %0\n");
    c["quantize_int8"] = wrap("%a: f32[2, 3]", "f32[2, 3]", "  %0 = quantize_int8 %a : f32[2, 3]\n  ret %0\n");
    c["ternarize"] = wrap("%a: f32[2, 3]", "f32[2, 3]",
                          "  %0 = ternarize %a {threshold = 0.25} : f32[2, 3]\n  ret %0\n");
    c["ternarize_absmean"] =
        wrap("%a: f32[2, 3]", "f32[2, 3]", "  %0 = ternarize_absmean %a : f32[2, 3]\n  ret %0\n");
    c["quantize"] = wrap("%a: f32[2, 3]", "(i8[2, 3], f32[2, 1])",
                         "  %q, %s = quantize %a : i8[2, 3], f32[2, 1]\n  ret %q, %s\n");
    c["tquantize"] = wrap("%a: f32[2, 3]", "(t2[2, 3], f32[])",
                          "  %t, %g = tquantize %a : t2[2, 3], f32[]\n  ret %t, %g\n");
    c["dequantize"] = wrap("%q: i8[2, 3], %s: f32[2, 1], %t: t2[3], %g: bf16[]", "(f32[2, 3], bf16[3])",
                           "  %0 = dequantize %q, %s : f32[2, 3]\n  %1 = dequantize %t, %g : bf16[3]\n"
                           "  ret %0, %1\n");
    c["tmatmul"] = wrap("%q: i8[2, 3], %w: t2<tern2>[3, 4], %s: f32[2, 1], %g: f32[4]", "f32[2, 4]",
                        "  %0 = tmatmul %q, %w, %s, %g {x_scale = true, w_scale = true, bias = false, "
                        "residual = false, act = relu} : f32[2, 4]\n  ret %0\n");
    c["ewise"] = wrap("%a: f32[2, 3], %b: f32[3]", "f32[2, 3]",
                      "  %0 = ewise %a, %b {steps = [mul(0, 1), relu(2)]} : f32[2, 3]\n  ret %0\n");
    c["gather"] = wrap("%t: bf16[5, 3], %i: i32[2, 2]", "bf16[2, 2, 3]",
                       "  %0 = gather %t, %i {axis = 0} : bf16[2, 2, 3]\n  ret %0\n");
    c["slice"] = wrap("%a: i8[2, 7]", "i8[2, 3]", "  %0 = slice %a {axis = 1, start = 4, size = 3} : i8[2, 3]\n  ret %0\n");
    c["concat"] = wrap("%a: f32[2, 3], %b: f32[1, 3]", "f32[5, 3]",
                       "  %0 = concat %a, %b, %a {axis = 0} : f32[5, 3]\n  ret %0\n");
    c["layernorm"] = wrap("%a: f32[2, 3], %g: f32[3]", "f32[2, 3]",
                          "  %0 = layernorm %a, %g, %g {eps = 1e-05} : f32[2, 3]\n  ret %0\n");
    c["rope"] = wrap("%a: f32[2, 3, 4], %p: i32[]", "(f32[2, 3, 4], f32[2, 3, 4])",
                     "  %0 = rope %a, %p {theta = 5e+05, mode = norm} : f32[2, 3, 4]\n"
                     "  %1 = rope %a, %p {theta = 10000.5, mode = neox} : f32[2, 3, 4]\n  ret %0, %1\n");
    c["causal_softmax"] = wrap("%a: f16[2, 3, 5], %p: i32[]", "f16[2, 3, 5]",
                               "  %0 = causal_softmax %a, %p : f16[2, 3, 5]\n  ret %0\n");
    c["kv_write"] = wrap("%c: f16[2, 8, 2, 4], %r: f32[3, 2, 4], %p: i32[]", "f16[2, 8, 2, 4]",
                         "  %0 = kv_write %c, %r, %p {layer = 1} : f16[2, 8, 2, 4]\n  ret %0\n");
    c["attention"] = wrap("%q: f32[3, 4, 2], %k: bf16[2, 8, 2, 2], %v: bf16[2, 8, 2, 2], %p: i32[]", "f32[3, 4, 2]",
                          "  %0 = attention %q, %k, %v, %p {layer = 0, scale = 0.7071067811865476} : f32[3, 4, 2]\n"
                          "  ret %0\n");
    return c;
  }();
  return cases;
}

template <class T>
T ok(Result<T> r) {
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? std::string() : render(r.error())));
  return std::move(r).value();
}

// Each diagnostic of a failed parse as "file:line:col: message".
std::vector<std::string> errors(const std::string& text) {
  auto r = parse_module(text, "e.tir");
  std::vector<std::string> out;
  if (r.ok()) return out;
  for (const Diagnostic& d : r.error().diagnostics)
    out.push_back(d.loc.file + ":" + std::to_string(d.loc.line) + ":" + std::to_string(d.loc.col) + ": " +
                  d.message);
  return out;
}

bool uses_op(const Module& m, Op op) {
  for (const Function& f : m.functions())
    for (BlockId b : f.blocks())
      for (InstId i : f.insts(b))
        if (f.inst(i).op == op) return true;
  return false;
}

}  // namespace

TEST_CASE("every op round-trips") {
  for (Op op : all_ops()) {
    std::string name(op_name(op));
    CAPTURE(name);
    auto it = op_cases().find(name);
    REQUIRE_MESSAGE(it != op_cases().end(), "no round-trip case for op '" << name << "'");
    Module m = ok(parse_module(it->second, name + ".tir"));
    CHECK(uses_op(m, op));
    CHECK(verify_module(m).empty());
    CHECK(print_module(m) == it->second);
  }
  CHECK(op_cases().size() == all_ops().size());
}

TEST_CASE("parsed structure: names, numbering, locations, blocks and symbols") {
  const std::string text =
      "param @p : f32[A, 3, A, B]\n"
      "\n"
      "func @f<N, M>(%x: f32[N], %7: i32[]) -> f32[N] where N >= 2 {\n"
      "^start:\n"
      "  %y = neg %x : f32[N]\n"
      "  br ^bb9(%y)\n"
      "^bb9(%z: f32[N]):\n"
      "  ret %z\n"
      "}\n";
  Module m = ok(parse_module(text, "s.tir"));
  REQUIRE(m.params().size() == 1);
  CHECK(m.params()[0].symbols == std::vector<std::string>{"A", "B"});
  CHECK(m.params()[0].loc.line == 1);
  REQUIRE(m.functions().size() == 1);
  const Function& f = m.functions()[0];
  CHECK(f.symbols() == std::vector<std::string>{"N", "M"});
  REQUIRE(f.constraints().size() == 1);
  CHECK(f.constraints()[0] == Constraint{SymbolId(0), Constraint::Kind::AtLeast, 2});
  CHECK(f.loc().line == 3);
  CHECK(f.loc().col == 1);
  CHECK(f.loc().file == "s.tir");
  REQUIRE(f.args().size() == 2);
  CHECK(f.value(f.args()[0]).name == "x");
  CHECK(f.value(f.args()[1]).name.empty());  // %7 is a number, not a name
  REQUIRE(f.blocks().size() == 2);
  CHECK(f.block(f.blocks()[0]).name == "start");
  CHECK(f.block(f.blocks()[1]).name == "bb9");
  InstId neg = f.insts(f.blocks()[0])[0];
  CHECK(f.inst(neg).loc.line == 5);
  CHECK(f.inst(neg).loc.col == 3);
  InstId br = f.insts(f.blocks()[0])[1];
  CHECK(f.inst(br).loc.col == 3);
  REQUIRE(f.inst(br).targets.size() == 1);
  CHECK(f.inst(br).targets[0].block == f.blocks()[1]);
  // Printing renumbers %7 and keeps the labels that were written.
  CHECK(print_module(m) ==
        "param @p : f32[A, 3, A, B]\n"
        "\n"
        "func @f<N, M>(%x: f32[N], %0: i32[]) -> f32[N] where N >= 2 {\n"
        "^start:\n"
        "  %y = neg %x : f32[N]\n"
        "  br ^bb9(%y)\n"
        "^bb9(%z: f32[N]):\n"
        "  ret %z\n"
        "}\n");
}

TEST_CASE("non-canonical text parses and prints canonically") {
  const std::string text =
      "// leading comment\n"
      "\n"
      "func @g(%a: f32[2]) -> f32[2] {   // trailing comment\n"
      "\n"
      "^entry:\n"
      "  %10 = exp %a : f32[2]   // becomes %0\n"
      "    %3 = add %10,%a : f32[2]\n"
      "  ret %3\n"
      "}\n"
      "meta \"k\" = \"v\"\n";
  Module m = ok(parse_module(text, "n.tir"));
  CHECK(print_module(m) ==
        "meta \"k\" = \"v\"\n"
        "\n"
        "func @g(%a: f32[2]) -> f32[2] {\n"
        "^entry:\n"
        "  %0 = exp %a : f32[2]\n"
        "  %1 = add %0, %a : f32[2]\n"
        "  ret %1\n"
        "}\n");
}

TEST_CASE("forward references across blocks resolve; dominance is checked after") {
  // ^late is laid out after ^use but dominates it: entry -> late -> use.
  const std::string text =
      "func @fwd(%a: f32[]) -> f32[] {\n"
      "^entry:\n"
      "  br ^late\n"
      "^use:\n"
      "  %r = add %v, %a : f32[]\n"
      "  ret %r\n"
      "^late:\n"
      "  %v = neg %a : f32[]\n"
      "  br ^use\n"
      "}\n";
  Module m = ok(parse_module(text, "fwd.tir"));
  CHECK(print_module(m) == text);
}

TEST_CASE("const values are rounded to their kind when parsed") {
  const std::string text = wrap("", "(i8[3], f16[], t2[2], bool[])",
                                "  %0 = const {values = [300, -2.5, 1.5]} : i8[3]\n"
                                "  %1 = const {value = 0.1} : f16[]\n"
                                "  %2 = const {values = [5, -0.4]} : t2[2]\n"
                                "  %3 = const {value = 7} : bool[]\n"
                                "  ret %0, %1, %2, %3\n");
  Module m = ok(parse_module(text, "c.tir"));
  const Function& f = m.functions()[0];
  auto values = [&](std::size_t k) { return std::get<ConstAttrs>(f.inst(f.insts(f.entry())[k]).attrs).values; };
  CHECK(values(0) == std::vector<double>{127, -2, 2});
  CHECK(values(1) == std::vector<double>{0.0999755859375});  // the f16 nearest to 0.1
  CHECK(values(2) == std::vector<double>{1, -0.0});
  CHECK(values(3) == std::vector<double>{1});
}

TEST_CASE("syntax errors: exact location and message") {
  const std::string head = "func @f(%x: f32[4]) -> f32[4] {\n^entry:\n";
  struct Case {
    const char* what;
    std::string text;
    std::string error;
  };
  const Case cases[] = {
      {"unknown op", head + "  %0 = frobnicate %x : f32[4]\n  ret %0\n}\n", "e.tir:3:8: unknown op 'frobnicate'"},
      {"bad type", head + "  %0 = neg %x : f32[4,]\n  ret %0\n}\n",
       "e.tir:3:23: expected a dimension (an integer or a symbol), got ']'"},
      {"bad type bracket", head + "  %0 = neg %x : f32(4)\n  ret %0\n}\n",
       "e.tir:3:20: expected '[' after element kind 'f32', got '('"},
      {"negative dim", head + "  %0 = neg %x : f32[-4]\n  ret %0\n}\n", "e.tir:3:21: dimension '-4' is negative"},
      {"duplicate name", head + "  %0 = neg %x : f32[4]\n  %0 = abs %x : f32[4]\n  ret %0\n}\n",
       "e.tir:4:3: redefinition of value '%0'"},
      {"duplicate argument", "func @f(%x: f32[4], %x: f32[4]) -> () {\n^entry:\n  ret\n}\n",
       "e.tir:1:21: redefinition of value '%x'"},
      {"missing type", head + "  %0 = neg %x\n  ret %0\n}\n",
       "e.tir:3:14: expected ':' and the result type after the instruction, got end of line"},
      {"garbage after instruction", head + "  %0 = neg %x : f32[4] junk\n  ret %0\n}\n",
       "e.tir:3:24: unexpected 'junk' after the instruction"},
      {"two values without a comma", head + "  ret %x %x\n}\n", "e.tir:3:10: unexpected '%x' after the instruction"},
      {"unknown kind", head + "  %0 = neg %x : f64[4]\n  ret %0\n}\n",
       "e.tir:3:17: unknown element kind 'f64' (expected t2, i8, u8, i32, f16, bf16, f32 or bool)"},
      {"unknown attribute", head + "  %0 = cast %x {too = i8} : i8[4]\n  ret %0\n}\n",
       "e.tir:3:17: unknown attribute 'too' for 'cast' (expected 'to')"},
      {"missing attribute", head + "  %0 = cast %x : i8[4]\n  ret %0\n}\n", "e.tir:3:8: 'cast' needs attribute 'to'"},
      {"missing field", head + "  %0 = reduce_sum %x {axis = 0} : f32[]\n  ret %0\n}\n",
       "e.tir:3:22: 'reduce_sum' needs attribute 'keepdims'"},
      {"mistyped attribute", head + "  %0 = reduce_max %x {axis = 0.5, keepdims = false} : f32[]\n  ret %0\n}\n",
       "e.tir:3:30: expected an integer, got '0.5'"},
      {"bad kind attribute", head + "  %0 = cast %x {to = f64} : f64[4]\n  ret %0\n}\n",
       "e.tir:3:22: unknown element kind 'f64' for 'to'"},
      {"attributes on an op without any", head + "  %0 = neg %x {axis = 0} : f32[4]\n  ret %0\n}\n",
       "e.tir:3:15: 'neg' takes no attributes"},
      {"attributes on a call", head + "  %0 = call @f(%x) {axis = 0} : f32[4]\n  ret %0\n}\n",
       "e.tir:3:20: 'call' takes no attributes"},
      {"duplicate attribute", head + "  %0 = softmax %x {axis = 0, axis = 0} : f32[4]\n  ret %0\n}\n",
       "e.tir:3:30: attribute 'axis' is given twice"},
      {"unterminated function", head + "  ret %x\n", "e.tir:1:1: function @f is missing its closing '}'"},
      {"function inside a function", head + "  ret %x\nfunc @g() -> () {\n^entry:\n  ret\n}\n",
       "e.tir:1:1: function @f is missing its closing '}'"},
      {"unknown symbol", "func @f<N>(%x: f32[M]) -> () {\n^entry:\n  ret\n}\n",
       "e.tir:1:20: unknown symbol 'M': list it in the '<...>' of @f"},
      {"unknown symbol in constraint", "func @f<N>() -> () where K >= 1 {\n^entry:\n  ret\n}\n",
       "e.tir:1:26: unknown symbol 'K' in constraint: list it in the '<...>' of @f"},
      {"bad constraint", "func @f<N>() -> () where N > 1 {\n^entry:\n  ret\n}\n",
       "e.tir:1:28: expected '%', '>=', '<=' or '==' after 'N', got '>'"},
      {"unknown block", head + "  br ^nowhere(%x)\n}\n", "e.tir:3:6: unknown block '^nowhere'"},
      {"duplicate block", head + "  br ^a\n^a:\n  br ^a\n^a:\n  ret %x\n}\n", "e.tir:6:1: redefinition of block '^a'"},
      {"entry block arguments", "func @f() -> () {\n^entry(%a: f32[]):\n  ret\n}\n",
       "e.tir:2:7: the entry block takes no arguments in its label: they are the arguments of @f"},
      {"instruction before a label", "func @f() -> () {\n  ret\n}\n",
       "e.tir:2:3: expected a block label such as '^entry:' at the start of the body of @f, got 'ret'"},
      {"result count", head + "  %a, %b = neg %x : f32[4]\n  ret %a\n}\n", "e.tir:3:3: 2 result names but 1 result type"},
      {"type on an instruction without results", head + "  ret %x : f32[4]\n}\n",
       "e.tir:3:10: 'ret' defines no result here, so it takes no result type"},
      {"top-level garbage", "fun @f() -> () {\n}\n", "e.tir:1:1: expected 'meta', 'param' or 'func', got 'fun'"},
      {"unterminated string", "meta \"key\" = \"v\n", "e.tir:1:14: unterminated string"},
      {"unexpected character", head + "  %0 = neg %x : f32[4] $\n  ret %0\n}\n", "e.tir:3:24: unexpected character '$'"},
      {"bad number", head + "  %0 = const {value = 1.2.3} : f32[]\n  ret %x\n}\n", "e.tir:3:23: invalid number '1.2.3'"},
      {"param without type", "param @w t2[4]\n", "e.tir:1:10: expected ':' and the parameter type, got 't2'"},
      {"duplicate meta", "meta \"a\" = \"1\"\nmeta \"a\" = \"2\"\n", "e.tir:2:6: duplicate meta key \"a\""},
      {"empty body", "func @f() -> () {\n}\n", "e.tir:1:1: function @f has no blocks: it needs at least '^entry:'"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    CHECK(errors(c.text) == std::vector<std::string>{c.error});
  }
}

TEST_CASE("every unknown value of a function is reported") {
  const std::string text =
      "func @f(%x: f32[4]) -> f32[4] {\n"
      "^entry:\n"
      "  %0 = add %x, %nope : f32[4]\n"
      "  %1 = add %0, %missing : f32[4]\n"
      "  ret %1\n"
      "}\n";
  CHECK(errors(text) == std::vector<std::string>{"e.tir:3:16: unknown value '%nope'",
                                                 "e.tir:4:16: unknown value '%missing'"});
}

TEST_CASE("type errors are all reported after a successful parse, with source lines") {
  const std::string text =
      "param @w : t2[784, 10]\n"
      "\n"
      "func @f<N>(%x: f32[N, 780]) -> f32[N, 10] {\n"
      "^entry:\n"
      "  %0 = param @w : t2[784, 10]\n"
      "  %1 = matmul %x, %0 : f32[N, 10]\n"
      "  %2 = relu %1 : f32[N, 11]\n"
      "  ret %2\n"
      "}\n";
  auto r = parse_module(text, "t.tir");
  REQUIRE_FALSE(r.ok());
  const Error& e = r.error();
  CHECK(e.code == ErrorCode::InvalidInput);
  REQUIRE(e.diagnostics.size() == 3);
  CHECK(e.diagnostics[0].loc.line == 6);
  CHECK(e.diagnostics[0].message ==
        "'matmul' needs matching K: lhs is f32[N, 780] (K = 780), rhs is t2[784, 10] (K = 784)");
  CHECK(e.diagnostics[1].loc.line == 7);
  CHECK(e.diagnostics[1].message == "'relu' result is f32[N, 10], but f32[N, 11] is declared");
  CHECK(e.diagnostics[2].loc.line == 8);
  CHECK(e.diagnostics[2].message == "'ret' value 1 is f32[N, 11] but @f returns f32[N, 10]");
  CHECK(e.message ==
        "t.tir:6:3: 'matmul' needs matching K: lhs is f32[N, 780] (K = 780), rhs is t2[784, 10] (K = 784) "
        "(and 2 more errors)");
  CHECK(render(e.diagnostics[1]) ==
        "t.tir:7:3: error: 'relu' result is f32[N, 10], but f32[N, 11] is declared\n"
        "  %2 = relu %1 : f32[N, 11]\n"
        "  ^\n");
}

TEST_CASE("syntax errors carry the source line for the caret") {
  auto r = parse_module("func @f() -> () {\n^entry:\n  ret\n  %0 = bogus\n}\n", "c.tir");
  REQUIRE_FALSE(r.ok());
  REQUIRE(r.error().diagnostics.size() == 1);
  CHECK(render(r.error()) ==
        "c.tir:4:8: error: unknown op 'bogus'\n"
        "  %0 = bogus\n"
        "       ^\n");
}

TEST_CASE("redefinition notes point at the previous definition") {
  auto r = parse_module("func @f(%a: f32[]) -> () {\n^entry:\n  %a = neg %a : f32[]\n  ret\n}\n", "n.tir");
  REQUIRE_FALSE(r.ok());
  REQUIRE(r.error().diagnostics.size() == 1);
  const Diagnostic& d = r.error().diagnostics[0];
  CHECK(d.message == "redefinition of value '%a'");
  REQUIRE(d.notes.size() == 1);
  CHECK(d.notes[0].severity == Severity::Note);
  CHECK(d.notes[0].loc.line == 1);
  CHECK(d.notes[0].loc.col == 9);
  CHECK(d.notes[0].source_line == "func @f(%a: f32[]) -> () {");
}

TEST_CASE("non-finite and extreme numbers round-trip") {
  const std::string text = wrap("", "(f32[5], bf16[2], i32[2])",
                                "  %0 = const {values = [inf, -inf, nan, 3.4028235e+38, 1e-45]} : f32[5]\n"
                                "  %1 = const {values = [1.0078125, -3.3895314e+38]} : bf16[2]\n"
                                "  %2 = const {values = [-2147483648, 2147483647]} : i32[2]\n"
                                "  ret %0, %1, %2\n");
  Module m = ok(parse_module(text, "x.tir"));
  CHECK(print_module(m) == text);
}
