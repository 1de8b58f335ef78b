// SPDX-License-Identifier: Apache-2.0
// simt_emu_test.cpp - the generated CUDA and HIP source executed on the CPU (tests/simt/simt_emu.h) against the interpreter.
//
// Each case writes a small fully static function in IR text, generates its SIMT program
// (targets/simt/generate.h) for CUDA (warp 32) and HIP (warp 64 and 32), with and
// without the integer dot instruction and under several tmatmul configurations, compiles
// the exact source with the host compiler against the emulation header, runs the launch
// plan (poisoned outputs and scratch, guard pages after every buffer) and compares with
// ir::interpret. Without a host compiler the cases report SKIPPED.
//
// Tolerances (u = 2^-24, the f32 unit roundoff):
//   - integer paths (i8 tmatmul with no or relu activation, quantize, quantize_int8, the
//     epilogue's f32 mul/add, which the kernels round one operation at a time): bit for bit;
//   - f32 tmatmul: the reference sums in double and rounds once; any f32 summation order
//     of K terms (each thread's share, then the shuffle tree) errs by at most
//     (K - 1) u sum|x w| (Higham 3.1), plus the result's rounding: K u sum|x w| + u |want|;
//   - grouped-scale tmatmul: (G + 2) u sum_g |s p_g| (f32 x: plus group u sum_g |s_g|
//     sum_k |x w|) before the epilogue, and 8 u of the epilogue's terms (derived at the case);
//   - rmsnorm, softmax, sum/mean: (len + 64) 2u |want| plus 1e-30 absolute (block sums in
//     another order; exp, sqrt and division correctly rounded on the host);
//   - transcendental activations and functions: erf by Abramowitz-Stegun 7.1.26 (|error| <
//     1.5e-7) and exp-based forms in f32: 4e-6 (1 + |want|).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "ir/interpret.h"
#include "ir/parse.h"
#include "targets/simt/generate.h"
#include "targets/simt/tuning_space.h"
#include "targets/load_value.h"
#include "tests/simt/simt_runtime.h"
#include "tests/unit/gpu/gpu_programs.h"

