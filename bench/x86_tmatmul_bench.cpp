// SPDX-License-Identifier: Apache-2.0
// x86_tmatmul_bench.cpp - the x86 ternary matmul against oneDNN and the memory-bandwidth ceiling.
//
// For each weight shape (K, N) of BitNet-like layers, batch M and thread count, the
// same process runs, in this order (Google Benchmark keeps registration order):
//   probe/...       streaming read of K*N/4 bytes (the 2-bit weights' size) with
//                   AVX-512 (or AVX2) loads: the bandwidth ceiling of a GEMV
//   onednn_s8/...   oneDNN matmul s8 x s8 -> s32, the same {-1,0,1} weights as int8 in
//                   the layout oneDNN prefers (format_tag::any, reordered once)
//   onednn_f32/...  oneDNN matmul f32 x f32 -> f32, same weights as f32
//   reference/...   the IR interpreter (one small case only: it is very slow)
//   ternjit_i8/...  TMatMulKernel, default_config, int8 x with x_scale[M] and
//                   w_scale[N] epilogue (what BitLinear runs)
//   ternjit_i8_2bit/... the same problem on the best 2-bit layout (default_config with
//                   sub_2bit = false: variant dot or mask_dot, what ternjit_i8 was before
//                   the 1.6-bit variant)
//   ternjit_i8_base3/... the same problem on variant base3 (1.6-bit weights, 5 trits a
//                   byte; avx512_vnni hosts with VBMI; nb=160 at M = 1, else 80)
//   lut_probe/...   (M = 1 hot) a T-MAC style lookup-table GEMV probe (below), int32 out
//   ternjit_i8_dot/..., ternjit_i8_maskdot/... (M = 2..8) the 2-bit default's blocking on
//                   variant dot, and on variant mask_dot, without software prefetch
//   ternjit_i8_dot_pf4k/..., ternjit_i8_maskdot_pf4k/... (M <= 8) the same with a 4 KiB
//                   prefetch ahead in the panel (what the M = 2..8 default has on AVX-512)
//   ternjit_i8/...  (after the rows above) default_config: whichever it picks
//   ternjit_i8_g256/... the same with a grouped w_scale[K/256, N] (GGUF TQ1_0/TQ2_0
//                   block scales; targets/x86/tmatmul_grouped.cpp); vs_uniform =
//                   t_ternjit_i8 / t
// On ternjit_i8_base3, _dot, _maskdot, lut_probe and ternjit_i8 rows vs_2bit = t_ternjit_i8_2bit / t (> 1: faster
// than the 2-bit kernel in the same run).
// Names are IMPL/K<k>_N<n>/M<m>/t<threads>/<hot|cold>. "hot" reads one weight copy
// (it may stay in cache); "cold" (M <= 8) rotates through >= 512 MiB of copies so
// weights come from DRAM; the probe rotates the same way.
// Counters: ms (per call), GBps (the impl's own weight bytes per second), GOPS
// (2*M*K*N per second / 1e9), vs_int8_roof (GOPS / (threads x the 1-thread int8-dot
// tight loop's GOPS, context int8_dot_ceiling): at M = 1, 2-bit weights and one
// vpdpbusd per 64 weights, the roof is int8_dot_ceiling / 8 GB/s); on every non-probe row vs_probe = t_probe / t (the
// fraction of the bandwidth ceiling reached for the same K*N), and on ternjit and
// reference rows vs_onednn_s8 = t_onednn_s8 / t (> 1: faster than oneDNN int8). The
// ratios need the baselines of the same case in the same run (filters keep them when
// they match the case part of the name, e.g. --benchmark_filter='/K4096_N4096/M1/t1/').
//
// Without --benchmark_filter only a quick subset runs (kQuickFilter); see
// bench/README.md for the full table.
#include <benchmark/benchmark.h>
#include <immintrin.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <vector>

#include "bench/tbb_parallel.h"
#include "ir/interpret.h"
#include "ir/parse.h"
#include "targets/x86/ceilings.h"
#include "targets/x86/isa.h"
#include "targets/x86/parallel.h"
#include "targets/x86/tmatmul.h"

namespace {

using namespace ternjit;
using namespace ternjit::targets::x86;
using ternjit::targets::CeilingOptions;

constexpr const char* kQuickFilter = "/K2560_N2560/M1/t1/hot|/K4096_N4096/M(1|32)/t(1|2)/hot";
constexpr std::size_t kColdBytes = std::size_t{512} << 20;

struct WeightShape {
  std::int64_t K, N;
};
constexpr WeightShape kShapes[] = {{2560, 2560}, {2560, 6912}, {6912, 2560}, {4096, 4096}, {4096, 14336}, {14336, 4096}};
constexpr std::int64_t kMs[] = {1, 2, 4, 8, 32, 128, 512};
constexpr int kThreadCounts[] = {1, 2};

enum class Mode { Hot, Cold };

struct Case {
  std::int64_t K, N, M;
  int threads;
  Mode mode;

