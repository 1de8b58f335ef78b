// SPDX-License-Identifier: Apache-2.0
// codegen.cpp - LLVM IR for the llvm target's steps, the O-level pass pipeline, object/asm emission and LLJIT linking.
//
// The only translation unit of the target that includes LLVM headers. Every call builds
// its own LLVMContext, Module and TargetMachine; LLVM's target registry is initialized
// once (std::call_once) and is immutable afterwards, so calls from several threads are
// independent. Float semantics follow ir/interpret.cpp exactly: no fast-math flags, no
// FP contraction (FPOpFusion::Strict), f32 binary ops in f32, unary math and the
// rmsnorm/softmax/reduction arithmetic in f64 then rounded once, libm's exp/tanh/erf/log.
#include "targets/llvm/backend.h"

#include <llvm/ADT/SmallVector.h>
#include <llvm/Analysis/CGSCCPassManager.h>
#include <llvm/Analysis/LoopAnalysisManager.h>
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsAArch64.h>
#include <llvm/IR/IntrinsicsX86.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Target/TargetOptions.h>
#include <llvm/TargetParser/Host.h>
#include <llvm/TargetParser/Triple.h>

#include <cmath>
#include <limits>
#include <optional>

#include "targets/common/step_plan.h"
#include "targets/common/view2d.h"
#include <mutex>

namespace ternjit::targets::llvmjit {

namespace {

using ir::Op;
using ir::ValueId;

void init_llvm() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeAllTargetInfos();
    llvm::InitializeAllTargets();
    llvm::InitializeAllTargetMCs();
    llvm::InitializeAllAsmPrinters();
  });
}

std::string host_features() {
  std::string s;
  for (const auto& kv : llvm::sys::getHostCPUFeatures()) {
    s += (s.empty() ? "" : ",") + std::string(kv.getValue() ? "+" : "-") + kv.getKey().str();
  }
  return s;
}

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

Result<Machine> make_machine(const CodegenOptions& o) {
  init_llvm();
  const bool host = o.triple.empty();
  const std::string triple = host ? llvm::sys::getProcessTriple() : llvm::Triple::normalize(o.triple);
  std::string err;
  const llvm::Target* t = llvm::TargetRegistry::lookupTarget(triple, err);
  if (!t) return make_error(ErrorCode::InvalidArgument, "llvm: unknown triple '" + triple + "': " + err);
  Machine m;
  m.cpu = !o.cpu.empty() ? o.cpu : host ? llvm::sys::getHostCPUName().str() : std::string("generic");
  m.features = host ? host_features() : std::string();
  const llvm::Triple tt(triple);
  if (!host && tt.isAArch64() && o.cpu.empty()) m.features = "+neon";
  if (!o.features.empty()) m.features += (m.features.empty() ? "" : ",") + o.features;
  if (tt.isX86() && m.features.find("+avx512f") != std::string::npos) m.x86_512 = true;
  llvm::TargetOptions opts;
  opts.AllowFPOpFusion = llvm::FPOpFusion::Strict;
  m.tm.reset(t->createTargetMachine(triple, m.cpu, m.features, opts, llvm::Reloc::PIC_, std::nullopt,
                                    o.opt == passes::OptLevel::O0   ? llvm::CodeGenOptLevel::None
                                    : o.opt == passes::OptLevel::O3 ? llvm::CodeGenOptLevel::Aggressive
                                                                    : llvm::CodeGenOptLevel::Default));
  if (!m.tm) return make_error(ErrorCode::Internal, "llvm: cannot create a target machine for '" + triple + "'");
  const llvm::MCSubtargetInfo* sti = m.tm->getMCSubtargetInfo();
  m.x86 = tt.isX86();
  if (tt.isX86() && sti->checkFeatures("+avx512vnni") && sti->checkFeatures("+avx512bw")) m.dot = Dot::Vnni512;
  else if (tt.isX86() && sti->checkFeatures("+avxvnni")) m.dot = Dot::Vnni256;
  if (tt.isAArch64() && sti->checkFeatures("+dotprod")) m.dot = Dot::Sdot;
  if (o.plain_dot) m.dot = Dot::Plain;
  m.no_packed = o.no_packed;
  return m;
}

