// SPDX-License-Identifier: Apache-2.0
// engine_cache_test.cpp - the Engine with a disk cache: hits across engines, misses on any key change, never wrong.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <thread>

#include "cache/artifact_codec.h"
#include "cache/entry.h"
#include "ir/module_impl.h"
#include "ir/parse.h"
#include "jit/kernel_cache.h"
#include "jit/options.h"
#include "tests/unit/cache/cache_testing.h"
#include "tests/unit/engine/engine_testing.h"

namespace ternjit {
namespace {

constexpr std::int64_t kM = 4, kK = 32, kN = 8;

struct Run {
  std::vector<float> y;
  std::vector<std::string> trace;
  /// How many trace lines contain `needle`.
  [[nodiscard]] int count(std::string_view needle) const {
    int n = 0;
    for (const std::string& l : trace) n += l.find(needle) != std::string::npos;
    return n;
  }
  [[nodiscard]] std::string all() const {
    std::string s;
    for (const std::string& l : trace) s += l + "\n";
    return s;
  }
};

// Runs BitLinear.forward on a reference engine made with `o` (verbose, traced), for
// each M in `ms`; returns the outputs of the last and every trace line.
Run run_bitlinear(EngineOptions o, std::vector<std::int64_t> ms = {kM}) {
  Run run;
  auto lines = std::make_shared<std::vector<std::string>>();
  auto mu = std::make_shared<std::mutex>();
  o.target = "reference";
  o.verbose = 1;
  o.trace = [lines, mu](std::string_view l) {
    std::lock_guard lock(*mu);
    lines->emplace_back(l);
  };
  Engine e = testing::reference_engine(o);
  Program p = testing::bitlinear(e);
  testing::BitLinearWeights w(kK, kN, 3);
  w.bind(p);
  for (std::int64_t m : ms) {
    std::vector<float> x = testing::random_f32(m * kK, 11);
    run.y.assign(static_cast<std::size_t>(m * kN), 0.0f);
    TensorView in[] = {testing::view(x, {m, kK})};
    TensorView out[] = {testing::view(run.y, {m, kN})};
    auto r = p.run("BitLinear.forward", in, out);
    REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
  }
  run.trace = *lines;
  return run;
}

EngineOptions with_dir(const std::string& dir) {
  EngineOptions o;
  o.cache_dir = dir;
  return o;
}

// The "ms=" of the first specialize line.
double specialize_ms(const Run& r) {
  for (const std::string& l : r.trace)
    if (l.rfind("ternjit_verbose,specialize,", 0) == 0) return std::atof(l.c_str() + l.rfind("ms=") + 3);
  return -1;
}

TEST_CASE("a second engine loads the kernel from the disk cache, bit-identical to the oracle") {
  testing::ScratchDir tmp;
  const Run a = run_bitlinear(with_dir(tmp.path()));
  CHECK_MESSAGE(a.count(",disk=miss") == 1, a.all());
  const Run b = run_bitlinear(with_dir(tmp.path()));
  CHECK_MESSAGE(b.count(",disk=hit") == 1, b.all());
  CHECK(testing::bit_equal(a.y, b.y));
  std::vector<float> x = testing::random_f32(kM * kK, 11);
  CHECK(testing::bit_equal(testing::oracle(testing::BitLinearWeights(kK, kN, 3).params(), x, kM, kK), b.y));
  CHECK(testing::files_in(tmp / "v1/objects").size() == 1);
  MESSAGE("specialize on a disk miss: " << specialize_ms(a) << " ms, on a disk hit: " << specialize_ms(b) << " ms");
}

TEST_CASE("changing the opt level or the thread count misses; another target's option does not") {
  testing::ScratchDir tmp;
  (void)run_bitlinear(with_dir(tmp.path()));
  EngineOptions o = with_dir(tmp.path());
  // x86.max_isa is the x86 target's: the reference target's artifact does not depend on it.
  o.max_isa = "avx2";
  CHECK(run_bitlinear(o).count(",disk=hit") == 1);
  o.max_isa.clear();
  o.target_options = "x86.max_isa=avx2";
  CHECK(run_bitlinear(o).count(",disk=hit") == 1);
  o = with_dir(tmp.path());
  o.opt_level = 1;
  CHECK(run_bitlinear(o).count(",disk=miss") == 1);
  o = with_dir(tmp.path());
  o.threads = 3;
  CHECK(run_bitlinear(o).count(",disk=miss") == 1);
  CHECK(testing::files_in(tmp / "v1/objects").size() == 3);
}

TEST_CASE("cache_dir \"off\" never touches the disk") {
  const Run r = run_bitlinear(with_dir("off"));
  CHECK(r.count(",disk=off") == 1);
  CHECK(r.count("ternjit: cache:") == 0);
}

TEST_CASE("a refused cache directory: one warning, kernels still compile and run correctly") {
  testing::ScratchDir tmp;
  const std::string dir = tmp / "open";
  ::mkdir(dir.c_str(), 0777);
  REQUIRE(::chmod(dir.c_str(), 0777) == 0);
  const Run r = run_bitlinear(with_dir(dir), {4, 8});
  CHECK_MESSAGE(r.count("ternjit: cache:") == 1, r.all());
  CHECK(r.count("writable by group or others") == 1);
  CHECK(r.count(",disk=off") == 2);
  std::vector<float> x = testing::random_f32(8 * kK, 11);
  CHECK(testing::bit_equal(testing::oracle(testing::BitLinearWeights(kK, kN, 3).params(), x, 8, kK), r.y));
  CHECK(testing::files_in(dir).empty());
}

TEST_CASE("a corrupt entry on disk is logged, removed and rebuilt; the result stays right") {
  testing::ScratchDir tmp;
  const Run a = run_bitlinear(with_dir(tmp.path()));
  const auto files = testing::files_in(tmp / "v1/objects");
  REQUIRE(files.size() == 1);
  const std::string path = tmp / ("v1/objects/" + files[0]);
  std::string bytes = testing::slurp(path);
  bytes[bytes.size() - 3] ^= 0x10;  // inside the payload (the artifact's metadata)
  testing::spit(path, bytes);
  const Run b = run_bitlinear(with_dir(tmp.path()));
  CHECK_MESSAGE(b.count("checksum mismatch: removed") == 1, b.all());
  CHECK(b.count(",disk=miss") == 1);
  CHECK(testing::bit_equal(a.y, b.y));
  const Run c = run_bitlinear(with_dir(tmp.path()));
  CHECK(c.count(",disk=hit") == 1);
}

// Runs L.forward (relu) of a 4x32 input on a reference engine with a disk cache in
// `dir`; returns the trace.
Run run_relu(const std::string& dir) {
  Run run;
  auto lines = std::make_shared<std::vector<std::string>>();
  EngineOptions o = with_dir(dir);
  o.target = "reference";
  o.verbose = 1;
  o.trace = [lines](std::string_view l) { lines->emplace_back(l); };
  Engine e = testing::reference_engine(o);
  auto p = e.compile("layer L {\n  fn forward(x: Tensor[M, K]) -> Tensor[M, K] {\n    return relu(x)\n  }\n}\n", "relu.tri");
  REQUIRE(p.ok());
  std::vector<float> x = testing::random_f32(4 * 32, 5);
  run.y.assign(x.size(), 0.0f);
  TensorView in[] = {testing::view(x, {4, 32})};
  TensorView out[] = {testing::view(run.y, {4, 32})};
  auto r = p->run("L.forward", in, out);
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
  for (std::size_t i = 0; i < x.size(); ++i) CHECK(run.y[i] == std::max(x[i], 0.0f));
  run.trace = *lines;
  return run;
}

// A checksum says an entry is what was written, not that it is this kernel: an artifact
// whose IR declares x: f32[4, 32, 32] for a kernel specialized on f32[4, 32] made the
// loader read and write out of bounds.
TEST_CASE("an entry whose artifact declares another signature is a corrupt entry: removed and rebuilt") {
  testing::ScratchDir tmp;
  (void)run_relu(tmp.path());
  const auto files = testing::files_in(tmp / "v1/objects");
  REQUIRE(files.size() == 1);
  const std::string path = tmp / ("v1/objects/" + files[0]);
  const std::string file = testing::slurp(path);
  auto entry = cache::decode_entry(file);
  REQUIRE(entry.ok());
  auto key = cache::Key::parse(entry->key);
  REQUIRE(key.has_value());
  auto artifact = cache::decode_artifact(entry->payload);
  REQUIRE(artifact.ok());
  // Every f32[4, 32] becomes f32[4, 32, 32]: the stored IR still verifies.
  std::string text(artifact->bytes.begin(), artifact->bytes.end());
  const std::string from = "f32[4, 32]", to = "f32[4, 32, 32]";
  for (auto at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  artifact->bytes.assign(text.begin(), text.end());
  // Re-encoded with a valid checksum: only the signature check can tell.
  testing::spit(path, cache::encode_entry(cache::EntryKind::Artifact, *key, cache::encode_artifact(*artifact)));
  auto verdict = cache::check_artifact_entry(*artifact, key->field("ir"), key->field("function"));
  REQUIRE_FALSE(verdict.ok());
  CHECK(verdict.error().message ==
        "stored artifact: 'L.forward' takes f32[4, 32, 32] there, but f32[4, 32] was asked for");

  const Run b = run_relu(tmp.path());
  CHECK_MESSAGE(b.count("takes f32[4, 32, 32] there, but f32[4, 32] was asked for: removed") == 1, b.all());
  CHECK(b.count(",disk=miss") == 1);
  CHECK(run_relu(tmp.path()).count(",disk=hit") == 1);
}

TEST_CASE("from_env: TERNJIT_CACHE_DIR, TERNJIT_CACHE_MAX_SIZE, TERNJIT_CACHE_SHARED_GROUP") {
  ::setenv("TERNJIT_CACHE_DIR", "off", 1);
  ::setenv("TERNJIT_CACHE_MAX_SIZE", "500M", 1);
  ::setenv("TERNJIT_CACHE_SHARED_GROUP", "1", 1);
  auto o = EngineOptions::from_env();
  REQUIRE(o.ok());
  CHECK(o->cache_dir == "off");
  CHECK(o->cache_max_bytes == 500ull << 20);
  CHECK(o->cache_shared_group);
  ::setenv("TERNJIT_CACHE_MAX_SIZE", "lots", 1);
  CHECK(testing::error_of(EngineOptions::from_env()).find("TERNJIT_CACHE_MAX_SIZE='lots' is malformed") == 0);
  ::unsetenv("TERNJIT_CACHE_MAX_SIZE");
  ::setenv("TERNJIT_CACHE_SHARED_GROUP", "yes", 1);
  CHECK(testing::error_of(EngineOptions::from_env()).find("TERNJIT_CACHE_SHARED_GROUP") == 0);
  ::unsetenv("TERNJIT_CACHE_SHARED_GROUP");
  ::unsetenv("TERNJIT_CACHE_DIR");
  // The default directory follows XDG_CACHE_HOME.
  const char* old = std::getenv("XDG_CACHE_HOME");
  const std::string saved = old ? old : "";
  ::setenv("XDG_CACHE_HOME", "/some/where", 1);
  CHECK(jit::default_cache_dir() == "/some/where/ternjit");
  if (old) ::setenv("XDG_CACHE_HOME", saved.c_str(), 1); else ::unsetenv("XDG_CACHE_HOME");
}

TEST_CASE("an auto engine's reference fallback is cached apart from a named target's refusal") {
  auto m = ir::parse_module(R"(func @f(%x: f32[4], %c: i32[]) -> f32[4] {
^entry:
  cond_br %c, ^a, ^b
^a:
  %y = relu %x : f32[4]
  ret %y
^b:
  %z = neg %x : f32[4]
  ret %z
}
)", "cf.tir");
  REQUIRE(m.ok());
  const Module mod = ir::wrap(std::move(m).value());
  testing::ScratchDir tmp;
  std::vector<float> x = {1, -2, 3, -4}, y(4);
  std::vector<std::int32_t> c = {1};
  TensorView in[] = {testing::view(x, {4}), TensorView{c.data(), ElemKind::I32, {}}};
  TensorView out[] = {testing::view(y, {4})};
  auto run = [&](const std::string& target, std::vector<std::string>* trace) -> Result<void> {
    EngineOptions o = with_dir(tmp.path());
    o.target = target;
    o.verbose = 1;
    o.trace = [trace](std::string_view l) { trace->emplace_back(l); };
    TERNJIT_TRY(Engine e, Engine::create(o));
    TERNJIT_TRY(Program p, e.compile(mod));
    return p.run("f", in, out);
  };
  std::vector<std::string> t1, t2, t3;
  REQUIRE(run("auto", &t1).ok());
  if (t1.size() < 3 || t1[1].find("fallback,target=") == std::string::npos) {
    MESSAGE("skipped: auto resolves to a target that compiles control flow");
    return;
  }
  CHECK(t1[2].find(",disk=miss") != std::string::npos);
  const std::string named = t1[1].substr(t1[1].find("target=") + 7, t1[1].find(",fn=") - t1[1].find("target=") - 7);
  CHECK_FALSE(run(named, &t2).ok());  // never the fallback's cached artifact
  REQUIRE(run("auto", &t3).ok());
  CHECK(y == std::vector<float>{1, 0, 3, 0});
  REQUIRE(t3.size() == 3);
  CHECK(t3[1].find("fallback,target=" + named) != std::string::npos);  // traced on a hit too
  CHECK(t3[2].find("target=reference") != std::string::npos);
  CHECK(t3[2].find(",disk=hit") != std::string::npos);
}

// A serial host "thread pool": the forked children below must not touch oneTBB, whose
// worker threads do not survive fork().
void serial_for(void*, void (*task)(void*, std::int64_t), void* context, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) task(context, i);
}

TEST_CASE("4 processes x 4 threads, an engine per thread, same and different shapes: all right, one entry per shape") {
  testing::ScratchDir tmp;
  constexpr int kProcs = 4, kThreads = 4;
  const std::vector<std::int64_t> ms = {1, 2, 3, 4};
  const testing::BitLinearWeights w(kK, kN, 5);
  std::vector<std::vector<float>> want;
  for (std::int64_t m : ms) want.push_back(testing::oracle(w.params(), testing::random_f32(m * kK, 17), m, kK));
  std::vector<pid_t> pids;
  for (int p = 0; p < kProcs; ++p) {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      std::atomic<int> wrong{0};
      std::vector<std::thread> threads;
      for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([&, t] {
          EngineOptions o;
          o.target = "reference";
          o.cache_dir = tmp.path();
          o.parallel_for = &serial_for;
          auto e = Engine::create(o);
          if (!e.ok()) return void(++wrong);
          auto prog = e->compile(testing::kBitLinear, "bitlinear.tri");
          if (!prog.ok()) return void(++wrong);
          testing::BitLinearWeights mine(kK, kN, 5);
          auto bind = [&](const char* n, TensorView v) { wrong += !prog->bind(n, v).ok(); };
          bind("BitLinear.gamma", testing::view(mine.gamma, {kK}));
          bind("BitLinear.w", testing::view(mine.w, {kK, kN}));
          bind("BitLinear.w_scale", testing::view(mine.w_scale, {kN}));
          for (std::size_t j = 0; j < ms.size(); ++j) {
            const std::size_t i = (j + static_cast<std::size_t>(p + t)) % ms.size();  // different orders
            std::vector<float> x = testing::random_f32(ms[i] * kK, 17), y(static_cast<std::size_t>(ms[i] * kN));
            TensorView in[] = {testing::view(x, {ms[i], kK})};
            TensorView out[] = {testing::view(y, {ms[i], kN})};
            wrong += !prog->run("BitLinear.forward", in, out).ok() || !testing::bit_equal(want[i], y);
          }
        });
      for (std::thread& th : threads) th.join();
      ::_exit(wrong.load() == 0 ? 0 : 1);
    }
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  }
  CHECK(testing::files_in(tmp / "v1/objects").size() == ms.size());
  CHECK(testing::files_in(tmp / "v1/tmp").empty());
}

