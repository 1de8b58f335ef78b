// SPDX-License-Identifier: Apache-2.0
// pipeline_test.cpp - optimization levels, default pipelines, pass lists and the runner.
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <string>

#include "ir/print.h"
#include "passes/pipeline.h"
#include "tests/unit/passes/pass_testing.h"

using namespace ternjit;
using passes::OptLevel;

namespace {

constexpr const char* kText = R"(func @f(%x: f32[4]) -> f32[4] {
^entry:
  %one = const {value = 1} : f32[]
  %two = const {value = 2} : f32[]
  %three = add %one, %two : f32[]
  %0 = mul %x, %one : f32[4]
  %1 = add %0, %three : f32[4]
  ret %1
}
)";

// A module pass that breaks the IR: the first `add` claims a wrong result type.
void break_types(ir::Module& m) {
  for (ir::Function& f : m.functions())
    for (ir::BlockId b : f.blocks())
      for (ir::InstId i : f.insts(b))
        if (f.inst(i).op == ir::Op::Add) {
          f.value(f.inst(i).results[0]).type.elem = ElemKind::I8;
          return;
        }
}

// A module pass that counts its runs in the module's metadata.
void count_runs(ir::Module& m) { m.metadata()["runs"] += "x"; }
const passes::PassInfo counter{"count-runs", passes::PassFn{&count_runs}, "test pass"};

}  // namespace

TEST_CASE("parse_opt_level accepts levels, digits and aliases in any case") {
  struct Case {
    const char* text;
    std::optional<OptLevel> level;
  };
  const Case cases[] = {
      {"O0", OptLevel::O0}, {"o1", OptLevel::O1}, {"O2", OptLevel::O2}, {"o3", OptLevel::O3},
      {"0", OptLevel::O0}, {"1", OptLevel::O1}, {"2", OptLevel::O2}, {"3", OptLevel::O3},
      {"none", OptLevel::O0}, {"Conservative", OptLevel::O1}, {"BALANCED", OptLevel::O2},
      {"aggressive", OptLevel::O3}, {" balanced ", OptLevel::O2},
      {"", std::nullopt}, {"O4", std::nullopt}, {"4", std::nullopt}, {"fast", std::nullopt},
      {"-O2", std::nullopt}, {"O", std::nullopt}, {"O22", std::nullopt},
  };
  for (const Case& c : cases) {
    INFO("text '", c.text, "'");
    CHECK(passes::parse_opt_level(c.text) == c.level);
  }
  for (OptLevel l : {OptLevel::O0, OptLevel::O1, OptLevel::O2, OptLevel::O3})
    CHECK(passes::parse_opt_level(passes::opt_level_name(l)) == l);
  CHECK(passes::opt_level_name(OptLevel::O2) == "O2");
}

TEST_CASE("default pipelines list registered passes only; O0 is empty and levels grow") {
  CHECK(passes::default_pipeline(OptLevel::O0).empty());
  std::size_t previous = 0;
  for (OptLevel l : {OptLevel::O1, OptLevel::O2, OptLevel::O3}) {
    auto p = passes::default_pipeline(l);
    INFO("level ", std::string(passes::opt_level_name(l)));
    CHECK(p.size() > previous);
    previous = p.size();
    for (const passes::PassInfo* info : p) {
      REQUIRE(info != nullptr);
      CHECK(passes::find_pass(info->name) == info);
    }
  }
  auto names = [&](OptLevel l) {
    std::string s;
    for (const passes::PassInfo* p : passes::default_pipeline(l)) s += std::string(p->name) + ",";
    return s;
  };
  CHECK(names(OptLevel::O1).find("fold-constants,simplify,eliminate-dead-code,") != std::string::npos);
  CHECK(names(OptLevel::O2).find("eliminate-common-subexpressions") != std::string::npos);
  CHECK(names(OptLevel::O2).ends_with("eliminate-dead-code,"));
}

TEST_CASE("every level's pipeline runs and keeps the IR valid on the test files") {
  for (const auto& path : testing::ir_test_files()) {
    for (OptLevel l : {OptLevel::O0, OptLevel::O1, OptLevel::O2, OptLevel::O3}) {
      INFO(path.filename().string(), " at ", std::string(passes::opt_level_name(l)));
      ir::Module m = testing::parse_ok(testing::read_file(path), path.filename().string());
      testing::run_list(m, passes::default_pipeline(l));
    }
  }
}

TEST_CASE("parse_pass_list resolves names and reports unknown ones") {
  auto empty = passes::parse_pass_list("");
  REQUIRE(empty.ok());
  CHECK(empty->empty());
  auto two = passes::parse_pass_list("fold-constants, simplify");
  REQUIRE(two.ok());
  REQUIRE(two->size() == 2);
  CHECK((*two)[0]->name == "fold-constants");
  CHECK((*two)[1]->name == "simplify");

  auto unknown = passes::parse_pass_list("simplify,frobnicate");
  REQUIRE(!unknown.ok());
  CHECK(unknown.error().code == ErrorCode::NotFound);
  CHECK(unknown.error().message.find("'frobnicate'") != std::string::npos);
  for (const passes::PassInfo& p : passes::all_passes())
    CHECK(unknown.error().message.find(std::string(p.name)) != std::string::npos);

  CHECK(!passes::parse_pass_list("simplify,,simplify").ok());
  CHECK(!passes::parse_pass_list("simplify,").ok());
}

