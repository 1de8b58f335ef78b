// SPDX-License-Identifier: Apache-2.0
// tmatmul.cpp - the CUDA C++ / HIP C++ ternary matmul kernels: dp4a or f32 sums over the tcodes64 layout, the
// mma.sync form over tmma2, the row-sum kernel, and the host packers of both layouts (generate.cpp writes the
// rest and the launch plan).
#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "targets/simt/generate_internal.h"
#include "targets/load_value.h"

namespace ternjit::targets::simt::detail {

using ir::Op;

// ------------------------------------------------------------------ tmatmul


// The epilogue and store of y[r, n] from f32 `yv` (at indent `in`).
namespace {

std::string epilogue_code(const std::vector<EpilogueRead>& epilogue, ir::Activation act, const std::string& in) {
  std::string b;
  for (std::size_t i = 0; i < epilogue.size(); ++i) {
    const EpilogueRead& ep = epilogue[i];
    const std::string v = "e" + std::to_string(i) + "[r * " + u(ep.row_stride) + " + n * " + u(ep.col_stride) + "]";
    b += in + "yv = " + apply(ep.op, "yv", v) + ";\n";
  }
  if (auto a = ir::activation_op(act)) b += in + "yv = " + apply(*a, "yv", "") + ";\n";
  return b + in + "y[r * N + n] = yv;\n";
}

}  // namespace


// The tensor-core tmatmul (i8 x, no grouped scale; weights in the tmma2 layout of
// generate.h). Warp `wi` of the block owns column tiles nt0 .. nt0 + CPT - 1 (8
// columns each) and row tiles of 16 (ROWS per pass of the grid's y loop). Per block of
// 256 k a lane loads its 16 bytes of each column tile (8 k-tiles of B fragments as
// codes), decodes them to -1/0/1 int8, loads its A fragment registers of each row tile
// (tj_a4: zero past M and K) and issues one mma per (row tile, column tile, k-tile):
// every lane of the warp runs the same mma sequence (the loop bounds are warp-uniform),
// as mma.sync.aligned requires. D is the exact int32 sum of x w (no row-sum
// correction); the epilogue is the dp4a kernel's.
std::string mma_kernel(const std::string& name, const TMatMulShape& s, const TMatMulConfig& c,
                       const std::vector<EpilogueRead>& epilogue, ir::Activation act) {
  const std::int64_t kb = (s.k + 255) / 256, nt = (s.n + 7) / 8, mt = (s.m + 15) / 16;
  std::vector<std::string> p = {"const tj_i8* __restrict__ x", "const tj_u32x4* __restrict__ w"};
  for (std::size_t i = 0; i < epilogue.size(); ++i) p.push_back("const float* __restrict__ e" + std::to_string(i));
  p.push_back("float* __restrict__ y");
  const std::uint32_t block = 32 * c.cols;
  std::string g = head(name, block, p);
  g += "  const tj_u32 M = " + u(s.m) + ", K = " + u(s.k) + ", N = " + u(s.n) + ", KB = " + u(kb) + ", NT = " + u(nt) +
       ", WARPS = " + u(c.cols) + ", CPT = " + u(c.cpt) + ", ROWS = " + u(c.rows) + ", RT = " +
       u((mt + c.rows - 1) / c.rows) + ";\n";
  g += "  const tj_u32 lane = threadIdx.x % 32u, gid = lane >> 2, tig = lane & 3u;\n";
  g += "  const tj_u32 nt0 = (blockIdx.x * WARPS + threadIdx.x / 32u) * CPT;\n";
  g += "  // Column tiles past NT read tile NT - 1 and store nothing.\n";
  for (std::uint32_t j = 0; j < c.cpt; ++j) {
    const std::string J = std::to_string(j);
    g += "  const tj_u32x4* wt" + J + " = w + ((tj_u64)(nt0 + " + u(j) + " < NT ? nt0 + " + u(j) +
         " : NT - 1u) * KB) * 32u + lane;\n";
  }
  g += "  for (tj_u32 rt = blockIdx.y; rt < RT; rt += gridDim.y) {\n";
  g += "    const tj_u32 m0 = rt * ROWS * 16u;\n";
  g += "    tj_i32 acc[ROWS * CPT * 4u];\n    for (tj_u32 i = 0u; i < ROWS * CPT * 4u; ++i) acc[i] = 0;\n";
  g += "    for (tj_u32 kb = 0u; kb < KB; ++kb) {\n";
  for (std::uint32_t j = 0; j < c.cpt; ++j)
    g += "      const tj_u32x4 wv" + std::to_string(j) + " = wt" + std::to_string(j) + "[kb * 32u];\n";
  g += "      for (tj_u32 kt = 0u; kt < 8u; ++kt) {\n";
  g += "        const tj_u32 k0 = kb * 256u + kt * 32u;\n        if (k0 >= K) break;\n";
  g += "        const tj_u32 sh = 4u * (kt & 1u);\n";
  for (std::uint32_t j = 0; j < c.cpt; ++j) {
    const std::string J = std::to_string(j);
    g += "        const tj_u32 q" + J + " = tj_wq(wv" + J + ", kt >> 1);\n";
    g += "        const tj_u32 b0_" + J + " = tj_decode4((q" + J + " >> sh) & 0x03030303u), b1_" + J +
         " = tj_decode4((q" + J + " >> (sh + 2u)) & 0x03030303u);\n";
  }
  g += "        for (tj_u32 t = 0u; t < ROWS; ++t) {\n";
  g += "          if (m0 + t * 16u >= M) break;\n";
  g += "          const tj_u32 r = m0 + t * 16u + gid, k = k0 + 4u * tig;\n";
  g += "          const tj_u32 a0 = tj_a4(x, r, k, M, K), a1 = tj_a4(x, r + 8u, k, M, K), a2 = tj_a4(x, r, k + 16u, M, K),"
       " a3 = tj_a4(x, r + 8u, k + 16u, M, K);\n";
  for (std::uint32_t j = 0; j < c.cpt; ++j) {
    const std::string J = std::to_string(j);
    g += "          tj_mma_m16n8k32(acc + (t * CPT + " + u(j) + ") * 4u, a0, a1, a2, a3, b0_" + J + ", b1_" + J + ");\n";
  }
  g += "        }\n      }\n    }\n";
  g += "    for (tj_u32 t = 0u; t < ROWS; ++t)\n      for (tj_u32 j = 0u; j < CPT; ++j)\n        for (tj_u32 i = 0u; i < 4u; ++i) {\n";
  g += "          const tj_u32 r = m0 + t * 16u + gid + 8u * (i >> 1), n = (nt0 + j) * 8u + 2u * tig + (i & 1u);\n";
  g += "          if (r >= M || n >= N) continue;\n";
  g += "          float yv = (float)acc[(t * CPT + j) * 4u + i];\n";
  g += epilogue_code(epilogue, act, "          ") + "        }\n  }\n}\n";
  return g;
}

// The tmatmul kernel (generate.h: the weight layout; TMatMulConfig: the blocking).
// Thread (column group c of the block, lane l) sums chunks l, l + TPC, ... of the K of
// columns n0 .. n0 + CPT - 1 for `rows` rows at a time (an activation chunk is loaded
// once and used for every column); the column's threads reduce (tj_colsum) and its first
// thread applies the epilogue and stores. i8 x: int32 sums of dp4a against the codes,
// minus the row sums rs[r * G + g] (exact, wrapping like the reference); grouped: per
// group g the int32 sum p_g, then y += float(p_g) * s[g, n] in f32, ascending g. f32 x:
// f32 sums.
std::string tmatmul_kernel(const std::string& name, const TMatMulShape& s, const TMatMulConfig& c,
                           const std::vector<EpilogueRead>& epilogue, ir::Activation act) {
  const bool int8 = s.x == ElemKind::I8, grouped = s.group > 0;
  const std::int64_t chunks = (s.k + kChunk - 1) / kChunk, full = s.k / kChunk;
  const std::int64_t groups = grouped ? ir::grouped_scale_rows(s.k, s.group) : 1;
  const std::uint32_t block = c.tpc * c.cols, cpt = c.cpt;
  std::vector<std::string> p;
  p.push_back(int8 ? "const tj_i8* __restrict__ x" : "const float* __restrict__ x");
  p.push_back("const tj_u32x4* __restrict__ w");
  if (int8) p.push_back("const tj_i32* __restrict__ rs");
  if (grouped) p.push_back("const float* __restrict__ gs");
  for (std::size_t i = 0; i < epilogue.size(); ++i) p.push_back("const float* __restrict__ e" + std::to_string(i));
  p.push_back("float* __restrict__ y");
  const std::string acc_ty = int8 ? "tj_i32" : "float";
  std::string g = head(name, block, p);
  g += "  const tj_u32 M = " + u(s.m) + ", K = " + u(s.k) + ", N = " + u(s.n) + ", C = " + u(chunks) +
       ", CF = " + u(full) + ", TPC = " + u(c.tpc) + ", COLS = " + u(c.cols) + ", CPT = " + u(cpt) +
       ", ROWS = " + u(c.rows) + ", RT = " + u((s.m + c.rows - 1) / c.rows) + ", G = " + u(groups) + ";\n";
  g += "  (void)C; (void)CF; (void)K; (void)G;\n";
  g += "  __shared__ " + acc_ty + " red[" + std::to_string(std::max<std::uint32_t>(1, block / 32)) + "];\n";
  g += "  const tj_u32 lane = threadIdx.x % TPC, n0 = (blockIdx.x * COLS + threadIdx.x / TPC) * CPT;\n";
  g += "  // Columns past N read column N - 1 and store nothing.\n";
  for (std::uint32_t j = 0; j < cpt; ++j) {
    const std::string J = std::to_string(j);
    g += "  const tj_u32 nn" + J + " = n0 + " + u(j) + " < N ? n0 + " + u(j) + " : N - 1u;\n";
    g += "  const tj_u32x4* wc" + J + " = w + (tj_u64)nn" + J + " * C;\n";
  }
  g += "  for (tj_u32 rt = blockIdx.y; rt < RT; rt += gridDim.y) {\n    const tj_u32 r0 = rt * ROWS;\n";
  const std::string xld = s.k % 16 == 0 ? "tj_xld16" : s.k % 4 == 0 ? "tj_xld4" : "tj_xld1";
  // The row loop over t with `body` (at indent `in`).
  auto row_loop = [&](const std::string& in, const std::string& body) {
    return in + "for (tj_u32 t = 0u; t < ROWS; ++t) {\n" + in + "  if (r0 + t >= M) break;\n" + body + in + "}\n";
  };
  // One chunk `ci` of row t against weights w<sfx>_<j> (j < CPT). i8: the activations
  // loaded once (tail: only the bytes before K); f32: x[i] for i in [lo, hi) of the chunk.
  auto chunk = [&](const std::string& in, const std::string& ci, const std::string& sfx, bool tail, const std::string& lo,
                   const std::string& hi) {
    std::string b;
    const std::string xp = "x + (r0 + t) * K + " + ci + " * 64u";
    if (int8) {
      b += in + "{\n" + in + "  tj_i32 xa[16];\n";
      b += in + "  " + (tail ? "tj_xld_tail(" + xp + ", K - " + ci + " * 64u, xa);\n" : xld + "(" + xp + ", xa);\n");
      for (std::uint32_t j = 0; j < cpt; ++j)
        b += in + "  acc[t * CPT + " + u(j) + "] = tj_dot64(xa, w" + sfx + "_" + std::to_string(j) + ", acc[t * CPT + " +
             u(j) + "]);\n";
      b += in + "}\n";
    } else {
      for (std::uint32_t j = 0; j < cpt; ++j)
        b += in + "acc[t * CPT + " + u(j) + "] = tj_fchunk(" + xp + ", w" + sfx + "_" + std::to_string(j) + ", " + lo +
             ", " + hi + ", acc[t * CPT + " + u(j) + "]);\n";
    }
    return b;
  };
  auto load_w = [&](const std::string& in, const std::string& sfx, const std::string& ci, bool mut) {
    std::string b;
    for (std::uint32_t j = 0; j < cpt; ++j)
      b += in + (mut ? "tj_u32x4 w" : "const tj_u32x4 w") + sfx + "_" + std::to_string(j) + " = wc" + std::to_string(j) +
           "[" + ci + "];\n";
    return b;
  };
  // i8 with rows x cpt >= 8 accumulators: the full chunks run as a loop over the 4
  // weight words q that ptxas is told not to unroll (`#pragma unroll 1`), the rows and
  // columns unrolled inside it: the same loads and dp4a, a quarter of the code (NVRTC
  // compile latency of the 8-row x 4-column kernels).
  const bool qloop = int8 && c.rows * cpt >= 8;
  const std::string xq =
      s.k % 16 == 0 ? "16" : s.k % 4 == 0 ? "4" : "1";  // the load width of a row's 16 bytes of word q
  // Word q of chunk `ci` of row t against weights w<sfx>_<j>: 16 activation bytes, 4 dp4a per column.
  auto chunk_q = [&](const std::string& in, const std::string& ci, const std::string& sfx) {
    const std::string xp = "x + (r0 + t) * K + " + ci + " * 64u + 16u * q";
    std::string b = in + "{\n";
    if (xq == "16") {
      b += in + "  const tj_u32x4 xv = *(const tj_u32x4*)(" + xp + ");\n";
      b += in + "  const tj_i32 a0 = (tj_i32)xv.x, a1 = (tj_i32)xv.y, a2 = (tj_i32)xv.z, a3 = (tj_i32)xv.w;\n";
    } else if (xq == "4") {
      b += in + "  const tj_i32* xv = (const tj_i32*)(" + xp + ");\n";
      b += in + "  const tj_i32 a0 = xv[0], a1 = xv[1], a2 = xv[2], a3 = xv[3];\n";
    } else {
      b += in + "  const tj_i8* xv = " + xp + ";\n";
      b += in + "  const tj_i32 a0 = tj_ld4(xv), a1 = tj_ld4(xv + 4u), a2 = tj_ld4(xv + 8u), a3 = tj_ld4(xv + 12u);\n";
    }
    for (std::uint32_t j = 0; j < cpt; ++j)
      b += in + "  acc[t * CPT + " + u(j) + "] = tj_word(a0, a1, a2, a3, tj_wq(w" + sfx + "_" + std::to_string(j) +
           ", q), acc[t * CPT + " + u(j) + "]);\n";
    return b + in + "}\n";
  };
  auto q_loop = [&](const std::string& in, const std::string& body) {
    return in + "#pragma unroll 1\n" + in + "for (tj_u32 q = 0u; q < 4u; ++q) {\n" + row_loop(in + "  ", body) + in + "}\n";
  };
  const std::string zero = int8 ? "0" : "0.0f";
  auto epilogue_store = [&](const std::string& in) { return epilogue_code(epilogue, act, in); };
  if (!grouped) {
    g += "    " + acc_ty + " acc[ROWS * CPT];\n    for (tj_u32 i = 0u; i < ROWS * CPT; ++i) acc[i] = " + zero + ";\n";
    g += "    tj_u32 c = lane;\n";
    if (c.unroll > 1) {
      // `unroll` 16-byte weight loads per column issued before any of them is used.
      g += "    for (; c + " + u(c.unroll - 1) + " * TPC < CF; c += " + u(c.unroll) + " * TPC) {\n";
      std::string body;
      for (std::uint32_t i = 0; i < c.unroll; ++i) {
        g += load_w("      ", std::to_string(i), "c + " + u(i) + " * TPC", false);
        body += qloop ? chunk_q("          ", "(c + " + u(i) + " * TPC)", std::to_string(i))
                      : chunk("        ", "(c + " + u(i) + " * TPC)", std::to_string(i), false, "0u", "64u");
      }
      g += (qloop ? q_loop("      ", body) : row_loop("      ", body)) + "    }\n";
    }
    g += "    for (; c < CF; c += TPC) {\n" + load_w("      ", "0", "c", false) +
         (qloop ? q_loop("      ", chunk_q("          ", "c", "0"))
                : row_loop("      ", chunk("        ", "c", "0", false, "0u", "64u"))) +
         "    }\n";
    if (full < chunks)
      g += "    if (lane == CF % TPC) {\n" + load_w("      ", "0", "CF", false) +
           row_loop("      ", chunk("        ", "CF", "0", true, "0u", "K - CF * 64u")) + "    }\n";
    const std::uint32_t vals = c.rows * cpt;
    if (int8 && c.tpc >= 2 && c.tpc <= 32 && vals % c.tpc == 0) {
      // Many int32 sums over a column group of TPC <= 32 lanes: a butterfly that halves
      // the values each lane holds per xor step (vals - vals / TPC shuffles instead of
      // vals log2 TPC), after which lane l holds the whole sums of values
      // (l % TPC) * PER .. + PER - 1 and applies their epilogues (integer sums: the
      // order does not matter).
      const std::uint32_t per = vals / c.tpc;
      std::uint32_t len = vals;
      for (std::uint32_t o = c.tpc / 2; o >= 1; o /= 2, len /= 2) {
        const std::uint32_t h = len / 2;
        g += "    {\n      const bool hb = (lane & " + u(o) + ") != 0u;\n";
        for (std::uint32_t i = 0; i < h; ++i) {
          const std::string lo = "acc[" + u(i) + "]", hi = "acc[" + u(i + h) + "]";
          g += "      { const tj_i32 s = hb ? " + lo + " : " + hi + ", k = hb ? " + hi + " : " + lo + "; " + lo +
               " = k + tj_shfl_xor(s, " + u(o) + ", " + u(c.tpc) + "); }\n";
        }
        g += "    }\n";
      }
      g += "    for (tj_u32 i = 0u; i < " + u(per) + "; ++i) {\n";
      g += "      const tj_u32 vi = lane * " + u(per) + " + i, r = r0 + vi / CPT, n = n0 + vi % CPT;\n";
      g += "      if (r >= M || n >= N) continue;\n";
      g += "      float yv = (float)(tj_i32)((tj_u32)acc[i] - (tj_u32)rs[r]);\n";
      g += epilogue_store("      ") + "    }\n  }\n}\n";
      return g;
    }
    g += "    for (tj_u32 t = 0u; t < ROWS; ++t) {\n      if (r0 + t >= M) break;\n";
    g += "      for (tj_u32 j = 0u; j < CPT; ++j) {\n";
    g += "        " + acc_ty + " v = tj_colsum<" + u(c.tpc) + ">(acc[t * CPT + j], red);\n";
    g += "        const tj_u32 n = n0 + j, r = r0 + t;\n        if (lane != 0u || n >= N) continue;\n";
    g += int8 ? "        float yv = (float)(tj_i32)((tj_u32)v - (tj_u32)rs[r]);\n" : "        float yv = v;\n";
    g += epilogue_store("        ") + "      }\n    }\n  }\n}\n";
    return g;
  }
  g += "    float gacc[ROWS * CPT];\n    for (tj_u32 i = 0u; i < ROWS * CPT; ++i) gacc[i] = 0.0f;\n";
  g += "    for (tj_u32 gi = 0u; gi < G; ++gi) {\n";
  g += "      const tj_u32 lo = gi * " + u(s.group) + ", hi = lo + " + u(s.group) + " < K ? lo + " + u(s.group) +
       " : K;\n";
  g += "      " + acc_ty + " acc[ROWS * CPT];\n      for (tj_u32 i = 0u; i < ROWS * CPT; ++i) acc[i] = " + zero + ";\n";
  g += "      for (tj_u32 c = lo / 64u + lane; c < (hi + 63u) / 64u; c += TPC) {\n";
  g += load_w("        ", "0", "c", int8 && s.group % kChunk != 0);
  if (int8 && s.group % kChunk != 0) {
    // A group's partial chunk: the codes outside [lo, hi) cleared.
    g += "        if (c * 64u < lo || c * 64u + 64u > hi) {\n";
    for (std::uint32_t j = 0; j < cpt; ++j)
      g += "          w0_" + std::to_string(j) + " = tj_kmask(w0_" + std::to_string(j) + ", c * 64u, lo, hi);\n";
    g += "        }\n";
  }
  std::string body;
  if (int8) {
    body = "          if (c < CF) {\n" + chunk("            ", "c", "0", false, "", "") + "          } else {\n" +
           chunk("            ", "c", "0", true, "", "") + "          }\n";
  } else {
    g += "        const tj_u32 ilo = lo > c * 64u ? lo - c * 64u : 0u, ihi = hi < c * 64u + 64u ? hi - c * 64u : 64u;\n";
    body = chunk("          ", "c", "0", false, "ilo", "ihi");
  }
  g += row_loop("        ", body) + "      }\n";
  g += "      for (tj_u32 t = 0u; t < ROWS; ++t) {\n        if (r0 + t >= M) break;\n";
  g += "        for (tj_u32 j = 0u; j < CPT; ++j) {\n";
  g += "          " + acc_ty + " v = tj_colsum<" + u(c.tpc) + ">(acc[t * CPT + j], red);\n";
  g += "          if (lane != 0u) continue;\n";
  g += int8 ? "          const float pv = (float)(tj_i32)((tj_u32)v - (tj_u32)rs[(r0 + t) * G + gi]);\n"
            : "          const float pv = v;\n";
  g += "          const tj_u32 nj = n0 + j < N ? n0 + j : N - 1u;\n";
  g += "          gacc[t * CPT + j] = tj_add(gacc[t * CPT + j], tj_mul(pv, gs[gi * N + nj]));\n        }\n      }\n    }\n";
  g += "    for (tj_u32 t = 0u; t < ROWS; ++t) {\n      if (r0 + t >= M) break;\n";
  g += "      for (tj_u32 j = 0u; j < CPT; ++j) {\n";
  g += "        const tj_u32 n = n0 + j, r = r0 + t;\n        if (lane != 0u || n >= N) continue;\n";
  g += "        float yv = gacc[t * CPT + j];\n";
  g += epilogue_store("        ") + "      }\n    }\n  }\n}\n";
  return g;
}

// The row sums of i8 activations x[M, K] per group: rs[r * G + g] = sum of x[r, k] over
// k in [g group, min(K, (g + 1) group)). One block per (group, row).
std::string rowsum_kernel(const std::string& name, std::int64_t m, std::int64_t k, std::int64_t group) {
  const std::int64_t groups = ir::grouped_scale_rows(k, group);
  std::string g = head(name, kRowBlock, {"const tj_i8* __restrict__ x", "tj_i32* __restrict__ rs"});
  g += "  const tj_u32 K = " + u(k) + ", GROUP = " + u(group) + ", G = " + u(groups) + ", M = " + u(m) + ";\n";
  g += "  __shared__ tj_i32 red[" + std::to_string(kRowBlock / 32) + "];\n";
  g += "  for (tj_u32 r = blockIdx.y; r < M; r += gridDim.y) {\n";
  g += "    const tj_u32 lo = blockIdx.x * GROUP, hi = lo + GROUP < K ? lo + GROUP : K;\n";
  g += "    tj_i32 v = 0;\n    for (tj_u32 i = lo + threadIdx.x; i < hi; i += blockDim.x) v += x[r * K + i];\n";
  g += "    v = tj_block_isum(v, red);\n    if (threadIdx.x == 0u) rs[r * G + blockIdx.x] = v;\n  }\n}\n";
  return g;
}

}  // namespace ternjit::targets::simt::detail

