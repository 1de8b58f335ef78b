// plan: cuda warp 32
// launch tj_quantize_0 grid (6, 1, 1) block (256, 1, 1) shared 0 args in0 out0 out1
// launch tj_quantize_int8_1 grid (6, 1, 1) block (256, 1, 1) shared 0 args in0 out2
extern "C" __global__ void __launch_bounds__(256) tj_quantize_0(const float* __restrict__ x, tj_i8* __restrict__ q, float* __restrict__ s) {
  const tj_u32 ROWS = 6u, K = 2560u;
  __shared__ float red[8];
  for (tj_u32 r = blockIdx.x; r < ROWS; r += gridDim.x) {
    const float* xr = x + r * K;
    float m = 0.0f;
    for (tj_u32 c = threadIdx.x; c < K; c += blockDim.x) m = tj_fmax(m, tj_abs(xr[c]));
    m = tj_block_max(m, red);
    const float sc = tj_finite(m) ? tj_div(m, 127.0f) : tj_qnan();
    if (threadIdx.x == 0u) s[r] = sc;
    for (tj_u32 c = threadIdx.x; c < K; c += blockDim.x) q[r * K + c] = tj_quant(xr[c], sc);
  }
}

extern "C" __global__ void __launch_bounds__(256) tj_quantize_int8_1(const float* __restrict__ x, float* __restrict__ q) {
  const tj_u32 ROWS = 6u, K = 2560u;
  __shared__ float red[8];
  for (tj_u32 r = blockIdx.x; r < ROWS; r += gridDim.x) {
    const float* xr = x + r * K;
    float m = 0.0f;
    for (tj_u32 c = threadIdx.x; c < K; c += blockDim.x) m = tj_fmax(m, tj_abs(xr[c]));
    m = tj_block_max(m, red);
    const float sc = tj_finite(m) ? tj_div(m, 127.0f) : tj_qnan();
    for (tj_u32 c = threadIdx.x; c < K; c += blockDim.x) q[r * K + c] = tj_mul((float)tj_quant(xr[c], sc), sc);
  }
}
