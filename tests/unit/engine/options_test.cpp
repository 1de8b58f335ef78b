// SPDX-License-Identifier: Apache-2.0
// options_test.cpp - EngineOptions::from_env parsing (set in this process) and option validation.
#include <doctest/doctest.h>

#include <cstdlib>

#include "tests/unit/engine/engine_testing.h"

namespace ternjit {
namespace {

constexpr const char* kVars[] = {"TERNJIT_TARGET",    "TERNJIT_OPT_LEVEL",      "TERNJIT_THREADS",
                                 "TERNJIT_CACHE_DIR", "TERNJIT_TUNING",         "TERNJIT_VERBOSE",
                                 "TERNJIT_MAX_ISA",   "TERNJIT_TARGET_OPTIONS", "TERNJIT_PRINT_AFTER"};

// Sets the given variables for one test and restores the previous environment after.
class EnvScope {
 public:
  EnvScope() {
    for (const char* v : kVars) {
      const char* old = std::getenv(v);
      saved_.emplace_back(v, old ? std::optional<std::string>(old) : std::nullopt);
      ::unsetenv(v);
    }
  }
  ~EnvScope() {
    for (auto& [name, value] : saved_) {
      if (value) ::setenv(name, value->c_str(), 1);
      else ::unsetenv(name);
    }
  }
  void set(const char* name, const char* value) { ::setenv(name, value, 1); }

