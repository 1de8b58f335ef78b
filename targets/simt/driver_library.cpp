// SPDX-License-Identifier: Apache-2.0
// driver_library.cpp - dlopen helpers, compile errors and ELF header checks of the cuda and hip adapters.
#include "targets/simt/driver_library.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstring>

namespace ternjit::targets::simt {

void* open_first(std::initializer_list<const char*> names, std::string& found, std::string& tried) {
  for (const char* n : names) {
    if (void* lib = dlopen(n, RTLD_NOW | RTLD_LOCAL)) {
      found = n;
      return lib;
    }
    tried += (tried.empty() ? "" : ", ") + std::string(n);
  }
  return nullptr;
}

void* SymbolTable::lookup(const char* name) {
  void* p = dlsym(library_, name);
  if (!p) missing_ += std::string(missing_.empty() ? "" : ", ") + name;
  return p;
}

Result<void> check_device_option(std::string_view target, const std::string& value) {
  if (value.empty() ||
      (value != "auto" && (value.size() > 4 || value.find_first_not_of("0123456789") != std::string::npos)))
    return make_error(ErrorCode::InvalidArgument,
                      std::string(target) + ".device='" + value + "': expected auto or an index");
  return success();
}

Result<std::size_t> device_index(std::string_view target, const std::string& option) {
  if (option.empty() || option == "auto") return std::size_t{0};
  if (option.size() > 4 || option.find_first_not_of("0123456789") != std::string::npos)
    return make_error(ErrorCode::InvalidArgument,
                      std::string(target) + ".device='" + option + "': expected auto or a device index");
  return static_cast<std::size_t>(std::stoi(option));
}

DeviceDescription device_description(int index, const std::string& name, std::uint64_t memory_bytes, int warp_size,
                                     int max_threads_per_block, int max_block_x, int max_shared_bytes) {
  DeviceDescription d;
  d.index = static_cast<std::uint32_t>(index);
  d.name = name;
  d.memory_bytes = memory_bytes;
  d.subgroup_size = static_cast<std::uint32_t>(warp_size);
  d.limits.max_workgroup_invocations = static_cast<std::uint32_t>(max_threads_per_block);
  d.limits.max_workgroup_size_x = static_cast<std::uint32_t>(max_block_x);
  d.limits.max_shared_bytes = static_cast<std::uint32_t>(max_shared_bytes);
  d.limits.max_buffer_bytes = memory_bytes;
  return d;
}

std::string numbered(std::string_view text) {
  std::string out;
  int line = 1;
  std::size_t at = 0;
  while (at <= text.size()) {
    const std::size_t end = std::min(text.find('\n', at), text.size());
    out += std::to_string(line++) + ": ";
    out.append(text.substr(at, end - at));
    out += '\n';
    at = end + 1;
  }
  return out;
}

Error compile_error(std::string_view compiler, std::string_view name, std::string_view arch, std::string_view why,
                    const std::string& log, std::string_view language, std::string_view source) {
  Error e = make_error(ErrorCode::Internal, std::string(compiler) + " could not compile '" + std::string(name) +
                                                "' for " + std::string(arch) + ": " + std::string(why));
  e.diagnostics.push_back(Diagnostic{{}, Severity::Note, log, {}, {}});
  e.diagnostics.push_back(
      Diagnostic{{}, Severity::Note, std::string(language) + " source:\n" + numbered(source), {}, {}});
  return e;
}

Result<void> check_elf64(const std::vector<std::uint8_t>& c, std::string_view what, std::uint32_t machine,
                         std::string_view machine_name) {
  auto bad = [&](const std::string& why) {
    return make_error(ErrorCode::InvalidInput, "damaged " + std::string(what) + ": " + why);
  };
  if (c.size() < 64) return bad("shorter than an ELF header (" + std::to_string(c.size()) + " bytes)");
  if (std::memcmp(c.data(), "\x7f" "ELF", 4) != 0) return bad("no ELF magic");
  if (c[4] != 2 || c[5] != 1) return bad("not a 64-bit little-endian ELF");
  auto u16 = [&](std::size_t at) { return static_cast<std::uint32_t>(c[at] | (c[at + 1] << 8)); };
  std::uint64_t shoff = 0;
  for (int i = 7; i >= 0; --i) shoff = (shoff << 8) | c[40 + static_cast<std::size_t>(i)];
  if (u16(18) != machine)
    return bad("e_machine " + std::to_string(u16(18)) + ", expected " + std::to_string(machine) + " (" +
               std::string(machine_name) + ")");
  const std::uint64_t shentsize = u16(58), shnum = u16(60);
  if (shentsize != 64 || shoff > c.size() || shnum > (c.size() - shoff) / 64)
    return bad("the section header table lies outside the file");
  return success();
}

}  // namespace ternjit::targets::simt
