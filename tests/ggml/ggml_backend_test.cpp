// SPDX-License-Identifier: Apache-2.0
// ggml_backend_test.cpp - libggml-ternjit (integrations/ggml) driven through ggml's own API,
// linked into the test (ggml_backend_ternjit_reg), with no llama.cpp model: the MUL_MAT
// nodes it claims against an exact reference built from ggml's own dequantization, every
// weight type, odd shapes, 1 to 2 * 512 + 1 rows, 1 and 2 threads; what it refuses; packed
// weights forgotten when their bytes change or their buffer goes; a whole graph (as an RPC
// server hands it) with the other nodes on ggml-cpu.
//
// The reference. GGML_TERNJIT_ACTIVATIONS (read once per process; ctest runs this program
// with int8, the default, and with f32):
//   int8: each row of x is quantized as ternjit's quantize_int8 does (ir/README.md:
//         s = max|x| / 127 in f32, q = round_half_even(x / s) clamped to +-127), then
//         y[m, n] = s * sum_b d_b[n] * sum_{k in b} q[k] * w[k, n], the integer sums exact;
//   f32:  y[m, n] = sum_b d_b[n] * sum_{k in b} x[k] * w[k, n].
// w and d_b come from ggml's to_float of the weight (d_b * w = the dequantized value), the
// sums in double. The kernel rounds in f32: at most one rounding per block term and per
// addition of B block terms (and, for f32 x, of the products within a block), so
// |y - ref| <= (B + g + 2) * 2^-24 * sum |terms| with g = 0 (int8) or the block length (f32):
// the tolerance asserted per element, from the same sums of magnitudes.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"
#include "integrations/ggml/ggml-ternjit.h"

namespace {

bool int8_mode() {
  const char* a = std::getenv("GGML_TERNJIT_ACTIVATIONS");
  return !(a && std::strcmp(a, "f32") == 0);
}

ggml_backend_dev_t ternjit_device() {
  ggml_backend_reg_t reg = ggml_backend_ternjit_reg();
  REQUIRE(ggml_backend_reg_dev_count(reg) == 1);
  return ggml_backend_reg_dev_get(reg, 0);
}

struct Backends {
  ggml_backend_t tj = nullptr, cpu = nullptr;
  Backends() {
    tj = ggml_backend_dev_init(ternjit_device(), nullptr);
    cpu = ggml_backend_cpu_init();
    REQUIRE(tj);
    REQUIRE(cpu);
  }
  ~Backends() {
    ggml_backend_free(tj);
    ggml_backend_free(cpu);
  }
  void threads(int n) {
    auto set = reinterpret_cast<ggml_backend_set_n_threads_t>(
        ggml_backend_reg_get_proc_address(ggml_backend_ternjit_reg(), "ggml_backend_set_n_threads"));
    REQUIRE(static_cast<bool>(set));
    set(tj, n);
    ggml_backend_cpu_set_n_threads(cpu, n);
  }
};

std::int64_t block_of(ggml_type t) { return t == GGML_TYPE_Q2_0 ? 64 : 256; }

// Ternary values times an f16-exact scale per block (each block holds a nonzero, so ggml's
// quantizers store exactly these values), quantized by ggml into `type`: N rows of K.
std::vector<std::uint8_t> ternary_weight(ggml_type type, std::int64_t k, std::int64_t n, std::mt19937& rng) {
  std::vector<float> v(static_cast<std::size_t>(k * n));
  const std::int64_t blk = block_of(type);
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t b = 0; b < k / blk; ++b) {
      const float d = std::ldexp(static_cast<float>(1 + rng() % 1023) / 1024.0f, -static_cast<int>(rng() % 4));
      for (std::int64_t e = 0; e < blk; ++e) {
        const int t = static_cast<int>(rng() % 3) - 1;
        v[static_cast<std::size_t>(r * k + b * blk + e)] = static_cast<float>(e == 0 ? 1 : t) * d;
      }
    }
  std::vector<std::uint8_t> bytes(ggml_row_size(type, k) * static_cast<std::size_t>(n));
  ggml_quantize_chunk(type, v.data(), bytes.data(), 0, n, k, nullptr);
  return bytes;
}

