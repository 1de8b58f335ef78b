// SPDX-License-Identifier: Apache-2.0
// weight_file_test.cpp - WeightFile: GGUF and Hugging Face BitNet tensors as parameter offers, name maps, scales.
#include "formats/weight_file.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>
#include <fstream>
#include <random>
#include <string>
#include <unistd.h>
#include <vector>

#include "formats/run_inputs.h"
#include "formats/text.h"
#include "ir/bind.h"
#include "ir/dsl/dsl.h"
#include "ir/numeric.h"
#include "tests/unit/formats/tq_testing.h"

namespace {

using namespace ternjit;
using namespace ternjit::formats;
using testing::make_tq_tensor;

bool has(const Error& e, const std::string& s) { return e.message.find(s) != std::string::npos; }

ir::Type type_of(ElemKind kind, std::size_t rank) {
  return ir::Type{kind, std::vector<ir::Dim>(rank, ir::Dim::fixed(1)), WeightFormat::Plain};
}

std::vector<int> random_ternary(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int> v(n);
  for (int& x : v) x = static_cast<int>(rng() % 3) - 1;
  return v;
}

// A GGUF image written by the project's writer and parsed back (mapped as a file would be).
WeightFile gguf_file(std::vector<GgufTensor> tensors, const NameMap& names = {}) {
  auto image = serialize_gguf({}, tensors);
  REQUIRE(image.ok());
  auto parsed = parse_gguf(ir::SharedBytes::copy_of(image.value()), "m.gguf");
  REQUIRE_MESSAGE(parsed.ok(), (parsed.ok() ? "" : parsed.error().message));
  return WeightFile::from_gguf(std::move(parsed.value()), "m.gguf", names);
}

const WeightOffer& offer(const WeightFile& f, const std::string& name) {
  auto o = f.find(name);
  REQUIRE(o.ok());
  REQUIRE_MESSAGE(o.value() != nullptr, "no offer " << name);
  return *o.value();
}

// transformers' pack_weights, written from its definition (integrations/bitnet.py): the
// [N, K] weight's row i * R + r goes to bits 2i of packed row r, R = ceil(N / 4), code
// value + 1.
std::vector<std::uint8_t> hf_pack(const std::vector<int>& w, std::size_t n, std::size_t k) {
  const std::size_t r_rows = (n + 3) / 4;
  std::vector<std::uint8_t> packed(r_rows * k, 0);
  for (std::size_t i = 0; i < 4; ++i)
    for (std::size_t r = 0; r < r_rows && i * r_rows + r < n; ++r)
      for (std::size_t c = 0; c < k; ++c)
        packed[r * k + c] = static_cast<std::uint8_t>(packed[r * k + c] | (w[(i * r_rows + r) * k + c] + 1) << (2 * i));
  return packed;
}

StTensor bf16_tensor(std::string name, std::vector<std::int64_t> shape, const std::vector<float>& v) {
  std::vector<std::uint8_t> bytes;
  for (float x : v) {
    const std::uint16_t b = ir::f32_to_bf16_bits(x);
    bytes.push_back(static_cast<std::uint8_t>(b & 0xFF));
    bytes.push_back(static_cast<std::uint8_t>(b >> 8));
  }
  return StTensor{std::move(name), "BF16", ElemKind::BF16, std::move(shape), ir::SharedBytes::adopt(std::move(bytes))};
}

}  // namespace

TEST_CASE("name map: placeholders, first match wins, unmatched names kept, errors") {
  const std::vector<std::string> rules{"model.layers.{i}.mlp.{p}_proj.weight=L{i}.w_{p}", "model.norm.weight=norm",
                                       "model.{x}.weight=other"};
  auto m = NameMap::parse(rules);
  REQUIRE(m.ok());
  CHECK(m->apply("model.layers.12.mlp.gate_proj.weight") == "L12.w_gate");
  CHECK(m->apply("model.norm.weight") == "norm");
  CHECK(m->apply("model.embed.weight") == "other");
  CHECK(m->apply("model.layers.1.2.mlp.up_proj.weight") == "model.layers.1.2.mlp.up_proj.weight");  // {i} stops at '.'
  CHECK(m->apply("lm_head.weight") == "lm_head.weight");
  for (const char* bad : {"noequals", "=x", "x=", "a{=b", "a{}=b", "{a}.{a}=b", "a{i}=b{j}"}) {
    const std::vector<std::string> one{bad};
    CHECK_MESSAGE(!NameMap::parse(one).ok(), bad);
  }
  // Regex characters in names are literal.
  const std::vector<std::string> dots{"a.b=c"};
  CHECK(NameMap::parse(dots)->apply("aXb") == "aXb");
}

TEST_CASE("closest names: edit distance, a shared last part, the note") {
  CHECK(ir::edit_distance("kitten", "sitting") == 3);
  CHECK(ir::edit_distance("", "abc") == 3);
  const std::vector<std::string> names{"BitLinear.w_scale", "BitLinear.gamma", "other.thing", "w_scale"};
  CHECK(ir::closest_names("BitLinear.w_scal", names) == std::vector<std::string>{"BitLinear.w_scale", "w_scale"});
  CHECK(ir::did_you_mean("BitLinear.w_scal", names) == " (did you mean 'BitLinear.w_scale' or 'w_scale'?)");
  CHECK(ir::did_you_mean("zzzzzzzzzz", names).empty());
  CHECK(ir::closest_names("L0.gamma", names) == std::vector<std::string>{"BitLinear.gamma"});
}

