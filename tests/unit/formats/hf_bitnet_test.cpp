// SPDX-License-Identifier: Apache-2.0
// hf_bitnet_test.cpp - Hugging Face BitNet checkpoint directories: config.json and the tensors
// read into the decoder's configuration, sharded checkpoints, the name map, and every
// refusal naming its field or tensor (tests/python/test_hf_bitnet.py runs transformers' own).
#include "formats/hf_bitnet.h"
#include "formats/safetensors.h"
#include "formats/weight_file.h"

#include <doctest/doctest.h>

#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstdint>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

namespace ternjit {
namespace {

using formats::StTensor;
using nlohmann::json;

constexpr std::int64_t kE = 256, kF = 512, kKv = 128, kV = 40;

// The structure of microsoft/bitnet-b1.58-2B-4T's config.json, scaled down.
json tiny_config(const std::string& linear_class, const std::string& mode) {
  return json{{"architectures", {"BitNetForCausalLM"}},
              {"model_type", "bitnet"},
              {"hidden_size", kE},
              {"intermediate_size", kF},
              {"num_hidden_layers", 1},
              {"num_attention_heads", 4},
              {"num_key_value_heads", 2},
              {"vocab_size", kV},
              {"max_position_embeddings", 64},
              {"hidden_act", "relu2"},
              {"rms_norm_eps", 1e-5},
              {"rope_theta", 500000.0},
              {"rope_scaling", nullptr},
              {"tie_word_embeddings", true},
              {"attention_bias", false},
              {"torch_dtype", "bfloat16"},
              {"quantization_config", {{"quant_method", "bitnet"}, {"linear_class", linear_class}, {"quantization_mode", mode}}}};
}

StTensor bf16_tensor(std::string name, std::vector<std::int64_t> shape, float value) {
  StTensor t;
  t.name = std::move(name);
  t.dtype = "BF16";
  t.kind = ElemKind::BF16;
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  t.shape = std::move(shape);
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value) >> 16;
  std::vector<std::uint8_t> bytes;
  for (std::int64_t i = 0; i < n; ++i) {
    bytes.push_back(static_cast<std::uint8_t>(bits & 0xFF));
    bytes.push_back(static_cast<std::uint8_t>(bits >> 8));
  }
  t.bytes = ir::SharedBytes::adopt(std::move(bytes));
  return t;
}

// The tensors of a one-block checkpoint: packed (U8 codes of +1 / 0 and a weight_scale) or
// float master weights.
std::vector<StTensor> tiny_tensors(bool packed) {
  std::vector<StTensor> ts;
  ts.push_back(bf16_tensor("model.embed_tokens.weight", {kV, kE}, 0.5f));
  ts.push_back(bf16_tensor("model.norm.weight", {kE}, 1.0f));
  const std::string b = "model.layers.0.";
  for (const char* n : {"input_layernorm", "post_attention_layernorm", "self_attn.attn_sub_norm"})
    ts.push_back(bf16_tensor(b + n + ".weight", {kE}, 1.0f));
  ts.push_back(bf16_tensor(b + "mlp.ffn_sub_norm.weight", {kF}, 1.0f));
  const std::tuple<const char*, std::int64_t, std::int64_t> projections[] = {
      {"self_attn.q_proj", kE, kE}, {"self_attn.k_proj", kKv, kE}, {"self_attn.v_proj", kKv, kE},
      {"self_attn.o_proj", kE, kE}, {"mlp.gate_proj", kF, kE},     {"mlp.up_proj", kF, kE},
      {"mlp.down_proj", kE, kF}};
  for (const auto& [name, n, k] : projections) {
    if (packed) {
      // Planes 0 and 2 hold +1 (code 2), planes 1 and 3 hold 0 (code 1): 0b01100110.
      ts.push_back(formats::make_u8_tensor(b + name + ".weight", {n / 4, k},
                                           std::vector<std::uint8_t>(static_cast<std::size_t>(n / 4 * k), 0x66)));
      ts.push_back(bf16_tensor(b + name + ".weight_scale", {1}, 4.0f));
    } else {
      ts.push_back(bf16_tensor(b + name + ".weight", {n, k}, 0.25f));
    }
  }
  return ts;
}

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    static int counter = 0;
    path = std::filesystem::temp_directory_path() /
           ("ternjit_hf_bitnet_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  void write(const std::string& name, const std::string& text) const { std::ofstream(path / name) << text; }
  void write(const std::string& name, std::vector<StTensor> tensors) const {
    formats::StFile f;
    f.tensors = std::move(tensors);
    REQUIRE(formats::write_safetensors((path / name).string(), f).ok());
  }
};

// A checkpoint of tiny_config / tiny_tensors, each changed by `edit` first.
Result<HfBitNetConfig> read_edited(const std::function<void(json&)>& edit_config,
                                   const std::function<void(std::vector<StTensor>&)>& edit_tensors = {},
                                   bool packed = true) {
  TempDir dir;
  json c = tiny_config(packed ? "bitlinear" : "autobitlinear", packed ? "offline" : "online");
  edit_config(c);
  dir.write("config.json", c.dump(2));
  std::vector<StTensor> ts = tiny_tensors(packed);
  if (edit_tensors) edit_tensors(ts);
  dir.write("model.safetensors", std::move(ts));
  return formats::hf_bitnet_config(dir.path.string());
}

void refused(const Result<HfBitNetConfig>& r, const std::string& needle) {
  REQUIRE_MESSAGE(!r.ok(), "expected a refusal mentioning " << needle);
  CHECK_MESSAGE(r.error().message.find(needle) != std::string::npos, r.error().message);
}

TEST_CASE("hf bitnet: the packed form's config.json and tensors read into the decoder") {
  auto r = read_edited([](json&) {});
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
  const BitNetConfig& c = r->decoder;
  CHECK(c.blocks == 1);
  CHECK(c.hidden == kE);
  CHECK(c.heads == 4);
  CHECK(c.kv_heads == 2);
  CHECK(c.ffn == kF);
  CHECK(c.vocab == kV);
  CHECK(c.context == 64);
  CHECK(c.rope_theta == 500000.0);
  CHECK(c.rms_eps == 1e-5);
  CHECK(c.ffn_activation == BitNetActivation::Relu2);
  CHECK(c.embedding == ElemKind::BF16);
  CHECK(c.kv_cache == ElemKind::F16);
  CHECK(!c.separate_head);
  CHECK(r->weights == HfBitNetWeights::Packed);
  REQUIRE(r->files.size() == 1);
  CHECK(r->files[0].ends_with("model.safetensors"));

  // transformers 5's rope_parameters, defaults for absent keys, silu.
  auto v5 = read_edited([](json& j) {
    j.erase("rope_theta");
    j.erase("rope_scaling");
    j.erase("num_key_value_heads");
    j.erase("rms_norm_eps");
    j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 10000.0}};
    j["hidden_act"] = "silu";
    j["quantization_config"]["modules_to_not_convert"] = {"lm_head"};
  }, [](std::vector<StTensor>& ts) {
    for (StTensor& t : ts)
      if (t.name.find("k_proj.weight") != std::string::npos || t.name.find("v_proj.weight") != std::string::npos)
        if (t.kind == ElemKind::U8) t = formats::make_u8_tensor(t.name, {kE / 4, kE}, std::vector<std::uint8_t>(kE / 4 * kE, 0x55));
  });
  REQUIRE_MESSAGE(v5.ok(), (v5.ok() ? "" : v5.error().message));
  CHECK(v5->decoder.rope_theta == 10000.0);
  CHECK(v5->decoder.kv_heads == 4);
  CHECK(v5->decoder.rms_eps == 1e-5);
  CHECK(v5->decoder.ffn_activation == BitNetActivation::Silu);
}

