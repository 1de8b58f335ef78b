// SPDX-License-Identifier: Apache-2.0
// matmul.h - the dense f32 `matmul` (rank 2 or batched rank 3, f32 x f32 -> f32) as an Xbyak-generated register-blocked GEMM,
// and the int8 weight-gradient matmul (i8 x i8, exact int32 sums, f32 outer-scale epilogue).
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

/// The int8 weight-gradient matmul (matmul_s8.cpp), with its f32 outer-scale epilogue:
///   C[k, n] = (f32(S[k, n]) [* u[k]]) * t[n],  S[k, n] = sum_m A[m, k] * B[n, m]
/// with A i8 [M, K] (or At [K, M], `a_km`) and B i8 [N, M] row-major (the IR's `matmul(transpose(a),
/// transpose(b)) : i32`, `cast` to f32, `mul` by u [K, 1] when `row_scale`, `mul` by
/// t [1, N]). S is the integer sum wrapped to int32 as the IR's i32 matmul defines it
/// (the kernels' partial sums wrap mod 2^32 too, so S is exact whenever it fits: the
/// autodiff pass bounds M for that); each multiply is one f32 rounding in this order,
/// so C is bit-exact with the interpreter. NaN/Inf scales propagate.
struct Int8MatMulProblem {
  std::int64_t M = 0, K = 0, N = 0;
  bool row_scale = false;  ///< multiply by u[k] before t[n]
  bool a_km = false;       ///< A is given as At i8 [K, M] row-major (`matmul(a, transpose(b))`)
};

/// A generated int8 x int8 -> f32-scaled matmul. Avx512Vnni and Amx: vpdpbusd on A + 128
/// (u8) with a per-column correction 128 * sum_m B[n, m] subtracted (exact mod 2^32);
/// Avx2, AvxVnni, Avx512: vpmaddwd on sign-extended int16 pairs. Thread-safe after creation.
class Int8MatMulKernel {
 public:
  /// Errors: InvalidInput (a dim < 1), Unavailable (isa not runnable here
  /// and !allow_foreign_isa).
  static Result<std::unique_ptr<Int8MatMulKernel>> create(const Int8MatMulProblem& p, Isa isa,
                                                           bool allow_foreign_isa = false);
  ~Int8MatMulKernel();
  Int8MatMulKernel(const Int8MatMulKernel&) = delete;
  Int8MatMulKernel& operator=(const Int8MatMulKernel&) = delete;
  [[nodiscard]] const Int8MatMulProblem& problem() const;
  /// C = the formula above; u is read only when row_scale. Buffers must not overlap c.
  /// Splits the rows k over `parallel`.
  void run(const std::int8_t* a, const std::int8_t* b, const float* u, const float* t, float* c,
           const Parallel& parallel) const;
  /// One line: "matmul s8 M=32 K=2560 N=6912 dot=vpdpbusd u=no isa=avx512_vnni".
  [[nodiscard]] std::string describe() const;

  struct Impl;

 private:
  explicit Int8MatMulKernel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ternjit::targets::x86
