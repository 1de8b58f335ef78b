// SPDX-License-Identifier: Apache-2.0
// nvrtc.h - NVRTC opened with dlopen: CUDA C++ source to PTX and cubin, no GPU needed.
//
// The library is never linked: libnvrtc.so.13, then .so.12, then the unversioned name
// are tried in the loader's path, then in $CUDA_HOME/lib64, $CUDA_PATH/lib64 and
// /usr/local/cuda/lib64. A missing library is an Unavailable error saying where it was
// looked for. Private to targets/cuda/ (the CUDA target and its tests).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ternjit/result.h"

namespace ternjit::targets::cuda {

/// What NVRTC produced for one source.
struct NvrtcOutput {
  std::string ptx;                   ///< the PTX text (always)
  std::vector<std::uint8_t> cubin;   ///< the cubin for the real arch (when asked for)
  std::string log;                   ///< the compile log (ptxas -v lines included)
  double compile_ms = 0;             ///< wall time of the NVRTC calls
};

/// The loaded NVRTC: its path and version. The library stays open for the process.
struct NvrtcInfo {
  std::string path;     ///< the file dlopen found ("libnvrtc.so.13")
  int major = 0, minor = 0;
  std::vector<int> archs;  ///< nvrtcGetSupportedArchs: 75, 80, 86, ...
  /// "nvrtc 13.0" (a cache-key field).
  [[nodiscard]] std::string version_text() const;
};

/// NVRTC, opened once per process. Errors: Unavailable with where it was looked for.
Result<const NvrtcInfo*> nvrtc_info();

/// "sm_80" -> 80, "sm_90a" -> 90 (with `accelerated` set); nullopt-like -1 for text of
/// another form.
int arch_number(std::string_view arch, bool* accelerated = nullptr);

/// Compiles `source` (named `name` in messages) for `arch` ("sm_90", "sm_90a"): PTX for
/// the matching virtual arch and, when `want_cubin`, the cubin (ptxas runs in-process;
/// `-Xptxas -v` puts register and spill counts in the log). Errors: Unavailable without
/// NVRTC, InvalidArgument for an arch this NVRTC does not support (listing those it
/// does), Internal for a compile failure with the log and the numbered source as notes.
Result<NvrtcOutput> nvrtc_compile(std::string_view source, std::string_view name, std::string_view arch,
                                  bool want_cubin);

/// Register and spill counts of one kernel as ptxas reports them in `log`.
struct PtxasUsage {
  std::string kernel;
  int registers = -1;
  std::int64_t spill_stores = -1, spill_loads = -1;  ///< bytes
  std::int64_t stack_bytes = -1;
};

/// Every "Function properties for K" / "Used N registers" group of a ptxas -v log.
std::vector<PtxasUsage> parse_ptxas_usage(std::string_view log);

/// Checks that `cubin` is a 64-bit little-endian ELF for NVIDIA CUDA (e_machine 190)
/// whose section header table lies inside it. Errors (InvalidInput) say what is wrong.
Result<void> check_cubin(const std::vector<std::uint8_t>& cubin);

}  // namespace ternjit::targets::cuda
