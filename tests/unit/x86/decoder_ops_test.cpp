// SPDX-License-Identifier: Apache-2.0
// decoder_ops_test.cpp - the x86 steps of the decoder ops (gather, slice, concat, layernorm, rope,
// causal_softmax, kv_write, attention) against the interpreter, and their run-time errors.
//
// Exactness. gather, slice, concat and kv_write copy or convert once (round to nearest even,
// as round_to_kind); layernorm, rope and causal_softmax run the interpreter's double
// arithmetic in its order: all are bit-exact (NaN meets NaN).
// attention's tolerance (f32 against the double reference): with u = 2^-24, a score
// s_t = scale * (q . k_t) is an f32 FMA dot of D terms times the f32-rounded scale, within
// E_t = |scale| (gamma_D + 2u) sum_j |q_j||k_tj| of the exact one (gamma_D = D u / (1 - D u)).
// A weight exp(s_t - max) then has relative error <= 2 E + 6u (E = max_t E_t; the max
// subtraction's rounding u |s_t - max| costs w_t u |s_t - max| <= u / e absolutely, the
// vector exp 2 ulp <= 4u more), the normalized weight twice that, the f32 sums over t add
// 2 gamma_len and the division u. So |out_j - ref_j| <= A_j (4 E + (2 len + 16) u),
// A_j = max_t |v_tj| over the rows read.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "tests/unit/x86/plan_check.h"

