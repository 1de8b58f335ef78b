// SPDX-License-Identifier: Apache-2.0
// difftest_main.cpp - the `difftest` tool: random programs, every level, interpreter before/after.
//
//   difftest [--programs N] [--seed S] [--inputs K] [--levels O1,O2] [--passes a,b]
//            [--target T[,T...]|all] [--except T[,T...]] [--threads N] [--min-checked C] [--file F.tir]...
//            [--minimize] [--free-quant] [--decoder-share P] [--max-elements E]
//            [--max-reports R] [--print] [--verbose]
//
// Program i has seed S + i and is checked on input seeds 1..K against each level's
// pipeline (or one custom --passes list). With --target, each program is instead compiled
// and run by the engine of each named target configuration (tests/difftest/targets.h:
// "x86" is every ISA cap this CPU runs, "x86/avx2" one of them, "llvm", "all" every
// available one) and compared with the interpreter. A failure prints the program seed,
// the level or target, the input seed, the first mismatch and the program's IR
// (minimized with --minimize). A target that refuses a program as Unsupported (spirv:
// an op it has no shader for) is not failed: the program is not its own; such programs
// are counted per target and reported with their most frequent reasons before the last
// line; with --min-checked C, a target that checked fewer than C programs (it refused
// the rest) fails the run, so a target that stops supporting programs cannot pass by
// checking none. Exit status: 0 when every run agrees, 1 otherwise. The last line is always
// `difftest: N programs, M runs passed, K failed`.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "ir/parse.h"
#include "ir/print.h"
#include "passes/pipeline.h"
#include "tests/difftest/check.h"
#include "tests/difftest/gen.h"
#include "tests/difftest/targets.h"

namespace {

using namespace ternjit;

int fail_usage(const std::string& msg) {
  std::fprintf(stderr, "difftest: %s\n", msg.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"difftest - differential test of the optimization pipelines against the reference interpreter"};
  int programs = 2000;
  std::uint64_t seed = 1;
  int inputs = 3;
  std::string levels_text = "O0,O1,O2,O3";
  std::string passes_text;
  std::vector<std::string> files;
  std::string target_text;
  std::string except_text;
  int min_checked = 0;
  int threads = 1;
  bool minimize = false;
  bool free_quant = false;
  double decoder_share = -1;  // the default of the mode's GenOptions
  std::int64_t max_elements = difftest::GenOptions{}.max_elements;
  int max_reports = 3;
  bool verbose = false;
  bool print = false;
  difftest::Tolerance tol;
  app.add_option("--programs", programs, "number of random programs (default 2000)");
  app.add_option("--seed", seed, "seed of the first program; program i has seed + i (default 1)");
  auto* inputs_opt =
      app.add_option("--inputs", inputs, "random input sets per program: input seeds 1..K (default 3; 1 with --target)");
  app.add_option("--levels", levels_text, "comma-separated levels to check (default O0,O1,O2,O3)");
  app.add_option("--passes", passes_text, "check this comma-separated pass list instead of the levels");
  app.add_option("--file", files, "check these .tir modules (each with a @main) instead of random programs");
  app.add_option("--target", target_text,
                 "compare these targets with the interpreter instead of the pass levels: comma-separated "
                 "configurations (x86, x86/avx2, llvm, ...) or all");
  app.add_option("--except", except_text,
                 "with --target: leave out these comma-separated configurations (\"all --except spirv\")");
  app.add_option("--threads", threads, "with --target: engine threads of every configuration (default 1)")
      ->check(CLI::Range(1, 64));
  app.add_option("--min-checked", min_checked,
                 "with --target: fail when a target checked fewer programs than this (refused the rest)");
  app.add_flag("--minimize", minimize, "shrink each failing program before printing it");
  app.add_flag("--free-quant", free_quant,
               "let quantizers read any value (may report legitimate rounding-boundary flips)");
  app.add_option("--decoder-share", decoder_share,
                 "share of the programs using the decoder ops, 0 to 1 (default 0.25, with --target 0.15; 1: every "
                 "program)")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--max-elements", max_elements,
                 "largest element count of a generated tensor (default 512; the tolerances are argued for 512)")
      ->check(CLI::Range(16, 1 << 20));
  app.add_option("--max-reports", max_reports, "print the IR of at most this many failing programs (default 3)");
  app.add_flag("--print", print, "print every program and its optimization by each level");
  app.add_flag("--verbose", verbose, "print each program's seed before checking it (to find a crashing one)");
  app.add_option("--rtol", tol.rtol, "relative float tolerance (default 1e-5)");
  app.add_option("--atol", tol.atol, "absolute float tolerance, scaled by each result's bound (default 1e-5)");
  CLI11_PARSE(app, argc, argv);

