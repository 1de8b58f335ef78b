// SPDX-License-Identifier: Apache-2.0
// gpu_probe.cpp - `gpu_probe nvrtc|hiprtc|cuda|hip`: exit 0 when that toolchain or device is here, else print why and exit 77 (ctest: SKIPPED).
#include <cstdio>
#include <cstring>

#include "targets/cuda/cuda_target.h"
#include "targets/cuda/nvrtc.h"
#include "targets/hip/hip_api.h"
#include "targets/hip/hip_target.h"

int main(int argc, char** argv) {
  using namespace ternjit::targets;
  const char* what = argc > 1 ? argv[1] : "";
  ternjit::Result<void> ok = ternjit::make_error(ternjit::ErrorCode::InvalidArgument, "usage: gpu_probe nvrtc|hiprtc|cuda|hip");
  if (std::strcmp(what, "nvrtc") == 0) {
    auto n = cuda::nvrtc_info();
    ok = n.ok() ? ternjit::success() : ternjit::Result<void>(n.error());
  } else if (std::strcmp(what, "hiprtc") == 0) {
    auto h = hip::hiprtc_version();
    ok = h.ok() ? ternjit::success() : ternjit::Result<void>(h.error());
  } else if (std::strcmp(what, "cuda") == 0) {
    ok = make_cuda_target()->available();
  } else if (std::strcmp(what, "hip") == 0) {
    ok = make_hip_target()->available();
  }
  if (!ok.ok()) {
    std::printf("SKIP: %s: %s\n", what, ok.error().message.c_str());
    return 77;
  }
  std::printf("%s: available\n", what);
  return 0;
}