// One MUL_MAT graph: W (K x N, `type`) in the TERNJIT buffer type or ggml-cpu's, x (K x M) f32.
struct MulMat {
  ggml_context* ctx = nullptr;
  ggml_tensor *w = nullptr, *x = nullptr, *y = nullptr;
  ggml_cgraph* graph = nullptr;
  ggml_backend_buffer_t wbuf = nullptr, xbuf = nullptr;
  MulMat(ggml_type type, std::int64_t k, std::int64_t n, std::int64_t m, ggml_backend_buffer_type_t wbuft) {
    ggml_init_params p{16 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true};
    ctx = ggml_init(p);
    w = ggml_new_tensor_2d(ctx, type, k, n);
    ggml_set_name(w, "w");
    wbuf = ggml_backend_alloc_ctx_tensors_from_buft(ctx, wbuft);
    REQUIRE(wbuf);
    ggml_init_params q{16 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true};
    xctx = ggml_init(q);
    x = ggml_new_tensor_2d(xctx, GGML_TYPE_F32, k, m);
    y = ggml_mul_mat(xctx, w, x);
    xbuf = ggml_backend_alloc_ctx_tensors_from_buft(xctx, ggml_backend_cpu_buffer_type());
    REQUIRE(xbuf);
    graph = ggml_new_graph(xctx);
    ggml_build_forward_expand(graph, y);
  }
  ~MulMat() {
    ggml_backend_buffer_free(xbuf);
    ggml_backend_buffer_free(wbuf);
    ggml_free(xctx);
    ggml_free(ctx);
  }
  ggml_context* xctx = nullptr;

  std::vector<float> run(ggml_backend_t backend) {
    std::vector<float> nan(static_cast<std::size_t>(ggml_nelements(y)), std::nanf(""));
    ggml_backend_tensor_set(y, nan.data(), 0, ggml_nbytes(y));  // poisoned
    REQUIRE(ggml_backend_graph_compute(backend, graph) == GGML_STATUS_SUCCESS);
    std::vector<float> out(nan.size());
    ggml_backend_tensor_get(y, out.data(), 0, ggml_nbytes(y));
    return out;
  }
};

// The reference (file comment): y and the tolerance of each element.
void reference(ggml_type type, const std::vector<std::uint8_t>& wbytes, const std::vector<float>& x, std::int64_t k,
               std::int64_t n, std::int64_t m, std::vector<double>* y, std::vector<double>* tol) {
  std::vector<float> wf(static_cast<std::size_t>(k * n));
  ggml_get_type_traits(type)->to_float(wbytes.data(), wf.data(), k * n);
  const std::int64_t blk = block_of(type), nb = k / blk;
  const bool i8 = int8_mode();
  y->assign(static_cast<std::size_t>(m * n), 0);
  tol->assign(y->size(), 0);
  std::vector<double> xq(static_cast<std::size_t>(k));
  for (std::int64_t r = 0; r < m; ++r) {
    const float* xr = &x[static_cast<std::size_t>(r * k)];
    double s = 1;
    if (i8) {
      float amax = 0;
      for (std::int64_t e = 0; e < k; ++e) amax = std::fmax(amax, std::fabs(xr[e]));
      const float sf = amax / 127.0f;
      s = sf;
      for (std::int64_t e = 0; e < k; ++e)
        xq[static_cast<std::size_t>(e)] = sf == 0 ? 0 : std::fmin(127, std::fmax(-127, std::nearbyint(xr[e] / sf)));
    } else {
      for (std::int64_t e = 0; e < k; ++e) xq[static_cast<std::size_t>(e)] = xr[e];
    }
    for (std::int64_t c = 0; c < n; ++c) {
      double sum = 0, mag = 0;
      for (std::int64_t b = 0; b < nb; ++b) {
        double part = 0, part_mag = 0;
        for (std::int64_t e = b * blk; e < (b + 1) * blk; ++e) {
          const double t = xq[static_cast<std::size_t>(e)] * wf[static_cast<std::size_t>(c * k + e)];
          part += t;
          part_mag += std::fabs(t);
        }
        sum += part * s;
        mag += (i8 ? std::fabs(part) : part_mag) * s;
      }
      const auto at = static_cast<std::size_t>(r * n + c);
      (*y)[at] = sum;
      (*tol)[at] = static_cast<double>(nb + (i8 ? 0 : blk) + 2) * std::ldexp(1.0, -24) * mag;
    }
  }
}

