// SPDX-License-Identifier: Apache-2.0
// interpret_decoder.cpp - the reference numerics of the decoder ops: gather, slice, concat,
// layernorm, rope, causal_softmax, kv_write and attention (interpret.h states the rules,
// ir/README.md the semantics).
//
// Every float result is computed in double from the operands' exact values and rounded
// once (round_result). Run-time range errors (an id outside the table, a negative
// position, rows past the cache's capacity, a layer past the cache's L) are
// InvalidInput errors that name the op and the values: "gather: id 7 at index 2 is out
// of range [0, 5)". Never a clamp, never a wrap.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "ir/builder.h"
#include "ir/interpret_internal.h"

namespace ternjit::ir::interp {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::string str(std::int64_t v) { return std::to_string(v); }

// The i32 scalar `pos` (the verifier made it one; the interpreter's binding validated it).
std::int64_t pos_of(const HostTensor& pos) {
  TERNJIT_CHECK(pos.shape.empty() && pos.data.size() == 1, "pos is not a scalar: " + pos.describe());
  return static_cast<std::int64_t>(pos.data[0]);
}

// pos >= 0 (every op reading a position).
Result<std::int64_t> checked_pos(const InstData& inst, const HostTensor& pos) {
  const std::int64_t p = pos_of(pos);
  if (p < 0)
    return fail_at(inst.loc, std::string(op_name(inst.op)) + ": pos " + str(p) + " is negative (pos must be >= 0)");
  return p;
}

// The cache rows [pos, pos + m) lie inside the capacity c, and layer < l.
Result<void> check_cache(const InstData& inst, std::int64_t pos, std::int64_t m, std::int64_t layer,
                         const Extents& cache) {
  const std::string op(op_name(inst.op));
  if (layer < 0 || layer >= cache[0])
    return fail_at(inst.loc, op + ": layer " + str(layer) + " is out of range [0, " + str(cache[0]) + ") for the cache " +
                                 index_str(cache));
  if (m > cache[1] - pos)  // pos >= 0 and m >= 0: no overflow
    return fail_at(inst.loc, op + ": rows [pos, pos + M) = [" + str(pos) + ", " + str(pos + m) +
                                 ") do not fit the cache capacity C = " + str(cache[1]) + " (pos " + str(pos) +
                                 ", M " + str(m) + ")");
  return success();
}

}  // namespace

Result<HostTensor> gather(const InstData& inst, const HostTensor& table, const HostTensor& ids) {
  const std::int64_t v = table.shape[0], d = table.shape[1];
  Extents shape = ids.shape;
  shape.push_back(d);
  HostTensor r{table.kind, shape, std::vector<double>(ids.data.size() * static_cast<std::size_t>(d))};
  for (std::size_t i = 0; i < ids.data.size(); ++i) {
    const auto id = static_cast<std::int64_t>(ids.data[i]);
    if (id < 0 || id >= v)
      return fail_at(inst.loc, "gather: id " + str(id) + " at index " + str(static_cast<std::int64_t>(i)) +
                                   " is out of range [0, " + str(v) + ")");
    for (std::int64_t j = 0; j < d; ++j)
      r.data[i * static_cast<std::size_t>(d) + static_cast<std::size_t>(j)] =
          table.data[static_cast<std::size_t>(id * d + j)];
  }
  return r;
}

HostTensor slice(const HostTensor& x, std::size_t axis, std::int64_t start, std::int64_t size) {
  std::int64_t outer = 1, inner = 1;
  for (std::size_t k = 0; k < axis; ++k) outer *= x.shape[k];
  for (std::size_t k = axis + 1; k < x.shape.size(); ++k) inner *= x.shape[k];
  const std::int64_t len = x.shape[axis];
  TERNJIT_CHECK(start >= 0 && size >= 0 && start + size <= len, "slice out of range of " + x.describe());
  Extents shape = x.shape;
  shape[axis] = size;
  HostTensor r{x.kind, shape, {}};
  r.data.reserve(static_cast<std::size_t>(outer * size * inner));
  for (std::int64_t o = 0; o < outer; ++o) {
    const auto* row = x.data.data() + (o * len + start) * inner;
    r.data.insert(r.data.end(), row, row + size * inner);
  }
  return r;
}

HostTensor concat(std::span<const HostTensor* const> ops, std::size_t axis) {
  Extents shape = ops[0]->shape;
  std::int64_t outer = 1, inner = 1;
  for (std::size_t k = 0; k < axis; ++k) outer *= shape[k];
  for (std::size_t k = axis + 1; k < shape.size(); ++k) inner *= shape[k];
  shape[axis] = 0;
  for (const HostTensor* t : ops) shape[axis] += t->shape[axis];
  HostTensor r{ops[0]->kind, shape, {}};
  r.data.reserve(static_cast<std::size_t>(numel(shape)));
  for (std::int64_t o = 0; o < outer; ++o)
    for (const HostTensor* t : ops) {
      const std::int64_t n = t->shape[axis] * inner;
      const auto* part = t->data.data() + o * n;
      r.data.insert(r.data.end(), part, part + n);
    }
  return r;
}

