// SPDX-License-Identifier: Apache-2.0
// bitnet_gguf.h - llama.cpp's `bitnet` architecture in GGUF: its configuration read from a
// file's metadata, and a synthetic model (random ternary weights) of any configuration
// written with llama.cpp's tensor names and metadata.
//
// The names and shapes are llama.cpp's (src/llama-arch.cpp LLM_ARCH_BITNET,
// src/llama-model.cpp): token_embd (E, V) as the tied output head (no `output` tensor),
// output_norm (E), and per block i: blk.i.attn_norm (E), attn_q (E, HQ*D), attn_k and
// attn_v (E, HKV*D), attn_sub_norm (HQ*D), attn_output (HQ*D, E), ffn_norm (E), ffn_gate
// and ffn_up (E, F), ffn_sub_norm (F), ffn_down (F, E); dims in ggml order (ne0 = K, the
// input width). The synthetic file keeps each projection's scale in its TQ2_0 blocks'
// `d` (one value per tensor), so it carries none of the optional `.scale` tensors.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "formats/gguf.h"
#include "ternjit/bitnet.h"
#include "ternjit/result.h"

namespace ternjit::formats {

// The configuration is the public ternjit::BitNetConfig (ternjit/bitnet.h: plain data,
// the 2B4T model by default), named here unqualified.

/// The head dimension D = E / HQ of `c`.
inline std::int64_t bitnet_head_dim(const BitNetConfig& c) { return c.hidden / c.heads; }

/// A small configuration for tests: 2 blocks, E 256, 4/2 heads of 64, F 512, V 50,
/// context 64 (TQ2_0 blocks are 256 values along K, so E, HQ*D and F are multiples of 256).
BitNetConfig tiny_bitnet_config();

/// The most blocks bitnet_tri_source writes: its decoder unrolls them into one function,
/// and the DSL's budget of 65,536 expression nodes per function holds about 410 of them
/// (~160 nodes a block); unit/engine compiles this many.
inline constexpr std::int64_t kMaxBitnetBlocks = 256;

/// Success when `c` is a decoder bitnet_tri_source can write: every count in 1 .. 2^31,
/// at most kMaxBitnetBlocks blocks, HQ % HKV == 0, E % HQ == 0, D even (RoPE pairs),
/// E x E, F x E and V x E within 2^60 elements (a type's limit), rope_theta and rms_eps
/// finite and positive, embedding and kv_cache F16, BF16 or F32. InvalidArgument naming
/// the field otherwise. Every entry that takes a configuration runs it first (the C ABI and Python
/// through ternjit::bitnet_tri_source and write_synthetic_bitnet).
Result<void> check_bitnet_decoder(const BitNetConfig& c);

/// Success when `c` can also be stored as a `bitnet` file: check_bitnet_decoder, and E,
/// HQ*D and F multiples of 256 (TQ2_0 blocks along K). InvalidArgument naming the field
/// otherwise.
Result<void> check_bitnet_config(const BitNetConfig& c);

/// The configuration of a `bitnet` GGUF file. Errors (InvalidInput): another
/// general.architecture, a missing or non-integer key (named), a bitnet.hidden_activation
/// other than "relu2" / "silu", no tokenizer.ggml.tokens array, a configuration
/// check_bitnet_config refuses. `embedding` is token_embd's type when F32 or BF16, else F16;
/// `separate_head` whether the file has an output.weight.
Result<BitNetConfig> bitnet_config(const GgufFile& file);

/// Writes a synthetic `bitnet` model of configuration `c` to `path` (streamed: one tensor
/// in memory at a time): ternary projections as TQ2_0 with values drawn uniformly from
/// {-1, 0, 1} and one scale d per tensor in [0.5, 1.5) / sqrt(K), norms in [0.9, 1.1),
/// a token_embd in [-1, 1) of c.embedding (F16, BF16 or F32; output.weight likewise when
/// c.separate_head), tokens "<t0>" .. "<tV-1>" (tokenizer.ggml.model
/// "gpt2", no merges), bitnet.hidden_activation "relu2" or "silu" (c.ffn_activation), all from `seed`: the same seed writes the same bytes.
/// Errors: check_bitnet_config's; IoError.
Result<void> write_synthetic_bitnet(const std::string& path, const BitNetConfig& c, std::uint64_t seed);

/// The name map binding a `bitnet` file to the example model's parameters
/// (examples/bitnet/bitnet.tri, layer `layer`): "blk.{i}.attn_q.weight=<layer>.blk.{i}.attn_q",
/// ..., "token_embd.weight=<layer>.token_embd", "output_norm.weight=<layer>.output_norm",
/// "output.weight=<layer>.output".
/// The ternary tensors' derived scales follow (`<layer>.blk.{i}.attn_q_scale`).
std::vector<std::string> bitnet_name_map(const std::string& layer);

}  // namespace ternjit::formats
