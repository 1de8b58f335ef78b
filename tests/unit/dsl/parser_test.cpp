// SPDX-License-Identifier: Apache-2.0
// parser_test.cpp - syntax tree shape, precedence, types and syntax-error recovery.
#include "ir/dsl/parser.h"

#include <doctest/doctest.h>

#include <string>

#include "ir/dsl/dsl.h"

namespace ternjit::dsl {
namespace {

// The expression as an s-expression: (+ a (* (@ b c) d)), (neg x), (call f a b).
std::string sexpr(const Expr& e) {
  switch (e.kind) {
    case ExprKind::Name: return e.name;
    case ExprKind::Number: return e.text;
    case ExprKind::Neg: return "(neg " + sexpr(e.args[0]) + ")";
    case ExprKind::Binary:
      return std::string("(") + binary_op_spelling(e.op) + " " + sexpr(e.args[0]) + " " +
             sexpr(e.args[1]) + ")";
    case ExprKind::Call: {
      std::string s = "(call " + (e.callee.empty() ? e.name : sexpr(e.callee[0]));
      if (!e.member.empty() && e.callee.empty()) s += "." + e.member;
      if (e.has_type_arg) s += "<" + e.type_arg + ">";
      for (const Expr& a : e.args) s += " " + sexpr(a);
      return s + ")";
    }
    case ExprKind::Index: return "(index " + sexpr(e.args[0]) + " " + sexpr(e.args[1]) + ")";
    case ExprKind::Member: return "(member " + sexpr(e.args[0]) + " " + e.member + ")";
    case ExprKind::Tuple:
    case ExprKind::List: {
      std::string s = e.kind == ExprKind::Tuple ? "(tuple" : "(list";
      for (const Expr& a : e.args) s += " " + sexpr(a);
      return s + ")";
    }
    case ExprKind::String: return "\"" + e.text + "\"";
  }
  return "?";
}

// Parses `return <expr>` inside a one-function layer and returns the expression.
std::string parse_expr_str(const std::string& expr) {
  std::string src = "layer L {\n  fn f() -> Tensor[] {\n    return " + expr + "\n  }\n}\n";
  auto r = parse_tri(src, "e.tri");
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : render(r.error())));
  const FnDecl& f = r->layers.at(0).fns.at(0);
  REQUIRE(f.body.size() == 1);
  REQUIRE(f.body[0].value.has_value());
  return sexpr(*f.body[0].value);
}

TEST_CASE("parser: precedence follows Python (@ * / bind alike, tighter than + -)") {
  CHECK(parse_expr_str("a + b @ c * d") == "(+ a (* (@ b c) d))");
  CHECK(parse_expr_str("a @ b / c") == "(/ (@ a b) c)");
  CHECK(parse_expr_str("a * b @ c") == "(@ (* a b) c)");
  CHECK(parse_expr_str("a - b - c") == "(- (- a b) c)");
  CHECK(parse_expr_str("a - b * c + d") == "(+ (- a (* b c)) d)");
  CHECK(parse_expr_str("x @ weights + bias") == "(+ (@ x weights) bias)");
}

TEST_CASE("parser: postfix indexes, instance members and calls, tuples, lists, strings") {
  CHECK(parse_expr_str("x[0] + y[i + 1][2]") == "(+ (index x 0) (index (index y (+ i 1)) 2))");
  CHECK(parse_expr_str("blk[i].w @ x") == "(@ (member (index blk i) w) x)");
  CHECK(parse_expr_str("blk[i](x, y)") == "(call (index blk i) x y)");
  CHECK(parse_expr_str("blk[i].sub[j].step(x)") ==
        "(call (member (index (member (index blk i) sub) j) step) x)");
  CHECK(parse_expr_str("(a, b + c)") == "(tuple a (+ b c))");
  CHECK(parse_expr_str("(a)") == "a");
  CHECK(parse_expr_str("f(x)[1]") == "(index (call f x) 1)");
  CHECK(parse_expr_str("reshape(x, [M, -1, Block.E])") == "(call reshape x (list M (neg 1) (member Block E)))");
  CHECK(parse_expr_str("rope(x, p, 2.0, \"neox\")") == "(call rope x p 2.0 \"neox\")");
}