HostTensor layernorm(const HostTensor& x, const HostTensor& gamma, const HostTensor& beta, double eps, ElemKind kind,
                     bool f64) {
  const std::int64_t d = x.shape.back();
  TERNJIT_CHECK(gamma.shape == Extents{d} && beta.shape == Extents{d},
                "layernorm gamma/beta do not match " + index_str(x.shape));
  HostTensor r{kind, x.shape, std::vector<double>(x.data.size())};
  const std::int64_t rows = d == 0 ? 0 : numel(x.shape) / d;
  for (std::int64_t row = 0; row < rows; ++row) {
    const auto base = static_cast<std::size_t>(row * d);
    double sum = 0;
    for (std::int64_t j = 0; j < d; ++j) sum += x.data[base + static_cast<std::size_t>(j)];
    const double mean = sum / static_cast<double>(d);
    double ss = 0;
    for (std::int64_t j = 0; j < d; ++j) {
      const double c = x.data[base + static_cast<std::size_t>(j)] - mean;
      ss += c * c;
    }
    const double denom = std::sqrt(ss / static_cast<double>(d) + eps);
    for (std::int64_t j = 0; j < d; ++j) {
      const auto at = base + static_cast<std::size_t>(j);
      const auto k = static_cast<std::size_t>(j);
      r.data[at] = round_result((x.data[at] - mean) / denom * gamma.data[k] + beta.data[k], kind, f64);
    }
  }
  return r;
}

Result<HostTensor> rope(const InstData& inst, const RopeAttrs& a, const HostTensor& x, const HostTensor& pos,
                        bool f64) {
  TERNJIT_TRY(const std::int64_t p0, checked_pos(inst, pos));
  const std::int64_t m_rows = x.shape[0], heads = x.shape[1], d = x.shape[2];
  if (d % 2 != 0) return fail_at(inst.loc, "rope: head dim D = " + str(d) + " is odd (rope rotates pairs)");
  const std::int64_t half = d / 2;
  HostTensor r{x.kind, x.shape, std::vector<double>(x.data.size())};
  for (std::int64_t m = 0; m < m_rows; ++m) {
    const auto p = static_cast<double>(p0 + m);
    for (std::int64_t i = 0; i < half; ++i) {
      const double freq = std::pow(a.theta, -2.0 * static_cast<double>(i) / static_cast<double>(d));
      const double angle = p * freq;
      const double c = std::cos(angle), s = std::sin(angle);
      // The two elements of pair i: (2i, 2i + 1) or (i, i + D/2).
      const std::int64_t ja = a.mode == RopeMode::Norm ? 2 * i : i;
      const std::int64_t jb = a.mode == RopeMode::Norm ? 2 * i + 1 : i + half;
      for (std::int64_t h = 0; h < heads; ++h) {
        const auto base = static_cast<std::size_t>((m * heads + h) * d);
        const double va = x.data[base + static_cast<std::size_t>(ja)];
        const double vb = x.data[base + static_cast<std::size_t>(jb)];
        r.data[base + static_cast<std::size_t>(ja)] = round_result(va * c - vb * s, x.kind, f64);
        r.data[base + static_cast<std::size_t>(jb)] = round_result(va * s + vb * c, x.kind, f64);
      }
    }
  }
  return r;
}

Result<HostTensor> causal_softmax(const InstData& inst, const HostTensor& x, const HostTensor& pos, ElemKind kind,
                                  bool f64) {
  TERNJIT_TRY(const std::int64_t p0, checked_pos(inst, pos));
  const std::size_t rank = x.shape.size();
  const std::int64_t m_rows = x.shape[rank - 2], t_len = x.shape[rank - 1];
  const std::int64_t batch = m_rows * t_len == 0 ? 0 : numel(x.shape) / (m_rows * t_len);
  HostTensor r{kind, x.shape, std::vector<double>(x.data.size(), 0.0)};  // masked entries are exactly 0
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t m = 0; m < m_rows; ++m) {
      const auto base = static_cast<std::size_t>((b * m_rows + m) * t_len);
      // Entries t <= pos + m are kept; pos >= 0, so every row keeps t = 0.
      const std::int64_t kept = std::min(t_len, p0 + m + 1);
      double mx = -std::numeric_limits<double>::infinity();
      for (std::int64_t t = 0; t < kept; ++t) {
        const double v = x.data[base + static_cast<std::size_t>(t)];
        mx = (std::isnan(v) || std::isnan(mx)) ? kNaN : std::max(mx, v);
      }
      double sum = 0;
      std::vector<double> e(static_cast<std::size_t>(kept));
      for (std::int64_t t = 0; t < kept; ++t) {
        e[static_cast<std::size_t>(t)] = std::exp(x.data[base + static_cast<std::size_t>(t)] - mx);
        sum += e[static_cast<std::size_t>(t)];
      }
      for (std::int64_t t = 0; t < kept; ++t)
        r.data[base + static_cast<std::size_t>(t)] = round_result(e[static_cast<std::size_t>(t)] / sum, kind, f64);
    }
  }
  return r;
}