TEST_CASE("gguf ternary: [K, N] transposed, uniform scales bind Tensor[N], every ggml value kept") {
  for (GgufTensorType type : {GgufTensorType::TQ2_0, GgufTensorType::TQ1_0}) {
    for (std::size_t n : {std::size_t{128}, std::size_t{8}, std::size_t{5}}) {  // 64-row tiles, whole bytes, odd N
      CAPTURE(gguf_type_name(type));
      CAPTURE(n);
      const std::size_t k = 512;
      const std::vector<int> values = random_ternary(k * n, 3);
      std::vector<float> scales;
      for (std::size_t r = 0; r < n; ++r) scales.insert(scales.end(), 2, 0.25f * static_cast<float>(r + 1));
      const GgufTensor tq = make_tq_tensor("w", type, k, n, values, scales);
      const WeightFile f = gguf_file({tq});
      const WeightOffer& w = offer(f, "w");
      CHECK(w.kind == OfferKind::GgufTernary);
      auto shape = f.shape_for(w, type_of(ElemKind::T2, 2), "parameter 'L.w'");
      REQUIRE(shape.ok());
      CHECK(*shape.value() == std::vector<std::int64_t>{512, static_cast<std::int64_t>(n)});
      auto t = f.load(w, ElemKind::T2, {512, static_cast<std::int64_t>(n)}, "parameter 'L.w'");
      REQUIRE_MESSAGE(t.ok(), (t.ok() ? "" : t.error().message));
      CHECK(t->bytes().size() == (k * n + 3) / 4);  // 2 bits a value at rest
      auto s = f.load(offer(f, "w_scale"), ElemKind::F32, {static_cast<std::int64_t>(n)}, "parameter 'L.w_scale'");
      REQUIRE(s.ok());
      // x @ W^T of ggml's dequantization: value (k, n) * scale n is ggml's element (n, k).
      const std::vector<float> deq = dequantize_gguf(tq).value();
      for (std::size_t r = 0; r < n; ++r)
        for (std::size_t c = 0; c < k; ++c) {
          REQUIRE(t->at(c * n + r) == values[r * k + c]);
          REQUIRE(static_cast<float>(t->at(c * n + r)) * static_cast<float>(s->at(r)) == deq[r * k + c]);
        }
      // No parameter takes the scales, which are not 1: an error, never a silent drop.
      auto dropped = f.check_scales({"w"}, {"w"});
      REQUIRE(!dropped.ok());
      CHECK(has(dropped.error(), "no parameter 'w_scale'"));
      CHECK(f.check_scales({"w"}, {"w", "w_scale"}).ok());
    }
  }
}

TEST_CASE("gguf ternary: scales varying along K bind only Tensor[G, N]; all-1 scales may go unbound") {
  const std::size_t k = 768, n = 3;
  const std::vector<int> values = random_ternary(k * n, 5);
  std::vector<float> scales(3 * n);
  for (std::size_t i = 0; i < scales.size(); ++i) scales[i] = 0.5f + static_cast<float>(i) / 8;
  const WeightFile f = gguf_file({make_tq_tensor("blk.0.w", GgufTensorType::TQ2_0, k, n, values, scales)});
  const WeightOffer& s = offer(f, "blk.0.w_scale");
  auto one = f.shape_for(s, type_of(ElemKind::F32, 1), "parameter 'L.w_scale'");
  REQUIRE(!one.ok());
  CHECK(has(one.error(), "vary along K"));
  CHECK(has(one.error(), "Tensor[G, N] with G = K / 256 = 3"));
  auto two = f.load(s, ElemKind::F32, {3, 3}, "parameter 'L.w_scale'");
  REQUIRE(two.ok());
  for (std::size_t g = 0; g < 3; ++g)
    for (std::size_t r = 0; r < n; ++r) CHECK(two->at(g * n + r) == scales[r * 3 + g]);
  CHECK(!f.load(s, ElemKind::F32, {3}, "p").ok());

  const WeightFile unit = gguf_file({make_tq_tensor("w", GgufTensorType::TQ2_0, 256, 2, random_ternary(512, 1), {1.0f, 1.0f})});
  CHECK(unit.check_scales({"w"}, {"w"}).ok());
  // A TQ tensor binds only ternary parameters.
  auto as_float = unit.shape_for(offer(unit, "w"), type_of(ElemKind::F32, 2), "parameter 'L.w'");
  REQUIRE(!as_float.ok());
  CHECK(has(as_float.error(), "declare the parameter TernaryTensor[K, N]"));
}

TEST_CASE("gguf ternary: a TQ2_0 code 3 is an error naming the element") {
  GgufTensor t = make_tq_tensor("w", GgufTensorType::TQ2_0, 256, 4, random_ternary(1024, 2), std::vector<float>(4, 1.0f));
  std::vector<std::uint8_t> bytes(t.bytes.span().begin(), t.bytes.span().end());
  bytes[66 * 2 + 33] |= 0x0C;  // row 2, byte 33, bits 2-3: element 128 + 32 + 1
  t.bytes = ir::SharedBytes::adopt(bytes);
  const WeightFile f = gguf_file({t});
  auto r = f.load(offer(f, "w"), ElemKind::T2, {256, 4}, "parameter 'L.w'");
  REQUIRE(!r.ok());
  CHECK(has(r.error(), "element (k 161, row 2) has code 3"));
  // Found by fuzz_weight_binder (issue 33): the error did not name the file.
  CHECK(has(r.error(), "parameter 'L.w': tensor 'w' of m.gguf: TQ2_0 element (k 161, row 2)"));
}