TEST_CASE("parser: for loops, tuple lets, tuple results and instance arrays") {
  auto r = parse_tri(
      "layer L {\n  param blk: B[30]\n  fn f(x: Tensor[N]) -> (Tensor[N], Tensor[]) {\n"
      "    for i in 0..n + 1 {\n      for j in i..4 {\n        let x = x\n      }\n    }\n"
      "    let (a, b) = g(x)\n    return (a, b)\n  }\n}\n",
      "f.tri");
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : render(r.error())));
  const LayerDecl& l = r->layers.at(0);
  CHECK(l.params.at(0).instance_of == "B");
  CHECK(sexpr(*l.params.at(0).count) == "30");
  const FnDecl& f = l.fns.at(0);
  CHECK(f.tuple_result);
  CHECK(f.results.size() == 2);
  REQUIRE(f.body.size() == 3);
  const Stmt& loop = f.body[0];
  CHECK(loop.kind == StmtKind::For);
  CHECK(loop.name == "i");
  CHECK(sexpr(*loop.value) == "0");
  CHECK(sexpr(*loop.upper) == "(+ n 1)");
  REQUIRE(loop.body.size() == 1);
  CHECK(loop.body[0].kind == StmtKind::For);
  CHECK(loop.body[0].body.size() == 1);
  CHECK(f.body[1].names.size() == 2);
  CHECK(f.body[1].names[1].first == "b");
  CHECK(sexpr(*f.body[2].value) == "(tuple a b)");
}

TEST_CASE("parser: for loops nest at most 16 deep") {
  std::string src = "layer L {\n  fn f(x: Tensor[N]) -> Tensor[N] {\n";
  for (int i = 0; i < 17; ++i) src += "for i" + std::to_string(i) + " in 0..1 {\n";
  for (int i = 0; i < 17; ++i) src += "}\n";
  src += "    return x\n  }\n}\n";
  auto r = parse_tri(src, "deep.tri");
  REQUIRE_FALSE(r.ok());
  REQUIRE(r.error().diagnostics.size() == 1);
  CHECK(r.error().diagnostics[0].message.find("nested too deeply (more than 16 levels)") != std::string::npos);
}

TEST_CASE("parser: unary minus binds tightest, parentheses group") {
  CHECK(parse_expr_str("-x @ w") == "(@ (neg x) w)");
  CHECK(parse_expr_str("-a * -b") == "(* (neg a) (neg b))");
  CHECK(parse_expr_str("--a") == "(neg (neg a))");
  CHECK(parse_expr_str("a - -1") == "(- a (neg 1))");
  CHECK(parse_expr_str("(a + b) @ c") == "(@ (+ a b) c)");
  CHECK(parse_expr_str("-(a + b)") == "(neg (+ a b))");
  CHECK(parse_expr_str("((a))") == "a");
}

TEST_CASE("parser: calls, layer calls, type arguments and literals") {
  CHECK(parse_expr_str("relu(x)") == "(call relu x)");
  CHECK(parse_expr_str("softmax(x @ w, -1)") == "(call softmax (@ x w) (neg 1))");
  CHECK(parse_expr_str("rmsnorm(x, g, 1e-5)") == "(call rmsnorm x g 1e-5)");
  CHECK(parse_expr_str("BitLinear.forward(h) * 0.5") == "(* (call BitLinear.forward h) 0.5)");
  CHECK(parse_expr_str("cast<i8>(x)") == "(call cast<i8> x)");
  CHECK(parse_expr_str("f()") == "(call f)");
  // Inside parentheses an expression may continue on the next line.
  CHECK(parse_expr_str("maximum(a,\n      b) + (c\n  + d)") == "(+ (call maximum a b) (+ c d))");
}

TEST_CASE("parser: declarations, types and positions") {
  auto r = parse_tri(
      "layer A {\n"
      "  param w: TernaryTensor[K, B.N]\n"
      "  param s: Tensor<f16>[]\n"
      "  fn forward(x: Tensor[M, K], y: Tensor<bf16>[4]) -> Tensor<i32>[M] {\n"
      "    let h = x @ w\n"
      "    return h\n"
      "  }\n"
      "}\n"
      "layer B { }\n",
      "d.tri");
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : render(r.error())));
  REQUIRE(r->layers.size() == 2);
  const LayerDecl& a = r->layers[0];
  CHECK(a.name == "A");
  CHECK(a.pos == Pos{1, 7});
  REQUIRE(a.params.size() == 2);
  CHECK(a.params[0].name == "w");
  CHECK(a.params[0].pos == Pos{2, 9});
  REQUIRE(a.params[0].type.has_value());
  CHECK(a.params[0].type->ternary);
  REQUIRE(a.params[0].type->dims.size() == 2);
  CHECK(a.params[0].type->dims[0].symbol == "K");
  CHECK(a.params[0].type->dims[1].symbol == "B.N");
  CHECK(a.params[0].type->dims[1].pos == Pos{2, 29});
  CHECK(a.params[1].type->elem == "f16");
  CHECK(a.params[1].type->elem_pos == Pos{3, 19});
  CHECK(a.params[1].type->dims.empty());
  REQUIRE(a.fns.size() == 1);
  const FnDecl& f = a.fns[0];
  CHECK(f.name == "forward");
  CHECK(f.header_ok);
  CHECK(f.body_ok);
  REQUIRE(f.args.size() == 2);
  CHECK(f.args[1].name == "y");
  CHECK(f.args[1].type->elem == "bf16");
  CHECK(f.args[1].type->dims[0].extent == 4);
  CHECK(f.result->elem == "i32");
  REQUIRE(f.body.size() == 2);
  CHECK(f.body[0].kind == StmtKind::Let);
  CHECK(f.body[0].name == "h");
  CHECK(f.body[0].name_pos == Pos{5, 9});
  CHECK(f.body[0].value->pos == Pos{5, 15});  // the '@'
  CHECK(f.body[1].kind == StmtKind::Return);
  CHECK(f.body[1].pos == Pos{6, 5});
  CHECK(f.close_pos == Pos{7, 3});
  CHECK(r->layers[1].name == "B");
  CHECK(r->layers[1].fns.empty());
}