namespace ternjit {
namespace {

using ir::HostTensor;
namespace simt = targets::simt;

constexpr double kU = 0x1p-24;

struct Tol {
  bool exact = true;
  double rel = 0, abs = 0;
  std::vector<std::vector<double>> per;  // per result: element-wise absolute bounds added
};

std::string sh(std::initializer_list<std::int64_t> d) {
  std::string s = "[";
  for (auto it = d.begin(); it != d.end(); ++it) s += (it == d.begin() ? "" : ", ") + std::to_string(*it);
  return s + "]";
}
HostTensor rnd(ElemKind k, std::vector<std::int64_t> shape, std::uint64_t seed) {
  return HostTensor::random(k, std::move(shape), seed);
}

// The emulator's compiler, or why there is none.
const std::string& compiler() {
  static const std::string c = simt_emu::find_compiler();
  return c;
}
#define REQUIRE_COMPILER()                                                                  \
  do {                                                                                      \
    if (compiler().empty()) {                                                               \
      std::printf("SKIP: no host C++ compiler (g++, clang++-19) to run the SIMT emulator\n"); \
      return;                                                                               \
    }                                                                                       \
  } while (0)

// Modules by source text: a source compiled once per process.
std::shared_ptr<simt_emu::Module> module_for(const simt::KernelSet& p) {
  static std::map<std::string, std::shared_ptr<simt_emu::Module>> cache;
  auto it = cache.find(p.source);
  if (it != cache.end()) return it->second;
  std::vector<std::string> names;
  for (const simt::KernelLaunch& k : p.kernels) names.push_back(k.name);
  auto m = simt_emu::Module::build(p.source, names, compiler());
  REQUIRE_MESSAGE(m.ok(), (m.ok() ? "" : m.error().message));
  cache.emplace(p.source, *m);
  return *m;
}

// One way to generate: dialect, warp, dot, and the tmatmul decisions (by index).
struct Variant {
  simt::Dialect dialect = simt::Dialect::Cuda;
  std::uint32_t warp = 32;
  bool int_dot = true;
  int configs = 0;  // 0: defaults; k > 0: tmatmul i takes candidate (i * 7 + k * 13) % count
  bool tensor_cores = false;           // CUDA: the mma.sync form exists (SimtOptions::tensor_cores)
  std::vector<std::string> decisions;  // non-empty: every tmatmul takes decisions[i % size]
  bool want_mma = false;               // every tmatmul must have taken the mma form
};
std::string describe(const Variant& v) {
  return std::string(simt::dialect_name(v.dialect)) + "/w" + std::to_string(v.warp) + (v.int_dot ? "/dot" : "/scalar") +
         "/configs" + std::to_string(v.configs) + (v.tensor_cores ? "/tc" : "") +
         (v.decisions.empty() ? "" : "/" + v.decisions[0]);
}
const std::vector<Variant>& all_variants() {
  static const std::vector<Variant> v = {
      {simt::Dialect::Cuda, 32, true, 0}, {simt::Dialect::Hip, 64, true, 0}, {simt::Dialect::Hip, 32, false, 0},
  };
  return v;
}

// Generates, runs and compares `fn` of `tir` under every variant.
void check(const std::string& tir, const std::string& fn, const std::vector<HostTensor>& args,
           const ir::ParamValues& params, const Tol& tol, const std::vector<Variant>& variants = all_variants()) {
  CAPTURE(tir);
  auto m = ir::parse_module(tir, "test.tir");
  REQUIRE_MESSAGE(m.ok(), (m.ok() ? "" : m.error().message));
  auto want = ir::interpret(*m, fn, args, params);
  REQUIRE_MESSAGE(want.ok(), (want.ok() ? "" : want.error().message));
  const ir::Function& f = *m->find_function(fn);
  REQUIRE(simt::supported(f).ok());
  std::vector<std::vector<std::uint8_t>> in;
  for (const HostTensor& a : args) in.push_back(a.to_bytes());
  for (const Variant& v : variants) {
    CAPTURE(describe(v));
    simt::SimtOptions o;
    o.dialect = v.dialect;
    o.warp_size = v.warp;
    o.int_dot = v.int_dot;
    o.tensor_cores = v.tensor_cores;
    if (!v.decisions.empty())
      for (std::size_t i = 0; i < simt::tmatmul_shapes(f).size(); ++i) o.decisions.push_back(v.decisions[i % v.decisions.size()]);
    if (v.configs > 0) {
      const auto shapes = simt::tmatmul_shapes(f);
      for (std::size_t i = 0; i < shapes.size(); ++i) {
        const auto cands = simt::candidate_configs(shapes[i], v.warp, v.tensor_cores);
        o.decisions.push_back(simt::config_text(cands[(i * 7 + static_cast<std::size_t>(v.configs) * 13) % cands.size()]));
      }
    }
    auto p = simt::generate(*m, fn, o);
    REQUIRE_MESSAGE(p.ok(), (p.ok() ? "" : p.error().message));
    std::string configs;
    for (const auto& c : p->configs) configs += simt::config_text(c) + " ";
    CAPTURE(configs);
    if (v.want_mma) {
      for (const auto& c : p->configs) REQUIRE(c.mma == 1);
      REQUIRE(p->source.find("tj_mma_m16n8k32(acc") != std::string::npos);
      for (const auto& w : p->weights) REQUIRE(w.layout == simt::WeightLayout::Mma2);
    }
    auto lv = targets::evaluate_load_time(f, p->plan, params, false);
    REQUIRE_MESSAGE(lv.ok(), (lv.ok() ? "" : lv.error().message));
    auto mod = module_for(*p);
    for (int rep = 0; rep < 2; ++rep) {  // twice: nothing of the first run may leak into the second
      std::vector<std::vector<std::uint8_t>> out;
      auto r = simt_emu::run_program(*mod, *p, *lv, in, out);
      REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
      REQUIRE(out.size() == want->size());
      for (std::size_t j = 0; j < out.size(); ++j) {
        const HostTensor& w = (*want)[j];
        if (tol.exact || w.kind != ElemKind::F32) {
          gpu_testing::require_same_bytes(w, out[j], j);
          continue;
        }
        gpu_testing::check_f32_result(w, out[j], j, tol.abs, tol.rel,
                                      j < tol.per.size() ? tol.per[j] : std::vector<double>{});
      }
    }
  }
}

bool exact_act(const std::string& act) { return act == "none" || act == "relu"; }

// ------------------------------------------------------------------ tmatmul

// One tmatmul of a multi-tmatmul function.
bool has_xs(int e) { return e == 2; }
bool has_ws(int e) { return e == 1 || e == 2 || e == 4; }
bool has_b(int e) { return e == 2 || e == 3; }
bool has_r(int e) { return e == 2 || e == 4; }
struct MM {
  std::int64_t M, K, N;
  int epi;  // 0 none, 1 w_scale [N], 2 x_scale + w_scale [N] + bias + residual, 3 bias, 4 w_scale [] + residual
  const char* act;
  bool share_x = false;  // reads the previous tmatmul's activations (same M, K)
};

// A function with one tmatmul per entry of `mms` (activations `x`: i8 or f32), each
// returning its result; arguments: per tmatmul its x (unless shared), then x_scale,
// bias, residual as its epilogue needs; weights and w_scales are parameters.
std::string multi_tir(const std::vector<MM>& mms, const std::string& x) {
  std::string params, args, body, rets, rtypes;
  for (std::size_t i = 0; i < mms.size(); ++i) {
    const MM& s = mms[i];
    const std::string I = std::to_string(i), ys = sh({s.M, s.N});
    const std::string wst = s.epi == 4 ? "f32[]" : "f32" + sh({s.N});
    params += "param @w" + I + " : t2" + sh({s.K, s.N}) + "\nparam @ws" + I + " : " + wst + "\n";
    const std::string xn = s.share_x ? "%x" + std::to_string(i - 1) : "%x" + I;
    auto arg = [&](const std::string& a) { args += (args.empty() ? "" : ", ") + a; };
    if (!s.share_x) arg("%x" + I + ": " + x + sh({s.M, s.K}));
    if (has_xs(s.epi)) arg("%xs" + I + ": f32" + sh({s.M, 1}));
    if (has_b(s.epi)) arg("%b" + I + ": f32" + sh({s.N}));
    if (has_r(s.epi)) arg("%r" + I + ": f32" + ys);
    body += "  %w" + I + " = param @w" + I + " : t2" + sh({s.K, s.N}) + "\n  %ws" + I + " = param @ws" + I + " : " + wst +
            "\n";
    std::string ops = xn + ", %w" + I;
    if (has_xs(s.epi)) ops += ", %xs" + I;
    if (has_ws(s.epi)) ops += ", %ws" + I;
    if (has_b(s.epi)) ops += ", %b" + I;
    if (has_r(s.epi)) ops += ", %r" + I;
    const bool xs = has_xs(s.epi), ws = has_ws(s.epi), b = has_b(s.epi), r = has_r(s.epi);
    auto tf = [](bool v) { return v ? "true" : "false"; };
    body += "  %y" + I + " = tmatmul " + ops + " {x_scale = " + tf(xs) + ", w_scale = " + tf(ws) + ", bias = " + tf(b) +
            ", residual = " + tf(r) + ", act = " + s.act + "} : f32" + ys + "\n";
    rets += (rets.empty() ? "" : ", ") + std::string("%y") + I;
    rtypes += (rtypes.empty() ? "" : ", ") + std::string("f32") + ys;
  }
  return params + "func @f(" + args + ") -> (" + rtypes + ") {\n^entry:\n" + body + "  ret " + rets + "\n}\n";
}

// Runs the function of `mms` under `variants`, with random values; f32 x gets the
// accumulation bound of the file comment per element.
void check_multi(const std::vector<MM>& mms, bool i8, const std::vector<Variant>& variants, std::uint64_t seed) {
  const std::string tir = multi_tir(mms, i8 ? "i8" : "f32");
  ir::ParamValues pv;
  std::vector<HostTensor> args;
  Tol tol;
  bool all_exact = true;
  for (const MM& s : mms) all_exact = all_exact && exact_act(s.act);
  tol.exact = i8 && all_exact;
  tol.rel = tol.abs = all_exact ? 0.0 : 4e-6;
  const HostTensor* last_x = nullptr;
  std::vector<HostTensor> xs_keep;
  xs_keep.reserve(mms.size());
  for (std::size_t i = 0; i < mms.size(); ++i) {
    const MM& s = mms[i];
    const std::string I = std::to_string(i);
    const HostTensor w = rnd(ElemKind::T2, {s.K, s.N}, seed++);
    const HostTensor ws = s.epi == 4 ? rnd(ElemKind::F32, {}, seed++) : rnd(ElemKind::F32, {s.N}, seed++);
    pv.set("w" + I, w);
    pv.set("ws" + I, ws);
    if (!s.share_x) {
      xs_keep.push_back(rnd(i8 ? ElemKind::I8 : ElemKind::F32, {s.M, s.K}, seed++));
      args.push_back(xs_keep.back());
      last_x = &xs_keep.back();
    }
    HostTensor xsv = rnd(ElemKind::F32, {s.M, 1}, seed++), b = rnd(ElemKind::F32, {s.N}, seed++),
               r = rnd(ElemKind::F32, {s.M, s.N}, seed++);
    if (has_xs(s.epi)) args.push_back(xsv);
    if (has_b(s.epi)) args.push_back(b);
    if (has_r(s.epi)) args.push_back(r);
    // f32 x: K u sum|x w| (times the epilogue's scales) + the epilogue's roundings.
    std::vector<double> per;
    if (!i8) {
      for (std::int64_t m = 0; m < s.M; ++m)
        for (std::int64_t n = 0; n < s.N; ++n) {
          double a = 0, acc = 0;
          for (std::int64_t k = 0; k < s.K; ++k) {
            const double t = last_x->data[static_cast<std::size_t>(m * s.K + k)] *
                             w.data[static_cast<std::size_t>(k * s.N + n)];
            a += std::fabs(t);
            acc += t;
          }
          double scale = 1;
          if (has_ws(s.epi)) scale *= std::fabs(ws.data[s.epi == 4 ? 0 : static_cast<std::size_t>(n)]);
          if (has_xs(s.epi)) scale *= std::fabs(xsv.data[static_cast<std::size_t>(m)]);
          double terms = std::fabs(acc) * scale;
          if (has_b(s.epi)) terms += std::fabs(b.data[static_cast<std::size_t>(n)]);
          if (has_r(s.epi)) terms += std::fabs(r.data[static_cast<std::size_t>(m * s.N + n)]);
          per.push_back((static_cast<double>(s.K) * kU * a * scale + 8 * kU * terms) * 1.2 + 1e-37);
        }
    }
    tol.per.push_back(std::move(per));
  }
  check(tir, "f", args, pv, tol, variants);
}

// Shapes: M = 1, 2, 3, 9 (two row passes at 8 rows), 17; K with a tail chunk (37, 200,
// 272, 1000, 4100, 17000), K % 4 != 0 (37, 45), K % 16 != 0 (200), whole chunks (64, 256); N odd.
const std::vector<MM> kShapes = {
    {1, 37, 21, 0, "none"},  {1, 64, 5, 1, "relu"},  {3, 200, 17, 2, "none"}, {3, 200, 9, 1, "none", true},
    {9, 272, 33, 2, "relu"}, {1, 1000, 7, 3, "none"}, {17, 45, 3, 2, "none"}, {2, 256, 70, 1, "none"},
    {1, 17000, 3, 1, "none"}, {2, 4100, 5, 2, "none"}, {5, 130, 6, 4, "relu"},  // enough chunks for every lane of 256 threads per column
};

TEST_CASE("simt emulator: i8 tmatmul (dp4a on codes, row-sum correction), every epilogue, both dialects, dot and scalar: bit for bit") {
  REQUIRE_COMPILER();
  std::vector<Variant> v = all_variants();
  v.push_back({simt::Dialect::Cuda, 32, false, 0});
  check_multi(kShapes, true, v, 100);
}

// ------------------------------------------------------------------ the tensor-core form

// The emulator's mma.m16n8k32 (simt_emu.h) against a plain matrix product: two warps of
// lanes holding random fragment registers (A, B, C), each warp D = C + A B, with the
// fragment layouts of the PTX ISA ("Matrix Fragments for mma.m16n8k32", .s8: A in
// Figure 88, B and C/D in the tables after it) written out here independently.
TEST_CASE("simt emulator: mma.m16n8k32 s8 of random fragments equals C + A B (PTX ISA fragment layouts)") {
  REQUIRE_COMPILER();
  const std::string src =
      "extern \"C\" __global__ void __launch_bounds__(64) t_mma(const unsigned* f, int* d) {\n"
      "  const unsigned* r = f + threadIdx.x * 10u;\n"
      "  int acc[4] = {(int)r[6], (int)r[7], (int)r[8], (int)r[9]};\n"
      "  tj_mma_m16n8k32(acc, r[0], r[1], r[2], r[3], r[4], r[5]);\n"
      "  for (unsigned i = 0u; i < 4u; ++i) d[threadIdx.x * 4u + i] = acc[i];\n}\n";
  auto mod = simt_emu::Module::build(src, {"t_mma"}, compiler());
  REQUIRE_MESSAGE(mod.ok(), (mod.ok() ? "" : mod.error().message));
  std::uint64_t state = 0x9e3779b97f4a7c15ULL;
  auto next = [&] {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return static_cast<std::uint32_t>(state);
  };
  for (int rep = 0; rep < 3; ++rep) {
    std::vector<std::uint32_t> frag(64 * 10);
    for (std::uint32_t& v : frag) v = next();
    // Extreme bytes too: -128 and 127 everywhere in the last repetition.
    if (rep == 2)
      for (std::size_t i = 0; i < frag.size(); ++i)
        if (i % 10 < 6) frag[i] = (i % 3 == 0) ? 0x80808080u : 0x7f807f80u;
    std::vector<std::int32_t> d(64 * 4, 0x5A5A5A5A);
    const std::uint32_t* fp = frag.data();
    std::int32_t* dp = d.data();
    void* params[] = {&fp, &dp};
    auto r = (*mod)->launch("t_mma", {1, 1, 1}, {64, 1, 1}, 32, params);
    REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
    for (unsigned w = 0; w < 2; ++w) {
      std::int64_t A[16][32] = {}, B[32][8] = {}, C[16][8] = {};
      for (unsigned lane = 0; lane < 32; ++lane) {
        const std::uint32_t* f = &frag[(w * 32 + lane) * 10];
        const unsigned g = lane / 4, t = lane % 4;
        auto byte = [](std::uint32_t reg, unsigned b) { return static_cast<std::int64_t>(static_cast<std::int8_t>(reg >> (8 * b))); };
        // A: register j, byte b: a_{4j+b}; rows g (j = 0, 2) / g + 8 (j = 1, 3); k 4t + b (+16 for j >= 2).
        for (unsigned j = 0; j < 4; ++j)
          for (unsigned b = 0; b < 4; ++b) A[g + 8 * (j % 2)][4 * t + b + 16 * (j / 2)] = byte(f[j], b);
        // B: register e, byte b: k 4t + b (+16 for e = 1), column g.
        for (unsigned e = 0; e < 2; ++e)
          for (unsigned b = 0; b < 4; ++b) B[4 * t + b + 16 * e][g] = byte(f[4 + e], b);
        // C: c_i at row g (+8 for i >= 2), column 2t + i % 2.
        for (unsigned i = 0; i < 4; ++i) C[g + 8 * (i / 2)][2 * t + i % 2] = static_cast<std::int32_t>(f[6 + i]);
      }
      for (unsigned lane = 0; lane < 32; ++lane)
        for (unsigned i = 0; i < 4; ++i) {
          const unsigned row = lane / 4 + 8 * (i / 2), col = 2 * (lane % 4) + i % 2;
          std::int64_t want = C[row][col];
          for (unsigned k = 0; k < 32; ++k) want += A[row][k] * B[k][col];
          const auto want32 = static_cast<std::int32_t>(static_cast<std::uint32_t>(want));  // wraps like the hardware
          CHECK_MESSAGE(d[(w * 32 + lane) * 4 + i] == want32, "warp " << w << " lane " << lane << " d" << i);
        }
    }
  }
}

// M = 16, 17, 33, 128 (one row tile, a tail row, tails of both row-tile passes); K
// with tails inside a k-tile (40, 300, 257, 33, 1000) and a whole block (256); N not a
// multiple of 8 (5, 13, 17, 9) and several column tiles (24, 40); every epilogue; a
// shared activation read by two tmatmuls.
const std::vector<MM> kMmaShapes = {
    {16, 40, 5, 0, "none"},  {17, 300, 13, 1, "relu"}, {33, 257, 24, 2, "none"}, {33, 257, 9, 3, "relu", true},
    {128, 64, 9, 4, "none"}, {16, 256, 17, 2, "relu"}, {20, 33, 8, 1, "none"},   {128, 1000, 40, 2, "none"},
};

TEST_CASE("simt emulator: i8 tmatmul in the tensor-core form (mma.sync m16n8k32, tmma2 weights), every epilogue: bit for bit") {
  REQUIRE_COMPILER();
  std::vector<Variant> v;
  // The default (CUDA with tensor cores picks mma for M >= 16), then explicit blockings:
  // 1..8 warps per block, 1 or 2 row tiles, 1, 2 or 4 column tiles per warp.
  v.push_back({simt::Dialect::Cuda, 32, true, 0, true, {}, true});
  for (const char* d : {"tpc=32;cols=2;unroll=1;rows=2;cpt=4;mma=1", "tpc=32;cols=8;unroll=1;rows=1;cpt=1;mma=1",
                        "tpc=32;cols=1;unroll=1;rows=2;cpt=2;mma=1", "tpc=32;cols=3;unroll=1;rows=1;cpt=4;mma=1"})
    v.push_back({simt::Dialect::Cuda, 32, true, 0, true, {d}, true});
  check_multi(kMmaShapes, true, v, 300);
  // A transcendental activation through the same form (the f32 tolerance of the file comment).
  check_multi({{17, 70, 11, 2, "gelu"}}, true, {{simt::Dialect::Cuda, 32, true, 0, true, {}, true}}, 400);
}

TEST_CASE("simt emulator: BitLinear chain at M = 32 with tensor cores: quantize (no row sums) feeding two mma tmatmuls") {
  REQUIRE_COMPILER();
  const std::string tir =
      "param @w : t2[300, 21]\nparam @u : t2[300, 21]\n"
      "func @f(%x: f32[32, 300]) -> (f32[32, 21], f32[32, 21]) {\n^entry:\n"
      "  %q, %s = quantize %x : i8[32, 300], f32[32, 1]\n"
      "  %w = param @w : t2[300, 21]\n  %u = param @u : t2[300, 21]\n"
      "  %y = tmatmul %q, %w, %s {x_scale = true, w_scale = false, bias = false, residual = false, act = relu} : f32[32, 21]\n"
      "  %z = tmatmul %q, %w, %s {x_scale = true, w_scale = false, bias = false, residual = false, act = none} : f32[32, 21]\n"
      "  ret %y, %z\n}\n";
  ir::ParamValues pv;
  pv.set("w", rnd(ElemKind::T2, {300, 21}, 5));
  pv.set("u", rnd(ElemKind::T2, {300, 21}, 6));
  auto m = ir::parse_module(tir, "t.tir");
  REQUIRE(m.ok());
  simt::SimtOptions o;
  o.tensor_cores = true;
  auto p = simt::generate(*m, "f", o);
  REQUIRE(p.ok());
  // One weight (shared by both tmatmuls) in the tmma2 layout; no row sums anywhere.
  REQUIRE(p->weights.size() == 1);
  CHECK(p->weights[0].layout == simt::WeightLayout::Mma2);
  for (const auto& k : p->kernels) {
    CHECK(k.op != "rowsum");
    if (k.op == "quantize") CHECK(k.args.size() == 3);  // x, q, s: no row sums written
  }
  // Mixed: the first tmatmul dp4a, the second mma: two layouts of the same weight, the
  // quantize kernel writes the row sums for the dp4a one.
  o.decisions = {"tpc=32;cols=4;unroll=1;rows=8;cpt=2", ""};
  auto mixed = simt::generate(*m, "f", o);
  REQUIRE(mixed.ok());
  REQUIRE(mixed->weights.size() == 2);
  CHECK(mixed->weights[0].layout == simt::WeightLayout::Codes64);
  CHECK(mixed->weights[1].layout == simt::WeightLayout::Mma2);
  for (const auto& k : mixed->kernels)
    if (k.op == "quantize") CHECK(k.args.size() == 4);  // x, q, s, rs for the dp4a tmatmul
  check(tir, "f", {rnd(ElemKind::F32, {32, 300}, 7)}, pv, Tol{},
        {{simt::Dialect::Cuda, 32, true, 0, true, {}, true},
         {simt::Dialect::Cuda, 32, true, 0, true, {"tpc=32;cols=4;unroll=1;rows=8;cpt=2", ""}, false}});
}

TEST_CASE("simt: the mma form is refused where it does not exist: grouped scale, f32 x, HIP, warp 64, no tensor cores") {
  const simt::TMatMulConfig mma{32, 4, 1, 1, 2, 1};
  const targets::TMatMulShape i8{32, 256, 64, ElemKind::I8, 0}, grouped{32, 256, 64, ElemKind::I8, 128},
      f32x{32, 256, 64, ElemKind::F32, 0};
  CHECK(simt::config_valid(mma, i8, 32, true));
  CHECK_FALSE(simt::config_valid(mma, i8, 32, false));
  CHECK_FALSE(simt::config_valid(mma, i8, 64, true));
  CHECK_FALSE(simt::config_valid(mma, grouped, 32, true));
  CHECK_FALSE(simt::config_valid(mma, f32x, 32, true));
  CHECK_FALSE(simt::config_valid({64, 4, 1, 1, 2, 1}, i8, 32, true));  // tpc must be the warp
  CHECK_FALSE(simt::config_valid({32, 4, 2, 1, 2, 1}, i8, 32, true));  // unroll 1
  CHECK_FALSE(simt::config_valid({32, 4, 1, 4, 2, 1}, i8, 32, true));  // rows 1 or 2
  CHECK_FALSE(simt::config_valid({32, 9, 1, 1, 2, 1}, i8, 32, true));  // cols <= 8
  CHECK_FALSE(simt::config_valid({32, 4, 1, 1, 2, 2}, i8, 32, true));  // mma 0 or 1
  CHECK(simt::default_config(i8, 32, true).mma == 1);
  CHECK(simt::default_config({15, 256, 64, ElemKind::I8, 0}, 32, true).mma == 0);
  CHECK(simt::default_config(grouped, 32, true).mma == 0);
  CHECK(simt::default_config(f32x, 32, true).mma == 0);
  CHECK(simt::default_config(i8, 32, false).mma == 0);
  CHECK(simt::default_config(i8, 64, true).mma == 0);
  // Text: ";mma=1" only for the mma form; one spelling.
  CHECK(simt::config_text(mma) == "tpc=32;cols=4;unroll=1;rows=1;cpt=2;mma=1");
  CHECK(simt::parse_config("tpc=32;cols=4;unroll=1;rows=1;cpt=2;mma=1") == mma);
  CHECK_FALSE(simt::parse_config("tpc=32;cols=4;unroll=1;rows=1;cpt=2;mma=0").has_value());
  CHECK_FALSE(simt::parse_config("tpc=32;cols=4;unroll=1;rows=1;cpt=2;mma=1x").has_value());
  CHECK_FALSE(simt::parse_config("tpc=32;cols=4;unroll=1;rows=1;cpt=2;mm=1").has_value());
  // The space offers mma candidates only with tensor cores and M >= 16.
  auto has_mma = [](const std::vector<simt::TMatMulConfig>& cs) {
    return std::any_of(cs.begin(), cs.end(), [](const simt::TMatMulConfig& c) { return c.mma == 1; });
  };
  CHECK(has_mma(simt::candidate_configs(i8, 32, true)));
  CHECK_FALSE(has_mma(simt::candidate_configs(i8, 32, false)));
  CHECK_FALSE(has_mma(simt::candidate_configs(grouped, 32, true)));
  CHECK_FALSE(has_mma(simt::candidate_configs({8, 256, 64, ElemKind::I8, 0}, 32, true)));
  for (const auto& c : simt::candidate_configs(i8, 32, true)) CHECK(simt::config_valid(c, i8, 32, true));
  // generate(): an mma decision where it does not exist is InvalidArgument; HIP ignores tensor_cores.
  const std::string g =
      "param @w : t2[45, 19]\nparam @gs : f32[3, 19]\n"
      "func @f(%x: i8[32, 45]) -> f32[32, 19] {\n^entry:\n  %w = param @w : t2[45, 19]\n"
      "  %gs = param @gs : f32[3, 19]\n"
      "  %y = tmatmul %x, %w, %gs {x_scale = false, w_scale = true, group = 20, bias = false, residual = false, "
      "act = none} : f32[32, 19]\n  ret %y\n}\n";
  auto gm = ir::parse_module(g, "g.tir");
  REQUIRE(gm.ok());
  simt::SimtOptions o;
  o.tensor_cores = true;
  o.decisions = {simt::config_text(mma)};
  auto bad = simt::generate(*gm, "f", o);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().code == ErrorCode::InvalidArgument);
  o.decisions.clear();
  auto dflt = simt::generate(*gm, "f", o);
  REQUIRE(dflt.ok());
  CHECK(dflt->configs[0].mma == 0);  // grouped: dp4a
  const std::string plain =
      "param @w : t2[64, 16]\nfunc @f(%x: i8[32, 64]) -> f32[32, 16] {\n^entry:\n  %w = param @w : t2[64, 16]\n"
      "  %y = tmatmul %x, %w {x_scale = false, w_scale = false, bias = false, residual = false, act = none} : f32[32, 16]\n"
      "  ret %y\n}\n";
  auto pm = ir::parse_module(plain, "p.tir");
  REQUIRE(pm.ok());
  o.dialect = simt::Dialect::Hip;
  o.warp_size = 32;
  auto hip = simt::generate(*pm, "f", o);
  REQUIRE(hip.ok());
  CHECK(hip->configs[0].mma == 0);
  CHECK(hip->source.find("mma") == std::string::npos);
  o.decisions = {simt::config_text(mma)};
  CHECK_FALSE(simt::generate(*pm, "f", o).ok());
}

TEST_CASE("simt: the tmma2 weight layout, bit by bit (B-fragment order), padding code 1, bad weights") {
  for (auto [K, N] : {std::pair<std::int64_t, std::int64_t>{300, 13}, {256, 8}, {33, 1}, {600, 17}}) {
    CAPTURE(K);
    CAPTURE(N);
    const HostTensor wt = rnd(ElemKind::T2, {K, N}, static_cast<std::uint64_t>(K * 31 + N));
    std::vector<std::int8_t> w(static_cast<std::size_t>(K * N));
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<std::int8_t>(wt.data[i]);
    auto p = simt::pack_ternary_weight(w.data(), K, N, simt::WeightLayout::Mma2);
    REQUIRE(p.ok());
    const std::int64_t KB = (K + 255) / 256, NT = (N + 7) / 8;
    REQUIRE(p->size() == static_cast<std::size_t>(NT * KB * 512));
    CHECK(p->size() == simt::packed_weight_bytes(K, N, simt::WeightLayout::Mma2));
    // Every 2-bit field, read the way the kernel reads it: block (nt, kb), lane L, word q,
    // field (h, e) of byte b is B-fragment register e, byte b, of k-tile 2q + h.
    int bad = 0;
    for (std::int64_t nt = 0; nt < NT; ++nt)
      for (std::int64_t kb = 0; kb < KB; ++kb)
        for (std::int64_t L = 0; L < 32; ++L)
          for (std::int64_t q = 0; q < 4; ++q)
            for (std::int64_t b = 0; b < 4; ++b)
              for (std::int64_t h = 0; h < 2; ++h)
                for (std::int64_t e = 0; e < 2; ++e) {
                  const std::uint8_t byte = (*p)[static_cast<std::size_t>(((nt * KB + kb) * 32 + L) * 16 + q * 4 + b)];
                  const int code = (byte >> (2 * (2 * h + e))) & 3;
                  const std::int64_t k = kb * 256 + (2 * q + h) * 32 + (L % 4) * 4 + b + 16 * e, n = nt * 8 + L / 4;
                  const int want = (k < K && n < N) ? w[static_cast<std::size_t>(k * N + n)] + 1 : 1;
                  if (code != want && bad++ < 5) FAIL_CHECK("k " << k << " n " << n << ": code " << code << ", want " << want);
                }
    CHECK(bad == 0);
  }
  std::vector<std::int8_t> w(12, 0);
  w[7] = 2;
  auto bad = simt::pack_ternary_weight(w.data(), 3, 4, simt::WeightLayout::Mma2);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().code == ErrorCode::InvalidInput);
  CHECK_FALSE(simt::pack_ternary_weight(w.data(), 0, 3, simt::WeightLayout::Mma2).ok());
  CHECK_FALSE(simt::pack_ternary_weight(w.data(), std::int64_t{1} << 40, std::int64_t{1} << 30, simt::WeightLayout::Mma2).ok());
  CHECK(simt::layout_name(simt::WeightLayout::Mma2) == "tmma2");
  CHECK(simt::layout_name() == "tcodes64");
}