// Builds the IR of one module.
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
  llvm::Value* apply(Op op, llvm::Value* a, llvm::Value* b) {
    switch (op) {
      case Op::Add: return b_.CreateFAdd(a, b);
      case Op::Sub: return b_.CreateFSub(a, b);
      case Op::Mul: return b_.CreateFMul(a, b);
      case Op::Div: return b_.CreateFDiv(a, b);
      case Op::Max: return intr(llvm::Intrinsic::maximum, {a, b});
      case Op::Min: return intr(llvm::Intrinsic::minimum, {a, b});
      case Op::Neg: return b_.CreateFNeg(a);
      case Op::Abs: return intr(llvm::Intrinsic::fabs, {a});
      case Op::Relu: return b_.CreateSelect(b_.CreateFCmpUGT(a, cf(0.0f)), a, cf(0.0f));
      default: break;
    }
    llvm::Value* d = b_.CreateFPExt(a, f64());
    llvm::Value* r = nullptr;
    auto sigmoid = [&](llvm::Value* x) { return b_.CreateFDiv(cd(1.0), b_.CreateFAdd(cd(1.0), libm("exp", b_.CreateFNeg(x)))); };
    switch (op) {
      case Op::Sigmoid: r = sigmoid(d); break;
      case Op::Tanh: r = libm("tanh", d); break;
      case Op::Gelu:
        r = b_.CreateFMul(b_.CreateFMul(cd(0.5), d),
                          b_.CreateFAdd(cd(1.0), libm("erf", b_.CreateFDiv(d, cd(std::sqrt(2.0))))));
        break;
      case Op::Silu: r = b_.CreateFMul(d, sigmoid(d)); break;
      case Op::Exp: r = libm("exp", d); break;
      case Op::Log: r = libm("log", d); break;
      case Op::Sqrt: r = intr(llvm::Intrinsic::sqrt, {d}); break;
      case Op::Rsqrt: r = b_.CreateFDiv(cd(1.0), intr(llvm::Intrinsic::sqrt, {d})); break;
      default: TERNJIT_UNREACHABLE("llvm: not an elementwise op");
    }
    return b_.CreateFPTrunc(r, f32());
  }

  // The implementation of one lowered step: void impl(ptr noalias ops..., results...,
  // tmp, par), par the host's ParallelArgs (null: one thread).
  llvm::Function* step_impl(const ProgramStep& s) {
    const ir::InstData& inst = f_.inst(s.inst);
    const std::size_t n = s.in.size() + s.out.size() + 2;
    auto* ty = llvm::FunctionType::get(b_.getVoidTy(), std::vector<llvm::Type*>(n, ptr()), false);
    auto* fn = llvm::Function::Create(ty, llvm::Function::InternalLinkage, s.symbol + ".impl", mod_);
    attrs(fn);
    for (std::size_t k = 0; k + 1 < n; ++k) fn->addParamAttr(static_cast<unsigned>(k), llvm::Attribute::NoAlias);
    b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", fn));
    std::vector<llvm::Value*> in, out;
    for (std::size_t k = 0; k < s.in.size(); ++k) in.push_back(fn->getArg(static_cast<unsigned>(k)));
    for (std::size_t k = 0; k < s.out.size(); ++k) out.push_back(fn->getArg(static_cast<unsigned>(s.in.size() + k)));
    if (s.packed) tmatmul_packed(inst, in, out[0], fn->getArg(static_cast<unsigned>(n - 2)), fn->getArg(static_cast<unsigned>(n - 1)));
    else body(inst, in, out, fn->getArg(static_cast<unsigned>(n - 2)));
    b_.CreateRetVoid();
    return fn;
  }

  // The external wrapper tj_op_<n>(void* const* ptrs).
  void step_wrapper(const ProgramStep& s, llvm::Function* impl) {
    auto* fn = llvm::Function::Create(llvm::FunctionType::get(b_.getVoidTy(), {ptr()}, false),
                                      llvm::Function::ExternalLinkage, s.symbol, mod_);
    attrs(fn);
    b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", fn));
    std::vector<llvm::Value*> args;
    for (std::size_t k = 0; k < impl->arg_size(); ++k) args.push_back(ld(ptr(), fn->getArg(0), c64(static_cast<std::int64_t>(k))));
    b_.CreateCall(impl, args);
    b_.CreateRetVoid();
  }

  std::vector<std::int64_t> ext(ValueId v) const { return extents_of(f_.type_of(v)); }

  void body(const ir::InstData& inst, const std::vector<llvm::Value*>& in, const std::vector<llvm::Value*>& out,
            llvm::Value* tmp) {
    switch (inst.op) {
      case Op::TMatMul:
        // A grouped w_scale takes the plain loops (per-group sums scaled in double).
        if (f_.type_of(inst.operands[0]).elem == ElemKind::I8 && (mc_.dot == Dot::Vnni512 || mc_.dot == Dot::Sdot) &&
            std::get<ir::TMatMulAttrs>(inst.attrs).group == 0)
          return tmatmul_dot(inst, in, out[0], tmp);
        return tmatmul(inst, in, out[0]);
      case Op::Quantize: return quantize(inst, in[0], out[0], out[1]);
      case Op::RmsNorm: return rmsnorm(inst, in[0], in[1], out[0]);
      case Op::Softmax: return softmax(inst, in[0], out[0]);
      case Op::ReduceSum: case Op::ReduceMean: case Op::ReduceMax: return reduce(inst, in[0], out[0]);
      default: return eltwise(inst, in, out[0]);
    }
  }

  struct Operand2d {
    llvm::Value* base;
    std::int64_t rs, cs;
  };
  llvm::Value* at2d(const Operand2d& o, llvm::Value* r, llvm::Value* c) {
    llvm::Value* idx = b_.CreateAdd(b_.CreateMul(r, c64(o.rs)), b_.CreateMul(c, c64(o.cs)));
    return ld(f32(), o.base, idx);
  }
  Operand2d view(const std::vector<std::int64_t>& out, ValueId v, llvm::Value* base) {
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

  void tmatmul(const ir::InstData& inst, const std::vector<llvm::Value*>& in, llvm::Value* y) {
    const auto& a = std::get<ir::TMatMulAttrs>(inst.attrs);
    const auto out = ext(inst.results[0]);
    const auto wt = ext(inst.operands[1]);
    const std::int64_t K = wt[0], N = wt[1], Kp = padded_k(K);
    const std::int64_t M = f_.type_of(inst.operands[0]).static_numel().value_or(0) / K;
    const bool int8 = f_.type_of(inst.operands[0]).elem == ElemKind::I8;
    // The operand rule the GPU targets share (step_plan.h): epilogue broadcasts, and the
    // grouped w_scale f32[Gs, N], applied per group below.
    std::vector<std::pair<Op, Operand2d>> epi;
    for (const TMatMulEpilogueOperand& e : tmatmul_epilogue(inst))
      epi.push_back({e.op, view(out, inst.operands[e.operand], in[e.operand])});
    const std::optional<std::size_t> grouped = tmatmul_group_scale(inst);
    llvm::Value* gscale = grouped ? in[*grouped] : nullptr;
    const auto act = ir::activation_op(a.act);
    llvm::Value* x = in[0];
    llvm::Value* w = in[1];  // the [N, Kp] panel
    // Groups of k: one (the whole of K) without a grouped scale. Each group's sum (i32 or
    // double) is scaled by its f32 scale and added in double in ascending group order,
    // then rounded once: the interpreter's arithmetic, so this path is bit-exact.
    const std::int64_t kg = a.group > 0 ? a.group : K;
    const std::int64_t Gs = ir::grouped_scale_rows(K, kg);
    llvm::AllocaInst* acc = local(int8 ? i32() : f64(), "acc");
    llvm::AllocaInst* total = local(f64(), "total");
    loop(M, [&](llvm::Value* r) {
      llvm::Value* xrow = gep(int8 ? i8() : f32(), x, b_.CreateMul(r, c64(K)));
      loop(N, [&](llvm::Value* j) {
        // Column j's bytes: 4 consecutive k every 4 * G bytes (the panel layout).
        const std::int64_t G = group_;
        llvm::Value* wcol = gep(i8(), w, b_.CreateAdd(b_.CreateMul(b_.CreateUDiv(j, c64(G)), c64(Kp * G)),
                                                      b_.CreateMul(b_.CreateURem(j, c64(G)), c64(4))));
        auto group_sum = [&](llvm::Value* lo, llvm::Value* len) {
          b_.CreateStore(int8 ? static_cast<llvm::Value*>(b_.getInt32(0)) : cd(0.0), acc);
          loop_n(len, [&](llvm::Value* i) {
            llvm::Value* p = b_.CreateAdd(lo, i);
            llvm::Value* wv = ld(i8(), wcol, G == 1 ? p : b_.CreateAdd(b_.CreateMul(b_.CreateLShr(p, 2), c64(4 * G)),
                                                                       b_.CreateAnd(p, c64(3))));
            if (int8) {
              llvm::Value* prod = b_.CreateMul(b_.CreateSExt(ld(i8(), xrow, p), i32()), b_.CreateSExt(wv, i32()));
              b_.CreateStore(b_.CreateAdd(b_.CreateLoad(i32(), acc), prod), acc);
            } else {
              llvm::Value* prod = b_.CreateFMul(b_.CreateFPExt(ld(f32(), xrow, p), f64()), b_.CreateSIToFP(wv, f64()));
              b_.CreateStore(b_.CreateFAdd(b_.CreateLoad(f64(), acc), prod), acc);
            }
          });
        };
        llvm::Value* v = nullptr;
        if (gscale == nullptr) {
          group_sum(c64(0), c64(K));
          v = int8 ? b_.CreateSIToFP(b_.CreateLoad(i32(), acc), f32()) : b_.CreateFPTrunc(b_.CreateLoad(f64(), acc), f32());
        } else {
          b_.CreateStore(cd(0.0), total);
          loop(Gs, [&](llvm::Value* g) {
            llvm::Value* lo = b_.CreateMul(g, c64(kg));
            llvm::Value* hi = b_.CreateSelect(b_.CreateICmpSLT(b_.CreateAdd(lo, c64(kg)), c64(K)),
                                              b_.CreateAdd(lo, c64(kg)), c64(K));
            group_sum(lo, b_.CreateSub(hi, lo));
            llvm::Value* p = int8 ? b_.CreateSIToFP(b_.CreateLoad(i32(), acc), f64()) : b_.CreateLoad(f64(), acc);
            llvm::Value* sc = b_.CreateFPExt(ld(f32(), gscale, b_.CreateAdd(b_.CreateMul(g, c64(N)), j)), f64());
            b_.CreateStore(b_.CreateFAdd(b_.CreateLoad(f64(), total), b_.CreateFMul(sc, p)), total);
          });
          v = b_.CreateFPTrunc(b_.CreateLoad(f64(), total), f32());
        }
        for (const auto& [op, o] : epi) v = apply(op, v, at2d(o, r, j));
        if (act) v = apply(*act, v, nullptr);
        st(v, y, b_.CreateAdd(b_.CreateMul(r, c64(N)), j));
      });
    });
  }

  // The int8 tmatmul on dot product instructions. The activations are copied into tmp
  // as [M, Kp] (zero-padded; biased by 128 into u8 for VNNI). The panel holds groups of
  // G columns with 4 consecutive k per 32-bit lane, so one dot instruction multiplies a
  // broadcast 4-byte piece of an activation row with 4 k of G columns and accumulates
  // into G column sums: no horizontal reduction. Blocks of RB rows x CV column groups
  // keep RB*CV vector accumulators over Kp / 4 steps; each sum (minus 128 * the column
  // sum for VNNI, modulo 2^32 like the interpreter's i32 wrap) then goes through the
  // same epilogue as the plain path.
  void tmatmul_dot(const ir::InstData& inst, const std::vector<llvm::Value*>& in, llvm::Value* y, llvm::Value* tmp) {
    const auto& a = std::get<ir::TMatMulAttrs>(inst.attrs);
    const auto out = ext(inst.results[0]);
    const auto wt = ext(inst.operands[1]);
    const std::int64_t K = wt[0], N = wt[1], Kp = padded_k(K);
    const std::int64_t M = f_.type_of(inst.operands[0]).static_numel().value_or(0) / K;
    const bool vnni = mc_.dot == Dot::Vnni512;
    const int G = vnni ? 16 : 4;
    const std::int64_t groups = padded_n(N, G) / G;
    std::vector<std::pair<Op, Operand2d>> epi;
    std::size_t next = 2;
    const std::pair<bool, Op> flags[] = {{a.x_scale, Op::Mul}, {a.w_scale, Op::Mul}, {a.bias, Op::Add}, {a.residual, Op::Add}};
    for (const auto& [present, op] : flags)
      if (present) {
        epi.push_back({op, view(out, inst.operands[next], in[next])});
        ++next;
      }
    const auto act = ir::activation_op(a.act);
    llvm::Value* x = in[0];
    llvm::Value* w = in[1];
    llvm::Value* wsum = in.back();
    // 1. activations into tmp [M, Kp].
    b_.CreateMemSet(tmp, b_.getInt8(0), static_cast<std::uint64_t>(M * Kp), llvm::MaybeAlign(64));
    loop(M, [&](llvm::Value* r) {
      loop(K, [&](llvm::Value* p) {
        llvm::Value* v = ld(i8(), x, b_.CreateAdd(b_.CreateMul(r, c64(K)), p));
        if (vnni) v = b_.CreateXor(v, b_.getInt8(0x80));
        st(v, tmp, b_.CreateAdd(b_.CreateMul(r, c64(Kp)), p));
      });
    });
    auto* vty = llvm::FixedVectorType::get(i32(), static_cast<unsigned>(G));
    auto* bty = llvm::FixedVectorType::get(i8(), static_cast<unsigned>(G * 4));
    llvm::Function* dot = vnni ? llvm::Intrinsic::getDeclaration(&mod_, llvm::Intrinsic::x86_avx512_vpdpbusd_512)
                               : llvm::Intrinsic::getDeclaration(&mod_, llvm::Intrinsic::aarch64_neon_sdot, {vty, bty});
    llvm::FunctionType* dty = dot->getFunctionType();
    llvm::AllocaInst* lanes = local(llvm::ArrayType::get(vty, 16), "lanes");  // RB * CV <= 16 vectors
    // 2. one block: rows r0 .. r0+RB-1, column groups g0 .. g0+CV-1.
    auto block = [&](llvm::Value* r0, int RB, llvm::Value* g0, int CV) {
      std::vector<llvm::AllocaInst*> acc;
      for (int k = 0; k < RB * CV; ++k) {
        acc.push_back(local(vty, "vacc"));
        b_.CreateStore(llvm::Constant::getNullValue(vty), acc.back());
      }
      loop(Kp / 4, [&](llvm::Value* k4) {
        std::vector<llvm::Value*> xv, wv;
        for (int i = 0; i < RB; ++i) {
          llvm::Value* at = gep(i8(), tmp, b_.CreateAdd(b_.CreateMul(b_.CreateAdd(r0, c64(i)), c64(Kp)),
                                                         b_.CreateMul(k4, c64(4))));
          llvm::Value* x4 = b_.CreateAlignedLoad(i32(), at, llvm::Align(4));
          xv.push_back(b_.CreateBitCast(b_.CreateVectorSplat(static_cast<unsigned>(G), x4), dty->getParamType(1)));
        }
        for (int c = 0; c < CV; ++c) {
          llvm::Value* at = gep(i8(), w, b_.CreateAdd(b_.CreateMul(b_.CreateAdd(g0, c64(c)), c64(Kp * G)),
                                                       b_.CreateMul(k4, c64(4 * G))));
          wv.push_back(b_.CreateBitCast(b_.CreateAlignedLoad(bty, at, llvm::Align(4)), dty->getParamType(2)));
        }
        for (int i = 0; i < RB; ++i)
          for (int c = 0; c < CV; ++c) {
            llvm::AllocaInst* ac = acc[static_cast<std::size_t>(i * CV + c)];
            llvm::Value* args[] = {b_.CreateLoad(vty, ac), xv[static_cast<std::size_t>(i)], wv[static_cast<std::size_t>(c)]};
            b_.CreateStore(b_.CreateBitCast(b_.CreateCall(dot, args), vty), ac);
          }
      });
      // The sums (VNNI: minus 128 * column sum) into `lanes`, then ONE epilogue loop nest.
      for (int i = 0; i < RB; ++i)
        for (int c = 0; c < CV; ++c) {
          llvm::Value* sum = b_.CreateLoad(vty, acc[static_cast<std::size_t>(i * CV + c)]);
          if (vnni) {
            llvm::Value* j0 = b_.CreateMul(b_.CreateAdd(g0, c64(c)), c64(G));
            llvm::Value* cs = b_.CreateAlignedLoad(vty, gep(i32(), wsum, j0), llvm::Align(4));
            sum = b_.CreateSub(sum, b_.CreateShl(cs, 7));
          }
          b_.CreateStore(sum, gep(vty, lanes, c64(i * CV + c)));
        }
      const bool ragged = N % G != 0;
      loop(RB, [&](llvm::Value* i) {
        loop(CV, [&](llvm::Value* c) {
          llvm::Value* r = b_.CreateAdd(r0, i);
          llvm::Value* j0 = b_.CreateMul(b_.CreateAdd(g0, c), c64(G));
          llvm::Value* base = b_.CreateMul(b_.CreateAdd(b_.CreateMul(i, c64(CV)), c), c64(G));
          loop(G, [&](llvm::Value* l) {
            llvm::Value* j = b_.CreateAdd(j0, l);
            llvm::BasicBlock* done = nullptr;
            if (ragged) {  // padding columns j >= N are skipped
              llvm::Function* fn = b_.GetInsertBlock()->getParent();
              llvm::BasicBlock* work = llvm::BasicBlock::Create(ctx_, "col", fn);
              done = llvm::BasicBlock::Create(ctx_, "colend", fn);
              b_.CreateCondBr(b_.CreateICmpSLT(j, c64(N)), work, done);
              b_.SetInsertPoint(work);
            }
            llvm::Value* v = b_.CreateSIToFP(ld(i32(), lanes, b_.CreateAdd(base, l)), f32());
            for (const auto& [op, o] : epi) v = apply(op, v, at2d(o, r, j));
            if (act) v = apply(*act, v, nullptr);
            st(v, y, b_.CreateAdd(b_.CreateMul(r, c64(N)), j));
            if (ragged) {
              b_.CreateBr(done);
              b_.SetInsertPoint(done);
            }
          }, /*no_unroll=*/true);
        });
      });
    };
    const int RB = M >= 4 ? 4 : 1, CV = 4;  // 4 or 16 independent accumulators
    const std::int64_t Gb = groups / CV, Gt = groups % CV, Mb = M / RB, Mt = M % RB;
    auto rows = [&](llvm::Value* g0, int cv) {
      if (Mb > 0) loop(Mb, [&](llvm::Value* rb) { block(b_.CreateMul(rb, c64(RB)), RB, g0, cv); });
      if (Mt > 0) loop(Mt, [&](llvm::Value* rt) { block(b_.CreateAdd(c64(Mb * RB), rt), 1, g0, cv); });
    };
    if (Gb > 0) loop(Gb, [&](llvm::Value* gb) { rows(b_.CreateMul(gb, c64(CV)), CV); });
    if (Gt > 0) loop(Gt, [&](llvm::Value* gt) { rows(b_.CreateAdd(c64(Gb * CV), gt), 1); });
  }

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
  llvm::Value* dot4(llvm::Value* acc, llvm::Value* u, llvm::Value* xb) {
    const auto L = static_cast<unsigned>(lanes_);
    auto* vty = llvm::FixedVectorType::get(i32(), L);
    switch (mc_.dot) {
      case Dot::Vnni512:
      case Dot::Vnni256: {
        llvm::Function* d = llvm::Intrinsic::getDeclaration(
            &mod_, mc_.dot == Dot::Vnni512 ? llvm::Intrinsic::x86_avx512_vpdpbusd_512 : llvm::Intrinsic::x86_avx512_vpdpbusd_256);
        llvm::FunctionType* t = d->getFunctionType();
        llvm::Value* args[] = {b_.CreateBitCast(acc, t->getParamType(0)), b_.CreateBitCast(u, t->getParamType(1)),
                               b_.CreateBitCast(xb, t->getParamType(2))};
        return b_.CreateBitCast(b_.CreateCall(d, args), vty);
      }
      case Dot::Sdot: {
        llvm::Function* d = llvm::Intrinsic::getDeclaration(&mod_, llvm::Intrinsic::aarch64_neon_sdot, {vty, u->getType()});
        return b_.CreateCall(d, {acc, u, xb});
      }
      case Dot::Plain: break;
    }
    // Portable: widen, multiply, add the 4 products of each lane (strided shuffles).
    auto* wide = llvm::FixedVectorType::get(i32(), 4 * L);
    llvm::Value* prod = b_.CreateMul(b_.CreateZExt(u, wide), b_.CreateSExt(xb, wide));
    llvm::Value* sum = acc;
    for (unsigned q = 0; q < 4; ++q) {
      llvm::SmallVector<int, 16> idx;
      for (unsigned l = 0; l < L; ++l) idx.push_back(static_cast<int>(4 * l + q));
      sum = b_.CreateAdd(sum, b_.CreateShuffleVector(prod, idx));
    }
    return sum;
  }

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
                      llvm::Value* par) {
    const auto& a = std::get<ir::TMatMulAttrs>(inst.attrs);
    const auto out = ext(inst.results[0]);
    const auto wt = ext(inst.operands[1]);
    const std::int64_t K = wt[0], N = wt[1], Kp = padded_k(K);
    const std::int64_t M = f_.type_of(inst.operands[0]).static_numel().value_or(0) / K;
    const int L = lanes_;
    const std::int64_t G = 4 * L;
    const PackedTile tile = packed_tile(M, L);
    const int RB = static_cast<int>(std::min<std::int64_t>(tile.rows, M)), CV = tile.cv;
    const std::int64_t NB = CV * G, Npad = padded_n(N, static_cast<int>(G));
    const std::int64_t Pf = Npad / NB, Gt = (Npad % NB) / G, P = Pf + (Gt > 0 ? 1 : 0);
    const std::int64_t U = (M + RB - 1) / RB;
    const bool mask = mc_.dot != Dot::Sdot && Kp < (std::int64_t{1} << 17);
    const auto act = ir::activation_op(a.act);
    const std::vector<TMatMulEpilogueOperand> epi = tmatmul_epilogue(inst);
    // 1. activations into tmp [M, Kp], their row sums (i32) after them.
    const std::int64_t rs_off = M * Kp;
    b_.CreateMemSet(tmp, b_.getInt8(0), static_cast<std::uint64_t>(M * Kp), llvm::MaybeAlign(64));
    llvm::AllocaInst* rsum = local(i32(), "rsum");
    loop(M, [&](llvm::Value* r) {
      b_.CreateStore(b_.getInt32(0), rsum);
      loop(K, [&](llvm::Value* p) {
        llvm::Value* v = ld(i8(), in[0], b_.CreateAdd(b_.CreateMul(r, c64(K)), p));
        st(v, tmp, b_.CreateAdd(b_.CreateMul(r, c64(Kp)), p));
        b_.CreateStore(b_.CreateAdd(b_.CreateLoad(i32(), rsum), b_.CreateSExt(v, i32())), rsum);
      }, false, /*compact=*/true);
      st(b_.CreateLoad(i32(), rsum), gep(i8(), tmp, c64(rs_off)), r);
    });
    // 2. the tile function: rows [r_lo, r_hi) x panels [p_lo, p_hi).
    llvm::BasicBlock* impl_block = b_.GetInsertBlock();
    const std::size_t nptr = 3 + epi.size();  // xt, w, y, epilogue operands
    std::vector<llvm::Type*> tps(nptr, ptr());
    for (int k = 0; k < 4; ++k) tps.push_back(i64());
    auto* tile_fn = llvm::Function::Create(llvm::FunctionType::get(b_.getVoidTy(), tps, false),
                                           llvm::Function::InternalLinkage, "tile", mod_);
    attrs(tile_fn);
    for (std::size_t k = 0; k < nptr; ++k) tile_fn->addParamAttr(static_cast<unsigned>(k), llvm::Attribute::NoAlias);
    b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", tile_fn));
    {
      llvm::Value* xt = tile_fn->getArg(0);
      llvm::Value* w = tile_fn->getArg(1);
      llvm::Value* yy = tile_fn->getArg(2);
      llvm::Value* rs = gep(i8(), xt, c64(rs_off));
      std::vector<std::pair<Op, Operand2d>> ops;
      for (std::size_t k = 0; k < epi.size(); ++k)
        ops.push_back({epi[k].op, view(out, inst.operands[epi[k].operand], tile_fn->getArg(static_cast<unsigned>(3 + k)))});
      llvm::Value* r_lo = tile_fn->getArg(static_cast<unsigned>(nptr));
      llvm::Value* r_hi = tile_fn->getArg(static_cast<unsigned>(nptr + 1));
      llvm::Value* p_lo = tile_fn->getArg(static_cast<unsigned>(nptr + 2));
      llvm::Value* p_hi = tile_fn->getArg(static_cast<unsigned>(nptr + 3));
      auto* vL = llvm::FixedVectorType::get(i32(), static_cast<unsigned>(L));
      auto* vG = llvm::FixedVectorType::get(i8(), static_cast<unsigned>(G));
      // One block: rows r0 .. r0+rb-1 of panel p (cv groups).
      auto block = [&](llvm::Value* r0, int rb, llvm::Value* p, int cv) {
        const std::int64_t width = cv * G;
        llvm::Value* wp = gep(i8(), w, b_.CreateMul(p, c64(Kp / 4 * NB)));
        std::vector<llvm::AllocaInst*> acc;  // [i][c][f]
        for (int k = 0; k < rb * cv * 4; ++k) {
          acc.push_back(local(vL, "vacc"));
          b_.CreateStore(llvm::Constant::getNullValue(vL), acc.back());
        }
        auto A = [&](int i, int c, int f) { return acc[static_cast<std::size_t>((i * cv + c) * 4 + f)]; };
        loop(Kp / 4, [&](llvm::Value* s4) {
          std::vector<llvm::Value*> xb;
          for (int i = 0; i < rb; ++i) {
            llvm::Value* at = gep(i8(), xt, b_.CreateAdd(b_.CreateMul(b_.CreateAdd(r0, c64(i)), c64(Kp)), b_.CreateMul(s4, c64(4))));
            llvm::Value* x4 = b_.CreateAlignedLoad(i32(), at, llvm::Align(4));
            xb.push_back(b_.CreateBitCast(b_.CreateVectorSplat(static_cast<unsigned>(L), x4), vG));
          }
          for (int c = 0; c < cv; ++c) {
            llvm::Value* v = b_.CreateAlignedLoad(vG, gep(i8(), wp, b_.CreateAdd(b_.CreateMul(s4, c64(width)), c64(c * G))),
                                                  llvm::Align(1));
            for (int f = 0; f < 4; ++f) {
              llvm::Value* u = nullptr;
              if (mask) u = f == 0 ? v : b_.CreateAnd(v, llvm::ConstantInt::get(vG, 3u << (2 * f)));
              else u = b_.CreateAnd(b_.CreateLShr(v, llvm::ConstantInt::get(vG, 2u * f)), llvm::ConstantInt::get(vG, 3));
              for (int i = 0; i < rb; ++i) b_.CreateStore(dot4(b_.CreateLoad(vL, A(i, c, f)), u, xb[static_cast<std::size_t>(i)]), A(i, c, f));
            }
          }
        }, /*no_unroll=*/true);  // 16 dot products a step already; unrolling only costs compile time
        llvm::AllocaInst* lanes = local(llvm::ArrayType::get(i32(), static_cast<std::uint64_t>(rb * width)), "lanes");
        for (int i = 0; i < rb; ++i) {
          llvm::Value* rsv = b_.CreateVectorSplat(static_cast<unsigned>(L), ld(i32(), rs, b_.CreateAdd(r0, c64(i))));
          for (int c = 0; c < cv; ++c) {
            llvm::Value* av[4];
            for (int f = 0; f < 4; ++f) av[f] = b_.CreateLoad(vL, A(i, c, f));
            llvm::Value* sv[4];
            if (mask) {
              sv[0] = b_.CreateSub(b_.CreateSub(b_.CreateSub(av[0], av[1]), av[2]), av[3]);
              for (int f = 1; f < 4; ++f) sv[f] = b_.CreateAShr(av[f], llvm::ConstantInt::get(vL, 2u * f));
            } else {
              for (int f = 0; f < 4; ++f) sv[f] = av[f];
            }
            for (int f = 0; f < 4; ++f)
              b_.CreateAlignedStore(b_.CreateSub(sv[f], rsv), gep(i32(), lanes, c64(i * width + c * G + f * L)), llvm::Align(4));
          }
        }
        // The epilogue over the panel's columns below N (lanes hold them in column order).
        llvm::Value* j0 = b_.CreateMul(p, c64(NB));
        llvm::Value* count = smin(c64(width), b_.CreateSub(c64(N), j0));
        loop(rb, [&](llvm::Value* i) {
          llvm::Value* r = b_.CreateAdd(r0, i);
          loop_n(count, [&](llvm::Value* jj) {
            llvm::Value* j = b_.CreateAdd(j0, jj);
            llvm::Value* v = b_.CreateSIToFP(ld(i32(), lanes, b_.CreateAdd(b_.CreateMul(i, c64(width)), jj)), f32());
            for (const auto& [op, o] : ops) v = apply(op, v, at2d(o, r, j));
            if (act) v = apply(*act, v, nullptr);
            st(v, yy, b_.CreateAdd(b_.CreateMul(r, c64(N)), j));
          }, false, /*compact=*/true);
        }, /*no_unroll=*/true);
      };
      auto rows = [&](llvm::Value* p, int cv) {
        llvm::Value* nfull = b_.CreateSDiv(b_.CreateSub(r_hi, r_lo), c64(RB));
        loop_maybe(nfull, [&](llvm::Value* bi) { block(b_.CreateAdd(r_lo, b_.CreateMul(bi, c64(RB))), RB, p, cv); });
        if (RB > 1) {
          llvm::Value* t0 = b_.CreateAdd(r_lo, b_.CreateMul(nfull, c64(RB)));
          loop_maybe(b_.CreateSub(r_hi, t0), [&](llvm::Value* ti) { block(b_.CreateAdd(t0, ti), 1, p, cv); });
        }
      };
      llvm::Value* full_hi = smin(p_hi, c64(Pf));
      loop_maybe(b_.CreateSub(full_hi, p_lo), [&](llvm::Value* pi) { rows(b_.CreateAdd(p_lo, pi), CV); });
      if (Gt > 0) if_then(b_.CreateICmpSGT(p_hi, c64(Pf)), [&] { rows(c64(Pf), static_cast<int>(Gt)); });
      b_.CreateRetVoid();
    }
    // 3. the task: void task(ptr ctx, i64 i), ctx = [xt, w, y, epilogue..., nc, nr].
    auto* task_fn = llvm::Function::Create(llvm::FunctionType::get(b_.getVoidTy(), {ptr(), i64()}, false),
                                           llvm::Function::InternalLinkage, "task", mod_);
    attrs(task_fn);
    b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", task_fn));
    {
      llvm::Value* cx = task_fn->getArg(0);
      llvm::Value* i = task_fn->getArg(1);
      std::vector<llvm::Value*> args;
      for (std::size_t k = 0; k < nptr; ++k) args.push_back(ld(ptr(), cx, c64(static_cast<std::int64_t>(k))));
      llvm::Value* nc = ld(i64(), cx, c64(static_cast<std::int64_t>(nptr)));
      llvm::Value* nr = ld(i64(), cx, c64(static_cast<std::int64_t>(nptr + 1)));
      llvm::Value* cc = b_.CreateSRem(i, nc);
      llvm::Value* rc = b_.CreateSDiv(i, nc);
      auto part = [&](std::int64_t total, llvm::Value* idx, llvm::Value* parts) {
        return b_.CreateSDiv(b_.CreateMul(c64(total), idx), parts);
      };
      llvm::Value* u_lo = part(U, rc, nr);
      llvm::Value* u_hi = part(U, b_.CreateAdd(rc, c64(1)), nr);
      args.push_back(smin(b_.CreateMul(u_lo, c64(RB)), c64(M)));
      args.push_back(smin(b_.CreateMul(u_hi, c64(RB)), c64(M)));
      args.push_back(part(P, cc, nc));
      args.push_back(part(P, b_.CreateAdd(cc, c64(1)), nc));
      b_.CreateCall(tile_fn, args);
      b_.CreateRetVoid();
    }
    // 4. split and dispatch: nc column chunks (<= panels) x nr row chunks, about one per thread.
    b_.SetInsertPoint(impl_block);
    llvm::Value* run = b_.CreateLoad(ptr(), par);
    llvm::Value* pool = b_.CreateLoad(ptr(), gep(ptr(), par, c64(1)));
    llvm::Value* thr = b_.CreateLoad(i64(), gep(i64(), par, c64(2)));
    llvm::Value* run_null = b_.CreateICmpEQ(run, llvm::ConstantPointerNull::get(llvm::PointerType::get(ctx_, 0)));
    llvm::Value* T = b_.CreateSelect(b_.CreateOr(run_null, b_.CreateICmpSLT(thr, c64(1))), c64(1), thr);
    llvm::Value* nc = smin(T, c64(P));
    llvm::Value* nr = smin(c64(U), b_.CreateSDiv(b_.CreateAdd(T, b_.CreateSub(nc, c64(1))), nc));
    llvm::Value* ntask = b_.CreateMul(nc, nr);
    llvm::AllocaInst* cx = local(llvm::ArrayType::get(i64(), nptr + 2), "taskctx");
    st(tmp, cx, c64(0));
    st(in[1], cx, c64(1));
    st(y, cx, c64(2));
    for (std::size_t k = 0; k < epi.size(); ++k) st(in[epi[k].operand], cx, c64(static_cast<std::int64_t>(3 + k)));
    b_.CreateStore(nc, gep(i64(), cx, c64(static_cast<std::int64_t>(nptr))));
    b_.CreateStore(nr, gep(i64(), cx, c64(static_cast<std::int64_t>(nptr + 1))));
    llvm::Function* fn = impl_block->getParent();
    llvm::BasicBlock* serial = llvm::BasicBlock::Create(ctx_, "serial", fn);
    llvm::BasicBlock* pooled = llvm::BasicBlock::Create(ctx_, "pooled", fn);
    llvm::BasicBlock* done = llvm::BasicBlock::Create(ctx_, "dispatched", fn);
    b_.CreateCondBr(b_.CreateICmpSLE(ntask, c64(1)), serial, pooled);
    b_.SetInsertPoint(serial);
    b_.CreateCall(task_fn, {cx, c64(0)});
    b_.CreateBr(done);
    b_.SetInsertPoint(pooled);
    auto* run_ty = llvm::FunctionType::get(b_.getVoidTy(), {ptr(), ptr(), ptr(), i64()}, false);
    b_.CreateCall(run_ty, run, {pool, task_fn, cx, ntask});
    b_.CreateBr(done);
    b_.SetInsertPoint(done);
  }

  void quantize(const ir::InstData& inst, llvm::Value* x, llvm::Value* q, llvm::Value* scales) {
    const auto [rows, cols] = rows_cols(ext(inst.operands[0]));
    // amax over the bit patterns of |x| (unsigned max: the float order for non-negative
    // values, with NaN above inf, where a float max would skip NaN). A row holding a NaN
    // or an inf (bits >= inf's) gets the scale NaN, as ir/quant.h absmax_int8_scale.
    llvm::AllocaInst* amax = local(i32(), "amax");
    loop(rows, [&](llvm::Value* r) {
      llvm::Value* row = gep(f32(), x, b_.CreateMul(r, c64(cols)));
      b_.CreateStore(b_.getInt32(0), amax);
      if (cols > 0) loop(cols, [&](llvm::Value* c) {
        llvm::Value* av = b_.CreateBitCast(intr(llvm::Intrinsic::fabs, {ld(f32(), row, c)}), i32());
        b_.CreateStore(intr(llvm::Intrinsic::umax, {av, b_.CreateLoad(i32(), amax)}), amax);
      });
      llvm::Value* bits = b_.CreateLoad(i32(), amax);
      llvm::Value* finite = b_.CreateICmpULT(bits, b_.getInt32(0x7F80'0000u));
      llvm::Value* s = b_.CreateSelect(finite, b_.CreateFDiv(b_.CreateBitCast(bits, f32()), cf(127.0f)),
                                       cf(std::numeric_limits<float>::quiet_NaN()));
      st(s, scales, r);
      if (cols > 0) loop(cols, [&](llvm::Value* c) {
        llvm::Value* rv = intr(llvm::Intrinsic::roundeven, {b_.CreateFDiv(ld(f32(), row, c), s)});
        llvm::Value* cl = b_.CreateSelect(b_.CreateFCmpOGT(rv, cf(127.0f)), cf(127.0f), rv);
        cl = b_.CreateSelect(b_.CreateFCmpOLT(cl, cf(-127.0f)), cf(-127.0f), cl);
        llvm::Value* zero = b_.CreateOr(b_.CreateFCmpOEQ(s, cf(0.0f)), b_.CreateFCmpUNO(rv, rv));
        cl = b_.CreateSelect(zero, cf(0.0f), cl);
        st(b_.CreateFPToSI(cl, i8()), q, b_.CreateAdd(b_.CreateMul(r, c64(cols)), c));
      });
    });
  }

  void rmsnorm(const ir::InstData& inst, llvm::Value* x, llvm::Value* g, llvm::Value* y) {
    const auto [rows, d] = rows_cols(ext(inst.operands[0]));
    const double eps = std::get<ir::EpsAttrs>(inst.attrs).eps;
    llvm::AllocaInst* ss = local(f64(), "ss");
    loop(rows, [&](llvm::Value* r) {
      llvm::Value* base = b_.CreateMul(r, c64(d));
      b_.CreateStore(cd(0.0), ss);
      loop(d, [&](llvm::Value* j) {
        llvm::Value* v = b_.CreateFPExt(ld(f32(), x, b_.CreateAdd(base, j)), f64());
        b_.CreateStore(b_.CreateFAdd(b_.CreateLoad(f64(), ss), b_.CreateFMul(v, v)), ss);
      });
      llvm::Value* denom = intr(llvm::Intrinsic::sqrt,
                                {b_.CreateFAdd(b_.CreateFDiv(b_.CreateLoad(f64(), ss), cd(static_cast<double>(d))), cd(eps))});
      loop(d, [&](llvm::Value* j) {
        llvm::Value* at = b_.CreateAdd(base, j);
        llvm::Value* v = b_.CreateFPExt(ld(f32(), x, at), f64());
        llvm::Value* gv = b_.CreateFPExt(ld(f32(), g, j), f64());
        st(b_.CreateFPTrunc(b_.CreateFMul(b_.CreateFDiv(v, denom), gv), f32()), y, at);
      });
    });
  }

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

  void softmax(const ir::InstData& inst, llvm::Value* x, llvm::Value* y) {
    const Axis v = axis_view(ext(inst.operands[0]), std::get<ir::AxisAttrs>(inst.attrs).axis);
    llvm::AllocaInst* m = local(f64(), "m");
    llvm::AllocaInst* sum = local(f64(), "sum");
    const double nan = std::numeric_limits<double>::quiet_NaN();
    loop(v.outer, [&](llvm::Value* o) {
      loop(v.inner, [&](llvm::Value* i) {
        b_.CreateStore(cd(-std::numeric_limits<double>::infinity()), m);
        loop(v.len, [&](llvm::Value* k) {
          llvm::Value* xv = b_.CreateFPExt(ld(f32(), x, at3(v, o, k, i)), f64());
          llvm::Value* mv = b_.CreateLoad(f64(), m);
          llvm::Value* isnan = b_.CreateOr(b_.CreateFCmpUNO(xv, xv), b_.CreateFCmpUNO(mv, mv));
          llvm::Value* mx = b_.CreateSelect(b_.CreateFCmpOLT(mv, xv), xv, mv);
          b_.CreateStore(b_.CreateSelect(isnan, cd(nan), mx), m);
        });
        llvm::Value* mv = b_.CreateLoad(f64(), m);
        b_.CreateStore(cd(0.0), sum);
        loop(v.len, [&](llvm::Value* k) {
          llvm::Value* e = libm("exp", b_.CreateFSub(b_.CreateFPExt(ld(f32(), x, at3(v, o, k, i)), f64()), mv));
          b_.CreateStore(b_.CreateFAdd(b_.CreateLoad(f64(), sum), e), sum);
        });
        llvm::Value* sv = b_.CreateLoad(f64(), sum);
        loop(v.len, [&](llvm::Value* k) {
          llvm::Value* at = at3(v, o, k, i);
          llvm::Value* e = libm("exp", b_.CreateFSub(b_.CreateFPExt(ld(f32(), x, at), f64()), mv));
          st(b_.CreateFPTrunc(b_.CreateFDiv(e, sv), f32()), y, at);
        });
      });
    });
  }

  void reduce(const ir::InstData& inst, llvm::Value* x, llvm::Value* y) {
    const Axis v = axis_view(ext(inst.operands[0]), std::get<ir::AxisAttrs>(inst.attrs).axis);
    llvm::AllocaInst* acc = local(f64(), "acc");
    const double nan = std::numeric_limits<double>::quiet_NaN();
    loop(v.outer, [&](llvm::Value* o) {
      loop(v.inner, [&](llvm::Value* i) {
        if (inst.op == Op::ReduceMax) {
          b_.CreateStore(b_.CreateFPExt(ld(f32(), x, at3(v, o, c64(0), i)), f64()), acc);
          if (v.len > 1) loop(v.len - 1, [&](llvm::Value* k1) {
            llvm::Value* xv = b_.CreateFPExt(ld(f32(), x, at3(v, o, b_.CreateAdd(k1, c64(1)), i)), f64());
            llvm::Value* mv = b_.CreateLoad(f64(), acc);
            llvm::Value* isnan = b_.CreateOr(b_.CreateFCmpUNO(xv, xv), b_.CreateFCmpUNO(mv, mv));
            llvm::Value* pos = b_.CreateICmpSGE(b_.CreateBitCast(xv, i64()), c64(0));  // !signbit
            llvm::Value* take = b_.CreateOr(b_.CreateFCmpOGT(xv, mv), b_.CreateAnd(b_.CreateFCmpOEQ(xv, mv), pos));
            b_.CreateStore(b_.CreateSelect(isnan, cd(nan), b_.CreateSelect(take, xv, mv)), acc);
          });
        } else {
          b_.CreateStore(cd(0.0), acc);
          loop(v.len, [&](llvm::Value* k) {
            llvm::Value* xv = b_.CreateFPExt(ld(f32(), x, at3(v, o, k, i)), f64());
            b_.CreateStore(b_.CreateFAdd(b_.CreateLoad(f64(), acc), xv), acc);
          });
          if (inst.op == Op::ReduceMean)
            b_.CreateStore(b_.CreateFDiv(b_.CreateLoad(f64(), acc), cd(static_cast<double>(v.len))), acc);
        }
        st(b_.CreateFPTrunc(b_.CreateLoad(f64(), acc), f32()), y, b_.CreateAdd(b_.CreateMul(o, c64(v.inner)), i));
      });
    });
  }

  void eltwise(const ir::InstData& inst, const std::vector<llvm::Value*>& in, llvm::Value* y) {
    const auto out = ext(inst.results[0]);
    const auto [rows, cols] = rows_cols(out);
    std::vector<Operand2d> ops;
    for (std::size_t k = 0; k < inst.operands.size(); ++k) ops.push_back(view(out, inst.operands[k], in[k]));
    loop(rows, [&](llvm::Value* r) {
      loop(cols, [&](llvm::Value* c) {
        std::vector<llvm::Value*> slot;
        for (const Operand2d& o : ops) slot.push_back(at2d(o, r, c));
        llvm::Value* v = nullptr;
        if (inst.op == Op::Ewise) {
          for (const ir::EwiseStep& s : std::get<ir::EwiseAttrs>(inst.attrs).steps) {
            v = apply(s.op, slot[static_cast<std::size_t>(s.a)], s.b >= 0 ? slot[static_cast<std::size_t>(s.b)] : nullptr);
            slot.push_back(v);
          }
        } else {
          v = apply(inst.op, slot[0], slot.size() > 1 ? slot[1] : nullptr);
        }
        st(v, y, b_.CreateAdd(b_.CreateMul(r, c64(cols)), c));
      });
    });
  }

  // A constant ParallelArgs {null, null, 1}: run everything on the calling thread.
  llvm::Value* one_thread() {
    auto* ty = llvm::StructType::get(ctx_, {ptr(), ptr(), i64()});
    auto* init = llvm::ConstantStruct::get(ty, {llvm::ConstantPointerNull::get(llvm::PointerType::get(ctx_, 0)),
                                                llvm::ConstantPointerNull::get(llvm::PointerType::get(ctx_, 0)),
                                                llvm::ConstantInt::get(i64(), 1)});
    return new llvm::GlobalVariable(mod_, ty, true, llvm::GlobalValue::PrivateLinkage, init, "tj_one_thread");
  }

  // The whole-function entry: pointers of every location, each step's impl, the copies.
  void entry(const Program& p, const std::string& name, const std::vector<llvm::Function*>& impls,
             const std::vector<llvm::GlobalVariable*>* globals) {
    std::vector<llvm::Type*> params = globals ? std::vector<llvm::Type*>{ptr(), ptr()}
                                              : std::vector<llvm::Type*>{ptr(), ptr(), ptr(), ptr()};
    auto* fn = llvm::Function::Create(llvm::FunctionType::get(b_.getVoidTy(), params, false),
                                      llvm::Function::ExternalLinkage, name, mod_);
    attrs(fn);
    b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", fn));
    llvm::Value* buffers = fn->getArg(0);
    llvm::Value* consts = globals ? nullptr : fn->getArg(1);
    llvm::Value* scratch = fn->getArg(globals ? 1 : 2);
    llvm::Value* par = globals ? one_thread() : fn->getArg(3);  // AOT entries run on the calling thread
    auto where = [&](const Loc& l) -> llvm::Value* {
      switch (l.kind) {
        case LocKind::Arg: return ld(ptr(), buffers, c64(static_cast<std::int64_t>(l.index)));
        case LocKind::Out: return ld(ptr(), buffers, c64(static_cast<std::int64_t>(p.n_in + l.index)));
        case LocKind::Scratch: return gep(i8(), scratch, c64(static_cast<std::int64_t>(l.index)));
        case LocKind::Const:
          if (globals) return (*globals)[l.index];
          return ld(ptr(), consts, c64(static_cast<std::int64_t>(l.index)));
      }
      return nullptr;
    };
    std::size_t k = 0;
    for (const ProgramStep& s : p.steps) {
      if (s.kind == ProgramStep::Kind::Copy) {
        if (s.copy_bytes) b_.CreateMemMove(where(s.out[0]), llvm::MaybeAlign(1), where(s.in[0]), llvm::MaybeAlign(1), s.copy_bytes);
        continue;
      }
      std::vector<llvm::Value*> args;
      for (const Loc& l : s.in) args.push_back(where(l));
      for (const Loc& l : s.out) args.push_back(where(l));
      args.push_back(gep(i8(), scratch, c64(static_cast<std::int64_t>(s.tmp_offset))));
      args.push_back(par);
      b_.CreateCall(impls[k++], args);
    }
    b_.CreateRetVoid();
  }

 private:
  llvm::LLVMContext& ctx_;
  llvm::Module& mod_;
  const ir::Function& f_;
  const Machine& mc_;
  llvm::IRBuilder<> b_;
  int group_;      // the int8 weight panels' column group
  int lanes_;      // the packed weight panels' lanes
  int loops_ = 0;  // loops emitted so far (loop() tells outer loops by it)
};

llvm::OptimizationLevel level_of(passes::OptLevel o) {
  switch (o) {
    case passes::OptLevel::O0: return llvm::OptimizationLevel::O0;
    case passes::OptLevel::O1: return llvm::OptimizationLevel::O1;
    case passes::OptLevel::O2: return llvm::OptimizationLevel::O2;
    case passes::OptLevel::O3: return llvm::OptimizationLevel::O3;
  }
  return llvm::OptimizationLevel::O2;
}

void optimize(llvm::Module& m, llvm::TargetMachine* tm, passes::OptLevel o) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder pb(tm);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::ModulePassManager mpm = o == passes::OptLevel::O0 ? pb.buildO0DefaultPipeline(llvm::OptimizationLevel::O0)
                                                          : pb.buildPerModuleDefaultPipeline(level_of(o));
  mpm.run(m, mam);
}

}  // namespace

