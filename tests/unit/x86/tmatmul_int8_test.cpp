// SPDX-License-Identifier: Apache-2.0
// tmatmul_int8_test.cpp - the Dot/MaskDot/Base3 int8 ternary matmul kernels against the reference, bit for bit.
//
// Every case: fresh random x and weights, outputs poisoned with NaN, compared bit-exactly
// with a scalar reference computed as ir/interpret.cpp does (wrapping int32 sum, f32
// conversion, then * x_scale, * w_scale, + bias, + residual, relu, each one f32 op),
// and one case through ir::interpret itself. ISAs the host lacks are generated only.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "ir/interpret.h"
#include "ir/parse.h"
#include "targets/x86/isa.h"
#include "targets/x86/tmatmul.h"
#include "targets/x86/tmatmul_space.h"
#include "tests/unit/x86/x86_testing.h"

namespace ternjit::targets::x86 {
namespace {

Parallel make_parallel(const int* threads) { return testing::std_threads(*threads); }

struct Inputs {
  std::vector<std::int8_t> x, w;
  std::vector<float> x_scale, w_scale, bias, residual;
};

enum class XMode { Random, Min, Max, MinMax };

Inputs make_inputs(const TMatMulProblem& p, std::uint32_t seed, XMode mode) {
  std::mt19937 rng(seed);
  Inputs in;
  in.x.resize(static_cast<std::size_t>(p.M * p.K));
  in.w.resize(static_cast<std::size_t>(p.K * p.N));
  std::uniform_int_distribution<int> xd(-128, 127), wd(-1, 1);
  for (std::size_t i = 0; i < in.x.size(); ++i) {
    switch (mode) {
      case XMode::Random: in.x[i] = static_cast<std::int8_t>(xd(rng)); break;
      case XMode::Min: in.x[i] = -128; break;
      case XMode::Max: in.x[i] = 127; break;
      case XMode::MinMax: in.x[i] = (xd(rng) & 1) != 0 ? std::int8_t{-128} : std::int8_t{127}; break;
    }
  }
  // Extreme x also gets extreme weights (all +1 or all -1 per column) to drive the
  // int16 pair sums of vpmaddubsw to their bounds.
  for (std::size_t i = 0; i < in.w.size(); ++i) {
    if (mode == XMode::Random) in.w[i] = static_cast<std::int8_t>(wd(rng));
    else in.w[i] = (i % static_cast<std::size_t>(p.N)) % 3 == 0 ? std::int8_t{-1} : std::int8_t{1};
  }
  std::uniform_real_distribution<float> sd(0.001f, 0.1f), bd(-50.f, 50.f);
  in.x_scale.resize(static_cast<std::size_t>(p.M));
  for (float& v : in.x_scale) v = sd(rng);
  in.w_scale.resize(static_cast<std::size_t>(p.w_scale_per_channel ? p.N : 1));
  for (float& v : in.w_scale) v = sd(rng);
  in.bias.resize(static_cast<std::size_t>(p.N));
  for (float& v : in.bias) v = bd(rng);
  in.residual.resize(static_cast<std::size_t>(p.M * p.N));
  for (float& v : in.residual) v = bd(rng);
  return in;
}

// The reference, written the way ir/interpret.cpp computes tmatmul (ISO C++: no FMA).
std::vector<float> reference(const TMatMulProblem& p, const Inputs& in) {
  std::vector<float> y(static_cast<std::size_t>(p.M * p.N));
  for (std::int64_t m = 0; m < p.M; ++m) {
    for (std::int64_t n = 0; n < p.N; ++n) {
      std::uint64_t sum = 0;
      for (std::int64_t k = 0; k < p.K; ++k)
        sum += static_cast<std::uint64_t>(std::int64_t{in.x[static_cast<std::size_t>(m * p.K + k)]} *
                                          std::int64_t{in.w[static_cast<std::size_t>(k * p.N + n)]});
      float v = static_cast<float>(static_cast<double>(static_cast<std::int32_t>(static_cast<std::uint32_t>(sum))));
      if (p.x_scale) v = v * in.x_scale[static_cast<std::size_t>(m)];
      if (p.w_scale) v = v * in.w_scale[static_cast<std::size_t>(p.w_scale_per_channel ? n : 0)];
      if (p.bias) v = v + in.bias[static_cast<std::size_t>(n)];
      if (p.residual) v = v + in.residual[static_cast<std::size_t>(m * p.N + n)];
      if (p.relu) v = std::isnan(v) ? v : (v > 0 ? v : 0.0f);
      y[static_cast<std::size_t>(m * p.N + n)] = v;
    }
  }
  return y;
}

std::vector<float> run_kernel(const TMatMulKernel& kernel, const PackedWeights& pw, const Inputs& in,
                              int threads) {
  const TMatMulProblem& p = kernel.problem();
  std::vector<float> y(static_cast<std::size_t>(p.M * p.N), std::numeric_limits<float>::quiet_NaN());
  TMatMulArgs a;
  a.x = in.x.data();
  a.w = &pw;
  a.x_scale = p.x_scale ? in.x_scale.data() : nullptr;
  a.w_scale = p.w_scale ? in.w_scale.data() : nullptr;
  a.bias = p.bias ? in.bias.data() : nullptr;
  a.residual = p.residual ? in.residual.data() : nullptr;
  a.y = y.data();
  int t = threads;
  kernel.run(a, make_parallel(&t));
  return y;
}

// Bitwise equality (any NaN matches any NaN); reports the first difference.
void expect_bits(const std::vector<float>& want, const std::vector<float>& got, std::int64_t N,
                 const std::string& what) {
  REQUIRE(want.size() == got.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    const bool same = (std::isnan(want[i]) && std::isnan(got[i])) ||
                      std::memcmp(&want[i], &got[i], sizeof(float)) == 0;
    if (!same) {
      FAIL_CHECK(what << ": first mismatch at m=" << static_cast<std::int64_t>(i) / N
                      << " n=" << static_cast<std::int64_t>(i) % N << ": want " << want[i] << " got " << got[i]);
      return;
    }
  }
}

constexpr Isa kHostTestIsas[] = {Isa::Avx2, Isa::Avx512, Isa::Avx512Vnni};

struct Shape3 {
  std::int64_t M, K, N;
};

// A covering set of shapes: every size of {1, 5, 63, 257, 2563} for K and N, and M
// from 1 to 300, with the big products kept small.
constexpr Shape3 kShapes[] = {
    {1, 1, 1},    {1, 5, 63},    {2, 63, 5},   {3, 257, 257}, {7, 2563, 5},  {16, 5, 2563},
    {33, 63, 257}, {1, 2563, 257}, {128, 257, 63}, {300, 63, 5}, {8, 257, 1},  {1, 64, 128},
};

void set_epilogue(TMatMulProblem& p, int combo) {
  p.x_scale = p.w_scale = p.w_scale_per_channel = p.bias = p.residual = p.relu = false;
  if (combo == 1) p.x_scale = p.w_scale = p.w_scale_per_channel = p.relu = true;
  if (combo == 2) p.w_scale = p.bias = p.residual = true;
  if (combo == 3) p.x_scale = p.w_scale = p.w_scale_per_channel = p.bias = p.residual = p.relu = true;
}

// Base3's own shapes on top: M = 1, 2, 3, 8; K not a multiple of 4, 5 or 64 (and
// multiples); N around its 80-column groups (79, 81, 161, 239, 240).
constexpr Shape3 kBase3Shapes[] = {
    {1, 67, 79}, {2, 321, 81},  {3, 1001, 161}, {8, 130, 239}, {1, 2563, 240}, {2, 5, 400},
    {3, 64, 1},  {8, 999, 163}, {1, 1280, 80},  {1, 4099, 17}, {4, 77, 320},   {1, 1, 160},
};

// Runs a shape list on one (isa, variant, vec) with knobs varied per shape.
void sweep(Isa isa, TMatMulVariant variant, int vec, std::span<const Shape3> shapes = kShapes) {
  const int group = (variant == TMatMulVariant::Base3 ? 5 : 4) * vec / 32;
  int ran = 0;
  for (std::size_t si = 0; si < shapes.size(); ++si) {
    const Shape3 sh = shapes[si];
    TMatMulProblem p;
    p.M = sh.M;
    p.K = sh.K;
    p.N = sh.N;
    set_epilogue(p, static_cast<int>(si % 4));
    TMatMulConfig c;
    c.isa = isa;
    c.variant = variant;
    c.vector_bits = vec;
    c.n_block = group * (si % 3 == 2 ? 2 : 1);
    c.m_block = 1 + static_cast<int>(si % 4);
    c.k_unroll = 1 + static_cast<int>(si % 3);
    c.prefetch_bytes = si % 2 == 0 ? 0 : 512;
    c.threads = 1 + static_cast<int>(si % 2);
    c.split_k = si % 5 == 4 ? 3 : 1;
    // Shrink the register blocking until the isa has the registers.
    while (!validate(p, c).ok() && c.m_block > 1) --c.m_block;
    while (!validate(p, c).ok() && c.n_block > group) c.n_block -= group;
    auto v = validate(p, c);
    REQUIRE_MESSAGE(v.ok(), c.str() << ": " << (v.ok() ? std::string() : v.error().message));
    auto k = TMatMulKernel::create(p, c);
    REQUIRE_MESSAGE(k.ok(), c.str() << ": " << (k.ok() ? std::string() : k.error().message));
    const XMode mode = si % 6 == 5 ? XMode::MinMax : (si % 6 == 3 ? XMode::Min : XMode::Random);
    const Inputs in = make_inputs(p, static_cast<std::uint32_t>(1000 + si * 7 + static_cast<std::size_t>(vec)), mode);
    auto pw = (*k)->pack(in.w);
    REQUIRE(pw.ok());
    CHECK(pw->signature == (*k)->pack_signature());
    const std::vector<float> want = reference(p, in);
    for (int threads : {1, 2}) {
      const std::string what = "M=" + std::to_string(p.M) + " K=" + std::to_string(p.K) + " N=" +
                               std::to_string(p.N) + " epi=" + std::to_string(si % 4) + " threads=" +
                               std::to_string(threads) + " " + c.str();
      expect_bits(want, run_kernel(**k, *pw, in, threads), p.N, what);
    }
    ++ran;
  }
  CHECK(ran == static_cast<int>(shapes.size()));
}

bool host_runs(Isa isa) { return host_isas().supports(isa); }

void sweep_isa(Isa isa) {
  if (!host_runs(isa)) {
    MESSAGE("skipped: host lacks " << isa_name(isa));
    return;
  }
  for (TMatMulVariant variant : {TMatMulVariant::Dot, TMatMulVariant::MaskDot}) {
    for (int vec : {256, 512}) {
      if (vec == 512 && isa == Isa::Avx2) continue;
      sweep(isa, variant, vec);
    }
  }
}

TEST_CASE("tmatmul i8 dot and mask_dot [avx2]") { sweep_isa(Isa::Avx2); }
TEST_CASE("tmatmul i8 dot and mask_dot [avx512]") { sweep_isa(Isa::Avx512); }
TEST_CASE("tmatmul i8 dot and mask_dot [avx512_vnni]") { sweep_isa(Isa::Avx512Vnni); }

TEST_CASE("tmatmul i8 base3 [avx512_vnni]") {
  if (!host_runs(Isa::Avx512Vnni) || !host_isas().avx512_vbmi) {
    MESSAGE("skipped: host lacks avx512_vnni or avx512_vbmi");
    return;
  }
  sweep(Isa::Avx512Vnni, TMatMulVariant::Base3, 512, kBase3Shapes);
  sweep(Isa::Avx512Vnni, TMatMulVariant::Base3, 512);
  // Extreme x against all +1 / all -1 columns: the 64x-scaled field's accumulator at its
  // largest, and the raw-byte field's wrapped sum (81^-1 recovery) with K near the limit.
  for (XMode mode : {XMode::Min, XMode::Max, XMode::MinMax}) {
    TMatMulProblem p;
    p.M = 2;
    p.K = 131071;
    p.N = 83;
    set_epilogue(p, 3);
    TMatMulConfig c = default_config(p, Isa::Avx512Vnni, 2);
    c.variant = TMatMulVariant::Base3;
    c.n_block = 80;
    c.m_block = 2;
    c.split_k = mode == XMode::MinMax ? 2 : 1;
    REQUIRE(validate(p, c).ok());
    auto k = TMatMulKernel::create(p, c);
    REQUIRE(k.ok());
    const Inputs in = make_inputs(p, 78, mode);
    auto pw = (*k)->pack(in.w);
    REQUIRE(pw.ok());
    CHECK(pw->signature.rfind("i8t3.v1:", 0) == 0);
    // 1.6 bits a weight: ceil(K/4) steps x 64 bytes per 80 columns.
    CHECK(pw->size == static_cast<std::size_t>((p.K + 3) / 4 * 64 * 2));
    expect_bits(reference(p, in), run_kernel(**k, *pw, in, 2), p.N, c.str());
  }
}

TEST_CASE("tmatmul i8 extreme x with many threads and split-K") {
  for (Isa isa : kHostTestIsas) {
    if (!host_runs(isa)) continue;
    for (TMatMulVariant variant : {TMatMulVariant::Dot, TMatMulVariant::MaskDot}) {
      for (XMode mode : {XMode::Min, XMode::Max, XMode::MinMax}) {
        TMatMulProblem p;
        p.M = 3;
        p.K = 2563;
        p.N = 70;
        set_epilogue(p, 3);
        TMatMulConfig c = default_config(p, isa, 2);
        c.variant = variant;
        c.split_k = 4;
        c.threads = 2;
        REQUIRE(validate(p, c).ok());
        auto k = TMatMulKernel::create(p, c);
        REQUIRE(k.ok());
        const Inputs in = make_inputs(p, 77, mode);
        auto pw = (*k)->pack(in.w);
        REQUIRE(pw.ok());
        expect_bits(reference(p, in), run_kernel(**k, *pw, in, 3), p.N, c.str());
      }
    }
  }
}

TEST_CASE("tmatmul i8 default configs are valid and correct") {
  for (Isa isa : kAllIsas) {
    for (Shape3 sh : {Shape3{1, 4096, 64}, Shape3{1, 200000, 8}, Shape3{8, 63, 257}, Shape3{100, 257, 63},
                      Shape3{2, 257, 130}, Shape3{1, 4099, 4100}}) {
      TMatMulProblem p;
      p.M = sh.M;
      p.K = sh.K;
      p.N = sh.N;
      set_epilogue(p, 1);
      const TMatMulConfig c = default_config(p, isa, 2);
      auto v = validate(p, c);
      CHECK_MESSAGE(v.ok(), c.str() << ": " << (v.ok() ? std::string() : v.error().message));
      if (c.variant == TMatMulVariant::Amx) continue;  // run by tmatmul_amx's tests
      if (!host_runs(isa) || sh.K > 10000) continue;
      auto k = TMatMulKernel::create(p, c);
      REQUIRE(k.ok());
      const Inputs in = make_inputs(p, 5, XMode::Random);
      auto pw = (*k)->pack(in.w);
      REQUIRE(pw.ok());
      expect_bits(reference(p, in), run_kernel(**k, *pw, in, 2), p.N, c.str());
    }
  }
}

TEST_CASE("tmatmul i8 default config picks base3 for a large M = 1 layer only where it runs") {
  TMatMulProblem p;
  p.M = 1;
  p.K = 4096;
  p.N = 14336;
  set_epilogue(p, 1);
  const bool vbmi = host_isas().avx512_vbmi;
  CHECK((default_config(p, Isa::Avx512Vnni, 1).variant == TMatMulVariant::Base3) == vbmi);
  CHECK(default_config(p, Isa::Avx512Vnni, 1, false).variant == TMatMulVariant::MaskDot);
  CHECK(default_config(p, Isa::Avx512, 1).variant == TMatMulVariant::MaskDot);
  TMatMulProblem small = p;
  small.N = 2560;
  small.K = 2560;
  CHECK(default_config(small, Isa::Avx512Vnni, 1).variant == TMatMulVariant::MaskDot);
  TMatMulProblem rows = p;
  rows.M = 8;
  CHECK(default_config(rows, Isa::Avx512Vnni, 1).variant == TMatMulVariant::Dot);
  rows.M = 2;
  CHECK(default_config(rows, Isa::Avx512Vnni, 1).variant == TMatMulVariant::Dot);
  TMatMulProblem grouped = p;
  grouped.w_scale_per_channel = false;
  grouped.w_scale_group = 256;
  CHECK(default_config(grouped, Isa::Avx512Vnni, 1).variant != TMatMulVariant::Base3);
  for (const TMatMulConfig& c : search_space(p, Isa::Avx512Vnni, 2))
    if (c.variant == TMatMulVariant::Base3) {
      CHECK(vbmi);
      CHECK(validate(p, c).ok());
    }
}

TEST_CASE("tmatmul i8 kernel runs concurrently from several threads") {
  TMatMulProblem p;
  p.M = 5;
  p.K = 300;
  p.N = 130;
  set_epilogue(p, 2);
  const TMatMulConfig c = default_config(p, *best_isa(host_isas()), 1);
  auto k = TMatMulKernel::create(p, c);
  REQUIRE(k.ok());
  const Inputs a = make_inputs(p, 1, XMode::Random), b = make_inputs(p, 2, XMode::Random);
  auto pa = (*k)->pack(a.w);
  auto pb = (*k)->pack(b.w);
  REQUIRE((pa.ok() && pb.ok()));
  std::vector<float> ya, yb;
  std::thread t([&] { ya = run_kernel(**k, *pa, a, 2); });
  yb = run_kernel(**k, *pb, b, 2);
  t.join();
  expect_bits(reference(p, a), ya, p.N, "thread a");
  expect_bits(reference(p, b), yb, p.N, "thread b");
}

TEST_CASE("tmatmul i8 matches ir::interpret") {
  const char* text = R"(func @f(%x: i8[3, 67], %w: t2[67, 70], %s: f32[3, 1], %ws: f32[70], %b: f32[70], %r: f32[3, 70]) -> f32[3, 70] {
^entry:
  %y = tmatmul %x, %w, %s, %ws, %b, %r {x_scale = true, w_scale = true, bias = true, residual = true, act = relu} : f32[3, 70]
  ret %y
}
)";
  auto mod = ir::parse_module(text, "tmatmul_int8_test.tir");
  REQUIRE_MESSAGE(mod.ok(), (mod.ok() ? std::string() : render(mod.error())));
  TMatMulProblem p;
  p.M = 3;
  p.K = 67;
  p.N = 70;
  set_epilogue(p, 3);
  const Inputs in = make_inputs(p, 42, XMode::Random);
  std::vector<ir::HostTensor> args;
  args.push_back(ir::HostTensor::from_i8({3, 67}, in.x));
  args.push_back(ir::HostTensor::from_i8({67, 70}, in.w));
  args.back().kind = ElemKind::T2;
  args.push_back(ir::HostTensor::from_f32({3, 1}, in.x_scale));
  args.push_back(ir::HostTensor::from_f32({70}, in.w_scale));
  args.push_back(ir::HostTensor::from_f32({70}, in.bias));
  args.push_back(ir::HostTensor::from_f32({3, 70}, in.residual));
  auto out = ir::interpret(*mod, "f", args, {});
  REQUIRE_MESSAGE(out.ok(), (out.ok() ? std::string() : render(out.error())));
  const std::vector<float> want = (*out)[0].to_f32();
  expect_bits(reference(p, in), want, p.N, "test reference vs interpreter");
  for (Isa isa : kHostTestIsas) {
    if (!host_runs(isa)) continue;
    for (TMatMulVariant variant : {TMatMulVariant::Dot, TMatMulVariant::MaskDot}) {
      TMatMulConfig c = default_config(p, isa, 2);
      c.variant = variant;
      auto k = TMatMulKernel::create(p, c);
      REQUIRE(k.ok());
      auto pw = (*k)->pack(in.w);
      REQUIRE(pw.ok());
      expect_bits(want, run_kernel(**k, *pw, in, 2), p.N, "interpreter vs " + c.str());
    }
  }
}

