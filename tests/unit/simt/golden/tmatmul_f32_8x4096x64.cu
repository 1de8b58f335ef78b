// plan: cuda warp 32
// launch tj_tmatmul_0 grid (2, 1, 1) block (256, 1, 1) shared 0 args in0 weight0 out0 config tpc=32;cols=8;unroll=1;rows=8;cpt=4
// weight0 const0 @w [4096, 64] tcodes64 65536 bytes
extern "C" __global__ void __launch_bounds__(256) tj_tmatmul_0(const float* __restrict__ x, const tj_u32x4* __restrict__ w, float* __restrict__ y) {
  const tj_u32 M = 8u, K = 4096u, N = 64u, C = 64u, CF = 64u, TPC = 32u, COLS = 8u, CPT = 4u, ROWS = 8u, RT = 1u, G = 1u;
  (void)C; (void)CF; (void)K; (void)G;
  __shared__ float red[8];
  const tj_u32 lane = threadIdx.x % TPC, n0 = (blockIdx.x * COLS + threadIdx.x / TPC) * CPT;
  // Columns past N read column N - 1 and store nothing.
  const tj_u32 nn0 = n0 + 0u < N ? n0 + 0u : N - 1u;
  const tj_u32x4* wc0 = w + (tj_u64)nn0 * C;
  const tj_u32 nn1 = n0 + 1u < N ? n0 + 1u : N - 1u;
  const tj_u32x4* wc1 = w + (tj_u64)nn1 * C;
  const tj_u32 nn2 = n0 + 2u < N ? n0 + 2u : N - 1u;
  const tj_u32x4* wc2 = w + (tj_u64)nn2 * C;
  const tj_u32 nn3 = n0 + 3u < N ? n0 + 3u : N - 1u;
  const tj_u32x4* wc3 = w + (tj_u64)nn3 * C;
  for (tj_u32 rt = blockIdx.y; rt < RT; rt += gridDim.y) {
    const tj_u32 r0 = rt * ROWS;
    float acc[ROWS * CPT];
    for (tj_u32 i = 0u; i < ROWS * CPT; ++i) acc[i] = 0.0f;
    tj_u32 c = lane;
    for (; c < CF; c += TPC) {
      const tj_u32x4 w0_0 = wc0[c];
      const tj_u32x4 w0_1 = wc1[c];
      const tj_u32x4 w0_2 = wc2[c];
      const tj_u32x4 w0_3 = wc3[c];
      for (tj_u32 t = 0u; t < ROWS; ++t) {
        if (r0 + t >= M) break;
        acc[t * CPT + 0u] = tj_fchunk(x + (r0 + t) * K + c * 64u, w0_0, 0u, 64u, acc[t * CPT + 0u]);
        acc[t * CPT + 1u] = tj_fchunk(x + (r0 + t) * K + c * 64u, w0_1, 0u, 64u, acc[t * CPT + 1u]);
        acc[t * CPT + 2u] = tj_fchunk(x + (r0 + t) * K + c * 64u, w0_2, 0u, 64u, acc[t * CPT + 2u]);
        acc[t * CPT + 3u] = tj_fchunk(x + (r0 + t) * K + c * 64u, w0_3, 0u, 64u, acc[t * CPT + 3u]);
      }
    }
    for (tj_u32 t = 0u; t < ROWS; ++t) {
      if (r0 + t >= M) break;
      for (tj_u32 j = 0u; j < CPT; ++j) {
        float v = tj_colsum<32u>(acc[t * CPT + j], red);
        const tj_u32 n = n0 + j, r = r0 + t;
        if (lane != 0u || n >= N) continue;
        float yv = v;
        yv = tj_silu(yv);
        y[r * N + n] = yv;
      }
    }
  }
}