TEST_CASE("parser: a statement ends at the end of its line") {
  // `-y` on its own line is not a continuation of `x`.
  auto r = parse_tri("layer L {\n fn f(x: Tensor[]) -> Tensor[] {\n  let a = x\n  -a\n  return a\n }\n}\n",
                     "n.tri");
  REQUIRE_FALSE(r.ok());
  REQUIRE(r.error().diagnostics.size() == 1);
  CHECK(r.error().diagnostics[0].loc.line == 4);
  CHECK(r.error().diagnostics[0].loc.col == 3);
  CHECK(r.error().diagnostics[0].message == "expected a statement ('let', 'return' or 'for'), got '-'");

  auto two = parse_tri("layer L {\n fn f(x: Tensor[]) -> Tensor[] {\n  let a = x x\n  return a\n }\n}\n",
                       "n.tri");
  REQUIRE_FALSE(two.ok());
  REQUIRE(two.error().diagnostics.size() == 1);
  CHECK(two.error().diagnostics[0].message ==
        "expected the end of the line after the statement, got 'x'");
  CHECK(two.error().diagnostics[0].loc.col == 13);
}

TEST_CASE("parser: one error per statement, then recovery at the next line") {
  std::string src =
      "layer L {\n"                               // 1
      "  fn f(x: Tensor[N]) -> Tensor[N] {\n"     // 2
      "    let a = x +\n"                         // 3: missing operand
      "    let b = (x * 2\n"                      // 4: missing ')' (seen at line 5)
      "    let = x\n"                             // 5: missing name
      "    let c = x\n"                           // 6: fine
      "    return c\n"                            // 7
      "  }\n"                                     // 8
      "}\n";
  ParseOutput p = parse_file(src, "r.tri");
  REQUIRE(p.diagnostics.size() == 3);
  // A statement cut short is reported where its line ends.
  CHECK(p.diagnostics[0].loc.line == 3);
  CHECK(p.diagnostics[0].loc.col == 16);
  CHECK(p.diagnostics[0].message == "expected an expression, got end of line");
  CHECK(p.diagnostics[1].loc.line == 5);
  CHECK(p.diagnostics[1].loc.col == 5);
  CHECK(p.diagnostics[1].message == "expected ',' or ')' to close '(', got 'let'");
  CHECK(p.diagnostics[2].loc.line == 5);
  CHECK(p.diagnostics[2].loc.col == 9);
  CHECK(p.diagnostics[2].message == "expected a name after 'let', got '='");
  // The statements that were read are kept; broken ones have no value.
  const FnDecl& f = p.file.layers.at(0).fns.at(0);
  CHECK_FALSE(f.body_ok);
  REQUIRE(f.body.size() == 4);
  CHECK(f.body[0].name == "a");
  CHECK_FALSE(f.body[0].value.has_value());
  CHECK(f.body[1].name == "b");
  CHECK_FALSE(f.body[1].value.has_value());
  CHECK(f.body[2].name == "c");
  CHECK(f.body[2].value.has_value());
  CHECK(f.body[3].kind == StmtKind::Return);
}

