// plan: cuda warp 32
// launch tj_rmsnorm_0 grid (8, 1, 1) block (256, 1, 1) shared 0 args in0 in1 out0
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
