// SPDX-License-Identifier: Apache-2.0
// lower_internal.h - the .tri lowering's state and Lowerer class, shared by lower.cpp and lower_builtins.cpp.
//
// lower.cpp holds the phases (layers, parameters, signatures, call cycles, bodies) and
// expressions; lower_builtins.cpp the built-in function table and its lowering.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ir/builder.h"
#include "ir/dsl/ast.h"
#include "ir/dsl/lower.h"

namespace ternjit::dsl::lower_detail {

using ir::Op;
using ir::ValueId;

// ---------------------------------------------------------------- built-ins

/// How a built-in's arguments are lowered.
enum class BuiltinKind : std::uint8_t {
  Unary,       // f(x)
  Quantizer,   // quantize_int8(x[, ste_clip]), ternarize_absmean(x[, ste_clip])
  Binary,      // f(a, b), literals typed like an operator's
  Axis,        // f(x, axis): softmax and reductions
  RmsNorm,     // rmsnorm(x, gamma, eps)
  Transpose,   // transpose(x): reverse all dims
  Ternarize,   // ternarize(x, threshold[, ste_clip])
  Dequantize,  // dequantize(q, scale) or dequantize(x) (identity on floats)
  Cast,        // cast<T>(x)
  GroupedMatMul,  // grouped_matmul(x, w, scale[, group]): per-group weight scales
};

/// A built-in function of the DSL: name, lowering, IR op and argument counts.
struct Builtin {
  std::string_view name;
  BuiltinKind kind;
  Op op;
  int min_args;
  int max_args;
};

/// The built-in named `name`, or nullptr.
const Builtin* find_builtin(std::string_view name);

/// Element kinds a user may write in Tensor<...>.
inline constexpr ElemKind kTensorKinds[] = {ElemKind::F16, ElemKind::BF16, ElemKind::F32, ElemKind::I8,
                                     ElemKind::I32};
/// Element kinds a user may write in cast<...>.
inline constexpr ElemKind kCastKinds[] = {ElemKind::F16, ElemKind::BF16, ElemKind::F32,
                                   ElemKind::I8,  ElemKind::I32,  ElemKind::T2};

/// The kind among `kinds` spelled `s`, if any.
template <std::size_t N>
std::optional<ElemKind> find_kind(const ElemKind (&kinds)[N], std::string_view s) {
  for (ElemKind k : kinds)
    if (elem_name(k) == s) return k;
  return std::nullopt;
}

/// The kinds as "f16, bf16, f32" for messages.
template <std::size_t N>
std::string kind_list(const ElemKind (&kinds)[N]) {
  std::string s;
  for (std::size_t i = 0; i < N; ++i) s += (i ? ", " : "") + std::string(elem_name(kinds[i]));
  return s;
}

// ---------------------------------------------------------------- lowering state

/// A checked name inside a function body.
struct Binding {
  enum class Kind : std::uint8_t { Value, Param, Literal, Poison };
  Kind kind = Kind::Poison;
  ValueId value;          // Value
  std::string param;      // Param: the IR parameter name
  double number = 0.0;    // Literal
  bool is_int = false;    // Literal
  std::string text;       // Literal: its spelling
  Pos def;                // where the name was defined (for duplicate notes)
};

/// The value of an expression: an IR value, or a literal not yet given a kind (a
/// literal takes the element kind of the operand it meets).
struct Val {
  bool literal = false;
  ValueId id;
  double number = 0.0;
  bool is_int = false;
  std::string text;
  Pos pos;