  // What to compare against.
  std::vector<difftest::Level> levels;
  if (!passes_text.empty()) {
    auto list = passes::parse_pass_list(passes_text);
    if (!list.ok()) return fail_usage(render(list.error()));
    levels.push_back(difftest::Level{passes_text, list.value()});
  } else {
    std::stringstream ss(levels_text);
    for (std::string item; std::getline(ss, item, ',');) {
      auto l = passes::parse_opt_level(item);
      if (!l) return fail_usage("unknown level '" + item + "'");
      levels.push_back(difftest::Level{std::string(passes::opt_level_name(*l)),
                                       passes::default_pipeline(*l)});
    }
  }
  if (!target_text.empty() && inputs_opt->count() == 0) inputs = 1;  // a compile per program and input
  std::vector<std::uint64_t> input_seeds;
  for (int i = 1; i <= inputs; ++i) input_seeds.push_back(static_cast<std::uint64_t>(i));

  std::vector<ir::Module> from_files;
  for (const std::string& file : files) {
    std::ifstream in(file, std::ios::binary);
    if (!in) return fail_usage("cannot read " + file);
    std::stringstream text;
    text << in.rdbuf();
    auto m = ir::parse_module(text.str(), file);
    if (!m.ok()) return fail_usage(render(m.error()));
    if (!m->find_function(difftest::kMainFunction)) return fail_usage(file + " has no @main");
    from_files.push_back(std::move(m.value()));
  }
  if (!files.empty()) programs = static_cast<int>(files.size());

  std::vector<difftest::TargetConfig> targets;
  if (!target_text.empty()) {
    std::vector<std::string> skipped;
    const std::vector<difftest::TargetConfig> all = difftest::available_targets(&skipped);
    for (const std::string& s : skipped) std::printf("difftest: not available here: %s\n", s.c_str());
    if (target_text == "all") {
      targets = all;
    } else {
      auto chosen = difftest::select_targets(all, target_text);
      if (!chosen.ok()) return fail_usage(chosen.error().message);
      targets = std::move(chosen.value());
    }
    // --except names configurations whether or not they are available here.
    std::stringstream except(except_text);
    for (std::string item; std::getline(except, item, ',');)
      std::erase_if(
          targets, [&](const difftest::TargetConfig& t) { return t.name == item || t.name.rfind(item + "/", 0) == 0; });
    for (difftest::TargetConfig& t : targets) t.threads = threads;
    std::string names;
    for (const difftest::TargetConfig& t : targets) names += (names.empty() ? "" : ", ") + t.name;
    std::printf("difftest: targets %s\n", names.empty() ? "(none available)" : names.c_str());
  }

