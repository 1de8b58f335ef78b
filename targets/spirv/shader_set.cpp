// SPDX-License-Identifier: Apache-2.0
// shader_set.cpp - the SPIR-V target's plan: GLSL compute shaders for tmatmul, ewise, quantize, rmsnorm, softmax, reductions.
#include "targets/spirv/shader_set.h"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>

#include "targets/common/view2d.h"

namespace ternjit::targets::spirv {

using ir::InstId;
using ir::Op;
using ir::ValueId;

using kernel_source::extents;
using kernel_source::numel;
using kernel_source::quote;
using kernel_source::u;

namespace {

// Shaders index buffers with 32-bit unsigned integers: every buffer of a program stays
// below 2^32 bytes (Vulkan's storage buffer range is a 32-bit quantity anyway).
constexpr std::int64_t kMaxElems = (std::int64_t{1} << 32) - 64;

// ------------------------------------------------------------------ GLSL pieces

// The common head: version, workgroup width from specialization constant 0, the linear
// invocation id of 1-D shaders (a 2-D grid of workgroups past 65535 of them).
std::string head(bool int_dot) {
  std::string s = "#version 450\n";
  if (int_dot) s += "#extension GL_EXT_spirv_intrinsics : require\n";
  s += "layout(local_size_x_id = 0, local_size_y = 1, local_size_z = 1) in;\n";
  s += "uint linear_id() { return gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * "
       "gl_WorkGroupSize.x; }\n";
  return s;
}

// Binding `i` as an array `b<i>` of the element kind's word type: float for f32, int
// for i32, uint words (four int8 or sixteen 2-bit weights each) otherwise.
std::string binding(std::size_t i, ElemKind kind, bool readonly) {
  const char* ty = kind == ElemKind::F32 ? "float" : kind == ElemKind::I32 ? "int" : "uint";
  return "layout(std430, binding = " + std::to_string(i) + ") " + (readonly ? "readonly " : "") + "buffer B" +
         std::to_string(i) + " { " + ty + " b" + std::to_string(i) + "[]; };\n";
}

// The f32 functions the elementwise ops need, matching ir/interpret_ops.cpp's
// elementwise() (NaN rules of max/min/relu; erf by Abramowitz-Stegun 7.1.26, |error| <
// 1.5e-7; tanh through exp of -2|x|, so it never overflows).
const char* kMath = R"(float qnan() { return uintBitsToFloat(0x7fc00000u); }
float fmax_ref(float x, float y) {
  if (isnan(x) || isnan(y)) return qnan();
  if (x == y) return (floatBitsToUint(x) >> 31) != 0u ? y : x;
  return x > y ? x : y;
}
float fmin_ref(float x, float y) {
  if (isnan(x) || isnan(y)) return qnan();
  if (x == y) return (floatBitsToUint(x) >> 31) != 0u ? x : y;
  return x < y ? x : y;
}
float relu_ref(float x) { return isnan(x) ? x : (x > 0.0 ? x : 0.0); }
float exp_ref(float x) {
  // The x86 target's exp (targets/x86/vmath.cpp): Cody-Waite reduction x = n ln2 + r,
  // |r| <= ln2/2, the Cephes degree-7 polynomial, and 2^n applied as two exact factors.
  // GLSL's exp (exp2 of x log2 e on most drivers) loses |x| ulps: 62 on lavapipe. Every
  // step is `precise` plain multiplies and adds: lavapipe's fma() and its reassociation of
  // unmarked math both cost the reduction's low bits (1e-6 relative at |x| = 73).
  if (isnan(x)) return x;
  float c = clamp(x, -104.0, 89.0);
  precise float n = roundEven(c * 1.44269504088896341);
  precise float r = c - n * 0.693359375;  // exact: n * 0.693359375 has at most 17 bits
  r = r - n * -2.12194440e-4;
  precise float p = 1.9875691500e-4;
  p = p * r + 1.3981999507e-3;
  p = p * r + 8.3334519073e-3;
  p = p * r + 4.1665795894e-2;
  p = p * r + 1.6666665459e-1;
  p = p * r + 5.0000001201e-1;
  p = p * r * r + r;
  p = p + 1.0;
  int ni = int(n), n1 = ni >> 1, n2 = ni - n1;
  precise float y = p * uintBitsToFloat(uint(n1 + 127) << 23);
  y = y * uintBitsToFloat(uint(n2 + 127) << 23);
  return y;
}
float sigmoid_ref(float x) { return 1.0 / (1.0 + exp_ref(-x)); }
float tanh_ref(float x) {
  float a = abs(x);
  if (a < 0.0004) return x;
  float e = exp_ref(-2.0 * a);
  float t = (1.0 - e) / (1.0 + e);
  return x < 0.0 ? -t : t;
}
float erf_ref(float x) {
  float a = abs(x);
  float t = 1.0 / (1.0 + 0.3275911 * a);
  float p = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
  float y = 1.0 - p * exp_ref(-a * a);
  return x < 0.0 ? -y : y;
}
float gelu_ref(float x) { return 0.5 * x * (1.0 + erf_ref(x * 0.70710678118654752)); }
float silu_ref(float x) { return x * sigmoid_ref(x); }
)";

// The f32 expression of elementwise op `op` on `a` (and `b`).
std::string apply(Op op, const std::string& a, const std::string& b) {
  return kernel_source::elementwise(kernel_source::Language::Glsl, op, a, b);
}

// ------------------------------------------------------------------ tmatmul

// Epilogue operand `binding` of a tmatmul read at row r, column n (strides of its view).
struct EpilogueRead {
  Op op;
  std::size_t binding;
  std::int64_t row_stride, col_stride;
};

// The tmatmul shader: invocation (n, row tile) computes y[r0 .. r0 + TM - 1, n].
// Ungrouped: one running sum over K (i8 x: int32, wrapping like the reference; f32 x:
// f32). Grouped (s.group > 0, the scales f32[G, N] at binding `group_scale`): per group
// i, the sum p_i over k in [i g, min(K, (i + 1) g)) in int32 (i8 x, exact up to the
// reference's own i32 wrap) or f32, then y += float(p_i) * s[i, n] in f32, ascending i.
// Then the epilogue's f32 ops in the reference's order.
std::string tmatmul_glsl(const TMatMulShape& s, const std::vector<EpilogueRead>& epilogue, ir::Activation act,
                         bool int_dot, std::size_t group_scale) {
  const bool int8 = s.x == ElemKind::I8;
  const bool grouped = s.group > 0;
  const std::int64_t kw = weight_words_per_column(s.k), kfull = s.k / 16, rem = s.k % 16;
  const std::size_t out = 2 + epilogue.size() + (grouped ? 1 : 0);
  std::string g = head(int8 && int_dot);
  g += "layout(constant_id = 1) const uint TM = 4u;\n";
  g += "const uint M = " + u(s.m) + ", K = " + u(s.k) + ", N = " + u(s.n) + ", KW = " + u(kw) +
       ", KFULL = " + u(kfull) + ";\n";
  if (grouped) g += "const uint GROUP = " + u(s.group) + ", G = " + u(ir::grouped_scale_rows(s.k, s.group)) + ";\n";
  g += binding(0, s.x, true) + binding(1, ElemKind::T2, true);
  for (std::size_t b = 2; b < out; ++b) g += binding(b, ElemKind::F32, true);
  g += binding(out, ElemKind::F32, false);
  g += kMath;
  // A group whose bounds are not multiples of 16 covers part of a weight word: the
  // planes' bits of k outside [lo, hi) are masked off (their products become 0).
  const bool masked = grouped && s.group % 16 != 0;
  if (masked)
    g += "uint wmask(uint kw, uint lo, uint hi) {\n"
         "  uint a = max(lo, kw * 16u) - kw * 16u, b = min(hi, kw * 16u + 16u) - kw * 16u;\n"
         "  uint m = (b >= 16u ? 0xffffu : (1u << b) - 1u) & ~((1u << a) - 1u);\n  return m | (m << 16);\n}\n";
  if (int8) {
    if (int_dot) {
      // OpSDot on packed int8x4 (SPV_KHR_integer_dot_product, PackedVectorFormat4x8Bit = 0).
      g += "spirv_instruction(extensions = [\"SPV_KHR_integer_dot_product\"], capabilities = [6019, 6018], "
           "id = 4450)\nint sdot_packed(uint a, uint b, spirv_literal int format);\n";
      g += "int dot4(uint a, uint b) { return sdot_packed(a, b, 0); }\n";
    } else {
      g += "int dot4(uint a, uint b) {\n"
           "  ivec4 x = ivec4(bitfieldExtract(int(a), 0, 8), bitfieldExtract(int(a), 8, 8), "
           "bitfieldExtract(int(a), 16, 8), bitfieldExtract(int(a), 24, 8));\n"
           "  ivec4 y = ivec4(bitfieldExtract(int(b), 0, 8), bitfieldExtract(int(b), 8, 8), "
           "bitfieldExtract(int(b), 16, 8), bitfieldExtract(int(b), 24, 8));\n"
           "  return x.x * y.x + x.y * y.y + x.z * y.z + x.w * y.w;\n}\n";
    }
    // Four weights (group j of a word) as packed int8x4: +1 -> 0x01, -1 -> 0xff.
    g += "uint expand(uint w, uint j) {\n"
         "  uint p = (w >> (4u * j)) & 15u, m = (w >> (16u + 4u * j)) & 15u;\n"
         "  return ((p * 0x204081u) & 0x01010101u) | (((m * 0x204081u) & 0x01010101u) * 255u);\n}\n";
    // Four activation bytes at byte offset o (rows start anywhere when K % 4 != 0).
    if (s.k % 4 == 0) {
      g += "uint ldx4(uint o) { return b0[o >> 2]; }\n";
    } else {
      g += "uint ldx4(uint o) {\n  uint w = b0[o >> 2], sh = (o & 3u) * 8u;\n"
           "  return sh == 0u ? w : (w >> sh) | (b0[(o >> 2) + 1u] << (32u - sh));\n}\n";
      g += "uint ldx1(uint o) { return (b0[o >> 2] >> ((o & 3u) * 8u)) & 255u; }\n";
    }
  }
  g += "void main() {\n  uint n = gl_GlobalInvocationID.x, r0 = gl_GlobalInvocationID.y * TM;\n";
  g += "  if (n >= N) return;\n";
  const std::string acc_ty = int8 ? "int" : "float", zero = int8 ? "0" : "0.0";
  // The sum over the weight word `kwv` (a full word, or the last one of K when `tail`)
  // added to acc[], with the word's planes `wexpr`.
  std::function<std::string(const std::string&, bool, const std::string&)> word;
  if (int8) {
    word = [&](const std::string& kwv, bool tail, const std::string& wexpr) {
      std::string b = "    uint wv = " + wexpr + ";\n";
      const std::int64_t groups = tail ? (rem + 3) / 4 : 4;
      for (std::int64_t j = 0; j < groups; ++j)
        b += "    uint w" + std::to_string(j) + " = expand(wv, " + u(j) + ");\n";
      b += "    for (uint t = 0u; t < TM; ++t) {\n      uint r = r0 + t;\n      if (r >= M) break;\n";
      b += "      uint o = r * K + " + kwv + " * 16u;\n      acc[t] += 0";
      for (std::int64_t j = 0; j < groups; ++j) {
        const std::int64_t have = tail ? std::min<std::int64_t>(4, rem - 4 * j) : 4;
        std::string a;
        if (have == 4) {
          a = "ldx4(o + " + u(4 * j) + ")";
        } else {  // a partial group at the end of the row: byte by byte, never past it
          a = "(";
          for (std::int64_t i = 0; i < have; ++i)
            a += (i ? " | " : "") + std::string("(ldx1(o + ") + u(4 * j + i) + ") << " + u(8 * i) + ")";
          a += ")";
        }
        b += " + dot4(" + a + ", w" + std::to_string(j) + ")";
      }
      return b + ";\n    }\n";
    };
  } else {
    // f32 x: k = 16 kwv + i for i in [i0, i1) (the whole word, its tail, or a group's part).
    word = [&](const std::string& kwv, bool tail, const std::string& wexpr) {
      const std::string i0 = masked ? "(max(lo, " + kwv + " * 16u) - " + kwv + " * 16u)" : "0u";
      const std::string i1 = masked ? "(min(hi, " + kwv + " * 16u + 16u) - " + kwv + " * 16u)" : u(tail ? rem : 16);
      return "    uint wv = " + wexpr + ";\n" + "    for (uint t = 0u; t < TM; ++t) {\n" +
             "      uint r = r0 + t;\n      if (r >= M) break;\n      uint o = r * K + " + kwv + " * 16u;\n" +
             "      for (uint i = " + i0 + "; i < " + i1 + "; ++i) {\n" +
             "        float w = float(int((wv >> i) & 1u) - int((wv >> (16u + i)) & 1u));\n" +
             "        acc[t] += b0[o + i] * w;\n      }\n    }\n";
    };
  }
  const std::string zero_acc = "  for (uint t = 0u; t < TM; ++t) acc[t] = " + zero + ";\n";
  if (!grouped) {
    g += "  " + acc_ty + " acc[TM];\n" + zero_acc;
    g += "  for (uint kw = 0u; kw < KFULL; ++kw) {\n" + word("kw", false, "b1[kw * N + n]") + "  }\n";
    if (rem) g += "  {\n" + word("KFULL", true, "b1[KFULL * N + n]") + "  }\n";
  } else {
    // Masked words (the f32 path masks by its k range instead).
    const std::string wm = masked && int8 ? " & wmask(kw, lo, hi)" : "";
    const std::string wt = masked && int8 ? " & wmask(KFULL, lo, hi)" : "";
    g += "  float gacc[TM];\n  for (uint t = 0u; t < TM; ++t) gacc[t] = 0.0;\n";
    g += "  for (uint gi = 0u; gi < G; ++gi) {\n    uint lo = gi * GROUP, hi = min(K, lo + GROUP);\n";
    g += "    " + acc_ty + " acc[TM];\n  " + zero_acc;
    g += "    for (uint kw = lo / 16u; kw < min((hi + 15u) / 16u, KFULL); ++kw) {\n" +
         word("kw", false, "b1[kw * N + n]" + wm) + "    }\n";
    if (rem) g += "    if (hi > KFULL * 16u) {\n" + word("KFULL", true, "b1[KFULL * N + n]" + wt) + "    }\n";
    g += "    for (uint t = 0u; t < TM; ++t) {\n      if (r0 + t >= M) break;\n";
    g += "      gacc[t] += " + std::string(int8 ? "float(acc[t])" : "acc[t]") + " * b" + std::to_string(group_scale) +
         "[gi * N + n];\n    }\n  }\n";
  }
  g += "  for (uint t = 0u; t < TM; ++t) {\n    uint r = r0 + t;\n    if (r >= M) break;\n";
  // precise: no contraction into fma, so each epilogue op rounds as the reference's does.
  g += std::string("    precise float y = ") + (grouped ? "gacc[t]" : int8 ? "float(acc[t])" : "acc[t]") + ";\n";
  for (const EpilogueRead& ep : epilogue) {
    const std::string v = "b" + std::to_string(ep.binding) + "[r * " + u(ep.row_stride) + " + n * " +
                          u(ep.col_stride) + "]";
    g += "    y = " + apply(ep.op, "y", v) + ";\n";
  }
  if (auto a = ir::activation_op(act)) g += "    y = " + apply(*a, "y", "") + ";\n";
  g += "    b" + std::to_string(out) + "[r * N + n] = y;\n  }\n}\n";
  return g;
}

// ------------------------------------------------------------------ row-wise ops

// quantize (f32 -> i8 + f32 row scale) and quantize_int8 (f32 -> f32): one invocation
// per row, the absmax scale of ir/quant.cpp (NaN for a non-finite row), round half to even, clamp to +-127. The
// int8 rows are written a word at a time; a word shared with a neighbouring row is
// OR-ed atomically into the result the dispatch cleared first.
std::string quantize_glsl(std::int64_t rows, std::int64_t k, bool fake) {
  std::string g = head(false);
  g += "const uint ROWS = " + u(rows) + ", K = " + u(k) + ";\n";
  g += binding(0, ElemKind::F32, true);
  g += fake ? binding(1, ElemKind::F32, false) : binding(1, ElemKind::I8, false) + binding(2, ElemKind::F32, false);
  g += "int qv(float x, float s) {\n  if (s == 0.0) return 0;\n  precise float r = roundEven(x / s);\n"
       "  if (isnan(r)) return 0;\n  return int(clamp(r, -127.0, 127.0));\n}\n";
  g += "void main() {\n  uint r = linear_id();\n  if (r >= ROWS) return;\n  uint base = r * K;\n";
  // A row holding a NaN or an infinity gets the scale NaN (q = 0, every value NaN): the
  // rule of ir/README.md "quantize_int8" that every target follows.
  g += "  float amax = 0.0;\n  bool finite = true;\n";
  g += "  for (uint c = 0u; c < K; ++c) {\n    float x = b0[base + c];\n"
       "    if (isnan(x) || isinf(x)) finite = false;\n    float a = abs(x);\n    if (a > amax) amax = a;\n  }\n";
  g += "  precise float s = finite ? amax / 127.0 : uintBitsToFloat(0x7fc00000u);\n";
  if (fake) {
    g += "  for (uint c = 0u; c < K; ++c) { precise float q = float(qv(b0[base + c], s)) * s; b1[base + c] = q; }\n}\n";
    return g;
  }
  g += "  b2[r] = s;\n";
  g += "  uint first = base >> 2, last = (base + K - 1u) >> 2;\n";
  g += "  for (uint w = first; w <= last; ++w) {\n    uint v = 0u;\n    bool whole = true;\n";
  g += "    for (uint i = 0u; i < 4u; ++i) {\n      uint e = w * 4u + i;\n";
  g += "      if (e < base || e >= base + K) { whole = false; continue; }\n";
  g += "      v |= (uint(qv(b0[e], s)) & 255u) << (8u * i);\n    }\n";
  g += "    if (whole) b1[w] = v; else atomicOr(b1[w], v);\n  }\n}\n";
  return g;
}

// rmsnorm over the last axis, one invocation per row. A row of finite, non-zero max
// m = max|x| is scaled by the power of two s = 2^-exponent(m) (exact; as the x86 target
// does for overflow): y = x s / sqrt(sum((x s)^2) / D + eps s^2) * g, whose sum neither
// overflows (large rows) nor underflows (a row of 1e-30 once gave all zeros: x^2 flushed
// and eps / m / m overflowed). When eps s^2 overflows, the mean square is below 2^-96 eps
// and y = x / sqrt(eps) * g. A zero, infinite or NaN m takes the plain sum (the
// reference's zeros and NaNs).
std::string rmsnorm_glsl(std::int64_t rows, std::int64_t d, double eps) {
  std::string g = head(false);
  char epsbuf[64];
  std::snprintf(epsbuf, sizeof epsbuf, "%.9e", eps);
  g += "const uint ROWS = " + u(rows) + ", D = " + u(d) + ";\nconst float EPS = " + epsbuf + ";\n";
  g += binding(0, ElemKind::F32, true) + binding(1, ElemKind::F32, true) + binding(2, ElemKind::F32, false);
  g += "void main() {\n  uint r = linear_id();\n  if (r >= ROWS) return;\n  uint base = r * D;\n";
  g += "  float m = 0.0;\n  for (uint c = 0u; c < D; ++c) m = max(m, abs(b0[base + c]));\n";
  g += "  if (m == 0.0 || isinf(m) || isnan(m)) {\n    float ss = 0.0;\n"
       "    for (uint c = 0u; c < D; ++c) ss += b0[base + c] * b0[base + c];\n"
       "    float denom = sqrt(ss / float(D) + EPS);\n"
       "    for (uint c = 0u; c < D; ++c) b2[base + c] = b0[base + c] / denom * b1[c];\n    return;\n  }\n";
  // The biased exponent of s = 2^-e, e = exponent(m), kept in [1, 254] (s normal); a
  // subnormal m (exponent field 0) counts as 2^-126.
  g += "  int e = max(int((floatBitsToUint(m) >> 23) & 255u), 1) - 127;\n"
       "  float s = uintBitsToFloat(uint(clamp(127 - e, 1, 254)) << 23);\n"
       "  float es = EPS * s * s;\n"
       "  if (isinf(es)) {\n    float inv = 1.0 / sqrt(EPS);\n"
       "    for (uint c = 0u; c < D; ++c) b2[base + c] = b0[base + c] * inv * b1[c];\n    return;\n  }\n"
       "  float ss = 0.0;\n  for (uint c = 0u; c < D; ++c) { float v = b0[base + c] * s; ss += v * v; }\n"
       "  float denom = sqrt(ss / float(D) + es);\n";
  g += "  for (uint c = 0u; c < D; ++c) b2[base + c] = (b0[base + c] * s) / denom * b1[c];\n}\n";
  return g;
}

// softmax and the reductions along an axis: [outer, len, inner], one invocation per
// (outer, inner) pair.
std::string axis_glsl(Op op, std::int64_t outer, std::int64_t len, std::int64_t inner) {
  std::string g = head(false);
  g += "const uint OUTER = " + u(outer) + ", LEN = " + u(len) + ", INNER = " + u(inner) + ";\n";
  g += binding(0, ElemKind::F32, true) + binding(1, ElemKind::F32, false);
  g += kMath;
  g += "void main() {\n  uint id = linear_id();\n  if (id >= OUTER * INNER) return;\n";
  g += "  uint o = id / INNER, i = id % INNER, base = o * LEN * INNER + i;\n";
  switch (op) {
    case Op::Softmax:
      g += "  float m = uintBitsToFloat(0xff800000u);\n";
      g += "  for (uint k = 0u; k < LEN; ++k) { float x = b0[base + k * INNER]; m = (isnan(x) || isnan(m)) ? qnan() : "
           "max(m, x); }\n";
      g += "  float sum = 0.0;\n  for (uint k = 0u; k < LEN; ++k) sum += exp_ref(b0[base + k * INNER] - m);\n";
      g += "  for (uint k = 0u; k < LEN; ++k) b1[base + k * INNER] = exp_ref(b0[base + k * INNER] - m) / sum;\n}\n";
      return g;
    case Op::ReduceMax:
      g += "  float m = uintBitsToFloat(0xff800000u);\n";
      g += "  for (uint k = 0u; k < LEN; ++k) { float x = b0[base + k * INNER]; m = (isnan(x) || isnan(m)) ? qnan() : "
           "max(m, x); }\n  b1[id] = m;\n}\n";
      return g;
    case Op::ReduceSum:
    case Op::ReduceMean:
      g += "  float s = 0.0;\n  for (uint k = 0u; k < LEN; ++k) s += b0[base + k * INNER];\n";
      g += op == Op::ReduceMean ? "  b1[id] = s / float(LEN);\n}\n" : "  b1[id] = s;\n}\n";
      return g;
    default: break;
  }
  TERNJIT_UNREACHABLE("axis_glsl: " + quote(op));
}

// ewise and the standalone elementwise ops (one step): one invocation per element.
std::string ewise_glsl(const std::vector<ir::EwiseStep>& steps, const std::vector<std::pair<std::int64_t, std::int64_t>>& views,
                       std::int64_t items, std::int64_t cols) {
  std::string g = head(false);
  g += "const uint ITEMS = " + u(items) + ", COLS = " + u(cols) + ";\n";
  const std::size_t n = views.size();
  for (std::size_t i = 0; i < n; ++i) g += binding(i, ElemKind::F32, true);
  g += binding(n, ElemKind::F32, false);
  g += kMath;
  g += "void main() {\n  uint e = linear_id();\n  if (e >= ITEMS) return;\n  uint r = e / COLS, c = e % COLS;\n";
  for (std::size_t i = 0; i < n; ++i)
    g += "  precise float s" + std::to_string(i) + " = b" + std::to_string(i) + "[r * " + u(views[i].first) +
         " + c * " + u(views[i].second) + "];\n";
  for (std::size_t j = 0; j < steps.size(); ++j) {
    const ir::EwiseStep& st = steps[j];
    g += "  precise float s" + std::to_string(n + j) + " = " +
         apply(st.op, "s" + std::to_string(st.a), st.b >= 0 ? "s" + std::to_string(st.b) : "") + ";\n";
  }
  g += "  b" + std::to_string(n) + "[e] = s" + std::to_string(n + steps.size() - 1) + ";\n}\n";
  return g;
}

// ------------------------------------------------------------------ support

// What the shaders admit (kernel_source.h has the rules the SIMT generator shares).
kernel_source::OpLimits limits() {
  kernel_source::OpLimits l;
  l.generator = "the spirv target";
  l.planner_name = "spirv";
  l.max_elems = kMaxElems;
  l.max_elems_text = "2^32";
  l.max_bytes_text = "4 GiB";
  l.kernel_word = "shader";
  l.prefix_row_rule = false;  // the rule llvm shares (step_plan.h), its message as it is
  return l;
}

// The shader of planned step `ps`.
Shader make_shader(const ir::Function& f, const StepPlan& plan, const PlannedStep& ps, std::size_t index, bool int_dot) {
  const ir::InstData& inst = f.inst(ps.inst);
  Shader s;
  s.inst = ps.inst;
  s.name = "tj_" + std::string(ir::op_name(inst.op)) + "_" + std::to_string(index);
  s.bindings = ps.in;
  s.bindings.insert(s.bindings.end(), ps.out.begin(), ps.out.end());
  const auto out = extents(f.type_of(inst.results[0]));
  const std::int64_t items = numel(out);
  const std::int64_t cols = out.empty() ? 1 : out.back();
  auto view = [&](ValueId v) { return *targets::view2d(out, extents(f.type_of(v))); };
  switch (inst.op) {
    case Op::TMatMul: {
      const auto& a = std::get<ir::TMatMulAttrs>(inst.attrs);
      s.tmatmul = true;
      s.mm = kernel_source::tmatmul_shape(f, inst);
      const std::optional<std::size_t> group_scale = tmatmul_group_scale(inst);
      s.items = s.mm.n;
      s.weight_const = plan.slot(inst.operands[1]).index;
      std::vector<EpilogueRead> ep;
      for (const TMatMulEpilogueOperand& e : tmatmul_epilogue(inst)) {
        const auto [rs, cs] = view(inst.operands[e.operand]);
        ep.push_back({e.op, e.operand, rs, cs});
      }
      s.glsl = tmatmul_glsl(s.mm, ep, a.act, int_dot, group_scale.value_or(0));
      return s;
    }
    case Op::Quantize:
    case Op::QuantizeInt8: {
      const std::int64_t k = cols;
      s.items = items / k;
      s.glsl = quantize_glsl(s.items, k, inst.op == Op::QuantizeInt8);
      s.zero_first_result = inst.op == Op::Quantize;
      return s;
    }
    case Op::RmsNorm:
      s.items = items / cols;
      s.glsl = rmsnorm_glsl(s.items, cols, std::get<ir::EpsAttrs>(inst.attrs).eps);
      return s;
    case Op::Softmax:
    case Op::ReduceSum:
    case Op::ReduceMean:
    case Op::ReduceMax: {
      const kernel_source::AxisSplit a = kernel_source::axis_split(f, inst);
      s.items = a.outer * a.inner;
      s.glsl = axis_glsl(inst.op, a.outer, a.len, a.inner);
      return s;
    }
    default: break;
  }
  std::vector<std::pair<std::int64_t, std::int64_t>> views;
  for (ValueId v : inst.operands) views.push_back(view(v));
  s.items = items;
  s.glsl = ewise_glsl(kernel_source::ewise_steps(inst), views, items, cols);
  return s;
}

}  // namespace

