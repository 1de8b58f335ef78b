// SPDX-License-Identifier: Apache-2.0
// layer_sources.h - the .tri layers the framework extensions compile (python/torch_ext and
// python/jax_ext share them, so both run the same layer text): BitNet b1.58's BitLinear for
// inference (bound ternary weights) and in training form (latent float weights per call).
// python/ternjit/torch.py's bitlinear_source and qat_linear_source write the same text for
// Python callers.
#pragma once

#include <array>
#include <charconv>
#include <string>
#include <string_view>

namespace ternjit::framework {

/// The activations the layers fuse (the .tri built-ins of these names).
inline constexpr std::array<std::string_view, 6> kActivations = {"none", "relu", "gelu", "silu", "sigmoid", "tanh"};

/// True if `activation` is one of kActivations.
inline bool known_activation(std::string_view activation) {
  for (std::string_view a : kActivations)
    if (activation == a) return true;
  return false;
}

/// kActivations as "none, relu, ..." (for messages).
inline std::string activation_names() {
  std::string s;
  for (std::string_view a : kActivations) s += (s.empty() ? "" : ", ") + std::string(a);
  return s;
}

/// Layer `BitLinear` for inference: `activation(quantize_int8(rmsnorm?(x)) @ w * w_scale (+ bias))`
/// with parameters gamma (when `norm`), w, w_scale and bias (when `bias`).
inline std::string bitlinear_source(bool norm, bool bias, const std::string& activation, double eps) {
  // The shortest text that reads back as `eps` (Python's repr).
  std::array<char, 32> digits{};
  char* end = std::to_chars(digits.data(), digits.data() + digits.size(), eps).ptr;
  const std::string eps_text(digits.data(), end);
  std::string s = "layer BitLinear {\n";
  if (norm) s += "    param gamma: Tensor[K]\n";
  s += "    param w: TernaryTensor[K, N]\n    param w_scale: Tensor[N]\n";
  if (bias) s += "    param bias: Tensor[N]\n";
  s += "    fn forward(x: Tensor[M, K]) -> Tensor[M, N] {\n";
  if (norm) {
    s += "        let h = rmsnorm(x, gamma, " + eps_text + ")\n        let q = quantize_int8(h)\n";
  } else {
    s += "        let q = quantize_int8(x)\n";
  }
  s += "        let y = q @ w\n";
  s += std::string("        let z = y * w_scale") + (bias ? " + bias" : "") + "\n";
  s += "        return " + (activation == "none" ? std::string("z") : activation + "(z)") + "\n";
  s += "    }\n}\n";
  return s;
}

/// Layer `layer` in training form: `fn forward(x, w[, b]) = activation(quantize_int8(x) @
/// ternarize_absmean(w, ste_clip) (+ b))`, w [K, N] the latent float weights; the clipping
/// is written explicitly (the quantizer's attribute, not compile_grad's default).
inline std::string qat_linear_source(const std::string& layer, bool bias, const std::string& activation,
                                     bool ste_clip) {
  const std::string args = std::string("x: Tensor[M, K], w: Tensor[K, N]") + (bias ? ", b: Tensor[N]" : "");
  const std::string z = std::string("quantize_int8(x) @ ternarize_absmean(w, ") + (ste_clip ? "1" : "0") + ")" +
                        (bias ? " + b" : "");
  const std::string body = activation == "none" ? z : activation + "(" + z + ")";
  return "layer " + layer + " {\n    fn forward(" + args + ") -> Tensor[M, N] {\n        return " + body +
         "\n    }\n}\n";
}

}  // namespace ternjit::framework
