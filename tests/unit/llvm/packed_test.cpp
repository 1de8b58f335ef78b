// SPDX-License-Identifier: Apache-2.0
// packed_test.cpp - the llvm target's i8 x t2 tmatmul on packed 2-bit panels, bit for bit against the interpreter.
//
// Every case compiles a one-tmatmul function with the llvm target, loads it with 1 and 2
// threads (a std::thread pool whose use is counted, so a kernel that never splits its
// work fails the check) and compares the output bytes, poisoned with 0xAB (a NaN
// pattern) before each run, with ir::interpret on fresh random inputs. The integer sum
// is exact and the epilogue follows the interpreter's f32 order, so the comparison is
// bit for bit. Shapes cover M = 1, 3, 17 and 128, K and N tails of every kind (K % 4,
// K % 64, N % 16, N % 64 and N % 256 not 0), every epilogue operand alone and together,
// every activation, extreme sums (x = -128 or 127 against all-(+1)/all-(-1) weights), the
// portable decode (objects for x86-64 and x86-64-v3 CPUs linked in-process) and the
// int8-panel layout the `panels = int8` option keeps.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <tuple>

#include "ir/interpret.h"
#include "ir/parse.h"
#include "targets/llvm/backend.h"
#include "targets/llvm/llvm_target.h"
#include "targets/llvm/program.h"
#include "tests/unit/engine/engine_testing.h"

