// SPDX-License-Identifier: Apache-2.0
// codegen_decoder.cpp - LLVM IR of the decoder ops: gather, slice, concat, layernorm, rope, causal_softmax, kv_write, attention.
//
// Members of Gen (codegen_internal.h). Each mirrors ir/interpret_decoder.cpp: every float
// result is computed in f64 from the operands' exact values in the interpreter's order
// and rounded once (rope's cos/sin and the softmax exp through libm, as the interpreter
// calls them; rope's frequencies theta^(-2i/D) computed here with std::pow, as there), so
// the results are bit for bit. A position or id out of range stops the call with a
// RunError record (fail_if), never a clamp or a wrap. `pos` operands are read at run
// time (an i32 scalar); attention and causal_softmax read only the rows t <= pos + m.
#include "targets/llvm/codegen_internal.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ternjit::targets::llvmjit {

using ir::Op;

namespace {

std::vector<std::int64_t> row_major_strides(const std::vector<std::int64_t>& s) {
  std::vector<std::int64_t> st(s.size(), 1);
  for (std::size_t d = s.size(); d-- > 1;) st[d - 1] = st[d] * s[d];
  return st;
}

std::int64_t elem_bytes(ElemKind k) { return std::max(elem_bits(k) / 8, 1); }

}  // namespace

llvm::Value* Gen::read_pos(const ir::InstData& inst, llvm::Value* pos) {
  // pos >= 0 for every op reading a position (the interpreter's checked_pos).
  llvm::Value* p = b_.CreateSExt(b_.CreateLoad(i32(), pos), i64());
  (void)inst;
  fail_if(b_.CreateICmpSLT(p, c64(0)), RunError::NegativePos, {p});
  return p;
}

void Gen::gather(const ir::InstData& inst, llvm::Value* table, llvm::Value* ids, llvm::Value* y) {
  const auto t = ext(inst.operands[0]);
  const std::int64_t V = t[0], D = t[1];
  const std::int64_t n = f_.type_of(inst.operands[1]).static_numel().value_or(0);
  const std::int64_t eb = elem_bytes(f_.type_of(inst.operands[0]).elem);
  loop(n, [&](llvm::Value* i) {
    llvm::Value* id = b_.CreateSExt(ld(i32(), ids, i), i64());
    fail_if(b_.CreateOr(b_.CreateICmpSLT(id, c64(0)), b_.CreateICmpSGE(id, c64(V))), RunError::GatherId, {id, i});
    b_.CreateMemCpy(gep(i8(), y, b_.CreateMul(i, c64(D * eb))), llvm::MaybeAlign(1),
                    gep(i8(), table, b_.CreateMul(id, c64(D * eb))), llvm::MaybeAlign(1), c64(D * eb));
  }, /*no_unroll=*/true);
}

void Gen::slice(const ir::InstData& inst, llvm::Value* x, llvm::Value* y) {
  const auto& a = std::get<ir::SliceAttrs>(inst.attrs);
  const std::vector<std::int64_t> st = row_major_strides(ext(inst.operands[0]));
  strided_copy(f_.type_of(inst.results[0]).elem, ext(inst.results[0]), st, x,
               a.start * st[static_cast<std::size_t>(a.axis)], y);
}

void Gen::concat(const ir::InstData& inst, const std::vector<llvm::Value*>& in, llvm::Value* y) {
  // Row o of the result [outer, sum of the axis extents x inner] is the rows o of the
  // operands one after another.
  const auto out = ext(inst.results[0]);
  const auto axis = static_cast<std::size_t>(std::get<ir::AxisAttrs>(inst.attrs).axis);
  std::int64_t outer = 1, inner = 1;
  for (std::size_t d = 0; d < axis; ++d) outer *= out[d];
  for (std::size_t d = axis + 1; d < out.size(); ++d) inner *= out[d];
  const std::int64_t eb = elem_bytes(f_.type_of(inst.results[0]).elem), row = out[axis] * inner * eb;
  loop(outer, [&](llvm::Value* o) {
    std::int64_t off = 0;
    for (std::size_t k = 0; k < in.size(); ++k) {
      const std::int64_t n = ext(inst.operands[k])[axis] * inner * eb;
      if (n == 0) continue;
      b_.CreateMemCpy(gep(i8(), y, b_.CreateAdd(b_.CreateMul(o, c64(row)), c64(off))), llvm::MaybeAlign(1),
                      gep(i8(), in[k], b_.CreateMul(o, c64(n))), llvm::MaybeAlign(1), c64(n));
      off += n;
    }
  }, /*no_unroll=*/true);
}

