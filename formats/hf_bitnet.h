// SPDX-License-Identifier: Apache-2.0
// hf_bitnet.h - Hugging Face BitNet b1.58 checkpoint directories (transformers'
// BitNetForCausalLM save_pretrained): config.json read and checked field by field into the
// decoder's configuration, the safetensors files (one, or the shards of
// model.safetensors.index.json), every tensor the decoder binds checked against the form
// quantization_config says, and the name map to bitnet_tri_source's parameters.
//
// What transformers computes and how the decoder matches it (docs/bitnet.md): the block is
// llama.cpp's `bitnet` order (input_layernorm, q/k/v, neox RoPE, attention, attn_sub_norm,
// o_proj, post_attention_layernorm, gate/up, relu2 or silu, ffn_sub_norm, down_proj), every
// projection's input quantized to int8 per token with absmax (BitLinear.activation_quant,
// ActQuant), the head tied to embed_tokens. Whatever config.json sets that the decoder does
// not compute the same way is refused by name, never approximated.
#pragma once

#include <string>
#include <vector>

#include "ternjit/bitnet.h"
#include "ternjit/result.h"

namespace ternjit::formats {

/// The checkpoint directory `dir` as ternjit::read_hf_bitnet_config documents it (errors
/// prefixed by the file they concern: "<dir>/config.json: ...").
Result<HfBitNetConfig> hf_bitnet_config(const std::string& dir);

/// The name-map rules from a checkpoint's tensor names to layer `layer`'s parameters.
std::vector<std::string> hf_bitnet_name_map(const std::string& layer);

}  // namespace ternjit::formats
