// SPDX-License-Identifier: Apache-2.0
// hf_bitnet.cpp - Hugging Face BitNet checkpoint directories: config.json, the safetensors files, the name map.
#include "formats/hf_bitnet.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <initializer_list>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <tuple>

#include <nlohmann/json.hpp>

#include "formats/bitnet_gguf.h"
#include "formats/mapped_file.h"
#include "formats/safetensors.h"
#include "formats/text.h"
#include "ir/tensor.h"

namespace ternjit::formats {
namespace {

using nlohmann::json;

// JSON nested deeper than this is refused before parsing (config.json nests 2 levels).
constexpr int kMaxDepth = 16;

int json_depth(std::string_view text) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    if (c == '{' || c == '[') deepest = std::max(deepest, ++depth);
    if (c == '}' || c == ']') --depth;
  }
  return deepest;
}

// A JSON value from the file for a message: its text cut to 200 bytes and made printable
// (text.h), so neither a huge array nor an escape sequence reaches the terminal.
std::string shown(const json& v) {
  const std::string text = v.dump(-1, ' ', false, json::error_handler_t::replace);
  return text.size() <= 200 ? printable(text) : printable(text.substr(0, 200)) + "...";
}

Result<json> read_json(const std::string& path) {
  TERNJIT_TRY(ir::SharedBytes bytes, map_file(path));
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  if (json_depth(text) > kMaxDepth)
    return make_error(ErrorCode::InvalidInput, path + ": JSON nested deeper than " + std::to_string(kMaxDepth) + " levels");
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return make_error(ErrorCode::InvalidInput, path + ": not valid JSON");
  if (!j.is_object()) return make_error(ErrorCode::InvalidInput, path + ": not a JSON object");
  return j;
}

// Field access on one JSON object, every error naming the file and the key.
class Fields {
 public:
  Fields(const json& object, std::string where) : object_(object), where_(std::move(where)) {}

  [[nodiscard]] Error error(const std::string& why) const { return make_error(ErrorCode::InvalidInput, where_ + ": " + why); }
  // The value of `key`, or nullptr when absent or null (transformers' default applies).
  [[nodiscard]] const json* find(const std::string& key) const {
    auto it = object_.find(key);
    return it == object_.end() || it->is_null() ? nullptr : &*it;
  }
  [[nodiscard]] Result<std::int64_t> count(const std::string& key, std::optional<std::int64_t> fallback = {}) const {
    const json* v = find(key);
    if (v == nullptr) {
      if (fallback) return *fallback;
      return error("'" + key + "' is missing");
    }
    if (!v->is_number_integer() || v->get<std::int64_t>() <= 0 || v->get<std::int64_t>() > (std::int64_t{1} << 31))
      return error("'" + key + "' is " + shown(*v) + ", not a positive integer");
    return v->get<std::int64_t>();
  }
  [[nodiscard]] Result<double> positive(const std::string& key, double fallback) const {
    const json* v = find(key);
    if (v == nullptr) return fallback;
    if (!v->is_number() || !std::isfinite(v->get<double>()) || v->get<double>() <= 0)
      return error("'" + key + "' is " + shown(*v) + ", not a positive number");
    return v->get<double>();
  }
  [[nodiscard]] Result<std::string> text(const std::string& key, const std::string& fallback) const {
    const json* v = find(key);
    if (v == nullptr) return fallback;
    if (!v->is_string()) return error("'" + key + "' is " + shown(*v) + ", not a string");
    return v->get<std::string>();
  }
  [[nodiscard]] Result<bool> flag(const std::string& key, bool fallback) const {
    const json* v = find(key);
    if (v == nullptr) return fallback;
    if (!v->is_boolean()) return error("'" + key + "' is " + shown(*v) + ", not true or false");
    return v->get<bool>();
  }
  // A string key that must be one of `allowed` (the first is the default when absent).
  [[nodiscard]] Result<std::string> one_of(const std::string& key, std::initializer_list<const char*> allowed,
                                           const std::string& why) const {
    TERNJIT_TRY(std::string v, text(key, *allowed.begin()));
    for (const char* a : allowed)
      if (v == a) return v;
    return error("'" + key + "' is \"" + printable(v) + "\": " + why);
  }

