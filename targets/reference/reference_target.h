// SPDX-License-Identifier: Apache-2.0
// reference_target.h - the reference target: "compiles" to canonical IR text that the interpreter runs.
#pragma once

#include <memory>

#include "targets/target.h"

namespace ternjit::targets {

/// The reference interpreter as a target. Always available; supports every op. Its
/// artifact is of kind "ir-text": the specialized module's canonical IR text
/// as bytes and the function name as entry; jit/loader.cpp runs it with ir::interpret.
/// Its description names the host CPU (the interpreter runs there).
std::unique_ptr<Target> make_reference_target();

}  // namespace ternjit::targets