  [[nodiscard]] std::string name() const {
    return "K" + std::to_string(K) + "_N" + std::to_string(N) + "/M" + std::to_string(M) + "/t" +
           std::to_string(threads) + (mode == Mode::Hot ? "/hot" : "/cold");
  }
  [[nodiscard]] double ops() const { return 2.0 * static_cast<double>(M) * static_cast<double>(K) * N; }
};

// How many weight copies a case rotates through: enough that they come from DRAM.
std::size_t copies_for(std::size_t bytes, Mode mode) {
  if (mode == Mode::Hot) return 1;
  return std::max<std::size_t>(2, (kColdBytes + bytes - 1) / bytes);
}

// Per-call milliseconds of each impl, by case name: the ratios' baselines. Mutable
// process state, acceptable in a benchmark binary (never in the library).
std::map<std::string, std::map<std::string, double>>& times_ms() {
  static std::map<std::string, std::map<std::string, double>> times;
  return times;
}

// The int8 compute ceiling of one thread (GOPS, measure_int8_dot's best rate), measured
// once in main before the benchmarks; 0 when the host has no dot path.
double& int8_roof_gops() {
  static double roof = 0;
  return roof;
}

// The data of one benchmark, kept while consecutive runs of the same benchmark ask for
// it (Google Benchmark calls a function several times while sizing the iteration
// count). One slot per data type: a new key frees the previous data first.
template <class T, class Build>
T& cached(const std::string& key, Build&& build) {
  static std::string slot_key;
  static std::unique_ptr<T> slot;
  if (!slot || slot_key != key) {
    slot.reset();
    slot = std::make_unique<T>(build());
    slot_key = key;
  }
  return *slot;
}

// A 64-byte aligned byte buffer.
struct AlignedBytes {
  struct Free {
    void operator()(std::uint8_t* p) const { std::free(p); }
  };
  std::unique_ptr<std::uint8_t, Free> ptr;
  std::size_t size = 0;
  explicit AlignedBytes(std::size_t n)
      : ptr(static_cast<std::uint8_t*>(std::aligned_alloc(64, (n + 63) / 64 * 64))), size(n) {}
};

std::uint64_t splitmix(std::uint64_t& s) {
  std::uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Random ternary weights K x N (row-major int8 in {-1, 0, 1}), cached per shape.
struct RawWeights {
  std::int64_t K = 0, N = 0;
  std::vector<std::int8_t> w;
};
const RawWeights& raw_weights(std::int64_t K, std::int64_t N) {
  return cached<RawWeights>("w" + std::to_string(K) + "x" + std::to_string(N), [&] {
    RawWeights r{K, N, std::vector<std::int8_t>(static_cast<std::size_t>(K * N))};
    std::uint64_t s = 0x7e57 + static_cast<std::uint64_t>(K * 131 + N);
    for (std::size_t i = 0; i < r.w.size(); i += 16) {
      std::uint64_t a = splitmix(s), b = splitmix(s);
      for (std::size_t j = 0; j < 16 && i + j < r.w.size(); ++j) {
        std::uint64_t v = (j < 8 ? a >> (8 * j) : b >> (8 * (j - 8))) & 0xff;
        r.w[i + j] = static_cast<std::int8_t>(v * 3 / 256) - 1;  // ~1/3 each of -1, 0, 1
      }
    }
    return r;
  });
}

std::vector<std::int8_t> random_i8(std::size_t n, std::uint64_t seed) {
  std::vector<std::int8_t> v(n);
  for (auto& x : v) x = static_cast<std::int8_t>(static_cast<int>(splitmix(seed) % 255) - 127);
  return v;
}
std::vector<float> random_f32(std::size_t n, std::uint64_t seed, float lo, float hi) {
  std::vector<float> v(n);
  for (auto& x : v) x = lo + (hi - lo) * static_cast<float>(splitmix(seed) >> 40) / static_cast<float>(1 << 24);
  return v;
}

// --- threads -------------------------------------------------------------------------

using ternjit::bench::parallel_for_threads;

// --- timing ----------------------------------------------------------------------------

// Times the state loop around `call(i)` (i: the iteration, for rotating copies) and sets
// the counters; returns milliseconds per call.
template <class Call>
double time_loop(benchmark::State& state, const Case& c, const std::string& impl, double weight_bytes, Call&& call) {
  std::size_t i = 0;
  auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) call(i++);
  double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  double per = sec / static_cast<double>(std::max<std::size_t>(i, 1));
  double ms = per * 1e3;
  state.counters["ms"] = ms;
  state.counters["GBps"] = weight_bytes / per / 1e9;
  state.counters["GOPS"] = c.ops() / per / 1e9;
  // The fraction of the int8-dot roof (threads x the 1-thread tight loop): a kernel that
  // issues one vpdpbusd per 64 multiply-adds (dot, mask_dot) cannot pass 1, whatever M.
  if (impl != "probe" && int8_roof_gops() > 0)
    state.counters["vs_int8_roof"] = c.ops() / per / 1e9 / (int8_roof_gops() * c.threads);
  auto& row = times_ms()[c.name()];
  row[impl] = ms;
  if (impl != "probe" && row.count("probe")) state.counters["vs_probe"] = row["probe"] / ms;
  if ((impl == "ternjit_i8" || impl == "reference") && row.count("onednn_s8"))
    state.counters["vs_onednn_s8"] = row["onednn_s8"] / ms;
  // Grouped scales against the uniform w_scale[N] kernel of the same case (> 1: faster).
  if (impl.rfind("ternjit_i8_g", 0) == 0 && row.count("ternjit_i8")) state.counters["vs_uniform"] = row["ternjit_i8"] / ms;
  if ((impl == "ternjit_i8" || impl == "ternjit_i8_base3" || impl.rfind("ternjit_i8_maskdot", 0) == 0 ||
       impl.rfind("ternjit_i8_dot", 0) == 0 || impl == "lut_probe") &&
      row.count("ternjit_i8_2bit"))
    state.counters["vs_2bit"] = row["ternjit_i8_2bit"] / ms;
  return ms;
}

// --- probe -----------------------------------------------------------------------------

// The streaming read is targets/x86/ceilings.h's stream_sum (shared with `ternjit bench`).

struct ProbeData {
  std::size_t bytes = 0, stride = 0, copies = 0;
  AlignedBytes buf{0};
};

void bm_probe(benchmark::State& state, Case c) {
  const std::size_t bytes = static_cast<std::size_t>(c.K * c.N / 4);
  const std::size_t copies = copies_for(bytes, c.mode);
  ProbeData& d = cached<ProbeData>("probe" + std::to_string(bytes) + "/" + std::to_string(copies), [&] {
    ProbeData p;
    p.bytes = bytes;
    p.stride = (bytes + 4095) / 4096 * 4096;
    p.copies = copies;
    p.buf = AlignedBytes(p.stride * copies);
    std::uint64_t s = 1;
    for (std::size_t i = 0; i < p.stride * copies; i += 8) {
      std::uint64_t v = splitmix(s);
      std::memcpy(p.buf.ptr.get() + i, &v, std::min<std::size_t>(8, p.stride * copies - i));
    }
    return p;
  });
  const bool avx512 = host_isas().avx512;
  const Parallel par = parallel_for_threads(c.threads);
  // Chunks of whole 4 KiB pages, one per thread.
  const std::int64_t chunks = c.threads;
  const std::size_t chunk = (d.bytes / static_cast<std::size_t>(chunks) + 4095) / 4096 * 4096;
  std::uint64_t sums[8] = {};
  time_loop(state, c, "probe", static_cast<double>(bytes), [&](std::size_t it) {
    const std::uint8_t* base = d.buf.ptr.get() + (it % d.copies) * d.stride;
    par.for_each(chunks, [&](std::int64_t t) {
      std::size_t lo = std::min(d.bytes, static_cast<std::size_t>(t) * chunk);
      std::size_t hi = std::min(d.bytes, lo + chunk);
      sums[t] += stream_sum(base + lo, hi - lo);
    });
    benchmark::DoNotOptimize(sums);
  });
  state.SetLabel(avx512 ? "avx512 loads" : "avx2 loads");
}

// --- oneDNN ----------------------------------------------------------------------------

dnnl::engine& dnnl_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

struct DnnlData {
  dnnl::matmul prim;
  dnnl::memory src, dst;
  std::vector<dnnl::memory> weights;  // copies, in the primitive's preferred layout
  std::size_t weight_bytes = 0;
  std::string impl;
  std::string error;
};

DnnlData build_dnnl(const Case& c, bool int8) {
  using dt = dnnl::memory::data_type;
  using tag = dnnl::memory::format_tag;
  DnnlData d;
  try {
    omp_set_num_threads(c.threads);
    dnnl::engine& eng = dnnl_engine();
    dnnl::stream strm(eng);
    dnnl::memory::desc src_md({c.M, c.K}, int8 ? dt::s8 : dt::f32, tag::ab);
    dnnl::memory::desc wei_any({c.K, c.N}, int8 ? dt::s8 : dt::f32, tag::any);
    dnnl::memory::desc dst_md({c.M, c.N}, int8 ? dt::s32 : dt::f32, tag::ab);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src_md, wei_any, dst_md), eng);
    d.impl = pd.impl_info_str();
    d.prim = dnnl::matmul(pd);
    d.src = dnnl::memory(pd.src_desc(), eng);
    d.dst = dnnl::memory(pd.dst_desc(), eng);
    const RawWeights& raw = raw_weights(c.K, c.N);
    std::vector<std::int8_t> x = random_i8(static_cast<std::size_t>(c.M * c.K), 11);
    if (int8) {
      std::memcpy(d.src.get_data_handle(), x.data(), x.size());
    } else {
      auto* f = static_cast<float*>(d.src.get_data_handle());
      for (std::size_t i = 0; i < x.size(); ++i) f[i] = static_cast<float>(x[i]) / 127.0f;
    }
    // The user's weights (row-major K x N), reordered once into the primitive's layout.
    dnnl::memory user;
    std::vector<float> wf;
    if (int8) {
      user = dnnl::memory({{c.K, c.N}, dt::s8, tag::ab}, eng, const_cast<std::int8_t*>(raw.w.data()));
    } else {
      wf.assign(raw.w.begin(), raw.w.end());
      user = dnnl::memory({{c.K, c.N}, dt::f32, tag::ab}, eng, wf.data());
    }
    d.weight_bytes = pd.weights_desc().get_size();
    const std::size_t copies = copies_for(d.weight_bytes, c.mode);
    d.weights.emplace_back(pd.weights_desc(), eng);
    dnnl::reorder(user, d.weights[0]).execute(strm, user, d.weights[0]);
    strm.wait();
    for (std::size_t i = 1; i < copies; ++i) {
      d.weights.emplace_back(pd.weights_desc(), eng);
      std::memcpy(d.weights[i].get_data_handle(), d.weights[0].get_data_handle(), d.weight_bytes);
    }
  } catch (const dnnl::error& e) {
    d.error = std::string("oneDNN: ") + e.what();
  }
  return d;
}

