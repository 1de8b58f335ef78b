// SPDX-License-Identifier: Apache-2.0
// codegen_internal.h - what the LLVM target's code generator files share: the machine and class Gen (LLVM IR building).
//
// Private to targets/llvm (included by codegen*.cpp only). Gen builds the IR of one module:
// codegen.cpp holds the row ops, the elementwise ops, the entry and the emission,
// codegen_tmatmul.cpp the ternary matmul kernels (plain loops, int8 dot products,
// packed 2-bit panels).
#pragma once

#include <llvm/ADT/SmallVector.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsAArch64.h>
#include <llvm/IR/IntrinsicsX86.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Target/TargetMachine.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "targets/common/view2d.h"
#include "targets/llvm/backend.h"

namespace ternjit::targets::llvmjit {

// The integer dot product instruction the int8 tmatmul is built on.
enum class Dot : std::uint8_t {
  Plain,    // int8 panels: sext/mul/add loops left to the vectorizer; packed: a widening multiply-add in vector IR
  Vnni512,  // x86 AVX-512 VNNI vpdpbusd zmm (u8 x s8: int8 panels bias the activations by 128)
  Vnni256,  // x86 AVX-VNNI vpdpbusd ymm (VEX; packed panels only)
  Sdot,     // AArch64 +dotprod sdot (s8 x s8)
};

struct Machine {
  std::unique_ptr<llvm::TargetMachine> tm;
  std::string cpu, features;
  bool x86_512 = false;  // prefer 512-bit vectors
  bool x86 = false;
  bool no_packed = false;
  Dot dot = Dot::Plain;
  // The int8 panels' column group (16 VNNI zmm, 4 sdot, 1 plain loops) and the packed
  // panels' lanes (16 zmm, 8 ymm / portable on x86, 4 sdot / portable elsewhere).
  [[nodiscard]] PanelLayout layout() const {
    PanelLayout l;
    l.group = dot == Dot::Vnni512 ? 16 : dot == Dot::Sdot ? 4 : 1;
    l.lanes = no_packed ? 0 : dot == Dot::Vnni512 ? 16 : dot == Dot::Vnni256 ? 8 : dot == Dot::Sdot ? 4 : x86 ? 8 : 4;
    return l;
  }
};

/// Builds the IR of one module (one Gen per generate() call; not thread-safe, owns nothing).
class Gen {
 public:
  Gen(llvm::LLVMContext& ctx, llvm::Module& mod, const ir::Function& f, const Machine& mc, const PanelLayout& layout)
      : ctx_(ctx), mod_(mod), f_(f), mc_(mc), b_(ctx), group_(layout.group), lanes_(layout.lanes) {}

  llvm::Type* ptr() { return llvm::PointerType::get(ctx_, 0); }
  llvm::Type* f32() { return b_.getFloatTy(); }
  llvm::Type* f64() { return b_.getDoubleTy(); }
  llvm::Type* i8() { return b_.getInt8Ty(); }
  llvm::Type* i32() { return b_.getInt32Ty(); }
  llvm::Type* i64() { return b_.getInt64Ty(); }
  llvm::Value* c64(std::int64_t v) { return b_.getInt64(static_cast<std::uint64_t>(v)); }
  llvm::Value* cd(double v) { return llvm::ConstantFP::get(f64(), v); }
  llvm::Value* cf(float v) { return llvm::ConstantFP::get(f32(), static_cast<double>(v)); }

  void attrs(llvm::Function* fn) {
    fn->addFnAttr("target-cpu", mc_.cpu);
    if (!mc_.features.empty()) fn->addFnAttr("target-features", mc_.features);
    if (mc_.x86_512) fn->addFnAttr("prefer-vector-width", "512");
    fn->addFnAttr(llvm::Attribute::NoUnwind);
  }

