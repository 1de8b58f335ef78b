// SPDX-License-Identifier: Apache-2.0
// spirv_target_test.cpp - the SPIR-V target on a Vulkan device (lavapipe in CI): every kernel op against the
// interpreter.
//
// Each case writes a small fully static function in IR text, compiles it with the spirv
// target (glslang + SPIRV-Tools), loads it onto the device, runs it twice on random
// inputs with poisoned outputs and compares with ir::interpret. ctest runs this binary
// only when spirv_probe finds a Vulkan device (SKIPPED with the reason otherwise).
//
// Tolerances (u = 2^-24, the f32 unit roundoff):
//   - integer paths (int8 tmatmul with no or relu activation, quantize, the epilogue's
//     f32 mul/add, which the shaders mark `precise`): bit for bit. Quantize divides by
//     the row scale; Vulkan allows 2.5 ulp for f32 division, lavapipe rounds correctly;
//   - f32 tmatmul: the reference sums in double; an f32 running sum of K terms errs by
//     at most K u sum|x w| (Higham 3.1), plus one rounding of the result;
//   - grouped-scale tmatmul (w_scale f32[G, N]): (G + 2) u sum_i |s_i p_i| (f32 x: plus
//     group u sum_i |s_i| sum_k |x w|) before the epilogue, derived at its test case;
//   - rmsnorm, softmax, sum/mean: the same bound with the row length, plus the few ulp
//     of sqrt, exp (exp_ref: within 2^-22 relative) and division (2.5 ulp): (len + 64)
//     2u |want| plus an absolute 1e-30 for values that underflow (2^-126 where a result
//     may be flushed: the device's subnormal mode, README.md "Numerics");
//   - the transcendental activations and ewise functions: erf by Abramowitz-Stegun
//     7.1.26 (|error| < 1.5e-7) and exp-based forms in f32: 4e-6 (1 + |want|).
#include "targets/spirv/spirv_target.h"

#include <doctest/doctest.h>

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <mutex>
#include <optional>
#include <thread>

#include "cache/disk_cache.h"
#include "cache/entry.h"
#include "cache/key.h"
#include "ir/interpret.h"
#include "ir/parse.h"
#include "targets/common/device_weights.h"
#include "targets/registry.h"
#include "targets/spirv/pipeline_blob.h"
#include "targets/spirv/shader_set.h"
#include "targets/spirv/vulkan_device.h"
#include "ternjit/ternjit.h"
#include "tests/difftest/targets.h"
#include "tests/unit/cache/cache_testing.h"
#include "tests/unit/engine/engine_testing.h"
#include "tests/unit/gpu/gpu_programs.h"

