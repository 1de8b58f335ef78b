// SPDX-License-Identifier: Apache-2.0
// eltwise_test.cpp - the x86 eltwise kernels (targets/x86/eltwise.h) against the interpreter.
//
// Every case parses a one-op .tir function, interprets it, and runs the generated
// kernel for each ISA family the host runs (Avx2, Avx512; the others only generate, with
// allow_foreign_isa), on 1 and 2 threads, with outputs poisoned (0x5A bytes) first.
// Shapes: rows 1, 3, 7, 33 x cols 1, 5, 17, 63, 257, 2563 (vector tails of both widths).
//
// Tolerances (|got - want| <= atol + rtol |want|, NaN == NaN, inf == inf of one sign):
//   exact       add sub mul div max min neg abs relu sqrt, quantize (values and
//               scales), fake quantize: bit-exact, sign of zero included.
//   f32         exp log tanh sigmoid silu gelu rsqrt: rtol 2e-6, atol 1e-37 (results
//               in the subnormal range). Measured max relative errors (f32, printed by
//               the tests): exp 1.2e-7, log 1.2e-7, tanh 1.2e-7, sigmoid 1.9e-7, silu
//               1.9e-7, rsqrt 1.2e-7, gelu 3.4e-7 against an erfc-form double reference;
//               gelu gets atol 1e-14 because the interpreter's erf form (1 + erf(t) in
//               double) itself loses relative accuracy for x < -5 and returns -0 below
//               about -8.3, where the kernel keeps the true tiny value.
//               softmax rtol 1e-5 (measured 1.2e-6); rmsnorm rtol 1e-5 (measured
//               2.9e-7); reduce_sum/mean atol 8e-6 * len (|x| <= 4; f32 accumulation
//               against the reference's double); reduce_max exact.
//   ewise       exact chains bit-exact for every kind; chains with transcendentals
//               rtol 1e-5 (f32; measured 8.5e-6) and for bf16/f16 an absolute slack of a
//               kind ulp at the operands' scale (one flipped intermediate rounding).
//   bf16, f16   the f32 tolerance plus one unit in the last place of the kind
//               (rtol 2^-7 / 2^-10, atol 2^-24 for f16 subnormals): the reference
//               rounds its double result once, we round our f32 result.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ir/interpret.h"
#include "ir/parse.h"
#include "targets/x86/eltwise.h"
#include "tests/unit/x86/x86_testing.h"
#include "targets/x86/isa.h"