void check_close(const std::vector<float>& got, const std::vector<double>& want, const std::vector<double>& tol,
                 const std::string& what) {
  REQUIRE(got.size() == want.size());
  std::size_t bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= tol[i])) {
      if (bad++ < 3) MESSAGE(what << ": element " << i << " is " << got[i] << ", want " << want[i] << " +- " << tol[i]);
    }
  CHECK_MESSAGE(bad == 0, what << ": " << bad << " of " << got.size() << " elements outside the bound");
}

std::vector<float> random_x(std::int64_t k, std::int64_t m, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(k * m));
  for (auto& v : x) v = nd(rng);
  if (m > 2) std::fill(x.begin() + k, x.begin() + 2 * k, 0.0f);  // an all-zero row
  return x;
}

ggml_backend_buffer_type_t ternjit_buft() { return ggml_backend_dev_buffer_type(ternjit_device()); }

TEST_CASE("MUL_MAT of TQ2_0, TQ1_0 and Q2_0 weights on TERNJIT equals the reference: shapes, rows, threads") {
  Backends be;
  std::mt19937 rng(11);
  for (ggml_type type : {GGML_TYPE_TQ2_0, GGML_TYPE_TQ1_0, GGML_TYPE_Q2_0}) {
    const std::vector<std::int64_t> ks = type == GGML_TYPE_Q2_0 ? std::vector<std::int64_t>{64, 320}
                                                                 : std::vector<std::int64_t>{256, 768};
    for (std::int64_t k : ks)
      for (std::int64_t n : {1, 33})
        for (std::int64_t m : {1, 3, 64, 1025})
          for (int threads : {1, 2}) {
            if (m == 1025 && (threads == 1 || n == 1)) continue;  // the long case once per weight
            const std::string what = std::string(ggml_type_name(type)) + " K " + std::to_string(k) + " N " +
                                     std::to_string(n) + " M " + std::to_string(m) + " threads " +
                                     std::to_string(threads);
            CAPTURE(what);
            MulMat mm(type, k, n, m, ternjit_buft());
            const auto wbytes = ternary_weight(type, k, n, rng);
            const auto x = random_x(k, m, rng);
            ggml_backend_tensor_set(mm.w, wbytes.data(), 0, wbytes.size());
            ggml_backend_tensor_set(mm.x, x.data(), 0, x.size() * sizeof(float));
            REQUIRE(ggml_backend_supports_op(be.tj, mm.y));
            be.threads(threads);
            std::vector<double> want, tol;
            reference(type, wbytes, x, k, n, m, &want, &tol);
            check_close(mm.run(be.tj), want, tol, what);
            // The weight is held packed while its buffer lives (and forgotten with it).
            size_t weights = 0, packed = 0, source = 0;
            ggml_backend_ternjit_memory(&weights, &packed, &source);
            CHECK(weights == 1);
            CHECK(packed > 0);
            CHECK(source == wbytes.size());
          }
  }
  size_t weights = 1;
  ggml_backend_ternjit_memory(&weights, nullptr, nullptr);
  CHECK(weights == 0);
}