void bm_onednn(benchmark::State& state, Case c, bool int8) {
  const std::string impl = int8 ? "onednn_s8" : "onednn_f32";
  DnnlData& d = cached<DnnlData>(impl + "/" + c.name(), [&] { return build_dnnl(c, int8); });
  if (!d.error.empty()) {
    state.SkipWithError(d.error.c_str());
    return;
  }
  omp_set_num_threads(c.threads);
  dnnl::stream strm(dnnl_engine());
  time_loop(state, c, impl, static_cast<double>(d.weight_bytes), [&](std::size_t it) {
    d.prim.execute(strm, {{DNNL_ARG_SRC, d.src}, {DNNL_ARG_WEIGHTS, d.weights[it % d.weights.size()]},
                          {DNNL_ARG_DST, d.dst}});
    strm.wait();
  });
  state.SetLabel(d.impl);
}

// --- ternjit -----------------------------------------------------------------------------

struct TernjitData {
  std::unique_ptr<TMatMulKernel> kernel;
  std::vector<PackedWeights> weights;  // copies
  std::vector<std::int8_t> x;
  std::vector<float> x_scale, w_scale, y;
  std::string error;
};

TMatMulProblem bitlinear_problem(const Case& c, std::int64_t group) {
  TMatMulProblem p;
  p.M = c.M;
  p.K = c.K;
  p.N = c.N;
  p.x_kind = ElemKind::I8;
  p.out_kind = ElemKind::F32;
  p.x_scale = true;
  p.w_scale = true;
  p.w_scale_per_channel = group == 0;
  p.w_scale_group = group;
  return p;
}