Result<void> shader_set_supported(const ir::Function& f) { return kernel_source::function_supported(f, limits()); }

Result<ShaderSet> build_shader_set(const ir::Function& f, bool int_dot) {
  TERNJIT_TRY_VOID(shader_set_supported(f));
  ShaderSet p;
  p.plan = plan_steps(f);
  std::map<std::size_t, std::size_t> scratch;  // offset -> size
  for (const PlannedStep& ps : p.plan.steps) {
    CallStep st;
    if (ps.kind == PlannedStep::Kind::Copy) {
      st.kind = CallStep::Kind::Copy;
      st.from = ps.in[0];
      st.to = ps.out[0];
      st.bytes = ps.bytes;
      p.steps.push_back(st);
      continue;
    }
    const ir::InstData& inst = f.inst(ps.inst);
    for (std::size_t j = 0; j < ps.out.size(); ++j)
      if (ps.out[j].kind == SlotKind::Scratch)
        scratch[ps.out[j].index] = std::max(scratch[ps.out[j].index], static_bytes(f.type_of(inst.results[j])));
    st.shader = p.shaders.size();
    p.shaders.push_back(make_shader(f, p.plan, ps, p.shaders.size(), int_dot));
    p.steps.push_back(st);
  }
  for (const auto& [off, size] : scratch) {
    p.scratch_offsets.push_back(off);
    p.scratch_sizes.push_back(size);
  }
  return p;
}

