// plan: cuda warp 32
// launch tj_ewise_0 grid (1, 1, 1) block (256, 1, 1) shared 0 args in0 in1 in2 out0
// launch tj_div_1 grid (1, 1, 1) block (256, 1, 1) shared 0 args in0 in2 out1
// launch tj_tanh_2 grid (1, 1, 1) block (256, 1, 1) shared 0 args in0 out2
extern "C" __global__ void __launch_bounds__(256) tj_ewise_0(const float* __restrict__ a0, const float* __restrict__ a1, const float* __restrict__ a2, float* __restrict__ y) {
  const tj_u32 ITEMS = 55u, COLS = 11u;
  for (tj_u32 e = blockIdx.x * blockDim.x + threadIdx.x; e < ITEMS; e += gridDim.x * blockDim.x) {
    const tj_u32 r = e / COLS, c = e % COLS;
    (void)r; (void)c;
    const float s0 = a0[r * 11u + c * 1u];
    const float s1 = a1[r * 0u + c * 1u];
    const float s2 = a2[r * 1u + c * 0u];
    const float s3 = tj_mul(s0, s1);
    const float s4 = tj_add(s3, s2);
    const float s5 = tj_silu(s4);
    y[e] = s5;
  }
}

extern "C" __global__ void __launch_bounds__(256) tj_div_1(const float* __restrict__ a0, const float* __restrict__ a1, float* __restrict__ y) {
  const tj_u32 ITEMS = 55u, COLS = 11u;
  for (tj_u32 e = blockIdx.x * blockDim.x + threadIdx.x; e < ITEMS; e += gridDim.x * blockDim.x) {
    const tj_u32 r = e / COLS, c = e % COLS;
    (void)r; (void)c;
    const float s0 = a0[r * 11u + c * 1u];
    const float s1 = a1[r * 1u + c * 0u];
    const float s2 = tj_div(s0, s1);
    y[e] = s2;
  }
}

extern "C" __global__ void __launch_bounds__(256) tj_tanh_2(const float* __restrict__ a0, float* __restrict__ y) {
  const tj_u32 ITEMS = 55u, COLS = 11u;
  for (tj_u32 e = blockIdx.x * blockDim.x + threadIdx.x; e < ITEMS; e += gridDim.x * blockDim.x) {
    const tj_u32 r = e / COLS, c = e % COLS;
    (void)r; (void)c;
    const float s0 = a0[r * 11u + c * 1u];
    const float s1 = tj_tanh(s0);
    y[e] = s1;
  }
}