Result<std::string> generate(const ir::Function& f, const Program& p, const std::string& entry_name,
                             const std::vector<std::vector<std::uint8_t>>* baked, EmitKind kind,
                             const CodegenOptions& o) {
  TERNJIT_TRY(Machine mc, make_machine(o));
  llvm::LLVMContext ctx;
  llvm::Module mod(entry_name, ctx);
  mod.setTargetTriple(mc.tm->getTargetTriple().str());
  mod.setDataLayout(mc.tm->createDataLayout());
  const PanelLayout layout = mc.layout();
  TERNJIT_CHECK(p.group == layout.group && p.lanes == layout.lanes,
                "llvm: the program's panel layout does not match the target's dot product");
  Gen g(ctx, mod, f, mc, layout);
  std::vector<llvm::GlobalVariable*> globals;
  if (baked) {
    for (std::size_t k = 0; k < baked->size(); ++k) {
      const auto& b = (*baked)[k];
      llvm::Constant* init = llvm::ConstantDataArray::get(ctx, llvm::ArrayRef<std::uint8_t>(b.data(), b.size()));
      auto* gv = new llvm::GlobalVariable(mod, init->getType(), true, llvm::GlobalValue::InternalLinkage, init,
                                          "tj_const_" + std::to_string(k));
      gv->setAlignment(llvm::Align(64));
      globals.push_back(gv);
    }
  }
  std::vector<llvm::Function*> impls;
  for (const ProgramStep& s : p.steps) {
    if (s.kind != ProgramStep::Kind::Lowered) continue;
    llvm::Function* impl = g.step_impl(s);
    impls.push_back(impl);
    if (!p.all_lowered) g.step_wrapper(s, impl);  // the host runs the steps one by one
  }
  if (p.all_lowered) g.entry(p, entry_name, impls, baked ? &globals : nullptr);
  std::string verr;
  llvm::raw_string_ostream vos(verr);
  if (llvm::verifyModule(mod, &vos)) return make_error(ErrorCode::Internal, "llvm: generated invalid IR: " + verr);
  optimize(mod, mc.tm.get(), o.opt);
  std::string out;
  if (kind == EmitKind::LlvmIr) {
    llvm::raw_string_ostream os(out);
    mod.print(os, nullptr);
    return out;
  }
  llvm::SmallVector<char, 0> buf;
  llvm::raw_svector_ostream os(buf);
  llvm::legacy::PassManager pm;
  if (mc.tm->addPassesToEmitFile(pm, os, nullptr,
                                 kind == EmitKind::Asm ? llvm::CodeGenFileType::AssemblyFile
                                                       : llvm::CodeGenFileType::ObjectFile))
    return make_error(ErrorCode::Internal, "llvm: the target cannot emit this file type");
  pm.run(mod);
  return std::string(buf.begin(), buf.end());
}

