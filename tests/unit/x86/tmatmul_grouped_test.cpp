// SPDX-License-Identifier: Apache-2.0
// tmatmul_grouped_test.cpp - the x86 tmatmul with a per-group weight scale f32[G, N] against the reference.
//
// Every variant the ISA has (dot, mask_dot, amx on Isa::Amx, float), 1 and 2 threads,
// odd K with a partial last group, odd N, M in {1, 3, 17, 20}, every epilogue, outputs
// poisoned with NaN. The reference is ir/interpret.cpp's definition, in double:
// y = epilogue( sum_g s[g, n] * p_g ), p_g the exact group sum (i8 x) or the double one
// (f32 x), rounded once to f32.
//
// Tolerance (tmatmul_grouped.cpp's numerics): with S = sum_g |s[g, n] p_g|, the kernel's
// scaled accumulation differs from the reference's by at most (G + 1) u S (u = 2^-24:
// one rounding per product, G - 1 additions); f32 x adds group u sum_g |s[g, n]|
// sum_k |x w| (each group's f32 sum). The epilogue's f32 ops (x_scale, bias, residual)
// scale that by |x_scale| and add at most 2 u of each term they touch, so
//   |y - y_ref| <= (G + 1 + group_if_f32) u S' |x_scale| + 8 u (|A x_scale| + |bias| + |res|),
// with S' including the f32 sum bound. relu does not widen a difference.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "targets/x86/isa.h"
#include "targets/x86/tmatmul.h"
#include "tests/unit/x86/x86_testing.h"