TEST_CASE("gguf float tensors: F32 vectors are views, matrices transposed, Q8_0 dequantized as ggml") {
  GgufTensor vec;
  vec.name = "norm";
  vec.type = GgufTensorType::F32;
  vec.dims = {3};
  std::vector<std::uint8_t> vb;
  for (float x : {1.5f, -2.0f, 0.25f}) {
    const auto bits = std::bit_cast<std::uint32_t>(x);
    for (int b = 0; b < 4; ++b) vb.push_back(static_cast<std::uint8_t>(bits >> (8 * b)));
  }
  vec.bytes = ir::SharedBytes::adopt(vb);
  GgufTensor q8;  // dims (32, 2): two rows of one block each
  q8.name = "head";
  q8.type = GgufTensorType::Q8_0;
  q8.dims = {32, 2};
  std::vector<std::uint8_t> qb;
  for (int row = 0; row < 2; ++row) {
    const std::uint16_t d = ir::f32_to_f16_bits(row == 0 ? 0.5f : -0.125f);
    qb.push_back(static_cast<std::uint8_t>(d & 0xFF));
    qb.push_back(static_cast<std::uint8_t>(d >> 8));
    for (int j = 0; j < 32; ++j) qb.push_back(static_cast<std::uint8_t>(static_cast<std::int8_t>(j - 16 + row)));
  }
  q8.bytes = ir::SharedBytes::adopt(qb);
  const WeightFile f = gguf_file({vec, q8});
  auto v = f.load(offer(f, "norm"), ElemKind::F32, {3}, "p");
  REQUIRE(v.ok());
  CHECK(v->at(1) == -2.0);
  auto h = f.load(offer(f, "head"), ElemKind::F32, {32, 2}, "p");
  REQUIRE(h.ok());
  for (int row = 0; row < 2; ++row)
    for (int j = 0; j < 32; ++j)
      CHECK(h->at(static_cast<std::size_t>(j * 2 + row)) == static_cast<float>(j - 16 + row) * (row == 0 ? 0.5f : -0.125f));
  CHECK(!f.load(offer(f, "norm"), ElemKind::I32, {3}, "p").ok());
}

TEST_CASE("gguf float tensors: a matrix declared [ne1, ne0] binds in ggml's row order, without a copy") {
  // token_embd as llama.cpp stores it: dims (E, V) = (4, 3), V rows of E; element (e, v)
  // is e + 10 v (exact in f16).
  GgufTensor embd;
  embd.name = "token_embd";
  embd.type = GgufTensorType::F16;
  embd.dims = {4, 3};
  std::vector<std::uint8_t> eb;
  for (int v = 0; v < 3; ++v)
    for (int e = 0; e < 4; ++e) {
      const std::uint16_t h = ir::f32_to_f16_bits(static_cast<float>(e + 10 * v));
      eb.push_back(static_cast<std::uint8_t>(h & 0xFF));
      eb.push_back(static_cast<std::uint8_t>(h >> 8));
    }
  embd.bytes = ir::SharedBytes::adopt(eb);
  const WeightFile f = gguf_file({embd});
  const WeightOffer& o = offer(f, "token_embd");
  // The offer's shape follows the declaration: [V, E] for a parameter declared so.
  ir::Type rows{ElemKind::F16, {ir::Dim::fixed(3), ir::Dim::fixed(4)}, WeightFormat::Plain};
  auto shape = f.shape_for(o, rows, "p");
  REQUIRE(shape.ok());
  CHECK(shape->value() == std::vector<std::int64_t>{3, 4});
  auto a = f.load(o, ElemKind::F16, {3, 4}, "p");
  REQUIRE(a.ok());
  for (int v = 0; v < 3; ++v)
    for (int e = 0; e < 4; ++e) CHECK(a->at(static_cast<std::size_t>(v * 4 + e)) == e + 10 * v);
  // A view of the file's mapping: loading it again gives the same bytes, not a new copy.
  auto b = f.load(o, ElemKind::F16, {3, 4}, "p");
  REQUIRE(b.ok());
  CHECK(a->bytes().data() == b->bytes().data());
  // Of another float kind it is converted, still in row order.
  auto c = f.load(o, ElemKind::F32, {3, 4}, "p");
  REQUIRE(c.ok());
  CHECK(c->at(2 * 4 + 1) == 21);
  CHECK(c->bytes().data() != a->bytes().data());
  // Declared [ne0, ne1] it is read transposed as before (a copy).
  auto t = f.load(o, ElemKind::F16, {4, 3}, "p");
  REQUIRE(t.ok());
  CHECK(t->at(1 * 3 + 2) == 21);  // [e = 1, v = 2]
  // Any other shape is refused naming both.
  auto bad = f.load(o, ElemKind::F16, {2, 6}, "p");
  REQUIRE(!bad.ok());
  CHECK(has(bad.error(), "has shape [4, 3], not [2, 6]"));
}

TEST_CASE("gguf: a tensor of a type ternjit does not convert is skipped, and refused by name when bound") {
  GgufTensor q6;
  q6.name = "token_embd.weight";
  q6.type = GgufTensorType::Q6_K;
  q6.dims = {256, 2};
  q6.bytes = ir::SharedBytes::adopt(std::vector<std::uint8_t>(2 * 210, 0));
  const WeightFile f = gguf_file({q6, make_tq_tensor("w", GgufTensorType::TQ2_0, 256, 4, random_ternary(1024, 8),
                                                     std::vector<float>(4, 1.0f))});
  CHECK(f.load(offer(f, "w"), ElemKind::T2, {256, 4}, "p").ok());
  auto e = f.shape_for(offer(f, "token_embd.weight"), type_of(ElemKind::F32, 2), "parameter 'L.emb'");
  REQUIRE(!e.ok());
  CHECK(has(e.error(), "tensor 'token_embd.weight' of m.gguf is Q6_K, which ternjit does not convert"));
  CHECK(f.find("token_embd.weight_scale").value() == nullptr);  // never a master weight
}

