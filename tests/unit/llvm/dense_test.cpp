// SPDX-License-Identifier: Apache-2.0
// dense_test.cpp - the llvm target's cast, broadcast, transpose and dense matmul against the interpreter.
//
// Each case compiles a small static function with the llvm target, checks that no step
// is left to the reference interpreter, loads it with 1 and 2 threads (a counting
// two-thread pool), poisons the outputs with 0xAB bytes (a NaN pattern) and compares them
// with ir::interpret on fresh random inputs (special values mixed in: NaN, +-inf, +-0,
// ties, subnormals, values past the f16 / integer ranges). cast, broadcast, transpose and
// matmul with a [K, N] right operand mirror the interpreter's arithmetic (f64 sums in
// index order, one rounding), so they are compared bit for bit. The head form
// matmul(x, transpose(P)) adds its f64 products over 8 lanes, so it is checked within the
// bound derived in codegen_dense.cpp (see within_nt_bound).
#include <doctest/doctest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <thread>

#include "ir/interpret.h"
#include "ir/parse.h"
#include "passes/pipeline.h"
#include "targets/llvm/llvm_target.h"
#include "targets/llvm/program.h"
#include "targets/registry.h"

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

std::string sh(const std::vector<std::int64_t>& d) {
  std::string s = "[";
  for (std::size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

// Random values of kind k with special values mixed in (floats scaled to +-300 so
// integer casts saturate and f16 sees large values; the specials stay representable).
HostTensor rnd(ElemKind k, std::vector<std::int64_t> shape, std::uint64_t seed, bool specials = true) {
  HostTensor t = HostTensor::random(k, std::move(shape), seed);
  if (!is_float(k)) return t;
  const double sp[] = {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
                       -std::numeric_limits<double>::infinity(), 0.0, -0.0, 0.5, 1.5, -2.5, 127.5, -128.5,
                       70000.0, 65519.0, 1e-7, -3e-8, 2.5e-39};
  for (std::size_t i = 0; i < t.data.size(); ++i) {
    if (specials && k == ElemKind::F32 && i % 7 == 3) t.data[i] = static_cast<float>(sp[(i / 7) % std::size(sp)]);
    else if (k == ElemKind::F32 && specials) t.data[i] = static_cast<float>(t.data[i] * 300.0);
  }
  return t;
}

// One kind of check on one output element: bit for bit, or within a bound.
using Within = bool (*)(const HostTensor& want, std::size_t i, float got, const std::vector<HostTensor>& args,
                        const ir::ParamValues& params);

struct Case {
  std::string tir;
  std::vector<HostTensor> args;
  ir::ParamValues params;
  Within within = nullptr;  // null: bit for bit
  bool expect_split = false;
};

// Compiles, checks the plan has no reference step, runs with 1 and 2 threads.
void run(const Case& c) {
  CAPTURE(c.tir);
  auto m = ir::parse_module(c.tir, "test.tir");
  REQUIRE_MESSAGE(m.ok(), (m.ok() ? "" : m.error().message));
  auto target = targets::make_llvm_target();
  auto art = target->compile(*m, "f", targets::CompileOptions{});
  REQUIRE_MESSAGE(art.ok(), (art.ok() ? "" : art.error().message));
  const targets::llvmjit::PanelLayout layout{std::atoi(art->metadata.at("panel_group").c_str()),
                                             std::atoi(art->metadata.at("packed_lanes").c_str())};
  auto prog = targets::llvmjit::analyze(*m->find_function("f"), layout);
  REQUIRE(prog.ok());
  for (const auto& s : prog->steps) {
    CAPTURE(s.summary);
    CHECK(s.kind != targets::llvmjit::PlanStep::Kind::Reference);
  }
  auto want = ir::interpret(*m, "f", c.args, c.params);
  REQUIRE_MESSAGE(want.ok(), (want.ok() ? "" : want.error().message));
  for (int threads : {1, 2}) {
    CAPTURE(threads);
    targets::Parallel par;
    if (threads == 2) par = targets::Parallel{2, &two_threads, nullptr};
    auto k = targets::llvmjit::load_kernel(*art, c.params, par);
    REQUIRE_MESSAGE(k.ok(), (k.ok() ? "" : k.error().message));
    std::vector<std::vector<std::uint8_t>> bytes;
    std::vector<void*> buffers;
    for (const HostTensor& a : c.args) bytes.push_back(a.to_bytes());
    for (const HostTensor& w : *want) bytes.emplace_back(w.to_bytes().size(), std::uint8_t{0xAB});
    for (auto& b : bytes) buffers.push_back(b.data());
    const int before = g_pooled.load();
    for (int rep = 0; rep < 2; ++rep) {
      for (std::size_t j = 0; j < want->size(); ++j) {
        auto& out = bytes[c.args.size() + j];
        std::memset(out.data(), 0xAB, out.size());
      }
      auto r = (*k)->run(buffers.data());
      REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
      for (std::size_t j = 0; j < want->size(); ++j) {
        const std::vector<std::uint8_t> w = (*want)[j].to_bytes();
        const auto& got = bytes[c.args.size() + j];
        if (c.within == nullptr) {
          if (w != got) {
            std::size_t at = 0;
            while (at < w.size() && w[at] == got[at]) ++at;
            FAIL("result " << j << " differs first at byte " << at << " of " << w.size());
          }
          continue;
        }
        REQUIRE((*want)[j].kind == ElemKind::F32);
        for (std::size_t i = 0; i < (*want)[j].data.size(); ++i) {
          float g = 0;
          std::memcpy(&g, got.data() + 4 * i, 4);
          if (!c.within((*want)[j], i, g, c.args, c.params)) FAIL("element " << i << ": got " << g << ", want " << (*want)[j].data[i]);
        }
      }
    }
    if (threads == 2) CHECK(g_pooled.load() - before == (c.expect_split ? 2 : 0));
  }
}

TEST_CASE("llvm dense: cast between every float and integer kind, specials, odd shapes") {
  const ElemKind kinds[] = {ElemKind::F32, ElemKind::F16, ElemKind::BF16, ElemKind::I32,
                            ElemKind::I8,  ElemKind::U8,  ElemKind::Bool};
  std::uint64_t seed = 100;
  for (ElemKind from : kinds)
    for (ElemKind to : kinds) {
      if (from == to) continue;
      CAPTURE(elem_name(from));
      CAPTURE(elem_name(to));
      const std::vector<std::int64_t> s = seed % 2 ? std::vector<std::int64_t>{3, 37} : std::vector<std::int64_t>{101};
      const std::string f = std::string(elem_name(from)), t = std::string(elem_name(to));
      Case c;
      c.tir = "func @f(%x: " + f + sh(s) + ") -> " + t + sh(s) + " {\n^entry:\n  %y = cast %x {to = " + t + "} : " + t +
              sh(s) + "\n  ret %y\n}\n";
      c.args = {rnd(from, s, seed++)};
      run(c);
    }
}

TEST_CASE("llvm dense: broadcast and transpose (rank <= 4, every element size)") {
  struct B {
    ElemKind k;
    std::vector<std::int64_t> in, out;
  };
  std::uint64_t seed = 300;
  for (const B& b : {B{ElemKind::F32, {3, 1, 5}, {2, 3, 4, 5}}, B{ElemKind::F16, {5}, {3, 5}}, B{ElemKind::I32, {}, {7}},
                     B{ElemKind::BF16, {4, 1}, {4, 9}}, B{ElemKind::I8, {1, 1}, {1, 3}}, B{ElemKind::F32, {1}, {1}}}) {
    const std::string k(elem_name(b.k));
    Case c;
    c.tir = "func @f(%x: " + k + sh(b.in) + ") -> " + k + sh(b.out) + " {\n^entry:\n  %y = broadcast %x : " + k + sh(b.out) +
            "\n  ret %y\n}\n";
    c.args = {rnd(b.k, b.in, seed++)};
    run(c);
  }
  struct T {
    ElemKind k;
    std::vector<std::int64_t> in, perm;
  };
  for (const T& t : {T{ElemKind::F32, {3, 5, 7}, {2, 0, 1}}, T{ElemKind::F16, {2, 3, 4, 5}, {3, 1, 0, 2}},
                     T{ElemKind::I8, {5, 9}, {1, 0}}, T{ElemKind::BF16, {3, 1, 2, 5}, {0, 3, 2, 1}},
                     T{ElemKind::I32, {7}, {0}}, T{ElemKind::F32, {1, 13, 2}, {1, 2, 0}}}) {
    std::vector<std::int64_t> out;
    for (std::int64_t p : t.perm) out.push_back(t.in[static_cast<std::size_t>(p)]);
    const std::string k(elem_name(t.k));
    Case c;
    c.tir = "func @f(%x: " + k + sh(t.in) + ") -> " + k + sh(out) + " {\n^entry:\n  %y = transpose %x {perm = " + sh(t.perm) +
            "} : " + k + sh(out) + "\n  ret %y\n}\n";
    c.args = {rnd(t.k, t.in, seed++)};
    run(c);
  }
}

TEST_CASE("llvm dense: matmul f32 and f32 x f16/bf16, batched with broadcast batch dims, rank-1 operands, bit for bit") {
  struct M {
    ElemKind ka, kb;
    std::vector<std::int64_t> a, b, y;
  };
  std::uint64_t seed = 500;
  for (const M& t : {M{ElemKind::F32, ElemKind::F32, {1, 67}, {67, 13}, {1, 13}},
                     M{ElemKind::F32, ElemKind::F32, {7, 9}, {9, 33}, {7, 33}},
                     M{ElemKind::F32, ElemKind::F16, {5, 40}, {40, 17}, {5, 17}},
                     M{ElemKind::BF16, ElemKind::F32, {3, 8}, {8, 5}, {3, 5}},
                     M{ElemKind::F32, ElemKind::BF16, {2, 3, 5, 9}, {3, 9, 4}, {2, 3, 5, 4}},
                     M{ElemKind::F32, ElemKind::F32, {4, 1, 3, 6}, {1, 2, 6, 5}, {4, 2, 3, 5}},
                     M{ElemKind::F32, ElemKind::F32, {11}, {11, 6}, {6}},
                     M{ElemKind::F32, ElemKind::F16, {3, 11}, {11}, {3}}}) {
    Case c;
    const std::string ka(elem_name(t.ka)), kb(elem_name(t.kb));
    c.tir = "func @f(%a: " + ka + sh(t.a) + ", %b: " + kb + sh(t.b) + ") -> f32" + sh(t.y) +
            " {\n^entry:\n  %y = matmul %a, %b : f32" + sh(t.y) + "\n  ret %y\n}\n";
    // No specials: a NaN or inf would make whole rows NaN and hide the arithmetic.
    c.args = {rnd(t.ka, t.a, seed, false), rnd(t.kb, t.b, seed + 1, false)};
    seed += 2;
    run(c);
  }
}

// matmul(x, transpose(P)) adds its f64 products in 8 lanes: the interpreter's sum and ours
// each differ from the exact sum by at most (K - 1) u S (u = 2^-53, S = sum |x_p P_jp|),
// so from each other by 2 K u S before rounding; rounding both to f32 adds at most one
// f32 ulp of the result (the two f64 values may straddle a rounding boundary).
bool within_nt_bound(const HostTensor& want, std::size_t i, float got, const std::vector<HostTensor>& args,
                     const ir::ParamValues& params) {
  const HostTensor& x = args[0];
  const ir::HostTensor P = params.values.at("p").to_host();
  const std::int64_t N = P.shape[0], K = P.shape[1];
  const auto r = static_cast<std::int64_t>(i) / N, j = static_cast<std::int64_t>(i) % N;
  double s = 0;
  for (std::int64_t p = 0; p < K; ++p)
    s += std::fabs(x.data[static_cast<std::size_t>(r * K + p)] * P.data[static_cast<std::size_t>(j * K + p)]);
  const double w = want.data[i];
  const double ulp = std::max(std::ldexp(1.0, -149), std::fabs(w) * std::ldexp(1.0, -23));
  return std::fabs(static_cast<double>(got) - w) <= ulp + 2.0 * static_cast<double>(K) * std::ldexp(1.0, -53) * s;
}

TEST_CASE("llvm dense: the head matmul(x, transpose(P)) reads P [N, K] as stored, never builds its transpose") {
  struct H {
    ElemKind kp;
    std::int64_t M, K, N;
  };
  std::uint64_t seed = 700;
  for (const H& h : {H{ElemKind::F16, 1, 67, 37}, H{ElemKind::BF16, 5, 64, 9}, H{ElemKind::F32, 3, 5, 50},
                     H{ElemKind::F16, 2, 130, 1}}) {
    CAPTURE(h.M);
    CAPTURE(h.K);
    CAPTURE(h.N);
    const std::string kp(elem_name(h.kp));
    Case c;
    c.tir = "param @p : " + kp + sh({h.N, h.K}) + "\nfunc @f(%x: f32" + sh({h.M, h.K}) + ") -> f32" + sh({h.M, h.N}) +
            " {\n^entry:\n  %p = param @p : " + kp + sh({h.N, h.K}) + "\n  %t = transpose %p {perm = [1, 0]} : " + kp +
            sh({h.K, h.N}) + "\n  %y = matmul %x, %t : f32" + sh({h.M, h.N}) + "\n  ret %y\n}\n";
    c.args = {rnd(ElemKind::F32, {h.M, h.K}, seed, false)};
    c.params.set("p", rnd(h.kp, {h.N, h.K}, seed + 1, false));
    seed += 2;
    c.within = &within_nt_bound;
    c.expect_split = h.N > 1;
    run(c);
    // The plan: the matmul reads the parameter's slot, and the transposed value's slot
    // is read by no step, so load leaves it empty (and never evaluates it).
    auto m = ir::parse_module(c.tir, "test.tir");
    REQUIRE(m.ok());
    const ir::Function& f = *m->find_function("f");
    auto prog = targets::llvmjit::analyze(f, targets::llvmjit::PanelLayout{1, 0});
    REQUIRE(prog.ok());
    REQUIRE(prog->steps.size() == 1);
    CHECK(prog->steps[0].rhs_transposed);
    auto bytes = targets::llvmjit::const_bytes(f, *prog, c.params, false);
    REQUIRE(bytes.ok());
    std::size_t filled = 0, total = 0;
    for (const auto& b : *bytes) {
      filled += b.empty() ? 0 : 1;
      total += b.size();
    }
    CHECK(filled == 1);
    CHECK(total == static_cast<std::size_t>(h.N * h.K * (h.kp == ElemKind::F32 ? 4 : 2)));
  }
}

TEST_CASE("llvm dense: an attention block after O2 (scores, softmax, values, head) has no reference step") {
  // x [M, E] -> rmsnorm -> q, k, v (dense f32 x f16 weights) -> heads [H, M, D] by
  // reshape + transpose -> scores q k^T -> softmax -> values -> back to [M, E] ->
  // residual -> head matmul(h, transpose(embd)) with embd f16 [V, E], then a cast to f16.
  const std::int64_t M = 3, E = 12, H = 2, D = 6, V = 19;
  const std::string tir =
      "param @g : f32[12]\nparam @wq : f16[12, 12]\nparam @wk : f16[12, 12]\nparam @wv : bf16[12, 12]\n"
      "param @embd : f16[19, 12]\n"
      "func @f(%x: f32[3, 12]) -> (f32[3, 19], f16[3, 19]) {\n^entry:\n"
      "  %g = param @g : f32[12]\n  %wq = param @wq : f16[12, 12]\n  %wk = param @wk : f16[12, 12]\n"
      "  %wv = param @wv : bf16[12, 12]\n  %embd = param @embd : f16[19, 12]\n"
      "  %n = rmsnorm %x, %g {eps = 1e-05} : f32[3, 12]\n"
      "  %q = matmul %n, %wq : f32[3, 12]\n  %k = matmul %n, %wk : f32[3, 12]\n  %v = matmul %n, %wv : f32[3, 12]\n"
      "  %q3 = reshape %q : f32[3, 2, 6]\n  %k3 = reshape %k : f32[3, 2, 6]\n  %v3 = reshape %v : f32[3, 2, 6]\n"
      "  %qh = transpose %q3 {perm = [1, 0, 2]} : f32[2, 3, 6]\n  %kt = transpose %k3 {perm = [1, 2, 0]} : f32[2, 6, 3]\n"
      "  %vh = transpose %v3 {perm = [1, 0, 2]} : f32[2, 3, 6]\n"
      "  %s = matmul %qh, %kt : f32[2, 3, 3]\n  %p = softmax %s {axis = 2} : f32[2, 3, 3]\n"
      "  %o = matmul %p, %vh : f32[2, 3, 6]\n  %ot = transpose %o {perm = [1, 0, 2]} : f32[3, 2, 6]\n"
      "  %a = reshape %ot : f32[3, 12]\n  %h = add %x, %a : f32[3, 12]\n"
      "  %et = transpose %embd {perm = [1, 0]} : f16[12, 19]\n  %l = matmul %h, %et : f32[3, 19]\n"
      "  %l16 = cast %l {to = f16} : f16[3, 19]\n  ret %l, %l16\n}\n";
  (void)M, (void)E, (void)H, (void)D, (void)V;
  auto m = ir::parse_module(tir, "block.tir");
  REQUIRE_MESSAGE(m.ok(), (m.ok() ? "" : m.error().message));
  auto target = targets::make_llvm_target();
  passes::PipelineOptions po;
  auto rep = passes::run_pipeline(*m, passes::default_pipeline(passes::OptLevel::O2), po);
  REQUIRE_MESSAGE(rep.ok(), (rep.ok() ? "" : rep.error().message));
  auto prog = targets::llvmjit::analyze(*m->find_function("f"), targets::llvmjit::PanelLayout{16, 16});
  REQUIRE(prog.ok());
  CHECK(prog->all_lowered);
  for (const auto& s : prog->steps) {
    CAPTURE(s.summary);
    CHECK(s.kind != targets::llvmjit::PlanStep::Kind::Reference);
  }
  // And it runs: the logits within a loose bound (the head's lane order; everything else
  // is bit for bit), the f16 logits too (one more rounding of those).
  ir::ParamValues params;
  params.set("g", rnd(ElemKind::F32, {E}, 1, false));
  params.set("wq", rnd(ElemKind::F16, {E, E}, 2, false));
  params.set("wk", rnd(ElemKind::F16, {E, E}, 3, false));
  params.set("wv", rnd(ElemKind::BF16, {E, E}, 4, false));
  params.set("embd", rnd(ElemKind::F16, {V, E}, 5, false));
  const std::vector<HostTensor> args = {rnd(ElemKind::F32, {M, E}, 6, false)};
  auto want = ir::interpret(*m, "f", args, params);
  REQUIRE(want.ok());
  auto art = target->compile(*m, "f", targets::CompileOptions{});
  REQUIRE_MESSAGE(art.ok(), (art.ok() ? "" : art.error().message));
  auto k = targets::llvmjit::load_kernel(*art, params, targets::Parallel{2, &two_threads, nullptr});
  REQUIRE_MESSAGE(k.ok(), (k.ok() ? "" : k.error().message));
  std::vector<float> x = args[0].to_f32(), l(static_cast<std::size_t>(M * V), std::nanf(""));
  std::vector<std::uint16_t> l16(static_cast<std::size_t>(M * V), 0xABAB);
  void* buffers[] = {x.data(), l.data(), l16.data()};
  REQUIRE((*k)->run(buffers).ok());
  for (std::size_t i = 0; i < l.size(); ++i) {
    const double w = (*want)[0].data[i];
    CHECK(std::fabs(static_cast<double>(l[i]) - w) <= 1e-5 * (1.0 + std::fabs(w)));
    const double w16 = (*want)[1].data[i];
    const double g16 = HostTensor::from_bytes(ElemKind::F16, {1}, {reinterpret_cast<std::uint8_t*>(&l16[i]), 2})->data[0];
    CHECK(std::fabs(g16 - w16) <= std::fabs(w16) * 0x1p-10 + 1e-5);
  }
}

}  // namespace
}  // namespace ternjit
