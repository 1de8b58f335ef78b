// SPDX-License-Identifier: Apache-2.0
// simt_source.cpp - the CUDA C++ / HIP C++ prelude, the ewise, quantize, rmsnorm, softmax and reduction kernels, the launch plan
// (the tmatmul kernels and the weight packers: simt_tmatmul.cpp).
#include "targets/common/simt_source.h"

#include "targets/common/simt_internal.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <limits>
#include <map>

#include "targets/common/view2d.h"
#include "targets/load_value.h"

namespace ternjit::targets::simt {

using ir::InstId;
using ir::Op;
using ir::ValueId;

namespace detail {

Error unsupported(const std::string& why) { return make_error(ErrorCode::Unsupported, "the simt generator: " + why); }
std::string quote(Op op) { return "'" + std::string(ir::op_name(op)) + "'"; }
std::string u(std::int64_t v) { return std::to_string(v) + "u"; }

std::vector<std::int64_t> extents(const ir::Type& t) {
  std::vector<std::int64_t> e;
  for (const ir::Dim& d : t.shape) e.push_back(d.extent);
  return e;
}
std::int64_t numel(const std::vector<std::int64_t>& e) {
  std::int64_t n = 1;
  for (std::int64_t x : e) n *= x;
  return n;
}

bool f32(const ir::Function& f, ValueId v) { return f.type_of(v).elem == ElemKind::F32; }

// ------------------------------------------------------------------ the prelude

// Types, the dialect's primitives, the f32 functions of the elementwise ops (matching
// ir/interpret_ops.cpp's elementwise(): NaN rules of max/min/relu; erf by
// Abramowitz-Stegun 7.1.26, |error| < 1.5e-7; tanh through exp of -2|x|), and the
// block reductions of the row kernels. The f32 add/sub/mul/div of epilogues and
// quantization are explicit round-to-nearest operations (CUDA: __fmul_rn & co, never
// contracted into an fma; HIP: fp contract off), so they round as the reference does.
std::string prelude(const SimtOptions& o) {
  const bool cuda = o.dialect == Dialect::Cuda;
  std::string s = "// ternjit SIMT kernels: " + std::string(dialect_name(o.dialect)) + ", warp " +
                  std::to_string(o.warp_size) + (o.int_dot ? ", int dot" : ", scalar dot") + "\n";
  if (!cuda) s += "#pragma clang fp contract(off)\n";
  s += "typedef signed char tj_i8;\ntypedef unsigned char tj_u8;\ntypedef int tj_i32;\ntypedef unsigned int tj_u32;\n"
       "typedef unsigned long long tj_u64;\n"
       "struct alignas(16) tj_u32x4 { tj_u32 x, y, z, w; };\n";
  s += "#define TJ_WARP " + std::to_string(o.warp_size) + "u\n#define TJ_DEV __device__ inline\n";
  if (cuda) {
    s += "TJ_DEV float tj_add(float a, float b) { return __fadd_rn(a, b); }\n"
         "TJ_DEV float tj_sub(float a, float b) { return __fsub_rn(a, b); }\n"
         "TJ_DEV float tj_mul(float a, float b) { return __fmul_rn(a, b); }\n"
         "TJ_DEV float tj_div(float a, float b) { return __fdiv_rn(a, b); }\n"
         "TJ_DEV float tj_bits(tj_u32 v) { return __uint_as_float(v); }\n"
         "TJ_DEV tj_u32 tj_fbits(float v) { return __float_as_uint(v); }\n"
         "TJ_DEV tj_i32 tj_shfl_down(tj_i32 v, tj_u32 d, tj_u32 w) { return __shfl_down_sync(0xffffffffu, v, d, w); }\n"
         "TJ_DEV float tj_shfl_down(float v, tj_u32 d, tj_u32 w) { return __shfl_down_sync(0xffffffffu, v, d, w); }\n"
         "TJ_DEV tj_i32 tj_shfl_xor(tj_i32 v, tj_u32 m, tj_u32 w) { return __shfl_xor_sync(0xffffffffu, v, m, w); }\n"
         "TJ_DEV float tj_shfl_xor(float v, tj_u32 m, tj_u32 w) { return __shfl_xor_sync(0xffffffffu, v, m, w); }\n";
  } else {
    s += "TJ_DEV float tj_add(float a, float b) { return a + b; }\n"
         "TJ_DEV float tj_sub(float a, float b) { return a - b; }\n"
         "TJ_DEV float tj_mul(float a, float b) { return a * b; }\n"
         "TJ_DEV float tj_div(float a, float b) { return a / b; }\n"
         "TJ_DEV float tj_bits(tj_u32 v) { return __builtin_bit_cast(float, v); }\n"
         "TJ_DEV tj_u32 tj_fbits(float v) { return __builtin_bit_cast(tj_u32, v); }\n"
         "TJ_DEV tj_i32 tj_shfl_down(tj_i32 v, tj_u32 d, tj_u32 w) { return __shfl_down(v, d, w); }\n"
         "TJ_DEV float tj_shfl_down(float v, tj_u32 d, tj_u32 w) { return __shfl_down(v, d, w); }\n"
         "TJ_DEV tj_i32 tj_shfl_xor(tj_i32 v, tj_u32 m, tj_u32 w) { return __shfl_xor(v, m, w); }\n"
         "TJ_DEV float tj_shfl_xor(float v, tj_u32 m, tj_u32 w) { return __shfl_xor(v, m, w); }\n";
  }
  // Four signed byte products added to c, wrapping like the hardware instruction.
  if (o.int_dot)
    s += cuda ? "TJ_DEV tj_i32 tj_dot4(tj_i32 a, tj_i32 b, tj_i32 c) { return __dp4a(a, b, c); }\n"
              : "TJ_DEV tj_i32 tj_dot4(tj_i32 a, tj_i32 b, tj_i32 c) { return __builtin_amdgcn_sdot4(a, b, c, false); }\n";
  else
    s += "TJ_DEV tj_i32 tj_dot4(tj_i32 a, tj_i32 b, tj_i32 c) {\n"
         "  tj_u32 r = (tj_u32)c;\n"
         "  for (tj_u32 i = 0u; i < 32u; i += 8u) r += (tj_u32)((tj_i32)(tj_i8)(a >> i) * (tj_i32)(tj_i8)(b >> i));\n"
         "  return (tj_i32)r;\n}\n";
  s += R"(TJ_DEV bool tj_isnan(float x) { return x != x; }
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
)";
  return s;
}

// What the mma.sync tmatmul kernels use (CUDA only; appended once, before the first
// of them). tj_mma_m16n8k32 is D += A B for a warp: A 16 x 32 s8 (four .b32 registers
// a0..a3 per lane), B 32 x 8 s8 (b0, b1), D 16 x 8 s32 (d[0..3]), in the fragment
// layouts of the PTX ISA (section "Matrix Fragments for mma.m16n8k32", Figures 88
// (A, .s8) and the B and C/D tables; simt_emu.h derives them): with g = lane >> 2 and
// t = lane % 4, register j of A holds row g + 8 (j & 1), k = 4 t + 16 (j >> 1) .. + 3;
// register e of B holds k = 4 t + 16 e .. + 3 of column g; d[i] is row g + 8 (i >> 1),
// column 2 t + (i & 1). The integer accumulation wraps modulo 2^32 (no .satfinite), as
// the reference's int32 sum does. The emulator (tests/simt/simt_emu.h) defines TJEMU_MMA
// and its own warp-collective tj_mma_m16n8k32: the only preprocessor conditional of
// the generated source, so the host compiler never sees the PTX.
std::string mma_helpers() {
  return R"(#ifndef TJEMU_MMA
TJ_DEV void tj_mma_m16n8k32(tj_i32* d, tj_u32 a0, tj_u32 a1, tj_u32 a2, tj_u32 a3, tj_u32 b0, tj_u32 b1) {
  asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
               : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
#endif
// Four codes (bytes 0, 1, 2) to the weights -1, 0, 1 as int8 bytes (no borrow crosses a byte).
TJ_DEV tj_u32 tj_decode4(tj_u32 c) { return ((c | 0x80808080u) - 0x01010101u) ^ 0x80808080u; }
// Activation bytes x[r, k .. k + 3] of an [M, K] i8 matrix as one register; 0 past M
// rows or K columns (K % 4 == 0: one aligned 4-byte load, k is a multiple of 4).
TJ_DEV tj_u32 tj_a4(const tj_i8* x, tj_u32 r, tj_u32 k, tj_u32 M, tj_u32 K) {
  if (r >= M) return 0u;
  if ((K & 3u) == 0u) return k < K ? *(const tj_u32*)(x + r * K + k) : 0u;
  tj_u32 v = 0u;
  for (tj_u32 b = 0u; b < 4u; ++b)
    if (k + b < K) v |= (tj_u32)(tj_u8)x[r * K + k + b] << (8u * b);
  return v;
}
)";
}

// The f32 expression of elementwise op `op` on `a` (and `b`).
std::string apply(Op op, const std::string& a, const std::string& b) {
  switch (op) {
    case Op::Add: return "tj_add(" + a + ", " + b + ")";
    case Op::Sub: return "tj_sub(" + a + ", " + b + ")";
    case Op::Mul: return "tj_mul(" + a + ", " + b + ")";
    case Op::Div: return "tj_div(" + a + ", " + b + ")";
    case Op::Max: return "tj_fmax(" + a + ", " + b + ")";
    case Op::Min: return "tj_fmin(" + a + ", " + b + ")";
    case Op::Neg: return "-" + a;
    case Op::Abs: return "tj_abs(" + a + ")";
    case Op::Relu: return "tj_relu(" + a + ")";
    case Op::Sigmoid: return "tj_sigmoid(" + a + ")";
    case Op::Tanh: return "tj_tanh(" + a + ")";
    case Op::Gelu: return "tj_gelu(" + a + ")";
    case Op::Silu: return "tj_silu(" + a + ")";
    case Op::Exp: return "expf(" + a + ")";
    case Op::Log: return "logf(" + a + ")";
    case Op::Sqrt: return "sqrtf(" + a + ")";
    case Op::Rsqrt: return "tj_div(1.0f, sqrtf(" + a + "))";
    default: break;
  }
  TERNJIT_UNREACHABLE("apply: " + quote(op) + " is not elementwise");
}

std::string params(const std::vector<std::string>& p) {
  std::string s;
  for (std::size_t i = 0; i < p.size(); ++i) s += (i ? ", " : "") + p[i];
  return s;
}
std::string head(const std::string& name, std::uint32_t block, const std::vector<std::string>& p) {
  return "extern \"C\" __global__ void __launch_bounds__(" + std::to_string(block) + ") " + name + "(" + params(p) +
         ") {\n";
}

}  // namespace detail