 private:
  const json& object_;
  std::string where_;
};

// RoPE: transformers 5 writes rope_parameters {rope_type, rope_theta}; older files
// rope_theta and rope_scaling at the top level. Only "default" RoPE is the decoder's.
Result<double> rope_theta(const Fields& top) {
  constexpr double kDefaultTheta = 500000.0;  // BitNetConfig.default_theta
  const std::string why = "ternjit's decoder computes default RoPE (inv_freq = theta^(-2i/D), no scaling)";
  if (const json* p = top.find("rope_parameters")) {
    if (!p->is_object()) return top.error("'rope_parameters' is " + shown(*p) + ", not an object");
    const Fields rope(*p, "rope_parameters");
    auto type = rope.one_of("rope_type", {"default"}, why);
    if (!type.ok()) return top.error(type.error().message);
    auto theta = rope.positive("rope_theta", kDefaultTheta);
    if (!theta.ok()) return top.error(theta.error().message);
    return theta.value();
  }
  if (const json* s = top.find("rope_scaling")) {
    if (!s->is_object()) return top.error("'rope_scaling' is " + shown(*s) + ", not null or an object");
    const Fields scaling(*s, "rope_scaling");
    auto type = scaling.one_of(s->contains("rope_type") ? "rope_type" : "type", {"default"}, why);
    if (!type.ok()) return top.error(type.error().message);
  }
  return top.positive("rope_theta", kDefaultTheta);
}

// quantization_config -> how the projections are stored (ternjit/bitnet.h HfBitNetWeights).
Result<HfBitNetWeights> weights_form(const Fields& top) {
  const json* q = top.find("quantization_config");
  if (q == nullptr)
    return top.error("there is no 'quantization_config': transformers then computes every projection as a float "
                     "nn.Linear (no ternary weights, no int8 activations), which is not the BitNet b1.58 model "
                     "ternjit's decoder computes");
  if (!q->is_object()) return top.error("'quantization_config' is " + shown(*q) + ", not an object");
  const Fields qc(*q, "quantization_config");
  auto wrap = [&](const Error& e) { return top.error(e.message); };
  auto method = qc.text("quant_method", "");
  if (!method.ok()) return wrap(method.error());
  if (method.value() != "bitnet")
    return top.error("quantization_config: 'quant_method' is \"" + printable(method.value()) + "\", not \"bitnet\"");
  auto linear = qc.one_of("linear_class", {"bitlinear", "autobitlinear"}, "transformers knows 'bitlinear' and 'autobitlinear'");
  if (!linear.ok()) return wrap(linear.error());
  auto mode = qc.one_of("quantization_mode", {"offline", "online"}, "transformers knows 'offline' and 'online'");
  if (!mode.ok()) return wrap(mode.error());
  auto rms = qc.flag("use_rms_norm", false);
  if (!rms.ok()) return wrap(rms.error());
  if (rms.value())
    return top.error("quantization_config: 'use_rms_norm' is true: every projection would normalize its input once "
                     "more (a LlamaRMSNorm inside BitLinear), which ternjit's decoder does not compute");
  if (const json* skip = qc.find("modules_to_not_convert")) {
    // null: transformers keeps only the tied head float. A list replaces that default, so
    // it must hold "lm_head" (else the head is quantized) and nothing else (else some
    // projection stays a float nn.Linear).
    if (!skip->is_array() || *skip != json::array({"lm_head"}))
      return top.error("quantization_config: 'modules_to_not_convert' is " + shown(*skip) +
                       ": ternjit's decoder quantizes every projection and never the head (null or [\"lm_head\"])");
  }
  // BitLinear (whatever the mode) divides by weight_scale; AutoBitLinear offline multiplies.
  if (linear.value() == "bitlinear") return HfBitNetWeights::Packed;
  if (mode.value() == "online") return HfBitNetWeights::Master;
  return top.error("quantization_config: linear_class \"autobitlinear\" with quantization_mode \"offline\" (weights "
                   "used as stored, multiplied by weight_scale) is not a form ternjit reads: it reads \"bitlinear\" "
                   "(packed) and \"autobitlinear\" with \"online\" (master weights)");
}

