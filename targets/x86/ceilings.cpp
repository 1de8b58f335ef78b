// SPDX-License-Identifier: Apache-2.0
// ceilings.cpp - streaming-read bandwidth and int8-dot throughput probes (ceilings.h).
#include "targets/x86/ceilings.h"

#include <immintrin.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

namespace ternjit::targets::x86 {

namespace {

using Clock = std::chrono::steady_clock;

// Plain loads, 4 independent accumulators: software prefetch (512..4096 bytes ahead) or
// 2..8 interleaved streams did not read DRAM faster on the EPYC this was written on
// (17-20 GB/s on one core either way, within the noise of the shared machine).
__attribute__((target("avx512f"))) std::uint64_t sum_bytes_avx512(const std::uint8_t* p, std::size_t n) {
  __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
  std::size_t i = 0;
  for (; i + 256 <= n; i += 256) {
    a0 = _mm512_add_epi64(a0, _mm512_load_si512(p + i));
    a1 = _mm512_add_epi64(a1, _mm512_load_si512(p + i + 64));
    a2 = _mm512_add_epi64(a2, _mm512_load_si512(p + i + 128));
    a3 = _mm512_add_epi64(a3, _mm512_load_si512(p + i + 192));
  }
  // Stored and summed: GCC 12's _mm512_reduce_add_epi64 trips -Wuninitialized.
  alignas(64) std::uint64_t lanes[8];
  _mm512_store_si512(lanes, _mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3)));
  std::uint64_t s = 0;
  for (std::uint64_t l : lanes) s += l;
  for (; i < n; ++i) s += p[i];
  return s;
}

__attribute__((target("avx2"))) std::uint64_t sum_bytes_avx2(const std::uint8_t* p, std::size_t n) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  std::size_t i = 0;
  for (; i + 128 <= n; i += 128) {
    a0 = _mm256_add_epi64(a0, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)));
    a1 = _mm256_add_epi64(a1, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 32)));
    a2 = _mm256_add_epi64(a2, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 64)));
    a3 = _mm256_add_epi64(a3, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 96)));
  }
  alignas(32) std::uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes),
                     _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3)));
  std::uint64_t s = lanes[0] + lanes[1] + lanes[2] + lanes[3];
  for (; i < n; ++i) s += p[i];
  return s;
}

// The dot loops: kChains independent accumulators, operands from the caller's seed so
// nothing folds at compile time, the chain loop unrolled so the accumulators live in
// registers (rolled, GCC 12 kept them in memory: half the peak). Each returns the lanes'
// sum. On the AMD EPYC (znver4) this was written on, 8, 12 and 16 chains all reached
// 473 GOPS on one core with zmm and 12 and 16 with ymm; 24 spilled (231).
constexpr int kChains = 12;

__attribute__((target("avx512f,avx512bw,avx512vnni"))) std::int64_t dot_avx512_vnni(std::int64_t iters, int seed) {
  const __m512i a = _mm512_set1_epi32(seed | 0x01010101), b = _mm512_set1_epi32(seed ^ 0x7f01fe02);
  __m512i c[kChains];
  for (auto& x : c) x = _mm512_setzero_si512();
  for (std::int64_t i = 0; i < iters; ++i)
#pragma GCC unroll 16
    for (auto& x : c) x = _mm512_dpbusd_epi32(x, a, b);
  __m512i s = c[0];
  for (int j = 1; j < kChains; ++j) s = _mm512_add_epi32(s, c[j]);
  alignas(64) std::int32_t lanes[16];
  _mm512_store_si512(lanes, s);
  std::int64_t t = 0;
  for (std::int32_t l : lanes) t += l;
  return t;
}

__attribute__((target("avx2,avxvnni"))) std::int64_t dot_avx_vnni(std::int64_t iters, int seed) {
  const __m256i a = _mm256_set1_epi32(seed | 0x01010101), b = _mm256_set1_epi32(seed ^ 0x7f01fe02);
  __m256i c[kChains];
  for (auto& x : c) x = _mm256_setzero_si256();
  for (std::int64_t i = 0; i < iters; ++i)
#pragma GCC unroll 16
    for (auto& x : c) x = _mm256_dpbusd_avx_epi32(x, a, b);
  __m256i s = c[0];
  for (int j = 1; j < kChains; ++j) s = _mm256_add_epi32(s, c[j]);
  alignas(32) std::int32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), s);
  std::int64_t t = 0;
  for (std::int32_t l : lanes) t += l;
  return t;
}

