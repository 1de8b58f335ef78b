// SPDX-License-Identifier: Apache-2.0
// fuzz_name_map.cpp - libFuzzer harness: name-map rules (PATTERN=TARGET) against tensor names.
//
// Input: rules, one a line, then a NUL byte, then names, one a line. Invariants: parse
// never crashes and its errors name the rule; apply never crashes and takes time linear in
// the name (each name is also applied repeated to 1 KB, inside libFuzzer's -timeout); for
// small rules and names, apply agrees with a brute-force reference written here from the
// documented rule (weight_file.h): the first rule matching the whole name wins, `{x}`
// takes one or more bytes other than '.', placeholders split greedily in pattern order
// (every split tried, longest first part first), an unmatched name is kept.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "formats/weight_file.h"
#include "tests/fuzz/fuzz_testing.h"

namespace {

using namespace ternjit;

// A rule side as pieces: a literal, or a placeholder's name (is_placeholder).
struct Piece {
  std::string text;
  bool is_placeholder = false;
};

std::vector<Piece> pieces_of(std::string_view side) {
  std::vector<Piece> out;
  std::size_t i = 0;
  while (i < side.size()) {
    if (side[i] == '{') {
      const std::size_t close = side.find('}', i);
      out.push_back({std::string(side.substr(i + 1, close - i - 1)), true});
      i = close + 1;
    } else {
      if (out.empty() || out.back().is_placeholder) out.push_back({"", false});
      out.back().text += side[i++];
    }
  }
  return out;
}

// Every split of name[p..] by pattern[j..], tried longest placeholder part first; the first
// that matches fills `parts` (placeholder name -> text). Exponential: small inputs only.
bool brute_match(const std::vector<Piece>& pattern, std::size_t j, std::string_view name, std::size_t p,
                 std::vector<std::pair<std::string, std::string>>& parts) {
  if (j == pattern.size()) return p == name.size();
  const Piece& piece = pattern[j];
  if (!piece.is_placeholder) {
    return name.substr(p, piece.text.size()) == piece.text && brute_match(pattern, j + 1, name, p + piece.text.size(), parts);
  }
  std::size_t longest = 0;
  while (p + longest < name.size() && name[p + longest] != '.') ++longest;
  for (std::size_t len = longest; len >= 1; --len) {
    parts.emplace_back(piece.text, std::string(name.substr(p, len)));
    if (brute_match(pattern, j + 1, name, p + len, parts)) return true;
    parts.pop_back();
  }
  return false;
}

std::string reference_apply(const std::vector<std::string>& rules, const std::string& name) {
  for (const std::string& rule : rules) {
    const std::size_t eq = rule.find('=');
    const std::vector<Piece> pattern = pieces_of(std::string_view(rule).substr(0, eq));
    std::vector<std::pair<std::string, std::string>> parts;
    if (!brute_match(pattern, 0, name, 0, parts)) continue;
    std::string out;
    for (const Piece& t : pieces_of(std::string_view(rule).substr(eq + 1))) {
      if (!t.is_placeholder) {
        out += t.text;
        continue;
      }
      for (const auto& [placeholder, text] : parts)
        if (placeholder == t.text) out += text;
    }
    return out;
  }
  return name;
}

std::vector<std::string> lines(std::string_view text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find('\n', start), text.size());
    out.emplace_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text = fuzz::as_text(data, size);
  const std::size_t split = std::min(text.find('\0'), text.size());
  std::vector<std::string> rules = lines(text.substr(0, split));
  if (rules.size() > 8) rules.resize(8);
  const std::vector<std::string> names = split < text.size() ? lines(text.substr(split + 1)) : std::vector<std::string>{};
  auto map = formats::NameMap::parse(rules);
  if (!map.ok()) {
    if (map.error().message.rfind("name map rule '", 0) != 0) fuzz::finding("an error does not name the rule: " + map.error().message);
    return 0;
  }
  std::size_t placeholders = 0, rule_bytes = 0;
  for (const std::string& r : rules) {
    rule_bytes += r.size();
    for (char c : r) placeholders += c == '{';
  }
  for (const std::string& name : names) {
    const std::string got = map->apply(name);
    if (placeholders <= 6 && rule_bytes <= 64 && name.size() <= 20) {
      const std::string want = reference_apply(rules, name);
      if (got != want) fuzz::finding("apply('" + name + "') is '" + got + "', the reference says '" + want + "'");
    }
    // A long name of the same bytes: linear matching finishes at once (a backtracking one
    // would pass -timeout).
    if (!name.empty()) {
      std::string long_name;
      while (long_name.size() < 1024) long_name += name;
      (void)map->apply(long_name);
    }
  }
  return 0;
}
