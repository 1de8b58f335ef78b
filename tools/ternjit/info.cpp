// SPDX-License-Identifier: Apache-2.0
// info.cpp - `ternjit info`: the target table (availability, device, memory, features, devices) and `auto`'s pick.
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "targets/registry.h"
#include "ternjit/engine.h"
#include "tools/ternjit/commands.h"

namespace ternjit::cli {

namespace {

std::string human_bytes(std::uint64_t b) {
  if (b == 0) return "-";
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", v, kUnits[u]);
  return buf;
}

// The devices of target `name` (GPU targets; none for the others).
std::vector<targets::DeviceDescription> devices_of(const targets::TargetRegistry& registry, const std::string& name) {
  const targets::Target* t = registry.lookup(name);
  return t ? t->devices() : std::vector<targets::DeviceDescription>{};
}

nlohmann::json device_json(const targets::DeviceDescription& d) {
  return {{"index", d.index},
          {"name", d.name},
          {"type", d.type},
          {"driver", d.driver},
          {"api", d.api},
          {"memory_bytes", d.memory_bytes},
          {"subgroup_size", d.subgroup_size},
          {"int_dot", d.int_dot},
          {"int_dot_accelerated", d.int_dot_accelerated},
          {"selected", d.selected},
          {"limits",
           {{"max_workgroup_invocations", d.limits.max_workgroup_invocations},
            {"max_workgroup_size_x", d.limits.max_workgroup_size_x},
            {"max_shared_bytes", d.limits.max_shared_bytes},
            {"max_buffer_bytes", d.limits.max_buffer_bytes}}}};
}

// The devices as a table under their target's row; `*` marks the one the target uses.
void print_devices(const std::vector<targets::DeviceDescription>& devices) {
  if (devices.empty()) return;
  int name_width = 4;
  for (const targets::DeviceDescription& d : devices)
    name_width = std::max(name_width, static_cast<int>(d.name.size()));
  std::printf("  %-10s devices:\n", "");
  std::printf("  %-10s   %-3s %-15s %-10s %-8s %-11s %-6s %-8s %-10s %-14s %-*s %s\n", "", "#", "type", "memory",
              "subgroup", "int dot", "max wg", "shared", "buffer", "api", name_width, "name", "driver");
  for (const targets::DeviceDescription& d : devices) {
    const std::string index = std::to_string(d.index) + (d.selected ? "*" : "");
    const char* dot = d.int_dot ? (d.int_dot_accelerated ? "accelerated" : "yes") : "no";
    std::printf("  %-10s   %-3s %-15s %-10s %-8u %-11s %-6u %-8s %-10s %-14s %-*s %s\n", "", index.c_str(),
                d.type.c_str(), human_bytes(d.memory_bytes).c_str(), d.subgroup_size, dot,
                d.limits.max_workgroup_invocations, human_bytes(d.limits.max_shared_bytes).c_str(),
                human_bytes(d.limits.max_buffer_bytes).c_str(), d.api.c_str(), name_width, d.name.c_str(),
                d.driver.c_str());
  }
}

}  // namespace

int cmd_info(bool json) {
  // The registry is per engine; an engine on `auto` shows the table and the pick.
  EngineOptions options;
  options.target = "auto";
  options.cache_dir = "off";  // info reads nothing from the cache: never create its directory
  auto engine = Engine::create(options);
  if (!engine.ok()) return report(engine.error());
  // The device lists come from the targets themselves (targets/target.h devices()).
  const targets::TargetRegistry registry = targets::TargetRegistry::create();
  if (json) {
    nlohmann::json targets = nlohmann::json::array();
    for (const TargetDescription& t : engine->targets())
      targets.push_back({{"name", t.name},
                         {"kind", t.kind},
                         {"available", t.available},
                         {"reason", t.reason},
                         {"device", t.device},
                         {"memory_bytes", t.memory_bytes},
                         {"features", t.features},
                         {"numerics", t.numerics},
                         {"abs_error_floor", t.abs_error_floor},
                         {"devices", [&] {
                            nlohmann::json list = nlohmann::json::array();
                            for (const auto& d : devices_of(registry, t.name)) list.push_back(device_json(d));
                            return list;
                          }()}});
    const nlohmann::json j = {{"targets", targets}, {"auto", engine->target_name()}};
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("targets, in `auto` priority order:\n");
  std::printf("  %-10s %-12s %-10s %-10s %s\n", "name", "kind", "status", "memory", "device");
  for (const TargetDescription& t : engine->targets()) {
    std::printf("  %-10s %-12s %-10s %-10s %s\n", t.name.c_str(), t.kind.c_str(),
                t.available ? "available" : "no", human_bytes(t.memory_bytes).c_str(),
                t.device.empty() ? "-" : t.device.c_str());
    if (!t.available) std::printf("  %-10s reason: %s\n", "", t.reason.c_str());
    std::printf("  %-10s features: %s\n", "", t.features.empty() ? "-" : t.features.c_str());
    if (!t.numerics.empty()) std::printf("  %-10s numerics: %s\n", "", t.numerics.c_str());
    print_devices(devices_of(registry, t.name));
  }
  std::printf("auto -> %s\n", engine->target_name().c_str());
  return 0;
}

}  // namespace ternjit::cli