Result<HostTensor> kv_write(const InstData& inst, std::int64_t layer, const HostTensor& cache, const HostTensor& rows,
                            const HostTensor& pos) {
  TERNJIT_TRY(const std::int64_t p0, checked_pos(inst, pos));
  const std::int64_t m_rows = rows.shape[0];
  TERNJIT_TRY_VOID(check_cache(inst, p0, m_rows, layer, cache.shape));
  const std::int64_t c = cache.shape[1], row_len = cache.shape[2] * cache.shape[3];
  TERNJIT_CHECK(rows.shape[1] * rows.shape[2] == row_len, "kv_write rows do not match the cache");
  HostTensor r = cache;
  for (std::int64_t m = 0; m < m_rows; ++m) {
    const auto dst = static_cast<std::size_t>(((layer * c) + p0 + m) * row_len);
    const auto src = static_cast<std::size_t>(m * row_len);
    for (std::int64_t j = 0; j < row_len; ++j)
      r.data[dst + static_cast<std::size_t>(j)] = round_to_kind(rows.data[src + static_cast<std::size_t>(j)], cache.kind);
  }
  return r;
}

Result<HostTensor> attention(const InstData& inst, const AttentionAttrs& a, const HostTensor& q, const HostTensor& kc,
                             const HostTensor& vc, const HostTensor& pos, bool f64) {
  TERNJIT_TRY(const std::int64_t p0, checked_pos(inst, pos));
  const std::int64_t m_rows = q.shape[0], hq = q.shape[1], d = q.shape[2];
  TERNJIT_TRY_VOID(check_cache(inst, p0, m_rows, a.layer, kc.shape));
  const std::int64_t c = kc.shape[1], hkv = kc.shape[2];
  if (hq != 0 && (hkv == 0 || hq % hkv != 0))
    return fail_at(inst.loc, "attention: query heads HQ = " + str(hq) + " are not a multiple of the cache heads HKV = " +
                                 str(hkv));
  const std::int64_t g = hq == 0 ? 1 : hq / hkv;
  HostTensor r{ElemKind::F32, q.shape, std::vector<double>(q.data.size())};
  std::vector<double> p;
  std::vector<double> acc(static_cast<std::size_t>(d));
  // Element (t, head, j) of layer `layer` of a cache.
  auto at = [&](std::int64_t t, std::int64_t head, std::int64_t j) {
    return static_cast<std::size_t>(((a.layer * c + t) * hkv + head) * d + j);
  };
  for (std::int64_t m = 0; m < m_rows; ++m) {
    const std::int64_t len = p0 + m + 1;  // rows t in [0, pos + m]; <= C by check_cache
    p.assign(static_cast<std::size_t>(len), 0.0);
    for (std::int64_t h = 0; h < hq; ++h) {
      const std::int64_t kvh = h / g;  // ggml's and transformers' repeat_kv mapping
      const auto qbase = static_cast<std::size_t>((m * hq + h) * d);
      double mx = -std::numeric_limits<double>::infinity();
      for (std::int64_t t = 0; t < len; ++t) {
        double dot = 0;
        for (std::int64_t j = 0; j < d; ++j) dot += q.data[qbase + static_cast<std::size_t>(j)] * kc.data[at(t, kvh, j)];
        const double s = a.scale * dot;
        p[static_cast<std::size_t>(t)] = s;
        mx = (std::isnan(s) || std::isnan(mx)) ? kNaN : std::max(mx, s);
      }
      double sum = 0;
      for (double& s : p) {
        s = std::exp(s - mx);
        sum += s;
      }
      std::fill(acc.begin(), acc.end(), 0.0);
      for (std::int64_t t = 0; t < len; ++t) {
        const double w = p[static_cast<std::size_t>(t)] / sum;
        for (std::int64_t j = 0; j < d; ++j) acc[static_cast<std::size_t>(j)] += w * vc.data[at(t, kvh, j)];
      }
      for (std::int64_t j = 0; j < d; ++j)
        r.data[qbase + static_cast<std::size_t>(j)] = round_result(acc[static_cast<std::size_t>(j)], ElemKind::F32, f64);
    }
  }
  return r;
}

}  // namespace ternjit::ir::interp
