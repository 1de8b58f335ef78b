// plan: cuda warp 32
// launch tj_rmsnorm_0 grid (8, 1, 1) block (256, 1, 1) shared 0 args in0 in1 scratch0
// launch tj_quantize_1 grid (8, 1, 1) block (256, 1, 1) shared 0 args scratch0 scratch1 scratch2 scratch3
// launch tj_tmatmul_2 grid (108, 1, 1) block (256, 1, 1) shared 0 args scratch1 weight0 scratch3 scratch2 out0 config tpc=16;cols=16;unroll=1;rows=8;cpt=4
// launch tj_tmatmul_3 grid (108, 1, 1) block (256, 1, 1) shared 0 args scratch1 weight1 scratch3 scratch2 out1 config tpc=16;cols=16;unroll=1;rows=8;cpt=4
// scratch0 81920 bytes
// scratch1 20480 bytes
// scratch2 32 bytes
// scratch3 32 bytes
// weight0 const0 @w [2560, 6912] tcodes64 4423680 bytes
// weight1 const1 @u [2560, 6912] tcodes64 4423680 bytes
extern "C" __global__ void __launch_bounds__(256) tj_rmsnorm_0(const float* __restrict__ x, const float* __restrict__ gamma, float* __restrict__ y) {
  const tj_u32 ROWS = 8u, D = 2560u;
  const float EPS = 1.000000000e-05f;
  __shared__ float red[8];
  for (tj_u32 r = blockIdx.x; r < ROWS; r += gridDim.x) {
    const float* xr = x + r * D;
    float m = 0.0f;
    for (tj_u32 c = threadIdx.x; c < D; c += blockDim.x) m = tj_fmax(m, tj_abs(xr[c]));
    m = tj_block_max(m, red);
    float ss = 0.0f;
    const bool plain = m == 0.0f || !tj_finite(m);
    for (tj_u32 c = threadIdx.x; c < D; c += blockDim.x) {
      const float v = plain ? xr[c] : tj_div(xr[c], m);
      ss = tj_add(ss, tj_mul(v, v));
    }
    ss = tj_block_sum(ss, red);
    const float denom = plain ? sqrtf(tj_add(tj_div(ss, (float)D), EPS))
                              : tj_mul(m, sqrtf(tj_add(tj_div(ss, (float)D), tj_div(tj_div(EPS, m), m))));
    for (tj_u32 c = threadIdx.x; c < D; c += blockDim.x) y[r * D + c] = tj_mul(tj_div(xr[c], denom), gamma[c]);
  }
}

extern "C" __global__ void __launch_bounds__(256) tj_quantize_1(const float* __restrict__ x, tj_i8* __restrict__ q, float* __restrict__ s, tj_i32* __restrict__ rs) {
  const tj_u32 ROWS = 8u, K = 2560u;
  __shared__ float red[8];
  __shared__ tj_i32 ired[8];
  for (tj_u32 r = blockIdx.x; r < ROWS; r += gridDim.x) {
    const float* xr = x + r * K;
    float m = 0.0f;
    for (tj_u32 c = threadIdx.x; c < K; c += blockDim.x) m = tj_fmax(m, tj_abs(xr[c]));
    m = tj_block_max(m, red);
    const float sc = tj_finite(m) ? tj_div(m, 127.0f) : tj_qnan();
    if (threadIdx.x == 0u) s[r] = sc;
    tj_i32 sum = 0;
    for (tj_u32 c = threadIdx.x; c < K; c += blockDim.x) {
      const tj_i8 v = tj_quant(xr[c], sc);
      q[r * K + c] = v;
      sum += v;
    }
    sum = tj_block_isum(sum, ired);
    if (threadIdx.x == 0u) rs[r] = sum;
  }
}