  // Emits a loop i = 0..n-1 (n > 0) around body(i).
  template <class Body>
  void loop(std::int64_t n, Body body, bool no_unroll = false, bool compact = false) {
    loop_n(c64(n), body, no_unroll, compact);
  }
  // The same with a run-time trip count n (> 0 when the loop is reached).
  template <class Body>
  // `compact`: no unrolling and no interleaving of the vectorized body either (loops
  // off the hot path, whose unrolled copies only cost compile time).
  void loop_n(llvm::Value* n, Body body, bool no_unroll = false, bool compact = false) {
    llvm::Function* fn = b_.GetInsertBlock()->getParent();
    llvm::BasicBlock* pre = b_.GetInsertBlock();
    llvm::BasicBlock* head = llvm::BasicBlock::Create(ctx_, "loop", fn);
    llvm::BasicBlock* exit = llvm::BasicBlock::Create(ctx_, "exit", fn);
    b_.CreateBr(head);
    b_.SetInsertPoint(head);
    llvm::PHINode* i = b_.CreatePHI(i64(), 2, "i");
    i->addIncoming(c64(0), pre);
    const int before = loops_;
    body(static_cast<llvm::Value*>(i));
    llvm::Value* next = b_.CreateAdd(i, c64(1), "", /*HasNUW=*/true, /*HasNSW=*/true);
    i->addIncoming(next, b_.GetInsertBlock());
    llvm::BranchInst* latch = b_.CreateCondBr(b_.CreateICmpSLT(next, n), head, exit);
    if (loops_ != before || no_unroll || compact) {
      // An outer loop: unrolling it only multiplies the vectorized inner loops (and the
      // compile time); the inner loops are where unrolling pays.
      std::vector<llvm::Metadata*> ops = {nullptr, llvm::MDNode::get(ctx_, llvm::MDString::get(ctx_, "llvm.loop.unroll.disable"))};
      if (compact)
        ops.push_back(llvm::MDNode::get(ctx_, {llvm::MDString::get(ctx_, "llvm.loop.interleave.count"),
                                               llvm::ConstantAsMetadata::get(b_.getInt32(1))}));
      llvm::MDNode* md = llvm::MDNode::getDistinct(ctx_, ops);
      md->replaceOperandWith(0, md);
      latch->setMetadata(llvm::LLVMContext::MD_loop, md);
    }
    ++loops_;
    b_.SetInsertPoint(exit);
  }

  llvm::Value* gep(llvm::Type* t, llvm::Value* base, llvm::Value* idx) { return b_.CreateInBoundsGEP(t, base, idx); }
  llvm::Value* ld(llvm::Type* t, llvm::Value* base, llvm::Value* idx) { return b_.CreateLoad(t, gep(t, base, idx)); }
  void st(llvm::Value* v, llvm::Value* base, llvm::Value* idx) { b_.CreateStore(v, gep(v->getType(), base, idx)); }
  llvm::AllocaInst* local(llvm::Type* t, const char* name) {
    llvm::IRBuilder<> eb(&b_.GetInsertBlock()->getParent()->getEntryBlock(),
                         b_.GetInsertBlock()->getParent()->getEntryBlock().begin());
    return eb.CreateAlloca(t, nullptr, name);
  }

  llvm::Value* libm(const char* name, llvm::Value* d) {
    llvm::FunctionCallee fc = mod_.getOrInsertFunction(name, llvm::FunctionType::get(f64(), {f64()}, false));
    return b_.CreateCall(fc, {d});
  }
  llvm::Value* intr(llvm::Intrinsic::ID id, std::vector<llvm::Value*> args) {
    return b_.CreateIntrinsic(id, {args[0]->getType()}, args);
  }

  // One elementwise op in f32 (interpret.cpp's elementwise()): binary ops in f32, unary
  // ops in f64 rounded once.
  llvm::Value* apply(ir::Op op, llvm::Value* a, llvm::Value* b);

  // The implementation of one lowered step: void impl(ptr noalias ops..., results...,
  // tmp, par), par the host's ParallelArgs (null: one thread).
  llvm::Function* step_impl(const PlanStep& s);

  /// When `cond` holds at run time: writes the record {what, values...} (i64) to the
  /// step's error record and returns 1 from the step (RunError, program.h).
  void fail_if(llvm::Value* cond, RunError what, const std::vector<llvm::Value*>& values);

  // The external wrapper tj_op_<n>(void* const* ptrs).
  void step_wrapper(const PlanStep& s, llvm::Function* impl);

  std::vector<std::int64_t> ext(ir::ValueId v) const { return extents_of(f_.type_of(v)); }

  void body(const PlanStep& s, const ir::InstData& inst, const std::vector<llvm::Value*>& in,
            const std::vector<llvm::Value*>& out, llvm::Value* tmp, llvm::Value* par);

