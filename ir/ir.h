// SPDX-License-Identifier: Apache-2.0
// ir.h - the SSA IR: typed ids, types, ops, attributes, Function and Module.
//
// A Module owns Functions and parameter declarations. A Function owns all of its
// storage in flat vectors (instructions, values, blocks) addressed by typed 32-bit
// ids; the layout (block order, instruction order per block) is kept apart from the
// storage, so erasing never dangles and copying a Function is a vector copy.
// Values are instruction results or block arguments; there are no phi nodes.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "ternjit/result.h"
#include "ternjit/types.h"

namespace ternjit::ir {

/// A typed 32-bit index. Distinct tags make ValueId and InstId incompatible.
template <class Tag>
struct Id {
  std::uint32_t index = UINT32_MAX;
  constexpr Id() = default;
  constexpr explicit Id(std::uint32_t i) : index(i) {}
  [[nodiscard]] constexpr bool valid() const { return index != UINT32_MAX; }
  friend constexpr bool operator==(Id, Id) = default;
  friend constexpr auto operator<=>(Id, Id) = default;
};
using ValueId = Id<struct ValueTag>;
using InstId = Id<struct InstTag>;
using BlockId = Id<struct BlockTag>;
/// Index into a symbol table (Function::symbols() or ParamDecl::symbols).
using SymbolId = Id<struct SymbolTag>;

// ---------------------------------------------------------------- types

/// One dimension: a static extent (>= 0) or a symbol of the enclosing table.
struct Dim {
  std::int64_t extent = -1;
  SymbolId sym;

  static constexpr Dim fixed(std::int64_t e) { return Dim{e, SymbolId{}}; }
  static constexpr Dim symbolic(SymbolId s) { return Dim{-1, s}; }
  [[nodiscard]] constexpr bool is_static() const { return extent >= 0; }
  friend constexpr bool operator==(const Dim&, const Dim&) = default;
};

/// A tensor type: element kind, shape and (t2 only) storage layout. Rank 0 is a scalar.
/// The layout is a WeightFormat (types.h, spelled by weight_format_name): Plain is the
/// logical row-major layout every op reads; a packed one is only declared (on arguments,
/// results and parameters: no op produces one) and only `tmatmul` (and ret/br/call)
/// consume it. It is part of the Type, so a pass cannot mix layouts silently. Only t2 may
/// be non-Plain.
struct Type {
  ElemKind elem = ElemKind::F32;
  std::vector<Dim> shape;
  WeightFormat layout = WeightFormat::Plain;  ///< non-Plain only for t2 (printed t2<tern2>[...])

