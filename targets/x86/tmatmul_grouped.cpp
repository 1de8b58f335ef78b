// SPDX-License-Identifier: Apache-2.0
// tmatmul_grouped.cpp - the ternary matmul with a per-group weight scale (f32[G, N]) on x86.
//
// y[m, n] = epilogue( sum_g s[g, n] * p_g[m, n] ),  p_g[m, n] = sum_{k in group g} x[m, k] w[k, n],
// group g = k in [g * group, min(K, (g + 1) * group)), G = ceil(K / group) (GGUF TQ1_0/TQ2_0
// blocks: group = 256).
//
// Code. Every group is one run of an ordinary generated kernel (tmatmul_int8.cpp,
// tmatmul_amx.cpp or tmatmul_float.cpp: the configuration's variant on its ISA) over the
// group's K slice, with the per-channel scale s[g, :] and a residual as its epilogue:
// y = p_g * s[g, :] + y, in place (y starts at 0). Every variant's epilogue reads the
// residual element before it stores the same element, so the in-place residual is the
// group accumulation, in the generated code, without another pass over y. At most two
// kernels exist: one for full groups and one for a shorter last group. Then the
// problem's own epilogue (x_scale, bias, residual, relu), when it has one, is applied in
// f32 in the reference's order (ir/interpret.cpp tmatmul) on the Parallel over rows.
// A row of x is gathered into a contiguous [M, group] slice when M > 1 (M = 1: the
// slice is already contiguous).
//
// Numerics (what the tests' tolerance is derived from). i8 x: p_g is the exact int32
// sum (|p_g| <= 127 * group < 2^24 for group <= 132104, so float(p_g) is exact), times
// s[g, n] rounded once, then G - 1 f32 additions: |y - y_ref| <= (G + 1) * 2^-24 *
// sum_g |s[g, n] p_g| before the epilogue (the reference sums in double and rounds
// once). f32 x: each p_g is itself an f32 sum over the group (see tmatmul_float.cpp),
// adding group * 2^-24 * sum_g |s[g, n]| sum_k |x w|. The epilogue ops are the
// reference's own f32 ops on a value that differs by that much.
#include "targets/x86/tmatmul_internal.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

namespace ternjit::targets::x86::detail {

namespace {

Error bad(std::string msg) { return make_error(ErrorCode::InvalidArgument, std::move(msg)); }

// The problem one group's kernel solves: `k` columns of x, scaled per channel, plus the
// running sum as the residual.
TMatMulProblem group_problem(const TMatMulProblem& p, std::int64_t k) {
  TMatMulProblem q;
  q.M = p.M;
  q.runtime_rows = p.runtime_rows;
  q.K = k;
  q.N = p.N;
  q.x_kind = p.x_kind;
  q.out_kind = p.out_kind;
  q.w_scale = true;
  q.w_scale_per_channel = true;
  q.residual = true;
  return q;
}

std::int64_t groups_of(const TMatMulProblem& p) { return (p.K - 1) / p.w_scale_group + 1; }
std::int64_t last_group_k(const TMatMulProblem& p) { return p.K - (groups_of(p) - 1) * p.w_scale_group; }

class GroupedKernel final : public TMatMulKernel {
 public:
  GroupedKernel(const TMatMulProblem& p, const TMatMulConfig& c) : p_(p), c_(c) {}

  Result<void> generate(bool allow_foreign_isa) {
    const std::int64_t G = groups_of(p_), last = last_group_k(p_);
    if (G > 1) {
      TERNJIT_TRY(full_, TMatMulKernel::create(group_problem(p_, p_.w_scale_group), c_, allow_foreign_isa));
    }
    if (G == 1 || last != p_.w_scale_group) {
      TERNJIT_TRY(last_, TMatMulKernel::create(group_problem(p_, last), c_, allow_foreign_isa));
    }
    return success();
  }

  const TMatMulProblem& problem() const override { return p_; }
  const TMatMulConfig& config() const override { return c_; }

  std::string pack_signature() const override {
    return "grouped.v1:group=" + std::to_string(p_.w_scale_group) + ",K=" + std::to_string(p_.K) + "|" +
           (full_ ? full_->pack_signature() : std::string()) + "|" + (last_ ? last_->pack_signature() : std::string());
  }

  Result<PackedWeights> pack(const TernaryWeights& w) const override {
    TERNJIT_TRY(PackedWeights all, start_pack(w, p_, pack_signature(), 0));
    const std::int64_t G = groups_of(p_), N = p_.N;
    std::vector<std::int8_t> slice;
    for (std::int64_t g = 0; g < G; ++g) {
      const TMatMulKernel& k = kernel_of(g);
      const std::int64_t k0 = g * p_.w_scale_group, kg = k.problem().K;
      // Rows k0 .. k0 + kg of the row-major [K, N] weights: one contiguous run.
      slice.resize(static_cast<std::size_t>(kg * N));
      for (std::size_t i = 0; i < slice.size(); ++i)
        slice[i] = static_cast<std::int8_t>(w[static_cast<std::size_t>(k0 * N) + i]);
      TERNJIT_TRY(PackedWeights part, k.pack(slice));
      all.size += part.size;
      all.parts.push_back(std::move(part));
    }
    return all;
  }

