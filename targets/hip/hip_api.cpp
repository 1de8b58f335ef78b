// SPDX-License-Identifier: Apache-2.0
// hip_api.cpp - dlopen of hiprtc and the HIP runtime (ROCm 5 ABI), the arch list, device enumeration.
#include "targets/hip/hip_api.h"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>
#include <type_traits>

namespace ternjit::targets::hip {

namespace {

// hipDeviceAttribute_t values of the ROCm 5 headers (hip_runtime_api.h, 5.2): they were
// renumbered in ROCm 6, which is one reason only the .so.5 ABI is opened.
constexpr int kAttrMaxBlockDimX = 26, kAttrMaxThreadsPerBlock = 56, kAttrMemoryBusBits = 59,
              kAttrMemoryClockKhz = 60, kAttrComputeUnits = 63, kAttrMaxSharedPerBlock = 74, kAttrWarpSize = 87;
// hipDeviceProp_t of ROCm 5 (792 bytes): name at 0, totalGlobalMem at 256, gcnArchName
// at 396. The runtime writes into a larger buffer so an unexpected size cannot overflow.
constexpr std::size_t kPropName = 0, kPropTotalMem = 256, kPropArchName = 396, kPropBytes = 4096;

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

using HiprtcProgram = struct HiprtcProgramOpaque*;
struct HiprtcApi {
  int (*create)(HiprtcProgram*, const char*, const char*, int, const char**, const char**) = nullptr;
  int (*compile)(HiprtcProgram, int, const char**) = nullptr;
  int (*code_size)(HiprtcProgram, std::size_t*) = nullptr;
  int (*code)(HiprtcProgram, char*) = nullptr;
  int (*log_size)(HiprtcProgram, std::size_t*) = nullptr;
  int (*log)(HiprtcProgram, char*) = nullptr;
  int (*destroy)(HiprtcProgram*) = nullptr;
  const char* (*error_string)(int) = nullptr;
  int (*version)(int*, int*) = nullptr;
  std::string version_text;
};

Result<HiprtcApi> open_hiprtc() {
  std::string found, tried;
  void* lib = open_first({"libhiprtc.so.5", "libamdhip64.so.5"}, found, tried);
  if (!lib)
    return make_error(ErrorCode::Unavailable, "no hiprtc (looked for " + tried + "): install libamdhip64-dev (ROCm 5)");
  HiprtcApi api;
  std::string missing;
  auto sym = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
    if (!fn) missing += std::string(missing.empty() ? "" : ", ") + name;
  };
  sym(api.create, "hiprtcCreateProgram");
  sym(api.compile, "hiprtcCompileProgram");
  sym(api.code_size, "hiprtcGetCodeSize");
  sym(api.code, "hiprtcGetCode");
  sym(api.log_size, "hiprtcGetProgramLogSize");
  sym(api.log, "hiprtcGetProgramLog");
  sym(api.destroy, "hiprtcDestroyProgram");
  sym(api.error_string, "hiprtcGetErrorString");
  sym(api.version, "hiprtcVersion");
  if (!missing.empty()) return make_error(ErrorCode::Unavailable, found + " lacks " + missing);
  int major = 0, minor = 0;
  api.version(&major, &minor);
  api.version_text = "hiprtc " + std::to_string(major) + "." + std::to_string(minor) + " (" + found + ")";
  return api;
}

Result<const HiprtcApi*> hiprtc_api() {
  static const Result<HiprtcApi> api = open_hiprtc();
  if (!api.ok()) return api.error();
  return &api.value();
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

Result<RuntimeApi> open_runtime() {
  std::string found, tried;
  void* lib = open_first({"libamdhip64.so.5"}, found, tried);
  if (!lib) {
    std::string why = "no HIP runtime (" + tried + ")";
    // A ROCm 6 runtime has another device-property layout and attribute numbering.
    if (void* six = dlopen("libamdhip64.so.6", RTLD_LAZY | RTLD_LOCAL)) {
      dlclose(six);
      why += "; libamdhip64.so.6 (ROCm 6) is installed, whose ABI this build does not read";
    }
    return make_error(ErrorCode::Unavailable, why);
  }
  RuntimeApi api;
  api.path = found;
  std::string missing;
  auto sym = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
    if (!fn) missing += std::string(missing.empty() ? "" : ", ") + name;
  };
  sym(api.hipInit, "hipInit");
  sym(api.hipDriverGetVersion, "hipDriverGetVersion");
  sym(api.hipGetDeviceCount, "hipGetDeviceCount");
  sym(api.hipGetDeviceProperties, "hipGetDeviceProperties");
  sym(api.hipDeviceGetAttribute, "hipDeviceGetAttribute");
  sym(api.hipSetDevice, "hipSetDevice");
  sym(api.hipModuleLoadData, "hipModuleLoadData");
  sym(api.hipModuleUnload, "hipModuleUnload");
  sym(api.hipModuleGetFunction, "hipModuleGetFunction");
  sym(api.hipModuleLaunchKernel, "hipModuleLaunchKernel");
  sym(api.hipMalloc, "hipMalloc");
  sym(api.hipFree, "hipFree");
  sym(api.hipMemcpyHtoDAsync, "hipMemcpyHtoDAsync");
  sym(api.hipMemcpyDtoHAsync, "hipMemcpyDtoHAsync");
  sym(api.hipMemcpyDtoDAsync, "hipMemcpyDtoDAsync");
  sym(api.hipMemsetAsync, "hipMemsetAsync");
  sym(api.hipStreamCreate, "hipStreamCreate");
  sym(api.hipStreamDestroy, "hipStreamDestroy");
  sym(api.hipStreamSynchronize, "hipStreamSynchronize");
  sym(api.hipGetErrorName, "hipGetErrorName");
  sym(api.hipGetErrorString, "hipGetErrorString");
  if (!missing.empty()) return make_error(ErrorCode::Unavailable, found + " lacks " + missing);
  api.hipDriverGetVersion(&api.driver_version);
  return api;
}

Result<std::vector<HipDevice>> enumerate() {
  TERNJIT_TRY(const RuntimeApi* api, runtime());
  int count = 0;
  if (int r = api->hipGetDeviceCount(&count); r != 0 || count <= 0) {
    if (r == 0 || r == 100)  // hipErrorNoDevice: no /dev/kfd or no AMD GPU
      return make_error(ErrorCode::Unavailable, "the HIP runtime reports no AMD GPU (hipErrorNoDevice)");
    Error e = hip_error(*api, "hipGetDeviceCount", r);
    e.code = ErrorCode::Unavailable;
    return e;
  }
  std::vector<HipDevice> out;
  for (int i = 0; i < count; ++i) {
    HipDevice d;
    d.index = i;
    std::vector<char> prop(kPropBytes, 0);
    if (int r = api->hipGetDeviceProperties(prop.data(), i); r != 0) return hip_error(*api, "hipGetDeviceProperties", r);
    d.name.assign(prop.data() + kPropName, strnlen(prop.data() + kPropName, 256));
    std::size_t mem = 0;
    std::memcpy(&mem, prop.data() + kPropTotalMem, sizeof mem);
    d.memory_bytes = mem;
    d.arch_full.assign(prop.data() + kPropArchName, strnlen(prop.data() + kPropArchName, 256));
    d.arch = d.arch_full.substr(0, d.arch_full.find(':'));
    auto attr = [&](int a, int& v) {
      if (api->hipDeviceGetAttribute(&v, a, i) != 0) v = 0;
    };
    attr(kAttrComputeUnits, d.compute_units);
    attr(kAttrWarpSize, d.warp_size);
    attr(kAttrMaxThreadsPerBlock, d.max_threads_per_block);
    attr(kAttrMaxBlockDimX, d.max_block_x);
    attr(kAttrMaxSharedPerBlock, d.max_shared_per_block);
    attr(kAttrMemoryClockKhz, d.memory_clock_khz);
    attr(kAttrMemoryBusBits, d.memory_bus_bits);
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace

Result<void> check_offload_arch(std::string_view arch) {
  if (std::find(kSupportedArchs.begin(), kSupportedArchs.end(), arch) != kSupportedArchs.end()) return success();
  std::string list;
  for (std::string_view a : kSupportedArchs) list += (list.empty() ? "" : ", ") + std::string(a);
  return make_error(ErrorCode::InvalidArgument,
                    "offload arch '" + std::string(arch) + "' is not supported by this ROCm's hiprtc (it takes " +
                        list + "; others would abort the process inside hiprtc)");
}

Result<std::string> hiprtc_version() {
  TERNJIT_TRY(const HiprtcApi* api, hiprtc_api());
  return api->version_text;
}

Result<HipOutput> compile_hip(std::string_view source, std::string_view name, std::string_view arch) {
  // The check comes before the library is even opened: an unknown arch must never reach
  // hiprtc (ROCm 5.2 aborts the process in hiprtcCompileProgram).
  TERNJIT_TRY_VOID(check_offload_arch(arch));
  TERNJIT_TRY(const HiprtcApi* api, hiprtc_api());
  const auto start = std::chrono::steady_clock::now();
  const std::string src(source), prog_name(std::string(name) + ".hip");
  HiprtcProgram prog = nullptr;
  if (int r = api->create(&prog, src.c_str(), prog_name.c_str(), 0, nullptr, nullptr); r != 0)
    return make_error(ErrorCode::Internal, std::string("hiprtcCreateProgram: ") + api->error_string(r));
  std::unique_ptr<HiprtcProgram, void (*)(HiprtcProgram*)> guard(&prog, [](HiprtcProgram* p) {
    if (auto a = hiprtc_api(); a.ok()) (*a)->destroy(p);
  });
  const std::string offload = "--offload-arch=" + std::string(arch);
  std::vector<const char*> opts = {offload.c_str(), "-O3", "-std=c++17"};
  const int compiled = api->compile(prog, static_cast<int>(opts.size()), opts.data());
  HipOutput out;
  std::size_t n = 0;
  if (api->log_size(prog, &n) == 0 && n > 1) {
    out.log.resize(n);
    if (api->log(prog, out.log.data()) == 0) out.log.resize(n - 1);
  }
  if (compiled != 0) {
    Error e = make_error(ErrorCode::Internal, "hiprtc could not compile '" + std::string(name) + "' for " +
                                                  std::string(arch) + ": " + api->error_string(compiled));
    e.diagnostics.push_back(Diagnostic{{}, Severity::Note, out.log, {}, {}});
    e.diagnostics.push_back(Diagnostic{{}, Severity::Note, "HIP source:\n" + numbered(source), {}, {}});
    return e;
  }
  if (api->code_size(prog, &n) != 0 || n == 0) return make_error(ErrorCode::Internal, "hiprtcGetCodeSize failed");
  out.code.resize(n);
  if (api->code(prog, reinterpret_cast<char*>(out.code.data())) != 0)
    return make_error(ErrorCode::Internal, "hiprtcGetCode failed");
  out.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return out;
}

Result<void> check_code_object(const std::vector<std::uint8_t>& c) {
  auto bad = [](const std::string& why) { return make_error(ErrorCode::InvalidInput, "damaged code object: " + why); };
  if (c.size() < 64) return bad("shorter than an ELF header (" + std::to_string(c.size()) + " bytes)");
  if (std::memcmp(c.data(), "\x7f" "ELF", 4) != 0) return bad("no ELF magic");
  if (c[4] != 2 || c[5] != 1) return bad("not a 64-bit little-endian ELF");
  auto u16 = [&](std::size_t at) { return static_cast<std::uint32_t>(c[at] | (c[at + 1] << 8)); };
  std::uint64_t shoff = 0;
  for (int i = 7; i >= 0; --i) shoff = (shoff << 8) | c[40 + static_cast<std::size_t>(i)];
  constexpr std::uint32_t kEmAmdgpu = 224;
  if (u16(18) != kEmAmdgpu) return bad("e_machine " + std::to_string(u16(18)) + ", expected 224 (AMDGPU)");
  const std::uint64_t shentsize = u16(58), shnum = u16(60);
  if (shentsize != 64 || shoff > c.size() || shnum > (c.size() - shoff) / 64)
    return bad("the section header table lies outside the file");
  return success();
}

std::string RuntimeApi::version_text() const {
  // hipDriverGetVersion: major * 10000000 + minor * 100000 + patch (50221153 = 5.2.21153).
  return "hip runtime " + std::to_string(driver_version / 10000000) + "." +
         std::to_string(driver_version / 100000 % 100) + "." + std::to_string(driver_version % 100000);
}

Result<const RuntimeApi*> runtime() {
  static const Result<RuntimeApi> api = open_runtime();
  if (!api.ok()) return api.error();
  return &api.value();
}

Error hip_error(const RuntimeApi& api, const char* what, int r) {
  const char* name = api.hipGetErrorName ? api.hipGetErrorName(r) : nullptr;
  // hipErrorOutOfMemory (2), NoDevice (100), InvalidDevice (101), LaunchFailure (719).
  const bool environment = r == 2 || r == 100 || r == 101 || r == 719;
  return make_error(environment ? ErrorCode::Unavailable : ErrorCode::Internal,
                    std::string(what) + ": " + (name ? name : "HIP error " + std::to_string(r)));
}

DeviceDescription HipDevice::description(const RuntimeApi& api) const {
  DeviceDescription d;
  d.index = static_cast<std::uint32_t>(index);
  d.name = name;
  d.type = "discrete gpu";
  d.driver = api.version_text() + ", " + arch + ", " + std::to_string(compute_units) + " CUs";
  d.api = "HIP " + api.version_text().substr(12);
  d.memory_bytes = memory_bytes;
  d.subgroup_size = static_cast<std::uint32_t>(warp_size);
  d.int_dot = true;  // sdot4 on every arch of kSupportedArchs but gfx900 (the generator picks)
  d.int_dot_accelerated = arch != "gfx900";
  d.limits.max_workgroup_invocations = static_cast<std::uint32_t>(max_threads_per_block);
  d.limits.max_workgroup_size_x = static_cast<std::uint32_t>(max_block_x);
  d.limits.max_shared_bytes = static_cast<std::uint32_t>(max_shared_per_block);
  d.limits.max_buffer_bytes = memory_bytes;
  return d;
}

Result<const std::vector<HipDevice>*> hip_devices() {
  static const Result<std::vector<HipDevice>> all = [] {
    // hipInit is idempotent; without /dev/kfd it fails and the count says why.
    if (auto api = runtime(); api.ok()) (*api)->hipInit(0);
    return enumerate();
  }();
  if (!all.ok()) return all.error();
  return &all.value();
}

Result<const HipDevice*> select_hip_device(const std::string& option) {
  std::size_t index = 0;
  if (!option.empty() && option != "auto") {
    if (option.size() > 4 || option.find_first_not_of("0123456789") != std::string::npos)
      return make_error(ErrorCode::InvalidArgument, "hip.device='" + option + "': expected auto or a device index");
    index = static_cast<std::size_t>(std::stoi(option));
  }
  TERNJIT_TRY(const std::vector<HipDevice>* all, hip_devices());
  if (index >= all->size())
    return make_error(ErrorCode::NotFound,
                      "hip.device=" + option + ": there are " + std::to_string(all->size()) + " HIP devices");
  return &(*all)[index];
}

}  // namespace ternjit::targets::hip