TEST_CASE("simt emulator: i8 tmatmul under rotating tuning configurations (tpc below, at and above the warp, unroll 1/2/4, rows 1..8)") {
  REQUIRE_COMPILER();
  // Every candidate's knobs appear over these rotations (checked below), each compiled once.
  std::vector<Variant> v;
  for (int k = 1; k <= 4; ++k) {
    v.push_back({simt::Dialect::Cuda, 32, true, k});
    v.push_back({simt::Dialect::Hip, 64, true, k});
  }
  check_multi(kShapes, true, v, 200);
  // The rotations cover every tpc, unroll and rows value of the candidates.
  std::map<std::string, int> seen;
  auto m = ir::parse_module(multi_tir(kShapes, "i8"), "t.tir");
  REQUIRE(m.ok());
  const auto shapes = simt::tmatmul_shapes(*m->find_function("f"));
  for (const Variant& var : v)
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      const auto cands = simt::candidate_configs(shapes[i], var.warp);
      const auto c = cands[(i * 7 + static_cast<std::size_t>(var.configs) * 13) % cands.size()];
      seen["tpc" + std::to_string(c.tpc)]++;
      seen["unroll" + std::to_string(c.unroll)]++;
      seen["rows" + std::to_string(c.rows)]++;
      seen["cpt" + std::to_string(c.cpt)]++;
    }
  for (const char* key : {"unroll1", "unroll2", "unroll4", "rows1", "rows2", "rows4", "rows8", "tpc32", "tpc64", "cpt1",
                          "cpt2", "cpt4"})
    CHECK_MESSAGE(seen.count(key) > 0, key);
  bool above = false, below = false;
  for (const auto& [k, n] : seen) {
    if (k.rfind("tpc", 0) == 0 && std::stoi(k.substr(3)) > 64) above = true;
    if (k.rfind("tpc", 0) == 0 && std::stoi(k.substr(3)) < 32) below = true;
  }
  CHECK(above);
  CHECK(below);
}