// Which configuration a ternjit row runs.
enum class Flavor { Default, TwoBit, Base3, MaskDot, Dot, MaskDotPf, DotPf };

std::string flavor_suffix(Flavor f) {
  switch (f) {
    case Flavor::Default: return "";
    case Flavor::TwoBit: return "_2bit";
    case Flavor::Base3: return "_base3";
    case Flavor::MaskDot: return "_maskdot";
    case Flavor::Dot: return "_dot";
    case Flavor::MaskDotPf: return "_maskdot_pf4k";
    case Flavor::DotPf: return "_dot_pf4k";
  }
  return "";
}

TernjitData build_ternjit(const Case& c, std::int64_t group, Flavor flavor) {
  TernjitData d;
  std::optional<Isa> isa = best_isa(host_isas());
  if (!isa) {
    d.error = "host runs no x86 kernel path (needs AVX2)";
    return d;
  }
  TMatMulProblem p = bitlinear_problem(c, group);
  const bool two_bit = flavor == Flavor::TwoBit || flavor == Flavor::MaskDot || flavor == Flavor::Dot ||
                       flavor == Flavor::MaskDotPf || flavor == Flavor::DotPf;
  TMatMulConfig config = default_config(p, *isa, c.threads, !two_bit);
  if (flavor == Flavor::Base3) {
    if (!host_isas().avx512_vbmi || (*isa != Isa::Avx512Vnni && *isa != Isa::Amx)) {
      d.error = "base3 needs avx512_vnni with AVX512-VBMI";
      return d;
    }
    config.variant = TMatMulVariant::Base3;
    config.vector_bits = 512;
    config.n_block = c.M == 1 ? 160 : 80;
    config.m_block = static_cast<int>(std::min<std::int64_t>(c.M, 4));
    config.k_unroll = 2;
  }
  if (flavor == Flavor::MaskDot || flavor == Flavor::Dot || flavor == Flavor::MaskDotPf || flavor == Flavor::DotPf) {
    // The 2-bit default's blocking on variant mask_dot (in place fields: 3 ANDs per 4
    // dots) or dot (shift + AND per field), without software prefetch (the M = 2-8
    // default before it got one); the _pf4k rows with a 4 KiB prefetch ahead in the panel
    // (the M = 2-8 default on AVX-512 since).
    const bool dot = flavor == Flavor::Dot || flavor == Flavor::DotPf;
    config.variant = dot ? TMatMulVariant::Dot : TMatMulVariant::MaskDot;
    config.prefetch_bytes = flavor == Flavor::MaskDotPf || flavor == Flavor::DotPf ? 4096 : 0;
    if (!validate(p, config).ok()) config.m_block = std::min(config.m_block, 2);
  }
  auto kernel = TMatMulKernel::create(p, config);
  if (!kernel.ok()) {
    d.error = "create: " + kernel.error().message;
    return d;
  }
  d.kernel = std::move(kernel.value());
  auto packed = d.kernel->pack(raw_weights(c.K, c.N).w);
  if (!packed.ok()) {
    d.error = "pack: " + packed.error().message;
    return d;
  }
  const std::size_t copies = copies_for(packed->size, c.mode);
  d.weights.reserve(copies);
  d.weights.push_back(std::move(packed.value()));
  for (std::size_t i = 1; i < copies; ++i) d.weights.push_back(aligned_copy(d.weights[0]));
  d.x = random_i8(static_cast<std::size_t>(c.M * c.K), 11);
  d.x_scale = random_f32(static_cast<std::size_t>(c.M), 12, 0.001f, 0.01f);
  const std::int64_t scale_rows = group > 0 ? (c.K + group - 1) / group : 1;
  d.w_scale = random_f32(static_cast<std::size_t>(scale_rows * c.N), 13, 0.5f, 1.5f);
  d.y.assign(static_cast<std::size_t>(c.M * c.N), 0.0f);
  return d;
}

