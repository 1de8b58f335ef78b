// SPDX-License-Identifier: Apache-2.0
// tmatmul_space.cpp - the declared knob ranges of the x86 ternary matmul and its cost model.
#include "targets/x86/tmatmul_space.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "targets/x86/tmatmul_bench.h"

namespace ternjit::targets::x86 {

namespace {

constexpr int kMBlocks[] = {1, 2, 3, 4, 6, 8, 12, 16};
constexpr int kKUnrolls[] = {1, 2, 4};
constexpr int kPrefetches[] = {0, 1024, 4096};
constexpr std::int64_t kMaxMaskDotK = 131071;  // tmatmul_int8.cpp: the 64x-scaled accumulator

std::vector<int> thread_counts(int max_threads) {
  std::vector<int> t;
  for (int v = 1; v < max_threads; v *= 2) t.push_back(v);
  t.push_back(std::max(1, max_threads));
  return t;
}

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

bool wide_isa(Isa isa) { return isa == Isa::Avx512 || isa == Isa::Avx512Vnni || isa == Isa::Amx; }

}  // namespace

std::vector<TMatMulConfig> search_space(const TMatMulProblem& p, Isa isa, int max_threads) {
  max_threads = std::max(1, max_threads);
  std::vector<TMatMulVariant> variants;
  if (p.x_kind == ElemKind::I8) {
    variants.push_back(TMatMulVariant::Dot);
    if (p.K <= kMaxMaskDotK) variants.push_back(TMatMulVariant::MaskDot);
    // Amx at every M: rows below a tile's 16 are zero padding, so at M < 16 the tile unit
    // runs mostly on padding, yet its int8 rate is ~10x vpdpbusd's: whether that wins at
    // M = 1-15 is the tuner's measurement to make (default_config keeps amx for M >= 64).
    if (isa == Isa::Amx) variants.push_back(TMatMulVariant::Amx);
    // Base3 (1.6-bit): zmm on avx512_vnni/amx hosts with VBMI; not per K group (a group's
    // K is too short for the smaller stream to pay off; the grouped kernel is untested on it).
    if ((isa == Isa::Avx512Vnni || isa == Isa::Amx) && host_isas().avx512_vbmi && p.K <= kMaxMaskDotK &&
        p.w_scale_group == 0)
      variants.push_back(TMatMulVariant::Base3);
  } else {
    variants.push_back(TMatMulVariant::Float);
  }
  std::vector<int> vecs = {256};
  if (wide_isa(isa)) vecs.push_back(512);

  std::vector<TMatMulConfig> out;
  auto add = [&](const TMatMulConfig& c) {
    if (!validate(p, c).ok()) return;
    if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
  };
  for (TMatMulVariant v : variants)
    for (int vec : vecs) {
      const int lanes = vec / 32;
      const int unit = v == TMatMulVariant::Float   ? std::max(16, lanes)
                       : v == TMatMulVariant::Amx   ? 16
                       : v == TMatMulVariant::Base3 ? 5 * lanes
                                                    : 4 * lanes;
      for (int nmul = 1; nmul <= 4; ++nmul)
        for (int mb : kMBlocks) {
          // One 16-row tile is the smallest amx block, whatever M (padding, see above).
          if (mb > p.M && !(v == TMatMulVariant::Amx && mb == 16)) continue;
          for (int ku : kKUnrolls)
            for (int pf : kPrefetches)
              for (int t : thread_counts(max_threads)) {
                std::vector<int> splits = {1};
                if (t > 1 && p.M <= 4 && p.K >= 1024 && v != TMatMulVariant::Float)
                  for (int s = 2; s <= t; s *= 2) splits.push_back(s);
                for (int sk : splits) {
                  TMatMulConfig c;
                  c.isa = isa;
                  c.variant = v;
                  c.vector_bits = vec;
                  c.n_block = unit * nmul;
                  c.m_block = mb;
                  c.k_unroll = ku;
                  c.prefetch_bytes = pf;
                  c.threads = t;
                  c.split_k = sk;
                  add(c);
                }
              }
        }
    }
  const TMatMulConfig d = default_config(p, isa, max_threads);
  if (validate(p, d).ok() && std::find(out.begin(), out.end(), d) == out.end()) out.push_back(d);
  return out;
}

std::string describe_space() {
  return "variant: dot, mask_dot (K <= 131071), amx (isa amx; mb 16 also when M < 16), base3 (K <= 131071, avx512_vnni + VBMI,\n"
         "         vec=512, no K groups) for i8 x; float for float x\n"
         "vec: 256, and 512 on avx512 ISAs\n"
         "nb: 1..4 x (4 x int32 lanes) for i8 (base3: 5 x lanes); 1..4 x 16 for float\n"
         "mb: 1,2,3,4,6,8,12,16 (<= M)\n"
         "ku: 1,2,4    pf: 0,1024,4096\n"
         "t: powers of 2 below --threads, and --threads\n"
         "sk: 1; with t > 1, M <= 4, K >= 1024: powers of 2 up to t\n"
         "(each combination is kept only when validate() accepts it: register pressure, multiples)";
}

double estimated_cost(const TMatMulProblem& p, const TMatMulConfig& c) {
  // Nominal machine: 20 GB/s per thread from memory (40 in total), 2 vector
  // instructions per cycle at 3 GHz per thread. Only ratios between configs matter.
  const double kBytesPerNs = 20.0;
  const double kInstrPerNs = 6.0;
  const std::int64_t mb = std::min<std::int64_t>(c.m_block, p.M);
  const std::int64_t n_pad = ceil_div(p.N, c.n_block) * c.n_block;
  const std::int64_t m_blocks = ceil_div(p.M, mb);
  const std::int64_t m_pad = m_blocks * mb;
  const bool base3 = c.variant == TMatMulVariant::Base3;
  const double weight_bytes = static_cast<double>(p.K) * static_cast<double>(n_pad) / (base3 ? 5.0 : 4.0);
  const double x_bytes = static_cast<double>(p.M * p.K) * (p.x_kind == ElemKind::I8 ? 1.0 : 4.0);
  const double y_bytes = static_cast<double>(p.M * p.N) * 4.0;
  // The weights stream from memory once; every further row block re-reads them from cache
  // (cheaper, counted at a quarter).
  double bytes = weight_bytes * (1.0 + 0.25 * static_cast<double>(m_blocks - 1)) + x_bytes + y_bytes;
  if (c.split_k > 1) bytes += 2.0 * static_cast<double>(c.split_k) * static_cast<double>(p.M * n_pad) * 4.0;

  const double lanes_bytes = c.vector_bits / 8.0;  // k*n products one dot instruction does per 4 k
  const double macs = static_cast<double>(m_pad) * static_cast<double>(p.K) * static_cast<double>(n_pad);
  double instr = macs / (lanes_bytes * (c.variant == TMatMulVariant::Float ? 0.25 : 1.0));
  // Decoding the packed weights: once per row block (dot: shifts and masks per vector;
  // mask_dot: one AND per 2-bit field, dots run on the packed bytes).
  // base3: 2 permutes, 2 mask ops and 3 ANDs per 320 weights, ~1.8 per 64.
  const double decode_per_vec = c.variant == TMatMulVariant::MaskDot ? 1.0 : base3 ? 1.8 : 3.0;
  instr += static_cast<double>(m_blocks) * (static_cast<double>(p.K) * n_pad / lanes_bytes) * decode_per_vec /
           static_cast<double>(std::max<std::int64_t>(1, mb));
  if (c.variant == TMatMulVariant::MaskDot || base3) instr *= 1.3;  // the scaled fields per byte
  // Loop overhead shrinks with unrolling; a narrow panel reloads x broadcasts more often.
  instr *= 1.0 + 0.15 / c.k_unroll + 0.2 / (c.n_block / (c.vector_bits / 8.0));
  if (c.prefetch_bytes > 0) instr *= 1.01;  // hardware prefetch already follows the stream

  // Parallelism: the work splits into column panels x row blocks x K splits.
  const double units = static_cast<double>(ceil_div(p.N, c.n_block) * m_blocks * c.split_k);
  const double t = std::min<double>(c.threads, units);
  const double per_thread_units = std::ceil(units / t);
  const double imbalance = per_thread_units * t / units;  // >= 1
  const double bw = kBytesPerNs * std::min(t, 2.0);
  const double mem_ns = bytes / bw;
  const double cpu_ns = instr / kInstrPerNs / t * imbalance;
  const double overhead_ns = c.threads > 1 ? 1500.0 + 300.0 * c.threads : 0.0;
  return std::max(mem_ns, cpu_ns) + 0.2 * std::min(mem_ns, cpu_ns) + overhead_ns;
}

namespace {

class TMatMulSpace final : public TuningSpace {
 public:
  TMatMulSpace(const TMatMulProblem& p, Isa isa, int max_threads)
      : p_(p), isa_(isa), threads_(std::max(1, max_threads)) {
    auto flag = [](bool b) { return b ? '1' : '0'; };
    problem_.op = "x86.tmatmul";
    problem_.family = "K=" + std::to_string(p.K) + ";N=" + std::to_string(p.N) +
                      ";x=" + std::string(elem_name(p.x_kind)) + ";out=" + std::string(elem_name(p.out_kind)) +
                      ";epilogue=" + flag(p.x_scale) + flag(p.w_scale) + flag(p.w_scale_per_channel) + flag(p.bias) +
                      flag(p.residual) + flag(p.relu) +
                      (p.w_scale_group > 0 ? ";group=" + std::to_string(p.w_scale_group) : std::string());
    // The code path and the thread count the kernel runs with: the search space itself
    // depends on them (vector widths, t <= threads), and so does each candidate's speed.
    problem_.conditions = {{"isa", std::string(isa_name(isa))}, {"threads", std::to_string(threads_)}};
    problem_.m = p.M;
    problem_.label = "M=" + std::to_string(p.M) + " K=" + std::to_string(p.K) + " N=" + std::to_string(p.N) + " " +
                     std::string(elem_name(p.x_kind)) + "->" + std::string(elem_name(p.out_kind));
  }

