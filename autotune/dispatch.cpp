// SPDX-License-Identifier: Apache-2.0
// dispatch.cpp - the records-backed tuning source (dispatch.h).
#include "autotune/dispatch.h"

namespace ternjit::autotune {

std::string RecordSource::decide(const targets::TuningSpace& space) const {
  const DispatchOptions& o = options_;
  Decision d;
  bool tuned_now = false;
  if (o.mode == targets::TuningMode::Off) {
    d.config = space.default_config();
  } else {
    cache::DiskCache* disk = o.disk ? o.disk() : nullptr;
    d = autotune::decide(disk, space, o.scope);
    if (o.mode == targets::TuningMode::Tune && disk && d.source != DecisionSource::Exact) {
      // Tune at first call: a short halving search, stored, then decided again (so the
      // choice is the same one a later "cached" load makes).
      targets::TuningBenchOptions bo;
      bo.rotate_bytes = std::size_t{16} << 20;
      if (auto bench = space.bench(bo); bench.ok()) {
        TuneOptions to;
        to.strategy = Strategy::Halving;
        to.budget_s = o.tune_budget_s;
        to.max_trials = o.tune_max_trials;
        to.compile_threads = 1;
        auto r = tune(space, **bench, to);
        if (r.ok() && store_result(*disk, space.problem(), *r).ok()) {
          tuned_now = true;
          d = autotune::decide(disk, space, o.scope);
        }
      }
    }
  }
  if (o.on_decision) o.on_decision(space.problem(), d, tuned_now);
  return d.config;
}

}  // namespace ternjit::autotune
