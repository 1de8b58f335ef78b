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
  Reshape,     // reshape(x, [d0, d1, ...])
  Pow,         // pow(x, n), square(x): multiplications
  Slice,       // slice(x, axis, start, size)
  Split,       // split(x, axis, n): a tuple of n equal slices
  Concat,      // concat(a, b, ..., axis)
  Decoder,     // gather rope layernorm causal_softmax kv_write attention (lower_ops.cpp)
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

/// The most instances one `param name: Layer[count]` declares, and the most iterations
/// of one `for` loop.
inline constexpr std::int64_t kMaxCount = 4096;
/// The most layer instances (at every nesting level together) and instanced parameters
/// one file declares.
inline constexpr std::size_t kMaxInstances = std::size_t{1} << 16;
/// Instance arrays nest at most this deep (`blk[i].sub[j]...`).
inline constexpr int kMaxInstanceDepth = 8;
/// The most expression nodes one function body may lower to after unrolling its `for`
/// loops: the budget inline-calls allows a function (kMaxInlinedSize instructions).
inline constexpr std::size_t kMaxUnrolledNodes = std::size_t{1} << 16;
/// The most expression nodes a whole file lowers to, instance copies of functions included.
inline constexpr std::size_t kMaxModuleNodes = std::size_t{1} << 20;

/// A checked name inside a function body.
struct Binding {
  enum class Kind : std::uint8_t { Value, Param, Literal, Instances, Poison };
  Kind kind = Kind::Poison;
  ValueId value;          // Value
  std::string param;      // Param: the IR parameter name; Instances: the IR prefix ("M.blk")
  double number = 0.0;    // Literal
  bool is_int = false;    // Literal
  std::string text;       // Literal: its spelling
  std::string layer;      // Instances: the instanced layer
  std::int64_t count = 0; // Instances: how many
  bool loop_var = false;  // Literal: a `for` variable (cannot be rebound)
  Pos def;                // where the name was defined (for duplicate notes)
};

/// The value of an expression: an IR value, a literal not yet given a kind (a literal
/// takes the element kind of the operand it meets), or a tuple of values.
struct Val {
  bool literal = false;
  ValueId id;
  double number = 0.0;
  bool is_int = false;
  std::string text;
  Pos pos;
  bool tuple = false;      ///< a tuple: the elements are `elems`
  std::vector<Val> elems;  ///< tuple elements (never tuples themselves)

  /// A literal written as `text` at `pos`.
  static Val literal_at(double number, bool is_int, std::string text, Pos pos) {
    Val v;
    v.literal = true;
    v.number = number;
    v.is_int = is_int;
    v.text = std::move(text);
    v.pos = pos;
    return v;
  }
};

/// A compile-time number written in the source (a literal, a negated one, or a name
/// bound to one by `let`).
struct ConstNumber {
  double value = 0.0;
  bool is_int = false;
  std::string text;
};

/// A layer parameter: its IR name and whether it was declared in the module. An array
/// of layer instances has `instance_of` set, and `ok` when its declaration checked.
struct ParamInfo {
  std::string ir_name;
  Pos pos;
  bool ok = false;  // declared in the module
  std::string instance_of;  // the instanced layer; empty for a tensor
  std::int64_t count = 0;   // instances
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
  std::vector<ir::Type> results;       // the result types (all of them valid when usable)
  std::optional<ir::Function> signature;  // the function before its body (for instance copies)
  bool body_failed = false;            // lowering its body reported an error
};

/// A function that a call may target: a DSL function, or its copy for one layer instance.
struct Callee {
  std::size_t fn = SIZE_MAX;   // into fns_
  std::string ir_name;         // "Layer.fn" or "Model.blk.3.fn"
  std::string layer;           // the layer its unbound result symbols are qualified with
};

/// An instance copy of a function waiting for its body.
struct PendingCopy {
  std::size_t fn;              // into fns_
  std::size_t func_index;      // into module.functions()
  std::string prefix;          // "Model.blk.3."
  Pos requested;               // the first call of it
};

