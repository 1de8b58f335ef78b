// SPDX-License-Identifier: Apache-2.0
// codegen_tmatmul.cpp - LLVM IR of the ternary matmul: plain loops, int8 dot products on weight panels, packed 2-bit panels.
//
// Members of Gen (codegen_internal.h). Exact integer sums (modulo 2^32, as the interpreter
// wraps), then the interpreter's float epilogue; README.md "Packed 2-bit panels" states the layouts.
#include "targets/llvm/codegen_internal.h"

#include <algorithm>
#include <optional>

#include "targets/common/step_plan.h"

namespace ternjit::targets::llvmjit {

using ir::Op;

void Gen::tmatmul(const ir::InstData& inst, const std::vector<llvm::Value*>& in, llvm::Value* y) {
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

void Gen::tmatmul_dot(const ir::InstData& inst, const std::vector<llvm::Value*>& in, llvm::Value* y, llvm::Value* tmp) {
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

llvm::Value* Gen::dot4(llvm::Value* acc, llvm::Value* u, llvm::Value* xb) {
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

void Gen::tmatmul_packed(const ir::InstData& inst, const std::vector<llvm::Value*>& in, llvm::Value* y, llvm::Value* tmp,
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
  const TaskPool tp = task_pool(par);
  llvm::Value* T = tp.threads;
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
  run_tasks(tp, task_fn, cx, ntask);
}

}  // namespace ternjit::targets::llvmjit
