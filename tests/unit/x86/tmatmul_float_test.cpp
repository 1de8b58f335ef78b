// SPDX-License-Identifier: Apache-2.0
// tmatmul_float_test.cpp - the Float tmatmul kernels (f32/bf16/f16 x) against the reference semantics.
//
// Tolerance (sound, per element): the kernel sums K products in f32 in ascending k (the
// reference in double, exactly for these sizes up to 2^-53 relative), so before the
// epilogue |kernel - exact| <= gamma_K * S with S = sum_k |x w| and gamma_K = K u / (1 - K u),
// u = 2^-24 (Higham, recursive summation; each FMA rounds once). Rounding the two sums to
// the out kind adds at most one ulp of the kind at that magnitude; each epilogue op then
// scales the bound (mul by s: |s| e) and adds one ulp of the kind at the result's
// magnitude (both sides round their own value; monotone rounding moves each by <= ulp/2);
// relu does not grow it. The ulp is taken one binade up (2 |v| + e) to cover a result
// near a power of two. Anything beyond this bound is a bug, not rounding.
#include <doctest/doctest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "ir/builder.h"
#include "ir/interpret.h"
#include "ir/parse.h"
#include "ir/tensor.h"
#include "targets/x86/isa.h"
#include "targets/x86/tmatmul_internal.h"
#include "tests/unit/x86/x86_testing.h"

