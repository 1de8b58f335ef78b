// SPDX-License-Identifier: Apache-2.0
// nvrtc.cpp - dlopen of NVRTC, compiling CUDA C++ to PTX and cubin, reading ptxas usage lines and cubin headers.
#include "targets/cuda/nvrtc.h"

#include <dlfcn.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>

#include "targets/simt/driver_library.h"

namespace ternjit::targets::cuda {

namespace {

// The NVRTC C API as this file calls it (nvrtc.h is not needed to build: a machine
// without the toolkit builds the same binary). Signatures from NVRTC 12/13's nvrtc.h.
using NvrtcProgram = struct NvrtcProgramOpaque*;
using NvrtcResult = int;
struct NvrtcApi {
  NvrtcResult (*version)(int*, int*) = nullptr;
  NvrtcResult (*num_archs)(int*) = nullptr;
  NvrtcResult (*archs)(int*) = nullptr;
  NvrtcResult (*create)(NvrtcProgram*, const char*, const char*, int, const char* const*, const char* const*) = nullptr;
  NvrtcResult (*destroy)(NvrtcProgram*) = nullptr;
  NvrtcResult (*compile)(NvrtcProgram, int, const char* const*) = nullptr;
  NvrtcResult (*ptx_size)(NvrtcProgram, std::size_t*) = nullptr;
  NvrtcResult (*ptx)(NvrtcProgram, char*) = nullptr;
  NvrtcResult (*cubin_size)(NvrtcProgram, std::size_t*) = nullptr;
  NvrtcResult (*cubin)(NvrtcProgram, char*) = nullptr;
  NvrtcResult (*log_size)(NvrtcProgram, std::size_t*) = nullptr;
  NvrtcResult (*log)(NvrtcProgram, char*) = nullptr;
  const char* (*error_string)(NvrtcResult) = nullptr;
  NvrtcInfo info;
};

// Where the toolkit may be: the loader's path first, then the usual install roots.
std::vector<std::string> candidate_paths() {
  std::vector<std::string> names = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"};
  std::vector<std::string> out = names;
  std::vector<std::string> roots;
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"})
    if (const char* v = std::getenv(var); v && *v) roots.emplace_back(v);
  roots.emplace_back("/usr/local/cuda");
  for (const std::string& r : roots)
    for (const std::string& n : names) out.push_back(r + "/lib64/" + n);
  return out;
}

// NVRTC loads its builtins library (libnvrtc-builtins.so.MAJOR.MINOR) by soname at
// compile time; when NVRTC itself came from a toolkit directory outside the loader's
// path, the builtins beside it are loaded first so that lookup finds them.
void preload_builtins_beside(const std::string& path) {
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) return;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    if (e.path().filename().string().rfind("libnvrtc-builtins.so", 0) == 0)
      dlopen(e.path().c_str(), RTLD_NOW | RTLD_GLOBAL);
}

Result<NvrtcApi> open_nvrtc() {
  void* lib = nullptr;
  std::string found, tried;
  for (const std::string& p : candidate_paths()) {
    if (p.find('/') != std::string::npos) {
      std::error_code ec;
      if (!std::filesystem::exists(p, ec)) {
        tried += (tried.empty() ? "" : ", ") + p;
        continue;
      }
      preload_builtins_beside(p);
    }
    lib = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib) {
      found = p;
      break;
    }
    tried += (tried.empty() ? "" : ", ") + p;
  }
  if (!lib)
    return make_error(ErrorCode::Unavailable, "no NVRTC (looked for " + tried + "): install the CUDA toolkit or set CUDA_HOME");
  NvrtcApi api;
  simt::SymbolTable sym(lib);
  sym.get(api.version, "nvrtcVersion");
  sym.get(api.create, "nvrtcCreateProgram");
  sym.get(api.destroy, "nvrtcDestroyProgram");
  sym.get(api.compile, "nvrtcCompileProgram");
  sym.get(api.ptx_size, "nvrtcGetPTXSize");
  sym.get(api.ptx, "nvrtcGetPTX");
  sym.get(api.cubin_size, "nvrtcGetCUBINSize");
  sym.get(api.cubin, "nvrtcGetCUBIN");
  sym.get(api.log_size, "nvrtcGetProgramLogSize");
  sym.get(api.log, "nvrtcGetProgramLog");
  sym.get(api.error_string, "nvrtcGetErrorString");
  if (!sym.missing().empty())
    return make_error(ErrorCode::Unavailable, found + " lacks " + sym.missing() + " (NVRTC older than 11.1?)");
  // Optional (NVRTC >= 11.2): the archs it compiles for.
  api.num_archs = reinterpret_cast<NvrtcResult (*)(int*)>(dlsym(lib, "nvrtcGetNumSupportedArchs"));
  api.archs = reinterpret_cast<NvrtcResult (*)(int*)>(dlsym(lib, "nvrtcGetSupportedArchs"));
  api.info.path = found;
  if (api.version(&api.info.major, &api.info.minor) != 0)
    return make_error(ErrorCode::Unavailable, found + ": nvrtcVersion failed");
  int n = 0;
  if (api.num_archs && api.archs && api.num_archs(&n) == 0 && n > 0 && n < 1024) {
    api.info.archs.resize(static_cast<std::size_t>(n));
    if (api.archs(api.info.archs.data()) != 0) api.info.archs.clear();
  }
  return api;
}