TEST_CASE("a packed weight is forgotten when its bytes are written or its buffer is freed") {
  Backends be;
  std::mt19937 rng(5);
  const std::int64_t k = 512, n = 9, m = 4;
  std::vector<double> want, tol;
  for (int round = 0; round < 3; ++round) {
    // A new buffer each round: ggml's allocator may well reuse the address of the last one.
    MulMat mm(GGML_TYPE_TQ2_0, k, n, m, ternjit_buft());
    const auto x = random_x(k, m, rng);
    ggml_backend_tensor_set(mm.x, x.data(), 0, x.size() * sizeof(float));
    for (int write = 0; write < 2; ++write) {
      const auto wbytes = ternary_weight(GGML_TYPE_TQ2_0, k, n, rng);
      ggml_backend_tensor_set(mm.w, wbytes.data(), 0, wbytes.size());
      reference(GGML_TYPE_TQ2_0, wbytes, x, k, n, m, &want, &tol);
      check_close(mm.run(be.tj), want, tol, "round " + std::to_string(round) + " write " + std::to_string(write));
    }
    // A write of part of the weight (one row's blocks) is seen too.
    auto wbytes = ternary_weight(GGML_TYPE_TQ2_0, k, n, rng);
    ggml_backend_tensor_set(mm.w, wbytes.data(), 0, wbytes.size());
    mm.run(be.tj);
    const auto row = ternary_weight(GGML_TYPE_TQ2_0, k, 1, rng);
    const std::size_t at = 3 * row.size();
    ggml_backend_tensor_set(mm.w, row.data(), at, row.size());
    std::memcpy(wbytes.data() + at, row.data(), row.size());
    reference(GGML_TYPE_TQ2_0, wbytes, x, k, n, m, &want, &tol);
    check_close(mm.run(be.tj), want, tol, "a row rewritten");
  }
}

TEST_CASE("the first graph reading a weight of a buffer packs every weight of that buffer (on the graph's threads)") {
  Backends be;
  be.threads(2);
  std::mt19937 rng(21);
  const std::int64_t k = 512, n = 24, m = 3;
  ggml_init_params p{16 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true};
  ggml_context* wctx = ggml_init(p);
  const ggml_type types[] = {GGML_TYPE_TQ2_0, GGML_TYPE_TQ1_0, GGML_TYPE_Q2_0, GGML_TYPE_TQ2_0};
  std::vector<ggml_tensor*> ws;
  for (ggml_type t : types) ws.push_back(ggml_new_tensor_2d(wctx, t, k, n));
  ggml_new_tensor_1d(wctx, GGML_TYPE_F32, k);  // not a ternary weight: not packed
  ggml_backend_buffer_t wbuf = ggml_backend_alloc_ctx_tensors_from_buft(wctx, ternjit_buft());
  REQUIRE(wbuf);
  std::vector<std::vector<std::uint8_t>> bytes;
  for (std::size_t i = 0; i < ws.size(); ++i) {
    bytes.push_back(ternary_weight(types[i], k, n, rng));
    ggml_backend_tensor_set(ws[i], bytes.back().data(), 0, bytes.back().size());
  }
  ggml_init_params q{16 * ggml_tensor_overhead() + 4 * ggml_graph_overhead(), nullptr, true};  // a graph per product
  ggml_context* xctx = ggml_init(q);
  ggml_tensor* x = ggml_new_tensor_2d(xctx, GGML_TYPE_F32, k, m);
  std::vector<ggml_tensor*> ys;
  for (ggml_tensor* w : ws) ys.push_back(ggml_mul_mat(xctx, w, x));
  ggml_backend_buffer_t xbuf = ggml_backend_alloc_ctx_tensors_from_buft(xctx, ggml_backend_cpu_buffer_type());
  const auto xv = random_x(k, m, rng);
  ggml_backend_tensor_set(x, xv.data(), 0, xv.size() * sizeof(float));
  size_t weights = 9;
  ggml_backend_ternjit_memory(&weights, nullptr, nullptr);
  CHECK(weights == 0);
  // A graph of the first product only: all four weights are packed after it.
  for (std::size_t i = 0; i < ys.size(); ++i) {
    ggml_cgraph* g = ggml_new_graph(xctx);
    ggml_build_forward_expand(g, ys[i]);
    REQUIRE(ggml_backend_graph_compute(be.tj, g) == GGML_STATUS_SUCCESS);
    ggml_backend_ternjit_memory(&weights, nullptr, nullptr);
    CHECK(weights == ws.size());
    std::vector<float> got(static_cast<std::size_t>(n * m));
    ggml_backend_tensor_get(ys[i], got.data(), 0, ggml_nbytes(ys[i]));
    std::vector<double> want, tol;
    reference(types[i], bytes[i], xv, k, n, m, &want, &tol);
    check_close(got, want, tol, std::string("weight ") + std::to_string(i));
  }
  ggml_backend_buffer_free(xbuf);
  ggml_backend_buffer_free(wbuf);
  ggml_backend_ternjit_memory(&weights, nullptr, nullptr);
  CHECK(weights == 0);
  ggml_free(xctx);
  ggml_free(wctx);
}