  struct Operand2d {
    llvm::Value* base;
    std::int64_t rs, cs;
  };
  llvm::Value* at2d(const Operand2d& o, llvm::Value* r, llvm::Value* c) {
    llvm::Value* idx = b_.CreateAdd(b_.CreateMul(r, c64(o.rs)), b_.CreateMul(c, c64(o.cs)));
    return ld(f32(), o.base, idx);
  }
  Operand2d view(const std::vector<std::int64_t>& out, ir::ValueId v, llvm::Value* base) {
    auto s = view2d(out, ext(v));
    TERNJIT_CHECK(s.has_value(), "llvm: operand is not a row/column broadcast");
    return {base, s->first, s->second};
  }
  static std::pair<std::int64_t, std::int64_t> rows_cols(const std::vector<std::int64_t>& s) {
    if (s.empty()) return {1, 1};
    std::int64_t rows = 1;
    for (std::size_t d = 0; d + 1 < s.size(); ++d) rows *= s[d];
    return {rows, s.back()};
  }

  void tmatmul(const ir::InstData& inst, const std::vector<llvm::Value*>& in, llvm::Value* y);

  // The int8 tmatmul on dot product instructions. The activations are copied into tmp
  // as [M, Kp] (zero-padded; biased by 128 into u8 for VNNI). The panel holds groups of
  // G columns with 4 consecutive k per 32-bit lane, so one dot instruction multiplies a
  // broadcast 4-byte piece of an activation row with 4 k of G columns and accumulates
  // into G column sums: no horizontal reduction. Blocks of RB rows x CV column groups
  // keep RB*CV vector accumulators over Kp / 4 steps; each sum (minus 128 * the column
  // sum for VNNI, modulo 2^32 like the interpreter's i32 wrap) then goes through the
  // same epilogue as the plain path.
  void tmatmul_dot(const ir::InstData& inst, const std::vector<llvm::Value*>& in, llvm::Value* y, llvm::Value* tmp);

  // if (cond) { then() }
  template <class Then>
  void if_then(llvm::Value* cond, Then then) {
    llvm::Function* fn = b_.GetInsertBlock()->getParent();
    llvm::BasicBlock* yes = llvm::BasicBlock::Create(ctx_, "then", fn);
    llvm::BasicBlock* done = llvm::BasicBlock::Create(ctx_, "endif", fn);
    b_.CreateCondBr(cond, yes, done);
    b_.SetInsertPoint(yes);
    then();
    b_.CreateBr(done);
    b_.SetInsertPoint(done);
  }
  // A loop over [0, n) for a run-time n that may be <= 0.
  template <class Body>
  void loop_maybe(llvm::Value* n, Body body) {
    if_then(b_.CreateICmpSGT(n, c64(0)), [&] { loop_n(n, body); });
  }
  llvm::Value* smin(llvm::Value* a, llvm::Value* b) { return b_.CreateSelect(b_.CreateICmpSLT(a, b), a, b); }

  // acc (<L x i32>) + the sums of 4 consecutive products of u (<4L x i8>, unsigned
  // codes; signed for sdot, so at most 127) and xb (<4L x i8>, signed) per lane.
  llvm::Value* dot4(llvm::Value* acc, llvm::Value* u, llvm::Value* xb);

  // The i8 x t2 tmatmul on packed 2-bit panels (program.h PackedLayout). The
  // activations are copied into tmp as [M, Kp] (zero-padded) with their row sums
  // after them; each weight code c = w + 1 multiplies x as an unsigned byte, so the
  // result is sum c x - rowsum (int32, wrapping like the interpreter). Decoding
  // (`mask`, VNNI and the portable path): field 0 takes the whole byte, fields 1-3
  // are masked in place (v & 0x0c, 0x30, 0xc0), so accumulator f holds 4^f times its
  // columns' sums and field 0 holds all four: S3 = A3 >> 6, S2 = A2 >> 4, S1 = A1 >> 2,
  // S0 = A0 - A1 - A2 - A3 (exact while |A3| <= 128 * 128 * Kp < 2^31; A0 may wrap,
  // the subtraction is modulo 2^32). sdot multiplies signed bytes, so there each
  // field is shifted down and masked ((v >> 2f) & 3). Blocks of RB rows x CV groups
  // keep 4 * RB * CV vector accumulators over the Kp / 4 steps of one panel; sums go
  // through the scalar epilogue of the int8 paths. The work (panels x row blocks) is
  // split into tasks run through `par` (ParallelArgs; null: inline).
  void tmatmul_packed(const ir::InstData& inst, const std::vector<llvm::Value*>& in, llvm::Value* y, llvm::Value* tmp,
                      llvm::Value* par);