namespace ternjit {
namespace {

using ir::HostTensor;

std::atomic<int> g_pooled{0};

// Parallel::RunFn: even indices on the calling thread, odd ones on a second thread.
void two_threads(void*, targets::Parallel::TaskFn task, void* context, std::int64_t n) {
  g_pooled.fetch_add(1);
  std::thread t([&] {
    for (std::int64_t i = 1; i < n; i += 2) task(context, i);
  });
  for (std::int64_t i = 0; i < n; i += 2) task(context, i);
  t.join();
}

struct Case {
  std::int64_t M, K, N;
  bool xs = true, ws = true, ws_scalar = false, bias = true, res = true;
  const char* act = "none";
};

std::string sh(std::initializer_list<std::int64_t> d) {
  std::string s = "[";
  for (auto it = d.begin(); it != d.end(); ++it) s += (it == d.begin() ? "" : ", ") + std::to_string(*it);
  return s + "]";
}

std::string tir_of(const Case& c) {
  const std::string y = sh({c.M, c.N});
  std::string t = "param @w : t2" + sh({c.K, c.N}) + "\n";
  if (c.ws) t += "param @ws : f32" + (c.ws_scalar ? std::string("[]") : sh({c.N})) + "\n";
  t += "func @f(%q: i8" + sh({c.M, c.K});
  if (c.xs) t += ", %xs: f32" + sh({c.M, 1});
  if (c.bias) t += ", %b: f32" + sh({c.N});
  if (c.res) t += ", %r: f32" + y;
  t += ") -> f32" + y + " {\n^entry:\n  %w = param @w : t2" + sh({c.K, c.N}) + "\n";
  if (c.ws) t += "  %ws = param @ws : f32" + (c.ws_scalar ? std::string("[]") : sh({c.N})) + "\n";
  t += "  %y = tmatmul %q, %w";
  if (c.xs) t += ", %xs";
  if (c.ws) t += ", %ws";
  if (c.bias) t += ", %b";
  if (c.res) t += ", %r";
  auto flag = [](bool b) { return b ? "true" : "false"; };
  t += std::string(" {x_scale = ") + flag(c.xs) + ", w_scale = " + flag(c.ws) + ", bias = " + flag(c.bias) +
       ", residual = " + flag(c.res) + ", act = " + c.act + "} : f32" + y + "\n  ret %y\n}\n";
  return t;
}

struct Inputs {
  std::vector<HostTensor> args;
  ir::ParamValues params;
};

// Random inputs; `extreme` = 1: x all -128 and w all +1, 2: x all 127 and w all -1.
Inputs inputs_of(const Case& c, std::uint64_t seed, int extreme = 0) {
  Inputs in;
  HostTensor w = HostTensor::random(ElemKind::T2, {c.K, c.N}, seed);
  HostTensor q = HostTensor::random(ElemKind::I8, {c.M, c.K}, seed + 1);
  if (extreme) {
    for (double& v : w.data) v = extreme == 1 ? 1.0 : -1.0;
    for (double& v : q.data) v = extreme == 1 ? -128.0 : 127.0;
  } else if (!q.data.empty()) {
    q.data[0] = -128.0;  // the ends of the i8 range
    q.data[q.data.size() - 1] = 127.0;
  }
  in.params.set("w", w);
  if (c.ws)
    in.params.set(
        "ws", HostTensor::random(ElemKind::F32,
                                 c.ws_scalar ? std::vector<std::int64_t>{} : std::vector<std::int64_t>{c.N}, seed + 2));
  in.args.push_back(q);
  if (c.xs) in.args.push_back(HostTensor::random(ElemKind::F32, {c.M, 1}, seed + 3));
  if (c.bias) in.args.push_back(HostTensor::random(ElemKind::F32, {c.N}, seed + 4));
  if (c.res) in.args.push_back(HostTensor::random(ElemKind::F32, {c.M, c.N}, seed + 5));
  return in;
}

// Runs `run(buffers)` on poisoned outputs and compares with the interpreter's bytes.
template <class Run>
void compare(const ir::Module& m, const Inputs& in, Run run) {
  auto want = ir::interpret(m, "f", in.args, in.params);
  REQUIRE_MESSAGE(want.ok(), (want.ok() ? "" : want.error().message));
  std::vector<std::vector<std::uint8_t>> bytes;
  std::vector<void*> buffers;
  for (const HostTensor& a : in.args) bytes.push_back(a.to_bytes());
  const std::vector<std::uint8_t> w = (*want)[0].to_bytes();
  bytes.emplace_back(w.size(), std::uint8_t{0xAB});
  for (auto& b : bytes) buffers.push_back(b.data());
  for (int rep = 0; rep < 2; ++rep) {
    std::memset(bytes.back().data(), 0xAB, w.size());
    run(buffers.data());
    if (w != bytes.back()) {
      std::size_t at = 0;
      while (at < w.size() && w[at] == bytes.back()[at]) ++at;
      FAIL("output differs first at byte " << at << " of " << w.size() << " (element " << at / 4 << ")");
    }
  }
}

// Compiles and loads `c` on the host target and checks it with 1 and 2 threads.
void check(const Case& c, std::uint64_t seed, int extreme = 0, const char* panels = "packed") {
  CAPTURE(c.M);
  CAPTURE(c.K);
  CAPTURE(c.N);
  CAPTURE(c.act);
  CAPTURE(extreme);
  CAPTURE(panels);
  const std::string tir = tir_of(c);
  auto m = ir::parse_module(tir, "packed.tir");
  REQUIRE_MESSAGE(m.ok(), (m.ok() ? "" : m.error().message));
  auto target = targets::make_llvm_target();
  targets::CompileOptions co;
  co.target.values["panels"] = panels;
  auto art = target->compile(*m, "f", co);
  REQUIRE_MESSAGE(art.ok(), (art.ok() ? "" : art.error().message));
  const bool packed = std::string(panels) == "packed";
  CHECK((art->metadata.at("packed_lanes") != "0") == packed);
  // The plan reads the weight as one packed slot (no int8 panel, no column sums).
  auto prog = targets::llvmjit::analyze(
      *m->find_function("f"), targets::llvmjit::PanelLayout{std::atoi(art->metadata.at("panel_group").c_str()),
                                                            std::atoi(art->metadata.at("packed_lanes").c_str())});
  REQUIRE(prog.ok());
  CHECK(prog->steps[0].packed == packed);
  const Inputs in = inputs_of(c, seed, extreme);
  // Two threads split the work when there is more than one panel or row block.
  bool splits = false;
  if (packed) {
    const auto tile = targets::llvmjit::packed_tile(c.M, prog->lanes);
    const std::int64_t nb = 4 * prog->lanes * tile.cv;
    const std::int64_t panels = (targets::llvmjit::padded_n(c.N, 4 * prog->lanes) + nb - 1) / nb;
    const std::int64_t rb = std::min<std::int64_t>(tile.rows, c.M);
    splits = panels > 1 || (c.M + rb - 1) / rb > 1;
  }
  for (int threads : {1, 2}) {
    CAPTURE(threads);
    targets::Parallel par;
    if (threads == 2) par = targets::Parallel{2, &two_threads, nullptr};
    auto k = targets::llvmjit::load_kernel(*art, in.params, par);
    REQUIRE_MESSAGE(k.ok(), (k.ok() ? "" : k.error().message));
    const int before = g_pooled.load();
    compare(*m, in, [&](void* const* b) { REQUIRE((*k)->run(b).ok()); });
    if (threads == 2) CHECK(g_pooled.load() - before == (splits ? 2 : 0));
    if (threads == 1) CHECK(g_pooled.load() == before);
  }
}

TEST_CASE("llvm packed: M = 1, 3, 17, 128 with K and N tails, the full epilogue, 1 and 2 threads") {
  const std::int64_t Ms[] = {1, 3, 17, 128};
  struct KN {
    std::int64_t K, N;
  };
  // K: 4-step and 64-byte tails; N: group (64), panel (256) and 16-lane tails.
  const KN kns[] = {{64, 64}, {63, 5}, {130, 67}, {257, 300}, {1, 1}, {200, 513}};
  std::uint64_t seed = 100;
  for (std::int64_t M : Ms)
    for (const KN& kn : kns) {
      if (M == 128 && kn.K * kn.N > 40000) continue;  // keep the interpreter's share small
      check(Case{M, kn.K, kn.N}, seed);
      seed += 10;
    }
}

TEST_CASE("llvm packed: every epilogue operand alone, scalar w_scale, every activation") {
  std::uint64_t seed = 500;
  const char* acts[] = {"none", "relu", "gelu", "silu", "sigmoid", "tanh"};
  for (const char* act : acts) {
    check(Case{3, 70, 45, true, true, false, true, true, act}, seed);
    seed += 10;
  }
  for (std::int64_t M : {1, 5}) {
    check(Case{M, 100, 90, false, false, false, false, false, "none"}, seed += 10);  // the bare sum
    check(Case{M, 100, 90, true, false, false, false, false, "none"}, seed += 10);
    check(Case{M, 100, 90, false, true, true, false, false, "relu"}, seed += 10);  // scalar w_scale
    check(Case{M, 100, 90, false, false, false, true, false, "none"}, seed += 10);
    check(Case{M, 100, 90, false, false, false, false, true, "none"}, seed += 10);
  }
}

TEST_CASE("llvm packed: extreme sums (x = -128 / 127 against all +1 / -1 weights), large K") {
  // |sum| = 128 * K: the masked field-3 accumulator holds 64 times that.
  for (int extreme : {1, 2}) {
    check(Case{1, 4099, 70, false, false, false, false, false, "none"}, 900, extreme);
    check(Case{5, 4099, 70, false, false, false, false, false, "none"}, 910, extreme);
  }
  check(Case{2, 4099, 300}, 920);
  // The mask decode's bound (N = 64: columns in all four fields): Kp = 131008 < 2^17
  // keeps it (|A3| = 2^14 * K just below 2^31); Kp = 131136 takes the shift decode on
  // every target (with the mask decode there, the first case below wraps and fails).
  for (int extreme : {1, 2}) check(Case{1, 131008, 64, false, false, false, false, false, "none"}, 930, extreme);
  check(Case{1, 131073, 64, false, false, false, false, false, "none"}, 940, 1);
  check(Case{3, 131073, 20}, 950);
}

TEST_CASE("llvm packed: panels = int8 keeps the int8 layout, bit for bit") {
  check(Case{1, 130, 67}, 1000, 0, "int8");
  check(Case{17, 257, 300}, 1010, 0, "int8");
}

TEST_CASE("llvm packed: the portable decode (no dot product instruction) in host objects") {
  if (targets::llvmjit::host_triple().rfind("x86_64", 0) != 0) return;  // the CPUs below are x86-64 ones
  const Case cases[] = {Case{1, 130, 67}, Case{17, 257, 300, true, true, false, true, true, "relu"}, Case{4, 63, 5}};
  std::uint64_t seed = 1200;
  for (const char* cpu : {"x86-64", "x86-64-v3"}) {
    for (const Case& c : cases) {
      CAPTURE(cpu);
      CAPTURE(c.M);
      auto m = ir::parse_module(tir_of(c), "packed.tir");
      REQUIRE(m.ok());
      const Inputs in = inputs_of(c, seed += 10);
      targets::llvmjit::EmitRequest r;
      r.cpu = cpu;
      r.params = &in.params;
      r.symbol = "packed_entry";
      auto e = targets::llvmjit::emit(*m, "f", r);
      REQUIRE_MESSAGE(e.ok(), (e.ok() ? "" : e.error().message));
      auto obj = targets::llvmjit::jit_link(std::vector<std::uint8_t>(e->bytes.begin(), e->bytes.end()));
      REQUIRE_MESSAGE(obj.ok(), (obj.ok() ? "" : obj.error().message));
      using Aot = void (*)(void* const*, void*);
      void* sym = (*obj)->lookup("packed_entry");
      REQUIRE(sym != nullptr);
      auto fn = reinterpret_cast<Aot>(sym);
      std::vector<std::uint8_t> scratch(e->scratch_bytes + 128);
      void* aligned = scratch.data() + (64 - reinterpret_cast<std::uintptr_t>(scratch.data()) % 64) % 64;
      compare(*m, in, [&](void* const* b) { fn(b, aligned); });
    }
  }
}

TEST_CASE("llvm packed: the layout puts every weight where packed_index says, code w + 1, padding code 1") {
  // N = 90: rows start mid-byte (the codes path); N = 136 and 256: every row on a byte, the
  // groups inside N straight from the tern2 bytes (K = 70: the last step through the codes).
  for (const std::int64_t N : {90, 136, 256}) {
  CAPTURE(N);
  const std::int64_t K = 70;
  const targets::llvmjit::PackedLayout l{16, 4};
  const std::string tir = tir_of(Case{1, K, N, false, false, false, false, false, "none"});
  auto m = ir::parse_module(tir, "packed.tir");
  REQUIRE(m.ok());
  const ir::Function& f = *m->find_function("f");
  auto p = targets::llvmjit::analyze(f, targets::llvmjit::PanelLayout{16, 16});
  REQUIRE(p.ok());
  REQUIRE(p->consts.size() == 2);  // the weight's value, its packed panel
  CHECK(p->consts[1].form == targets::llvmjit::ConstSlot::Form::Packed);
  CHECK(p->consts[1].packed.lanes == l.lanes);
  CHECK(p->consts[1].packed.cv == l.cv);
  const Inputs in = inputs_of(Case{1, K, N, false, false, false, false, false, "none"}, 77);
  auto bytes = targets::llvmjit::const_bytes(f, *p, in.params, false);
  REQUIRE(bytes.ok());
  CHECK((*bytes)[0].empty());  // the weight's own value: no step reads it, the kernel keeps none
  const std::vector<std::uint8_t>& b = (*bytes)[1];
  const std::int64_t Kp = targets::llvmjit::padded_k(K);
  REQUIRE(static_cast<std::int64_t>(b.size()) == targets::llvmjit::packed_bytes(K, N, l));
  const std::int64_t npad = (N + 63) / 64 * 64;
  CHECK(b.size() == static_cast<std::size_t>(Kp / 4 * npad));         // N padded to whole groups of 64
  const HostTensor w = HostTensor::random(ElemKind::T2, {K, N}, 77);  // what inputs_of drew
  std::vector<int> seen(b.size() * 4, 0);
  for (std::int64_t k = 0; k < Kp; ++k)
    for (std::int64_t j = 0; j < npad; ++j) {
      const auto at = targets::llvmjit::packed_index(k, j, Kp, N, l);
      REQUIRE(at.byte < static_cast<std::int64_t>(b.size()));
      ++seen[static_cast<std::size_t>(at.byte * 4 + at.shift / 2)];
      const int code = (b[static_cast<std::size_t>(at.byte)] >> at.shift) & 3;
      const int want = k < K && j < N ? static_cast<int>(w.data[static_cast<std::size_t>(k * N + j)]) + 1 : 1;
      if (code != want) FAIL("w[" << k << ", " << j << "] has code " << code << ", want " << want);
    }
  for (int s : seen) REQUIRE(s == 1);  // a bijection onto the fields
  }
}

}  // namespace
}  // namespace ternjit

