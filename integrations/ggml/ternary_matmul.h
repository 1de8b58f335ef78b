// SPDX-License-Identifier: Apache-2.0
// ternary_matmul.h - the part of libggml-ternjit that is ternjit: llama.cpp's ternary MUL_MAT
// nodes (weights TQ2_0, TQ1_0 or Q2_0, activations and result f32) run on ternjit kernels
// through the C ABI's ternary matmul dispatch, each weight packed once into ternjit's layout
// (a bound weight, ternjit.h "ternjit_tmatmul_bind") and kept, keyed by where its bytes are,
// until something writes those bytes or frees their buffer (docs/ggml.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ggml.h"

namespace ternjit::ggml {

/// What the packed weights hold now (ggml_backend_ternjit_memory, the backend's log).
struct PackedMemory {
  std::size_t weights = 0;       // weights packed
  std::size_t packed_bytes = 0;  // resident now in ternjit's layout (ternjit_tmatmul_bound_bytes)
  std::size_t source_bytes = 0;  // of the GGUF blocks they were packed from
};

/// Whether `op` is a MUL_MAT ternjit computes, by its types and shapes alone (the weight's
/// buffer is the caller's check): a contiguous 2-D weight of a ternary type whose K is a
/// whole number of blocks, contiguous f32 activations and result.
bool takes_mul_mat(const ggml_tensor* op);

/// A ternary weight by where its bytes are (what a packed weight is keyed by).
struct WeightRef {
  const char* data = nullptr;
  ggml_type type = GGML_TYPE_COUNT;
  std::int64_t k = 0, n = 0;  // ggml's ne0 (along a row: K) and ne1 (rows: N)
  std::string name;
  bool mapped = false;  // the bytes are a mapping of their file (see compute)
};

/// The weight `t` refers to, when it is one ternjit takes (ternary type, 2-D, contiguous,
/// K whole blocks); else false.
bool ternary_weight(const ggml_tensor* t, bool mapped, WeightRef* out);

/// The process's ternary matmuls: one ternjit engine and the packed weights (made at first
/// use; thread-safe).
class TernaryMatmuls {
 public:
  /// The instance, or null with `*why` set when ternjit's engine cannot be made here.
  static TernaryMatmuls* get(std::string* why);

  enum class Outcome {
    Done,      // y is computed
    Declined,  // the weight's values are not ternary (a Q2_0 block holding +2): ggml-cpu computes it
    Failed     // *error says why
  };
  /// Computes `op` (takes_mul_mat) with `threads` threads. A weight ternjit declines is
  /// remembered as declined until its bytes change (it is not tried again per call).
  /// `mapped`: the weight's bytes are a mapping of its file (not memory of their own), so
  /// once packed, their whole pages are handed back to the kernel (madvise MADV_PAGEOUT:
  /// clean file pages are dropped and read again from the file if anything reads them), and
  /// the process holds the weight once, packed, instead of twice.
  Outcome compute(const ggml_tensor* op, int threads, bool mapped, std::string* error);
  /// Packs every weight of `weights` not packed yet, `threads` at a time (OpenMP), so that a
  /// model's first graph does not pack its weights one after another. A weight that cannot
  /// be packed is left for compute, which reports it.
  void pack_all(const std::vector<WeightRef>& weights, int threads);
  /// Drops every packed weight whose source bytes overlap [begin, end): they were written or freed.
  void forget(const void* begin, const void* end);
  [[nodiscard]] PackedMemory memory() const;
  /// Weights packed since the process started (a cheap test for "did this graph pack any").
  [[nodiscard]] std::uint64_t packs() const;

  struct Impl;

 private:
  explicit TernaryMatmuls(Impl* impl) : impl_(impl) {}
  Impl* impl_;  // never freed: bound weights may be in use until the process ends
};

}  // namespace ternjit::ggml
