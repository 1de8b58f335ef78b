// SPDX-License-Identifier: Apache-2.0
// simt_emu.h - what CUDA and HIP supply to generated kernels, for running them on the CPU (the SIMT emulator).
//
// The emulator compiles the exact CUDA C++ / HIP C++ text of targets/simt/generate.h
// with the host C++ compiler: a wrapper translation unit includes this header, then the
// generated file, then one entry point per kernel (`tjemu_entry_<name>(void** params)`,
// which calls the kernel with its parameters read from params[i] as cuLaunchKernel
// would). The resulting shared object is dlopen'ed by tests/simt/simt_runtime.cpp, which
// runs every thread of a block as a fiber on one OS thread (blocks one after another)
// and hands this header its primitives through tjemu_bind():
//   - threadIdx / blockIdx / blockDim / gridDim: the running fiber's;
//   - __syncthreads(): a barrier of every thread of the block;
//   - warp shuffles (__shfl_down_sync / __shfl_xor_sync, HIP's __shfl_down / __shfl_xor):
//     a warp-level exchange (every lane of the warp publishes its value, a warp barrier,
//     each reads its source lane, a second barrier), with CUDA's width semantics;
//   - __dp4a and __builtin_amdgcn_sdot4: bit-exact (wrapping; sdot4's clamp saturates);
//   - __fadd_rn & co: plain f32 operations (the wrapper is compiled with
//     -ffp-contract=off, so nothing is fused);
//   - __shared__: a function-local static, one per kernel: blocks run one at a time,
//     so a block's threads share it and no two blocks are live at once.
// A barrier that cannot complete (a thread exited or waits elsewhere) is reported by
// the runtime as a deadlock of the kernel: a defect of the generator.
#pragma once

#include <cmath>
#include <cstring>
#include <utility>

#define __global__
#define __device__
#define __launch_bounds__(n)
#define __restrict__ __restrict
#define __shared__ static
#define __forceinline__ inline

#include "simt_api.h"

static const tjemu_api* tjemu_rt = nullptr;
extern "C" void tjemu_bind(const tjemu_api* api) { tjemu_rt = api; }

#define threadIdx (*tjemu_rt->thread_idx())
#define blockIdx (*tjemu_rt->block_idx())
#define blockDim (*tjemu_rt->block_dim())
#define gridDim (*tjemu_rt->grid_dim())
#define warpSize (tjemu_rt->warp_size())

inline void __syncthreads() { tjemu_rt->syncthreads(); }

template <class T>
T tjemu_shuffle(T v, unsigned src) {
  static_assert(sizeof(T) <= 8, "shuffles move 32- and 64-bit values");
  unsigned long long bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  bits = tjemu_rt->exchange(bits, src);
  T r;
  std::memcpy(&r, &bits, sizeof(T));
  return r;
}
inline void tjemu_check_width(int width) {
  const unsigned w = static_cast<unsigned>(width);
  if (width <= 0 || (w & (w - 1)) != 0 || w > tjemu_rt->warp_size()) tjemu_rt->fail("shuffle width not a power of two <= warp size");
}
inline void tjemu_check_mask(unsigned mask) {
  if (mask != 0xffffffffu) tjemu_rt->fail("a shuffle mask other than the full warp");
}
// Source lane of a down shuffle: lane + d within the lane's width segment, else itself.
inline unsigned tjemu_down_src(unsigned d, int width) {
  tjemu_check_width(width);
  const unsigned lane = tjemu_rt->lane(), w = static_cast<unsigned>(width);
  return (lane % w) + d < w ? lane + d : lane;
}
// Source lane of a xor shuffle: lane ^ m when it stays within the segment, else itself.
inline unsigned tjemu_xor_src(unsigned m, int width) {
  tjemu_check_width(width);
  const unsigned lane = tjemu_rt->lane(), w = static_cast<unsigned>(width), src = lane ^ m;
  return src / w == lane / w && src < tjemu_rt->warp_size() ? src : lane;
}

// CUDA
template <class T>
T __shfl_down_sync(unsigned mask, T v, unsigned d, int width = 32) {
  tjemu_check_mask(mask);
  return tjemu_shuffle(v, tjemu_down_src(d, width));
}
template <class T>
T __shfl_xor_sync(unsigned mask, T v, int m, int width = 32) {
  tjemu_check_mask(mask);
  return tjemu_shuffle(v, tjemu_xor_src(static_cast<unsigned>(m), width));
}
// HIP
template <class T>
T __shfl_down(T v, unsigned d, int width = 64) {
  return tjemu_shuffle(v, tjemu_down_src(d, width));
}
template <class T>
T __shfl_xor(T v, int m, int width = 64) {
  return tjemu_shuffle(v, tjemu_xor_src(static_cast<unsigned>(m), width));
}

// dp4a: four signed byte products added to c, modulo 2^32.
inline int __dp4a(int a, int b, int c) {
  unsigned r = static_cast<unsigned>(c);
  for (int i = 0; i < 32; i += 8)
    r += static_cast<unsigned>(static_cast<int>(static_cast<signed char>(a >> i)) *
                               static_cast<int>(static_cast<signed char>(b >> i)));
  return static_cast<int>(r);
}
// v_dot4_i32_i8: the same; with clamp the sum saturates to int32.
inline int __builtin_amdgcn_sdot4(int a, int b, int c, bool clamp) {
  if (!clamp) return __dp4a(a, b, c);
  long long r = c;
  for (int i = 0; i < 32; i += 8)
    r += static_cast<long long>(static_cast<signed char>(a >> i)) * static_cast<signed char>(b >> i);
  return r > 2147483647LL ? 2147483647 : r < -2147483648LL ? static_cast<int>(-2147483647 - 1) : static_cast<int>(r);
}

inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __uint_as_float(unsigned v) {
  float f;
  std::memcpy(&f, &v, 4);
  return f;
}
inline unsigned __float_as_uint(float f) {
  unsigned v;
  std::memcpy(&v, &f, 4);
  return v;
}

// mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 (the generated CUDA source's
// tj_mma_m16n8k32, whose PTX body it skips when TJEMU_MMA is defined): D = C + A B for
// the whole warp, A 16 x 32 s8, B 32 x 8 s8, C/D 16 x 8 s32, int32 sums wrapping
// modulo 2^32 (no .satfinite). The fragment layouts, from the PTX ISA, section 9.7.14.5
// "Matrix Fragments for mma.m16n8k32" (.s8 / .u8), with groupID = %laneid >> 2 and
// threadID_in_group = %laneid % 4:
//   A (Figure 88, "fragment layout for matrix A with .u8 / .s8 type"): four .b32
//     registers holding a0..a15 low to high (register j = a[4j .. 4j + 3], byte i % 4);
//     row = groupID for ai where 0 <= i < 4 || 8 <= i < 12, groupID + 8 otherwise;
//     col = threadID_in_group * 4 + (i & 0x3) for i < 8, + 16 for i >= 8.
//   B (the .s8 / .u8 table after it): two .b32 registers holding b0..b7;
//     row = threadID_in_group * 4 + (i & 0x3) for bi where i < 4, + 16 for i >= 4;
//     col = groupID.
//   C / D (the accumulator table, .s32): c0..c3 in four registers;
//     row = groupID for ci where i < 2, groupID + 8 for i >= 2;
//     col = threadID_in_group * 2 + (i & 0x1).
// The warp-collective step is a warp exchange: every lane publishes its registers
// (three 64-bit exchanges per source lane, each a warp barrier), so every lane
// assembles the whole A and B, then computes its own four D elements. All 32 lanes
// must call it (mma.sync.aligned): a missing lane is a deadlock, warp 64 a failure.
#define TJEMU_MMA 1
inline void tjemu_mma_a_pos(unsigned lane, unsigned i, unsigned& row, unsigned& col) {
  const unsigned g = lane >> 2, t = lane % 4;
  row = (i < 4 || (i >= 8 && i < 12)) ? g : g + 8;
  col = t * 4 + (i & 0x3) + (i >= 8 ? 16 : 0);
}
inline void tjemu_mma_b_pos(unsigned lane, unsigned i, unsigned& row, unsigned& col) {
  const unsigned g = lane >> 2, t = lane % 4;
  row = t * 4 + (i & 0x3) + (i >= 4 ? 16 : 0);
  col = g;
}
inline void tjemu_mma_d_pos(unsigned lane, unsigned i, unsigned& row, unsigned& col) {
  const unsigned g = lane >> 2, t = lane % 4;
  row = i < 2 ? g : g + 8;
  col = t * 2 + (i & 0x1);
}
inline void tj_mma_m16n8k32(int* d, unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0, unsigned b1) {
  if (tjemu_rt->warp_size() != 32) tjemu_rt->fail("mma.m16n8k32 in a warp of other than 32 lanes");
  signed char A[16][32], B[32][8];
  for (unsigned src = 0; src < 32; ++src) {
    const unsigned long long x = tjemu_rt->exchange(a0 | static_cast<unsigned long long>(a1) << 32, src);
    const unsigned long long y = tjemu_rt->exchange(a2 | static_cast<unsigned long long>(a3) << 32, src);
    const unsigned long long z = tjemu_rt->exchange(b0 | static_cast<unsigned long long>(b1) << 32, src);
    const unsigned ra[4] = {static_cast<unsigned>(x), static_cast<unsigned>(x >> 32), static_cast<unsigned>(y),
                            static_cast<unsigned>(y >> 32)};
    const unsigned rb[2] = {static_cast<unsigned>(z), static_cast<unsigned>(z >> 32)};
    unsigned row = 0, col = 0;
    for (unsigned i = 0; i < 16; ++i) {
      tjemu_mma_a_pos(src, i, row, col);
      A[row][col] = static_cast<signed char>(ra[i / 4] >> (8 * (i % 4)));
    }
    for (unsigned i = 0; i < 8; ++i) {
      tjemu_mma_b_pos(src, i, row, col);
      B[row][col] = static_cast<signed char>(rb[i / 4] >> (8 * (i % 4)));
    }
  }
  const unsigned lane = tjemu_rt->lane();
  for (unsigned i = 0; i < 4; ++i) {
    unsigned row = 0, col = 0;
    tjemu_mma_d_pos(lane, i, row, col);
    unsigned s = static_cast<unsigned>(d[i]);
    for (unsigned k = 0; k < 32; ++k) s += static_cast<unsigned>(static_cast<int>(A[row][k]) * static_cast<int>(B[k][col]));
    d[i] = static_cast<int>(s);
  }
}

// Calls kernel `k` with its parameters read from `p` (p[i] points at parameter i).
template <class... A, std::size_t... I>
void tjemu_invoke_at(void (*k)(A...), void** p, std::index_sequence<I...>) {
  k(*static_cast<std::remove_cv_t<std::remove_reference_t<A>>*>(p[I])...);
}
template <class... A>
void tjemu_invoke(void (*k)(A...), void** p) {
  tjemu_invoke_at(k, p, std::index_sequence_for<A...>{});
}