/// A layer: its declaration, the symbols its types use, its parameters and functions.
struct LayerInfo {
  const LayerDecl* decl = nullptr;
  std::set<std::string> symbols;             // unqualified dim names in its types
  std::vector<std::string> param_order;      // first definitions, in source order
  std::map<std::string, ParamInfo> params;
  std::vector<ir::ParamDecl> param_decls;    // its tensor parameters as declared ("Layer.p")
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
  /// collect_calls over statements, `for` bodies included.
  void collect_stmt_calls(const LayerInfo& l, const std::vector<Stmt>& body, std::vector<CallEdge>& out) const;
  /// Phase 4: depth-first search in source order; an edge back to a function on the
  /// current path closes a cycle, reported once at that call.
  void check_cycles();

  // ---------------------------------------------------------------- bodies

  /// Phase 5: lowers one function's statements into module function `func_index`; its
  /// parameters are read as `prefix` + name ("Layer." or an instance's "Model.blk.3.").
  void lower_body(const FnInfo& info, std::size_t func_index, const std::string& prefix);
  /// Binds a `let` name (or the names of `let (a, b)`) to its value (a literal stays a
  /// literal). Inside a `for` body a name may be bound again.
  void lower_let(const Stmt& s);
  /// Unrolls a `for` loop (loop_carried names update the enclosing scope).
  void lower_for(const Stmt& s);
  /// Lowers the statements of a `for` body.
  void lower_loop_body(const std::vector<Stmt>& body);
  /// Poisons the names the `let`s of `body` rebind (after a loop that failed), so later
  /// uses stay quiet.
  void poison_lets(const std::vector<Stmt>& body);
  /// The return statement: the value(s) against the declared result types.
  void lower_return(const Stmt& s, const FnInfo& info);
  /// Lowers an expression to one value (a tuple is an error); nullopt after an error
  /// (reported once).
  std::optional<Val> lower_expr(const Expr& e);
  /// Lowers an expression that may be a tuple.
  std::optional<Val> lower_any(const Expr& e);
  /// `x[i]` (a leading-axis index of a tensor, or a tuple element).
  std::optional<Val> lower_index(const Expr& e);
  /// `base.member` where base is an instance: a parameter read.
  std::optional<Val> lower_member(const Expr& e);
  /// An integer known at compile time (literals, `let` literals, loop variables and
  /// arithmetic on them); `what` names it in the error when it is not one.
  std::optional<std::int64_t> const_int(const Expr& e, const std::string& what);
  /// The instance a `blk[i]` (or `blk[i].sub[j]`) chain names: its layer and IR prefix
  /// ("Model.blk.3."). Errors are reported; nullopt after one (or for a poisoned name).
  struct InstanceRef {
    const LayerInfo* layer = nullptr;
    std::string prefix;
    std::string shown;  // "blk[3]"
  };
  std::optional<InstanceRef> instance_ref(const Expr& e);
  /// The function a call of instance `inst` named `fn` targets (its copy, declared now
  /// and lowered later), or nullopt after an error at `pos`.
  std::optional<Callee> instance_callee(const InstanceRef& inst, const std::string& fn, Pos pos);
  /// The callee of a call of `fn` (an index into fns_) made inside the current body at
  /// `pos`: a function of the same layer runs with the same weights (inside an instance
  /// copy, its copy for that instance).
  std::optional<Callee> plain_callee(std::size_t fn, Pos pos);
  /// Function `fn` with its parameters read under `prefix`: the function itself for its
  /// own layer's prefix, else its copy (declared at the first request, lowered later).
  std::optional<Callee> copy_for(std::size_t fn, const std::string& prefix, Pos pos);
  /// Whether `name` may be bound by a `let` at `at` (else reports why).
  bool can_bind(const std::string& name, Pos at);
  /// Binds `name` to `v` (poisoned when empty), replacing an earlier binding.
  void bind(const std::string& name, Pos at, const std::optional<Val>& v);
  /// The nesting depth of l's instance arrays (reports cycles and too deep nesting at
  /// the array that causes them, clearing its `ok`); `memo` holds finished layers.
  int instance_depth(LayerInfo& l, int level, std::map<const LayerInfo*, int>& memo);
  /// The instanced layer the callee chain `e` of an instance call names (no index is
  /// evaluated: for the call-cycle check), or nullptr.
  const LayerInfo* instance_layer_of(const LayerInfo& l, const Expr& e) const;
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
  /// A call of `callee` with the arguments of `e` (shown as `shown` in errors).
  std::optional<Val> call_fn(const Expr& e, const Callee& callee, const std::string& shown);
  /// Phase 2b: checks the instance arrays (`param blk: Block[30]`) of every layer.
  void check_instances();
  /// Phase 2c: declares the parameters of every instance of layer `l` under `prefix`.
  void declare_instances(const LayerInfo& l, const std::string& prefix, int depth);