void bm_ternjit(benchmark::State& state, Case c, std::int64_t group, Flavor flavor = Flavor::Default) {
  const std::string impl = (group > 0 ? "ternjit_i8_g" + std::to_string(group) : "ternjit_i8") + flavor_suffix(flavor);
  TernjitData& d = cached<TernjitData>(impl + "/" + c.name(), [&] { return build_ternjit(c, group, flavor); });
  if (!d.error.empty()) {
    state.SkipWithError(d.error.c_str());
    return;
  }
  const Parallel par = parallel_for_threads(c.threads);
  TMatMulArgs args;
  args.x = d.x.data();
  args.x_scale = d.x_scale.data();
  args.w_scale = d.w_scale.data();
  args.y = d.y.data();
  time_loop(state, c, impl.c_str(), static_cast<double>(d.weights[0].size), [&](std::size_t it) {
    args.w = &d.weights[it % d.weights.size()];
    d.kernel->run(args, par);
    benchmark::ClobberMemory();
  });
  state.SetLabel(d.kernel->config().str());
}

// --- reference interpreter ------------------------------------------------------------------

struct ReferenceData {
  ir::Module module;
  std::vector<ir::HostTensor> args;
  std::string error;
};

ReferenceData build_reference(const Case& c) {
  ReferenceData d;
  const std::string M = std::to_string(c.M), K = std::to_string(c.K), N = std::to_string(c.N);
  const std::string text = "func @tm(%x: i8[" + M + ", " + K + "], %w: t2[" + K + ", " + N + "], %xs: f32[" + M +
                           ", 1], %ws: f32[" + N + "]) -> f32[" + M + ", " + N + "] {\n^entry:\n" +
                           "  %y = tmatmul %x, %w, %xs, %ws {x_scale = true, w_scale = true, bias = false, "
                           "residual = false, act = none} : f32[" +
                           M + ", " + N + "]\n  ret %y\n}\n";
  auto m = ir::parse_module(text, "bench.tir");
  if (!m.ok()) {
    d.error = "parse: " + m.error().message;
    return d;
  }
  d.module = std::move(m.value());
  std::vector<std::int8_t> x = random_i8(static_cast<std::size_t>(c.M * c.K), 11);
  const RawWeights& raw = raw_weights(c.K, c.N);
  std::vector<double> wd(raw.w.begin(), raw.w.end());
  std::vector<float> xs = random_f32(static_cast<std::size_t>(c.M), 12, 0.001f, 0.01f);
  std::vector<float> ws = random_f32(static_cast<std::size_t>(c.N), 13, 0.5f, 1.5f);
  d.args.push_back(ir::HostTensor::from_i8({c.M, c.K}, x));
  d.args.push_back(ir::HostTensor::from_values(ElemKind::T2, {c.K, c.N}, wd));
  d.args.push_back(ir::HostTensor::from_f32({c.M, 1}, xs));
  d.args.push_back(ir::HostTensor::from_f32({c.N}, ws));
  return d;
}