TEST_CASE("run_pipeline prints after the named passes or after all, and times them") {
  auto list = passes::parse_pass_list("fold-constants,simplify,eliminate-dead-code");
  REQUIRE(list.ok());

  SUBCASE("nothing requested: an empty log") {
    ir::Module m = testing::parse_ok(kText);
    CHECK(testing::run_list(m, *list).empty());
  }
  SUBCASE("print-after one pass: the IR as it was right after it") {
    ir::Module m = testing::parse_ok(kText);
    passes::PipelineOptions o;
    o.print_after = {"simplify"};
    auto r = passes::run_pipeline(m, *list, o);
    REQUIRE(r.ok());
    const std::string header = "// -----// IR after simplify //----- //\n";
    REQUIRE(r->log.starts_with(header));
    const std::string after_simplify = r->log.substr(header.size());
    CHECK(after_simplify.find("%three = const {value = 3} : f32[]") != std::string::npos);
    CHECK(after_simplify.find("mul") == std::string::npos);
    CHECK(after_simplify.find("%one") != std::string::npos);  // removed only by the next pass
    CHECK(ir::print_module(m).find("%one") == std::string::npos);
  }
  SUBCASE("print-after-all: one section per pass, in order") {
    ir::Module m = testing::parse_ok(kText);
    passes::PipelineOptions o;
    o.print_after_all = true;
    auto r = passes::run_pipeline(m, *list, o);
    REQUIRE(r.ok());
    const auto a = r->log.find("// -----// IR after fold-constants //----- //\n");
    const auto b = r->log.find("// -----// IR after simplify //----- //\n");
    const auto c = r->log.find("// -----// IR after eliminate-dead-code //----- //\n");
    CHECK(a == 0);
    CHECK(a < b);
    CHECK(b < c);
    CHECK(r->log.substr(c).ends_with(ir::print_module(m)));
  }
  SUBCASE("time-passes: a table with every pass and a total") {
    ir::Module m = testing::parse_ok(kText);
    passes::PipelineOptions o;
    o.time_passes = true;
    auto r = passes::run_pipeline(m, *list, o);
    REQUIRE(r.ok());
    CHECK(r->log.starts_with("// -----// Pass timings //----- //\n"));
    for (const char* name : {"fold-constants", "simplify", "eliminate-dead-code", "total"})
      CHECK(r->log.find(name) != std::string::npos);
  }
  SUBCASE("module passes run once, function passes on every function") {
    ir::Module m = testing::parse_ok(std::string(kText) + "\n" + R"(func @g(%x: i32[2]) -> i32[2] {
^entry:
  %z = const {value = 0} : i32[]
  %0 = add %x, %z : i32[2]
  ret %0
}
)");
    std::vector<const passes::PassInfo*> with_module_pass = *list;
    with_module_pass.push_back(&counter);
    testing::run_list(m, with_module_pass);
    CHECK(ir::print_module(m) == R"(meta "runs" = "x"

func @f(%x: f32[4]) -> f32[4] {
^entry:
  %three = const {value = 3} : f32[]
  %0 = add %x, %three : f32[4]
  ret %0
}

func @g(%x: i32[2]) -> i32[2] {
^entry:
  ret %x
}
)");
  }
}

TEST_CASE("run_pipeline aborts with the pass name, the diagnostics and the IR when a pass breaks the IR") {
  const passes::PassInfo breaker{"break-types", passes::PassFn{&break_types}, "test pass"};
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    // The child dies by the check's abort, not through doctest's crash handler.
    std::signal(SIGABRT, SIG_DFL);
    dup2(fds[1], STDERR_FILENO);
    if (FILE* null = std::fopen("/dev/null", "w")) dup2(fileno(null), STDOUT_FILENO);
    close(fds[0]);
    ir::Module m = testing::parse_ok(kText);
    static_cast<void>(passes::run_pipeline(m, {&breaker}, passes::PipelineOptions{}));
    _exit(0);  // not reached when the check fires
  }
  close(fds[1]);
  std::string err;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) err.append(buf, static_cast<std::size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFSIGNALED(status));
  if (WIFSIGNALED(status)) CHECK(WTERMSIG(status) == SIGABRT);
  CHECK(err.find("after pass 'break-types'") != std::string::npos);
  CHECK(err.find("error:") != std::string::npos);
  CHECK(err.find("func @f") != std::string::npos);
}

TEST_CASE("verify_each can be turned off") {
  const passes::PassInfo breaker{"break-types", passes::PassFn{&break_types}, "test pass"};
  ir::Module m = testing::parse_ok(kText);
  passes::PipelineOptions o;
  o.verify_each = false;
  CHECK(passes::run_pipeline(m, {&breaker}, o).ok());
}