Shader tmatmul_bench_shader(const TMatMulShape& shape, bool int_dot) {
  Shader s;
  s.name = "tj_tmatmul_bench";
  s.tmatmul = true;
  s.mm = shape;
  s.items = shape.n;
  s.bindings = {Slot{SlotKind::Arg, 0}, Slot{SlotKind::Const, 0}, Slot{SlotKind::Out, 0}};
  if (shape.group > 0) s.bindings.insert(s.bindings.begin() + 2, Slot{SlotKind::Arg, 1});  // the scales f32[G, N]
  s.glsl = tmatmul_glsl(shape, {}, ir::Activation::None, int_dot, 2);
  return s;
}

Result<std::vector<std::uint32_t>> weight_words(const LoadValue& value, std::int64_t k, std::int64_t n) {
  const std::int64_t kw = weight_words_per_column(k);
  std::vector<std::uint32_t> words(static_cast<std::size_t>(kw * n), 0);
  std::vector<std::int8_t> row(static_cast<std::size_t>(n));
  for (std::int64_t kk = 0; kk < k; ++kk) {
    value.read_int8(static_cast<std::size_t>(kk * n), row);
    for (std::int64_t j = 0; j < n; ++j) {
      const std::int8_t w = row[static_cast<std::size_t>(j)];
      if (w < -1 || w > 1)
        return make_error(ErrorCode::InvalidInput, "a ternary weight holds " + std::to_string(w) + " at [" +
                                                       std::to_string(kk) + ", " + std::to_string(j) + "]");
      if (w == 0) continue;
      std::uint32_t& word = words[static_cast<std::size_t>((kk / 16) * n + j)];
      word |= 1u << ((kk % 16) + (w < 0 ? 16 : 0));
    }
  }
  return words;
}

}  // namespace ternjit::targets::spirv
