// SPDX-License-Identifier: Apache-2.0
// kernels.cpp - the CUDA C++ / HIP C++ quantize, rmsnorm, softmax, reduction, elementwise and copy kernels.
#include <cstdio>
#include <string>
#include <vector>

#include "targets/simt/generate_internal.h"

namespace ternjit::targets::simt::detail {

using ir::Op;

std::string apply(Op op, const std::string& a, const std::string& b) {
  return kernel_source::elementwise(kernel_source::Language::Simt, op, a, b);
}

namespace {

std::string params(const std::vector<std::string>& p) {
  std::string s;
  for (std::size_t i = 0; i < p.size(); ++i) s += (i ? ", " : "") + p[i];
  return s;
}

}  // namespace

std::string head(const std::string& name, std::uint32_t block, const std::vector<std::string>& p) {
  return "extern \"C\" __global__ void __launch_bounds__(" + std::to_string(block) + ") " + name + "(" + params(p) +
         ") {\n";
}

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

}  // namespace ternjit::targets::simt::detail
