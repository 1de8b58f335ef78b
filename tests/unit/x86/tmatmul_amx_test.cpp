// SPDX-License-Identifier: Apache-2.0
// tmatmul_amx_test.cpp - the Amx tmatmul kernel: bit-exact through tile emulation; real tiles where the CPU has AMX.
//
// The emulated kernel (detail::create_amx_emulated) is the same generated code with the
// tile instructions replaced by AVX-512 VNNI sequences on a memory tile file, so it
// checks the packing, unpacking, blocking, addressing and epilogue on any AVX512-VNNI
// CPU. The real kernel is generated (and its tile configuration and AMX instructions
// checked byte by byte) everywhere, and run only where host_isas().amx is true.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "ir/interpret.h"
#include "ir/parse.h"
#include "ir/tensor.h"
#include "targets/x86/isa.h"
#include "targets/x86/tmatmul_internal.h"
#include "targets/x86/tmatmul_space.h"
#include "tests/unit/x86/x86_testing.h"

namespace {

using namespace ternjit;
using namespace ternjit::targets::x86;
using ternjit::ir::HostTensor;

const Parallel kTwoThreads = testing::std_threads(2);

struct Case {
  TMatMulProblem p;
  std::vector<std::int8_t> x, w;
  std::vector<float> xs, ws, bias, res, expect;
};

// Inputs from `seed` and the reference: the exact int32 (wrapping) sum, converted to f32
// once, then * x_scale, * w_scale, + bias, + residual as separate f32 ops, then relu.
// `special`: x_scale NaN for row 0 and -0 for row 1 (NaN propagation, relu of -0).
Case make_case(std::int64_t M, std::int64_t K, std::int64_t N, int epilogue, std::uint64_t seed, bool special = false) {
  Case c;
  c.p.M = M;
  c.p.K = K;
  c.p.N = N;
  c.p.x_kind = ElemKind::I8;
  c.p.out_kind = ElemKind::F32;
  c.p.x_scale = epilogue & 1;
  c.p.w_scale = epilogue & 2;
  c.p.w_scale_per_channel = c.p.w_scale && (epilogue & 4);
  c.p.bias = epilogue & 8;
  c.p.residual = epilogue & 16;
  c.p.relu = epilogue & 32;
  c.x = HostTensor::random(ElemKind::I8, {M, K}, seed).to_i8();
  for (std::size_t i = 0; i < c.x.size(); i += 97) c.x[i] = -128;  // the full s8 range
  c.w = HostTensor::random(ElemKind::T2, {K, N}, seed + 1).to_i8();
  c.xs = HostTensor::random(ElemKind::F32, {M}, seed + 2).to_f32();
  c.ws = HostTensor::random(ElemKind::F32, {c.p.w_scale_per_channel ? N : 1}, seed + 3).to_f32();
  c.bias = HostTensor::random(ElemKind::F32, {N}, seed + 4).to_f32();
  c.res = HostTensor::random(ElemKind::F32, {M, N}, seed + 5).to_f32();
  if (special && M >= 2) {
    c.xs[0] = std::nanf("");  // row 0: NaN through every op (relu keeps it)
    c.xs[1] = -0.0f;          // row 1: -0 or 0; relu gives +0
  }
  c.expect.resize(static_cast<std::size_t>(M * N));
  for (std::int64_t m = 0; m < M; ++m) {
    for (std::int64_t n = 0; n < N; ++n) {
      std::uint32_t acc = 0;
      for (std::int64_t k = 0; k < K; ++k)
        acc += static_cast<std::uint32_t>(c.x[static_cast<std::size_t>(m * K + k)] *
                                          c.w[static_cast<std::size_t>(k * N + n)]);
      volatile float y = static_cast<float>(static_cast<std::int32_t>(acc));  // volatile: no FMA contraction
      if (c.p.x_scale) y = y * c.xs[static_cast<std::size_t>(m)];
      if (c.p.w_scale) y = y * c.ws[c.p.w_scale_per_channel ? static_cast<std::size_t>(n) : 0];
      if (c.p.bias) y = y + c.bias[static_cast<std::size_t>(n)];
      if (c.p.residual) y = y + c.res[static_cast<std::size_t>(m * N + n)];
      if (c.p.relu) y = std::isnan(y) ? y : (y > 0 ? y : 0.0f);
      c.expect[static_cast<std::size_t>(m * N + n)] = y;
    }
  }
  return c;
}

std::vector<float> run_kernel(const TMatMulKernel& kernel, const Case& c, const Parallel& parallel) {
  auto packed = kernel.pack(c.w);
  REQUIRE(packed.ok());
  CHECK(packed.value().signature == kernel.pack_signature());
  std::vector<float> y(static_cast<std::size_t>(c.p.M * c.p.N), std::nanf(""));
  TMatMulArgs args;
  args.x = c.x.data();
  args.w = &packed.value();
  args.x_scale = c.p.x_scale ? c.xs.data() : nullptr;
  args.w_scale = c.p.w_scale ? c.ws.data() : nullptr;
  args.bias = c.p.bias ? c.bias.data() : nullptr;
  args.residual = c.p.residual ? c.res.data() : nullptr;
  args.y = y.data();
  kernel.run(args, parallel);
  return y;
}

void check_bits(const Case& c, const std::vector<float>& got, const std::string& what) {
  int bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &c.expect[i], 4) != 0 && ++bad <= 3)
      FAIL_CHECK(what << ": element " << i << " (m " << i / static_cast<std::size_t>(c.p.N) << ", n "
                      << i % static_cast<std::size_t>(c.p.N) << ") is " << got[i] << ", expected " << c.expect[i]);
  }
  CHECK_MESSAGE(bad == 0, what << ": " << bad << " of " << got.size() << " elements differ");
}

