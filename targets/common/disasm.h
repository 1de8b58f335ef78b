// SPDX-License-Identifier: Apache-2.0
// disasm.h - x86-64 machine code to Intel-syntax text, through LLVM's C disassembler.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "ternjit/result.h"

namespace ternjit::targets {

/// Disassembles `code` as x86-64 in Intel syntax, one line per instruction:
/// "  <hex address>: <bytes>  <mnemonic operands>\n", where the address of the first
/// byte is `address`. Every instruction LLVM 19 knows is decoded whatever the host CPU
/// runs (AVX-512, AVX-VNNI and AMX included). Bytes that do not decode are printed one
/// per line as ".byte 0xNN" and skipped; this never fails on the content of `code`.
/// Errors: Unavailable when LLVM cannot create an x86-64 disassembler.
/// Thread-safe (the LLVM X86 target is initialized once per process).
Result<std::string> disassemble_x86(std::span<const std::uint8_t> code, std::uint64_t address = 0);

}  // namespace ternjit::targets
