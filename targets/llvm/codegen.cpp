// SPDX-License-Identifier: Apache-2.0
// codegen.cpp - LLVM IR for the llvm target's steps, the O-level pass pipeline, object/asm emission and LLJIT linking.
//
// With codegen_tmatmul.cpp (the ternary matmul kernels) and codegen_internal.h (class Gen,
// shared by both), the only code of the target that includes LLVM headers. Every call builds
// its own LLVMContext, Module and TargetMachine; LLVM's target registry is initialized
// once (std::call_once) and is immutable afterwards, so calls from several threads are
// independent. Float semantics follow ir/interpret.cpp exactly: no fast-math flags, no
// FP contraction (FPOpFusion::Strict), f32 binary ops in f32, unary math and the
// rmsnorm/softmax/reduction arithmetic in f64 then rounded once, libm's exp/tanh/erf/log.
#include "targets/llvm/backend.h"

#include <llvm/Analysis/CGSCCPassManager.h>
#include <llvm/Analysis/LoopAnalysisManager.h>
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/MDBuilder.h>
#include <llvm/IR/Verifier.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetOptions.h>
#include <llvm/TargetParser/Host.h>
#include <llvm/TargetParser/Triple.h>

#include <cmath>
#include <limits>
#include <mutex>
#include <optional>

#include "targets/common/step_plan.h"
#include "targets/llvm/codegen_internal.h"

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

}  // namespace

llvm::Value* Gen::apply(Op op, llvm::Value* a, llvm::Value* b) {
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

llvm::Function* Gen::step_impl(const PlanStep& s) {
  const ir::InstData& inst = f_.inst(s.inst);
  const std::size_t n = s.in.size() + s.out.size() + 3;
  auto* ty = llvm::FunctionType::get(i32(), std::vector<llvm::Type*>(n, ptr()), false);
  auto* fn = llvm::Function::Create(ty, llvm::Function::InternalLinkage, s.symbol + ".impl", mod_);
  attrs(fn);
  if (inst.op != Op::KvWrite)  // kv_write's cache and result may be one buffer (in place)
    for (std::size_t k = 0; k + 2 < n; ++k) fn->addParamAttr(static_cast<unsigned>(k), llvm::Attribute::NoAlias);
  b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", fn));
  std::vector<llvm::Value*> in, out;
  for (std::size_t k = 0; k < s.in.size(); ++k) in.push_back(fn->getArg(static_cast<unsigned>(k)));
  for (std::size_t k = 0; k < s.out.size(); ++k) out.push_back(fn->getArg(static_cast<unsigned>(s.in.size() + k)));
  err_ = fn->getArg(static_cast<unsigned>(n - 1));
  llvm::Value* tmp = fn->getArg(static_cast<unsigned>(n - 3));
  llvm::Value* par = fn->getArg(static_cast<unsigned>(n - 2));
  if (s.packed) tmatmul_packed(inst, in, out[0], tmp, par);
  else body(s, inst, in, out, tmp, par);
  b_.CreateRet(b_.getInt32(0));
  err_ = nullptr;
  return fn;
}

void Gen::fail_if(llvm::Value* cond, RunError what, const std::vector<llvm::Value*>& values) {
  TERNJIT_CHECK(err_ != nullptr && values.size() <= 3, "llvm: fail_if outside a step");
  llvm::Function* fn = b_.GetInsertBlock()->getParent();
  llvm::BasicBlock* bad = llvm::BasicBlock::Create(ctx_, "runerror", fn);
  llvm::BasicBlock* ok = llvm::BasicBlock::Create(ctx_, "ok", fn);
  b_.CreateCondBr(cond, bad, ok, llvm::MDBuilder(ctx_).createBranchWeights(1, 1 << 20));
  b_.SetInsertPoint(bad);
  st(c64(static_cast<std::int64_t>(what)), err_, c64(0));
  for (std::size_t k = 0; k < values.size(); ++k)
    st(b_.CreateSExtOrTrunc(values[k], i64()), err_, c64(static_cast<std::int64_t>(k + 1)));
  b_.CreateRet(b_.getInt32(1));
  b_.SetInsertPoint(ok);
}

void Gen::step_wrapper(const PlanStep& s, llvm::Function* impl) {
  auto* fn = llvm::Function::Create(llvm::FunctionType::get(i32(), {ptr()}, false),
                                    llvm::Function::ExternalLinkage, s.symbol, mod_);
  attrs(fn);
  b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", fn));
  std::vector<llvm::Value*> args;
  for (std::size_t k = 0; k < impl->arg_size(); ++k) args.push_back(ld(ptr(), fn->getArg(0), c64(static_cast<std::int64_t>(k))));
  b_.CreateRet(b_.CreateCall(impl, args));
}

void Gen::body(const PlanStep& s, const ir::InstData& inst, const std::vector<llvm::Value*>& in,
               const std::vector<llvm::Value*>& out, llvm::Value* tmp, llvm::Value* par) {
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
    case Op::Cast: return cast(inst, in[0], out[0]);
    case Op::Broadcast: return broadcast(inst, in[0], out[0]);
    case Op::Transpose: return transpose(inst, in[0], out[0]);
    case Op::MatMul: return matmul(inst, in, out[0], tmp, s.rhs_transposed, par);
    case Op::Gather: return gather(inst, in[0], in[1], out[0]);
    case Op::Slice: return slice(inst, in[0], out[0]);
    case Op::Concat: return concat(inst, in, out[0]);
    case Op::LayerNorm: return layernorm(inst, in, out[0]);
    case Op::Rope: return rope(inst, in[0], in[1], out[0]);
    case Op::CausalSoftmax: return causal_softmax(inst, in[0], in[1], out[0]);
    case Op::KvWrite: return kv_write(inst, in, out[0]);
    case Op::Attention: return attention(inst, in, out[0], tmp, par);
    default: return eltwise(inst, in, out[0]);
  }
}

