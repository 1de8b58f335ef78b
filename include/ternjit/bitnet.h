// SPDX-License-Identifier: Apache-2.0
// bitnet.h - BitNet b1.58 decoders: llama.cpp `bitnet` GGUF files (a file's configuration, a
// synthetic model of any configuration, the name map binding such a file to the decoder) and
// Hugging Face checkpoint directories (transformers' BitNetForCausalLM save_pretrained);
// formats/README.md, docs/bitnet.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ternjit/engine.h"
#include "ternjit/result.h"
#include "ternjit/types.h"

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
  /// The token embedding's element kind, also the tied head's (F16, BF16 or F32): how
  /// bitnet_tri_source declares token_embd. read_bitnet_config: token_embd's GGUF type when
  /// it is one of these, else F16 (converted at bind); read_hf_bitnet_config: the checkpoint's.
  ElemKind embedding = ElemKind::F16;
  /// The KV caches' element kind (F16, BF16 or F32), the host's choice: f16 halves f32's
  /// memory and rounds k and v to 11 significant bits (docs/bitnet.md).
  ElemKind kv_cache = ElemKind::F16;
  /// The output head: false, token_embd itself (llama.cpp's `bitnet`, the published 2B4T);
  /// true, its own table `output` [V, E] of kind `embedding` (a GGUF file with output.weight,
  /// a checkpoint with tie_word_embeddings false and its lm_head.weight).
  bool separate_head = false;
};

/// The configuration of the `bitnet` GGUF file at `path`. Errors: NotFound/IoError for
/// the file; InvalidInput for another architecture, a missing key (named), a
/// bitnet.hidden_activation other than "relu2" / "silu", or a shape
/// ternjit cannot run (E, HQ*D, F multiples of 256; HQ % HKV == 0; D = E / HQ even; embedding
/// and kv_cache F16, BF16 or F32).
Result<BitNetConfig> read_bitnet_config(const std::string& path);

/// Writes a synthetic `bitnet` model of `config` to `path` (TQ2_0 projections, one scale
/// per tensor; F16 token_embd tied as the head; F32 norms; tokens "<tN>";
/// bitnet.hidden_activation from config.ffn_activation), every byte drawn
/// from `seed`. It is written one tensor at a time (the 2B4T file is about 1.3 GB).
/// Errors: InvalidArgument for a configuration as above; IoError.
Result<void> write_synthetic_bitnet(const std::string& path, const BitNetConfig& config, std::uint64_t seed);

/// The name-map rules (Program::bind_file) binding a `bitnet` file to the parameters of
/// layer `layer`: "blk.{i}.attn_q.weight=<layer>.blk.{i}.attn_q", ..., token_embd,
/// output_norm and output; a ternary tensor's scale binds "<layer>.blk.{i}.attn_q_scale".
std::vector<std::string> bitnet_name_map(const std::string& layer);

/// The `.tri` source of the decoder of `config` (llama.cpp's `bitnet` block order): layer
/// `Block` (the per-block parameters, names as bitnet_name_map binds them) and layer
/// `BitNet` with `param blk: Block[blocks]`, `token_embd: Tensor<f16>[V, E]` (the tied
/// head), `output_norm`, and
/// `fn forward(ids: Tensor<i32>[M], pos: Tensor<i32>[], k_cache, v_cache: Tensor<f16>[blocks,
/// C, HKV, D]) -> (logits Tensor[M, V], k_cache', v_cache')` with C = `capacity` (the host's
/// KV cache rows; docs/bitnet.md). RoPE is `neox` (llama.cpp's rope type for `bitnet`); the
/// FFN gate is config.ffn_activation; token_embd is config.embedding (f16 above), the caches
/// config.kv_cache (f16 above); with config.separate_head the head is `param output` of the
/// same kind and shape as token_embd. Every float (rope_theta, rms_eps) is written so that
/// the compiled program uses exactly its value. Errors: InvalidArgument for a configuration
/// read_bitnet_config would refuse (the same checks, naming the field; E and F need not be
/// multiples of 256, which only a file's TQ2_0 blocks need; at most 256 blocks, which the
/// DSL's budget for the unrolled decoder holds; no matrix past 2^60 elements), a capacity
/// outside 1 .. 2^31, or KV caches of more than 2^60 elements. What it returns compiles.
Result<std::string> bitnet_tri_source(const BitNetConfig& config, std::int64_t capacity);

/// How a Hugging Face BitNet checkpoint stores its ternary projections, as its config.json's
/// quantization_config says (transformers' integrations/bitnet.py).
enum class HfBitNetWeights {
  /// linear_class "bitlinear": U8 [N/4, K] packed codes and a one-element weight_scale, by
  /// which BitLinear divides (microsoft/bitnet-b1.58-2B-4T).
  Packed,
  /// linear_class "autobitlinear", quantization_mode "online": float [N, K] master weights,
  /// ternarized per tensor with absmean as AutoBitLinear's WeightQuant does (the -bf16 form).
  Master,
};

/// A Hugging Face BitNet b1.58 checkpoint directory, as ternjit's decoder runs it.
struct HfBitNetConfig {
  BitNetConfig decoder;  ///< the shape (context: max_position_embeddings; kv_cache: F16)
  HfBitNetWeights weights = HfBitNetWeights::Packed;
  /// Its safetensors files: DIR/model.safetensors, or the shards model.safetensors.index.json
  /// names (each once, in name order).
  std::vector<std::string> files;
};

/// Reads and checks the checkpoint directory `dir` (save_pretrained of transformers'
/// BitNetForCausalLM): config.json (model_type "bitnet"; the shape; hidden_act "relu2" or
/// "silu"; RoPE rope_type "default"; no attention_bias; tie_word_embeddings, else an lm_head
/// of embed_tokens' dtype (separate_head); a
/// quantization_config with quant_method "bitnet", linear_class "bitlinear", or
/// "autobitlinear" with quantization_mode "online", use_rms_norm false,
/// modules_to_not_convert null or ["lm_head"]) and every tensor the decoder binds, in the
/// form quantization_config says (docs/bitnet.md lists it all). Errors: NotFound for a
/// missing config.json or weights file; InvalidInput naming the field or tensor and what
/// ternjit runs (a value transformers computes another way than the decoder is refused,
/// never approximated); IoError.
Result<HfBitNetConfig> read_hf_bitnet_config(const std::string& dir);

/// The name-map rules binding a checkpoint's tensors to layer `layer` of bitnet_tri_source:
/// "model.layers.{i}.self_attn.q_proj.weight=<layer>.blk.{i}.attn_q", ...,
/// model.embed_tokens -> token_embd, model.norm -> output_norm, lm_head -> output; a projection's scale
/// (1 / weight_scale, or its absmean) binds "<layer>.blk.{i}.attn_q_scale".
std::vector<std::string> hf_bitnet_name_map(const std::string& layer);

/// Binds every file of `config` to `program` (compiled from bitnet_tri_source(
/// config.decoder, C)) with hf_bitnet_name_map(layer). Errors: InvalidArgument when the
/// program has no parameter of `layer`; Program::bind_file's; a parameter of `layer` still
/// unbound afterwards (InvalidInput, naming it).
Result<void> bind_hf_bitnet(Program& program, const HfBitNetConfig& config, const std::string& layer = "BitNet");

}  // namespace ternjit
