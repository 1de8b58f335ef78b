// SPDX-License-Identifier: Apache-2.0
// tmatmul.cpp - the ternary matmul's config text form, common validation, heuristic and factory.
#include "targets/x86/tmatmul.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "targets/common/tern2_pack.h"
#include "targets/x86/tmatmul_internal.h"

namespace ternjit::targets::x86 {

namespace {

constexpr std::string_view kVariantNames[] = {"dot", "mask_dot", "amx", "float", "base3"};

std::string_view variant_name(TMatMulVariant v) { return kVariantNames[static_cast<int>(v)]; }

std::optional<TMatMulVariant> parse_variant(std::string_view s) {
  for (int i = 0; i < 5; ++i)
    if (s == kVariantNames[i]) return static_cast<TMatMulVariant>(i);
  if (s == "maskdot") return TMatMulVariant::MaskDot;
  return std::nullopt;
}

bool is_avx512_family(Isa isa) { return isa == Isa::Avx512 || isa == Isa::Avx512Vnni || isa == Isa::Amx; }

bool is_float_kind(ElemKind k) { return k == ElemKind::F32 || k == ElemKind::BF16 || k == ElemKind::F16; }

Error bad(std::string msg) { return make_error(ErrorCode::InvalidArgument, std::move(msg)); }

}  // namespace

std::string TMatMulConfig::str() const {
  std::string s;
  s += "isa=" + std::string(isa_name(isa));
  s += ",variant=" + std::string(variant_name(variant));
  s += ",vec=" + std::to_string(vector_bits);
  s += ",nb=" + std::to_string(n_block);
  s += ",mb=" + std::to_string(m_block);
  s += ",ku=" + std::to_string(k_unroll);
  s += ",pf=" + std::to_string(prefetch_bytes);
  s += ",t=" + std::to_string(threads);
  s += ",sk=" + std::to_string(split_k);
  return s;
}

Result<TMatMulConfig> TMatMulConfig::parse(std::string_view text) {
  // Keys may come in any order and may be left out (they keep their defaults); each
  // may appear once. Values of integer knobs are decimal ints (range-checked by validate()).
  TMatMulConfig c;
  std::vector<std::string_view> seen;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t end = std::min(text.find(',', pos), text.size());
    const std::string_view item = text.substr(pos, end - pos);
    pos = end + 1;
    if (item.empty()) {
      if (end == text.size() && text.empty()) break;
      return bad("tmatmul config '" + std::string(text) + "': empty item");
    }
    const std::size_t eq = item.find('=');
    if (eq == std::string_view::npos)
      return bad("tmatmul config item '" + std::string(item) + "' is not key=value");
    const std::string_view key = item.substr(0, eq), value = item.substr(eq + 1);
    if (std::find(seen.begin(), seen.end(), key) != seen.end())
      return bad("tmatmul config key '" + std::string(key) + "' given twice");
    seen.push_back(key);
    auto bad_value = [&] {
      return bad("tmatmul config key '" + std::string(key) + "' has a bad value '" + std::string(value) + "'");
    };
    if (key == "isa") {
      auto isa = parse_isa(value);
      if (!isa) return bad_value();
      c.isa = *isa;
      continue;
    }
    if (key == "variant") {
      auto v = parse_variant(value);
      if (!v) return bad_value();
      c.variant = *v;
      continue;
    }
    int* field = key == "vec"  ? &c.vector_bits
                 : key == "nb" ? &c.n_block
                 : key == "mb" ? &c.m_block
                 : key == "ku" ? &c.k_unroll
                 : key == "pf" ? &c.prefetch_bytes
                 : key == "t"  ? &c.threads
                 : key == "sk" ? &c.split_k
                               : nullptr;
    if (field == nullptr) return bad("tmatmul config has an unknown key '" + std::string(key) + "'");
    int v = 0;
    const auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
    if (ec != std::errc() || p != value.data() + value.size() || value.empty()) return bad_value();
    *field = v;
  }
  return c;
}

