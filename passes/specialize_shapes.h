// SPDX-License-Identifier: Apache-2.0
// specialize_shapes.h - bind symbolic dims to concrete extents; the cache key's IR.
//
// Not in the pass registry (a registered pass takes no options): `ternjit opt --shape`
// and the engine call these functions directly.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "ir/ir.h"
#include "ternjit/result.h"

namespace ternjit::passes {

/// Binds symbols of every function of `m` to extents and rewrites the types.
///
/// A key of `bindings` binds, in a function or parameter declaration of layer L (the
/// name before its first '.'), the symbol S when it is "L.S" or exactly "S"
/// (ir::ShapeBindings::lookup): `{"N": 8}` binds every symbol named N, `{"BitLinear.N": 8}`
/// binds BitLinear's N and the symbol a caller spells `BitLinear.N`. Unbound symbols
/// stay symbolic; keys that match nothing are ignored. For each function: the
/// constraints of bound symbols are checked, every type (arguments, results, all
/// values, declared types of const/param/reshape/broadcast) gets the extents, the bound
/// symbols leave the symbol table (the rest keep their order, renumbered) with their
/// constraints, and `reshape`/`broadcast` whose operand already has the result type
/// are removed. A parameter declaration's symbol becomes the extent that every
/// `param` use of it now has (all uses agree on one static extent), or, when no
/// function reads it, the bound value. Deterministic; running it twice with the same
/// bindings changes nothing the second time.
///
/// Errors (InvalidInput; `m` is unchanged): a negative value ("shape binding 'N' = -1
/// is negative"); a violated constraint, one located diagnostic per violation at the
/// function ("symbol 'K' = 100 violates K % 128 == 0"); a value or parameter whose
/// bound type has more than ir::kMaxElements elements, at its definition ("after binding,
/// %x: type f32[4294967296, 4294967296] has more than 2^60 elements"); a call whose
/// callee was bound inconsistently with the caller (the call no longer type-checks);
/// anything else the verifier refuses in the bound module (an op's shape rule that a
/// bound extent breaks, e.g. "after binding, 'rope' needs an even head dim D, got
/// f32[2, 1, 3]"), at the instruction with a note naming the function.
Result<void> specialize_shapes(ir::Module& m, const std::map<std::string, std::int64_t>& bindings);

/// The module holding only `function` of `m`, specialized: calls are inlined first
/// (inline_calls), then specialize_shapes binds `bindings`; the parameter declarations
/// it reads are kept (in declaration order), with the metadata. Functions still called
/// (past the inlining depth limit) are kept too. The result verifies; its canonical text
/// (ir::print_module) is the cache key material: the same inputs give the same text.
///
/// Errors: NotFound when there is no such function; those of inline_calls (a call tree
/// too large to inline) and of specialize_shapes; with
/// `require_static`, InvalidInput listing the function's unbound symbols
/// ("@f is not fully static: bind 'B', 'T'").
Result<ir::Module> specialize_function(const ir::Module& m, std::string_view function,
                                       const std::map<std::string, std::int64_t>& bindings,
                                       bool require_static);

/// The most bytes one tensor may take when a specialized function runs (1 TiB).
inline constexpr std::int64_t kMaxTensorBytes = std::int64_t{1} << 40;

/// Checks, before anything is allocated, that every argument, value and parameter of
/// `function` in the specialized module `m` (all static: specialize_function with
/// `require_static`) takes at most kMaxTensorBytes. Past it an allocation would throw
/// std::bad_alloc or the OOM killer would strike.
///
/// Errors: InvalidArgument naming the first tensor too large, its type and byte count.
Result<void> check_tensor_bytes(const ir::Module& m, std::string_view function);

}  // namespace ternjit::passes
