// SPDX-License-Identifier: Apache-2.0
// records.cpp - tuning records in the cache and the dispatch decision (records.h).
#include "autotune/records.h"

#include <charconv>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "targets/host_cpu.h"

namespace ternjit::autotune {

namespace {

const std::string& cpu_model() {
  static const std::string model = targets::detect_host_cpu().model;  // computed once, immutable
  return model;
}

std::string record_config(std::int64_t m, std::string_view config) { return "M=" + std::to_string(m) + ";" + std::string(config); }

std::string record_measurements(std::int64_t m, const Measurement& meas, std::string_view role) {
  nlohmann::json j;
  j["M"] = m;
  j["median_ns"] = meas.median_ns;
  j["spread"] = meas.spread;
  j["reps"] = meas.reps;
  j["role"] = role;
  return j.dump();
}

}  // namespace

cache::Key family_key(const targets::TuningProblem& p) {
  return cache::Key("tuning_family", {{"op", p.op},
                                      {"family", p.family},
                                      {"device", cpu_model()},
                                      {"version", std::string(cache::ternjit_version())}});
}

Result<int> store_result(cache::DiskCache& disk, const targets::TuningProblem& p, const TuneResult& r) {
  const cache::Key key = family_key(p);
  int added = 0;
  auto put = [&](const std::string& c, const Measurement& m, std::string_view role) -> Result<void> {
    TERNJIT_TRY(bool stored, disk.put_record(key, record_config(p.m, c), record_measurements(p.m, m, role)));
    added += stored ? 1 : 0;
    return success();
  };
  TERNJIT_TRY_VOID(put(r.winner, r.winner_m, "winner"));
  if (r.has_runner_up) TERNJIT_TRY_VOID(put(r.runner_up, r.runner_up_m, "runner_up"));
  if (r.default_ok && r.default_config != r.winner && !(r.has_runner_up && r.default_config == r.runner_up))
    TERNJIT_TRY_VOID(put(r.default_config, r.default_m, "default"));
  return added;
}

Result<std::vector<Record>> load_records(cache::DiskCache& disk, const targets::TuningProblem& p) {
  TERNJIT_TRY(auto raw, disk.records(family_key(p)));
  std::vector<Record> out;
  for (const cache::TuningRecord& t : raw) {
    const std::size_t semi = t.config.find(';');
    if (t.config.rfind("M=", 0) != 0 || semi == std::string::npos) continue;
    auto j = nlohmann::json::parse(t.measurements, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object() || !j.contains("median_ns") || !j["median_ns"].is_number()) continue;
    Record r;
    const char* first = t.config.data() + 2;
    if (auto [end, ec] = std::from_chars(first, t.config.data() + semi, r.M);
        ec != std::errc() || end != t.config.data() + semi || r.M < 1)
      continue;
    r.config = t.config.substr(semi + 1);
    r.median_ns = j["median_ns"].get<double>();
    if (j.contains("role") && j["role"].is_string()) r.role = j["role"].get<std::string>();
    out.push_back(std::move(r));
  }
  return out;
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
  // The best usable record per M.
  std::map<std::int64_t, const Record*> best;
  for (const Record& r : records) {
    if (!space.valid(r.config)) continue;
    const Record*& b = best[r.M];
    if (!b || r.median_ns < b->median_ns || (r.median_ns == b->median_ns && r.config < b->config)) b = &r;
  }
  Decision d;
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

Decision decide(cache::DiskCache* disk, const targets::TuningSpace& space) {
  if (disk) {
    auto recs = load_records(*disk, space.problem());
    if (recs.ok()) return decide(*recs, space);
  }
  return decide(std::vector<Record>{}, space);
}

}  // namespace ternjit::autotune
