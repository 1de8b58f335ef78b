// SPDX-License-Identifier: Apache-2.0
// records.cpp - tuning records in the cache and the dispatch decision (records.h).
#include "autotune/records.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "targets/host_cpu.h"

namespace ternjit::autotune {

namespace {

const std::string& cpu_model() {
  static const std::string model = targets::detect_host_cpu().model;  // computed once, immutable
  return model;
}

// A condition value as the record's config text holds it: ';' separates its fields.
std::string condition_value(std::string_view v) {
  std::string out(v);
  std::replace(out.begin(), out.end(), ';', ',');
  return out;
}

// The older format's family text: the problem's, then its own conditions in its order.
std::string legacy_family(const targets::TuningProblem& p) {
  std::string text = p.family;
  for (const targets::TuningCondition& c : p.conditions) text += ";" + c.name + "=" + c.value;
  return text;
}

// The older format's records of `p` under other conditions than `here`: every record
// whose key is a "tuning_family" of the same op and family (its own conditions appended,
// the same names as the problem's). Only their keys are read: they are reported, never
// applied.
Result<std::vector<Record>> legacy_others(cache::DiskCache& disk, const targets::TuningProblem& p,
                                          const Conditions& here) {
  TERNJIT_TRY(auto entries, disk.list());
  std::vector<Record> out;
  const std::string prefix = p.family + ";";
  for (const cache::EntryInfo& e : entries) {
    if (e.kind != cache::EntryKind::Record || !e.key || e.key->kind() != "record") continue;
    auto kernel = cache::Key::parse(e.key->field("kernel"));
    if (!kernel || kernel->kind() != "tuning_family" || kernel->field("op") != p.op) continue;
    const std::string_view family = kernel->field("family");
    if (family.substr(0, prefix.size()) != prefix) continue;
    auto conditions = parse_conditions(family.substr(prefix.size()));
    if (!conditions.ok() || conditions->size() != p.conditions.size()) continue;
    bool same_names = true;
    for (const targets::TuningCondition& c : p.conditions) same_names = same_names && conditions->count(c.name);
    if (!same_names) continue;
    (*conditions)["cpu"] = condition_value(kernel->field("device"));
    (*conditions)["version"] = condition_value(kernel->field("version"));
    if (*conditions == here) continue;  // read through legacy_family_key, and verified
    auto m = parse_record_m(e.key->field("config"));
    if (!m.ok()) continue;
    Record r;
    r.M = m->first;
    r.config = std::string(m->second);
    r.conditions = std::move(*conditions);
    r.legacy = true;
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace

Conditions conditions_of(const targets::TuningProblem& p) {
  Conditions c;
  for (const targets::TuningCondition& t : p.conditions) c[t.name] = condition_value(t.value);
  c["cpu"] = condition_value(cpu_model());
  c["version"] = condition_value(cache::ternjit_version());
  return c;
}

cache::Key problem_key(const targets::TuningProblem& p) {
  return cache::Key("tuning_problem", {{"op", p.op}, {"problem", p.family}});
}

cache::Key legacy_family_key(const targets::TuningProblem& p) {
  return cache::Key("tuning_family", {{"op", p.op},
                                      {"family", legacy_family(p)},
                                      {"device", cpu_model()},
                                      {"version", std::string(cache::ternjit_version())}});
}

Result<int> store_result(cache::DiskCache& disk, const targets::TuningProblem& p, const TuneResult& r) {
  const cache::Key key = problem_key(p);
  const Conditions conditions = conditions_of(p);
  int added = 0;
  auto put = [&](const std::string& c, const Measurement& m, std::string_view role) -> Result<void> {
    TERNJIT_TRY(bool stored,
                disk.put_record(key, record_config(p.m, conditions, c),
                                record_measurements(p.m, m.median_ns, m.spread, m.reps, role)));
    added += stored ? 1 : 0;
    return success();
  };
  TERNJIT_TRY_VOID(put(r.winner, r.winner_m, "winner"));
  if (r.has_runner_up) TERNJIT_TRY_VOID(put(r.runner_up, r.runner_up_m, "runner_up"));
  if (r.default_ok && r.default_config != r.winner && !(r.has_runner_up && r.default_config == r.runner_up))
    TERNJIT_TRY_VOID(put(r.default_config, r.default_m, "default"));
  return added;
}

Result<std::vector<Record>> load_records(cache::DiskCache& disk, const targets::TuningProblem& p, RecordScope scope) {
  std::vector<Record> out;
  TERNJIT_TRY(auto raw, disk.records(problem_key(p)));
  for (const cache::TuningRecord& t : raw) {
    auto r = parse_record(t.config, t.measurements);  // a record that does not validate is skipped
    if (r.ok()) out.push_back(std::move(*r));
  }
  // The older format: its key holds the conditions, so these were measured under ours.
  const Conditions here = conditions_of(p);
  TERNJIT_TRY(auto old, disk.records(legacy_family_key(p)));
  for (const cache::TuningRecord& t : old) {
    auto m = parse_record_m(t.config);
    if (!m.ok()) continue;
    Record r;
    r.M = m->first;
    r.config = std::string(m->second);
    r.conditions = here;
    r.legacy = true;
    if (parse_record_measurements(t.measurements, r).ok()) out.push_back(std::move(r));
  }
  if (scope == RecordScope::Explain) {
    TERNJIT_TRY(auto others, legacy_others(disk, p, here));
    for (Record& r : others) out.push_back(std::move(r));
  }
  return out;
}

std::string mismatch(const Record& record, const Conditions& here, const targets::TuningSpace& space) {
  if (record.conditions != here) {
    // Every name either side has, in name order: "measured with a=1 b=2; here a=3 b=4".
    std::string theirs, ours;
    auto value = [](const Conditions& c, const std::string& name) {
      auto it = c.find(name);
      return it == c.end() ? std::string("(none)") : it->second;
    };
    std::map<std::string, int> names;
    for (const auto& [n, v] : record.conditions) names[n];
    for (const auto& [n, v] : here) names[n];
    for (const auto& [n, unused] : names) {
      const std::string a = value(record.conditions, n), b = value(here, n);
      if (a == b) continue;
      theirs += (theirs.empty() ? "" : " ") + n + "=" + a;
      ours += (ours.empty() ? "" : " ") + n + "=" + b;
    }
    return "measured with " + theirs + "; here " + ours;
  }
  if (!space.valid(record.config)) return "config not valid for M=" + std::to_string(space.problem().m);
  return {};
}

std::string_view decision_source_name(DecisionSource s) {
  switch (s) {
    case DecisionSource::Exact: return "exact";
    case DecisionSource::Nearest: return "nearest";
    case DecisionSource::Default: return "default";
  }
  return "?";
}

Decision decide(const std::vector<Record>& records, const targets::TuningSpace& space) {
  const std::int64_t M = std::max<std::int64_t>(1, space.problem().m);
  const Conditions here = conditions_of(space.problem());
  Decision d;
  // The best applicable record per M.
  std::map<std::int64_t, const Record*> best;
  for (const Record& r : records) {
    if (std::string why = mismatch(r, here, space); !why.empty()) {
      d.skipped.push_back({r, std::move(why)});
      continue;
    }
    ++d.applicable;
    const Record*& b = best[r.M];
    if (!b || r.median_ns < b->median_ns || (r.median_ns == b->median_ns && r.config < b->config)) b = &r;
  }
  if (auto it = best.find(M); it != best.end()) {
    d.config = it->second->config;
    d.source = DecisionSource::Exact;
    d.tuned_m = M;
    return d;
  }
  const Record* nearest = nullptr;
  double dist = 0;
  for (const auto& [m, r] : best) {  // ascending M: ties keep the smaller
    const double dd = std::fabs(std::log2(static_cast<double>(m) / static_cast<double>(M)));
    if (!nearest || dd < dist) {
      nearest = r;
      dist = dd;
    }
  }
  if (nearest) {
    d.config = nearest->config;
    d.source = DecisionSource::Nearest;
    d.tuned_m = nearest->M;
    return d;
  }
  d.config = space.default_config();
  return d;
}

Decision decide(cache::DiskCache* disk, const targets::TuningSpace& space, RecordScope scope) {
  if (disk) {
    auto recs = load_records(*disk, space.problem(), scope);
    if (recs.ok()) return decide(*recs, space);
  }
  return decide(std::vector<Record>{}, space);
}

}  // namespace ternjit::autotune