TEST_CASE("simt emulator: explicit configurations: one thread per column, 1024-thread blocks, 8 rows with M = 17") {
  REQUIRE_COMPILER();
  const std::vector<MM> shapes = {{17, 300, 13, 2, "none"}, {1, 2100, 3, 1, "none"}, {5, 70, 40, 0, "relu"}};
  const std::string tir = multi_tir(shapes, "i8");
  auto m = ir::parse_module(tir, "t.tir");
  REQUIRE(m.ok());
  struct D {
    simt::Dialect d;
    std::uint32_t warp;
    std::vector<std::string> decisions;
  };
  const D ds[] = {
      {simt::Dialect::Cuda, 32, {"tpc=1;cols=32;unroll=1;rows=8;cpt=4", "tpc=1024;cols=1;unroll=4;rows=1;cpt=1", "tpc=2;cols=64;unroll=2;rows=3;cpt=2"}},
      {simt::Dialect::Hip, 64, {"tpc=512;cols=2;unroll=2;rows=5;cpt=2", "tpc=64;cols=1;unroll=1;rows=1;cpt=4", "tpc=16;cols=4;unroll=4;rows=8;cpt=1"}},
  };
  ir::ParamValues pv;
  std::vector<HostTensor> args;
  std::uint64_t seed = 300;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const MM& s = shapes[i];
    pv.set("w" + std::to_string(i), rnd(ElemKind::T2, {s.K, s.N}, seed++));
    pv.set("ws" + std::to_string(i), rnd(ElemKind::F32, {s.N}, seed++));
    args.push_back(rnd(ElemKind::I8, {s.M, s.K}, seed++));
    if (has_xs(s.epi)) args.push_back(rnd(ElemKind::F32, {s.M, 1}, seed++));
    if (has_b(s.epi)) args.push_back(rnd(ElemKind::F32, {s.N}, seed++));
    if (has_r(s.epi)) args.push_back(rnd(ElemKind::F32, {s.M, s.N}, seed++));
  }
  auto want = ir::interpret(*m, "f", args, pv);
  REQUIRE(want.ok());
  std::vector<std::vector<std::uint8_t>> in;
  for (const HostTensor& a : args) in.push_back(a.to_bytes());
  for (const D& d : ds) {
    simt::SimtOptions o;
    o.dialect = d.d;
    o.warp_size = d.warp;
    o.decisions = d.decisions;
    auto p = simt::generate(*m, "f", o);
    REQUIRE_MESSAGE(p.ok(), (p.ok() ? "" : p.error().message));
    for (std::size_t i = 0; i < d.decisions.size(); ++i) CHECK(simt::config_text(p->configs[i]) == d.decisions[i]);
    auto lv = targets::evaluate_load_time(*m->find_function("f"), p->plan, pv, false);
    REQUIRE(lv.ok());
    std::vector<std::vector<std::uint8_t>> out;
    auto r = simt_emu::run_program(*module_for(*p), *p, *lv, in, out);
    REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
    for (std::size_t j = 0; j < out.size(); ++j) CHECK((*want)[j].to_bytes() == out[j]);
  }
}

