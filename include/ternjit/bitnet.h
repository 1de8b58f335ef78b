// SPDX-License-Identifier: Apache-2.0
// bitnet.h - llama.cpp `bitnet` GGUF files: a file's configuration, a synthetic model of any
// configuration (random ternary weights, llama.cpp's tensor names and metadata), and the
// name map binding such a file to examples/bitnet/bitnet.tri (formats/README.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ternjit/result.h"

namespace ternjit {

/// The FFN's gate activation: relu(g)^2 * u (BitNet b1.58 2B4T as published: its
/// config.json says hidden_act "relu2") or silu(g) * u (what llama.cpp's `bitnet` graph
/// computes for every file; docs/bitnet.md).
enum class BitNetActivation { Relu2, Silu };

/// A BitNet b1.58 decoder's shape, as llama.cpp's `bitnet` metadata gives it. The
/// defaults are the 2B4T model (microsoft/bitnet-b1.58-2B-4T).
struct BitNetConfig {
  std::int64_t blocks = 30;      ///< bitnet.block_count
  std::int64_t hidden = 2560;    ///< bitnet.embedding_length (E)
  std::int64_t heads = 20;       ///< bitnet.attention.head_count (HQ)
  std::int64_t kv_heads = 5;     ///< bitnet.attention.head_count_kv (HKV)
  std::int64_t ffn = 6912;       ///< bitnet.feed_forward_length (F)
  std::int64_t vocab = 128256;   ///< the number of tokenizer.ggml.tokens (V)
  std::int64_t context = 4096;   ///< bitnet.context_length
  double rope_theta = 500000.0;  ///< bitnet.rope.freq_base
  double rms_eps = 1e-5;         ///< bitnet.attention.layer_norm_rms_epsilon
  /// bitnet.hidden_activation ("relu2" or "silu"); a file without the key: Relu2.
  BitNetActivation ffn_activation = BitNetActivation::Relu2;
};

/// The configuration of the `bitnet` GGUF file at `path`. Errors: NotFound/IoError for
/// the file; InvalidInput for another architecture, a missing key (named), a
/// bitnet.hidden_activation other than "relu2" / "silu", or a shape
/// ternjit cannot run (E, HQ*D, F multiples of 256; HQ % HKV == 0; D = E / HQ even).
Result<BitNetConfig> read_bitnet_config(const std::string& path);

/// Writes a synthetic `bitnet` model of `config` to `path` (TQ2_0 projections, one scale
/// per tensor; F16 token_embd tied as the head; F32 norms; tokens "<tN>";
/// bitnet.hidden_activation from config.ffn_activation), every byte drawn
/// from `seed`. It is written one tensor at a time (the 2B4T file is about 1.3 GB).
/// Errors: InvalidArgument for a configuration as above; IoError.
Result<void> write_synthetic_bitnet(const std::string& path, const BitNetConfig& config, std::uint64_t seed);

/// The name-map rules (Program::bind_file) binding a `bitnet` file to the parameters of
/// layer `layer`: "blk.{i}.attn_q.weight=<layer>.blk.{i}.attn_q", ..., token_embd and
/// output_norm; a ternary tensor's scale binds "<layer>.blk.{i}.attn_q_scale".
std::vector<std::string> bitnet_name_map(const std::string& layer);

/// The `.tri` source of the decoder of `config` (llama.cpp's `bitnet` block order): layer
/// `Block` (the per-block parameters, names as bitnet_name_map binds them) and layer
/// `BitNet` with `param blk: Block[blocks]`, `token_embd: Tensor<f16>[V, E]` (the tied
/// head), `output_norm`, and
/// `fn forward(ids: Tensor<i32>[M], pos: Tensor<i32>[], k_cache, v_cache: Tensor<f16>[blocks,
/// C, HKV, D]) -> (logits Tensor[M, V], k_cache', v_cache')` with C = `capacity` (the host's
/// KV cache rows; docs/bitnet.md). RoPE is `neox` (llama.cpp's rope type for `bitnet`); the
/// FFN gate is config.ffn_activation.
std::string bitnet_tri_source(const BitNetConfig& config, std::int64_t capacity);

}  // namespace ternjit
