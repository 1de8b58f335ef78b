// plan: cuda warp 32
// launch tj_rowsum_0 grid (3, 3, 1) block (256, 1, 1) shared 0 args in0 scratch0
// launch tj_tmatmul_0 grid (1, 1, 1) block (256, 1, 1) shared 0 args in0 weight0 scratch0 const1 in1 out0 config tpc=1;cols=256;unroll=1;rows=3;cpt=2
// scratch0 36 bytes
// weight0 const0 @w [45, 19] tcodes64 304 bytes
extern "C" __global__ void __launch_bounds__(256) tj_rowsum_0(const tj_i8* __restrict__ x, tj_i32* __restrict__ rs) {
  const tj_u32 K = 45u, GROUP = 20u, G = 3u, M = 3u;
  __shared__ tj_i32 red[8];
  for (tj_u32 r = blockIdx.y; r < M; r += gridDim.y) {
    const tj_u32 lo = blockIdx.x * GROUP, hi = lo + GROUP < K ? lo + GROUP : K;
    tj_i32 v = 0;
    for (tj_u32 i = lo + threadIdx.x; i < hi; i += blockDim.x) v += x[r * K + i];
    v = tj_block_isum(v, red);
    if (threadIdx.x == 0u) rs[r * G + blockIdx.x] = v;
  }
}

extern "C" __global__ void __launch_bounds__(256) tj_tmatmul_0(const tj_i8* __restrict__ x, const tj_u32x4* __restrict__ w, const tj_i32* __restrict__ rs, const float* __restrict__ gs, const float* __restrict__ e0, float* __restrict__ y) {
  const tj_u32 M = 3u, K = 45u, N = 19u, C = 1u, CF = 0u, TPC = 1u, COLS = 256u, CPT = 2u, ROWS = 3u, RT = 1u, G = 3u;
  (void)C; (void)CF; (void)K; (void)G;
  __shared__ tj_i32 red[8];
  const tj_u32 lane = threadIdx.x % TPC, n0 = (blockIdx.x * COLS + threadIdx.x / TPC) * CPT;
  // Columns past N read column N - 1 and store nothing.
  const tj_u32 nn0 = n0 + 0u < N ? n0 + 0u : N - 1u;
  const tj_u32x4* wc0 = w + (tj_u64)nn0 * C;
  const tj_u32 nn1 = n0 + 1u < N ? n0 + 1u : N - 1u;
  const tj_u32x4* wc1 = w + (tj_u64)nn1 * C;
  for (tj_u32 rt = blockIdx.y; rt < RT; rt += gridDim.y) {
    const tj_u32 r0 = rt * ROWS;
    float gacc[ROWS * CPT];
    for (tj_u32 i = 0u; i < ROWS * CPT; ++i) gacc[i] = 0.0f;
    for (tj_u32 gi = 0u; gi < G; ++gi) {
      const tj_u32 lo = gi * 20u, hi = lo + 20u < K ? lo + 20u : K;
      tj_i32 acc[ROWS * CPT];
      for (tj_u32 i = 0u; i < ROWS * CPT; ++i) acc[i] = 0;
      for (tj_u32 c = lo / 64u + lane; c < (hi + 63u) / 64u; c += TPC) {
        tj_u32x4 w0_0 = wc0[c];
        tj_u32x4 w0_1 = wc1[c];
        if (c * 64u < lo || c * 64u + 64u > hi) {
          w0_0 = tj_kmask(w0_0, c * 64u, lo, hi);
          w0_1 = tj_kmask(w0_1, c * 64u, lo, hi);
        }
        for (tj_u32 t = 0u; t < ROWS; ++t) {
          if (r0 + t >= M) break;
          if (c < CF) {
            {
              tj_i32 xa[16];
              tj_xld1(x + (r0 + t) * K + c * 64u, xa);
              acc[t * CPT + 0u] = tj_dot64(xa, w0_0, acc[t * CPT + 0u]);
              acc[t * CPT + 1u] = tj_dot64(xa, w0_1, acc[t * CPT + 1u]);
            }
          } else {
            {
              tj_i32 xa[16];
              tj_xld_tail(x + (r0 + t) * K + c * 64u, K - c * 64u, xa);
              acc[t * CPT + 0u] = tj_dot64(xa, w0_0, acc[t * CPT + 0u]);
              acc[t * CPT + 1u] = tj_dot64(xa, w0_1, acc[t * CPT + 1u]);
            }
          }
        }
      }
      for (tj_u32 t = 0u; t < ROWS; ++t) {
        if (r0 + t >= M) break;
        for (tj_u32 j = 0u; j < CPT; ++j) {
          tj_i32 v = tj_colsum<1u>(acc[t * CPT + j], red);
          if (lane != 0u) continue;
          const float pv = (float)(tj_i32)((tj_u32)v - (tj_u32)rs[(r0 + t) * G + gi]);
          const tj_u32 nj = n0 + j < N ? n0 + j : N - 1u;
          gacc[t * CPT + j] = tj_add(gacc[t * CPT + j], tj_mul(pv, gs[gi * N + nj]));
        }
      }
    }
    for (tj_u32 t = 0u; t < ROWS; ++t) {
      if (r0 + t >= M) break;
      for (tj_u32 j = 0u; j < CPT; ++j) {
        const tj_u32 n = n0 + j, r = r0 + t;
        if (lane != 0u || n >= N) continue;
        float yv = gacc[t * CPT + j];
        yv = tj_mul(yv, e0[r * 1u + n * 0u]);
        y[r * N + n] = yv;
      }
    }
  }
}