TEST_CASE("simt emulator: f32 tmatmul, every epilogue, both dialects (within K u sum|x w|)") {
  REQUIRE_COMPILER();
  std::vector<MM> shapes = kShapes;
  shapes[4].act = "gelu";
  shapes[6].act = "silu";
  check_multi(shapes, false, {{simt::Dialect::Cuda, 32, true, 0}, {simt::Dialect::Hip, 64, true, 2}}, 400);
}

TEST_CASE("simt emulator: tmatmul on [B, S, K] activations; f32 x with an infinity times a zero weight is NaN") {
  REQUIRE_COMPILER();
  // i8 x of rank 3 with x_scale [B, S, 1], bias and residual [B, S, N]: bit for bit.
  const std::string tir =
      "param @w : t2[90, 11]\nparam @ws : f32[11]\n"
      "func @f(%x: i8[2, 3, 90], %xs: f32[2, 3, 1], %b: f32[11], %r: f32[2, 3, 11]) -> f32[2, 3, 11] {\n^entry:\n"
      "  %w = param @w : t2[90, 11]\n  %ws = param @ws : f32[11]\n"
      "  %y = tmatmul %x, %w, %xs, %ws, %b, %r {x_scale = true, w_scale = true, bias = true, residual = true, act = relu} "
      ": f32[2, 3, 11]\n  ret %y\n}\n";
  ir::ParamValues pv;
  pv.set("w", rnd(ElemKind::T2, {90, 11}, 701));
  pv.set("ws", rnd(ElemKind::F32, {11}, 702));
  check(tir, "f", {rnd(ElemKind::I8, {2, 3, 90}, 703), rnd(ElemKind::F32, {2, 3, 1}, 704), rnd(ElemKind::F32, {11}, 705),
                   rnd(ElemKind::F32, {2, 3, 11}, 706)},
        pv, Tol{});
  // f32 x holding +inf at k = 5 of row 1: every column of row 1 is +-inf or NaN (inf x 0),
  // exactly as the reference; row 0 stays finite. Columns 0 and 1 pin both cases.
  const std::string ftir =
      "param @w : t2[70, 3]\nfunc @f(%x: f32[2, 70]) -> f32[2, 3] {\n^entry:\n  %w = param @w : t2[70, 3]\n"
      "  %y = tmatmul %x, %w {x_scale = false, w_scale = false, bias = false, residual = false, act = none} "
      ": f32[2, 3]\n  ret %y\n}\n";
  HostTensor w = rnd(ElemKind::T2, {70, 3}, 707);
  w.data[5 * 3 + 0] = 0;
  w.data[5 * 3 + 1] = 1;
  ir::ParamValues fp;
  fp.set("w", w);
  HostTensor x = rnd(ElemKind::F32, {2, 70}, 708);
  x.data[70 + 5] = HUGE_VAL;
  auto m = ir::parse_module(ftir, "t.tir");
  REQUIRE(m.ok());
  auto want = ir::interpret(*m, "f", std::vector<HostTensor>{x}, fp);
  REQUIRE(want.ok());
  REQUIRE(std::isnan((*want)[0].data[3]));
  REQUIRE(std::isinf((*want)[0].data[4]));
  Tol tol;
  tol.exact = false;
  // Row 0 (finite): K u sum|x w| with |x| < 1, so sum|x w| < K: K^2 u, plus the result's rounding.
  tol.rel = kU;
  tol.abs = 70.0 * 70.0 * kU;
  check(ftir, "f", {x}, fp, tol, {{simt::Dialect::Cuda, 32, true, 0}, {simt::Dialect::Hip, 64, true, 1}});
}