Result<PanelLayout> panel_layout(const CodegenOptions& o) {
  TERNJIT_TRY(Machine mc, make_machine(o));
  return mc.layout();
}

namespace {

class LljitObject final : public JitObject {
 public:
  explicit LljitObject(std::unique_ptr<llvm::orc::LLJIT> j) : jit_(std::move(j)) {}
  void* lookup(const std::string& name) override {
    auto a = jit_->lookup(name);
    if (!a) {
      llvm::consumeError(a.takeError());
      return nullptr;
    }
    return a->toPtr<void*>();
  }

 private:
  std::unique_ptr<llvm::orc::LLJIT> jit_;
};

std::string err_text(llvm::Error e) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << e;
  return s;
}

}  // namespace

Result<std::unique_ptr<JitObject>> jit_link(const std::vector<std::uint8_t>& object) {
  init_llvm();
  auto j = llvm::orc::LLJITBuilder().create();
  if (!j) return make_error(ErrorCode::Unavailable, "llvm: cannot create an LLJIT: " + err_text(j.takeError()));
  auto gen = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess((*j)->getDataLayout().getGlobalPrefix());
  if (!gen) return make_error(ErrorCode::Internal, "llvm: " + err_text(gen.takeError()));
  (*j)->getMainJITDylib().addGenerator(std::move(*gen));
  auto buf = llvm::MemoryBuffer::getMemBufferCopy(
      llvm::StringRef(reinterpret_cast<const char*>(object.data()), object.size()), "ternjit-kernel");
  if (auto e = (*j)->addObjectFile(std::move(buf)))
    return make_error(ErrorCode::InvalidInput, "llvm: cannot add the object: " + err_text(std::move(e)));
  return std::unique_ptr<JitObject>(new LljitObject(std::move(*j)));
}

std::string host_triple() { return llvm::sys::getProcessTriple(); }
std::string host_cpu() { return llvm::sys::getHostCPUName().str(); }

}  // namespace ternjit::targets::llvmjit