namespace ternjit {
namespace {

TEST_CASE("llvm packed: BitLinear through the engine with 1 and 2 threads (the engine's oneTBB arena), bit for bit") {
  for (int threads : {1, 2}) {
    EngineOptions o;
    o.target = "llvm";
    o.threads = threads;
    auto e = Engine::create(o);
    REQUIRE_MESSAGE(e.ok(), (e.ok() ? "" : e.error().message));
    for (const auto& [M, K, N] : {std::tuple<std::int64_t, std::int64_t, std::int64_t>{1, 257, 300}, {17, 130, 67}}) {
      CAPTURE(threads);
      CAPTURE(M);
      Program p = testing::bitlinear(*e);
      testing::BitLinearWeights w(K, N, static_cast<std::uint64_t>(K + threads));
      w.bind(p);
      std::vector<float> x = testing::random_f32(M * K, 9);
      const std::vector<float> want = testing::oracle(w.params(), x, M, K, 2);
      std::vector<float> y(static_cast<std::size_t>(M * N), std::nanf(""));
      TensorView in[] = {testing::view(x, {M, K})};
      TensorView out[] = {testing::view(y, {M, N})};
      auto r = p.run("BitLinear.forward", in, out);
      REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
      CHECK(std::memcmp(y.data(), want.data(), y.size() * sizeof(float)) == 0);
    }
  }
}

}  // namespace
}  // namespace ternjit