  // ---------------------------------------------------------------- built-ins (lower_builtins.cpp)

  /// The number `e` stands for at compile time (literal, negated literal, `let` name).
  std::optional<ConstNumber> const_number(const Expr& e) const;
  /// A compile-time number argument of a built-in (axis, eps, threshold).
  std::optional<ConstNumber> number_arg(const Builtin& bi, const Expr& e, std::string_view what,
                                        bool need_int);
  /// A call of a built-in: checks the arguments and creates its op.
  std::optional<Val> lower_builtin(const Builtin& bi, const Expr& e);
  /// reshape(x, [dims]).
  std::optional<Val> lower_reshape(const Builtin& bi, const Expr& e);
  /// pow(x, n) and square(x).
  std::optional<Val> lower_pow(const Builtin& bi, const Expr& e);
  /// slice, split and concat (lower_ops.cpp).
  std::optional<Val> lower_slicing(const Builtin& bi, const Expr& e);
  /// gather, rope, layernorm, causal_softmax, kv_write and attention (lower_ops.cpp).
  std::optional<Val> lower_decoder(const Builtin& bi, const Expr& e);
  /// A run-time position argument: an i32 scalar (an integer literal becomes one).
  std::optional<ValueId> pos_arg(const Expr& e);
  /// An axis literal of `bi` for a tensor of rank `rank`, normalized (negative counts
  /// from the end); `what` names the tensor in the range error.
  std::optional<std::int64_t> axis_arg(const Builtin& bi, const Expr& e, const ir::Type& t);
  /// `x` [d0, ...] sliced to element `k` of axis 0 and reshaped to [...] (x[k]).
  std::optional<Val> index_tensor(ValueId x, std::int64_t k, const Expr& e);

  const File& file_;
  std::string file_name_;
  std::vector<Diagnostic>& diags_;
  ir::Module module_;
  std::map<std::string, LayerInfo> layers_;
  std::vector<LayerInfo*> layer_order_;  // first definitions, in source order
  std::vector<FnInfo> fns_;              // first definitions, in source order

  std::vector<PendingCopy> pending_;          // instance copies to lower
  std::map<std::string, std::size_t> copies_; // IR name -> index into module.functions()
  std::size_t instances_ = 0;                 // instances and instanced parameters declared
  std::size_t module_nodes_ = 0;              // expression nodes lowered in the file
  bool instances_failed_ = false;             // kMaxInstances was exceeded (reported once)
  bool module_budget_failed_ = false;         // kMaxModuleNodes was exceeded (reported once)

  // The body being lowered.
  ir::Builder* b_ = nullptr;
  ir::Function* f_ = nullptr;
  const LayerInfo* layer_ = nullptr;
  std::string owner_;            // the layer the function's IR name starts with
  std::string prefix_;           // how its parameters are named: "Layer." or "Model.blk.3."
  std::map<std::string, Binding> scope_;
  std::vector<std::vector<std::string>> fresh_;  // per enclosing loop iteration: names it bound first
  std::set<std::string> used_names_;  // value names given in this body
  std::map<std::string, std::size_t> name_suffix_;  // the last suffix given to each name
  int loop_depth_ = 0;           // enclosing `for` bodies
  std::size_t body_nodes_ = 0;   // expression nodes lowered in this body
  bool budget_failed_ = false;   // the body ran out of its node budget (reported once)
};

}  // namespace ternjit::dsl::lower_detail