extern "C" __global__ void __launch_bounds__(256) tj_tmatmul_2(const tj_i8* __restrict__ x, const tj_u32x4* __restrict__ w, const tj_i32* __restrict__ rs, const float* __restrict__ e0, float* __restrict__ y) {
  const tj_u32 M = 8u, K = 2560u, N = 6912u, C = 40u, CF = 40u, TPC = 16u, COLS = 16u, CPT = 4u, ROWS = 8u, RT = 1u, G = 1u;
  (void)C; (void)CF; (void)K; (void)G;
  __shared__ tj_i32 red[8];
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
    tj_i32 acc[ROWS * CPT];
    for (tj_u32 i = 0u; i < ROWS * CPT; ++i) acc[i] = 0;
    tj_u32 c = lane;
    for (; c < CF; c += TPC) {
      const tj_u32x4 w0_0 = wc0[c];
      const tj_u32x4 w0_1 = wc1[c];
      const tj_u32x4 w0_2 = wc2[c];
      const tj_u32x4 w0_3 = wc3[c];
      #pragma unroll 1
      for (tj_u32 q = 0u; q < 4u; ++q) {
        for (tj_u32 t = 0u; t < ROWS; ++t) {
          if (r0 + t >= M) break;
          {
            const tj_u32x4 xv = *(const tj_u32x4*)(x + (r0 + t) * K + c * 64u + 16u * q);
            const tj_i32 a0 = (tj_i32)xv.x, a1 = (tj_i32)xv.y, a2 = (tj_i32)xv.z, a3 = (tj_i32)xv.w;
            acc[t * CPT + 0u] = tj_word(a0, a1, a2, a3, tj_wq(w0_0, q), acc[t * CPT + 0u]);
            acc[t * CPT + 1u] = tj_word(a0, a1, a2, a3, tj_wq(w0_1, q), acc[t * CPT + 1u]);
            acc[t * CPT + 2u] = tj_word(a0, a1, a2, a3, tj_wq(w0_2, q), acc[t * CPT + 2u]);
            acc[t * CPT + 3u] = tj_word(a0, a1, a2, a3, tj_wq(w0_3, q), acc[t * CPT + 3u]);
          }
        }
      }
    }
    {
      const bool hb = (lane & 8u) != 0u;
      { const tj_i32 s = hb ? acc[0u] : acc[16u], k = hb ? acc[16u] : acc[0u]; acc[0u] = k + tj_shfl_xor(s, 8u, 16u); }
      { const tj_i32 s = hb ? acc[1u] : acc[17u], k = hb ? acc[17u] : acc[1u]; acc[1u] = k + tj_shfl_xor(s, 8u, 16u); }
      { const tj_i32 s = hb ? acc[2u] : acc[18u], k = hb ? acc[18u] : acc[2u]; acc[2u] = k + tj_shfl_xor(s, 8u, 16u); }
      { const tj_i32 s = hb ? acc[3u] : acc[19u], k = hb ? acc[19u] : acc[3u]; acc[3u] = k + tj_shfl_xor(s, 8u, 16u); }
      { const tj_i32 s = hb ? acc[4u] : acc[20u], k = hb ? acc[20u] : acc[4u]; acc[4u] = k + tj_shfl_xor(s, 8u, 16u); }
      { const tj_i32 s = hb ? acc[5u] : acc[21u], k = hb ? acc[21u] : acc[5u]; acc[5u] = k + tj_shfl_xor(s, 8u, 16u); }
      { const tj_i32 s = hb ? acc[6u] : acc[22u], k = hb ? acc[22u] : acc[6u]; acc[6u] = k + tj_shfl_xor(s, 8u, 16u); }
      { const tj_i32 s = hb ? acc[7u] : acc[23u], k = hb ? acc[23u] : acc[7u]; acc[7u] = k + tj_shfl_xor(s, 8u, 16u); }
      { const tj_i32 s = hb ? acc[8u] : acc[24u], k = hb ? acc[24u] : acc[8u]; acc[8u] = k + tj_shfl_xor(s, 8u, 16u); }
      { const tj_i32 s = hb ? acc[9u] : acc[25u], k = hb ? acc[25u] : acc[9u]; acc[9u] = k + tj_shfl_xor(s, 8u, 16u); }
      { const tj_i32 s = hb ? acc[10u] : acc[26u], k = hb ? acc[26u] : acc[10u]; acc[10u] = k + tj_shfl_xor(s, 8u, 16u); }
      { const tj_i32 s = hb ? acc[11u] : acc[27u], k = hb ? acc[27u] : acc[11u]; acc[11u] = k + tj_shfl_xor(s, 8u, 16u); }
      { const tj_i32 s = hb ? acc[12u] : acc[28u], k = hb ? acc[28u] : acc[12u]; acc[12u] = k + tj_shfl_xor(s, 8u, 16u); }
      { const tj_i32 s = hb ? acc[13u] : acc[29u], k = hb ? acc[29u] : acc[13u]; acc[13u] = k + tj_shfl_xor(s, 8u, 16u); }
      { const tj_i32 s = hb ? acc[14u] : acc[30u], k = hb ? acc[30u] : acc[14u]; acc[14u] = k + tj_shfl_xor(s, 8u, 16u); }
      { const tj_i32 s = hb ? acc[15u] : acc[31u], k = hb ? acc[31u] : acc[15u]; acc[15u] = k + tj_shfl_xor(s, 8u, 16u); }
    }
    {
      const bool hb = (lane & 4u) != 0u;
      { const tj_i32 s = hb ? acc[0u] : acc[8u], k = hb ? acc[8u] : acc[0u]; acc[0u] = k + tj_shfl_xor(s, 4u, 16u); }
      { const tj_i32 s = hb ? acc[1u] : acc[9u], k = hb ? acc[9u] : acc[1u]; acc[1u] = k + tj_shfl_xor(s, 4u, 16u); }
      { const tj_i32 s = hb ? acc[2u] : acc[10u], k = hb ? acc[10u] : acc[2u]; acc[2u] = k + tj_shfl_xor(s, 4u, 16u); }
      { const tj_i32 s = hb ? acc[3u] : acc[11u], k = hb ? acc[11u] : acc[3u]; acc[3u] = k + tj_shfl_xor(s, 4u, 16u); }
      { const tj_i32 s = hb ? acc[4u] : acc[12u], k = hb ? acc[12u] : acc[4u]; acc[4u] = k + tj_shfl_xor(s, 4u, 16u); }
      { const tj_i32 s = hb ? acc[5u] : acc[13u], k = hb ? acc[13u] : acc[5u]; acc[5u] = k + tj_shfl_xor(s, 4u, 16u); }
      { const tj_i32 s = hb ? acc[6u] : acc[14u], k = hb ? acc[14u] : acc[6u]; acc[6u] = k + tj_shfl_xor(s, 4u, 16u); }
      { const tj_i32 s = hb ? acc[7u] : acc[15u], k = hb ? acc[15u] : acc[7u]; acc[7u] = k + tj_shfl_xor(s, 4u, 16u); }
    }
    {
      const bool hb = (lane & 2u) != 0u;
      { const tj_i32 s = hb ? acc[0u] : acc[4u], k = hb ? acc[4u] : acc[0u]; acc[0u] = k + tj_shfl_xor(s, 2u, 16u); }
      { const tj_i32 s = hb ? acc[1u] : acc[5u], k = hb ? acc[5u] : acc[1u]; acc[1u] = k + tj_shfl_xor(s, 2u, 16u); }
      { const tj_i32 s = hb ? acc[2u] : acc[6u], k = hb ? acc[6u] : acc[2u]; acc[2u] = k + tj_shfl_xor(s, 2u, 16u); }
      { const tj_i32 s = hb ? acc[3u] : acc[7u], k = hb ? acc[7u] : acc[3u]; acc[3u] = k + tj_shfl_xor(s, 2u, 16u); }
    }
    {
      const bool hb = (lane & 1u) != 0u;
      { const tj_i32 s = hb ? acc[0u] : acc[2u], k = hb ? acc[2u] : acc[0u]; acc[0u] = k + tj_shfl_xor(s, 1u, 16u); }
      { const tj_i32 s = hb ? acc[1u] : acc[3u], k = hb ? acc[3u] : acc[1u]; acc[1u] = k + tj_shfl_xor(s, 1u, 16u); }
    }
    for (tj_u32 i = 0u; i < 2u; ++i) {
      const tj_u32 vi = lane * 2u + i, r = r0 + vi / CPT, n = n0 + vi % CPT;
      if (r >= M || n >= N) continue;
      float yv = (float)(tj_i32)((tj_u32)acc[i] - (tj_u32)rs[r]);
      yv = tj_mul(yv, e0[r * 1u + n * 0u]);
      yv = tj_silu(yv);
      y[r * N + n] = yv;
    }
  }
}