namespace ternjit {
namespace {

TEST_CASE("llvm packed: one Program's specializations share its weight panels (one pack per layout)") {
  auto target = targets::make_llvm_target();
  auto state = target->new_program_state();
  auto* packs = dynamic_cast<targets::llvmjit::PackCache*>(state.get());
  REQUIRE(packs != nullptr);
  std::vector<targets::LoadedKernel> kernels;  // kept alive: the cache must not be the only owner
  const Inputs weights = inputs_of(Case{1, 130, 300}, 2000);
  std::size_t want_packs = 0;
  for (std::int64_t M : {1, 2, 17, 5, 1}) {
    CAPTURE(M);
    const Case c{M, 130, 300};
    auto m = ir::parse_module(tir_of(c), "packed.tir");
    REQUIRE(m.ok());
    auto art = target->compile(*m, "f", targets::CompileOptions{});
    REQUIRE(art.ok());
    Inputs in = inputs_of(c, 2000 + static_cast<std::uint64_t>(M));
    in.params = weights.params;  // the Program's weights
    targets::LoadContext ctx;
    ctx.params = &in.params;
    ctx.state = state.get();
    auto k = target->load(*art, ctx);
    REQUIRE_MESSAGE(k.ok(), (k.ok() ? "" : k.error().message));
    compare(*m, in, [&](void* const* b) { REQUIRE(k->run(k->state, b).ok()); });
    kernels.push_back(std::move(*k));
    // M < 4: 1 x 4 tiles, else 4 x 1: two layouts, each packed when first seen.
    if (M == 1 || M == 17) want_packs = std::max<std::size_t>(want_packs, M == 1 ? 1 : 2);
    CHECK(packs->packs_made() == want_packs);
  }
}

}  // namespace
}  // namespace ternjit

