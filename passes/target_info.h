// SPDX-License-Identifier: Apache-2.0
// target_info.h - what passes may know about the target: a plain struct passed explicitly.
#pragma once

#include <string>

namespace ternjit::passes {

/// Facts about the code generator the pipeline prepares IR for. Targets fill it in;
/// the reference interpreter uses the defaults.
struct TargetInfo {
  std::string name = "reference";  ///< target name, for messages
  bool int8_dot = false;           ///< has fast int8 x int8 dot products (prefer integer kernels)
};

}  // namespace ternjit::passes