  void quantize(const ir::InstData& inst, llvm::Value* x, llvm::Value* q, llvm::Value* scales);

  void rmsnorm(const ir::InstData& inst, llvm::Value* x, llvm::Value* g, llvm::Value* y);

  struct Axis {
    std::int64_t outer = 1, len = 1, inner = 1;
  };
  Axis axis_view(const std::vector<std::int64_t>& s, std::int64_t axis) {
    Axis v;
    for (std::size_t d = 0; d < s.size(); ++d) {
      if (static_cast<std::int64_t>(d) < axis) v.outer *= s[d];
      else if (static_cast<std::int64_t>(d) == axis) v.len = s[d];
      else v.inner *= s[d];
    }
    return v;
  }
  llvm::Value* at3(const Axis& v, llvm::Value* o, llvm::Value* k, llvm::Value* i) {
    return b_.CreateAdd(b_.CreateMul(b_.CreateAdd(b_.CreateMul(o, c64(v.len)), k), c64(v.inner)), i);
  }

  void softmax(const ir::InstData& inst, llvm::Value* x, llvm::Value* y);

  void reduce(const ir::InstData& inst, llvm::Value* x, llvm::Value* y);

  void eltwise(const ir::InstData& inst, const std::vector<llvm::Value*>& in, llvm::Value* y);

  // ---- codegen_dense.cpp: element conversions, cast, broadcast, transpose, matmul.
  /// The in-memory element type of kind `k` (f16/bf16 as i16 bits, bool/u8/i8 as i8).
  llvm::Type* storage_type(ElemKind k);
  /// bf16 bits (i16 or a vector of i16) widened exactly to f32.
  llvm::Value* bf16_bits_to_f32(llvm::Value* bits16);
  /// Element `idx` of a float tensor of kind `k` as an exact f32.
  llvm::Value* load_f32(ElemKind k, llvm::Value* base, llvm::Value* idx);
  /// Element `idx` of a tensor of kind `k` as an exact f64.
  llvm::Value* load_f64(ElemKind k, llvm::Value* base, llvm::Value* idx);
  /// ir/builder.cpp round_to_odd_float of an f64.
  llvm::Value* round_to_odd_f32(llvm::Value* d);
  /// ir/numeric.h f32_to_bf16_bits (round to nearest even, NaN quieted).
  llvm::Value* f32_to_bf16_bits(llvm::Value* f);
  /// Stores round_to_kind(d, k) (d an f64) as element `idx` of a tensor of kind `k`.
  void store_rounded(ElemKind k, llvm::Value* d, llvm::Value* base, llvm::Value* idx);
  /// Nested loops over `dims` from dimension `d`, the indices in `idx`, then body().
  template <class Body>
  void loop_nd(const std::vector<std::int64_t>& dims, std::size_t d, std::vector<llvm::Value*>& idx, Body body);
  /// y (contiguous, shape `out`) [idx] = x[x_offset + sum idx[d] * in_strides[d]] for elements of kind `k`.
  void strided_copy(ElemKind k, const std::vector<std::int64_t>& out, const std::vector<std::int64_t>& in_strides,
                    llvm::Value* x, std::int64_t x_offset, llvm::Value* y);
  /// `cast`: every element read exactly and stored with round_to_kind.
  void cast(const ir::InstData& inst, llvm::Value* x, llvm::Value* y);
  /// `broadcast` (NumPy rule) as a strided copy.
  void broadcast(const ir::InstData& inst, llvm::Value* x, llvm::Value* y);
  /// `transpose` (any rank) as a strided copy.
  void transpose(const ir::InstData& inst, llvm::Value* x, llvm::Value* y);
  /// numpy matmul, f32 result: bit for bit with the interpreter (f64 sums in index
  /// order, N f64 accumulators in tmp); `rhs_transposed`: in[1] is the stored [N, K]
  /// operand of a transpose (matmul_nt).
  void matmul(const ir::InstData& inst, const std::vector<llvm::Value*>& in, llvm::Value* y, llvm::Value* tmp,
              bool rhs_transposed, llvm::Value* par);
  /// x @ w^T with w [N, K] as stored: f64 dot products over 4 x 8 lanes, columns split
  /// over threads; tmp holds x widened to f64 ([rows, K]).
  void matmul_nt(const ir::InstData& inst, llvm::Value* x, llvm::Value* w, llvm::Value* y, llvm::Value* tmp,
                 llvm::Value* par);
  /// Runs task_fn(ctx, i) for i < min(par threads, max_tasks) (inline for one task),
  /// ctx = [ptrs..., number of tasks] (i64 slots).
  void dispatch(llvm::Function* task_fn, const std::vector<llvm::Value*>& ptrs, std::int64_t max_tasks, llvm::Value* par);
  /// What a step's `par` argument gives a parallel step: the pool's run function (null:
  /// no pool), the pool, and the threads to split for (1 without a pool or below 1).
  struct TaskPool {
    llvm::Value* run;
    llvm::Value* pool;
    llvm::Value* threads;
  };
  TaskPool task_pool(llvm::Value* par);
  /// Runs task_fn(cx, i) for i < ntask: inline (i = 0) when ntask <= 1, else through the
  /// pool's run function; the insert point is then after the tasks.
  void run_tasks(const TaskPool& tp, llvm::Function* task_fn, llvm::Value* cx, llvm::Value* ntask);