namespace {

using namespace ternjit;
using namespace ternjit::targets::x86;
using ternjit::ir::HostTensor;

const Parallel kTwoThreads = testing::std_threads(2);

struct Epilogue {
  bool x_scale = false, w_scale = false, per_channel = false, bias = false, residual = false, relu = false;
};

// Every combination of the epilogue flags, by index.
Epilogue epilogue_combo(int i) {
  Epilogue e;
  e.x_scale = i & 1;
  e.w_scale = i & 2;
  e.per_channel = e.w_scale && (i & 4);
  e.bias = i & 8;
  e.residual = i & 16;
  e.relu = i & 32;
  return e;
}

// One ulp of `kind` at magnitude v.
double ulp(double v, ElemKind kind) {
  const int p = kind == ElemKind::F32 ? 24 : kind == ElemKind::BF16 ? 8 : 11;
  const int emin = kind == ElemKind::F16 ? -14 : -126;
  int e = emin;
  if (v > 0 && std::isfinite(v)) e = std::max(emin, std::ilogb(v));
  return std::ldexp(1.0, e - (p - 1));
}

// The inputs of one problem and the reference result with its error bound.
struct Case {
  TMatMulProblem p;
  HostTensor x, w, xs, ws, bias, res;
  std::vector<std::int8_t> w_i8;
  std::vector<double> expect, bound;
};

Case make_case(std::int64_t M, std::int64_t K, std::int64_t N, ElemKind kind, const Epilogue& e, std::uint64_t seed) {
  Case c;
  c.p.M = M;
  c.p.K = K;
  c.p.N = N;
  c.p.x_kind = kind;
  c.p.out_kind = kind;
  c.p.x_scale = e.x_scale;
  c.p.w_scale = e.w_scale;
  c.p.w_scale_per_channel = e.per_channel;
  c.p.bias = e.bias;
  c.p.residual = e.residual;
  c.p.relu = e.relu;
  c.x = HostTensor::random(kind, {M, K}, seed);
  c.w = HostTensor::random(ElemKind::T2, {K, N}, seed + 1);
  c.xs = HostTensor::random(ElemKind::F32, {M, 1}, seed + 2);
  c.ws = HostTensor::random(ElemKind::F32, {e.per_channel ? N : 1}, seed + 3);
  if (!e.per_channel) c.ws.shape = {};
  c.bias = HostTensor::random(kind, {N}, seed + 4);
  c.res = HostTensor::random(kind, {M, N}, seed + 5);
  c.w_i8 = c.w.to_i8();

  // The reference, computed like ir/interpret.cpp's tmatmul: double sum in ascending k,
  // rounded once, then each epilogue op on the kind-rounded operands in f32, rounded.
  const double u = std::ldexp(1.0, -24);
  const double gamma = static_cast<double>(K) * u / (1.0 - static_cast<double>(K) * u);
  auto rk = [&](double v) { return ir::round_to_kind(v, kind); };
  c.expect.resize(static_cast<std::size_t>(M * N));
  c.bound.resize(c.expect.size());
  for (std::int64_t m = 0; m < M; ++m) {
    for (std::int64_t n = 0; n < N; ++n) {
      double acc = 0, mag = 0;
      for (std::int64_t k = 0; k < K; ++k) {
        const double xv = c.x.data[static_cast<std::size_t>(m * K + k)];
        const double wv = c.w.data[static_cast<std::size_t>(k * N + n)];
        acc += xv * wv;
        mag += std::fabs(xv * wv);
      }
      double y = rk(acc);
      double err = gamma * mag;
      err += ulp(2 * std::fabs(y) + err, kind);
      auto mul = [&](double s) {
        s = rk(s);
        y = rk(static_cast<double>(static_cast<float>(y) * static_cast<float>(s)));
        err = std::fabs(s) * err;
        err += ulp(2 * std::fabs(y) + err, kind);
      };
      auto add = [&](double b) {
        y = rk(static_cast<double>(static_cast<float>(y) + static_cast<float>(rk(b))));
        err += ulp(2 * std::fabs(y) + err, kind);
      };
      if (e.x_scale) mul(c.xs.data[static_cast<std::size_t>(m)]);
      if (e.w_scale) mul(c.ws.data[e.per_channel ? static_cast<std::size_t>(n) : 0]);
      if (e.bias) add(c.bias.data[static_cast<std::size_t>(n)]);
      if (e.residual) add(c.res.data[static_cast<std::size_t>(m * N + n)]);
      if (e.relu) y = std::isnan(y) ? y : (y > 0 ? y : 0.0);
      c.expect[static_cast<std::size_t>(m * N + n)] = y;
      c.bound[static_cast<std::size_t>(m * N + n)] = err;
    }
  }
  return c;
}

// Runs `kernel` on the case with NaN-poisoned output; returns the output values.
std::vector<double> run_kernel(const TMatMulKernel& kernel, const Case& c, const Parallel& parallel) {
  auto packed = kernel.pack(c.w_i8);
  REQUIRE(packed.ok());
  CHECK(packed.value().signature == kernel.pack_signature());
  const std::vector<std::uint8_t> xb = c.x.to_bytes(), bb = c.bias.to_bytes(), rb = c.res.to_bytes();
  const std::vector<float> xs = c.xs.to_f32(), ws = c.ws.to_f32();
  const int ob = c.p.out_kind == ElemKind::F32 ? 4 : 2;
  std::vector<std::uint8_t> y(static_cast<std::size_t>(c.p.M * c.p.N * ob), 0xff);  // NaN in every kind
  TMatMulArgs args;
  args.x = xb.data();
  args.w = &packed.value();
  args.x_scale = c.p.x_scale ? xs.data() : nullptr;
  args.w_scale = c.p.w_scale ? ws.data() : nullptr;
  args.bias = c.p.bias ? bb.data() : nullptr;
  args.residual = c.p.residual ? rb.data() : nullptr;
  args.y = y.data();
  kernel.run(args, parallel);
  auto out = HostTensor::from_bytes(c.p.out_kind, {c.p.M, c.p.N}, y);
  REQUIRE(out.ok());
  return out.value().data;
}

// Compares within the bound; reports the first few mismatches.
void check_close(const Case& c, const std::vector<double>& got, const std::string& what) {
  int bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double d = std::fabs(got[i] - c.expect[i]);
    if (!(d <= c.bound[i])) {  // NaN fails
      if (++bad <= 3)
        FAIL_CHECK(what << ": element " << i << " (m " << i / static_cast<std::size_t>(c.p.N) << ", n "
                        << i % static_cast<std::size_t>(c.p.N) << ") is " << got[i] << ", expected " << c.expect[i]
                        << " +- " << c.bound[i]);
    }
  }
  CHECK_MESSAGE(bad == 0, what << ": " << bad << " of " << got.size() << " elements out of bounds");
}

struct IsaVec {
  Isa isa;
  int bits;
};

// The (isa, vector width) pairs the float kernel takes, that this host can run.
std::vector<IsaVec> host_float_targets() {
  std::vector<IsaVec> out;
  for (Isa isa : kAllIsas) {
    if (!host_isas().supports(isa)) continue;
    out.push_back({isa, 256});
    if (isa == Isa::Avx512 || isa == Isa::Avx512Vnni || isa == Isa::Amx) out.push_back({isa, 512});
  }
  return out;
}

