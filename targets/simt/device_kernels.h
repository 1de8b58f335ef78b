// SPDX-License-Identifier: Apache-2.0
// device_kernels.h - a KernelSet loaded on a CUDA or HIP device (DeviceKernels): buffers, weights, launches in plan order.
//
// The cuda and hip targets share everything after their module is loaded: they
// implement GpuApi (allocation, copies, launches, stream sync on their driver) and
// hand a KernelSet to DeviceKernels::create, which follows the launch conventions
// of generate.h: load-time values uploaded once per kernel, ternary weights packed
// by pack_ternary_weight and uploaded once per Program (DeviceWeights), scratch
// buffers owned by the kernel, every launch in order on one stream.
//
// Two ways to run (targets/README.md, "GPU targets"):
//   - run(): the host-copy path: inputs are copied to device buffers the kernel owns,
//     every kernel is launched on the kernel's own stream, outputs are copied back and
//     the stream is waited for. Calls are serialized per kernel.
//   - launch(): the framework path: the caller's device pointers (inputs then outputs)
//     and the caller's stream (CUstream / hipStream_t; null: the legacy default
//     stream); nothing is waited for. Scratch belongs to the kernel: two launches of
//     one kernel must not execute at the same time (stream order guarantees it on one
//     stream).
// Foreign error codes never leave: GpuApi implementations return Result.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "targets/common/device_weights.h"
#include "targets/simt/generate.h"
#include "targets/simt/tuning_space.h"
#include "targets/load_value.h"
#include "ternjit/result.h"

namespace ternjit::targets::simt {

/// A device pointer (CUdeviceptr / hipDeviceptr_t) as an integer.
using DevicePtr = std::uintptr_t;

/// One device of a SIMT API, opened: what DeviceKernels needs. Implemented by the cuda
/// and hip targets; every method may be called from any thread.
class GpuApi {
 public:
  virtual ~GpuApi() = default;
  /// Makes the device current on this thread (CUDA: push its primary context) until
  /// the returned guard is destroyed.
  [[nodiscard]] virtual Result<std::shared_ptr<void>> make_current() const = 0;
  /// Allocates `bytes` (> 0) of device memory, 256-byte aligned. Errors: Unavailable (out of memory).
  [[nodiscard]] virtual Result<DevicePtr> alloc(std::size_t bytes) const = 0;
  /// Frees what alloc returned (the device is current).
  virtual void free(DevicePtr p) const = 0;
  /// Asynchronous host-to-device / device-to-host copies and a byte fill on `stream`.
  [[nodiscard]] virtual Result<void> upload(DevicePtr dst, const void* src, std::size_t bytes, void* stream) const = 0;
  [[nodiscard]] virtual Result<void> download(void* dst, DevicePtr src, std::size_t bytes, void* stream) const = 0;
  /// Launches `function` (a handle from the target's module) with `params` as the
  /// kernel parameter table (cuLaunchKernel's kernelParams).
  [[nodiscard]] virtual Result<void> launch(void* function, const Dim3& grid, const Dim3& block,
                                            std::uint32_t shared_bytes, void* stream, void** params) const = 0;
  /// Waits for everything enqueued on `stream`.
  [[nodiscard]] virtual Result<void> synchronize(void* stream) const = 0;
  /// The kernel's own stream (created once per DeviceKernels) and its destruction.
  [[nodiscard]] virtual Result<void*> create_stream() const = 0;
  virtual void destroy_stream(void* stream) const = 0;
};

/// A device allocation freed with the last reference.
class DeviceAllocation {
 public:
  static Result<std::shared_ptr<DeviceAllocation>> make(std::shared_ptr<const GpuApi> api, std::size_t bytes);
  ~DeviceAllocation();
  DeviceAllocation(const DeviceAllocation&) = delete;
  DeviceAllocation& operator=(const DeviceAllocation&) = delete;
  [[nodiscard]] DevicePtr ptr() const { return ptr_; }
  [[nodiscard]] std::size_t bytes() const { return bytes_; }

 private:
  DeviceAllocation(std::shared_ptr<const GpuApi> api, DevicePtr p, std::size_t n)
      : api_(std::move(api)), ptr_(p), bytes_(n) {}
  std::shared_ptr<const GpuApi> api_;
  DevicePtr ptr_ = 0;
  std::size_t bytes_ = 0;
};

/// A KernelSet loaded on one device: its uploads, buffers, function handles and stream.
class DeviceKernels {
 public:
  /// Uploads what `kernel_set` reads at load: every Const argument's `values` entry, every
  /// weight packed (through `weights` under "<device_key>/<param>/<layout>" when it is a
  /// parameter and `weights` is not null), allocates scratch and the host-copy buffers
  /// and takes one function handle per launch (`functions`, in kernel_set.kernels order;
  /// `module_owner` keeps them valid). Errors: InvalidInput for a bad weight,
  /// Unavailable for device failures.
  static Result<std::shared_ptr<DeviceKernels>> create(std::shared_ptr<const GpuApi> api, const std::string& device_key,
                                                       KernelSet kernel_set, std::vector<void*> functions,
                                                       std::shared_ptr<const void> module_owner,
                                                       const std::vector<LoadValue>& values, DeviceWeights* weights);
  ~DeviceKernels();
  DeviceKernels(const DeviceKernels&) = delete;
  DeviceKernels& operator=(const DeviceKernels&) = delete;

  /// The host-copy path (file comment). `buffers`: input host pointers then output host
  /// pointers, sized as kernel_set.plan. Errors: InvalidArgument for a null buffer,
  /// Unavailable for device failures.
  Result<void> run(void* const* buffers);
  /// The framework path (file comment): `device_buffers` are device pointers, each
  /// 16-byte aligned. Errors: InvalidArgument for a null or misaligned pointer.
  Result<void> launch(void* stream, void* const* device_buffers);
  /// Launches on the kernel's own stream on device pointers and waits (tuning benches:
  /// device-resident inputs, no copies timed). Serialized like run().
  Result<void> run_device(void* const* device_buffers);
  [[nodiscard]] const std::shared_ptr<const GpuApi>& api() const { return api_; }

  [[nodiscard]] const KernelSet& kernel_set() const { return kernel_set_; }

 private:
  DeviceKernels() = default;
  Result<void> enqueue(void* stream, const std::vector<DevicePtr>& inputs, const std::vector<DevicePtr>& outputs);

  std::shared_ptr<const GpuApi> api_;
  KernelSet kernel_set_;
  std::vector<void*> functions_;
  std::shared_ptr<const void> module_owner_;
  std::vector<std::shared_ptr<const void>> consts_;   // by load-time index (null: unused)
  std::vector<std::shared_ptr<const void>> weights_;  // by kernel_set_.weights index
  std::vector<std::shared_ptr<DeviceAllocation>> scratch_, in_, out_;
  void* stream_ = nullptr;
  std::mutex mutex_;
};

/// The LoadedKernel::state of the cuda and hip targets (what make_gpu_bench_factory reads).
struct GpuLoadedState {
  std::shared_ptr<DeviceKernels> kernels;
};

/// The tmatmul bench of a SIMT target whose LoadedKernel::state is a GpuLoadedState: for
/// one shape, a standalone tmatmul function (x i8 or f32 [M, K], random ternary weights
/// and scales) is compiled by `target` with `options` and the candidate's configuration,
/// loaded, and each run launches it on device-resident inputs (rotated copies up to the
/// bench's rotate_bytes) and waits. `target` must outlive every bench made.
BenchFactory make_gpu_bench_factory(const Target& target, TargetOptions options);

}  // namespace ternjit::targets::simt
