// SPDX-License-Identifier: Apache-2.0
// hip_target_test.cpp - the hip target: options and the arch list (refused before hiprtc), unavailability, hiprtc code objects.
//
// [hiprtc] cases need hiprtc (ctest: gpu/hiprtc, SKIPPED without libamdhip64); the
// untagged ones run everywhere (unit/gpu). Running on an AMD GPU is not tested here:
// the kernels' logic is proven by tests/unit/simt under the SIMT emulator.
#include "targets/hip/hip_target.h"

#include <doctest/doctest.h>

#include <cstring>

#include "cache/artifact_codec.h"
#include "targets/hip/hip_api.h"
#include "targets/registry.h"
#include "tests/unit/gpu/gpu_programs.h"

namespace ternjit {
namespace {

// e_flags' EF_AMDGPU_MACH (the low byte) of an AMDGPU ELF.
unsigned amdgpu_mach(const std::vector<std::uint8_t>& elf) { return elf.at(48); }

TEST_CASE("hip: an arch outside this ROCm's list is refused with a message before hiprtc is called") {
  // gfx1100, gfx942 and unknown names abort the process inside ROCm 5.2's hiprtc: if
  // the check did not come first this test would die instead of failing.
  for (const char* arch : {"gfx1100", "gfx942", "gfx9999", "", "sm_90"}) {
    CAPTURE(arch);
    auto r = targets::hip::compile_hip("this is not HIP", "k", arch);
    REQUIRE(!r.ok());
    CHECK(r.error().code == ErrorCode::InvalidArgument);
    CHECK(r.error().message.find("gfx90a, gfx908, gfx900, gfx1030") != std::string::npos);
  }
  auto t = targets::make_hip_target();
  targets::TargetOptions o;
  o.values["offload_arch"] = "gfx90a,gfx1100";
  auto p = t->parse_options(o);
  REQUIRE(!p.ok());
  CHECK(p.error().message.find("'gfx1100'") != std::string::npos);
  auto m = ir::parse_module(gpu_testing::tmatmul_tir(1, 64, 8, "i8", "none", false), "t.tir");
  REQUIRE(m.ok());
  targets::CompileOptions co;
  co.target.values["offload_arch"] = "gfx1100";
  auto a = t->compile(*m, "f", co);
  REQUIRE(!a.ok());
  CHECK(a.error().code == ErrorCode::InvalidArgument);
  auto e = t->emit(*m, "f", "hsaco", co, nullptr);
  REQUIRE(!e.ok());
}

TEST_CASE("hip: options, forms and the offload-arch list") {
  auto t = targets::make_hip_target();
  targets::TargetOptions o;
  o.values["offload_arch"] = "gfx90a, gfx1030,gfx90a";
  REQUIRE(t->parse_options(o).ok());
  auto archs = targets::hip::parse_offload_archs("gfx90a, gfx1030,gfx90a");
  REQUIRE(archs.ok());
  CHECK(*archs == std::vector<std::string>{"gfx90a", "gfx1030"});
  CHECK(!targets::hip::parse_offload_archs("").ok());
  CHECK(targets::hip::wave_size("gfx90a") == 64);
  CHECK(targets::hip::wave_size("gfx1030") == 32);
  o.values.clear();
  o.values["arch"] = "gfx90a";
  CHECK(t->parse_options(o).error().message.find("hip takes: offload_arch, device") != std::string::npos);
  CHECK(t->emit_forms() == std::vector<std::string_view>{"hip", "hsaco"});
  CHECK(t->traits().decides_at_compile);
}

TEST_CASE("hip: without an AMD GPU the target is unavailable with the reason") {
  auto t = targets::make_hip_target();
  if (t->available().ok()) return;
  const TargetDescription d = t->describe();
  CHECK(d.name == "hip");
  CHECK(d.kind == "gpu");
  CHECK(!d.available);
  CHECK(!d.reason.empty());
  CHECK(t->devices().empty());
  const auto registry = targets::TargetRegistry::create();
  auto found = registry.find("hip");
  REQUIRE(!found.ok());
  CHECK(found.error().code == ErrorCode::Unavailable);
}

TEST_CASE("hip: emit hip source without hiprtc: wave64 for gfx90a, wave32 for gfx1030") {
  auto t = targets::make_hip_target();
  auto m = ir::parse_module(gpu_testing::tmatmul_tir(3, 130, 17, "i8", "relu", true), "t.tir");
  REQUIRE(m.ok());
  targets::CompileOptions co;
  co.target.values["offload_arch"] = "gfx90a,gfx1030";
  auto src = t->emit(*m, "f", "hip", co, nullptr);
  REQUIRE_MESSAGE(src.ok(), (src.ok() ? "" : src.error().message));
  CHECK(src->text.find("on hip (gfx90a, wave64)") != std::string::npos);
  CHECK(src->text.find("on hip (gfx1030, wave32)") != std::string::npos);
  CHECK(src->text.find("__builtin_amdgcn_sdot4") != std::string::npos);
  CHECK(src->text.find("extern \"C\" __global__") != std::string::npos);
}

TEST_CASE("hip: hiprtc produces AMDGPU code objects for gfx90a (and one per offload arch) [hiprtc]") {
  auto t = targets::make_hip_target();
  int compiled = 0;
  for (const gpu_testing::Program& p : gpu_testing::programs()) {
    CAPTURE(p.name);
    if (!t->check_supported(*p.module.find_function(p.function)).ok()) {
      CHECK(!p.must_support);
      continue;
    }
    auto a = t->compile(p.module, p.function, {});  // no device: the default gfx90a
    REQUIRE_MESSAGE(a.ok(), (a.ok() ? "" : a.error().message));
    CHECK(a->kind == "hsaco");
    CHECK_MESSAGE(targets::hip::check_code_object(a->bytes).ok(), p.name);
    CHECK(a->bytes[18] == 224);        // e_machine EM_AMDGPU
    CHECK(amdgpu_mach(a->bytes) == 0x3f);  // EF_AMDGPU_MACH_AMDGCN_GFX90A
    CHECK(a->metadata.at("code_objects").rfind("gfx90a:0:", 0) == 0);
    // Every kernel's registers and spills, read from the code object's metadata note.
    auto used = targets::hip::code_object_usage(a->bytes);
    REQUIRE_MESSAGE(used.ok(), (used.ok() ? "" : used.error().message));
    REQUIRE(!used->empty());
    for (const targets::hip::KernelUsage& u : *used) {
      CAPTURE(u.name);
      CHECK(u.name.rfind("tj_", 0) == 0);
      CHECK(u.vgprs > 0);
      CHECK(u.sgprs > 0);
      CHECK(u.vgpr_spills == 0);
      CHECK(u.scratch_bytes >= 0);
      CHECK(a->metadata.at("usage_kernels").find("gfx90a/" + u.name + ":vgprs=" + std::to_string(u.vgprs)) !=
            std::string::npos);
    }
    CHECK(a->metadata.at("usage").rfind("gfx90a kernels=" + std::to_string(used->size()), 0) == 0);
    CHECK(cache::check_artifact_signature(*a, p.module, p.function).ok());
    ++compiled;
    if (compiled > 4) break;  // hiprtc takes ~0.3 s per program: a few layers and ops are enough here
  }
  CHECK(compiled >= 5);

  auto m = ir::parse_module(gpu_testing::tmatmul_tir(1, 100, 9, "i8", "none", false), "t.tir");
  REQUIRE(m.ok());
  targets::CompileOptions co;
  co.target.values["offload_arch"] = "gfx90a,gfx1030";
  auto two = t->compile(*m, "f", co);
  REQUIRE_MESSAGE(two.ok(), (two.ok() ? "" : two.error().message));
  const std::string& table = two->metadata.at("code_objects");
  CHECK(table.find("gfx1030:") != std::string::npos);
  const std::size_t at = table.find("gfx1030:") + 8;
  const std::size_t offset = std::stoull(table.substr(at));
  const std::vector<std::uint8_t> second(two->bytes.begin() + static_cast<std::ptrdiff_t>(offset), two->bytes.end());
  CHECK(targets::hip::check_code_object(second).ok());
  CHECK(amdgpu_mach(second) == 0x36);  // EF_AMDGPU_MACH_AMDGCN_GFX1030

  co.target.values["offload_arch"] = "gfx908";
  auto obj = t->emit(*m, "f", "hsaco", co, nullptr);
  REQUIRE(obj.ok());
  CHECK(obj->binary);
  const std::vector<std::uint8_t> bytes(obj->text.begin(), obj->text.end());
  CHECK(targets::hip::check_code_object(bytes).ok());
  CHECK(amdgpu_mach(bytes) == 0x30);  // EF_AMDGPU_MACH_AMDGCN_GFX908
  co.target.values["offload_arch"] = "gfx90a,gfx908";
  CHECK(!t->emit(*m, "f", "hsaco", co, nullptr).ok());  // one code object per --emit hsaco

  // A truncated or damaged metadata note is an error, never an out-of-bounds read.
  std::vector<std::uint8_t> cut(second.begin(), second.begin() + static_cast<std::ptrdiff_t>(second.size() / 2));
  CHECK(!targets::hip::code_object_usage(cut).ok());
  for (std::size_t at = 64; at < second.size(); at += 97) {
    std::vector<std::uint8_t> flipped = second;
    flipped[at] ^= 0xff;
    (void)targets::hip::code_object_usage(flipped);  // any answer but a crash (ASan stage)
  }
  // A damaged code object is refused at load before any device is asked.
  auto damaged = *two;
  damaged.bytes[damaged.bytes.size() / 3] ^= 1;
  ir::ParamValues params;
  targets::LoadContext lc;
  lc.params = &params;
  auto k = t->load(damaged, lc);
  REQUIRE(!k.ok());
  CHECK(k.error().code == ErrorCode::InvalidInput);
  CHECK(!cache::check_artifact_signature(damaged, *m, "f").ok());
}

TEST_CASE("hip: every program on the AMD GPU against the interpreter, weights once per Program [hip_device]") {
  auto t = targets::make_hip_target();
  REQUIRE(t->available().ok());
  CHECK(gpu_testing::run_on_device(*t, "") >= 16);
}

}  // namespace
}  // namespace ternjit
