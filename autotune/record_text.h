// SPDX-License-Identifier: Apache-2.0
// record_text.h - one tuning record's stored texts (config text, measurements JSON): parse, validate, write.
//
// A record is stored as two texts (records.h says where): its config text
//   "M=<m>;<name>=<value>;...;config=<target config>"   (conditions in name order)
// and its measurements JSON {"M", "median_ns", "spread", "reps", "role"}. Parsing
// checks every field and says what is wrong, since a record file is read from a cache
// directory others may write to; writing what parses gives it back.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>

#include "ternjit/result.h"

namespace ternjit::autotune {

/// The conditions a record is matched on, by name: the problem's (targets/tuning.h), the
/// host CPU model ("cpu") and the ternjit version ("version").
using Conditions = std::map<std::string, std::string>;

/// One decoded record.
struct Record {
  std::int64_t M = 0;
  std::string config;  ///< the target's configuration text
  double median_ns = 0;
  std::string role;       ///< "winner", "runner_up", "default", or "" (not stored)
  Conditions conditions;  ///< what it was measured under
  bool legacy = false;    ///< stored in the format before conditions
  double spread = 0;      ///< (p75 - p25) / median of its timing (0 when not stored)
  std::int64_t reps = 0;  ///< timed calls (0 when not stored)
};

/// The M of a config text "M=<m>;..." (a positive decimal integer) and the text after
/// its ';'. Errors (InvalidInput): no "M=" prefix, no ';', M not a positive integer.
Result<std::pair<std::int64_t, std::string_view>> parse_record_m(std::string_view text);

/// "name=value;name=value" (empty: none) as conditions. Errors (InvalidInput): a field
/// without '=', a name not of [A-Za-z0-9_]+, a repeated name.
Result<Conditions> parse_conditions(std::string_view text);

/// Reads a record's measurements JSON into `r` (whose M is already the config text's):
/// median_ns, and spread, reps and role when present. Errors: those listed under
/// parse_record for the measurements.
Result<void> parse_record_measurements(std::string_view measurements, Record& r);

/// A record of the current format from its config text and measurements JSON. Errors
/// (InvalidInput, naming what is wrong): those of parse_record_m and parse_conditions; no
/// "config=" field; measurements that are not a JSON object; median_ns not a finite
/// number > 0; an "M" that is not the config text's; a "role" other than winner,
/// runner_up or default; a "spread" not finite and >= 0; "reps" not an integer >= 0.
Result<Record> parse_record(std::string_view config, std::string_view measurements);

/// The config text of a record: "M=<m>;" then each condition "name=value;" in name order,
/// then "config=" and `config`. Precondition: no condition value holds ';'.
std::string record_config(std::int64_t m, const Conditions& conditions, std::string_view config);

/// The measurements JSON of a record ("role" left out when empty).
std::string record_measurements(std::int64_t m, double median_ns, double spread, std::int64_t reps,
                                std::string_view role);

/// The stored texts of `r` (current format): parse_record of them gives `r` back when
/// `r` came from parse_record.
std::pair<std::string, std::string> record_texts(const Record& r);

}  // namespace ternjit::autotune