Result<const NvrtcApi*> nvrtc_api() {
  static const Result<NvrtcApi> api = open_nvrtc();
  if (!api.ok()) return api.error();
  return &api.value();
}

// A leading integer of `s` after position `at`, skipping spaces; -1 when there is none.
std::int64_t number_before(std::string_view s, std::string_view word) {
  const std::size_t w = s.find(word);
  if (w == std::string_view::npos || w == 0) return -1;
  std::size_t end = w;
  while (end > 0 && s[end - 1] == ' ') --end;
  std::size_t begin = end;
  while (begin > 0 && s[begin - 1] >= '0' && s[begin - 1] <= '9') --begin;
  if (begin == end || end - begin > 15) return -1;
  return std::strtoll(std::string(s.substr(begin, end - begin)).c_str(), nullptr, 10);
}

}  // namespace

std::string NvrtcInfo::version_text() const { return "nvrtc " + std::to_string(major) + "." + std::to_string(minor); }

Result<const NvrtcInfo*> nvrtc_info() {
  TERNJIT_TRY(const NvrtcApi* api, nvrtc_api());
  return &api->info;
}

int arch_number(std::string_view arch, bool* accelerated) {
  if (accelerated) *accelerated = false;
  if (arch.size() < 5 || arch.substr(0, 3) != "sm_") return -1;
  std::string_view digits = arch.substr(3);
  if (digits.back() == 'a') {
    if (accelerated) *accelerated = true;
    digits.remove_suffix(1);
  }
  if (digits.empty() || digits.size() > 3) return -1;
  int v = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return -1;
    v = v * 10 + (c - '0');
  }
  return v;
}

