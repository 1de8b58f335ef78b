// SPDX-License-Identifier: Apache-2.0
// registry_test.cpp - the target registry, host CPU detection, Engine::create target resolution.
#include <doctest/doctest.h>

#include "targets/host_cpu.h"
#include "targets/registry.h"
#include "tests/unit/engine/engine_testing.h"

namespace ternjit {
namespace {

TEST_CASE("registry: the table holds the reference target, available, with a device") {
  auto reg = targets::TargetRegistry::create();
  REQUIRE(!reg.all().empty());
  const targets::Target& last = *reg.all().back();
  CHECK(last.name() == "reference");  // the interpreter is the last resort of `auto`
  CHECK(last.kind() == targets::TargetKind::Interpreter);
  CHECK(last.available().ok());
  TargetDescription d = last.describe();
  CHECK(d.name == "reference");
  CHECK(d.kind == "interpreter");
  CHECK(d.available);
  CHECK_FALSE(d.device.empty());
  CHECK(reg.names().find("reference") != std::string::npos);
}

TEST_CASE("registry: find, auto and unknown names") {
  auto reg = targets::TargetRegistry::create();
  auto ref = reg.find("reference");
  REQUIRE(ref.ok());
  CHECK((*ref)->name() == "reference");
  auto a = reg.resolve("auto");
  REQUIRE(a.ok());
  // auto = the first available target in table order, but never a GPU target whose
  // device is a CPU implementation (Vulkan on lavapipe describes itself as kind "cpu").
  for (const auto& t : reg.all()) {
    if (t->kind() == targets::TargetKind::Gpu && t->describe().kind != "gpu") continue;
    if (t->available().ok()) {
      CHECK((*a)->name() == t->name());
      break;
    }
  }
  auto bad = reg.find("cuda-ish");
  CHECK(bad.error().code == ErrorCode::NotFound);
  CHECK(bad.error().message.find("unknown target 'cuda-ish'") != std::string::npos);
  CHECK(bad.error().message.find("reference") != std::string::npos);  // lists the known ones
}

TEST_CASE("host cpu: model, memory and consistent features") {
  targets::HostCpu cpu = targets::detect_host_cpu();
  CHECK_FALSE(cpu.model.empty());
  CHECK(cpu.memory_bytes > 0);
  CHECK(cpu.logical_cores > 0);
  // AVX-512 VNNI implies AVX-512F; both are reported only when the OS enables them.
  if (cpu.has("avx512vnni")) CHECK(cpu.has("avx512f"));
  if (cpu.has("avx512f")) CHECK(cpu.has("avx2"));
  CHECK(cpu.feature_string().find("  ") == std::string::npos);
}

TEST_CASE("Engine::create: auto, reference and an unknown target") {
  EngineOptions o;
  auto a = Engine::create(o);
  REQUIRE(a.ok());
  CHECK_FALSE(a->target_name().empty());
  CHECK(a->options().target == "auto");

  o.target = "reference";
  auto r = Engine::create(o);
  REQUIRE(r.ok());
  CHECK(r->target_name() == "reference");

  o.target = "quantum";
  auto u = Engine::create(o);
  REQUIRE_FALSE(u.ok());
  CHECK(u.error().code == ErrorCode::NotFound);
  CHECK(u.error().message.rfind("unknown target 'quantum' (known: auto, ", 0) == 0);
}

TEST_CASE("Engine::targets lists every registered target with availability") {
  Engine e = testing::reference_engine();
  auto table = e.targets();
  REQUIRE(!table.empty());
  bool found = false;
  for (const TargetDescription& d : table) {
    if (d.name != "reference") continue;
    found = true;
    CHECK(d.available);
    CHECK(d.reason.empty());
    CHECK(d.memory_bytes > 0);
  }
  CHECK(found);
}

}  // namespace
}  // namespace ternjit