// Grouped weight scales: y = epilogue(sum_g s[g, n] p_g). Tolerance (as tests/unit/spirv
// derives it): with S = sum_g |s p_g| (p_g exact), the i8 path has p_g exact, one rounding
// per product and G - 1 f32 additions, which the reference rounds once more: (G + 2) u S.
// The f32 path sums each group in f32 first: + group u sum_g |s_g| A_g (A_g = sum |x w|
// over the group). The epilogue's ops round on both sides: 8 u of their terms, scaled by
// |x_scale|. Activations other than none/relu: Lipschitz < 1.2, plus 4e-6 (1 + |want|).
TEST_CASE("simt emulator: grouped-scale tmatmul (w_scale f32[G, N]), i8 and f32 x, partial groups and chunks") {
  REQUIRE_COMPILER();
  struct S {
    std::int64_t M, K, N, group;
    bool xs, br;
    const char* act;
  };
  // group 64 (whole chunks), 256 with a partial last group, 32/20/6/1 (groups inside a
  // chunk: codes masked), 100 (straddles chunks).
  const S cases[] = {{1, 300, 37, 256, true, false, "relu"}, {3, 513, 17, 64, true, true, "none"},
                     {9, 100, 9, 32, false, false, "none"},  {1, 45, 19, 20, true, true, "gelu"},
                     {3, 37, 5, 6, true, false, "none"},     {2, 200, 5, 100, false, true, "none"},
                     {3, 21, 4, 1, true, false, "none"}};
  std::uint64_t seed = 500;
  for (bool i8 : {true, false}) {
    for (const S& s : cases) {
      CAPTURE(i8);
      CAPTURE(s.K);
      CAPTURE(s.group);
      const std::int64_t G = ir::grouped_scale_rows(s.K, s.group);
      const std::string ys = sh({s.M, s.N}), gs = "f32" + sh({G, s.N});
      std::string t = "param @w : t2" + sh({s.K, s.N}) + "\nparam @gs : " + gs + "\nfunc @f(%q: " +
                      (i8 ? "i8" : "f32") + sh({s.M, s.K});
      if (s.xs) t += ", %xs: f32" + sh({s.M, 1});
      if (s.br) t += ", %b: f32" + sh({s.N}) + ", %r: f32" + ys;
      t += ") -> f32" + ys + " {\n^entry:\n  %w = param @w : t2" + sh({s.K, s.N}) + "\n  %gs = param @gs : " + gs + "\n";
      t += std::string("  %y = tmatmul %q, %w") + (s.xs ? ", %xs" : "") + ", %gs" + (s.br ? ", %b, %r" : "") +
           " {x_scale = " + (s.xs ? "true" : "false") + ", w_scale = true, group = " + std::to_string(s.group) +
           ", bias = " + (s.br ? "true" : "false") + ", residual = " + (s.br ? "true" : "false") + ", act = " + s.act +
           "} : f32" + ys + "\n  ret %y\n}\n";
      const HostTensor w = rnd(ElemKind::T2, {s.K, s.N}, seed++), gsv = rnd(ElemKind::F32, {G, s.N}, seed++);
      ir::ParamValues pv;
      pv.set("w", w);
      pv.set("gs", gsv);
      std::vector<HostTensor> args{rnd(i8 ? ElemKind::I8 : ElemKind::F32, {s.M, s.K}, seed++)};
      const HostTensor xsv = rnd(ElemKind::F32, {s.M, 1}, seed++), b = rnd(ElemKind::F32, {s.N}, seed++),
                       r = rnd(ElemKind::F32, {s.M, s.N}, seed++);
      if (s.xs) args.push_back(xsv);
      if (s.br) args.insert(args.end(), {b, r});
      const HostTensor& xv = args[0];
      const bool exact_a = exact_act(s.act);
      Tol tol;
      tol.exact = false;
      tol.rel = tol.abs = exact_a ? 0.0 : 4e-6;
      std::vector<double> per;
      for (std::int64_t m = 0; m < s.M; ++m)
        for (std::int64_t n = 0; n < s.N; ++n) {
          double acc = 0, big_s = 0, f32_sums = 0;
          for (std::int64_t g = 0; g < G; ++g) {
            double p = 0, a = 0;
            for (std::int64_t k = g * s.group; k < std::min(s.K, (g + 1) * s.group); ++k) {
              const double tv = xv.data[static_cast<std::size_t>(m * s.K + k)] * w.data[static_cast<std::size_t>(k * s.N + n)];
              p += tv;
              a += std::fabs(tv);
            }
            const double sc = gsv.data[static_cast<std::size_t>(g * s.N + n)];
            acc += sc * p;
            big_s += std::fabs(sc * p);
            f32_sums += std::fabs(sc) * a;
          }
          const double xscale = s.xs ? std::fabs(xsv.data[static_cast<std::size_t>(m)]) : 1.0;
          double terms = std::fabs(acc) * xscale;
          if (s.br) terms += std::fabs(b.data[static_cast<std::size_t>(n)]) + std::fabs(r.data[static_cast<std::size_t>(m * s.N + n)]);
          const double d = (static_cast<double>(G + 2) * big_s + (i8 ? 0.0 : static_cast<double>(s.group) * f32_sums)) * kU;
          per.push_back((d * xscale + 8 * kU * terms) * (exact_a ? 1.0 : 1.2) + 1e-37);
        }
      tol.per.push_back(std::move(per));
      check(t, "f", args, pv, tol, {{simt::Dialect::Cuda, 32, true, 0}, {simt::Dialect::Hip, 64, false, 1}});
    }
  }
}

// ------------------------------------------------------------------ row-wise and elementwise ops

TEST_CASE("simt emulator: quantize and quantize_int8 per row, zero rows, NaN, inf, odd widths: bit for bit") {
  REQUIRE_COMPILER();
  for (std::int64_t cols : {1, 7, 300}) {
    CAPTURE(cols);
    const std::string t = sh({5, cols});
    const std::string tir = "func @f(%x: f32" + t + ") -> (i8" + t + ", f32[5, 1], f32" + t +
                            ") {\n^entry:\n  %q, %s = quantize %x : i8" + t + ", f32[5, 1]\n  %fq = quantize_int8 %x : f32" +
                            t + "\n  ret %q, %s, %fq\n}\n";
    HostTensor x = rnd(ElemKind::F32, {5, cols}, static_cast<std::uint64_t>(cols));
    for (std::int64_t c = 0; c < cols; ++c) x.data[static_cast<std::size_t>(cols + c)] = 0.0;
    x.data[static_cast<std::size_t>(2 * cols)] = std::nan("");
    x.data[static_cast<std::size_t>(3 * cols + cols / 2)] = HUGE_VAL;
    check(tir, "f", {x}, {}, Tol{}, {{simt::Dialect::Cuda, 32, true, 0}, {simt::Dialect::Hip, 64, true, 0}});
  }
}

