// SPDX-License-Identifier: Apache-2.0
// bitnet_gguf.cpp - llama.cpp `bitnet` configuration and synthetic model files (bitnet_gguf.h).
#include "formats/bitnet_gguf.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string_view>

#include "formats/text.h"
#include "ir/ir.h"
#include "ir/numeric.h"
#include "ir/tensor.h"

namespace ternjit::formats {
namespace {

constexpr std::int64_t kQK = 256;  // TQ2_0 values per block
constexpr std::size_t kTq2Bytes = 66;

Result<void> bad(const std::string& why) { return make_error(ErrorCode::InvalidArgument, "bitnet config: " + why); }

// splitmix64: a small, fast, seedable stream (the file's bytes depend only on the seed).
struct Rng {
  std::uint64_t s;
  std::uint64_t next() {
    std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1) from the top 24 bits.
  float unit() { return static_cast<float>(next() >> 40) * (1.0f / 16777216.0f); }
};

// A different stream per tensor, so a tensor's content does not depend on the others'.
Rng tensor_rng(std::uint64_t seed, std::size_t index) {
  Rng r{seed ^ (0xD1B54A32D192ED03ull * (index + 1))};
  r.next();
  return r;
}

GgufKv kv_u32(std::string key, std::uint64_t v) {
  GgufValue x;
  x.type = GgufValueType::U32;
  x.u = v;
  return {std::move(key), std::move(x)};
}
GgufKv kv_f32(std::string key, double v) {
  GgufValue x;
  x.type = GgufValueType::F32;
  x.f = static_cast<double>(static_cast<float>(v));
  return {std::move(key), std::move(x)};
}
GgufKv kv_str(std::string key, std::string v) {
  GgufValue x;
  x.type = GgufValueType::String;
  x.str = std::move(v);
  return {std::move(key), std::move(x)};
}

// A ternary projection (K, N) as TQ2_0: N rows of K / 256 blocks, every block's d the
// tensor's one scale.
GgufTensorSource ternary_tensor(std::string name, std::int64_t k, std::int64_t n, std::uint64_t seed,
                                std::size_t index) {
  GgufTensorSource t;
  t.name = std::move(name);
  t.type = GgufTensorType::TQ2_0;
  t.dims = {static_cast<std::uint64_t>(k), static_cast<std::uint64_t>(n)};
  t.fill = [seed, index, k](std::span<std::uint8_t> out) -> Result<void> {
    Rng r = tensor_rng(seed, index);
    const float d = (0.5f + r.unit()) / std::sqrt(static_cast<float>(k));
    std::int8_t values[kQK];
    for (std::size_t b = 0; b * kTq2Bytes < out.size(); ++b) {
      for (std::int64_t e = 0; e < kQK; e += 32) {
        const std::uint64_t bits = r.next();  // 32 draws of 2 bits (code 3 folds onto 0: a zero twice as often)
        for (int j = 0; j < 32; ++j) {
          const int code = static_cast<int>(bits >> (2 * j) & 3);
          values[e + j] = static_cast<std::int8_t>(code == 3 ? 0 : code - 1);
        }
      }
      encode_tq2_0_block(values, d, out.data() + b * kTq2Bytes);
    }
    return success();
  };
  return t;
}

// An F32 norm weight (n) in [0.9, 1.1).
GgufTensorSource norm_tensor(std::string name, std::int64_t n, std::uint64_t seed, std::size_t index) {
  GgufTensorSource t;
  t.name = std::move(name);
  t.type = GgufTensorType::F32;
  t.dims = {static_cast<std::uint64_t>(n)};
  t.fill = [seed, index](std::span<std::uint8_t> out) -> Result<void> {
    Rng r = tensor_rng(seed, index);
    for (std::size_t i = 0; i < out.size(); i += 4) {
      const float v = 0.9f + 0.2f * r.unit();
      std::memcpy(out.data() + i, &v, 4);
    }
    return success();
  };
  return t;
}

}  // namespace

BitNetConfig tiny_bitnet_config() {
  BitNetConfig c;
  c.blocks = 2;
  c.hidden = 256;
  c.heads = 4;
  c.kv_heads = 2;
  c.ffn = 512;
  c.vocab = 50;
  c.context = 64;
  return c;
}

Result<void> check_bitnet_decoder(const BitNetConfig& c) {
  const std::pair<const char*, std::int64_t> counts[] = {{"block_count", c.blocks},
                                                         {"embedding_length", c.hidden},
                                                         {"head_count", c.heads},
                                                         {"head_count_kv", c.kv_heads},
                                                         {"feed_forward_length", c.ffn},
                                                         {"vocab size", c.vocab},
                                                         {"context_length", c.context}};
  for (const auto& [name, v] : counts)
    if (v <= 0 || v > (std::int64_t{1} << 31)) return bad(std::string(name) + " = " + std::to_string(v) + " is out of range");
  if (c.heads % c.kv_heads != 0)
    return bad("head_count " + std::to_string(c.heads) + " is not a multiple of head_count_kv " + std::to_string(c.kv_heads));
  if (c.hidden % c.heads != 0 || bitnet_head_dim(c) % 2 != 0)
    return bad("embedding_length " + std::to_string(c.hidden) + " / head_count " + std::to_string(c.heads) +
               " is not an even head dimension");
  if (c.blocks > kMaxBitnetBlocks)
    return bad("block_count = " + std::to_string(c.blocks) + " is more than the " + std::to_string(kMaxBitnetBlocks) +
               " blocks the decoder unrolls within the DSL's budget of expression nodes per function");
  // The matrices the decoder declares ([E, HQ*D] = [E, E], [E, HKV*D] and [HQ*D, E] at most
  // that, [E, F], [F, E], [V, E]) are types of at most 2^60 elements (ir::kMaxElements).
  const std::pair<const char*, std::int64_t> matrices[] = {{"embedding_length", c.hidden},
                                                           {"feed_forward_length", c.ffn},
                                                           {"vocab size", c.vocab}};
  for (const auto& [name, n] : matrices)
    if (!ir::mul_extents(n, c.hidden))
      return bad(std::string(name) + " " + std::to_string(n) + " x embedding_length " + std::to_string(c.hidden) +
                 " is a matrix of more than 2^60 elements");
  if (!std::isfinite(c.rope_theta) || c.rope_theta <= 0) return bad("rope.freq_base must be positive");
  if (!std::isfinite(c.rms_eps) || c.rms_eps <= 0) return bad("layer_norm_rms_epsilon must be positive");
  for (const auto& [name, kind] : {std::pair{"embedding", c.embedding}, std::pair{"kv_cache", c.kv_cache}})
    if (!is_float(kind))
      return bad(std::string(name) + " is " + std::string(elem_name(kind)) + ", not f16, bf16 or f32");
  return success();
}

Result<void> check_bitnet_config(const BitNetConfig& c) {
  TERNJIT_TRY_VOID(check_bitnet_decoder(c));
  if (c.hidden % kQK != 0 || c.ffn % kQK != 0)
    return bad("embedding_length and feed_forward_length must be multiples of 256 (TQ2_0 blocks), got " +
               std::to_string(c.hidden) + " and " + std::to_string(c.ffn));
  return success();
}

Result<BitNetConfig> bitnet_config(const GgufFile& file) {
  auto invalid = [](const std::string& why) { return make_error(ErrorCode::InvalidInput, why); };
  TERNJIT_TRY(std::string arch, file.get_string("general.architecture"));
  if (arch != "bitnet") return invalid("general.architecture is " + quoted_printable(arch) + ", not 'bitnet'");
  BitNetConfig c;
  const std::pair<const char*, std::int64_t*> ints[] = {{"bitnet.block_count", &c.blocks},
                                                        {"bitnet.embedding_length", &c.hidden},
                                                        {"bitnet.attention.head_count", &c.heads},
                                                        {"bitnet.attention.head_count_kv", &c.kv_heads},
                                                        {"bitnet.feed_forward_length", &c.ffn},
                                                        {"bitnet.context_length", &c.context}};
  for (const auto& [key, out] : ints) {
    auto v = file.get_int(key);
    if (!v.ok()) return invalid(v.error().message);
    *out = v.value();
  }
  if (auto theta = file.get_float("bitnet.rope.freq_base"); theta.ok()) c.rope_theta = theta.value();
  if (auto eps = file.get_float("bitnet.attention.layer_norm_rms_epsilon"); eps.ok()) c.rms_eps = eps.value();
  if (file.find("bitnet.hidden_activation")) {
    auto act = file.get_string("bitnet.hidden_activation");
    if (!act.ok()) return invalid(act.error().message);
    if (act.value() != "relu2" && act.value() != "silu")
      return invalid("bitnet.hidden_activation is " + quoted_printable(act.value()) + ": ternjit runs 'relu2' and 'silu'");
    c.ffn_activation = act.value() == "silu" ? BitNetActivation::Silu : BitNetActivation::Relu2;
  }
  const GgufValue* tokens = file.find("tokenizer.ggml.tokens");
  if (!tokens || tokens->type != GgufValueType::Array) return invalid("no tokenizer.ggml.tokens array (the vocabulary)");
  c.vocab = static_cast<std::int64_t>(tokens->array_count);
  // The table as stored when it is a float type the decoder declares; another (Q8_0, ...)
  // is converted to f16 at bind.
  if (const GgufTensor* e = file.find_tensor("token_embd.weight")) {
    if (e->type == GgufTensorType::F32) c.embedding = ElemKind::F32;
    if (e->type == GgufTensorType::BF16) c.embedding = ElemKind::BF16;
  }
  // llama.cpp's `bitnet` ties its head to token_embd unless the file has an output table.
  c.separate_head = file.find_tensor("output.weight") != nullptr;
  if (auto ok = check_bitnet_config(c); !ok.ok()) return invalid(ok.error().message);
  return c;
}

Result<void> write_synthetic_bitnet(const std::string& path, const BitNetConfig& c, std::uint64_t seed) {
  TERNJIT_TRY_VOID(check_bitnet_config(c));
  std::vector<GgufKv> md;
  md.push_back(kv_str("general.architecture", "bitnet"));
  md.push_back(kv_str("general.name", "ternjit synthetic bitnet"));
  md.push_back(kv_u32("bitnet.block_count", static_cast<std::uint64_t>(c.blocks)));
  md.push_back(kv_u32("bitnet.context_length", static_cast<std::uint64_t>(c.context)));
  md.push_back(kv_u32("bitnet.embedding_length", static_cast<std::uint64_t>(c.hidden)));
  md.push_back(kv_u32("bitnet.feed_forward_length", static_cast<std::uint64_t>(c.ffn)));
  md.push_back(kv_u32("bitnet.attention.head_count", static_cast<std::uint64_t>(c.heads)));
  md.push_back(kv_u32("bitnet.attention.head_count_kv", static_cast<std::uint64_t>(c.kv_heads)));
  md.push_back(kv_u32("bitnet.rope.dimension_count", static_cast<std::uint64_t>(bitnet_head_dim(c))));
  md.push_back(kv_f32("bitnet.rope.freq_base", c.rope_theta));
  md.push_back(kv_f32("bitnet.attention.layer_norm_rms_epsilon", c.rms_eps));
  md.push_back(kv_u32("bitnet.vocab_size", static_cast<std::uint64_t>(c.vocab)));
  md.push_back(kv_str("bitnet.hidden_activation", c.ffn_activation == BitNetActivation::Silu ? "silu" : "relu2"));
  md.push_back(kv_str("tokenizer.ggml.model", "gpt2"));
  std::vector<GgufValue> tokens, types;
  for (std::int64_t v = 0; v < c.vocab; ++v) {
    GgufValue s;
    s.type = GgufValueType::String;
    s.str = "<t" + std::to_string(v) + ">";
    tokens.push_back(std::move(s));
    GgufValue t;
    t.type = GgufValueType::I32;
    t.i = 1;  // LLAMA_TOKEN_TYPE_NORMAL
    types.push_back(std::move(t));
  }
  TERNJIT_TRY(GgufValue token_array, make_gguf_array(GgufValueType::String, tokens));
  TERNJIT_TRY(GgufValue type_array, make_gguf_array(GgufValueType::I32, types));
  TERNJIT_TRY(GgufValue merges, make_gguf_array(GgufValueType::String, {}));
  md.push_back({"tokenizer.ggml.tokens", std::move(token_array)});
  md.push_back({"tokenizer.ggml.token_type", std::move(type_array)});
  md.push_back({"tokenizer.ggml.merges", std::move(merges)});
  md.push_back(kv_u32("tokenizer.ggml.bos_token_id", 0));
  md.push_back(kv_u32("tokenizer.ggml.eos_token_id", static_cast<std::uint64_t>(c.vocab - 1)));

  std::vector<GgufTensorSource> ts;
  auto index = [&] { return ts.size(); };
  for (const char* table : {"token_embd.weight", "output.weight"}) {
    if (std::string_view(table) == "output.weight" && !c.separate_head) break;
    GgufTensorSource e;
    e.name = table;
    e.type = c.embedding == ElemKind::F32    ? GgufTensorType::F32
             : c.embedding == ElemKind::BF16 ? GgufTensorType::BF16
                                             : GgufTensorType::F16;
    e.dims = {static_cast<std::uint64_t>(c.hidden), static_cast<std::uint64_t>(c.vocab)};
    e.fill = [seed, kind = c.embedding, index = index()](std::span<std::uint8_t> out) -> Result<void> {
      Rng r = tensor_rng(seed, index);
      const auto width = static_cast<std::size_t>(elem_bits(kind) / 8);
      for (std::size_t i = 0; i < out.size(); i += width) ir::encode_element(kind, 2.0f * r.unit() - 1.0f, out.data() + i);
      return success();
    };
    ts.push_back(std::move(e));
  }
  ts.push_back(norm_tensor("output_norm.weight", c.hidden, seed, index()));
  const std::int64_t e = c.hidden, q = c.heads * bitnet_head_dim(c), kv = c.kv_heads * bitnet_head_dim(c), f = c.ffn;
  for (std::int64_t i = 0; i < c.blocks; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    ts.push_back(norm_tensor(b + "attn_norm.weight", e, seed, index()));
    ts.push_back(ternary_tensor(b + "attn_q.weight", e, q, seed, index()));
    ts.push_back(ternary_tensor(b + "attn_k.weight", e, kv, seed, index()));
    ts.push_back(ternary_tensor(b + "attn_v.weight", e, kv, seed, index()));
    ts.push_back(norm_tensor(b + "attn_sub_norm.weight", q, seed, index()));
    ts.push_back(ternary_tensor(b + "attn_output.weight", q, e, seed, index()));
    ts.push_back(norm_tensor(b + "ffn_norm.weight", e, seed, index()));
    ts.push_back(ternary_tensor(b + "ffn_gate.weight", e, f, seed, index()));
    ts.push_back(ternary_tensor(b + "ffn_up.weight", e, f, seed, index()));
    ts.push_back(norm_tensor(b + "ffn_sub_norm.weight", f, seed, index()));
    ts.push_back(ternary_tensor(b + "ffn_down.weight", f, e, seed, index()));
  }
  return write_gguf_streamed(path, md, ts);
}

std::vector<std::string> bitnet_name_map(const std::string& layer) {
  std::vector<std::string> rules{"token_embd.weight=" + layer + ".token_embd",
                                 "output_norm.weight=" + layer + ".output_norm"};
  for (const char* t : {"attn_norm", "attn_q", "attn_k", "attn_v", "attn_sub_norm", "attn_output", "ffn_norm",
                        "ffn_gate", "ffn_up", "ffn_sub_norm", "ffn_down"})
    rules.push_back("blk.{i}." + std::string(t) + ".weight=" + layer + ".blk.{i}." + t);
  rules.push_back("output.weight=" + layer + ".output");  // a separate head, when the file has one
  return rules;
}

}  // namespace ternjit::formats
