// SPDX-License-Identifier: Apache-2.0
// matmul_s8_test.cpp - the int8 weight-gradient matmul (targets/x86/matmul.h, Int8MatMulKernel) and its x86 plan step.
//
// Bit-exact: the kernel's integer sum is exact (mod 2^32, as the IR's i32 matmul) and
// its epilogue is the interpreter's f32 cast then multiplies in the same order, so every
// element must equal the reference formula below, computed in the test (and, through
// the Engine, the interpreter's output) bit for bit.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ir/interpret.h"
#include "ir/module_impl.h"
#include "passes/pipeline.h"
#include "passes/specialize_shapes.h"
#include "targets/x86/isa.h"
#include "targets/x86/matmul.h"
#include "targets/x86/x86_target.h"
#include "tests/unit/engine/engine_testing.h"
#include "tests/unit/x86/x86_testing.h"
#include "ternjit/builder.h"

namespace ternjit::targets::x86 {
namespace {

std::vector<Isa> host_s8_isas() {
  std::vector<Isa> r;
  for (Isa isa : {Isa::Avx2, Isa::Avx512, Isa::Avx512Vnni})
    if (host_isas().supports(isa)) r.push_back(isa);
    else MESSAGE("skipped for " << isa_name(isa) << ": host lacks it");
  return r;
}

// C[k, n] = (f32(S) [* u[k]]) * t[n], S = sum_m A[m, k] B[n, m] wrapped to int32.
std::vector<float> reference(const Int8MatMulProblem& p, const std::vector<std::int8_t>& a,
                             const std::vector<std::int8_t>& b, const std::vector<float>& u,
                             const std::vector<float>& t) {
  std::vector<float> c(static_cast<std::size_t>(p.K * p.N));
  for (std::int64_t k = 0; k < p.K; ++k)
    for (std::int64_t n = 0; n < p.N; ++n) {
      std::uint32_t s = 0;
      for (std::int64_t m = 0; m < p.M; ++m)
        s += static_cast<std::uint32_t>(std::int32_t{a[static_cast<std::size_t>(p.a_km ? k * p.M + m : m * p.K + k)]} *
                                        std::int32_t{b[static_cast<std::size_t>(n * p.M + m)]});
      float y = static_cast<float>(static_cast<std::int32_t>(s));
      if (p.row_scale) y = y * u[static_cast<std::size_t>(k)];
      y = y * t[static_cast<std::size_t>(n)];
      c[static_cast<std::size_t>(k * p.N + n)] = y;
    }
  return c;
}

bool same_bits(float x, float y) { return std::memcmp(&x, &y, 4) == 0; }

TEST_CASE("matmul s8: the int8 kernel is bit-exact with the reference formula, odd shapes, tails, 1 and 2 threads, "
          "avx2 / avx512 / avx512_vnni") {
  // M: 1, not a multiple of 4 or 2 (padded groups), large; K: 1, tails of the 4-row tile;
  // N: 1, tails of the 8/16-column vectors and 64-column tiles, more than one column
  // block (M = 129: 132 * 4 bytes per column); the last shape is large enough to stream.
  struct Shape {
    std::int64_t M, K, N;
  };
  const Shape shapes[] = {{1, 1, 1},    {1, 5, 17},   {3, 7, 33},  {5, 13, 65},   {17, 4, 130},
                          {33, 9, 16},  {129, 6, 700}, {2, 3, 1000}, {4, 129, 8192}};
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> i8(-128, 127);
  std::uniform_real_distribution<float> scale(-2.0f, 2.0f);
  for (Isa isa : host_s8_isas()) {
    for (const Shape& sh : shapes) {
      for (int form = 0; form < 3; ++form) {  // no u; u; u with A given as At [K, M]
        const bool row_scale = form > 0;
        const Int8MatMulProblem p{sh.M, sh.K, sh.N, row_scale, form == 2};
        std::vector<std::int8_t> a(static_cast<std::size_t>(sh.M * sh.K)), b(static_cast<std::size_t>(sh.N * sh.M));
        for (auto& v : a) v = static_cast<std::int8_t>(i8(rng));
        for (auto& v : b) v = static_cast<std::int8_t>(i8(rng));
        if (sh.M == 129) {  // extremes: every product 128 * 128 or -128 * 127
          for (std::size_t i = 0; i < a.size(); ++i) a[i] = -128;
          for (std::size_t i = 0; i < b.size(); ++i) b[i] = i % 2 ? -128 : 127;
        }
        std::vector<float> u(static_cast<std::size_t>(sh.K)), t(static_cast<std::size_t>(sh.N));
        for (auto& v : u) v = scale(rng);
        for (auto& v : t) v = scale(rng);
        if (sh.N > 2) t[1] = std::nanf("");  // NaN and Inf scales propagate
        if (sh.N > 3) t[2] = INFINITY;
        const std::vector<float> want = reference(p, a, b, u, t);
        auto kernel = Int8MatMulKernel::create(p, isa);
        REQUIRE_MESSAGE(kernel.ok(), (kernel.ok() ? "" : kernel.error().message));
        for (int threads : {1, 2}) {
          CAPTURE(kernel.value()->describe());
          CAPTURE(threads);
          // 64-byte aligned storage (the streaming path needs it), NaN-poisoned.
          std::vector<float> store(want.size() + 16, std::nanf(""));
          float* c = store.data();
          while (reinterpret_cast<std::uintptr_t>(c) % 64 != 0) ++c;
          kernel.value()->run(a.data(), b.data(), u.data(), t.data(), c, testing::std_threads(threads));
          std::size_t bad = 0;
          for (std::size_t i = 0; i < want.size(); ++i)
            if (!same_bits(c[i], want[i]) && !(std::isnan(c[i]) && std::isnan(want[i]))) {
              if (bad++ < 5) MESSAGE("element " << i << ": want " << want[i] << " got " << c[i]);
            }
          CHECK(bad == 0);
        }
      }
    }
  }
  auto bad = Int8MatMulKernel::create(Int8MatMulProblem{0, 1, 1, false}, Isa::Avx2);
  CHECK(!bad.ok());
}

TEST_CASE("matmul s8: the int8_dw backward of a BitLinear runs the int8 kernel through the Engine, bit-exact") {
  auto mod = Module::from_text(ternjit::testing::kQatBitLinear, "qat.tir");
  REQUIRE(mod.ok());
  GradOptions go;
  go.wrt = {"x", "@L.w"};
  go.int8_dx = true;
  go.int8_dw = true;
  REQUIRE(grad(*mod, "L.forward", go).ok());
  const std::int64_t K = 67, N = 33;
  const ir::Module& im = ir::unwrap(*mod);
  for (Isa isa : host_s8_isas()) {
    for (std::int64_t M : {1, 6, 17}) {
      CAPTURE(isa_name(isa));
      CAPTURE(M);
      // The plan: the int8 matmul step (no matmul or cast as a reference step).
      std::map<std::string, std::int64_t> bind = {{"M", M}, {"K", K}, {"N", N}};
      auto spec = passes::specialize_function(im, "L.forward.bwd", bind, true);
      REQUIRE_MESSAGE(spec.ok(), (spec.ok() ? "" : spec.error().message));
      auto target = make_x86_target();
      passes::PipelineOptions po;
      REQUIRE(passes::run_pipeline(spec.value(), passes::default_pipeline(passes::OptLevel::O2), po).ok());
      auto steps = describe_code(spec.value(), "L.forward.bwd", isa_name(isa), 2);
      REQUIRE_MESSAGE(steps.ok(), (steps.ok() ? "" : steps.error().message));
      bool s8 = false;
      for (const StepCode& st : steps.value()) {
        CHECK_MESSAGE(st.op.find("(reference)") == std::string::npos, st.op << " " << st.summary);
        s8 = s8 || st.config.find("matmul s8") != std::string::npos;
      }
      CHECK(s8);

      for (int threads : {1, 2}) {
        EngineOptions eo;
        eo.target = "x86";
        eo.max_isa = std::string(isa_name(isa));
        eo.threads = threads;
        auto e = Engine::create(eo);
        REQUIRE(e.ok());
        auto p = e->compile(*mod);
        REQUIRE_MESSAGE(p.ok(), (p.ok() ? "" : p.error().message));
        const auto seed = static_cast<std::uint64_t>(M * 31 + 9);
        ir::ParamValues params;
        ir::HostTensor w = ir::HostTensor::random(ElemKind::F32, {K, N}, seed);
        ir::HostTensor b = ir::HostTensor::random(ElemKind::F32, {N}, seed + 1);
        params.set("L.w", w);
        params.set("L.b", b);
        std::vector<float> ws = w.to_f32(), bs = b.to_f32();
        REQUIRE(p->bind("L.w", TensorView{ws.data(), ElemKind::F32, w.shape}).ok());
        REQUIRE(p->bind("L.b", TensorView{bs.data(), ElemKind::F32, b.shape}).ok());
        const ir::HostTensor x = ir::HostTensor::random(ElemKind::F32, {M, K}, seed + 2);
        auto fwd = ir::interpret(im, "L.forward.fwd", std::vector<ir::HostTensor>{x}, params);
        REQUIRE(fwd.ok());
        std::vector<ir::HostTensor> args{x, ir::HostTensor::random(ElemKind::F32, {M, N}, seed + 3)};
        args.insert(args.end(), fwd.value().begin() + 1, fwd.value().end());
        auto want = ir::interpret(im, "L.forward.bwd", args, params);
        REQUIRE(want.ok());
        // The saved tensors keep their kinds (the int8 activation codes are i8).
        std::vector<std::vector<std::uint8_t>> in_storage;
        std::vector<TensorView> ins;
        for (const ir::HostTensor& t : args) in_storage.push_back(t.to_bytes());
        for (std::size_t i = 0; i < args.size(); ++i)
          ins.push_back(TensorView{in_storage[i].data(), args[i].kind, args[i].shape});
        // dW (output 1) only: the int8 codes of x and of the gradient are the interpreter's
        // (the x86 quantize is exact), the sums exact, the epilogue the same f32 steps.
        std::vector<float> dx(static_cast<std::size_t>(M * K), std::nanf("")), dw(static_cast<std::size_t>(K * N), std::nanf(""));
        std::vector<TensorView> outs{TensorView{dx.data(), ElemKind::F32, {M, K}}, TensorView{dw.data(), ElemKind::F32, {K, N}}};
        auto r = p->run("L.forward.bwd", ins, outs);
        REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
        const std::vector<float> want_dw = want.value()[1].to_f32();
        std::size_t bad = 0;
        for (std::size_t i = 0; i < dw.size(); ++i)
          if (!same_bits(dw[i], want_dw[i])) {
            if (bad++ < 5) MESSAGE("dW element " << i << ": want " << want_dw[i] << " got " << dw[i]);
          }
        CHECK(bad == 0);
      }
    }
  }
}

TEST_CASE("matmul s8: int8_dw of a float-activation ternary matmul (x quantized per k too): its bound, and x86 "
          "bit-exact with the interpreter") {
  // y = x @ ternarize_absmean(w) with a float x: dW = x^T dy with x^T quantized per row k
  // (scale u[k] = max_m |x[m, k]| / 127) and dy^T per row n (t[n] = max_m |dy[m, n]| / 127).
  // Each code is within half a step, so
  //   |dW - dW_exact|[k, n] <= u[k]/2 sum_m |dy[m, n]| + t[n]/2 sum_m |x[m, k]| + M u[k] t[n] / 4
  // plus f32 rounding of the exact path and of the three f32 steps (4 M u |terms|, generous).
  constexpr const char* kFloatLayer = R"(param @L.w : f32[K, N]

func @L.forward<M, K, N>(%x: f32[M, K]) -> f32[M, N] {
^entry:
  %w = param @L.w : f32[K, N]
  %t = ternarize_absmean %w : f32[K, N]
  %y = matmul %x, %t : f32[M, N]
  ret %y
}
)";
  auto with = [&](bool int8_dw) {
    auto mod = Module::from_text(kFloatLayer, "float.tir");
    REQUIRE(mod.ok());
    GradOptions go;
    go.wrt = {"@L.w"};
    go.int8_dw = int8_dw;
    REQUIRE(grad(*mod, "L.forward", go).ok());
    return std::move(mod).value();
  };
  const Module m8 = with(true), exact = with(false);
  const std::int64_t K = 37, N = 70;
  for (std::int64_t M : {1, 5, 33}) {
    CAPTURE(M);
    const auto seed = static_cast<std::uint64_t>(M * 7 + 3);
    ir::ParamValues params;
    ir::HostTensor w = ir::HostTensor::random(ElemKind::F32, {K, N}, seed);
    params.set("L.w", w);
    const ir::HostTensor x = ir::HostTensor::random(ElemKind::F32, {M, K}, seed + 1);
    const ir::HostTensor dy = ir::HostTensor::random(ElemKind::F32, {M, N}, seed + 2);
    auto bwd = [&](const Module& m) {
      auto fwd = ir::interpret(ir::unwrap(m), "L.forward.fwd", std::vector<ir::HostTensor>{x}, params);
      REQUIRE(fwd.ok());
      std::vector<ir::HostTensor> args{x, dy};
      args.insert(args.end(), fwd.value().begin() + 1, fwd.value().end());
      auto r = ir::interpret(ir::unwrap(m), "L.forward.bwd", args, params);
      REQUIRE(r.ok());
      return std::make_pair(args, r.value()[0]);
    };
    const auto [args8, got] = bwd(m8);
    const auto [args_exact, want] = bwd(exact);
    bool differs = false;
    for (std::int64_t k = 0; k < K; ++k)
      for (std::int64_t n = 0; n < N; ++n) {
        double uk = 0, tn = 0, sx = 0, sg = 0, terms = 0;
        for (std::int64_t i = 0; i < M; ++i) {
          const double xv = x.data[static_cast<std::size_t>(i * K + k)], gv = dy.data[static_cast<std::size_t>(i * N + n)];
          uk = std::max(uk, std::fabs(xv) / 127);
          tn = std::max(tn, std::fabs(gv) / 127);
          sx += std::fabs(xv);
          sg += std::fabs(gv);
          terms += std::fabs(xv * gv);
        }
        const double bound = (uk / 2 * sg + tn / 2 * sx + static_cast<double>(M) * uk * tn / 4) * (1 + 0x1p-20) +
                             4 * static_cast<double>(M + 3) * 0x1p-24 * (terms + sx * sg) + 0x1p-30;
        const auto at = static_cast<std::size_t>(k * N + n);
        INFO("dW[", k, ", ", n, "]: int8 ", got.data[at], " exact ", want.data[at], " bound ", bound);
        CHECK(std::fabs(got.data[at] - want.data[at]) <= bound);
        differs = differs || got.data[at] != want.data[at];
      }
    CHECK(differs);

    // x86 at each ISA, 1 and 2 threads: the int8 step with the u[k] epilogue, bit-exact.
    for (Isa isa : host_s8_isas()) {
      for (int threads : {1, 2}) {
        CAPTURE(isa_name(isa));
        CAPTURE(threads);
        EngineOptions eo;
        eo.target = "x86";
        eo.max_isa = std::string(isa_name(isa));
        eo.threads = threads;
        auto e = Engine::create(eo);
        REQUIRE(e.ok());
        auto p = e->compile(m8);
        REQUIRE_MESSAGE(p.ok(), (p.ok() ? "" : p.error().message));
        std::vector<float> ws = w.to_f32();
        REQUIRE(p->bind("L.w", TensorView{ws.data(), ElemKind::F32, w.shape}).ok());
        std::vector<std::vector<std::uint8_t>> in_storage;
        std::vector<TensorView> ins;
        for (const ir::HostTensor& t : args8) in_storage.push_back(t.to_bytes());
        for (std::size_t i = 0; i < args8.size(); ++i)
          ins.push_back(TensorView{in_storage[i].data(), args8[i].kind, args8[i].shape});
        std::vector<float> dw(static_cast<std::size_t>(K * N), std::nanf(""));
        std::vector<TensorView> outs{TensorView{dw.data(), ElemKind::F32, {K, N}}};
        auto r = p->run("L.forward.bwd", ins, outs);
        REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
        const std::vector<float> want_dw = got.to_f32();
        std::size_t bad = 0;
        for (std::size_t i = 0; i < dw.size(); ++i)
          if (!same_bits(dw[i], want_dw[i])) {
            if (bad++ < 5) MESSAGE("dW element " << i << ": want " << want_dw[i] << " got " << dw[i]);
          }
        CHECK(bad == 0);
      }
    }
    // The plan fuses the chain with the u epilogue (no reference step, one s8 step with u).
    std::map<std::string, std::int64_t> bind = {{"M", M}, {"K", K}, {"N", N}};
    auto spec = passes::specialize_function(ir::unwrap(m8), "L.forward.bwd", bind, true);
    REQUIRE(spec.ok());
    passes::PipelineOptions po;
    REQUIRE(passes::run_pipeline(spec.value(), passes::default_pipeline(passes::OptLevel::O2), po).ok());
    auto steps = describe_code(spec.value(), "L.forward.bwd", "avx2", 1);
    REQUIRE(steps.ok());
    bool s8u = false;
    for (const StepCode& st : steps.value()) {
      CHECK_MESSAGE(st.op.find("(reference)") == std::string::npos, st.op << " " << st.summary);
      s8u = s8u || (st.config.find("matmul s8") != std::string::npos && st.config.find("u=yes") != std::string::npos);
    }
    CHECK(s8u);
  }
}

}  // namespace
}  // namespace ternjit::targets::x86
