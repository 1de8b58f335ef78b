// SPDX-License-Identifier: Apache-2.0
// tuning_space.cpp - the SIMT tmatmul tuning space: candidates, a roofline estimate, the runtime's bench.
#include "targets/simt/tuning_space.h"

#include <algorithm>
#include <cmath>

namespace ternjit::targets::simt {

namespace {

std::string kind_name(ElemKind k) { return k == ElemKind::I8 ? "i8" : "f32"; }

class Space final : public TuningSpace {
 public:
  Space(const TMatMulShape& s, SpaceOptions o, BenchFactory bench) : s_(s), o_(std::move(o)), bench_(std::move(bench)) {
    problem_.op = o_.op;
    problem_.family = "K=" + std::to_string(s.k) + ";N=" + std::to_string(s.n) + ";x=" + kind_name(s.x) +
                      (s.group > 0 ? ";group=" + std::to_string(s.group) : "") + ";warp=" + std::to_string(o_.warp_size) +
                      ";dot=" + (o_.int_dot ? "int" : "scalar") + (o_.tensor_cores ? ";mma" : "") +
                      ";device=" + o_.device_key;
    problem_.m = s.m;
    problem_.label = "M=" + std::to_string(s.m) + " K=" + std::to_string(s.k) + " N=" + std::to_string(s.n) + " " +
                     kind_name(s.x) + "->f32" + (s.group > 0 ? " group=" + std::to_string(s.group) : "");
  }
  [[nodiscard]] const TuningProblem& problem() const override { return problem_; }
  [[nodiscard]] std::string default_config() const override {
    return config_text(simt::default_config(s_, o_.warp_size, o_.tensor_cores));
  }
  [[nodiscard]] std::vector<TuningCandidate> candidates() const override {
    std::vector<TuningCandidate> out;
    for (const TMatMulConfig& c : candidate_configs(s_, o_.warp_size, o_.tensor_cores))
      out.push_back({config_text(c), estimate_ns(s_, c, o_), (c.mma ? "mma/rows/" : "rows/") + std::to_string(c.rows)});
    return out;
  }
  [[nodiscard]] bool valid(std::string_view config) const override {
    auto c = parse_config(config);
    return c && config_valid(*c, s_, o_.warp_size, o_.tensor_cores);
  }
  [[nodiscard]] Result<std::unique_ptr<TuningBench>> bench(const TuningBenchOptions& options) const override {
    if (!bench_) return make_error(ErrorCode::Unavailable, problem_.op + ": no device to time candidates on");
    return bench_(s_, options);
  }

