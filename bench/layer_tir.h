// SPDX-License-Identifier: Apache-2.0
// layer_tir.h - the benches' BitLinear core as IR text: quantize + tmatmul (x_scale, w_scale), O2's shape of it.
#pragma once

#include <cstdint>
#include <string>

namespace ternjit::bench {

/// `f(%x: f32[M, K]) -> f32[M, N]`: quantize, then tmatmul with the row scale and the
/// per-column weight scale, weights `@w : t2[K, N]` and `@ws : f32[N]`.
inline std::string layer_tir(std::int64_t M, std::int64_t K, std::int64_t N) {
  const std::string m = std::to_string(M), k = std::to_string(K), n = std::to_string(N);
  return "param @w : t2[" + k + ", " + n + "]\nparam @ws : f32[" + n + "]\nfunc @f(%x: f32[" + m + ", " + k +
         "]) -> f32[" + m + ", " + n + "] {\n^entry:\n  %q, %s = quantize %x : i8[" + m + ", " + k + "], f32[" + m +
         ", 1]\n  %w = param @w : t2[" + k + ", " + n + "]\n  %ws = param @ws : f32[" + n +
         "]\n  %y = tmatmul %q, %w, %s, %ws {x_scale = true, w_scale = true, bias = false, residual = false, act = none} "
         ": f32[" + m + ", " + n + "]\n  ret %y\n}\n";
}

}  // namespace ternjit::bench
