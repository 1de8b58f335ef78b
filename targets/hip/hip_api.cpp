// SPDX-License-Identifier: Apache-2.0
// hip_api.cpp - dlopen of hiprtc and the HIP runtime (ROCm 5 ABI), the arch list, device enumeration.
#include "targets/hip/hip_api.h"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>

#include "targets/simt/driver_library.h"

namespace ternjit::targets::hip {

namespace {

// hipDeviceAttribute_t values of the ROCm 5 headers (hip_runtime_api.h, 5.2): they were
// renumbered in ROCm 6, which is one reason only the .so.5 ABI is opened.
constexpr int kAttrMaxBlockDimX = 26, kAttrMaxThreadsPerBlock = 56, kAttrMemoryBusBits = 59,
              kAttrMemoryClockKhz = 60, kAttrComputeUnits = 63, kAttrMaxSharedPerBlock = 74, kAttrWarpSize = 87;
// hipDeviceProp_t of ROCm 5 (792 bytes): name at 0, totalGlobalMem at 256, gcnArchName
// at 396. The runtime writes into a larger buffer so an unexpected size cannot overflow.
constexpr std::size_t kPropName = 0, kPropTotalMem = 256, kPropArchName = 396, kPropBytes = 4096;

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
  void* lib = simt::open_first({"libhiprtc.so.5", "libamdhip64.so.5"}, found, tried);
  if (!lib)
    return make_error(ErrorCode::Unavailable, "no hiprtc (looked for " + tried + "): install libamdhip64-dev (ROCm 5)");
  HiprtcApi api;
  simt::SymbolTable sym(lib);
  sym.get(api.create, "hiprtcCreateProgram");
  sym.get(api.compile, "hiprtcCompileProgram");
  sym.get(api.code_size, "hiprtcGetCodeSize");
  sym.get(api.code, "hiprtcGetCode");
  sym.get(api.log_size, "hiprtcGetProgramLogSize");
  sym.get(api.log, "hiprtcGetProgramLog");
  sym.get(api.destroy, "hiprtcDestroyProgram");
  sym.get(api.error_string, "hiprtcGetErrorString");
  sym.get(api.version, "hiprtcVersion");
  if (!sym.missing().empty()) return make_error(ErrorCode::Unavailable, found + " lacks " + sym.missing());
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

Result<RuntimeApi> open_runtime() {
  std::string found, tried;
  void* lib = simt::open_first({"libamdhip64.so.5"}, found, tried);
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
  simt::SymbolTable sym(lib);
  sym.get(api.hipInit, "hipInit");
  sym.get(api.hipDriverGetVersion, "hipDriverGetVersion");
  sym.get(api.hipGetDeviceCount, "hipGetDeviceCount");
  sym.get(api.hipGetDeviceProperties, "hipGetDeviceProperties");
  sym.get(api.hipDeviceGetAttribute, "hipDeviceGetAttribute");
  sym.get(api.hipSetDevice, "hipSetDevice");
  sym.get(api.hipModuleLoadData, "hipModuleLoadData");
  sym.get(api.hipModuleUnload, "hipModuleUnload");
  sym.get(api.hipModuleGetFunction, "hipModuleGetFunction");
  sym.get(api.hipModuleLaunchKernel, "hipModuleLaunchKernel");
  sym.get(api.hipMalloc, "hipMalloc");
  sym.get(api.hipFree, "hipFree");
  sym.get(api.hipMemcpyHtoDAsync, "hipMemcpyHtoDAsync");
  sym.get(api.hipMemcpyDtoHAsync, "hipMemcpyDtoHAsync");
  sym.get(api.hipMemcpyDtoDAsync, "hipMemcpyDtoDAsync");
  sym.get(api.hipMemsetAsync, "hipMemsetAsync");
  sym.get(api.hipStreamCreate, "hipStreamCreate");
  sym.get(api.hipStreamDestroy, "hipStreamDestroy");
  sym.get(api.hipStreamSynchronize, "hipStreamSynchronize");
  sym.get(api.hipGetErrorName, "hipGetErrorName");
  sym.get(api.hipGetErrorString, "hipGetErrorString");
  if (!sym.missing().empty()) return make_error(ErrorCode::Unavailable, found + " lacks " + sym.missing());
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
  out.log = simt::program_log(*api, prog);
  if (compiled != 0)
    return simt::compile_error("hiprtc", name, arch, api->error_string(compiled), out.log, "HIP", source);
  TERNJIT_TRY_VOID(
      simt::program_output(prog, api->code_size, "hiprtcGetCodeSize", api->code, "hiprtcGetCode", out.code));
  out.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return out;
}

Result<void> check_code_object(const std::vector<std::uint8_t>& c) {
  constexpr std::uint32_t kEmAmdgpu = 224;
  return simt::check_elf64(c, "code object", kEmAmdgpu, "AMDGPU");
}

namespace {

// A minimal MessagePack reader over a bounded byte range: what the AMDGPU metadata note
// uses (maps, arrays, strings, integers, booleans, floats, nil, binary).
class MsgPack {
 public:
  MsgPack(const std::uint8_t* p, std::size_t n) : p_(p), n_(n) {}
  struct Value {
    enum class Kind { Nil, Bool, Int, Float, Str, Bin, Array, Map } kind = Kind::Nil;
    std::int64_t i = 0;
    std::string s;
    std::vector<Value> items;                            // Array: values; Map: key, value, key, value...
  };
  bool read(Value& v, int depth = 0) {
    if (depth > 16 || at_ >= n_) return false;
    const std::uint8_t b = p_[at_++];
    if (b <= 0x7f) return set_int(v, b);
    if (b >= 0xe0) return set_int(v, static_cast<std::int8_t>(b));
    if ((b & 0xf0) == 0x80) return container(v, Value::Kind::Map, b & 0x0f, depth);
    if ((b & 0xf0) == 0x90) return container(v, Value::Kind::Array, b & 0x0f, depth);
    if ((b & 0xe0) == 0xa0) return bytes(v, Value::Kind::Str, b & 0x1f);
    std::uint64_t len = 0;
    switch (b) {
      case 0xc0: v.kind = Value::Kind::Nil; return true;
      case 0xc2: case 0xc3: v.kind = Value::Kind::Bool; v.i = b - 0xc2; return true;
      case 0xc4: return uint(1, len) && bytes(v, Value::Kind::Bin, len);
      case 0xc5: return uint(2, len) && bytes(v, Value::Kind::Bin, len);
      case 0xc6: return uint(4, len) && bytes(v, Value::Kind::Bin, len);
      case 0xca: v.kind = Value::Kind::Float; return skip(4);
      case 0xcb: v.kind = Value::Kind::Float; return skip(8);
      case 0xcc: return uint(1, len) && set_int(v, static_cast<std::int64_t>(len));
      case 0xcd: return uint(2, len) && set_int(v, static_cast<std::int64_t>(len));
      case 0xce: return uint(4, len) && set_int(v, static_cast<std::int64_t>(len));
      case 0xcf: return uint(8, len) && set_int(v, static_cast<std::int64_t>(len));
      case 0xd0: return uint(1, len) && set_int(v, static_cast<std::int8_t>(len));
      case 0xd1: return uint(2, len) && set_int(v, static_cast<std::int16_t>(len));
      case 0xd2: return uint(4, len) && set_int(v, static_cast<std::int32_t>(len));
      case 0xd3: return uint(8, len) && set_int(v, static_cast<std::int64_t>(len));
      case 0xd9: return uint(1, len) && bytes(v, Value::Kind::Str, len);
      case 0xda: return uint(2, len) && bytes(v, Value::Kind::Str, len);
      case 0xdb: return uint(4, len) && bytes(v, Value::Kind::Str, len);
      case 0xdc: return uint(2, len) && container(v, Value::Kind::Array, len, depth);
      case 0xdd: return uint(4, len) && container(v, Value::Kind::Array, len, depth);
      case 0xde: return uint(2, len) && container(v, Value::Kind::Map, len, depth);
      case 0xdf: return uint(4, len) && container(v, Value::Kind::Map, len, depth);
      default: return false;  // ext types: not in the metadata
    }
  }