TEST_CASE("parser: errors in declarations skip to the next member") {
  std::string src =
      "layer L {\n"                                  // 1
      "  param w TernaryTensor[4]\n"                 // 2: missing ':'
      "  param s: Tensor[4,]\n"                      // 3: bad dim
      "  fn g(x: Tensor[4] -> Tensor[4] {\n"         // 4: missing ')'
      "    return x\n"                               // 5
      "  }\n"                                        // 6
      "  fn f(x: Tensor[4]) -> Tensor[4] {\n"        // 7
      "    return x\n"                               // 8
      "  }\n"                                        // 9
      "}\n"                                          // 10
      "garbage\n"                                    // 11
      "layer M { fn h() -> Tensr[1] { } }\n";        // 12
  ParseOutput p = parse_file(src, "m.tri");
  REQUIRE(p.diagnostics.size() == 5);
  CHECK(p.diagnostics[0].message == "expected ':' after parameter name 'w', got 'TernaryTensor'");
  CHECK(p.diagnostics[0].loc.line == 2);
  CHECK(p.diagnostics[0].loc.col == 11);
  CHECK(p.diagnostics[1].message == "expected a dimension (an integer or a symbol name), got ']'");
  CHECK(p.diagnostics[1].loc.line == 3);
  CHECK(p.diagnostics[2].message == "expected ',' or ')' after argument 'x', got '->'");
  CHECK(p.diagnostics[2].loc.line == 4);
  CHECK(p.diagnostics[3].message == "expected 'layer', got 'garbage'");
  CHECK(p.diagnostics[3].loc.line == 11);
  CHECK(p.diagnostics[4].message == "expected a type ('Tensor' or 'TernaryTensor'), got 'Tensr'");
  CHECK(p.diagnostics[4].loc.line == 12);
  REQUIRE(p.file.layers.size() == 2);
  const LayerDecl& l = p.file.layers[0];
  REQUIRE(l.params.size() == 2);
  CHECK_FALSE(l.params[0].type.has_value());
  REQUIRE(l.fns.size() == 2);
  CHECK_FALSE(l.fns[0].header_ok);
  CHECK(l.fns[1].header_ok);
  CHECK(l.fns[1].body.size() == 1);
}

TEST_CASE("parser: a bad character is reported once, by the lexer") {
  ParseOutput p = parse_file("layer L {\n fn f() -> Tensor[] {\n  return 1 $ 2\n }\n}\n", "c.tri");
  REQUIRE(p.diagnostics.size() == 1);
  CHECK(p.diagnostics[0].message == "unexpected character '$'");
  CHECK(p.diagnostics[0].loc.line == 3);
  CHECK(p.diagnostics[0].loc.col == 12);
}

TEST_CASE("parser: missing braces at the end of the file") {
  ParseOutput p = parse_file("layer L {\n fn f() -> Tensor[] {\n  return 1\n", "b.tri");
  REQUIRE(p.diagnostics.size() == 2);
  CHECK(p.diagnostics[0].message == "expected '}' to close function 'f', got end of file");
  CHECK(p.diagnostics[1].message == "expected '}' to close layer 'L', got end of file");
}

TEST_CASE("parser: deeply nested input is refused, not a stack overflow") {
  std::string src = "layer L {\n fn f(x: Tensor[]) -> Tensor[] {\n  return " + std::string(5000, '(') +
                    "x" + std::string(5000, ')') + "\n }\n}\n";
  ParseOutput p = parse_file(src, "deep.tri");
  REQUIRE(p.diagnostics.size() == 1);
  CHECK(p.diagnostics[0].message.find("nested too deeply") != std::string::npos);
}

// `x + x + ... + x` parses flat but is a tree as tall as it is long; lowering it
// recursed once per operand and overflowed the stack at 20,000 operands.
TEST_CASE("parser: a long operator chain is refused at its height limit, whatever the associativity") {
  std::string chain = "x";
  for (int k = 1; k < 20000; ++k) chain += k % 3 == 0 ? " * x" : " + x";
  std::string src = "layer L {\n fn f(x: Tensor[]) -> Tensor[] {\n  return " + chain + "\n }\n}\n";
  auto r = compile_tri(src, "chain.tri");
  REQUIRE_FALSE(r.ok());
  REQUIRE(r.error().diagnostics.size() == 1);
  const Diagnostic& d = r.error().diagnostics[0];
  CHECK(d.message.find("expression is too deep (more than 1024 levels") != std::string::npos);
  CHECK(d.loc.line == 3);
  // The same chain split by `let` every 1000 operands lowers.
  std::string split = "layer L {\n fn f(x: Tensor[]) -> Tensor[] {\n";
  for (int part = 0; part < 20; ++part) {
    split += "  let p" + std::to_string(part) + " = " + (part ? "p" + std::to_string(part - 1) : "x");
    for (int k = 0; k < 1000; ++k) split += " + x";
    split += "\n";
  }
  split += "  return p19\n }\n}\n";
  auto ok = compile_tri(split, "split.tri");
  CHECK_MESSAGE(ok.ok(), (ok.ok() ? "" : render(ok.error())));
}

}  // namespace
}  // namespace ternjit::dsl