// A target that only describes itself: its features are what the test sets.
class FakeTarget final : public targets::Target {
 public:
  explicit FakeTarget(std::string features) : features_(std::move(features)) {}
  [[nodiscard]] std::string_view name() const override { return "fake"; }
  [[nodiscard]] targets::TargetTraits traits() const override {
    targets::TargetTraits t;
    t.artifact_kind = "fake-object";
    return t;
  }
  [[nodiscard]] Result<void> available() const override { return success(); }
  [[nodiscard]] TargetDescription describe() const override {
    TargetDescription d;
    d.name = "fake";
    d.features = features_;
    return d;
  }
  [[nodiscard]] Result<void> check_supported(const ir::Function&) const override { return success(); }
  [[nodiscard]] Result<targets::Artifact> compile(const ir::Module&, std::string_view function,
                                                  const targets::CompileOptions&) const override {
    // An object without "ir" metadata: there is no IR for the signature check to read.
    targets::Artifact a;
    a.kind = "fake-object";
    a.bytes = {0xc3};
    a.entry = std::string(function);
    a.metadata["isa"] = features_;
    return a;
  }
  [[nodiscard]] Result<targets::TargetOptions> parse_options(const targets::TargetOptions& given) const override {
    return given;
  }
  [[nodiscard]] Result<targets::LoadedKernel> load(const targets::Artifact&,
                                                   const targets::LoadContext&) const override {
    return make_error(ErrorCode::Unsupported, "the fake target loads nothing");
  }
  [[nodiscard]] std::vector<std::string_view> emit_forms() const override { return {}; }
  [[nodiscard]] Result<targets::Emitted> emit(const ir::Module&, std::string_view, std::string_view,
                                              const targets::CompileOptions&, const ir::ParamValues*) const override {
    return make_error(ErrorCode::Unsupported, "the fake target emits nothing");
  }

