// SPDX-License-Identifier: Apache-2.0
// bitnet.cpp - the public bitnet.h over formats/bitnet_gguf.h and formats/hf_bitnet.h (bitnet_tri_source: bitnet_source.cpp).
#include "ternjit/bitnet.h"

#include "formats/bitnet_gguf.h"
#include "formats/hf_bitnet.h"

#include <algorithm>

namespace ternjit {
Result<BitNetConfig> read_bitnet_config(const std::string& path) {
  TERNJIT_TRY(formats::GgufFile file, formats::read_gguf(path));
  auto c = formats::bitnet_config(file);
  if (!c.ok()) return make_error(c.error().code, path + ": " + c.error().message);
  return c;
}

Result<void> write_synthetic_bitnet(const std::string& path, const BitNetConfig& config, std::uint64_t seed) {
  return formats::write_synthetic_bitnet(path, config, seed);
}

std::vector<std::string> bitnet_name_map(const std::string& layer) { return formats::bitnet_name_map(layer); }

Result<HfBitNetConfig> read_hf_bitnet_config(const std::string& dir) { return formats::hf_bitnet_config(dir); }

std::vector<std::string> hf_bitnet_name_map(const std::string& layer) { return formats::hf_bitnet_name_map(layer); }

Result<void> bind_hf_bitnet(Program& program, const HfBitNetConfig& config, const std::string& layer) {
  const std::vector<std::string> rules = formats::hf_bitnet_name_map(layer);
  const auto of_layer = [&](const ParamInfo& p) { return p.decl.name.starts_with(layer + "."); };
  if (std::ranges::none_of(program.params(), of_layer))
    return make_error(ErrorCode::InvalidArgument, "the program has no parameters of layer '" + layer + "'");
  for (const std::string& file : config.files) TERNJIT_TRY_VOID(program.bind_file(file, rules));
  // Strict: a checkpoint that leaves a parameter of the decoder unbound is an error now,
  // not at the first run.
  for (const ParamInfo& p : program.params()) {
    if (!p.bound && of_layer(p))
      return make_error(ErrorCode::InvalidInput, "parameter '" + p.decl.name + "' has no tensor in the checkpoint (" +
                                                     std::to_string(config.files.size()) + " safetensors file(s))");
  }
  return success();
}

}  // namespace ternjit
