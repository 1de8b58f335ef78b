// SPDX-License-Identifier: Apache-2.0
// bind.cpp - shape lists, qualified names and derived seeds.
#include "ir/bind.h"

#include <algorithm>
#include <charconv>

namespace ternjit::ir {

namespace {

Error fail(std::string msg) { return make_error(ErrorCode::InvalidInput, std::move(msg)); }

}  // namespace

std::optional<std::int64_t> ShapeBindings::lookup(std::string_view layer, std::string_view symbol) const {
  auto it = values.find(std::string(layer) + "." + std::string(symbol));
  if (it != values.end()) return it->second;
  it = values.find(std::string(symbol));
  if (it != values.end()) return it->second;
  return std::nullopt;
}

std::optional<std::vector<std::int64_t>> parse_dims(std::string_view text) {
  std::vector<std::int64_t> out;
  if (text.empty()) return out;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    std::size_t end = std::min(text.find(',', pos), text.size());
    std::int64_t v = 0;
    auto [p, ec] = std::from_chars(text.data() + pos, text.data() + end, v);
    if (ec != std::errc() || p != text.data() + end || v < 0) return std::nullopt;
    out.push_back(v);
    pos = end + 1;
  }
  return out;
}

std::uint64_t derive_seed(std::uint64_t seed, std::uint64_t salt) {
  std::uint64_t z = seed + 0x9E3779B97F4A7C15ull * (salt + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  // One row of the dynamic-programming table at a time (Wagner-Fischer).
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::vector<std::string> closest_names(std::string_view name, const std::vector<std::string>& candidates,
                                       std::size_t max) {
  // A whole-name typo, or the same last part under another prefix ("L0.gamma" for
  // "BitLinear.gamma"): scored by the nearer of the two, a prefix change costing 1.
  auto leaf = [](std::string_view s) { return s.substr(s.rfind('.') == std::string_view::npos ? 0 : s.rfind('.') + 1); };
  const std::string_view name_leaf = leaf(name);
  const std::size_t limit = std::max<std::size_t>(2, name.size() / 4);
  const std::size_t leaf_limit = std::max<std::size_t>(1, name_leaf.size() / 4);
  std::vector<std::pair<std::size_t, std::size_t>> scored;  // (score, index)
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const std::size_t whole = edit_distance(name, candidates[i]);
    const std::size_t part = edit_distance(name_leaf, leaf(candidates[i]));
    if (whole <= limit || part <= leaf_limit) scored.emplace_back(std::min(whole, part + 1), i);
  }
  std::stable_sort(scored.begin(), scored.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<std::string> out;
  for (std::size_t k = 0; k < scored.size() && out.size() < max; ++k) out.push_back(candidates[scored[k].second]);
  return out;
}

std::string did_you_mean(std::string_view name, const std::vector<std::string>& candidates) {
  const std::vector<std::string> near = closest_names(name, candidates);
  if (near.empty()) return {};
  std::string s = " (did you mean ";
  for (std::size_t i = 0; i < near.size(); ++i)
    s += (i == 0 ? "" : i + 1 == near.size() ? " or " : ", ") + ("'" + near[i] + "'");
  return s + "?)";
}

std::string_view layer_of(std::string_view name) {
  auto dot = name.find('.');
  return dot == std::string_view::npos ? std::string_view{} : name.substr(0, dot);
}

Result<ShapeBindings> parse_shape_list(std::string_view text) {
  ShapeBindings b;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find(',', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view item = text.substr(pos, end - pos);
    std::size_t eq = item.find('=');
    if (eq == std::string_view::npos || eq == 0)
      return fail("bad shape binding '" + std::string(item) + "': expected NAME=EXTENT");
    std::string_view num = item.substr(eq + 1);
    std::int64_t v = 0;
    auto [p, ec] = std::from_chars(num.data(), num.data() + num.size(), v);
    if (ec != std::errc() || p != num.data() + num.size() || v <= 0)
      return fail("bad shape binding '" + std::string(item) + "': extent must be a positive integer");
    if (!b.values.emplace(std::string(item.substr(0, eq)), v).second)
      return fail("symbol '" + std::string(item.substr(0, eq)) + "' is bound twice");
    pos = end + 1;
  }
  return b;
}

}  // namespace ternjit::ir