std::string describe(const TMatMulConfig& c, const TMatMulProblem& p, bool two_threads) {
  return std::string(isa_name(c.isa)) + " vec=" + std::to_string(c.vector_bits) + " nb=" + std::to_string(c.n_block) +
         " mb=" + std::to_string(c.m_block) + " ku=" + std::to_string(c.k_unroll) + " pf=" +
         std::to_string(c.prefetch_bytes) + " t=" + std::to_string(c.threads) + (two_threads ? "(2 threads)" : "") +
         " " + std::string(elem_name(p.x_kind)) + " M=" + std::to_string(p.M) + " K=" + std::to_string(p.K) +
         " N=" + std::to_string(p.N) + " xs=" + std::to_string(p.x_scale) + " ws=" + std::to_string(p.w_scale) +
         (p.w_scale_per_channel ? "/ch" : "") + " b=" + std::to_string(p.bias) + " r=" + std::to_string(p.residual) +
         " relu=" + std::to_string(p.relu);
}

// Blocking choices cycled through per run: (m_block, n_block in units of 16 columns).
struct Blocking {
  int mb, nb16, ku, pf;
};
constexpr Blocking kBlockings[] = {{1, 1, 1, 0}, {4, 4, 2, 512}, {3, 2, 3, 0}, {2, 4, 1, 256},
                                   {6, 1, 4, 0}, {1, 6, 1, 1024}, {5, 2, 2, 0}, {2, 2, 8, 128}};

TMatMulConfig make_config(const IsaVec& t, int variant) {
  TMatMulConfig c;
  c.isa = t.isa;
  c.variant = TMatMulVariant::Float;
  c.vector_bits = t.bits;
  int regs = (t.isa == Isa::Avx2 || t.isa == Isa::AvxVnni) ? 16 : 32;
  const Blocking& b = kBlockings[variant % std::size(kBlockings)];
  c.m_block = b.mb;
  c.n_block = 16 * b.nb16;
  const int lanes = t.bits / 32;
  // Shrink to what fits the register file (validate_float's rule).
  while (c.m_block * (c.n_block / lanes) + c.m_block + 3 > regs) {
    if (c.n_block > 16) c.n_block -= 16;
    else c.m_block -= 1;
  }
  c.k_unroll = b.ku;
  c.prefetch_bytes = b.pf;
  c.threads = 1 + variant % 3;
  return c;
}

}  // namespace

TEST_CASE("tmatmul float: validate rejects what the generator cannot emit") {
  TMatMulProblem p;
  p.M = 2;
  p.K = 8;
  p.N = 8;
  p.x_kind = ElemKind::F32;
  p.out_kind = ElemKind::F32;
  TMatMulConfig c;
  c.isa = Isa::Avx2;
  c.variant = TMatMulVariant::Float;
  c.vector_bits = 256;
  c.n_block = 32;
  c.m_block = 2;
  CHECK(detail::validate_float(p, c).ok());
  TMatMulConfig bad = c;
  bad.vector_bits = 512;
  CHECK(!detail::validate_float(p, bad).ok());
  bad = c;
  bad.n_block = 24;
  CHECK(!detail::validate_float(p, bad).ok());
  bad = c;
  bad.m_block = 8;  // 8 * 4 + 8 + 3 > 16
  CHECK(!detail::validate_float(p, bad).ok());
  bad = c;
  bad.split_k = 2;
  CHECK(!detail::validate_float(p, bad).ok());
  TMatMulProblem q = p;
  q.out_kind = ElemKind::BF16;
  CHECK(!detail::validate_float(q, c).ok());
  q = p;
  q.x_kind = ElemKind::I8;
  CHECK(!detail::validate_float(q, c).ok());
  bad = c;
  bad.variant = TMatMulVariant::Dot;
  CHECK(!detail::validate_float(p, bad).ok());
}