  [[nodiscard]] const TuningProblem& problem() const override { return problem_; }
  [[nodiscard]] std::string default_config() const override { return x86::default_config(p_, isa_, threads_).str(); }

  [[nodiscard]] std::vector<TuningCandidate> candidates() const override {
    std::vector<TuningCandidate> out;
    for (const TMatMulConfig& c : search_space(p_, isa_, threads_))
      out.push_back({c.str(), estimated_cost(p_, c),
                     std::to_string(static_cast<int>(c.variant)) + "/" + std::to_string(c.vector_bits)});
    return out;
  }

  [[nodiscard]] bool valid(std::string_view config) const override {
    auto c = TMatMulConfig::parse(config);
    return c.ok() && c->isa == isa_ && c->threads <= threads_ && validate(p_, *c).ok();
  }

  [[nodiscard]] Result<std::unique_ptr<TuningBench>> bench(const TuningBenchOptions& options) const override {
    if (!host_isas().supports(isa_))
      return make_error(ErrorCode::Unavailable, "this CPU cannot run x86 code path '" + std::string(isa_name(isa_)) + "'");
    return std::unique_ptr<TuningBench>(std::make_unique<TMatMulBench>(p_, threads_, options));
  }

 private:
  TMatMulProblem p_;
  Isa isa_;
  int threads_;
  TuningProblem problem_;
};

}  // namespace

std::unique_ptr<TuningSpace> tmatmul_tuning_space(const TMatMulProblem& problem, Isa isa, int max_threads) {
  return std::make_unique<TMatMulSpace>(problem, isa, max_threads);
}

}  // namespace ternjit::targets::x86
