// SPDX-License-Identifier: Apache-2.0
// cuda_target_test.cpp - the cuda target: options, registry slot, unavailability, NVRTC output for every generated kernel, the cache key and damaged cubins.
//
// Cases tagged [nvrtc] need NVRTC (ctest: gpu/nvrtc, SKIPPED without the toolkit);
// [cuda_device] cases need a CUDA device (gpu/cuda_device, SKIPPED without one). The
// untagged cases run everywhere (unit/gpu). The kernels' logic is proven on the CPU by
// tests/unit/simt (the exact generated source under the SIMT emulator).
#include "targets/cuda/cuda_target.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "cache/artifact_codec.h"
#include "cache/entry.h"
#include "cache/key.h"
#include "ir/interpret.h"
#include "jit/kernel_cache.h"
#include "targets/common/device_weights.h"
#include "targets/simt/generate.h"
#include "targets/cuda/cuda_driver.h"
#include "targets/cuda/nvrtc.h"
#include "targets/registry.h"
#include "tests/unit/gpu/gpu_programs.h"

namespace ternjit {
namespace {

namespace fs = std::filesystem;
using gpu_testing::Program;

std::string message(const Result<void>& r) { return r.ok() ? "" : r.error().message; }

// A temporary directory removed at the end of a case.
struct TempDir {
  fs::path path;
  TempDir() {
    char tmpl[] = "/tmp/ternjit_cuda_test_XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

TEST_CASE("gpu: the registry holds cuda and hip first, in auto's order (CUDA, HIP, Vulkan GPU, CPU)") {
  const auto registry = targets::TargetRegistry::create();
  CHECK(registry.names().rfind("cuda, hip, spirv, x86, llvm, reference", 0) == 0);
  const targets::Target* cuda = registry.lookup("cuda");
  REQUIRE(cuda != nullptr);
  CHECK(cuda->kind() == targets::TargetKind::Gpu);
  CHECK(cuda->traits().decides_at_compile);
  CHECK(cuda->traits().artifact_kind == "cubin");
  // `ternjit compile` reaches a target that cannot run here through lookup().
  auto found = registry.find("cuda");
  if (!cuda->available().ok()) {
    REQUIRE(!found.ok());
    CHECK(found.error().code == ErrorCode::Unavailable);
    CHECK(found.error().message.find("target 'cuda' is unavailable: ") == 0);
  }
  // Without a device node, auto never even probes the driver and picks another target.
  if (!cuda->traits().may_have_gpu) {
    auto picked = registry.resolve("auto");
    REQUIRE(picked.ok());
    CHECK((*picked)->name() != "cuda");
    CHECK((*picked)->name() != "hip");
  }
}

TEST_CASE("cuda: options are validated, listing what is accepted") {
  auto t = targets::make_cuda_target();
  for (const char* arch : {"sm_80", "sm_86", "sm_89", "sm_90", "sm_90a"}) {
    targets::TargetOptions o;
    o.values["arch"] = arch;
    CHECK_MESSAGE(t->parse_options(o).ok(), arch);
  }
  for (auto [name, value] : std::initializer_list<std::pair<const char*, const char*>>{
           {"arch", "sm_70"}, {"arch", "compute_90"}, {"arch", ""}, {"device", "x"}, {"device", ""}, {"tile", "4"}}) {
    targets::TargetOptions o;
    o.values[name] = value;
    auto r = t->parse_options(o);
    REQUIRE(!r.ok());
    CHECK(r.error().code == ErrorCode::InvalidArgument);
    CHECK(r.error().message.find(name == std::string("tile") ? "cuda takes: arch, device" : "expected") !=
          std::string::npos);
  }
  CHECK(t->emit_forms() == std::vector<std::string_view>{"cuda", "ptx", "cubin"});
}

TEST_CASE("cuda: without a driver the target is unavailable with the reason, and describes itself") {
  if (targets::cuda::driver().ok()) return;  // a machine with a driver: the device cases cover it
  auto t = targets::make_cuda_target();
  auto ok = t->available();
  REQUIRE(!ok.ok());
  CHECK(ok.error().code == ErrorCode::Unavailable);
  CHECK(ok.error().message.find("libcuda.so.1") != std::string::npos);
  const TargetDescription d = t->describe();
  CHECK(d.name == "cuda");
  CHECK(d.kind == "gpu");
  CHECK(!d.available);
  CHECK(d.reason == ok.error().message);
  CHECK(t->devices().empty());
  CHECK(t->cache_key_text().find("toolchain=nvrtc ") != std::string::npos);
  CHECK(t->cache_key_text().find("; cuda driver none") != std::string::npos);
  // Loading needs the device: Unavailable, after the artifact itself was checked.
  targets::Artifact a;
  a.kind = "cubin";
  ir::ParamValues params;
  targets::LoadContext lc;
  lc.params = &params;
  auto k = t->load(a, lc);
  REQUIRE(!k.ok());
  CHECK(k.error().code == ErrorCode::InvalidInput);  // no metadata: refused before the driver is asked
}

TEST_CASE("cuda: the cache key's machine field changes with the NVRTC and driver versions") {
  using targets::cuda::toolchain_text;
  CHECK(toolchain_text(13, 0, 13000) == "nvrtc 13.0; cuda driver 13.0");
  CHECK(toolchain_text(12, 4, 12040) == "nvrtc 12.4; cuda driver 12.4");
  CHECK(toolchain_text(0, 0, 0) == "nvrtc none; cuda driver none");
  cache::ArtifactKeyInputs in;
  in.ir = "func @f() {}";
  in.function = "f";
  in.target = "cuda";
  in.machine = "toolchain=" + toolchain_text(13, 0, 13000);
  const std::string base = cache::artifact_key(in).hex();
  in.machine = "toolchain=" + toolchain_text(13, 1, 13000);  // another NVRTC
  CHECK(cache::artifact_key(in).hex() != base);
  in.machine = "toolchain=" + toolchain_text(13, 0, 12080);  // another driver
  CHECK(cache::artifact_key(in).hex() != base);
  in.machine = "toolchain=" + toolchain_text(13, 0, 13000);
  CHECK(cache::artifact_key(in).hex() == base);

  // The engine's key takes the target's cache_key_text() (device, features, toolchain)
  // and, through its options, the arch.
  auto t = targets::make_cuda_target();
  auto m = ir::parse_module(gpu_testing::tmatmul_tir(1, 64, 16, "i8", "none", false), "t.tir");
  REQUIRE(m.ok());
  std::string keys[2];
  int i = 0;
  for (const char* arch : {"sm_80", "sm_90"}) {
    targets::CompileOptions co;
    co.target.values["arch"] = arch;
    jit::KernelCacheConfig cfg;
    cfg.enabled = false;
    jit::KernelCache kc(cfg, {t.get(), nullptr});
    const cache::Key key = kc.key_of(*m, "f", co);
    CHECK(key.field("machine") == t->cache_key_text());
    CHECK(key.field("compile_options").find(std::string("arch=") + arch) != std::string_view::npos);
    keys[i++] = key.hex();
  }
  CHECK(keys[0] != keys[1]);
}

TEST_CASE("cuda: ptxas usage lines and cubin headers are read, damaged ones refused") {
  const auto u = targets::cuda::parse_ptxas_usage(
      "ptxas info    : 0 bytes gmem\nptxas info    : Compiling entry function 'tj_a' for 'sm_90'\n"
      "ptxas info    : Function properties for tj_a\nptxas         .     8 bytes stack frame, 4 bytes spill stores, "
      "12 bytes spill loads\nptxas info    : Used 40 registers, used 1 barriers, 380 bytes cmem[0]\n"
      "ptxas info    : Function properties for tj_b\n    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 10 registers\n");
  REQUIRE(u.size() == 2);
  CHECK(u[0].kernel == "tj_a");
  CHECK(u[0].registers == 40);
  CHECK(u[0].spill_stores == 4);
  CHECK(u[0].spill_loads == 12);
  CHECK(u[0].stack_bytes == 8);
  CHECK(u[1].registers == 10);
  CHECK(u[1].spill_stores == 0);

  std::vector<std::uint8_t> elf(64 + 64, 0);
  std::memcpy(elf.data(), "\x7f" "ELF", 4);
  elf[4] = 2;
  elf[5] = 1;
  elf[18] = 190;
  elf[40] = 64;  // e_shoff
  elf[58] = 64;  // e_shentsize
  elf[60] = 1;   // e_shnum
  CHECK_MESSAGE(targets::cuda::check_cubin(elf).ok(), message(targets::cuda::check_cubin(elf)));
  auto broken = elf;
  broken[18] = 62;  // x86-64
  CHECK(targets::cuda::check_cubin(broken).error().message.find("e_machine 62") != std::string::npos);
  broken = elf;
  broken[60] = 2;  // a section header past the end
  CHECK(!targets::cuda::check_cubin(broken).ok());
  CHECK(!targets::cuda::check_cubin(std::vector<std::uint8_t>(10, 0)).ok());
}

TEST_CASE("cuda: NVRTC compiles every generated kernel for sm_80 and sm_90 to cubin and PTX [nvrtc]") {
  auto t = targets::make_cuda_target();
  int compiled = 0, refused = 0;
  for (const Program& p : gpu_testing::programs()) {
    CAPTURE(p.name);
    const ir::Function& f = *p.module.find_function(p.function);
    if (auto s = t->check_supported(f); !s.ok()) {
      CHECK_MESSAGE(!p.must_support, s.error().message);
      CHECK(s.error().code == ErrorCode::Unsupported);
      // compile() refuses it the same way (auto then runs the function on the reference target).
      auto a = t->compile(p.module, p.function, {});
      REQUIRE(!a.ok());
      CHECK(a.error().code == ErrorCode::Unsupported);
      ++refused;
      continue;
    }
    for (const char* arch : {"sm_80", "sm_90"}) {
      CAPTURE(arch);
      targets::CompileOptions co;
      co.target.values["arch"] = arch;
      auto a = t->compile(p.module, p.function, co);
      REQUIRE_MESSAGE(a.ok(), (a.ok() ? "" : a.error().message));
      CHECK(a->kind == "cubin");
      CHECK_MESSAGE(targets::cuda::check_cubin(a->bytes).ok(), message(targets::cuda::check_cubin(a->bytes)));
      CHECK(a->metadata.at("arch") == arch);
      CHECK(a->metadata.at("bytes_digest") == targets::bytes_digest(a->bytes));
      const std::string& ptx = a->metadata.at("ptx");
      CHECK(ptx.find(std::string(".target ") + arch) != std::string::npos);
      // Every launch of the plan is an entry of the PTX and has its ptxas usage.
      const std::string kernels = a->metadata.at("kernels");
      REQUIRE(!kernels.empty());
      std::size_t count = 0, at = 0;
      while (at <= kernels.size()) {
        const std::size_t end = std::min(kernels.find(',', at), kernels.size());
        const std::string name = kernels.substr(at, end - at);
        CHECK_MESSAGE(ptx.find(".entry " + name + "(") != std::string::npos, name);
        CHECK_MESSAGE(a->metadata.at("usage_kernels").find(name + ":regs=") != std::string::npos, name);
        ++count;
        at = end + 1;
      }
      CHECK(a->metadata.at("usage").find("(ptxas)") != std::string::npos);
      CHECK(a->metadata.at("usage").find("regs<=") != std::string::npos);
      (void)count;
      // The artifact survives the cache codec and the signature check.
      auto back = cache::decode_artifact(cache::encode_artifact(*a));
      REQUIRE(back.ok());
      CHECK_MESSAGE(cache::check_artifact_signature(*back, p.module, p.function).ok(),
                    message(cache::check_artifact_signature(*back, p.module, p.function)));
    }
    ++compiled;
  }
  MESSAGE(compiled << " programs compiled for sm_80 and sm_90, " << refused << " refused as Unsupported");
  CHECK(compiled >= 16);
}

TEST_CASE("cuda: emit cuda, ptx and cubin without a device; bad forms and archs are errors [nvrtc]") {
  auto t = targets::make_cuda_target();
  auto m = ir::parse_module(gpu_testing::tmatmul_tir(3, 130, 17, "i8", "relu", true), "t.tir");
  REQUIRE(m.ok());
  targets::CompileOptions co;
  auto src = t->emit(*m, "f", "cuda", co, nullptr);
  REQUIRE_MESSAGE(src.ok(), (src.ok() ? "" : src.error().message));
  CHECK(src->text.find("extern \"C\" __global__") != std::string::npos);
  CHECK(src->text.find("__dp4a") != std::string::npos);
  CHECK(src->text.find("grid (") != std::string::npos);
  auto ptx = t->emit(*m, "f", "ptx", co, nullptr);
  REQUIRE_MESSAGE(ptx.ok(), (ptx.ok() ? "" : ptx.error().message));
  if (!targets::cuda::driver().ok()) CHECK(ptx->text.find(".target sm_90") != std::string::npos);  // the default arch
  co.target.values["arch"] = "sm_86";
  auto cubin = t->emit(*m, "f", "cubin", co, nullptr);
  REQUIRE(cubin.ok());
  CHECK(cubin->binary);
  CHECK(targets::cuda::check_cubin(std::vector<std::uint8_t>(cubin->text.begin(), cubin->text.end())).ok());
  auto bad = t->emit(*m, "f", "hsaco", co, nullptr);
  REQUIRE(!bad.ok());
  CHECK(bad.error().code == ErrorCode::InvalidArgument);
  // An arch NVRTC does not know is refused by the wrapper with the list it takes.
  auto old = targets::cuda::nvrtc_compile("extern \"C\" __global__ void k() {}", "k", "sm_70", true);
  REQUIRE(!old.ok());
  CHECK(old.error().message.find("sm_80") != std::string::npos);
  // A compile error carries the log and the numbered source as notes.
  auto broken = targets::cuda::nvrtc_compile("extern \"C\" __global__ void k() { undeclared(); }", "k", "sm_90", true);
  REQUIRE(!broken.ok());
  CHECK(broken.error().code == ErrorCode::Internal);
  REQUIRE(broken.error().diagnostics.size() == 2);
  CHECK(broken.error().diagnostics[0].message.find("undeclared") != std::string::npos);
}

TEST_CASE("cuda: compile-time decisions come from the tuning spaces and change the source [nvrtc]") {
  auto t = targets::make_cuda_target();
  auto m = ir::parse_module(gpu_testing::tmatmul_tir(1, 512, 40, "i8", "none", false), "t.tir");
  REQUIRE(m.ok());
  auto spaces = t->tuning_spaces(*m, "f", {});
  REQUIRE(spaces.ok());
  REQUIRE(spaces->size() == 1);
  const auto candidates = (*spaces)[0]->candidates();
  REQUIRE(candidates.size() >= 2);
  targets::CompileOptions a, b;
  a.decisions = {(*spaces)[0]->default_config()};
  std::string other;
  for (const auto& c : candidates)
    if (c.config != a.decisions[0]) {
      other = c.config;
      break;
    }
  b.decisions = {other};
  auto ea = t->compile(*m, "f", a), eb = t->compile(*m, "f", b);
  REQUIRE(ea.ok());
  REQUIRE_MESSAGE(eb.ok(), (eb.ok() ? "" : eb.error().message));
  CHECK(ea->metadata.at("decisions") == a.decisions[0]);
  CHECK(ea->metadata.at("source_digest") != eb->metadata.at("source_digest"));
  // A bench needs a device: Unavailable here, never a crash.
  if (!t->available().ok()) CHECK(!(*spaces)[0]->bench({}).ok());
}

TEST_CASE("cuda: a damaged cubin in the disk cache is detected, dropped and recompiled [nvrtc]") {
  TempDir dir;
  auto t = targets::make_cuda_target();
  auto m = ir::parse_module(gpu_testing::tmatmul_tir(2, 100, 13, "i8", "relu", false), "t.tir");
  REQUIRE(m.ok());
  jit::KernelCacheConfig cfg;
  cfg.enabled = true;
  cfg.disk.dir = dir.path.string();
  std::vector<std::string> log;
  cfg.disk.log = [&](std::string_view line) { log.emplace_back(line); };
  jit::KernelCache kc(cfg, {t.get(), nullptr});
  int compiles = 0;
  auto compile = [&]() -> Result<targets::Artifact> {
    ++compiles;
    return t->compile(*m, "f", {});
  };
  jit::DiskState state = jit::DiskState::Off;
  auto first = kc.get_or_compile(*m, "f", {}, compile, &state);
  REQUIRE_MESSAGE(first.ok(), (first.ok() ? "" : first.error().message));
  CHECK(state == jit::DiskState::Miss);
  auto hit = kc.get_or_compile(*m, "f", {}, compile, &state);
  REQUIRE(hit.ok());
  CHECK(state == jit::DiskState::Hit);
  CHECK(compiles == 1);
  CHECK(hit->bytes == first->bytes);

  // The entry's file, found by the key's hash.
  const cache::Key key = kc.key_of(*m, "f", {});
  fs::path file;
  for (const auto& e : fs::recursive_directory_iterator(dir.path))
    if (e.path().filename().string().rfind(key.hex(), 0) == 0) file = e.path();
  REQUIRE(!file.empty());
  auto read = [&] {
    std::ifstream in(file, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  auto write = [&](const std::string& bytes) {
    const auto perms = fs::status(file).permissions();
    fs::remove(file);
    std::ofstream(file, std::ios::binary) << bytes;
    fs::permissions(file, perms);
  };

  SUBCASE("a cubin damaged inside a well-formed entry (its checksum recomputed)") {
    const std::string stored = read();  // decode_entry's payload is a view into it
    auto entry = cache::decode_entry(stored);
    REQUIRE(entry.ok());
    auto art = cache::decode_artifact(entry->payload);
    REQUIRE(art.ok());
    art->bytes[art->bytes.size() / 2] ^= 0x40;  // one bit of the code
    write(cache::encode_entry(cache::EntryKind::Artifact, key, cache::encode_artifact(*art)));
    // load() refuses it on its own as well, before any driver is asked.
    ir::ParamValues params;
    targets::LoadContext lc;
    lc.params = &params;
    auto k = t->load(*art, lc);
    REQUIRE(!k.ok());
    CHECK(k.error().code == ErrorCode::InvalidInput);
    CHECK(k.error().message.find("digest") != std::string::npos);
  }
  SUBCASE("a flipped byte in the entry file") {
    std::string bytes = read();
    bytes[bytes.size() - 100] ^= 0x01;
    write(bytes);
  }
  auto again = kc.get_or_compile(*m, "f", {}, compile, &state);
  REQUIRE(again.ok());
  CHECK(state == jit::DiskState::Miss);
  CHECK(compiles == 2);
  CHECK(again->bytes == first->bytes);
  CHECK(!log.empty());  // the dropped entry is reported
  auto healed = kc.get_or_compile(*m, "f", {}, compile, &state);
  REQUIRE(healed.ok());
  CHECK(state == jit::DiskState::Hit);
  CHECK(compiles == 2);

  // `ternjit cache ls` shows the entry's recorded register and spill counts and its toolchain.
  const std::string cmd = std::string(TERNJIT_BINARY_DIR) + "/tools/ternjit/ternjit cache --dir '" +
                          dir.path.string() + "' ls 2>&1";
  FILE* pipe = ::popen(cmd.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string listing;
  char buf[512];
  while (std::fgets(buf, sizeof buf, pipe)) listing += buf;
  CHECK(::pclose(pipe) == 0);
  CAPTURE(listing);
  CHECK(listing.find("target=cuda") != std::string::npos);
  CHECK(listing.find("usage: kernels=") != std::string::npos);
  CHECK(listing.find("regs<=") != std::string::npos);
  CHECK(listing.find("(ptxas)") != std::string::npos);
  CHECK(listing.find(t->cache_key_text()) != std::string::npos);
}

TEST_CASE("cuda: a cubin for another arch or damaged headers are refused at load [nvrtc]") {
  auto t = targets::make_cuda_target();
  auto m = ir::parse_module(gpu_testing::tmatmul_tir(1, 64, 8, "i8", "none", false), "t.tir");
  REQUIRE(m.ok());
  auto a = t->compile(*m, "f", {});
  REQUIRE(a.ok());
  ir::ParamValues params;
  targets::LoadContext lc;
  lc.params = &params;
  auto elf = *a;
  elf.bytes[18] = 62;  // e_machine x86-64, digest made consistent: the ELF check catches it
  elf.metadata["bytes_digest"] = targets::bytes_digest(elf.bytes);
  auto k = t->load(elf, lc);
  REQUIRE(!k.ok());
  CHECK(k.error().message.find("e_machine") != std::string::npos);
  auto stale = *a;
  stale.metadata["source_digest"] = "0000000000000000";
  if (targets::cuda::driver().ok()) {
    auto s = t->load(stale, lc);
    CHECK(!s.ok());
  }
}

// ---- On a CUDA device (gpu/cuda_device): every program against the interpreter. ----

TEST_CASE("cuda: every program on the device against the interpreter, weights once per Program [cuda_device]") {
  auto t = targets::make_cuda_target();
  REQUIRE(t->available().ok());
  CHECK(gpu_testing::run_on_device(*t, "(cuFuncGetAttribute)") >= 16);
}

}  // namespace
}  // namespace ternjit