 private:
  std::vector<std::pair<const char*, std::optional<std::string>>> saved_;
};

TEST_CASE("from_env: no variables gives the defaults") {
  EnvScope env;
  auto o = EngineOptions::from_env();
  REQUIRE(o.ok());
  CHECK(o->target == "auto");
  CHECK(o->opt_level == 2);
  CHECK(o->threads == 0);
  CHECK(o->cache_dir.empty());
  CHECK(o->tuning == "cached");
  CHECK(o->verbose == 0);
}

TEST_CASE("from_env: every variable") {
  EnvScope env;
  env.set("TERNJIT_TARGET", "reference");
  env.set("TERNJIT_OPT_LEVEL", "aggressive");
  env.set("TERNJIT_THREADS", "4");
  env.set("TERNJIT_CACHE_DIR", "/tmp/tj-cache");
  env.set("TERNJIT_TUNING", "cached");
  env.set("TERNJIT_VERBOSE", "1");
  auto o = EngineOptions::from_env();
  REQUIRE_MESSAGE(o.ok(), (o.ok() ? "" : o.error().message));
  CHECK(o->target == "reference");
  CHECK(o->opt_level == 3);
  CHECK(o->threads == 4);
  CHECK(o->cache_dir == "/tmp/tj-cache");
  CHECK(o->tuning == "cached");
  CHECK(o->verbose == 1);
}

TEST_CASE("from_env: opt level spellings") {
  EnvScope env;
  for (auto [text, level] : {std::pair{"O0", 0}, {"1", 1}, {"o2", 2}, {"balanced", 2}, {"none", 0}, {"O3", 3}}) {
    env.set("TERNJIT_OPT_LEVEL", text);
    auto o = EngineOptions::from_env();
    REQUIRE_MESSAGE(o.ok(), text);
    CHECK(o->opt_level == level);
  }
}

TEST_CASE("from_env: an empty variable keeps the default") {
  EnvScope env;
  env.set("TERNJIT_TARGET", "");
  env.set("TERNJIT_THREADS", "");
  auto o = EngineOptions::from_env();
  REQUIRE(o.ok());
  CHECK(o->target == "auto");
  CHECK(o->threads == 0);
}

TEST_CASE("from_env: malformed values are errors naming the variable") {
  struct Case {
    const char* var;
    const char* value;
  };
  for (Case c : {Case{"TERNJIT_OPT_LEVEL", "fast"}, Case{"TERNJIT_OPT_LEVEL", "O7"}, Case{"TERNJIT_THREADS", "-1"},
                 Case{"TERNJIT_THREADS", "4x"}, Case{"TERNJIT_THREADS", "lots"}, Case{"TERNJIT_VERBOSE", "yes"},
                 Case{"TERNJIT_VERBOSE", "-2"}, Case{"TERNJIT_TUNING", "always"}}) {
    EnvScope env;
    env.set(c.var, c.value);
    auto o = EngineOptions::from_env();
    CAPTURE(c.var);
    CAPTURE(c.value);
    std::string msg = testing::error_of(o);
    CHECK(o.error().code == ErrorCode::InvalidArgument);
    CHECK(msg.find(c.var) != std::string::npos);
    CHECK(msg.find(std::string("'") + c.value + "'") != std::string::npos);
  }
}

TEST_CASE("from_env: an unknown target is accepted here and refused by Engine::create") {
  EnvScope env;
  env.set("TERNJIT_TARGET", "tpu");
  auto o = EngineOptions::from_env();
  REQUIRE(o.ok());
  auto e = Engine::create(*o);
  CHECK(testing::error_of(e).find("unknown target 'tpu'") != std::string::npos);
}

TEST_CASE("from_env: target, target option, max_isa and stage errors name the variable and its escaped value") {
  struct Case {
    const char* var;
    const char* value;
    const char* shown;  // the value as the message quotes it
    const char* why;    // what the target registry says
  };
  for (Case c : {Case{"TERNJIT_TARGET", "tp\x1b[2Ju", "'tp\\x1b[2Ju'", "unknown target"},
                 Case{"TERNJIT_TARGET", "it's", "'it\\'s'", "unknown target"},
                 Case{"TERNJIT_TARGET_OPTIONS", "x86.no_such_option=1", "'x86.no_such_option=1'", "no_such_option"},
                 Case{"TERNJIT_TARGET_OPTIONS", "tpu.fast=1", "'tpu.fast=1'", "unknown target 'tpu'"},
                 Case{"TERNJIT_TARGET_OPTIONS", "no equals sign", "'no equals sign'", ""},
                 Case{"TERNJIT_MAX_ISA", "avx9000", "'avx9000'", "avx9000"},
                 Case{"TERNJIT_PRINT_AFTER", "lowering", "'lowering'", "unknown stage 'lowering'"}}) {
    EnvScope env;
    env.set(c.var, c.value);
    CAPTURE(c.var);
    CAPTURE(c.value);
    auto o = EngineOptions::from_env();
    REQUIRE_MESSAGE(o.ok(), (o.ok() ? "" : o.error().message));  // checked by Engine::create
    auto e = Engine::create(*o);
    REQUIRE(!e.ok());
    const std::string msg = e.error().message;
    CAPTURE(msg);
    CHECK(msg.find(std::string(c.var) + "=" + c.shown + ": ") == 0);
    CHECK(msg.find(c.why) != std::string::npos);
    CHECK(msg.find('\x1b') == std::string::npos);  // no raw escape byte reaches a terminal
    // Replaced after from_env (a flag, or the caller): the error is the field's, no variable.
    if (std::string(c.var) == "TERNJIT_TARGET") {
      o->target = "reference";
      CHECK(Engine::create(*o).ok());
    } else if (std::string(c.var) == "TERNJIT_MAX_ISA") {
      o->max_isa = "avx9001";
      CHECK(testing::error_of(Engine::create(*o)).find("TERNJIT_MAX_ISA") == std::string::npos);
    }
  }
  // max_isa contradicting the target options: both variables are named.
  EnvScope env;
  env.set("TERNJIT_MAX_ISA", "avx2");
  env.set("TERNJIT_TARGET_OPTIONS", "x86.max_isa=avx512");
  auto both = EngineOptions::from_env();
  REQUIRE(both.ok());
  const std::string msg = testing::error_of(Engine::create(*both));
  CAPTURE(msg);
  CHECK(msg.find("TERNJIT_MAX_ISA='avx2' with TERNJIT_TARGET_OPTIONS='x86.max_isa=avx512': ") == 0);
}

TEST_CASE("Engine::create validates the explicit options") {
  EngineOptions o;
  o.opt_level = 4;
  CHECK(testing::error_of(Engine::create(o)).find("opt_level 4") != std::string::npos);
  o = {};
  o.threads = -3;
  CHECK(testing::error_of(Engine::create(o)).find("threads -3") != std::string::npos);
  o = {};
  o.tuning = "sometimes";
  CHECK(testing::error_of(Engine::create(o)).find("tuning mode 'sometimes'") != std::string::npos);
  o = {};
  o.verbose = -1;
  CHECK_FALSE(Engine::create(o).ok());
}

}  // namespace
}  // namespace ternjit