namespace ternjit::targets::x86 {
namespace {

using testing::ty;

constexpr double kU = 0x1p-24;
const double kNaN = std::numeric_limits<double>::quiet_NaN();

ir::HostTensor i32_scalar(std::int64_t v) { return ir::HostTensor{ElemKind::I32, {}, {static_cast<double>(v)}}; }

ir::HostTensor ids_of(const std::vector<std::int64_t>& shape, std::int64_t V, std::uint64_t seed) {
  ir::HostTensor t = ir::HostTensor::random(ElemKind::F32, shape, seed);
  for (double& v : t.data) v = std::floor((v + 1) / 2 * static_cast<double>(V)) < V ? std::floor((v + 1) / 2 * static_cast<double>(V)) : V - 1;
  t.kind = ElemKind::I32;
  return t;
}

std::string what_of(Isa isa, int threads, const std::string& s) {
  return std::string(isa_name(isa)) + " threads=" + std::to_string(threads) + " " + s;
}

TEST_CASE("decoder ops: gather rows of an f32/f16/bf16 table (parameter or argument) by ids of rank 1 and 2, and "
          "out-of-range ids are errors [avx2] [avx512]") {
  std::uint64_t seed = 1;
  for (Isa isa : testing::step_isas()) {
    for (ElemKind k : {ElemKind::F32, ElemKind::F16, ElemKind::BF16}) {
      for (const auto& ids_shape : {std::vector<std::int64_t>{1}, {7}, {3, 5}}) {
        for (bool param : {true, false}) {
          const std::int64_t V = 37, D = 19;
          const ir::HostTensor table = ir::HostTensor::random(k, {V, D}, seed++);
          const ir::HostTensor ids = ids_of(ids_shape, V, seed++);
          std::vector<std::int64_t> out = ids_shape;
          out.push_back(D);
          std::string text = param ? "param @E.t : " + ty(k, {V, D}) + "\n\n" : "";
          text += "func @f(%ids: " + ty(ElemKind::I32, ids_shape) + (param ? "" : ", %t: " + ty(k, {V, D})) + ") -> " +
                  ty(k, out) + " {\n^entry:\n";
          if (param) text += "  %t = param @E.t : " + ty(k, {V, D}) + "\n";
          text += "  %y = gather %t, %ids {axis = 0} : " + ty(k, out) + "\n  ret %y\n}\n";
          ir::ParamValues params;
          if (param) params.set("E.t", table);
          std::vector<ir::HostTensor> args{ids};
          if (!param) args.push_back(table);
          for (int threads : {1, 2}) {
            const std::string what = what_of(isa, threads, "gather " + ty(k, {V, D}) + " ids " + ty(ElemKind::I32, ids_shape));
            auto r = testing::run_plan(text, args, params, isa, threads, what);
            REQUIRE_MESSAGE(r.run_status.ok(), what << ": " << r.run_status.error().message);
            testing::check_exact(r.want[0], r.got[0], what);
            testing::check_no_reference_step(r.steps, what);
            // An id out of range: an error naming the op and the id, from both.
            for (double bad : {-1.0, static_cast<double>(V)}) {
              std::vector<ir::HostTensor> bad_args = args;
              bad_args[0].data.back() = bad;
              r = testing::run_plan(text, bad_args, params, isa, threads, what);
              CHECK_FALSE(r.want_ok);
              REQUIRE_FALSE(r.run_status.ok());
              CHECK_MESSAGE(r.run_status.error().message.find("gather: id " + std::to_string(static_cast<int>(bad))) !=
                                std::string::npos,
                            r.run_status.error().message);
            }
          }
        }
      }
    }
  }
}

TEST_CASE("decoder ops: slice and concat along every axis, 1 to 3 operands [avx2] [avx512]") {
  std::uint64_t seed = 50;
  const std::vector<std::int64_t> shape{3, 5, 7};
  for (Isa isa : testing::step_isas()) {
    for (ElemKind k : {ElemKind::F32, ElemKind::F16, ElemKind::I8}) {
      for (std::int64_t axis = 0; axis < 3; ++axis) {
        const std::int64_t len = shape[static_cast<std::size_t>(axis)];
        for (std::int64_t start : {std::int64_t{0}, std::int64_t{1}, len - 1}) {
          for (std::int64_t size : {std::int64_t{0}, std::int64_t{1}, len - start}) {
            if (start + size > len) continue;
            std::vector<std::int64_t> out = shape;
            out[static_cast<std::size_t>(axis)] = size;
            if (size == 0) continue;  // an empty result computes nothing
            const std::string text = "func @f(%x: " + ty(k, shape) + ") -> " + ty(k, out) +
                                     " {\n^entry:\n  %y = slice %x {axis = " + std::to_string(axis) +
                                     ", start = " + std::to_string(start) + ", size = " + std::to_string(size) +
                                     "} : " + ty(k, out) + "\n  ret %y\n}\n";
            const ir::HostTensor x = ir::HostTensor::random(k, shape, seed++);
            const int threads = static_cast<int>(seed % 2) + 1;
            const std::string what = what_of(isa, threads, text);
            const auto r = testing::run_plan(text, {x}, {}, isa, threads, what);
            REQUIRE_MESSAGE(r.run_status.ok(), what);
            testing::check_exact(r.want[0], r.got[0], what);
            testing::check_no_reference_step(r.steps, what);
          }
        }
        for (int n = 1; n <= 3; ++n) {
          std::vector<std::vector<std::int64_t>> shapes;
          std::vector<ir::HostTensor> args;
          std::vector<std::int64_t> out = shape;
          out[static_cast<std::size_t>(axis)] = 0;
          std::string sig, ops;
          for (int j = 0; j < n; ++j) {
            std::vector<std::int64_t> s = shape;
            s[static_cast<std::size_t>(axis)] = j + 1;
            out[static_cast<std::size_t>(axis)] += j + 1;
            args.push_back(ir::HostTensor::random(k, s, seed++));
            sig += (j ? ", %x" : "%x") + std::to_string(j) + ": " + ty(k, s);
            ops += (j ? ", %x" : "%x") + std::to_string(j);
          }
          const std::string text = "func @f(" + sig + ") -> " + ty(k, out) + " {\n^entry:\n  %y = concat " + ops +
                                   " {axis = " + std::to_string(axis) + "} : " + ty(k, out) + "\n  ret %y\n}\n";
          for (int threads : {1, 2}) {
            const std::string what = what_of(isa, threads, text);
            const auto r = testing::run_plan(text, args, {}, isa, threads, what);
            REQUIRE_MESSAGE(r.run_status.ok(), what);
            testing::check_exact(r.want[0], r.got[0], what);
            testing::check_no_reference_step(r.steps, what);
          }
        }
      }
    }
  }
}

TEST_CASE("decoder ops: layernorm of f32 and bf16 rows, odd widths, is bit-exact [avx2] [avx512]") {
  std::uint64_t seed = 70;
  for (Isa isa : testing::step_isas()) {
    for (const auto& s : {std::vector<std::int64_t>{1, 1}, {3, 17}, {2, 3, 130}, {5}}) {
      for (ElemKind k : {ElemKind::F32, ElemKind::BF16}) {
        const std::int64_t d = s.back();
        const std::string text = "func @f(%x: " + ty(k, s) + ", %g: " + ty(ElemKind::F32, {d}) + ", %b: " +
                                 ty(ElemKind::F32, {d}) + ") -> " + ty(ElemKind::F32, s) +
                                 " {\n^entry:\n  %y = layernorm %x, %g, %b {eps = 1e-05} : " + ty(ElemKind::F32, s) +
                                 "\n  ret %y\n}\n";
        ir::HostTensor x = ir::HostTensor::random(k, s, seed++);
        x.data[0] = 0;  // a constant-ish row still normalizes by sqrt(eps)
        const std::vector<ir::HostTensor> args{x, ir::HostTensor::random(ElemKind::F32, {d}, seed++),
                                               ir::HostTensor::random(ElemKind::F32, {d}, seed++)};
        for (int threads : {1, 2}) {
          const std::string what = what_of(isa, threads, ty(k, s));
          const auto r = testing::run_plan(text, args, {}, isa, threads, what);
          REQUIRE_MESSAGE(r.run_status.ok(), what);
          testing::check_exact(r.want[0], r.got[0], what);
          testing::check_no_reference_step(r.steps, what);
        }
      }
    }
  }
}

TEST_CASE("decoder ops: rope norm and neox at several positions is bit-exact; a negative pos is an error "
          "[avx2] [avx512]") {
  std::uint64_t seed = 90;
  for (Isa isa : testing::step_isas()) {
    for (const auto& s : {std::vector<std::int64_t>{1, 1, 2}, {3, 5, 16}, {2, 2, 130}}) {
      for (const char* mode : {"norm", "neox"}) {
        const std::string text = "func @f(%x: " + ty(ElemKind::F32, s) + ", %pos: i32[]) -> " + ty(ElemKind::F32, s) +
                                 " {\n^entry:\n  %y = rope %x, %pos {theta = 500000.0, mode = " + mode + "} : " +
                                 ty(ElemKind::F32, s) + "\n  ret %y\n}\n";
        const ir::HostTensor x = ir::HostTensor::random(ElemKind::F32, s, seed++);
        for (std::int64_t pos : {0, 7, 4093}) {
          for (int threads : {1, 2}) {
            const std::string what = what_of(isa, threads, std::string(mode) + " " + ty(ElemKind::F32, s) + " pos " +
                                                               std::to_string(pos));
            const auto r = testing::run_plan(text, {x, i32_scalar(pos)}, {}, isa, threads, what);
            REQUIRE_MESSAGE(r.run_status.ok(), what);
            testing::check_exact(r.want[0], r.got[0], what);
            testing::check_no_reference_step(r.steps, what);
          }
        }
        const auto r = testing::run_plan(text, {x, i32_scalar(-1)}, {}, isa, 1, "rope pos -1");
        CHECK_FALSE(r.want_ok);
        REQUIRE_FALSE(r.run_status.ok());
        CHECK(r.run_status.error().message.find("rope: pos -1") != std::string::npos);
      }
    }
  }
}

TEST_CASE("decoder ops: causal_softmax of rank 2 to 4 keeps t <= pos + m, masked NaN does not propagate, bit-exact "
          "[avx2] [avx512]") {
  std::uint64_t seed = 120;
  for (Isa isa : testing::step_isas()) {
    for (const auto& s : {std::vector<std::int64_t>{1, 1}, {3, 9}, {2, 4, 6}, {2, 2, 3, 17}}) {
      const std::string text = "func @f(%x: " + ty(ElemKind::F32, s) + ", %pos: i32[]) -> " + ty(ElemKind::F32, s) +
                               " {\n^entry:\n  %y = causal_softmax %x, %pos : " + ty(ElemKind::F32, s) +
                               "\n  ret %y\n}\n";
      ir::HostTensor x = ir::HostTensor::random(ElemKind::F32, s, seed++);
      for (std::int64_t pos : {0, 2, 40}) {
        // NaN in every entry past the last row's kept range: never read.
        const std::int64_t M = s[s.size() - 2], T = s.back();
        ir::HostTensor xn = x;
        for (std::size_t i = 0; i < xn.data.size(); ++i) {
          const auto t = static_cast<std::int64_t>(i) % T, m = static_cast<std::int64_t>(i) / T % M;
          if (t > pos + m) xn.data[i] = kNaN;
        }
        for (int threads : {1, 2}) {
          const std::string what = what_of(isa, threads, ty(ElemKind::F32, s) + " pos " + std::to_string(pos));
          const auto r = testing::run_plan(text, {xn, i32_scalar(pos)}, {}, isa, threads, what);
          REQUIRE_MESSAGE(r.run_status.ok(), what);
          testing::check_exact(r.want[0], r.got[0], what);
          for (double v : r.got[0].data) CHECK_FALSE(std::isnan(v));
          testing::check_no_reference_step(r.steps, what);
        }
      }
      const auto r = testing::run_plan(text, {x, i32_scalar(-3)}, {}, isa, 1, "causal_softmax pos -3");
      REQUIRE_FALSE(r.run_status.ok());
      CHECK(r.run_status.error().message.find("causal_softmax: pos -3") != std::string::npos);
    }
  }
}

// kv_write's module: cache [L, C, H, D] of kind ck, rows [M, H, D] of kind rk, layer `layer`.
std::string kv_text(ElemKind ck, ElemKind rk, const std::vector<std::int64_t>& cs, std::int64_t M, std::int64_t layer) {
  const std::vector<std::int64_t> rs{M, cs[2], cs[3]};
  return "func @f(%c: " + ty(ck, cs) + ", %r: " + ty(rk, rs) + ", %pos: i32[]) -> " + ty(ck, cs) +
         " {\n^entry:\n  %y = kv_write %c, %r, %pos {layer = " + std::to_string(layer) + "} : " + ty(ck, cs) +
         "\n  ret %y\n}\n";
}

TEST_CASE("decoder ops: kv_write converts rows into f32/f16/bf16 caches, copies the cache when out != in, writes in "
          "place when they are one buffer, and refuses rows past the capacity [avx2] [avx512]") {
  std::uint64_t seed = 150;
  const std::vector<std::int64_t> cs{3, 11, 2, 9};
  for (Isa isa : testing::step_isas()) {
    for (ElemKind ck : {ElemKind::F32, ElemKind::F16, ElemKind::BF16}) {
      for (ElemKind rk : {ElemKind::F32, ck}) {
        for (std::int64_t M : {1, 4}) {
          for (std::int64_t pos : {std::int64_t{0}, std::int64_t{3}, 11 - M}) {
            const std::string text = kv_text(ck, rk, cs, M, 1);
            ir::HostTensor cache = ir::HostTensor::random(ck, cs, seed++);
            ir::HostTensor rows = ir::HostTensor::random(rk, {M, cs[2], cs[3]}, seed++);
            if (rk == ElemKind::F32) rows.data[0] = 1e6;  // f16 overflow: Inf
            for (int threads : {1, 2}) {
              const std::string what = what_of(isa, threads, text + " pos " + std::to_string(pos));
              auto r = testing::run_plan(text, {cache, rows, i32_scalar(pos)}, {}, isa, threads, what);
              REQUIRE_MESSAGE(r.want_ok, what);
              REQUIRE_MESSAGE(r.run_status.ok(), what);
              testing::check_exact(r.want[0], r.got[0], what);
              testing::check_no_reference_step(r.steps, what);
            }
            // In place: the output buffer is the input cache buffer.
            auto m = ir::parse_module(text, "kv.tir");
            REQUIRE(m.ok());
            PlanOptions o;
            o.isa = isa;
            auto plan = Plan::build(m.value(), "f", {}, o, nullptr);
            REQUIRE(plan.ok());
            std::vector<std::uint8_t> cb = cache.to_bytes(), rb = rows.to_bytes();
            std::int32_t p32 = static_cast<std::int32_t>(pos);
            void* bufs[] = {cb.data(), rb.data(), &p32, cb.data()};
            const auto run = plan.value()->run(bufs, Parallel{});
            // The plan's in-place kv_write chain: the same buffer in and out is allowed.
            REQUIRE_MESSAGE(run.ok(), (run.ok() ? "" : run.error().message));
            auto want = ir::interpret(m.value(), "f", std::vector<ir::HostTensor>{cache, rows, i32_scalar(pos)}, {});
            REQUIRE(want.ok());
            auto got = ir::HostTensor::from_bytes(ck, cs, cb);
            REQUIRE(got.ok());
            testing::check_exact(want.value()[0], got.value(), "in place");
          }
        }
        // Rows past the capacity and a negative pos: errors, from the kernel as from the interpreter.
        const std::string text = kv_text(ck, rk, cs, 4, 2);
        const ir::HostTensor cache = ir::HostTensor::random(ck, cs, seed++);
        const ir::HostTensor rows = ir::HostTensor::random(rk, {4, cs[2], cs[3]}, seed++);
        for (std::int64_t pos : {-1, 8, 2147483647}) {
          const auto r = testing::run_plan(text, {cache, rows, i32_scalar(pos)}, {}, isa, 1, "kv_write error");
          CHECK_FALSE(r.want_ok);
          REQUIRE_FALSE(r.run_status.ok());
          CHECK_MESSAGE(r.run_status.error().message.find("kv_write: ") != std::string::npos,
                        r.run_status.error().message);
        }
      }
    }
  }
}

std::string attention_text(ElemKind ck, std::int64_t M, std::int64_t HQ, std::int64_t D,
                           const std::vector<std::int64_t>& cs, std::int64_t layer, double scale) {
  return "func @f(%q: " + ty(ElemKind::F32, {M, HQ, D}) + ", %k: " + ty(ck, cs) + ", %v: " + ty(ck, cs) +
         ", %pos: i32[]) -> " + ty(ElemKind::F32, {M, HQ, D}) + " {\n^entry:\n  %y = attention %q, %k, %v, %pos {layer = " +
         std::to_string(layer) + ", scale = " + std::to_string(scale) + "} : " + ty(ElemKind::F32, {M, HQ, D}) +
         "\n  ret %y\n}\n";
}

TEST_CASE("decoder ops: attention (GQA) over f32/f16/bf16 caches reads only rows t <= pos + m, within the derived "
          "bound; bad positions are errors [avx2] [avx512]") {
  struct Case {
    std::int64_t M, HQ, HKV, D, C;
  };
  // g = HQ / HKV of 1 to 5 (the 512-bit path blocks 4 query heads), D below, at and past the
  // 64 values a 512-bit value block holds (D = 80, 130), rows not a multiple of 4.
  const Case cases[] = {{1, 1, 1, 1, 1},    {1, 4, 2, 16, 9},  {3, 6, 2, 7, 12}, {2, 3, 3, 33, 40},
                        {1, 20, 5, 16, 70}, {1, 8, 2, 80, 19}, {2, 10, 2, 130, 9}};
  std::uint64_t seed = 200;
  for (Isa isa : testing::step_isas()) {
    for (const Case& c : cases) {
      for (ElemKind ck : {ElemKind::F32, ElemKind::F16, ElemKind::BF16}) {
        const std::int64_t L = 2, layer = 1;
        const std::vector<std::int64_t> cs{L, c.C, c.HKV, c.D};
        const double scale = 1.0 / std::sqrt(static_cast<double>(c.D));
        const std::string text = attention_text(ck, c.M, c.HQ, c.D, cs, layer, scale);
        const ir::HostTensor q = ir::HostTensor::random(ElemKind::F32, {c.M, c.HQ, c.D}, seed++);
        for (std::int64_t pos : {std::int64_t{0}, (c.C - c.M) / 2, c.C - c.M}) {
          ir::HostTensor k = ir::HostTensor::random(ck, cs, seed++), v = ir::HostTensor::random(ck, cs, seed++);
          // Rows past pos + M - 1 hold NaN: never read.
          const std::int64_t row = c.HKV * c.D;
          for (std::int64_t t = pos + c.M; t < c.C; ++t)
            for (std::int64_t j = 0; j < row; ++j) {
              k.data[static_cast<std::size_t>((layer * c.C + t) * row + j)] = kNaN;
              v.data[static_cast<std::size_t>((layer * c.C + t) * row + j)] = kNaN;
            }
          // The bound of the file comment, per output element.
          const std::int64_t g = c.HQ / c.HKV;
          const double gamma = static_cast<double>(c.D) * kU / (1 - static_cast<double>(c.D) * kU);
          std::vector<double> tol(static_cast<std::size_t>(c.M * c.HQ * c.D));
          for (std::int64_t m = 0; m < c.M; ++m)
            for (std::int64_t h = 0; h < c.HQ; ++h) {
              const std::int64_t len = pos + m + 1, hk = h / g;
              double E = 0;
              for (std::int64_t t = 0; t < len; ++t) {
                double s = 0, sa = 0;
                for (std::int64_t j = 0; j < c.D; ++j) {
                  const double a = q.data[static_cast<std::size_t>((m * c.HQ + h) * c.D + j)];
                  const double b = k.data[static_cast<std::size_t>(((layer * c.C + t) * c.HKV + hk) * c.D + j)];
                  s += a * b;
                  sa += std::fabs(a * b);
                }
                E = std::max(E, scale * (gamma + 2 * kU) * sa + 2 * kU * std::fabs(scale * s));
              }
              for (std::int64_t j = 0; j < c.D; ++j) {
                double A = 0;
                for (std::int64_t t = 0; t < len; ++t)
                  A = std::max(A, std::fabs(v.data[static_cast<std::size_t>(((layer * c.C + t) * c.HKV + hk) * c.D + j)]));
                tol[static_cast<std::size_t>((m * c.HQ + h) * c.D + j)] =
                    A * (4 * E + (2 * static_cast<double>(len) + 16) * kU);
              }
            }
          for (int threads : {1, 2}) {
            const std::string what = what_of(isa, threads, std::string(elem_name(ck)) + " M=" + std::to_string(c.M) +
                                                               " HQ=" + std::to_string(c.HQ) + " HKV=" +
                                                               std::to_string(c.HKV) + " D=" + std::to_string(c.D) +
                                                               " pos=" + std::to_string(pos));
            const auto r = testing::run_plan(text, {q, k, v, i32_scalar(pos)}, {}, isa, threads, what);
            REQUIRE_MESSAGE(r.run_status.ok(), what << ": " << r.run_status.error().message);
            testing::check_close(r.want[0], r.got[0], [&](std::size_t i) { return tol[i]; }, what);
            testing::check_no_reference_step(r.steps, what);
          }
        }
        const ir::HostTensor k = ir::HostTensor::random(ck, cs, seed++);
        for (std::int64_t pos : {std::int64_t{-1}, c.C - c.M + 1}) {
          const auto r = testing::run_plan(text, {q, k, k, i32_scalar(pos)}, {}, isa, 1, "attention error");
          CHECK_FALSE(r.want_ok);
          REQUIRE_FALSE(r.run_status.ok());
          CHECK_MESSAGE(r.run_status.error().message.find("attention: ") != std::string::npos,
                        r.run_status.error().message);
        }
      }
    }
  }
}

}  // namespace
}  // namespace ternjit::targets::x86