using namespace detail;

namespace {

// ------------------------------------------------------------------ row-wise ops

// quantize (f32 -> i8 + f32 row scale) and quantize_int8 (f32 -> f32): one block per
// row; the absmax scale of ir/quant.cpp (NaN for a row holding a NaN or an infinity:
// the NaN-propagating max of |x| is then not finite), round half to even, clamp to +-127.
// With `rowsum` (an i8 tmatmul reads q), the kernel also writes each row's sum of q to
// rs[r]: the row-sum correction of the tmatmul's codes, computed once per token here.
std::string quantize_kernel(const std::string& name, std::int64_t rows, std::int64_t k, bool fake, bool rowsum) {
  std::vector<std::string> p = {"const float* __restrict__ x"};
  if (fake) p.push_back("float* __restrict__ q");
  else p.insert(p.end(), {"tj_i8* __restrict__ q", "float* __restrict__ s"});
  if (rowsum) p.push_back("tj_i32* __restrict__ rs");
  std::string g = head(name, kRowBlock, p);
  g += "  const tj_u32 ROWS = " + u(rows) + ", K = " + u(k) + ";\n";
  g += "  __shared__ float red[" + std::to_string(kRowBlock / 32) + "];\n";
  if (rowsum) g += "  __shared__ tj_i32 ired[" + std::to_string(kRowBlock / 32) + "];\n";
  g += "  for (tj_u32 r = blockIdx.x; r < ROWS; r += gridDim.x) {\n    const float* xr = x + r * K;\n";
  g += "    float m = 0.0f;\n    for (tj_u32 c = threadIdx.x; c < K; c += blockDim.x) m = tj_fmax(m, tj_abs(xr[c]));\n";
  g += "    m = tj_block_max(m, red);\n    const float sc = tj_finite(m) ? tj_div(m, 127.0f) : tj_qnan();\n";
  if (fake) {
    g += "    for (tj_u32 c = threadIdx.x; c < K; c += blockDim.x) q[r * K + c] = tj_mul((float)tj_quant(xr[c], sc), sc);\n";
  } else {
    g += "    if (threadIdx.x == 0u) s[r] = sc;\n";
    if (rowsum) {
      g += "    tj_i32 sum = 0;\n    for (tj_u32 c = threadIdx.x; c < K; c += blockDim.x) {\n"
           "      const tj_i8 v = tj_quant(xr[c], sc);\n      q[r * K + c] = v;\n      sum += v;\n    }\n";
      g += "    sum = tj_block_isum(sum, ired);\n    if (threadIdx.x == 0u) rs[r] = sum;\n";
    } else {
      g += "    for (tj_u32 c = threadIdx.x; c < K; c += blockDim.x) q[r * K + c] = tj_quant(xr[c], sc);\n";
    }
  }
  g += "  }\n}\n";
  return g;
}

// rmsnorm over the last axis, one block per row. The sum of squares is taken of x / max|x|
// so rows of large finite magnitude do not overflow f32.
std::string rmsnorm_kernel(const std::string& name, std::int64_t rows, std::int64_t d, double eps) {
  char epsbuf[64];
  std::snprintf(epsbuf, sizeof epsbuf, "%.9ef", eps);
  std::string g = head(name, kRowBlock, {"const float* __restrict__ x", "const float* __restrict__ gamma", "float* __restrict__ y"});
  g += "  const tj_u32 ROWS = " + u(rows) + ", D = " + u(d) + ";\n  const float EPS = " + epsbuf + ";\n";
  g += "  __shared__ float red[" + std::to_string(kRowBlock / 32) + "];\n";
  g += "  for (tj_u32 r = blockIdx.x; r < ROWS; r += gridDim.x) {\n    const float* xr = x + r * D;\n";
  g += "    float m = 0.0f;\n    for (tj_u32 c = threadIdx.x; c < D; c += blockDim.x) m = tj_fmax(m, tj_abs(xr[c]));\n";
  g += "    m = tj_block_max(m, red);\n    float ss = 0.0f;\n";
  g += "    const bool plain = m == 0.0f || !tj_finite(m);\n";
  g += "    for (tj_u32 c = threadIdx.x; c < D; c += blockDim.x) {\n"
       "      const float v = plain ? xr[c] : tj_div(xr[c], m);\n      ss = tj_add(ss, tj_mul(v, v));\n    }\n";
  g += "    ss = tj_block_sum(ss, red);\n";
  g += "    const float denom = plain ? sqrtf(tj_add(tj_div(ss, (float)D), EPS))\n"
       "                              : tj_mul(m, sqrtf(tj_add(tj_div(ss, (float)D), tj_div(tj_div(EPS, m), m))));\n";
  g += "    for (tj_u32 c = threadIdx.x; c < D; c += blockDim.x) y[r * D + c] = tj_mul(tj_div(xr[c], denom), gamma[c]);\n";
  g += "  }\n}\n";
  return g;
}

// softmax and the reductions along an axis of [outer, len, inner]: one thread per
// (outer, inner) pair, a grid-stride loop.
std::string axis_kernel(const std::string& name, Op op, std::int64_t outer, std::int64_t len, std::int64_t inner) {
  std::string g = head(name, kRowBlock, {"const float* __restrict__ x", "float* __restrict__ y"});
  g += "  const tj_u32 OUTER = " + u(outer) + ", LEN = " + u(len) + ", INNER = " + u(inner) + ";\n";
  g += "  for (tj_u32 id = blockIdx.x * blockDim.x + threadIdx.x; id < OUTER * INNER; id += gridDim.x * blockDim.x) {\n";
  g += "    const tj_u32 o = id / INNER, i = id % INNER, base = o * LEN * INNER + i;\n";
  switch (op) {
    case Op::Softmax:
      g += "    float m = tj_bits(0xff800000u);\n";
      g += "    for (tj_u32 k = 0u; k < LEN; ++k) { const float v = x[base + k * INNER]; m = (tj_isnan(v) || tj_isnan(m)) ? "
           "tj_qnan() : (v > m ? v : m); }\n";
      g += "    float sum = 0.0f;\n    for (tj_u32 k = 0u; k < LEN; ++k) sum = tj_add(sum, expf(tj_sub(x[base + k * INNER], m)));\n";
      g += "    for (tj_u32 k = 0u; k < LEN; ++k) y[base + k * INNER] = tj_div(expf(tj_sub(x[base + k * INNER], m)), sum);\n";
      break;
    case Op::ReduceMax:
      g += "    float m = tj_bits(0xff800000u);\n";
      g += "    for (tj_u32 k = 0u; k < LEN; ++k) { const float v = x[base + k * INNER]; m = (tj_isnan(v) || tj_isnan(m)) ? "
           "tj_qnan() : (v > m ? v : m); }\n    y[id] = m;\n";
      break;
    case Op::ReduceSum:
    case Op::ReduceMean:
      g += "    float s = 0.0f;\n    for (tj_u32 k = 0u; k < LEN; ++k) s = tj_add(s, x[base + k * INNER]);\n";
      g += op == Op::ReduceMean ? "    y[id] = tj_div(s, (float)LEN);\n" : "    y[id] = s;\n";
      break;
    default: TERNJIT_UNREACHABLE("axis_kernel: " + quote(op));
  }
  g += "  }\n}\n";
  return g;
}

// ewise and the standalone elementwise ops: one thread per element, a grid-stride loop.
std::string ewise_kernel(const std::string& name, const std::vector<ir::EwiseStep>& steps,
                         const std::vector<std::pair<std::int64_t, std::int64_t>>& views, std::int64_t items,
                         std::int64_t cols) {
  std::vector<std::string> p;
  const std::size_t n = views.size();
  for (std::size_t i = 0; i < n; ++i) p.push_back("const float* __restrict__ a" + std::to_string(i));
  p.push_back("float* __restrict__ y");
  std::string g = head(name, kRowBlock, p);
  g += "  const tj_u32 ITEMS = " + u(items) + ", COLS = " + u(cols) + ";\n";
  g += "  for (tj_u32 e = blockIdx.x * blockDim.x + threadIdx.x; e < ITEMS; e += gridDim.x * blockDim.x) {\n";
  g += "    const tj_u32 r = e / COLS, c = e % COLS;\n    (void)r; (void)c;\n";
  for (std::size_t i = 0; i < n; ++i)
    g += "    const float s" + std::to_string(i) + " = a" + std::to_string(i) + "[r * " + u(views[i].first) +
         " + c * " + u(views[i].second) + "];\n";
  for (std::size_t j = 0; j < steps.size(); ++j) {
    const ir::EwiseStep& st = steps[j];
    g += "    const float s" + std::to_string(n + j) + " = " +
         apply(st.op, "s" + std::to_string(st.a), st.b >= 0 ? "s" + std::to_string(st.b) : "") + ";\n";
  }
  g += "    y[e] = s" + std::to_string(n + steps.size() - 1) + ";\n  }\n}\n";
  return g;
}

// A byte copy (a returned value not computed in place).
std::string copy_kernel(const std::string& name, std::size_t bytes) {
  std::string g = head(name, kRowBlock, {"const tj_u8* __restrict__ a", "tj_u8* __restrict__ b"});
  g += "  for (tj_u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < " + u(static_cast<std::int64_t>(bytes)) +
       "; i += gridDim.x * blockDim.x) b[i] = a[i];\n}\n";
  return g;
}

std::uint32_t grid_1d(std::int64_t items) {
  return static_cast<std::uint32_t>(std::clamp<std::int64_t>((items + kRowBlock - 1) / kRowBlock, 1, kMaxGrid));
}

// ------------------------------------------------------------------ support

Result<void> op_supported(const ir::Function& f, const ir::InstData& inst, const StepPlan* plan) {
  const ir::Type& rt = f.type_of(inst.results[0]);
  for (ValueId v : inst.operands)
    if (f.type_of(v).static_numel().value_or(0) > kMaxElems) return unsupported("a tensor over 2^31 elements");
  if (rt.static_numel().value_or(0) > kMaxElems) return unsupported("a tensor over 2^31 elements");
  if (rt.static_numel().value_or(0) == 0) return unsupported("an empty result of " + quote(inst.op));
  auto all_f32 = [&] {
    return rt.elem == ElemKind::F32 &&
           std::all_of(inst.operands.begin(), inst.operands.end(), [&](ValueId v) { return f32(f, v); });
  };
  switch (inst.op) {
    case Op::TMatMul: {
      const ElemKind xk = f.type_of(inst.operands[0]).elem;
      if (xk != ElemKind::I8 && xk != ElemKind::F32) return unsupported("tmatmul activations must be i8 or f32");
      const ir::Type& wt = f.type_of(inst.operands[1]);
      if (wt.elem != ElemKind::T2) return unsupported("tmatmul weights must be t2");
      if (rt.elem != ElemKind::F32) return unsupported("tmatmul result must be f32");
      if (wt.rank() != 2 || wt.shape[0].extent == 0) return unsupported("tmatmul weight must be a non-empty matrix");
      const std::int64_t kp = (wt.shape[0].extent + kChunk - 1) / kChunk * kChunk;
      if (kp / 4 * wt.shape[1].extent > kMaxElems) return unsupported("a packed tmatmul weight over 2 GiB");
      if (auto r = tmatmul_operands_supported(f, inst); !r.ok()) return unsupported(r.error().message);
      if (plan && !plan->is_load_time(inst.operands[1]))
        return unsupported("tmatmul weights must be known at load (a parameter or constant)");
      return success();
    }
    case Op::QuantizeInt8:
      if (!all_f32() || rt.rank() == 0) return unsupported("quantize_int8 is generated for f32 rows only");
      return success();
    default: break;
  }
  if (auto rule = row_op_supported(f, inst)) {
    if (!rule->ok()) return unsupported(rule->error().message);
    const bool reduction = inst.op == Op::RmsNorm || inst.op == Op::Softmax || inst.op == Op::ReduceSum ||
                           inst.op == Op::ReduceMean || inst.op == Op::ReduceMax;
    if (reduction && f.type_of(inst.operands[0]).rank() == 0) return unsupported(quote(inst.op) + " of a scalar");
    return success();
  }
  return unsupported("no kernel for " + quote(inst.op));
}

TMatMulShape shape_of(const ir::Function& f, const ir::InstData& inst) {
  const auto& a = std::get<ir::TMatMulAttrs>(inst.attrs);
  const ir::Type& wt = f.type_of(inst.operands[1]);
  TMatMulShape s;
  s.k = wt.shape[0].extent;
  s.n = wt.shape[1].extent;
  s.m = numel(extents(f.type_of(inst.results[0]))) / s.n;
  s.x = f.type_of(inst.operands[0]).elem;
  s.group = tmatmul_group_scale(inst) ? a.group : 0;
  return s;
}

std::uint32_t pow2_floor(std::int64_t v) {
  std::uint32_t p = 1;
  while (static_cast<std::int64_t>(p) * 2 <= v && p < (1u << 30)) p *= 2;
  return p;
}

}  // namespace

