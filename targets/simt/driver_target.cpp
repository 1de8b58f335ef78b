// SPDX-License-Identifier: Apache-2.0
// driver_target.cpp - the cuda and hip targets' shared metadata, artifact checks, load and tuning skeletons.
#include "targets/simt/driver_target.h"

#include <cstdio>

#include "targets/common/device_weights.h"
#include "targets/load_value.h"

namespace ternjit::targets::simt {

namespace {

Result<void> run_loaded(const void* state, void* const* buffers) {
  return static_cast<const GpuLoadedState*>(state)->kernels->run(buffers);
}

// One instance per dialect: a null kernel is reported with its target's name.
template <Dialect D>
Result<void> launch_loaded(const void* state, void* stream, void* const* buffers) {
  if (!state) return make_error(ErrorCode::InvalidArgument, std::string(dialect_name(D)) + " launch: null kernel");
  return static_cast<const GpuLoadedState*>(state)->kernels->launch(stream, buffers);
}

}  // namespace

std::vector<std::string> kernel_names(const KernelSet& p) {
  std::vector<std::string> out;
  for (const KernelLaunch& k : p.kernels) out.push_back(k.name);
  return out;
}

std::string source_digest(const std::string& source) {
  return bytes_digest(std::vector<std::uint8_t>(source.begin(), source.end()));
}

std::string launch_lines(const KernelSet& p) {
  std::string out;
  for (const KernelLaunch& k : p.kernels) {
    char line[256];
    std::snprintf(line, sizeof line, "//   %s grid (%u, %u, %u) block (%u, %u, %u) shared %u\n", k.name.c_str(),
                  k.grid.x, k.grid.y, k.grid.z, k.block.x, k.block.y, k.block.z, k.shared_bytes);
    out += line;
  }
  return out;
}

TargetDescription target_description(const Target& target) {
  TargetDescription t;
  t.name = std::string(target.name());
  t.kind = std::string(target_kind_name(target.kind()));
  auto ok = target.available();
  t.available = ok.ok();
  if (!ok.ok()) t.reason = ok.error().message;
  return t;
}

Result<void> check_artifact(const Artifact& a, std::string_view target, std::string_view kind,
                            std::initializer_list<const char*> fields, std::string_view damaged) {
  TERNJIT_TRY_VOID(check_artifact_kind(a, kind, target));
  for (const char* field : fields)
    if (!a.metadata.count(field))
      return make_error(ErrorCode::InvalidInput, std::string(target) + " artifact lacks its '" + field + "' metadata");
  if (bytes_digest(a.bytes) != a.metadata.at("bytes_digest"))
    return make_error(ErrorCode::InvalidInput, std::string(target) + " artifact: " + std::string(damaged));
  return success();
}

Result<ir::Module> artifact_module(const Artifact& a) {
  Artifact text;
  text.bytes.assign(a.metadata.at("ir").begin(), a.metadata.at("ir").end());
  text.entry = a.entry;
  return parse_artifact_module(text);
}

Result<void> check_source_digest(const KernelSet& p, std::string_view target, const std::string& digest) {
  if (source_digest(p.source) != digest)
    return make_error(
        ErrorCode::InvalidInput,
        std::string(target) + " artifact: its source is not what this build generates for it (stale or damaged entry)");
  return success();
}

Result<LoadedKernel> load_kernel_set(Dialect dialect, const ir::Module& m, std::string_view entry, KernelSet p,
                                     std::shared_ptr<const GpuApi> api, const std::string& device_key,
                                     std::vector<void*> functions, std::shared_ptr<const void> module_owner,
                                     const LoadContext& context) {
  const ir::Function& f = *m.find_function(entry);
  TERNJIT_TRY(std::vector<LoadValue> values, evaluate_load_time(f, p.plan, *context.params, false));
  auto state = std::make_shared<GpuLoadedState>();
  TERNJIT_TRY(state->kernels,
              DeviceKernels::create(std::move(api), device_key, std::move(p), std::move(functions),
                                    std::move(module_owner), values, dynamic_cast<DeviceWeights*>(context.state)));
  LoadedKernel k;
  k.run = &run_loaded;
  k.launch = dialect == Dialect::Cuda ? &launch_loaded<Dialect::Cuda> : &launch_loaded<Dialect::Hip>;
  k.state = state.get();
  k.owner = std::move(state);
  return k;
}

Result<const ir::Function*> supported_function(const ir::Module& specialized, std::string_view function) {
  const ir::Function* f = specialized.find_function(function);
  if (!f) return make_error(ErrorCode::NotFound, "no function '" + std::string(function) + "' in the module");
  TERNJIT_TRY_VOID(supported(*f));
  return f;
}

std::vector<std::unique_ptr<TuningSpace>> tmatmul_spaces(const ir::Function& f, const SpaceOptions& o,
                                                         const Target& target, const TargetOptions& options) {
  std::vector<std::unique_ptr<TuningSpace>> spaces;
  // The bench compiles, loads and times candidates on the device (Unavailable without one).
  for (const TMatMulShape& s : tmatmul_shapes(f))
    spaces.push_back(make_tmatmul_space(s, o, make_gpu_bench_factory(target, options)));
  return spaces;
}

}  // namespace ternjit::targets::simt
