// SPDX-License-Identifier: Apache-2.0
// driver_target.h - what the cuda and hip targets share around their driver: artifact metadata and checks, the load and tuning skeletons, listings.
//
// The two targets differ in their compiler (NVRTC / hiprtc), their binary (cubin /
// AMDGPU code object) and their driver (libcuda / libamdhip64); everything else they do
// with a KernelSet is here. A target compiles generate()'s source, records the IR and
// the decisions in its artifact, and at load regenerates the KernelSet from them (the
// source digest proves it matches the binary), loads the binary with its driver and
// hands the functions to load_kernel_set().
#pragma once

#include <cstddef>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "targets/simt/device_kernels.h"
#include "targets/simt/generate.h"
#include "targets/simt/tuning_space.h"
#include "targets/target.h"
#include "ternjit/result.h"

namespace ternjit::targets::simt {

/// The kernel names of `p`, in launch order.
std::vector<std::string> kernel_names(const KernelSet& p);

/// The digest of a generated source (bytes_digest of its text): an artifact's proof that
/// the KernelSet regenerated at load is the one its binary was compiled from.
std::string source_digest(const std::string& source);

/// One comment line per launch of `p` ("//   name grid (x, y, z) block (x, y, z) shared N"),
/// what `--emit cuda|hip` prints above the source.
std::string launch_lines(const KernelSet& p);

/// The target-level part of `target`'s description: name, kind, and whether it is
/// available (else the reason); the caller adds its device and features.
TargetDescription target_description(const Target& target);

/// Every device of `devices` as `ternjit info` lists it (Device::description(api)),
/// device 0 selected; none when either lookup failed.
template <class Device, class Api>
std::vector<DeviceDescription> device_descriptions(const Result<const std::vector<Device>*>& devices,
                                                   const Result<const Api*>& api) {
  std::vector<DeviceDescription> out;
  if (!devices.ok() || !api.ok()) return out;
  for (const Device& d : **devices) {
    out.push_back(d.description(**api));
    out.back().selected = d.index == 0;
  }
  return out;
}

/// Checks what every artifact of `target` must hold before its binary is read: the kind
/// `kind`, each metadata entry of `fields`, and bytes matching "bytes_digest" (else
/// InvalidInput: "<target> artifact: `damaged`").
Result<void> check_artifact(const Artifact& a, std::string_view target, std::string_view kind,
                            std::initializer_list<const char*> fields, std::string_view damaged);

/// The module in an artifact's "ir" metadata (the entry is a.entry). Errors: as parse_artifact_module.
Result<ir::Module> artifact_module(const Artifact& a);

/// Success when the source of `p` has digest `digest`; else InvalidInput (a stale or
/// damaged entry of `target`).
Result<void> check_source_digest(const KernelSet& p, std::string_view target, const std::string& digest);

/// Makes a LoadedKernel of `p`, function `entry` of `m`: evaluates its load-time values
/// from context.params (precondition: not null), uploads them and its weights through
/// DeviceKernels::create (`functions` in p.kernels order, kept valid by `module_owner`;
/// weights shared through context.state when it is DeviceWeights). Sets run, launch,
/// state and owner; the caller sets isa and device_handles. Errors: as DeviceKernels::create.
Result<LoadedKernel> load_kernel_set(Dialect dialect, const ir::Module& m, std::string_view entry, KernelSet p,
                                     std::shared_ptr<const GpuApi> api, const std::string& device_key,
                                     std::vector<void*> functions, std::shared_ptr<const void> module_owner,
                                     const LoadContext& context);

/// Function `function` of `specialized` when generate() supports it. Errors: NotFound
/// for a missing function, Unsupported (supported()).
Result<const ir::Function*> supported_function(const ir::Module& specialized, std::string_view function);

/// One tuning space per tmatmul of `f` (tmatmul_shapes() order), described by `o`,
/// timed by the bench of `target` (make_gpu_bench_factory) with `options`.
std::vector<std::unique_ptr<TuningSpace>> tmatmul_spaces(const ir::Function& f, const SpaceOptions& o,
                                                         const Target& target, const TargetOptions& options);

}  // namespace ternjit::targets::simt
