// SPDX-License-Identifier: Apache-2.0
// ast.h - the syntax tree of a `.tri` file, as the parser produces it (unchecked).
//
// The tree is plain data with value semantics. Every node records the 1-based
// line/column of the token that diagnostics about it point at. A node the parser
// could only partly read is kept with its optional parts empty (and `ok` flags
// cleared) so later stages can skip it without reporting follow-on errors.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ternjit::dsl {

/// A 1-based line and byte column in the source file.
struct Pos {
  std::uint32_t line = 0;
  std::uint32_t col = 0;
  friend bool operator==(const Pos&, const Pos&) = default;
};

/// One dimension of a type: an integer extent, or a symbol name. A symbol may be
/// qualified by a layer name (`BitLinear.N`: the symbol N of layer BitLinear).
struct DimExpr {
  Pos pos;
  std::int64_t extent = -1;  ///< >= 0 for an integer dim
  std::string symbol;        ///< non-empty for a symbolic dim ("N" or "Layer.N")
};

/// A tensor type as written: `Tensor[...]`, `Tensor<f16>[...]` or `TernaryTensor[...]`.
struct TypeExpr {
  Pos pos;                   ///< the `Tensor` / `TernaryTensor` word
  bool ternary = false;      ///< TernaryTensor
  std::string elem;          ///< spelling inside <...>; empty when absent (f32)
  Pos elem_pos;              ///< position of `elem`
  std::vector<DimExpr> dims; ///< empty for a scalar `Tensor[]`
};

/// Expression kinds.
enum class ExprKind : std::uint8_t {
  Name,    ///< a value, argument or parameter name
  Number,  ///< an integer or float literal
  Neg,     ///< unary minus; args[0] is the operand
  Binary,  ///< args[0] op args[1]
  Call,    ///< callee(args...), Layer.fn(args...), cast<T>(args...), or an instance call
           ///< `blk[i](args...)` / `blk[i].fn(args...)` (then `callee` holds `blk[i]`)
  Index,   ///< args[0][args[1]]: a leading-axis index, a tuple element or an instance
  Member,  ///< args[0].member: a parameter of an instance (`blk[i].p`), or `Layer.S`
  Tuple,   ///< (args[0], args[1], ...): two or more values
  List,    ///< [args...]: a list of dims (reshape's shape)
  String,  ///< "text" (in `text`)
};

/// Binary operators. `@`, `*` and `/` share one precedence level (as in Python),
/// above `+` and `-`; all are left-associative.
enum class BinaryOp : std::uint8_t { Add, Sub, Mul, Div, MatMul };

/// How an operator is written: "+", "-", "*", "/", "@".
constexpr const char* binary_op_spelling(BinaryOp op) {
  switch (op) {
    case BinaryOp::Add: return "+";
    case BinaryOp::Sub: return "-";
    case BinaryOp::Mul: return "*";
    case BinaryOp::Div: return "/";
    case BinaryOp::MatMul: return "@";
  }
  return "?";
}

/// One expression node. Which fields are meaningful depends on `kind`.
struct Expr {
  ExprKind kind = ExprKind::Name;
  Pos pos;              ///< Name/Number: the token; Neg/Binary: the operator; Call: the callee
  std::string name;     ///< Name: the identifier; Call: the callee (layer name for Layer.fn)
  std::string member;   ///< Call of `Layer.fn`: "fn"; empty for a plain call
  Pos member_pos;       ///< position of `member`
  std::string type_arg; ///< Call of `cast<T>`: "T"; empty when absent
  Pos type_arg_pos;     ///< position of `type_arg`
  bool has_type_arg = false;  ///< `<...>` was written after the callee
  std::string text;     ///< Number: the spelling ("1e-5")
  double number = 0.0;  ///< Number: the value
  bool is_int = false;  ///< Number: written without '.' or exponent
  BinaryOp op = BinaryOp::Add;  ///< Binary: the operator
  std::vector<Expr> args;       ///< operands (Neg: 1, Binary: 2, Index: base and index,
                                ///< Member: the base), call arguments, or elements
  /// Call of an instance: the callee expression (`blk[i]` or `blk[i].fn`, one element);
  /// empty for every other call.
  std::vector<Expr> callee;
  /// Nodes on the longest path from here to a leaf (a leaf is 1). The parser bounds it,
  /// so every recursion over the tree (lowering, destruction) stays off the stack limit.
  int height = 1;
};

/// Statement kinds: `let name = value`, `let (a, b) = value`, `return value` and
/// `for i in lo..hi { body }`.
enum class StmtKind : std::uint8_t { Let, Return, For };

/// One statement. `value` is empty when its expression failed to parse.
struct Stmt {
  StmtKind kind = StmtKind::Let;
  Pos pos;               ///< the `let` / `return` / `for` keyword
  std::string name;      ///< Let: the bound name; For: the loop variable
  Pos name_pos;          ///< Let/For: position of `name`
  /// Let of a tuple `let (a, b) = value`: the names and their positions (`name` empty).
  std::vector<std::pair<std::string, Pos>> names;
  std::optional<Expr> value;  ///< Let/Return: the value; For: the lower bound
  std::optional<Expr> upper;  ///< For: the upper bound (exclusive)
  std::vector<Stmt> body;     ///< For: the loop body
  bool body_ok = true;        ///< For: every statement of the body parsed
};

/// A function argument `name: Type`. `type` is empty when it failed to parse.
struct ArgDecl {
  std::string name;
  Pos pos;
  std::optional<TypeExpr> type;
};

/// `fn name(args) -> Result { body }`. `header_ok` is false when the signature
/// failed to parse (the body is then not parsed); `body_ok` is false when some
/// statement failed to parse.
struct FnDecl {
  std::string name;
  Pos pos;
  std::vector<ArgDecl> args;
  std::optional<TypeExpr> result;  ///< the result type (the first one of a tuple)
  /// `-> (T1, T2, ...)`: every result type (an empty optional where one failed to
  /// parse); empty for a single result.
  std::vector<std::optional<TypeExpr>> results;
  bool tuple_result = false;       ///< the result was written as a tuple
  std::vector<Stmt> body;
  Pos close_pos;  ///< the closing `}` (or where it was expected)
  bool header_ok = true;
  bool body_ok = true;
};

/// `param name: Type`, or an array of layer instances `param name: Layer[count]`
/// (then `instance_of` names the layer and `type` is empty). `type` is empty when it
/// failed to parse.
struct ParamDecl {
  std::string name;
  Pos pos;
  std::optional<TypeExpr> type;
  std::string instance_of;          ///< Layer of `Layer[count]`; empty for a tensor
  Pos instance_pos;                 ///< position of `instance_of`
  std::optional<Expr> count;        ///< the count as written (an integer literal to check)
};

/// `layer Name { params and fns }`, members in source order. `ok` is false when
/// the header (`layer Name {`) failed to parse; the members are then not parsed.
struct LayerDecl {
  std::string name;
  Pos pos;
  std::vector<ParamDecl> params;
  std::vector<FnDecl> fns;
  bool ok = true;
};

/// A whole file: its layers in source order.
struct File {
  std::vector<LayerDecl> layers;
};

}  // namespace ternjit::dsl
