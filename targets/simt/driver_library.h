// SPDX-License-Identifier: Apache-2.0
// driver_library.h - what the cuda and hip driver adapters share: dlopen of their libraries, entry-point tables, compile errors, ELF checks.
//
// NVRTC, libcuda, hiprtc and libamdhip64 are opened at run time (never linked), so one
// build runs everywhere and a missing library is an Unavailable error saying why.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "targets/target.h"
#include "ternjit/result.h"

namespace ternjit::targets::simt {

/// The first of `names` that dlopen (RTLD_NOW | RTLD_LOCAL) opens, its name in `found`;
/// null when none opens, every name tried then listed in `tried` (", "-separated,
/// appended to what it held).
void* open_first(std::initializer_list<const char*> names, std::string& found, std::string& tried);

/// Resolves the entry points of one opened library into typed function pointers,
/// remembering the names it does not find.
class SymbolTable {
 public:
  explicit SymbolTable(void* library) : library_(library) {}
  /// Sets `fn` to symbol `name` (null when missing, which missing() then lists).
  template <class Fn>
  void get(Fn*& fn, const char* name) {
    fn = reinterpret_cast<Fn*>(lookup(name));
  }
  /// The names not found, ", "-separated ("" when all were).
  [[nodiscard]] const std::string& missing() const { return missing_; }

 private:
  void* lookup(const char* name);
  void* library_;
  std::string missing_;
};

/// Success when `value` of option "<target>.device" is "auto" or an index (up to 4
/// digits); else InvalidArgument naming it.
Result<void> check_device_option(std::string_view target, const std::string& value);

/// The device index "<target>.device=`option`" names: 0 for "" and "auto". Errors:
/// InvalidArgument for text that is not an index.
Result<std::size_t> device_index(std::string_view target, const std::string& option);

/// Device `option` ("<target>.device": "", "auto" or an index) of those `devices()`
/// returns (called only for a valid option). Errors: as device_index and devices(),
/// NotFound for an index past the devices ("there are N <api> devices").
template <class Device, class Devices>
Result<const Device*> select_device(std::string_view target, std::string_view api, const std::string& option,
                                    Devices devices) {
  TERNJIT_TRY(const std::size_t index, device_index(target, option));
  TERNJIT_TRY(const std::vector<Device>* all, devices());
  if (index >= all->size())
    return make_error(ErrorCode::NotFound, std::string(target) + ".device=" + option + ": there are " +
                                               std::to_string(all->size()) + " " + std::string(api) + " devices");
  return &(*all)[index];
}

/// What `ternjit info` lists of every SIMT device: index, name, memory, the warp as the
/// subgroup size and the block limits (max_buffer_bytes: the memory). The caller adds
/// its type, driver, api and int_dot fields.
DeviceDescription device_description(int index, const std::string& name, std::uint64_t memory_bytes, int warp_size,
                                     int max_threads_per_block, int max_block_x, int max_shared_bytes);

/// `text` with every line prefixed by its 1-based number ("1: ..."), for compile errors.
std::string numbered(std::string_view text);

/// The Internal error of a failed runtime compile: "<compiler> could not compile '<name>'
/// for <arch>: <why>", the compile log and the numbered source ("<language> source:") as notes.
Error compile_error(std::string_view compiler, std::string_view name, std::string_view arch, std::string_view why,
                    const std::string& log, std::string_view language, std::string_view source);

/// The compile log of program `prog` of a runtime compiler (NVRTC, hiprtc) through its
/// `log_size` and `log` entry points; "" when there is none or it cannot be read.
template <class Api, class Program>
std::string program_log(const Api& api, Program prog) {
  std::string log;
  std::size_t n = 0;
  if (api.log_size(prog, &n) == 0 && n > 1) {
    log.resize(n);
    if (api.log(prog, log.data()) == 0) log.resize(n - 1);
  }
  return log;
}

/// One output of a compiled program (PTX, cubin, code object) into `out`: its size from
/// `size` (named `size_name`), then its bytes from `read` (`read_name`). Errors:
/// Internal "<name> failed" for a failing call or an empty output.
template <class Program, class SizeFn, class ReadFn, class Bytes>
Result<void> program_output(Program prog, SizeFn size, const char* size_name, ReadFn read, const char* read_name,
                            Bytes& out) {
  std::size_t n = 0;
  if (size(prog, &n) != 0 || n == 0) return make_error(ErrorCode::Internal, std::string(size_name) + " failed");
  out.resize(n);
  if (read(prog, reinterpret_cast<char*>(out.data())) != 0)
    return make_error(ErrorCode::Internal, std::string(read_name) + " failed");
  return success();
}

/// Checks that `binary` is a 64-bit little-endian ELF for machine `machine` (e_machine;
/// `machine_name` in the message) whose section header table lies inside it. Errors
/// (InvalidInput): "damaged <what>: <why>".
Result<void> check_elf64(const std::vector<std::uint8_t>& binary, std::string_view what, std::uint32_t machine,
                         std::string_view machine_name);

}  // namespace ternjit::targets::simt
