// SPDX-License-Identifier: Apache-2.0
// record_text.cpp - one tuning record's texts: parse and validate every field, write them back (record_text.h).
#include "autotune/record_text.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

namespace ternjit::autotune {

namespace {

Error bad(std::string message) { return make_error(ErrorCode::InvalidInput, std::move(message)); }

// A piece of a record's text for a message: at most 40 bytes, non-printable bytes as \xNN.
std::string shown(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size() && i < 40; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      static constexpr char kHex[] = "0123456789abcdef";
      out += std::string("\\x") + kHex[c >> 4] + kHex[c & 15];
    }
  }
  return "'" + out + (text.size() > 40 ? "...'" : "'");
}

bool condition_name_ok(std::string_view n) {
  return !n.empty() && std::all_of(n.begin(), n.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  });
}

}  // namespace

Result<std::pair<std::int64_t, std::string_view>> parse_record_m(std::string_view text) {
  const std::size_t semi = text.find(';');
  if (text.substr(0, 2) != "M=" || semi == std::string_view::npos)
    return bad("a record's config text starts with 'M=<rows>;', got " + shown(text));
  std::int64_t m = 0;
  if (auto [end, ec] = std::from_chars(text.data() + 2, text.data() + semi, m);
      ec != std::errc() || end != text.data() + semi || m < 1)
    return bad("a record's M is a positive integer, got " + shown(text.substr(2, semi - 2)));
  return std::pair{m, text.substr(semi + 1)};
}

Result<Conditions> parse_conditions(std::string_view text) {
  Conditions out;
  while (!text.empty()) {
    const std::size_t semi = text.find(';');
    const std::string_view field = text.substr(0, semi);
    text = semi == std::string_view::npos ? std::string_view() : text.substr(semi + 1);
    const std::size_t eq = field.find('=');
    if (eq == std::string_view::npos) return bad("a record's condition is name=value, got " + shown(field));
    if (!condition_name_ok(field.substr(0, eq)))
      return bad("a record's condition name is of [A-Za-z0-9_]+, got " + shown(field.substr(0, eq)));
    if (!out.emplace(std::string(field.substr(0, eq)), std::string(field.substr(eq + 1))).second)
      return bad("a record names condition " + shown(field.substr(0, eq)) + " twice");
  }
  return out;
}

Result<void> parse_record_measurements(std::string_view measurements, Record& r) {
  auto j = nlohmann::json::parse(measurements, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return bad("a record's measurements are a JSON object, got " + shown(measurements));
  const auto median = j.find("median_ns");
  if (median == j.end() || !median->is_number() || !std::isfinite(median->get<double>()) || !(median->get<double>() > 0))
    return bad("a record's median_ns is a finite number > 0, got " + shown(median == j.end() ? "none" : median->dump()));
  r.median_ns = median->get<double>();
  if (const auto jm = j.find("M"); jm != j.end() && !(jm->is_number_integer() && jm->get<std::int64_t>() == r.M))
    return bad("a record's measurements are of M = " + shown(jm->dump()) + ", its config text of M = " +
               std::to_string(r.M));
  if (const auto role = j.find("role"); role != j.end()) {
    if (!role->is_string() || (*role != "winner" && *role != "runner_up" && *role != "default"))
      return bad("a record's role is winner, runner_up or default, got " + shown(role->dump()));
    r.role = role->get<std::string>();
  }
  if (const auto spread = j.find("spread"); spread != j.end()) {
    if (!spread->is_number() || !std::isfinite(spread->get<double>()) || spread->get<double>() < 0)
      return bad("a record's spread is a finite number >= 0, got " + shown(spread->dump()));
    r.spread = spread->get<double>();
  }
  if (const auto reps = j.find("reps"); reps != j.end()) {
    if (!reps->is_number_integer() || (reps->is_number_unsigned() && reps->get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) ||
        reps->get<std::int64_t>() < 0)
      return bad("a record's reps is an integer >= 0, got " + shown(reps->dump()));
    r.reps = reps->get<std::int64_t>();
  }
  return success();
}

Result<Record> parse_record(std::string_view config, std::string_view measurements) {
  TERNJIT_TRY(auto m, parse_record_m(config));
  const std::string_view rest = m.second;
  // The conditions end at the first "config=" field: the rest is the target's text.
  std::string_view conditions_text, target_config;
  if (rest.substr(0, 7) == "config=") {
    target_config = rest.substr(7);
  } else if (const std::size_t at = rest.find(";config="); at != std::string_view::npos) {
    conditions_text = rest.substr(0, at);
    target_config = rest.substr(at + 8);
    // "M=1;;config=x" has an empty field before config=: not name=value.
    if (conditions_text.empty()) return bad("a record's condition is name=value, got ''");
  } else {
    return bad("a record's config text ends with 'config=<target config>', got " + shown(config));
  }
  Record r;
  r.M = m.first;
  r.config = std::string(target_config);
  TERNJIT_TRY(r.conditions, parse_conditions(conditions_text));

  TERNJIT_TRY_VOID(parse_record_measurements(measurements, r));
  return r;
}

std::string record_config(std::int64_t m, const Conditions& conditions, std::string_view config) {
  std::string text = "M=" + std::to_string(m) + ";";
  for (const auto& [name, value] : conditions) text += name + "=" + value + ";";
  return text + "config=" + std::string(config);
}

std::string record_measurements(std::int64_t m, double median_ns, double spread, std::int64_t reps,
                                std::string_view role) {
  nlohmann::json j;
  j["M"] = m;
  j["median_ns"] = median_ns;
  j["spread"] = spread;
  j["reps"] = reps;
  if (!role.empty()) j["role"] = role;
  return j.dump();
}

std::pair<std::string, std::string> record_texts(const Record& r) {
  return {record_config(r.M, r.conditions, r.config), record_measurements(r.M, r.median_ns, r.spread, r.reps, r.role)};
}

}  // namespace ternjit::autotune