namespace ternjit {
namespace {

using ir::HostTensor;
using gpu_testing::sh;
using gpu_testing::tmatmul_tir;

constexpr double kU = 0x1p-24;

// How a case's outputs are compared.
struct Tol {
  bool exact = true;
  double rel = 0, abs = 0;  // |got - want| <= abs + rel |want| (per element; `per` adds to it)
  std::vector<double> per;  // an element-wise absolute bound of result 0 (f32 tmatmul)
};

HostTensor rnd(ElemKind k, std::vector<std::int64_t> shape, std::uint64_t seed) {
  return HostTensor::random(k, std::move(shape), seed);
}

// Compiles `fn` of `tir` with the spirv target (options `opts`), runs it against the
// interpreter. Returns the artifact's isa metadata.
std::string check(const std::string& tir, const std::string& fn, const std::vector<HostTensor>& args,
                  const ir::ParamValues& params, const Tol& tol, const std::string& int_dot = "auto") {
  CAPTURE(tir);
  CAPTURE(int_dot);
  auto m = ir::parse_module(tir, "test.tir");
  REQUIRE_MESSAGE(m.ok(), (m.ok() ? "" : m.error().message));
  auto target = targets::make_spirv_target();
  REQUIRE(target->available().ok());
  targets::CompileOptions co;
  co.target.values["int_dot"] = int_dot;
  auto art = target->compile(*m, fn, co);
  REQUIRE_MESSAGE(art.ok(), (art.ok() ? "" : art.error().message));
  CHECK(art->kind == "spirv-modules");
  auto state = target->new_program_state();
  targets::LoadContext lc;
  lc.params = &params;
  lc.state = state.get();
  lc.options = co.target;
  auto k = target->load(*art, lc);
  REQUIRE_MESSAGE(k.ok(), (k.ok() ? "" : k.error().message));
  auto want = ir::interpret(*m, fn, args, params);
  REQUIRE_MESSAGE(want.ok(), (want.ok() ? "" : want.error().message));
  gpu_testing::HostBuffers buffers(args, *want);
  const auto& out = buffers.out;
  for (int rep = 0; rep < 2; ++rep) {  // twice: buffers of the first call must not leak into the second
    buffers.poison(rep ? 0xA5 : 0x5A);
    auto r = k->run(k->state, buffers.pointers.data());
    REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
    for (std::size_t j = 0; j < out.size(); ++j) {
      const HostTensor& w = (*want)[j];
      if (tol.exact || w.kind != ElemKind::F32) {
        gpu_testing::require_same_bytes(w, out[j], j);
        continue;
      }
      gpu_testing::check_f32_result(w, out[j], j, tol.abs, tol.rel, j == 0 ? tol.per : std::vector<double>{});
    }
  }
  return k->isa;
}

bool exact_act(const std::string& act) { return act == "none" || act == "relu"; }

TEST_CASE("spirv: devices are listed and described") {
  auto all = targets::spirv::devices();
  REQUIRE(all.ok());
  REQUIRE(!(*all)->empty());
  for (const auto& d : **all) CHECK(!d.name.empty());
  auto target = targets::make_spirv_target();
  const TargetDescription desc = target->describe();
  CHECK(desc.available);
  // The structured list (targets/target.h): every device, in index order, the one `auto`
  // picks marked; under ctest the loader is pinned to lavapipe: one CPU-type device.
  const std::vector<targets::DeviceDescription> listed = target->devices();
  REQUIRE(listed.size() == (*all)->size());
  int selected = 0;
  for (std::size_t i = 0; i < listed.size(); ++i) {
    const targets::DeviceDescription& d = listed[i];
    CAPTURE(d.name);
    CHECK(d.index == i);
    CHECK(d.name == (**all)[i].name);
    CHECK(d.type == (**all)[i].type_name());
    CHECK(!d.driver.empty());
    CHECK(d.api.rfind("Vulkan 1.", 0) == 0);
    CHECK(d.memory_bytes > 0);
    CHECK(d.subgroup_size > 0);
    CHECK(d.limits.max_workgroup_invocations >= 128);  // Vulkan's guaranteed minimums
    CHECK(d.limits.max_workgroup_size_x >= 128);
    CHECK(d.limits.max_shared_bytes >= 16384);
    CHECK(d.limits.max_buffer_bytes >= (1u << 27));
    CHECK(d.int_dot == (**all)[i].int_dot);
    selected += d.selected;
    if (d.selected) CHECK(&(**all)[i] == *targets::spirv::select_device("auto"));
  }
  CHECK(selected == 1);
  if (const char* icd = std::getenv("VK_ICD_FILENAMES"); icd && std::string(icd).find("lvp_icd") != std::string::npos) {
    REQUIRE(listed.size() == 1);
    CHECK(listed[0].type == "cpu");
    CHECK(listed[0].name.find("llvmpipe") != std::string::npos);
  }
  // describe() names the selected device only.
  CHECK(desc.features.find("device [") == std::string::npos);
  // CPU targets list no devices.
  CHECK(targets::TargetRegistry::create().lookup("reference")->devices().empty());
  CHECK(targets::spirv::select_device("0").ok());
  auto bad = targets::spirv::select_device("no such device");
  REQUIRE(!bad.ok());
  CHECK(bad.error().message.find("devices:") != std::string::npos);
  // auto never picks a CPU implementation over the CPU targets.
  auto reg = targets::TargetRegistry::create();
  auto pick = reg.resolve("auto");
  REQUIRE(pick.ok());
  if (!(*targets::spirv::select_device("auto"))->is_gpu()) CHECK((*pick)->name() != "spirv");
  // The cheap check `auto` uses first never hides a hardware device Vulkan reports.
  bool hardware = false;
  for (const auto& d : **all) hardware = hardware || d.is_gpu();
  if (hardware) CHECK(target->traits().may_have_gpu);
  if (!target->traits().may_have_gpu) CHECK(desc.kind != "gpu");
}

TEST_CASE("spirv: options are validated") {
  auto target = targets::make_spirv_target();
  targets::TargetOptions o;
  o.values["int_dot"] = "maybe";
  CHECK(!target->parse_options(o).ok());
  o.values = {{"bogus", "1"}};
  CHECK(!target->parse_options(o).ok());
  o.values = {{"int_dot", "off"}, {"device", "0"}};
  CHECK(target->parse_options(o).ok());
}

TEST_CASE("spirv: int8 tmatmul, every epilogue and activation, odd shapes, OpSDot and scalar paths") {
  struct S {
    std::int64_t M, K, N;
  };
  const S shapes[] = {{1, 37, 5}, {3, 130, 33}, {17, 257, 67}, {64, 45, 19}, {2, 1, 1}, {5, 16, 7}};
  const char* acts[] = {"none", "relu", "gelu", "silu", "sigmoid", "tanh"};
  const bool device_dot = (*targets::spirv::select_device("auto"))->int_dot;
  std::uint64_t seed = 1;
  for (const char* dot : {"on", "off"}) {
    if (std::string(dot) == "on" && !device_dot) continue;  // the device lacks OpSDot: only the scalar path runs
    for (const S& s : shapes) {
      for (const char* act : acts) {
        CAPTURE(s.M);
        CAPTURE(s.K);
        CAPTURE(s.N);
        CAPTURE(act);
        ir::ParamValues pv;
        pv.set("w", rnd(ElemKind::T2, {s.K, s.N}, seed++));
        pv.set("ws", rnd(ElemKind::F32, {s.N}, seed++));
        Tol tol;
        tol.exact = exact_act(act);
        tol.rel = tol.abs = 4e-6;
        const std::string isa =
            check(tmatmul_tir(s.M, s.K, s.N, "i8", act, true), "f",
                  {rnd(ElemKind::I8, {s.M, s.K}, seed), rnd(ElemKind::F32, {s.M, 1}, seed + 1),
                   rnd(ElemKind::F32, {s.N}, seed + 2), rnd(ElemKind::F32, {s.M, s.N}, seed + 3)},
                  pv, tol, dot);
        CHECK(isa == (std::string(dot) == "on" ? "vulkan_sdot" : "vulkan_scalar"));
        seed += 4;
      }
    }
  }
}

TEST_CASE("spirv: f32 x ternary tmatmul within the derived bound") {
  for (std::int64_t M : {1, 3, 17, 64}) {
    const std::int64_t K = 37 + 30 * M % 101, N = 5 + M % 23;
    CAPTURE(M);
    CAPTURE(K);
    ir::ParamValues pv;
    const HostTensor w = rnd(ElemKind::T2, {K, N}, 11 + static_cast<std::uint64_t>(M));
    const HostTensor ws = rnd(ElemKind::F32, {N}, 12);
    pv.set("w", w);
    pv.set("ws", ws);
    const HostTensor x = rnd(ElemKind::F32, {M, K}, 13);
    Tol tol;
    tol.exact = false;
    tol.rel = 4 * kU;
    for (std::int64_t r = 0; r < M; ++r)
      for (std::int64_t n = 0; n < N; ++n) {
        double s = 0;
        for (std::int64_t k = 0; k < K; ++k) s += std::fabs(x.data[static_cast<std::size_t>(r * K + k)]);
        tol.per.push_back(static_cast<double>(K) * kU * s * std::fabs(ws.data[static_cast<std::size_t>(n)]));
      }
    check(tmatmul_tir(M, K, N, "f32", "none", false), "f", {x}, pv, tol);
  }
}

// A tmatmul with a grouped weight scale @gs : f32[G, N] (G = ceil(K / group)) as a
// parameter, or as argument %gs when `scale_arg`; `epi`: 0 none, 1 x_scale, 2 bias +
// residual, 3 x_scale + bias + residual.
std::string grouped_tir(std::int64_t M, std::int64_t K, std::int64_t N, std::int64_t group, const std::string& x,
                        const std::string& act, int epi, bool scale_arg) {
  const std::int64_t G = ir::grouped_scale_rows(K, group);
  const std::string ys = sh({M, N}), gs = "f32" + sh({G, N});
  const bool xs = epi == 1 || epi == 3, br = epi >= 2;
  std::string t = "param @w : t2" + sh({K, N}) + "\n" + (scale_arg ? "" : "param @gs : " + gs + "\n") +
                  "func @f(%q: " + x + sh({M, K});
  if (xs) t += ", %xs: f32" + sh({M, 1});
  if (scale_arg) t += ", %gs: " + gs;
  if (br) t += ", %b: f32" + sh({N}) + ", %r: f32" + ys;
  t += ") -> f32" + ys + " {\n^entry:\n  %w = param @w : t2" + sh({K, N}) + "\n";
  if (!scale_arg) t += "  %gs = param @gs : " + gs + "\n";
  t += std::string("  %y = tmatmul %q, %w") + (xs ? ", %xs" : "") + ", %gs" + (br ? ", %b, %r" : "") +
       " {x_scale = " + (xs ? "true" : "false") + ", w_scale = true, group = " + std::to_string(group) +
       ", bias = " + (br ? "true" : "false") + ", residual = " + (br ? "true" : "false") + ", act = " + act +
       "} : f32" + ys + "\n";
  return t + "  ret %y\n}\n";
}

// Grouped weight scales: y = epilogue(sum_i s[i, n] p_i), p_i the sum over group i.
//
// Tolerance, per element (u = 2^-24). With S = sum_i |s[i, n] p_i| (p_i exact) the
// shader's i8 path has p_i exact in int32 and float(p_i) exact (|p_i| <= 127 group <
// 2^24 here), one rounding per product s p_i, then G - 1 f32 additions: within (G - 1) u
// S + u S of the exact sum, which the reference rounds once more (u S): (G + 2) u S
// leaves a u S for second-order terms. The f32 path sums each group in f32 first:
// within (group - 1) u A_i of p_i (A_i = sum over the group of |x w|), which adds
// group u sum_i |s[i, n]| A_i. The epilogue's f32 ops (x_scale, bias, residual: the
// reference's own ops) scale that by |x_scale| and round each of their three results on
// both sides: 8 u (|acc x_scale| + |bias| + |residual|) more. relu does not widen a
// difference; the transcendental activations are Lipschitz with constant < 1.2 (gelu
// 1.13) and add their 4e-6 (1 + |want|) of the ungrouped test.
TEST_CASE("spirv: grouped-scale tmatmul (w_scale f32[G, N]), i8 and f32 x, every epilogue, OpSDot and scalar paths") {
  struct S {
    std::int64_t M, K, N, group;
    int epi;
    const char* act;
  };
  // Partial last groups (300, 513, 770, 2563 by 256; 100 by 32; 37 by 6), one partial
  // group (100 by 256), an exact fit (256), groups that straddle weight words (6, 20,
  // 100: not multiples of 16) and int8 words (6: not a multiple of 4), G == M (200 by
  // 100 with M = 2: the scales must never be read as an [M, N] epilogue operand), and
  // group 1 (G = K).
  const S cases[] = {
      {1, 300, 37, 256, 1, "relu"},  {3, 513, 17, 256, 3, "none"}, {17, 256, 65, 256, 2, "none"},
      {64, 100, 9, 256, 0, "none"},  {1, 100, 33, 32, 3, "gelu"},  {3, 37, 5, 6, 1, "relu"},
      {17, 770, 31, 256, 3, "silu"}, {1, 2563, 7, 256, 2, "none"}, {2, 200, 5, 100, 0, "none"},
      {5, 45, 19, 20, 3, "tanh"},    {3, 21, 4, 1, 1, "sigmoid"},
  };
  const bool device_dot = (*targets::spirv::select_device("auto"))->int_dot;
  std::uint64_t seed = 500;
  for (const char* x : {"i8", "f32"}) {
    for (const char* dot : {"on", "off"}) {
      if (std::string(dot) == "on" && (!device_dot || std::string(x) == "f32")) continue;
      for (std::size_t c = 0; c < std::size(cases); ++c) {
        const S& s = cases[c];
        const bool i8 = std::string(x) == "i8", scale_arg = c % 2 == 1;
        const bool xs = s.epi == 1 || s.epi == 3, br = s.epi >= 2;
        const std::int64_t G = ir::grouped_scale_rows(s.K, s.group);
        CAPTURE(s.M);
        CAPTURE(s.K);
        CAPTURE(s.N);
        CAPTURE(s.group);
        CAPTURE(s.epi);
        CAPTURE(s.act);
        CAPTURE(x);
        const HostTensor w = rnd(ElemKind::T2, {s.K, s.N}, seed++);
        const HostTensor gs = rnd(ElemKind::F32, {G, s.N}, seed++);
        ir::ParamValues pv;
        pv.set("w", w);
        if (!scale_arg) pv.set("gs", gs);
        std::vector<HostTensor> args{rnd(i8 ? ElemKind::I8 : ElemKind::F32, {s.M, s.K}, seed++)};
        const HostTensor xsv = rnd(ElemKind::F32, {s.M, 1}, seed++), b = rnd(ElemKind::F32, {s.N}, seed++),
                         r = rnd(ElemKind::F32, {s.M, s.N}, seed++);
        if (xs) args.push_back(xsv);
        if (scale_arg) args.push_back(gs);
        if (br) args.insert(args.end(), {b, r});
        const HostTensor& xv = args[0];
        const bool exact_a = exact_act(s.act);
        Tol tol;
        tol.exact = false;
        tol.rel = tol.abs = exact_a ? 0.0 : 4e-6;
        for (std::int64_t m = 0; m < s.M; ++m)
          for (std::int64_t n = 0; n < s.N; ++n) {
            double acc = 0, big_s = 0, f32_sums = 0;
            for (std::int64_t g = 0; g < G; ++g) {
              double p = 0, a = 0;
              for (std::int64_t k = g * s.group; k < std::min(s.K, (g + 1) * s.group); ++k) {
                const double t =
                    xv.data[static_cast<std::size_t>(m * s.K + k)] * w.data[static_cast<std::size_t>(k * s.N + n)];
                p += t;
                a += std::fabs(t);
              }
              const double sc = gs.data[static_cast<std::size_t>(g * s.N + n)];
              acc += sc * p;
              big_s += std::fabs(sc * p);
              f32_sums += std::fabs(sc) * a;
            }
            const double xscale = xs ? std::fabs(xsv.data[static_cast<std::size_t>(m)]) : 1.0;
            double terms = std::fabs(acc) * xscale;
            if (br)
              terms += std::fabs(b.data[static_cast<std::size_t>(n)]) +
                       std::fabs(r.data[static_cast<std::size_t>(m * s.N + n)]);
            const double d =
                (static_cast<double>(G + 2) * big_s + (i8 ? 0.0 : static_cast<double>(s.group) * f32_sums)) * kU;
            tol.per.push_back((d * xscale + 8 * kU * terms) * (exact_a ? 1.0 : 1.2) + 1e-37);
          }
        const std::string isa = check(grouped_tir(s.M, s.K, s.N, s.group, x, s.act, s.epi, scale_arg), "f", args, pv,
                                      tol, i8 ? dot : "auto");
        if (i8) CHECK(isa == (std::string(dot) == "on" ? "vulkan_sdot" : "vulkan_scalar"));
      }
    }
  }
}

TEST_CASE("spirv: quantize and quantize_int8 per row, zero rows, NaN, inf, odd widths: bit for bit") {
  for (std::int64_t cols : {1, 7, 64, 129}) {
    CAPTURE(cols);
    const std::string t = sh({5, cols});
    const std::string tir = "func @f(%x: f32" + t + ") -> (i8" + t + ", f32[5, 1], f32" + t +
                            ") {\n^entry:\n  %q, %s = quantize %x : i8" + t + ", f32[5, 1]\n  %fq = quantize_int8 %x : f32" +
                            t + "\n  ret %q, %s, %fq\n}\n";
    HostTensor x = rnd(ElemKind::F32, {5, cols}, static_cast<std::uint64_t>(cols));
    for (std::int64_t c = 0; c < cols; ++c) x.data[static_cast<std::size_t>(cols + c)] = 0.0;
    x.data[static_cast<std::size_t>(2 * cols)] = std::nan("");
    x.data[static_cast<std::size_t>(3 * cols)] = HUGE_VAL;
    check(tir, "f", {x}, {}, Tol{});
  }
}

TEST_CASE("spirv: rmsnorm, softmax and reductions on every axis") {
  for (std::int64_t len : {1, 7, 67}) {
    CAPTURE(len);
    Tol tol;
    tol.exact = false;
    tol.rel = static_cast<double>(len + 64) * 2 * kU;
    tol.abs = 1e-30;
    const std::string t = sh({3, 5, len});
    check("func @f(%x: f32" + t + ", %g: f32" + sh({len}) + ") -> f32" + t + " {\n^entry:\n  %y = rmsnorm %x, %g {eps = 1e-05} : f32" +
              t + "\n  ret %y\n}\n",
          "f", {rnd(ElemKind::F32, {3, 5, len}, 21), rnd(ElemKind::F32, {len}, 22)}, {}, tol);
    for (int axis = 0; axis < 3; ++axis) {
      CAPTURE(axis);
      const std::string a = std::to_string(axis);
      std::vector<std::int64_t> red = {3, 5, len};
      red[static_cast<std::size_t>(axis)] = 1;
      const std::string r = sh({red[0], red[1], red[2]});
      Tol sum_tol = tol;
      sum_tol.abs = static_cast<double>(len + 64) * 2 * kU * static_cast<double>(len);  // cancellation: |x| <= 1
      check("func @f(%x: f32" + t + ") -> (f32" + t + ", f32" + r + ", f32" + r + ", f32" + r +
                ") {\n^entry:\n  %s = softmax %x {axis = " + a + "} : f32" + t + "\n  %a = reduce_sum %x {axis = " + a +
                ", keepdims = true} : f32" + r + "\n  %m = reduce_mean %x {axis = " + a + ", keepdims = true} : f32" + r +
                "\n  %x1 = reduce_max %x {axis = " + a + ", keepdims = true} : f32" + r + "\n  ret %s, %a, %m, %x1\n}\n",
            "f", {rnd(ElemKind::F32, {3, 5, len}, 23 + static_cast<std::uint64_t>(axis))}, {}, sum_tol);
    }
  }
}

// Issue 33 item 15: a row of 1e-30 once gave all zeros (x^2 flushed, eps / m / m overflowed).
TEST_CASE("spirv: rmsnorm of tiny and huge rows matches the interpreter (power-of-two prescale)") {
  constexpr std::int64_t kRows = 6, kLen = 67;
  Tol tol;
  tol.exact = false;
  tol.rel = static_cast<double>(kLen + 64) * 2 * kU;
  tol.abs = 0;
  const HostTensor g = rnd(ElemKind::F32, {kLen}, 31);
  for (double eps : {1e-5, 1e-6, 0.0}) {
    CAPTURE(eps);
    // One magnitude per row: tiny normal rows (where eps dominates, or not with eps 0),
    // a moderate one, and huge ones that overflow an unscaled f32 sum of squares.
    // Every element normal (|base| >= 1e-3): subnormal inputs are the device's to flush.
    const double scales[kRows] = {1e-30, 3e-35, 1e-19, 1.0, 1e20, 1e36};
    const HostTensor base = rnd(ElemKind::F32, {kRows, kLen}, 32);
    std::vector<float> x(static_cast<std::size_t>(kRows * kLen));
    for (std::size_t i = 0; i < x.size(); ++i)
      x[i] = static_cast<float>(std::copysign(1e-3 + std::fabs(base.data[i]), base.data[i]) *
                                scales[i / static_cast<std::size_t>(kLen)]);
    char eps_text[32];
    std::snprintf(eps_text, sizeof eps_text, "%.9g", eps);
    const std::string t = sh({kRows, kLen});
    check("func @f(%x: f32" + t + ", %g: f32" + sh({kLen}) + ") -> f32" + t +
              " {\n^entry:\n  %y = rmsnorm %x, %g {eps = " + std::string(eps == 0 ? "0.0" : eps_text) + "} : f32" + t +
              "\n  ret %y\n}\n",
          "f", {HostTensor::from_f32({kRows, kLen}, x), g}, {}, tol);
  }
}

// The exp of the ewise ops and softmax: the x86 target's algorithm (issue 33 item 15:
// GLSL's exp was 28 ulp off at 88). Within 2^-22 relative (2 ulp of the binade's top, 4
// of its bottom) of the correctly rounded value; results below 2^-126 may be flushed to 0
// (the device's subnormal mode), which the absolute 2^-126 allows.
TEST_CASE("spirv: exp within 2^-22 relative on [-104, 89], specials, and subnormal results flushed at most") {
  std::vector<float> x;
  for (int i = 0; i <= 4000; ++i) x.push_back(static_cast<float>(-104.0 + 193.0 * i / 4000.0));
  for (float v : {88.0f, 88.5f, 88.72f, 88.7228f, 89.0f, -87.3f, -87.34f, -103.97f, -104.5f, 0.0f, -0.0f, 1e-8f,
                  -1e-8f, 0.5f, 1.0f, 2.0f, 20.0f, -20.0f})
    x.push_back(v);
  x.push_back(std::numeric_limits<float>::infinity());
  x.push_back(-std::numeric_limits<float>::infinity());
  x.push_back(std::nanf(""));
  const auto n = static_cast<std::int64_t>(x.size());
  Tol tol;
  tol.exact = false;
  tol.rel = 0x1p-22;
  tol.abs = 0x1p-126;
  check("func @f(%x: f32" + sh({n}) + ") -> f32" + sh({n}) + " {\n^entry:\n  %y = exp %x : f32" + sh({n}) +
            "\n  ret %y\n}\n",
        "f", {HostTensor::from_f32({n}, x)}, {}, tol);
}

// The documented softmax bound (targets/spirv/README.md): (len + 64) 2u relative, plus
// 2^-126 absolute for probabilities flushed to zero. A wide row spread over 120 so that
// thousands of probabilities fall below 2^-126.
TEST_CASE("spirv: softmax of a wide row with tiny probabilities holds the documented bound") {
  constexpr std::int64_t kLen = 4096;
  const HostTensor base = rnd(ElemKind::F32, {2, kLen}, 41);
  std::vector<float> x(static_cast<std::size_t>(2 * kLen));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(base.data[i] * 60.0);
  Tol tol;
  tol.exact = false;
  tol.rel = static_cast<double>(kLen + 64) * 2 * kU;
  tol.abs = 0x1p-126;
  const std::string t = sh({2, kLen});
  check("func @f(%x: f32" + t + ") -> f32" + t + " {\n^entry:\n  %s = softmax %x {axis = 1} : f32" + t +
            "\n  ret %s\n}\n",
        "f", {HostTensor::from_f32({2, kLen}, x)}, {}, tol);
}

// `run --check` allows the target's documented absolute floor (TargetDescription::
// abs_error_floor): exp(x - 100) is subnormal in the reference and flushed to 0 here.
TEST_CASE("spirv: run --check accepts flushed subnormal outputs within the documented floor, nothing more") {
  const std::string tj = std::string(TERNJIT_BINARY_DIR) + "/tools/ternjit/ternjit";
  if (!std::filesystem::exists(tj)) return;
  testing::TempDir dir;
  const auto run = [&](const std::string& body) {
    testing::spit((dir.path / "tiny.tri").string(),
                  "layer T {\n    fn forward(x: Tensor[N]) -> Tensor[N] {\n        return " + body + "\n    }\n}\n");
    const std::string cmd = "TERNJIT_CACHE_DIR=off " + tj + " run " + (dir.path / "tiny.tri").string() +
                            " --layer T --shape N=64 --target spirv --check > " + (dir.path / "out.txt").string() +
                            " 2>&1";
    return std::system(cmd.c_str());
  };
  CHECK_MESSAGE(run("exp(x - 100.0)") == 0, testing::slurp((dir.path / "out.txt").string()));
  CHECK(testing::slurp((dir.path / "out.txt").string()).find("matches the reference target") != std::string::npos);
}

TEST_CASE("spirv: ewise chains and elementwise ops with row and column broadcasts") {
  Tol tol;
  tol.exact = false;
  tol.rel = tol.abs = 4e-6;
  const std::string ops[] = {"add", "sub", "mul", "div", "max", "min"};
  for (const std::string& op : ops) {
    CAPTURE(op);
    check("func @f(%a: f32[3, 7], %b: f32[7], %c: f32[3, 1]) -> (f32[3, 7], f32[3, 7]) {\n^entry:\n  %x = " + op +
              " %a, %b : f32[3, 7]\n  %y = " + op + " %a, %c : f32[3, 7]\n  ret %x, %y\n}\n",
          "f", {rnd(ElemKind::F32, {3, 7}, 31), rnd(ElemKind::F32, {7}, 32), rnd(ElemKind::F32, {3, 1}, 33)}, {},
          op == "div" ? tol : Tol{});
  }
  const std::string unary[] = {"neg", "abs", "relu", "sigmoid", "tanh", "gelu", "silu", "exp", "log", "sqrt", "rsqrt"};
  for (const std::string& op : unary) {
    CAPTURE(op);
    HostTensor a = rnd(ElemKind::F32, {4, 9}, 34);
    if (op == "log" || op == "sqrt" || op == "rsqrt")
      for (double& v : a.data) v = static_cast<float>(std::fabs(v) + 0.01);
    const bool exact = op == "neg" || op == "abs" || op == "relu";
    check("func @f(%a: f32[4, 9]) -> f32[4, 9] {\n^entry:\n  %x = " + op + " %a : f32[4, 9]\n  ret %x\n}\n", "f", {a},
          {}, exact ? Tol{} : tol);
  }
  // A fused chain: ewise with steps over three operands (the pipeline makes these).
  check("func @f(%a: f32[5, 11], %b: f32[11], %c: f32[5, 11]) -> f32[5, 11] {\n^entry:\n"
        "  %y = ewise %a, %b, %c {steps = [mul(0, 1), add(3, 2), silu(4)]} : f32[5, 11]\n  ret %y\n}\n",
        "f", {rnd(ElemKind::F32, {5, 11}, 35), rnd(ElemKind::F32, {11}, 36), rnd(ElemKind::F32, {5, 11}, 37)}, {}, tol);
}

TEST_CASE("spirv: copies, aliases and a returned argument") {
  check("func @f(%a: f32[3, 4]) -> (f32[3, 4], f32[3, 4], f32[12]) {\n^entry:\n  %e = neg %a : f32[3, 4]\n"
        "  %r = reshape %e : f32[12]\n  ret %e, %a, %r\n}\n",
        "f", {rnd(ElemKind::F32, {3, 4}, 41)}, {}, Tol{});
}

TEST_CASE("spirv: unsupported ops and non-load-time weights are Unsupported errors") {
  auto target = targets::make_spirv_target();
  auto m = ir::parse_module("func @g(%x: i8[3, 30], %w: t2[30, 7]) -> f32[3, 7] {\n^entry:\n"
                            "  %y = tmatmul %x, %w {x_scale = false, w_scale = false, bias = false, residual = false, "
                            "act = none} : f32[3, 7]\n  ret %y\n}\n",
                            "t.tir");
  REQUIRE(m.ok());
  auto r = target->check_supported(*m->find_function("g"));
  REQUIRE(!r.ok());
  CHECK(r.error().code == ErrorCode::Unsupported);
  auto t = ir::parse_module("func @t(%x: f32[3, 4]) -> f32[4, 3] {\n^entry:\n  %y = transpose %x {perm = [1, 0]} : f32[4, 3]\n"
                            "  ret %y\n}\n",
                            "t.tir");
  REQUIRE(t.ok());
  CHECK(!target->check_supported(*t->find_function("t")).ok());
}

TEST_CASE("spirv: difftest's target check counts a program spirv refuses as not its own, never a failure") {
  const difftest::TargetConfig spirv{"spirv", "spirv", "", 1};
  const std::uint64_t seeds[] = {1, 2};
  // transpose has no shader: Unsupported, neither a run nor a failure.
  auto refused = ir::parse_module(
      "func @main(%x: f32[3, 4]) -> f32[4, 3] {\n^entry:\n"
      "  %y = transpose %x {perm = [1, 0]} : f32[4, 3]\n  ret %y\n}\n",
      "r.tir");
  REQUIRE(refused.ok());
  const difftest::CheckReport r = difftest::check_targets(*refused, std::span(&spirv, 1), seeds);
  CHECK(r.original_error.empty());
  CHECK(r.runs == 0);
  CHECK(r.failures.empty());
  REQUIRE(r.unsupported.size() == 1);
  CHECK(r.unsupported[0].level == "spirv");
  CHECK(r.unsupported[0].message.find("no shader for 'transpose'") != std::string::npos);
  // A program it has shaders for runs on every seed and agrees.
  auto own = ir::parse_module(
      "func @main(%x: f32[3, 4], %b: f32[4]) -> f32[3, 4] {\n^entry:\n"
      "  %y = add %x, %b : f32[3, 4]\n  %z = relu %y : f32[3, 4]\n  ret %z\n}\n",
      "o.tir");
  REQUIRE(own.ok());
  const difftest::CheckReport o = difftest::check_targets(*own, std::span(&spirv, 1), seeds);
  CHECK(o.runs == 2);
  CHECK(o.unsupported.empty());
  CHECK_MESSAGE(o.failures.empty(), (o.failures.empty() ? "" : o.failures[0].message));
}

TEST_CASE("spirv: a damaged module fails validation with an error, never a crash") {
  auto target = targets::make_spirv_target();
  const std::string tir = tmatmul_tir(3, 37, 5, "i8", "none", false);
  auto m = ir::parse_module(tir, "t.tir");
  REQUIRE(m.ok());
  auto art = target->compile(*m, "f", {});
  REQUIRE(art.ok());
  ir::ParamValues pv;
  pv.set("w", rnd(ElemKind::T2, {37, 5}, 1));
  pv.set("ws", rnd(ElemKind::F32, {5}, 2));
  targets::LoadContext lc;
  lc.params = &pv;
  // Overwrite words past the header of the first module (the table is 3 words long).
  targets::Artifact bad = *art;
  for (std::size_t i = 4 * 3 + 40; i < 4 * 3 + 120 && i < bad.bytes.size(); ++i) bad.bytes[i] = 0xEE;
  auto k = target->load(bad, lc);
  REQUIRE(!k.ok());
  CHECK(k.error().message.find("validation") != std::string::npos);
  // A truncated module table.
  bad = *art;
  bad.bytes.resize(6);
  CHECK(!target->load(bad, lc).ok());
  // A missing parameter.
  ir::ParamValues none;
  lc.params = &none;
  CHECK(!target->load(*art, lc).ok());
}

TEST_CASE("spirv: buffers past the device's limits are errors at load, never crashes") {
  auto target = targets::make_spirv_target();
  const targets::spirv::DeviceInfo* info = *targets::spirv::select_device("auto");
  // One f32 element more than the storage buffer range holds.
  const std::int64_t n = static_cast<std::int64_t>(info->max_storage_buffer_range) / 4 + 1;
  const std::string t = "f32[" + std::to_string(n) + "]";
  auto m = ir::parse_module("func @f(%a: " + t + ") -> " + t + " {\n^entry:\n  %x = neg %a : " + t + "\n  ret %x\n}\n",
                            "t.tir");
  REQUIRE(m.ok());
  auto art = target->compile(*m, "f", {});
  REQUIRE_MESSAGE(art.ok(), (art.ok() ? "" : art.error().message));
  ir::ParamValues none;
  targets::LoadContext lc;
  lc.params = &none;
  auto k = target->load(*art, lc);
  REQUIRE(!k.ok());
  CHECK(k.error().message.find("storage buffer range") != std::string::npos);
  // And a device allocation request no device can meet.
  auto dev = targets::spirv::Device::open(*info);
  REQUIRE(dev.ok());
  auto huge = (*dev)->create_buffer(std::size_t{1} << 41, false);
  REQUIRE(!huge.ok());
  CHECK(huge.error().code == ErrorCode::InvalidArgument);
}

TEST_CASE("spirv: emit spirv (disassembly) and glsl; other forms are errors") {
  auto target = targets::make_spirv_target();
  auto m = ir::parse_module(tmatmul_tir(3, 37, 5, "i8", "relu", true), "t.tir");
  REQUIRE(m.ok());
  targets::CompileOptions co;
  co.target.values["int_dot"] = "on";
  auto dis = target->emit(*m, "f", "spirv", co, nullptr);
  REQUIRE_MESSAGE(dis.ok(), (dis.ok() ? "" : dis.error().message));
  CHECK(dis->text.find("OpSDot") != std::string::npos);
  CHECK(dis->text.find("OpEntryPoint GLCompute") != std::string::npos);
  co.target.values["int_dot"] = "off";
  auto scalar = target->emit(*m, "f", "spirv", co, nullptr);
  REQUIRE(scalar.ok());
  CHECK(scalar->text.find("OpSDot") == std::string::npos);
  auto glsl = target->emit(*m, "f", "glsl", co, nullptr);
  REQUIRE(glsl.ok());
  CHECK(glsl->text.find("#version 450") != std::string::npos);
  CHECK(glsl->text.find("constant_id = 1") != std::string::npos);  // rows per invocation: a specialization constant
  auto bad = target->emit(*m, "f", "asm", co, nullptr);
  REQUIRE(!bad.ok());
  CHECK(bad.error().code == ErrorCode::InvalidArgument);
  CHECK(!target->emit(*m, "nope", "glsl", co, nullptr).ok());
}

TEST_CASE("spirv: weights are uploaded once per Program and shared by its kernels") {
  auto target = targets::make_spirv_target();
  auto state = target->new_program_state();
  ir::ParamValues pv;
  pv.set("w", rnd(ElemKind::T2, {37, 5}, 1));
  pv.set("ws", rnd(ElemKind::F32, {5}, 2));
  targets::LoadContext lc;
  lc.params = &pv;
  lc.state = state.get();
  for (std::int64_t M : {1, 4}) {
    auto m = ir::parse_module(tmatmul_tir(M, 37, 5, "i8", "none", false), "t.tir");
    REQUIRE(m.ok());
    auto art = target->compile(*m, "f", {});
    REQUIRE(art.ok());
    REQUIRE(target->load(*art, lc).ok());
  }
  CHECK(dynamic_cast<targets::DeviceWeights*>(state.get())->size() == 1);
}

TEST_CASE("spirv: tmatmul tuning space: candidates run, configurations change nothing") {
  auto target = targets::make_spirv_target();
  auto m = ir::parse_module(tmatmul_tir(17, 130, 33, "i8", "none", false), "t.tir");
  REQUIRE(m.ok());
  auto spaces = target->tuning_spaces(*m, "f", {});
  REQUIRE(spaces.ok());
  REQUIRE(spaces->size() == 1);
  const targets::TuningSpace& space = *(*spaces)[0];
  CHECK(space.problem().op == "spirv.tmatmul");
  CHECK(space.valid(space.default_config()));
  CHECK(!space.valid("wg=100000;tm=1"));
  CHECK(!space.valid("garbage"));
  auto cands = space.candidates();
  REQUIRE(cands.size() > 4);
  auto bench = space.bench({});
  REQUIRE_MESSAGE(bench.ok(), (bench.ok() ? "" : bench.error().message));
  for (std::size_t i = 0; i < cands.size(); i += 3) {
    auto run = (*bench)->prepare(cands[i].config);
    REQUIRE_MESSAGE(run.ok(), (run.ok() ? "" : run.error().message));
    (*run)->run(0);
  }
  CHECK(!(*bench)->prepare("wg=7").ok());
  // A grouped tmatmul is its own problem family, and its bench binds the scales.
  auto gm = ir::parse_module(grouped_tir(17, 100, 33, 32, "i8", "none", 0, false), "g.tir");
  REQUIRE(gm.ok());
  auto gspaces = target->tuning_spaces(*gm, "f", {});
  REQUIRE(gspaces.ok());
  REQUIRE(gspaces->size() == 1);
  const targets::TuningSpace& gspace = *(*gspaces)[0];
  CHECK(gspace.problem().family.find("group=32") != std::string::npos);
  auto gbench = gspace.bench({});
  REQUIRE_MESSAGE(gbench.ok(), (gbench.ok() ? "" : gbench.error().message));
  for (const auto& cand : gspace.candidates()) {
    auto run = (*gbench)->prepare(cand.config);
    REQUIRE_MESSAGE(run.ok(), (run.ok() ? "" : run.error().message));
    (*run)->run(0);
  }
}

TEST_CASE("spirv: BitLinear and a BitNet FFN through the Engine, kernels used from several threads") {
  EngineOptions o;
  o.target = "spirv";
  o.cache_dir = "off";
  auto e = Engine::create(o);
  REQUIRE_MESSAGE(e.ok(), (e.ok() ? "" : e.error().message));
  struct S {
    std::int64_t M, K, N;
  };
  for (const S& s : {S{1, 64, 16}, S{3, 63, 5}, S{17, 130, 67}, S{64, 45, 19}}) {
    CAPTURE(s.M);
    Program p = testing::bitlinear(*e);
    testing::BitLinearWeights w(s.K, s.N, static_cast<std::uint64_t>(s.K));
    w.bind(p);
    std::vector<float> x = testing::random_f32(s.M * s.K, 5);
    const std::vector<float> want = testing::oracle(w.params(), x, s.M, s.K, 2);
    std::vector<std::thread> ts;
    std::vector<int> ok(3, 0);
    for (int t = 0; t < 3; ++t)
      ts.emplace_back([&, t] {
        std::vector<float> y(static_cast<std::size_t>(s.M * s.N), std::nanf(""));
        TensorView in[] = {testing::view(x, {s.M, s.K})};
        TensorView out[] = {testing::view(y, {s.M, s.N})};
        if (!p.run("BitLinear.forward", in, out).ok()) return;
        // rmsnorm's f32 row sum may move a quantized value by one step: the
        // layer-level bound of the llvm test (1e-3 of the largest output).
        float mx = 0;
        for (float v : want) mx = std::max(mx, std::fabs(v));
        bool good = true;
        for (std::size_t i = 0; i < y.size(); ++i)
          good = good && std::fabs(double(y[i]) - double(want[i])) <= 1e-3 * mx + 1e-5;
        ok[static_cast<std::size_t>(t)] = good ? 1 : 0;
      });
    for (auto& t : ts) t.join();
    for (int v : ok) CHECK(v == 1);
  }

  const char* ffn = R"(layer FFN {
    param gamma: Tensor[D]
    param w_gate: TernaryTensor[D, H]
    param w_up: TernaryTensor[D, H]
    param w_down: TernaryTensor[H, D]
    param s_gate: Tensor[H]
    param s_up: Tensor[H]
    param s_down: Tensor[D]
    fn forward(x: Tensor[M, D]) -> Tensor[M, D] {
        let h = rmsnorm(x, gamma, 1e-5)
        let q = quantize_int8(h)
        let g = silu((q @ w_gate) * s_gate)
        let u = (q @ w_up) * s_up
        let a = quantize_int8(g * u)
        return x + (a @ w_down) * s_down
    }
})";
  EngineOptions ro;
  ro.target = "reference";
  ro.cache_dir = "off";
  auto ref = Engine::create(ro);
  REQUIRE(ref.ok());
  for (std::int64_t M : {1, 3, 17}) {
    CAPTURE(M);
    const std::int64_t D = 45, H = 77;
    std::vector<float> gamma = testing::random_f32(D, 1), sg = testing::random_f32(H, 2), su = testing::random_f32(H, 3),
                       sd = testing::random_f32(D, 4);
    std::vector<std::int8_t> wg = testing::random_t2(D * H, 5), wu = testing::random_t2(D * H, 6),
                             wd = testing::random_t2(H * D, 7);
    std::vector<float> x = testing::random_f32(M * D, 8);
    std::vector<float> ys[2];
    Engine* engines[2] = {&*e, &*ref};
    for (int i = 0; i < 2; ++i) {
      auto p = engines[i]->compile(ffn, "ffn.tri");
      REQUIRE_MESSAGE(p.ok(), (p.ok() ? "" : p.error().message));
      REQUIRE(p->bind("FFN.gamma", testing::view(gamma, {D})).ok());
      REQUIRE(p->bind("FFN.w_gate", testing::view(wg, {D, H})).ok());
      REQUIRE(p->bind("FFN.w_up", testing::view(wu, {D, H})).ok());
      REQUIRE(p->bind("FFN.w_down", testing::view(wd, {H, D})).ok());
      REQUIRE(p->bind("FFN.s_gate", testing::view(sg, {H})).ok());
      REQUIRE(p->bind("FFN.s_up", testing::view(su, {H})).ok());
      REQUIRE(p->bind("FFN.s_down", testing::view(sd, {D})).ok());
      ys[i].assign(static_cast<std::size_t>(M * D), std::nanf(""));
      TensorView in[] = {testing::view(x, {M, D})};
      TensorView out[] = {testing::view(ys[i], {M, D})};
      auto r = p->run("FFN.forward", in, out);
      REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
    }
    // Two quantizations in series: an f32 difference upstream may move one int8 value
    // by a step, which moves outputs by (scale of that row) * |w_down| * s_down.
    float mx = 0;
    for (float v : ys[1]) mx = std::max(mx, std::fabs(v));
    for (std::size_t i = 0; i < ys[0].size(); ++i) CHECK(std::fabs(ys[0][i] - ys[1][i]) <= 2e-2 * mx);
  }
}

