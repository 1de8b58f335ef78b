// SPDX-License-Identifier: Apache-2.0
// matmul.h - the dense f32 `matmul` (rank 2 or batched rank 3, f32 x f32 -> f32) as an Xbyak-generated register-blocked GEMM.
//
// C[M, N] = A[M, K] @ B[K, N], with A given row-major or as its transpose At[K, M]
// (`trans_a`: the plan reads `transpose %x` from x itself) and B row-major or as
// Bt[N, K] (`trans_b`). Numerics: each result is an f32 FMA chain over ascending k
// (the reference sums in double and rounds once; tests use the bound
// (gamma_K + u) * sum_k |a_ik||b_kj|, gamma_K = K u / (1 - K u), u = 2^-24). No term is
// skipped, so NaN and Inf propagate as in the reference (0 * Inf = NaN included).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "targets/x86/isa.h"
#include "targets/x86/parallel.h"
#include "ternjit/result.h"

namespace ternjit::targets::x86 {

/// One dense f32 matmul with static shapes. M, K, N, batch >= 1.
struct MatMulProblem {
  std::int64_t M = 0, K = 0, N = 0;
  bool trans_a = false;  ///< A is given as At[K, M] row-major
  bool trans_b = false;  ///< B is given as Bt[N, K] row-major
  /// Batched (rank 3): C[i] = A[i] @ B[i] for i < batch, matrices back to back; an
  /// operand that is not batched (rank 2, or batch dim 1: NumPy broadcasting) is one
  /// matrix used for every i.
  std::int64_t batch = 1;
  bool a_batched = false, b_batched = false;
};

/// B in the kernel's panel layout ("f32.panels.nr<NR>"): the N columns cut into panels
/// of NR (the last one zero-padded); a panel is K rows of NR floats, panels back to back
/// (then the next matrix's, when B is batched).
struct MatMulPackedB {
  std::vector<float> data;
};

/// A generated dense matmul. Thread-safe after creation (run keeps no state).
class MatMulKernel {
 public:
  /// Generates the micro-kernels for `isa` (Avx2 and AvxVnni: ymm 6x16; Avx512 and
  /// up: zmm 6x64 with masked column tails). Errors: InvalidInput (a dim < 1),
  /// Unavailable (isa not runnable here and !allow_foreign_isa), Internal (Xbyak).
  static Result<std::unique_ptr<MatMulKernel>> create(const MatMulProblem& p, Isa isa, bool allow_foreign_isa = false);
  ~MatMulKernel();
  MatMulKernel(const MatMulKernel&) = delete;
  MatMulKernel& operator=(const MatMulKernel&) = delete;

  [[nodiscard]] const MatMulProblem& problem() const;
  /// What pack_b's layout depends on besides B itself ("f32.panels.nr64"): kernels with
  /// equal signatures share a packed B.
  [[nodiscard]] std::string pack_signature() const;
  /// Packs B (row-major [K, N], or [N, K] when trans_b; each matrix when b_batched)
  /// once, for a load-time B.
  [[nodiscard]] MatMulPackedB pack_b(const float* b) const;
  /// C = A @ B. `b` is B as given (read when `packed` is null), `packed` a pack_b of
  /// it. Buffers must not overlap c. Splits the column panels over `parallel`; batched
  /// problems run their matrices one after another. `rows` > 0 (not batched, not
  /// trans_a): only the first `rows` (<= M) rows of A and C (run-time rows, plan.h).
  void run(const float* a, const float* b, const MatMulPackedB* packed, float* c, const Parallel& parallel,
           std::int64_t rows = 0) const;

  /// Label + bytes of the generated code, for --emit asm.
  struct CodeBlob {
    std::string label;
    std::span<const std::uint8_t> code;
  };
  [[nodiscard]] std::vector<CodeBlob> code() const;
  /// One line: "matmul f32 M=8 K=2560 N=6912 mr=6 nr=64 kc=16 b=in place isa=avx512";
  /// `b_packed_at_load`: B is given to run() as a pack_b.
  [[nodiscard]] std::string describe(bool b_packed_at_load = false) const;

  struct Impl;

 private:
  explicit MatMulKernel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ternjit::targets::x86