 private:
  TMatMulShape s_;
  SpaceOptions o_;
  BenchFactory bench_;
  TuningProblem problem_;
};

}  // namespace

std::vector<TMatMulConfig> candidate_configs(const TMatMulShape& s, std::uint32_t warp_size, bool tensor_cores) {
  std::vector<TMatMulConfig> out;
  if (tensor_cores && s.m >= 16)
    for (std::uint32_t warps : {2u, 4u, 8u})
      for (std::uint32_t r : {1u, 2u})
        for (std::uint32_t cpt : {1u, 2u, 4u}) {
          const TMatMulConfig c{32, warps, 1, r, cpt, 1};
          if (config_valid(c, s, warp_size, tensor_cores)) out.push_back(c);
        }
  std::vector<std::uint32_t> rows = {1};
  for (std::uint32_t r : {2u, 4u, 8u})
    if (static_cast<std::int64_t>(r) <= s.m) rows.push_back(r);
  const auto m8 = static_cast<std::uint32_t>(std::clamp<std::int64_t>(s.m, 1, 8));
  if (std::find(rows.begin(), rows.end(), m8) == rows.end()) rows.push_back(m8);
  for (std::uint32_t tpc : {4u, 8u, 16u, 32u, 64u, 128u, 256u})
    for (std::uint32_t block : {64u, 128u, 256u}) {
      if (block < tpc) continue;
      for (std::uint32_t unroll : {1u, 2u, 4u})
        for (std::uint32_t r : rows)
          for (std::uint32_t cpt : {1u, 2u, 4u}) {
            if (cpt > 1 && static_cast<std::int64_t>(cpt) > s.n) continue;
            const TMatMulConfig c{tpc, block / tpc, unroll, r, cpt};
            if (config_valid(c, s, warp_size)) out.push_back(c);
          }
    }
  const TMatMulConfig d = default_config(s, warp_size, tensor_cores);
  if (std::find(out.begin(), out.end(), d) == out.end()) out.insert(out.begin(), d);
  return out;
}

double estimate_ns(const TMatMulShape& s, const TMatMulConfig& c, const SpaceOptions& o) {
  if (c.mma != 0) {
    // Weights re-read per pass of rows * 16 rows, activations per block of
    // cols * cpt * 8 columns; the tensor cores are far from the bound at these sizes.
    const double wb = static_cast<double>(packed_weight_bytes(s.k, s.n, WeightLayout::Mma2));
    const double passes = std::ceil(static_cast<double>(s.m) / (16.0 * c.rows));
    const double col_blocks = std::ceil(static_cast<double>(s.n) / (8.0 * c.cols * c.cpt));
    const double bytes = wb * passes + static_cast<double>(s.m * s.k) * col_blocks;
    const double fill = std::min(1.0, col_blocks * std::min(passes, 65535.0) / (8.0 * std::max(1u, o.multiprocessors)));
    return bytes / std::max(1.0, o.bandwidth_gbs) / fill * (1.0 + 0.25 / c.cpt) + 2000.0;
  }
  const double weight_bytes = static_cast<double>(packed_weight_bytes(s.k, s.n));
  const double passes = std::ceil(static_cast<double>(s.m) / c.rows);  // weight re-reads
  const double x_bytes = static_cast<double>(s.m * s.k) * (s.x == ElemKind::I8 ? 1 : 4);
  const double col_groups = std::ceil(static_cast<double>(s.n) / (static_cast<double>(c.cols) * c.cpt));
  const double bytes = weight_bytes * passes + x_bytes * col_groups;
  // Activations come from L1 (about 10x the memory bandwidth): rows x 64 bytes (f32 x:
  // 256) per 16-byte weight chunk, shared by the cpt columns of a thread.
  const double x_per_chunk = static_cast<double>(std::min<std::int64_t>(c.rows, s.m)) * (s.x == ElemKind::I8 ? 64 : 256);
  const double l1 = weight_bytes * passes / 16 * x_per_chunk / c.cpt / (10 * std::max(1.0, o.bandwidth_gbs));
  const double roofline = std::max(bytes / std::max(1.0, o.bandwidth_gbs), l1);  // GB/s = bytes/ns
  // Fill: blocks in flight against 8 blocks per multiprocessor.
  const double blocks = col_groups * std::min(passes, 65535.0);
  const double fill = std::min(1.0, blocks / (8.0 * std::max(1u, o.multiprocessors)));
  // Bytes in flight per thread: unroll 16-byte loads; fewer than 2 chunks per thread idle lanes.
  const double chunks_per_thread = std::ceil(static_cast<double>(s.k) / 64) / c.tpc;
  const double idle = chunks_per_thread < 1 ? 1 / std::max(chunks_per_thread, 1e-3) : 1.0;
  const double latency = 1.0 + 0.5 / c.unroll + 0.02 * std::log2(static_cast<double>(c.tpc));
  return roofline / fill * std::min(idle, 8.0) * latency + 2000.0;  // + a launch
}

std::unique_ptr<TuningSpace> make_tmatmul_space(const TMatMulShape& s, const SpaceOptions& o, BenchFactory bench) {
  return std::make_unique<Space>(s, o, std::move(bench));
}

}  // namespace ternjit::targets::simt
