// SPDX-License-Identifier: Apache-2.0
// bitnet.cpp - the public bitnet.h over formats/bitnet_gguf.h.
#include "ternjit/bitnet.h"

#include "formats/bitnet_gguf.h"

namespace ternjit {
namespace {

formats::BitNetConfig to_formats(const BitNetConfig& c) {
  formats::BitNetConfig f;
  f.blocks = c.blocks;
  f.hidden = c.hidden;
  f.heads = c.heads;
  f.kv_heads = c.kv_heads;
  f.ffn = c.ffn;
  f.vocab = c.vocab;
  f.context = c.context;
  f.rope_theta = c.rope_theta;
  f.rms_eps = c.rms_eps;
  return f;
}

}  // namespace

Result<BitNetConfig> read_bitnet_config(const std::string& path) {
  TERNJIT_TRY(formats::GgufFile file, formats::read_gguf(path));
  auto c = formats::bitnet_config(file);
  if (!c.ok()) return make_error(c.error().code, path + ": " + c.error().message);
  BitNetConfig out;
  out.blocks = c->blocks;
  out.hidden = c->hidden;
  out.heads = c->heads;
  out.kv_heads = c->kv_heads;
  out.ffn = c->ffn;
  out.vocab = c->vocab;
  out.context = c->context;
  out.rope_theta = c->rope_theta;
  out.rms_eps = c->rms_eps;
  return out;
}

Result<void> write_synthetic_bitnet(const std::string& path, const BitNetConfig& config, std::uint64_t seed) {
  return formats::write_synthetic_bitnet(path, to_formats(config), seed);
}

std::vector<std::string> bitnet_name_map(const std::string& layer) { return formats::bitnet_name_map(layer); }

}  // namespace ternjit