void bm_reference(benchmark::State& state, Case c) {
  ReferenceData& d = cached<ReferenceData>(c.name(), [&] { return build_reference(c); });
  if (!d.error.empty()) {
    state.SkipWithError(d.error.c_str());
    return;
  }
  std::string error;
  time_loop(state, c, "reference", static_cast<double>(c.K * c.N / 4), [&](std::size_t) {
    auto out = ir::interpret(d.module, "tm", d.args, ir::ParamValues{});
    if (!out.ok()) error = out.error().message;
    benchmark::DoNotOptimize(out);
  });
  if (!error.empty()) state.SkipWithError(("interpret: " + error).c_str());
}

// --- LUT probe (issue 20 part 2: a T-MAC style lookup-table GEMV, M = 1) -------------------
//
// The cheapest exact lookup-table inner loop found for int8 x on AVX-512 VBMI, as a
// probe (not a product): per call, each group of 3 activations gets one 64-byte table
// (built from x, included in the time): bytes 0-26 hold sum_i w_i (x_i & 15) and
// bytes 32-58 sum_i w_i (x_i >> 4) for the 27 weight triples (both fit int8; the
// nibble split is what keeps int8 tables exact: a whole sum needs 10 bits). Weights
// are one index byte (0-26) per (column, triple): 2.67 bits a weight. Per 64 columns
// and triple: unpack each index into a (i, i + 32) byte pair (2 unpacks, 2 ORs), two
// vpermb, two vpmaddubsw by (1, 16) (= the exact sum of 3 products, |.| <= 384, int16),
// two vpaddw into int16 accumulators, widened to int32 every 64 triples (64 * 384 <
// 32767: no overflow). 11 ops per 192 weights (3.7 per 64) against mask_dot's 3 ANDs
// + 4 vpdpbusd per 256 (1.75 per 64): the int8-exact table costs two lookups and a
// widening per 64 results where vpdpbusd does 64 multiply-adds in one. A self-check
// against int32 sums runs at setup (SkipWithError on a mismatch).

constexpr int kLutR = 2;                // 64-column index vectors per tile
constexpr int kLutTile = 64 * kLutR;    // columns per tile
constexpr std::int64_t kLutWiden = 64;  // triples between int16 -> int32 widenings

struct LutData {
  std::int64_t K = 0, N = 0, groups = 0, tiles = 0;
  AlignedBytes idx{0}, tables{0};
  std::vector<std::int8_t> x;
  std::vector<std::int32_t> y;
  std::string error;
};

void lut_tables(const std::int8_t* x, std::int64_t K, std::int64_t groups, std::int8_t* tab) {
  for (std::int64_t j = 0; j < groups; ++j) {
    int xl[3], xh[3];
    for (int i = 0; i < 3; ++i) {
      const std::int64_t k = 3 * j + i;
      const int v = k < K ? x[k] : 0;
      xl[i] = v & 15;
      xh[i] = v >> 4;  // v = 16 xh + xl
    }
    std::int8_t* t = tab + 64 * j;
    for (int code = 0; code < 27; ++code) {
      int lo = 0, hi = 0;
      for (int i = 0, q = code; i < 3; ++i, q /= 3) {
        lo += (q % 3 - 1) * xl[i];
        hi += (q % 3 - 1) * xh[i];
      }
      t[code] = static_cast<std::int8_t>(lo);
      t[32 + code] = static_cast<std::int8_t>(hi);
    }
  }
}

// GCC 12's intrinsics headers start some results from _mm512_undefined_*(), which
// -Wmaybe-uninitialized reports inside them (a false positive).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) void lut_tile(const LutData& d, std::int64_t t,
                                                                     std::int32_t* y) {
  const __m512i odd = _mm512_set1_epi16(0x2000);   // + 32 on the odd byte: the hi table
  const __m512i w116 = _mm512_set1_epi16(0x1001);  // u8 (1, 16) pairs
  const auto* tabs = reinterpret_cast<const std::int8_t*>(d.tables.ptr.get());
  const std::uint8_t* ip = d.idx.ptr.get() + static_cast<std::size_t>(t * d.groups * kLutTile);
  __m512i a16[2 * kLutR], a32[4 * kLutR];
  for (auto& v : a32) v = _mm512_setzero_si512();
  for (std::int64_t j0 = 0; j0 < d.groups; j0 += kLutWiden) {
    for (auto& v : a16) v = _mm512_setzero_si512();
    const std::int64_t jn = std::min(d.groups, j0 + kLutWiden);
    for (std::int64_t j = j0; j < jn; ++j) {
      const __m512i tab = _mm512_load_si512(tabs + 64 * j);
      for (int r = 0; r < kLutR; ++r) {
        const __m512i v = _mm512_load_si512(ip + (j * kLutR + r) * 64);
        const __m512i lo = _mm512_or_si512(_mm512_unpacklo_epi8(v, v), odd);
        const __m512i hi = _mm512_or_si512(_mm512_unpackhi_epi8(v, v), odd);
        a16[2 * r] = _mm512_add_epi16(a16[2 * r], _mm512_maddubs_epi16(w116, _mm512_permutexvar_epi8(lo, tab)));
        a16[2 * r + 1] = _mm512_add_epi16(a16[2 * r + 1], _mm512_maddubs_epi16(w116, _mm512_permutexvar_epi8(hi, tab)));
      }
    }
    for (int q = 0; q < 2 * kLutR; ++q) {
      a32[2 * q] = _mm512_add_epi32(a32[2 * q], _mm512_cvtepi16_epi32(_mm512_castsi512_si256(a16[q])));
      a32[2 * q + 1] = _mm512_add_epi32(a32[2 * q + 1], _mm512_cvtepi16_epi32(_mm512_extracti64x4_epi64(a16[q], 1)));
    }
  }
  // Word w of an unpacked vector is byte 16 (w / 8) + 8 half + w % 8 of the index vector.
  alignas(64) std::int32_t tmp[16];
  for (int q = 0; q < 2 * kLutR; ++q)
    for (int part = 0; part < 2; ++part) {
      _mm512_store_si512(tmp, a32[2 * q + part]);
      for (int e = 0; e < 16; ++e) {
        const int w = part * 16 + e;
        const std::int64_t col = t * kLutTile + (q / 2) * 64 + 16 * (w / 8) + 8 * (q % 2) + w % 8;
        if (col < d.N) y[col] = tmp[e];
      }
    }
}
#pragma GCC diagnostic pop