  [[nodiscard]] std::size_t rank() const { return shape.size(); }
  /// True when every dim is static.
  [[nodiscard]] bool is_static() const;
  /// Product of the dims; nullopt when any dim is symbolic or the product exceeds
  /// kMaxElements (the verifier rejects such a type).
  [[nodiscard]] std::optional<std::int64_t> static_numel() const;
  friend bool operator==(const Type&, const Type&) = default;
};

/// The most elements a tensor type may have (2^60). The verifier, the DSL and
/// specialize_shapes enforce it, so a byte count computed from a valid type (at most 4
/// bytes an element) never overflows int64.
inline constexpr std::int64_t kMaxElements = std::int64_t{1} << 60;

/// `a * b` for non-negative extents, or nullopt when it exceeds kMaxElements. The one
/// way extents are multiplied, so no shape product overflows.
std::optional<std::int64_t> mul_extents(std::int64_t a, std::int64_t b);

/// Product of the static dims of `t` (a symbolic dim counts as 1), or nullopt when it
/// exceeds kMaxElements: then no binding of the symbols gives a valid type.
std::optional<std::int64_t> static_dims_product(const Type& t);

/// "type f32[4294967296, 4294967296] has more than 2^60 elements" when
/// static_dims_product(t) fails, else empty. `symbols` names t's symbols.
std::string too_large(const Type& t, std::span<const std::string> symbols);

// ---------------------------------------------------------------- ops

/// Op flags from ops.def.
enum class OpFlags : std::uint8_t { Pure, Effect, Term };

/// Every op, generated from ops.def.
enum class Op : std::uint8_t {
#define TERNJIT_OP(name, mnemonic, nops, nres, flags, attrs, category) name,
#include "ir/ops.def"
#undef TERNJIT_OP
};

/// The textual mnemonic of an op ("matmul").
std::string_view op_name(Op op);
/// Looks an op up by mnemonic.
std::optional<Op> parse_op(std::string_view mnemonic);
/// Operand count from ops.def, -1 when variadic.
int op_num_operands(Op op);
/// Result count from ops.def, -1 when variadic.
int op_num_results(Op op);
/// Flags from ops.def.
OpFlags op_flags(Op op);

/// What kind of operation an op is (ops.def). Passes and targets ask for a category
/// instead of keeping their own lists of ops.
enum class OpCategory : std::uint8_t {
  Source,         ///< const, param: a value from attributes or the module
  Call,           ///< call
  ControlFlow,    ///< ret, br, cond_br
  Binary,         ///< elementwise with NumPy broadcasting: add sub mul div max min
  Unary,          ///< elementwise math that is no activation: neg abs exp log sqrt rsqrt
  Activation,     ///< elementwise activations, also tmatmul epilogues: relu sigmoid tanh gelu silu
  Conversion,     ///< cast
  DataMovement,   ///< transpose, reshape, broadcast, gather, slice, concat
  LinearAlgebra,  ///< matmul
  Reduction,      ///< reduce_sum, reduce_mean, reduce_max
  Normalization,  ///< softmax, rmsnorm, layernorm
  Quantization,   ///< quantize_int8, ternarize, ternarize_absmean, quantize, tquantize, dequantize
  Kernel,         ///< tmatmul, ewise: what fusion produces
  Position,       ///< rope, causal_softmax, kv_write, attention: read a run-time position `pos`
};
/// The category from ops.def.
OpCategory op_category(Op op);
/// True for block terminators (ret, br, cond_br).
inline bool is_terminator(Op op) { return op_flags(op) == OpFlags::Term; }
/// All ops in ops.def order.
std::span<const Op> all_ops();

// ---------------------------------------------------------------- attributes

/// No attributes.
struct NoAttrs {
  friend bool operator==(const NoAttrs&, const NoAttrs&) = default;
};
/// `const`: the value(s). One value is a splat; otherwise one per element in
/// row-major order (the result type is then static). Values are exactly
/// representable in the result kind (the builder/parser round them).
struct ConstAttrs {
  std::vector<double> values;
  friend bool operator==(const ConstAttrs&, const ConstAttrs&) = default;
};
/// `param`: the module-level parameter it reads.
struct ParamAttrs {
  std::string name;
  friend bool operator==(const ParamAttrs&, const ParamAttrs&) = default;
};
/// `call`: the callee function's name.
struct CallAttrs {
  std::string callee;
  friend bool operator==(const CallAttrs&, const CallAttrs&) = default;
};
/// `cast`: the target element kind.
struct CastAttrs {
  ElemKind to = ElemKind::F32;
  friend bool operator==(const CastAttrs&, const CastAttrs&) = default;
};
/// `transpose`: result dim i is operand dim perm[i].
struct PermAttrs {
  std::vector<std::int64_t> perm;
  friend bool operator==(const PermAttrs&, const PermAttrs&) = default;
};
/// Reductions, softmax, gather and concat: the axis (0 <= axis < rank), and for
/// reductions whether the reduced axis is kept with extent 1 (softmax, gather and concat
/// have no keepdims: it stays false and is not printed).
struct AxisAttrs {
  std::int64_t axis = 0;
  bool keepdims = false;
  friend bool operator==(const AxisAttrs&, const AxisAttrs&) = default;
};
/// `rmsnorm`, `layernorm`: epsilon added to the mean of squares (the variance).
struct EpsAttrs {
  double eps = 1e-6;
  friend bool operator==(const EpsAttrs&, const EpsAttrs&) = default;
};
/// How the gradient of a quantizer passes through it (the straight-through estimator,
/// ir/README.md "Gradients"): Default leaves it to the autodiff pass's option
/// (AutodiffOptions::ste_clip); Off passes it unchanged; On only where the input lies in
/// the quantizer's range. Written `ste_clip = true | false`; Default is not written.
enum class SteClip : std::uint8_t { Default, Off, On };

/// `ternarize`: |x| > threshold keeps sign(x); the STE clipping of its gradient.
struct ThresholdAttrs {
  double threshold = 0.0;
  SteClip ste_clip = SteClip::Default;
  friend bool operator==(const ThresholdAttrs&, const ThresholdAttrs&) = default;
};
/// quantize_int8, ternarize_absmean, quantize, tquantize: the STE clipping of their
/// gradient (the fusion passes carry it from quantize_int8 to quantize and from
/// ternarize_absmean to tquantize).
struct SteAttrs {
  SteClip ste_clip = SteClip::Default;
  friend bool operator==(const SteAttrs&, const SteAttrs&) = default;
};

/// The activation a `tmatmul` epilogue applies last (the unary op of the same name).
enum class Activation : std::uint8_t { None, Relu, Gelu, Silu, Sigmoid, Tanh };

/// The spelling of an activation: "none", "relu", "gelu", "silu", "sigmoid", "tanh".
std::string_view activation_name(Activation act);
/// Parses a spelling produced by activation_name; nullopt if unknown.
std::optional<Activation> parse_activation(std::string_view name);
/// The unary op an activation applies (None: nullopt).
std::optional<Op> activation_op(Activation act);
/// The activation a unary op is (relu, gelu, silu, sigmoid, tanh); nullopt otherwise.
std::optional<Activation> activation_of(Op op);

/// `tmatmul`: which optional epilogue operands follow `x, w` (in this order:
/// x_scale, w_scale, bias, residual), the weight scale's group size and the activation
/// applied last.
struct TMatMulAttrs {
  bool x_scale = false;   ///< f32 [..., 1] per-row activation scale
  bool w_scale = false;   ///< f32 [] per-tensor, f32 [N] per-channel or (group > 0) f32 [G, N] per group
  bool bias = false;      ///< [N] of the result kind
  bool residual = false;  ///< [..., N] of the result type
  Activation act = Activation::None;
  /// 0: w_scale (if any) multiplies the whole sum. > 0 (needs w_scale): w_scale is
  /// f32[G, N] with G = ceil(K / group), and row g scales the partial sum over
  /// k in [g * group, min(K, (g + 1) * group)) inside the accumulation. Last, so that
  /// aggregate initializers of the other fields keep their meaning.
  std::int64_t group = 0;
  /// The number of epilogue operands (flags set).
  [[nodiscard]] int num_epilogue() const { return int{x_scale} + int{w_scale} + int{bias} + int{residual}; }
  friend bool operator==(const TMatMulAttrs&, const TMatMulAttrs&) = default;
};

/// The rows G of a grouped `tmatmul` weight scale: ceil(k / group) (0 for k == 0), computed
/// without overflow. Preconditions: k >= 0, group > 0.
constexpr std::int64_t grouped_scale_rows(std::int64_t k, std::int64_t group) {
  return k == 0 ? 0 : (k - 1) / group + 1;
}

/// One step of an `ewise` loop: `op` applied to slots `a` (and `b` for binary ops, -1
/// for unary). Slot i < n is operand i; slot n + j is the result of step j (< this one).
struct EwiseStep {
  Op op = Op::Add;
  std::int32_t a = 0;
  std::int32_t b = -1;
  friend bool operator==(const EwiseStep&, const EwiseStep&) = default;
};
/// `ewise`: the steps, in evaluation order; the last step's result is the op's result.
struct EwiseAttrs {
  std::vector<EwiseStep> steps;
  friend bool operator==(const EwiseAttrs&, const EwiseAttrs&) = default;
};
/// True for the ops an `ewise` step may be: the Binary, Unary and Activation categories.
bool is_ewise_step_op(Op op);
/// True for the binary ones among is_ewise_step_op (the Binary category).
bool is_ewise_binary(Op op);

/// `slice`: result dim `axis` is `size` elements of the operand starting at `start`
/// (0 <= start, start + size <= the operand's extent; checked by infer_types).
struct SliceAttrs {
  std::int64_t axis = 0;
  std::int64_t start = 0;
  std::int64_t size = 0;
  friend bool operator==(const SliceAttrs&, const SliceAttrs&) = default;
};

/// How `rope` pairs the elements it rotates: Norm pairs (2i, 2i + 1) (llama.cpp
/// ROPE_TYPE_NORM: the llama architecture); Neox pairs (i, i + D/2) (ROPE_TYPE_NEOX:
/// the bitnet architecture, GPT-NeoX, Hugging Face's rotate_half).
enum class RopeMode : std::uint8_t { Norm, Neox };
/// The spelling of a rope mode: "norm", "neox".
std::string_view rope_mode_name(RopeMode mode);
/// Parses a spelling produced by rope_mode_name; nullopt if unknown.
std::optional<RopeMode> parse_rope_mode(std::string_view name);

/// `rope`: the frequency base (freq_i = theta^(-2i/D)) and the pairing.
struct RopeAttrs {
  double theta = 10000.0;
  RopeMode mode = RopeMode::Norm;
  friend bool operator==(const RopeAttrs&, const RopeAttrs&) = default;
};

/// `kv_write`: the layer of the [L, C, H, D] cache it writes (0 <= layer < L).
struct LayerAttrs {
  std::int64_t layer = 0;
  friend bool operator==(const LayerAttrs&, const LayerAttrs&) = default;
};

/// `attention`: the layer of the caches it reads (0 <= layer < L) and the factor the
/// scores q . k are multiplied by before the softmax (usually 1 / sqrt(D)).
struct AttentionAttrs {
  std::int64_t layer = 0;
  double scale = 1.0;
  friend bool operator==(const AttentionAttrs&, const AttentionAttrs&) = default;
};

/// Which attribute struct an instruction holds: one enumerator per alternative of Attrs,
/// in the same order (NoAttrs, ConstAttrs, ..., SteAttrs, ..., AttentionAttrs).
enum class AttrsKind : std::uint8_t {
  None, Const, Param, Call, Cast, Perm, Axis, Eps, Threshold, TMatMul, Ewise, Ste,
  Slice, Rope, Layer, Attention
};

/// Op-specific data; which alternative an op uses is fixed per op in ops.def (attrs_kind).
using Attrs = std::variant<NoAttrs, ConstAttrs, ParamAttrs, CallAttrs, CastAttrs, PermAttrs,
                           AxisAttrs, EpsAttrs, ThresholdAttrs, TMatMulAttrs, EwiseAttrs, SteAttrs,
                           SliceAttrs, RopeAttrs, LayerAttrs, AttentionAttrs>;

/// The attribute struct every instruction of `op` carries (ops.def).
AttrsKind attrs_kind(Op op);
/// The attribute struct `attrs` holds.
inline AttrsKind attrs_kind(const Attrs& attrs) { return static_cast<AttrsKind>(attrs.index()); }
/// True when `attrs` holds the struct `op` carries; std::get of that struct is then safe.
inline bool attrs_match(Op op, const Attrs& attrs) { return attrs_kind(attrs) == attrs_kind(op); }

// ---------------------------------------------------------------- entities

/// A jump to a block with arguments.
struct BlockCall {
  BlockId block;
  std::vector<ValueId> args;
  friend bool operator==(const BlockCall&, const BlockCall&) = default;
};

/// One instruction: op, operands, results, attributes, successors and location.
struct InstData {
  Op op = Op::Const;
  std::vector<ValueId> operands;
  std::vector<ValueId> results;
  Attrs attrs;
  std::vector<BlockCall> targets;  ///< br: 1, cond_br: 2 (true, false), else empty
  SourceLoc loc;
  BlockId block;                   ///< the block holding it (invalid once erased)
  bool erased = false;
};

/// Where a value comes from.
enum class ValueDef : std::uint8_t { InstResult, BlockArg };

/// One SSA value.
struct ValueData {
  Type type;
  std::string name;  ///< optional; printed instead of a number when set
  ValueDef def = ValueDef::InstResult;
  InstId inst;       ///< defining instruction (InstResult)
  BlockId block;     ///< owning block (BlockArg)
  std::uint32_t index = 0;  ///< result index or argument index
};

/// One block: its name (optional), arguments and instruction order.
struct BlockData {
  std::string name;
  std::vector<ValueId> args;
  std::vector<InstId> insts;
};

/// A constraint on a symbol, checked at specialization: `K % 128 == 0`, `N >= 1`.
struct Constraint {
  enum class Kind : std::uint8_t { MultipleOf, AtLeast, AtMost, Equals };
  SymbolId sym;
  Kind kind = Kind::AtLeast;
  std::int64_t value = 0;
  friend bool operator==(const Constraint&, const Constraint&) = default;
};

/// True when extent `x` satisfies `c` (a non-positive MultipleOf divisor never holds;
/// the verifier rejects one).
bool satisfies(std::int64_t x, const Constraint& c);
/// The constraint as text with the symbol's name: "K % 128 == 0", "N >= 1".
std::string constraint_str(const Constraint& c, std::string_view symbol);

/// A function: name, symbols, signature, and the storage of its body.
/// Arguments are the entry block's arguments.
class Function {
 public:
  Function() = default;
  explicit Function(std::string name) : name_(std::move(name)) {}

