// SPDX-License-Identifier: Apache-2.0
// tmatmul.h - the fused ternary matmul as x86 machine code: problem, knobs, packing, run.
//
// y[m, n] = epilogue( sum_k x[m, k] * w[k, n] ) for m < M (all leading dims of x
// flattened), n < N, with w in {-1, 0, +1} (with a grouped w_scale, each group's sum is
// scaled before the groups are added: tmatmul_grouped.cpp). Semantics are exactly the IR's `tmatmul`
// (ir/interpret.cpp): the i8 path accumulates exactly in int32 (wrapping), converts
// to f32 once, then multiplies by x_scale[m], by w_scale (per tensor or per column),
// adds bias[n], adds residual[m, n] - each an f32 operation in that order, no FMA
// contraction - so the result is bit-exact; then relu if asked. The float path
// (x f32/bf16/f16) accumulates in f32 (the reference sums in double: a stated
// tolerance), epilogue in f32, result rounded once to the x kind (round to nearest even).
// Activations other than None/Relu are not applied here: the x86 plan runs them as a
// separate elementwise step (eltwise.h) on the result.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ir/stored_tensor.h"
#include "targets/x86/isa.h"
#include "targets/x86/parallel.h"
#include "ternjit/result.h"
#include "ternjit/types.h"

namespace ternjit::targets::x86 {

/// One tmatmul to generate code for. Static shapes.
struct TMatMulProblem {
  std::int64_t M = 1, K = 1, N = 1;  ///< M: rows of x (product of its leading dims); any >= 1
  ElemKind x_kind = ElemKind::I8;    ///< I8, F32, BF16 or F16
  ElemKind out_kind = ElemKind::F32; ///< F32 for I8 x; the x kind for float x
  bool x_scale = false;              ///< f32[M] (one per row)
  bool w_scale = false;
  bool w_scale_per_channel = false;  ///< with w_scale: f32[N], else f32[1]
  /// > 0 (with w_scale, not per channel): w_scale is f32[ceil(K / group), N], row g scaling
  /// the sum over k in [g * group, (g + 1) * group) (tmatmul_grouped.cpp; i8 or f32 x).
  std::int64_t w_scale_group = 0;
  bool bias = false;                 ///< out_kind[N]
  bool residual = false;             ///< out_kind[M, N]
  bool relu = false;                 ///< apply relu last
  /// run() may get args.rows < M (the i8 kernels: every row tail is generated; float
  /// kernels refuse it in validate()). M is then the most rows a call has.
  bool runtime_rows = false;
};

/// The algorithm of a kernel.
enum class TMatMulVariant : std::uint8_t {
  Dot,      ///< unpack 2-bit codes, u8 x s8 dot products (vpdpbusd / vpmaddubsw), row-sum correction
  MaskDot,  ///< M small, codes kept in place: AND masks + dot product per field, scaled 1, 1/4, 1/16, 1/64
  Amx,      ///< unpack to int8 tiles in cache, tdpbssd (Isa::Amx only)
  Float,    ///< float x: decode to f32 and FMA (x f32/bf16/f16)
  Base3,    ///< 1.6-bit weights (5 trits a byte), decoded in registers by vpermi2b (AVX-512 VNNI + VBMI, zmm)
};

/// Tuning knobs of one kernel (issue 7's search space). validate() rejects what a
/// generator cannot emit; default_config() is the heuristic used without tuning.
struct TMatMulConfig {
  Isa isa = Isa::Avx2;
  TMatMulVariant variant = TMatMulVariant::Dot;
  int vector_bits = 256;    ///< 256 (ymm) or 512 (zmm; Avx512* only)
  int n_block = 0;          ///< columns per packed panel / micro-kernel (multiple of the lanes)
  int m_block = 0;          ///< rows per micro-kernel
  int k_unroll = 1;         ///< inner loop unroll
  int prefetch_bytes = 0;   ///< weight prefetch distance (0: none)
  int threads = 1;          ///< threads the work is split across (<= Parallel::threads used)
  int split_k = 1;          ///< K split across threads (partial sums reduced), 1: none

