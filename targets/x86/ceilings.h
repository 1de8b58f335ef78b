// SPDX-License-Identifier: Apache-2.0
// ceilings.h - the host's roofline ceilings, measured in-process: streaming-read bandwidth and int8-dot throughput.
//
// `ternjit bench` and bench/x86_tmatmul_bench.cpp compare kernels against these in the
// same run (one copy of the probe loops). Nothing here is used by generated code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "targets/ceilings.h"
#include "targets/parallel.h"
#include "targets/x86/isa.h"
#include "ternjit/result.h"

namespace ternjit::targets::x86 {

/// The sum of the n bytes at `p` taken as 64-bit lanes (the tail byte by byte): a load
/// stream the compiler cannot drop. AVX-512 loads when the host runs them, else AVX2.
/// Precondition: `p` is 64-byte aligned and the host runs AVX2.
std::uint64_t stream_sum(const std::uint8_t* p, std::size_t n);

/// Streaming read of a `bytes`-byte buffer (rounded up to whole 4 KiB pages per thread),
/// split in `parallel.threads` page-aligned chunks read concurrently with stream_sum, on
/// transparent huge pages where the kernel grants them (madvise).
/// Choose bytes well above the last-level cache to measure DRAM. Errors: Unavailable when
/// the host lacks AVX2; InvalidArgument when bytes is 0.
Result<CeilingResult> measure_read_bandwidth(const Parallel& parallel, std::size_t bytes,
                                             const CeilingOptions& options);

/// The instruction path an int8-dot ceiling runs: the first of avx512_vnni (vpdpbusd
/// zmm), avx_vnni (vpdpbusd ymm) and avx2 (vpmaddubsw + vpmaddwd + vpaddd, ymm) that the
/// host runs and that is at most `cap` in Isa order, where Amx counts as avx512_vnni (AMX
/// tiles are not probed: a cap of amx rates vpdpbusd). Under a cap of Avx512 (no VNNI) the
/// ymm avx2 loop stands in for the zmm vpmaddubsw one: the ceiling is then low by up to
/// 2x. Nullopt when not even AVX2 runs.
std::optional<Isa> dot_ceiling_isa(Isa cap = Isa::Amx);

/// A register-only loop of independent u8 x s8 -> s32 dot products on `isa` (from
/// dot_ceiling_isa), one chain set per thread of `parallel`: the int8 compute ceiling.
/// `work` counts 2 operations per multiply-add. Errors: Unavailable when the host does
/// not run `isa`.
Result<CeilingResult> measure_int8_dot(const Parallel& parallel, Isa isa, const CeilingOptions& options);

}  // namespace ternjit::targets::x86
