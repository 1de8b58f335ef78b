// SPDX-License-Identifier: Apache-2.0
// device_weights.h - the GPU model's per-Program state: weights resident on a device, uploaded once, freed with the Program.
//
// Every GPU target (spirv now; cuda and hip later) keeps the weights of one Program on
// its device in the target's own layout. The first kernel of the Program that needs a
// weight uploads it; every later kernel (another specialization of the same function,
// another function of the same layer) shares the buffer. A buffer lives as long as the
// Program's state or a kernel still holding it, whichever is longer. Header-only.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "targets/target.h"
#include "ternjit/result.h"

namespace ternjit::targets {

/// Device-resident weights of one Program, by key. Thread-safe.
class DeviceWeights final : public ProgramState {
 public:
  /// The buffer stored under `key` ("<device>/<param>/<layout>": a key names the device,
  /// the weight and the target's layout), or `upload()`'s, stored under it. An upload
  /// error is returned and nothing is stored.
  Result<std::shared_ptr<const void>> get_or_upload(const std::string& key,
                                                    const std::function<Result<std::shared_ptr<const void>>()>& upload) {
    std::lock_guard lock(mutex_);  // one upload per key even when two kernels load at once
    if (auto it = buffers_.find(key); it != buffers_.end()) return it->second;
    TERNJIT_TRY(std::shared_ptr<const void> b, upload());
    buffers_.emplace(key, b);
    return b;
  }
  /// How many weights are resident.
  [[nodiscard]] std::size_t size() const {
    std::lock_guard lock(mutex_);
    return buffers_.size();
  }

 private:
  mutable std::mutex mutex_;
  std::map<std::string, std::shared_ptr<const void>> buffers_;
};

}  // namespace ternjit::targets