  /// A literal written as `text` at `pos`.
  static Val literal_at(double number, bool is_int, std::string text, Pos pos) {
    return Val{true, ValueId{}, number, is_int, std::move(text), pos};
  }
};

/// A compile-time number written in the source (a literal, a negated one, or a name
/// bound to one by `let`).
struct ConstNumber {
  double value = 0.0;
  bool is_int = false;
  std::string text;
};

/// A layer parameter: its IR name and whether it was declared in the module.
struct ParamInfo {
  std::string ir_name;
  Pos pos;
  bool ok = false;  // declared in the module
};

/// How a function argument was declared.
enum class ArgState : std::uint8_t { Ok, Duplicate, BadType };

/// A DSL function: its declaration, IR name and checked signature.
struct FnInfo {
  const FnDecl* decl = nullptr;
  std::string layer;
  std::string ir_name;                 // "Layer.fn"
  std::size_t func_index = SIZE_MAX;   // into module.functions(); SIZE_MAX: not lowered
  bool usable = false;                 // signature fully valid: calls can be typed
  std::vector<ArgState> args;
  std::optional<ir::Type> result;
};

/// A layer: its declaration, the symbols its types use, its parameters and functions.
struct LayerInfo {
  const LayerDecl* decl = nullptr;
  std::set<std::string> symbols;             // unqualified dim names in its types
  std::vector<std::string> param_order;      // first definitions, in source order
  std::map<std::string, ParamInfo> params;
  std::map<std::string, std::size_t> fns;    // name -> index into fns_
};

/// Where a call goes.
struct CallTarget {
  enum class Kind : std::uint8_t { Fn, Builtin, Poison, Error } kind = Kind::Error;
  std::size_t fn = SIZE_MAX;
  const Builtin* builtin = nullptr;
  Pos err_pos;
  std::string err;
};

/// Checks a parsed file and lowers it: one object per lower_file call.
class Lowerer {
 public:
  /// Diagnostics are appended to `diags`; `file` must outlive the Lowerer.
  Lowerer(const File& file, std::string_view file_name, std::vector<Diagnostic>& diags)
      : file_(file), file_name_(file_name), diags_(diags) {}

  /// Runs the phases in order and returns the module (incomplete after an error).
  ir::Module run();

 private:
  // ---------------------------------------------------------------- diagnostics

  /// The source location of a DSL position.
  [[nodiscard]] SourceLoc loc(Pos p) const { return SourceLoc{file_name_, p.line, p.col}; }
  /// Reports an error at `p`, with notes.
  void error(Pos p, std::string msg, std::vector<Diagnostic> notes = {});
  /// A note at `p`, for error().
  [[nodiscard]] Diagnostic note(Pos p, std::string msg) const;
  /// Reports a duplicate definition with a note at the first; `what` is "layer",
  /// "parameter", ...; empty for a `let` name.
  void duplicate(std::string_view what, const std::string& name, Pos at, Pos first);
  /// Reports an error from the builder (that is, from ir::infer_types) at the DSL
  /// position of the operator or call; messages that do not name the op or callee
  /// get "in 'what': " in front so the user can tell which operation failed.
  /// A built-in whose op has another name (`sum` is reduce_sum) gets its own name back
  /// when the message starts with the op's.
  void ir_error(Pos p, std::string_view what, const Error& e);

  // ---------------------------------------------------------------- declarations

  /// Phase 1: registers each layer (first definition wins) and the symbols its types use.
  void declare_layers();
  /// Resolves a written type; `sym` declares a (resolved) symbol name in the right
  /// table. Reports the first problem and returns nullopt.
  template <class SymFn>
  std::optional<ir::Type> resolve_type(const TypeExpr& t, const std::string& layer, SymFn&& sym);
  /// Phase 2: declares a layer's parameters as module ParamDecls.
  void declare_params(LayerInfo& l);
  /// Phase 3: declares a layer's functions with their signatures (bodies come later).
  void declare_fns(LayerInfo& l);

  // ---------------------------------------------------------------- calls

  /// Resolves the callee of a Call expression made inside layer `current`. Plain
  /// names look for a function of the same layer, then a layer (its `forward`),
  /// then a built-in.
  CallTarget resolve_call(const LayerInfo& current, const Expr& e) const;

