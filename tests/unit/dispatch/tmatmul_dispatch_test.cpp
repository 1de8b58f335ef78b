// SPDX-License-Identifier: Apache-2.0
// tmatmul_dispatch_test.cpp - ternjit/tmatmul.h: every descriptor axis against a straightforward reference.
//
// Each case packs random ternary weights in the descriptor's format (tern2 and tern1.6 by
// formats::pack_ternary, TQ2_0 by encode_tq2_0_block, TQ1_0 as random trit bytes with a
// chosen f16 scale, Q2_0 by hand from the block layout of ggml's dequantize_row_q2_0),
// fills the output with NaN, calls the dispatched kernel (or a bound weight's) and
// compares with a reference computed here in double: y = act(acc * x_scale * w_scale +
// bias + residual), the grouped scales inside the sum. An f32 x quantized in the kernel
// (X_F32_ROW_I8) is quantized here by the IR's rule first (quantize_rows). Shapes are odd
// (K = 37, N = 13) and M = 1.
//
// Tolerance of the f32 paths: the kernels sum in double or exactly in int32 and round a
// few times in f32 (the scales, bias, residual, activation), so the error is a few f32 ulps
// (2^-24 each) of the sum of |terms| plus the result; 1e-5 * (sum|terms| + 4) + 1e-6 |y|
// leaves a wide margin. Integer paths (X_I8 against X_F32_ROW_I8) are compared bit for bit.
#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "formats/gguf.h"
#include "ir/numeric.h"
#include "formats/ternary.h"
#include "ternjit/engine.h"
#include "ternjit/tmatmul.h"