  [[nodiscard]] const std::string& name() const { return name_; }
  void set_name(std::string n) { name_ = std::move(n); }
  [[nodiscard]] const SourceLoc& loc() const { return loc_; }
  void set_loc(SourceLoc l) { loc_ = std::move(l); }

  // Symbols.
  [[nodiscard]] const std::vector<std::string>& symbols() const { return symbols_; }
  /// Finds a symbol by name.
  [[nodiscard]] std::optional<SymbolId> find_symbol(std::string_view name) const;
  /// Finds or declares a symbol (a search of the table: declare many with add_symbol).
  SymbolId symbol(std::string_view name);
  /// Declares a symbol without searching. Precondition: `name` is not declared yet.
  SymbolId add_symbol(std::string name);
  [[nodiscard]] const std::string& symbol_name(SymbolId s) const { return symbols_.at(s.index); }
  /// Replaces the symbol table; the caller remaps every SymbolId in use (specialization).
  void set_symbols(std::vector<std::string> s) { symbols_ = std::move(s); }
  [[nodiscard]] const std::vector<Constraint>& constraints() const { return constraints_; }
  void add_constraint(Constraint c) { constraints_.push_back(c); }
  void set_constraints(std::vector<Constraint> c) { constraints_ = std::move(c); }

  // Signature.
  [[nodiscard]] const std::vector<Type>& result_types() const { return result_types_; }
  void set_result_types(std::vector<Type> t) { result_types_ = std::move(t); }
  /// The entry block (the first in layout). Precondition: there is one.
  [[nodiscard]] BlockId entry() const { return layout_.at(0); }
  /// The arguments: the entry block's arguments (empty if no block yet).
  [[nodiscard]] std::span<const ValueId> args() const;