std::string_view dialect_name(Dialect d) { return d == Dialect::Cuda ? "cuda" : "hip"; }

std::string config_text(const TMatMulConfig& c) {
  return "tpc=" + std::to_string(c.tpc) + ";cols=" + std::to_string(c.cols) + ";unroll=" + std::to_string(c.unroll) +
         ";rows=" + std::to_string(c.rows) + ";cpt=" + std::to_string(c.cpt) +
         (c.mma != 0 ? ";mma=" + std::to_string(c.mma) : "");
}

std::optional<TMatMulConfig> parse_config(std::string_view text) {
  TMatMulConfig c;
  unsigned tpc = 0, cols = 0, unroll = 0, rows = 0, cpt = 0, mma = 0;
  const std::string t(text);
  int used = 0;
  if (std::sscanf(t.c_str(), "tpc=%u;cols=%u;unroll=%u;rows=%u;cpt=%u%n", &tpc, &cols, &unroll, &rows, &cpt, &used) != 5)
    return std::nullopt;
  if (static_cast<std::size_t>(used) != t.size()) {
    int more = 0;
    if (std::sscanf(t.c_str() + used, ";mma=%u%n", &mma, &more) != 1 || static_cast<std::size_t>(used + more) != t.size())
      return std::nullopt;
  }
  c.mma = mma;
  c.tpc = tpc;
  c.cols = cols;
  c.unroll = unroll;
  c.rows = rows;
  c.cpt = cpt;
  if (config_text(c) != t) return std::nullopt;  // one spelling per configuration
  return c;
}