  // ---- codegen_decoder.cpp: the decoder ops (ir/interpret_decoder.cpp's arithmetic).
  /// The i32 scalar `pos` as i64; a negative one stops the call (RunError::NegativePos).
  llvm::Value* read_pos(const ir::InstData& inst, llvm::Value* pos);
  /// read_pos, then rows [pos, pos + m) must fit the capacity c (RunError::CacheRows).
  llvm::Value* check_cache_rows(const ir::InstData& inst, llvm::Value* pos, std::int64_t m, std::int64_t c);
  /// The interpreter's NaN-propagating running max of f64 values.
  llvm::Value* nan_max(llvm::Value* mx, llvm::Value* v);
  /// `gather`: rows of the table by i32 ids; an id outside [0, V) stops the call.
  void gather(const ir::InstData& inst, llvm::Value* table, llvm::Value* ids, llvm::Value* y);
  /// `slice` as a strided copy.
  void slice(const ir::InstData& inst, llvm::Value* x, llvm::Value* y);
  /// `concat`: the operands' rows one after another, row by row.
  void concat(const ir::InstData& inst, const std::vector<llvm::Value*>& in, llvm::Value* y);
  /// `layernorm` over the last axis (f64, the interpreter's order, one rounding).
  void layernorm(const ir::InstData& inst, const std::vector<llvm::Value*>& in, llvm::Value* y);
  /// `rope` (norm or neox pairs) at positions pos + m read at run time.
  void rope(const ir::InstData& inst, llvm::Value* x, llvm::Value* pos, llvm::Value* y);
  /// `causal_softmax`: entries t <= pos + m of each row; the others exactly 0, never read.
  void causal_softmax(const ir::InstData& inst, llvm::Value* x, llvm::Value* pos, llvm::Value* y);
  /// Copies the cache to y unless y is the cache's own buffer, then writes the rows.
  void kv_write(const ir::InstData& inst, const std::vector<llvm::Value*>& in, llvm::Value* y);
  /// tmp: kAttentionTasks x (C + D) f64 (per task: the scores of one row and head, then
  /// the accumulator); the (row, head) pairs split over `par`'s threads.
  void attention(const ir::InstData& inst, const std::vector<llvm::Value*>& in, llvm::Value* y, llvm::Value* tmp,
                 llvm::Value* par);

  // A constant ParallelArgs {null, null, 1}: run everything on the calling thread.
  llvm::Value* one_thread();

  // The whole-function entry: pointers of every location, each step's impl, the copies.
  void entry(const FunctionPlan& p, const std::string& name, const std::vector<llvm::Function*>& impls,
             const std::vector<llvm::GlobalVariable*>* globals);

 private:
  llvm::LLVMContext& ctx_;
  llvm::Module& mod_;
  const ir::Function& f_;
  const Machine& mc_;
  llvm::IRBuilder<> b_;
  int group_;      // the int8 weight panels' column group
  int lanes_;      // the packed weight panels' lanes
  int loops_ = 0;  // loops emitted so far (loop() tells outer loops by it)
  llvm::Value* err_ = nullptr;  // the error record of the step being generated (step_impl)
};

}  // namespace ternjit::targets::llvmjit