// The safetensors files of `dir`: model.safetensors, or the shards of its index.
Result<std::vector<std::string>> weight_files(const std::filesystem::path& dir,
                                              std::map<std::string, std::string>* shard_of) {
  const std::filesystem::path index = dir / "model.safetensors.index.json";
  std::error_code ec;
  if (!std::filesystem::exists(index, ec)) {
    const std::filesystem::path single = dir / "model.safetensors";
    if (!std::filesystem::exists(single, ec))
      return make_error(ErrorCode::NotFound, dir.string() + ": neither model.safetensors nor model.safetensors.index.json");
    return std::vector<std::string>{single.string()};
  }
  TERNJIT_TRY(json j, read_json(index.string()));
  const Fields top(j, index.string());
  const json* map = top.find("weight_map");
  if (map == nullptr || !map->is_object() || map->empty())
    return top.error("'weight_map' is missing or not an object of tensor names to file names");
  std::set<std::string> names;
  for (const auto& [tensor, file] : map->items()) {
    if (!file.is_string()) return top.error("weight_map[" + quoted_printable(tensor) + "] is " + shown(file) + ", not a file name");
    const std::string f = file.get<std::string>();
    // A shard lies in the checkpoint directory itself.
    if (f.empty() || f.find('/') != std::string::npos || f.find('\\') != std::string::npos || f == "." || f == "..")
      return top.error("weight_map[" + quoted_printable(tensor) + "] is \"" + printable(f) + "\", not a file name in the checkpoint directory");
    names.insert(f);
    (*shard_of)[tensor] = (dir / f).string();
  }
  std::vector<std::string> files;
  for (const std::string& f : names) files.push_back((dir / f).string());
  return files;
}

std::string shape_str(const std::vector<std::int64_t>& shape) { return ir::index_str(shape); }

// Every tensor of the checkpoint the decoder binds, checked for presence, dtype and shape.
class TensorCheck {
 public:
  TensorCheck(std::vector<StFile> files, std::vector<std::string> paths, std::map<std::string, std::string> shard_of)
      : files_(std::move(files)), paths_(std::move(paths)), shard_of_(std::move(shard_of)) {}

  // The tensor `name` and the file that holds it. Errors: missing; a shard that does not
  // hold what the index says.
  Result<std::pair<const StTensor*, std::string>> find(const std::string& name) const {
    for (std::size_t i = 0; i < files_.size(); ++i) {
      if (const StTensor* t = files_[i].find(name)) {
        if (auto s = shard_of_.find(name); s != shard_of_.end() && s->second != paths_[i])
          return fail(printable(paths_[i]) + ": holds '" + name + "', which the index places in " + printable(s->second));
        return std::pair{t, printable(paths_[i])};  // for messages: a shard's name comes from the index
      }
    }
    if (auto s = shard_of_.find(name); s != shard_of_.end())
      return fail(printable(s->second) + ": has no tensor '" + name + "' (the index says it does)");
    return fail(where() + ": no tensor '" + name + "'");
  }

  Result<ElemKind> float_tensor(const std::string& name, std::vector<std::int64_t> shape) const {
    TERNJIT_TRY(auto found, find(name));
    const StTensor& t = *found.first;
    if (!t.used || !is_float(t.kind))
      return fail(found.second + ": tensor '" + name + "' is " + t.dtype + ", not F32, F16 or BF16");
    if (t.shape != shape)
      return fail(found.second + ": tensor '" + name + "' has shape " + shape_str(t.shape) + ", not " + shape_str(shape));
    return t.kind;
  }