void Gen::layernorm(const ir::InstData& inst, const std::vector<llvm::Value*>& in, llvm::Value* y) {
  const auto [rows, d] = rows_cols(ext(inst.operands[0]));
  const ElemKind kx = f_.type_of(inst.operands[0]).elem, kg = f_.type_of(inst.operands[1]).elem;
  const ElemKind kb = f_.type_of(inst.operands[2]).elem, kr = f_.type_of(inst.results[0]).elem;
  const double eps = std::get<ir::EpsAttrs>(inst.attrs).eps;
  llvm::AllocaInst* acc = local(f64(), "acc");
  loop(rows, [&](llvm::Value* r) {
    llvm::Value* base = b_.CreateMul(r, c64(d));
    b_.CreateStore(cd(0.0), acc);
    loop(d, [&](llvm::Value* j) {
      b_.CreateStore(b_.CreateFAdd(b_.CreateLoad(f64(), acc), load_f64(kx, in[0], b_.CreateAdd(base, j))), acc);
    });
    llvm::Value* mean = b_.CreateFDiv(b_.CreateLoad(f64(), acc), cd(static_cast<double>(d)));
    b_.CreateStore(cd(0.0), acc);
    loop(d, [&](llvm::Value* j) {
      llvm::Value* c = b_.CreateFSub(load_f64(kx, in[0], b_.CreateAdd(base, j)), mean);
      b_.CreateStore(b_.CreateFAdd(b_.CreateLoad(f64(), acc), b_.CreateFMul(c, c)), acc);
    });
    llvm::Value* denom = intr(llvm::Intrinsic::sqrt,
                              {b_.CreateFAdd(b_.CreateFDiv(b_.CreateLoad(f64(), acc), cd(static_cast<double>(d))), cd(eps))});
    loop(d, [&](llvm::Value* j) {
      llvm::Value* at = b_.CreateAdd(base, j);
      llvm::Value* v = b_.CreateFDiv(b_.CreateFSub(load_f64(kx, in[0], at), mean), denom);
      v = b_.CreateFAdd(b_.CreateFMul(v, load_f64(kg, in[1], j)), load_f64(kb, in[2], j));
      store_rounded(kr, v, y, at);
    });
  });
}

