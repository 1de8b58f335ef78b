// SPDX-License-Identifier: Apache-2.0
// lower.h - checks a parsed `.tri` file and lowers its layers to an IR module.
#pragma once

#include <string_view>
#include <vector>

#include "ir/dsl/ast.h"
#include "ir/ir.h"
#include "ternjit/result.h"

namespace ternjit::dsl {

/// Checks `file` and lowers it through ir::Builder, so every expression's type
/// comes from ir::infer_types. The module holds one ParamDecl `@Layer.param` per
/// parameter (its own symbol table, in order of appearance) and one Function
/// `@Layer.fn` per function (symbols in order of first appearance in the signature,
/// then the body; arguments and `let` results carry their DSL names; instructions
/// carry DSL locations). Semantic errors (unknown names, duplicate definitions with
/// a note at the first one, type and shape errors, return type mismatches, call
/// cycles, ...) are appended to `diags`, at most one per statement or declaration;
/// parts the parser could not read (see ast.h) are skipped silently. When `diags`
/// gained any error the returned module is incomplete and must not be used.
/// Source lines of the diagnostics are not filled in.
ir::Module lower_file(const File& file, std::string_view file_name, std::vector<Diagnostic>& diags);

}  // namespace ternjit::dsl
