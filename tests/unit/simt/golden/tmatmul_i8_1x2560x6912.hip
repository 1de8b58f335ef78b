// plan: hip warp 64
// launch tj_rowsum_0 grid (1, 1, 1) block (256, 1, 1) shared 0 args in0 scratch0
// launch tj_tmatmul_0 grid (432, 1, 1) block (256, 1, 1) shared 0 args in0 weight0 scratch0 in1 const1 out0 config tpc=16;cols=16;unroll=1;rows=1;cpt=1
// scratch0 4 bytes
// weight0 const0 @w [2560, 6912] tcodes64 4423680 bytes
extern "C" __global__ void __launch_bounds__(256) tj_rowsum_0(const tj_i8* __restrict__ x, tj_i32* __restrict__ rs) {
  const tj_u32 K = 2560u, GROUP = 2560u, G = 1u, M = 1u;
  __shared__ tj_i32 red[8];
  for (tj_u32 r = blockIdx.y; r < M; r += gridDim.y) {
    const tj_u32 lo = blockIdx.x * GROUP, hi = lo + GROUP < K ? lo + GROUP : K;
    tj_i32 v = 0;
    for (tj_u32 i = lo + threadIdx.x; i < hi; i += blockDim.x) v += x[r * K + i];
    v = tj_block_isum(v, red);
    if (threadIdx.x == 0u) rs[r * G + blockIdx.x] = v;
  }
}

extern "C" __global__ void __launch_bounds__(256) tj_tmatmul_0(const tj_i8* __restrict__ x, const tj_u32x4* __restrict__ w, const tj_i32* __restrict__ rs, const float* __restrict__ e0, const float* __restrict__ e1, float* __restrict__ y) {
  const tj_u32 M = 1u, K = 2560u, N = 6912u, C = 40u, CF = 40u, TPC = 16u, COLS = 16u, CPT = 1u, ROWS = 1u, RT = 1u, G = 1u;
  (void)C; (void)CF; (void)K; (void)G;
  __shared__ tj_i32 red[8];
  const tj_u32 lane = threadIdx.x % TPC, n0 = (blockIdx.x * COLS + threadIdx.x / TPC) * CPT;
  // Columns past N read column N - 1 and store nothing.
  const tj_u32 nn0 = n0 + 0u < N ? n0 + 0u : N - 1u;
  const tj_u32x4* wc0 = w + (tj_u64)nn0 * C;
  for (tj_u32 rt = blockIdx.y; rt < RT; rt += gridDim.y) {
    const tj_u32 r0 = rt * ROWS;
    tj_i32 acc[ROWS * CPT];
    for (tj_u32 i = 0u; i < ROWS * CPT; ++i) acc[i] = 0;
    tj_u32 c = lane;
    for (; c < CF; c += TPC) {
      const tj_u32x4 w0_0 = wc0[c];
      for (tj_u32 t = 0u; t < ROWS; ++t) {
        if (r0 + t >= M) break;
        {
          tj_i32 xa[16];
          tj_xld16(x + (r0 + t) * K + c * 64u, xa);
          acc[t * CPT + 0u] = tj_dot64(xa, w0_0, acc[t * CPT + 0u]);
        }
      }
    }
    for (tj_u32 t = 0u; t < ROWS; ++t) {
      if (r0 + t >= M) break;
      for (tj_u32 j = 0u; j < CPT; ++j) {
        tj_i32 v = tj_colsum<16u>(acc[t * CPT + j], red);
        const tj_u32 n = n0 + j, r = r0 + t;
        if (lane != 0u || n >= N) continue;
        float yv = (float)(tj_i32)((tj_u32)v - (tj_u32)rs[r]);
        yv = tj_mul(yv, e0[r * 0u + n * 0u]);
        yv = tj_mul(yv, e1[r * 0u + n * 0u]);
        y[r * N + n] = yv;
      }
    }
  }
}