 private:
  static bool set_int(Value& v, std::int64_t i) {
    v.kind = Value::Kind::Int;
    v.i = i;
    return true;
  }
  bool uint(int width, std::uint64_t& out) {
    if (n_ - at_ < static_cast<std::size_t>(width)) return false;
    out = 0;
    for (int k = 0; k < width; ++k) out = (out << 8) | p_[at_++];  // big-endian
    return true;
  }
  bool skip(std::size_t k) {
    if (n_ - at_ < k) return false;
    at_ += k;
    return true;
  }
  bool bytes(Value& v, Value::Kind kind, std::uint64_t len) {
    if (n_ - at_ < len) return false;
    v.kind = kind;
    v.s.assign(reinterpret_cast<const char*>(p_ + at_), static_cast<std::size_t>(len));
    at_ += static_cast<std::size_t>(len);
    return true;
  }
  bool container(Value& v, Value::Kind kind, std::uint64_t count, int depth) {
    const std::uint64_t items = kind == Value::Kind::Map ? 2 * count : count;
    if (items > n_ - at_) return false;  // every item takes at least one byte
    v.kind = kind;
    v.items.resize(static_cast<std::size_t>(items));
    for (Value& item : v.items)
      if (!read(item, depth + 1)) return false;
    return true;
  }
  const std::uint8_t* p_;
  std::size_t n_, at_ = 0;
};

const MsgPack::Value* map_get(const MsgPack::Value& m, std::string_view key) {
  if (m.kind != MsgPack::Value::Kind::Map) return nullptr;
  for (std::size_t i = 0; i + 1 < m.items.size(); i += 2)
    if (m.items[i].kind == MsgPack::Value::Kind::Str && m.items[i].s == key) return &m.items[i + 1];
  return nullptr;
}

}  // namespace

Result<std::vector<KernelUsage>> code_object_usage(const std::vector<std::uint8_t>& c) {
  TERNJIT_TRY_VOID(check_code_object(c));
  auto bad = [](const std::string& why) {
    return make_error(ErrorCode::InvalidInput, "code object metadata: " + why);
  };
  auto u16 = [&](std::size_t at) { return static_cast<std::uint32_t>(c[at] | (c[at + 1] << 8)); };
  auto u32 = [&](std::size_t at) { return static_cast<std::uint32_t>(u16(at) | (u16(at + 2) << 16)); };
  auto u64 = [&](std::size_t at) { return static_cast<std::uint64_t>(u32(at)) | (static_cast<std::uint64_t>(u32(at + 4)) << 32); };
  const std::uint64_t shoff = u64(40), shnum = u16(60);  // check_code_object: the table is inside
  constexpr std::uint32_t kShtNote = 7, kNtAmdgpuMetadata = 32;
  for (std::uint64_t i = 0; i < shnum; ++i) {
    const std::size_t sh = static_cast<std::size_t>(shoff + i * 64);
    if (u32(sh + 4) != kShtNote) continue;
    const std::uint64_t off = u64(sh + 24), size = u64(sh + 32);
    if (off > c.size() || size > c.size() - off) return bad("a note section lies outside the file");
    std::uint64_t at = off;
    const std::uint64_t end = off + size;
    while (end - at >= 12) {
      const std::uint64_t namesz = u32(static_cast<std::size_t>(at)), descsz = u32(static_cast<std::size_t>(at + 4));
      const std::uint32_t type = u32(static_cast<std::size_t>(at + 8));
      const std::uint64_t name_at = at + 12, desc_at = name_at + ((namesz + 3) & ~std::uint64_t{3});
      if (desc_at > end || descsz > end - desc_at) return bad("a note runs past its section");
      const std::string name(reinterpret_cast<const char*>(c.data() + name_at),
                             static_cast<std::size_t>(namesz > 0 ? namesz - 1 : 0));
      if (type == kNtAmdgpuMetadata && name == "AMDGPU") {
        MsgPack reader(c.data() + desc_at, static_cast<std::size_t>(descsz));
        MsgPack::Value root;
        if (!reader.read(root)) return bad("the msgpack document does not decode");
        const MsgPack::Value* kernels = map_get(root, "amdhsa.kernels");
        if (!kernels || kernels->kind != MsgPack::Value::Kind::Array) return bad("no amdhsa.kernels array");
        std::vector<KernelUsage> out;
        for (const MsgPack::Value& k : kernels->items) {
          KernelUsage u;
          if (const auto* n = map_get(k, ".name"); n && n->kind == MsgPack::Value::Kind::Str) u.name = n->s;
          auto num = [&](const char* key, std::int64_t& field) {
            if (const auto* v = map_get(k, key); v && v->kind == MsgPack::Value::Kind::Int) field = v->i;
          };
          num(".vgpr_count", u.vgprs);
          num(".sgpr_count", u.sgprs);
          num(".agpr_count", u.agprs);
          num(".vgpr_spill_count", u.vgpr_spills);
          num(".sgpr_spill_count", u.sgpr_spills);
          num(".private_segment_fixed_size", u.scratch_bytes);
          out.push_back(std::move(u));
        }
        return out;
      }
      at = desc_at + ((descsz + 3) & ~std::uint64_t{3});
    }
  }
  return bad("no NT_AMDGPU_METADATA note");
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
  DeviceDescription d = simt::device_description(index, name, memory_bytes, warp_size, max_threads_per_block,
                                                 max_block_x, max_shared_per_block);
  d.type = "discrete gpu";
  d.driver = api.version_text() + ", " + arch + ", " + std::to_string(compute_units) + " CUs";
  d.api = "HIP " + api.version_text().substr(12);
  d.int_dot = true;  // sdot4 on every arch of kSupportedArchs but gfx900 (the generator picks)
  d.int_dot_accelerated = arch != "gfx900";
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
  return simt::select_device<HipDevice>("hip", "HIP", option, hip_devices);
}

}  // namespace ternjit::targets::hip