TEST_CASE("simt emulator: quantize feeding tmatmul (the BitLinear chain), a shared activation, copies") {
  REQUIRE_COMPILER();
  const std::string tir =
      "param @w : t2[70, 13]\nparam @u : t2[70, 9]\nparam @ws : f32[13]\n"
      "func @f(%x: f32[3, 70]) -> (f32[3, 13], f32[3, 9], f32[3, 1], f32[3, 1]) {\n^entry:\n"
      "  %q, %s = quantize %x : i8[3, 70], f32[3, 1]\n  %w = param @w : t2[70, 13]\n  %u = param @u : t2[70, 9]\n"
      "  %ws = param @ws : f32[13]\n"
      "  %y = tmatmul %q, %w, %s, %ws {x_scale = true, w_scale = true, bias = false, residual = false, act = relu} : f32[3, 13]\n"
      "  %z = tmatmul %q, %u {x_scale = false, w_scale = false, bias = false, residual = false, act = none} : f32[3, 9]\n"
      "  ret %y, %z, %s, %s\n}\n";
  ir::ParamValues pv;
  pv.set("w", rnd(ElemKind::T2, {70, 13}, 601));
  pv.set("u", rnd(ElemKind::T2, {70, 9}, 602));
  pv.set("ws", rnd(ElemKind::F32, {13}, 603));
  check(tir, "f", {rnd(ElemKind::F32, {3, 70}, 604)}, pv, Tol{});
  // The quantize kernel writes the row sums both tmatmuls of %q read (no tj_rowsum
  // kernel); the second %s is a copy kernel.
  auto m = ir::parse_module(tir, "t.tir");
  REQUIRE(m.ok());
  auto p = simt::generate(*m, "f", {});
  REQUIRE(p.ok());
  int rowsums = 0, copies = 0;
  for (const auto& k : p->kernels) {
    rowsums += k.op == "rowsum";
    copies += k.op == "copy";
  }
  CHECK(rowsums == 0);
  CHECK(copies >= 1);
  CHECK(p->kernels[0].op == "quantize");
  CHECK(p->kernels[0].args.size() == 4);
  CHECK(p->weights.size() == 2);
  CHECK(p->weights[0].param == "w");
}

TEST_CASE("simt emulator: quantize feeding a grouped tmatmul and an ungrouped one (row sums per group and fused)") {
  REQUIRE_COMPILER();
  const std::string tir =
      "param @w : t2[150, 7]\nparam @gs : f32[3, 7]\nparam @u : t2[150, 5]\n"
      "func @f(%x: f32[4, 150]) -> (f32[4, 7], f32[4, 5]) {\n^entry:\n"
      "  %q, %s = quantize %x : i8[4, 150], f32[4, 1]\n  %w = param @w : t2[150, 7]\n  %gs = param @gs : f32[3, 7]\n"
      "  %u = param @u : t2[150, 5]\n"
      "  %y = tmatmul %q, %w, %s, %gs {x_scale = true, w_scale = true, group = 64, bias = false, residual = false, "
      "act = none} : f32[4, 7]\n"
      "  %z = tmatmul %q, %u, %s {x_scale = true, w_scale = false, bias = false, residual = false, act = none} : f32[4, 5]\n"
      "  ret %y, %z\n}\n";
  ir::ParamValues pv;
  pv.set("w", rnd(ElemKind::T2, {150, 7}, 611));
  pv.set("gs", rnd(ElemKind::F32, {3, 7}, 612));
  pv.set("u", rnd(ElemKind::T2, {150, 5}, 613));
  // The grouped result: (G + 2) u S + 8 u |y| as in the grouped case (G = 3, |q| <= 127,
  // |s| <= 1 per group: S <= 3 * 127 * 64, times |x_scale| <= 1 / 127 here): 1e-4 covers it.
  Tol tol;
  tol.exact = false;
  tol.abs = 1e-4;
  check(tir, "f", {rnd(ElemKind::F32, {4, 150}, 614)}, pv, tol);
  auto m = ir::parse_module(tir, "t.tir");
  REQUIRE(m.ok());
  auto p = simt::generate(*m, "f", {});
  REQUIRE(p.ok());
  int rowsums = 0;
  for (const auto& k : p->kernels) rowsums += k.op == "rowsum";
  CHECK(rowsums == 1);  // the grouped tmatmul's; the ungrouped one reads the quantize kernel's
}

TEST_CASE("simt emulator: rmsnorm, softmax and reductions on every axis") {
  REQUIRE_COMPILER();
  for (std::int64_t len : {1, 67, 300}) {
    CAPTURE(len);
    Tol tol;
    tol.exact = false;
    tol.rel = static_cast<double>(len + 64) * 2 * kU;
    tol.abs = 1e-30;
    const std::string t = sh({3, 5, len});
    std::string fn = "func @f(%x: f32" + t + ", %g: f32" + sh({len}) + ") -> (f32" + t;
    std::string body = "  %y = rmsnorm %x, %g {eps = 1e-05} : f32" + t + "\n";
    std::string rets = "%y";
    for (int axis = 0; axis < 3; ++axis) {
      const std::string a = std::to_string(axis);
      std::vector<std::int64_t> red = {3, 5, len};
      red[static_cast<std::size_t>(axis)] = 1;
      const std::string r = sh({red[0], red[1], red[2]});
      fn += ", f32" + t + ", f32" + r + ", f32" + r + ", f32" + r;
      body += "  %s" + a + " = softmax %x {axis = " + a + "} : f32" + t + "\n  %a" + a + " = reduce_sum %x {axis = " + a +
              ", keepdims = true} : f32" + r + "\n  %m" + a + " = reduce_mean %x {axis = " + a + ", keepdims = true} : f32" +
              r + "\n  %x" + a + " = reduce_max %x {axis = " + a + ", keepdims = true} : f32" + r + "\n";
      rets += ", %s" + a + ", %a" + a + ", %m" + a + ", %x" + a;
    }
    tol.abs = static_cast<double>(len + 64) * 2 * kU * static_cast<double>(len);  // sums cancel: |x| <= 1
    check(fn + ") {\n^entry:\n" + body + "  ret " + rets + "\n}\n", "f",
          {rnd(ElemKind::F32, {3, 5, len}, 21), rnd(ElemKind::F32, {len}, 22)}, {}, tol,
          {{simt::Dialect::Cuda, 32, true, 0}, {simt::Dialect::Hip, 64, true, 0}});
  }
}

TEST_CASE("simt emulator: ewise chains and elementwise ops with row and column broadcasts") {
  REQUIRE_COMPILER();
  Tol tol;
  tol.exact = false;
  tol.rel = tol.abs = 4e-6;
  std::string fn = "func @f(%a: f32[3, 7], %b: f32[7], %c: f32[3, 1], %p: f32[3, 7]) -> (";
  std::string body, rets;
  int i = 0;
  auto ret = [&](const std::string& v) {
    fn += std::string(rets.empty() ? "" : ", ") + "f32[3, 7]";
    rets += (rets.empty() ? "" : ", ") + v;
  };
  for (const std::string op : {"add", "sub", "mul", "div", "max", "min"}) {
    body += "  %x" + std::to_string(i) + " = " + op + " %a, %b : f32[3, 7]\n  %y" + std::to_string(i) + " = " + op +
            " %a, %c : f32[3, 7]\n";
    ret("%x" + std::to_string(i));
    ret("%y" + std::to_string(i));
    ++i;
  }
  for (const std::string op : {"neg", "abs", "relu", "sigmoid", "tanh", "gelu", "silu", "exp", "log", "sqrt", "rsqrt"}) {
    body += "  %u" + std::to_string(i) + " = " + op + " %p : f32[3, 7]\n";
    ret("%u" + std::to_string(i));
    ++i;
  }
  body += "  %e = ewise %a, %b, %c {steps = [mul(0, 1), add(3, 2), silu(4)]} : f32[3, 7]\n";
  ret("%e");
  HostTensor pos = rnd(ElemKind::F32, {3, 7}, 34);
  for (double& v : pos.data) v = static_cast<float>(std::fabs(v) + 0.01);
  check(fn + ") {\n^entry:\n" + body + "  ret " + rets + "\n}\n", "f",
        {rnd(ElemKind::F32, {3, 7}, 31), rnd(ElemKind::F32, {7}, 32), rnd(ElemKind::F32, {3, 1}, 33), pos}, {}, tol,
        {{simt::Dialect::Cuda, 32, true, 0}, {simt::Dialect::Hip, 64, true, 0}});
  // add/sub/mul/max/min/neg/abs/relu exact.
  check("func @f(%a: f32[3, 7], %b: f32[7]) -> (f32[3, 7], f32[3, 7], f32[3, 7], f32[3, 7]) {\n^entry:\n"
        "  %x = add %a, %b : f32[3, 7]\n  %y = mul %a, %b : f32[3, 7]\n  %z = max %a, %b : f32[3, 7]\n"
        "  %w = relu %a : f32[3, 7]\n  ret %x, %y, %z, %w\n}\n",
        "f", {rnd(ElemKind::F32, {3, 7}, 38), rnd(ElemKind::F32, {7}, 39)}, {}, Tol{},
        {{simt::Dialect::Cuda, 32, true, 0}});
}

