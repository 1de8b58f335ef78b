// SPDX-License-Identifier: Apache-2.0
// inspect_cmd.cpp - `ternjit inspect FILE`: the tensors and metadata of a GGUF or safetensors file.
#include <cinttypes>
#include <optional>
#include <utility>
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "formats/gguf.h"
#include "formats/mapped_file.h"
#include "formats/safetensors.h"
#include "formats/text.h"
#include "formats/weight_file.h"
#include "tools/ternjit/commands.h"

namespace ternjit::cli {

namespace {

using json = nlohmann::ordered_json;

// Array elements shown before "...".
constexpr std::size_t kArrayHead = 8;

std::string_view value_type_name(formats::GgufValueType t) {
  switch (t) {
    case formats::GgufValueType::U8: return "U8";
    case formats::GgufValueType::I8: return "I8";
    case formats::GgufValueType::U16: return "U16";
    case formats::GgufValueType::I16: return "I16";
    case formats::GgufValueType::U32: return "U32";
    case formats::GgufValueType::I32: return "I32";
    case formats::GgufValueType::F32: return "F32";
    case formats::GgufValueType::Bool: return "BOOL";
    case formats::GgufValueType::String: return "STRING";
    case formats::GgufValueType::Array: return "ARRAY";
    case formats::GgufValueType::U64: return "U64";
    case formats::GgufValueType::I64: return "I64";
    case formats::GgufValueType::F64: return "F64";
  }
  return "?";
}

// A metadata value as JSON; an array as its element type, count and first elements.
json value_json(const formats::GgufValue& v) {
  switch (v.type) {
    case formats::GgufValueType::U8: case formats::GgufValueType::U16: case formats::GgufValueType::U32:
    case formats::GgufValueType::U64: return v.u;
    case formats::GgufValueType::I8: case formats::GgufValueType::I16: case formats::GgufValueType::I32:
    case formats::GgufValueType::I64: return v.i;
    case formats::GgufValueType::F32: case formats::GgufValueType::F64: return v.f;
    case formats::GgufValueType::Bool: return v.b;
    case formats::GgufValueType::String: return v.str;
    case formats::GgufValueType::Array: {
      json head = json::array();
      for (const formats::GgufValue& e : v.array_elements(kArrayHead)) head.push_back(value_json(e));
      return json{{"element_type", value_type_name(v.array_type)}, {"count", v.array_count}, {"head", head}};
    }
  }
  return nullptr;
}

// The text form of a value: JSON for numbers, a string in double quotes made printable
// (formats/text.h: no byte of the file reaches the terminal unescaped), "[TYPE x N: a, b,
// ...]" for arrays.
std::string value_text(const formats::GgufValue& v) {
  if (v.type == formats::GgufValueType::String) return "\"" + formats::printable(v.str) + "\"";
  if (v.type != formats::GgufValueType::Array) return value_json(v).dump();
  std::string s = "[" + std::string(value_type_name(v.array_type)) + " x " + std::to_string(v.array_count);
  const std::vector<formats::GgufValue> head = v.array_elements(kArrayHead);
  for (std::size_t i = 0; i < head.size(); ++i) s += (i == 0 ? ": " : ", ") + value_text(head[i]);
  return s + (v.array_count > kArrayHead ? ", ...]" : "]");
}

template <typename Dims>
std::string dims_text(const Dims& dims) {
  std::string s = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

// What a parameter binding an offer gets: a kind and shape in ternjit's orientation.
std::pair<std::string, std::vector<std::int64_t>> offer_binds(const formats::WeightFile& file,
                                                               const formats::WeightOffer& o) {
  auto shape = [&](ElemKind kind, std::size_t rank) -> std::optional<std::vector<std::int64_t>> {
    const ir::Type type{kind, std::vector<ir::Dim>(rank, ir::Dim::fixed(1)), WeightFormat::Plain};
    auto s = file.shape_for(o, type, "inspect");
    return s.ok() ? s.value() : std::nullopt;
  };
  switch (o.kind) {
    case formats::OfferKind::Safetensors:
      // A tensor of an unused dtype binds nothing (shape_for refuses it).
      if (auto s = shape(ElemKind::F32, 0)) return {"as stored", *s};
      return {};
    case formats::OfferKind::GgufFloat:
      if (auto s = shape(ElemKind::F32, 0)) return {"float", *s};
      return {};  // a type ternjit does not convert
    case formats::OfferKind::GgufTernary: return {"ternary", shape(ElemKind::T2, 2).value_or(std::vector<std::int64_t>{})};
    case formats::OfferKind::GgufScale:
      if (auto one = shape(ElemKind::F32, 1)) return {"scale (uniform rows; also [G, N])", *one};
      return {"grouped scale (varies along K)", shape(ElemKind::F32, 2).value_or(std::vector<std::int64_t>{})};
    case formats::OfferKind::HfPacked: return {"ternary (Hugging Face packed)", shape(ElemKind::T2, 2).value_or(std::vector<std::int64_t>{})};
    case formats::OfferKind::HfScale: return {"scale 1 / weight_scale", shape(ElemKind::F32, 1).value_or(std::vector<std::int64_t>{})};
    case formats::OfferKind::MasterScale: return {"absmean scale", shape(ElemKind::F32, 1).value_or(std::vector<std::int64_t>{})};
  }
  return {};
}

// The offers of `file` (what parameters bind), as JSON or a table.
json offers_json(const formats::WeightFile& file) {
  json out = json::array();
  for (const formats::WeightOffer& o : file.offers()) {
    if (o.kind == formats::OfferKind::MasterScale) continue;  // only for a ternarized float matrix
    auto [what, shape] = offer_binds(file, o);
    if (what.empty()) continue;
    out.push_back(json{{"parameter", o.name}, {"from", o.origin}, {"binds", what}, {"shape", shape}});
  }
  return out;
}

void print_offers(const formats::WeightFile& file) {
  std::size_t width = 9;
  for (const formats::WeightOffer& o : file.offers()) width = std::max(width, formats::printable(o.name).size());
  std::printf("binds (\"Layer.p\" or \"p\"; shapes in ternjit's orientation):\n");
  for (const formats::WeightOffer& o : file.offers()) {
    if (o.kind == formats::OfferKind::MasterScale) continue;
    auto [what, shape] = offer_binds(file, o);
    if (what.empty()) continue;
    std::printf("  %-*s %-22s <- %s, %s\n", static_cast<int>(width), formats::printable(o.name).c_str(),
                dims_text(shape).c_str(), formats::printable(o.origin).c_str(), what.c_str());
  }
}

// JSON output: every character outside printable ASCII as a \u escape (ensure_ascii), so
// no byte of the file reaches the terminal as it is; invalid UTF-8 becomes U+FFFD.
void print_json(const json& out) { std::puts(out.dump(2, ' ', true, json::error_handler_t::replace).c_str()); }

void print_table_header(std::size_t width) {
  std::printf("%-*s %-8s %-22s %12s %12s\n", static_cast<int>(width), "name", "type", "dims", "bytes", "offset");
}

int inspect_gguf(const std::string& path, const ir::SharedBytes& image, bool as_json, const formats::NameMap& names) {
  auto parsed = formats::parse_gguf(image, path);
  if (!parsed.ok()) return report(parsed.error());
  const formats::GgufFile& g = *parsed;
  const formats::WeightFile file = formats::WeightFile::from_gguf(g, path, names);
  if (as_json) {
    json out{{"file", path}, {"format", "gguf"}, {"version", g.version}, {"alignment", g.alignment}};
    json meta = json::array();
    for (const formats::GgufKv& kv : g.metadata)
      meta.push_back(json{{"key", kv.key}, {"type", value_type_name(kv.value.type)}, {"value", value_json(kv.value)}});
    out["metadata"] = meta;
    json tensors = json::array();
    for (const formats::GgufTensor& t : g.tensors)
      tensors.push_back(json{{"name", t.name}, {"type", formats::gguf_type_name(t.type)}, {"dims", t.dims},
                             {"bytes", t.bytes.size()}, {"offset", t.offset}});
    out["tensors"] = tensors;
    out["binds"] = offers_json(file);
    print_json(out);
    return 0;
  }
  std::printf("%s: GGUF v%u, alignment %" PRIu64 ", %zu metadata keys, %zu tensors\n", path.c_str(), g.version,
              g.alignment, g.metadata.size(), g.tensors.size());
  for (const formats::GgufKv& kv : g.metadata)
    std::printf("  %s (%s) = %s\n", formats::printable(kv.key).c_str(),
                std::string(value_type_name(kv.value.type)).c_str(), value_text(kv.value).c_str());
  std::size_t width = 4;
  for (const formats::GgufTensor& t : g.tensors) width = std::max(width, formats::printable(t.name).size());
  print_table_header(width);
  for (const formats::GgufTensor& t : g.tensors)
    std::printf("%-*s %-8s %-22s %12zu %12" PRIu64 "\n", static_cast<int>(width), formats::printable(t.name).c_str(),
                std::string(formats::gguf_type_name(t.type)).c_str(), dims_text(t.dims).c_str(), t.bytes.size(),
                t.offset);
  std::puts("dims are ggml's ne[] (innermost first); offsets are from the data section");
  print_offers(file);
  return 0;
}

int inspect_safetensors(const std::string& path, const ir::SharedBytes& image, bool as_json,
                        const formats::NameMap& names) {
  auto parsed = formats::parse_safetensors(image, path);
  if (!parsed.ok()) return report(parsed.error());
  const formats::StFile& f = *parsed;
  const formats::WeightFile file = formats::WeightFile::from_safetensors(f, path, names);
  if (as_json) {
    json out{{"file", path}, {"format", "safetensors"}, {"metadata", f.metadata}};
    json tensors = json::array();
    for (const formats::StTensor& t : f.tensors)
      tensors.push_back(json{{"name", t.name}, {"type", t.dtype}, {"dims", t.shape}, {"bytes", t.bytes.size()},
                             {"offset", t.data_offset}});
    out["tensors"] = tensors;
    out["binds"] = offers_json(file);
    print_json(out);
    return 0;
  }
  std::printf("%s: safetensors, %zu metadata entries, %zu tensors\n", path.c_str(), f.metadata.size(),
              f.tensors.size());
  for (const auto& [key, value] : f.metadata)
    std::printf("  %s = %s\n", formats::printable(key).c_str(), formats::printable(value).c_str());
  std::size_t width = 4;
  for (const formats::StTensor& t : f.tensors) width = std::max(width, formats::printable(t.name).size());
  print_table_header(width);
  for (const formats::StTensor& t : f.tensors)
    std::printf("%-*s %-8s %-22s %12zu %12" PRIu64 "%s\n", static_cast<int>(width), formats::printable(t.name).c_str(),
                formats::printable(t.dtype).c_str(),
                dims_text(t.shape).c_str(), t.bytes.size(), t.data_offset, t.used ? "" : "  (never bound)");
  std::puts("dims are row-major; offsets are from the data buffer");
  print_offers(file);
  return 0;
}

}  // namespace

int cmd_inspect(const std::string& file, bool as_json, const std::vector<std::string>& name_map) {
  auto names = formats::NameMap::parse(name_map);
  if (!names.ok()) return report(names.error());
  auto image = formats::map_file(file);
  if (!image.ok()) return report(image.error());
  return formats::is_gguf(image->span()) ? inspect_gguf(file, *image, as_json, *names)
                                         : inspect_safetensors(file, *image, as_json, *names);
}

}  // namespace ternjit::cli