  // A projection of out_features n, in_features k in the form `form`.
  Result<void> projection(const std::string& name, std::int64_t n, std::int64_t k, HfBitNetWeights form) const {
    TERNJIT_TRY(auto found, find(name + ".weight"));
    const StTensor& t = *found.first;
    const std::string at = found.second + ": tensor '" + name + ".weight'";
    const bool has_scale = find(name + ".weight_scale").ok();
    if (form == HfBitNetWeights::Master) {
      if (!t.used || !is_float(t.kind))
        return fail(at + " is " + t.dtype + ": quantization_config says float master weights (autobitlinear, online)");
      if (t.shape != std::vector<std::int64_t>{n, k})
        return fail(at + " has shape " + shape_str(t.shape) + ", not [" + std::to_string(n) + ", " + std::to_string(k) + "]");
      if (has_scale)
        return fail(at + " has a weight_scale, which AutoBitLinear with online quantization has none of (it ternarizes "
                         "with absmean at every call)");
      return success();
    }
    if (t.kind != ElemKind::U8 || !t.used)
      return fail(at + " is " + t.dtype + ": quantization_config says packed weights (bitlinear), U8 [N/4, K]");
    if (t.shape != std::vector<std::int64_t>{n / 4, k})
      return fail(at + " has shape " + shape_str(t.shape) + ", not [" + std::to_string(n / 4) + ", " + std::to_string(k) +
                  "] (" + std::to_string(n) + " rows packed 4 to a byte)");
    auto scale = find(name + ".weight_scale");
    if (!scale.ok()) return fail(at + " has no '" + name + ".weight_scale' (BitLinear divides by it)");
    const StTensor& s = *scale.value().first;
    if (!s.used || !is_float(s.kind) || ir::checked_numel(s.shape).value_or(0) != 1)
      return fail(scale.value().second + ": tensor '" + name + ".weight_scale' is " + s.dtype + " " + shape_str(s.shape) +
                  ", not one float");
    return success();
  }

 private:
  static Error fail(std::string why) { return make_error(ErrorCode::InvalidInput, std::move(why)); }
  std::string where() const { return paths_.size() == 1 ? printable(paths_[0]) : "the checkpoint's safetensors files"; }

  std::vector<StFile> files_;
  std::vector<std::string> paths_;
  std::map<std::string, std::string> shard_of_;
};

}  // namespace