TEST_CASE("a Q2_0 weight holding +2 is not ternary: ggml-cpu computes it, bit for bit") {
  Backends be;
  std::mt19937 rng(3);
  const std::int64_t k = 128, n = 5, m = 3;
  MulMat on_tj(GGML_TYPE_Q2_0, k, n, m, ternjit_buft());
  MulMat on_cpu(GGML_TYPE_Q2_0, k, n, m, ggml_backend_cpu_buffer_type());
  auto wbytes = ternary_weight(GGML_TYPE_Q2_0, k, n, rng);
  wbytes[2 * 18 + 2 + 5] |= 0xc0;  // row 1, block 0: element 23's code is 3 (+2)
  const auto x = random_x(k, m, rng);
  for (MulMat* mm : {&on_tj, &on_cpu}) {
    ggml_backend_tensor_set(mm->w, wbytes.data(), 0, wbytes.size());
    ggml_backend_tensor_set(mm->x, x.data(), 0, x.size() * sizeof(float));
  }
  const auto want = on_cpu.run(be.cpu);
  const auto got = on_tj.run(be.tj);
  REQUIRE(got.size() == want.size());
  CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);
}

TEST_CASE("supports_op: only ternary MUL_MATs of weights in its own buffers, f32 contiguous activations") {
  ggml_backend_dev_t dev = ternjit_device();
  {
    MulMat in_cpu_buffer(GGML_TYPE_TQ2_0, 256, 4, 2, ggml_backend_cpu_buffer_type());
    CHECK_FALSE(ggml_backend_dev_supports_op(dev, in_cpu_buffer.y));  // its bytes' lifetime is not seen
  }
  {
    MulMat f16(GGML_TYPE_F16, 256, 4, 2, ternjit_buft());
    CHECK_FALSE(ggml_backend_dev_supports_op(dev, f16.y));
    MulMat q8(GGML_TYPE_Q8_0, 256, 4, 2, ternjit_buft());
    CHECK_FALSE(ggml_backend_dev_supports_op(dev, q8.y));
  }
  {
    MulMat mm(GGML_TYPE_TQ2_0, 256, 4, 2, ternjit_buft());
    CHECK(ggml_backend_dev_supports_op(dev, mm.y));
    // As llama.cpp asks when it places a weight: the weight in ggml's zero-size dummy buffer
    // of the buffer type (no context of the backend's).
    ggml_backend_buffer_t real = mm.w->buffer;
    mm.w->buffer = ggml_backend_buft_alloc_buffer(ternjit_buft(), 0);
    CHECK(ggml_backend_dev_supports_op(dev, mm.y));
    ggml_backend_buffer_free(mm.w->buffer);
    mm.w->buffer = real;
    // x transposed (not contiguous): refused.
    ggml_tensor* xt = ggml_transpose(mm.xctx, ggml_new_tensor_2d(mm.xctx, GGML_TYPE_F32, 2, 256));
    CHECK_FALSE(ggml_backend_dev_supports_op(dev, ggml_mul_mat(mm.xctx, mm.w, xt)));
    // f16 activations: refused.
    ggml_tensor* xh = ggml_new_tensor_2d(mm.xctx, GGML_TYPE_F16, 256, 2);
    CHECK_FALSE(ggml_backend_dev_supports_op(dev, ggml_mul_mat(mm.xctx, mm.w, xh)));
    // Other ops: refused; views: accepted (they compute nothing).
    CHECK_FALSE(ggml_backend_dev_supports_op(dev, ggml_relu(mm.xctx, mm.x)));
    CHECK(ggml_backend_dev_supports_op(dev, ggml_reshape_1d(mm.xctx, mm.x, 512)));
  }
}