TEST_CASE("tmatmul float: pack rejects values outside {-1, 0, 1}") {
  TMatMulProblem p;
  p.M = 1;
  p.K = 2;
  p.N = 3;
  p.x_kind = ElemKind::F32;
  p.out_kind = ElemKind::F32;
  TMatMulConfig c;
  c.isa = Isa::Avx2;
  c.variant = TMatMulVariant::Float;
  c.n_block = 16;
  c.m_block = 1;
  auto k = detail::create_float(p, c);
  REQUIRE(k.ok());
  const std::vector<std::int8_t> w = {0, 1, -1, 1, 2, 0};
  auto r = k.value()->pack(w);
  REQUIRE(!r.ok());
  CHECK(r.error().message.find("weight 2 at index 4") != std::string::npos);
}

TEST_CASE("tmatmul float: code is generated for every isa (foreign ones for disassembly)") {
  TMatMulProblem p;
  p.M = 5;
  p.K = 37;
  p.N = 41;
  for (ElemKind kind : {ElemKind::F32, ElemKind::BF16, ElemKind::F16}) {
    p.x_kind = kind;
    p.out_kind = kind;
    p.bias = p.residual = p.x_scale = p.w_scale = p.relu = true;
    for (Isa isa : kAllIsas) {
      for (int bits : {256, 512}) {
        if (bits == 512 && (isa == Isa::Avx2 || isa == Isa::AvxVnni)) continue;
        TMatMulConfig c = make_config({isa, bits}, 1);
        auto k = detail::create_float(p, c);
        REQUIRE_MESSAGE(k.ok(), describe(c, p, false));
        const auto blobs = k.value()->code();
        REQUIRE(blobs.size() == 1);
        CHECK(blobs[0].code.size() > 100);
      }
    }
  }
}

// The main sweep: every host isa and width, f32/bf16/f16, shapes with tails in M, K, N,
// blockings, unrolls, prefetch, 1 and 2 threads and every epilogue combination.
TEST_CASE("tmatmul float: matches the reference [avx2] [avx512]") {
  const std::vector<IsaVec> targets = host_float_targets();
  if (targets.empty()) {
    MESSAGE("skipped: host lacks AVX2");
    return;
  }
  for (Isa isa : kAllIsas)
    if (!host_isas().supports(isa)) MESSAGE("skipped for " << isa_name(isa) << ": host lacks it");
  struct Shape {
    std::int64_t M, K, N;
  };
  const Shape shapes[] = {{1, 2563, 257}, {2, 257, 2563}, {3, 63, 63},  {7, 5, 257},    {16, 1, 5},   {33, 257, 63},
                          {128, 63, 257}, {300, 5, 63},   {1, 1, 1},    {3, 2563, 5},   {7, 257, 1},  {16, 63, 1031}};
  std::uint64_t seed = 100;
  int variant = 0;
  for (ElemKind kind : {ElemKind::F32, ElemKind::BF16, ElemKind::F16}) {
    for (const Shape& s : shapes) {
      const Case c = make_case(s.M, s.K, s.N, kind, epilogue_combo(static_cast<int>(seed % 64)), seed);
      seed += 7;
      for (const IsaVec& t : targets) {
        for (int rep = 0; rep < 2; ++rep, ++variant) {
          const TMatMulConfig config = make_config(t, variant);
          const bool two = rep == 1;
          const std::string what = describe(config, c.p, two);
          auto k = detail::create_float(c.p, config);
          REQUIRE_MESSAGE(k.ok(), what << ": " << (k.ok() ? "" : k.error().message));
          check_close(c, run_kernel(*k.value(), c, two ? kTwoThreads : Parallel{}), what);
        }
      }
    }
  }
}

TEST_CASE("tmatmul float: every epilogue combination, small odd shape [avx2] [avx512]") {
  const std::vector<IsaVec> targets = host_float_targets();
  if (targets.empty()) {
    MESSAGE("skipped: host lacks AVX2");
    return;
  }
  int variant = 3;
  for (ElemKind kind : {ElemKind::F32, ElemKind::BF16, ElemKind::F16}) {
    for (int e = 0; e < 64; ++e) {
      const Epilogue ep = epilogue_combo(e);
      if (ep.per_channel && !ep.w_scale) continue;
      const Case c = make_case(5, 19, 37, kind, ep, 1000 + static_cast<std::uint64_t>(e));
      const IsaVec& t = targets[static_cast<std::size_t>(e) % targets.size()];
      const TMatMulConfig config = make_config(t, variant++);
      auto k = detail::create_float(c.p, config);
      REQUIRE(k.ok());
      check_close(c, run_kernel(*k.value(), c, e % 2 ? kTwoThreads : Parallel{}), describe(config, c.p, e % 2));
    }
  }
}