Result<HfBitNetConfig> hf_bitnet_config(const std::string& dir) {
  const std::filesystem::path root(dir);
  const std::string config_path = (root / "config.json").string();
  TERNJIT_TRY(json j, read_json(config_path));
  const Fields top(j, config_path);
  TERNJIT_TRY(std::string model_type, top.text("model_type", ""));
  if (model_type != "bitnet") return top.error("'model_type' is \"" + printable(model_type) + "\", not \"bitnet\"");
  if (const json* arch = top.find("architectures")) {
    if (!arch->is_array() || std::find(arch->begin(), arch->end(), json("BitNetForCausalLM")) == arch->end())
      return top.error("'architectures' is " + shown(*arch) + ": ternjit's decoder is BitNetForCausalLM (with its head)");
  }

  HfBitNetConfig out;
  BitNetConfig& c = out.decoder;
  TERNJIT_TRY(c.hidden, top.count("hidden_size"));
  TERNJIT_TRY(c.ffn, top.count("intermediate_size"));
  TERNJIT_TRY(c.blocks, top.count("num_hidden_layers"));
  TERNJIT_TRY(c.heads, top.count("num_attention_heads"));
  TERNJIT_TRY(c.kv_heads, top.count("num_key_value_heads", c.heads));
  TERNJIT_TRY(c.vocab, top.count("vocab_size"));
  TERNJIT_TRY(c.context, top.count("max_position_embeddings", 2048));
  if (c.hidden % c.heads != 0) return top.error("'hidden_size' " + std::to_string(c.hidden) + " is not a multiple of 'num_attention_heads'");
  if (top.find("head_dim") != nullptr) {
    TERNJIT_TRY(std::int64_t d, top.count("head_dim"));
    if (d != c.hidden / c.heads)
      return top.error("'head_dim' is " + std::to_string(d) + ": ternjit's decoder has hidden_size / num_attention_heads = " +
                       std::to_string(c.hidden / c.heads) + " (attn_sub_norm spans hidden_size)");
  }
  TERNJIT_TRY(c.rms_eps, top.positive("rms_norm_eps", 1e-5));
  TERNJIT_TRY(c.rope_theta, rope_theta(top));
  TERNJIT_TRY(std::string act,
              (top.one_of("hidden_act", {"relu2", "silu"}, "ternjit's decoder gates its FFN with relu2 or silu")));
  c.ffn_activation = act == "silu" ? BitNetActivation::Silu : BitNetActivation::Relu2;
  TERNJIT_TRY(bool bias, top.flag("attention_bias", false));
  if (bias) return top.error("'attention_bias' is true: ternjit's decoder has no projection biases");
  // false (transformers' default): the head is lm_head.weight, not embed_tokens.
  TERNJIT_TRY(bool tied, top.flag("tie_word_embeddings", false));
  c.separate_head = !tied;
  TERNJIT_TRY(out.weights, weights_form(top));
  if (auto ok = check_bitnet_config(c); !ok.ok())
    return top.error(ok.error().message + " (in llama.cpp's names: hidden_size is embedding_length, "
                                          "intermediate_size feed_forward_length)");

  std::map<std::string, std::string> shard_of;
  TERNJIT_TRY(out.files, weight_files(root, &shard_of));
  std::vector<StFile> files;
  for (const std::string& f : out.files) {
    TERNJIT_TRY(StFile st, read_safetensors(f));
    files.push_back(std::move(st));
  }
  const TensorCheck check(std::move(files), out.files, std::move(shard_of));
  const std::int64_t e = c.hidden, f = c.ffn, kv = c.kv_heads * (c.hidden / c.heads);
  TERNJIT_TRY(c.embedding, (check.float_tensor("model.embed_tokens.weight", {c.vocab, e})));
  if (c.separate_head) {
    // The decoder declares both tables of one kind: a head of another dtype would be
    // converted, which is exact only one way.
    TERNJIT_TRY(ElemKind head, (check.float_tensor("lm_head.weight", {c.vocab, e})));
    if (head != c.embedding)
      return top.error("tie_word_embeddings is false and lm_head.weight is " + std::string(elem_name(head)) +
                       " while model.embed_tokens.weight is " + std::string(elem_name(c.embedding)) +
                       ": ternjit's decoder keeps both tables in one type");
  }
  TERNJIT_TRY_VOID((check.float_tensor("model.norm.weight", {e})));
  for (std::int64_t i = 0; i < c.blocks; ++i) {
    const std::string b = "model.layers." + std::to_string(i) + ".";
    for (const char* norm : {"input_layernorm", "post_attention_layernorm", "self_attn.attn_sub_norm"})
      TERNJIT_TRY_VOID((check.float_tensor(b + norm + ".weight", {e})));
    TERNJIT_TRY_VOID((check.float_tensor(b + "mlp.ffn_sub_norm.weight", {f})));
    const std::tuple<const char*, std::int64_t, std::int64_t> projections[] = {
        {"self_attn.q_proj", e, e}, {"self_attn.k_proj", kv, e}, {"self_attn.v_proj", kv, e}, {"self_attn.o_proj", e, e},
        {"mlp.gate_proj", f, e},    {"mlp.up_proj", f, e},       {"mlp.down_proj", e, f}};
    for (const auto& [name, n, k] : projections) TERNJIT_TRY_VOID(check.projection(b + name, n, k, out.weights));
  }
  return out;
}

std::vector<std::string> hf_bitnet_name_map(const std::string& layer) {
  std::vector<std::string> rules{"model.embed_tokens.weight=" + layer + ".token_embd",
                                 "model.norm.weight=" + layer + ".output_norm", "lm_head.weight=" + layer + ".output"};
  const std::pair<const char*, const char*> block[] = {
      {"input_layernorm", "attn_norm"},       {"self_attn.q_proj", "attn_q"},
      {"self_attn.k_proj", "attn_k"},         {"self_attn.v_proj", "attn_v"},
      {"self_attn.attn_sub_norm", "attn_sub_norm"}, {"self_attn.o_proj", "attn_output"},
      {"post_attention_layernorm", "ffn_norm"}, {"mlp.gate_proj", "ffn_gate"},
      {"mlp.up_proj", "ffn_up"},               {"mlp.ffn_sub_norm", "ffn_sub_norm"},
      {"mlp.down_proj", "ffn_down"}};
  for (const auto& [hf, ours] : block)
    rules.push_back("model.layers.{i}." + std::string(hf) + ".weight=" + layer + ".blk.{i}." + ours);
  return rules;
}

}  // namespace ternjit::formats
