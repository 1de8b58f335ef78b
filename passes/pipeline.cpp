// SPDX-License-Identifier: Apache-2.0
// pipeline.cpp - optimization levels, the per-level pass lists, and the pass runner.
#include "passes/pipeline.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <span>

#include "ir/print.h"
#include "ir/strings.h"
#include "ir/verify.h"

namespace ternjit::passes {

namespace {

// ---------------------------------------------------------------- the levels
// Passes by name; a name not registered in this build is skipped, so a level can list
// the passes it is meant to run before they all exist.

// O0: nothing. The IR as written already runs everywhere.
constexpr std::string_view kO1[] = {
    "inline-calls",
    "fold-constants",
    "simplify",
    "eliminate-dead-code",
};
constexpr std::string_view kO2[] = {
    "inline-calls",
    "fold-constants",
    "simplify",
    "eliminate-dead-code",
    "eliminate-common-subexpressions",
    "fuse-quantization",
    "fuse-epilogue",
    "fuse-elementwise",
    "eliminate-dead-code",
};
constexpr std::string_view kO3[] = {
    "inline-calls",
    "fold-constants",
    "simplify",
    "eliminate-dead-code",
    "eliminate-common-subexpressions",
    // A second round: inlining and CSE expose more folds and identities.
    "fold-constants",
    "simplify",
    "eliminate-common-subexpressions",
    "eliminate-dead-code",
    "fuse-quantization",
    "fuse-epilogue",
    "fuse-elementwise",
    "eliminate-dead-code",
};

std::span<const std::string_view> level_pass_names(OptLevel level) {
  switch (level) {
    case OptLevel::O0: return {};
    case OptLevel::O1: return kO1;
    case OptLevel::O2: return kO2;
    case OptLevel::O3: return kO3;
  }
  TERNJIT_UNREACHABLE("bad OptLevel");
}

// ---------------------------------------------------------------- the runner

std::string known_pass_names() {
  std::string names;
  for (const PassInfo& p : all_passes()) names += (names.empty() ? "" : ", ") + std::string(p.name);
  return names.empty() ? "none" : names;
}

std::string verify_failure(const ir::Module& m, std::string_view pass, const std::vector<Diagnostic>& diags) {
  std::string msg = "the IR is invalid after pass '" + std::string(pass) + "':\n";
  for (const Diagnostic& d : diags) msg += render(d);
  msg += "// -----// IR after " + std::string(pass) + " (invalid) //----- //\n" + ir::print_module(m);
  return msg;
}

Result<void> run_one(ir::Module& m, const PassInfo& pass) {
  if (const auto* fn = std::get_if<FunctionPass>(&pass.fn)) {
    TERNJIT_CHECK(*fn != nullptr, "pass '" + std::string(pass.name) + "' has no entry point");
    for (ir::Function& f : m.functions()) (*fn)(f);
  } else if (const auto* fp = std::get_if<FallibleModulePass>(&pass.fn)) {
    TERNJIT_CHECK(*fp != nullptr, "pass '" + std::string(pass.name) + "' has no entry point");
    return (*fp)(m);
  } else {
    const ModulePass mp = std::get<ModulePass>(pass.fn);
    TERNJIT_CHECK(mp != nullptr, "pass '" + std::string(pass.name) + "' has no entry point");
    mp(m);
  }
  return success();
}

std::string timing_table(const std::vector<const PassInfo*>& pipeline, const std::vector<double>& ms) {
  std::string out = "// -----// Pass timings //----- //\n";
  char line[160];
  double total = 0;
  std::snprintf(line, sizeof line, "%12s  %s\n", "time (ms)", "pass");
  out += line;
  for (std::size_t k = 0; k < pipeline.size(); ++k) {
    std::snprintf(line, sizeof line, "%12.3f  %.*s\n", ms[k], static_cast<int>(pipeline[k]->name.size()),
                  pipeline[k]->name.data());
    out += line;
    total += ms[k];
  }
  std::snprintf(line, sizeof line, "%12.3f  %s\n", total, "total");
  out += line;
  return out;
}

}  // namespace

std::optional<OptLevel> parse_opt_level(std::string_view text) {
  const std::string t = ir::lower(ir::trim(text));
  if (t == "o0" || t == "0" || t == "none") return OptLevel::O0;
  if (t == "o1" || t == "1" || t == "conservative") return OptLevel::O1;
  if (t == "o2" || t == "2" || t == "balanced") return OptLevel::O2;
  if (t == "o3" || t == "3" || t == "aggressive") return OptLevel::O3;
  return std::nullopt;
}

std::string_view opt_level_name(OptLevel level) {
  switch (level) {
    case OptLevel::O0: return "O0";
    case OptLevel::O1: return "O1";
    case OptLevel::O2: return "O2";
    case OptLevel::O3: return "O3";
  }
  TERNJIT_UNREACHABLE("bad OptLevel");
}

std::vector<const PassInfo*> default_pipeline(OptLevel level) {
  std::vector<const PassInfo*> pipeline;
  for (std::string_view name : level_pass_names(level))
    if (const PassInfo* p = find_pass(name)) pipeline.push_back(p);
  return pipeline;
}

Result<PipelineReport> run_pipeline(ir::Module& m, const std::vector<const PassInfo*>& pipeline,
                                    const PipelineOptions& options) {
  PipelineReport report;
  std::vector<double> ms(pipeline.size(), 0.0);
  for (std::size_t k = 0; k < pipeline.size(); ++k) {
    const PassInfo& pass = *pipeline[k];
    const auto start = std::chrono::steady_clock::now();
    TERNJIT_TRY_VOID(run_one(m, pass));
    ms[k] = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();

    if (options.verify_each) {
      const std::vector<Diagnostic> diags = ir::verify_module(m);
      TERNJIT_CHECK(diags.empty(), verify_failure(m, pass.name, diags));
    }
    const bool print = options.print_after_all ||
                       std::find(options.print_after.begin(), options.print_after.end(), pass.name) !=
                           options.print_after.end();
    if (print) report.log += "// -----// IR after " + std::string(pass.name) + " //----- //\n" + ir::print_module(m);
  }
  if (options.time_passes) report.log += timing_table(pipeline, ms);
  return report;
}

Result<std::vector<const PassInfo*>> parse_pass_list(std::string_view text) {
  std::vector<const PassInfo*> pipeline;
  if (ir::trim(text).empty()) return pipeline;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = text.find(',', start);
    const std::string name(ir::trim(text.substr(start, comma == std::string_view::npos ? text.npos : comma - start)));
    if (name.empty())
      return make_error(ErrorCode::InvalidArgument, "empty pass name in pass list '" + std::string(text) + "'");
    const PassInfo* p = find_pass(name);
    if (!p)
      return make_error(ErrorCode::NotFound, "unknown pass '" + name + "' (known passes: " + known_pass_names() + ")");
    pipeline.push_back(p);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return pipeline;
}

}  // namespace ternjit::passes
