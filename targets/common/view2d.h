// SPDX-License-Identifier: Apache-2.0
// view2d.h - how an operand broadcast to a result reads as [rows, cols] strides (rows = all but the last axis).
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace ternjit::targets {

/// Element strides (per row, per column) of an operand of extents `in` broadcast
/// (NumPy rules) to `out`, viewed as [prod(out[:-1]), out[-1]]; nullopt when the
/// broadcast is not such a pattern (e.g. it repeats along only some leading axes).
inline std::optional<std::pair<std::int64_t, std::int64_t>> view2d(const std::vector<std::int64_t>& out,
                                                                   const std::vector<std::int64_t>& in) {
  if (in.size() > out.size()) return std::nullopt;
  if (out.empty()) return std::pair<std::int64_t, std::int64_t>{0, 0};
  const std::int64_t cols = out.back();
  const std::int64_t in_last = in.empty() ? 1 : in.back();
  if (in_last != cols && in_last != 1) return std::nullopt;
  const std::int64_t col_stride = (in_last == cols && cols != 1) ? 1 : 0;
  // Leading axes of `in`, right-aligned with out[:-1].
  const std::size_t lead_out = out.size() - 1, lead_in = in.empty() ? 0 : in.size() - 1;
  bool all_one = true, all_equal = lead_in == lead_out;
  for (std::size_t d = 0; d < lead_in; ++d) {
    const std::int64_t e = in[d], o = out[lead_out - lead_in + d];
    if (e != 1) all_one = false;
    if (e != o) all_equal = false;
  }
  std::int64_t rows = 1;
  for (std::size_t d = 0; d < lead_out; ++d) rows *= out[d];
  if (all_one || rows == 1) return std::pair<std::int64_t, std::int64_t>{0, col_stride};
  if (!all_equal) return std::nullopt;
  return std::pair<std::int64_t, std::int64_t>{in_last, col_stride};
}

}  // namespace ternjit::targets