TEST_CASE("tmatmul i8 code for isas the host lacks is generated [avx_vnni] [amx]") {
  for (Isa isa : {Isa::AvxVnni, Isa::Amx, Isa::Avx512Vnni, Isa::Avx2}) {
    for (TMatMulVariant variant : {TMatMulVariant::Dot, TMatMulVariant::MaskDot}) {
      TMatMulProblem p;
      p.M = 4;
      p.K = 100;
      p.N = 100;
      set_epilogue(p, 3);
      TMatMulConfig c = default_config(p, isa, 1);
      c.variant = variant;
      if (!host_runs(isa)) {
        MESSAGE("host lacks " << isa_name(isa) << ": code generated, not run");
        auto refused = TMatMulKernel::create(p, c);
        REQUIRE(!refused.ok());
        CHECK(refused.error().code == ErrorCode::Unavailable);
      }
      auto k = TMatMulKernel::create(p, c, /*allow_foreign_isa=*/true);
      REQUIRE_MESSAGE(k.ok(), c.str() << ": " << (k.ok() ? std::string() : k.error().message));
      const auto blobs = (*k)->code();
      REQUIRE(!blobs.empty());
      for (const auto& b : blobs) {
        CHECK(!b.code.empty());
        CHECK(b.label.find("mb=") != std::string::npos);
      }
    }
  }
}