TEST_CASE("a whole graph (as ggml's RPC server hands it): ternary matmuls on ternjit, the other nodes on ggml-cpu") {
  Backends be;
  std::mt19937 rng(9);
  const std::int64_t k = 256, n = 256, m = 5;
  MulMat mm(GGML_TYPE_TQ2_0, k, n, m, ternjit_buft());
  // y2 = 2 * y, y3 = y2 + x: nodes TERNJIT does not compute itself, after its own.
  ggml_init_params p{8 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true};
  ggml_context* ctx = ggml_init(p);
  ggml_tensor* y2 = ggml_scale(ctx, mm.y, 2.0f);
  ggml_tensor* y3 = ggml_add(ctx, y2, mm.x);
  ggml_cgraph* g = ggml_new_graph(ctx);
  ggml_build_forward_expand(g, y3);
  ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors_from_buft(ctx, ternjit_buft());
  REQUIRE(buf);
  const auto wbytes = ternary_weight(GGML_TYPE_TQ2_0, k, n, rng);
  const auto x = random_x(k, m, rng);
  ggml_backend_tensor_set(mm.w, wbytes.data(), 0, wbytes.size());
  ggml_backend_tensor_set(mm.x, x.data(), 0, x.size() * sizeof(float));
  std::vector<float> nan(static_cast<std::size_t>(n * m), std::nanf(""));
  for (ggml_tensor* t : {mm.y, y2, y3}) ggml_backend_tensor_set(t, nan.data(), 0, ggml_nbytes(t));
  REQUIRE(ggml_backend_graph_compute(be.tj, g) == GGML_STATUS_SUCCESS);
  std::vector<float> y(nan.size()), v2(nan.size()), v3(nan.size());
  ggml_backend_tensor_get(mm.y, y.data(), 0, ggml_nbytes(mm.y));
  ggml_backend_tensor_get(y2, v2.data(), 0, ggml_nbytes(y2));
  ggml_backend_tensor_get(y3, v3.data(), 0, ggml_nbytes(y3));
  std::vector<double> want, tol;
  reference(GGML_TYPE_TQ2_0, wbytes, x, k, n, m, &want, &tol);
  check_close(y, want, tol, "the matmul");
  for (std::size_t i = 0; i < y.size(); ++i) {
    REQUIRE(v2[i] == 2.0f * y[i]);
    REQUIRE(v3[i] == v2[i] + x[i]);
  }
  ggml_backend_buffer_free(buf);
  ggml_free(ctx);
}

}  // namespace

int main(int argc, char** argv) {
  std::printf("activations: %s\n", int8_mode() ? "int8 per row (the default)" : "f32");
  doctest::Context ctx(argc, argv);
  return ctx.run();
}