namespace ternjit {
namespace {

Engine make_engine(int threads = 1) {
  EngineOptions o;
  o.target = "auto";
  o.threads = threads;
  o.cache_dir = "off";
  auto e = Engine::create(o);
  REQUIRE(e.ok());
  return std::move(e.value());
}

// The caller's buffers of one call and the reference result.
struct Case {
  TMatMulDesc d;
  std::int64_t m = 1;
  std::vector<std::int8_t> w;       // W[K, N] values
  std::vector<float> blocks;        // GGUF: d[K/block, N]
  std::vector<std::uint8_t> packed; // args.w
  std::vector<float> x;             // the values x holds (bf16-exact for bf16; int8 values for the row-i8 kind)
  std::vector<float> x_f32;         // X_F32_ROW_I8: the f32 x the kernel quantizes
  std::vector<std::uint16_t> x_bf16;
  std::vector<std::int8_t> x_i8;
  std::vector<float> xs, s, bias, residual, y;
};

std::uint16_t f16_bits(float v) {  // exact for the powers of two used here
  const int e = static_cast<int>(std::lround(std::log2(v)));
  return static_cast<std::uint16_t>((e + 15) << 10);
}

bool is_gguf(const TMatMulDesc& d) { return d.weight >= TERNJIT_TMATMUL_W_GGUF_TQ2_0; }
std::int64_t gguf_block(const TMatMulDesc& d) { return d.weight == TERNJIT_TMATMUL_W_GGUF_Q2_0 ? 64 : 256; }

// The IR's quantize_int8 per row (ir/README.md), written out: s = max|x| / 127 in f32 (NaN
// for a row holding a NaN or an inf), q = clamp(round_half_even(x / s), -127, 127) with an
// f32 division, 0 when s is 0 or the quotient is NaN.
void quantize_rows(const std::vector<float>& x, std::int64_t rows, std::int64_t cols, std::vector<std::int8_t>* q,
                   std::vector<float>* s) {
  q->assign(x.size(), 0);
  s->assign(static_cast<std::size_t>(rows), 0.0f);
  for (std::int64_t r = 0; r < rows; ++r) {
    float amax = 0;
    bool finite = true;
    for (std::int64_t c = 0; c < cols; ++c) {
      const float v = x[static_cast<std::size_t>(r * cols + c)];
      finite = finite && std::isfinite(v);
      amax = std::max(amax, std::abs(v));
    }
    const float sc = finite ? amax / 127.0f : std::numeric_limits<float>::quiet_NaN();
    (*s)[static_cast<std::size_t>(r)] = sc;
    for (std::int64_t c = 0; c < cols; ++c) {
      const float t = sc == 0 ? 0.0f : x[static_cast<std::size_t>(r * cols + c)] / sc;
      // nearbyint rounds half to even in the default rounding mode.
      (*q)[static_cast<std::size_t>(r * cols + c)] =
          std::isnan(t) ? std::int8_t{0} : static_cast<std::int8_t>(std::clamp(std::nearbyint(t), -127.0f, 127.0f));
    }
  }
}

// One Q2_0 block of 64 codes (value + 1, 0..3) with scale bits `d` (block_q2_0).
void encode_q2_0_block(const std::uint8_t* codes, std::uint16_t d, std::uint8_t* out) {
  std::memcpy(out, &d, 2);  // ggml_half, little-endian
  std::memset(out + 2, 0, 16);
  for (int j = 0; j < 64; ++j) out[2 + j / 4] = static_cast<std::uint8_t>(out[2 + j / 4] | (codes[j] << (2 * (j % 4))));
}

Case make_case(const TMatMulDesc& d, std::int64_t m, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> tern(-1, 1), i8(-127, 127);
  std::uniform_real_distribution<float> uf(-1.0f, 1.0f), pos(0.25f, 2.0f);
  Case c;
  c.d = d;
  c.m = m;
  const std::int64_t K = d.k, N = d.n;
  c.w.resize(static_cast<std::size_t>(K * N));
  for (auto& v : c.w) v = static_cast<std::int8_t>(tern(rng));
  switch (d.weight) {
    case TERNJIT_TMATMUL_W_TERN2: c.packed = formats::pack_ternary(WeightFormat::Tern2, c.w).value(); break;
    case TERNJIT_TMATMUL_W_TERN1_6: c.packed = formats::pack_ternary(WeightFormat::Tern16, c.w).value(); break;
    case TERNJIT_TMATMUL_W_GGUF_Q2_0: {
      // Codes from the values, scale bits drawn from normal f16 numbers (exact in f32).
      const std::int64_t G = K / 64;
      c.blocks.resize(static_cast<std::size_t>(G * N));
      c.packed.resize(static_cast<std::size_t>(N * G) * 18);
      std::uniform_int_distribution<int> mant(0, 1023), expo(10, 18);
      for (std::int64_t n = 0; n < N; ++n)
        for (std::int64_t g = 0; g < G; ++g) {
          const auto bits = static_cast<std::uint16_t>((expo(rng) << 10) | mant(rng));
          c.blocks[static_cast<std::size_t>(g * N + n)] = ir::f16_bits_to_f32(bits);
          std::array<std::uint8_t, 64> codes{};
          for (int e = 0; e < 64; ++e)
            codes[e] = static_cast<std::uint8_t>(c.w[static_cast<std::size_t>((g * 64 + e) * N + n)] + 1);
          encode_q2_0_block(codes.data(), bits, c.packed.data() + static_cast<std::size_t>(n * G + g) * 18);
        }
      break;
    }
    case TERNJIT_TMATMUL_W_GGUF_TQ2_0:
    case TERNJIT_TMATMUL_W_GGUF_TQ1_0: {
      const bool tq2 = d.weight == TERNJIT_TMATMUL_W_GGUF_TQ2_0;
      const auto type = tq2 ? formats::GgufTensorType::TQ2_0 : formats::GgufTensorType::TQ1_0;
      const std::size_t bb = formats::gguf_block_bytes(type);
      const std::int64_t G = K / 256;
      c.blocks.resize(static_cast<std::size_t>(G * N));
      c.packed.resize(static_cast<std::size_t>(N * G) * bb);
      const float scales[] = {0.5f, 1.0f, 2.0f, 0.25f};
      for (std::int64_t n = 0; n < N; ++n)
        for (std::int64_t g = 0; g < G; ++g) {
          const float sc = scales[(n + g) % 4];
          c.blocks[static_cast<std::size_t>(g * N + n)] = sc;
          std::uint8_t* blk = c.packed.data() + static_cast<std::size_t>(n * G + g) * bb;
          if (tq2) {
            std::array<std::int8_t, 256> vals{};
            for (int e = 0; e < 256; ++e) vals[e] = c.w[static_cast<std::size_t>((g * 256 + e) * N + n)];
            formats::encode_tq2_0_block(vals.data(), sc, blk);
          } else {
            // Random trit bytes (every byte decodes), then the values they hold.
            for (std::size_t i = 0; i + 2 < bb; ++i) blk[i] = static_cast<std::uint8_t>(rng());
            const std::uint16_t h = f16_bits(sc);
            std::memcpy(blk + bb - 2, &h, 2);
            std::array<std::uint8_t, 256> codes{};
            float got = 0;
            REQUIRE(formats::gguf_ternary_block(type, blk, codes.data(), &got));
            REQUIRE(got == sc);
            for (int e = 0; e < 256; ++e)
              c.w[static_cast<std::size_t>((g * 256 + e) * N + n)] = static_cast<std::int8_t>(codes[e] - 1);
          }
        }
      break;
    }
    default: FAIL("weight format");
  }
  c.x.resize(static_cast<std::size_t>(m * K));
  for (auto& v : c.x) v = uf(rng);
  if (d.x == TERNJIT_TMATMUL_X_BF16) {
    for (auto& v : c.x) {
      std::uint32_t b;
      std::memcpy(&b, &v, 4);
      b &= 0xffff0000u;  // a bf16 value
      std::memcpy(&v, &b, 4);
      c.x_bf16.push_back(static_cast<std::uint16_t>(b >> 16));
    }
  }
  if (d.x == TERNJIT_TMATMUL_X_I8) {
    for (auto& v : c.x) {
      c.x_i8.push_back(static_cast<std::int8_t>(i8(rng)));
      v = c.x_i8.back();
    }
    for (std::int64_t r = 0; r < m; ++r) c.xs.push_back(pos(rng) / 127);
  }
  if (d.x == TERNJIT_TMATMUL_X_F32_ROW_I8) {
    c.x_f32 = c.x;
    quantize_rows(c.x_f32, m, K, &c.x_i8, &c.xs);
    for (std::size_t i = 0; i < c.x.size(); ++i) c.x[i] = c.x_i8[i];
  }
  if (d.scale == TERNJIT_TMATMUL_SCALE_COLUMN)
    for (std::int64_t n = 0; n < N; ++n) c.s.push_back(pos(rng));
  if (d.scale == TERNJIT_TMATMUL_SCALE_GROUP)
    for (std::int64_t i = 0; i < (K + d.group - 1) / d.group * N; ++i) c.s.push_back(pos(rng));
  if (d.flags & TERNJIT_TMATMUL_BIAS)
    for (std::int64_t n = 0; n < N; ++n) c.bias.push_back(uf(rng));
  if (d.flags & TERNJIT_TMATMUL_RESIDUAL)
    for (std::int64_t i = 0; i < m * N; ++i) c.residual.push_back(uf(rng));
  c.y.assign(static_cast<std::size_t>(m * N), std::numeric_limits<float>::quiet_NaN());
  return c;
}

TMatMulArgs args_of(Case& c) {
  TMatMulArgs a{};
  a.x = c.d.x == TERNJIT_TMATMUL_X_BF16       ? static_cast<const void*>(c.x_bf16.data())
        : c.d.x == TERNJIT_TMATMUL_X_I8         ? static_cast<const void*>(c.x_i8.data())
        : c.d.x == TERNJIT_TMATMUL_X_F32_ROW_I8 ? static_cast<const void*>(c.x_f32.data())
                                                : static_cast<const void*>(c.x.data());
  a.x_scale = c.d.x == TERNJIT_TMATMUL_X_I8 ? c.xs.data() : nullptr;
  a.w = c.packed.data();
  a.w_scale = c.s.empty() ? nullptr : c.s.data();
  a.bias = c.bias.empty() ? nullptr : c.bias.data();
  a.residual = c.residual.empty() ? nullptr : c.residual.data();
  a.y = c.y.data();
  a.m = c.m;
  return a;
}

// Checks c.y against the reference in double.
void check(const Case& c) {
  const TMatMulDesc& d = c.d;
  const std::int64_t K = d.k, N = d.n;
  const bool gguf = is_gguf(d);
  const std::int64_t group = gguf ? gguf_block(d) : d.scale == TERNJIT_TMATMUL_SCALE_GROUP ? d.group : K;
  for (std::int64_t r = 0; r < c.m; ++r)
    for (std::int64_t n = 0; n < N; ++n) {
      double acc = 0, mag = 0;
      for (std::int64_t g0 = 0; g0 < K; g0 += group) {
        double part = 0, part_mag = 0;
        for (std::int64_t k = g0; k < std::min(K, g0 + group); ++k) {
          const double p = c.x[static_cast<std::size_t>(r * K + k)] * c.w[static_cast<std::size_t>(k * N + n)];
          part += p;
          part_mag += std::abs(p);
        }
        double gs = 1;
        if (gguf) gs = c.blocks[static_cast<std::size_t>(g0 / group * N + n)];
        else if (d.scale == TERNJIT_TMATMUL_SCALE_GROUP) gs = c.s[static_cast<std::size_t>(g0 / group * N + n)];
        acc += gs * part;
        mag += std::abs(gs) * part_mag;
      }
      if (d.x == TERNJIT_TMATMUL_X_I8 || d.x == TERNJIT_TMATMUL_X_F32_ROW_I8) {
        acc *= c.xs[static_cast<std::size_t>(r)];
        mag *= c.xs[static_cast<std::size_t>(r)];
      }
      if (d.scale == TERNJIT_TMATMUL_SCALE_COLUMN) {
        acc *= c.s[static_cast<std::size_t>(n)];
        mag *= c.s[static_cast<std::size_t>(n)];
      }
      if (!c.bias.empty()) acc += c.bias[static_cast<std::size_t>(n)];
      if (!c.residual.empty()) acc += c.residual[static_cast<std::size_t>(r * N + n)];
      switch (d.act) {
        case TERNJIT_TMATMUL_ACT_RELU: acc = std::max(acc, 0.0); break;
        case TERNJIT_TMATMUL_ACT_RELU2: acc = std::max(acc, 0.0) * std::max(acc, 0.0); mag *= 2 * (std::abs(acc) + 1); break;
        case TERNJIT_TMATMUL_ACT_SILU: acc = acc / (1 + std::exp(-acc)); break;
        case TERNJIT_TMATMUL_ACT_GELU: acc = 0.5 * acc * (1 + std::erf(acc / std::sqrt(2.0))); break;
        default: break;
      }
      const double got = c.y[static_cast<std::size_t>(r * N + n)];
      const double tol = 1e-5 * (mag + 4) + 1e-6 * std::abs(acc);
      INFO("row " << r << " col " << n << " weight " << d.weight << " x " << d.x << " scale " << d.scale
                  << " flags " << d.flags << " act " << d.act);
      CHECK(std::abs(got - acc) <= tol);
    }
}

constexpr int kFormats[] = {TERNJIT_TMATMUL_W_TERN2, TERNJIT_TMATMUL_W_TERN1_6, TERNJIT_TMATMUL_W_GGUF_TQ2_0,
                            TERNJIT_TMATMUL_W_GGUF_TQ1_0, TERNJIT_TMATMUL_W_GGUF_Q2_0};

// An odd K the format takes: 37, two TQ blocks (512), five Q2_0 blocks (320).
std::int64_t odd_k(int format) {
  return format == TERNJIT_TMATMUL_W_GGUF_Q2_0 ? 320 : format >= TERNJIT_TMATMUL_W_GGUF_TQ2_0 ? 512 : 37;
}

void run_case(TMatMulDispatcher& disp, const TMatMulDesc& d, std::int64_t m, std::uint32_t seed) {
  Case c = make_case(d, m, seed);
  auto k = disp.dispatch(d);
  REQUIRE_MESSAGE(k.ok(), (k.ok() ? "" : render(k.error())));
  const TMatMulArgs a = args_of(c);
  const std::int32_t st = (*k)(a);
  REQUIRE_MESSAGE(st == TERNJIT_OK, ternjit_last_error());
  CHECK(std::string(ternjit_last_error()).empty());
  check(c);
}

TEST_CASE("tmatmul dispatch: every weight format, activation kind, scale, epilogue and activation") {
  Engine engine = make_engine();
  TMatMulDispatcher disp(engine);
  std::uint32_t seed = 1;
  const int xs[] = {TERNJIT_TMATMUL_X_F32, TERNJIT_TMATMUL_X_BF16, TERNJIT_TMATMUL_X_I8, TERNJIT_TMATMUL_X_F32_ROW_I8};
  for (int f : kFormats)
    for (int x : xs) {
      const bool gguf = f >= TERNJIT_TMATMUL_W_GGUF_TQ2_0;
      TMatMulDesc d = TMatMulDispatcher::desc(1, odd_k(f), 13);
      d.weight = static_cast<ternjit_tmatmul_weight>(f);
      d.x = static_cast<ternjit_tmatmul_x>(x);
      run_case(disp, d, 1, seed++);
      d.m = 3;
      d.scale = TERNJIT_TMATMUL_SCALE_COLUMN;
      d.flags = TERNJIT_TMATMUL_BIAS;
      run_case(disp, d, 3, seed++);
      if (!gguf) {
        d.scale = TERNJIT_TMATMUL_SCALE_GROUP;
        d.group = 10;  // 4 groups of K = 37, the last partial
        d.flags = TERNJIT_TMATMUL_RESIDUAL;
        d.act = TERNJIT_TMATMUL_ACT_SILU;
        run_case(disp, d, 3, seed++);
      }
    }
  // Every activation with bias and residual, on the int8 path.
  const int acts[] = {TERNJIT_TMATMUL_ACT_NONE, TERNJIT_TMATMUL_ACT_RELU, TERNJIT_TMATMUL_ACT_RELU2,
                      TERNJIT_TMATMUL_ACT_SILU, TERNJIT_TMATMUL_ACT_GELU};
  for (int act : acts) {
    TMatMulDesc d = TMatMulDispatcher::desc(5, 64, 33);
    d.x = TERNJIT_TMATMUL_X_I8;
    d.scale = TERNJIT_TMATMUL_SCALE_COLUMN;
    d.flags = TERNJIT_TMATMUL_BIAS | TERNJIT_TMATMUL_RESIDUAL;
    d.act = static_cast<ternjit_tmatmul_act>(act);
    run_case(disp, d, 5, seed++);
  }
}

TEST_CASE("tmatmul dispatch: any M, threads, a hit returns the same kernel") {
  Engine engine = make_engine();
  TMatMulDispatcher disp(engine);
  for (int x : {TERNJIT_TMATMUL_X_I8, TERNJIT_TMATMUL_X_F32}) {
    TMatMulDesc d = TMatMulDispatcher::desc(TERNJIT_TMATMUL_ANY_M, 96, 17);
    d.m_max = 9;
    d.x = static_cast<ternjit_tmatmul_x>(x);
    d.flags = TERNJIT_TMATMUL_RESIDUAL;
    for (std::int64_t m : {1, 2, 5, 9, 3}) run_case(disp, d, m, static_cast<std::uint32_t>(100 + m));
    auto a = disp.dispatch(d), b = disp.dispatch(d);
    REQUIRE(a.ok());
    REQUIRE(b.ok());
    CHECK((a->fn == b->fn));
    CHECK(a->state == b->state);
  }
  TMatMulDesc t = TMatMulDispatcher::desc(2, 40, 8);
  t.threads = 2;
  run_case(disp, t, 2, 7);
  t.threads = 0;
  auto k0 = disp.dispatch(t);
  t.threads = 2;
  auto k2 = disp.dispatch(t);
  REQUIRE(k0.ok());
  REQUIRE(k2.ok());
  CHECK(k0->state != k2->state);
}

TEST_CASE("tmatmul dispatch: a weight changed in place is read again") {
  Engine engine = make_engine();
  TMatMulDispatcher disp(engine);
  TMatMulDesc d = TMatMulDispatcher::desc(2, 20, 9);
  d.x = TERNJIT_TMATMUL_X_I8;
  Case c = make_case(d, 2, 3);
  auto k = disp.dispatch(d);
  REQUIRE(k.ok());
  REQUIRE((*k)(args_of(c)) == TERNJIT_OK);
  check(c);
  // New values in the same buffer (same address).
  for (auto& v : c.w) v = static_cast<std::int8_t>(v == 1 ? -1 : v + 1);
  const auto repacked = formats::pack_ternary(WeightFormat::Tern2, c.w).value();
  std::memcpy(c.packed.data(), repacked.data(), repacked.size());
  c.y.assign(c.y.size(), std::numeric_limits<float>::quiet_NaN());
  REQUIRE((*k)(args_of(c)) == TERNJIT_OK);
  check(c);
  // Five different weights in turn (more than a kernel keeps bound), then the first again.
  std::vector<Case> cases;
  for (std::uint32_t s = 10; s < 15; ++s) cases.push_back(make_case(d, 2, s));
  for (int round = 0; round < 2; ++round)
    for (Case& ci : cases) {
      ci.y.assign(ci.y.size(), std::numeric_limits<float>::quiet_NaN());
      REQUIRE((*k)(args_of(ci)) == TERNJIT_OK);
      check(ci);
    }
}

// 4 threads making 12 calls each at once: call(t, i) runs call i of thread t and returns its
// status with its case; each is checked after all joined.
template <class Call>
void call_from_threads(Call call) {
  constexpr int kThreads = 4, kCalls = 12;
  std::vector<std::vector<Case>> done(kThreads);
  std::vector<std::vector<std::int32_t>> status(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < kCalls; ++i) {
        auto [st, c] = call(t, i);
        status[t].push_back(st);
        done[t].push_back(std::move(c));
      }
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t)
    for (int i = 0; i < kCalls; ++i) {
      CHECK(status[t][i] == TERNJIT_OK);
      check(done[t][i]);
    }
}

TEST_CASE("tmatmul dispatch: threads calling one kernel with alternating weights") {
  Engine engine = make_engine(2);
  TMatMulDispatcher disp(engine);
  TMatMulDesc d = TMatMulDispatcher::desc(TERNJIT_TMATMUL_ANY_M, 64, 24);
  d.m_max = 4;
  d.x = TERNJIT_TMATMUL_X_I8;
  d.scale = TERNJIT_TMATMUL_SCALE_COLUMN;
  auto k = disp.dispatch(d);
  REQUIRE(k.ok());
  // Per thread and call: its own case (weights one of 3, m = 1 + call % 4), kept for the check.
  call_from_threads([&](int t, int i) {
    Case c = make_case(d, 1 + i % 4, static_cast<std::uint32_t>(1000 + (t + i) % 3));
    return std::pair{(*k)(args_of(c)), std::move(c)};
  });
}

TEST_CASE("tmatmul dispatch: refused descriptors and calls") {
  Engine engine = make_engine();
  TMatMulDispatcher disp(engine);
  auto code = [&](const TMatMulDesc& d) {
    auto k = disp.dispatch(d);
    return k.ok() ? ErrorCode::Internal : k.error().code;
  };
  TMatMulDesc d = TMatMulDispatcher::desc(1, 512, 8);
  d.weight = TERNJIT_TMATMUL_W_GGUF_TQ2_0;
  d.scale = TERNJIT_TMATMUL_SCALE_GROUP;
  d.group = 128;
  CHECK(code(d) == ErrorCode::Unsupported);  // two grouped scales
  d.scale = TERNJIT_TMATMUL_SCALE_NONE;
  d.group = 0;
  d.k = 300;
  CHECK(code(d) == ErrorCode::InvalidArgument);  // K % 256
  TMatMulDesc e = TMatMulDispatcher::desc(1, 0, 8);
  CHECK(code(e) == ErrorCode::InvalidArgument);
  e = TMatMulDispatcher::desc(1, 1 << 20, 1 << 20);
  CHECK(code(e) == ErrorCode::InvalidArgument);  // k * n above 2^34
  e = TMatMulDispatcher::desc(0, 8, 8);
  CHECK(code(e) == ErrorCode::InvalidArgument);
  e = TMatMulDispatcher::desc(TERNJIT_TMATMUL_ANY_M, 8, 8);
  CHECK(code(e) == ErrorCode::InvalidArgument);  // no m_max
  e = TMatMulDispatcher::desc(1, 8, 8);
  e.group = 4;
  CHECK(code(e) == ErrorCode::InvalidArgument);  // a group without SCALE_GROUP
  e = TMatMulDispatcher::desc(1, 8, 8);
  const int bad = 9;
  std::memcpy(&e.act, &bad, sizeof bad);
  CHECK(code(e) == ErrorCode::InvalidArgument);
  e = TMatMulDispatcher::desc(1, 8, 8);
  e.struct_size = 8;
  CHECK(code(e) == ErrorCode::InvalidArgument);

  // Calls that do not match the descriptor.
  TMatMulDesc ok = TMatMulDispatcher::desc(2, 16, 4);
  ok.flags = TERNJIT_TMATMUL_BIAS;
  Case c = make_case(ok, 2, 5);
  auto k = disp.dispatch(ok);
  REQUIRE(k.ok());
  TMatMulArgs a = args_of(c);
  a.bias = nullptr;
  CHECK((*k)(a) == TERNJIT_INVALID_ARGUMENT);
  CHECK(std::string(ternjit_last_error()).find("args.bias is null") != std::string::npos);
  a = args_of(c);
  a.m = 3;
  CHECK((*k)(a) == TERNJIT_INVALID_ARGUMENT);
  a = args_of(c);
  a.x_scale = c.bias.data();
  CHECK((*k)(a) == TERNJIT_INVALID_ARGUMENT);
  CHECK(std::isnan(c.y[0]));  // nothing written
  CHECK(k->fn(k->state, nullptr) == TERNJIT_INVALID_ARGUMENT);
  CHECK((*k)(args_of(c)) == TERNJIT_OK);
  CHECK(std::string(ternjit_last_error()).empty());
}


// Outputs of two computations of the int8 case `c` (NaN equal to NaN): bit-equal, except
// that a GGUF weight's per-block scales may be summed in f32 in any order (ir/README.md,
// tmatmul: x86 adds the groups' scaled sums in f32, the reference in double), which the IR
// bounds by (G + 1) 2^-24 sum_i |s_i p_i| before the epilogue; here twice that, times the
// row and column scales the epilogue applies (act none), plus 2^-22 |y| for its roundings.
void check_same(const Case& c, const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  const TMatMulDesc& d = c.d;
  const std::int64_t K = d.k, N = d.n;
  const bool grouped = is_gguf(d);
  for (std::size_t i = 0; i < a.size(); ++i) {
    INFO("element " << i << ": " << a[i] << " vs " << b[i]);
    if (std::isnan(a[i]) || std::isnan(b[i]) || !grouped) {
      CHECK(((std::isnan(a[i]) && std::isnan(b[i])) || std::memcmp(&a[i], &b[i], sizeof(float)) == 0));
      continue;
    }
    REQUIRE(d.act == TERNJIT_TMATMUL_ACT_NONE);
    const auto r = static_cast<std::int64_t>(i) / N, n = static_cast<std::int64_t>(i) % N;
    const std::int64_t g = gguf_block(d), G = K / g;
    double sum = 0;
    for (std::int64_t gi = 0; gi < G; ++gi) {
      std::int64_t p = 0;
      for (std::int64_t k = gi * g; k < (gi + 1) * g; ++k)
        p += c.x_i8[static_cast<std::size_t>(r * K + k)] * c.w[static_cast<std::size_t>(k * N + n)];
      sum += std::abs(c.blocks[static_cast<std::size_t>(gi * N + n)] * static_cast<double>(p));
    }
    double bound =
        2.0 * static_cast<double>(G + 1) * std::ldexp(sum, -24) * std::abs(c.xs[static_cast<std::size_t>(r)]);
    if (!c.s.empty()) bound *= std::abs(c.s[static_cast<std::size_t>(n)]);
    CHECK(std::abs(static_cast<double>(a[i]) - b[i]) <= bound + std::ldexp(std::abs(static_cast<double>(a[i])), -22));
  }
}

TEST_CASE("tmatmul dispatch: x f32 quantized per row in the kernel is the int8 kind of the rows quantized by hand") {
  for (int threads : {1, 2}) {
    Engine engine = make_engine(threads);
    TMatMulDispatcher disp(engine);
    std::uint32_t seed = 300;
    for (int f : kFormats)
      for (std::int64_t m : {1, 6}) {
        TMatMulDesc d = TMatMulDispatcher::desc(m, odd_k(f), 13);
        d.weight = static_cast<ternjit_tmatmul_weight>(f);
        d.x = TERNJIT_TMATMUL_X_F32_ROW_I8;
        if (m > 1) {
          d.scale = TERNJIT_TMATMUL_SCALE_COLUMN;
          d.flags = TERNJIT_TMATMUL_BIAS | TERNJIT_TMATMUL_RESIDUAL;
          // relu^2 where the comparison is bit for bit (check_same).
          if (!is_gguf(d)) d.act = TERNJIT_TMATMUL_ACT_RELU2;
        }
        Case c = make_case(d, m, seed++);
        if (m > 1) {
          // Row 1 all zero (s = 0), row 2 with a NaN, row 3 with an inf (s = NaN: the row's
          // outputs NaN), row 4 with a tie: 63.5 / (127 / 127) rounds to 64 (even).
          const auto K = static_cast<std::size_t>(d.k);
          std::fill(c.x_f32.begin() + K, c.x_f32.begin() + 2 * K, 0.0f);
          c.x_f32[2 * K + 3] = std::numeric_limits<float>::quiet_NaN();
          c.x_f32[3 * K + 1] = -std::numeric_limits<float>::infinity();
          for (std::size_t i = 4 * K; i < 5 * K; ++i) c.x_f32[i] = static_cast<float>(i % 3) - 1.0f;
          c.x_f32[4 * K] = 127.0f;
          c.x_f32[4 * K + 1] = 63.5f;
        }
        Case hand = c;  // the same call as int8 x with the rows quantized here
        quantize_rows(c.x_f32, m, d.k, &hand.x_i8, &hand.xs);
        hand.d.x = TERNJIT_TMATMUL_X_I8;
        if (m > 1) {
          CHECK(hand.xs[1] == 0.0f);
          CHECK(std::isnan(hand.xs[2]));
          CHECK(std::isnan(hand.xs[3]));
          CHECK(hand.x_i8[static_cast<std::size_t>(4 * d.k + 1)] == 64);
        }
        auto k = disp.dispatch(d);
        auto k8 = disp.dispatch(hand.d);
        REQUIRE_MESSAGE(k.ok(), (k.ok() ? "" : render(k.error())));
        REQUIRE_MESSAGE(k8.ok(), (k8.ok() ? "" : render(k8.error())));
        REQUIRE_MESSAGE((*k)(args_of(c)) == TERNJIT_OK, ternjit_last_error());
        REQUIRE_MESSAGE((*k8)(args_of(hand)) == TERNJIT_OK, ternjit_last_error());
        INFO("format " << f << " m " << m << " threads " << threads);
        check_same(hand, c.y, hand.y);
        if (m > 1) {
          for (std::int64_t n = 0; n < d.n; ++n) {
            CHECK(std::isnan(c.y[static_cast<std::size_t>(2 * d.n + n)]));
            CHECK(std::isnan(c.y[static_cast<std::size_t>(3 * d.n + n)]));
          }
        } else {
          check(c);  // and the double reference of the quantized rows
        }
        // The reference target computes the same layer.
        EngineOptions o;
        o.target = "reference";
        o.threads = threads;
        o.cache_dir = "off";
        auto ref_engine = Engine::create(o);
        REQUIRE(ref_engine.ok());
        TMatMulDispatcher ref(*ref_engine);
        auto kr = ref.dispatch(d);
        REQUIRE_MESSAGE(kr.ok(), (kr.ok() ? "" : render(kr.error())));
        Case r = c;
        r.y.assign(r.y.size(), std::numeric_limits<float>::quiet_NaN());
        REQUIRE_MESSAGE((*kr)(args_of(r)) == TERNJIT_OK, ternjit_last_error());
        check_same(hand, c.y, r.y);
      }
  }
}

TEST_CASE("tmatmul dispatch: GGUF Q2_0 blocks are read as dequantize_row_q2_0 reads them") {
  // (formats::gguf_q2_0_block alone: tests/unit/formats/gguf_test.cpp.)
  Engine engine = make_engine();
  TMatMulDispatcher disp(engine);
  std::uint32_t seed = 500;
  for (std::int64_t K : {64, 320})
    for (std::int64_t m : {1, 3}) {
      TMatMulDesc d = TMatMulDispatcher::desc(m, K, 7);
      d.weight = TERNJIT_TMATMUL_W_GGUF_Q2_0;
      Case c = make_case(d, m, seed++);
      // The reference from the bytes alone: sum_k x[k] * (code - 1) * d, in double.
      std::vector<double> want(static_cast<std::size_t>(m * d.n), 0.0);
      const std::int64_t G = K / 64;
      for (std::int64_t r = 0; r < m; ++r)
        for (std::int64_t n = 0; n < d.n; ++n)
          for (std::int64_t k = 0; k < K; ++k) {
            const std::uint8_t* b = c.packed.data() + static_cast<std::size_t>(n * G + k / 64) * 18;
            std::uint16_t bits;
            std::memcpy(&bits, b, 2);
            const int q = (b[2 + (k % 64) / 4] >> (2 * (k % 4))) & 3;
            want[static_cast<std::size_t>(r * d.n + n)] +=
                static_cast<double>(c.x[static_cast<std::size_t>(r * K + k)]) * (q - 1) * ir::f16_bits_to_f32(bits);
          }
      auto k = disp.dispatch(d);
      REQUIRE(k.ok());
      REQUIRE_MESSAGE((*k)(args_of(c)) == TERNJIT_OK, ternjit_last_error());
      for (std::size_t i = 0; i < want.size(); ++i) {
        // |x| < 1 and |d| < 2^4 (exponent field <= 18): the terms' magnitudes sum below 16 K.
        CHECK(std::abs(c.y[i] - want[i]) <= 1e-5 * (16.0 * static_cast<double>(K) + 4) + 1e-6 * std::abs(want[i]));
      }
      check(c);
    }
  // Code 3 (+2) anywhere is refused, per call and at bind, naming the block and row.
  TMatMulDesc d = TMatMulDispatcher::desc(1, 320, 5);
  d.weight = TERNJIT_TMATMUL_W_GGUF_Q2_0;
  Case c = make_case(d, 1, 7);
  c.packed[static_cast<std::size_t>(2 * 5 + 3) * 18 + 2 + 9] |= 0x30;  // row 2, block 3, element 38
  auto b = disp.bind(d, c.packed.data(), c.packed.size(), nullptr, nullptr);
  REQUIRE_FALSE(b.ok());
  CHECK(b.error().code == ErrorCode::InvalidInput);
  CHECK(b.error().message.find("Q2_0 weight's block 3 of row 2 holds code 3") != std::string::npos);
  auto k = disp.dispatch(d);
  REQUIRE(k.ok());
  CHECK((*k)(args_of(c)) == TERNJIT_INVALID_INPUT);
  CHECK(std::string(ternjit_last_error()).find("block 3 of row 2") != std::string::npos);
  CHECK(std::isnan(c.y[0]));
  d.k = 96;
  CHECK(disp.dispatch(d).error().code == ErrorCode::InvalidArgument);  // K % 64
}

// Binds c's weight, scale and bias from copies that are overwritten and freed before the calls.
Result<TMatMulBound> bind_from_copies(TMatMulDispatcher& disp, const Case& c) {
  auto w = std::make_unique<std::vector<std::uint8_t>>(c.packed);
  auto s = std::make_unique<std::vector<float>>(c.s);
  auto bias = std::make_unique<std::vector<float>>(c.bias);
  auto b = disp.bind(c.d, w->data(), w->size(), s->empty() ? nullptr : s->data(),
                     bias->empty() ? nullptr : bias->data());
  std::fill(w->begin(), w->end(), std::uint8_t{0xff});
  std::fill(s->begin(), s->end(), std::numeric_limits<float>::quiet_NaN());
  std::fill(bias->begin(), bias->end(), std::numeric_limits<float>::quiet_NaN());
  return b;
}

TMatMulArgs bound_args(Case& c) {
  TMatMulArgs a = args_of(c);
  a.w = nullptr;
  a.w_scale = nullptr;
  a.bias = nullptr;
  return a;
}

TEST_CASE("tmatmul dispatch: bound weights, every format, calls pass x only") {
  Engine engine = make_engine();
  TMatMulDispatcher disp(engine);
  std::uint32_t seed = 700;
  const int xs[] = {TERNJIT_TMATMUL_X_F32, TERNJIT_TMATMUL_X_I8, TERNJIT_TMATMUL_X_F32_ROW_I8};
  for (int f : kFormats)
    for (int x : xs) {
      TMatMulDesc d = TMatMulDispatcher::desc(TERNJIT_TMATMUL_ANY_M, odd_k(f), 13);
      d.m_max = 6;
      d.weight = static_cast<ternjit_tmatmul_weight>(f);
      d.x = static_cast<ternjit_tmatmul_x>(x);
      d.scale = TERNJIT_TMATMUL_SCALE_COLUMN;
      d.flags = TERNJIT_TMATMUL_BIAS;
      Case first = make_case(d, 1, seed);
      auto b = bind_from_copies(disp, first);
      REQUIRE_MESSAGE(b.ok(), (b.ok() ? "" : render(b.error())));
      // Resident: at least the 2-bit stored weight, and the weight not kept as the caller's bytes only.
      CHECK(b->bytes() >= static_cast<std::size_t>(d.k * d.n / 4));
      const TMatMulKernel k = b->kernel();
      for (std::int64_t m : {1, 6, 4}) {
        Case c = make_case(d, m, seed);  // the same weight (same seed), this call's rows
        c.s = first.s;                   // drawn after x: as bound
        c.bias = first.bias;
        INFO("format " << f << " x " << x << " m " << m);
        REQUIRE_MESSAGE(k(bound_args(c)) == TERNJIT_OK, ternjit_last_error());
        check(c);
      }
      ++seed;
    }
  // A second weight of one descriptor binds beside the first; each keeps its own.
  TMatMulDesc d = TMatMulDispatcher::desc(3, 512, 9);
  d.weight = TERNJIT_TMATMUL_W_GGUF_TQ2_0;
  Case c1 = make_case(d, 3, 1), c2 = make_case(d, 3, 2);
  auto b1 = bind_from_copies(disp, c1), b2 = bind_from_copies(disp, c2);
  REQUIRE(b1.ok());
  REQUIRE(b2.ok());
  REQUIRE(b1->kernel()(bound_args(c1)) == TERNJIT_OK);
  REQUIRE(b2->kernel()(bound_args(c2)) == TERNJIT_OK);
  check(c1);
  check(c2);
  // Moved, it still runs.
  TMatMulBound moved = std::move(b1).value();
  c1.y.assign(c1.y.size(), std::numeric_limits<float>::quiet_NaN());
  REQUIRE(moved.kernel()(bound_args(c1)) == TERNJIT_OK);
  check(c1);
}

TEST_CASE("tmatmul dispatch: threads calling one bound weight") {
  Engine engine = make_engine(2);
  TMatMulDispatcher disp(engine);
  TMatMulDesc d = TMatMulDispatcher::desc(TERNJIT_TMATMUL_ANY_M, 64, 24);
  d.m_max = 4;
  d.x = TERNJIT_TMATMUL_X_F32_ROW_I8;
  d.flags = TERNJIT_TMATMUL_RESIDUAL;
  auto b = bind_from_copies(disp, make_case(d, 1, 9));
  REQUIRE(b.ok());
  const TMatMulKernel k = b->kernel();
  call_from_threads([&](int t, int i) {
    Case c = make_case(d, 1 + (t + i) % 4, 9);
    return std::pair{k(bound_args(c)), std::move(c)};
  });
}

TEST_CASE("tmatmul dispatch: refused binds and bound calls") {
  Engine engine = make_engine();
  TMatMulDispatcher disp(engine);
  TMatMulDesc d = TMatMulDispatcher::desc(2, 20, 9);
  d.scale = TERNJIT_TMATMUL_SCALE_COLUMN;
  Case c = make_case(d, 2, 4);
  auto code = [&](const void* w, std::size_t n, const float* s, const float* bias) {
    auto b = disp.bind(d, w, n, s, bias);
    return b.ok() ? ErrorCode::Internal : b.error().code;
  };
  CHECK(code(nullptr, c.packed.size(), c.s.data(), nullptr) == ErrorCode::InvalidArgument);
  CHECK(code(c.packed.data(), c.packed.size() - 1, c.s.data(), nullptr) == ErrorCode::InvalidArgument);
  CHECK(code(c.packed.data(), c.packed.size() + 1, c.s.data(), nullptr) == ErrorCode::InvalidArgument);
  CHECK(code(c.packed.data(), c.packed.size(), nullptr, nullptr) == ErrorCode::InvalidArgument);
  CHECK(code(c.packed.data(), c.packed.size(), c.s.data(), c.s.data()) == ErrorCode::InvalidArgument);
  std::vector<std::uint8_t> bad = c.packed;
  bad[3] = 0xff;  // tern2 code 3
  CHECK(code(bad.data(), bad.size(), c.s.data(), nullptr) == ErrorCode::InvalidInput);
  TMatMulDesc e = d;
  e.k = 0;
  CHECK(disp.bind(e, c.packed.data(), c.packed.size(), c.s.data(), nullptr).error().code ==
        ErrorCode::InvalidArgument);

  auto b = disp.bind(d, c.packed.data(), c.packed.size(), c.s.data(), nullptr);
  REQUIRE(b.ok());
  const TMatMulKernel k = b->kernel();
  TMatMulArgs a = args_of(c);  // with w and w_scale: refused
  CHECK(k(a) == TERNJIT_INVALID_ARGUMENT);
  CHECK(std::string(ternjit_last_error()).find("args.w is set but the weight is bound") != std::string::npos);
  a = bound_args(c);
  a.w_scale = c.s.data();
  CHECK(k(a) == TERNJIT_INVALID_ARGUMENT);
  a = bound_args(c);
  a.m = 3;
  CHECK(k(a) == TERNJIT_INVALID_ARGUMENT);
  CHECK(std::isnan(c.y[0]));
  CHECK(k.fn(k.state, nullptr) == TERNJIT_INVALID_ARGUMENT);
  CHECK(k(bound_args(c)) == TERNJIT_OK);
  CHECK(std::string(ternjit_last_error()).empty());
  check(c);
}

// c's TQ2_0 weight re-encoded with one scale per column (as BitNet's files are: the bound
// weight takes the column-scale kernel), block 1 of column 2 all zeros with another finite
// scale (it multiplies nothing: still one scale), and, with `nan_block`, block 1 of column 0
// all zeros with a NaN scale (not one scale: the block sum 0 * NaN is NaN, as ggml computes).
void one_scale_per_column(Case& c, bool nan_block) {
  const std::int64_t K = c.d.k, N = c.d.n, G = K / 256;
  const float scales[] = {0.5f, 1.0f, 2.0f, 0.25f};
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t g = 0; g < G; ++g) {
      float sc = scales[n % 4];
      const bool zero_block = g == 1 && (n == 2 || (nan_block && n == 0));
      if (zero_block) {
        sc = n == 2 ? 8.0f : std::numeric_limits<float>::quiet_NaN();
        for (int e = 0; e < 256; ++e) c.w[static_cast<std::size_t>((g * 256 + e) * N + n)] = 0;
      }
      c.blocks[static_cast<std::size_t>(g * N + n)] = sc;
      std::array<std::int8_t, 256> vals{};
      for (int e = 0; e < 256; ++e) vals[e] = c.w[static_cast<std::size_t>((g * 256 + e) * N + n)];
      formats::encode_tq2_0_block(vals.data(), sc, c.packed.data() + static_cast<std::size_t>(n * G + g) * 66);
    }
}