TEST_CASE("hf bitnet: master weights (autobitlinear, online), and the name map binds every parameter") {
  TempDir dir;
  dir.write("config.json", tiny_config("autobitlinear", "online").dump());
  dir.write("model.safetensors", tiny_tensors(false));
  auto r = formats::hf_bitnet_config(dir.path.string());
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
  CHECK(r->weights == HfBitNetWeights::Master);
  const std::vector<std::string> rules = formats::hf_bitnet_name_map("BitNet");
  auto names = formats::NameMap::parse(rules);
  REQUIRE(names.ok());
  auto w = formats::WeightFile::open(r->files[0], names.value());
  REQUIRE(w.ok());
  for (const char* p : {"BitNet.token_embd", "BitNet.output_norm", "BitNet.blk.0.attn_norm", "BitNet.blk.0.attn_q",
                        "BitNet.blk.0.attn_q_scale", "BitNet.blk.0.attn_sub_norm", "BitNet.blk.0.attn_output_scale",
                        "BitNet.blk.0.ffn_norm", "BitNet.blk.0.ffn_sub_norm", "BitNet.blk.0.ffn_down"}) {
    auto o = w->find(p);
    REQUIRE(o.ok());
    CHECK_MESSAGE(o.value() != nullptr, "no offer " << p);
  }
  // The packed form's scale is 1 / weight_scale (BitLinear divides by it).
  TempDir packed;
  packed.write("config.json", tiny_config("bitlinear", "offline").dump());
  packed.write("model.safetensors", tiny_tensors(true));
  auto pw = formats::WeightFile::open((packed.path / "model.safetensors").string(), names.value());
  REQUIRE(pw.ok());
  auto scale = pw->find("BitNet.blk.0.ffn_up_scale");
  REQUIRE((scale.ok() && scale.value() != nullptr));
  auto s = pw->load(*scale.value(), ElemKind::F32, {kF}, "p");
  REQUIRE(s.ok());
  CHECK(s->at(0) == 0.25);
}