TEST_CASE("tmatmul i8 code generation time") {
  TMatMulProblem p;
  p.M = 1;
  p.K = 4096;
  p.N = 14336;
  const Isa isa = best_isa(host_isas()).value_or(Isa::Avx2);
  const TMatMulConfig c = default_config(p, isa, 1);
  constexpr int kReps = 50;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kReps; ++i) {
    auto k = TMatMulKernel::create(p, c);
    REQUIRE(k.ok());
  }
  const auto us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / kReps;
  MESSAGE("create() of " << c.str() << ": " << us << " us per kernel");
}

TEST_CASE("tmatmul config text round-trips and rejects bad keys and values") {
  TMatMulConfig c;
  c.isa = Isa::Avx512Vnni;
  c.variant = TMatMulVariant::MaskDot;
  c.vector_bits = 512;
  c.n_block = 128;
  c.m_block = 3;
  c.k_unroll = 4;
  c.prefetch_bytes = 1024;
  c.threads = 2;
  c.split_k = 2;
  CHECK(c.str() == "isa=avx512_vnni,variant=mask_dot,vec=512,nb=128,mb=3,ku=4,pf=1024,t=2,sk=2");
  auto back = TMatMulConfig::parse(c.str());
  REQUIRE(back.ok());
  CHECK(*back == c);
  for (TMatMulVariant v : {TMatMulVariant::Dot, TMatMulVariant::MaskDot, TMatMulVariant::Amx, TMatMulVariant::Float}) {
    for (Isa isa : kAllIsas) {
      TMatMulConfig d;
      d.isa = isa;
      d.variant = v;
      auto r = TMatMulConfig::parse(d.str());
      REQUIRE(r.ok());
      CHECK(*r == d);
    }
  }
  auto bad_key = TMatMulConfig::parse("isa=avx2,foo=1");
  REQUIRE(!bad_key.ok());
  CHECK(bad_key.error().code == ErrorCode::InvalidArgument);
  CHECK(bad_key.error().message.find("'foo'") != std::string::npos);
  auto bad_value = TMatMulConfig::parse("isa=avx2,vec=abc");
  REQUIRE(!bad_value.ok());
  CHECK(bad_value.error().message.find("'vec'") != std::string::npos);
  CHECK(bad_value.error().message.find("'abc'") != std::string::npos);
  auto bad_isa = TMatMulConfig::parse("isa=sse2");
  REQUIRE(!bad_isa.ok());
  CHECK(bad_isa.error().message.find("'sse2'") != std::string::npos);
  CHECK(!TMatMulConfig::parse("variant=dot,variant=dot").ok());
  CHECK(!TMatMulConfig::parse("nb").ok());
  CHECK(!TMatMulConfig::parse("nb=12x").ok());
}

