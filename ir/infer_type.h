// SPDX-License-Identifier: Apache-2.0
// infer_type.h - the type rule of every op, shared by the builder, verifier and DSL.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "ir/ir.h"

namespace ternjit::ir {

/// Computes the result types of `op` with operand types `operands` and `attrs`, in
/// function `f` (whose symbol table the types use) of module `m` (may be null; then
/// `param` and `call` fail). `declared` holds annotated result types: required for
/// const, param, reshape and broadcast (their result cannot be derived), checked
/// against the derived types otherwise (pass empty to skip the check).
/// Errors are InvalidInput with a message and no location: callers add the location.
/// Ret/Br/CondBr produce no results; ret's operands are checked against f's signature.
Result<std::vector<Type>> infer_types(const Module* m, const Function& f, Op op,
                                      std::span<const Type> operands, const Attrs& attrs,
                                      std::span<const Type> declared);

/// How a call binds the symbols of `callee` (by SymbolId index) to the caller's dims
/// (in the table `symbols`): each operand type is unified with the callee's argument
/// type (kind, layout, rank and static dims equal; a symbol binds at its first use and
/// must bind consistently). Symbols no argument determines are absent. Errors are the
/// ones infer_types reports for `call` (argument count, argument type, conflicting binding).
Result<std::map<std::uint32_t, Dim>> bind_call_symbols(const Function& callee, std::span<const Type> operands,
                                                       std::span<const std::string> symbols);

/// NumPy-style broadcast of two shapes (same symbol table). A static 1 stretches; a
/// symbol only matches itself. Error message names both shapes.
Result<std::vector<Dim>> broadcast_shapes(const std::vector<Dim>& a, const std::vector<Dim>& b,
                                          std::span<const std::string> symbols);

/// The element kind of an arithmetic op on kinds a and b (NumPy-like promotion:
/// any float wins, mixed floats -> f32; t2/bool/mixed ints -> i32).
ElemKind promote(ElemKind a, ElemKind b);

}  // namespace ternjit::ir
