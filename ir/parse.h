// SPDX-License-Identifier: Apache-2.0
// parse.h - the IR text parser: text (grammar in ir/README.md) to a verified Module.
#pragma once

#include <string_view>

#include "ir/ir.h"

namespace ternjit::ir {

/// Parses IR text into a module, then verifies it (verify_module).
///
/// Errors are InvalidInput, with located diagnostics `file_name:line:col: error: ...`
/// whose `source_line` holds the offending line (for the caret). Parsing stops at the
/// first syntax error; references to unknown values or blocks are all reported for
/// the function they appear in; after a successful parse every verifier problem
/// (types, dominance, terminators...) is reported at once.
///
/// Result types written in the text are the instructions' declared types; the
/// verifier checks them with infer_types. `%<digits>` value ids are not names (the
/// value gets an empty name and is renumbered when printed); other ids and block
/// labels become names. Const values are rounded to their kind (round_to_kind). Every
/// instruction's `loc` is its position in the text (its first result, else its op).
/// For canonical text, print_module(parse_module(text)) == text.
Result<Module> parse_module(std::string_view text, std::string_view file_name);

}  // namespace ternjit::ir