// The DSL's grouped_matmul through the Engine (O2: quantize_int8 -> grouped integer
// tmatmul with the bias + relu epilogue; and the f32 path) on spirv against the reference
// target. Bound per row, as tests/unit/engine/grouped_scale_test.cpp derives it for f32
// group sums (u = 2^-24): (G + 9) u (max|s| sum_k (|x_k| + amax/127) + max|b|), the f32
// path adding group u max|s| sum_k |x_k|.
TEST_CASE("spirv: grouped_matmul layers through the Engine against the reference target") {
  const char* layer = R"(layer GLinear {
    param w: TernaryTensor[K, N]
    param s: Tensor[G, N]
    param b: Tensor[N]
    fn forward(x: Tensor[M, K]) -> Tensor[M, N] {
        return relu(grouped_matmul(quantize_int8(x), w, s, 32) + b)
    }
    fn float_path(x: Tensor[M, K]) -> Tensor[M, N] {
        return grouped_matmul(x, w, s, 32) + b
    }
})";
  Engine engines[2] = {Engine::create([] {
                         EngineOptions o;
                         o.target = "spirv";
                         o.cache_dir = "off";
                         return o;
                       }())
                           .value(),
                       Engine::create([] {
                         EngineOptions o;
                         o.target = "reference";
                         o.cache_dir = "off";
                         return o;
                       }())
                           .value()};
  struct Shape {
    std::int64_t M, K, N;
  };
  for (const Shape& sh : {Shape{1, 100, 9}, Shape{3, 67, 33}, Shape{17, 300, 5}}) {
    const std::int64_t G = (sh.K + 31) / 32;
    std::vector<std::int8_t> w = testing::random_t2(sh.K * sh.N, 1);
    std::vector<float> sc = testing::random_f32(G * sh.N, 2), b = testing::random_f32(sh.N, 3),
                       x = testing::random_f32(sh.M * sh.K, 4);
    for (const std::string fn : {"GLinear.forward", "GLinear.float_path"}) {
      CAPTURE(fn);
      CAPTURE(sh.M);
      CAPTURE(sh.K);
      std::vector<float> ys[2];
      for (int i = 0; i < 2; ++i) {
        auto p = engines[i].compile(layer, "glinear.tri");
        REQUIRE_MESSAGE(p.ok(), (p.ok() ? "" : p.error().message));
        REQUIRE(p->bind("GLinear.w", testing::view(w, {sh.K, sh.N})).ok());
        REQUIRE(p->bind("GLinear.s", testing::view(sc, {G, sh.N})).ok());
        REQUIRE(p->bind("GLinear.b", testing::view(b, {sh.N})).ok());
        ys[i].assign(static_cast<std::size_t>(sh.M * sh.N), std::nanf(""));
        TensorView in[] = {testing::view(x, {sh.M, sh.K})};
        TensorView out[] = {testing::view(ys[i], {sh.M, sh.N})};
        auto r = p->run(fn, in, out);
        REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
      }
      double smax = 0, bmax = 0;
      for (float v : sc) smax = std::max(smax, std::fabs(double{v}));
      for (float v : b) bmax = std::max(bmax, std::fabs(double{v}));
      for (std::int64_t m = 0; m < sh.M; ++m) {
        double sum = 0, amax = 0;
        for (std::int64_t k = 0; k < sh.K; ++k)
          amax = std::max(amax, std::fabs(double{x[static_cast<std::size_t>(m * sh.K + k)]}));
        for (std::int64_t k = 0; k < sh.K; ++k)
          sum += std::fabs(double{x[static_cast<std::size_t>(m * sh.K + k)]}) + amax / 127;
        const double factor = static_cast<double>(G + 9) + (fn == "GLinear.float_path" ? 32.0 : 0.0);
        const double bound = factor * kU * (smax * sum + bmax) + 1e-30;
        for (std::int64_t n = 0; n < sh.N; ++n) {
          const std::size_t i = static_cast<std::size_t>(m * sh.N + n);
          CHECK_MESSAGE(std::fabs(double{ys[0][i]} - double{ys[1][i]}) <= bound,
                        "[" << m << ", " << n << "]: " << ys[0][i] << " vs " << ys[1][i] << " (bound " << bound << ")");
        }
      }
    }
  }
}