// AVX2 has no int8 dot: u8 x s8 pairs to s16 (vpmaddubsw), pairs of s16 to s32 with
// ones (vpmaddwd), then an add: 3 instructions per 32 multiply-adds, as the x86
// tmatmul's avx2 path does. Each chain's u8 operand is its own accumulator, so no
// product is loop-invariant (a constant pair would be hoisted out of the loop) and none
// is shared between chains. 10 chains: on the znver4 EPYC 6, 8, 10 and 12 gave 189, 209,
// 217 and 167 GOPS on one core (12 no longer fit AVX2's 16 ymm registers with the
// temporaries: spills); the bound there is two multiplies per 32 multiply-adds on two
// pipes, ~236 GOPS.
constexpr int kAvx2Chains = 10;

__attribute__((target("avx2"))) std::int64_t dot_avx2(std::int64_t iters, int seed) {
  const __m256i b = _mm256_set1_epi32((seed ^ 0x7f01fe02) & 0x3f3f3f3f);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i c[kAvx2Chains];
  for (int j = 0; j < kAvx2Chains; ++j) c[j] = _mm256_set1_epi32(seed + j);
  for (std::int64_t i = 0; i < iters; ++i)
#pragma GCC unroll 16
    for (auto& x : c) x = _mm256_add_epi32(x, _mm256_madd_epi16(_mm256_maddubs_epi16(x, b), ones));
  __m256i s = c[0];
  for (int j = 1; j < kAvx2Chains; ++j) s = _mm256_add_epi32(s, c[j]);
  alignas(32) std::int32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), s);
  std::int64_t t = 0;
  for (std::int32_t l : lanes) t += l;
  return t;
}

// Multiply-adds per loop iteration of each dot path.
double macs_per_iter(Isa isa) {
  switch (isa) {
    case Isa::Avx512Vnni:
    case Isa::Amx: return kChains * 64.0;
    case Isa::AvxVnni: return kChains * 32.0;
    case Isa::Avx2:
    case Isa::Avx512: return kAvx2Chains * 32.0;
  }
  return 0;
}

// Times `call` with the options: warm-up, then calls until min_reps and either max_reps
// or max_seconds; median and minimum.
template <class Call>
CeilingResult time_calls(double work, const CeilingOptions& o, Call&& call) {
  for (int i = 0; i < o.warmup; ++i) call();
  std::vector<double> ns;
  const auto start = Clock::now();
  const int min_reps = std::max(1, o.min_reps), max_reps = std::max(min_reps, o.max_reps);
  while (static_cast<int>(ns.size()) < max_reps) {
    const auto t0 = Clock::now();
    call();
    const auto t1 = Clock::now();
    ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count());
    if (static_cast<int>(ns.size()) >= min_reps && std::chrono::duration<double>(t1 - start).count() > o.max_seconds)
      break;
  }
  std::sort(ns.begin(), ns.end());
  CeilingResult r;
  r.work = work;
  r.reps = static_cast<int>(ns.size());
  r.min_ns = ns.front();
  r.median_ns = ns.size() % 2 ? ns[ns.size() / 2] : (ns[ns.size() / 2 - 1] + ns[ns.size() / 2]) / 2;
  return r;
}

}  // namespace

std::uint64_t stream_sum(const std::uint8_t* p, std::size_t n) {
  return host_isas().avx512 ? sum_bytes_avx512(p, n) : sum_bytes_avx2(p, n);
}

