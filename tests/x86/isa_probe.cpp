// SPDX-License-Identifier: Apache-2.0
// isa_probe.cpp - `x86_isa_probe ISA`: exit 0 when this CPU runs that x86 code path,
// 77 (ctest's SKIPPED) with the reason otherwise, 2 for an unknown name.
#include <cstdio>

#include "targets/x86/isa.h"

int main(int argc, char** argv) {
  using namespace ternjit::targets::x86;
  if (argc != 2) {
    std::fprintf(stderr, "usage: x86_isa_probe avx2|avx_vnni|avx512|avx512_vnni|amx\n");
    return 2;
  }
  const auto isa = parse_isa(argv[1]);
  if (!isa) {
    std::fprintf(stderr, "x86_isa_probe: unknown ISA '%s'\n", argv[1]);
    return 2;
  }
  const IsaSupport& s = host_isas();
  if (s.supports(*isa)) {
    std::printf("this CPU runs x86 code path %s\n", argv[1]);
    return 0;
  }
  std::printf("SKIPPED: this CPU cannot run x86 code path %s%s%s\n", argv[1], s.amx_note.empty() ? "" : ": ",
              s.amx_note.c_str());
  return 77;
}