// A host-visible buffer of the caller (the framework), made with the Vulkan API on the
// device ternjit_kernel_device names.
struct CallerBuffer {
  const targets::spirv::VulkanApi* vk = nullptr;
  VkDevice device = VK_NULL_HANDLE;
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  void* mapped = nullptr;
  CallerBuffer(const targets::spirv::VulkanApi* api, VkPhysicalDevice pd, VkDevice d, std::size_t bytes)
      : vk(api), device(d) {
    VkBufferCreateInfo ci{};
    ci.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
    ci.size = (bytes + 15) / 16 * 16 + 16;
    ci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    REQUIRE(vk->vkCreateBuffer(device, &ci, nullptr, &buffer) == VK_SUCCESS);
    VkMemoryRequirements req{};
    vk->vkGetBufferMemoryRequirements(device, buffer, &req);
    VkPhysicalDeviceMemoryProperties mem{};
    vk->vkGetPhysicalDeviceMemoryProperties(pd, &mem);
    const VkMemoryPropertyFlags want = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    std::uint32_t type = 0;
    while (type < mem.memoryTypeCount &&
           !((req.memoryTypeBits & (1u << type)) && (mem.memoryTypes[type].propertyFlags & want) == want))
      ++type;
    REQUIRE(type < mem.memoryTypeCount);
    VkMemoryAllocateInfo ai{};
    ai.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
    ai.allocationSize = req.size;
    ai.memoryTypeIndex = type;
    REQUIRE(vk->vkAllocateMemory(device, &ai, nullptr, &memory) == VK_SUCCESS);
    REQUIRE(vk->vkBindBufferMemory(device, buffer, memory, 0) == VK_SUCCESS);
    REQUIRE(vk->vkMapMemory(device, memory, 0, VK_WHOLE_SIZE, 0, &mapped) == VK_SUCCESS);
  }
  ~CallerBuffer() {
    vk->vkUnmapMemory(device, memory);
    vk->vkDestroyBuffer(device, buffer, nullptr);
    vk->vkFreeMemory(device, memory, nullptr);
  }
};

