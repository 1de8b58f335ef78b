// SPDX-License-Identifier: Apache-2.0
// codegen_dense.cpp - LLVM IR of the data movement and dense float ops: cast, broadcast, transpose, matmul.
//
// Members of Gen (codegen_internal.h). Element values follow ir/interpret.cpp: a value is
// read exactly (f16/bf16/f32 widen exactly to f64, integers convert exactly) and stored
// with round_to_kind (ir/builder.cpp): f32 by one rounding from f64; f16/bf16 through
// round-to-odd f32 then one round to nearest even (so a double is rounded once, Boldo &
// Melquiond); integers round half to even, saturate, NaN -> 0; bool is v != 0 && !NaN.
// bf16 is rounded with integer ops exactly as ir/numeric.h f32_to_bf16_bits (the
// AVX512-BF16 instruction would flush subnormals); f16 uses LLVM's fptrunc (F16C
// vcvtps2ph / AArch64 fcvt: round to nearest even, NaN quieted with its top payload,
// which is f32_to_f16_bits).
#include "targets/llvm/codegen_internal.h"

#include <limits>

#include "targets/common/step_plan.h"

namespace ternjit::targets::llvmjit {

namespace {

// Row-major strides in elements.
std::vector<std::int64_t> strides_of(const std::vector<std::int64_t>& s) {
  std::vector<std::int64_t> st(s.size(), 1);
  for (std::size_t d = s.size(); d-- > 1;) st[d - 1] = st[d] * s[d];
  return st;
}

// The strides that read an operand of shape `in` while walking `out` (NumPy broadcast:
// right-aligned; a stretched or missing dim reads with stride 0).
std::vector<std::int64_t> broadcast_strides(const std::vector<std::int64_t>& in, const std::vector<std::int64_t>& out) {
  const std::vector<std::int64_t> st = strides_of(in);
  std::vector<std::int64_t> r(out.size(), 0);
  const std::size_t off = out.size() - in.size();
  for (std::size_t d = 0; d < in.size(); ++d) r[off + d] = in[d] == 1 && out[off + d] != 1 ? 0 : st[d];
  return r;
}

}  // namespace

llvm::Type* Gen::storage_type(ElemKind k) {
  switch (k) {
    case ElemKind::F32: return f32();
    case ElemKind::I32: return i32();
    case ElemKind::F16: case ElemKind::BF16: return b_.getInt16Ty();
    case ElemKind::I8: case ElemKind::U8: case ElemKind::Bool: case ElemKind::T2: return i8();
  }
  return i8();
}

llvm::Value* Gen::bf16_bits_to_f32(llvm::Value* bits16) {
  llvm::Type* t = bits16->getType()->isVectorTy()
                      ? static_cast<llvm::Type*>(llvm::VectorType::get(i32(), llvm::cast<llvm::VectorType>(bits16->getType())))
                      : i32();
  llvm::Type* ft = t->isVectorTy() ? static_cast<llvm::Type*>(llvm::VectorType::get(f32(), llvm::cast<llvm::VectorType>(t)))
                                   : f32();
  return b_.CreateBitCast(b_.CreateShl(b_.CreateZExt(bits16, t), 16), ft);
}

llvm::Value* Gen::load_f32(ElemKind k, llvm::Value* base, llvm::Value* idx) {
  switch (k) {
    case ElemKind::F32: return ld(f32(), base, idx);
    case ElemKind::F16: return b_.CreateFPExt(b_.CreateBitCast(ld(b_.getInt16Ty(), base, idx), b_.getHalfTy()), f32());
    case ElemKind::BF16: return bf16_bits_to_f32(ld(b_.getInt16Ty(), base, idx));
    default: break;
  }
  TERNJIT_UNREACHABLE("llvm: load_f32 of an integer kind");
}

llvm::Value* Gen::load_f64(ElemKind k, llvm::Value* base, llvm::Value* idx) {
  if (is_float(k)) return b_.CreateFPExt(load_f32(k, base, idx), f64());
  llvm::Value* v = ld(storage_type(k), base, idx);
  if (k == ElemKind::U8 || k == ElemKind::Bool) return b_.CreateUIToFP(v, f64());
  return b_.CreateSIToFP(v, f64());
}

llvm::Value* Gen::round_to_odd_f32(llvm::Value* d) {
  // ir/builder.cpp round_to_odd_float: NaN -> NaN, |d| > FLT_MAX -> +-inf, exact -> the
  // float; otherwise the float truncated toward zero with its last bit set.
  llvm::Value* f = b_.CreateFPTrunc(d, f32());
  llvm::Value* back = b_.CreateFPExt(f, f64());
  llvm::Value* ad = intr(llvm::Intrinsic::fabs, {d});
  llvm::Value* bits = b_.CreateBitCast(f, i32());
  llvm::Value* toward0 = b_.CreateSelect(b_.CreateFCmpOGT(intr(llvm::Intrinsic::fabs, {back}), ad),
                                         b_.CreateSub(bits, b_.getInt32(1)), bits);
  llvm::Value* odd = b_.CreateBitCast(b_.CreateOr(toward0, b_.getInt32(1)), f32());
  llvm::Value* inf = b_.CreateSelect(b_.CreateFCmpOGT(d, cd(0.0)), cf(std::numeric_limits<float>::infinity()),
                                     cf(-std::numeric_limits<float>::infinity()));
  const double fmax = static_cast<double>(std::numeric_limits<float>::max());
  llvm::Value* r = b_.CreateSelect(b_.CreateFCmpOEQ(back, d), f, odd);
  r = b_.CreateSelect(b_.CreateFCmpOGT(ad, cd(fmax)), inf, r);
  return b_.CreateSelect(b_.CreateFCmpUNO(d, d), f, r);
}

llvm::Value* Gen::f32_to_bf16_bits(llvm::Value* f) {
  // ir/numeric.h f32_to_bf16_bits: NaN keeps sign and top payload, quiet bit set;
  // otherwise add 0x7FFF + the lowest kept bit and keep the top half.
  llvm::Value* bits = b_.CreateBitCast(f, i32());
  llvm::Value* nan = b_.CreateICmpUGT(b_.CreateAnd(bits, b_.getInt32(0x7FFF'FFFFu)), b_.getInt32(0x7F80'0000u));
  llvm::Value* q = b_.CreateOr(b_.CreateLShr(bits, 16), b_.getInt32(0x40));
  llvm::Value* rnd = b_.CreateAdd(b_.getInt32(0x7FFF), b_.CreateAnd(b_.CreateLShr(bits, 16), b_.getInt32(1)));
  llvm::Value* r = b_.CreateLShr(b_.CreateAdd(bits, rnd), 16);
  return b_.CreateTrunc(b_.CreateSelect(nan, q, r), b_.getInt16Ty());
}

void Gen::store_rounded(ElemKind k, llvm::Value* d, llvm::Value* base, llvm::Value* idx) {
  switch (k) {
    case ElemKind::F32: return st(b_.CreateFPTrunc(d, f32()), base, idx);
    case ElemKind::F16:
      return st(b_.CreateBitCast(b_.CreateFPTrunc(round_to_odd_f32(d), b_.getHalfTy()), b_.getInt16Ty()), base, idx);
    case ElemKind::BF16: return st(f32_to_bf16_bits(round_to_odd_f32(d)), base, idx);
    case ElemKind::Bool: return st(b_.CreateZExt(b_.CreateFCmpONE(d, cd(0.0)), i8()), base, idx);
    case ElemKind::I32: case ElemKind::I8: case ElemKind::U8: case ElemKind::T2: {
      const double lo = k == ElemKind::I32 ? -2147483648.0 : k == ElemKind::I8 ? -128.0 : k == ElemKind::U8 ? 0.0 : -1.0;
      const double hi = k == ElemKind::I32 ? 2147483647.0 : k == ElemKind::I8 ? 127.0 : k == ElemKind::U8 ? 255.0 : 1.0;
      llvm::Value* r = intr(llvm::Intrinsic::roundeven, {d});
      r = b_.CreateSelect(b_.CreateFCmpOLT(r, cd(lo)), cd(lo), r);
      r = b_.CreateSelect(b_.CreateFCmpOGT(r, cd(hi)), cd(hi), r);
      r = b_.CreateSelect(b_.CreateFCmpUNO(d, d), cd(0.0), r);
      return st(b_.CreateTrunc(b_.CreateFPToSI(r, i64()), storage_type(k)), base, idx);
    }
  }
}

void Gen::cast(const ir::InstData& inst, llvm::Value* x, llvm::Value* y) {
  const ElemKind from = f_.type_of(inst.operands[0]).elem, to = f_.type_of(inst.results[0]).elem;
  const std::int64_t n = f_.type_of(inst.results[0]).static_numel().value_or(0);
  loop(n, [&](llvm::Value* i) {
    if (is_float(from) && to == ElemKind::F32) return st(load_f32(from, x, i), y, i);  // exact widening
    if (from == ElemKind::F32 && to == ElemKind::BF16) return st(f32_to_bf16_bits(ld(f32(), x, i)), y, i);
    store_rounded(to, load_f64(from, x, i), y, i);
  });
}

template <class Body>
void Gen::loop_nd(const std::vector<std::int64_t>& dims, std::size_t d, std::vector<llvm::Value*>& idx, Body body) {
  if (d == dims.size()) return body();
  loop(dims[d], [&](llvm::Value* i) {
    idx[d] = i;
    loop_nd(dims, d + 1, idx, body);
  });
}

void Gen::strided_copy(ElemKind k, const std::vector<std::int64_t>& out, const std::vector<std::int64_t>& in_strides,
                       llvm::Value* x, std::int64_t x_offset, llvm::Value* y) {
  // out[idx] = x[x_offset + sum idx[d] * in_strides[d]], element by element (LLVM turns a
  // unit-stride innermost dim into vector copies).
  llvm::Type* t = storage_type(k);
  const std::vector<std::int64_t> ost = strides_of(out);
  std::vector<llvm::Value*> idx(out.size(), nullptr);
  loop_nd(out, 0, idx, [&] {
    llvm::Value* src = c64(x_offset);
    llvm::Value* dst = c64(0);
    for (std::size_t d = 0; d < out.size(); ++d) {
      if (in_strides[d] != 0) src = b_.CreateAdd(src, b_.CreateMul(idx[d], c64(in_strides[d])));
      dst = b_.CreateAdd(dst, b_.CreateMul(idx[d], c64(ost[d])));
    }
    st(ld(t, x, src), y, dst);
  });
}

void Gen::broadcast(const ir::InstData& inst, llvm::Value* x, llvm::Value* y) {
  const auto out = ext(inst.results[0]);
  strided_copy(f_.type_of(inst.results[0]).elem, out, broadcast_strides(ext(inst.operands[0]), out), x, 0, y);
}

void Gen::transpose(const ir::InstData& inst, llvm::Value* x, llvm::Value* y) {
  const auto& perm = std::get<ir::PermAttrs>(inst.attrs).perm;
  const std::vector<std::int64_t> in_st = strides_of(ext(inst.operands[0]));
  std::vector<std::int64_t> st(perm.size());
  for (std::size_t d = 0; d < perm.size(); ++d) st[d] = in_st[static_cast<std::size_t>(perm[d])];
  strided_copy(f_.type_of(inst.results[0]).elem, ext(inst.results[0]), st, x, 0, y);
}

void Gen::matmul(const ir::InstData& inst, const std::vector<llvm::Value*>& in, llvm::Value* y, llvm::Value* tmp,
                 bool rhs_transposed, llvm::Value* par) {
  const ElemKind ka = f_.type_of(inst.operands[0]).elem, kb = f_.type_of(inst.operands[1]).elem;
  const ElemKind kr = f_.type_of(inst.results[0]).elem;
  if (rhs_transposed) return matmul_nt(inst, in[0], in[1], y, tmp, par);
  // numpy.matmul as ir/interpret_ops.cpp matmul(): [batch.., M, K] @ [batch.., K, N]
  // (a 1-D lhs as [1, K], a 1-D rhs as [K, 1]), batch dims broadcast.
  std::vector<std::int64_t> as = ext(inst.operands[0]), bs = ext(inst.operands[1]);
  if (as.size() == 1) as.insert(as.begin(), 1);
  if (bs.size() == 1) bs.push_back(1);
  const std::int64_t M = as[as.size() - 2], K = as.back(), N = bs.back();
  const std::vector<std::int64_t> ba(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  std::vector<std::int64_t> batch(std::max(ba.size(), bb.size()), 1);
  for (std::size_t d = 0; d < batch.size(); ++d) {
    const std::size_t n = batch.size();
    const std::int64_t da = d < n - ba.size() ? 1 : ba[d - (n - ba.size())];
    const std::int64_t db = d < n - bb.size() ? 1 : bb[d - (n - bb.size())];
    batch[d] = da == 1 ? db : da;
  }
  const std::vector<std::int64_t> sa = broadcast_strides(ba, batch), sb = broadcast_strides(bb, batch);
  const std::vector<std::int64_t> so = strides_of(batch);
  // Each output row: acc[j] (f64, in tmp) += a[i, p] * b[p, j] for p in order, so every
  // sum runs in the interpreter's order (bit for bit) while the j loop vectorizes.
  std::vector<llvm::Value*> idx(batch.size(), nullptr);
  loop_nd(batch, 0, idx, [&] {
    llvm::Value* a0 = c64(0);
    llvm::Value* b0 = c64(0);
    llvm::Value* o0 = c64(0);
    for (std::size_t d = 0; d < batch.size(); ++d) {
      a0 = b_.CreateAdd(a0, b_.CreateMul(idx[d], c64(sa[d] * M * K)));
      b0 = b_.CreateAdd(b0, b_.CreateMul(idx[d], c64(sb[d] * K * N)));
      o0 = b_.CreateAdd(o0, b_.CreateMul(idx[d], c64(so[d] * M * N)));
    }
    loop(M, [&](llvm::Value* i) {
      b_.CreateMemSet(tmp, b_.getInt8(0), static_cast<std::uint64_t>(N * 8), llvm::MaybeAlign(64));
      loop(K, [&](llvm::Value* p) {
        llvm::Value* av = load_f64(ka, in[0], b_.CreateAdd(a0, b_.CreateAdd(b_.CreateMul(i, c64(K)), p)));
        llvm::Value* brow = b_.CreateAdd(b0, b_.CreateMul(p, c64(N)));
        loop(N, [&](llvm::Value* j) {
          llvm::Value* prod = b_.CreateFMul(av, load_f64(kb, in[1], b_.CreateAdd(brow, j)));
          st(b_.CreateFAdd(ld(f64(), tmp, j), prod), tmp, j);
        });
      });
      llvm::Value* orow = b_.CreateAdd(o0, b_.CreateMul(i, c64(N)));
      loop(N, [&](llvm::Value* j) { store_rounded(kr, ld(f64(), tmp, j), y, b_.CreateAdd(orow, j)); });
    });
  });
}

void Gen::matmul_nt(const ir::InstData& inst, llvm::Value* x, llvm::Value* w, llvm::Value* y, llvm::Value* tmp,
                    llvm::Value* par) {
  // x [rows, K] (any leading dims) times w^T, w [N, K] read as stored (the head form
  // `matmul(x, transpose(P))`, P a load-time [N, K]): every output is a dot product of
  // two contiguous rows. It runs in f64 over 4 x kVL lanes (each product exact: f32 x f32/
  // f16/bf16 fits in 53 bits), the 4 vectors then added pairwise, their lanes in order, the
  // K % 8 tail in order, then rounded once to f32. The interpreter adds the products in
  // index order instead; each order is within (K - 1) 2^-53 sum |x_p w_jp| of the exact
  // sum (to first order, whatever the order), so the two differ by twice that, plus
  // one f32 rounding step when that moves the sum across a rounding boundary (the bound
  // the tests check). Columns are split into chunks run on `par`'s threads.
  constexpr unsigned kVL = 8;
  const ElemKind kx = f_.type_of(inst.operands[0]).elem, kw = f_.type_of(inst.operands[1]).elem;
  const auto wt = ext(inst.operands[1]);  // the transposed value [K, N]
  const std::int64_t K = wt[0], N = wt[1];
  const std::int64_t rows = f_.type_of(inst.operands[0]).static_numel().value_or(0) / K;
  const std::int64_t KV = K / kVL * kVL, K4 = K / (4 * kVL) * (4 * kVL);
  auto* vd = llvm::FixedVectorType::get(f64(), kVL);
  auto vec_f64 = [&](ElemKind k, llvm::Value* base, llvm::Value* at) -> llvm::Value* {
    llvm::Value* p = gep(storage_type(k), base, at);
    if (k == ElemKind::F32) return b_.CreateFPExt(b_.CreateAlignedLoad(llvm::FixedVectorType::get(f32(), kVL), p, llvm::Align(4)), vd);
    llvm::Value* v = b_.CreateAlignedLoad(llvm::FixedVectorType::get(b_.getInt16Ty(), kVL), p, llvm::Align(2));
    llvm::Value* f = k == ElemKind::F16
                         ? b_.CreateFPExt(b_.CreateBitCast(v, llvm::FixedVectorType::get(b_.getHalfTy(), kVL)),
                                          llvm::FixedVectorType::get(f32(), kVL))
                         : bf16_bits_to_f32(v);
    return b_.CreateFPExt(f, vd);
  };
  // The chunk function: columns [j_lo, j_hi) of every row.
  llvm::BasicBlock* impl_block = b_.GetInsertBlock();
  auto* chunk_fn = llvm::Function::Create(llvm::FunctionType::get(b_.getVoidTy(), {ptr(), ptr(), ptr(), i64(), i64()}, false),
                                          llvm::Function::InternalLinkage, "nt_chunk", mod_);
  attrs(chunk_fn);
  for (unsigned a = 0; a < 3; ++a) chunk_fn->addParamAttr(a, llvm::Attribute::NoAlias);
  b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", chunk_fn));
  {
    llvm::Value* cx = chunk_fn->getArg(0);
    llvm::Value* cw = chunk_fn->getArg(1);
    llvm::Value* cy = chunk_fn->getArg(2);
    llvm::Value* j_lo = chunk_fn->getArg(3);
    llvm::Value* j_hi = chunk_fn->getArg(4);
    // Four vector accumulators (32 products a step) so the f64 adds of one dot product
    // overlap instead of waiting on one chain; then 8-wide steps into the first.
    std::vector<llvm::AllocaInst*> acc;
    for (int a = 0; a < 4; ++a) acc.push_back(local(vd, "vacc"));
    llvm::AllocaInst* sum = local(f64(), "sum");
    // Columns outer, rows inner: each row of w (K elements) is read from memory once and
    // reused from cache by every row of x (prefill reads the table once, not M times).
    loop_maybe(b_.CreateSub(j_hi, j_lo), [&](llvm::Value* jj) {
      llvm::Value* j = b_.CreateAdd(j_lo, jj);
      llvm::Value* wrow = b_.CreateMul(j, c64(K));
      loop(rows, [&](llvm::Value* r) {
        llvm::Value* xrow = b_.CreateMul(r, c64(K));
        for (llvm::AllocaInst* a : acc) b_.CreateStore(llvm::Constant::getNullValue(vd), a);
        auto step = [&](llvm::AllocaInst* a, llvm::Value* p) {
          llvm::Value* xv = b_.CreateAlignedLoad(vd, gep(f64(), cx, b_.CreateAdd(xrow, p)), llvm::Align(8));
          llvm::Value* prod = b_.CreateFMul(xv, vec_f64(kw, cw, b_.CreateAdd(wrow, p)));
          b_.CreateStore(b_.CreateFAdd(b_.CreateLoad(vd, a), prod), a);
        };
        if (K4 > 0) loop(K4 / (4 * kVL), [&](llvm::Value* q) {
          for (unsigned a = 0; a < 4; ++a) step(acc[a], b_.CreateAdd(b_.CreateMul(q, c64(4 * kVL)), c64(a * kVL)));
        }, /*no_unroll=*/true);
        if (KV > K4) loop((KV - K4) / kVL, [&](llvm::Value* q) { step(acc[0], b_.CreateAdd(c64(K4), b_.CreateMul(q, c64(kVL)))); });
        llvm::Value* av = b_.CreateFAdd(b_.CreateFAdd(b_.CreateLoad(vd, acc[0]), b_.CreateLoad(vd, acc[1])),
                                        b_.CreateFAdd(b_.CreateLoad(vd, acc[2]), b_.CreateLoad(vd, acc[3])));
        llvm::Value* s = b_.CreateExtractElement(av, std::uint64_t{0});
        for (unsigned l = 1; l < kVL; ++l) s = b_.CreateFAdd(s, b_.CreateExtractElement(av, std::uint64_t{l}));
        b_.CreateStore(s, sum);
        if (K > KV) loop(K - KV, [&](llvm::Value* t) {
          llvm::Value* p = b_.CreateAdd(c64(KV), t);
          llvm::Value* prod = b_.CreateFMul(ld(f64(), cx, b_.CreateAdd(xrow, p)), load_f64(kw, cw, b_.CreateAdd(wrow, p)));
          b_.CreateStore(b_.CreateFAdd(b_.CreateLoad(f64(), sum), prod), sum);
        });
        st(b_.CreateFPTrunc(b_.CreateLoad(f64(), sum), f32()), cy, b_.CreateAdd(b_.CreateMul(r, c64(N)), j));
      }, /*no_unroll=*/true);
    });
    b_.CreateRetVoid();
  }
  // The task: void task(ptr ctx, i64 i), ctx = [x, w, y, chunks].
  auto* task_fn = llvm::Function::Create(llvm::FunctionType::get(b_.getVoidTy(), {ptr(), i64()}, false),
                                         llvm::Function::InternalLinkage, "nt_task", mod_);
  attrs(task_fn);
  b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", task_fn));
  {
    llvm::Value* cx = task_fn->getArg(0);
    llvm::Value* i = task_fn->getArg(1);
    llvm::Value* chunks = ld(i64(), cx, c64(3));
    llvm::Value* lo = b_.CreateSDiv(b_.CreateMul(c64(N), i), chunks);
    llvm::Value* hi = b_.CreateSDiv(b_.CreateMul(c64(N), b_.CreateAdd(i, c64(1))), chunks);
    b_.CreateCall(chunk_fn, {ld(ptr(), cx, c64(0)), ld(ptr(), cx, c64(1)), ld(ptr(), cx, c64(2)), lo, hi});
    b_.CreateRetVoid();
  }
  b_.SetInsertPoint(impl_block);
  // x widened to f64 once (tmp [rows, K]), not once per column.
  loop(rows * K, [&](llvm::Value* i) { st(load_f64(kx, x, i), tmp, i); });
  dispatch(task_fn, {tmp, w, y}, N, par);
}

void Gen::dispatch(llvm::Function* task_fn, const std::vector<llvm::Value*>& ptrs, std::int64_t max_tasks, llvm::Value* par) {
  // ctx = [ptrs..., tasks]; tasks = min(threads, max_tasks), 1 without a pool (inline).
  const TaskPool tp = task_pool(par);
  llvm::Value* ntask = smin(tp.threads, c64(std::max<std::int64_t>(1, max_tasks)));
  llvm::AllocaInst* cx = local(llvm::ArrayType::get(i64(), ptrs.size() + 1), "taskctx");
  for (std::size_t k = 0; k < ptrs.size(); ++k) st(ptrs[k], cx, c64(static_cast<std::int64_t>(k)));
  b_.CreateStore(ntask, gep(i64(), cx, c64(static_cast<std::int64_t>(ptrs.size()))));
  run_tasks(tp, task_fn, cx, ntask);
}

Gen::TaskPool Gen::task_pool(llvm::Value* par) {
  llvm::Value* run = b_.CreateLoad(ptr(), par);
  llvm::Value* pool = b_.CreateLoad(ptr(), gep(ptr(), par, c64(1)));
  llvm::Value* thr = b_.CreateLoad(i64(), gep(i64(), par, c64(2)));
  llvm::Value* run_null = b_.CreateICmpEQ(run, llvm::ConstantPointerNull::get(llvm::PointerType::get(ctx_, 0)));
  llvm::Value* T = b_.CreateSelect(b_.CreateOr(run_null, b_.CreateICmpSLT(thr, c64(1))), c64(1), thr);
  return {run, pool, T};
}

void Gen::run_tasks(const TaskPool& tp, llvm::Function* task_fn, llvm::Value* cx, llvm::Value* ntask) {
  llvm::Function* fn = b_.GetInsertBlock()->getParent();
  llvm::BasicBlock* serial = llvm::BasicBlock::Create(ctx_, "serial", fn);
  llvm::BasicBlock* pooled = llvm::BasicBlock::Create(ctx_, "pooled", fn);
  llvm::BasicBlock* done = llvm::BasicBlock::Create(ctx_, "dispatched", fn);
  b_.CreateCondBr(b_.CreateICmpSLE(ntask, c64(1)), serial, pooled);
  b_.SetInsertPoint(serial);
  b_.CreateCall(task_fn, {cx, c64(0)});
  b_.CreateBr(done);
  b_.SetInsertPoint(pooled);
  auto* run_ty = llvm::FunctionType::get(b_.getVoidTy(), {ptr(), ptr(), ptr(), i64()}, false);
  b_.CreateCall(run_ty, tp.run, {tp.pool, task_fn, cx, ntask});
  b_.CreateBr(done);
  b_.SetInsertPoint(done);
}

}  // namespace ternjit::targets::llvmjit
