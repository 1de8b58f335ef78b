// SPDX-License-Identifier: Apache-2.0
// parser.h - recursive-descent parser from `.tri` tokens to the syntax tree.
#pragma once

#include <string_view>
#include <vector>

#include "ir/dsl/ast.h"
#include "ternjit/result.h"

namespace ternjit::dsl {

/// What parsing produced: the (possibly partial) tree and every syntax error.
struct ParseOutput {
  File file;
  std::vector<Diagnostic> diagnostics;  ///< lexer and parser errors, in source order
};

/// Lexes and parses `source`. Never fails outright: each syntax error is reported
/// once (the first error of a statement or declaration), then the parser skips to
/// the next line, statement, member or `}` and continues, keeping what it could
/// read (see ast.h). Diagnostics are located in `file_name`; their source lines
/// are not filled in (compile_tri/parse_tri do that).
ParseOutput parse_file(std::string_view source, std::string_view file_name);

}  // namespace ternjit::dsl