LutData build_lut(const Case& c) {
  LutData d;
  if (!host_isas().avx512_vbmi) {
    d.error = "the LUT probe needs AVX512-VBMI";
    return d;
  }
  d.K = c.K;
  d.N = c.N;
  d.groups = (c.K + 2) / 3;
  d.tiles = (c.N + kLutTile - 1) / kLutTile;
  const RawWeights& raw = raw_weights(c.K, c.N);
  d.idx = AlignedBytes(static_cast<std::size_t>(d.tiles * d.groups * kLutTile));
  d.tables = AlignedBytes(static_cast<std::size_t>(d.groups * 64));
  std::memset(d.tables.ptr.get(), 0, d.tables.size);
  for (std::int64_t t = 0; t < d.tiles; ++t)
    for (std::int64_t j = 0; j < d.groups; ++j)
      for (int b = 0; b < kLutTile; ++b) {
        const std::int64_t n = t * kLutTile + b;
        int code = 0;
        for (int i = 2; i >= 0; --i) {
          const std::int64_t k = 3 * j + i;
          code = 3 * code + (k < c.K && n < c.N ? raw.w[static_cast<std::size_t>(k * c.N + n)] + 1 : 1);
        }
        d.idx.ptr.get()[(t * d.groups + j) * kLutTile + b] = static_cast<std::uint8_t>(code);
      }
  d.x = random_i8(static_cast<std::size_t>(c.K), 11);
  d.y.assign(static_cast<std::size_t>(c.N), 0);
  // Self-check on every 97th column against plain int32 sums.
  lut_tables(d.x.data(), d.K, d.groups, reinterpret_cast<std::int8_t*>(d.tables.ptr.get()));
  for (std::int64_t t = 0; t < d.tiles; ++t) lut_tile(d, t, d.y.data());
  for (std::int64_t n = 0; n < c.N; n += 97) {
    std::int32_t want = 0;
    for (std::int64_t k = 0; k < c.K; ++k)
      want += d.x[static_cast<std::size_t>(k)] * raw.w[static_cast<std::size_t>(k * c.N + n)];
    if (want != d.y[static_cast<std::size_t>(n)]) {
      d.error = "LUT probe self-check failed at n=" + std::to_string(n);
      break;
    }
  }
  return d;
}

void bm_lut(benchmark::State& state, Case c) {
  LutData& d = cached<LutData>("lut/" + c.name(), [&] { return build_lut(c); });
  if (!d.error.empty()) {
    state.SkipWithError(d.error.c_str());
    return;
  }
  const Parallel par = parallel_for_threads(c.threads);
  time_loop(state, c, "lut_probe", static_cast<double>(d.idx.size), [&](std::size_t) {
    lut_tables(d.x.data(), d.K, d.groups, reinterpret_cast<std::int8_t*>(d.tables.ptr.get()));
    par.for_each(d.tiles, [&](std::int64_t t) { lut_tile(d, t, d.y.data()); });
    benchmark::ClobberMemory();
  });
  state.SetLabel("3-weight vpermb tables, 1 index byte per triple");
}

// --- registration and context --------------------------------------------------------------