  // Layout traversal.
  [[nodiscard]] std::span<const BlockId> blocks() const { return layout_; }
  [[nodiscard]] std::span<const InstId> insts(BlockId b) const { return blocks_.at(b.index).insts; }

  // Entity access.
  [[nodiscard]] const InstData& inst(InstId i) const { return insts_.at(i.index); }
  InstData& inst(InstId i) { return insts_.at(i.index); }
  [[nodiscard]] const ValueData& value(ValueId v) const { return values_.at(v.index); }
  ValueData& value(ValueId v) { return values_.at(v.index); }
  [[nodiscard]] const BlockData& block(BlockId b) const { return blocks_.at(b.index); }
  BlockData& block(BlockId b) { return blocks_.at(b.index); }
  [[nodiscard]] const Type& type_of(ValueId v) const { return values_.at(v.index).type; }
  [[nodiscard]] std::size_t num_values() const { return values_.size(); }
  [[nodiscard]] std::size_t num_insts() const { return insts_.size(); }
  [[nodiscard]] std::size_t num_blocks() const { return blocks_.size(); }

  // Construction and editing.
  /// Appends a new block to the layout.
  BlockId add_block(std::string name = {});
  /// Adds an argument to a block.
  ValueId add_block_arg(BlockId b, Type type, std::string name = {});
  /// Creates an instruction with fresh result values, appended to `b`. For an op whose
  /// attributes are all optional (SteAttrs: the quantizers), NoAttrs{} means the defaults.
  InstId append_inst(BlockId b, Op op, std::vector<ValueId> operands, std::vector<Type> result_types,
                     Attrs attrs = NoAttrs{}, SourceLoc loc = {}, std::vector<BlockCall> targets = {});
  /// Creates an instruction placed just before `before` in its block (attrs as append_inst).
  InstId insert_inst_before(InstId before, Op op, std::vector<ValueId> operands,
                            std::vector<Type> result_types, Attrs attrs = NoAttrs{}, SourceLoc loc = {});
  /// Removes an instruction from the layout. Its results must be unused afterwards.
  /// Costs a pass over its block: erase many with erase_insts.
  void erase_inst(InstId i);
  /// Removes several instructions from the layout with one pass over each block they
  /// are in. Their results must be unused afterwards.
  void erase_insts(std::span<const InstId> insts);
  /// Removes a block from the layout and erases its instructions. Precondition: it is
  /// not the entry block, and no remaining instruction uses its values or branches to it.
  void erase_block(BlockId b);
  /// erase_block for several blocks, with one pass over the layout.
  void erase_blocks(std::span<const BlockId> blocks);
  /// Replaces every use of `from` (operands and block-call args) by `to`. Costs a pass
  /// over the function: replace many with replace_uses.
  void replace_all_uses(ValueId from, ValueId to);
  /// Replaces, in one pass, every use of each value v with `with[v.index]` where that is
  /// valid (followed transitively: a replacement may itself be replaced). Values past
  /// the end of `with` stay. Precondition: the replacements form no cycle.
  void replace_uses(std::span<const ValueId> with);
  /// The terminator of a block, if its last instruction is one.
  [[nodiscard]] std::optional<InstId> terminator(BlockId b) const;