namespace ternjit {
namespace {

TEST_CASE("llvm packed: the dot instruction each x86 CPU class gets (assembly; AVX-VNNI cannot run on this host)") {
  const Case c{1, 130, 67};
  auto m = ir::parse_module(tir_of(c), "packed.tir");
  REQUIRE(m.ok());
  const Inputs in = inputs_of(c, 3000);
  struct Want {
    const char* cpu;
    const char* has;
    const char* lacks;
  };
  for (const Want& w : {Want{"alderlake", "{vex}\tvpdpbusd\t%ymm", "zmm"}, Want{"sapphirerapids", "vpdpbusd\t%zmm", "{vex}"},
                        Want{"haswell", "vpmaddwd", "vpdpbusd"}}) {
    CAPTURE(w.cpu);
    targets::llvmjit::EmitRequest r;
    r.triple = "x86_64-linux-gnu";
    r.cpu = w.cpu;
    r.what = targets::llvmjit::EmitWhat::Asm;
    r.params = &in.params;
    auto e = targets::llvmjit::emit(*m, "f", r);
    REQUIRE_MESSAGE(e.ok(), (e.ok() ? "" : e.error().message));
    CHECK(e->bytes.find(w.has) != std::string::npos);
    CHECK(e->bytes.find(w.lacks) == std::string::npos);
  }
}

}  // namespace
}  // namespace ternjit

