// SPDX-License-Identifier: Apache-2.0
// decoder_test.cpp - the llvm target's decoder ops (gather, slice, concat, layernorm, rope, causal_softmax, kv_write, attention) against the interpreter.
//
// Each case compiles a small static function with the llvm target, checks that no step
// is a reference step, poisons the outputs with 0xAB bytes, runs it with 1 and 2 threads
// on fresh random inputs and compares the output bytes with ir::interpret: the
// generators mirror ir/interpret_decoder.cpp's f64 arithmetic and order (libm's
// exp/cos/sin, std::pow for rope's frequencies), so the comparison is bit for bit. Cache
// rows past pos + M hold NaN, so a kernel reading them fails. Run-time range errors
// (negative pos, rows past the capacity, ids out of the table) must come back from run()
// as an error with the interpreter's message.
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

namespace ternjit {
namespace {

using ir::HostTensor;

std::atomic<int> g_pooled{0};

void two_threads(void*, targets::Parallel::TaskFn task, void* context, std::int64_t n) {
  g_pooled.fetch_add(1);
  std::thread t([&] {
    for (std::int64_t i = 1; i < n; i += 2) task(context, i);
  });
  for (std::int64_t i = 0; i < n; i += 2) task(context, i);
  t.join();
}

HostTensor scalar_i32(std::int64_t v) { return HostTensor{ElemKind::I32, {}, {static_cast<double>(v)}}; }

HostTensor rnd(ElemKind k, std::vector<std::int64_t> s, std::uint64_t seed) { return HostTensor::random(k, std::move(s), seed); }

// Compiles `tir`'s @f (after the O2 pipeline when `o2`), checks no reference step is
// left and compares a run with the interpreter; an interpreter error must come back from
// run() with the same message.
void run(const std::string& tir, const std::vector<HostTensor>& args, bool o2 = false) {
  CAPTURE(tir);
  auto m = ir::parse_module(tir, "test.tir");
  REQUIRE_MESSAGE(m.ok(), (m.ok() ? "" : m.error().message));
  auto target = targets::make_llvm_target();
  if (o2) {
    passes::PipelineOptions po;
    REQUIRE(passes::run_pipeline(*m, passes::default_pipeline(passes::OptLevel::O2), po).ok());
  }
  auto art = target->compile(*m, "f", targets::CompileOptions{});
  REQUIRE_MESSAGE(art.ok(), (art.ok() ? "" : art.error().message));
  auto prog = targets::llvmjit::analyze(*m->find_function("f"),
                                        targets::llvmjit::PanelLayout{std::atoi(art->metadata.at("panel_group").c_str()),
                                                                      std::atoi(art->metadata.at("packed_lanes").c_str())});
  REQUIRE(prog.ok());
  CHECK(prog->all_lowered);
  for (const auto& s : prog->steps) {
    CAPTURE(s.summary);
    CHECK(s.kind != targets::llvmjit::PlanStep::Kind::Reference);
  }
  auto want = ir::interpret(*m, "f", args, {});
  const ir::Function& f = *m->find_function("f");
  for (int threads : {1, 2}) {
    CAPTURE(threads);
    targets::Parallel par;
    if (threads == 2) par = targets::Parallel{2, &two_threads, nullptr};
    auto k = targets::llvmjit::load_kernel(*art, {}, par);
    REQUIRE_MESSAGE(k.ok(), (k.ok() ? "" : k.error().message));
    std::vector<std::vector<std::uint8_t>> bytes;
    std::vector<void*> buffers;
    for (const HostTensor& a : args) bytes.push_back(a.to_bytes());
    for (const ir::Type& t : f.result_types()) bytes.emplace_back(targets::llvmjit::bytes_of(t), std::uint8_t{0xAB});
    for (auto& b : bytes) buffers.push_back(b.data());
    auto r = (*k)->run(buffers.data());
    if (!want.ok()) {
      REQUIRE_FALSE(r.ok());
      CHECK(r.error().code == ErrorCode::InvalidInput);
      // The interpreter's message (it may carry a location prefix: compare the tail).
      const std::string& w = want.error().message;
      const std::string& g = r.error().message;
      CAPTURE(w);
      CAPTURE(g);
      CHECK(w.size() >= g.size());
      CHECK(w.compare(w.size() - g.size(), g.size(), g) == 0);
      continue;
    }
    REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
    for (std::size_t j = 0; j < want->size(); ++j) {
      const std::vector<std::uint8_t> w = (*want)[j].to_bytes();
      const auto& got = bytes[args.size() + j];
      if (w != got) {
        std::size_t at = 0;
        while (at < w.size() && w[at] == got[at]) ++at;
        FAIL("result " << j << " differs first at byte " << at << " of " << w.size());
      }
    }
  }
}

std::string sh(const std::vector<std::int64_t>& d) {
  std::string s = "[";
  for (std::size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

TEST_CASE("llvm decoder: gather rows by i32 ids (f16/bf16/f32 tables, ids of rank 1 and 2), an id out of range is an error") {
  std::uint64_t seed = 10;
  for (ElemKind k : {ElemKind::F16, ElemKind::BF16, ElemKind::F32}) {
    const std::string kn(elem_name(k));
    for (const std::vector<std::int64_t>& ids_shape : {std::vector<std::int64_t>{1}, {5}, {2, 3}}) {
      HostTensor ids{ElemKind::I32, ids_shape, {}};
      for (std::int64_t i = 0, n = ids_shape.size() == 1 ? ids_shape[0] : 6; i < n; ++i)
        ids.data.push_back(static_cast<double>((i * 13 + static_cast<std::int64_t>(seed)) % 37));
      std::vector<std::int64_t> out = ids_shape;
      out.push_back(9);
      const std::string tir = "func @f(%t: " + kn + "[37, 9], %ids: i32" + sh(ids_shape) + ") -> " + kn + sh(out) +
                              " {\n^entry:\n  %y = gather %t, %ids {axis = 0} : " + kn + sh(out) + "\n  ret %y\n}\n";
      run(tir, {rnd(k, {37, 9}, seed++), ids});
      HostTensor bad = ids;
      bad.data.back() = seed % 2 ? 37 : -1;
      run(tir, {rnd(k, {37, 9}, seed++), bad});
    }
  }
}

TEST_CASE("llvm decoder: slice and concat along every axis") {
  std::uint64_t seed = 40;
  for (std::int64_t axis = 0; axis < 3; ++axis) {
    std::vector<std::int64_t> s = {3, 10, 4}, o = s;
    o[static_cast<std::size_t>(axis)] = 2;
    run("func @f(%x: f32" + sh(s) + ") -> f32" + sh(o) + " {\n^entry:\n  %y = slice %x {axis = " + std::to_string(axis) +
            ", start = 1, size = 2} : f32" + sh(o) + "\n  ret %y\n}\n",
        {rnd(ElemKind::F32, s, seed++)});
    std::vector<std::int64_t> a = {2, 3, 4}, b = a, c = a;
    b[static_cast<std::size_t>(axis)] = 5;
    c[static_cast<std::size_t>(axis)] += 5 + 1;
    std::vector<std::int64_t> one = a;
    one[static_cast<std::size_t>(axis)] = 1;
    run("func @f(%a: f16" + sh(a) + ", %b: f16" + sh(b) + ", %c: f16" + sh(one) + ") -> f16" + sh(c) +
            " {\n^entry:\n  %y = concat %a, %b, %c {axis = " + std::to_string(axis) + "} : f16" + sh(c) + "\n  ret %y\n}\n",
        {rnd(ElemKind::F16, a, seed), rnd(ElemKind::F16, b, seed + 1), rnd(ElemKind::F16, one, seed + 2)});
    seed += 3;
  }
}

TEST_CASE("llvm decoder: layernorm over the last axis, odd widths") {
  for (std::int64_t d : {1, 7, 33}) {
    run("func @f(%x: f32[5, " + std::to_string(d) + "], %g: f32[" + std::to_string(d) + "], %b: f32[" +
            std::to_string(d) + "]) -> f32[5, " + std::to_string(d) + "] {\n^entry:\n  %y = layernorm %x, %g, %b {eps = 1e-05} : f32[5, " +
            std::to_string(d) + "]\n  ret %y\n}\n",
        {rnd(ElemKind::F32, {5, d}, 60 + static_cast<std::uint64_t>(d)), rnd(ElemKind::F32, {d}, 61),
         rnd(ElemKind::F32, {d}, 62)});
  }
}

TEST_CASE("llvm decoder: rope norm and neox, M = 1 and 3, pos 0 and 1000; negative pos is an error") {
  std::uint64_t seed = 80;
  for (const char* mode : {"norm", "neox"})
    for (std::int64_t M : {1, 3})
      for (std::int64_t pos : {0, 1000, -1}) {
        const std::string x = "f32[" + std::to_string(M) + ", 4, 10]";
        run("func @f(%x: " + x + ", %pos: i32[]) -> " + x + " {\n^entry:\n  %y = rope %x, %pos {theta = 500000, mode = " + mode +
                "} : " + x + "\n  ret %y\n}\n",
            {rnd(ElemKind::F32, {M, 4, 10}, seed++), scalar_i32(pos)});
      }
}

TEST_CASE("llvm decoder: causal_softmax keeps t <= pos + m, masked NaN does not propagate; negative pos is an error") {
  std::uint64_t seed = 100;
  for (std::int64_t pos : {0, 2, 5, 9, -3}) {
    HostTensor x = rnd(ElemKind::F32, {2, 3, 7}, seed++);
    for (std::int64_t b = 0; b < 2; ++b)
      for (std::int64_t m = 0; m < 3; ++m)
        for (std::int64_t t = 0; t < 7; ++t)
          if (pos >= 0 && t > pos + m) x.data[static_cast<std::size_t>((b * 3 + m) * 7 + t)] = std::nan("");
    run("func @f(%x: f32[2, 3, 7], %pos: i32[]) -> f32[2, 3, 7] {\n^entry:\n  %y = causal_softmax %x, %pos : f32[2, 3, 7]\n"
        "  ret %y\n}\n",
        {x, scalar_i32(pos)});
  }
}

TEST_CASE("llvm decoder: kv_write converts rows into the cache's kind at [layer, pos + m]; rows past C are an error") {
  std::uint64_t seed = 120;
  for (ElemKind kc : {ElemKind::F16, ElemKind::BF16, ElemKind::F32})
    for (std::int64_t pos : {0, 3, 4, -1}) {
      const std::string c = std::string(elem_name(kc)) + "[2, 6, 2, 4]";
      run("func @f(%c: " + c + ", %r: f32[3, 2, 4], %pos: i32[]) -> " + c + " {\n^entry:\n  %y = kv_write %c, %r, %pos {layer = 1} : " +
              c + "\n  ret %y\n}\n",
          {rnd(kc, {2, 6, 2, 4}, seed), rnd(ElemKind::F32, {3, 2, 4}, seed + 1), scalar_i32(pos)});
      seed += 2;
    }
}

TEST_CASE("llvm decoder: attention with GQA reads only rows t <= pos + m (the rest NaN); rows past C are an error") {
  std::uint64_t seed = 140;
  struct A {
    ElemKind kc;
    std::int64_t M, HQ, HKV, pos, C = 9;
  };
  // len = pos + m + 1 rows: below, at and past the 8-row score blocks, with tails.
  for (const A& a : {A{ElemKind::F16, 1, 4, 2, 0}, A{ElemKind::F16, 2, 4, 2, 3}, A{ElemKind::BF16, 3, 6, 3, 5},
                     A{ElemKind::F32, 1, 2, 2, 8}, A{ElemKind::F16, 1, 3, 1, 4}, A{ElemKind::F16, 2, 4, 2, 8},
                     A{ElemKind::F16, 1, 4, 2, -2}, A{ElemKind::F16, 4, 4, 2, 20, 40}, A{ElemKind::BF16, 1, 2, 1, 31, 33}}) {
    const std::int64_t L = 2, C = a.C, D = 6;
    HostTensor kc = rnd(a.kc, {L, C, a.HKV, D}, seed), vc = rnd(a.kc, {L, C, a.HKV, D}, seed + 1);
    // Rows t > pos + M - 1 of every layer hold NaN: reading them would show.
    for (std::int64_t l = 0; l < L; ++l)
      for (std::int64_t t = std::max<std::int64_t>(0, a.pos + a.M); t < C; ++t)
        for (std::int64_t j = 0; j < a.HKV * D; ++j) {
          kc.data[static_cast<std::size_t>((l * C + t) * a.HKV * D + j)] = std::nan("");
          vc.data[static_cast<std::size_t>((l * C + t) * a.HKV * D + j)] = std::nan("");
        }
    const std::string q = "f32" + sh({a.M, a.HQ, D}), c = std::string(elem_name(a.kc)) + sh({L, C, a.HKV, D});
    const int before = g_pooled.load();
    run("func @f(%q: " + q + ", %k: " + c + ", %v: " + c + ", %pos: i32[]) -> " + q +
            " {\n^entry:\n  %y = attention %q, %k, %v, %pos {layer = 1, scale = 0.4} : " + q + "\n  ret %y\n}\n",
        {rnd(ElemKind::F32, {a.M, a.HQ, D}, seed + 2), kc, vc, scalar_i32(a.pos)});
    // With 2 threads the (row, head) pairs are split: the pool ran once (not on errors).
    CHECK(g_pooled.load() - before == (a.pos >= 0 && a.pos + a.M <= a.C ? 1 : 0));
    seed += 3;
  }
}

TEST_CASE("llvm decoder: a block using every decoder op has no reference step after O2, bit for bit") {
  const std::string tir = R"(func @f(%ids: i32[3], %pos: i32[], %table: f16[32, 16], %g: f32[16], %b: f32[16], %kc: f16[2, 8, 2, 4], %vc: f16[2, 8, 2, 4], %w: f16[16, 16]) -> (f32[3, 4, 4], f16[2, 8, 2, 4], f32[3, 16], f16[2, 8, 2, 4], f32[3, 24]) {
^entry:
  %0 = gather %table, %ids {axis = 0} : f16[3, 16]
  %1 = cast %0 {to = f32} : f32[3, 16]
  %2 = layernorm %1, %g, %b {eps = 1e-05} : f32[3, 16]
  %3 = slice %2 {axis = 1, start = 8, size = 8} : f32[3, 8]
  %4 = reshape %3 : f32[3, 2, 4]
  %q0 = matmul %2, %w : f32[3, 16]
  %5 = reshape %q0 : f32[3, 4, 4]
  %6 = rope %5, %pos {theta = 5e+05, mode = norm} : f32[3, 4, 4]
  %7 = rope %4, %pos {theta = 10000, mode = neox} : f32[3, 2, 4]
  %8 = kv_write %kc, %7, %pos {layer = 1} : f16[2, 8, 2, 4]
  %9 = kv_write %vc, %4, %pos {layer = 1} : f16[2, 8, 2, 4]
  %10 = attention %6, %8, %9, %pos {layer = 1, scale = 0.5} : f32[3, 4, 4]
  %11 = causal_softmax %2, %pos : f32[3, 16]
  %13 = concat %2, %3 {axis = 1} : f32[3, 24]
  ret %10, %8, %11, %9, %13
}
)";
  // (The head form matmul(x, transpose(table)) is dense_test.cpp's: it is checked within
  // a bound there, this comparison is bit for bit.)
  HostTensor ids{ElemKind::I32, {3}, {5, 31, 0}};
  HostTensor table = rnd(ElemKind::F16, {32, 16}, 3);
  run(tir, {ids, scalar_i32(2), table, rnd(ElemKind::F32, {16}, 4), rnd(ElemKind::F32, {16}, 5),
            rnd(ElemKind::F16, {2, 8, 2, 4}, 6), rnd(ElemKind::F16, {2, 8, 2, 4}, 7), rnd(ElemKind::F16, {16, 16}, 8)},
      true);
}

}  // namespace
}  // namespace ternjit