void Gen::rope(const ir::InstData& inst, llvm::Value* x, llvm::Value* pos, llvm::Value* y) {
  const auto& a = std::get<ir::RopeAttrs>(inst.attrs);
  const auto s = ext(inst.operands[0]);
  const std::int64_t M = s[0], H = s[1], D = s[2], half = D / 2;
  const ElemKind k = f_.type_of(inst.operands[0]).elem;
  // The frequencies, exactly as the interpreter computes them (one table per kernel).
  std::vector<double> freq(static_cast<std::size_t>(half));
  for (std::int64_t i = 0; i < half; ++i)
    freq[static_cast<std::size_t>(i)] = std::pow(a.theta, -2.0 * static_cast<double>(i) / static_cast<double>(D));
  auto* fty = llvm::ArrayType::get(f64(), static_cast<std::uint64_t>(half));
  auto* table = new llvm::GlobalVariable(mod_, fty, true, llvm::GlobalValue::PrivateLinkage,
                                         llvm::ConstantDataArray::get(ctx_, llvm::ArrayRef<double>(freq)), "rope_freq");
  llvm::Value* p0 = read_pos(inst, pos);
  const bool norm = a.mode == ir::RopeMode::Norm;
  loop(M, [&](llvm::Value* m) {
    llvm::Value* p = b_.CreateSIToFP(b_.CreateAdd(p0, m), f64());
    loop(half, [&](llvm::Value* i) {
      llvm::Value* angle = b_.CreateFMul(p, ld(f64(), table, i));
      llvm::Value* c = libm("cos", angle);
      llvm::Value* sn = libm("sin", angle);
      llvm::Value* ja = norm ? b_.CreateMul(i, c64(2)) : i;
      llvm::Value* jb = norm ? b_.CreateAdd(b_.CreateMul(i, c64(2)), c64(1)) : b_.CreateAdd(i, c64(half));
      loop(H, [&](llvm::Value* h) {
        llvm::Value* base = b_.CreateMul(b_.CreateAdd(b_.CreateMul(m, c64(H)), h), c64(D));
        llvm::Value* va = load_f64(k, x, b_.CreateAdd(base, ja));
        llvm::Value* vb = load_f64(k, x, b_.CreateAdd(base, jb));
        store_rounded(k, b_.CreateFSub(b_.CreateFMul(va, c), b_.CreateFMul(vb, sn)), y, b_.CreateAdd(base, ja));
        store_rounded(k, b_.CreateFAdd(b_.CreateFMul(va, sn), b_.CreateFMul(vb, c)), y, b_.CreateAdd(base, jb));
      });
    }, /*no_unroll=*/true);
  });
}

llvm::Value* Gen::nan_max(llvm::Value* mx, llvm::Value* v) {
  // The interpreter's (isnan(v) || isnan(mx)) ? NaN : std::max(mx, v).
  llvm::Value* isnan = b_.CreateOr(b_.CreateFCmpUNO(v, v), b_.CreateFCmpUNO(mx, mx));
  llvm::Value* m = b_.CreateSelect(b_.CreateFCmpOLT(mx, v), v, mx);
  return b_.CreateSelect(isnan, cd(std::numeric_limits<double>::quiet_NaN()), m);
}

void Gen::causal_softmax(const ir::InstData& inst, llvm::Value* x, llvm::Value* pos, llvm::Value* y) {
  const auto s = ext(inst.operands[0]);
  const std::int64_t M = s[s.size() - 2], T = s.back();
  const std::int64_t batch = f_.type_of(inst.operands[0]).static_numel().value_or(0) / (M * T);
  const ElemKind k = f_.type_of(inst.operands[0]).elem, kr = f_.type_of(inst.results[0]).elem;
  llvm::Value* p0 = read_pos(inst, pos);
  llvm::AllocaInst* mx = local(f64(), "mx");
  llvm::AllocaInst* sum = local(f64(), "sum");
  loop(batch, [&](llvm::Value* bi) {
    loop(M, [&](llvm::Value* m) {
      llvm::Value* base = b_.CreateMul(b_.CreateAdd(b_.CreateMul(bi, c64(M)), m), c64(T));
      // Entries t <= pos + m are kept (at least t = 0: pos >= 0); the rest are exactly 0.
      llvm::Value* kept = smin(c64(T), b_.CreateAdd(b_.CreateAdd(p0, m), c64(1)));
      b_.CreateStore(cd(-std::numeric_limits<double>::infinity()), mx);
      loop_n(kept, [&](llvm::Value* t) {
        b_.CreateStore(nan_max(b_.CreateLoad(f64(), mx), load_f64(k, x, b_.CreateAdd(base, t))), mx);
      });
      llvm::Value* mv = b_.CreateLoad(f64(), mx);
      b_.CreateStore(cd(0.0), sum);
      loop_n(kept, [&](llvm::Value* t) {
        llvm::Value* e = libm("exp", b_.CreateFSub(load_f64(k, x, b_.CreateAdd(base, t)), mv));
        b_.CreateStore(b_.CreateFAdd(b_.CreateLoad(f64(), sum), e), sum);
      });
      llvm::Value* sv = b_.CreateLoad(f64(), sum);
      loop_n(kept, [&](llvm::Value* t) {
        llvm::Value* e = libm("exp", b_.CreateFSub(load_f64(k, x, b_.CreateAdd(base, t)), mv));
        store_rounded(kr, b_.CreateFDiv(e, sv), y, b_.CreateAdd(base, t));
      });
      loop_maybe(b_.CreateSub(c64(T), kept),
                 [&](llvm::Value* t) { store_rounded(kr, cd(0.0), y, b_.CreateAdd(base, b_.CreateAdd(kept, t))); });
    }, /*no_unroll=*/true);
  });
}

