// SPDX-License-Identifier: Apache-2.0
// tmatmul_space.h - the SPIR-V tmatmul knobs (workgroup width, rows per invocation) as a TuningSpace with a bench.
#pragma once

#include <memory>

#include "targets/spirv/kernel.h"
#include "targets/tuning.h"

namespace ternjit::targets::spirv {

/// The configuration a shader gets when nothing better is known: 64-wide workgroups,
/// and for a tmatmul 1 row per invocation at M = 1 (a GEMV), else 4.
ShaderConfig default_config(const Shader& shader);

/// The tuning space of tmatmul shader `shader` on `device` ("spirv.tmatmul"; family:
/// K, N, activation kind, dot path and the device key). `device` null: the space is
/// described (candidates for the generic limits) but its bench is Unavailable.
std::unique_ptr<TuningSpace> make_tmatmul_space(const Shader& shader, std::shared_ptr<Device> device,
                                                const DeviceInfo* info, bool int_dot);

}  // namespace ternjit::targets::spirv