void register_case(const Case& c) {
  auto reg = [&](const std::string& impl, auto fn) {
    return benchmark::RegisterBenchmark((impl + "/" + c.name()).c_str(), fn)->UseRealTime()->Unit(
        benchmark::kMillisecond);
  };
  reg("probe", [c](benchmark::State& s) { bm_probe(s, c); });
  reg("onednn_s8", [c](benchmark::State& s) { bm_onednn(s, c, true); });
  reg("onednn_f32", [c](benchmark::State& s) { bm_onednn(s, c, false); });
  // The interpreter only on the smallest case: it takes about a second per call.
  if (c.K == 2560 && c.N == 2560 && c.M == 1 && c.threads == 1 && c.mode == Mode::Hot)
    reg("reference", [c](benchmark::State& s) { bm_reference(s, c); })->Iterations(1);
  reg("ternjit_i8_2bit", [c](benchmark::State& s) { bm_ternjit(s, c, 0, Flavor::TwoBit); });
  reg("ternjit_i8_base3", [c](benchmark::State& s) { bm_ternjit(s, c, 0, Flavor::Base3); });
  if (c.M == 1 && c.mode == Mode::Hot) reg("lut_probe", [c](benchmark::State& s) { bm_lut(s, c); });
  if (c.M <= 8) {
    reg("ternjit_i8_dot_pf4k", [c](benchmark::State& s) { bm_ternjit(s, c, 0, Flavor::DotPf); });
    reg("ternjit_i8_maskdot_pf4k", [c](benchmark::State& s) { bm_ternjit(s, c, 0, Flavor::MaskDotPf); });
  }
  if (c.M > 1 && c.M <= 8) {
    reg("ternjit_i8_dot", [c](benchmark::State& s) { bm_ternjit(s, c, 0, Flavor::Dot); });
    reg("ternjit_i8_maskdot", [c](benchmark::State& s) { bm_ternjit(s, c, 0, Flavor::MaskDot); });

  }
  reg("ternjit_i8", [c](benchmark::State& s) { bm_ternjit(s, c, 0); });
  reg("ternjit_i8_g256", [c](benchmark::State& s) { bm_ternjit(s, c, 256); });
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      return colon == std::string::npos ? line : line.substr(colon + 2);
    }
  return "unknown";
}

std::string host_isa_list() {
  const IsaSupport& s = host_isas();
  std::string out;
  for (Isa isa : kAllIsas)
    if (s.supports(isa)) out += (out.empty() ? "" : " ") + std::string(isa_name(isa));
  if (!s.amx_note.empty()) out += " (amx: " + s.amx_note + ")";
  return out;
}

std::string onednn_isa() {
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    default: return "other";
  }
}

bool has_flag(int argc, char** argv, const char* prefix) {
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], prefix, std::strlen(prefix)) == 0) return true;
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  // libgomp reads OMP_WAIT_POLICY when it loads: oneDNN's OpenMP threads must not spin
  // on the cores the oneTBB workers of the next benchmark need, so re-exec with it set.
  if (!std::getenv("OMP_WAIT_POLICY")) {
    setenv("OMP_WAIT_POLICY", "passive", 1);
    execv("/proc/self/exe", argv);  // returns only on failure: then run as is
  }
  std::vector<char*> args(argv, argv + argc);
  std::string filter = std::string("--benchmark_filter=") + kQuickFilter;
  std::string min_time = "--benchmark_min_time=0.1";
  if (!has_flag(argc, argv, "--benchmark_filter")) args.push_back(filter.data());
  if (!has_flag(argc, argv, "--benchmark_min_time")) args.push_back(min_time.data());
  int n = static_cast<int>(args.size());
  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 1;

  std::optional<Isa> isa = best_isa(host_isas());
  benchmark::AddCustomContext("cpu_model", cpu_model());
  benchmark::AddCustomContext("host_isas", host_isa_list());
  benchmark::AddCustomContext("ternjit_isa", isa ? std::string(isa_name(*isa)) : "none (no AVX2)");
  const dnnl::version_t* v = dnnl::version();
  benchmark::AddCustomContext("onednn", std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
                                            std::to_string(v->patch) + " isa " + onednn_isa());
  benchmark::AddCustomContext("omp_wait_policy", std::getenv("OMP_WAIT_POLICY") ? std::getenv("OMP_WAIT_POLICY") : "");
  benchmark::AddCustomContext("cold_bytes", std::to_string(kColdBytes >> 20) + " MiB of weight copies per impl");
  benchmark::AddCustomContext("ratios", "vs_probe = t_probe / t; vs_onednn_s8 = t_onednn_s8 / t (>1: faster)");
  // The int8 compute ceiling of one thread on the ternjit ISA's dot path (the roof GOPS
  // counters approach at large M; `ternjit bench` measures the same).
  if (auto dot_isa = isa ? dot_ceiling_isa(*isa) : std::nullopt) {
    auto dot = measure_int8_dot(Parallel{}, *dot_isa, CeilingOptions{});
    if (dot.ok()) int8_roof_gops() = dot->best_rate();
    benchmark::AddCustomContext("int8_dot_ceiling", dot.ok() ? std::to_string(static_cast<int>(dot->best_rate())) +
                                                                   " GOPS, 1 thread, " + std::string(isa_name(*dot_isa))
                                                             : dot.error().message);
  }

  for (const WeightShape& s : kShapes)
    for (std::int64_t m : kMs)
      for (int t : kThreadCounts) {
        register_case(Case{s.K, s.N, m, t, Mode::Hot});
        if (m <= 8) register_case(Case{s.K, s.N, m, t, Mode::Cold});
      }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