TEST_CASE("hf bitnet: a sharded checkpoint is read through its index") {
  TempDir dir;
  dir.write("config.json", tiny_config("bitlinear", "offline").dump());
  std::vector<StTensor> ts = tiny_tensors(true), first, second;
  json map = json::object();
  for (StTensor& t : ts) {
    const bool a = t.name.find("mlp") == std::string::npos;
    map[t.name] = a ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
    (a ? first : second).push_back(std::move(t));
  }
  dir.write("model-00001-of-00002.safetensors", std::move(first));
  dir.write("model-00002-of-00002.safetensors", std::move(second));
  dir.write("model.safetensors.index.json", json{{"metadata", json::object()}, {"weight_map", map}}.dump());
  auto r = formats::hf_bitnet_config(dir.path.string());
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
  REQUIRE(r->files.size() == 2);
  CHECK(r->files[0].ends_with("model-00001-of-00002.safetensors"));

  // An index naming a file outside the directory, or the wrong shard.
  map["model.norm.weight"] = "../model.safetensors";
  dir.write("model.safetensors.index.json", json{{"weight_map", map}}.dump());
  refused(formats::hf_bitnet_config(dir.path.string()), "not a file name in the checkpoint directory");
  map["model.norm.weight"] = "model-00002-of-00002.safetensors";
  dir.write("model.safetensors.index.json", json{{"weight_map", map}}.dump());
  refused(formats::hf_bitnet_config(dir.path.string()), "which the index places in");
}

