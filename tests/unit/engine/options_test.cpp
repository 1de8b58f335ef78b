// SPDX-License-Identifier: Apache-2.0
// options_test.cpp - EngineOptions::from_env parsing (set in this process) and option validation.
#include <doctest/doctest.h>

#include <cstdlib>

#include "tests/unit/engine/engine_testing.h"

namespace ternjit {
namespace {

constexpr const char* kVars[] = {"TERNJIT_TARGET", "TERNJIT_OPT_LEVEL", "TERNJIT_THREADS",
                                 "TERNJIT_CACHE_DIR", "TERNJIT_TUNING", "TERNJIT_VERBOSE"};

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