 private:
  InstId make_inst(BlockId b, Op op, std::vector<ValueId> operands, std::vector<Type> result_types,
                   Attrs attrs, SourceLoc loc, std::vector<BlockCall> targets);

  std::string name_;
  SourceLoc loc_;
  std::vector<std::string> symbols_;
  std::vector<Constraint> constraints_;
  std::vector<Type> result_types_;
  std::vector<InstData> insts_;
  std::vector<ValueData> values_;
  std::vector<BlockData> blocks_;
  std::vector<BlockId> layout_;
};

/// A module-level parameter (weights, biases): its type uses its own symbol table.
struct ParamDecl {
  std::string name;                  ///< e.g. "LinearClassifier.weights"
  Type type;
  std::vector<std::string> symbols;  ///< names of SymbolIds used in `type`
  SourceLoc loc;
};

/// A module: parameter declarations, functions and string metadata (sorted).
class Module {
 public:
  [[nodiscard]] const std::vector<ParamDecl>& params() const { return params_; }
  std::vector<ParamDecl>& params() { return params_; }
  [[nodiscard]] const std::vector<Function>& functions() const { return functions_; }
  std::vector<Function>& functions() { return functions_; }
  [[nodiscard]] const std::map<std::string, std::string>& metadata() const { return metadata_; }
  std::map<std::string, std::string>& metadata() { return metadata_; }