// Special values: NaN in x reaches every result it is multiplied into, zero weights
// included (NaN * 0 is NaN in the reference's double sum and in the kernel's FMA);
// relu keeps NaN and turns -0 into +0.
TEST_CASE("tmatmul float: NaN propagation and relu of -0 and negative values [avx2]") {
  if (!host_isas().avx2) {
    MESSAGE("skipped: host lacks AVX2");
    return;
  }
  for (ElemKind kind : {ElemKind::F32, ElemKind::BF16, ElemKind::F16}) {
    Case c = make_case(1, 2, 3, kind, Epilogue{true, false, false, false, false, true}, 5);
    // x = {NaN, 1}, w = [[1, 0, 0], [1, -1, 0]]: every sum holds NaN * w (NaN * 0 is NaN).
    c.x.data = {std::nan(""), 1.0};
    c.w.data = {1, 0, 0, 1, -1, 0};
    c.w_i8 = c.w.to_i8();
    c.xs.data = {1.0};
    for (const IsaVec& t : host_float_targets()) {
      const TMatMulConfig config = make_config(t, 0);
      auto k = detail::create_float(c.p, config);
      REQUIRE(k.ok());
      const std::vector<double> got = run_kernel(*k.value(), c, Parallel{});
      CHECK(std::isnan(got[0]));
      CHECK(std::isnan(got[1]));
      CHECK(std::isnan(got[2]));
    }
    // x = {2, 1}, w = [[0, 1, -1], [0, 0, 0]], x_scale -1: {0, 2, -2} * -1 = {-0, -2, 2}.
    c.x.data = {2.0, 1.0};
    c.w.data = {0, 1, -1, 0, 0, 0};
    c.w_i8 = c.w.to_i8();
    c.xs.data = {-1.0};
    for (const IsaVec& t : host_float_targets()) {
      const TMatMulConfig config = make_config(t, 0);
      auto k = detail::create_float(c.p, config);
      REQUIRE(k.ok());
      const std::vector<double> got = run_kernel(*k.value(), c, Parallel{});
      CHECK(got[0] == 0.0);
      CHECK(!std::signbit(got[0]));  // relu(-0) = +0
      CHECK(got[1] == 0.0);
      CHECK(!std::signbit(got[1]));
      CHECK(got[2] == 2.0);
    }
  }
}

// The kernel against ir::interpret on parsed IR (bf16, full epilogue), and our scalar
// reference against the interpreter bit for bit.
TEST_CASE("tmatmul float: agrees with ir::interpret on a parsed tmatmul [avx2]") {
  if (!host_isas().avx2) {
    MESSAGE("skipped: host lacks AVX2");
    return;
  }
  const char* text = R"(func @f(%x: bf16[3, 37], %w: t2[37, 21], %xs: f32[3, 1], %ws: f32[21], %b: bf16[21], %r: bf16[3, 21]) -> bf16[3, 21] {
^entry:
  %y = tmatmul %x, %w, %xs, %ws, %b, %r {x_scale = true, w_scale = true, bias = true, residual = true, act = relu} : bf16[3, 21]
  ret %y
}
)";
  auto m = ir::parse_module(text, "float.tir");
  REQUIRE_MESSAGE(m.ok(), (m.ok() ? "" : m.error().message));
  const Case c = make_case(3, 37, 21, ElemKind::BF16, Epilogue{true, true, true, true, true, true}, 77);
  const std::vector<HostTensor> args = {c.x, c.w, c.xs, c.ws, c.bias, c.res};
  auto out = ir::interpret(m.value(), "f", args, ir::ParamValues{});
  REQUIRE_MESSAGE(out.ok(), (out.ok() ? "" : out.error().message));
  REQUIRE(out.value().size() == 1);
  const std::vector<double>& ref = out.value()[0].data;
  REQUIRE(ref.size() == c.expect.size());
  for (std::size_t i = 0; i < ref.size(); ++i) CHECK(ref[i] == c.expect[i]);
  for (const IsaVec& t : host_float_targets()) {
    const TMatMulConfig config = make_config(t, 1);
    auto k = detail::create_float(c.p, config);
    REQUIRE(k.ok());
    check_close(c, run_kernel(*k.value(), c, kTwoThreads), describe(config, c.p, true));
  }
}
