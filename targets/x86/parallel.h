// SPDX-License-Identifier: Apache-2.0
// parallel.h - the x86 kernels run on the CPU targets' parallel-for (targets/parallel.h).
#pragma once

#include "targets/parallel.h"

namespace ternjit::targets::x86 {

/// The x86 kernels' name for targets::Parallel (they predate its move to common/).
using Parallel = targets::Parallel;

}  // namespace ternjit::targets::x86
