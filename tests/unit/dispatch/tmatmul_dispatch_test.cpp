// SPDX-License-Identifier: Apache-2.0
// tmatmul_dispatch_test.cpp - ternjit/tmatmul.h: every descriptor axis against a straightforward reference.
//
// Each case packs random ternary weights in the descriptor's format (tern2 and tern1.6 by
// formats::pack_ternary, TQ2_0 by encode_tq2_0_block, TQ1_0 as random trit bytes with a
// chosen f16 scale), fills the output with NaN, calls the dispatched kernel and compares
// with a reference computed here in double: y = act(acc * x_scale * w_scale + bias +
// residual), the grouped scales inside the sum. Shapes are odd (K = 37, N = 13) and M = 1.
#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <thread>
#include <vector>

#include "formats/gguf.h"
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
  std::vector<float> blocks;        // GGUF: d[K/256, N]
  std::vector<std::uint8_t> packed; // args.w
  std::vector<float> x;             // the values x holds (bf16-exact for bf16)
  std::vector<std::uint16_t> x_bf16;
  std::vector<std::int8_t> x_i8;
  std::vector<float> xs, s, bias, residual, y;
};

std::uint16_t f16_bits(float v) {  // exact for the powers of two used here
  const int e = static_cast<int>(std::lround(std::log2(v)));
  return static_cast<std::uint16_t>((e + 15) << 10);
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
  a.x = c.d.x == TERNJIT_TMATMUL_X_BF16 ? static_cast<const void*>(c.x_bf16.data())
        : c.d.x == TERNJIT_TMATMUL_X_I8 ? static_cast<const void*>(c.x_i8.data())
                                        : static_cast<const void*>(c.x.data());
  a.x_scale = c.xs.empty() ? nullptr : c.xs.data();
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
  const bool gguf = d.weight == TERNJIT_TMATMUL_W_GGUF_TQ2_0 || d.weight == TERNJIT_TMATMUL_W_GGUF_TQ1_0;
  const std::int64_t group = gguf ? 256 : d.scale == TERNJIT_TMATMUL_SCALE_GROUP ? d.group : K;
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
        if (gguf) gs = c.blocks[static_cast<std::size_t>(g0 / 256 * N + n)];
        else if (d.scale == TERNJIT_TMATMUL_SCALE_GROUP) gs = c.s[static_cast<std::size_t>(g0 / group * N + n)];
        acc += gs * part;
        mag += std::abs(gs) * part_mag;
      }
      if (d.x == TERNJIT_TMATMUL_X_I8) {
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
  const int formats[] = {TERNJIT_TMATMUL_W_TERN2, TERNJIT_TMATMUL_W_TERN1_6, TERNJIT_TMATMUL_W_GGUF_TQ2_0,
                         TERNJIT_TMATMUL_W_GGUF_TQ1_0};
  const int xs[] = {TERNJIT_TMATMUL_X_F32, TERNJIT_TMATMUL_X_BF16, TERNJIT_TMATMUL_X_I8};
  for (int f : formats)
    for (int x : xs) {
      const bool gguf = f >= TERNJIT_TMATMUL_W_GGUF_TQ2_0;
      TMatMulDesc d = TMatMulDispatcher::desc(1, gguf ? 512 : 37, 13);
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
  constexpr int kThreads = 4, kCalls = 12;
  std::vector<std::vector<Case>> done(kThreads);
  std::vector<std::vector<std::int32_t>> status(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < kCalls; ++i) {
        Case c = make_case(d, 1 + i % 4, static_cast<std::uint32_t>(1000 + (t + i) % 3));
        status[t].push_back((*k)(args_of(c)));
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

}  // namespace
}  // namespace ternjit