Result<CeilingResult> measure_read_bandwidth(const Parallel& parallel, std::size_t bytes, const CeilingOptions& o) {
  if (!host_isas().avx2) return make_error(ErrorCode::Unavailable, "the read-bandwidth probe needs AVX2");
  if (bytes == 0) return make_error(ErrorCode::InvalidArgument, "the read-bandwidth probe needs a non-empty buffer");
  const std::int64_t chunks = std::max(1, parallel.threads);
  constexpr std::size_t kPage = 4096;
  const std::size_t chunk = (bytes / static_cast<std::size_t>(chunks) + kPage - 1) / kPage * kPage;
  const std::size_t total = chunk * static_cast<std::size_t>(chunks);
  struct Free {
    void operator()(std::uint8_t* p) const { std::free(p); }
  };
  // 2 MiB aligned and asked for transparent huge pages (where THP is "madvise"): with 4 KiB
  // pages the znver4 VM read 16 GB/s from one core, with huge pages 31 GB/s: the ceiling
  // is the better of the two. A refusal (THP off) only leaves 4 KiB pages.
  constexpr std::size_t kHuge = std::size_t{2} << 20;
  const std::size_t alloc = (total + kHuge - 1) / kHuge * kHuge;
  std::unique_ptr<std::uint8_t, Free> buf(static_cast<std::uint8_t*>(std::aligned_alloc(kHuge, alloc)));
  if (!buf)
    return make_error(ErrorCode::Unavailable, "cannot allocate the probe's " + std::to_string(total) + " bytes");
  (void)madvise(buf.get(), alloc, MADV_HUGEPAGE);
  // Non-zero pages, written by the threads that read them (first touch places them there).
  parallel.for_each(chunks, [&](std::int64_t t) {
    std::memset(buf.get() + static_cast<std::size_t>(t) * chunk, static_cast<int>(t + 1), chunk);
  });
  std::vector<std::uint64_t> sums(static_cast<std::size_t>(chunks));
  CeilingResult r = time_calls(static_cast<double>(total), o, [&] {
    parallel.for_each(chunks, [&](std::int64_t t) {
      sums[static_cast<std::size_t>(t)] += stream_sum(buf.get() + static_cast<std::size_t>(t) * chunk, chunk);
    });
  });
  // The sums are used, so no load is dead.
  volatile std::uint64_t sink = 0;
  for (std::uint64_t s : sums) sink = sink + s;
  return r;
}

std::optional<Isa> dot_ceiling_isa(Isa cap) {
  const IsaSupport& host = host_isas();
  if ((cap == Isa::Avx512Vnni || cap == Isa::Amx) && host.avx512_vnni) return Isa::Avx512Vnni;
  if (cap != Isa::Avx2 && host.avx_vnni) return Isa::AvxVnni;
  if (host.avx2) return Isa::Avx2;
  return std::nullopt;
}

Result<CeilingResult> measure_int8_dot(const Parallel& parallel, Isa isa, const CeilingOptions& o) {
  const IsaSupport& host = host_isas();
  const bool runs = isa == Isa::Avx512Vnni || isa == Isa::Amx ? host.avx512_vnni
                    : isa == Isa::AvxVnni                     ? host.avx_vnni
                                                              : host.avx2;
  if (!runs)
    return make_error(ErrorCode::Unavailable,
                      "the int8-dot probe for " + std::string(isa_name(isa)) + " does not run on this host");
  // About 0.2-1 ms per call per thread: long enough to dwarf the fork/join.
  constexpr std::int64_t kIters = std::int64_t{1} << 16;
  const std::int64_t chunks = std::max(1, parallel.threads);
  std::vector<std::int64_t> sums(static_cast<std::size_t>(chunks));
  const double work = 2.0 * macs_per_iter(isa) * static_cast<double>(kIters) * static_cast<double>(chunks);
  CeilingResult r = time_calls(work, o, [&] {
    parallel.for_each(chunks, [&](std::int64_t t) {
      const int seed = static_cast<int>(t) + 3;
      std::int64_t s = 0;
      switch (isa) {
        case Isa::Avx512Vnni:
        case Isa::Amx: s = dot_avx512_vnni(kIters, seed); break;
        case Isa::AvxVnni: s = dot_avx_vnni(kIters, seed); break;
        case Isa::Avx2:
        case Isa::Avx512: s = dot_avx2(kIters, seed); break;
      }
      sums[static_cast<std::size_t>(t)] += s;
    });
  });
  volatile std::int64_t sink = 0;
  for (std::int64_t s : sums) sink = sink + s;
  return r;
}

}  // namespace ternjit::targets::x86