TEST_CASE("tmatmul i8 validate names the bad knob") {
  TMatMulProblem p;
  p.M = 4;
  p.K = 64;
  p.N = 64;
  auto base = [] {
    TMatMulConfig c;
    c.isa = Isa::Avx512Vnni;
    c.vector_bits = 512;
    c.n_block = 64;
    c.m_block = 2;
    return c;
  };
  REQUIRE(validate(p, base()).ok());
  auto expect_error = [&](const TMatMulProblem& pp, const TMatMulConfig& c, const std::string& needle) {
    auto r = validate(pp, c);
    REQUIRE_MESSAGE(!r.ok(), c.str());
    CHECK(r.error().code == ErrorCode::InvalidArgument);
    CHECK_MESSAGE(r.error().message.find(needle) != std::string::npos, r.error().message);
  };
  TMatMulConfig c = base();
  c.isa = Isa::Avx2;
  expect_error(p, c, "vec=512");
  c = base();
  c.vector_bits = 384;
  expect_error(p, c, "vec=384");
  c = base();
  c.n_block = 48;
  expect_error(p, c, "nb=48");
  c = base();
  c.m_block = 7;
  c.n_block = 128;
  expect_error(p, c, "registers");
  c = base();
  c.threads = 0;
  expect_error(p, c, "t=0");
  c = base();
  c.split_k = 0;
  expect_error(p, c, "sk=0");
  c = base();
  c.k_unroll = 0;
  expect_error(p, c, "ku=0");
  c = base();
  c.variant = TMatMulVariant::Amx;
  expect_error(p, c, "isa=amx");
  c = base();
  c.variant = TMatMulVariant::MaskDot;
  TMatMulProblem big = p;
  big.K = 200000;
  expect_error(big, c, "mask_dot");
  TMatMulProblem zero = p;
  zero.M = 0;
  expect_error(zero, base(), "positive");
  TMatMulProblem fl = p;
  fl.x_kind = ElemKind::F32;
  expect_error(fl, base(), "variant=dot");
  // Base3: zmm on avx512_vnni (or amx) only, n_block in 80-column groups, K <= 131071.
  c = base();
  c.variant = TMatMulVariant::Base3;
  c.n_block = 80;
  REQUIRE(validate(p, c).ok());
  c.isa = Isa::Avx512;
  expect_error(p, c, "variant=base3 needs isa=avx512_vnni");
  c.isa = Isa::Avx2;
  c.vector_bits = 256;
  expect_error(p, c, "variant=base3 needs isa=avx512_vnni");
  c.isa = Isa::Avx512Vnni;
  expect_error(p, c, "variant=base3 needs vec=512");
  c.vector_bits = 512;
  c.n_block = 64;
  expect_error(p, c, "nb=64");
  c.n_block = 80;
  expect_error(big, c, "variant=base3 needs K <=");
  c.m_block = 4;
  c.n_block = 160;
  expect_error(p, c, "registers");
  c.m_block = 1;
  c.n_block = 80;
  TMatMulProblem grouped = p;
  grouped.w_scale = true;
  grouped.w_scale_group = 32;
  expect_error(grouped, c, "variant=base3 does not take a grouped w_scale");
  CHECK(TMatMulConfig::parse("variant=base3")->variant == TMatMulVariant::Base3);
}

TEST_CASE("tmatmul i8 pack rejects weights outside {-1, 0, 1} naming the index") {
  TMatMulProblem p;
  p.M = 1;
  p.K = 3;
  p.N = 4;
  TMatMulConfig c = default_config(p, Isa::Avx2, 1);
  auto k = TMatMulKernel::create(p, c, true);
  REQUIRE(k.ok());
  std::vector<std::int8_t> w(12, 1);
  w[7] = 2;
  auto r = (*k)->pack(w);
  REQUIRE(!r.ok());
  CHECK(r.error().code == ErrorCode::InvalidArgument);
  CHECK_MESSAGE(r.error().message.find("index 7") != std::string::npos, r.error().message);
  CHECK(r.error().message.find("weight 2") != std::string::npos);
  auto short_w = (*k)->pack(std::span<const std::int8_t>(w.data(), 11));
  CHECK(!short_w.ok());
}

}  // namespace
}  // namespace ternjit::targets::x86