TEST_CASE("hf bitnet: every configuration the decoder does not compute is refused by name") {
  TempDir empty;
  auto none = formats::hf_bitnet_config(empty.path.string());
  REQUIRE(!none.ok());
  CHECK(none.error().code == ErrorCode::NotFound);
  refused(read_edited([](json& j) { j["model_type"] = "llama"; }), "'model_type' is \"llama\"");
  refused(read_edited([](json& j) { j["architectures"] = {"BitNetModel"}; }), "'architectures'");
  refused(read_edited([](json& j) { j.erase("hidden_size"); }), "'hidden_size' is missing");
  refused(read_edited([](json& j) { j["num_attention_heads"] = -4; }), "'num_attention_heads' is -4");
  refused(read_edited([](json& j) { j["head_dim"] = 32; }), "'head_dim' is 32");
  refused(read_edited([](json& j) { j["hidden_act"] = "gelu"; }), "'hidden_act' is \"gelu\"");
  refused(read_edited([](json& j) { j["attention_bias"] = true; }), "'attention_bias' is true");
  // Untied (transformers' default when absent): the head is lm_head.weight, of embed_tokens' dtype.
  refused(read_edited([](json& j) { j["tie_word_embeddings"] = false; }), "no tensor 'lm_head.weight'");
  refused(read_edited([](json& j) { j.erase("tie_word_embeddings"); }), "no tensor 'lm_head.weight'");
  auto untied = read_edited([](json& j) { j.erase("tie_word_embeddings"); },
                            [](std::vector<StTensor>& ts) { ts.push_back(bf16_tensor("lm_head.weight", {kV, kE}, 0.25f)); });
  REQUIRE_MESSAGE(untied.ok(), (untied.ok() ? "" : untied.error().message));
  CHECK(untied->decoder.separate_head);
  refused(read_edited([](json& j) { j["tie_word_embeddings"] = false; },
                      [](std::vector<StTensor>& ts) {
                        const std::vector<float> head(kV * kE, 0.25f);
                        ts.push_back(formats::make_f32_tensor("lm_head.weight", {kV, kE}, head));
                      }),
          "lm_head.weight is f32 while model.embed_tokens.weight is bf16");
  refused(read_edited([](json& j) { j["rope_scaling"] = {{"rope_type", "llama3"}}; }), "'rope_type' is \"llama3\"");
  refused(read_edited([](json& j) { j["rope_parameters"] = {{"rope_type", "yarn"}, {"rope_theta", 1e4}}; }), "\"yarn\"");
  refused(read_edited([](json& j) { j["rms_norm_eps"] = "small"; }), "'rms_norm_eps' is \"small\"");
  refused(read_edited([](json& j) { j.erase("quantization_config"); }), "no 'quantization_config'");
  refused(read_edited([](json& j) { j["quantization_config"]["quant_method"] = "gptq"; }), "'quant_method' is \"gptq\"");
  refused(read_edited([](json& j) { j["quantization_config"]["linear_class"] = "linear"; }), "'linear_class' is \"linear\"");
  refused(read_edited([](json& j) { j["quantization_config"]["use_rms_norm"] = true; }), "'use_rms_norm' is true");
  refused(read_edited([](json& j) { j["quantization_config"]["modules_to_not_convert"] = {"q_proj"}; }),
          "'modules_to_not_convert'");
  refused(read_edited([](json& j) { j["quantization_config"] = {{"quant_method", "bitnet"}, {"linear_class", "autobitlinear"}}; }),
          "\"autobitlinear\" with quantization_mode \"offline\"");
  refused(read_edited([](json& j) { j["intermediate_size"] = 500; }), "multiples of 256");
  // Tensors: the form quantization_config says, present, shaped.
  refused(read_edited([](json&) {}, [](std::vector<StTensor>& ts) { std::erase_if(ts, [](const StTensor& t) {
            return t.name == "model.layers.0.mlp.up_proj.weight_scale"; }); }),
          "has no 'model.layers.0.mlp.up_proj.weight_scale'");
  refused(read_edited([](json&) {}, [](std::vector<StTensor>& ts) { std::erase_if(ts, [](const StTensor& t) {
            return t.name == "model.norm.weight"; }); }),
          "no tensor 'model.norm.weight'");
  refused(read_edited([](json& j) { j["quantization_config"]["linear_class"] = "bitlinear"; }, {}, false),
          "quantization_config says packed weights");
  refused(read_edited([](json& j) { j["quantization_config"]["linear_class"] = "autobitlinear"; j["quantization_config"]["quantization_mode"] = "online"; }),
          "quantization_config says float master weights");
  refused(read_edited([](json& j) { j["vocab_size"] = 41; }), "has shape [40, 256], not [41, 256]");
  refused(read_edited([](json&) {}, [](std::vector<StTensor>& ts) {
            for (StTensor& t : ts)
              if (t.name == "model.layers.0.self_attn.o_proj.weight") t = formats::make_u8_tensor(t.name, {kE / 4, kE / 2}, std::vector<std::uint8_t>(kE / 4 * kE / 2, 0x55));
          }),
          "rows packed 4 to a byte");
  // Not JSON, or too deep.
  TempDir bad;
  bad.write("config.json", "{\"model_type\": ");
  refused(formats::hf_bitnet_config(bad.path.string()), "not valid JSON");
  bad.write("config.json", std::string(100, '[') + std::string(100, ']'));
  refused(formats::hf_bitnet_config(bad.path.string()), "nested deeper");
}

