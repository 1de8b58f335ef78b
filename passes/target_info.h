// SPDX-License-Identifier: Apache-2.0
// target_info.h - what passes may know about the target: a plain struct passed explicitly.
#pragma once

#include <string>

#include "ir/ir.h"

namespace ternjit::passes {

/// Facts about the code generator the pipeline prepares IR for. Targets fill it in;
/// the reference interpreter uses the defaults.
struct TargetInfo {
  std::string name = "reference";  ///< target name, for messages
  bool int8_dot = false;           ///< has fast int8 x int8 dot products (prefer integer kernels)
  /// The packed layout its tmatmul kernels read ternary weights in; select-layout repacks
  /// every parameter weight to it once. Plain: the target reads t2 as is (no repack).
  WeightFormat weight_layout = WeightFormat::Plain;
};

}  // namespace ternjit::passes