TMatMulConfig amx_config(int mb, int nb, int ku, int threads) {
  TMatMulConfig c;
  c.isa = Isa::Amx;
  c.variant = TMatMulVariant::Amx;
  c.vector_bits = 512;
  c.m_block = mb;
  c.n_block = nb;
  c.k_unroll = ku;
  c.threads = threads;
  return c;
}

std::string describe(const TMatMulConfig& c, const TMatMulProblem& p) {
  return "mb=" + std::to_string(c.m_block) + " nb=" + std::to_string(c.n_block) + " ku=" + std::to_string(c.k_unroll) +
         " t=" + std::to_string(c.threads) + " M=" + std::to_string(p.M) + " K=" + std::to_string(p.K) +
         " N=" + std::to_string(p.N) + " xs=" + std::to_string(p.x_scale) + " ws=" + std::to_string(p.w_scale) +
         (p.w_scale_per_channel ? "/ch" : "") + " b=" + std::to_string(p.bias) + " r=" + std::to_string(p.residual) +
         " relu=" + std::to_string(p.relu);
}

// Blockings (rows, columns) within the 8 tiles: C tiles + A tiles + B tiles <= 8.
constexpr int kBlockings[][2] = {{16, 16}, {32, 32}, {16, 32}, {32, 16}, {16, 48}, {48, 16}};

bool contains(std::span<const std::uint8_t> code, std::initializer_list<std::uint8_t> bytes) {
  return std::search(code.begin(), code.end(), bytes.begin(), bytes.end()) != code.end();
}

}  // namespace

TEST_CASE("tmatmul amx: validate rejects what the generator cannot emit") {
  TMatMulProblem p;
  p.M = 20;
  p.K = 70;
  p.N = 40;
  p.x_kind = ElemKind::I8;
  p.out_kind = ElemKind::F32;
  const TMatMulConfig c = amx_config(32, 32, 1, 1);
  CHECK(detail::validate_amx(p, c).ok());
  TMatMulConfig bad = c;
  bad.isa = Isa::Avx512Vnni;
  CHECK(!detail::validate_amx(p, bad).ok());
  bad = c;
  bad.m_block = 24;
  CHECK(!detail::validate_amx(p, bad).ok());
  bad = c;
  bad.n_block = 64;  // 2 * 4 + 2 + 4 tiles
  CHECK(!detail::validate_amx(p, bad).ok());
  bad = c;
  bad.vector_bits = 256;
  CHECK(!detail::validate_amx(p, bad).ok());
  bad = c;
  bad.split_k = 2;
  CHECK(!detail::validate_amx(p, bad).ok());
  TMatMulProblem q = p;
  q.x_kind = ElemKind::F32;
  CHECK(!detail::validate_amx(q, c).ok());
}