TEST_CASE("hf bitnet: a weight_scale whose reciprocal is not finite is refused, not bound as inf") {
  // Subnormal scales pass "finite and non-zero", yet 1 / weight_scale overflows f32: bound, every
  // output of the decoder was +-inf with exit 0 (issue 33, item 12).
  auto names = formats::NameMap::parse(formats::hf_bitnet_name_map("BitNet"));
  REQUIRE(names.ok());
  const std::string scale = "model.layers.0.self_attn.q_proj.weight_scale";
  // The scale as `tensor`, bound to the q projection's multiplier of kind `kind`.
  auto bind_scale = [&](const StTensor& tensor, ElemKind kind) {
    TempDir dir;
    std::vector<StTensor> ts = tiny_tensors(true);
    for (StTensor& t : ts)
      if (t.name == scale) t = tensor;
    dir.write("model.safetensors", std::move(ts));
    auto w = formats::WeightFile::open((dir.path / "model.safetensors").string(), names.value());
    REQUIRE(w.ok());
    auto offer = w->find("BitNet.blk.0.attn_q_scale");
    REQUIRE((offer.ok() && offer.value() != nullptr));
    return w->load(*offer.value(), kind, {kE}, "parameter 'BitNet.blk.0.attn_q_scale'");
  };
  const StTensor subnormal[] = {formats::make_f32_tensor(scale, {1}, std::vector<float>{1e-45f}),
                                formats::make_f32_tensor(scale, {1}, std::vector<float>{1e-39f}),
                                bf16_tensor(scale, {1}, std::bit_cast<float>(std::uint32_t{0x00010000}))};  // bf16 0x0001
  for (const StTensor& t : subnormal) {
    auto r = bind_scale(t, ElemKind::F32);
    REQUIRE(!r.ok());
    CHECK(r.error().code == ErrorCode::InvalidInput);
    CHECK_MESSAGE(r.error().message.find("with a finite reciprocal as f32") != std::string::npos, r.error().message);
    CHECK_MESSAGE(r.error().message.find(scale) != std::string::npos, r.error().message);
  }
  // The smallest normal f32 still has one; 1e-5 has one in f32 but not in an f16 parameter.
  auto normal = bind_scale(formats::make_f32_tensor(scale, {1}, std::vector<float>{1.2e-38f}), ElemKind::F32);
  REQUIRE_MESSAGE(normal.ok(), (normal.ok() ? "" : normal.error().message));
  CHECK(std::isfinite(normal->at(0)));
  CHECK(bind_scale(formats::make_f32_tensor(scale, {1}, std::vector<float>{1e-5f}), ElemKind::F32).ok());
  auto half = bind_scale(formats::make_f32_tensor(scale, {1}, std::vector<float>{1e-5f}), ElemKind::F16);
  REQUIRE(!half.ok());
  CHECK_MESSAGE(half.error().message.find("with a finite reciprocal as f16") != std::string::npos, half.error().message);
}

}  // namespace
}  // namespace ternjit