TEST_CASE("hugging face packed: transformers' unpack_weights example by hand, weight_scale divides") {
  // unpack_weights' documented example: packed [[0b10100001, 0b00011000], [0b10010000,
  // 0b00001010]] (R = 2 rows, K = 2) is the [8, 2] weight below. By hand, byte [0][0] =
  // 0b10'10'00'01: bits 0-1 = 01 -> row 0 = 0, bits 2-3 = 00 -> row 2 = -1, bits 4-5 = 10
  // -> row 4 = +1, bits 6-7 = 10 -> row 6 = +1 (column 0).
  const std::vector<std::uint8_t> packed{0b10100001, 0b00011000, 0b10010000, 0b00001010};
  const int expect[8][2] = {{0, -1}, {-1, 1}, {-1, 1}, {-1, 1}, {1, 0}, {0, -1}, {1, -1}, {1, -1}};
  StFile st;
  st.tensors.push_back(make_u8_tensor("model.layers.3.mlp.up_proj.weight", {2, 2}, packed));
  st.tensors.push_back(bf16_tensor("model.layers.3.mlp.up_proj.weight_scale", {1}, {4.0f}));
  st.tensors.push_back(make_f32_tensor("model.norm.weight", {2}, std::vector<float>{1, 2}));
  const std::vector<std::string> rules{"model.layers.{i}.mlp.up_proj.weight=L{i}.w"};
  const auto f = std::optional(WeightFile::from_safetensors(st, "hf.safetensors", NameMap::parse(rules).value()));
  const WeightOffer& w = offer(*f, "L3.w");
  CHECK(w.kind == OfferKind::HfPacked);
  CHECK(*f->shape_for(w, type_of(ElemKind::T2, 2), "p").value() == std::vector<std::int64_t>{2, 8});
  auto t = f->load(w, ElemKind::T2, {2, 8}, "parameter 'L3.w'");
  REQUIRE(t.ok());
  for (int n = 0; n < 8; ++n)
    for (int k = 0; k < 2; ++k) CHECK(t->at(static_cast<std::size_t>(k * 8 + n)) == expect[n][k]);
  // BitLinear computes y / weight_scale: the multiplier ternjit binds is 1 / 4.
  auto s = f->load(offer(*f, "L3.w_scale"), ElemKind::F32, {8}, "parameter 'L3.w_scale'");
  REQUIRE(s.ok());
  for (std::size_t n = 0; n < 8; ++n) CHECK(s->at(n) == 0.25);
  // The weight_scale tensor itself is consumed, not offered under its own name.
  CHECK(f->find("model.layers.3.mlp.up_proj.weight_scale").value() == nullptr);
  CHECK(!f->check_scales({"L3.w"}, {"L3.w"}).ok());
  CHECK(f->check_scales({"L3.w"}, {"L3.w", "L3.w_scale"}).ok());
}

TEST_CASE("hugging face packed: round trip through an independent packer, odd K") {
  const std::size_t n = 12, k = 7;
  const std::vector<int> w = random_ternary(n * k, 11);
  StFile st;
  st.tensors.push_back(make_u8_tensor("proj.weight", {3, 7}, hf_pack(w, n, k)));
  st.tensors.push_back(make_f32_tensor("proj.weight_scale", {1}, std::vector<float>{2.0f}));
  const auto f = std::optional(WeightFile::from_safetensors(st, "hf.safetensors"));
  auto t = f->load(offer(*f, "proj.weight"), ElemKind::T2, {7, 12}, "p");
  REQUIRE(t.ok());
  for (std::size_t r = 0; r < n; ++r)
    for (std::size_t c = 0; c < k; ++c) REQUIRE(t->at(c * n + r) == w[r * k + c]);
  // A code 3 names the packed byte and the row.
  std::vector<std::uint8_t> bad = hf_pack(w, n, k);
  bad[8] |= 0xC0;
  st.tensors[0] = make_u8_tensor("proj.weight", {3, 7}, bad);
  const auto g = std::optional(WeightFile::from_safetensors(st, "hf.safetensors"));
  auto e = g->load(offer(*g, "proj.weight"), ElemKind::T2, {7, 12}, "p");
  REQUIRE(!e.ok());
  CHECK(has(e.error(), "packed byte [1, 1] bits 6-7 (row 10) hold code 3"));
}

