// SPDX-License-Identifier: Apache-2.0
// strings.h - the few string helpers every layer's option and name parsing shares.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ternjit::ir {

/// `s` without its leading and trailing ASCII whitespace (std::isspace in the C locale);
/// a view into `s`.
std::string_view trim(std::string_view s);

/// `s` with its ASCII letters lowercased (other bytes unchanged).
std::string lower(std::string_view s);

/// The items with `sep` between them ("" for no items).
std::string join(const std::vector<std::string>& items, std::string_view sep);

/// The pieces of `text` between the `sep`s, empty pieces included ("a,,b" gives "a", "",
/// "b"); an empty `text` gives no pieces. join(split(t, c), {c}) == t.
std::vector<std::string> split(std::string_view text, char sep);

}  // namespace ternjit::ir