  difftest::GenOptions gen = target_text.empty() ? difftest::GenOptions{} : difftest::target_gen_options();
  gen.strict_quant = !free_quant;
  if (decoder_share >= 0) gen.decoder_share = decoder_share;
  gen.max_elements = max_elements;
  int passed = 0, failed = 0, reports = 0;
  // Per target: programs it refused as Unsupported, by reason.
  std::map<std::string, std::map<std::string, int>> refused;
  for (int i = 0; i < programs; ++i) {
    std::uint64_t pseed = seed + static_cast<std::uint64_t>(i);
    if (verbose) std::fprintf(stderr, "difftest: program seed %llu\n", static_cast<unsigned long long>(pseed));
    ir::Module m = !from_files.empty() ? from_files[static_cast<std::size_t>(i)] : difftest::generate_program(pseed, gen);
    difftest::CheckReport rep = target_text.empty() ? difftest::check_module(m, levels, input_seeds, tol)
                                                    : difftest::check_targets(m, targets, input_seeds);
    if (print && target_text.empty()) {
      std::printf("--- program seed %llu\n%s", static_cast<unsigned long long>(pseed), ir::print_module(m).c_str());
      for (const difftest::Level& l : levels) {
        ir::Module opt = m;
        if (passes::run_pipeline(opt, l.passes, passes::PipelineOptions{}).ok())
          std::printf("--- %s\n%s", l.name.c_str(), ir::print_module(opt).c_str());
      }
    }
    std::string what = !files.empty() ? files[static_cast<std::size_t>(i)] : "program seed " + std::to_string(pseed);
    if (!rep.original_error.empty()) {
      // The generator must only build programs the interpreter runs.
      ++failed;
      std::printf("difftest: FAIL %s: the original program does not run (generator bug): %s\n", what.c_str(),
                  rep.original_error.c_str());
      if (reports++ < max_reports) std::printf("--- original\n%s", ir::print_module(m).c_str());
      continue;
    }
    for (const difftest::Failure& u : rep.unsupported) ++refused[u.level][u.message];
    passed += rep.runs - static_cast<int>(rep.failures.size());
    failed += static_cast<int>(rep.failures.size());
    if (rep.failures.empty()) continue;
    for (const difftest::Failure& f : rep.failures)
      std::printf("difftest: FAIL %s, level %s, input seed %llu: %s\n", what.c_str(), f.level.c_str(),
                  static_cast<unsigned long long>(f.input_seed), f.message.c_str());
    if (reports++ >= max_reports) continue;
    const difftest::Failure& first = rep.failures.front();
    std::printf("--- original (%s)\n%s", what.c_str(), ir::print_module(m).c_str());
    if (!target_text.empty()) {
      if (minimize) {
        const difftest::TargetConfig* target = nullptr;
        for (const difftest::TargetConfig& t : targets)
          if (t.name == first.level) target = &t;
        ir::Module small = difftest::minimize_on_target(m, *target, input_seeds);
        difftest::CheckReport again = difftest::check_targets(small, std::span(target, 1), input_seeds);
        std::printf("--- minimized (%s: %s)\n%s", first.level.c_str(),
                    again.failures.empty() ? "passes?" : again.failures.front().message.c_str(),
                    ir::print_module(small).c_str());
      }
      continue;
    }
    std::printf("--- optimized (%s)\n%s", first.level.c_str(), first.optimized_ir.c_str());
    if (minimize) {
      const difftest::Level* level = nullptr;
      for (const difftest::Level& l : levels)
        if (l.name == first.level) level = &l;
      ir::Module small = difftest::minimize(m, *level, input_seeds, tol);
      difftest::CheckReport again = difftest::check_module(small, std::span(level, 1), input_seeds, tol);
      std::printf("--- minimized (%s: %s)\n%s", first.level.c_str(),
                  again.failures.empty() ? "passes?" : again.failures.front().message.c_str(),
                  ir::print_module(small).c_str());
      if (!again.failures.empty()) std::printf("--- minimized, optimized\n%s", again.failures.front().optimized_ir.c_str());
    }
  }
  for (const difftest::TargetConfig& t : targets) {
    int total = 0;
    std::vector<std::pair<int, std::string>> by_count;
    for (const auto& [why, count] : refused[t.name]) total += count, by_count.emplace_back(-count, why);
    std::sort(by_count.begin(), by_count.end());
    if (total > 0)
      std::printf("difftest: %s: %d of %d programs not its own (Unsupported), checked %d\n", t.name.c_str(), total,
                  programs, programs - total);
    for (std::size_t i = 0; i < std::min<std::size_t>(by_count.size(), 5); ++i)
      std::printf("difftest:   %5d %s\n", -by_count[i].first, by_count[i].second.c_str());
    if (programs - total < min_checked) {
      ++failed;
      std::printf("difftest: FAIL %s checked %d programs, fewer than --min-checked %d\n", t.name.c_str(),
                  programs - total, min_checked);
    }
  }
  std::printf("difftest: %d programs, %d runs passed, %d failed\n", programs, passed, failed);
  return failed == 0 ? 0 : 1;
}
