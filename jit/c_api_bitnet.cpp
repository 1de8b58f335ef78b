// SPDX-License-Identifier: Apache-2.0
// c_api_bitnet.cpp - the C ABI's BitNet models (ternjit.h): llama.cpp `bitnet` GGUF files,
// synthetic models, the decoder's .tri source and Hugging Face checkpoint directories, over
// ternjit/bitnet.h; the conventions of jit/c_api.cpp (jit/c_api_internal.h).
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <iterator>
#include <string>

#include "jit/c_api_internal.h"
#include "ternjit/bitnet.h"

using namespace ternjit::jit::capi;
using ternjit::ElemKind;

// A caller's ternjit_bitnet_config: at least up to rms_eps (ABI 2); ffn_activation when
// struct_size covers it (feature "bitnet-activation"), else relu^2; embedding and kv_cache
// when it covers them (feature "bitnet-dtypes"), else f16.
namespace {
constexpr std::size_t kBitnetConfigV1 = offsetof(ternjit_bitnet_config, ffn_activation);
constexpr std::size_t kBitnetConfigV2 = offsetof(ternjit_bitnet_config, embedding);

// ternjit_bitnet_config's embedding / kv_cache codes: 0 f16, 1 bf16, 2 f32.
constexpr ElemKind kBitnetFloats[] = {ElemKind::F16, ElemKind::BF16, ElemKind::F32};

ternjit::Result<ElemKind> bitnet_float_kind(const char* field, int32_t code) {
  if (code < 0 || code > 2)
    return ternjit::make_error(ternjit::ErrorCode::InvalidArgument, std::string("config->") + field + " is " +
                                                                        std::to_string(code) + " (0: f16, 1: bf16, 2: f32)");
  return kBitnetFloats[code];
}

int32_t bitnet_float_code(ElemKind k) {
  return static_cast<int32_t>(std::find(std::begin(kBitnetFloats), std::end(kBitnetFloats), k) - std::begin(kBitnetFloats));
}

ternjit_status check_bitnet_struct(const char* fn, const ternjit_bitnet_config* config) {
  if (config->struct_size < kBitnetConfigV1)
    return misuse(fn, "config->struct_size is " + std::to_string(config->struct_size) + ", expected " +
                          std::to_string(sizeof(ternjit_bitnet_config)));
  return TERNJIT_OK;
}

ternjit::Result<ternjit::BitNetConfig> from_c(const ternjit_bitnet_config* config) {
  ternjit::BitNetConfig c{config->blocks, config->hidden,  config->heads,      config->kv_heads, config->ffn,
                          config->vocab,  config->context, config->rope_theta, config->rms_eps};
  if (config->struct_size >= sizeof(ternjit_bitnet_config)) {
    TERNJIT_TRY(c.embedding, bitnet_float_kind("embedding", config->embedding));
    TERNJIT_TRY(c.kv_cache, bitnet_float_kind("kv_cache", config->kv_cache));
    if (config->separate_head != 0 && config->separate_head != 1)
      return ternjit::make_error(ternjit::ErrorCode::InvalidArgument,
                                 "config->separate_head is " + std::to_string(config->separate_head) + " (0 or 1)");
    c.separate_head = config->separate_head == 1;
  }
  if (config->struct_size >= kBitnetConfigV2) {
    if (config->ffn_activation != 0 && config->ffn_activation != 1)
      return ternjit::make_error(ternjit::ErrorCode::InvalidArgument,
                                 "config->ffn_activation is " + std::to_string(config->ffn_activation) +
                                     " (0: relu^2, 1: silu)");
    if (config->ffn_activation == 1) c.ffn_activation = ternjit::BitNetActivation::Silu;
  }
  return c;
}

// *config as a BitNetConfig for `fn`: its struct size and enum fields checked (misuse otherwise).
ternjit_status config_from_c(const char* fn, const ternjit_bitnet_config* config, ternjit::BitNetConfig* out) {
  if (auto st = check_bitnet_struct(fn, config); st != TERNJIT_OK) return st;
  auto cr = from_c(config);
  if (!cr.ok()) return misuse(fn, cr.error().message);
  *out = cr.value();
  return TERNJIT_OK;
}

// `c` into the caller's struct, as far as its struct_size reaches; a value it cannot say
// (silu without ffn_activation, a separate head without separate_head) is an error naming `what`.
ternjit_status to_c(const char* fn, const std::string& what, const ternjit::BitNetConfig& c, ternjit_bitnet_config* config) {
  ternjit_bitnet_config full = {config->struct_size, c.blocks,     c.hidden,     c.heads,
                                c.kv_heads,          c.ffn,        c.vocab,      c.context,
                                c.rope_theta,        c.rms_eps,
                                c.ffn_activation == ternjit::BitNetActivation::Silu ? 1 : 0,
                                bitnet_float_code(c.embedding), bitnet_float_code(c.kv_cache),
                                c.separate_head ? 1 : 0};
  if (config->struct_size < kBitnetConfigV2 + sizeof(int32_t) && full.ffn_activation != 0)
    return misuse(fn, what + " uses the silu FFN gate, which a config of struct_size " +
                          std::to_string(config->struct_size) + " (without ffn_activation) cannot say");
  // A caller without `embedding` builds an f16 table, which binds any float one (converted).
  if (config->struct_size < sizeof(ternjit_bitnet_config) && c.separate_head)
    return misuse(fn, what + " has its own output head (output.weight), which a config of struct_size " +
                          std::to_string(config->struct_size) + " (without separate_head) cannot say");
  std::memcpy(config, &full, std::min(config->struct_size, sizeof full));
  return TERNJIT_OK;
}
}  // namespace

