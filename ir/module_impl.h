// SPDX-License-Identifier: Apache-2.0
// module_impl.h - internal: the ir::Module behind the public ternjit::Module handle.
#pragma once

#include "ir/ir.h"
#include "ternjit/builder.h"

namespace ternjit::detail {

/// What a public ternjit::Module holds.
struct ModuleImpl {
  ir::Module module;
};

}  // namespace ternjit::detail

namespace ternjit::ir {

/// The ir::Module inside a public Module.
inline const Module& unwrap(const ternjit::Module& m) { return m.impl().module; }

/// Wraps an ir::Module (verified by the caller) into a public Module.
inline ternjit::Module wrap(Module m) {
  return ternjit::Module(std::make_unique<detail::ModuleImpl>(detail::ModuleImpl{std::move(m)}));
}

}  // namespace ternjit::ir
