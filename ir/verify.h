// SPDX-License-Identifier: Apache-2.0
// verify.h - the IR verifier: checks every invariant and reports every problem found.
//
// The checks (ir/README.md, "Verifier"): op arity and attribute kind; result types equal
// infer_types of the operand types; operands are defined, non-erased values; SSA
// dominance; one terminator per block, at its end; branch targets, argument counts and
// types; the entry block is never a branch target; symbols in range; unique function,
// parameter and value names; const values representable in their kind.
#pragma once

#include <vector>

#include "ir/ir.h"

namespace ternjit::ir {

/// Checks one function of `m` (may be null: then `param` and `call` are reported as
/// used outside a module). Returns one error Diagnostic per problem, in layout order.
/// A problem in an instruction is located at its `loc`; when that is unknown (IR built
/// without locations) the message starts with the function and the printed
/// instruction instead: "in @f: %3 = add %1, %2 : f32[4]: ...". Never aborts on
/// malformed IR. `source_line` is left empty (the verifier has no text).
std::vector<Diagnostic> verify_function(const Module* m, const Function& f);

/// Checks a whole module: unique function and parameter names, parameter symbols in
/// range, then every function. Returns every problem found (empty when valid).
std::vector<Diagnostic> verify_module(const Module& m);

/// verify_module as a Result: an InvalidInput Error carrying all the diagnostics, with
/// a message that names the first and counts the rest.
Result<void> verify_or_error(const Module& m);

}  // namespace ternjit::ir