  /// A call from one DSL function to another, at `pos`.
  struct CallEdge {
    std::size_t to;
    Pos pos;
  };
  /// Appends the calls to DSL functions inside `e` to `out`.
  void collect_calls(const LayerInfo& l, const Expr& e, std::vector<CallEdge>& out) const;
  /// Phase 4: depth-first search in source order; an edge back to a function on the
  /// current path closes a cycle, reported once at that call.
  void check_cycles();

  // ---------------------------------------------------------------- bodies

  /// Phase 5: lowers one function's statements into its IR function.
  void lower_body(const FnInfo& info);
  /// Binds a `let` name to its value (a literal stays a literal).
  void lower_let(const Stmt& s);
  /// Lowers an expression; nullopt after an error (reported once).
  std::optional<Val> lower_expr(const Expr& e);
  /// Arithmetic on two literals is done here, in double, and gives a literal (so
  /// `1.0 - eps` still takes the kind of the tensor it meets). As in Python, integers
  /// stay integers except under `/`.
  std::optional<Val> fold(const Expr& e, const Val& a, const Val& b);
  /// The Val of an IR value.
  static Val value(ValueId id);
  /// The value of `r`, or nullopt after reporting its error as ir_error does.
  std::optional<Val> value_or_error(Result<ValueId> r, Pos p, std::string_view what);
  /// A name in scope: a value, a parameter read (one `param` per use), or a literal.
  std::optional<Val> lower_name(const Expr& e);
  /// A literal as a scalar `const` of kind `k`.
  std::optional<ValueId> materialize(const Val& v, ElemKind k);
  /// A literal standing alone (the argument of a built-in) is an f32 scalar, so that
  /// `sqrt(2)` means what it says.
  std::optional<ValueId> materialize_default(const Val& v) { return materialize(v, ElemKind::F32); }
  /// A literal meeting a value of type `other` (an operand, a declared argument or
  /// result type): see literal_kind.
  std::optional<ValueId> materialize_like(const Val& v, const ir::Type& other);
  /// The kind a literal takes next to an operand of type `other`: the operand's kind,
  /// except that t2 (and bool) operands meet i32 literals, since those kinds cannot
  /// hold most integers. A float literal next to an integer tensor, or an integer
  /// literal its kind cannot represent, is an error.
  std::optional<ElemKind> literal_kind(const Val& lit, const ir::Type& other);
  /// An elementwise or matmul op on two values, either of which may be a literal.
  std::optional<ValueId> binary(Op op, const Val& a, const Val& b, Pos pos, std::string_view what);
  /// A tensor argument: an expression, with a lone literal taking its default kind.
  std::optional<ValueId> tensor_arg(const Expr& e);
  /// A call of a DSL function, with the callee's unbound result symbols qualified by its layer.
  std::optional<Val> lower_call(const Expr& e);

  // ---------------------------------------------------------------- built-ins (lower_builtins.cpp)

  /// The number `e` stands for at compile time (literal, negated literal, `let` name).
  std::optional<ConstNumber> const_number(const Expr& e) const;
  /// A compile-time number argument of a built-in (axis, eps, threshold).
  std::optional<ConstNumber> number_arg(const Builtin& bi, const Expr& e, std::string_view what,
                                        bool need_int);
  /// A call of a built-in: checks the arguments and creates its op.
  std::optional<Val> lower_builtin(const Builtin& bi, const Expr& e);

  const File& file_;
  std::string file_name_;
  std::vector<Diagnostic>& diags_;
  ir::Module module_;
  std::map<std::string, LayerInfo> layers_;
  std::vector<LayerInfo*> layer_order_;  // first definitions, in source order
  std::vector<FnInfo> fns_;              // first definitions, in source order

  // The body being lowered.
  ir::Builder* b_ = nullptr;
  ir::Function* f_ = nullptr;
  const LayerInfo* layer_ = nullptr;
  std::map<std::string, Binding> scope_;
};

}  // namespace ternjit::dsl::lower_detail
