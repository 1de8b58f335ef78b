// plan: cuda warp 32
// launch tj_tmatmul_0 grid (1, 2, 1) block (32, 1, 1) shared 0 args in0 weight0 in1 const1 in2 in3 out0 config tpc=32;cols=1;unroll=1;rows=1;cpt=2;mma=1
// weight0 const0 @w [300, 13] tmma2 2048 bytes
#ifndef TJEMU_MMA
TJ_DEV void tj_mma_m16n8k32(tj_i32* d, tj_u32 a0, tj_u32 a1, tj_u32 a2, tj_u32 a3, tj_u32 b0, tj_u32 b1) {
  asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
               : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
#endif
// Four codes (bytes 0, 1, 2) to the weights -1, 0, 1 as int8 bytes (no borrow crosses a byte).
TJ_DEV tj_u32 tj_decode4(tj_u32 c) { return ((c | 0x80808080u) - 0x01010101u) ^ 0x80808080u; }
// Activation bytes x[r, k .. k + 3] of an [M, K] i8 matrix as one register; 0 past M
// rows or K columns (K % 4 == 0: one aligned 4-byte load, k is a multiple of 4).
TJ_DEV tj_u32 tj_a4(const tj_i8* x, tj_u32 r, tj_u32 k, tj_u32 M, tj_u32 K) {
  if (r >= M) return 0u;
  if ((K & 3u) == 0u) return k < K ? *(const tj_u32*)(x + r * K + k) : 0u;
  tj_u32 v = 0u;
  for (tj_u32 b = 0u; b < 4u; ++b)
    if (k + b < K) v |= (tj_u32)(tj_u8)x[r * K + k + b] << (8u * b);
  return v;
}

extern "C" __global__ void __launch_bounds__(32) tj_tmatmul_0(const tj_i8* __restrict__ x, const tj_u32x4* __restrict__ w, const float* __restrict__ e0, const float* __restrict__ e1, const float* __restrict__ e2, const float* __restrict__ e3, float* __restrict__ y) {
  const tj_u32 M = 17u, K = 300u, N = 13u, KB = 2u, NT = 2u, WARPS = 1u, CPT = 2u, ROWS = 1u, RT = 2u;
  const tj_u32 lane = threadIdx.x % 32u, gid = lane >> 2, tig = lane & 3u;
  const tj_u32 nt0 = (blockIdx.x * WARPS + threadIdx.x / 32u) * CPT;
  // Column tiles past NT read tile NT - 1 and store nothing.
  const tj_u32x4* wt0 = w + ((tj_u64)(nt0 + 0u < NT ? nt0 + 0u : NT - 1u) * KB) * 32u + lane;
  const tj_u32x4* wt1 = w + ((tj_u64)(nt0 + 1u < NT ? nt0 + 1u : NT - 1u) * KB) * 32u + lane;
  for (tj_u32 rt = blockIdx.y; rt < RT; rt += gridDim.y) {
    const tj_u32 m0 = rt * ROWS * 16u;
    tj_i32 acc[ROWS * CPT * 4u];
    for (tj_u32 i = 0u; i < ROWS * CPT * 4u; ++i) acc[i] = 0;
    for (tj_u32 kb = 0u; kb < KB; ++kb) {
      const tj_u32x4 wv0 = wt0[kb * 32u];
      const tj_u32x4 wv1 = wt1[kb * 32u];
      for (tj_u32 kt = 0u; kt < 8u; ++kt) {
        const tj_u32 k0 = kb * 256u + kt * 32u;
        if (k0 >= K) break;
        const tj_u32 sh = 4u * (kt & 1u);
        const tj_u32 q0 = tj_wq(wv0, kt >> 1);
        const tj_u32 b0_0 = tj_decode4((q0 >> sh) & 0x03030303u), b1_0 = tj_decode4((q0 >> (sh + 2u)) & 0x03030303u);
        const tj_u32 q1 = tj_wq(wv1, kt >> 1);
        const tj_u32 b0_1 = tj_decode4((q1 >> sh) & 0x03030303u), b1_1 = tj_decode4((q1 >> (sh + 2u)) & 0x03030303u);
        for (tj_u32 t = 0u; t < ROWS; ++t) {
          if (m0 + t * 16u >= M) break;
          const tj_u32 r = m0 + t * 16u + gid, k = k0 + 4u * tig;
          const tj_u32 a0 = tj_a4(x, r, k, M, K), a1 = tj_a4(x, r + 8u, k, M, K), a2 = tj_a4(x, r, k + 16u, M, K), a3 = tj_a4(x, r + 8u, k + 16u, M, K);
          tj_mma_m16n8k32(acc + (t * CPT + 0u) * 4u, a0, a1, a2, a3, b0_0, b1_0);
          tj_mma_m16n8k32(acc + (t * CPT + 1u) * 4u, a0, a1, a2, a3, b0_1, b1_1);
        }
      }
    }
    for (tj_u32 t = 0u; t < ROWS; ++t)
      for (tj_u32 j = 0u; j < CPT; ++j)
        for (tj_u32 i = 0u; i < 4u; ++i) {
          const tj_u32 r = m0 + t * 16u + gid + 8u * (i >> 1), n = (nt0 + j) * 8u + 2u * tig + (i & 1u);
          if (r >= M || n >= N) continue;
          float yv = (float)acc[(t * CPT + j) * 4u + i];
          yv = tj_mul(yv, e0[r * 1u + n * 0u]);
          yv = tj_mul(yv, e1[r * 0u + n * 1u]);
          yv = tj_add(yv, e2[r * 0u + n * 1u]);
          yv = tj_add(yv, e3[r * 13u + n * 1u]);
          yv = tj_relu(yv);
          y[r * N + n] = yv;
        }
  }
}