Result<NvrtcOutput> nvrtc_compile(std::string_view source, std::string_view name, std::string_view arch,
                                  bool want_cubin) {
  TERNJIT_TRY(const NvrtcApi* api, nvrtc_api());
  bool accelerated = false;
  const int number = arch_number(arch, &accelerated);
  if (number < 0)
    return make_error(ErrorCode::InvalidArgument, "CUDA arch '" + std::string(arch) + "': expected sm_NN or sm_NNa");
  if (!api->info.archs.empty()) {
    bool known = false;
    std::string list;
    for (int a : api->info.archs) {
      known = known || a == number;
      list += (list.empty() ? "sm_" : ", sm_") + std::to_string(a);
    }
    if (!known)
      return make_error(ErrorCode::InvalidArgument, "CUDA arch '" + std::string(arch) + "' is not supported by " +
                                                        api->info.version_text() + " (it takes " + list + ")");
  }
  const auto start = std::chrono::steady_clock::now();
  const std::string src(source), prog_name(std::string(name) + ".cu");
  NvrtcProgram prog = nullptr;
  if (NvrtcResult r = api->create(&prog, src.c_str(), prog_name.c_str(), 0, nullptr, nullptr); r != 0)
    return make_error(ErrorCode::Internal, std::string("nvrtcCreateProgram: ") + api->error_string(r));
  std::unique_ptr<NvrtcProgram, void (*)(NvrtcProgram*)> guard(&prog, [](NvrtcProgram* p) {
    if (auto a = nvrtc_api(); a.ok()) (*a)->destroy(p);
  });
  // A real arch ("sm_90") makes NVRTC run ptxas and give the cubin; the PTX then comes
  // from the same compile. "-Xptxas -v" puts the register and spill lines in the log.
  const std::string gpu = "--gpu-architecture=" + std::string(want_cubin ? arch : "compute_" + std::string(arch.substr(3)));
  // No fast math (NVRTC's default): the epilogue's f32 ops must round as the reference does.
  std::vector<const char*> opts = {gpu.c_str(), "--std=c++17", "-default-device"};
  if (want_cubin) {
    opts.push_back("-Xptxas");
    opts.push_back("-v");
  }
  const NvrtcResult compiled = api->compile(prog, static_cast<int>(opts.size()), opts.data());
  NvrtcOutput out;
  out.log = simt::program_log(*api, prog);
  if (compiled != 0)
    return simt::compile_error("NVRTC", name, arch, api->error_string(compiled), out.log, "CUDA", source);
  TERNJIT_TRY_VOID(simt::program_output(prog, api->ptx_size, "nvrtcGetPTXSize", api->ptx, "nvrtcGetPTX", out.ptx));
  while (!out.ptx.empty() && out.ptx.back() == '\0') out.ptx.pop_back();
  if (want_cubin)
    TERNJIT_TRY_VOID(
        simt::program_output(prog, api->cubin_size, "nvrtcGetCUBINSize", api->cubin, "nvrtcGetCUBIN", out.cubin));
  out.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return out;
}

std::vector<PtxasUsage> parse_ptxas_usage(std::string_view log) {
  // ptxas -v prints, per kernel:
  //   ptxas info    : Compiling entry function 'k' for 'sm_90'
  //   ptxas info    : Function properties for k
  //       0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
  //   ptxas info    : Used 28 registers, used 0 barriers, 384 bytes cmem[0]
  std::vector<PtxasUsage> out;
  std::size_t at = 0;
  while (at < log.size()) {
    const std::size_t end = std::min(log.find('\n', at), log.size());
    const std::string_view line = log.substr(at, end - at);
    at = end + 1;
    if (auto p = line.find("Function properties for "); p != std::string_view::npos) {
      PtxasUsage u;
      u.kernel = std::string(line.substr(p + 24));
      while (!u.kernel.empty() && (u.kernel.back() == '\r' || u.kernel.back() == ' ')) u.kernel.pop_back();
      out.push_back(u);
    } else if (!out.empty() && line.find("spill stores") != std::string_view::npos) {
      out.back().stack_bytes = number_before(line, " bytes stack frame");
      out.back().spill_stores = number_before(line, " bytes spill stores");
      out.back().spill_loads = number_before(line, " bytes spill loads");
    } else if (!out.empty() && line.find("Used ") != std::string_view::npos &&
               line.find(" registers") != std::string_view::npos) {
      out.back().registers = static_cast<int>(number_before(line, " registers"));
    }
  }
  return out;
}

Result<void> check_cubin(const std::vector<std::uint8_t>& c) {
  constexpr std::uint32_t kEmCuda = 190;
  return simt::check_elf64(c, "cubin", kEmCuda, "NVIDIA CUDA");
}

}  // namespace ternjit::targets::cuda