void Gen::quantize(const ir::InstData& inst, llvm::Value* x, llvm::Value* q, llvm::Value* scales) {
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

void Gen::rmsnorm(const ir::InstData& inst, llvm::Value* x, llvm::Value* g, llvm::Value* y) {
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

void Gen::softmax(const ir::InstData& inst, llvm::Value* x, llvm::Value* y) {
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

void Gen::reduce(const ir::InstData& inst, llvm::Value* x, llvm::Value* y) {
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

void Gen::eltwise(const ir::InstData& inst, const std::vector<llvm::Value*>& in, llvm::Value* y) {
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

llvm::Value* Gen::one_thread() {
  auto* ty = llvm::StructType::get(ctx_, {ptr(), ptr(), i64()});
  auto* init = llvm::ConstantStruct::get(ty, {llvm::ConstantPointerNull::get(llvm::PointerType::get(ctx_, 0)),
                                              llvm::ConstantPointerNull::get(llvm::PointerType::get(ctx_, 0)),
                                              llvm::ConstantInt::get(i64(), 1)});
  return new llvm::GlobalVariable(mod_, ty, true, llvm::GlobalValue::PrivateLinkage, init, "tj_one_thread");
}

void Gen::entry(const FunctionPlan& p, const std::string& name, const std::vector<llvm::Function*>& impls,
           const std::vector<llvm::GlobalVariable*>* globals) {
  std::vector<llvm::Type*> params = globals ? std::vector<llvm::Type*>{ptr(), ptr()}
                                            : std::vector<llvm::Type*>{ptr(), ptr(), ptr(), ptr()};
  auto* fn = llvm::Function::Create(llvm::FunctionType::get(i32(), params, false),
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
  llvm::Value* err = gep(i8(), scratch, c64(static_cast<std::int64_t>(p.err_offset)));
  for (std::size_t si = 0; si < p.steps.size(); ++si) {
    const PlanStep& s = p.steps[si];
    if (s.kind == PlanStep::Kind::Copy) {
      if (s.copy_bytes) b_.CreateMemMove(where(s.out[0]), llvm::MaybeAlign(1), where(s.in[0]), llvm::MaybeAlign(1), s.copy_bytes);
      continue;
    }
    std::vector<llvm::Value*> args;
    for (const Loc& l : s.in) args.push_back(where(l));
    for (const Loc& l : s.out) args.push_back(where(l));
    args.push_back(gep(i8(), scratch, c64(static_cast<std::int64_t>(s.tmp_offset))));
    args.push_back(par);
    args.push_back(err);
    llvm::Value* rc = b_.CreateCall(impls[k++], args);
    // A run-time error stops the call: 1 + the step's index (its record at err).
    llvm::BasicBlock* stop = llvm::BasicBlock::Create(ctx_, "stop", fn);
    llvm::BasicBlock* next = llvm::BasicBlock::Create(ctx_, "next", fn);
    b_.CreateCondBr(b_.CreateICmpNE(rc, b_.getInt32(0)), stop, next, llvm::MDBuilder(ctx_).createBranchWeights(1, 1 << 20));
    b_.SetInsertPoint(stop);
    b_.CreateRet(b_.getInt32(static_cast<std::uint32_t>(si + 1)));
    b_.SetInsertPoint(next);
  }
  b_.CreateRet(b_.getInt32(0));
}


namespace {

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

Result<std::string> generate(const ir::Function& f, const FunctionPlan& p, const std::string& entry_name,
                             const std::vector<std::vector<std::uint8_t>>* baked, EmitKind kind,
                             const CodegenOptions& o) {
  TERNJIT_TRY(Machine mc, make_machine(o));
  llvm::LLVMContext ctx;
  llvm::Module mod(entry_name, ctx);
  mod.setTargetTriple(mc.tm->getTargetTriple().str());
  mod.setDataLayout(mc.tm->createDataLayout());
  const PanelLayout layout = mc.layout();
  TERNJIT_CHECK(p.group == layout.group && p.lanes == layout.lanes,
                "llvm: the plan's panel layout does not match the target's dot product");
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
  for (const PlanStep& s : p.steps) {
    if (s.kind != PlanStep::Kind::Lowered) continue;
    llvm::Function* impl = g.step_impl(s);
    impls.push_back(impl);
    if (!p.all_lowered) g.step_wrapper(s, impl);  // the host runs the steps one by one
  }
  if (p.all_lowered) g.entry(p, entry_name, impls, baked ? &globals : nullptr);
  std::string verr;
  llvm::raw_string_ostream vos(verr);
  if (llvm::verifyModule(mod, &vos)) return make_error(ErrorCode::Internal, "llvm: generated invalid IR: " + verr);
  // The budget is checked on the unoptimized module: what LLVM would be asked to chew on.
  std::uint64_t instructions = 0;
  for (const llvm::Function& fn : mod) instructions += fn.getInstructionCount();
  if (instructions > o.max_instructions)
    return make_error(ErrorCode::InvalidInput,
                      "llvm: @" + f.name() + " generates " + std::to_string(instructions) +
                          " LLVM instructions, over the llvm target's budget of " + std::to_string(o.max_instructions) +
                          " (llvm.max_instructions; LLVM's optimizer takes minutes past it): raise it with "
                          "--target-options llvm.max_instructions=N, or use the x86 target");
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