TEST_CASE("bf16 master weights: absmean ternarization at load, scale 1/s, transposed") {
  const std::size_t n = 4, k = 6;
  std::vector<float> w(n * k);
  std::mt19937 rng(9);
  std::normal_distribution<float> dist(0.0f, 0.02f);
  for (float& x : w) x = ir::round_to_bf16(dist(rng));
  StFile st;
  st.tensors.push_back(bf16_tensor("q_proj.weight", {4, 6}, w));
  const auto f = std::optional(WeightFile::from_safetensors(st, "bf16.safetensors"));
  auto t = f->load(offer(*f, "q_proj.weight"), ElemKind::T2, {6, 4}, "p");
  REQUIRE(t.ok());
  // transformers' WeightQuant in f32: s = 1 / clamp(mean|w|, 1e-5), round half to even, clamp.
  double sum = 0;
  for (float x : w) sum += std::fabs(x);
  const float s = 1.0f / std::max(static_cast<float>(sum / static_cast<double>(w.size())), 1e-5f);
  for (std::size_t r = 0; r < n; ++r)
    for (std::size_t c = 0; c < k; ++c)
      CHECK(t->at(c * n + r) == std::clamp(std::nearbyint(w[r * k + c] * s), -1.0f, 1.0f));
  auto sc = f->load(offer(*f, "q_proj.weight_scale"), ElemKind::F32, {4}, "p");
  REQUIRE(sc.ok());
  CHECK(sc->at(0) == static_cast<double>(1.0f / s));
  CHECK(!f->check_scales({"q_proj.weight"}, {"q_proj.weight"}).ok());
  // The absmean scale exists only for a ternarized weight.
  CHECK(!f->check_scales({}, {"q_proj.weight", "q_proj.weight_scale"}).ok());
  // A real tensor by the scale's name wins the lookup; ternarizing the weight is then refused.
  st.tensors.push_back(make_f32_tensor("q_proj.weight_scale", {4}, std::vector<float>(4, 1.0f)));
  const auto g = std::optional(WeightFile::from_safetensors(st, "both.safetensors"));
  CHECK(offer(*g, "q_proj.weight_scale").kind == OfferKind::Safetensors);
  auto both = g->check_scales({"q_proj.weight"}, {"q_proj.weight", "q_proj.weight_scale"});
  REQUIRE(!both.ok());
  CHECK(has(both.error(), "also holds a tensor"));
}

namespace {

// A bf16 master weight [3, 9] of small finite values with `bad` at element [row, col].
std::optional<WeightFile> master_with(float bad, std::size_t row, std::size_t col) {
  std::vector<float> w(3 * 9);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = ir::round_to_bf16(0.01f * static_cast<float>(i % 5) - 0.02f);
  w[row * 9 + col] = bad;
  StFile st;
  st.tensors.push_back(bf16_tensor("q_proj.weight", {3, 9}, w));
  return std::optional(WeightFile::from_safetensors(st, "bad.safetensors"));
}

}  // namespace

TEST_CASE("master weights: an infinity is reported as Inf or -Inf, not NaN") {
  for (const auto& [value, name] : {std::pair{INFINITY, "Inf"}, std::pair{-INFINITY, "-Inf"}}) {
    const auto f = master_with(value, 1, 2);
    auto t = f->load(offer(*f, "q_proj.weight"), ElemKind::T2, {9, 3}, "p");
    REQUIRE(!t.ok());
    CAPTURE(t.error().message);
    CHECK(t.error().message.ends_with(std::string("master weight element [1, 2] is ") + name));
  }
}

TEST_CASE("master weights: a NaN is reported at its own index ([0, 7]), by the weight and by its absmean scale") {
  const auto f = master_with(NAN, 0, 7);
  auto t = f->load(offer(*f, "q_proj.weight"), ElemKind::T2, {9, 3}, "p");
  REQUIRE(!t.ok());
  CAPTURE(t.error().message);
  CHECK(t.error().message.ends_with("master weight element [0, 7] is NaN"));
  // The scale offer of the same tensor reads the same elements: an error, not a NaN scale.
  auto sc = f->load(offer(*f, "q_proj.weight_scale"), ElemKind::F32, {3}, "p");
  REQUIRE(!sc.ok());
  CHECK(sc.error().message.ends_with("master weight element [0, 7] is NaN"));
  auto unbound = f->check_scales({"q_proj.weight"}, {"q_proj.weight"});
  REQUIRE(!unbound.ok());
  CHECK(has(unbound.error(), "master weight element [0, 7] is NaN"));
}

TEST_CASE("master weights: the refusal names the parameter and the tensor of the file once") {
  const auto f = master_with(NAN, 2, 8);
  auto t = f->load(offer(*f, "q_proj.weight"), ElemKind::T2, {9, 3}, "parameter 'L.q'");
  REQUIRE(!t.ok());
  CHECK(t.error().message ==
        "parameter 'L.q': tensor 'q_proj.weight' of bad.safetensors: master weight element [2, 8] is NaN");
}

TEST_CASE("unused dtypes are parsed, skipped, and refused only when a parameter needs them") {
  // {"ids":{"dtype":"I64","shape":[2],"data_offsets":[0,16]},"w":{"dtype":"F32","shape":[1],"data_offsets":[16,20]}}
  const std::string header =
      R"({"ids":{"dtype":"I64","shape":[2],"data_offsets":[0,16]},"w":{"dtype":"F32","shape":[1],"data_offsets":[16,20]}})";
  std::vector<std::uint8_t> image;
  for (int b = 0; b < 8; ++b) image.push_back(static_cast<std::uint8_t>(header.size() >> (8 * b)));
  image.insert(image.end(), header.begin(), header.end());
  image.resize(image.size() + 20, 0);
  auto st = parse_safetensors(std::span<const std::uint8_t>(image), "ids.safetensors");
  REQUIRE_MESSAGE(st.ok(), (st.ok() ? "" : st.error().message));
  CHECK(!st->find("ids")->used);
  CHECK(has(to_f32(*st->find("ids")).error(), "dtype 'I64' is not one ternjit reads"));
  const auto f = std::optional(WeightFile::from_safetensors(*st, "ids.safetensors"));
  CHECK(f->load(offer(*f, "w"), ElemKind::F32, {1}, "p").ok());
  auto ids = f->shape_for(offer(*f, "ids"), type_of(ElemKind::I32, 1), "parameter 'L.ids'");
  REQUIRE(!ids.ok());
  CHECK(has(ids.error(), "tensor 'ids' of ids.safetensors has dtype I64, which ternjit does not bind"));
}

