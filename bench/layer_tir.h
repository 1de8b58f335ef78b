// SPDX-License-Identifier: Apache-2.0
// layer_tir.h - the benches' BitLinear core as IR text: quantize + tmatmul (x_scale, w_scale), O2's shape of it.
#pragma once

#include <cstdint>
#include <string>

namespace ternjit::bench {

/// `f(%x: f32[M, K]) -> f32[M, N]`: quantize, then tmatmul with the row scale and the
/// per-column weight scale, weights `@w : t2[K, N]` and `@ws : f32[N]`; with `group` > 0
/// the weight scale is grouped along K instead, `@ws : f32[ceil(K / group), N]` (GGUF
/// TQ1_0/TQ2_0: group 256).
inline std::string layer_tir(std::int64_t M, std::int64_t K, std::int64_t N, std::int64_t group = 0) {
  const std::string m = std::to_string(M), k = std::to_string(K), n = std::to_string(N);
  const std::string ws =
      group > 0 ? "f32[" + std::to_string((K + group - 1) / group) + ", " + n + "]" : "f32[" + n + "]";
  const std::string g = group > 0 ? ", group = " + std::to_string(group) : "";
  return "param @w : t2[" + k + ", " + n + "]\nparam @ws : " + ws + "\nfunc @f(%x: f32[" + m + ", " + k + "]) -> f32[" +
         m + ", " + n + "] {\n^entry:\n  %q, %s = quantize %x : i8[" + m + ", " + k + "], f32[" + m +
         ", 1]\n  %w = param @w : t2[" + k + ", " + n + "]\n  %ws = param @ws : " + ws +
         "\n  %y = tmatmul %q, %w, %s, %ws {x_scale = true, w_scale = true" + g +
         ", bias = false, residual = false, act = none} : f32[" + m + ", " + n + "]\n  ret %y\n}\n";
}

}  // namespace ternjit::bench
