// SPDX-License-Identifier: Apache-2.0
// simt_api.h - the primitives the SIMT emulator's runtime hands to emulated kernels (see simt_emu.h).
#pragma once

struct tjemu_uint3 {
  unsigned x, y, z;
};

/// The runtime's primitives (tests/simt/simt_runtime.cpp fills them in).
struct tjemu_api {
  const tjemu_uint3* (*thread_idx)();
  const tjemu_uint3* (*block_idx)();
  const tjemu_uint3* (*block_dim)();
  const tjemu_uint3* (*grid_dim)();
  void (*syncthreads)();
  /// Publishes `v` for the warp and returns lane `src`'s value (every lane of the warp calls it).
  unsigned long long (*exchange)(unsigned long long v, unsigned src);
  unsigned (*lane)();             ///< the lane within the warp
  unsigned (*warp_size)();        ///< 32 or 64
  void (*fail)(const char* why);  ///< a misuse (partial shuffle mask, bad width): the launch fails
};