namespace ternjit::targets::x86 {
namespace {

using ir::HostTensor;
using Extents = std::vector<std::int64_t>;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr ElemKind F32 = ElemKind::F32;
constexpr ElemKind BF16 = ElemKind::BF16;
constexpr ElemKind F16 = ElemKind::F16;
constexpr ElemKind kFloatKinds[] = {F32, BF16, F16};

const std::int64_t kRows[] = {1, 3, 7, 33};
const std::int64_t kCols[] = {1, 5, 17, 63, 257, 2563};

Parallel parallel_for(int threads) { return testing::std_threads(threads); }

std::string ty(ElemKind k, const Extents& s) {
  std::string out = std::string(elem_name(k)) + "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// The ISAs whose code runs here (one per family), and the others.
std::vector<Isa> run_isas() {
  std::vector<Isa> r;
  for (Isa isa : {Isa::Avx2, Isa::Avx512})
    if (host_isas().supports(isa)) r.push_back(isa);
  return r;
}

HostTensor values(ElemKind k, const Extents& shape, std::uint64_t seed, double lo, double hi) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::int64_t n = 1;
  for (std::int64_t e : shape) n *= e;
  std::vector<double> v(static_cast<std::size_t>(n));
  for (double& x : v) x = u(gen);
  return HostTensor::from_values(k, shape, v);
}

const double kSpecials[] = {kNaN,   kInf,  -kInf,  0.0,     -0.0,   1e30,   -1e30,  3e38,  -3e38,
                            1e-40, -1e-40, 1e-38, -1e-38,  80.0,   -80.0,  100.0,  -100.0, 20.0,
                            -20.0, 0.5,    -0.5,  1.0,     -1.0,   1e-7,   -1e-7,  7.0,    -7.0};

// Tolerance of one comparison (see the file comment).
struct Tol {
  bool exact = false;
  double rtol = 0, atol = 0;
};

Tol for_kind(Tol t, ElemKind k) {
  if (t.exact) return t;
  if (k == BF16) t.rtol += 0x1p-7, t.atol = std::max(t.atol, 1e-38);
  if (k == F16) t.rtol += 0x1p-10, t.atol = std::max(t.atol, 0x1p-24);
  return t;
}

// Largest relative error seen per label (for the MESSAGE lines).
struct ErrStats {
  double max_rel = 0;  ///< over f32 results of magnitude > 1e-10
  bool record = false;
};

bool close(double want, double got, const Tol& t, ErrStats& stats) {
  if (std::isnan(want) || std::isnan(got)) return std::isnan(want) && std::isnan(got);
  if (t.exact) return want == got && std::signbit(want) == std::signbit(got);
  if (std::isinf(want) || std::isinf(got)) return want == got;
  const double d = std::fabs(got - want);
  if (std::fabs(want) > 1e-10 && stats.record) stats.max_rel = std::max(stats.max_rel, d / std::fabs(want));
  return d <= t.atol + t.rtol * std::fabs(want);
}

// Compares element by element; reports the first mismatch.
void check_tensor(const HostTensor& want, const HostTensor& got, const Tol& tol, ErrStats& stats,
                  const std::string& what) {
  REQUIRE(want.kind == got.kind);
  REQUIRE(want.shape == got.shape);
  const Tol t = for_kind(tol, want.kind);
  stats.record = want.kind == F32;
  for (std::size_t i = 0; i < want.data.size(); ++i) {
    if (!close(want.data[i], got.data[i], t, stats)) {
      FAIL_CHECK(what << ": element " << i << " of " << want.describe() << ": expected " << want.data[i]
                      << ", got " << got.data[i]);
      return;
    }
  }
}

// The first non-ret instruction of the function's entry block.
ir::InstId op_inst(const ir::Function& f) {
  for (ir::InstId i : f.insts(f.entry()))
    if (f.inst(i).op != ir::Op::Ret) return i;
  return ir::InstId{};
}

// Parses `tir`, interprets it on `args`, and checks the kernel on every runnable ISA
// and 1/2 threads; foreign ISAs only generate. Per-sum tolerances: `atol_of` (if set)
// gives an absolute tolerance per result element from the inputs.
void check_op(const std::string& tir, const std::vector<HostTensor>& args, const Tol& tol, ErrStats& stats,
              double extra_atol = 0) {
  INFO(tir);
  auto m = ir::parse_module(tir, "eltwise_test.tir");
  REQUIRE_MESSAGE(m.ok(), (m.ok() ? std::string() : render(m.error())));
  const ir::Function& f = m->functions().at(0);
  const ir::InstId inst = op_inst(f);
  auto supported = eltwise_supported(f, inst);
  REQUIRE_MESSAGE(supported.ok(), (supported.ok() ? std::string() : supported.error().message));
  auto want = ir::interpret(*m, f, args, {});
  REQUIRE_MESSAGE(want.ok(), (want.ok() ? std::string() : render(want.error())));

  std::vector<std::vector<std::uint8_t>> in_bytes;
  std::vector<const void*> in_ptrs;
  for (const HostTensor& a : args) in_bytes.push_back(a.to_bytes());
  for (const auto& b : in_bytes) in_ptrs.push_back(b.data());

  for (Isa isa : kAllIsas) {
    const bool runs = host_isas().supports(isa) && (isa == Isa::Avx2 || isa == Isa::Avx512);
    auto kernel = generate_eltwise(f, inst, isa, /*allow_foreign_isa=*/true);
    REQUIRE_MESSAGE(kernel.ok(), (kernel.ok() ? std::string() : kernel.error().message));
    REQUIRE(!(*kernel)->code().empty());
    CHECK(!(*kernel)->code()[0].code.empty());
    if (!runs) continue;
    for (int threads : {1, 2}) {
      INFO("isa " << isa_name(isa) << ", threads " << threads << ": " << (*kernel)->describe());
      std::vector<std::vector<std::uint8_t>> out_bytes;
      std::vector<void*> out_ptrs;
      for (const HostTensor& w : *want) {
        const std::size_t bytes = w.to_bytes().size();
        out_bytes.emplace_back(bytes + 64, std::uint8_t{0x5A});
      }
      for (auto& b : out_bytes) out_ptrs.push_back(b.data());
      (*kernel)->run(in_ptrs, out_ptrs, parallel_for(threads));
      for (std::size_t r = 0; r < want->size(); ++r) {
        const HostTensor& w = (*want)[r];
        const std::size_t bytes = w.to_bytes().size();
        // Nothing past the end was written.
        for (std::size_t i = bytes; i < out_bytes[r].size(); ++i) REQUIRE(out_bytes[r][i] == 0x5A);
        auto got = HostTensor::from_bytes(w.kind, w.shape, std::span(out_bytes[r].data(), bytes));
        REQUIRE_MESSAGE(got.ok(), (got.ok() ? std::string() : got.error().message));
        Tol t = tol;
        t.atol += extra_atol;
        if (is_integer(w.kind)) t.exact = true;
        check_tensor(w, *got, t, stats, "result " + std::to_string(r));
      }
    }
  }
}

std::string unary_tir(const std::string& op, ElemKind k, const Extents& s) {
  const std::string t = ty(k, s);
  return "func @f(%a: " + t + ") -> " + t + " {\n^entry:\n  %0 = " + op + " %a : " + t + "\n  ret %0\n}\n";
}

std::string binary_tir(const std::string& op, ElemKind ka, const Extents& sa, ElemKind kb, const Extents& sb,
                       ElemKind kr, const Extents& sr) {
  return "func @f(%a: " + ty(ka, sa) + ", %b: " + ty(kb, sb) + ") -> " + ty(kr, sr) + " {\n^entry:\n  %0 = " + op +
         " %a, %b : " + ty(kr, sr) + "\n  ret %0\n}\n";
}

struct UnaryCase {
  const char* op;
  double lo, hi;
  bool exact;
  double rtol;
  double atol = 1e-37;
};

const UnaryCase kUnary[] = {
    {"neg", -10, 10, true, 0},       {"abs", -10, 10, true, 0},      {"relu", -10, 10, true, 0},
    {"sqrt", 0, 100, true, 0},       {"rsqrt", 1e-3, 100, false, 2e-6}, {"exp", -20, 20, false, 2e-6},
    {"log", 1e-6, 100, false, 2e-6}, {"tanh", -12, 12, false, 2e-6},  {"sigmoid", -30, 30, false, 2e-6},
    {"silu", -30, 30, false, 2e-6},  {"gelu", -12, 12, false, 2e-6, 1e-14},
};

TEST_CASE("eltwise unary ops: random inputs, every shape and kind") {
  std::uint64_t seed = 1;
  for (const UnaryCase& c : kUnary) {
    ErrStats stats;
    std::size_t i = 0;
    for (std::int64_t rows : kRows) {
      for (std::int64_t cols : kCols) {
        const ElemKind k = kFloatKinds[i++ % 3];
        const Extents s{rows, cols};
        check_op(unary_tir(c.op, k, s), {values(k, s, seed++, c.lo, c.hi)}, Tol{c.exact, c.rtol, c.atol}, stats);
      }
    }
    MESSAGE(std::string(c.op) << ": max relative error (f32) " << stats.max_rel);
  }
}

TEST_CASE("eltwise unary ops: special values") {
  for (const UnaryCase& c : kUnary) {
    for (ElemKind k : kFloatKinds) {
      ErrStats stats;
      std::vector<double> v(std::begin(kSpecials), std::end(kSpecials));
      const Extents s{static_cast<std::int64_t>(v.size())};
      check_op(unary_tir(c.op, k, s), {HostTensor::from_values(k, s, v)}, Tol{c.exact, c.rtol, c.atol}, stats);
    }
  }
}

TEST_CASE("eltwise unary f32 accuracy over wide ranges") {
  // Dense sweeps, including the subnormal-result ranges of exp/sigmoid/silu/gelu.
  struct Range {
    const char* op;
    double lo, hi;
  };
  const Range ranges[] = {{"exp", -103, 88.7},   {"log", 1e-38, 3e38}, {"log", 0.5, 2},      {"tanh", -1, 1},
                          {"sigmoid", -87, 80}, {"silu", -87, 80},    {"gelu", -13, 13},     {"gelu", -1, 1},
                          {"rsqrt", 1e-30, 1e30}, {"tanh", -0.7, 0.7}, {"exp", -1e-3, 1e-3}};
  std::uint64_t seed = 100;
  for (const Range& r : ranges) {
    ErrStats stats;
    const Extents s{4099};
    check_op(unary_tir(r.op, F32, s), {values(F32, s, seed++, r.lo, r.hi)}, Tol{false, 2e-6, std::string(r.op) == "gelu" ? 1e-14 : 1e-37}, stats);
    MESSAGE(std::string(r.op) << " on [" << r.lo << ", " << r.hi << "]: max relative error " << stats.max_rel);
  }
}

const char* const kBinary[] = {"add", "sub", "mul", "div", "max", "min"};

TEST_CASE("eltwise binary ops: broadcasting, every shape and kind, bit-exact") {
  std::uint64_t seed = 1000;
  for (const char* op : kBinary) {
    ErrStats stats;
    std::size_t i = 0;
    for (std::int64_t rows : kRows) {
      for (std::int64_t cols : kCols) {
        const ElemKind k = kFloatKinds[i % 3];
        const Extents sa{rows, cols};
        const Extents shapes_b[] = {{rows, cols}, {cols}, {rows, 1}, {}};
        const Extents sb = shapes_b[i % 4];
        ++i;
        HostTensor a = values(k, sa, seed++, -4, 4), b = values(k, sb, seed++, -4, 4);
        // Ties for max/min (+0 vs -0, equal values).
        if (a.data.size() > 2 && b.data.size() > 1) {
          a.data[0] = 0.0, b.data[0] = -0.0;
          a.data[1] = b.data[1];
        }
        check_op(binary_tir(op, k, sa, k, sb, k, sa), {a, b}, Tol{true}, stats);
        // Operands swapped: the broadcast operand first.
        check_op(binary_tir(op, k, sb, k, sa, k, sa), {b, a}, Tol{true}, stats);
      }
    }
  }
}

TEST_CASE("eltwise binary ops: mixed kinds and the special-value grid") {
  const std::vector<double> sp(std::begin(kSpecials), std::end(kSpecials));
  const auto n = static_cast<std::int64_t>(sp.size());
  for (const char* op : kBinary) {
    ErrStats stats;
    for (ElemKind k : kFloatKinds) {
      // a [n, 1] against b [n]: every pair of special values.
      const HostTensor a = HostTensor::from_values(k, {n, 1}, sp), b = HostTensor::from_values(k, {n}, sp);
      check_op(binary_tir(op, k, {n, 1}, k, {n}, k, {n, n}), {a, b}, Tol{true}, stats);
    }
    // Rank-3 broadcasting: [7, 1, 33] against [5, 1] (a middle dim stretched on each side).
    check_op(binary_tir(op, F32, {7, 1, 33}, F32, {5, 1}, F32, {7, 5, 33}),
             {values(F32, {7, 1, 33}, 11, -3, 3), values(F32, {5, 1}, 12, -3, 3)}, Tol{true}, stats);
    check_op(binary_tir(op, BF16, {2, 3, 1, 17}, BF16, {3, 4, 1}, BF16, {2, 3, 4, 17}),
             {values(BF16, {2, 3, 1, 17}, 13, -3, 3), values(BF16, {3, 4, 1}, 14, -3, 3)}, Tol{true}, stats);
    // bf16 op f16 -> f32, f32 op bf16 -> f32.
    const Extents s{3, 37};
    check_op(binary_tir(op, BF16, s, F16, {37}, F32, s), {values(BF16, s, 7, -3, 3), values(F16, {37}, 8, -3, 3)},
             Tol{true}, stats);
    check_op(binary_tir(op, F32, {3, 1}, BF16, s, F32, s), {values(F32, {3, 1}, 9, -3, 3), values(BF16, s, 10, -3, 3)},
             Tol{true}, stats);
  }
}

TEST_CASE("eltwise ewise: chains with broadcasting") {
  // Exact ops only: bit-exact for every kind (bf16/f16 round between steps as the reference).
  const std::string exact_steps =
      "[add(0, 1), mul(4, 2), max(5, 0), sub(6, 3), neg(7), abs(8), div(9, 1), relu(7), min(11, 10), sqrt(12), "
      "mul(13, 13)]";
  const std::string approx_steps = "[mul(0, 1), add(4, 2), sigmoid(5), mul(6, 3), tanh(7), add(8, 0), gelu(9)]";
  std::uint64_t seed = 5000;
  std::size_t i = 0;
  ErrStats exact_stats, approx_stats;
  for (std::int64_t rows : kRows) {
    for (std::int64_t cols : kCols) {
      const ElemKind k = kFloatKinds[i++ % 3];
      const Extents s{rows, cols}, sc{cols}, sr{rows, 1}, s0{};
      const std::string sig = "(%a: " + ty(k, s) + ", %b: " + ty(k, sc) + ", %c: " + ty(k, sr) + ", %d: " +
                              ty(k, s0) + ") -> " + ty(k, s);
      const std::vector<HostTensor> args{values(k, s, seed, -3, 3), values(k, sc, seed + 1, -3, 3),
                                         values(k, sr, seed + 2, -3, 3), values(k, s0, seed + 3, -3, 3)};
      seed += 4;
      for (const bool exact : {true, false}) {
        const std::string tir = "func @f" + sig + " {\n^entry:\n  %0 = ewise %a, %b, %c, %d {steps = " +
                                (exact ? exact_steps : approx_steps) + "} : " + ty(k, s) + "\n  ret %0\n}\n";
        // The approximate chain compounds a few ulps per step, and with bf16/f16 a flip of
        // one intermediate rounding moves later steps by a kind ulp of the operands' scale.
        const Tol tol = exact ? Tol{true}
                              : Tol{false, k == F32 ? 1e-5 : (k == BF16 ? 0x1p-6 : 0x1p-8),
                                    k == F32 ? 1e-6 : (k == BF16 ? 0.05 : 0.006)};
        check_op(tir, args, tol, exact ? exact_stats : approx_stats);
      }
    }
  }
  MESSAGE("ewise approximate chain: max relative error " << approx_stats.max_rel);
}

TEST_CASE("eltwise quantize and quantize_int8: bit-exact") {
  std::uint64_t seed = 9000;
  std::size_t i = 0;
  ErrStats stats;
  for (std::int64_t rows : kRows) {
    for (std::int64_t cols : kCols) {
      const ElemKind k = kFloatKinds[i++ % 3];
      const Extents s{rows, cols};
      HostTensor x = values(k, s, seed++, -5, 5);
      // Row 1: a NaN and an inf; row 2: all zeros; row 3 (if any): subnormals whose
      // scale underflows to 0; ties of x / scale.
      if (rows >= 3 && cols >= 2) {
        x.data[static_cast<std::size_t>(cols)] = kNaN;
        for (std::int64_t c = 0; c < cols; ++c) x.data[static_cast<std::size_t>(2 * cols + c)] = 0.0;
      }
      if (rows >= 7 && cols >= 2) {
        x.data[static_cast<std::size_t>(cols + 1)] = -kInf;
        for (std::int64_t c = 0; c < cols; ++c)
          x.data[static_cast<std::size_t>(3 * cols + c)] = k == F32 ? (c % 2 ? 1e-44 : -3e-45) : 0.0;
        x.data[static_cast<std::size_t>(4 * cols)] = 127.0;  // scale 1: x / s exact ties
        x.data[static_cast<std::size_t>(4 * cols + 1)] = 2.5;
        if (cols >= 3) x.data[static_cast<std::size_t>(4 * cols + 2)] = -3.5;
      }
      x = HostTensor::from_values(k, s, x.data);  // round the edits to the kind
      const std::string t = ty(k, s), sc = ty(F32, {rows, 1});
      const std::string q = "func @f(%x: " + t + ") -> (" + ty(ElemKind::I8, s) + ", " + sc +
                            ") {\n^entry:\n  %q, %s = quantize %x : " + ty(ElemKind::I8, s) + ", " + sc +
                            "\n  ret %q, %s\n}\n";
      check_op(q, {x}, Tol{true}, stats);
      check_op(unary_tir("quantize_int8", k, s), {x}, Tol{true}, stats);
    }
  }
}

TEST_CASE("eltwise rmsnorm") {
  std::uint64_t seed = 12000;
  std::size_t i = 0;
  ErrStats stats;
  for (std::int64_t rows : kRows) {
    for (std::int64_t cols : kCols) {
      const ElemKind k = kFloatKinds[i % 3], kg = kFloatKinds[(i / 3) % 3];
      ++i;
      const ElemKind kr = k == kg ? k : F32;
      const Extents s{rows, cols};
      const std::string tir = "func @f(%x: " + ty(k, s) + ", %g: " + ty(kg, {cols}) + ") -> " + ty(kr, s) +
                              " {\n^entry:\n  %0 = rmsnorm %x, %g {eps = 1e-05} : " + ty(kr, s) + "\n  ret %0\n}\n";
      check_op(tir, {values(k, s, seed, -3, 3), values(kg, {cols}, seed + 1, -2, 2)}, Tol{false, 1e-5, 1e-30},
               stats);
      seed += 2;
    }
  }
  MESSAGE("rmsnorm: max relative error " << stats.max_rel);
}

// The sum of squares overflowed f32 for rows of large finite magnitude (4096 columns,
// rms above about 2.9e17): the whole row came out -0/0 where the reference is right.
TEST_CASE("eltwise rmsnorm: rows of large magnitude, zero, inf and NaN rows") {
  ErrStats stats;
  const Extents s{6, 4096};
  const std::string tir = "func @f(%x: " + ty(F32, s) + ", %g: " + ty(F32, {4096}) + ") -> " + ty(F32, s) +
                          " {\n^entry:\n  %0 = rmsnorm %x, %g {eps = 1e-05} : " + ty(F32, s) + "\n  ret %0\n}\n";
  HostTensor x = values(F32, s, 31, -1, 1);
  const double row_scale[] = {1e18, 3e38, 4.5e9, 1e-3};  // rows 0..3; 4: zeros; 5: an inf and a NaN
  for (std::int64_t r = 0; r < 6; ++r)
    for (std::int64_t j = 0; j < 4096; ++j) {
      double& v = x.data[static_cast<std::size_t>(r * 4096 + j)];
      if (r < 4) v = static_cast<double>(static_cast<float>(v * row_scale[r]));
      else v = r == 4 ? 0.0 : v;
    }
  x.data[5 * 4096 + 7] = kInf;
  check_op(tir, {x, values(F32, {4096}, 32, -2, 2)}, Tol{false, 1e-5, 1e-30}, stats);
  HostTensor nan_row = x;
  nan_row.data[5 * 4096 + 9] = kNaN;
  check_op(tir, {nan_row, values(F32, {4096}, 33, -2, 2)}, Tol{false, 1e-5, 1e-30}, stats);
  MESSAGE("rmsnorm, large rows: max relative error " << stats.max_rel);
}

TEST_CASE("eltwise softmax: last axis and middle axes") {
  std::uint64_t seed = 15000;
  std::size_t i = 0;
  ErrStats stats;
  for (std::int64_t rows : kRows) {
    for (std::int64_t cols : kCols) {
      const ElemKind k = kFloatKinds[i++ % 3];
      const Extents s{rows, cols};
      HostTensor x = values(k, s, seed++, -20, 20);
      if (rows >= 3) x.data[static_cast<std::size_t>(2 * cols)] = kNaN;  // row 2 all NaN
      if (rows >= 7) {
        for (std::int64_t c = 0; c < cols; ++c) x.data[static_cast<std::size_t>(3 * cols + c)] -= 500;  // big shift
        x.data[static_cast<std::size_t>(4 * cols)] = -kInf;
      }
      x = HostTensor::from_values(k, s, x.data);
      const std::string t = ty(k, s);
      check_op("func @f(%x: " + t + ") -> " + t + " {\n^entry:\n  %0 = softmax %x {axis = 1} : " + t +
                   "\n  ret %0\n}\n",
               {x}, Tol{false, 1e-5, 1e-30}, stats);
    }
  }
  // Middle and first axes (inner > 1, with vector tails).
  const std::pair<Extents, int> cases[] = {{{7, 5, 33}, 1}, {{3, 257}, 0}, {{2, 19, 8}, 1}, {{4, 3, 2, 17}, 2}, {{5, 16}, 0}};
  for (const auto& [s, axis] : cases) {
    for (ElemKind k : kFloatKinds) {
      const std::string t = ty(k, s);
      check_op("func @f(%x: " + t + ") -> " + t + " {\n^entry:\n  %0 = softmax %x {axis = " + std::to_string(axis) +
                   "} : " + t + "\n  ret %0\n}\n",
               {values(k, s, seed++, -20, 20)}, Tol{false, 1e-5, 1e-30}, stats);
    }
  }
  MESSAGE("softmax: max relative error " << stats.max_rel);
}

TEST_CASE("eltwise reductions: every axis, keepdims") {
  std::uint64_t seed = 18000;
  std::size_t i = 0;
  ErrStats stats;
  const char* const ops[] = {"reduce_sum", "reduce_mean", "reduce_max"};
  auto run = [&](const char* op, ElemKind k, const Extents& s, int axis, bool keepdims, HostTensor x) {
    Extents r = s;
    if (keepdims) r[static_cast<std::size_t>(axis)] = 1;
    else r.erase(r.begin() + axis);
    const std::string tir = "func @f(%x: " + ty(k, s) + ") -> " + ty(k, r) + " {\n^entry:\n  %0 = " + op +
                            " %x {axis = " + std::to_string(axis) + ", keepdims = " + (keepdims ? "true" : "false") +
                            "} : " + ty(k, r) + "\n  ret %0\n}\n";
    const bool is_max = std::string(op) == "reduce_max";
    // Sums: the error of an f32 sum scales with the sum of |x| along the axis (<= len * 4).
    const double len = static_cast<double>(s[static_cast<std::size_t>(axis)]);
    const double atol = std::string(op) == "reduce_sum" ? 2e-6 * 4 * len : 2e-6 * 4;
    check_op(tir, {std::move(x)}, is_max ? Tol{true} : Tol{false, 1e-6, atol}, stats);
  };
  for (const char* op : ops) {
    for (std::int64_t rows : kRows) {
      for (std::int64_t cols : kCols) {
        const ElemKind k = kFloatKinds[i++ % 3];
        const Extents s{rows, cols};
        HostTensor x = values(k, s, seed++, -4, 4);
        if (rows >= 3 && cols >= 2) {
          x.data[static_cast<std::size_t>(cols)] = kNaN;
          x.data[static_cast<std::size_t>(2 * cols)] = -0.0;
        }
        run(op, k, s, 1, i % 2 == 0, x);
        if (cols <= 257) run(op, k, s, 0, i % 2 == 1, x);
      }
    }
    for (ElemKind k : kFloatKinds) {
      run(op, k, {7, 5, 33}, 1, false, values(k, {7, 5, 33}, seed++, -4, 4));
      run(op, k, {2, 3, 17}, 2, true, values(k, {2, 3, 17}, seed++, -4, 4));
      // Max of zeros of both signs, and all -inf.
      run(op, k, {2, 4}, 1, false, HostTensor::from_values(k, {2, 4}, std::vector<double>{-0.0, 0.0, -0.0, -0.0, -kInf, -kInf, -kInf, -kInf}));
    }
    // Empty reduction axes: sum 0, mean NaN.
    if (std::string(op) != "reduce_max") run(op, F32, {3, 0}, 1, false, HostTensor::zeros(F32, {3, 0}));
  }
  MESSAGE("reductions: max relative error " << stats.max_rel);
}

TEST_CASE("eltwise activation in place") {
  const ir::Op acts[] = {ir::Op::Gelu, ir::Op::Silu, ir::Op::Sigmoid, ir::Op::Tanh, ir::Op::Relu, ir::Op::Exp};
  std::uint64_t seed = 21000;
  for (ir::Op act : acts) {
    for (ElemKind k : kFloatKinds) {
      for (std::int64_t n : {1, 7, 33, 1000, 40001}) {
        const HostTensor x = values(k, {n}, seed++, -6, 6);
        auto m = ir::parse_module(unary_tir(std::string(ir::op_name(act)), k, {n}), "act.tir");
        REQUIRE(m.ok());
        auto want = ir::interpret(*m, m->functions()[0], std::vector<HostTensor>{x}, {});
        REQUIRE(want.ok());
        for (Isa isa : run_isas()) {
          auto kernel = generate_activation(act, k, n, isa);
          REQUIRE(kernel.ok());
          for (int threads : {1, 2}) {
            std::vector<std::uint8_t> buf = x.to_bytes();
            const void* in[] = {buf.data()};
            void* out[] = {buf.data()};
            (*kernel)->run(in, out, parallel_for(threads));
            auto got = HostTensor::from_bytes(k, {n}, buf);
            REQUIRE(got.ok());
            ErrStats stats;
            check_tensor((*want)[0], *got, act == ir::Op::Relu ? Tol{true} : Tol{false, 2e-6, 1e-14}, stats,
                         std::string(ir::op_name(act)));
          }
        }
      }
    }
  }
  auto bad = generate_activation(ir::Op::Add, F32, 4, Isa::Avx2, true);
  CHECK(!bad.ok());
  auto bad_kind = generate_activation(ir::Op::Relu, ElemKind::I32, 4, Isa::Avx2, true);
  CHECK(!bad_kind.ok());
}

TEST_CASE("eltwise_supported: what is not generated") {
  auto reason = [](const std::string& tir) -> std::string {
    auto m = ir::parse_module(tir, "unsupported.tir");
    REQUIRE_MESSAGE(m.ok(), (m.ok() ? std::string() : render(m.error())));
    const ir::Function& f = m->functions()[0];
    auto r = eltwise_supported(f, op_inst(f));
    if (r.ok()) return "";
    CHECK(r.error().code == ErrorCode::Unsupported);
    auto g = generate_eltwise(f, op_inst(f), Isa::Avx2, true);
    CHECK(!g.ok());
    return r.error().message;
  };
  CHECK(reason("func @f(%a: i32[4], %b: i32[4]) -> i32[4] {\n^entry:\n  %0 = add %a, %b : i32[4]\n  ret %0\n}\n") != "");
  CHECK(reason("func @f(%a: i8[4]) -> i32[] {\n^entry:\n  %0 = reduce_sum %a {axis = 0, keepdims = false} : i32[]\n  ret %0\n}\n") != "");
  CHECK(reason("func @f<N>(%a: f32[N]) -> f32[N] {\n^entry:\n  %0 = exp %a : f32[N]\n  ret %0\n}\n") != "");
  CHECK(reason("func @f(%a: f32[3, 0]) -> f32[3] {\n^entry:\n  %0 = reduce_max %a {axis = 1, keepdims = false} : f32[3]\n  ret %0\n}\n") != "");
  CHECK(reason("func @f(%a: f32[4], %b: f32[4]) -> f32[] {\n^entry:\n  %0 = matmul %a, %b : f32[]\n  ret %0\n}\n") != "");
  CHECK(reason("func @f(%a: f32[4]) -> f32[4] {\n^entry:\n  %0 = cast %a {to = f32} : f32[4]\n  ret %0\n}\n") != "");
  CHECK(reason("func @f(%a: f32[4]) -> f32[4] {\n^entry:\n  %0 = exp %a : f32[4]\n  ret %0\n}\n") == "");
  // Unavailable ISA without allow_foreign_isa.
  for (Isa isa : kAllIsas) {
    if (host_isas().supports(isa)) continue;
    auto m = ir::parse_module("func @f(%a: f32[4]) -> f32[4] {\n^entry:\n  %0 = exp %a : f32[4]\n  ret %0\n}\n", "x.tir");
    REQUIRE(m.ok());
    const ir::Function& f = m->functions()[0];
    MESSAGE("skipped running " << isa_name(isa) << " code: host lacks it (generation checked)");
    CHECK(!generate_eltwise(f, op_inst(f), isa).ok());
  }
}

}  // namespace
}  // namespace ternjit::targets::x86