bool config_valid(const TMatMulConfig& c, const TMatMulShape& s, std::uint32_t warp_size, bool tensor_cores) {
  if (warp_size != 32 && warp_size != 64) return false;
  if (c.mma > 1) return false;
  if (c.mma == 1)
    return tensor_cores && warp_size == 32 && s.x == ElemKind::I8 && s.group == 0 && c.tpc == 32 && c.unroll == 1 &&
           c.cols >= 1 && c.cols <= 8 && (c.rows == 1 || c.rows == 2) && (c.cpt == 1 || c.cpt == 2 || c.cpt == 4);
  if (c.tpc == 0 || c.tpc > 1024 || !std::has_single_bit(c.tpc)) return false;
  if (c.cols == 0 || c.cols > 1024) return false;
  const std::uint64_t block = std::uint64_t{c.tpc} * c.cols;
  if (block > 1024 || block % warp_size != 0) return false;
  if (c.unroll != 1 && c.unroll != 2 && c.unroll != 4) return false;
  if (c.cpt != 1 && c.cpt != 2 && c.cpt != 4) return false;
  return c.rows >= 1 && c.rows <= 8;
}

TMatMulConfig default_config(const TMatMulShape& s, std::uint32_t warp_size, bool tensor_cores) {
  TMatMulConfig c;
  if (tensor_cores && warp_size == 32 && s.x == ElemKind::I8 && s.group == 0 && s.m >= 16) {
    // Tensor cores: a block of up to 4 warps (no more than the column tiles need), each
    // 2 tiles of 8 columns (one tile when N <= 8) by 1 (M < 32) or 2 tiles of 16 rows
    // over the whole K.
    c.tpc = 32;
    c.unroll = 1;
    c.rows = s.m >= 32 ? 2 : 1;
    c.cpt = s.n > 8 ? 2 : 1;
    const std::int64_t tiles = (s.n + 7) / 8;
    c.cols = static_cast<std::uint32_t>(std::clamp<std::int64_t>((tiles + c.cpt - 1) / c.cpt, 1, 4));
    c.mma = 1;
    return c;
  }
  const std::int64_t chunks = std::max<std::int64_t>(1, (s.k + kChunk - 1) / kChunk);
  // Two or more chunks per thread; a whole warp per column unless K is short; split K
  // further (up to 256 threads per column) when N is small, so enough blocks exist.
  const std::uint32_t cap = s.n < 512 ? 256 : warp_size;
  c.tpc = std::clamp<std::uint32_t>(pow2_floor(std::max<std::int64_t>(1, chunks / 2)), 1, cap);
  c.cols = std::max<std::uint32_t>(1, 256 / c.tpc);
  while (std::uint64_t{c.tpc} * c.cols % warp_size != 0) ++c.cols;
  c.unroll = chunks / c.tpc >= 4 ? 2 : 1;
  c.rows = static_cast<std::uint32_t>(std::clamp<std::int64_t>(s.m, 1, 8));
  // Several columns per thread reuse each activation chunk (M > 1: the activations, not
  // the weights, would otherwise dominate the loads).
  c.cpt = s.m >= 4 ? 4 : s.m >= 2 ? 2 : 1;
  return c;
}