Result<void> validate(const TMatMulProblem& p, const TMatMulConfig& c) {
  if (p.M < 1 || p.K < 1 || p.N < 1)
    return bad("tmatmul sizes must be positive: M=" + std::to_string(p.M) + " K=" + std::to_string(p.K) +
               " N=" + std::to_string(p.N));
  // Sizes far beyond any layer keep every offset computation inside int64 and the
  // generated displacements inside int32.
  constexpr std::int64_t kMaxDim = std::int64_t{1} << 26;
  if (p.M > kMaxDim || p.K > kMaxDim || p.N > kMaxDim)
    return bad("tmatmul sizes must be at most " + std::to_string(kMaxDim));
  if (p.w_scale_per_channel && !p.w_scale) return bad("tmatmul: w_scale_per_channel set without w_scale");
  if (p.w_scale_group < 0) return bad("tmatmul: w_scale_group must be >= 0");
  if (p.w_scale_group > 0 && c.variant == TMatMulVariant::Base3)
    return bad("variant=base3 does not take a grouped w_scale (w_scale_group > 0): use dot or mask_dot");
  if (p.w_scale_group > 0) return detail::validate_grouped(p, c);
  if (p.x_kind == ElemKind::I8) {
    if (p.out_kind != ElemKind::F32)
      return bad("tmatmul with i8 x must produce f32, not " + std::string(elem_name(p.out_kind)));
  } else if (is_float_kind(p.x_kind)) {
    if (p.out_kind != p.x_kind) return bad("tmatmul with float x must produce the x kind");
  } else {
    return bad("tmatmul x kind must be i8, f32, bf16 or f16");
  }
  if (c.vector_bits != 256 && c.vector_bits != 512)
    return bad("vec=" + std::to_string(c.vector_bits) + ": vector_bits must be 256 or 512");
  if (c.vector_bits == 512 && !is_avx512_family(c.isa))
    return bad("vec=512 needs an avx512 isa, not " + std::string(isa_name(c.isa)));
  if (c.n_block < 1) return bad("nb=" + std::to_string(c.n_block) + ": n_block must be positive");
  if (c.m_block < 1) return bad("mb=" + std::to_string(c.m_block) + ": m_block must be positive");
  if (c.k_unroll < 1) return bad("ku=" + std::to_string(c.k_unroll) + ": k_unroll must be positive");
  if (c.prefetch_bytes < 0) return bad("pf=" + std::to_string(c.prefetch_bytes) + ": prefetch_bytes must be >= 0");
  if (c.threads < 1) return bad("t=" + std::to_string(c.threads) + ": threads must be >= 1");
  if (c.split_k < 1) return bad("sk=" + std::to_string(c.split_k) + ": split_k must be >= 1");
  switch (c.variant) {
    case TMatMulVariant::Dot:
    case TMatMulVariant::MaskDot:
    case TMatMulVariant::Base3:
      if (p.x_kind != ElemKind::I8)
        return bad("variant=" + std::string(variant_name(c.variant)) + " needs i8 x (use variant=float)");
      return detail::validate_int8(p, c);
    case TMatMulVariant::Amx:
      if (p.x_kind != ElemKind::I8) return bad("variant=amx needs i8 x (use variant=float)");
      if (c.isa != Isa::Amx) return bad("variant=amx needs isa=amx, not " + std::string(isa_name(c.isa)));
      return detail::validate_amx(p, c);
    case TMatMulVariant::Float:
      if (p.x_kind == ElemKind::I8) return bad("variant=float needs float x (use variant=dot or mask_dot)");
      return detail::validate_float(p, c);
  }
  return bad("variant: unknown value " + std::to_string(static_cast<int>(c.variant)));
}

