// ternjit SIMT kernels: hip, warp 64, int dot
#pragma clang fp contract(off)
typedef signed char tj_i8;
typedef unsigned char tj_u8;
typedef int tj_i32;
typedef unsigned int tj_u32;
typedef unsigned long long tj_u64;
struct alignas(16) tj_u32x4 { tj_u32 x, y, z, w; };
#define TJ_WARP 64u
#define TJ_DEV __device__ inline
TJ_DEV float tj_add(float a, float b) { return a + b; }
TJ_DEV float tj_sub(float a, float b) { return a - b; }
TJ_DEV float tj_mul(float a, float b) { return a * b; }
TJ_DEV float tj_div(float a, float b) { return a / b; }
TJ_DEV float tj_bits(tj_u32 v) { return __builtin_bit_cast(float, v); }
TJ_DEV tj_u32 tj_fbits(float v) { return __builtin_bit_cast(tj_u32, v); }
TJ_DEV tj_i32 tj_shfl_down(tj_i32 v, tj_u32 d, tj_u32 w) { return __shfl_down(v, d, w); }
TJ_DEV float tj_shfl_down(float v, tj_u32 d, tj_u32 w) { return __shfl_down(v, d, w); }
TJ_DEV tj_i32 tj_shfl_xor(tj_i32 v, tj_u32 m, tj_u32 w) { return __shfl_xor(v, m, w); }
TJ_DEV float tj_shfl_xor(float v, tj_u32 m, tj_u32 w) { return __shfl_xor(v, m, w); }
TJ_DEV tj_i32 tj_dot4(tj_i32 a, tj_i32 b, tj_i32 c) { return __builtin_amdgcn_sdot4(a, b, c, false); }
TJ_DEV bool tj_isnan(float x) { return x != x; }
TJ_DEV bool tj_finite(float x) { return (tj_fbits(x) & 0x7f800000u) != 0x7f800000u; }
TJ_DEV float tj_qnan() { return tj_bits(0x7fc00000u); }
TJ_DEV float tj_abs(float x) { return tj_bits(tj_fbits(x) & 0x7fffffffu); }
TJ_DEV float tj_fmax(float x, float y) {
  if (tj_isnan(x) || tj_isnan(y)) return tj_qnan();
  if (x == y) return (tj_fbits(x) >> 31) != 0u ? y : x;
  return x > y ? x : y;
}
TJ_DEV float tj_fmin(float x, float y) {
  if (tj_isnan(x) || tj_isnan(y)) return tj_qnan();
  if (x == y) return (tj_fbits(x) >> 31) != 0u ? x : y;
  return x < y ? x : y;
}
TJ_DEV float tj_relu(float x) { return tj_isnan(x) ? x : (x > 0.0f ? x : 0.0f); }
TJ_DEV float tj_sigmoid(float x) { return tj_div(1.0f, tj_add(1.0f, expf(-x))); }
TJ_DEV float tj_tanh(float x) {
  float a = tj_abs(x);
  if (a < 0.0004f) return x;
  float e = expf(-2.0f * a);
  float t = tj_div(tj_sub(1.0f, e), tj_add(1.0f, e));
  return x < 0.0f ? -t : t;
}
TJ_DEV float tj_erf(float x) {
  float a = tj_abs(x);
  float t = 1.0f / (1.0f + 0.3275911f * a);
  float p = t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
  float y = 1.0f - p * expf(-a * a);
  return x < 0.0f ? -y : y;
}
TJ_DEV float tj_gelu(float x) { return tj_mul(tj_mul(0.5f, x), tj_add(1.0f, tj_erf(tj_mul(x, 0.70710678118654752f)))); }
TJ_DEV float tj_silu(float x) { return tj_mul(x, tj_sigmoid(x)); }
TJ_DEV tj_i8 tj_quant(float x, float s) {
  if (s == 0.0f) return 0;
  float r = rintf(tj_div(x, s));
  if (tj_isnan(r)) return 0;
  r = r > 127.0f ? 127.0f : (r < -127.0f ? -127.0f : r);
  return (tj_i8)(tj_i32)r;
}
// Block reductions (every thread of the block calls them; all get the result).
// `red` holds blockDim.x / TJ_WARP values; partial results combine in warp order.
TJ_DEV float tj_block_max(float v, float* red) {
  for (tj_u32 o = TJ_WARP / 2u; o > 0u; o >>= 1) v = tj_fmax(v, tj_shfl_xor(v, o, TJ_WARP));
  if (threadIdx.x % TJ_WARP == 0u) red[threadIdx.x / TJ_WARP] = v;
  __syncthreads();
  float m = red[0];
  for (tj_u32 i = 1u; i < blockDim.x / TJ_WARP; ++i) m = tj_fmax(m, red[i]);
  __syncthreads();
  return m;
}
TJ_DEV float tj_block_sum(float v, float* red) {
  for (tj_u32 o = TJ_WARP / 2u; o > 0u; o >>= 1) v = tj_add(v, tj_shfl_xor(v, o, TJ_WARP));
  if (threadIdx.x % TJ_WARP == 0u) red[threadIdx.x / TJ_WARP] = v;
  __syncthreads();
  float m = red[0];
  for (tj_u32 i = 1u; i < blockDim.x / TJ_WARP; ++i) m = tj_add(m, red[i]);
  __syncthreads();
  return m;
}
TJ_DEV tj_i32 tj_block_isum(tj_i32 v, tj_i32* red) {
  for (tj_u32 o = TJ_WARP / 2u; o > 0u; o >>= 1) v += tj_shfl_xor(v, o, TJ_WARP);
  if (threadIdx.x % TJ_WARP == 0u) red[threadIdx.x / TJ_WARP] = v;
  __syncthreads();
  tj_i32 m = red[0];
  for (tj_u32 i = 1u; i < blockDim.x / TJ_WARP; ++i) m += red[i];
  __syncthreads();
  return m;
}
// The sum over the TPC threads of a column (threads [c * TPC, (c + 1) * TPC) of the
// block), valid in the column's first thread. Every thread of the block calls it.
template <tj_u32 TPC> TJ_DEV tj_i32 tj_colsum(tj_i32 v, tj_i32* red) {
  const tj_u32 w = TPC < TJ_WARP ? TPC : TJ_WARP;
  for (tj_u32 o = w / 2u; o > 0u; o >>= 1) v += tj_shfl_down(v, o, w);
  if (TPC > TJ_WARP) {
    if (threadIdx.x % TJ_WARP == 0u) red[threadIdx.x / TJ_WARP] = v;
    __syncthreads();
    if (threadIdx.x % TPC == 0u)
      for (tj_u32 i = 1u; i < TPC / TJ_WARP; ++i) v += red[threadIdx.x / TJ_WARP + i];
    __syncthreads();
  }
  return v;
}
template <tj_u32 TPC> TJ_DEV float tj_colsum(float v, float* red) {
  const tj_u32 w = TPC < TJ_WARP ? TPC : TJ_WARP;
  for (tj_u32 o = w / 2u; o > 0u; o >>= 1) v = tj_add(v, tj_shfl_down(v, o, w));
  if (TPC > TJ_WARP) {
    if (threadIdx.x % TJ_WARP == 0u) red[threadIdx.x / TJ_WARP] = v;
    __syncthreads();
    if (threadIdx.x % TPC == 0u)
      for (tj_u32 i = 1u; i < TPC / TJ_WARP; ++i) v = tj_add(v, red[threadIdx.x / TJ_WARP + i]);
    __syncthreads();
  }
  return v;
}
// Four activation bytes at p (any alignment) as one int8x4 word.
TJ_DEV tj_i32 tj_ld4(const tj_i8* p) {
  return (tj_i32)((tj_u32)(tj_u8)p[0] | ((tj_u32)(tj_u8)p[1] << 8) | ((tj_u32)(tj_u8)p[2] << 16) |
                  ((tj_u32)(tj_u8)p[3] << 24));
}
// One weight word (16 codes) against four int8x4 activation words: (wq >> 2 j) & 0x03030303
// are the codes of k = 4 j .. 4 j + 3.
TJ_DEV tj_i32 tj_word(tj_i32 a0, tj_i32 a1, tj_i32 a2, tj_i32 a3, tj_u32 wq, tj_i32 acc) {
  acc = tj_dot4(a0, (tj_i32)(wq & 0x03030303u), acc);
  acc = tj_dot4(a1, (tj_i32)((wq >> 2) & 0x03030303u), acc);
  acc = tj_dot4(a2, (tj_i32)((wq >> 4) & 0x03030303u), acc);
  return tj_dot4(a3, (tj_i32)((wq >> 6) & 0x03030303u), acc);
}
TJ_DEV tj_u32 tj_wq(tj_u32x4 w, tj_u32 q) { return q == 0u ? w.x : q == 1u ? w.y : q == 2u ? w.z : w.w; }
// A 64-weight chunk against 16 int8x4 activation words a[0..15] (k = 4 i .. 4 i + 3).
TJ_DEV tj_i32 tj_dot64(const tj_i32* a, tj_u32x4 w, tj_i32 acc) {
  acc = tj_word(a[0], a[1], a[2], a[3], w.x, acc);
  acc = tj_word(a[4], a[5], a[6], a[7], w.y, acc);
  acc = tj_word(a[8], a[9], a[10], a[11], w.z, acc);
  return tj_word(a[12], a[13], a[14], a[15], w.w, acc);
}
// 64 activation bytes at xp as 16 words: 16-byte loads (xp 16-byte aligned).
TJ_DEV void tj_xld16(const tj_i8* xp, tj_i32* a) {
  const tj_u32x4* xv = (const tj_u32x4*)xp;
  for (tj_u32 i = 0u; i < 4u; ++i) {
    const tj_u32x4 v = xv[i];
    a[4u * i] = (tj_i32)v.x; a[4u * i + 1u] = (tj_i32)v.y; a[4u * i + 2u] = (tj_i32)v.z; a[4u * i + 3u] = (tj_i32)v.w;
  }
}
// The same with 4-byte loads (xp 4-byte aligned).
TJ_DEV void tj_xld4(const tj_i8* xp, tj_i32* a) {
  const tj_i32* xv = (const tj_i32*)xp;
  for (tj_u32 i = 0u; i < 16u; ++i) a[i] = xv[i];
}
// The same with byte loads (any alignment).
TJ_DEV void tj_xld1(const tj_i8* xp, tj_i32* a) {
  for (tj_u32 i = 0u; i < 16u; ++i) a[i] = tj_ld4(xp + 4u * i);
}
// The last chunk of a row: only its first `cnt` activation bytes exist (the codes past
// K are 0, so the zero bytes put in their place add nothing).
TJ_DEV void tj_xld_tail(const tj_i8* xp, tj_u32 cnt, tj_i32* a) {
  for (tj_u32 i = 0u; i < 16u; ++i) {
    tj_u32 v = 0u;
    for (tj_u32 b = 0u; b < 4u; ++b)
      if (4u * i + b < cnt) v |= (tj_u32)(tj_u8)xp[4u * i + b] << (8u * b);
    a[i] = (tj_i32)v;
  }
}
// The codes of a chunk starting at k0 outside [lo, hi) cleared (a group's partial chunk).
TJ_DEV tj_u32x4 tj_kmask(tj_u32x4 w, tj_u32 k0, tj_u32 lo, tj_u32 hi) {
  tj_u32 m[4];
  for (tj_u32 q = 0u; q < 4u; ++q) {
    m[q] = 0u;
    for (tj_u32 j = 0u; j < 4u; ++j)
      for (tj_u32 b = 0u; b < 4u; ++b) {
        tj_u32 k = k0 + 16u * q + 4u * j + b;
        if (k >= lo && k < hi) m[q] |= 3u << (8u * b + 2u * j);
      }
  }
  tj_u32x4 r;
  r.x = w.x & m[0]; r.y = w.y & m[1]; r.z = w.z & m[2]; r.w = w.w & m[3];
  return r;
}
// f32 activations: x[i] * w for i in [lo, hi) of a chunk, w = code - 1 (a product, so
// an infinite x times a zero weight is NaN as in the reference).
TJ_DEV float tj_fchunk(const float* xp, tj_u32x4 w, tj_u32 lo, tj_u32 hi, float acc) {
  for (tj_u32 q = 0u; q < 4u; ++q) {
    tj_u32 wq = tj_wq(w, q);
    for (tj_u32 j = 0u; j < 4u; ++j)
      for (tj_u32 b = 0u; b < 4u; ++b) {
        tj_u32 i = 16u * q + 4u * j + b;
        if (i >= lo && i < hi) acc = tj_add(acc, tj_mul(xp[i], (float)((tj_i32)((wq >> (8u * b + 2u * j)) & 3u) - 1)));
      }
  }
  return acc;
}