Result<void> supported(const ir::Function& f) {
  TERNJIT_TRY_VOID(plannable(f, "simt"));
  const StepPlan plan = plan_steps(f);
  for (const PlannedStep& ps : plan.steps) {
    if (ps.kind != PlannedStep::Kind::Compute) continue;
    TERNJIT_TRY_VOID(op_supported(f, f.inst(ps.inst), &plan));
  }
  for (std::size_t b : plan.in_bytes)
    if (b > static_cast<std::size_t>(kMaxElems)) return unsupported("an argument over 2 GiB");
  for (std::size_t b : plan.out_bytes)
    if (b > static_cast<std::size_t>(kMaxElems)) return unsupported("a result over 2 GiB");
  return success();
}

std::vector<TMatMulShape> tmatmul_shapes(const ir::Function& f) {
  std::vector<TMatMulShape> out;
  const StepPlan plan = plan_steps(f);
  for (const PlannedStep& ps : plan.steps)
    if (ps.kind == PlannedStep::Kind::Compute && f.inst(ps.inst).op == Op::TMatMul)
      out.push_back(shape_of(f, f.inst(ps.inst)));
  return out;
}

Result<SimtProgram> generate(const ir::Module& specialized, std::string_view function, const SimtOptions& options) {
  const ir::Function* fp = specialized.find_function(function);
  if (fp == nullptr) return make_error(ErrorCode::NotFound, "no function @" + std::string(function));
  const ir::Function& f = *fp;
  if (options.warp_size != 32 && options.warp_size != 64)
    return make_error(ErrorCode::InvalidArgument, "the simt generator: warp size " +
                                                      std::to_string(options.warp_size) + " (32 or 64)");
  TERNJIT_TRY_VOID(supported(f));
  SimtProgram p;
  p.dialect = options.dialect;
  p.warp_size = options.warp_size;
  p.plan = plan_steps(f);
  p.source = prelude(options);
  std::map<std::size_t, std::size_t> scratch_of;  // plan scratch offset -> scratch id
  std::map<std::pair<std::size_t, WeightLayout>, std::size_t> weight_of;  // (load-time index, layout) -> weights index
  const bool tensor_cores = options.tensor_cores && options.dialect == Dialect::Cuda && options.warp_size == 32;
  bool mma_helpers_emitted = false;
  std::map<std::pair<std::uint32_t, std::int64_t>, std::size_t> rowsum_of;  // (x value, group) -> scratch id
  auto slot_arg = [&](const Slot& s, std::size_t bytes) -> KernelArg {
    switch (s.kind) {
      case SlotKind::Arg: return {KernelArg::Kind::Input, s.index, 0};
      case SlotKind::Out: return {KernelArg::Kind::Output, s.index, 0};
      case SlotKind::Const: return {KernelArg::Kind::Const, s.index, 0};
      case SlotKind::Scratch: break;
    }
    auto [it, fresh] = scratch_of.try_emplace(s.index, p.scratch_bytes.size());
    if (fresh) p.scratch_bytes.push_back(0);
    p.scratch_bytes[it->second] = std::max(p.scratch_bytes[it->second], bytes);
    return {KernelArg::Kind::Scratch, it->second, 0};
  };
  auto bytes_of = [&](ValueId v) { return static_bytes(f.type_of(v)); };
  // Quantized activations an ungrouped dp4a i8 tmatmul of this program reads: their
  // quantize kernel writes the row sums too (no tj_rowsum kernel for them). The mma
  // form reads no row sums.
  std::map<std::uint32_t, bool> fuse_rowsum;  // quantize result value -> fused
  {
    std::map<std::uint32_t, bool> quantized;  // values computed by a quantize step
    std::size_t t = 0;
    for (const PlannedStep& ps : p.plan.steps) {
      if (ps.kind != PlannedStep::Kind::Compute) continue;
      const ir::InstData& inst = f.inst(ps.inst);
      if (inst.op == Op::Quantize) quantized[inst.results[0].index] = true;
      if (inst.op != Op::TMatMul) continue;
      const TMatMulShape s = shape_of(f, inst);
      TMatMulConfig c = default_config(s, options.warp_size, tensor_cores);
      if (t < options.decisions.size() && !options.decisions[t].empty())
        if (auto parsed = parse_config(options.decisions[t])) c = *parsed;  // invalid: refused below
      ++t;
      if (s.x == ElemKind::I8 && s.group == 0 && c.mma == 0 && quantized.count(inst.operands[0].index))
        fuse_rowsum[inst.operands[0].index] = true;
    }
  }
  std::size_t index = 0;
  for (const PlannedStep& ps : p.plan.steps) {
    const std::size_t step = index++;
    if (ps.kind == PlannedStep::Kind::Copy) {
      KernelLaunch k;
      k.name = "tj_copy_" + std::to_string(step);
      k.op = "copy";
      k.block = {kRowBlock, 1, 1};
      k.grid = {grid_1d(static_cast<std::int64_t>(ps.bytes)), 1, 1};
      k.args = {slot_arg(ps.in[0], ps.bytes), slot_arg(ps.out[0], ps.bytes)};
      p.source += "\n" + copy_kernel(k.name, ps.bytes);
      p.kernels.push_back(std::move(k));
      continue;
    }
    const ir::InstData& inst = f.inst(ps.inst);
    const std::string name = "tj_" + std::string(ir::op_name(inst.op)) + "_" + std::to_string(step);
    KernelLaunch k;
    k.name = name;
    k.inst = ps.inst;
    k.op = std::string(ir::op_name(inst.op));
    k.block = {kRowBlock, 1, 1};
    std::vector<KernelArg> ins, outs;
    for (std::size_t i = 0; i < ps.in.size(); ++i) ins.push_back(slot_arg(ps.in[i], bytes_of(inst.operands[i])));
    for (std::size_t j = 0; j < ps.out.size(); ++j) outs.push_back(slot_arg(ps.out[j], bytes_of(inst.results[j])));
    const auto out = extents(f.type_of(inst.results[0]));
    const std::int64_t items = numel(out);
    const std::int64_t cols = out.empty() ? 1 : out.back();
    auto view = [&](ValueId v) { return *targets::view2d(out, extents(f.type_of(v))); };
    std::string src;
    switch (inst.op) {
      case Op::TMatMul: {
        const auto& a = std::get<ir::TMatMulAttrs>(inst.attrs);
        const TMatMulShape s = shape_of(f, inst);
        const std::size_t t = p.tmatmuls.size();
        TMatMulConfig c = default_config(s, options.warp_size, tensor_cores);
        if (t < options.decisions.size() && !options.decisions[t].empty()) {
          auto parsed = parse_config(options.decisions[t]);
          if (!parsed || !config_valid(*parsed, s, options.warp_size, tensor_cores))
            return make_error(ErrorCode::InvalidArgument, "the simt generator: tmatmul configuration '" +
                                                              options.decisions[t] + "' is not valid here");
          c = *parsed;
        }
        p.tmatmuls.push_back(s);
        p.configs.push_back(c);
        // The weight, packed once per distinct load-time value and layout.
        const std::size_t lt = ps.in[1].index;
        const WeightLayout layout = c.mma != 0 ? WeightLayout::Mma2 : WeightLayout::Codes64;
        auto [wit, wfresh] = weight_of.try_emplace(std::make_pair(lt, layout), p.weights.size());
        if (wfresh) {
          WeightUse wu;
          wu.load_time = lt;
          wu.k = s.k;
          wu.n = s.n;
          wu.layout = layout;
          const ir::InstData& def = f.inst(p.plan.load_time[lt].inst);
          if (def.op == Op::Param) wu.param = std::get<ir::ParamAttrs>(def.attrs).name;
          p.weights.push_back(std::move(wu));
        }
        std::vector<KernelArg> args = {ins[0], {KernelArg::Kind::Weight, wit->second, 0}};
        if (c.mma != 0) {
          // Weights decoded to -1/0/1: no row sums.
          std::vector<EpilogueRead> ep;
          for (const TMatMulEpilogueOperand& e : tmatmul_epilogue(inst)) {
            const auto [rs, cs] = view(inst.operands[e.operand]);
            ep.push_back({e.op, rs, cs});
            args.push_back(ins[e.operand]);
          }
          args.push_back(outs[0]);
          k.args = std::move(args);
          k.tmatmul = static_cast<std::int64_t>(t);
          const std::int64_t tiles = (s.n + 7) / 8, per_block = std::int64_t{c.cols} * c.cpt;
          const std::int64_t row_passes = ((s.m + 15) / 16 + c.rows - 1) / c.rows;
          k.block = {32 * c.cols, 1, 1};
          k.grid = {static_cast<std::uint32_t>((tiles + per_block - 1) / per_block),
                    static_cast<std::uint32_t>(std::min<std::int64_t>(row_passes, kMaxGrid)), 1};
          if (!mma_helpers_emitted) {
            p.source += "\n" + mma_helpers();
            mma_helpers_emitted = true;
          }
          src = mma_kernel(name, s, c, ep, a.act);
          break;
        }
        if (s.x == ElemKind::I8) {
          // The activation row sums (per group), once per activation value and group.
          const std::int64_t group = s.group > 0 ? s.group : s.k;
          auto key = std::make_pair(inst.operands[0].index, group);
          auto rit = rowsum_of.find(key);
          if (rit == rowsum_of.end()) {
            const std::int64_t groups = ir::grouped_scale_rows(s.k, group);
            const std::size_t id = p.scratch_bytes.size();
            p.scratch_bytes.push_back(static_cast<std::size_t>(s.m * groups) * 4);
            KernelLaunch r;
            r.name = "tj_rowsum_" + std::to_string(step);
            r.op = "rowsum";
            r.inst = ps.inst;
            r.block = {kRowBlock, 1, 1};
            r.grid = {static_cast<std::uint32_t>(groups), static_cast<std::uint32_t>(std::min(s.m, kMaxGrid)), 1};
            r.args = {ins[0], {KernelArg::Kind::Scratch, id, 0}};
            p.source += "\n" + rowsum_kernel(r.name, s.m, s.k, group);
            p.kernels.push_back(std::move(r));
            rit = rowsum_of.emplace(key, id).first;
          }
          args.push_back({KernelArg::Kind::Scratch, rit->second, 0});
        }
        if (auto gs = tmatmul_group_scale(inst)) args.push_back(ins[*gs]);
        std::vector<EpilogueRead> ep;
        for (const TMatMulEpilogueOperand& e : tmatmul_epilogue(inst)) {
          const auto [rs, cs] = view(inst.operands[e.operand]);
          ep.push_back({e.op, rs, cs});
          args.push_back(ins[e.operand]);
        }
        args.push_back(outs[0]);
        k.args = std::move(args);
        k.tmatmul = static_cast<std::int64_t>(t);
        k.block = {c.tpc * c.cols, 1, 1};
        k.grid = {static_cast<std::uint32_t>((s.n + std::int64_t{c.cols} * c.cpt - 1) / (std::int64_t{c.cols} * c.cpt)),
                  static_cast<std::uint32_t>(std::min<std::int64_t>((s.m + c.rows - 1) / c.rows, kMaxGrid)), 1};
        src = tmatmul_kernel(name, s, c, ep, a.act);
        break;
      }
      case Op::Quantize:
      case Op::QuantizeInt8: {
        const std::int64_t rows = items / cols;
        const bool rowsum = inst.op == Op::Quantize && fuse_rowsum.count(inst.results[0].index) > 0;
        src = quantize_kernel(name, rows, cols, inst.op == Op::QuantizeInt8, rowsum);
        k.grid = {static_cast<std::uint32_t>(std::min(rows, kMaxGrid)), 1, 1};
        k.args = ins;
        k.args.insert(k.args.end(), outs.begin(), outs.end());
        if (rowsum) {
          const std::size_t id = p.scratch_bytes.size();
          p.scratch_bytes.push_back(static_cast<std::size_t>(rows) * 4);
          rowsum_of.emplace(std::make_pair(inst.results[0].index, cols), id);
          k.args.push_back({KernelArg::Kind::Scratch, id, 0});
        }
        break;
      }
      case Op::RmsNorm: {
        const std::int64_t rows = items / cols;
        src = rmsnorm_kernel(name, rows, cols, std::get<ir::EpsAttrs>(inst.attrs).eps);
        k.grid = {static_cast<std::uint32_t>(std::min(rows, kMaxGrid)), 1, 1};
        k.args = ins;
        k.args.insert(k.args.end(), outs.begin(), outs.end());
        break;
      }
      case Op::Softmax:
      case Op::ReduceSum:
      case Op::ReduceMean:
      case Op::ReduceMax: {
        const auto in = extents(f.type_of(inst.operands[0]));
        const auto axis = static_cast<std::size_t>(std::get<ir::AxisAttrs>(inst.attrs).axis);
        std::int64_t outer = 1, inner = 1;
        for (std::size_t d = 0; d < in.size(); ++d) {
          if (d < axis) outer *= in[d];
          if (d > axis) inner *= in[d];
        }
        src = axis_kernel(name, inst.op, outer, in[axis], inner);
        k.grid = {grid_1d(outer * inner), 1, 1};
        k.args = ins;
        k.args.insert(k.args.end(), outs.begin(), outs.end());
        break;
      }
      default: {
        std::vector<ir::EwiseStep> steps;
        if (inst.op == Op::Ewise) steps = std::get<ir::EwiseAttrs>(inst.attrs).steps;
        else steps.push_back({inst.op, 0, ir::is_ewise_binary(inst.op) ? 1 : -1});
        std::vector<std::pair<std::int64_t, std::int64_t>> views;
        for (ValueId v : inst.operands) views.push_back(view(v));
        src = ewise_kernel(name, steps, views, items, cols);
        k.grid = {grid_1d(items), 1, 1};
        k.args = ins;
        k.args.insert(k.args.end(), outs.begin(), outs.end());
        break;
      }
    }
    p.source += "\n" + src;
    p.kernels.push_back(std::move(k));
  }
  // HIP counts threads per grid dimension in 32 bits (grid x block < 2^32); CUDA's grid.x
  // stops at 2^31 - 1. Both hold for the shapes supported() admits; checked, not assumed.
  for (const KernelLaunch& k : p.kernels)
    if (std::uint64_t{k.grid.x} * k.block.x >= (std::uint64_t{1} << 32) || k.grid.x >= (1u << 31) ||
        k.grid.y > kMaxGrid)
      return unsupported("kernel " + k.name + " needs a grid of more than 2^32 threads");
  return p;
}

}  // namespace ternjit::targets::simt
