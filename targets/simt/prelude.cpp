// SPDX-License-Identifier: Apache-2.0
// prelude.cpp - the text every generated translation unit starts with: types, the dialect's primitives, the f32 math of the elementwise ops, block reductions, the tmatmul chunk helpers, the mma.sync helpers.
#include <string>

#include "targets/simt/generate_internal.h"

namespace ternjit::targets::simt::detail {

namespace {

// The integer types (the source includes no header) and the launch constants.
std::string types(const SimtOptions& o) {
  std::string s =
      "typedef signed char tj_i8;\ntypedef unsigned char tj_u8;\ntypedef int tj_i32;\ntypedef unsigned int tj_u32;\n"
      "typedef unsigned long long tj_u64;\n"
      "struct alignas(16) tj_u32x4 { tj_u32 x, y, z, w; };\n";
  return s + "#define TJ_WARP " + std::to_string(o.warp_size) + "u\n#define TJ_DEV __device__ inline\n";
}

// The dialect's primitives: one declaration, a CUDA body and a HIP body each. The f32
// add/sub/mul/div are explicit round-to-nearest operations (CUDA: __fmul_rn & co, never
// contracted into an fma; HIP: plain operators under `fp contract(off)`).
struct Primitive {
  const char* declaration;
  const char* cuda;
  const char* hip;
};
constexpr Primitive kPrimitives[] = {
    {"float tj_add(float a, float b)", "__fadd_rn(a, b)", "a + b"},
    {"float tj_sub(float a, float b)", "__fsub_rn(a, b)", "a - b"},
    {"float tj_mul(float a, float b)", "__fmul_rn(a, b)", "a * b"},
    {"float tj_div(float a, float b)", "__fdiv_rn(a, b)", "a / b"},
    {"float tj_bits(tj_u32 v)", "__uint_as_float(v)", "__builtin_bit_cast(float, v)"},
    {"tj_u32 tj_fbits(float v)", "__float_as_uint(v)", "__builtin_bit_cast(tj_u32, v)"},
    {"tj_i32 tj_shfl_down(tj_i32 v, tj_u32 d, tj_u32 w)", "__shfl_down_sync(0xffffffffu, v, d, w)",
     "__shfl_down(v, d, w)"},
    {"float tj_shfl_down(float v, tj_u32 d, tj_u32 w)", "__shfl_down_sync(0xffffffffu, v, d, w)",
     "__shfl_down(v, d, w)"},
    {"tj_i32 tj_shfl_xor(tj_i32 v, tj_u32 m, tj_u32 w)", "__shfl_xor_sync(0xffffffffu, v, m, w)",
     "__shfl_xor(v, m, w)"},
    {"float tj_shfl_xor(float v, tj_u32 m, tj_u32 w)", "__shfl_xor_sync(0xffffffffu, v, m, w)", "__shfl_xor(v, m, w)"},
};

std::string primitives(Dialect d) {
  std::string s;
  for (const Primitive& p : kPrimitives)
    s += std::string("TJ_DEV ") + p.declaration + " { return " + (d == Dialect::Cuda ? p.cuda : p.hip) + "; }\n";
  return s;
}

// Four signed byte products added to c, wrapping like the hardware instruction.
std::string dot4(const SimtOptions& o) {
  if (!o.int_dot)
    return "TJ_DEV tj_i32 tj_dot4(tj_i32 a, tj_i32 b, tj_i32 c) {\n"
           "  tj_u32 r = (tj_u32)c;\n"
           "  for (tj_u32 i = 0u; i < 32u; i += 8u) r += (tj_u32)((tj_i32)(tj_i8)(a >> i) * (tj_i32)(tj_i8)(b >> i));\n"
           "  return (tj_i32)r;\n}\n";
  return o.dialect == Dialect::Cuda
             ? "TJ_DEV tj_i32 tj_dot4(tj_i32 a, tj_i32 b, tj_i32 c) { return __dp4a(a, b, c); }\n"
             : "TJ_DEV tj_i32 tj_dot4(tj_i32 a, tj_i32 b, tj_i32 c) { return __builtin_amdgcn_sdot4(a, b, c, false); "
               "}\n";
}

// The f32 functions of the elementwise ops, matching ir/interpret_ops.cpp's
// elementwise(): NaN rules of max/min/relu; erf by Abramowitz-Stegun 7.1.26, |error| <
// 1.5e-7; tanh through exp of -2|x|. Then the int8 quantization of one value.
constexpr const char* kMath = R"(TJ_DEV bool tj_isnan(float x) { return x != x; }
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
)";

// `acc` combined with `x` as a statement: `op` a tj_ function ("tj_fmax") or "+=".
std::string combine(const std::string& op, const std::string& acc, const std::string& x) {
  return op == "+=" ? acc + " += " + x : acc + " = " + op + "(" + acc + ", " + x + ")";
}

// A block reduction (every thread of the block calls it; all get the result): the
// warp's butterfly, then the warps' partial results in warp order.
std::string block_reduction(const std::string& name, const std::string& ty, const std::string& op) {
  return "TJ_DEV " + ty + " " + name + "(" + ty + " v, " + ty + "* red) {\n" +
         "  for (tj_u32 o = TJ_WARP / 2u; o > 0u; o >>= 1) " + combine(op, "v", "tj_shfl_xor(v, o, TJ_WARP)") + ";\n" +
         "  if (threadIdx.x % TJ_WARP == 0u) red[threadIdx.x / TJ_WARP] = v;\n  __syncthreads();\n  " + ty +
         " m = red[0];\n  for (tj_u32 i = 1u; i < blockDim.x / TJ_WARP; ++i) " + combine(op, "m", "red[i]") + ";\n" +
         "  __syncthreads();\n  return m;\n}\n";
}

// The column sum of a tmatmul (of type `ty`, added with `op`): a shuffle reduction
// within the warp, then through shared memory when a column spans several warps.
std::string column_sum(const std::string& ty, const std::string& op) {
  return "template <tj_u32 TPC> TJ_DEV " + ty + " tj_colsum(" + ty + " v, " + ty + "* red) {\n" +
         "  const tj_u32 w = TPC < TJ_WARP ? TPC : TJ_WARP;\n" +
         "  for (tj_u32 o = w / 2u; o > 0u; o >>= 1) " + combine(op, "v", "tj_shfl_down(v, o, w)") + ";\n" +
         "  if (TPC > TJ_WARP) {\n    if (threadIdx.x % TJ_WARP == 0u) red[threadIdx.x / TJ_WARP] = v;\n" +
         "    __syncthreads();\n    if (threadIdx.x % TPC == 0u)\n      for (tj_u32 i = 1u; i < TPC / TJ_WARP; ++i) " +
         combine(op, "v", "red[threadIdx.x / TJ_WARP + i]") + ";\n    __syncthreads();\n  }\n  return v;\n}\n";
}

std::string reductions() {
  return "// Block reductions (every thread of the block calls them; all get the result).\n"
         "// `red` holds blockDim.x / TJ_WARP values; partial results combine in warp order.\n" +
         block_reduction("tj_block_max", "float", "tj_fmax") + block_reduction("tj_block_sum", "float", "tj_add") +
         block_reduction("tj_block_isum", "tj_i32", "+=") +
         "// The sum over the TPC threads of a column (threads [c * TPC, (c + 1) * TPC) of the\n"
         "// block), valid in the column's first thread. Every thread of the block calls it.\n" +
         column_sum("tj_i32", "+=") + column_sum("float", "tj_add");
}

// What the dp4a and f32 tmatmul kernels read a 64-weight chunk with.
constexpr const char* kChunkHelpers = R"(// Four activation bytes at p (any alignment) as one int8x4 word.
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

}  // namespace

// The prelude of every translation unit (generate_internal.h).
std::string prelude(const SimtOptions& o) {
  const bool cuda = o.dialect == Dialect::Cuda;
  std::string s = "// ternjit SIMT kernels: " + std::string(dialect_name(o.dialect)) + ", warp " +
                  std::to_string(o.warp_size) + (o.int_dot ? ", int dot" : ", scalar dot") + "\n";
  if (!cuda) s += "#pragma clang fp contract(off)\n";
  return s + types(o) + primitives(o.dialect) + dot4(o) + kMath + reductions() + kChunkHelpers;
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

}  // namespace ternjit::targets::simt::detail
