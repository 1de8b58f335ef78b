// plan: cuda warp 32
// launch tj_tmatmul_0 grid (1, 1, 1) block (256, 1, 1) shared 0 args in0 weight0 const1 out0 config tpc=4;cols=64;unroll=1;rows=1
// weight0 const0 @w [512, 33] tcodes64 4224 bytes
extern "C" __global__ void __launch_bounds__(256) tj_tmatmul_0(const float* __restrict__ x, const tj_u32x4* __restrict__ w, const float* __restrict__ gs, float* __restrict__ y) {
  const tj_u32 M = 1u, K = 512u, N = 33u, C = 8u, CF = 8u, TPC = 4u, COLS = 64u, ROWS = 1u, RT = 1u, G = 4u;
  (void)C; (void)CF; (void)K; (void)G;
  __shared__ float red[8];
  const tj_u32 lane = threadIdx.x % TPC, n = blockIdx.x * COLS + threadIdx.x / TPC;
  const tj_u32 nn = n < N ? n : N - 1u;  // threads past N compute column N - 1 and store nothing
  const tj_u32x4* wc = w + (tj_u64)nn * C;
  for (tj_u32 rt = blockIdx.y; rt < RT; rt += gridDim.y) {
    const tj_u32 r0 = rt * ROWS;
    float gacc[ROWS];
    for (tj_u32 t = 0u; t < ROWS; ++t) gacc[t] = 0.0f;
    for (tj_u32 gi = 0u; gi < G; ++gi) {
      const tj_u32 lo = gi * 128u, hi = lo + 128u < K ? lo + 128u : K;
      float acc[ROWS];
      for (tj_u32 t = 0u; t < ROWS; ++t) acc[t] = 0.0f;
      for (tj_u32 c = lo / 64u + lane; c < (hi + 63u) / 64u; c += TPC) {
        tj_u32x4 w0 = wc[c];
        for (tj_u32 t = 0u; t < ROWS; ++t) {
          if (r0 + t >= M) break;
          const tj_u32 ilo = lo > c * 64u ? lo - c * 64u : 0u, ihi = hi < c * 64u + 64u ? hi - c * 64u : 64u;
          acc[t] = tj_fchunk(x + (r0 + t) * K + c * 64u, w0, ilo, ihi, acc[t]);
        }
      }
      for (tj_u32 t = 0u; t < ROWS; ++t) {
        if (r0 + t >= M) break;
        float v = tj_colsum<4u>(acc[t], red);
        if (lane != 0u) continue;
        const float pv = v;
        gacc[t] = tj_add(gacc[t], tj_mul(pv, gs[gi * N + nn]));
      }
    }
    for (tj_u32 t = 0u; t < ROWS; ++t) {
      if (r0 + t >= M) break;
      if (lane != 0u || n >= N) continue;
      const tj_u32 r = r0 + t;
      float yv = gacc[t];
      y[r * N + n] = yv;
    }
  }
}