TEST_CASE("tmatmul amx: the real kernel is generated with a full tile configuration") {
  TMatMulProblem p;
  p.M = 33;
  p.K = 257;
  p.N = 63;
  p.x_kind = ElemKind::I8;
  p.out_kind = ElemKind::F32;
  p.x_scale = p.w_scale = p.bias = p.residual = p.relu = true;
  for (const auto& b : kBlockings) {
    const TMatMulConfig c = amx_config(b[0], b[1], 2, 1);
    auto k = detail::create_amx(p, c);
    REQUIRE_MESSAGE(k.ok(), describe(c, p) << ": " << (k.ok() ? "" : k.error().message));
    const auto blobs = k.value()->code();
    REQUIRE(blobs.size() == 1);
    const std::span<const std::uint8_t> code = blobs[0].code;
    CHECK(contains(code, {0xc4, 0xe2, 0x78, 0x49, 0x05}));  // ldtilecfg [rip + disp32]
    CHECK(contains(code, {0xc4, 0xe2, 0x78, 0x49, 0xc0}));  // tilerelease
    CHECK(contains(code, {0xc4, 0xe2, 0x7b, 0x49}));        // tilezero (VEX.F2.0F38 49, vvvv unused)
    // The 64-byte configuration: palette 1, each used tile 16 rows x 64 bytes, the rest 0.
    const int mbt = b[0] / 16, nbt = b[1] / 16, used = mbt * nbt + mbt + nbt;
    std::vector<std::uint8_t> cfg(64, 0);
    cfg[0] = 1;
    for (int t = 0; t < used; ++t) {
      cfg[static_cast<std::size_t>(16 + 2 * t)] = 64;
      cfg[static_cast<std::size_t>(48 + t)] = 16;
    }
    CHECK(std::search(code.begin(), code.end(), cfg.begin(), cfg.end()) != code.end());
    // tdpbssd tmm(c), tmm(a), tmm(b): VEX.128.F2.0F38.W0 5E /r, vvvv = b, reg = c, rm = a.
    const auto vex2 = static_cast<std::uint8_t>(0x03 | ((~(mbt * nbt + mbt) & 0xf) << 3));  // 0x7b-style, vvvv = first B tile
    const auto modrm = static_cast<std::uint8_t>(0xc0 | (0 << 3) | (mbt * nbt));               // C 0, A first A tile
    CHECK(contains(code, {0xc4, 0xe2, vex2, 0x5e, modrm}));
  }
}

TEST_CASE("tmatmul amx: emulated tiles match the reference bit for bit [avx512_vnni]") {
  if (!host_isas().avx512_vnni) {
    MESSAGE("skipped: host lacks AVX512-VNNI (needed by the tile emulation)");
    return;
  }
  struct Shape {
    std::int64_t M, K, N;
  };
  const Shape shapes[] = {{1, 257, 63},  {2, 63, 257},  {3, 5, 5},      {7, 2563, 17}, {16, 64, 16},  {33, 257, 63},
                          {128, 63, 49}, {300, 5, 33},  {1, 1, 1},      {17, 2563, 5}, {16, 129, 257}, {48, 65, 48}};
  std::uint64_t seed = 500;
  int variant = 0;
  for (const Shape& s : shapes) {
    for (int rep = 0; rep < 3; ++rep, ++variant) {
      const Case c = make_case(s.M, s.K, s.N, static_cast<int>((seed * 5) % 64), seed);
      seed += 11;
      const auto& b = kBlockings[variant % std::size(kBlockings)];
      const TMatMulConfig config = amx_config(b[0], b[1], 1 + variant % 3, 1 + variant % 2);
      auto k = detail::create_amx_emulated(c.p, config);
      REQUIRE_MESSAGE(k.ok(), describe(config, c.p) << ": " << (k.ok() ? "" : k.error().message));
      const bool two = rep == 1;
      check_bits(c, run_kernel(*k.value(), c, two ? kTwoThreads : Parallel{}), describe(config, c.p) + (two ? " (2 threads)" : ""));
    }
  }
}

TEST_CASE("tmatmul amx: the tuner's space offers amx below 16 rows, and those candidates are exact [avx512_vnni]") {
  std::uint64_t seed = 900;
  for (std::int64_t M : {1, 3, 8, 15, 16}) {
    const Case c = make_case(M, 300, 70, static_cast<int>(M % 64), seed++);
    std::vector<TMatMulConfig> amx;
    for (const TMatMulConfig& config : search_space(c.p, Isa::Amx, 2))
      if (config.variant == TMatMulVariant::Amx) amx.push_back(config);
    REQUIRE_MESSAGE(!amx.empty(), "M = " << M);
    for (const TMatMulConfig& config : amx) {
      CHECK(config.m_block == 16);  // one tile of rows (the padded block below 16 rows)
      CHECK(detail::validate_amx(c.p, config).ok());
    }
    if (!host_isas().avx512_vnni) continue;  // the tile emulation needs VNNI
    for (const TMatMulConfig& config : {amx.front(), amx.back()}) {
      auto k = detail::create_amx_emulated(c.p, config);
      REQUIRE_MESSAGE(k.ok(), describe(config, c.p) << ": " << (k.ok() ? "" : k.error().message));
      check_bits(c, run_kernel(*k.value(), c, config.threads > 1 ? kTwoThreads : Parallel{}), describe(config, c.p));
    }
  }
}

