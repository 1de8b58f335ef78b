// SPDX-License-Identifier: Apache-2.0
// tune_cmd.cpp - `ternjit tune`: specialize per shape, tune every space the target declares, store and print the decisions.
#include "tools/ternjit/tune_cmd.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <string_view>

#include "autotune/dispatch.h"
#include "autotune/mpi_collective.h"
#include "autotune/records.h"
#include "autotune/tuner.h"
#include "cache/disk_cache.h"
#include "ir/bind.h"
#include "jit/options.h"
#include "passes/pipeline.h"
#include "passes/specialize_shapes.h"
#include "targets/registry.h"
#include "tools/ternjit/commands.h"

namespace ternjit::cli {

namespace {

using autotune::TuneResult;

Error bad(std::string msg) { return make_error(ErrorCode::InvalidArgument, std::move(msg)); }

// "60s", "2m", "500ms", "1h", "90" (seconds) -> seconds.
Result<double> parse_budget(std::string_view t) {
  double scale = 1;
  std::string num(t);
  auto strip = [&](std::string_view suf, double s) {
    if (num.size() > suf.size() && num.compare(num.size() - suf.size(), suf.size(), suf) == 0) {
      num.resize(num.size() - suf.size());
      scale = s;
      return true;
    }
    return false;
  };
  strip("ms", 1e-3) || strip("s", 1) || strip("m", 60) || strip("h", 3600);
  char* end = nullptr;
  const double v = std::strtod(num.c_str(), &end);
  if (num.empty() || end != num.c_str() + num.size() || !(v > 0))
    return bad("--budget '" + std::string(t) + "': expected a positive duration such as 60s, 2m or 500ms");
  return v * scale;
}

// "M=1,8,32" and "K=64,N=16" (several --shape joined by ','): NAME=v starts a symbol, a
// bare number adds a value to the last one. The cross product of the value lists.
Result<std::vector<std::map<std::string, std::int64_t>>> parse_shapes(const std::vector<std::string>& shapes) {
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> syms;
  for (const std::string& s : shapes) {
    std::size_t pos = 0;
    while (pos <= s.size()) {
      std::size_t comma = s.find(',', pos);
      if (comma == std::string::npos) comma = s.size();
      std::string tok = s.substr(pos, comma - pos);
      pos = comma + 1;
      if (tok.empty()) continue;
      std::string value = tok;
      if (auto eq = tok.find('='); eq != std::string::npos) {
        syms.emplace_back(tok.substr(0, eq), std::vector<std::int64_t>{});
        value = tok.substr(eq + 1);
      } else if (syms.empty()) {
        return bad("--shape '" + s + "': expected NAME=VALUE[,VALUE...]");
      }
      char* end = nullptr;
      const long long v = std::strtoll(value.c_str(), &end, 10);
      if (value.empty() || end != value.c_str() + value.size() || v < 1)
        return bad("--shape '" + s + "': '" + value + "' is not a positive integer");
      syms.back().second.push_back(v);
    }
  }
  std::vector<std::map<std::string, std::int64_t>> out = {{}};
  for (const auto& [name, values] : syms) {
    std::vector<std::map<std::string, std::int64_t>> next;
    for (const auto& base : out)
      for (std::int64_t v : values) {
        auto m = base;
        m[name] = v;
        next.push_back(std::move(m));
      }
    out = std::move(next);
  }
  return out;
}

// Progress on stderr: one rewritten line on a terminal, plain lines otherwise.
struct ProgressPrinter {
  bool tty = isatty(2) != 0;
  bool quiet = false;
  std::string label;
  void operator()(const autotune::Progress& p) const {
    if (quiet) return;
    char best[96] = "-";
    if (p.best_ns > 0) std::snprintf(best, sizeof best, "%.4f ms", p.best_ns / 1e6);
    char left[48] = "";
    if (p.seconds_left >= 0) std::snprintf(left, sizeof left, ", %.0fs left", p.seconds_left);
    if (tty) {
      const int width = 24;
      const int filled = p.total > 0 ? std::min(width, p.done * width / p.total) : 0;
      std::string bar(static_cast<std::size_t>(filled), '#');
      bar.resize(width, '.');
      std::fprintf(stderr, "\r%s [%s] %d/%d round %d, best %s%s\x1b[K", label.c_str(), bar.c_str(), p.done, p.total,
                   p.round, best, left);
    } else {
      std::fprintf(stderr, "tune: %s: %d/%d round %d, best %s (%s)%s\n", label.c_str(), p.done, p.total, p.round, best,
                   p.best_config.c_str(), left);
    }
    std::fflush(stderr);
  }
  void end() const {
    if (tty && !quiet) std::fputs("\n", stderr);
  }
};

// One tunable kernel call of one shape, as the target declares it.
struct Job {
  std::string shape;
  std::string key;  // "<op>.<i>": the i-th space of that shape
  std::unique_ptr<targets::TuningSpace> space;
};

// "a=1 b=2": conditions as a line shows them.
std::string conditions_text(const autotune::Conditions& c) {
  std::string text;
  for (const auto& [name, value] : c) text += (text.empty() ? "" : " ") + name + "=" + value;
  return text;
}

// `tune --check`: for each job, the decision an engine of these options makes from the
// records of `disk` and every record of its problem that applies or does not (and why).
int check_records(const std::string& function, const std::string& target_name, const std::vector<Job>& jobs,
                  cache::DiskCache& disk, targets::TuningMode mode) {
  std::printf("# %s on %s: tuning=%s, records in %s\n", function.c_str(), target_name.c_str(),
              std::string(targets::tuning_mode_name(mode)).c_str(), disk.dir().c_str());
  std::string last_here;
  std::size_t served = 0;
  for (const Job& j : jobs) {
    const autotune::Conditions conditions = autotune::conditions_of(j.space->problem());
    const std::string here = conditions_text(conditions);
    if (here != last_here) std::printf("# here: %s\n", here.c_str());
    last_here = here;
    auto records = autotune::load_records(disk, j.space->problem(), autotune::RecordScope::Explain);
    if (!records.ok()) return report(records.error());
    const autotune::Decision d = autotune::decide(*records, *j.space);
    const bool uses = d.source != autotune::DecisionSource::Default && mode != targets::TuningMode::Off;
    served += uses ? 1 : 0;
    std::string what = std::string(autotune::decision_source_name(d.source));
    if (d.source != autotune::DecisionSource::Default) what += " M=" + std::to_string(d.tuned_m);
    std::printf("%-20s %-10s %zu record%s, %zu skipped: uses %s: %s\n", j.shape.c_str(), j.key.c_str(), d.applicable,
                d.applicable == 1 ? " applies" : "s apply", d.skipped.size(), what.c_str(), d.config.c_str());
    // The records that apply (by M, then median), then those that do not, with why.
    std::vector<const autotune::Record*> applying;
    for (const autotune::Record& r : *records)
      if (autotune::mismatch(r, conditions, *j.space).empty()) applying.push_back(&r);
    std::stable_sort(applying.begin(), applying.end(), [](const autotune::Record* a, const autotune::Record* b) {
      return a->M != b->M ? a->M < b->M : a->median_ns < b->median_ns;
    });
    auto older = [](const autotune::Record& r) { return r.legacy ? " (older format)" : ""; };
    for (const autotune::Record* r : applying)
      std::printf("  applies  M=%-5lld %-9s %9.4f ms  %s%s\n", static_cast<long long>(r->M),
                  r->role.empty() ? "-" : r->role.c_str(), r->median_ns / 1e6, r->config.c_str(), older(*r));
    for (const autotune::SkippedRecord& sk : d.skipped)
      std::printf("  skipped  M=%-5lld %-9s %s%s: %s\n", static_cast<long long>(sk.record.M),
                  sk.record.role.empty() ? "-" : sk.record.role.c_str(), sk.why.c_str(), older(sk.record),
                  sk.record.config.c_str());
  }
  std::fflush(stdout);
  if (mode == targets::TuningMode::Off) {
    std::fprintf(stderr, "ternjit: tune --check: tuning is off (TERNJIT_TUNING=off): engines use no record\n");
    return 1;
  }
  if (served < jobs.size()) {
    std::fprintf(stderr, "ternjit: tune --check: %zu of %zu kernels have no record that applies here\n",
                 jobs.size() - served, jobs.size());
    return 1;
  }
  return 0;
}

int run_tune(const TuneCommandOptions& o, const targets::TargetRegistry& registry, const autotune::Collective& coll) {
  const bool root = coll.rank() == 0;
  auto fail = [&](const Error& e) { return root ? report(e) : 1; };
  auto chosen = command_target(o.target, registry);
  if (!chosen.ok()) return fail(chosen.error());
  const targets::Target* target = chosen->target;
  const std::string target_name(target->name());
  auto strategy = autotune::parse_strategy(o.strategy);
  if (!strategy) return fail(bad("unknown --strategy '" + o.strategy + "' (expected exhaustive, random or halving)"));
  auto budget = parse_budget(o.budget);
  if (!budget.ok()) return fail(budget.error());
  const targets::CompileOptions copts = chosen->compile;
  const passes::OptLevel level = copts.opt_level;
  auto shapes = parse_shapes(o.shapes);
  if (!shapes.ok()) return fail(shapes.error());
  auto m = load_module(o.file);
  if (!m.ok()) return fail(m.error());
  auto function = pick_function(*m, o.file, o.function);
  if (!function.ok()) return fail(function.error());

  // Every shape's tunable kernels, as the target declares them, before any tuning (the
  // budget is split evenly across them).
  std::vector<Job> jobs;
  for (auto& s : *shapes) {
    auto resolved = resolve_shapes(*m, s);
    if (!resolved.ok()) return fail(resolved.error());
    s = std::move(resolved->values);
    auto spec = passes::specialize_function(*m, *function, s, /*require_static=*/true);
    if (!spec.ok()) return fail(spec.error());
    // Measuring allocates the kernel's buffers.
    if (auto fits = passes::check_tensor_bytes(*spec, *function); !fits.ok()) return fail(fits.error());
    auto ran = passes::run_pipeline(*spec, passes::default_pipeline(level), passes::PipelineOptions{});
    if (!ran.ok()) return fail(ran.error());
    auto spaces = target->tuning_spaces(*spec, *function, copts);
    if (!spaces.ok()) return fail(spaces.error());
    for (std::size_t i = 0; i < spaces->size(); ++i) {
      const std::string op = (*spaces)[i]->problem().op;
      jobs.push_back({shape_text(s), op.substr(op.find('.') + 1) + "." + std::to_string(i), std::move((*spaces)[i])});
    }
  }
  if (jobs.empty())
    return fail(make_error(ErrorCode::NotFound, *function + " has no kernel with knobs to tune on target '" +
                                                    target_name + "'"));

  // --cache-dir, else TERNJIT_CACHE_DIR (the engine's and `cache ls`'s), else the default.
  const std::string cache_dir = chosen->engine.cache_dir;
  std::unique_ptr<cache::DiskCache> disk;
  if (cache_dir != "off") {
    cache::CacheOptions co;
    co.dir = cache_dir.empty() ? jit::default_cache_dir() : cache_dir;
    if (co.dir.empty())
      return fail(make_error(ErrorCode::IoError, "no cache directory: pass --cache-dir DIR (or off)"));
    auto d = cache::DiskCache::open(co);
    if (!d.ok()) return fail(d.error());
    disk = std::move(*d);
  }
  if (o.check) {
    if (!disk)
      return fail(bad("tune --check reads the tuning records: it needs a cache directory, not --cache-dir off"));
    return check_records(*function, target_name, jobs, *disk, *targets::parse_tuning_mode(chosen->engine.tuning));
  }

  const double per_job = *budget / static_cast<double>(jobs.size());
  if (root)
    std::printf("# %s on %s (%s; %s) threads=%d strategy=%s budget=%.3gs (%.3gs per kernel)%s\n", function->c_str(),
                target_name.c_str(), jobs.front().space->problem().family.c_str(),
                conditions_text(autotune::conditions_of(jobs.front().space->problem())).c_str(), copts.threads,
                o.strategy.c_str(), *budget, per_job,
                coll.size() > 1 ? (" ranks=" + std::to_string(coll.size())).c_str() : "");
  std::vector<std::string> rows;
  std::vector<std::string> failures;
  int status = 0;
  for (const Job& j : jobs) {
    auto bench = j.space->bench({});
    if (!bench.ok()) return fail(bench.error());
    autotune::TuneOptions to;
    to.strategy = *strategy;
    to.budget_s = per_job;
    to.max_trials = o.trials;
    to.seed = o.seed;
    to.collective = &coll;
    ProgressPrinter pp;
    pp.quiet = o.quiet || !root;
    pp.label = j.shape + " " + j.key;
    to.progress = [&pp](const autotune::Progress& p) { pp(p); };
    auto r = autotune::tune(*j.space, **bench, to);
    pp.end();
    if (!r.ok()) {
      if (root)
        std::fprintf(stderr, "ternjit: tune: %s %s: %s\n", j.shape.c_str(), j.key.c_str(), r.error().message.c_str());
      status = 1;
      continue;
    }
    const TuneResult& t = *r;
    for (const autotune::Trial& f : t.failures)
      failures.push_back(j.shape + " " + j.key + " " + f.config + ": " + f.error);
    if (disk) {
      auto stored = autotune::store_result(*disk, j.space->problem(), t);
      if (!stored.ok() && root)
        std::fprintf(stderr, "ternjit: tune: storing records: %s\n", stored.error().message.c_str());
    }
    char line[1024];
    std::snprintf(line, sizeof line, "%-20s %-10s %9.4f %9.4f %7.2fx  %-4s %4zu/%-5zu %s", j.shape.c_str(),
                  j.key.c_str(), t.default_ok ? t.default_m.median_ns / 1e6 : 0.0, t.winner_m.median_ns / 1e6,
                  t.speedup(), t.has_runner_up ? (t.significant ? "yes" : "no") : "-", t.measured, t.space_size,
                  t.winner.c_str());
    rows.push_back(line);
    // Every rank says what it decided (the MPI test checks that they agree).
    if (coll.size() > 1)
      std::printf("rank %d decision: %s %s %s\n", coll.rank(), j.shape.c_str(), j.key.c_str(), t.winner.c_str());
  }
  if (root) {
    std::printf("%-20s %-10s %9s %9s %8s  %-4s %10s %s\n", "shape", "kernel", "default", "tuned", "speedup", "sig",
                "measured", "chosen config");
    std::printf("%-20s %-10s %9s %9s %8s  %-4s %10s\n", "", "", "ms", "ms", "", "", "/space");
    for (const std::string& r : rows) std::printf("%s\n", r.c_str());
    if (!failures.empty()) {
      std::printf("failed candidates (%zu):\n", failures.size());
      for (const std::string& f : failures) std::printf("  %s\n", f.c_str());
    }
    if (disk) std::printf("records stored in %s\n", disk->dir().c_str());
  }
  std::fflush(stdout);
  return status;
}

}  // namespace

int cmd_tune(const TuneCommandOptions& options, const targets::TargetRegistry& registry) {
  if (!options.mpi) return run_tune(options, registry, autotune::local_collective());
  auto coll = autotune::mpi_start(nullptr, nullptr);
  if (!coll.ok()) return report(coll.error());
  return run_tune(options, registry, **coll);
}

void add_tune_command(CLI::App& app, const targets::TargetRegistry& registry) {
  auto o = std::make_shared<TuneCommandOptions>();
  auto* cmd = app.add_subcommand("tune", "search kernel configurations of one function over shapes; store the winners");
  cmd->add_option("file", o->file, "the .tri or .tir file")->required();
  add_function_flags(*cmd, o->function, "to tune");
  cmd->add_option("--shape", o->shapes,
                  "symbol values; several values tune each: M=1,8,32 (repeatable, e.g. --shape K=64,N=128)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--budget", o->budget, "time budget of the whole command: 60s (default), 2m, 500ms");
  cmd->add_option("--strategy", o->strategy, "halving (default), random or exhaustive");
  cmd->add_option("--trials", o->trials, "configurations measured per kernel at most (default: 15% of the space)");
  cmd->add_option("--seed", o->seed, "seed of the random choices (default 1)");
  add_target_flags(*cmd, o->target, registry, "the target whose kernels to tune (one that declares tuning spaces)");
  add_cache_dir_flag(*cmd, o->target.cache_dir);
  cmd->add_flag("--mpi", o->mpi, "split candidates across MPI ranks: mpirun -n R ternjit tune ... --mpi");
  cmd->add_flag("-q,--quiet", o->quiet, "no progress output");
  cmd->add_flag("--check", o->check,
                "measure nothing: list which tuning records in the cache apply to each kernel on this machine with "
                "these options, which do not and why (exit 1 when a kernel has none)")
      ->excludes("--mpi");
  // Each target that declares tuning spaces describes them (Target::describe_tuning).
  std::string spaces;
  for (const auto& t : registry.all())
    if (std::string d = t->describe_tuning(); !d.empty()) spaces += (spaces.empty() ? "" : "\n") + d;
  if (!spaces.empty()) cmd->footer("Search spaces:\n" + spaces);
  cmd->callback([o, &registry] { end_command(cmd_tune(*o, registry)); });
}

}  // namespace ternjit::cli