  void run(const TMatMulArgs& args, const Parallel& parallel) const override {
    const std::int64_t M = args.rows > 0 ? args.rows : p_.M, K = p_.K, N = p_.N, G = groups_of(p_),
                       group = p_.w_scale_group;
    const std::size_t xsize = p_.x_kind == ElemKind::I8 ? 1 : 4;
    const auto* x = static_cast<const std::uint8_t*>(args.x);
    auto* y = static_cast<float*>(args.y);
    std::vector<std::uint8_t> xslice(M > 1 ? static_cast<std::size_t>(M * std::min(group, K)) * xsize : 0);
    std::fill(y, y + M * N, 0.0f);
    for (std::int64_t g = 0; g < G; ++g) {
      const TMatMulKernel& k = kernel_of(g);
      const std::int64_t k0 = g * group, kg = k.problem().K;
      TMatMulArgs a;
      a.x = x + static_cast<std::size_t>(k0) * xsize;
      if (M > 1) {
        for (std::int64_t m = 0; m < M; ++m)
          std::memcpy(xslice.data() + static_cast<std::size_t>(m * kg) * xsize,
                      x + static_cast<std::size_t>(m * K + k0) * xsize, static_cast<std::size_t>(kg) * xsize);
        a.x = xslice.data();
      }
      a.w = &args.w->parts[static_cast<std::size_t>(g)];
      a.w_scale = args.w_scale + g * N;
      a.residual = y;
      a.y = y;
      a.rows = args.rows;
      k.run(a, parallel);
    }
    if (!(p_.x_scale || p_.bias || p_.residual || p_.relu)) return;
    const std::int64_t chunks = std::min<std::int64_t>(std::max(1, parallel.threads), M);
    parallel.for_each(chunks, [&](std::int64_t ci) {
      for (std::int64_t m = M * ci / chunks; m < M * (ci + 1) / chunks; ++m) finish_row(args, m, y + m * N);
    });
  }

  std::vector<CodeBlob> code() const override {
    std::vector<CodeBlob> r;
    for (const auto* k : {full_.get(), last_.get()})
      if (k)
        for (CodeBlob b : k->code()) {
          b.label = "grouped " + std::to_string(k->problem().K) + " of " + std::to_string(p_.K) + ": " + b.label;
          r.push_back(std::move(b));
        }
    return r;
  }

 private:
  const TMatMulKernel& kernel_of(std::int64_t g) const {
    return g + 1 == groups_of(p_) && last_ ? *last_ : *full_;
  }

  // The epilogue after the scaled accumulation, in the reference's order. This file is
  // compiled in ISO C++ mode, so nothing is contracted into an FMA.
  void finish_row(const TMatMulArgs& a, std::int64_t m, float* yr) const {
    const float xs = p_.x_scale ? a.x_scale[m] : 1.0f;
    const auto* bias = static_cast<const float*>(a.bias);
    const float* res = p_.residual ? static_cast<const float*>(a.residual) + m * p_.N : nullptr;
    for (std::int64_t n = 0; n < p_.N; ++n) {
      float v = yr[n];
      if (p_.x_scale) v = v * xs;
      if (p_.bias) v = v + bias[n];
      if (p_.residual) v = v + res[n];
      if (p_.relu && v <= 0.0f) v = 0.0f;  // NaN stays NaN, -0 becomes +0
      yr[n] = v;
    }
  }

  TMatMulProblem p_;
  TMatMulConfig c_;
  std::unique_ptr<TMatMulKernel> full_, last_;
};

}  // namespace

TMatMulProblem grouped_part_problem(const TMatMulProblem& problem) {
  return group_problem(problem, std::min(problem.K, problem.w_scale_group));
}

Result<void> validate_grouped(const TMatMulProblem& p, const TMatMulConfig& c) {
  if (!p.w_scale || p.w_scale_per_channel)
    return bad("tmatmul: w_scale_group needs w_scale without w_scale_per_channel");
  if (p.x_kind != ElemKind::I8 && p.x_kind != ElemKind::F32)
    return bad("tmatmul: a grouped w_scale needs i8 or f32 x, not " + std::string(elem_name(p.x_kind)));
  TERNJIT_TRY_VOID(validate(group_problem(p, std::min(p.K, p.w_scale_group)), c));
  return validate(group_problem(p, last_group_k(p)), c);
}

Result<std::unique_ptr<TMatMulKernel>> create_grouped(const TMatMulProblem& p, const TMatMulConfig& c,
                                                      bool allow_foreign_isa) {
  auto k = std::make_unique<GroupedKernel>(p, c);
  TERNJIT_TRY_VOID(k->generate(allow_foreign_isa));
  return std::unique_ptr<TMatMulKernel>(std::move(k));
}

}  // namespace ternjit::targets::x86::detail