TEST_CASE("spirv: the framework launch path through the C ABI: the caller's buffers and command buffer") {
  ternjit_engine_options o;
  ternjit_engine_options_init(&o);
  o.target = "spirv";
  o.cache_dir = "off";
  ternjit_engine* engine = nullptr;
  REQUIRE(ternjit_engine_create(&o, &engine) == TERNJIT_OK);
  ternjit_program* program = nullptr;
  REQUIRE(ternjit_compile(engine, testing::kBitLinear, std::strlen(testing::kBitLinear), "bitlinear.tri", &program) ==
          TERNJIT_OK);
  const std::int64_t M = 3, K = 45, N = 19;
  testing::BitLinearWeights w(K, N, 9);
  const std::int64_t gs[] = {K}, ws[] = {K, N}, ss[] = {N}, xs[] = {M, K}, ys[] = {M, N};
  REQUIRE(ternjit_bind_weight(program, "BitLinear.gamma", w.gamma.data(), TERNJIT_F32, TERNJIT_FORMAT_PLAIN, gs, 1) == TERNJIT_OK);
  REQUIRE(ternjit_bind_weight(program, "BitLinear.w", w.w.data(), TERNJIT_T2, TERNJIT_FORMAT_PLAIN, ws, 2) == TERNJIT_OK);
  REQUIRE(ternjit_bind_weight(program, "BitLinear.w_scale", w.w_scale.data(), TERNJIT_F32, TERNJIT_FORMAT_PLAIN, ss, 1) ==
          TERNJIT_OK);
  std::vector<float> x = testing::random_f32(M * K, 3), host_y(static_cast<std::size_t>(M * N), std::nanf(""));
  ternjit_tensor in{x.data(), TERNJIT_F32, 2, xs};
  ternjit_tensor out{host_y.data(), TERNJIT_F32, 2, ys};
  REQUIRE(ternjit_run(program, "BitLinear.forward", &in, 1, &out, 1) == TERNJIT_OK);
  ternjit_kernel* kernel = nullptr;
  REQUIRE(ternjit_get_kernel(program, "BitLinear.forward", &in, 1, &kernel) == TERNJIT_OK);

  std::uintptr_t h[8];
  std::size_t count = 2;
  CHECK(ternjit_kernel_device(kernel, h, &count) == TERNJIT_INVALID_ARGUMENT);  // too little room
  CHECK(count == 5);
  count = 8;
  REQUIRE(ternjit_kernel_device(kernel, h, &count) == TERNJIT_OK);
  REQUIRE(count == 5);
  const targets::spirv::VulkanApi* vk = *targets::spirv::vulkan_api();
  auto pd = reinterpret_cast<VkPhysicalDevice>(h[1]);
  auto device = reinterpret_cast<VkDevice>(h[2]);
  auto queue = reinterpret_cast<VkQueue>(h[3]);
  const auto family = static_cast<std::uint32_t>(h[4]);

  // The framework's side: its buffers, its pool and command buffer, its submit and fence,
  // all freed before the last Program on the device is (the device lives with them).
  void* buffers[2] = {nullptr, nullptr};
  {
    CallerBuffer xb(vk, pd, device, x.size() * 4), yb(vk, pd, device, host_y.size() * 4);
    std::memcpy(xb.mapped, x.data(), x.size() * 4);
    std::memset(yb.mapped, 0x7F, host_y.size() * 4);
    VkCommandPoolCreateInfo pci{};
    pci.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
    pci.queueFamilyIndex = family;
    VkCommandPool pool = VK_NULL_HANDLE;
    REQUIRE(vk->vkCreateCommandPool(device, &pci, nullptr, &pool) == VK_SUCCESS);
    VkCommandBufferAllocateInfo cai{};
    cai.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
    cai.commandPool = pool;
    cai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    cai.commandBufferCount = 1;
    VkCommandBuffer cb = VK_NULL_HANDLE;
    REQUIRE(vk->vkAllocateCommandBuffers(device, &cai, &cb) == VK_SUCCESS);
    VkCommandBufferBeginInfo bi{};
    bi.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
    REQUIRE(vk->vkBeginCommandBuffer(cb, &bi) == VK_SUCCESS);
    buffers[0] = reinterpret_cast<void*>(xb.buffer);
    buffers[1] = reinterpret_cast<void*>(yb.buffer);
    // Twice into one command buffer: the second launch reuses the first one's descriptor sets.
    REQUIRE(ternjit_kernel_launch(kernel, cb, buffers) == TERNJIT_OK);
    REQUIRE(ternjit_kernel_launch(kernel, cb, buffers) == TERNJIT_OK);
    CHECK(ternjit_kernel_launch(kernel, nullptr, buffers) == TERNJIT_INVALID_ARGUMENT);
    VkMemoryBarrier mb{};
    mb.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
    mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    vk->vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                             VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, nullptr, 0, nullptr);
    REQUIRE(vk->vkEndCommandBuffer(cb) == VK_SUCCESS);
    VkFenceCreateInfo fi{};
    fi.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
    VkFence fence = VK_NULL_HANDLE;
    REQUIRE(vk->vkCreateFence(device, &fi, nullptr, &fence) == VK_SUCCESS);
    VkSubmitInfo si{};
    si.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
    si.commandBufferCount = 1;
    si.pCommandBuffers = &cb;
    REQUIRE(vk->vkQueueSubmit(queue, 1, &si, fence) == VK_SUCCESS);
    REQUIRE(vk->vkWaitForFences(device, 1, &fence, VK_TRUE, 60'000'000'000ull) == VK_SUCCESS);
    std::vector<float> launched(host_y.size());
    std::memcpy(launched.data(), yb.mapped, launched.size() * 4);
    CHECK(testing::bit_equal(launched, host_y));  // the same shaders on the same inputs
    vk->vkDestroyFence(device, fence, nullptr);
    vk->vkDestroyCommandPool(device, pool, nullptr);
  }
  ternjit_program_destroy(program);
  ternjit_engine_destroy(engine);

  // A CPU target's kernel has no device.
  o.target = "reference";
  REQUIRE(ternjit_engine_create(&o, &engine) == TERNJIT_OK);
  REQUIRE(ternjit_compile(engine, testing::kBitLinear, std::strlen(testing::kBitLinear), "bitlinear.tri", &program) ==
          TERNJIT_OK);
  REQUIRE(ternjit_bind_weight(program, "BitLinear.gamma", w.gamma.data(), TERNJIT_F32, TERNJIT_FORMAT_PLAIN, gs, 1) == TERNJIT_OK);
  REQUIRE(ternjit_bind_weight(program, "BitLinear.w", w.w.data(), TERNJIT_T2, TERNJIT_FORMAT_PLAIN, ws, 2) == TERNJIT_OK);
  REQUIRE(ternjit_bind_weight(program, "BitLinear.w_scale", w.w_scale.data(), TERNJIT_F32, TERNJIT_FORMAT_PLAIN, ss, 1) ==
          TERNJIT_OK);
  REQUIRE(ternjit_get_kernel(program, "BitLinear.forward", &in, 1, &kernel) == TERNJIT_OK);
  count = 8;
  CHECK(ternjit_kernel_device(kernel, h, &count) == TERNJIT_UNSUPPORTED);
  CHECK(ternjit_kernel_launch(kernel, reinterpret_cast<void*>(1), buffers) == TERNJIT_UNSUPPORTED);
  ternjit_program_destroy(program);
  ternjit_engine_destroy(engine);
}

// The pipeline-cache blobs under `dir`: the disk cache's entries of kind target-file.
std::vector<std::string> pipeline_blobs(const std::filesystem::path& dir) {
  std::vector<std::string> found;
  for (const auto& f : std::filesystem::recursive_directory_iterator(dir)) {
    if (!f.is_regular_file() || f.path().extension() != ".tje") continue;
    auto e = cache::decode_entry(testing::slurp(f.path()));
    if (e.ok() && e->kind == cache::EntryKind::TargetFile) found.push_back(f.path().string());
  }
  return found;
}

TEST_CASE("spirv: an Engine's explicit cache directory gets the pipeline blob, the environment's does not") {
  testing::TempDir mine, env;
  // Every variable the default directory comes from points elsewhere: the engine's own
  // directory must win (the target never reads the environment for it).
  const char* names[] = {"TERNJIT_CACHE_DIR", "XDG_CACHE_HOME", "HOME"};
  std::vector<std::pair<std::string, std::optional<std::string>>> saved;
  for (const char* n : names) {
    const char* v = std::getenv(n);
    saved.emplace_back(n, v ? std::optional<std::string>(v) : std::nullopt);
    ::setenv(n, env.path.string().c_str(), 1);
  }
  {
    EngineOptions o;
    o.target = "spirv";
    o.cache_dir = mine.path.string();
    auto e = Engine::create(o);
    REQUIRE_MESSAGE(e.ok(), (e.ok() ? "" : e.error().message));
    Program p = testing::bitlinear(*e);
    testing::BitLinearWeights w(37, 21, 7);
    w.bind(p);
    std::vector<float> x = testing::random_f32(3 * 37, 5);
    std::vector<float> y(3 * 21, std::nanf(""));
    TensorView in[] = {testing::view(x, {3, 37})};
    TensorView out[] = {testing::view(y, {3, 21})};
    auto ran = p.run("BitLinear.forward", in, out);
    CHECK_MESSAGE(ran.ok(), (ran.ok() ? "" : ran.error().message));
  }
  for (const auto& [n, v] : saved) {
    if (v) ::setenv(n.c_str(), v->c_str(), 1);
    else ::unsetenv(n.c_str());
  }
  const std::vector<std::string> blobs = pipeline_blobs(mine.path);
  REQUIRE(blobs.size() == 1);
  CHECK(std::filesystem::file_size(blobs[0]) > cache::kEntryHeaderSize + targets::spirv::kPipelineHeaderBytes);
  CHECK(pipeline_blobs(env.path).empty());

  // cache_dir "off": no blob anywhere.
  testing::TempDir off_env;
  {
    ::setenv("TERNJIT_CACHE_DIR", off_env.path.string().c_str(), 1);
    EngineOptions o;
    o.target = "spirv";
    o.cache_dir = "off";
    auto e = Engine::create(o);
    REQUIRE(e.ok());
    Program p = testing::bitlinear(*e);
    testing::BitLinearWeights w(45, 19, 9);
    w.bind(p);
    std::vector<float> x = testing::random_f32(45, 6);
    std::vector<float> y(19, std::nanf(""));
    TensorView in[] = {testing::view(x, {1, 45})};
    TensorView out[] = {testing::view(y, {1, 19})};
    CHECK(p.run("BitLinear.forward", in, out).ok());
    if (saved[0].second) ::setenv("TERNJIT_CACHE_DIR", saved[0].second->c_str(), 1);
    else ::unsetenv("TERNJIT_CACHE_DIR");
  }
  CHECK(pipeline_blobs(off_env.path).empty());
}

TEST_CASE("spirv: the pipeline cache is stored in the kernel cache directory, a corrupt one is rebuilt") {
  // The process opened its device already (the blob is read once per device and
  // process); this checks the file the device writes and reads back in a child process.
  testing::TempDir dir;
  const std::string tj = std::string(TERNJIT_BINARY_DIR) + "/tools/ternjit/ternjit";
  if (!std::filesystem::exists(tj)) return;
  const std::string run = "TERNJIT_CACHE_DIR=" + dir.path.string() + " " + tj + " run " +
                          std::string(TERNJIT_SOURCE_DIR) +
                          "/tests/dsl/bitlinear.tri --layer BitLinear --shape M=3,K=37,N=21 --target spirv > " +
                          (dir.path / "out.txt").string() + " 2> " + (dir.path / "err.txt").string();
  REQUIRE(std::system(run.c_str()) == 0);
  std::vector<std::string> blobs = pipeline_blobs(dir.path);
  REQUIRE(blobs.size() == 1);
  const std::string blob = blobs[0];
  CHECK(std::filesystem::file_size(blob) > cache::kEntryHeaderSize + targets::spirv::kPipelineHeaderBytes);
  // A new process finds and reads the blob (no warning), and the result is the same.
  REQUIRE(std::system(run.c_str()) == 0);
  CHECK(testing::slurp(dir.path / "err.txt").find("warning") == std::string::npos);
  // Corrupt its last byte: the next process warns, removes it, still runs, and writes a new one.
  {
    std::string bytes = testing::slurp(blob);
    bytes.back() = static_cast<char>(bytes.back() ^ 0x5a);
    testing::spit(blob, bytes);
  }
  REQUIRE(std::system(run.c_str()) == 0);
  std::string err = testing::slurp(dir.path / "err.txt");
  CHECK_MESSAGE(err.find("checksum mismatch") != std::string::npos, err);
  REQUIRE(std::system(run.c_str()) == 0);  // the next process reads a good one cleanly
  err = testing::slurp(dir.path / "err.txt");
  CHECK_MESSAGE(err.find("checksum") == std::string::npos, err);
}

// Issue 33 item 8: what a hostile cache directory holds where the pipeline blob goes.
// The entry file of this device's blob in `dir` (its key: cache::target_file_key).
std::filesystem::path blob_entry(const std::filesystem::path& dir) {
  auto info = targets::spirv::select_device("");
  REQUIRE(info.ok());
  const cache::Key key = cache::target_file_key(
      targets::spirv::kPipelineBlobName, targets::spirv::pipeline_blob_identity((*info)->pipeline_identity()), cache::ternjit_version());
  return dir / "v1" / "objects" / (key.hex() + std::string(".tje"));
}

// Runs BitLinear on spirv with `dir` as the engine's cache; true when it ran and matched
// the reference target. The warnings land in `log`.
bool run_with_cache(const std::filesystem::path& dir, std::string& log, double& seconds) {
  std::mutex mu;
  EngineOptions o;
  o.target = "spirv";
  o.cache_dir = dir.string();
  o.trace = [&](std::string_view line) {
    std::lock_guard lock(mu);
    log += std::string(line) + "\n";
  };
  const auto t0 = std::chrono::steady_clock::now();
  bool ok = false;
  {
    auto e = Engine::create(o);
    REQUIRE_MESSAGE(e.ok(), (e.ok() ? "" : e.error().message));
    Program p = testing::bitlinear(*e);
    testing::BitLinearWeights w(29, 11, 3);
    w.bind(p);
    std::vector<float> x = testing::random_f32(2 * 29, 4);
    std::vector<float> y(2 * 11, std::nanf(""));
    TensorView in[] = {testing::view(x, {2, 29})};
    TensorView out[] = {testing::view(y, {2, 11})};
    auto ran = p.run("BitLinear.forward", in, out);
    ok = ran.ok() && testing::close(testing::oracle(w.params(), x, 2, 29), y);
  }
  seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return ok;
}

TEST_CASE("spirv: hostile pipeline-cache files are refused with a message; the run succeeds without them") {
  // A good blob to forge from: the payload a normal run stores.
  testing::TempDir good;
  std::string log;
  double seconds = 0;
  REQUIRE(run_with_cache(good.path, log, seconds));
  const std::filesystem::path good_entry = blob_entry(good.path);
  REQUIRE(std::filesystem::is_regular_file(good_entry));
  const std::string good_file = testing::slurp(good_entry);
  auto decoded = cache::decode_entry(good_file);
  REQUIRE(decoded.ok());
  const cache::Key key = *cache::Key::parse(decoded->key);
  const std::string payload(decoded->payload);
  REQUIRE(payload.size() >= targets::spirv::kPipelineHeaderBytes);  // lavapipe's is the header alone

  struct Case {
    const char* name;
    std::function<void(const std::filesystem::path& entry)> plant;
    const char* message;  // in the warnings
  };
  const auto forged = [&](std::size_t offset) {
    return [&, offset](const std::filesystem::path& entry) {
      std::string p = payload;
      p[offset] = static_cast<char>(p[offset] ^ 0x01);
      testing::spit(entry, cache::encode_entry(cache::EntryKind::TargetFile, key, p));
    };
  };
  const Case cases[] = {
      {"symlink to /dev/zero",
       [](const std::filesystem::path& entry) { std::filesystem::create_symlink("/dev/zero", entry); },
       "is a symlink: refused"},
      {"FIFO", [](const std::filesystem::path& entry) { REQUIRE(::mkfifo(entry.c_str(), 0600) == 0); },
       "is not a regular file: refused"},
      {"hard link",
       [&](const std::filesystem::path& entry) {
         testing::spit(entry.string() + ".other", good_file);
         std::filesystem::create_hard_link(entry.string() + ".other", entry);
       },
       "hard links"},
      {"sparse 128 MiB file (under the cache's cap, so eviction leaves it to the read)",
       [](const std::filesystem::path& entry) {
         testing::spit(entry, "");
         std::filesystem::resize_file(entry, std::uint64_t{128} << 20);
       },
       "larger than 67108864 bytes"},
      {"truncated entry",
       [&](const std::filesystem::path& entry) { testing::spit(entry, good_file.substr(0, good_file.size() / 2)); },
       "truncated or extended"},
      {"flipped payload byte (checksum)",
       [&](const std::filesystem::path& entry) {
         std::string f = good_file;
         f[f.size() - 1] = static_cast<char>(f[f.size() - 1] ^ 0x10);
         testing::spit(entry, f);
       },
       "checksum mismatch"},
      {"forged headerSize", forged(0), "headerSize"},
      {"forged headerVersion", forged(4), "headerVersion"},
      {"forged vendorID", forged(8), "vendorID"},
      {"forged deviceID", forged(12), "deviceID"},
      {"forged pipelineCacheUUID", forged(20), "pipelineCacheUUID"},
      {"truncated blob (a valid entry of 10 bytes)",
       [&](const std::filesystem::path& entry) {
         testing::spit(entry, cache::encode_entry(cache::EntryKind::TargetFile, key, payload.substr(0, 10)));
       },
       "truncated: 10 bytes"},
      {"an artifact entry in its place",
       [&](const std::filesystem::path& entry) {
         testing::spit(entry, cache::encode_entry(cache::EntryKind::Artifact, key, payload));
       },
       "holds an artifact, not a target-file"},
  };
  for (const Case& c : cases) {
    INFO(std::string(c.name));
    testing::TempDir dir;
    ::chmod(dir.path.c_str(), 0700);
    {
      auto opened = cache::DiskCache::open(cache::CacheOptions{dir.path.string()});
      REQUIRE(opened.ok());  // the layout, so that the hostile file can be planted in v1/objects
    }
    c.plant(blob_entry(dir.path));
    log.clear();
    CHECK(run_with_cache(dir.path, log, seconds));
    CHECK_MESSAGE(log.find(c.message) != std::string::npos, log);
    CHECK(seconds < 20);
    // Replaced by a good blob (a hard link's other name stays as it was).
    CHECK(pipeline_blobs(dir.path).size() == 1);
    CHECK(std::filesystem::is_regular_file(std::filesystem::symlink_status(blob_entry(dir.path))));
  }
}

TEST_CASE("spirv: a refused cache directory (world-writable, foreign) gets no pipeline blob read or written") {
  testing::TempDir dir;
  {
    auto opened = cache::DiskCache::open(cache::CacheOptions{dir.path.string()});
    REQUIRE(opened.ok());
  }
  // A FIFO where the blob goes (any user can plant one in a 0777 directory): never opened.
  const std::filesystem::path entry = blob_entry(dir.path);
  REQUIRE(::mkfifo(entry.c_str(), 0600) == 0);
  REQUIRE(::chmod(dir.path.c_str(), 0777) == 0);
  std::string log;
  double seconds = 0;
  CHECK(run_with_cache(dir.path, log, seconds));
  CHECK(seconds < 20);
  CHECK_MESSAGE(log.find("writable by group or others") != std::string::npos, log);
  CHECK_MESSAGE(log.find("compiling without the disk cache") != std::string::npos, log);
  // Nothing written: no blob, no artifact, and nothing at the old blob's place either.
  CHECK(std::filesystem::is_fifo(entry));
  std::size_t files = 0;
  for (const auto& f : std::filesystem::recursive_directory_iterator(dir.path)) files += f.is_regular_file();
  CHECK(files == 0);
}

}  // namespace
}  // namespace ternjit
