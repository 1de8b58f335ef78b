// plan: cuda warp 32
// launch tj_tmatmul_0 grid (1, 1, 1) block (256, 1, 1) shared 0 args in0 weight0 const1 out0 config tpc=4;cols=64;unroll=1;rows=1;cpt=1
// weight0 const0 @w [512, 33] tcodes64 4224 bytes
extern "C" __global__ void __launch_bounds__(256) tj_tmatmul_0(const float* __restrict__ x, const tj_u32x4* __restrict__ w, const float* __restrict__ gs, float* __restrict__ y) {
  const tj_u32 M = 1u, K = 512u, N = 33u, C = 8u, CF = 8u, TPC = 4u, COLS = 64u, CPT = 1u, ROWS = 1u, RT = 1u, G = 4u;
  (void)C; (void)CF; (void)K; (void)G;
  __shared__ float red[8];
  const tj_u32 lane = threadIdx.x % TPC, n0 = (blockIdx.x * COLS + threadIdx.x / TPC) * CPT;
  // Columns past N read column N - 1 and store nothing.
  const tj_u32 nn0 = n0 + 0u < N ? n0 + 0u : N - 1u;
  const tj_u32x4* wc0 = w + (tj_u64)nn0 * C;
  for (tj_u32 rt = blockIdx.y; rt < RT; rt += gridDim.y) {
    const tj_u32 r0 = rt * ROWS;
    float gacc[ROWS * CPT];
    for (tj_u32 i = 0u; i < ROWS * CPT; ++i) gacc[i] = 0.0f;
    for (tj_u32 gi = 0u; gi < G; ++gi) {
      const tj_u32 lo = gi * 128u, hi = lo + 128u < K ? lo + 128u : K;
      float acc[ROWS * CPT];
      for (tj_u32 i = 0u; i < ROWS * CPT; ++i) acc[i] = 0.0f;
      for (tj_u32 c = lo / 64u + lane; c < (hi + 63u) / 64u; c += TPC) {
        const tj_u32x4 w0_0 = wc0[c];
        const tj_u32 ilo = lo > c * 64u ? lo - c * 64u : 0u, ihi = hi < c * 64u + 64u ? hi - c * 64u : 64u;
        for (tj_u32 t = 0u; t < ROWS; ++t) {
          if (r0 + t >= M) break;
          acc[t * CPT + 0u] = tj_fchunk(x + (r0 + t) * K + c * 64u, w0_0, ilo, ihi, acc[t * CPT + 0u]);
        }
      }
      for (tj_u32 t = 0u; t < ROWS; ++t) {
        if (r0 + t >= M) break;
        for (tj_u32 j = 0u; j < CPT; ++j) {
          float v = tj_colsum<4u>(acc[t * CPT + j], red);
          if (lane != 0u) continue;
          const float pv = v;
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
        y[r * N + n] = yv;
      }
    }
  }
}