extern "C" {

ternjit_status ternjit_read_bitnet_config(const char* path, ternjit_bitnet_config* config) {
  constexpr const char* fn = "ternjit_read_bitnet_config";
  return guarded(fn, [&] {
    if (path == nullptr) return misuse(fn, "path is null");
    if (config == nullptr) return misuse(fn, "config is null");
    if (auto st = check_bitnet_struct(fn, config); st != TERNJIT_OK) return st;
    auto r = ternjit::read_bitnet_config(path);
    if (!r.ok()) return fail(r.error());
    return to_c(fn, path, r.value(), config);
  });
}

ternjit_status ternjit_write_synthetic_bitnet(const char* path, const ternjit_bitnet_config* config, uint64_t seed) {
  constexpr const char* fn = "ternjit_write_synthetic_bitnet";
  return guarded(fn, [&] {
    if (path == nullptr) return misuse(fn, "path is null");
    if (config == nullptr) return misuse(fn, "config is null");
    ternjit::BitNetConfig c;
    if (auto st = config_from_c(fn, config, &c); st != TERNJIT_OK) return st;
    if (auto r = ternjit::write_synthetic_bitnet(path, c, seed); !r.ok()) return fail(r.error());
    return TERNJIT_OK;
  });
}

ternjit_status ternjit_bitnet_tri_source(const ternjit_bitnet_config* config, int64_t capacity, char* buf, size_t* len) {
  constexpr const char* fn = "ternjit_bitnet_tri_source";
  return guarded(fn, [&] {
    if (config == nullptr) return misuse(fn, "config is null");
    if (len == nullptr) return misuse(fn, "len is null");
    ternjit::BitNetConfig c;
    if (auto st = config_from_c(fn, config, &c); st != TERNJIT_OK) return st;
    // The configuration and capacity are checked there (as a GGUF file's are), before any use.
    auto source = ternjit::bitnet_tri_source(c, capacity);
    if (!source.ok()) return fail(source.error());
    const std::string& text = source.value();
    if (buf == nullptr || *len < text.size() + 1) {
      *len = text.size() + 1;
      return misuse(fn, "the buffer holds fewer than the " + std::to_string(text.size() + 1) + " bytes needed");
    }
    std::memcpy(buf, text.c_str(), text.size() + 1);
    *len = text.size();
    return TERNJIT_OK;
  });
}

ternjit_status ternjit_read_hf_bitnet_config(const char* dir, ternjit_bitnet_config* config, int32_t* weights) {
  constexpr const char* fn = "ternjit_read_hf_bitnet_config";
  return guarded(fn, [&] {
    if (dir == nullptr) return misuse(fn, "dir is null");
    if (config == nullptr) return misuse(fn, "config is null");
    if (config->struct_size < sizeof(ternjit_bitnet_config))
      return misuse(fn, "config->struct_size is " + std::to_string(config->struct_size) + ", expected " +
                            std::to_string(sizeof(ternjit_bitnet_config)) + " (a checkpoint's token table need not be f16)");
    auto r = ternjit::read_hf_bitnet_config(dir);
    if (!r.ok()) return fail(r.error());
    if (weights != nullptr) *weights = r->weights == ternjit::HfBitNetWeights::Master ? 1 : 0;
    return to_c(fn, dir, r->decoder, config);
  });
}

ternjit_status ternjit_bind_hf_bitnet(ternjit_program* program, const char* dir, const char* layer) {
  constexpr const char* fn = "ternjit_bind_hf_bitnet";
  return guarded(fn, [&] {
    if (program == nullptr) return misuse(fn, "program is null");
    if (dir == nullptr) return misuse(fn, "dir is null");
    auto r = ternjit::read_hf_bitnet_config(dir);
    if (!r.ok()) return fail(r.error());
    if (auto b = ternjit::bind_hf_bitnet(program->program, r.value(), layer ? layer : "BitNet"); !b.ok())
      return fail(b.error());
    return TERNJIT_OK;
  });
}

}  // extern "C"
