// SPDX-License-Identifier: Apache-2.0
// tuner.cpp - the search strategies (tuner.h).
#include "autotune/tuner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <numeric>
#include <random>
#include <sstream>
#include <thread>


namespace ternjit::autotune {

namespace {

using Clock = std::chrono::steady_clock;

class LocalCollective final : public Collective {
 public:
  [[nodiscard]] int rank() const override { return 0; }
  [[nodiscard]] int size() const override { return 1; }
  std::vector<std::string> gather(const std::string& mine) const override { return {mine}; }
  std::string broadcast(const std::string& text) const override { return text; }
};

// Text of one trial result for the exchange between ranks: position, flags, numbers
// (exactly: %a), error. One line each.
std::string encode(std::size_t pos, const Trial& t) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%zu\t%d\t%d\t%a\t%a\t%a\t%d\t", pos, t.ok ? 1 : 0, t.skipped ? 1 : 0, t.m.median_ns,
                t.m.min_ns, t.m.spread, t.m.reps);
  std::string err = t.error;
  std::replace(err.begin(), err.end(), '\n', ' ');
  std::replace(err.begin(), err.end(), '\t', ' ');
  return buf + err + "\n";
}

// Parses encode()'s lines into `out` (indexed by position).
void decode(const std::string& text, std::vector<Trial>& out) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::size_t pos = 0;
    int ok = 0, skipped = 0, reps = 0, used = 0;
    double med = 0, mn = 0, spread = 0;
    if (std::sscanf(line.c_str(), "%zu\t%d\t%d\t%la\t%la\t%la\t%d\t%n", &pos, &ok, &skipped, &med, &mn, &spread, &reps,
                    &used) < 7 ||
        pos >= out.size())
      continue;
    Trial& t = out[pos];
    t.ok = ok != 0;
    t.skipped = skipped != 0;
    t.m = Measurement{med, mn, spread, reps};
    t.error = line.substr(static_cast<std::size_t>(used));
  }
}

struct Search {
  const targets::TuningBench& bench;
  const std::map<std::string, double>& estimates;
  const TuneOptions& o;
  const Collective& coll;
  Clock::time_point start, deadline;
  bool has_deadline = false;
  Progress progress;
  bool budget_hit = false;

  [[nodiscard]] double seconds_left() const {
    if (!has_deadline) return -1;
    return std::chrono::duration<double>(deadline - Clock::now()).count();
  }

  // Measures `configs` (round `round`, options `mo`), each rank its share; every rank
  // returns the same merged trials, in the order of `configs`.
  std::vector<Trial> round(const std::vector<std::string>& configs, const MeasureOptions& mo, int round_no) {
    std::vector<Trial> all(configs.size());
    for (std::size_t i = 0; i < configs.size(); ++i) {
      all[i].config = configs[i];
      auto est = estimates.find(configs[i]);
      all[i].estimated_ns = est == estimates.end() ? 0 : est->second;
      all[i].round = round_no;
    }
    std::vector<std::size_t> mine;
    for (std::size_t i = 0; i < configs.size(); ++i)
      if (static_cast<int>(i % static_cast<std::size_t>(coll.size())) == coll.rank()) mine.push_back(i);
    std::string encoded;
    const std::size_t batch = static_cast<std::size_t>(std::max(1, o.compile_threads)) * 2;
    for (std::size_t b = 0; b < mine.size(); b += batch) {
      const std::size_t e = std::min(mine.size(), b + batch);
      // Compile the batch in parallel (code generation and weight packing) ...
      std::vector<Result<std::unique_ptr<targets::TuningRun>>> prepared;
      prepared.reserve(e - b);
      for (std::size_t i = b; i < e; ++i) prepared.emplace_back(make_error(ErrorCode::Internal, "not compiled"));
      std::vector<std::thread> workers;
      const std::size_t nthreads =
          std::min<std::size_t>(static_cast<std::size_t>(std::max(1, o.compile_threads)), e - b);
      for (std::size_t w = 0; w < nthreads; ++w)
        workers.emplace_back([&, w] {
          for (std::size_t i = b + w; i < e; i += nthreads) prepared[i - b] = bench.prepare(configs[mine[i]]);
        });
      for (std::thread& t : workers) t.join();
      // ... then measure one at a time.
      for (std::size_t i = b; i < e; ++i) {
        Trial& t = all[mine[i]];
        if (has_deadline && Clock::now() >= deadline) {
          t.skipped = true;
          t.error = "skipped: time budget spent";
          budget_hit = true;
        } else if (!prepared[i - b].ok()) {
          t.error = "compile: " + prepared[i - b].error().message;
        } else if (auto m = o.measure_fn ? o.measure_fn(**prepared[i - b], mo)
                                          : measure([&run = **prepared[i - b]](int k) { run.run(k); }, mo);
                   !m.ok()) {
          t.error = "measure: " + m.error().message;
        } else {
          t.ok = true;
          t.m = *m;
        }
        prepared[i - b] = make_error(ErrorCode::Internal, "released");  // free packed weights early
        if (!t.skipped) ++progress.done;
        if (t.ok && (progress.best_ns == 0 || t.m.median_ns < progress.best_ns)) {
          progress.best_ns = t.m.median_ns;
          progress.best_config = t.config;
        }
        progress.seconds_left = seconds_left();
        progress.round = round_no;
        if (o.progress) o.progress(progress);
        encoded += encode(mine[i], t);
      }
    }
    if (coll.size() > 1) {
      // Rank 0 merges every rank's lines (they name disjoint positions) and sends the
      // merged text to all: every rank decodes the same bytes.
      std::vector<std::string> parts = coll.gather(encoded);
      std::string merged;
      for (const std::string& p : parts) merged += p;
      encoded = coll.broadcast(merged);
      budget_hit = false;
    }
    decode(encoded, all);
    for (const Trial& t : all) budget_hit = budget_hit || t.skipped;
    return all;
  }
};