namespace ternjit::targets::simt {

using detail::kChunk;
using detail::kMaxElems;

std::string_view layout_name(WeightLayout layout) { return layout == WeightLayout::Mma2 ? "tmma2" : "tcodes64"; }

std::size_t packed_weight_bytes(std::int64_t k, std::int64_t n, WeightLayout layout) {
  if (layout == WeightLayout::Mma2)
    return static_cast<std::size_t>((n + 7) / 8) * static_cast<std::size_t>((k + 255) / 256) * 512;
  return static_cast<std::size_t>(n) * static_cast<std::size_t>((k + kChunk - 1) / kChunk) * 16;
}

namespace {
template <class Read>
Result<std::vector<std::uint8_t>> pack(std::int64_t k, std::int64_t n, WeightLayout layout, Read read) {
  if (k <= 0 || n <= 0) return make_error(ErrorCode::InvalidInput, "a ternary weight must be a non-empty [K, N] matrix");
  const bool mma = layout == WeightLayout::Mma2;
  // Bytes per column (tcodes64) or per 8-column tile (tmma2), and columns or tiles.
  const std::int64_t kp = (k + kChunk - 1) / kChunk * kChunk, kb = (k + 255) / 256;
  const std::int64_t per = mma ? kb * 512 : kp / 4, count = mma ? (n + 7) / 8 : n;
  if (count > std::numeric_limits<std::int64_t>::max() / per || per * count > kMaxElems)
    return make_error(ErrorCode::InvalidArgument, "a packed ternary weight of [" + std::to_string(k) + ", " +
                                                      std::to_string(n) + "] is over 2 GiB");
  // tmma2 padding is code 1 (weight 0) in every 2-bit field: 0x55.
  std::vector<std::uint8_t> out(static_cast<std::size_t>(per * count), mma ? 0x55 : 0);
  std::vector<std::int8_t> row(static_cast<std::size_t>(n));
  for (std::int64_t kk = 0; kk < k; ++kk) {
    read(kk, row);
    const std::int64_t kw = kk / 16, j = (kk % 16) / 4, b = kk % 4;
    // tmma2: block kk / 256; in it k-tile kt = 2 q + h, within the tile 4 t + b + 16 e.
    const std::int64_t kr = kk % 256, kt = kr / 32, kin = kr % 32, e = kin / 16, t = (kin % 16) / 4;
    for (std::int64_t c = 0; c < n; ++c) {
      const std::int8_t w = row[static_cast<std::size_t>(c)];
      if (w < -1 || w > 1)
        return make_error(ErrorCode::InvalidInput, "a ternary weight holds " + std::to_string(w) + " at [" +
                                                       std::to_string(kk) + ", " + std::to_string(c) + "]");
      const auto code = static_cast<std::uint32_t>(w + 1);
      if (mma) {
        // Lane 4 g + t of block (tile c / 8, kk / 256), word kt / 2, bits 8 b + 2 (2 (kt % 2) + e).
        const std::int64_t lane = (c % 8) * 4 + t;
        const std::size_t byte =
            static_cast<std::size_t>((((c / 8) * kb + kk / 256) * 32 + lane) * 16 + (kt / 2) * 4 + b);
        const unsigned shift = static_cast<unsigned>(2 * (2 * (kt % 2) + e));
        out[byte] = static_cast<std::uint8_t>((out[byte] & ~(3u << shift)) | (code << shift));
        continue;
      }
      // Word kw of column c, little-endian, bit 8 b + 2 j.
      const std::size_t byte = static_cast<std::size_t>(c * (kp / 4) + kw * 4 + b);
      out[byte] = static_cast<std::uint8_t>(out[byte] | (code << (2 * j)));
    }
  }
  return out;
}
}  // namespace

Result<std::vector<std::uint8_t>> pack_ternary_weight(const LoadValue& value, std::int64_t k, std::int64_t n,
                                                      WeightLayout layout) {
  const auto& shape = value.shape();
  if (shape.size() != 2 || shape[0] != k || shape[1] != n)
    return make_error(ErrorCode::InvalidInput, "a ternary weight read as [" + std::to_string(k) + ", " +
                                                   std::to_string(n) + "] has another shape");
  return pack(k, n, layout, [&](std::int64_t kk, std::span<std::int8_t> row) {
    value.read_int8(static_cast<std::size_t>(kk * n), row);
  });
}

Result<std::vector<std::uint8_t>> pack_ternary_weight(const std::int8_t* w, std::int64_t k, std::int64_t n,
                                                      WeightLayout layout) {
  if (w == nullptr) return make_error(ErrorCode::InvalidArgument, "pack_ternary_weight: null weights");
  return pack(k, n, layout, [&](std::int64_t kk, std::span<std::int8_t> row) {
    std::copy_n(w + kk * n, row.size(), row.begin());
  });
}

}  // namespace ternjit::targets::simt