  /// "isa=avx512_vnni,variant=dot,vec=512,nb=64,mb=4,ku=2,pf=1024,t=2,sk=1" (stable, parseable).
  [[nodiscard]] std::string str() const;
  static Result<TMatMulConfig> parse(std::string_view text);
  friend bool operator==(const TMatMulConfig&, const TMatMulConfig&) = default;
};

/// Success, or InvalidArgument naming the first knob that `isa`/`problem` cannot take.
Result<void> validate(const TMatMulProblem& problem, const TMatMulConfig& config);
/// The heuristic configuration for `problem` on `isa` with `threads` threads. With
/// `sub_2bit` false only the 2-bit layouts (variants dot, mask_dot, amx) are chosen.
TMatMulConfig default_config(const TMatMulProblem& problem, Isa isa, int threads, bool sub_2bit = true);

/// Ternary weights repacked for one kernel configuration (what pack() returns and
/// run() reads). Immutable, shareable between kernels whose pack_signature() match.
struct PackedWeights {
  std::string signature;              ///< the layout it is in (== TMatMulKernel::pack_signature())
  std::int64_t K = 0, N = 0;
  std::vector<std::uint8_t> storage;  ///< over-allocated; the data starts 64-byte aligned at offset
  std::size_t offset = 0;
  std::size_t size = 0;               ///< bytes of packed data (with parts: theirs, summed)
  /// A grouped kernel's packs, one per K group (each its group kernel's layout); the
  /// storage above then holds no weights.
  std::vector<PackedWeights> parts;
  [[nodiscard]] const std::uint8_t* data() const { return storage.data() + offset; }
};

/// A copy of `w` whose data starts 64-byte aligned in its own storage (a plain copy of
/// the vector keeps the original's offset, which is only right at the original address);
/// a grouped pack's parts are copied likewise. For benchmarks rotating weight copies.
PackedWeights aligned_copy(const PackedWeights& w);

/// The K*N ternary weights pack() reads, row-major: int8 values (pack checks that each
/// is -1, 0 or 1) or 2-bit tern2 codes (ir::StoredTensor's t2 form), read where they are,
/// so packing a bound weight never widens it to one byte (or a double) per value.
class TernaryWeights {
 public:
  /// Int8 values; implicit so a span or vector of values can be passed directly.
  TernaryWeights(std::span<const std::int8_t> values) : values_(values.data()), size_(values.size()) {}  // NOLINT
  /// Int8 values (the vector must outlive this view).
  TernaryWeights(const std::vector<std::int8_t>& values) : TernaryWeights(std::span<const std::int8_t>(values)) {}  // NOLINT
  /// `count` values in tern2 codes. Precondition: codes.size() == ir::tern2_size(count).
  static TernaryWeights tern2(std::span<const std::uint8_t> codes, std::size_t count) {
    TernaryWeights w(std::span<const std::int8_t>{});
    w.codes_ = codes.data();
    w.size_ = count;
    return w;
  }
  /// The number of values.
  [[nodiscard]] std::size_t size() const { return size_; }
  /// Value i (from int8 values as given; from tern2 codes -1, 0, 1, or 2 for code 0b11).
  [[nodiscard]] int operator[](std::size_t i) const { return codes_ ? ir::tern2_at(codes_, i) : values_[i]; }
  /// The tern2 codes (null for int8 values) and the int8 values (null for codes).
  [[nodiscard]] const std::uint8_t* tern2_codes() const { return codes_; }
  [[nodiscard]] const std::int8_t* int8_values() const { return values_; }

 private:
  const std::int8_t* values_ = nullptr;
  const std::uint8_t* codes_ = nullptr;
  std::size_t size_ = 0;
};

/// Pointers of one call. x: M*K of x_kind; y: M*N of out_kind; optional operands null
/// when the problem has none.
struct TMatMulArgs {
  const void* x = nullptr;
  const PackedWeights* w = nullptr;
  const float* x_scale = nullptr;
  const float* w_scale = nullptr;
  const void* bias = nullptr;
  const void* residual = nullptr;
  void* y = nullptr;
  std::int64_t rows = 0;  ///< > 0 (problem.runtime_rows only): the rows of this call, <= M
};

/// Generated code for one (problem, config). Thread-safe after create().
class TMatMulKernel {
 public:
  /// Generates the code (Xbyak; microseconds). Errors: InvalidArgument from validate();
  /// Unavailable when the host cannot run config.isa (code is still generated when
  /// `allow_foreign_isa` is set, for disassembly).
  static Result<std::unique_ptr<TMatMulKernel>> create(const TMatMulProblem& problem, const TMatMulConfig& config,
                                                       bool allow_foreign_isa = false);
  virtual ~TMatMulKernel() = default;

  [[nodiscard]] virtual const TMatMulProblem& problem() const = 0;
  [[nodiscard]] virtual const TMatMulConfig& config() const = 0;
  /// Identifies the packed layout this kernel reads (kernels with equal signatures share packs).
  [[nodiscard]] virtual std::string pack_signature() const = 0;
  /// Repacks w (K*N values row-major, each in {-1, 0, 1}; InvalidArgument naming the
  /// first other value). Called once per weight, at load time, never per call.
  [[nodiscard]] virtual Result<PackedWeights> pack(const TernaryWeights& w) const = 0;
  /// Runs the kernel; splits the work over `parallel` (N first, then M, then split-K).
  /// Precondition: args match the problem and args.w->signature == pack_signature().
  virtual void run(const TMatMulArgs& args, const Parallel& parallel) const = 0;
  /// The generated code blobs with a label each ("microkernel mb=4 nb=64", ...), for --emit asm.
  struct CodeBlob {
    std::string label;
    std::span<const std::uint8_t> code;
  };
  [[nodiscard]] virtual std::vector<CodeBlob> code() const = 0;
};

}  // namespace ternjit::targets::x86