// Indices of `trials` that succeeded, fastest median first (ties: earlier first).
std::vector<std::size_t> ranking(const std::vector<Trial>& trials) {
  std::vector<std::size_t> idx;
  for (std::size_t i = 0; i < trials.size(); ++i)
    if (trials[i].ok) idx.push_back(i);
  std::stable_sort(idx.begin(), idx.end(),
                   [&](std::size_t a, std::size_t b) { return trials[a].m.median_ns < trials[b].m.median_ns; });
  return idx;
}

}  // namespace

std::string_view strategy_name(Strategy s) {
  switch (s) {
    case Strategy::Exhaustive:
      return "exhaustive";
    case Strategy::Random:
      return "random";
    case Strategy::Halving:
      return "halving";
  }
  return "?";
}

std::optional<Strategy> parse_strategy(std::string_view name) {
  for (Strategy s : {Strategy::Exhaustive, Strategy::Random, Strategy::Halving})
    if (strategy_name(s) == name) return s;
  return std::nullopt;
}

const Collective& local_collective() {
  static const LocalCollective c;  // stateless
  return c;
}

double TuneResult::speedup() const {
  if (!default_ok || winner_m.median_ns <= 0) return 1.0;
  return default_m.median_ns / winner_m.median_ns;
}

Result<TuneResult> tune(const targets::TuningSpace& tspace, const targets::TuningBench& bench, const TuneOptions& o) {
  const std::vector<targets::TuningCandidate> space = tspace.candidates();
  const std::string default_config = tspace.default_config();
  if (space.empty()) return make_error(ErrorCode::InvalidArgument, "tune: the search space is empty");
  const Collective& coll = o.collective ? *o.collective : local_collective();
  std::map<std::string, double> estimates;
  for (const targets::TuningCandidate& c : space) estimates.emplace(c.config, c.estimated_ns);
  Search s{bench, estimates, o, coll, Clock::now(), {}, false, {}, false};
  if (o.budget_s > 0) {
    s.has_deadline = true;
    s.deadline = s.start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.budget_s));
  }

  // Rank the space by the cost model (stable: ties keep the declared order).
  const std::size_t n = space.size();
  std::vector<double> est(n);
  for (std::size_t i = 0; i < n; ++i) est[i] = space[i].estimated_ns;
  std::vector<std::size_t> ranked(n);
  std::iota(ranked.begin(), ranked.end(), std::size_t{0});
  std::stable_sort(ranked.begin(), ranked.end(), [&](std::size_t a, std::size_t b) { return est[a] < est[b]; });

  const bool exhaustive = o.strategy == Strategy::Exhaustive;
  std::size_t trials = o.max_trials > 0 ? static_cast<std::size_t>(o.max_trials)
                       : exhaustive     ? n
                                        : std::max<std::size_t>(8, static_cast<std::size_t>(std::ceil(0.15 * n)));
  trials = std::max<std::size_t>(1, std::min(trials, n));
  // The cost model ranks within an algorithm class (variant x vector width) far better
  // than across classes, so pruning and the greedy picks are per class: each class keeps
  // its cheapest prune_keep fraction, and the greedy picks take each class's next best in
  // turn. No class is lost to a biased estimate.
  const double keep_frac = exhaustive ? 1.0 : std::clamp(o.prune_keep, 0.0, 1.0);
  std::map<std::string, std::vector<std::size_t>> classes;  // ranked within each class
  for (std::size_t i : ranked) classes[space[i].group].push_back(i);
  std::vector<std::size_t> pool;
  for (auto& [c, members] : classes) {
    const auto k = std::max<std::size_t>(1, static_cast<std::size_t>(std::ceil(keep_frac * members.size())));
    members.resize(std::min(members.size(), k));
    pool.insert(pool.end(), members.begin(), members.end());
  }
  std::stable_sort(pool.begin(), pool.end(), [&](std::size_t a, std::size_t b) { return est[a] < est[b]; });
  for (std::size_t k = 0; pool.size() < trials && k < n; ++k)  // the trial budget may exceed the pruned pool
    if (std::find(pool.begin(), pool.end(), ranked[k]) == pool.end()) pool.push_back(ranked[k]);

  // The candidates: the default first (the baseline), then by strategy.
  std::vector<std::string> cands = {default_config};
  auto add = [&](std::size_t i) {
    if (cands.size() < trials && std::find(cands.begin(), cands.end(), space[i].config) == cands.end())
      cands.push_back(space[i].config);
  };
  std::mt19937_64 rng(o.seed);
  if (exhaustive) {
    for (std::size_t i : pool) add(i);
  } else {
    const std::size_t greedy = o.strategy == Strategy::Halving ? (trials + 1) / 2 : 0;
    for (std::size_t depth = 0; cands.size() < greedy; ++depth) {
      bool any = false;
      for (const auto& [c, members] : classes)
        if (depth < members.size() && cands.size() < greedy) {
          add(members[depth]);
          any = true;
        }
      if (!any) break;
    }
    std::vector<std::size_t> rest(pool.begin(), pool.end());
    std::shuffle(rest.begin(), rest.end(), rng);
    for (std::size_t i : rest) add(i);
  }

  TuneResult r;
  r.space_size = n;
  r.default_config = default_config;
  std::vector<Trial> final_round;
  std::vector<Trial> tried;  // first full state of each distinct config, updated by later rounds
  auto record = [&](const std::vector<Trial>& ts) {
    for (const Trial& t : ts) {
      if (t.skipped) continue;
      auto it = std::find_if(tried.begin(), tried.end(), [&](const Trial& x) { return x.config == t.config; });
      if (it == tried.end())
        tried.push_back(t);
      else
        *it = t;
    }
  };

  if (o.strategy != Strategy::Halving) {
    s.progress.total = static_cast<int>(cands.size());
    final_round = s.round(cands, o.measure, 0);
    record(final_round);
  } else {
    // Successive halving with eta = 3: brief measurements first, the best third goes on
    // with three times the repetitions, until at most three remain; those are measured fully.
    // Planned measurements: every round's candidates (a third of the previous), plus the default at the end.
    int planned = 0;
    for (std::size_t k = cands.size(); k > 3; k = (k + 2) / 3) planned += static_cast<int>(k);
    s.progress.total = planned + 4;
    std::vector<std::string> alive = cands;
    int rnd = 0;
    MeasureOptions quick = o.measure;
    quick.warmup = 1;
    quick.min_reps = 3;
    quick.max_reps = 3;
    quick.max_seconds = o.measure.max_seconds / 4;
    while (alive.size() > 3) {
      std::vector<Trial> ts = s.round(alive, quick, rnd);
      record(ts);
      std::vector<std::size_t> order = ranking(ts);
      const std::size_t next = std::max<std::size_t>(1, (alive.size() + 2) / 3);
      std::vector<std::string> survivors;
      for (std::size_t k = 0; k < order.size() && survivors.size() < next; ++k)
        survivors.push_back(ts[order[k]].config);
      alive = std::move(survivors);
      ++rnd;
      quick.min_reps *= 3;
      quick.max_reps *= 3;
      if (s.budget_hit) break;
    }
    // The default always reaches the last round: it is the baseline the winner must beat
    // under the same full measurement (a brief one may have dropped it by noise).
    if (std::find(alive.begin(), alive.end(), default_config) == alive.end()) alive.push_back(default_config);
    {
      final_round = s.round(alive, o.measure, rnd);
      record(final_round);
    }
  }

  // The default's full measurement (the speedup baseline) unless the last round had it.
  auto def_in_final = std::find_if(final_round.begin(), final_round.end(),
                                   [&](const Trial& t) { return t.config == default_config && t.ok; });
  if (def_in_final != final_round.end()) {
    r.default_ok = true;
    r.default_m = def_in_final->m;
  } else {
    for (const Trial& t : tried)
      if (t.config == default_config && t.ok) {
        r.default_ok = true;
        r.default_m = t.m;
      }
  }

  r.trials = tried;
  for (const Trial& t : tried)
    if (!t.ok) r.failures.push_back(t);
  r.measured = tried.size();
  r.budget_hit = s.budget_hit;
  r.seconds = std::chrono::duration<double>(Clock::now() - s.start).count();

  std::vector<std::size_t> order = ranking(final_round);
  if (order.empty()) {
    std::string why;
    for (const Trial& t : r.failures) why += "; " + t.config + ": " + t.error;
    return make_error(ErrorCode::Unavailable, "tune: no candidate could be measured" +
                                                  (why.empty() ? std::string(" (time budget spent)") : why));
  }
  r.winner = final_round[order[0]].config;
  r.winner_m = final_round[order[0]].m;
  if (order.size() > 1) {
    r.has_runner_up = true;
    r.runner_up = final_round[order[1]].config;
    r.runner_up_m = final_round[order[1]].m;
    r.significant = differs_beyond_noise(r.winner_m, r.runner_up_m);
  }
  return r;
}

}  // namespace ternjit::autotune
