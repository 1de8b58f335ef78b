// SPDX-License-Identifier: Apache-2.0
// bitnet_source.cpp - ternjit::bitnet_tri_source: the .tri decoder of a BitNet configuration (no engine needed, so tests/fuzz builds it alone).
#include "ternjit/bitnet.h"

#include "formats/bitnet_gguf.h"
#include "ir/dsl/lexer.h"
#include "ir/ir.h"

#include <cmath>

namespace ternjit {
namespace {

// The KV cache rows bitnet_tri_source declares at most: the bound of every count of the
// configuration (formats::check_bitnet_config).
constexpr std::int64_t kMaxBitnetCapacity = std::int64_t{1} << 31;

}  // namespace

Result<std::string> bitnet_tri_source(const BitNetConfig& c, std::int64_t capacity) {
  // The checks of a GGUF file's configuration (read_bitnet_config) and of the synthetic
  // writer, but for TQ2_0's multiples of 256 (a file's storage, not the decoder's): nothing
  // below divides or sizes by a field before they pass.
  TERNJIT_TRY_VOID(formats::check_bitnet_decoder(c));
  if (capacity <= 0 || capacity > kMaxBitnetCapacity)
    return make_error(ErrorCode::InvalidArgument, "bitnet_tri_source: capacity " + std::to_string(capacity) +
                                                      " is out of range (1 to " + std::to_string(kMaxBitnetCapacity) + ")");
  auto s = [](auto v) { return std::to_string(v); };
  const std::int64_t d = c.hidden / c.heads, q = c.heads * d, kv = c.kv_heads * d;
  // The caches [blocks, capacity, HKV, D] are a type too: at most 2^60 elements.
  const auto cache_rows = ir::mul_extents(c.blocks, capacity);
  if (!cache_rows || !ir::mul_extents(*cache_rows, kv))
    return make_error(ErrorCode::InvalidArgument, "bitnet_tri_source: the KV caches [" + s(c.blocks) + ", " + s(capacity) +
                                                      ", " + s(c.kv_heads) + ", " + s(d) +
                                                      "] would have more than 2^60 elements: use a smaller capacity");
  // Every float exactly as the caller gave it (positive and finite: checked above).
  const std::string eps = dsl::float_literal(c.rms_eps), theta = dsl::float_literal(c.rope_theta),
                    scale = dsl::float_literal(1.0 / std::sqrt(static_cast<double>(d)));
  const std::string cache = "Tensor<" + std::string(elem_name(c.kv_cache)) + ">[" + s(c.blocks) + ", " + s(capacity) + ", " + s(c.kv_heads) + ", " + s(d) + "]";
  std::string t = "// The llama.cpp `bitnet` decoder (ternjit::bitnet_tri_source): " + s(c.blocks) + " blocks, E " +
                  s(c.hidden) + ", " + s(c.heads) + "/" + s(c.kv_heads) + " heads of " + s(d) + ", FFN " + s(c.ffn) +
                  (c.ffn_activation == BitNetActivation::Silu ? " (silu gate)" : " (relu^2 gate)") +
                  ", V " + s(c.vocab) + ", KV capacity " + s(capacity) + ".\n";
  t += "layer Block {\n    param attn_norm: Tensor[" + s(c.hidden) + "]\n";
  auto proj = [&](const char* name, std::int64_t k, std::int64_t n) {
    t += std::string("    param ") + name + ": TernaryTensor[" + s(k) + ", " + s(n) + "]\n    param " + name +
         "_scale: Tensor[" + s(n) + "]\n";
  };
  proj("attn_q", c.hidden, q);
  proj("attn_k", c.hidden, kv);
  proj("attn_v", c.hidden, kv);
  t += "    param attn_sub_norm: Tensor[" + s(q) + "]\n";
  proj("attn_output", q, c.hidden);
  t += "    param ffn_norm: Tensor[" + s(c.hidden) + "]\n";
  proj("ffn_gate", c.hidden, c.ffn);
  proj("ffn_up", c.hidden, c.ffn);
  t += "    param ffn_sub_norm: Tensor[" + s(c.ffn) + "]\n";
  proj("ffn_down", c.ffn, c.hidden);
  const std::string table = "Tensor<" + std::string(elem_name(c.embedding)) + ">[" + s(c.vocab) + ", " + s(c.hidden) + "]";
  t += "}\n\nlayer BitNet {\n    param token_embd: " + table + "\n    param blk: Block[" + s(c.blocks) +
       "]\n    param output_norm: Tensor[" + s(c.hidden) + "]\n";
  if (c.separate_head) t += "    param output: " + table + "\n";
  t += "\n";
  t += "    fn forward(ids: Tensor<i32>[M], pos: Tensor<i32>[], k_cache: " + cache + ", v_cache: " + cache +
       ") -> (Tensor[M, " + s(c.vocab) + "], " + cache + ", " + cache + ") {\n";
  t += "        let h = cast<f32>(gather(token_embd, ids))\n";
  t += "        for i in 0.." + s(c.blocks) + " {\n";
  t += "            let x = quantize_int8(rmsnorm(h, blk[i].attn_norm, " + eps + "))\n";
  t += "            let q = rope(reshape(x @ blk[i].attn_q * blk[i].attn_q_scale, [M, " + s(c.heads) + ", " + s(d) +
       "]), pos, " + theta + ", \"neox\")\n";
  t += "            let k = rope(reshape(x @ blk[i].attn_k * blk[i].attn_k_scale, [M, " + s(c.kv_heads) + ", " + s(d) +
       "]), pos, " + theta + ", \"neox\")\n";
  t += "            let v = reshape(x @ blk[i].attn_v * blk[i].attn_v_scale, [M, " + s(c.kv_heads) + ", " + s(d) + "])\n";
  t += "            let k_cache = kv_write(k_cache, k, pos, i)\n";
  t += "            let v_cache = kv_write(v_cache, v, pos, i)\n";
  t += "            let a = reshape(attention(q, k_cache, v_cache, pos, i, " + scale + "), [M, " + s(q) + "])\n";
  t += "            let h = h + quantize_int8(rmsnorm(a, blk[i].attn_sub_norm, " + eps +
       ")) @ blk[i].attn_output * blk[i].attn_output_scale\n";
  t += "            let x = quantize_int8(rmsnorm(h, blk[i].ffn_norm, " + eps + "))\n";
  const bool silu = c.ffn_activation == BitNetActivation::Silu;
  t += std::string("            let f = ") + (silu ? "silu(" : "square(relu(") +
       "x @ blk[i].ffn_gate * blk[i].ffn_gate_scale" + (silu ? ")" : "))") + " * (x @ blk[i].ffn_up * " +
       "blk[i].ffn_up_scale)\n";
  t += "            let h = h + quantize_int8(rmsnorm(f, blk[i].ffn_sub_norm, " + eps +
       ")) @ blk[i].ffn_down * blk[i].ffn_down_scale\n";
  t += "        }\n        return (rmsnorm(h, output_norm, " + eps + ") @ transpose(" +
       (c.separate_head ? "output" : "token_embd") + "), k_cache, v_cache)\n    }\n}\n";
  return t;
}

}  // namespace ternjit