  /// Finds a function by name (nullptr if absent).
  [[nodiscard]] const Function* find_function(std::string_view name) const;
  Function* find_function(std::string_view name);
  /// Finds a parameter declaration by name (nullptr if absent).
  [[nodiscard]] const ParamDecl* find_param(std::string_view name) const;

 private:
  std::vector<ParamDecl> params_;
  std::vector<Function> functions_;
  std::map<std::string, std::string> metadata_;
};

// ---------------------------------------------------------------- type helpers

/// Prints a type with symbol names from `symbols`: "f32[N, 784]", scalar "f32[]".
std::string type_str(const Type& t, std::span<const std::string> symbols);
/// True when the two types are equal (kind, layout, shape) once symbols are compared by name.
bool same_type(const Type& a, std::span<const std::string> sa, const Type& b,
               std::span<const std::string> sb);
/// Re-expresses a type from one symbol table in another, declaring symbols in `f`.
Type import_type(const Type& t, std::span<const std::string> from, Function& f);

/// Checks an internal invariant: on failure prints the message and aborts.
[[noreturn]] void check_failed(const char* cond, const char* file, int line, const std::string& msg);

}  // namespace ternjit::ir

/// Our bugs are loud: `TERNJIT_CHECK(cond, "message")` aborts with the message.
#define TERNJIT_CHECK(cond, msg) \
  do {                           \
    if (!(cond)) ::ternjit::ir::check_failed(#cond, __FILE__, __LINE__, (msg)); \
  } while (0)
#define TERNJIT_UNREACHABLE(msg) ::ternjit::ir::check_failed("unreachable", __FILE__, __LINE__, (msg))
