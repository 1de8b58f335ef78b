// SPDX-License-Identifier: Apache-2.0
// isa.cpp - x86 ISA detection (Xbyak's CPUID/XGETBV reader), the AMX permission request, capping.
#include "targets/x86/isa.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <xbyak/xbyak_util.h>

#include "ir/strings.h"

namespace ternjit::targets::x86 {

namespace {

// Linux's arch_prctl request for an extended state component (asm/prctl.h) and the
// AMX tile data component number (XFEATURE_XTILEDATA).
constexpr int kArchReqXcompPerm = 0x1023;
constexpr int kXfeatureXtiledata = 18;

IsaSupport detect() {
  using Xbyak::util::Cpu;
  const Cpu cpu;
  IsaSupport s;
  s.avx2 = cpu.has(Cpu::tAVX2) && cpu.has(Cpu::tFMA) && cpu.has(Cpu::tF16C);
  s.avx_vnni = s.avx2 && cpu.has(Cpu::tAVX_VNNI);
  s.avx512 = s.avx2 && cpu.has(Cpu::tAVX512F) && cpu.has(Cpu::tAVX512BW) && cpu.has(Cpu::tAVX512DQ) &&
             cpu.has(Cpu::tAVX512VL);
  s.avx512_vnni = s.avx512 && cpu.has(Cpu::tAVX512_VNNI);
  s.avx512_bf16 = s.avx512 && cpu.has(Cpu::tAVX512_BF16);
  s.avx512_vbmi = s.avx512 && cpu.has(Cpu::tAVX512_VBMI);
  if (s.avx512_vnni && cpu.has(Cpu::tAMX_TILE) && cpu.has(Cpu::tAMX_INT8)) {
    // Linux hands out the 8 KB tile state only to processes that ask (once; the grant is
    // process-wide and permanent). A refusal (old kernel, seccomp) leaves AMX off.
    if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0) {
      s.amx = true;
    } else {
      s.amx_note = std::string("the kernel refused the AMX tile permission: ") + std::strerror(errno);
    }
  }
  return s;
}

}  // namespace

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::Avx2: return "avx2";
    case Isa::AvxVnni: return "avx_vnni";
    case Isa::Avx512: return "avx512";
    case Isa::Avx512Vnni: return "avx512_vnni";
    case Isa::Amx: return "amx";
  }
  return "?";
}

std::optional<Isa> parse_isa(std::string_view name) {
  const std::string n = ir::lower(name);
  for (Isa isa : kAllIsas)
    if (n == isa_name(isa)) return isa;
  if (n == "avxvnni" || n == "avx-vnni") return Isa::AvxVnni;
  if (n == "avx512vnni" || n == "avx512-vnni") return Isa::Avx512Vnni;
  if (n == "amx_int8" || n == "amx-int8") return Isa::Amx;
  return std::nullopt;
}

bool IsaSupport::supports(Isa isa) const {
  switch (isa) {
    case Isa::Avx2: return avx2;
    case Isa::AvxVnni: return avx_vnni;
    case Isa::Avx512: return avx512;
    case Isa::Avx512Vnni: return avx512_vnni;
    case Isa::Amx: return amx;
  }
  return false;
}

const IsaSupport& host_isas() {
  static const IsaSupport support = detect();  // computed once, then immutable
  return support;
}

std::optional<Isa> best_isa(const IsaSupport& support, Isa cap) {
  std::optional<Isa> best;
  for (Isa isa : kAllIsas)
    if (isa <= cap && support.supports(isa)) best = isa;
  // AvxVnni is the ymm path of CPUs without AVX-512: never prefer it over Avx512*.
  return best;
}

}  // namespace ternjit::targets::x86
