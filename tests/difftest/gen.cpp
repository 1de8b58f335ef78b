// SPDX-License-Identifier: Apache-2.0
// gen.cpp - random generator of valid IR programs for the differential test of the passes.
//
// The generator keeps a pool of the values visible at the insertion point, each with a
// bound on its magnitude and its "rounding depth": how many rounding float ops lie
// between the program's inputs and the value. Ops that can round are counted; exact
// ones (neg, abs, relu, max, min, data movement, ternarize, power-of-two scaling) are
// not. Passes may move the last bit of a deep float chain (fusion, reassociation), so in
// strict mode quantizers only read values of depth <= 1: one rounding op on exact
// inputs, whose result no correct pass changes (see GenOptions::strict_quant).
//
// Random numbers come from std::mt19937_64 draws mapped by hand (no std distributions,
// whose algorithms are unspecified), so a seed gives the same program everywhere.
#include "tests/difftest/gen.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <string>

#include "ir/builder.h"
#include "ir/infer_type.h"
#include "ir/print.h"
#include "ir/verify.h"

namespace ternjit::difftest {

namespace {

using ir::Dim;
using ternjit::ElemKind;
using ir::Op;
using ir::Type;
using ir::ValueId;

constexpr std::int64_t kMaxDim = 8;  // largest static extent; also the size assumed for a symbol
constexpr double kExpLimit = 4;      // exp only sees |x| <= 4
constexpr double kGrowLimit = 64;    // values above this are rescaled before growing further
constexpr int kPosMax = 6;           // largest pos (rope, causal_softmax); kv_write/attention: pos + M <= C
constexpr std::uint64_t kDecoderStream = 0xdec0de;  // mix() index of the decoder_share draw

// splitmix64: derives independent seeds from one seed and an index.
std::uint64_t mix(std::uint64_t seed, std::uint64_t index) {
  std::uint64_t z = seed + 0x9e3779b97f4a7c15ULL * (index + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Deterministic random choices from one std::mt19937_64.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : g_(seed) {}
  /// Uniform in [0, n); n > 0 (the modulo bias is irrelevant here).
  int below(int n) { return static_cast<int>(g_() % static_cast<std::uint64_t>(n)); }
  /// Uniform in [lo, hi].
  int range(int lo, int hi) { return lo + below(hi - lo + 1); }
  /// Uniform in [0, 1).
  double unit() { return static_cast<double>(g_() >> 11) * 0x1p-53; }
  bool chance(double p) { return unit() < p; }
  template <class T>
  T pick(std::initializer_list<T> items) {
    return *(items.begin() + below(static_cast<int>(items.size())));
  }
  /// An index chosen with the given weights (not all zero).
  int weighted(const std::vector<int>& weights) {
    int total = 0;
    for (int w : weights) total += w;
    int r = below(total);
    for (std::size_t i = 0; i < weights.size(); ++i) {
      if (r < weights[i]) return static_cast<int>(i);
      r -= weights[i];
    }
    return 0;
  }

 private:
  std::mt19937_64 g_;
};

// A value visible at the insertion point.
struct Val {
  ValueId id;
  double bound = 1;  // upper bound of |element|
  int depth = 0;     // rounding float ops between the inputs and this value
  int uses = 0;
};

// The range make_inputs draws a named i32 argument of @main from (kRangesKey).
struct IntRange {
  std::string name;
  std::int64_t lo = 0, hi = 0;
};

// What every function generator of one program shares.
struct Shared {
  Rng& rng;
  ir::Module& m;
  const GenOptions& opt;
  bool decoder = false;          // this program uses the decoder ops (GenOptions::decoder_share)
  std::vector<IntRange> ranges;  // of @main's ranged arguments, in creation order
  std::vector<IntRange> unread;  // cache arguments of @main: `lo` is the first row no attention reads (kUnreadKey)
  int next_param = 0;
};

// The signature and numerics of the generated @helper, for its call sites.
struct HelperInfo {
  std::vector<Type> arg_types;  // in @helper's symbol table (N is symbol 0 when symbolic)
  bool symbolic = false;
  std::vector<double> bounds;   // per result
  std::vector<int> depths;      // per result
};

bool signed_int(ElemKind k) { return k == ElemKind::I8 || k == ElemKind::I32 || k == ElemKind::T2; }

double kind_bound(ElemKind k) {
  switch (k) {
    case ElemKind::T2: case ElemKind::Bool: return 1;
    case ElemKind::I8: return 128;
    case ElemKind::U8: return 255;
    case ElemKind::I32: return 2147483648.0;
    default: return 65504;  // only reached for floats we never make unbounded
  }
}

Type static_type(ElemKind k, const std::vector<std::int64_t>& dims) {
  Type t{k, {}};
  for (std::int64_t d : dims) t.shape.push_back(Dim::fixed(d));
  return t;
}

// Element count, counting a symbol as kMaxDim.
std::int64_t numel_bound(const Type& t) {
  std::int64_t n = 1;
  for (const Dim& d : t.shape) n *= d.is_static() ? d.extent : kMaxDim;
  return n;
}

// Builds the body of one function: a pool of values and steps that grow it.
class FuncGen {
 public:
  FuncGen(Shared& sh, ir::Function& f, bool symbolic, const HelperInfo* helper)
      : sh_(sh), rng_(sh.rng), f_(f), b_(sh.m, f), symbolic_(symbolic), helper_(helper) {
    entry_ = f_.add_block("entry");
    b_.set_block(entry_);
  }

  // ------------------------------------------------------------------ drivers

  // @main: a few arguments, then steps, maybe a diamond and a call, then `ret`.
  void build_main() {
    main_ = true;
    std::vector<std::int64_t> base = random_dims(rng_.range(1, 3));
    push_arg(static_type(ElemKind::F32, base));
    int extra = rng_.range(0, 2);
    for (int i = 0; i < extra; ++i) {
      int r = rng_.below(10);
      ElemKind k = r < 7 ? ElemKind::F32 : (r < 9 ? ElemKind::I8 : ElemKind::I32);
      push_arg(variant(static_type(k, base)));
    }
    int steps = rng_.range(sh_.opt.min_steps, sh_.opt.max_steps);
    int branch_at = rng_.chance(0.15) ? rng_.below(steps) : -1;
    int call_at = helper_ ? rng_.below(steps) : -1;
    for (int s = 0; s < steps; ++s) {
      if (s == branch_at && sh_.opt.control_flow) diamond();
      if (s == call_at) call_helper();
      step();
    }
    finish(rng_.range(2, 4));
  }

  // @helper: one or two arguments (the first one's leading dim is the symbol N when
  // symbolic), a few steps, one result.
  HelperInfo build_helper() {
    int rank = symbolic_ ? rng_.range(2, 3) : rng_.range(1, 3);
    Type t = static_type(ElemKind::F32, random_dims(rank));
    if (symbolic_) t.shape[0] = Dim::symbolic(f_.symbol("N"));
    push_arg(t);
    if (rng_.chance(0.5)) push_arg(variant(t));
    int steps = rng_.range(1, 5);
    int branch_at = rng_.chance(0.3) ? rng_.below(steps) : -1;  // the inliner splits blocks
    for (int s = 0; s < steps; ++s) {
      if (s == branch_at && sh_.opt.control_flow) diamond();
      step();
    }
    std::vector<Val> outs = {pool_.back()};
    if (rng_.chance(0.3))
      for (std::size_t i = pool_.size() - 1; i-- > 0;)
        if (pool_[i].uses == 0 && f_.value(pool_[i].id).def == ir::ValueDef::InstResult) {
          outs.push_back(pool_[i]);
          break;
        }
    HelperInfo info;
    for (ValueId a : f_.args()) info.arg_types.push_back(f_.type_of(a));
    info.symbolic = symbolic_;
    std::vector<Type> types;
    std::vector<ValueId> ids;
    for (const Val& v : outs) {
      types.push_back(type(v));
      ids.push_back(v.id);
      info.bounds.push_back(v.bound);
      info.depths.push_back(v.depth);
    }
    f_.set_result_types(types);
    make(Op::Ret, ids);
    return info;
  }

 private:
  // ------------------------------------------------------------------ emission

  std::vector<ValueId> make(Op op, std::vector<ValueId> operands, ir::Attrs attrs = ir::NoAttrs{},
                            std::vector<Type> declared = {}, std::vector<ir::BlockCall> targets = {}) {
    auto r = b_.create(op, std::move(operands), std::move(attrs), std::move(declared), {}, std::move(targets));
    TERNJIT_CHECK(r.ok(), "difftest generator built an invalid '" + std::string(ir::op_name(op)) +
                              "': " + (r.ok() ? std::string() : r.error().message) + "\n" +
                              ir::print_function(&sh_.m, f_));
    for (ValueId v : r.value()) visible_.push_back(v);
    return r.value();
  }
  ValueId make1(Op op, std::vector<ValueId> operands, ir::Attrs attrs = ir::NoAttrs{},
                std::vector<Type> declared = {}) {
    return make(op, std::move(operands), std::move(attrs), std::move(declared)).at(0);
  }
  ValueId constant(Type t, std::vector<double> values) {
    auto r = b_.constant(std::move(t), std::move(values));
    TERNJIT_CHECK(r.ok(), "difftest generator built an invalid const");
    visible_.push_back(r.value());
    return r.value();
  }
  ValueId scalar(double v) { return constant(Type{ElemKind::F32, {}}, {v}); }

  // A parameter of static type `t`; sometimes a second read of an existing one.
  ValueId param(const Type& t) {
    TERNJIT_CHECK(t.is_static(), "difftest: parameters have static types");
    std::vector<std::string> same;
    for (const ir::ParamDecl& d : sh_.m.params())
      if (d.type == t) same.push_back(d.name);
    std::string name;
    if (!same.empty() && rng_.chance(0.25)) {
      name = same[static_cast<std::size_t>(rng_.below(static_cast<int>(same.size())))];
    } else {
      name = std::string(t.elem == ElemKind::T2 ? "w" : "p") + std::to_string(sh_.next_param++);
      sh_.m.params().push_back(ir::ParamDecl{name, t, {}, {}});
    }
    auto r = b_.param(name);
    TERNJIT_CHECK(r.ok(), "difftest generator built an invalid param");
    visible_.push_back(r.value());
    return r.value();
  }

  const Type& type(ValueId v) const { return f_.type_of(v); }
  const Type& type(const Val& v) const { return f_.type_of(v.id); }

  Val push(ValueId id, double bound, int depth) {
    pool_.push_back(Val{id, bound, depth, 0});
    return pool_.back();
  }
  Val push_arg(Type t) {
    ValueId a = f_.add_block_arg(entry_, std::move(t));
    return push(a, is_float(f_.type_of(a).elem) ? 1.0 : kind_bound(f_.type_of(a).elem), 0);
  }
  // True when `id` may be used at the insertion point (it dominates it).
  bool visible(ValueId id) const {
    const ir::ValueData& d = f_.value(id);
    if (d.def == ir::ValueDef::BlockArg && d.block == entry_) return true;
    return std::find(visible_.begin(), visible_.end(), id) != visible_.end();
  }
  // Marks a pool value used and returns it.
  Val use(std::size_t idx) {
    ++pool_[idx].uses;
    return pool_[idx];
  }

  // Picks a pool value satisfying `pred`: mostly an unused one (the newest unused
  // first), so that most values end up feeding a result; else the newest or any.
  // nullopt when none qualifies.
  std::optional<std::size_t> pick(const std::function<bool(const Val&)>& pred) {
    std::vector<std::size_t> c, unused;
    for (std::size_t i = 0; i < pool_.size(); ++i) {
      if (!pred(pool_[i])) continue;
      c.push_back(i);
      if (pool_[i].uses == 0) unused.push_back(i);
    }
    if (c.empty()) return std::nullopt;
    int r = rng_.below(10);
    if (r < 4 && !unused.empty()) return unused.back();
    if (r < 6 && !unused.empty()) return unused[static_cast<std::size_t>(rng_.below(static_cast<int>(unused.size())))];
    if (r < 8) return c.back();
    return c[static_cast<std::size_t>(rng_.below(static_cast<int>(c.size())))];
  }

  bool quant_ok(const Val& v) const { return !sh_.opt.strict_quant || v.depth <= (sh_.opt.exact_quant ? 0 : 1); }

  // A float value of rank >= min_rank (a new argument when the pool has none). With
  // `quant` it may feed a quantizer; `last_static` asks for a static last dim.
  Val need_float(int min_rank, bool quant = false, bool last_static = false, int max_depth = 1 << 20) {
    auto idx = pick([&](const Val& v) {
      const Type& t = type(v);
      return is_float(t.elem) && static_cast<int>(t.rank()) >= min_rank && (!quant || quant_ok(v)) &&
             v.depth <= max_depth && (!last_static || (t.rank() > 0 && t.shape.back().is_static()));
    });
    if (idx) return use(*idx);
    push_arg(static_type(ElemKind::F32, random_dims(rng_.range(std::max(min_rank, 1), 3))));
    return use(pool_.size() - 1);
  }
  // v as f32 (a cast, exact, for the rare f16 values of the pool).
  Val as_f32(Val v) {
    if (type(v).elem == ElemKind::F32) return v;
    return Val{make1(Op::Cast, {v.id}, ir::CastAttrs{ElemKind::F32}), v.bound, v.depth, 1};
  }

  // A signed integer value (i8, i32 or t2) of rank >= min_rank; a new i8 argument if none.
  Val need_int(int min_rank) {
    auto idx = pick([&](const Val& v) {
      const Type& t = type(v);
      return signed_int(t.elem) && static_cast<int>(t.rank()) >= min_rank;
    });
    if (idx) return use(*idx);
    push_arg(static_type(ElemKind::I8, random_dims(rng_.range(std::max(min_rank, 1), 3))));
    return use(pool_.size() - 1);
  }

  // ------------------------------------------------------------------ shapes

  std::int64_t random_dim() { return rng_.chance(0.2) ? 1 : rng_.range(2, static_cast<int>(kMaxDim)); }
  // An inner extent for the decoder ops: mostly as random_dim, sometimes 9 to 40 (so that
  // vector kernels run full 8- and 16-lane bodies, not only their tails).
  std::int64_t wide_dim() { return rng_.chance(0.3) ? rng_.range(9, 40) : random_dim(); }
  std::vector<std::int64_t> random_dims(int rank) {
    std::vector<std::int64_t> d;
    for (int i = 0; i < rank; ++i) d.push_back(random_dim());
    return d;
  }

  std::optional<Type> broadcast(const Type& a, const Type& b) const {
    auto s = ir::broadcast_shapes(a.shape, b.shape, f_.symbols());
    if (!s.ok()) return std::nullopt;
    Type t{ir::promote(a.elem, b.elem), s.value()};
    if (numel_bound(t) > sh_.opt.max_elements) return std::nullopt;
    return t;
  }

  // A type that broadcasts with `t`: trailing dims kept, set to 1 or (where t has a 1)
  // stretched; leading dims sometimes dropped. Falls back to `t` itself.
  Type variant(const Type& t) {
    Type v{t.elem, {}};
    std::size_t drop = t.rank() > 1 && rng_.chance(0.3) ? static_cast<std::size_t>(rng_.below(static_cast<int>(t.rank()))) : 0;
    for (std::size_t i = drop; i < t.rank(); ++i) {
      Dim d = t.shape[i];
      if (d.is_static() && d.extent == 1 && rng_.chance(0.3)) d = Dim::fixed(rng_.range(2, static_cast<int>(kMaxDim)));
      else if (rng_.chance(0.25)) d = Dim::fixed(1);
      v.shape.push_back(d);
    }
    if (!broadcast(t, v)) return t;
    return v;
  }

  // ------------------------------------------------------------------ helpers

  // Rescales v by an exact power of two when its bound exceeds `limit`.
  Val tame(Val v, double limit) {
    if (v.bound <= limit) return v;
    int e = static_cast<int>(std::ceil(std::log2(v.bound)));
    ValueId c = scalar(std::ldexp(1.0, -e));
    ValueId r = make1(Op::Mul, {v.id, c});
    return push(r, v.bound * std::ldexp(1.0, -e), v.depth);
  }

  // An operand that broadcasts with `a` (a pool value, a constant, a parameter or a new
  // argument). Integer pool values only when int_ok.
  Val partner(Type at, bool int_ok) {
    int r = rng_.below(100);
    if (r < 40) {
      auto idx = pick([&](const Val& v) {
        const Type& t = type(v);
        bool kind_ok = is_float(t.elem) || (int_ok && signed_int(t.elem) && rng_.chance(0.5));
        return kind_ok && broadcast(at, t).has_value();
      });
      if (idx) return use(*idx);
    }
    if (r < 60) {
      double c = rng_.pick({0.5, 2.0, -1.0, 1.5, 0.25, -0.5, 3.0, 0.75, -2.0, 1.0});
      return Val{scalar(c), std::fabs(c), 0, 1};
    }
    if (r < 67) {
      double c = rng_.pick({0.5, -1.25, 2.0, 0.125});
      Type t = at;
      t.elem = ElemKind::F32;
      return Val{constant(t, {c}), std::fabs(c), 0, 1};
    }
    Type v = variant(at);
    v.elem = ElemKind::F32;
    if (r < 82 && v.is_static()) return Val{param(v), 1, 0, 1};
    return push_arg(v);
  }

  // ------------------------------------------------------------------ steps

  // The decoder steps come last, so that with their weights 0 (a program without the
  // decoder ops) the draw picks the same steps as before they existed.
  enum Step {
    kBinary, kDiv, kUnary, kTranscend, kCast, kTranspose, kReshape, kBroadcast, kReduce, kSoftmax,
    kRmsNorm, kMatMul, kBitLinear, kQuant, kIntChain, kFold, kDup, kSimplify, kDead, kConstTensor,
    kNarrowFloat, kKernel, kCall, kGather, kSlice, kConcat, kLayerNorm, kRope, kCausalSoftmax, kAttention,
    kNumSteps
  };

  void step() {
    // Weights; the symbolic helper avoids what needs static shapes everywhere.
    std::vector<int> w = {16, 4, 10, 5, 4, 3, 2, 2, 5, 2, 3, 3, 10, 6, 5, 4, 4, 5, 3, 1, 1, 5, helper_ ? 2 : 0,
                          0, 0, 0, 0, 0, 0, 0};
    if (symbolic_) {
      for (Step s : {kCast, kReshape, kBroadcast, kIntChain, kConstTensor, kNarrowFloat, kBitLinear, kReduce})
        w[s] = 0;
    }
    if (sh_.decoder) {
      // About 40% of the steps of @main. @helper has no ranged arguments (its arguments
      // come from @main's values), so only the ops without ids or pos.
      w[kSlice] = w[kConcat] = w[kLayerNorm] = 8;
      if (main_) {
        w[kGather] = w[kRope] = w[kCausalSoftmax] = 8;
        w[kAttention] = 12;
      }
    }
    switch (static_cast<Step>(rng_.weighted(w))) {
      case kBinary: binary(); break;
      case kDiv: div(); break;
      case kUnary: unary(); break;
      case kTranscend: transcend(); break;
      case kCast: cast(); break;
      case kTranspose: transpose(); break;
      case kReshape: reshape(); break;
      case kBroadcast: broadcast_op(); break;
      case kReduce: reduce(); break;
      case kSoftmax: softmax(); break;
      case kRmsNorm: rmsnorm(); break;
      case kMatMul: matmul(); break;
      case kBitLinear: bitlinear(); break;
      case kQuant: quant(); break;
      case kIntChain: int_chain(); break;
      case kFold: fold(); break;
      case kDup: dup(); break;
      case kSimplify: simplify(); break;
      case kDead: dead(); break;
      case kConstTensor: const_tensor(); break;
      case kNarrowFloat: narrow_float(); break;
      case kKernel:
        if (rng_.chance(0.6)) tmatmul();
        else ewise();
        break;
      case kCall: call_helper(); break;
      case kGather: gather(); break;
      case kSlice: slice(); break;
      case kConcat: concat(); break;
      case kLayerNorm: layernorm(); break;
      case kRope: rope(); break;
      case kCausalSoftmax: causal_softmax(); break;
      case kAttention: attention(); break;
      case kNumSteps: break;
    }
  }

  // add/sub/mul/max/min of a float value and a broadcasting partner; sometimes of two
  // integer values of any kinds (t2, bool, u8, i8, i32: promotion to i32 or wrapping).
  void binary() {
    Op op = rng_.pick({Op::Add, Op::Sub, Op::Mul, Op::Max, Op::Min});
    if (!symbolic_ && rng_.chance(0.12)) {
      auto ia = pick([&](const Val& v) { return is_integer(type(v).elem); });
      if (ia) {
        Val a = use(*ia);
        auto ib = pick([&](const Val& v) { return is_integer(type(v).elem) && broadcast(type(a), type(v)); });
        ValueId b = ib && rng_.chance(0.7) ? use(*ib).id
                                            : constant(Type{rng_.pick({ElemKind::I8, ElemKind::I32, ElemKind::T2, ElemKind::Bool}), {}},
                                                       {static_cast<double>(rng_.range(-1, 1))});
        if (!broadcast(type(a), type(b))) return;
        ValueId r = make1(op, rng_.chance(0.5) ? std::vector{a.id, b} : std::vector{b, a.id});
        push(r, kind_bound(type(r).elem), 0);
        return;
      }
    }
    Val a = need_float(0);
    if (op == Op::Mul) a = tame(a, kGrowLimit);
    Val b = partner(type(a), true);
    if (op == Op::Mul && is_float(type(b).elem)) b = tame(b, kGrowLimit);
    if (!broadcast(type(a), type(b))) return;
    bool swap = rng_.chance(0.3);
    ValueId r = make1(op, swap ? std::vector{b.id, a.id} : std::vector{a.id, b.id});
    double bound = op == Op::Mul ? a.bound * b.bound
                   : (op == Op::Add || op == Op::Sub) ? a.bound + b.bound : std::max(a.bound, b.bound);
    bool rounds = op == Op::Add || op == Op::Sub || op == Op::Mul;
    push(r, bound, std::max(a.depth, b.depth) + (rounds ? 1 : 0));
  }

  // A divisor bounded away from zero, broadcasting with `at`: returns it and its minimum.
  std::pair<Val, double> divisor(Type at) {
    switch (rng_.below(5)) {
      case 0: {
        double c = rng_.pick({0.5, 2.0, 4.0, 3.0, 1.5, 8.0});
        return {Val{scalar(c), c, 0, 1}, c};
      }
      case 1: {  // exp(y) + 1 >= 1
        Val y = tame(partner(at, false), kExpLimit);
        ValueId e = make1(Op::Exp, {y.id});
        ValueId d = make1(Op::Add, {e, scalar(1)});
        return {Val{d, std::exp(y.bound) + 1, y.depth + 2, 1}, 1.0};
      }
      case 2: {  // abs(y) + 1 >= 1
        Val y = partner(at, false);
        ValueId d = make1(Op::Add, {make1(Op::Abs, {y.id}), scalar(1)});
        return {Val{d, y.bound + 1, y.depth + 1, 1}, 1.0};
      }
      case 3: {  // sigmoid(y) + 0.5 >= 0.5
        Val y = partner(at, false);
        ValueId d = make1(Op::Add, {make1(Op::Sigmoid, {y.id}), scalar(0.5)});
        return {Val{d, 1.5, y.depth + 2, 1}, 0.5};
      }
      default: {  // a positive constant vector along the last dim
        if (at.rank() == 0 || !at.shape.back().is_static()) return {Val{scalar(2), 2, 0, 1}, 2.0};
        std::int64_t n = at.shape.back().extent;
        std::vector<double> vals;
        for (std::int64_t i = 0; i < n; ++i) vals.push_back(0.5 + 0.25 * rng_.below(7));
        return {Val{constant(static_type(ElemKind::F32, {n}), vals), 2, 0, 1}, 0.5};
      }
    }
  }

  void div() {
    Val a = need_float(0);
    auto [d, dmin] = divisor(type(a));
    if (!broadcast(type(a), type(d))) return;
    if (rng_.chance(0.15)) {  // a reciprocal
      ValueId r = make1(Op::Div, {scalar(1), d.id});
      push(r, 1 / dmin, d.depth + 1);
      return;
    }
    ValueId r = make1(Op::Div, {a.id, d.id});
    push(r, a.bound / dmin, std::max(a.depth, d.depth) + 1);
  }

  void unary() {
    Op op = rng_.pick({Op::Neg, Op::Abs, Op::Relu, Op::Sigmoid, Op::Tanh, Op::Gelu, Op::Silu});
    bool exact = op == Op::Neg || op == Op::Abs || op == Op::Relu;
    if (exact && !symbolic_ && rng_.chance(0.15)) {  // integers wrap
      Val a = need_int(0);
      push(make1(op, {a.id}), a.bound, 0);
      return;
    }
    Val a = need_float(0);
    ValueId r = make1(op, {a.id});
    if (exact) push(r, a.bound, a.depth);
    else if (op == Op::Sigmoid || op == Op::Tanh) push(r, 1, a.depth + 1);
    else push(r, std::max(a.bound, 0.3), a.depth + 1);
  }

  // exp of a bounded value; log, sqrt and rsqrt of abs(x) + 1.
  void transcend() {
    Op op = rng_.pick({Op::Exp, Op::Log, Op::Sqrt, Op::Rsqrt});
    Val a = need_float(0);
    if (op == Op::Exp) {
      if (a.bound > kExpLimit) {
        if (rng_.chance(0.5)) a = push(make1(Op::Tanh, {a.id}), 1, a.depth + 1);
        else a = tame(a, kExpLimit);
      }
      push(make1(Op::Exp, {a.id}), std::exp(a.bound), a.depth + 1);
      return;
    }
    ValueId x = make1(Op::Add, {make1(Op::Abs, {a.id}), scalar(1)});
    double xb = a.bound + 1;
    int depth = a.depth + 2;
    ValueId r = make1(op, {x});
    if (op == Op::Log) push(r, std::log(xb), depth);
    else if (op == Op::Sqrt) push(r, std::sqrt(xb), depth);
    else push(r, 1, depth);
  }

  void cast() {
    int r = rng_.below(10);
    if (r < 4) {  // float -> integer kind: a quantizer
      Val a = need_float(0, true);
      double scale = 1;
      if (a.depth == 0 && rng_.chance(0.6)) {  // spread values over several integers
        scale = rng_.pick({4.0, 50.0, 300.0});
        a = Val{make1(Op::Mul, {a.id, scalar(scale)}), a.bound * scale, a.depth + 1, 1};
      }
      ElemKind to = rng_.pick({ElemKind::I8, ElemKind::I32, ElemKind::T2, ElemKind::Bool, ElemKind::U8});
      ValueId v = make1(Op::Cast, {a.id}, ir::CastAttrs{to});
      push(v, std::min(kind_bound(to), std::ceil(a.bound)), 0);
      return;
    }
    if (r < 7) {  // integer -> f32 (exact below 2^24)
      Val a = need_int(0);
      ValueId v = make1(Op::Cast, {a.id}, ir::CastAttrs{ElemKind::F32});
      push(v, a.bound, a.bound > 16777216.0 ? 1 : 0);
      return;
    }
    if (r < 9) {  // integer -> integer (saturating)
      Val a = need_int(0);
      ElemKind to = rng_.pick({ElemKind::I8, ElemKind::I32, ElemKind::T2, ElemKind::Bool});
      ValueId v = make1(Op::Cast, {a.id}, ir::CastAttrs{to});
      push(v, std::min(kind_bound(to), a.bound), 0);
      return;
    }
    Val a = need_float(0);  // f32 -> f32: a no-op cast
    push(make1(Op::Cast, {a.id}, ir::CastAttrs{ElemKind::F32}), a.bound, a.depth);
  }

  std::vector<std::int64_t> random_perm(std::size_t rank) {
    std::vector<std::int64_t> p(rank);
    for (std::size_t i = 0; i < rank; ++i) p[i] = static_cast<std::int64_t>(i);
    do {
      for (std::size_t i = rank - 1; i > 0; --i)
        std::swap(p[i], p[static_cast<std::size_t>(rng_.below(static_cast<int>(i) + 1))]);
    } while (std::is_sorted(p.begin(), p.end()));
    return p;
  }

  void transpose() {
    auto idx = pick([&](const Val& v) { return type(v).rank() >= 2; });
    Val a = idx ? use(*idx) : need_float(2);
    ValueId r = make1(Op::Transpose, {a.id}, ir::PermAttrs{random_perm(type(a).rank())});
    push(r, a.bound, a.depth);
  }

  void reshape() {
    auto idx = pick([&](const Val& v) { return type(v).rank() >= 1 && type(v).is_static(); });
    Val a = idx ? use(*idx) : need_float(1);
    std::int64_t n = *type(a).static_numel();
    // Split n into up to 3 factors (each divisor chosen at random).
    std::vector<std::int64_t> dims;
    std::int64_t rest = n;
    int rank = rng_.range(1, 3);
    for (int i = 0; i + 1 < rank; ++i) {
      std::vector<std::int64_t> divs;
      for (std::int64_t d = 1; d <= std::min<std::int64_t>(rest, kMaxDim); ++d)
        if (rest % d == 0) divs.push_back(d);
      std::int64_t d = divs[static_cast<std::size_t>(rng_.below(static_cast<int>(divs.size())))];
      dims.push_back(d);
      rest /= d;
    }
    dims.push_back(rest);
    Type t = static_type(type(a).elem, dims);
    push(make1(Op::Reshape, {a.id}, ir::NoAttrs{}, {t}), a.bound, a.depth);
  }

  void broadcast_op() {
    auto idx = pick([&](const Val& v) { return type(v).rank() <= 2 && type(v).is_static(); });
    if (!idx) return;
    Val a = use(*idx);
    Type t = type(a);
    for (Dim& d : t.shape)
      if (d.extent == 1 && rng_.chance(0.5)) d = Dim::fixed(rng_.range(2, 4));
    if (t == type(a) || rng_.chance(0.5)) t.shape.insert(t.shape.begin(), Dim::fixed(rng_.range(2, 4)));
    if (numel_bound(t) > sh_.opt.max_elements) return;
    push(make1(Op::Broadcast, {a.id}, ir::NoAttrs{}, {t}), a.bound, a.depth);
  }

  void reduce() {
    Op op = rng_.pick({Op::ReduceSum, Op::ReduceMean, Op::ReduceMax});
    Val a = (op != Op::ReduceMean && rng_.chance(0.2)) ? need_int(1) : need_float(1);
    const Type& t = type(a);
    auto axis = static_cast<std::int64_t>(rng_.below(static_cast<int>(t.rank())));
    double extent = static_cast<double>(t.shape[static_cast<std::size_t>(axis)].is_static()
                                            ? t.shape[static_cast<std::size_t>(axis)].extent : kMaxDim);
    bool flt = is_float(t.elem);
    ValueId r = make1(op, {a.id}, ir::AxisAttrs{axis, rng_.chance(0.5)});
    if (op == Op::ReduceSum) push(r, flt ? a.bound * extent : std::min(kind_bound(ElemKind::I32), a.bound * extent), flt ? a.depth + 1 : 0);
    else if (op == Op::ReduceMean) push(r, a.bound, a.depth + 1);
    else push(r, a.bound, a.depth);
  }

  void softmax() {
    Val a = need_float(1);
    auto rank = static_cast<int>(type(a).rank());
    std::int64_t axis = symbolic_ ? rank - 1 : rng_.below(rank);
    push(make1(Op::Softmax, {a.id}, ir::AxisAttrs{axis, false}), 1, a.depth + 1);
  }

  // gamma for rmsnorm over a last dim of d: a parameter, ones, or a constant vector.
  std::pair<ValueId, double> gamma(std::int64_t d) {
    int r = rng_.below(10);
    if (r < 7) return {param(static_type(ElemKind::F32, {d})), 1};
    if (r < 9) return {constant(static_type(ElemKind::F32, {d}), {1.0}), 1};
    std::vector<double> v;
    for (std::int64_t i = 0; i < d; ++i) v.push_back(0.25 * rng_.range(-6, 6));
    return {constant(static_type(ElemKind::F32, {d}), v), 1.5};
  }

  Val rmsnorm_of(Val x) {
    std::int64_t d = type(x).shape.back().extent;
    auto [g, gb] = gamma(d);
    double eps = rng_.pick({1e-6, 1e-5, 1e-3});
    ValueId r = make1(Op::RmsNorm, {x.id, g}, ir::EpsAttrs{eps});
    return push(r, std::sqrt(static_cast<double>(d)) * gb, x.depth + 1);
  }

  void rmsnorm() { rmsnorm_of(need_float(1, false, true)); }

  // Output width for a matmul whose lhs has `rows_numel` elements besides K.
  std::int64_t out_width(std::int64_t rows_numel) {
    std::int64_t n = random_dim();
    while (n > 1 && rows_numel * n > sh_.opt.max_elements) --n;
    return n;
  }

  void matmul() {
    Val x = tame(need_float(1, false, true), 16);
    const Type xt = type(x);
    std::int64_t k = xt.shape.back().extent;
    std::int64_t rows = numel_bound(xt) / std::max<std::int64_t>(k, 1);
    std::int64_t n = out_width(rows);
    ValueId w;
    double wb = 1;
    switch (rng_.below(5)) {
      case 0: w = param(static_type(ElemKind::F32, {k, n})); break;
      case 1: w = param(static_type(ElemKind::T2, {k, n})); break;
      case 2: w = param(static_type(ElemKind::F32, {k})); break;
      case 3:
        w = make1(Op::Transpose, {param(static_type(ElemKind::F32, {n, k}))}, ir::PermAttrs{{1, 0}});
        break;
      default: {  // another value [K, N2] from the pool, when one fits
        auto idx = pick([&](const Val& v) {
          const Type& t = type(v);
          return v.id != x.id && is_float(t.elem) && t.rank() == 2 && t.shape[0] == Dim::fixed(k) &&
                 t.shape[1].is_static() && rows * t.shape[1].extent <= sh_.opt.max_elements;
        });
        if (idx) {
          Val v = tame(use(*idx), 16);
          w = v.id;
          wb = v.bound;
        } else {
          w = param(static_type(ElemKind::T2, {k, n}));
        }
      }
    }
    ValueId r = make1(Op::MatMul, {x.id, w});
    TERNJIT_CHECK(numel_bound(type(r)) <= sh_.opt.max_elements, "difftest: matmul result too large");
    push(r, static_cast<double>(k) * x.bound * wb, x.depth + 1);
  }

  // A ternary weight [K, N] in one of the forms the fusion passes see: a t2 parameter,
  // ternarize_absmean / ternarize of an f32 parameter or constant. Returns the weight and
  // an optional scale to multiply the product by (tquantize's gamma).
  std::pair<ValueId, std::optional<ValueId>> ternary_weight(std::int64_t k, std::int64_t n, bool integer) {
    int r = rng_.below(10);
    if (r < 6) return {param(static_type(ElemKind::T2, {k, n})), std::nullopt};
    if (r < 8 || integer) {
      auto tq = make(Op::TQuantize, {param(static_type(ElemKind::F32, {k, n}))});
      return {tq[0], tq[1]};
    }
    if (r < 9) return {make1(Op::TernarizeAbsmean, {param(static_type(ElemKind::F32, {k, n}))}), std::nullopt};
    std::vector<double> v;
    for (std::int64_t i = 0; i < k * n; ++i) v.push_back(0.125 * rng_.range(-8, 8));
    ValueId c = constant(static_type(ElemKind::F32, {k, n}), v);
    if (rng_.chance(0.5)) return {make1(Op::TernarizeAbsmean, {c}), std::nullopt};
    return {make1(Op::Ternarize, {c}, ir::ThresholdAttrs{0.25}), std::nullopt};
  }

  // rmsnorm -> quantize_int8 -> matmul(ternary) -> scale [-> bias] [-> activation]
  // [-> residual], or its integer form quantize -> matmul (i32) -> dequantize. The
  // epilogue varies in ways a fusion must respect: commuted operands, per-row or
  // full-shape scales and biases (which tmatmul cannot absorb), a bias that broadcasts
  // the result to a larger shape, an intermediate with a second use, and f16 math.
  void bitlinear() {
    Val x = need_float(1, true, true, sh_.opt.strict_quant ? 0 : 1 << 20);
    const Type xt = type(x);
    std::int64_t k = xt.shape.back().extent;
    std::int64_t rows = numel_bound(xt) / std::max<std::int64_t>(k, 1);
    std::int64_t n = out_width(rows);
    if (rng_.chance(0.2) && rows * k <= sh_.opt.max_elements) n = k;  // lets a residual add fit
    // rmsnorm rounds: with exact_quant its result cannot feed the quantizer.
    Val h = rng_.chance(0.8) && !(sh_.opt.strict_quant && sh_.opt.exact_quant) ? rmsnorm_of(x) : x;
    const bool integer = rng_.chance(0.3);
    const bool half = !integer && rng_.chance(0.1);  // the product and epilogue in f16
    auto [w, wscale] = ternary_weight(k, n, integer);
    ValueId y;
    double bound = static_cast<double>(k) * h.bound;
    if (integer) {
      auto q = make(Op::Quantize, {h.id});
      ValueId acc = make1(Op::MatMul, {q[0], w});
      y = make1(Op::Dequantize, {acc, q[1]});
    } else {
      ValueId qx = make1(Op::QuantizeInt8, {h.id});
      if (half) qx = make1(Op::Cast, {qx}, ir::CastAttrs{ElemKind::F16});
      y = make1(Op::MatMul, {qx, w});
    }
    const Type yt = type(y);
    const ElemKind rk = yt.elem;
    // A float operand of kind rk: f16 operands are casts of f32 parameters.
    auto as_rk = [&](ValueId v) { return rk == ElemKind::F32 ? v : make1(Op::Cast, {v}, ir::CastAttrs{rk}); };
    auto mul_or_add = [&](Op op, ValueId v) {
      return rng_.chance(0.3) ? make1(op, {v, y}) : make1(op, {y, v});
    };
    if (wscale) y = mul_or_add(Op::Mul, as_rk(*wscale));  // gamma <= max|w| <= 1
    if (rng_.chance(0.2)) push(y, bound, 9);               // the product has another use
    Type per_row = yt;  // [..., 1]
    per_row.elem = ElemKind::F32;
    per_row.shape.back() = Dim::fixed(1);
    switch (rng_.below(6)) {  // the weight scale
      case 0: case 1: y = mul_or_add(Op::Mul, as_rk(param(static_type(ElemKind::F32, {n})))); break;
      case 2: y = mul_or_add(Op::Mul, as_rk(scalar(rng_.pick({0.5, 0.125, 0.03125})))); break;
      case 3: y = mul_or_add(Op::Mul, as_rk(param(Type{ElemKind::F32, {}}))); break;
      case 4: y = mul_or_add(Op::Mul, as_rk(param(per_row))); break;  // per row: not a w_scale
      default: {
        Type full = yt;
        full.elem = ElemKind::F32;
        y = mul_or_add(Op::Mul, as_rk(param(full)));
      }
    }
    if (rng_.chance(0.4)) {
      Type b = static_type(ElemKind::F32, {n});
      int r = rng_.below(10);
      if (r == 0) b = per_row;
      else if (r == 1 && yt.rank() == 1 && 2 * n <= sh_.opt.max_elements) b = static_type(ElemKind::F32, {2, n});  // grows y
      else if (r == 2) b.shape.insert(b.shape.begin(), Dim::fixed(1));
      y = mul_or_add(Op::Add, as_rk(param(b)));
      bound += 1;
    }
    if (rng_.chance(0.7)) {
      Op act = rng_.pick({Op::Relu, Op::Relu, Op::Gelu, Op::Silu, Op::Sigmoid, Op::Tanh});
      y = make1(act, {y});
      if (act == Op::Sigmoid || act == Op::Tanh) bound = 1;
    }
    if (n == k && type(y).shape == xt.shape && rng_.chance(0.5)) {
      y = mul_or_add(Op::Add, as_rk(x.id));
      bound += x.bound;
    }
    if (half) y = make1(Op::Cast, {y}, ir::CastAttrs{ElemKind::F32});
    // Deep enough that no quantizer reads it: fusion may move its last bits.
    push(y, bound * (half ? 1.01 : 1), x.depth + 4);
  }

  // One quantizer on a value no pass may round differently.
  void quant() {
    Val x = need_float(1, true);
    switch (rng_.below(6)) {
      case 0: push(make1(Op::QuantizeInt8, {x.id}), x.bound, 1); break;
      case 1:
        push(make1(Op::Ternarize, {x.id}, ir::ThresholdAttrs{rng_.pick({0.0, 0.05, 0.3})}), 1, 0);
        break;
      case 2: push(make1(Op::TernarizeAbsmean, {x.id}), x.bound, 1); break;
      case 3: {  // quantize -> dequantize: the pair the fusion pass removes
        auto q = make(Op::Quantize, {x.id});
        push(q[0], 127, 0);
        if (rng_.chance(0.3)) push(q[1], x.bound / 127, 1);
        if (rng_.chance(0.25)) {  // another scale: not a pair to remove
          ValueId s2 = make1(Op::Mul, {q[1], scalar(rng_.pick({2.0, 0.5, -1.0}))});
          push(make1(Op::Dequantize, {q[0], s2}), 2 * x.bound, 2);
          break;
        }
        push(make1(Op::Dequantize, {q[0], q[1]}), x.bound, 1);
        break;
      }
      case 4: {
        auto t = make(Op::TQuantize, {x.id});
        push(t[0], 1, 0);
        push(make1(Op::Dequantize, {t[0], t[1]}), x.bound, 1);
        break;
      }
      default: {  // quantize_int8 twice: idempotent up to an ulp of the scale, which
                  // fuse-quantization accepts (so depth 2: no quantizer reads it)
        ValueId q = make1(Op::QuantizeInt8, {x.id});
        push(make1(Op::QuantizeInt8, {q}), x.bound, 2);
      }
    }
  }

  // Integer paths: i8 x t2 -> i32, then wrapping arithmetic.
  void int_chain() {
    ValueId q;
    double qb = 127;
    int r = rng_.below(10);
    if (r < 5) {
      auto idx = pick([&](const Val& v) {
        const Type& t = type(v);
        return t.elem == ElemKind::I8 && t.rank() >= 1 && t.shape.back().is_static();
      });
      q = idx ? use(*idx).id : push_arg(static_type(ElemKind::I8, random_dims(rng_.range(1, 3)))).id;
    } else if (r < 8) {
      Val x = need_float(1, true, true);
      q = make(Op::Quantize, {x.id})[0];
    } else {
      Val x = need_float(1, true, true);
      const bool scale = !sh_.opt.strict_quant || (x.depth == 0 && !sh_.opt.exact_quant);
      ValueId s = scale ? make1(Op::Mul, {x.id, scalar(100)}) : x.id;
      q = make1(Op::Cast, {s}, ir::CastAttrs{ElemKind::I8});
    }
    const Type qt = type(q);
    std::int64_t k = qt.shape.back().extent;
    std::int64_t n = out_width(numel_bound(qt) / std::max<std::int64_t>(k, 1));
    auto [w, unused_scale] = ternary_weight(k, n, true);
    (void)unused_scale;
    ValueId acc = make1(Op::MatMul, {q, w});
    double bound = static_cast<double>(k) * qb;
    int ops = rng_.range(1, 3);
    for (int i = 0; i < ops; ++i) {
      switch (rng_.below(7)) {
        case 0: {
          auto c = rng_.pick({7.0, -300.0, 100000.0});
          acc = make1(Op::Add, {acc, constant(Type{ElemKind::I32, {}}, {c})});
          bound = std::min(kind_bound(ElemKind::I32), bound + std::fabs(c));
          break;
        }
        case 1:  // wraps past i32
          acc = make1(Op::Mul, {acc, constant(Type{ElemKind::I32, {}}, {rng_.pick({3.0, 1000003.0, -65537.0})})});
          bound = kind_bound(ElemKind::I32);
          break;
        case 2:
          acc = make1(Op::Div, {acc, constant(Type{ElemKind::I32, {}}, {rng_.pick({2.0, 3.0, 7.0})})});
          break;
        case 3:
          acc = make1(rng_.pick({Op::Max, Op::Min}), {acc, constant(Type{ElemKind::I32, {}}, {rng_.pick({0.0, 5.0, -20.0})})});
          break;
        case 4:
          acc = make1(rng_.pick({Op::Neg, Op::Abs, Op::Relu}), {acc});
          break;
        case 5: {  // i8 arithmetic wraps at 8 bits
          ValueId a8 = make1(Op::Cast, {acc}, ir::CastAttrs{ElemKind::I8});
          Type ot = type(a8);
          ValueId other = rng_.chance(0.5) ? push_arg(ot).id : constant(Type{ElemKind::I8, {}}, {100});
          acc = make1(rng_.pick({Op::Add, Op::Mul, Op::Sub}), {a8, other});
          bound = 128;
          break;
        }
        default:
          if (type(acc).rank() >= 1)
            acc = make1(Op::ReduceSum, {acc}, ir::AxisAttrs{static_cast<std::int64_t>(type(acc).rank()) - 1, rng_.chance(0.5)});
          bound = std::min(kind_bound(ElemKind::I32), bound * 8);
      }
    }
    push(acc, bound, 0);
    if (rng_.chance(0.4)) {  // back to floats with an exact scale
      ValueId f = make1(Op::Cast, {acc}, ir::CastAttrs{ElemKind::F32});
      Val fv = push(f, bound, bound > 16777216.0 ? 1 : 0);
      tame(fv, 1);
    }
  }

  // Constant subexpressions for fold-constants, used with a pool value: scalar
  // arithmetic, transcendental functions, wrapping and saturating integer math, and
  // tensor ops (reductions, quantizers, matmul) on dense constants.
  void fold() {
    Val a = need_float(0);
    ValueId c;
    double cb;
    const bool vec = type(a).rank() > 0 && type(a).shape.back().is_static();
    const std::int64_t d = vec ? type(a).shape.back().extent : 1;
    auto dense = [&](std::vector<std::int64_t> dims) {
      std::int64_t n = 1;
      for (std::int64_t e : dims) n *= e;
      std::vector<double> v;
      for (std::int64_t i = 0; i < n; ++i) v.push_back(0.125 * rng_.range(-16, 16));
      return constant(static_type(ElemKind::F32, dims), v);
    };
    switch (rng_.below(6)) {
      case 0: {
        double x = rng_.pick({2.0, 0.5, -1.5, 3.0}), y = rng_.pick({3.0, 0.25, -2.0, 1.0});
        Op op = rng_.pick({Op::Add, Op::Sub, Op::Mul, Op::Max, Op::Div, Op::Min});
        c = make1(op, {scalar(x), scalar(y)});
        cb = std::fabs(x) * std::fabs(y) + std::fabs(x) + std::fabs(y) + 8;
        break;
      }
      case 1: {
        Op op = rng_.pick({Op::Exp, Op::Sqrt, Op::Tanh, Op::Sigmoid, Op::Neg, Op::Gelu, Op::Log, Op::Rsqrt, Op::Silu});
        c = make1(op, {scalar(rng_.pick({0.5, 2.0, 1.0}))});
        cb = 8;
        break;
      }
      case 2: {  // a vector along a's last dim
        c = make1(Op::Mul, {dense({d}), scalar(2)});
        cb = 4;
        break;
      }
      case 3: {  // integers: wrapping arithmetic, truncating division, saturating casts
        ElemKind k = rng_.pick({ElemKind::I8, ElemKind::I32});
        const bool i8 = k == ElemKind::I8;
        double x = i8 ? rng_.pick({100.0, -128.0, 77.0, -9.0}) : rng_.pick({2000000000.0, -2147483648.0, -7.0, 123456.0});
        double y = i8 ? rng_.pick({90.0, -3.0, 2.0, 127.0}) : rng_.pick({1500000000.0, 3.0, -2.0, 65536.0});
        Op op = rng_.pick({Op::Add, Op::Sub, Op::Mul, Op::Div, Op::Max, Op::Min});
        ValueId i = make1(op, {constant(Type{k, {}}, {x}), constant(Type{k, {}}, {y})});
        if (rng_.chance(0.3)) i = make1(rng_.pick({Op::Neg, Op::Abs, Op::Relu}), {i});
        if (rng_.chance(0.3)) i = make1(Op::Cast, {i}, ir::CastAttrs{rng_.pick({ElemKind::I8, ElemKind::T2, ElemKind::U8, ElemKind::Bool})});
        c = make1(Op::Cast, {i}, ir::CastAttrs{ElemKind::F32});
        c = make1(Op::Mul, {c, scalar(std::ldexp(1.0, i8 ? -7 : -31))});  // exact, to [-1, 1]
        cb = 2;
        break;
      }
      case 4: {  // float constants through saturating casts
        ElemKind k = rng_.pick({ElemKind::I8, ElemKind::T2, ElemKind::U8, ElemKind::Bool, ElemKind::I32, ElemKind::F16, ElemKind::BF16});
        double v = rng_.pick({300.75, -2.5, 0.5, 1.5, -0.0, 1e9, 65519.0});
        if (k == ElemKind::F16 && v > 65519) v = 2.5;  // no infinity
        ValueId f = constant(Type{ElemKind::F32, {}}, {v});
        c = make1(Op::Cast, {make1(Op::Cast, {f}, ir::CastAttrs{k})}, ir::CastAttrs{ElemKind::F32});
        c = make1(Op::Mul, {c, scalar(std::ldexp(1.0, -30))});
        cb = 2;
        break;
      }
      default: {  // a tensor op on dense constants, giving a vector along a's last dim
        switch (rng_.below(12)) {
          case 0: c = make1(Op::Softmax, {dense({d})}, ir::AxisAttrs{0, false}); cb = 1; break;
          case 1: c = make1(Op::QuantizeInt8, {dense({d})}); cb = 2; break;
          case 2: c = make1(Op::TernarizeAbsmean, {dense({d})}); cb = 2; break;
          case 3: c = make1(Op::Ternarize, {dense({d})}, ir::ThresholdAttrs{0.5}); cb = 1; break;
          case 4: c = make1(Op::ReduceSum, {dense({2, d})}, ir::AxisAttrs{0, false}); cb = 4; break;
          case 5: c = make1(Op::ReduceMax, {dense({2, d})}, ir::AxisAttrs{0, false}); cb = 2; break;
          case 6:
            c = make1(Op::RmsNorm, {dense({d}), constant(static_type(ElemKind::F32, {d}), {1})}, ir::EpsAttrs{1e-5});
            cb = std::sqrt(static_cast<double>(d));
            break;
          case 7: c = make1(Op::MatMul, {dense({d}), dense({d, d})}); cb = 4.0 * static_cast<double>(d); break;
          case 8:
            c = make1(Op::ReduceMean, {make1(Op::Transpose, {dense({2, d})}, ir::PermAttrs{{1, 0}})}, ir::AxisAttrs{1, false});
            cb = 2;
            break;
          case 9: {
            auto q = make(Op::Quantize, {dense({d})});
            c = make1(Op::Dequantize, {q[0], q[1]});
            cb = 2;
            break;
          }
          case 10: {
            auto t = make(Op::TQuantize, {dense({d})});
            c = make1(Op::Dequantize, {t[0], t[1]});
            cb = 2;
            break;
          }
          default: c = make1(Op::Exp, {dense({d})}); cb = std::exp(2.0);
        }
      }
    }
    Op op = rng_.pick({Op::Add, Op::Mul, Op::Sub});
    if (op == Op::Mul) a = tame(a, kGrowLimit);
    ValueId r = make1(op, {a.id, c});
    push(r, op == Op::Mul ? a.bound * cb : a.bound + cb, a.depth + 1);
  }

  // Re-emits an earlier pure instruction (CSE), often combined with the original.
  void dup() {
    auto idx = pick([&](const Val& v) {
      if (f_.value(v.id).def != ir::ValueDef::InstResult) return false;
      const ir::InstData& in = f_.inst(f_.value(v.id).inst);
      if (ir::op_flags(in.op) != ir::OpFlags::Pure) return false;
      for (ValueId o : in.operands)
        if (!visible(o)) return false;
      return true;
    });
    if (!idx) return binary();
    Val orig = use(*idx);
    const ir::InstData in = f_.inst(f_.value(orig.id).inst);
    std::vector<Type> declared;
    for (ValueId r : in.results) declared.push_back(f_.type_of(r));
    auto res = make(in.op, in.operands, in.attrs, declared);
    std::size_t which = f_.value(orig.id).index;
    Val copy = push(res[which], orig.bound, orig.depth);
    // Keep both copies alive so CSE has something to share.
    ElemKind k = type(copy).elem;
    if (is_float(k) || k == ElemKind::I8 || k == ElemKind::I32) {
      use(pool_.size() - 1);
      Op op = is_float(k) ? rng_.pick({Op::Add, Op::Sub, Op::Max}) : rng_.pick({Op::Add, Op::Max});
      push(make1(op, {orig.id, copy.id}), is_float(k) ? 2 * orig.bound : kind_bound(k),
           is_float(k) ? orig.depth + (op == Op::Max ? 0 : 1) : 0);
    }
  }

  // Identities for simplify: x*1, x+0, x-0, x/1, neg(neg(x)), double transpose, ...
  void simplify() {
    Val a = need_float(0);
    const Type at = type(a);
    auto one_like = [&](double v) {
      if (rng_.chance(0.5)) return scalar(v);
      Type t = variant(at);
      if (rng_.chance(0.1) && at.rank() < 3 && numel_bound(at) * 3 <= sh_.opt.max_elements) {
        t = at;  // a constant one larger: broadcasting must survive the rewrite
        t.shape.insert(t.shape.begin(), Dim::fixed(3));
      }
      t.elem = ElemKind::F32;
      return constant(t, {v});
    };
    ValueId r;
    switch (rng_.below(10)) {
      case 0: r = make1(Op::Mul, {a.id, one_like(1)}); break;
      case 1: r = make1(Op::Mul, {one_like(1), a.id}); break;
      case 2: r = make1(Op::Add, {a.id, one_like(0)}); break;
      case 3: r = make1(Op::Sub, {a.id, one_like(0)}); break;
      case 4: r = make1(Op::Div, {a.id, one_like(1)}); break;
      case 5: r = make1(Op::Neg, {make1(Op::Neg, {a.id})}); break;
      case 6:
        if (at.rank() >= 2) {
          auto p = random_perm(at.rank());
          std::vector<std::int64_t> inv(p.size());
          for (std::size_t i = 0; i < p.size(); ++i) inv[static_cast<std::size_t>(p[i])] = static_cast<std::int64_t>(i);
          r = make1(Op::Transpose, {make1(Op::Transpose, {a.id}, ir::PermAttrs{p})}, ir::PermAttrs{inv});
        } else {
          r = make1(Op::Max, {a.id, a.id});
        }
        break;
      case 7: r = make1(Op::Mul, {a.id, scalar(2)}); break;  // exact: x + x
      case 8: r = make1(rng_.pick({Op::Min, Op::Max}), {a.id, a.id}); break;
      default:
        if (at.is_static() && !symbolic_) r = make1(Op::Reshape, {a.id}, ir::NoAttrs{}, {at});
        else r = make1(Op::Sub, {a.id, a.id});
    }
    push(r, a.bound * 2, a.depth);
  }

  // A value nobody uses: DCE removes it.
  void dead() {
    std::size_t keep = pool_.size();
    int r = rng_.below(3);
    if (r == 0) unary();
    else if (r == 1) binary();
    else quant();
    pool_.resize(keep);
  }

  void const_tensor() {
    std::vector<std::int64_t> dims = random_dims(rng_.range(1, 2));
    std::int64_t n = 1;
    for (std::int64_t d : dims) n *= d;
    ElemKind k = rng_.chance(0.7) ? ElemKind::F32 : ElemKind::I32;
    std::vector<double> v;
    for (std::int64_t i = 0; i < n; ++i) v.push_back(k == ElemKind::F32 ? 0.0625 * rng_.range(-16, 16) : rng_.range(-50, 50));
    push(constant(static_type(k, dims), v), k == ElemKind::F32 ? 1 : 50, 0);
  }

  // f32 -> f16/bf16, used back in f32 (a cast or mixed-kind arithmetic).
  void narrow_float() {
    Val a = need_float(0, true);
    ElemKind k = rng_.pick({ElemKind::F16, ElemKind::BF16});
    ValueId h = make1(Op::Cast, {a.id}, ir::CastAttrs{k});
    ValueId r;
    if (rng_.chance(0.5)) {
      r = make1(Op::Cast, {h}, ir::CastAttrs{ElemKind::F32});
    } else {
      Val b = partner(type(a), false);
      if (type(b).elem != ElemKind::F32 || !broadcast(type(a), type(b))) b = Val{scalar(0.5), 0.5, 0, 1};
      r = make1(Op::Add, {h, b.id});
      push(r, a.bound * 1.01 + b.bound, std::max(1, b.depth) + 1);
      return;
    }
    push(r, a.bound * 1.01, 1);
  }

  // The kernel ops the fusion passes produce, as input: tmatmul and ewise.
  void tmatmul() {
    ValueId x;
    double xb = 127;
    int xd = 0;
    std::optional<ValueId> qscale;
    double qsb = 1;
    if (rng_.chance(0.5)) {  // integer path
      if (rng_.chance(0.6)) {
        Val h = need_float(1, true, true);
        auto q = make(Op::Quantize, {h.id});
        x = q[0];
        qscale = q[1];
        qsb = h.bound / 127;
      } else {
        auto idx = pick([&](const Val& v) {
          const Type& t = type(v);
          return t.elem == ElemKind::I8 && t.rank() >= 1 && t.shape.back().is_static();
        });
        x = idx ? use(*idx).id : push_arg(static_type(ElemKind::I8, random_dims(rng_.range(1, 3)))).id;
      }
    } else {
      Val v = tame(as_f32(need_float(1, false, true)), 16);
      x = v.id;
      xb = v.bound;
      xd = v.depth;
    }
    const Type xt = type(x);
    std::int64_t k = xt.shape.back().extent;
    std::int64_t n = out_width(numel_bound(xt) / std::max<std::int64_t>(k, 1));
    const ValueId w = rng_.chance(0.8) ? param(static_type(ElemKind::T2, {k, n}))
                                       : make(Op::TQuantize, {param(static_type(ElemKind::F32, {k, n}))})[0];
    ir::TMatMulAttrs a;
    std::vector<ValueId> ops = {x, w};
    double bound = static_cast<double>(k) * xb;
    Type xs_type{ElemKind::F32, xt.shape};
    xs_type.shape.back() = Dim::fixed(1);
    a.x_scale = qscale ? rng_.chance(0.8) : (xs_type.is_static() && rng_.chance(0.2));
    if (a.x_scale) {
      ops.push_back(qscale ? *qscale : param(xs_type));
      bound *= qscale ? qsb : 1;
    }
    if ((a.w_scale = rng_.chance(0.6))) ops.push_back(param(rng_.chance(0.5) ? Type{ElemKind::F32, {}} : static_type(ElemKind::F32, {n})));
    if ((a.bias = rng_.chance(0.4))) {
      ops.push_back(param(static_type(ElemKind::F32, {n})));
      bound += 1;
    }
    Type out{xt.elem == ElemKind::I8 ? ElemKind::F32 : xt.elem, xt.shape};
    out.shape.back() = Dim::fixed(n);
    if ((a.residual = rng_.chance(0.25))) {
      auto idx = pick([&](const Val& v) { return type(v) == out; });
      Val r = idx ? use(*idx) : push_arg(out);
      ops.push_back(r.id);
      bound += r.bound;
      xd = std::max(xd, r.depth);
    }
    a.act = rng_.pick({ir::Activation::None, ir::Activation::Relu, ir::Activation::Gelu, ir::Activation::Silu,
                       ir::Activation::Sigmoid, ir::Activation::Tanh});
    if (a.act == ir::Activation::Sigmoid || a.act == ir::Activation::Tanh) bound = 1;
    push(make1(Op::TMatMul, ops, a), bound, xd + 2);
  }

  void ewise() {
    // Operands: a value and up to two broadcasting partners of the same kind.
    std::vector<ValueId> ops;
    std::vector<double> slot_bound;
    int depth = 0;
    ElemKind kind = ElemKind::F32;
    auto int_idx = symbolic_ || rng_.chance(0.8) ? std::nullopt : pick([&](const Val& v) {
      return type(v).elem == ElemKind::I8 || type(v).elem == ElemKind::I32;
    });
    Type shape;
    if (int_idx) {
      Val a = use(*int_idx);
      kind = type(a).elem;
      ops.push_back(a.id);
      slot_bound.push_back(kind_bound(kind));
      shape = type(a);
      int extra = rng_.range(0, 2);
      for (int i = 0; i < extra; ++i) {
        Type t = variant(shape);
        t.elem = kind;
        ValueId v = rng_.chance(0.5) ? constant(Type{kind, {}}, {static_cast<double>(rng_.range(-9, 9))}) : push_arg(t).id;
        auto b = broadcast(shape, type(v));
        if (!b) continue;
        shape = *b;
        ops.push_back(v);
        slot_bound.push_back(kind_bound(kind));
      }
    } else {
      Val a = tame(as_f32(need_float(0)), kGrowLimit);
      ops.push_back(a.id);
      slot_bound.push_back(a.bound);
      depth = a.depth;
      shape = type(a);
      int extra = rng_.range(0, 2);
      for (int i = 0; i < extra; ++i) {
        Val b = tame(as_f32(partner(shape, false)), kGrowLimit);
        auto bt = broadcast(shape, type(b));
        if (!bt) continue;
        shape = *bt;
        ops.push_back(b.id);
        slot_bound.push_back(b.bound);
        depth = std::max(depth, b.depth);
      }
    }
    const bool flt = is_float(kind);
    std::optional<std::int32_t> one;  // slot of a constant 1 (float only)
    if (flt && rng_.chance(0.4)) {
      one = static_cast<std::int32_t>(ops.size());
      ops.push_back(scalar(1));
      slot_bound.push_back(1);
    }
    std::vector<ir::EwiseStep> steps;
    auto add_step = [&](Op op, std::int32_t a, std::int32_t b, double bound) {
      steps.push_back(ir::EwiseStep{op, a, b});
      slot_bound.push_back(bound);
      bool exact = op == Op::Neg || op == Op::Abs || op == Op::Relu || op == Op::Max || op == Op::Min;
      if (flt && !exact) ++depth;
      return static_cast<std::int32_t>(slot_bound.size() - 1);
    };
    auto sb = [&](std::int32_t s) { return slot_bound[static_cast<std::size_t>(s)]; };
    // Read every operand: fold them into one running slot.
    std::int32_t cur = 0;
    std::size_t real_ops = one ? ops.size() - 1 : ops.size();
    for (std::size_t i = 1; i < real_ops; ++i) {
      Op op = rng_.pick({Op::Add, Op::Sub, Op::Mul, Op::Max, Op::Min});
      auto j = static_cast<std::int32_t>(i);
      if (op == Op::Mul && sb(cur) * sb(j) > 1e4) op = Op::Add;
      double b = op == Op::Mul ? sb(cur) * sb(j) : (op == Op::Add || op == Op::Sub) ? sb(cur) + sb(j) : std::max(sb(cur), sb(j));
      cur = add_step(op, cur, j, flt ? b : kind_bound(kind));
    }
    int more = rng_.range(one ? 1 : 0, 3);
    if (steps.empty()) more = std::max(more, 1);
    for (int s = 0; s < more; ++s) {
      if (one && (s == 0 || rng_.chance(0.3))) {  // a positive slot: abs(x) + 1, then a domain-limited op
        std::int32_t p = add_step(Op::Add, add_step(Op::Abs, cur, -1, sb(cur)), *one, sb(cur) + 1);
        switch (rng_.below(4)) {
          case 0: cur = add_step(Op::Log, p, -1, std::log(sb(p))); break;
          case 1: cur = add_step(Op::Sqrt, p, -1, std::sqrt(sb(p))); break;
          case 2: cur = add_step(Op::Rsqrt, p, -1, 1); break;
          default: cur = add_step(Op::Div, cur, p, sb(cur)); break;
        }
        continue;
      }
      Op op = flt ? rng_.pick({Op::Neg, Op::Abs, Op::Relu, Op::Sigmoid, Op::Tanh, Op::Gelu, Op::Silu, Op::Exp, Op::Add, Op::Mul})
                  : rng_.pick({Op::Neg, Op::Abs, Op::Relu, Op::Add, Op::Mul, Op::Sub});
      if (op == Op::Add || op == Op::Mul || op == Op::Sub) {
        auto j = static_cast<std::int32_t>(rng_.below(static_cast<int>(real_ops)));
        if (flt && op == Op::Mul && sb(cur) * sb(j) > 1e4) op = Op::Add;
        double b = op == Op::Mul ? sb(cur) * sb(j) : sb(cur) + sb(j);
        cur = add_step(op, cur, j, flt ? b : kind_bound(kind));
      } else if (op == Op::Exp) {
        if (sb(cur) > kExpLimit) cur = add_step(Op::Tanh, cur, -1, 1);
        cur = add_step(Op::Exp, cur, -1, std::exp(sb(cur)));
      } else {
        double b = (op == Op::Sigmoid || op == Op::Tanh) ? 1 : std::max(sb(cur), 0.3);
        cur = add_step(op, cur, -1, b);
      }
    }
    ValueId r = make1(Op::Ewise, ops, ir::EwiseAttrs{steps});
    push(r, flt ? sb(cur) : kind_bound(kind), flt ? depth : 0);
  }

  // ------------------------------------------------------------------ decoder ops

  // A pos operand or gather ids, and the largest value they take (the smallest is 0).
  struct Ranged {
    ValueId id;
    std::int64_t hi = 0;
  };

  // A named i32 argument of @main that make_inputs draws from [lo, hi] (kRangesKey).
  ValueId ranged_arg(Type t, const char* prefix, std::int64_t lo, std::int64_t hi) {
    std::string name = prefix + std::to_string(sh_.ranges.size());
    ValueId a = f_.add_block_arg(entry_, std::move(t), name);
    sh_.ranges.push_back(IntRange{name, lo, hi});
    push(a, static_cast<double>(std::max<std::int64_t>(hi, 1)), 0);  // integer ops may read it too
    return a;
  }

  // A pos operand (i32 scalar) whose values lie in [0, hi] with hi <= max_hi, and that hi:
  // mostly a pos argument made before (ops of one program share pos, as a decoder step
  // does), else a new one; sometimes a constant, or an argument plus a constant (the next
  // step's position).
  Ranged pos_arg(std::int64_t max_hi) {
    std::vector<std::size_t> fit;
    for (std::size_t i = 0; i < pos_args_.size(); ++i)
      if (pos_args_[i].hi <= max_hi) fit.push_back(i);
    const int r = rng_.below(20);
    if (r == 0) {
      const std::int64_t v = rng_.range(0, static_cast<int>(max_hi));
      return Ranged{constant(Type{ElemKind::I32, {}}, {static_cast<double>(v)}), v};
    }
    if (r == 1 && !fit.empty()) {
      const Ranged p = pos_args_[fit[static_cast<std::size_t>(rng_.below(static_cast<int>(fit.size())))]];
      const std::int64_t k = rng_.range(0, static_cast<int>(max_hi - p.hi));
      return Ranged{make1(Op::Add, {p.id, constant(Type{ElemKind::I32, {}}, {static_cast<double>(k)})}), p.hi + k};
    }
    if (!fit.empty() && rng_.chance(0.75)) return pos_args_[fit[static_cast<std::size_t>(rng_.below(static_cast<int>(fit.size())))]];
    std::int64_t hi = rng_.range(0, static_cast<int>(max_hi));
    ValueId p = ranged_arg(Type{ElemKind::I32, {}}, "pos", 0, hi);
    pos_args_.push_back(Ranged{p, hi});
    return pos_args_.back();
  }

  // An f32 value of static shape `dims`: a pool value of that many elements or more (the
  // first ones, through a slice) reshaped, or a new argument. With `quant` only a value
  // a quantizer may read (an f16/bf16 cache stores a rounding of it).
  Val shaped(const std::vector<std::int64_t>& dims, bool quant) {
    const Type want = static_type(ElemKind::F32, dims);
    const std::int64_t n = *want.static_numel();
    if (rng_.chance(0.75)) {
      auto idx = pick([&](const Val& v) {
        const Type& t = type(v);
        return t.elem == ElemKind::F32 && t.rank() >= 1 && t.is_static() && *t.static_numel() >= n &&
               (!quant || quant_ok(v));
      });
      if (idx) {
        Val v = use(*idx);
        if (type(v) == want) return v;
        const std::int64_t have = *type(v).static_numel();
        ValueId x = v.id;
        if (have != n) {
          if (type(v).rank() != 1) x = make1(Op::Reshape, {x}, ir::NoAttrs{}, {static_type(ElemKind::F32, {have})});
          x = make1(Op::Slice, {x}, ir::SliceAttrs{0, rng_.range(0, static_cast<int>(have - n)), n});
        }
        return Val{make1(Op::Reshape, {x}, ir::NoAttrs{}, {want}), v.bound, v.depth, 1};
      }
    }
    push_arg(want);
    return use(pool_.size() - 1);
  }

  // gather of table rows by ids in range: the table a parameter (an embedding, f32, f16
  // or bf16), a pool value or a constant; the ids a ranged argument (sometimes one read
  // before) of rank 0 to 2 or a constant. f16/bf16 rows are widened to f32 (exactly).
  void gather() {
    ValueId table;
    double tb = 1;
    int td = 0;
    int r = rng_.below(10);
    auto idx = r >= 5 && r < 8 ? pick([&](const Val& v) {
      const Type& t = type(v);
      return t.elem == ElemKind::F32 && t.rank() == 2 && t.is_static();
    }) : std::nullopt;
    if (idx) {
      Val v = use(*idx);
      table = v.id, tb = v.bound, td = v.depth;
    } else {
      const std::vector<std::int64_t> dims = {rng_.range(1, 11), wide_dim()};
      if (r < 8) {
        table = param(static_type(rng_.weighted({6, 2, 2}) == 0 ? ElemKind::F32 : rng_.pick({ElemKind::F16, ElemKind::BF16}), dims));
      } else {
        std::vector<double> vals;
        for (std::int64_t i = 0; i < dims[0] * dims[1]; ++i) vals.push_back(0.125 * rng_.range(-16, 16));
        table = constant(static_type(ElemKind::F32, dims), vals);
        tb = 2;
      }
    }
    const std::int64_t v = type(table).shape[0].extent, d = type(table).shape[1].extent;
    ValueId ids;
    std::vector<std::size_t> fit;  // ids arguments made before, in range for this table
    for (std::size_t i = 0; i < ids_args_.size(); ++i)
      if (ids_args_[i].hi < v && numel_bound(type(ids_args_[i].id)) * d <= sh_.opt.max_elements) fit.push_back(i);
    if (!fit.empty() && rng_.chance(0.3)) {
      ids = ids_args_[fit[static_cast<std::size_t>(rng_.below(static_cast<int>(fit.size())))]].id;
      const Type it = type(ids);
      if (it.rank() >= 1 && rng_.chance(0.4)) {  // part of it, or flattened: the values stay in range
        if (rng_.chance(0.5)) {
          const auto e = static_cast<int>(it.shape[0].extent);
          const int start = rng_.range(0, e - 1);
          ids = make1(Op::Slice, {ids}, ir::SliceAttrs{0, start, rng_.range(1, e - start)});
        } else {
          ids = make1(Op::Reshape, {ids}, ir::NoAttrs{}, {static_type(ElemKind::I32, {*it.static_numel()})});
        }
      }
    } else {
      std::vector<std::int64_t> shape = random_dims(rng_.below(3));
      while (!shape.empty() && numel_bound(static_type(ElemKind::I32, shape)) * d > sh_.opt.max_elements) shape.pop_back();
      const Type it = static_type(ElemKind::I32, shape);
      if (rng_.chance(0.2)) {
        std::vector<double> vals;
        for (std::int64_t i = 0; i < numel_bound(it); ++i) vals.push_back(rng_.range(0, static_cast<int>(v - 1)));
        ids = constant(it, vals);
      } else {
        ids = ranged_arg(it, "ids", 0, v - 1);
        ids_args_.push_back(Ranged{ids, v - 1});
      }
    }
    ValueId g = make1(Op::Gather, {table, ids}, ir::AxisAttrs{0, false});
    if (type(g).elem != ElemKind::F32) g = make1(Op::Cast, {g}, ir::CastAttrs{ElemKind::F32});
    push(g, tb, td);
  }

  // slice along an axis with a static extent, of a value of any kind: odd starts and
  // sizes, sometimes the whole extent.
  void slice() {
    auto has_static = [&](const Type& t) {
      return std::any_of(t.shape.begin(), t.shape.end(), [](const Dim& d) { return d.is_static(); });
    };
    auto idx = pick([&](const Val& v) {
      return type(v).rank() >= 1 && type(v).layout == WeightFormat::Plain && has_static(type(v));
    });
    Val a = idx ? use(*idx) : need_float(1, false, true);
    const Type at = type(a);
    std::vector<std::int64_t> axes;
    for (std::size_t i = 0; i < at.rank(); ++i)
      if (at.shape[i].is_static()) axes.push_back(static_cast<std::int64_t>(i));
    const std::int64_t axis = axes[static_cast<std::size_t>(rng_.below(static_cast<int>(axes.size())))];
    const auto e = static_cast<int>(at.shape[static_cast<std::size_t>(axis)].extent);
    int start = 0, size = e;
    if (rng_.chance(0.85)) {
      start = rng_.range(0, e - 1);
      size = rng_.range(1, e - start);
    }
    push(make1(Op::Slice, {a.id}, ir::SliceAttrs{axis, start, size}), a.bound, a.depth);
  }

  // concat of one to three values of one kind and rank along an axis: a value with pool
  // values, slices of itself, itself again, or new arguments and parameters of another
  // extent along the axis. One operand: the identity (any extent).
  void concat() {
    auto idx = pick([&](const Val& v) { return type(v).rank() >= 1 && type(v).layout == WeightFormat::Plain; });
    Val a = idx ? use(*idx) : need_float(1);
    const Type at = type(a);
    std::vector<std::int64_t> axes;
    for (std::size_t i = 0; i < at.rank(); ++i)
      if (at.shape[i].is_static()) axes.push_back(static_cast<std::int64_t>(i));
    const int count = axes.empty() || rng_.chance(0.1) ? 1 : rng_.range(2, 3);
    const std::int64_t axis = axes.empty() ? rng_.below(static_cast<int>(at.rank()))
                                           : axes[static_cast<std::size_t>(rng_.below(static_cast<int>(axes.size())))];
    const auto ax = static_cast<std::size_t>(axis);
    std::vector<ValueId> ops = {a.id};
    double bound = a.bound;
    int depth = a.depth;
    std::int64_t total = numel_bound(at);
    for (int i = 1; i < count; ++i) {
      Type other = at;
      other.shape[ax] = Dim::fixed(random_dim());
      ValueId o = a.id;
      double ob = a.bound;
      int od = a.depth;
      int r = rng_.below(10);
      auto same_but_axis = [&](const Type& t) {
        if (t.elem != at.elem || t.rank() != at.rank() || t.layout != at.layout || !t.shape[ax].is_static()) return false;
        for (std::size_t j = 0; j < t.rank(); ++j)
          if (j != ax && !(t.shape[j] == at.shape[j])) return false;
        return true;
      };
      std::optional<std::size_t> pi = r < 4 ? pick([&](const Val& v) { return same_but_axis(type(v)); }) : std::nullopt;
      if (pi) {
        Val p = use(*pi);
        o = p.id, ob = p.bound, od = p.depth;
      } else if (r < 6) {  // a slice of `a` along the axis
        const auto e = static_cast<int>(at.shape[ax].extent);
        int start = rng_.range(0, e - 1);
        o = make1(Op::Slice, {a.id}, ir::SliceAttrs{axis, start, rng_.range(1, e - start)});
      } else if (r < 9 && (at.elem == ElemKind::F32 || at.elem == ElemKind::I8 || at.elem == ElemKind::I32)) {
        if (at.elem == ElemKind::F32 && other.is_static() && rng_.chance(0.5)) {
          o = param(other);
          ob = 1, od = 0;
        } else {
          Val arg = push_arg(other);
          use(pool_.size() - 1);
          o = arg.id, ob = arg.bound, od = 0;
        }
      }  // else `a` itself again
      if (total + numel_bound(type(o)) > sh_.opt.max_elements) continue;
      total += numel_bound(type(o));
      ops.insert(ops.begin() + rng_.below(static_cast<int>(ops.size()) + 1), o);
      bound = std::max(bound, ob);
      depth = std::max(depth, od);
    }
    push(make1(Op::Concat, ops, ir::AxisAttrs{axis, false}), bound, depth);
  }

  // layernorm over a static last dim. Its (x - mean) / sqrt(var + eps) turns an absolute
  // error of x into one up to 1/sqrt(eps) times larger where a row is nearly constant, so
  // x is tamed to |x| <= 4 and a small eps only normalizes exact values (depth 0).
  void layernorm() {
    Val x = tame(rng_.chance(0.3) ? shaped({rng_.range(1, 4), wide_dim()}, false) : need_float(1, false, true), 4);
    const std::int64_t d = type(x).shape.back().extent;
    auto [g, gb] = gamma(d);
    ValueId beta;
    double bb = 1;
    switch (rng_.below(4)) {
      case 0: beta = constant(static_type(ElemKind::F32, {d}), {0.0}); bb = 0; break;
      case 1: {
        std::vector<double> v;
        for (std::int64_t i = 0; i < d; ++i) v.push_back(0.25 * rng_.range(-4, 4));
        beta = constant(static_type(ElemKind::F32, {d}), v);
        break;
      }
      default: beta = param(static_type(ElemKind::F32, {d}));
    }
    double eps = x.depth == 0 ? rng_.pick({1e-5, 1e-3, 0.01, 0.1}) : rng_.pick({0.01, 0.1});
    ValueId r = make1(Op::LayerNorm, {x.id, g, beta}, ir::EpsAttrs{eps});
    push(r, std::sqrt(static_cast<double>(d)) * gb + bb, x.depth + 1);
  }

  // rope of an f32 [M, H, D] (D even) at rows pos + m; it keeps each pair's norm, so an
  // element is at most sqrt(2) times the input's bound.
  Val rope_of(Val x, ValueId pos, const ir::RopeAttrs& a) {
    return push(make1(Op::Rope, {x.id, pos}, a), x.bound * std::sqrt(2.0), x.depth + 1);
  }
  ir::RopeAttrs random_rope() {
    return ir::RopeAttrs{rng_.pick({10000.0, 500000.0, 100.0, 10.0}), rng_.chance(0.5) ? ir::RopeMode::Norm : ir::RopeMode::Neox};
  }

  void rope() {
    auto idx = rng_.chance(0.6) ? pick([&](const Val& v) {
      const Type& t = type(v);
      return t.elem == ElemKind::F32 && t.rank() == 3 && t.is_static() && t.shape[2].extent % 2 == 0;
    }) : std::nullopt;
    Val x = idx ? use(*idx)
                : shaped({rng_.range(1, 4), rng_.range(1, 3), 2 * rng_.range(1, rng_.chance(0.3) ? 16 : 4)}, false);
    const ValueId pos = pos_arg(kPosMax).id;
    const ir::RopeAttrs a = random_rope();
    rope_of(x, pos, a);
    if (rng_.chance(0.15)) {  // the same operands in the other mode: no CSE candidate
      ir::RopeAttrs b = a;
      b.mode = a.mode == ir::RopeMode::Norm ? ir::RopeMode::Neox : ir::RopeMode::Norm;
      rope_of(x, pos, b);
    }
  }

  void causal_softmax() {
    Val x = tame(rng_.chance(0.3) ? shaped({rng_.range(1, 3), rng_.range(1, 4), wide_dim()}, false) : need_float(2), kGrowLimit);
    push(make1(Op::CausalSoftmax, {x.id, pos_arg(kPosMax).id}), 1, x.depth + 1);
  }

  // One decoder attention step on a pair of KV caches [L, C, HKV, D] (arguments of
  // @main, or the caches an earlier step wrote: a chain of writes to several layers):
  // mostly q and k rotated by rope, kv_write of the new K and V rows at pos into one
  // layer, attention over the written caches (GQA: HQ = g * HKV); sometimes attention
  // over caches as they are, or a write nobody reads but `ret`. f16/bf16 caches round
  // the rows they store, so their rows are values a quantizer may read (no pass or
  // target may move their last bit). The result is a convex combination of V rows:
  // bounded by V's bound.
  void attention() {
    CachePair c;
    if (!caches_.empty() && rng_.chance(0.5)) {
      c = rng_.chance(0.7) ? caches_.back() : caches_[static_cast<std::size_t>(rng_.below(static_cast<int>(caches_.size())))];
    } else {
      const int r = rng_.below(10);
      const ElemKind kind = r < 6 ? ElemKind::F32 : r < 8 ? ElemKind::F16 : ElemKind::BF16;
      // D sometimes 40 to 80: vector kernels blocked by 64 values run a full block and a tail.
      std::int64_t l = rng_.range(1, 3), cap = rng_.chance(0.25) ? rng_.range(10, 24) : rng_.range(1, 9),
                   hkv = rng_.range(1, 2), d = rng_.chance(0.15) ? rng_.range(40, 80) : std::min<std::int64_t>(wide_dim(), 24);
      while (l * cap * hkv * d > sh_.opt.max_elements) {
        if (l > 1) --l;
        else if (hkv > 1) --hkv;
        else if (cap > 2) --cap;
        else d = std::max<std::int64_t>(1, d - 1);
      }
      const Type ct = static_type(kind, {l, cap, hkv, d});
      auto cache_arg = [&](std::size_t& root) {
        root = sh_.unread.size();
        sh_.unread.push_back(IntRange{"cache" + std::to_string(root), 0, 0});
        return f_.add_block_arg(entry_, ct, sh_.unread.back().name);
      };
      c.k = cache_arg(c.root_k);
      if (rng_.chance(0.1)) c.v = c.k, c.root_v = c.root_k;  // one buffer as both caches
      else c.v = cache_arg(c.root_v);
      caches_.push_back(c);
    }
    const Type ct = type(c.k);
    const ElemKind kind = ct.elem;
    const std::int64_t l = ct.shape[0].extent, cap = ct.shape[1].extent, hkv = ct.shape[2].extent,
                       d = ct.shape[3].extent;
    const std::int64_t m = rng_.range(1, static_cast<int>(std::min<std::int64_t>(rng_.chance(0.2) ? 6 : 3, cap)));
    const Ranged pos_range = pos_arg(cap - m);
    const ValueId pos = pos_range.id;
    const std::int64_t layer = rng_.below(static_cast<int>(l));
    // g = HQ / HKV up to 5: kernels blocked by 4 query heads run a full block and a tail.
    std::int64_t hq = hkv * rng_.range(1, 5);
    while (hq > hkv && m * hq * d > sh_.opt.max_elements) hq -= hkv;
    const bool write = rng_.chance(0.8);
    const bool attend = !write || rng_.chance(0.85);
    const bool rotate = d % 2 == 0 && rng_.chance(0.6);
    const ir::RopeAttrs ra = random_rope();
    const bool narrow = kind != ElemKind::F32;
    CachePair next = c;
    if (write) {
      const std::int64_t wlayer = rng_.chance(0.85) ? layer : rng_.below(static_cast<int>(l));
      const bool write_v = c.v != c.k && rng_.chance(0.85);
      for (bool is_k : {true, false}) {
        if (!is_k && !write_v) continue;
        Val rows = tame(shaped({m, hkv, d}, narrow), 4);
        if (is_k && rotate && (!narrow || quant_ok(Val{rows.id, rows.bound, rows.depth + 1, 0})))
          rows = rope_of(rows, pos, ra);
        ValueId rid = rows.id;
        if (narrow && rng_.chance(0.3)) rid = make1(Op::Cast, {rid}, ir::CastAttrs{kind});  // rows of the cache's kind
        ValueId& cache = is_k ? next.k : next.v;
        ValueId w = make1(Op::KvWrite, {cache, rid, pos}, ir::LayerAttrs{wlayer});
        // The same write again, returned: CSE shares it, unless it writes another layer.
        const bool twice = rng_.chance(0.12);
        ValueId w2 = twice ? make1(Op::KvWrite, {cache, rid, pos}, ir::LayerAttrs{rng_.chance(0.5) ? wlayer : rng_.below(static_cast<int>(l))}) : w;
        double& b = is_k ? next.kb : next.vb;
        int& dp = is_k ? next.kd : next.vd;
        b = std::max(b, rows.bound) * (narrow ? 1.01 : 1);
        dp = std::max(dp, rows.depth);
        cache = w;
        written_.push_back(Val{w, b, dp, 0});
        if (twice) written_.push_back(Val{w2, b, dp, 0});
      }
      if (c.v == c.k) next.v = next.k, next.vb = next.kb, next.vd = next.kd;  // one buffer as both caches
      caches_.push_back(next);
    }
    if (!attend) return;
    Val q = tame(shaped({m, hq, d}, false), 4);
    if (rotate) q = rope_of(q, pos, ra);
    const double scale = rng_.pick({1 / std::sqrt(static_cast<double>(d)), 0.5, 1.0, 0.125});
    // Reads the written caches (the decoder), or sometimes those before the write (then
    // the write may not update its operand in place).
    const CachePair& read = write && rng_.chance(0.15) ? c : next;
    // A score scale * q . k sums D products in f32: its error is up to D 2^-24 times
    // scale * sum |q_i k_i| <= scale D |q| |k|, which q is tamed to keep <= 8 (the error
    // of the result is then <= 2 * 8 D 2^-24 |V|, 8e-5 |V| at D = 80: targets.h).
    q = tame(q, 8 / (scale * static_cast<double>(d) * read.kb));
    // Rows [0, pos + m] are read, pos <= its range's hi: later rows of the arguments the
    // caches come from may be NaN (make_inputs, kUnreadKey).
    const std::int64_t reads = pos_range.hi + m;
    for (std::size_t root : {read.root_k, read.root_v}) sh_.unread[root].lo = std::max(sh_.unread[root].lo, reads);
    ValueId att = make1(Op::Attention, {q.id, read.k, read.v, pos}, ir::AttentionAttrs{layer, scale});
    push(att, read.vb, std::max({q.depth, read.kd, read.vd}) + 1);
    if (rng_.chance(0.1)) {  // the same operands with another layer or scale: no CSE candidate
      ir::AttentionAttrs other{layer, scale};
      if (l > 1 && rng_.chance(0.5)) other.layer = (layer + 1) % l;
      else other.scale = scale * 0.5;
      push(make1(Op::Attention, {q.id, read.k, read.v, pos}, other), read.vb, std::max({q.depth, read.kd, read.vd}) + 1);
    }
  }

  // ------------------------------------------------------------------ structure

  // cond_br to two blocks that each compute a value of one type, joined by a block
  // argument. The condition is a constant (folding removes the diamond) or data.
  void diamond() {
    Val a = need_float(0);
    const Type t = type(a);
    ValueId cond;
    if (rng_.chance(0.4)) {
      cond = constant(Type{rng_.pick({ElemKind::Bool, ElemKind::I32}), {}}, {static_cast<double>(rng_.below(2))});
    } else {  // relu(sum of x) != 0: depends on the inputs, exact enough (depth <= 1)
      auto idx = pick([&](const Val& v) {
        const Type& vt = type(v);
        return v.depth == 0 && vt.rank() >= 1 && vt.is_static() && vt.elem != ElemKind::U8 && vt.elem != ElemKind::Bool;
      });
      ValueId s = idx ? use(*idx).id : push_arg(static_type(ElemKind::F32, random_dims(1))).id;
      // One reduction over all elements: a single rounding of the exact sum.
      if (type(s).rank() > 1) {
        Type flat = static_type(type(s).elem, {*type(s).static_numel()});
        s = make1(Op::Reshape, {s}, ir::NoAttrs{}, {flat});
      }
      s = make1(Op::ReduceSum, {s}, ir::AxisAttrs{0, false});
      cond = make1(Op::Cast, {make1(Op::Relu, {s})}, ir::CastAttrs{ElemKind::Bool});
    }
    ir::BlockId then_b = f_.add_block("then"), else_b = f_.add_block("else"), join_b = f_.add_block("join");
    ValueId then_arg = f_.add_block_arg(then_b, t);
    ValueId else_arg = f_.add_block_arg(else_b, t);
    ValueId join_arg = f_.add_block_arg(join_b, t);
    Val other = a;
    if (rng_.chance(0.5)) {
      auto idx = pick([&](const Val& v) { return type(v) == t; });
      if (idx) other = use(*idx);
    }
    // The same instruction in both branches and after the join: CSE may not share
    // one branch's copy with the other branch or with the join.
    const bool shared = rng_.chance(0.5);
    const Op shared_op = rng_.pick({Op::Mul, Op::Add, Op::Sub});
    const ValueId shared_c = scalar(rng_.pick({0.5, 3.0, -1.0}));
    auto shared_copy = [&](ValueId arg) {
      ValueId sv = make1(shared_op, {a.id, shared_c});
      return make1(Op::Add, {arg, sv});
    };
    make(Op::CondBr, {cond}, ir::NoAttrs{}, {},
         {ir::BlockCall{then_b, {a.id}}, ir::BlockCall{else_b, {other.id}}});
    double bound = 0;
    int depth = 0;
    for (auto [blk, arg, in] : {std::tuple{then_b, then_arg, a}, std::tuple{else_b, else_arg, other}}) {
      std::size_t keep = pool_.size(), keep_visible = visible_.size(), keep_caches = caches_.size(),
                  keep_written = written_.size();
      b_.set_block(blk);
      push(arg, in.bound, in.depth);
      visible_.push_back(arg);
      if (shared) push(shared_copy(arg), in.bound + 3 * a.bound + 3, std::max(in.depth, a.depth) + 2);
      int steps = rng_.range(0, 3);
      for (int s = 0; s < steps; ++s) step();
      // The branch result: the newest value of type t defined here, else the argument.
      Val out = pool_[keep];
      for (std::size_t i = keep; i < pool_.size(); ++i)
        if (type(pool_[i]) == t) out = pool_[i];
      bound = std::max(bound, out.bound);
      depth = std::max(depth, out.depth);
      make(Op::Br, {}, ir::NoAttrs{}, {}, {ir::BlockCall{join_b, {out.id}}});
      pool_.resize(keep);
      visible_.resize(keep_visible);
      caches_.resize(keep_caches);
      written_.resize(keep_written);
    }
    b_.set_block(join_b);
    push(join_arg, bound, depth);
    visible_.push_back(join_arg);
    if (shared) push(shared_copy(join_arg), bound + 3 * a.bound + 3, std::max(depth, a.depth) + 2);
  }

  // Calls @helper once or twice (twice with the same operands, or another binding of N).
  void call_helper() {
    int calls = rng_.chance(0.4) ? 2 : 1;
    std::vector<ValueId> prev;
    for (int c = 0; c < calls; ++c) {
      std::vector<ValueId> operands;
      if (c == 1 && rng_.chance(0.5)) {
        operands = prev;
      } else {
        std::int64_t n = rng_.range(1, static_cast<int>(kMaxDim));
        for (const Type& ht : helper_->arg_types) {
          Type t = ht;
          for (Dim& d : t.shape)
            if (!d.is_static()) d = Dim::fixed(n);
          auto idx = pick([&](const Val& v) { return type(v) == t && v.depth == 0; });
          operands.push_back(idx ? use(*idx).id : push_arg(t).id);
        }
      }
      auto rs = make(Op::Call, operands, ir::CallAttrs{"helper"});
      for (std::size_t i = 0; i < rs.size(); ++i) push(rs[i], helper_->bounds[i], helper_->depths[i]);
      prev = operands;
    }
  }

  // `ret` of the newest value and up to count-1 unused others (newest first); records
  // their bounds.
  void finish(int count) {
    std::vector<Val> outs = {pool_.back()};
    for (std::size_t i = pool_.size(); i-- > 0 && static_cast<int>(outs.size()) < count;) {
      const Val& v = pool_[i];
      if (v.uses == 0 && v.id != outs[0].id && f_.value(v.id).def == ir::ValueDef::InstResult) outs.push_back(v);
    }
    // Results passes must leave alone: the same value twice, an argument, a parameter.
    if (rng_.chance(0.1)) outs.push_back(outs[0]);
    if (rng_.chance(0.05)) outs.push_back(pool_[0]);
    if (rng_.chance(0.05)) outs.push_back(Val{param(static_type(ElemKind::F32, {2})), 1, 0, 1});
    // The caches kv_write made that no later kv_write writes on (attention may have read
    // them): a decoder step returns its caches, which the caller may update in place.
    if (!written_.empty()) {
      std::vector<bool> rewritten(f_.num_values(), false);
      for (ir::BlockId b : f_.blocks())
        for (ir::InstId i : f_.insts(b))
          if (f_.inst(i).op == Op::KvWrite) rewritten[f_.inst(i).operands[0].index] = true;
      for (const Val& w : written_)
        if (!rewritten[w.id.index] && std::none_of(outs.begin(), outs.end(), [&](const Val& o) { return o.id == w.id; }))
          outs.push_back(w);
    }
    std::vector<ValueId> ids;
    std::vector<Type> types;
    std::string bounds;
    for (const Val& v : outs) {
      ids.push_back(v.id);
      types.push_back(type(v));
      char buf[32];
      auto res = std::to_chars(buf, buf + sizeof buf, is_float(type(v).elem) ? v.bound : 0.0);
      bounds += (bounds.empty() ? "" : ",") + std::string(buf, res.ptr);
    }
    f_.set_result_types(types);
    make(Op::Ret, ids);
    sh_.m.metadata()[std::string(kBoundsKey)] = bounds;
  }

  Shared& sh_;
  Rng& rng_;
  ir::Function& f_;
  ir::Builder b_;
  bool symbolic_;
  const HelperInfo* helper_;
  bool main_ = false;  // building @main (the only function with ranged arguments)
  ir::BlockId entry_;
  // One version of a pair of KV caches: arguments, or what kv_write made of them.
  struct CachePair {
    ValueId k, v;
    std::size_t root_k = 0, root_v = 0;  // the arguments they come from (indices into Shared::unread)
    double kb = 1, vb = 1;  // magnitude bounds
    int kd = 0, vd = 0;     // rounding depths
  };
  std::vector<Ranged> pos_args_, ids_args_;
  std::vector<CachePair> caches_;  // every version, oldest first (not in pool_: f16/bf16 kinds)
  std::vector<Val> written_;       // kv_write results; finish returns those nobody reads
  std::vector<Val> pool_;         // values operands are picked from
  std::vector<ValueId> visible_;  // every value defined so far that dominates the insertion point
};

}  // namespace

ir::Module generate_program(std::uint64_t seed, const GenOptions& options) {
  Rng rng(seed);
  ir::Module m;
  m.metadata()[std::string(kSeedKey)] = std::to_string(seed);
  Shared sh{rng, m, options};
  // Apart from `rng`, so that a program without the decoder ops does not depend on it.
  sh.decoder = static_cast<double>(mix(seed, kDecoderStream) >> 11) * 0x1p-53 < options.decoder_share;
  std::optional<HelperInfo> helper;
  if (rng.chance(0.2)) {
    ir::Function h("helper");
    FuncGen g(sh, h, rng.chance(0.4), nullptr);
    helper = g.build_helper();
    m.functions().push_back(std::move(h));
  }
  ir::Function main{std::string(kMainFunction)};
  {
    FuncGen g(sh, main, false, helper ? &*helper : nullptr);
    g.build_main();
  }
  m.functions().insert(m.functions().begin(), std::move(main));
  if (!sh.ranges.empty()) {
    std::string text;
    for (const IntRange& r : sh.ranges)
      text += (text.empty() ? "" : ",") + r.name + ":" + std::to_string(r.lo) + ":" + std::to_string(r.hi);
    m.metadata()[std::string(kRangesKey)] = text;
  }
  if (!sh.unread.empty()) {
    std::string text;
    for (const IntRange& r : sh.unread) text += (text.empty() ? "" : ",") + r.name + ":" + std::to_string(r.lo);
    m.metadata()[std::string(kUnreadKey)] = text;
  }
  auto diags = ir::verify_module(m);
  std::string msg;
  for (const Diagnostic& d : diags) msg += render(d);
  TERNJIT_CHECK(diags.empty(), "difftest generator (seed " + std::to_string(seed) + ") built invalid IR:\n" +
                                   msg + ir::print_module(m));
  return m;
}

namespace {

// The comma-separated items of metadata entry `key` (none when absent).
std::vector<std::string_view> metadata_items(const ir::Module& m, std::string_view key) {
  std::vector<std::string_view> items;
  auto it = m.metadata().find(std::string(key));
  if (it == m.metadata().end()) return items;
  std::string_view text = it->second;
  while (!text.empty()) {
    const std::size_t comma = text.find(',');
    items.push_back(text.substr(0, comma));
    text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
  }
  return items;
}

// The ranges stored under kRangesKey by argument name; malformed items (a module read
// from a file may carry anything) and empty ranges are left out.
std::map<std::string, std::pair<std::int64_t, std::int64_t>> arg_ranges(const ir::Module& m) {
  std::map<std::string, std::pair<std::int64_t, std::int64_t>> out;
  for (const std::string_view item : metadata_items(m, kRangesKey)) {
    const std::size_t c1 = item.find(':');
    const std::size_t c2 = c1 == std::string_view::npos ? c1 : item.find(':', c1 + 1);
    if (c2 == std::string_view::npos) continue;
    std::int64_t lo = 0, hi = 0;
    const char* end = item.data() + item.size();
    auto r1 = std::from_chars(item.data() + c1 + 1, item.data() + c2, lo);
    auto r2 = std::from_chars(item.data() + c2 + 1, end, hi);
    if (r1.ec != std::errc{} || r1.ptr != item.data() + c2 || r2.ec != std::errc{} || r2.ptr != end) continue;
    if (lo > hi || lo < -1000000 || hi > 1000000) continue;  // keeps hi - lo + 1 small and positive
    out[std::string(item.substr(0, c1))] = {lo, hi};
  }
  return out;
}

// The first unread rows stored under kUnreadKey by argument name; malformed items and
// negative rows are left out.
std::map<std::string, std::int64_t> unread_rows(const ir::Module& m) {
  std::map<std::string, std::int64_t> out;
  for (const std::string_view item : metadata_items(m, kUnreadKey)) {
    const std::size_t colon = item.find(':');
    if (colon == std::string_view::npos) continue;
    std::int64_t row = 0;
    const char* end = item.data() + item.size();
    auto r = std::from_chars(item.data() + colon + 1, end, row);
    if (r.ec != std::errc{} || r.ptr != end || row < 0) continue;
    out[std::string(item.substr(0, colon))] = row;
  }
  return out;
}

}  // namespace

Inputs make_inputs(const ir::Module& m, std::uint64_t seed) {
  const ir::Function* f = m.find_function(kMainFunction);
  TERNJIT_CHECK(f != nullptr, "difftest: the module has no @main");
  auto dims = [](const Type& t) {
    std::vector<std::int64_t> d;
    for (const Dim& x : t.shape) {
      TERNJIT_CHECK(x.is_static(), "difftest: inputs need static types");
      d.push_back(x.extent);
    }
    return d;
  };
  // Argument i draws from mix(seed, i) and a parameter from a hash of its name, so
  // removing parameters or appending arguments (minimize) keeps the other values.
  Inputs in;
  const std::map<std::string, std::pair<std::int64_t, std::int64_t>> ranges = arg_ranges(m);
  const std::map<std::string, std::int64_t> unread = unread_rows(m);
  std::uint64_t i = 0;
  for (ValueId a : f->args()) {
    const Type& t = f->type_of(a);
    ir::HostTensor r = ir::HostTensor::random(t.elem, dims(t), mix(seed, i++));
    auto it = ranges.find(f->value(a).name);
    if (it != ranges.end() && t.elem == ElemKind::I32) {
      const auto [lo, hi] = it->second;  // r's values are integers in [-1000, 1000]
      for (double& v : r.data) v = static_cast<double>(lo + (static_cast<std::int64_t>(v) + 1000) % (hi - lo + 1));
    }
    auto un = unread.find(f->value(a).name);
    if (un != unread.end() && is_float(t.elem) && t.rank() == 4) {  // rows [row, C) of every layer
      const std::int64_t c = r.shape[1], row_size = r.shape[2] * r.shape[3];
      for (std::int64_t l = 0; l < r.shape[0]; ++l)
        for (std::int64_t row = std::max<std::int64_t>(un->second, 0); row < c; ++row)
          std::fill_n(r.data.begin() + (l * c + row) * row_size, row_size, std::numeric_limits<double>::quiet_NaN());
    }
    in.args.push_back(std::move(r));
  }
  for (const ir::ParamDecl& p : m.params()) {
    std::uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a
    for (char c : p.name) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ULL;
    in.params.set(p.name, ir::HostTensor::random(p.type.elem, dims(p.type), mix(seed, h)));
  }
  return in;
}

std::vector<double> output_bounds(const ir::Module& m) {
  std::vector<double> out;
  const ir::Function* f = m.find_function(kMainFunction);
  std::size_t n = f ? f->result_types().size() : 0;
  auto it = m.metadata().find(std::string(kBoundsKey));
  std::string_view text = it == m.metadata().end() ? std::string_view{} : std::string_view(it->second);
  while (out.size() < n) {
    std::size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    double v = 1;
    auto res = std::from_chars(item.data(), item.data() + item.size(), v);
    out.push_back(res.ec == std::errc{} && v >= 1 ? v : 1);
    text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
  }
  return out;
}

}  // namespace ternjit::difftest
