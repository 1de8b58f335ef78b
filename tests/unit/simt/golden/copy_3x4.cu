// plan: cuda warp 32
// launch tj_neg_0 grid (1, 1, 1) block (256, 1, 1) shared 0 args in0 out0
// launch tj_copy_1 grid (1, 1, 1) block (256, 1, 1) shared 0 args in0 out1
// launch tj_copy_2 grid (1, 1, 1) block (256, 1, 1) shared 0 args out0 out2
extern "C" __global__ void __launch_bounds__(256) tj_neg_0(const float* __restrict__ a0, float* __restrict__ y) {
  const tj_u32 ITEMS = 12u, COLS = 4u;
  for (tj_u32 e = blockIdx.x * blockDim.x + threadIdx.x; e < ITEMS; e += gridDim.x * blockDim.x) {
    const tj_u32 r = e / COLS, c = e % COLS;
    (void)r; (void)c;
    const float s0 = a0[r * 4u + c * 1u];
    const float s1 = -s0;
    y[e] = s1;
  }
}

extern "C" __global__ void __launch_bounds__(256) tj_copy_1(const tj_u8* __restrict__ a, tj_u8* __restrict__ b) {
  for (tj_u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < 48u; i += gridDim.x * blockDim.x) b[i] = a[i];
}

extern "C" __global__ void __launch_bounds__(256) tj_copy_2(const tj_u8* __restrict__ a, tj_u8* __restrict__ b) {
  for (tj_u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < 48u; i += gridDim.x * blockDim.x) b[i] = a[i];
}