llvm::Value* Gen::check_cache_rows(const ir::InstData& inst, llvm::Value* pos, std::int64_t m, std::int64_t c) {
  llvm::Value* p0 = read_pos(inst, pos);
  fail_if(b_.CreateICmpSGT(c64(m), b_.CreateSub(c64(c), p0)), RunError::CacheRows, {p0});
  return p0;
}

void Gen::kv_write(const ir::InstData& inst, const std::vector<llvm::Value*>& in, llvm::Value* y) {
  // The result is the cache with rows [pos, pos + M) of layer `layer` replaced: when the
  // result does not share the cache's buffer (the planner's in-place chain makes them
  // one), the whole cache is copied first.
  const auto cs = ext(inst.operands[0]);
  const std::int64_t C = cs[1], row = cs[2] * cs[3], M = ext(inst.operands[1])[0];
  const std::int64_t layer = std::get<ir::LayerAttrs>(inst.attrs).layer;
  const ElemKind kc = f_.type_of(inst.operands[0]).elem, kr = f_.type_of(inst.operands[1]).elem;
  llvm::Value* p0 = check_cache_rows(inst, in[2], M, C);
  if_then(b_.CreateICmpNE(in[0], y), [&] {
    const auto bytes = static_cast<std::int64_t>(bytes_of(f_.type_of(inst.operands[0])));
    b_.CreateMemCpy(y, llvm::MaybeAlign(1), in[0], llvm::MaybeAlign(1), c64(bytes));
  });
  loop(M, [&](llvm::Value* m) {
    llvm::Value* dst = b_.CreateMul(b_.CreateAdd(c64(layer * C), b_.CreateAdd(p0, m)), c64(row));
    loop(row, [&](llvm::Value* j) {
      llvm::Value* src = b_.CreateAdd(b_.CreateMul(m, c64(row)), j);
      if (kc == kr) st(ld(storage_type(kc), in[1], src), y, b_.CreateAdd(dst, j));  // same kind: the bits
      else store_rounded(kc, load_f64(kr, in[1], src), y, b_.CreateAdd(dst, j));
    });
  });
}

