// SPDX-License-Identifier: Apache-2.0
// tmatmul_internal.h - the per-variant kernel factories behind TMatMulKernel::create.
//
// tmatmul.cpp owns the config text form, validate(), default_config() and create(),
// which checks the common rules and dispatches on config.variant to these.
#pragma once

#include <memory>

#include "targets/x86/tmatmul.h"

namespace ternjit::targets::x86::detail {

/// The start of every variant's pack(): checks that `w` holds K*N values in {-1, 0, 1}
/// (InvalidArgument naming the count, or the first bad value with its index, k and n)
/// and returns PackedWeights of `size` zeroed bytes starting 64-byte aligned, followed by
/// `slack` more zeroed bytes a kernel may read past the end.
Result<PackedWeights> start_pack(const TernaryWeights& w, const TMatMulProblem& problem, std::string signature,
                                 std::size_t size, std::size_t slack = 0);

/// The kernel codes (value + 1: 0, 1 or 2) of `rows` rows from row k0 and `cols` columns
/// from column c0 of the K x N weights `w` (already checked by start_pack), into
/// out[r * cols + c]; rows past K read as code 0, columns past N as code 1 (what the
/// packers pad with). tern2 codes are copied a byte (four codes) at a time where the
/// row is byte-aligned, never widened to one value per byte first.
void weight_codes(const TernaryWeights& w, std::int64_t K, std::int64_t N, std::int64_t k0, int rows, std::int64_t c0,
                  std::int64_t cols, std::uint8_t* out);


// tmatmul_int8.cpp: variants Dot and MaskDot (i8 x) on Avx2, AvxVnni, Avx512, Avx512Vnni, Amx (as Avx512Vnni),
// and Base3 (1.6-bit weights) on Avx512Vnni and Amx with AVX512-VBMI.
Result<void> validate_int8(const TMatMulProblem& problem, const TMatMulConfig& config);
Result<std::unique_ptr<TMatMulKernel>> create_int8(const TMatMulProblem& problem, const TMatMulConfig& config);

// tmatmul_amx.cpp: variant Amx (i8 x, Isa::Amx).
Result<void> validate_amx(const TMatMulProblem& problem, const TMatMulConfig& config);
Result<std::unique_ptr<TMatMulKernel>> create_amx(const TMatMulProblem& problem, const TMatMulConfig& config);
/// The Amx kernel with its tile instructions (ldtilecfg, tileloadd, tilestored, tilezero,
/// tdpbssd) replaced by exact AVX-512 VNNI sequences on a memory tile file: the same
/// blocking, packing, unpacking and epilogue, runnable on CPUs without AMX (tests only).
Result<std::unique_ptr<TMatMulKernel>> create_amx_emulated(const TMatMulProblem& problem, const TMatMulConfig& config);

// tmatmul_float.cpp: variant Float (f32, bf16, f16 x) on every Isa.
Result<void> validate_float(const TMatMulProblem& problem, const TMatMulConfig& config);
Result<std::unique_ptr<TMatMulKernel>> create_float(const TMatMulProblem& problem, const TMatMulConfig& config);

// tmatmul_grouped.cpp: a grouped w_scale (problem.w_scale_group > 0) on any variant and Isa,
// one kernel run of config's variant per K group.
/// The problem of one full group's kernel (K = min(K, group), per-channel w_scale, residual).
TMatMulProblem grouped_part_problem(const TMatMulProblem& problem);
Result<void> validate_grouped(const TMatMulProblem& problem, const TMatMulConfig& config);
Result<std::unique_ptr<TMatMulKernel>> create_grouped(const TMatMulProblem& problem, const TMatMulConfig& config,
                                                      bool allow_foreign_isa);

}  // namespace ternjit::targets::x86::detail
