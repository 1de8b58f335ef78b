// plan: cuda warp 32
// launch tj_softmax_0 grid (1, 1, 1) block (256, 1, 1) shared 0 args in0 out0
// launch tj_reduce_sum_1 grid (1, 1, 1) block (256, 1, 1) shared 0 args in0 out1
// launch tj_reduce_mean_2 grid (1, 1, 1) block (256, 1, 1) shared 0 args in0 out2
// launch tj_reduce_max_3 grid (1, 1, 1) block (256, 1, 1) shared 0 args in0 out3
extern "C" __global__ void __launch_bounds__(256) tj_softmax_0(const float* __restrict__ x, float* __restrict__ y) {
  const tj_u32 OUTER = 3u, LEN = 5u, INNER = 7u;
  for (tj_u32 id = blockIdx.x * blockDim.x + threadIdx.x; id < OUTER * INNER; id += gridDim.x * blockDim.x) {
    const tj_u32 o = id / INNER, i = id % INNER, base = o * LEN * INNER + i;
    float m = tj_bits(0xff800000u);
    for (tj_u32 k = 0u; k < LEN; ++k) { const float v = x[base + k * INNER]; m = (tj_isnan(v) || tj_isnan(m)) ? tj_qnan() : (v > m ? v : m); }
    float sum = 0.0f;
    for (tj_u32 k = 0u; k < LEN; ++k) sum = tj_add(sum, expf(tj_sub(x[base + k * INNER], m)));
    for (tj_u32 k = 0u; k < LEN; ++k) y[base + k * INNER] = tj_div(expf(tj_sub(x[base + k * INNER], m)), sum);
  }
}

extern "C" __global__ void __launch_bounds__(256) tj_reduce_sum_1(const float* __restrict__ x, float* __restrict__ y) {
  const tj_u32 OUTER = 3u, LEN = 5u, INNER = 7u;
  for (tj_u32 id = blockIdx.x * blockDim.x + threadIdx.x; id < OUTER * INNER; id += gridDim.x * blockDim.x) {
    const tj_u32 o = id / INNER, i = id % INNER, base = o * LEN * INNER + i;
    float s = 0.0f;
    for (tj_u32 k = 0u; k < LEN; ++k) s = tj_add(s, x[base + k * INNER]);
    y[id] = s;
  }
}

extern "C" __global__ void __launch_bounds__(256) tj_reduce_mean_2(const float* __restrict__ x, float* __restrict__ y) {
  const tj_u32 OUTER = 3u, LEN = 5u, INNER = 7u;
  for (tj_u32 id = blockIdx.x * blockDim.x + threadIdx.x; id < OUTER * INNER; id += gridDim.x * blockDim.x) {
    const tj_u32 o = id / INNER, i = id % INNER, base = o * LEN * INNER + i;
    float s = 0.0f;
    for (tj_u32 k = 0u; k < LEN; ++k) s = tj_add(s, x[base + k * INNER]);
    y[id] = tj_div(s, (float)LEN);
  }
}

extern "C" __global__ void __launch_bounds__(256) tj_reduce_max_3(const float* __restrict__ x, float* __restrict__ y) {
  const tj_u32 OUTER = 3u, LEN = 5u, INNER = 7u;
  for (tj_u32 id = blockIdx.x * blockDim.x + threadIdx.x; id < OUTER * INNER; id += gridDim.x * blockDim.x) {
    const tj_u32 o = id / INNER, i = id % INNER, base = o * LEN * INNER + i;
    float m = tj_bits(0xff800000u);
    for (tj_u32 k = 0u; k < LEN; ++k) { const float v = x[base + k * INNER]; m = (tj_isnan(v) || tj_isnan(m)) ? tj_qnan() : (v > m ? v : m); }
    y[id] = m;
  }
}