TMatMulConfig default_config(const TMatMulProblem& p, Isa isa, int threads, bool sub_2bit) {
  // A grouped problem runs one kernel per K group: configure for that kernel's problem
  // (on the 2-bit layouts: a group's K is too short for base3 to pay off).
  if (p.w_scale_group > 0) return default_config(detail::grouped_part_problem(p), isa, threads, false);
  TMatMulConfig c;
  c.isa = isa;
  c.threads = std::max(1, threads);
  const bool wide = is_avx512_family(isa);
  c.vector_bits = wide ? 512 : 256;
  const int lanes = c.vector_bits / 32;
  if (p.x_kind != ElemKind::I8) {
    c.variant = TMatMulVariant::Float;
    c.n_block = 2 * lanes;
    c.m_block = wide ? 4 : 2;
    c.k_unroll = 2;
    return c;
  }
  if (isa == Isa::Amx && p.M >= 64) {
    c.variant = TMatMulVariant::Amx;
    c.n_block = 32;
    c.m_block = 32;
    c.k_unroll = 1;
    return c;
  }
  // Dot/MaskDot: a panel of n_block columns is made of 4*lanes-column groups (one
  // vector of packed bytes each); see tmatmul_int8.cpp. The accumulators are
  // m_block * n_block / lanes vector registers.
  // The packed panels stream sequentially, which the hardware prefetcher follows on
  // its own: software prefetch measured no better (slower from cache), so it is off.
  const int group = 4 * lanes;
  if (sub_2bit && p.M == 1 && p.K <= 131071 && p.K * p.N >= (std::int64_t{1} << 24) &&
      (isa == Isa::Avx512Vnni || isa == Isa::Amx) && host_isas().avx512_vbmi) {
    // Base3 (1.6-bit weights, 20% fewer bytes) for one row of a layer with >= 4 MiB of
    // 2-bit weights: decode streams every layer from DRAM, where base3 measured 1.2-1.3x
    // mask_dot (CPU time, bench/README.md); from cache (weights that stay in L2/L3) it is
    // ~0.73x, so smaller layers, and M > 1 (more dot products per weight byte), stay on 2 bits.
    c.variant = TMatMulVariant::Base3;
    c.m_block = 1;
    c.n_block = 160;
    c.k_unroll = 2;
  } else if (p.M == 1) {
    c.variant = p.K <= 131071 ? TMatMulVariant::MaskDot : TMatMulVariant::Dot;
    c.m_block = 1;
    c.n_block = 2 * group;
    c.k_unroll = 2;
  } else {
    // M >= 2: dot. mask_dot and base3 (tuner candidates) measured within noise of dot at
    // M = 2, 4, 8 on 4096 x 14336 and 14336 x 4096 (bench/README.md).
    c.variant = TMatMulVariant::Dot;
    c.m_block = static_cast<int>(std::min<std::int64_t>(p.M, wide ? 4 : 2));
    c.n_block = group;
    c.k_unroll = 2;
    // A 4 KiB software prefetch ahead in the panel at M = 2-8 on AVX-512: the nb = 64
    // panels stream one cache line per step, and from DRAM the hardware prefetcher alone
    // keeps too few lines in flight. Measured (bench/README.md, same process, Zen 4):
    // M = 2 cold 1.34-1.40x, M = 8 cold 1.10-1.15x and hot 1.10x on one thread, 2-4 hot
    // within noise; at M = 1 (mask_dot nb = 128, base3) it measured slower, so not there.
    if (wide && p.M <= 8) c.prefetch_bytes = 4096;
  }
  // Split K when there are fewer column panels than threads (small N, one row).
  const std::int64_t panels = (p.N + c.n_block - 1) / c.n_block;
  if (c.threads > 1 && panels < c.threads && p.M < 4 && p.K >= 1024) c.split_k = c.threads;
  return c;
}

PackedWeights aligned_copy(const PackedWeights& w) {
  PackedWeights c;
  c.signature = w.signature;
  c.K = w.K;
  c.N = w.N;
  c.size = w.size;
  for (const PackedWeights& part : w.parts) c.parts.push_back(aligned_copy(part));
  if (!w.parts.empty()) return c;  // a grouped pack: the parts hold the weights
  c.storage.resize(w.storage.size() - w.offset + 64);  // the data and any slack after it
  c.offset = (64 - reinterpret_cast<std::uintptr_t>(c.storage.data()) % 64) % 64;
  std::memcpy(c.storage.data() + c.offset, w.data(), w.storage.size() - w.offset);
  return c;
}

