// SPDX-License-Identifier: Apache-2.0
// records.cpp - tuning records in the cache and the dispatch decision (records.h).
#include "autotune/records.h"

#include <charconv>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "targets/host_cpu.h"

namespace ternjit::autotune {

namespace x86 = targets::x86;

namespace {

std::string bool_text(bool b) { return b ? "1" : "0"; }

const std::string& cpu_model() {
  static const std::string model = targets::detect_host_cpu().model;  // computed once, immutable
  return model;
}

std::string record_config(std::int64_t m, const x86::TMatMulConfig& c) {
  return "M=" + std::to_string(m) + ";" + c.str();
}

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

cache::Key tmatmul_family_key(const x86::TMatMulProblem& p, x86::Isa isa, int threads) {
  return cache::Key("tmatmul_tuning",
                    {{"target", "x86"},
                     {"K", std::to_string(p.K)},
                     {"N", std::to_string(p.N)},
                     {"x_kind", std::string(elem_name(p.x_kind))},
                     {"out_kind", std::string(elem_name(p.out_kind))},
                     {"epilogue", bool_text(p.x_scale) + bool_text(p.w_scale) + bool_text(p.w_scale_per_channel) +
                                      bool_text(p.bias) + bool_text(p.residual) + bool_text(p.relu)},
                     {"isa", std::string(x86::isa_name(isa))},
                     {"threads", std::to_string(threads)},
                     {"device", cpu_model()},
                     {"version", std::string(cache::ternjit_version())}});
}

Result<int> store_result(cache::DiskCache& disk, const x86::TMatMulProblem& p, x86::Isa isa, int threads,
                         const TuneResult& r) {
  const cache::Key key = tmatmul_family_key(p, isa, threads);
  int added = 0;
  auto put = [&](const x86::TMatMulConfig& c, const Measurement& m, std::string_view role) -> Result<void> {
    TERNJIT_TRY(bool stored, disk.put_record(key, record_config(p.M, c), record_measurements(p.M, m, role)));
    added += stored ? 1 : 0;
    return success();
  };
  TERNJIT_TRY_VOID(put(r.winner, r.winner_m, "winner"));
  if (r.has_runner_up) TERNJIT_TRY_VOID(put(r.runner_up, r.runner_up_m, "runner_up"));
  if (r.default_ok && !(r.default_config == r.winner) && !(r.has_runner_up && r.default_config == r.runner_up))
    TERNJIT_TRY_VOID(put(r.default_config, r.default_m, "default"));
  return added;
}

Result<std::vector<TMatMulRecord>> load_records(cache::DiskCache& disk, const x86::TMatMulProblem& p, x86::Isa isa,
                                                int threads) {
  TERNJIT_TRY(auto raw, disk.records(tmatmul_family_key(p, isa, threads)));
  std::vector<TMatMulRecord> out;
  for (const cache::TuningRecord& t : raw) {
    const std::size_t semi = t.config.find(';');
    if (t.config.rfind("M=", 0) != 0 || semi == std::string::npos) continue;
    auto cfg = x86::TMatMulConfig::parse(std::string_view(t.config).substr(semi + 1));
    if (!cfg.ok()) continue;
    auto j = nlohmann::json::parse(t.measurements, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object() || !j.contains("median_ns") || !j["median_ns"].is_number()) continue;
    TMatMulRecord r;
    const char* first = t.config.data() + 2;
    if (auto [end, ec] = std::from_chars(first, t.config.data() + semi, r.M); ec != std::errc() || r.M < 1) continue;
    r.config = *cfg;
    r.median_ns = j["median_ns"].get<double>();
    if (j.contains("role") && j["role"].is_string()) r.role = j["role"].get<std::string>();
    out.push_back(std::move(r));
  }
  return out;
}

std::string_view decision_source_name(DecisionSource s) {
  switch (s) {
    case DecisionSource::Exact:
      return "exact";
    case DecisionSource::Nearest:
      return "nearest";
    case DecisionSource::Default:
      return "default";
  }
  return "?";
}

Decision decide(const std::vector<TMatMulRecord>& records, const x86::TMatMulProblem& p, x86::Isa isa, int threads) {
  // The best usable record per M.
  std::map<std::int64_t, const TMatMulRecord*> best;
  for (const TMatMulRecord& r : records) {
    if (r.config.isa != isa || r.config.threads > std::max(1, threads)) continue;
    if (!x86::validate(p, r.config).ok()) continue;
    const TMatMulRecord*& b = best[r.M];
    if (!b || r.median_ns < b->median_ns || (r.median_ns == b->median_ns && r.config.str() < b->config.str())) b = &r;
  }
  Decision d;
  if (auto it = best.find(p.M); it != best.end()) {
    d.config = it->second->config;
    d.source = DecisionSource::Exact;
    d.tuned_m = p.M;
    return d;
  }
  const TMatMulRecord* nearest = nullptr;
  double dist = 0;
  for (const auto& [m, r] : best) {  // ascending M: ties keep the smaller
    const double dd = std::fabs(std::log2(static_cast<double>(m) / static_cast<double>(p.M)));
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
  d.config = x86::default_config(p, isa, threads);
  return d;
}

Decision decide(cache::DiskCache* disk, const x86::TMatMulProblem& p, x86::Isa isa, int threads) {
  if (disk) {
    auto recs = load_records(*disk, p, isa, threads);
    if (recs.ok()) return decide(*recs, p, isa, threads);
  }
  return decide(std::vector<TMatMulRecord>{}, p, isa, threads);
}

}  // namespace ternjit::autotune