 private:
  std::string features_;
};

TEST_CASE("KernelCache: a different ternjit version or different target features miss") {
  testing::ScratchDir tmp;
  testing::LogCapture log;
  auto module = dsl::compile_tri(testing::kBitLinear, "bitlinear.tri");
  REQUIRE(module.ok());
  auto config = [&](std::string version) {
    EngineOptions o;
    o.cache_dir = tmp.path();
    jit::KernelCacheConfig c = jit::kernel_cache_config(o, log.sink());
    c.version = std::move(version);
    return c;
  };
  int compiles = 0;
  targets::CompileOptions co;
  co.threads = 1;
  auto lookup = [&](jit::KernelCache& kc, const targets::Target& t) {
    jit::DiskState state = jit::DiskState::Off;
    auto a = kc.get_or_compile(*module, "BitLinear.forward", co, [&] {
      ++compiles;
      return t.compile(*module, "BitLinear.forward", {});
    }, &state);
    REQUIRE(a.ok());
    CHECK(a->metadata.at("isa") == t.describe().features);  // never another target's artifact
    return state;
  };
  FakeTarget avx2("avx2 fma"), avx512("avx2 fma avx512f");
  jit::KernelCache base(config("0.1.0"), {&avx2, nullptr});
  CHECK(lookup(base, avx2) == jit::DiskState::Miss);
  CHECK(lookup(base, avx2) == jit::DiskState::Hit);
  jit::KernelCache newer(config("0.2.0"), {&avx2, nullptr});
  CHECK(lookup(newer, avx2) == jit::DiskState::Miss);
  jit::KernelCache other_cpu(config("0.1.0"), {&avx512, nullptr});
  CHECK(lookup(other_cpu, avx512) == jit::DiskState::Miss);
  CHECK(lookup(base, avx2) == jit::DiskState::Hit);
  CHECK(compiles == 3);
  CHECK(base.key_of(*module, "BitLinear.forward", co).hex() != newer.key_of(*module, "BitLinear.forward", co).hex());
  // Every compile option is part of the key: compile-time tuning decisions (targets that
  // decide at compile), the run-time-rows bound, the target's own options.
  auto key_with = [&](auto change) {
    targets::CompileOptions c = co;
    change(c);
    return base.key_of(*module, "BitLinear.forward", c).hex();
  };
  const std::string plain = key_with([](targets::CompileOptions&) {});
  CHECK(key_with([](targets::CompileOptions& c) { c.decisions = {"a"}; }) != plain);
  CHECK(key_with([](targets::CompileOptions& c) { c.decisions = {"a"}; }) !=
        key_with([](targets::CompileOptions& c) { c.decisions = {"b"}; }));
  CHECK(key_with([](targets::CompileOptions& c) { c.rows_max = 16; }) != plain);
  CHECK(key_with([](targets::CompileOptions& c) { c.target.values["x"] = "1"; }) != plain);
  CHECK(key_with([](targets::CompileOptions& c) { c.threads = 2; }) != plain);
  // An engine whose functions may fall back to another target keys apart from one that may not.
  jit::KernelCache with_fallback(config("0.1.0"), {&avx2, &avx512});
  CHECK(with_fallback.key_of(*module, "BitLinear.forward", co).hex() != plain);
  CHECK(log.lines.empty());
  // The default version is this build's.
  EngineOptions o;
  CHECK(jit::kernel_cache_config(o, {}).version == cache::ternjit_version());
}

}  // namespace
}  // namespace ternjit