Result<std::unique_ptr<TMatMulKernel>> TMatMulKernel::create(const TMatMulProblem& problem,
                                                             const TMatMulConfig& config, bool allow_foreign_isa) {
  TERNJIT_TRY_VOID(validate(problem, config));
  if (!allow_foreign_isa && !host_isas().supports(config.isa))
    return make_error(ErrorCode::Unavailable,
                      "tmatmul: this CPU cannot run isa=" + std::string(isa_name(config.isa)));
  if (!allow_foreign_isa && config.variant == TMatMulVariant::Base3 && !host_isas().avx512_vbmi)
    return make_error(ErrorCode::Unavailable, "tmatmul: variant=base3 needs AVX512-VBMI (vpermi2b), this CPU has none");
  if (problem.w_scale_group > 0) return detail::create_grouped(problem, config, allow_foreign_isa);
  switch (config.variant) {
    case TMatMulVariant::Dot:
    case TMatMulVariant::MaskDot:
    case TMatMulVariant::Base3: return detail::create_int8(problem, config);
    case TMatMulVariant::Amx: return detail::create_amx(problem, config);
    case TMatMulVariant::Float: return detail::create_float(problem, config);
  }
  return make_error(ErrorCode::InvalidArgument, "tmatmul: unknown variant");
}

}  // namespace ternjit::targets::x86

namespace ternjit::targets::x86::detail {

Result<PackedWeights> start_pack(const TernaryWeights& w, const TMatMulProblem& problem, std::string signature,
                                 std::size_t size, std::size_t slack) {
  const std::int64_t K = problem.K, N = problem.N;
  if (static_cast<std::int64_t>(w.size()) != K * N)
    return make_error(ErrorCode::InvalidArgument, "tmatmul pack: expected " + std::to_string(K * N) +
                                                      " weights (K*N), got " + std::to_string(w.size()));
  // tern2 codes: checked 8 bytes at a time (tern2_first_invalid); only from the first
  // field 0b11 on are the weights looked at value by value below.
  std::size_t first = 0;
  if (const std::uint8_t* codes = w.tern2_codes()) first = tern2_first_invalid(codes, 0, w.size());
  for (std::size_t i = first; i < w.size(); ++i)
    if (w[i] < -1 || w[i] > 1)
      return make_error(ErrorCode::InvalidArgument,
                        "tmatmul pack: weight " + std::to_string(w[i]) + " at index " + std::to_string(i) +
                            " (k=" + std::to_string(static_cast<std::int64_t>(i) / N) +
                            ", n=" + std::to_string(static_cast<std::int64_t>(i) % N) + ") is not -1, 0 or 1");
  PackedWeights pw;
  pw.signature = std::move(signature);
  pw.K = K;
  pw.N = N;
  pw.size = size;
  pw.storage.assign(size + slack + 64, 0);
  const auto addr = reinterpret_cast<std::uintptr_t>(pw.storage.data());
  pw.offset = static_cast<std::size_t>((64 - addr % 64) % 64);
  return pw;
}

void weight_codes(const TernaryWeights& w, std::int64_t K, std::int64_t N, std::int64_t k0, int rows, std::int64_t c0,
                  std::int64_t cols, std::uint8_t* out) {
  const std::uint8_t* codes = w.tern2_codes();
  const std::int8_t* values = w.int8_values();
  for (int r = 0; r < rows; ++r) {
    std::uint8_t* o = out + r * cols;
    const std::int64_t k = k0 + r;
    if (k >= K) {
      std::memset(o, 0, static_cast<std::size_t>(cols));
      continue;
    }
    const std::int64_t in = std::clamp<std::int64_t>(N - c0, 0, cols);  // columns inside N
    const std::size_t i0 = static_cast<std::size_t>(k * N + c0);
    if (codes != nullptr) {
      tern2_fields(codes, i0, static_cast<std::size_t>(in), o);
    } else {
      for (std::int64_t c = 0; c < in; ++c) o[c] = static_cast<std::uint8_t>(values[i0 + static_cast<std::size_t>(c)] + 1);
    }
    if (in < cols) std::memset(o + in, 1, static_cast<std::size_t>(cols - in));
  }
}

}  // namespace ternjit::targets::x86::detail
