// SPDX-License-Identifier: Apache-2.0
// disasm.cpp - disassemble_x86 over LLVM's C API (llvm-c/Disassembler.h).
#include "targets/common/disasm.h"

#include <llvm-c/Disassembler.h>
#include <llvm-c/Target.h>

#include <cctype>
#include <cstdio>
#include <mutex>
#include <vector>

namespace ternjit::targets {

namespace {

// Longest x86 instruction (Intel SDM vol. 2, 2.3.11): the byte column is padded to it
// only up to kBytesColumn bytes so common lines stay aligned without being very wide.
constexpr std::size_t kMaxInstBytes = 15;
constexpr std::size_t kBytesColumn = 10;

// The X86 target is registered with LLVM once per process; LLVM's registry is global
// state of LLVM itself, not ours, and initializing it twice is harmless but racy.
void init_x86_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    LLVMInitializeX86TargetInfo();
    LLVMInitializeX86TargetMC();
    LLVMInitializeX86Disassembler();
  });
}

// Owns one LLVM disassembler context.
class DisasmContext {
 public:
  explicit DisasmContext(LLVMDisasmContextRef ref) : ref_(ref) {}
  DisasmContext(const DisasmContext&) = delete;
  DisasmContext& operator=(const DisasmContext&) = delete;
  ~DisasmContext() {
    if (ref_) LLVMDisasmDispose(ref_);
  }
  [[nodiscard]] LLVMDisasmContextRef get() const { return ref_; }

 private:
  LLVMDisasmContextRef ref_;
};

// LLVM prints "\tvpdpbusd\tzmm0, zmm1, zmm2": drop the leading tab, one space elsewhere.
std::string tidy(const char* text) {
  std::string out;
  for (const char* p = text; *p; ++p) {
    char c = *p == '\t' ? ' ' : *p;
    if (c == ' ' && (out.empty() || out.back() == ' ')) continue;
    out += c;
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

void append_line(std::string& out, std::uint64_t addr, std::span<const std::uint8_t> bytes,
                 const std::string& text) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "  %6llx: ", static_cast<unsigned long long>(addr));
  out += buf;
  std::string hex;
  for (std::uint8_t b : bytes) {
    std::snprintf(buf, sizeof buf, "%02x ", b);
    hex += buf;
  }
  if (hex.size() < kBytesColumn * 3) hex.append(kBytesColumn * 3 - hex.size(), ' ');
  out += hex;
  out += ' ';
  out += text;
  out += '\n';
}

}  // namespace

Result<std::string> disassemble_x86(std::span<const std::uint8_t> code, std::uint64_t address) {
  init_x86_once();
  // CPU "" with every ISA extension we generate code for: the X86 decoder decodes by
  // encoding, but naming the features keeps AMX/VNNI decoding independent of defaults.
  DisasmContext dc(LLVMCreateDisasmCPUFeatures(
      "x86_64-unknown-linux-gnu", "",
      "+avx2,+fma,+f16c,+avxvnni,+avx512f,+avx512bw,+avx512dq,+avx512vl,+avx512vnni,+avx512bf16,"
      "+amx-tile,+amx-int8,+amx-bf16",
      nullptr, 0, nullptr, nullptr));
  if (!dc.get())
    return make_error(ErrorCode::Unavailable, "LLVM has no x86-64 disassembler (was it built with the X86 target?)");
  // Variant 1 of the X86 asm printer is Intel syntax; hex immediates read like Xbyak source.
  if (!LLVMSetDisasmOptions(dc.get(), LLVMDisassembler_Option_AsmPrinterVariant | LLVMDisassembler_Option_PrintImmHex))
    return make_error(ErrorCode::Unavailable, "LLVM's x86 disassembler rejected the Intel-syntax option");

  std::string out;
  // LLVMDisasmInstruction takes a non-const pointer (it never writes): copy once.
  std::vector<std::uint8_t> bytes(code.begin(), code.end());
  std::size_t pos = 0;
  char text[256];
  while (pos < bytes.size()) {
    const std::uint64_t pc = address + pos;
    text[0] = '\0';
    std::size_t n = LLVMDisasmInstruction(dc.get(), bytes.data() + pos, bytes.size() - pos, pc, text, sizeof text);
    if (n == 0 || n > bytes.size() - pos) {
      char b[24];
      std::snprintf(b, sizeof b, ".byte 0x%02x", bytes[pos]);
      append_line(out, pc, std::span(bytes).subspan(pos, 1), b);
      ++pos;
      continue;
    }
    if (n > kMaxInstBytes) n = kMaxInstBytes;  // cannot happen on x86; keeps the loop finite
    append_line(out, pc, std::span(bytes).subspan(pos, n), tidy(text));
    pos += n;
  }
  return out;
}

}  // namespace ternjit::targets
