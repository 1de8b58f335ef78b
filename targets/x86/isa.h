// SPDX-License-Identifier: Apache-2.0
// isa.h - the x86 ISA levels ternjit generates code for, their detection and capping.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ternjit::targets::x86 {

/// Code paths, ascending. A path may use everything of the levels below it that the
/// CPU also has, except AvxVnni, which is the VEX (ymm-only) dot product of CPUs
/// without AVX-512 and is never combined with Avx512*.
///   Avx2       AVX2 + FMA + F16C (vpmaddubsw/vpmaddwd dot products)
///   AvxVnni    AVX2 + AVX-VNNI (VEX vpdpbusd on ymm)
///   Avx512     AVX-512 F/BW/DQ/VL (no VNNI)
///   Avx512Vnni Avx512 + AVX512-VNNI (EVEX vpdpbusd, zmm or ymm)
///   Amx        Avx512Vnni + AMX-TILE/AMX-INT8, tile permission granted by the kernel
enum class Isa : std::uint8_t { Avx2, AvxVnni, Avx512, Avx512Vnni, Amx };

inline constexpr Isa kAllIsas[] = {Isa::Avx2, Isa::AvxVnni, Isa::Avx512, Isa::Avx512Vnni, Isa::Amx};

/// "avx2", "avx_vnni", "avx512", "avx512_vnni", "amx".
std::string_view isa_name(Isa isa);
/// Parses isa_name's spellings (case-insensitive; also "avx512vnni", "avxvnni", "amx_int8").
std::optional<Isa> parse_isa(std::string_view name);

/// What the running CPU (and OS) support, from CPUID and XGETBV (Xbyak::util::Cpu).
/// amx is true only when the CPU has AMX-TILE + AMX-INT8 and the Linux kernel granted
/// the XTILEDATA permission (arch_prctl(ARCH_REQ_XCOMP_PERM), requested once per
/// process by detect_isas; a refusal leaves amx false and is reported in amx_note).
struct IsaSupport {
  bool avx2 = false;         ///< AVX2 + FMA + F16C
  bool avx_vnni = false;
  bool avx512 = false;       ///< F + BW + DQ + VL
  bool avx512_vnni = false;
  bool avx512_bf16 = false;  ///< vcvtneps2bf16 (used for bf16 stores when present)
  bool avx512_vbmi = false;  ///< vpermb / vpermi2b byte permutes (tmatmul variant base3 needs it)
  bool amx = false;
  std::string amx_note;      ///< why amx is false although the CPU has it ("" otherwise)

  /// True when code for `isa` can run here.
  [[nodiscard]] bool supports(Isa isa) const;
};

/// The host's support (computed once per process, thread-safe).
const IsaSupport& host_isas();

/// The best path `support` runs that is <= `cap` in the order of Isa; nullopt when
/// not even Avx2 runs (the x86 target is then unavailable).
std::optional<Isa> best_isa(const IsaSupport& support, Isa cap = Isa::Amx);

}  // namespace ternjit::targets::x86