extern "C" __global__ void __launch_bounds__(256) tj_tmatmul_3(const tj_i8* __restrict__ x, const tj_u32x4* __restrict__ w, const tj_i32* __restrict__ rs, const float* __restrict__ e0, float* __restrict__ y) {
  const tj_u32 M = 8u, K = 2560u, N = 6912u, C = 40u, CF = 40u, TPC = 16u, COLS = 16u, CPT = 4u, ROWS = 8u, RT = 1u, G = 1u;
  (void)C; (void)CF; (void)K; (void)G;
  __shared__ tj_i32 red[8];
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
    tj_i32 acc[ROWS * CPT];
    for (tj_u32 i = 0u; i < ROWS * CPT; ++i) acc[i] = 0;
    tj_u32 c = lane;
    for (; c < CF; c += TPC) {
      const tj_u32x4 w0_0 = wc0[c];
      const tj_u32x4 w0_1 = wc1[c];
      const tj_u32x4 w0_2 = wc2[c];
      const tj_u32x4 w0_3 = wc3[c];
      #pragma unroll 1
      for (tj_u32 q = 0u; q < 4u; ++q) {
        for (tj_u32 t = 0u; t < ROWS; ++t) {
          if (r0 + t >= M) break;
          {
            const tj_u32x4 xv = *(const tj_u32x4*)(x + (r0 + t) * K + c * 64u + 16u * q);
            const tj_i32 a0 = (tj_i32)xv.x, a1 = (tj_i32)xv.y, a2 = (tj_i32)xv.z, a3 = (tj_i32)xv.w;
            acc[t * CPT + 0u] = tj_word(a0, a1, a2, a3, tj_wq(w0_0, q), acc[t * CPT + 0u]);
            acc[t * CPT + 1u] = tj_word(a0, a1, a2, a3, tj_wq(w0_1, q), acc[t * CPT + 1u]);
            acc[t * CPT + 2u] = tj_word(a0, a1, a2, a3, tj_wq(w0_2, q), acc[t * CPT + 2u]);
            acc[t * CPT + 3u] = tj_word(a0, a1, a2, a3, tj_wq(w0_3, q), acc[t * CPT + 3u]);
          }
        }
      }
    }
    {
      const bool hb = (lane & 8u) != 0u;
      { const tj_i32 s = hb ? acc[0u] : acc[16u], k = hb ? acc[16u] : acc[0u]; acc[0u] = k + tj_shfl_xor(s, 8u, 16u); }
      { const tj_i32 s = hb ? acc[1u] : acc[17u], k = hb ? acc[17u] : acc[1u]; acc[1u] = k + tj_shfl_xor(s, 8u, 16u); }
      { const tj_i32 s = hb ? acc[2u] : acc[18u], k = hb ? acc[18u] : acc[2u]; acc[2u] = k + tj_shfl_xor(s, 8u, 16u); }
      { const tj_i32 s = hb ? acc[3u] : acc[19u], k = hb ? acc[19u] : acc[3u]; acc[3u] = k + tj_shfl_xor(s, 8u, 16u); }
      { const tj_i32 s = hb ? acc[4u] : acc[20u], k = hb ? acc[20u] : acc[4u]; acc[4u] = k + tj_shfl_xor(s, 8u, 16u); }
      { const tj_i32 s = hb ? acc[5u] : acc[21u], k = hb ? acc[21u] : acc[5u]; acc[5u] = k + tj_shfl_xor(s, 8u, 16u); }
      { const tj_i32 s = hb ? acc[6u] : acc[22u], k = hb ? acc[22u] : acc[6u]; acc[6u] = k + tj_shfl_xor(s, 8u, 16u); }
      { const tj_i32 s = hb ? acc[7u] : acc[23u], k = hb ? acc[23u] : acc[7u]; acc[7u] = k + tj_shfl_xor(s, 8u, 16u); }
      { const tj_i32 s = hb ? acc[8u] : acc[24u], k = hb ? acc[24u] : acc[8u]; acc[8u] = k + tj_shfl_xor(s, 8u, 16u); }
      { const tj_i32 s = hb ? acc[9u] : acc[25u], k = hb ? acc[25u] : acc[9u]; acc[9u] = k + tj_shfl_xor(s, 8u, 16u); }
      { const tj_i32 s = hb ? acc[10u] : acc[26u], k = hb ? acc[26u] : acc[10u]; acc[10u] = k + tj_shfl_xor(s, 8u, 16u); }
      { const tj_i32 s = hb ? acc[11u] : acc[27u], k = hb ? acc[27u] : acc[11u]; acc[11u] = k + tj_shfl_xor(s, 8u, 16u); }
      { const tj_i32 s = hb ? acc[12u] : acc[28u], k = hb ? acc[28u] : acc[12u]; acc[12u] = k + tj_shfl_xor(s, 8u, 16u); }
      { const tj_i32 s = hb ? acc[13u] : acc[29u], k = hb ? acc[29u] : acc[13u]; acc[13u] = k + tj_shfl_xor(s, 8u, 16u); }
      { const tj_i32 s = hb ? acc[14u] : acc[30u], k = hb ? acc[30u] : acc[14u]; acc[14u] = k + tj_shfl_xor(s, 8u, 16u); }
      { const tj_i32 s = hb ? acc[15u] : acc[31u], k = hb ? acc[31u] : acc[15u]; acc[15u] = k + tj_shfl_xor(s, 8u, 16u); }
    }
    {
      const bool hb = (lane & 4u) != 0u;
      { const tj_i32 s = hb ? acc[0u] : acc[8u], k = hb ? acc[8u] : acc[0u]; acc[0u] = k + tj_shfl_xor(s, 4u, 16u); }
      { const tj_i32 s = hb ? acc[1u] : acc[9u], k = hb ? acc[9u] : acc[1u]; acc[1u] = k + tj_shfl_xor(s, 4u, 16u); }
      { const tj_i32 s = hb ? acc[2u] : acc[10u], k = hb ? acc[10u] : acc[2u]; acc[2u] = k + tj_shfl_xor(s, 4u, 16u); }
      { const tj_i32 s = hb ? acc[3u] : acc[11u], k = hb ? acc[11u] : acc[3u]; acc[3u] = k + tj_shfl_xor(s, 4u, 16u); }
      { const tj_i32 s = hb ? acc[4u] : acc[12u], k = hb ? acc[12u] : acc[4u]; acc[4u] = k + tj_shfl_xor(s, 4u, 16u); }
      { const tj_i32 s = hb ? acc[5u] : acc[13u], k = hb ? acc[13u] : acc[5u]; acc[5u] = k + tj_shfl_xor(s, 4u, 16u); }
      { const tj_i32 s = hb ? acc[6u] : acc[14u], k = hb ? acc[14u] : acc[6u]; acc[6u] = k + tj_shfl_xor(s, 4u, 16u); }
      { const tj_i32 s = hb ? acc[7u] : acc[15u], k = hb ? acc[15u] : acc[7u]; acc[7u] = k + tj_shfl_xor(s, 4u, 16u); }
    }
    {
      const bool hb = (lane & 2u) != 0u;
      { const tj_i32 s = hb ? acc[0u] : acc[4u], k = hb ? acc[4u] : acc[0u]; acc[0u] = k + tj_shfl_xor(s, 2u, 16u); }
      { const tj_i32 s = hb ? acc[1u] : acc[5u], k = hb ? acc[5u] : acc[1u]; acc[1u] = k + tj_shfl_xor(s, 2u, 16u); }
      { const tj_i32 s = hb ? acc[2u] : acc[6u], k = hb ? acc[6u] : acc[2u]; acc[2u] = k + tj_shfl_xor(s, 2u, 16u); }
      { const tj_i32 s = hb ? acc[3u] : acc[7u], k = hb ? acc[7u] : acc[3u]; acc[3u] = k + tj_shfl_xor(s, 2u, 16u); }
    }
    {
      const bool hb = (lane & 1u) != 0u;
      { const tj_i32 s = hb ? acc[0u] : acc[2u], k = hb ? acc[2u] : acc[0u]; acc[0u] = k + tj_shfl_xor(s, 1u, 16u); }
      { const tj_i32 s = hb ? acc[1u] : acc[3u], k = hb ? acc[3u] : acc[1u]; acc[1u] = k + tj_shfl_xor(s, 1u, 16u); }
    }
    for (tj_u32 i = 0u; i < 2u; ++i) {
      const tj_u32 vi = lane * 2u + i, r = r0 + vi / CPT, n = n0 + vi % CPT;
      if (r >= M || n >= N) continue;
      float yv = (float)(tj_i32)((tj_u32)acc[i] - (tj_u32)rs[r]);
      yv = tj_mul(yv, e0[r * 1u + n * 0u]);
      y[r * N + n] = yv;
    }
  }
}