TEST_CASE("tmatmul amx: emulated tiles, every epilogue combination [avx512_vnni]") {
  if (!host_isas().avx512_vnni) {
    MESSAGE("skipped: host lacks AVX512-VNNI (needed by the tile emulation)");
    return;
  }
  for (int e = 0; e < 64; ++e) {
    if ((e & 4) && !(e & 2)) continue;
    const Case c = make_case(19, 71, 37, e, 900 + static_cast<std::uint64_t>(e), /*special=*/true);
    const auto& b = kBlockings[static_cast<std::size_t>(e) % std::size(kBlockings)];
    const TMatMulConfig config = amx_config(b[0], b[1], 1, 2);
    auto k = detail::create_amx_emulated(c.p, config);
    REQUIRE(k.ok());
    check_bits(c, run_kernel(*k.value(), c, e % 2 ? kTwoThreads : Parallel{}), describe(config, c.p));
  }
}

TEST_CASE("tmatmul amx: emulated tiles agree with ir::interpret on a parsed tmatmul [avx512_vnni]") {
  if (!host_isas().avx512_vnni) {
    MESSAGE("skipped: host lacks AVX512-VNNI (needed by the tile emulation)");
    return;
  }
  const char* text = R"(func @f(%x: i8[20, 70], %w: t2[70, 19], %xs: f32[20, 1], %ws: f32[19], %b: f32[19], %r: f32[20, 19]) -> f32[20, 19] {
^entry:
  %y = tmatmul %x, %w, %xs, %ws, %b, %r {x_scale = true, w_scale = true, bias = true, residual = true, act = relu} : f32[20, 19]
  ret %y
}
)";
  auto m = ir::parse_module(text, "amx.tir");
  REQUIRE_MESSAGE(m.ok(), (m.ok() ? "" : m.error().message));
  const Case c = make_case(20, 70, 19, 63, 4242);
  const std::vector<HostTensor> args = {
      HostTensor::from_i8({20, 70}, c.x),     HostTensor::from_i8({70, 19}, c.w),
      HostTensor::from_f32({20, 1}, c.xs),    HostTensor::from_f32({19}, c.ws),
      HostTensor::from_f32({19}, c.bias),     HostTensor::from_f32({20, 19}, c.res)};
  std::vector<HostTensor> typed = args;
  typed[1].kind = ElemKind::T2;
  auto out = ir::interpret(m.value(), "f", typed, ir::ParamValues{});
  REQUIRE_MESSAGE(out.ok(), (out.ok() ? "" : out.error().message));
  const std::vector<float> ref = out.value()[0].to_f32();
  REQUIRE(ref.size() == c.expect.size());
  CHECK(std::memcmp(ref.data(), c.expect.data(), ref.size() * 4) == 0);  // our reference is the interpreter's
  auto k = detail::create_amx_emulated(c.p, amx_config(32, 16, 2, 2));
  REQUIRE(k.ok());
  check_bits(c, run_kernel(*k.value(), c, kTwoThreads), "interpret case");
}

TEST_CASE("tmatmul amx: real tiles match the reference bit for bit [amx]") {
  if (!host_isas().amx) {
    MESSAGE("skipped: host lacks AMX" << (host_isas().amx_note.empty() ? "" : " (" + host_isas().amx_note + ")"));
    // The code is still generated (for disassembly).
    const Case c = make_case(33, 257, 63, 63, 1);
    CHECK(detail::create_amx(c.p, amx_config(32, 32, 2, 1)).ok());
    return;
  }
  struct Shape {
    std::int64_t M, K, N;
  };
  const Shape shapes[] = {{1, 257, 63}, {16, 64, 16}, {33, 2563, 63}, {128, 257, 257}, {300, 63, 5}, {7, 5, 1}};
  int variant = 0;
  for (const Shape& s : shapes) {
    for (int rep = 0; rep < 2; ++rep, ++variant) {
      const Case c = make_case(s.M, s.K, s.N, (variant * 13) % 64, 77 + static_cast<std::uint64_t>(variant));
      const auto& b = kBlockings[static_cast<std::size_t>(variant) % std::size(kBlockings)];
      const TMatMulConfig config = amx_config(b[0], b[1], 1 + variant % 2, 1 + rep);
      auto k = detail::create_amx(c.p, config);
      REQUIRE(k.ok());
      check_bits(c, run_kernel(*k.value(), c, rep ? kTwoThreads : Parallel{}), describe(config, c.p));
    }
  }
}