// ------------------------------------------------------------------ the emulator itself, packing, support

TEST_CASE("simt emulator: a divergent barrier is reported as a deadlock, not a hang") {
  REQUIRE_COMPILER();
  const std::string src =
      "extern \"C\" __global__ void k(int* out) {\n"
      "  if (threadIdx.x < 3u) __syncthreads();\n  out[threadIdx.x] = 1;\n}\n"
      "extern \"C\" __global__ void s(int* out) {\n"
      "  int v = (int)threadIdx.x;\n  if (threadIdx.x < 16u) v = __shfl_down_sync(0xffffffffu, v, 1, 32);\n"
      "  out[threadIdx.x] = v;\n}\n"
      "extern \"C\" __global__ void ok(int* out) {\n"
      "  int v = (int)threadIdx.x;\n  v += __shfl_xor_sync(0xffffffffu, v, 1, 32);\n  __syncthreads();\n"
      "  out[threadIdx.x] = v + __shfl_down_sync(0xffffffffu, v, 2, 4);\n}\n";
  auto m = simt_emu::Module::build(src, {"k", "s", "ok"}, compiler());
  REQUIRE_MESSAGE(m.ok(), (m.ok() ? "" : m.error().message));
  std::vector<int> out(64, 0);
  int* ptr = out.data();
  void* params[] = {&ptr};
  auto r = (*m)->launch("k", {1, 1, 1}, {32, 1, 1}, 32, params);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("deadlock") != std::string::npos);
  r = (*m)->launch("s", {1, 1, 1}, {32, 1, 1}, 32, params);
  REQUIRE_FALSE(r.ok());
  r = (*m)->launch("ok", {1, 1, 1}, {64, 1, 1}, 32, params);
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
  for (int t = 0; t < 64; ++t) {
    auto v = [](int l) { return l + (l ^ 1); };
    const int src_lane = (t % 4) + 2 < 4 ? t + 2 : t;
    CHECK(out[static_cast<std::size_t>(t)] == v(t) + v(src_lane));
  }
}

TEST_CASE("simt: the tcodes64 weight layout, bit by bit, and bad weights") {
  // k = 16 kw + 4 j + b of column n at bit 8 b + 2 j of word kw, code w + 1; padding 0.
  const std::int64_t K = 70, N = 3;
  std::vector<std::int8_t> w(static_cast<std::size_t>(K * N));
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<std::int8_t>(static_cast<int>((i * 7 + i / 5) % 3) - 1);
  auto p = simt::pack_ternary_weight(w.data(), K, N);
  REQUIRE(p.ok());
  REQUIRE(p->size() == simt::packed_weight_bytes(K, N));
  CHECK(p->size() == 3 * 2 * 16);
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t k = 0; k < 128; ++k) {
      const std::uint8_t* col = p->data() + n * 32;
      const std::int64_t kw = k / 16, j = (k % 16) / 4, b = k % 4;
      std::uint32_t word = 0;
      std::memcpy(&word, col + kw * 4, 4);
      const std::uint32_t code = (word >> (8 * b + 2 * j)) & 3;
      CHECK(code == (k < K ? static_cast<std::uint32_t>(w[static_cast<std::size_t>(k * N + n)] + 1) : 0u));
    }
  w[5] = 2;
  auto bad = simt::pack_ternary_weight(w.data(), K, N);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().code == ErrorCode::InvalidInput);
  CHECK(bad.error().message.find("[1, 2]") != std::string::npos);
  CHECK_FALSE(simt::pack_ternary_weight(w.data(), 0, 3).ok());
  CHECK_FALSE(simt::pack_ternary_weight(w.data(), std::int64_t{1} << 40, std::int64_t{1} << 30).ok());
  // Through a LoadValue of the wrong shape.
  targets::LoadValue lv;
  lv.computed = rnd(ElemKind::T2, {4, 5}, 1);
  CHECK_FALSE(simt::pack_ternary_weight(lv, 5, 4).ok());
  CHECK(simt::pack_ternary_weight(lv, 4, 5).ok());
}

TEST_CASE("simt: unsupported ops and weights not known at load are Unsupported, bad options InvalidArgument") {
  auto m = ir::parse_module("func @g(%x: i8[3, 30], %w: t2[30, 7]) -> f32[3, 7] {\n^entry:\n"
                            "  %y = tmatmul %x, %w {x_scale = false, w_scale = false, bias = false, residual = false, "
                            "act = none} : f32[3, 7]\n  ret %y\n}\n"
                            "func @t(%x: f32[3, 4]) -> f32[4, 3] {\n^entry:\n  %y = transpose %x {perm = [1, 0]} : f32[4, 3]\n"
                            "  ret %y\n}\n"
                            "param @w : t2[30, 7]\nfunc @h(%x: i8[3, 30]) -> f32[3, 7] {\n^entry:\n  %w = param @w : t2[30, 7]\n"
                            "  %y = tmatmul %x, %w {x_scale = false, w_scale = false, bias = false, residual = false, "
                            "act = none} : f32[3, 7]\n  ret %y\n}\n",
                            "t.tir");
  REQUIRE_MESSAGE(m.ok(), (m.ok() ? "" : m.error().message));
  auto g = simt::generate(*m, "g", {});
  REQUIRE_FALSE(g.ok());
  CHECK(g.error().code == ErrorCode::Unsupported);
  CHECK(g.error().message.find("known at load") != std::string::npos);
  auto t = simt::supported(*m->find_function("t"));
  REQUIRE_FALSE(t.ok());
  CHECK(t.error().message.find("transpose") != std::string::npos);
  CHECK(simt::generate(*m, "nope", {}).error().code == ErrorCode::NotFound);
  simt::SimtOptions o;
  o.warp_size = 16;
  CHECK(simt::generate(*m, "h", o).error().code == ErrorCode::InvalidArgument);
  o.warp_size = 64;
  o.decisions = {"tpc=16;cols=2;unroll=1;rows=1;cpt=1"};  // a 32-thread block on a 64-wide warp
  CHECK(simt::generate(*m, "h", o).error().code == ErrorCode::InvalidArgument);
  o.decisions = {"tpc=16;cols=4;unroll=3;rows=1;cpt=1"};
  CHECK(simt::generate(*m, "h", o).error().code == ErrorCode::InvalidArgument);
  o.decisions = {"tpc=16;cols=4;unroll=1;rows=1;cpt=3"};
  CHECK(simt::generate(*m, "h", o).error().code == ErrorCode::InvalidArgument);
  o.decisions = {"tpc=16;cols=4;unroll=1;rows=1;cpt=4"};
  CHECK(simt::generate(*m, "h", o).ok());
}

TEST_CASE("simt: tuning space: configuration text, candidates valid, default valid, bench Unavailable without a device") {
  CHECK(simt::parse_config("tpc=32;cols=4;unroll=2;rows=1;cpt=2").has_value());
  CHECK_FALSE(simt::parse_config("tpc=32;cols=4;unroll=2;rows=1").has_value());
  CHECK_FALSE(simt::parse_config("tpc=032;cols=4;unroll=2;rows=1;cpt=1").has_value());
  CHECK_FALSE(simt::parse_config("tpc=32;cols=4;unroll=2;rows=1;cpt=1;x").has_value());
  for (std::uint32_t warp : {32u, 64u}) {
    for (const targets::TMatMulShape s : {targets::TMatMulShape{1, 2560, 2560}, targets::TMatMulShape{8, 14336, 4096},
                                       targets::TMatMulShape{128, 4096, 14336}, targets::TMatMulShape{1, 37, 5}}) {
      simt::SpaceOptions so;
      so.warp_size = warp;
      auto space = simt::make_tmatmul_space(s, so, nullptr);
      CHECK(space->valid(space->default_config()));
      const auto cands = space->candidates();
      CHECK(cands.size() > 10);
      for (const auto& c : cands) {
        CHECK(space->valid(c.config));
        CHECK(c.estimated_ns > 0);
      }
      CHECK(space->bench({}).error().code == ErrorCode::Unavailable);
      CHECK_FALSE(space->valid("tpc=3;cols=4;unroll=2;rows=1;cpt=1"));
    }
  }
  // GEMV with small N splits K further than with large N.
  CHECK(simt::default_config({1, 14336, 128}, 32).tpc > simt::default_config({1, 14336, 14336}, 32).tpc);
}

}  // namespace
}  // namespace ternjit