namespace ternjit::targets::x86 {
namespace {

constexpr double kU = 0x1p-24;

struct Case {
  std::int64_t M, K, N, group;
  int epilogue;  // 0: none, 1: x_scale + relu, 2: bias + residual, 3: everything
};

// K = 300, 513 (groups of 256 with partial last groups), 256 (exact), 100 with group
// 256 (one partial group), 100 with group 32 (last group of 4), 37 with group 6 (not a
// multiple of 4: groups straddle the int8 kernels' 4-k steps).
constexpr Case kCases[] = {
    {1, 300, 37, 256, 1}, {3, 513, 17, 256, 3}, {17, 256, 65, 256, 2}, {20, 100, 9, 256, 0},
    {1, 100, 33, 32, 3},  {3, 37, 5, 6, 1},     {17, 770, 31, 256, 3}, {1, 2563, 7, 256, 2},
};

struct Data {
  std::vector<std::int8_t> xi, w;
  std::vector<float> xf, x_scale, w_scale, bias, residual;
};

Data make_data(const TMatMulProblem& p, std::uint32_t seed) {
  std::mt19937 rng(seed);
  Data d;
  const auto G = static_cast<std::size_t>((p.K - 1) / p.w_scale_group + 1);
  std::uniform_int_distribution<int> xd(-128, 127), wd(-1, 1);
  std::uniform_real_distribution<float> fd(-1.f, 1.f), sd(0.001f, 0.1f), bd(-50.f, 50.f);
  d.xi.resize(static_cast<std::size_t>(p.M * p.K));
  for (auto& v : d.xi) v = static_cast<std::int8_t>(xd(rng));
  d.xf.resize(d.xi.size());
  for (auto& v : d.xf) v = fd(rng);
  d.w.resize(static_cast<std::size_t>(p.K * p.N));
  for (auto& v : d.w) v = static_cast<std::int8_t>(wd(rng));
  d.x_scale.resize(static_cast<std::size_t>(p.M));
  for (auto& v : d.x_scale) v = sd(rng);
  d.w_scale.resize(G * static_cast<std::size_t>(p.N));
  for (auto& v : d.w_scale) v = sd(rng) * (rng() % 2 ? 1.f : -1.f);
  d.bias.resize(static_cast<std::size_t>(p.N));
  for (auto& v : d.bias) v = bd(rng);
  d.residual.resize(static_cast<std::size_t>(p.M * p.N));
  for (auto& v : d.residual) v = bd(rng);
  return d;
}

// The reference value and the tolerance of element (m, n).
std::pair<float, double> reference(const TMatMulProblem& p, const Data& d, std::int64_t m, std::int64_t n) {
  const bool i8 = p.x_kind == ElemKind::I8;
  const std::int64_t G = (p.K - 1) / p.w_scale_group + 1;
  double acc = 0, s_abs = 0;
  for (std::int64_t g = 0; g < G; ++g) {
    double part = 0, part_abs = 0;
    for (std::int64_t k = g * p.w_scale_group; k < std::min(p.K, (g + 1) * p.w_scale_group); ++k) {
      const std::size_t at = static_cast<std::size_t>(m * p.K + k);
      const double x = i8 ? static_cast<double>(d.xi[at]) : static_cast<double>(d.xf[at]);
      const double w = d.w[static_cast<std::size_t>(k * p.N + n)];
      part += x * w;
      part_abs += std::fabs(x * w);
    }
    const double s = d.w_scale[static_cast<std::size_t>(g * p.N + n)];
    acc += s * part;
    s_abs += std::fabs(s) * ((G + 1) * std::fabs(part) + (i8 ? 0.0 : static_cast<double>(p.w_scale_group) * part_abs));
  }
  float v = static_cast<float>(acc);
  const double xs = p.x_scale ? d.x_scale[static_cast<std::size_t>(m)] : 1.0;
  double terms = std::fabs(double{v} * xs);
  if (p.x_scale) v = v * d.x_scale[static_cast<std::size_t>(m)];
  if (p.bias) {
    v = v + d.bias[static_cast<std::size_t>(n)];
    terms += std::fabs(d.bias[static_cast<std::size_t>(n)]);
  }
  if (p.residual) {
    v = v + d.residual[static_cast<std::size_t>(m * p.N + n)];
    terms += std::fabs(d.residual[static_cast<std::size_t>(m * p.N + n)]);
  }
  if (p.relu) v = std::isnan(v) ? v : (v > 0 ? v : 0.0f);
  return {v, kU * (s_abs * xs + 8 * terms) + 1e-37};
}

void run_case(Isa isa, TMatMulVariant variant, const Case& cs, std::uint32_t seed) {
  TMatMulProblem p;
  p.M = cs.M;
  p.K = cs.K;
  p.N = cs.N;
  p.x_kind = variant == TMatMulVariant::Float ? ElemKind::F32 : ElemKind::I8;
  p.out_kind = ElemKind::F32;
  p.w_scale = true;
  p.w_scale_group = cs.group;
  p.x_scale = cs.epilogue == 1 || cs.epilogue == 3;
  p.relu = cs.epilogue == 1 || cs.epilogue == 3;
  p.bias = p.residual = cs.epilogue >= 2;
  for (int threads : {1, 2}) {
    TMatMulConfig c = default_config(p, isa, threads);
    c.variant = variant;
    if (variant == TMatMulVariant::Amx) {
      c.n_block = 32;
      c.m_block = 32;
      c.k_unroll = 1;
    } else if (variant != TMatMulVariant::Float) {
      c.n_block = 4 * c.vector_bits / 32;
      c.m_block = static_cast<int>(std::min<std::int64_t>(p.M, 2));
    }
    const std::string what = std::string(isa_name(isa)) + " M=" + std::to_string(p.M) + " K=" + std::to_string(p.K) +
                             " N=" + std::to_string(p.N) + " group=" + std::to_string(p.w_scale_group) +
                             " epi=" + std::to_string(cs.epilogue) + " threads=" + std::to_string(threads) + " " +
                             c.str();
    CAPTURE(what);
    auto k = TMatMulKernel::create(p, c);
    REQUIRE_MESSAGE(k.ok(), (k.ok() ? std::string() : k.error().message));
    const Data d = make_data(p, seed);
    auto pw = (*k)->pack(d.w);
    REQUIRE(pw.ok());
    CHECK(pw->signature == (*k)->pack_signature());
    std::vector<float> y(static_cast<std::size_t>(p.M * p.N), std::numeric_limits<float>::quiet_NaN());
    TMatMulArgs a;
    a.x = p.x_kind == ElemKind::I8 ? static_cast<const void*>(d.xi.data()) : static_cast<const void*>(d.xf.data());
    a.w = &*pw;
    a.x_scale = p.x_scale ? d.x_scale.data() : nullptr;
    a.w_scale = d.w_scale.data();
    a.bias = p.bias ? d.bias.data() : nullptr;
    a.residual = p.residual ? d.residual.data() : nullptr;
    a.y = y.data();
    (*k)->run(a, testing::std_threads(threads));
    // A realigned copy of the pack (what benchmarks rotate through) computes the same.
    const PackedWeights copy = aligned_copy(*pw);
    std::vector<float> y2(y.size(), std::numeric_limits<float>::quiet_NaN());
    a.w = &copy;
    a.y = y2.data();
    (*k)->run(a, testing::std_threads(threads));
    CHECK(std::memcmp(y.data(), y2.data(), y.size() * sizeof(float)) == 0);
    int bad = 0;
    for (std::int64_t m = 0; m < p.M; ++m)
      for (std::int64_t n = 0; n < p.N; ++n) {
        const auto [want, tol] = reference(p, d, m, n);
        const float got = y[static_cast<std::size_t>(m * p.N + n)];
        if (!(std::fabs(double{got} - double{want}) <= tol) && bad++ < 3)
          FAIL_CHECK("m=" << m << " n=" << n << ": want " << want << " got " << got << " (tolerance " << tol << ")");
      }
    CHECK(bad == 0);
  }
}

void sweep_isa(Isa isa) {
  if (!host_isas().supports(isa)) {
    MESSAGE("skipped: host lacks " << isa_name(isa));
    return;
  }
  std::vector<TMatMulVariant> variants{TMatMulVariant::Dot, TMatMulVariant::MaskDot, TMatMulVariant::Float};
  if (isa == Isa::Amx) variants.push_back(TMatMulVariant::Amx);
  std::uint32_t seed = 1;
  for (TMatMulVariant v : variants)
    for (const Case& cs : kCases) run_case(isa, v, cs, seed++);
}

TEST_CASE("tmatmul grouped w_scale [avx2]") { sweep_isa(Isa::Avx2); }
TEST_CASE("tmatmul grouped w_scale [avx_vnni]") { sweep_isa(Isa::AvxVnni); }
TEST_CASE("tmatmul grouped w_scale [avx512]") { sweep_isa(Isa::Avx512); }
TEST_CASE("tmatmul grouped w_scale [avx512_vnni]") { sweep_isa(Isa::Avx512Vnni); }
TEST_CASE("tmatmul grouped w_scale [amx]") { sweep_isa(Isa::Amx); }

TEST_CASE("tmatmul grouped w_scale: what validate refuses") {
  TMatMulProblem p;
  p.M = 2;
  p.K = 300;
  p.N = 8;
  p.w_scale = true;
  p.w_scale_group = 256;
  const TMatMulConfig c = default_config(p, Isa::Avx2, 1);
  CHECK(validate(p, c).ok());
  TMatMulProblem q = p;
  q.w_scale_per_channel = true;
  CHECK(validate(q, c).error().message == "tmatmul: w_scale_group needs w_scale without w_scale_per_channel");
  q = p;
  q.x_kind = q.out_kind = ElemKind::BF16;
  CHECK(validate(q, c).error().message == "tmatmul: a grouped w_scale needs i8 or f32 x, not bf16");
  q = p;
  q.w_scale_group = -1;
  CHECK(validate(q, c).error().message == "tmatmul: w_scale_group must be >= 0");
}

}  // namespace
}  // namespace ternjit::targets::x86