TEST_CASE("tmatmul dispatch: a GGUF weight with one scale per column computes as the block form does") {
  Engine engine = make_engine(2);
  TMatMulDispatcher disp(engine);
  for (int x : {TERNJIT_TMATMUL_X_F32, TERNJIT_TMATMUL_X_F32_ROW_I8})
    for (bool nan_block : {false, true}) {
      TMatMulDesc d = TMatMulDispatcher::desc(TERNJIT_TMATMUL_ANY_M, 768, 11);
      d.m_max = 8;
      d.weight = TERNJIT_TMATMUL_W_GGUF_TQ2_0;
      d.x = static_cast<ternjit_tmatmul_x>(x);
      Case first = make_case(d, 1, 901);
      one_scale_per_column(first, nan_block);
      auto b = bind_from_copies(disp, first);
      REQUIRE_MESSAGE(b.ok(), (b.ok() ? "" : render(b.error())));
      for (std::int64_t m : {1, 5}) {
        Case c = make_case(d, m, 901);
        one_scale_per_column(c, nan_block);
        INFO("x " << x << " m " << m << " NaN block " << nan_block);
        REQUIRE_MESSAGE(b->kernel()(bound_args(c)) == TERNJIT_OK, ternjit_last_error());
        if (!nan_block) {
          check(c);
          continue;
        }
        // Column 0 is NaN in every row (its NaN-scaled block of zeros); the others as the reference.
        for (std::int64_t r = 0; r < m; ++r) {
          CHECK(std::isnan(c.y[static_cast<std::size_t>(r * d.n)]));
          c.y[static_cast<std::size_t>(r * d.n)] = 0;
        }
        for (std::int64_t r = 0; r < m; ++r) CHECK(std::isfinite(c.y[static_cast<std::size_t>(r * d.n + 1)]));
      }
    }
}

}  // namespace
}  // namespace ternjit
