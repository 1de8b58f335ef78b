// SPDX-License-Identifier: Apache-2.0
// spirv_probe.cpp - exit 0 when the spirv target finds a Vulkan device, else print why and exit 77 (ctest: SKIPPED).
#include <cstdio>

#include "targets/spirv/spirv_target.h"

int main() {
  auto target = ternjit::targets::make_spirv_target();
  if (auto ok = target->available(); !ok.ok()) {
    std::printf("SKIP: no Vulkan device for the spirv target: %s\n", ok.error().message.c_str());
    return 77;
  }
  std::printf("spirv: %s\n", target->describe().device.c_str());
  return 0;
}
