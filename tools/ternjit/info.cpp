// SPDX-License-Identifier: Apache-2.0
// info.cpp - `ternjit info`: the target table (availability, device, memory, features) and `auto`'s pick.
#include <nlohmann/json.hpp>

#include <cstdio>

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

}  // namespace

int cmd_info(bool json) {
  // The registry is per engine; an engine on `auto` shows the table and the pick.
  EngineOptions options;
  options.target = "auto";
  options.cache_dir = "off";  // info reads nothing from the cache: never create its directory
  auto engine = Engine::create(options);
  if (!engine.ok()) return report(engine.error());
  if (json) {
    nlohmann::json targets = nlohmann::json::array();
    for (const TargetDescription& t : engine->targets())
      targets.push_back({{"name", t.name},
                         {"kind", t.kind},
                         {"available", t.available},
                         {"reason", t.reason},
                         {"device", t.device},
                         {"memory_bytes", t.memory_bytes},
                         {"features", t.features}});
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
  }
  std::printf("auto -> %s\n", engine->target_name().c_str());
  return 0;
}

}  // namespace ternjit::cli
