// SPDX-License-Identifier: Apache-2.0
// name_map.cpp - NameMap: PATTERN=TARGET rules that rename a file's tensors, matched in
// linear time (no backtracking over file-controlled names).
#include <map>
#include <memory>
#include <optional>
#include <string_view>

#include "formats/weight_file.h"

namespace ternjit::formats {

// One rule: the pattern as literal pieces and placeholders (a placeholder has an empty
// literal; placeholders are numbered 1, 2, ... in pattern order), the target as literal
// pieces and placeholder numbers.
struct NameMap::Rule {
  std::vector<std::pair<std::string, bool>> pattern;  // (literal, is a placeholder) pieces
  std::vector<std::pair<std::string, int>> target;     // (literal, placeholder or 0) pieces
};

namespace {

// Splits "a{x}b" into literal and placeholder pieces; placeholders as ("", name).
Result<std::vector<std::pair<std::string, std::string>>> split_rule_side(const std::string& text,
                                                                         const std::string& rule) {
  std::vector<std::pair<std::string, std::string>> pieces;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t open = text.find('{', pos);
    if (open == std::string::npos) {
      pieces.emplace_back(text.substr(pos), "");
      break;
    }
    if (open > pos) pieces.emplace_back(text.substr(pos, open - pos), "");
    const std::size_t close = text.find('}', open);
    if (close == std::string::npos)
      return make_error(ErrorCode::InvalidArgument, "name map rule '" + rule + "': unclosed '{'");
    if (close == open + 1)
      return make_error(ErrorCode::InvalidArgument, "name map rule '" + rule + "': empty placeholder '{}'");
    pieces.emplace_back("", text.substr(open + 1, close - open - 1));
    pos = close + 1;
  }
  return pieces;
}

// The parts of `name` the placeholders of `pattern` match, in pattern order, or nullopt
// when the pattern does not match the whole name. A placeholder matches one or more bytes
// other than '.'; when placeholders can split a name more than one way, each takes the
// longest part that lets the rest of the pattern match, in pattern order ("{a}{b}" on
// "xyz": a = "xy", b = "z"), the split a backtracking regex of greedy ([^.]+) groups finds.
//
// No backtracking: row j of `fits` says, for every position p, whether pieces j.. match
// name[p..]; the rows are filled from the last piece back (a placeholder's row in one
// pass from the right), then the parts are read off left to right. Time O(|name| x
// |pattern|), memory (pieces + 1) x (|name| + 1) bytes, whatever the name holds.
std::optional<std::vector<std::string_view>> match_rule(const std::vector<std::pair<std::string, bool>>& pattern,
                                                        std::string_view name) {
  const std::size_t n = name.size(), pieces = pattern.size();
  // Cheap refusals first: a literal first or last piece the name does not start or end
  // with, or a name shorter than the pattern's least match.
  std::size_t least = 0;
  for (const auto& [literal, placeholder] : pattern) least += placeholder ? 1 : literal.size();
  if (least > n) return std::nullopt;
  if (!pattern.empty() && !pattern.front().second && !name.starts_with(pattern.front().first)) return std::nullopt;
  if (!pattern.empty() && !pattern.back().second && !name.ends_with(pattern.back().first)) return std::nullopt;

  const std::size_t width = n + 1;
  std::vector<std::uint8_t> fits((pieces + 1) * width, 0);
  fits[pieces * width + n] = 1;
  for (std::size_t j = pieces; j-- > 0;) {
    std::uint8_t* row = fits.data() + j * width;
    const std::uint8_t* next = row + width;
    const auto& [literal, placeholder] = pattern[j];
    if (!placeholder) {
      const std::size_t len = literal.size();
      for (std::size_t p = 0; p + len <= n; ++p)
        row[p] = static_cast<std::uint8_t>(next[p + len] != 0 && name.compare(p, len, literal) == 0);
      continue;
    }
    // row[p]: name[p] is not '.' and some end q in (p, first '.' at or after p] has next[q].
    bool reach = false;
    for (std::size_t p = n; p-- > 0;) {
      if (name[p] == '.') {
        reach = false;
        continue;
      }
      reach = reach || next[p + 1] != 0;
      row[p] = static_cast<std::uint8_t>(reach);
    }
  }
  if (fits[0] == 0) return std::nullopt;
  std::vector<std::string_view> parts;
  std::size_t p = 0;
  for (std::size_t j = 0; j < pieces; ++j) {
    const auto& [literal, placeholder] = pattern[j];
    if (!placeholder) {
      p += literal.size();
      continue;
    }
    const std::uint8_t* next = fits.data() + (j + 1) * width;
    std::size_t end = p + 1;
    while (end < n && name[end] != '.') ++end;  // the longest part [p, end) free of '.'
    while (next[end] == 0) --end;               // row j says some end in (p, end] fits
    parts.push_back(name.substr(p, end - p));
    p = end;
  }
  return parts;
}

}  // namespace

Result<NameMap> NameMap::parse(std::span<const std::string> rules) {
  NameMap map;
  for (const std::string& rule : rules) {
    const std::size_t eq = rule.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == rule.size())
      return make_error(ErrorCode::InvalidArgument, "name map rule '" + rule + "': expected PATTERN=TARGET");
    TERNJIT_TRY(auto pattern, split_rule_side(rule.substr(0, eq), rule));
    TERNJIT_TRY(auto target, split_rule_side(rule.substr(eq + 1), rule));
    std::map<std::string, int> groups;
    auto compiled = std::make_shared<Rule>();
    for (const auto& [literal, placeholder] : pattern) {
      if (placeholder.empty()) {
        compiled->pattern.emplace_back(literal, false);
        continue;
      }
      if (!groups.emplace(placeholder, static_cast<int>(groups.size()) + 1).second)
        return make_error(ErrorCode::InvalidArgument, "name map rule '" + rule + "': placeholder '{" + placeholder +
                                                          "}' appears twice in the pattern");
      compiled->pattern.emplace_back("", true);
    }
    for (const auto& [literal, placeholder] : target) {
      if (placeholder.empty()) {
        compiled->target.emplace_back(literal, 0);
        continue;
      }
      auto it = groups.find(placeholder);
      if (it == groups.end())
        return make_error(ErrorCode::InvalidArgument, "name map rule '" + rule + "': target placeholder '{" +
                                                          placeholder + "}' is not in the pattern");
      compiled->target.emplace_back("", it->second);
    }
    map.rules_.push_back(std::move(compiled));
  }
  return map;
}

std::string NameMap::apply(const std::string& name) const {
  for (const auto& rule : rules_) {
    const auto parts = match_rule(rule->pattern, name);
    if (!parts) continue;
    std::string out;
    for (const auto& [literal, group] : rule->target) {
      if (group == 0) out += literal;
      else out += (*parts)[static_cast<std::size_t>(group - 1)];
    }
    return out;
  }
  return name;
}

}  // namespace ternjit::formats