void Gen::attention(const ir::InstData& inst, const std::vector<llvm::Value*>& in, llvm::Value* y, llvm::Value* tmp,
                    llvm::Value* par) {
  // For each row m and query head h: scores s_t = scale * (q . k_t) (f64, in order) for
  // t in [0, pos + m], their softmax, and the f64 sum of p_t v_t, rounded once. The
  // M x HQ (m, h) pairs are split over up to kAttentionTasks tasks run on `par`; task i
  // keeps its scores (C f64) then its accumulator (D f64) at tmp + i (C + D) 8.
  const auto& a = std::get<ir::AttentionAttrs>(inst.attrs);
  const auto qs = ext(inst.operands[0]), cs = ext(inst.operands[1]);
  const std::int64_t M = qs[0], HQ = qs[1], D = qs[2], C = cs[1], HKV = cs[2], g = HQ / HKV;
  const ElemKind kq = f_.type_of(inst.operands[0]).elem, kk = f_.type_of(inst.operands[1]).elem;
  const ElemKind kv = f_.type_of(inst.operands[2]).elem;
  llvm::Value* p0 = check_cache_rows(inst, in[3], M, C);
  const std::int64_t pairs = M * HQ, per = (C + D) * 8;
  llvm::BasicBlock* impl_block = b_.GetInsertBlock();
  auto* chunk_fn = llvm::Function::Create(
      llvm::FunctionType::get(b_.getVoidTy(), {ptr(), ptr(), ptr(), ptr(), ptr(), i64(), i64(), i64()}, false),
      llvm::Function::InternalLinkage, "attn_chunk", mod_);
  attrs(chunk_fn);
  // q, the caches and y are distinct buffers, the task's tmp region its own: without
  // noalias LLVM would reload the accumulators around every cache read.
  for (unsigned k = 0; k < 5; ++k) chunk_fn->addParamAttr(k, llvm::Attribute::NoAlias);
  b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", chunk_fn));
  {
    const std::vector<llvm::Value*> cin = {chunk_fn->getArg(0), chunk_fn->getArg(1), chunk_fn->getArg(2)};
    llvm::Value* cy = chunk_fn->getArg(3);
    llvm::Value* sc = chunk_fn->getArg(4);
    llvm::Value* acc = gep(i8(), sc, c64(C * 8));
    llvm::Value* cp0 = chunk_fn->getArg(5);
    llvm::Value* lo = chunk_fn->getArg(6);
    llvm::Value* hi = chunk_fn->getArg(7);
    llvm::AllocaInst* dot = local(f64(), "dot");
    llvm::AllocaInst* mx = local(f64(), "mx");
    llvm::AllocaInst* sum = local(f64(), "sum");
    auto cache_at = [&](llvm::Value* t, llvm::Value* head) {  // element (layer, t, head, 0)
      return b_.CreateMul(b_.CreateAdd(b_.CreateMul(b_.CreateAdd(c64(a.layer * C), t), c64(HKV)), head), c64(D));
    };
    loop_maybe(b_.CreateSub(hi, lo), [&](llvm::Value* k) {
      llvm::Value* idx = b_.CreateAdd(lo, k);
      llvm::Value* m = b_.CreateSDiv(idx, c64(HQ));
      llvm::Value* h = b_.CreateSRem(idx, c64(HQ));
      llvm::Value* len = b_.CreateAdd(b_.CreateAdd(cp0, m), c64(1));
    llvm::Value* kvh = b_.CreateSDiv(h, c64(g));
    llvm::Value* qb = b_.CreateMul(b_.CreateAdd(b_.CreateMul(m, c64(HQ)), h), c64(D));
    b_.CreateStore(cd(-std::numeric_limits<double>::infinity()), mx);
    // Scores of kTB rows t at once: kTB independent f64 chains, each over j in order
    // (the interpreter's sum), so the adds overlap instead of waiting on one chain.
    constexpr int kTB = 8;
    llvm::Value* nblk = b_.CreateSDiv(len, c64(kTB));
    loop_maybe(nblk, [&](llvm::Value* tb) {
      llvm::Value* t0 = b_.CreateMul(tb, c64(kTB));
      std::vector<llvm::AllocaInst*> dots;
      for (int l = 0; l < kTB; ++l) {
        dots.push_back(local(f64(), "dotl"));
        b_.CreateStore(cd(0.0), dots.back());
      }
      loop(D, [&](llvm::Value* j) {
        llvm::Value* qv = load_f64(kq, cin[0], b_.CreateAdd(qb, j));
        for (int l = 0; l < kTB; ++l) {
          llvm::Value* kv = load_f64(kk, cin[1], b_.CreateAdd(cache_at(b_.CreateAdd(t0, c64(l)), kvh), j));
          b_.CreateStore(b_.CreateFAdd(b_.CreateLoad(f64(), dots[static_cast<std::size_t>(l)]), b_.CreateFMul(qv, kv)),
                         dots[static_cast<std::size_t>(l)]);
        }
      });
      for (int l = 0; l < kTB; ++l) {
        llvm::Value* s = b_.CreateFMul(cd(a.scale), b_.CreateLoad(f64(), dots[static_cast<std::size_t>(l)]));
        st(s, sc, b_.CreateAdd(t0, c64(l)));
        b_.CreateStore(nan_max(b_.CreateLoad(f64(), mx), s), mx);
      }
    });
    llvm::Value* tdone = b_.CreateMul(nblk, c64(kTB));
    loop_maybe(b_.CreateSub(len, tdone), [&](llvm::Value* tt) {
      llvm::Value* t = b_.CreateAdd(tdone, tt);
      llvm::Value* kb = cache_at(t, kvh);
      b_.CreateStore(cd(0.0), dot);
      loop(D, [&](llvm::Value* j) {
        llvm::Value* prod = b_.CreateFMul(load_f64(kq, cin[0], b_.CreateAdd(qb, j)), load_f64(kk, cin[1], b_.CreateAdd(kb, j)));
        b_.CreateStore(b_.CreateFAdd(b_.CreateLoad(f64(), dot), prod), dot);
      });
      llvm::Value* s = b_.CreateFMul(cd(a.scale), b_.CreateLoad(f64(), dot));
      st(s, sc, t);
      b_.CreateStore(nan_max(b_.CreateLoad(f64(), mx), s), mx);
    });
    llvm::Value* mv = b_.CreateLoad(f64(), mx);
    b_.CreateStore(cd(0.0), sum);
    loop_n(len, [&](llvm::Value* t) {
      llvm::Value* e = libm("exp", b_.CreateFSub(ld(f64(), sc, t), mv));
      st(e, sc, t);
      b_.CreateStore(b_.CreateFAdd(b_.CreateLoad(f64(), sum), e), sum);
    });
    llvm::Value* sv = b_.CreateLoad(f64(), sum);
    b_.CreateMemSet(acc, b_.getInt8(0), static_cast<std::uint64_t>(D * 8), llvm::MaybeAlign(8));
    loop_n(len, [&](llvm::Value* t) {
      llvm::Value* w = b_.CreateFDiv(ld(f64(), sc, t), sv);
      llvm::Value* vb = cache_at(t, kvh);
      loop(D, [&](llvm::Value* j) {
        llvm::Value* prod = b_.CreateFMul(w, load_f64(kv, cin[2], b_.CreateAdd(vb, j)));
        st(b_.CreateFAdd(ld(f64(), acc, j), prod), acc, j);
      });
    }, /*no_unroll=*/true);
    loop(D, [&](llvm::Value* j) { st(b_.CreateFPTrunc(ld(f64(), acc, j), f32()), cy, b_.CreateAdd(qb, j)); });
    });
    b_.CreateRetVoid();
  }
  // The task: void task(ptr ctx, i64 i), ctx = [q, kc, vc, y, tmp, pos, tasks].
  auto* task_fn = llvm::Function::Create(llvm::FunctionType::get(b_.getVoidTy(), {ptr(), i64()}, false),
                                         llvm::Function::InternalLinkage, "attn_task", mod_);
  attrs(task_fn);
  b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", task_fn));
  {
    llvm::Value* cx = task_fn->getArg(0);
    llvm::Value* i = task_fn->getArg(1);
    llvm::Value* n = ld(i64(), cx, c64(6));
    std::vector<llvm::Value*> args;
    for (int k = 0; k < 4; ++k) args.push_back(ld(ptr(), cx, c64(k)));
    args.push_back(gep(i8(), ld(ptr(), cx, c64(4)), b_.CreateMul(i, c64(per))));
    args.push_back(ld(i64(), cx, c64(5)));
    args.push_back(b_.CreateSDiv(b_.CreateMul(c64(pairs), i), n));
    args.push_back(b_.CreateSDiv(b_.CreateMul(c64(pairs), b_.CreateAdd(i, c64(1))), n));
    b_.CreateCall(chunk_fn, args);
    b_.CreateRetVoid();
  }
  b_.SetInsertPoint(impl_block);
  dispatch(task_fn, {in[0], in[1], in[2], y, tmp, b_.CreateIntToPtr(p0, ptr())}, std::min(kAttentionTasks, pairs), par);
}

}  // namespace ternjit::targets::llvmjit