TEST_CASE("open: GGUF by content whatever the extension; prepare_run is strict with a weights file") {
  const auto dir = std::filesystem::temp_directory_path() / ("ternjit_weight_file_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "model.safetensors").string();  // a GGUF file, misnamed
  const std::vector<int> values = random_ternary(256 * 4, 1);
  REQUIRE(write_gguf(path, {}, std::vector{make_tq_tensor("L.w", GgufTensorType::TQ2_0, 256, 4, values,
                                                           std::vector<float>(4, 0.5f))})
              .ok());
  auto f = WeightFile::open(path);
  REQUIRE_MESSAGE(f.ok(), (f.ok() ? "" : f.error().message));
  CHECK(offer(*f, "L.w").kind == OfferKind::GgufTernary);

  auto m = dsl::compile_tri(
      "layer L {\n param w: TernaryTensor[K, N]\n param w_scal: Tensor[N]\n"
      " fn forward(x: Tensor[M, K]) -> Tensor[M, N] { return (x @ w) * w_scal }\n}\n",
      "l.tri");
  REQUIRE(m.ok());
  ir::ShapeBindings shapes;
  shapes.values["M"] = 1;
  PrepareOptions strict;
  strict.random_missing_params = false;
  auto run = prepare_run(*m, *m->find_function("L.forward"), nullptr, &*f, shapes, strict);
  REQUIRE(!run.ok());
  CHECK(has(run.error(), "parameter 'L.w_scal' has no tensor in " + path + " (did you mean 'L.w_scale'?)"));
  PrepareOptions lenient;
  lenient.params_seed = 5;
  run = prepare_run(*m, *m->find_function("L.forward"), nullptr, &*f, shapes, lenient);
  REQUIRE(!run.ok());  // the random w_scal cannot hide that the file's scales would be dropped
  CHECK(has(run.error(), "no parameter 'L.w_scale' takes them"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("prepare_run: an inputs file is as strict as a weights file; random inputs only when asked") {
  auto m = dsl::compile_tri("layer L {\n fn forward(x: Tensor[M, K]) -> Tensor[M, K] { return x * 2.0 }\n}\n", "l.tri");
  REQUIRE(m.ok());
  const ir::Function& f = *m->find_function("L.forward");
  StFile inputs;  // the argument is 'x'; the file names its tensor 'xs'
  inputs.tensors.push_back(make_f32_tensor("xs", {1, 2}, std::vector<float>{3, 4}));
  PrepareOptions strict;
  strict.inputs_name = "in.safetensors";
  auto run = prepare_run(*m, f, &inputs, nullptr, {}, strict);
  REQUIRE_FALSE(run.ok());
  CHECK(has(run.error(), "input 'x' has no tensor in in.safetensors (did you mean 'xs'?)"));
  CHECK(has(run.error(), "--random-missing-inputs"));

  // Asked for: drawn from inputs_seed (the same seed, the same values; another, others).
  ir::ShapeBindings shapes;
  shapes.values["M"] = 1;
  shapes.values["K"] = 2;
  PrepareOptions lenient;
  lenient.random_missing_inputs = true;
  lenient.inputs_seed = 7;
  auto a = prepare_run(*m, f, &inputs, nullptr, shapes, lenient);
  REQUIRE_MESSAGE(a.ok(), (a.ok() ? "" : a.error().message));
  auto b = prepare_run(*m, f, &inputs, nullptr, shapes, lenient);
  REQUIRE(b.ok());
  CHECK(a->args.at(0).data == b->args.at(0).data);
  lenient.inputs_seed = 8;
  auto c = prepare_run(*m, f, &inputs, nullptr, shapes, lenient);
  REQUIRE(c.ok());
  CHECK(a->args.at(0).data != c->args.at(0).data);

  // The right name binds the file's values; without a file every input is random.
  inputs.tensors[0].name = "x";
  auto bound = prepare_run(*m, f, &inputs, nullptr, {}, strict);
  REQUIRE_MESSAGE(bound.ok(), (bound.ok() ? "" : bound.error().message));
  CHECK(bound->args.at(0).data == std::vector<double>{3, 4});
  CHECK(prepare_run(*m, f, nullptr, nullptr, shapes, PrepareOptions{}).ok());
}

TEST_CASE("gguf ternary: a TQ2_0 tensor with ne0 = 0 has no block scales; the bytes after it are never read") {
  // The empty tensor (0 bytes) lies right before a canary whose block scale is 1234: a scale
  // read past the empty tensor's bytes would return it (or fault before a guard page).
  const GgufTensor empty = make_tq_tensor("w", GgufTensorType::TQ2_0, 0, 4, {}, {});
  const GgufTensor canary = make_tq_tensor("canary", GgufTensorType::TQ2_0, 256, 1, random_ternary(256, 3), {1234.0f});
  const WeightFile f = gguf_file({empty, canary});
  const WeightOffer& s = offer(f, "w_scale");
  auto one = f.shape_for(s, type_of(ElemKind::F32, 1), "parameter 'L.w_scale'");
  REQUIRE_FALSE(one.ok());
  CHECK(has(one.error(), "parameter 'L.w_scale'"));
  CHECK(has(one.error(), "its rows have no blocks (K = 0), so there is no per-row scale to bind"));
  auto loaded = f.load(s, ElemKind::F32, {4}, "parameter 'L.w_scale'");
  REQUIRE_FALSE(loaded.ok());
  CHECK(has(loaded.error(), "no per-row scale"));
  // Declared grouped, [G = 0, N] is empty: nothing is read. Unbound, there is no scale to drop.
  auto grouped = f.load(s, ElemKind::F32, {0, 4}, "parameter 'L.w_scale'");
  REQUIRE_MESSAGE(grouped.ok(), (grouped.ok() ? "" : grouped.error().message));
  CHECK(grouped->numel() == 0);
  CHECK(f.check_scales({"w"}, {"w"}).ok());
  CHECK(f.check_scales({"w"}, {}).ok());
}

// Issue 33 items 2 and 3: name maps matched a std::regex against file-controlled names. A
// ~100 KB name overflowed the stack inside it (SIGSEGV), and adjacent placeholders
// backtracked exponentially (a 12-placeholder rule on a 41-byte name: over 60 s).
TEST_CASE("name map: linear matching of long names and adjacent placeholders; placeholder splits are greedy") {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const std::string long_name = "a" + std::string(100'000, 'x');
  const std::vector<std::string> prefix{"a{x}=y{x}", "b{x}=z"};
  auto m = NameMap::parse(prefix);
  REQUIRE(m.ok());
  CHECK(m->apply(long_name) == "y" + std::string(100'000, 'x'));
  CHECK(m->apply(long_name + ".w") == long_name + ".w");  // {x} stops at '.'
  const std::vector<std::string> twelve{"{a}{b}{c}{d}{e}{f}{g}{h}{i}{j}{k}{l}X=T"};
  auto adjacent = NameMap::parse(twelve);
  REQUIRE(adjacent.ok());
  const std::string no_x = std::string(40, 'a') + "b";
  CHECK(adjacent->apply(no_x) == no_x);
  CHECK(adjacent->apply(std::string(40, 'a') + "X") == "T");
  CHECK(adjacent->apply(std::string(100'000, 'a') + "b") == std::string(100'000, 'a') + "b");
  CHECK(std::chrono::duration<double>(Clock::now() - start).count() < 5.0);  // microseconds when linear

  // Ambiguous splits: each placeholder, in pattern order, takes the longest part that lets
  // the rest match (the split a greedy regex finds).
  const std::vector<std::string> three{"{a}{b}{c}=<{a}|{b}|{c}>"};
  CHECK(NameMap::parse(three)->apply("xyzw") == "<xy|z|w>");
  CHECK(NameMap::parse(three)->apply("xy") == "xy");  // three placeholders need three bytes
  const std::vector<std::string> literal_between{"p{a}q{b}=<{a}|{b}>"};
  auto s = NameMap::parse(literal_between);
  REQUIRE(s.ok());
  CHECK(s->apply("pqqqbq") == "<qq|bq>");  // a = "qqqb" or "qqq" leave no "q{b}" after them
  CHECK(s->apply("pxqy") == "<x|y>");
  CHECK(s->apply("pxq") == "pxq");
  CHECK(s->apply("p.qy") == "p.qy");
}

TEST_CASE("tensor names past kMaxTensorNameBytes are refused by the GGUF and safetensors readers, naming the tensor") {
  const std::string long_name = "a" + std::string(100'000, 'x');
  // GGUF: one F32 tensor of 4 elements, written by hand (the writer has no limit).
  std::vector<std::uint8_t> g;
  auto put = [&](std::uint64_t v, int n) {
    for (int k = 0; k < n; ++k) g.push_back(static_cast<std::uint8_t>(v >> (8 * k)));
  };
  put(0x46554747, 4), put(3, 4), put(1, 8), put(0, 8);
  put(long_name.size(), 8);
  g.insert(g.end(), long_name.begin(), long_name.end());
  put(1, 4), put(4, 8), put(0, 4), put(0, 8);
  g.resize((g.size() + 31) / 32 * 32 + 16, 0);
  auto parsed = parse_gguf(ir::SharedBytes::copy_of(g), "long.gguf");
  REQUIRE(!parsed.ok());
  CHECK(has(parsed.error(), "long.gguf: tensor 0 name is 100001 bytes long, over the limit of 4096 bytes"));
  // safetensors: the same name.
  const std::string header = "{\"" + long_name + "\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}";
  std::vector<std::uint8_t> st;
  for (int k = 0; k < 8; ++k) st.push_back(static_cast<std::uint8_t>(header.size() >> (8 * k)));
  st.insert(st.end(), header.begin(), header.end());
  st.resize(st.size() + 4, 0);
  auto st_parsed = parse_safetensors(ir::SharedBytes::copy_of(st), "long.safetensors");
  REQUIRE(!st_parsed.ok());
  CHECK(has(st_parsed.error(), "long.safetensors: tensor 0 (in name order): its name 'axxx"));
  CHECK(has(st_parsed.error(), "is 100001 bytes long, over the limit of 4096 bytes"));
  // A name at the limit is read, and maps.
  const std::string at_limit = "a" + std::string(kMaxTensorNameBytes - 1, 'x');
  auto ok = serialize_gguf({}, std::vector{make_tq_tensor(at_limit, GgufTensorType::TQ2_0, 256, 1,
                                                          random_ternary(256, 2), std::vector<float>(1, 1.0f))});
  REQUIRE(ok.ok());
  auto back = parse_gguf(ir::SharedBytes::copy_of(ok.value()), "limit.gguf");
  REQUIRE(back.ok());
  const std::vector<std::string> rules{"a{x}=w"};
  const WeightFile f = WeightFile::from_gguf(std::move(back.value()), "limit.gguf", NameMap::parse(rules).value());
  CHECK(offer(f, "w").origin == at_limit);
}

// Found by fuzz_hf_checkpoint (issue 33): a master weight whose mean |W| is near FLT_MAX
// has s = 1 / mean subnormal, and 1 / s overflows: the values all rounded to 0 and the
// bound scale was +inf.
TEST_CASE("master weights: an absmean scale that overflows f32 is refused, naming the file") {
  constexpr float kMax = std::numeric_limits<float>::max();
  StFile st;
  st.tensors.push_back(make_f32_tensor("w", {1, 2}, std::vector<float>{kMax, -kMax}));
  const WeightFile f = WeightFile::from_safetensors(st, "big.safetensors");
  auto w = f.load(offer(f, "w"), ElemKind::T2, {2, 1}, "parameter 'w'");
  REQUIRE(!w.ok());
  CHECK(has(w.error(), "parameter 'w': tensor 'w' of big.safetensors"));
  CHECK(has(w.error(), "absmean scale"));
  auto s = f.load(offer(f, "w_scale"), ElemKind::F32, {1}, "parameter 'w_scale'");
  REQUIRE(!s.ok());
  CHECK(has(s.error(), "absmean scale"));
  // A large mean whose scale is finite still loads: values +-1, scale ~ mean.
  StFile ok;
  ok.tensors.push_back(make_f32_tensor("w", {1, 2}, std::vector<float>{3e38f, -3e38f}));
  const WeightFile g = WeightFile::from_safetensors(ok, "ok.safetensors");
  auto v = g.load(offer(g, "w"), ElemKind::T2, {2, 1}, "parameter 'w'");
  REQUIRE(v.ok());
  CHECK(ir::tern2_at(v->bytes().data(), 0) == 1);
  CHECK(ir::tern2_at(v->bytes().data(), 1) == -1);
  auto gs = g.load(offer(g, "w_scale"), ElemKind::F32, {1}, "parameter 'w_scale'");
  REQUIRE(gs.ok());
  float scale = 0;
  std::memcpy(&scale, gs->bytes().data(), 4);
  CHECK(std::isfinite(scale));
}

// Found by fuzz_hf_checkpoint (issue 33): the absmean scale of a master weight with mean
// |W| ~ 1e20, bound to a Tensor<f16> scale, became +inf.
TEST_CASE("master weights: an absmean scale not finite in the scale parameter's kind is refused") {
  StFile st;
  st.tensors.push_back(make_f32_tensor("w", {1, 2}, std::vector<float>{1e20f, -1e20f}));
  const WeightFile f = WeightFile::from_safetensors(st, "big.safetensors");
  auto half = f.load(offer(f, "w_scale"), ElemKind::F16, {1}, "parameter 'w_scale'");
  REQUIRE(!half.ok());
  CHECK(has(half.error(), "parameter 'w_scale': tensor 'w' of big.safetensors: its absmean scale 1.00000002e+20 is not finite as f16"));
  CHECK(f.load(offer(f, "w_scale"), ElemKind::F32, {1}, "parameter 'w_scale'").ok());
}

// Found by fuzz_weight_binder (issue 33): a GGUF float tensor with dims (2^37, 0) holds no
// bytes, yet binding it allocated a row of 2^37 floats (out of memory).
TEST_CASE("gguf float tensors with no elements bind without a buffer sized by the other extent") {
  GgufTensor t;
  t.name = "w";
  t.type = GgufTensorType::F32;
  t.dims = {std::uint64_t{1} << 37, 0};
  const WeightFile f = gguf_file({t});
  const std::vector<std::int64_t> shape{std::int64_t{1} << 37, 0};
  auto as_float = f.load(offer(f, "w"), ElemKind::F16, shape, "parameter 'w'");
  REQUIRE_MESSAGE(as_float.ok(), (as_float.ok() ? "" : as_float.error().message));
  CHECK(as_float->shape() == shape);
  auto as_ternary = f.load(offer(f, "w"), ElemKind::T2, shape, "parameter 'w'");
  REQUIRE_MESSAGE(as_ternary.ok(), (as_ternary.ok() ? "" : as_ternary.error().message));
  CHECK(as_ternary->shape() == shape);
  auto scale = f.load(offer(f, "w_scale"), ElemKind::F32, {0}, "parameter 'w_scale'");
  CHECK(scale.ok());

  // Dims (0, 2^40): 2^40 rows of nothing were visited one by one (a hang), for a master
  // weight, a TQ2_0 tensor and its grouped scales alike.
  const auto start = std::chrono::steady_clock::now();
  const std::int64_t rows = std::int64_t{1} << 40;
  GgufTensor tall = t;
  tall.dims = {0, std::uint64_t{1} << 40};
  GgufTensor tq = tall;
  tq.name = "q";
  tq.type = GgufTensorType::TQ2_0;
  const WeightFile g = gguf_file({tall, tq});
  CHECK(g.load(offer(g, "w"), ElemKind::T2, {0, rows}, "parameter 'w'").ok());
  CHECK(g.load(offer(g, "q"), ElemKind::T2, {0, rows}, "parameter 'q'").ok());
  CHECK(g.load(offer(g, "q_scale"), ElemKind::F32, {0, rows}, "parameter 'q_scale'").ok());
  CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < 5.0);
}
