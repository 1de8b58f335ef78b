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