namespace ternjit {
namespace {

TEST_CASE("llvm packed: a weight computed at load time (tquantize of an f32 parameter) packs from its values") {
  // The other cases pack a bound t2 parameter from its 2-bit codes; this one takes the
  // values path of const_bytes.
  for (std::int64_t M : {1, 6}) {
    CAPTURE(M);
    const std::string y = sh({M, 75});
    const std::string tir = "param @p : f32[131, 75]\nfunc @f(%q: i8" + sh({M, 131}) + ") -> f32" + y +
                            " {\n^entry:\n  %p = param @p : f32[131, 75]\n  %t, %g = tquantize %p : t2[131, 75], f32[]\n"
                            "  %y = tmatmul %q, %t, %g {x_scale = false, w_scale = true, bias = false, residual = false, "
                            "act = none} : f32" + y + "\n  ret %y\n}\n";
    auto m = ir::parse_module(tir, "packed.tir");
    REQUIRE_MESSAGE(m.ok(), (m.ok() ? "" : m.error().message));
    auto target = targets::make_llvm_target();
    auto art = target->compile(*m, "f", targets::CompileOptions{});
    REQUIRE_MESSAGE(art.ok(), (art.ok() ? "" : art.error().message));
    auto prog = targets::llvmjit::analyze(*m->find_function("f"), targets::llvmjit::PanelLayout{16, 16});
    REQUIRE(prog.ok());
    bool packed = false;
    for (const auto& s : prog->steps) packed = packed || s.packed;
    CHECK(packed);
    Inputs in;
    in.params.set("p", HostTensor::random(ElemKind::F32, {131, 75}, 4000 + static_cast<std::uint64_t>(M)));
    in.args.push_back(HostTensor::random(ElemKind::I8, {M, 131}, 4100 + static_cast<std::uint64_t>(M)));
    auto k = targets::llvmjit::load_kernel(*art, in.params, targets::Parallel{2, &two_threads, nullptr});
    REQUIRE_MESSAGE(k.ok(), (k.ok() ? "" : k.error().message));
    compare(*m, in, [&](void* const* b) { REQUIRE((*k)->run(b).ok()); });
  }
}

}  // namespace
}  // namespace ternjit
