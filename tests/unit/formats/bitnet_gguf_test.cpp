// SPDX-License-Identifier: Apache-2.0
// bitnet_gguf_test.cpp - llama.cpp `bitnet` files: the synthetic writer, the configuration
// read back, the TQ2_0 encoder against the independent packer, and binding with the name map.
#include "formats/bitnet_gguf.h"
#include "formats/gguf.h"
#include "formats/weight_file.h"
#include "tests/unit/formats/tq_testing.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <set>

namespace ternjit {
namespace {

using formats::GgufTensorType;

struct TempFile {
  std::string path;
  explicit TempFile(const std::string& stem) {
    static int counter = 0;
    path = (std::filesystem::temp_directory_path() /
            ("ternjit_bitnet_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) + "_" + stem))
               .string();
  }
  ~TempFile() {
    std::error_code ec;
    std::filesystem::remove(path, ec);
  }
};

std::vector<char> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST_CASE("tq2_0 encoder: the same bytes as the independent packer of ggml's layout") {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    std::int8_t v8[256];
    int vi[256];
    for (int e = 0; e < 256; ++e) vi[e] = v8[e] = static_cast<std::int8_t>(static_cast<int>(rng() % 3) - 1);
    const float d = 0.001f * static_cast<float>(rng() % 1000 + 1);
    std::vector<std::uint8_t> want;
    testing::append_tq_block(want, GgufTensorType::TQ2_0, vi, ir::f32_to_f16_bits(d));
    std::uint8_t got[66];
    formats::encode_tq2_0_block(v8, d, got);
    CHECK(std::vector<std::uint8_t>(got, got + 66) == want);
  }
}

TEST_CASE("synthetic bitnet: llama.cpp's names, shapes, types and metadata, read back") {
  const BitNetConfig c = formats::tiny_bitnet_config();
  TempFile file("tiny.gguf");
  REQUIRE(formats::write_synthetic_bitnet(file.path, c, 42).ok());
  auto g = formats::read_gguf(file.path);
  REQUIRE_MESSAGE(g.ok(), (g.ok() ? "" : g.error().message));
  auto back = formats::bitnet_config(g.value());
  REQUIRE_MESSAGE(back.ok(), (back.ok() ? "" : back.error().message));
  CHECK(back->blocks == 2);
  CHECK(back->hidden == 256);
  CHECK(back->heads == 4);
  CHECK(back->kv_heads == 2);
  CHECK(formats::bitnet_head_dim(*back) == 64);
  CHECK(back->ffn == 512);
  CHECK(back->vocab == 50);
  CHECK(back->rope_theta == 500000.0);
  CHECK(back->rms_eps == doctest::Approx(1e-5));
  CHECK(back->ffn_activation == BitNetActivation::Relu2);
  CHECK(g->get_string("bitnet.hidden_activation").value() == "relu2");
  CHECK(g->get_string("general.architecture").value() == "bitnet");
  REQUIRE(g->tensors.size() == 2 + 11 * 2);
  auto dims = [&](const std::string& name) {
    const formats::GgufTensor* t = g->find_tensor(name);
    REQUIRE_MESSAGE(t != nullptr, "no tensor " << name);
    return t->dims;
  };
  using D = std::vector<std::uint64_t>;
  CHECK(dims("token_embd.weight") == D{256, 50});
  CHECK(g->find_tensor("token_embd.weight")->type == GgufTensorType::F16);
  CHECK(dims("output_norm.weight") == D{256});
  CHECK(g->find_tensor("output.weight") == nullptr);  // tied head, as llama.cpp's bitnet
  for (int i = 0; i < 2; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    CHECK(dims(b + "attn_norm.weight") == D{256});
    CHECK(dims(b + "attn_q.weight") == D{256, 256});
    CHECK(dims(b + "attn_k.weight") == D{256, 128});
    CHECK(dims(b + "attn_v.weight") == D{256, 128});
    CHECK(dims(b + "attn_sub_norm.weight") == D{256});
    CHECK(dims(b + "attn_output.weight") == D{256, 256});
    CHECK(dims(b + "ffn_norm.weight") == D{256});
    CHECK(dims(b + "ffn_gate.weight") == D{256, 512});
    CHECK(dims(b + "ffn_up.weight") == D{256, 512});
    CHECK(dims(b + "ffn_sub_norm.weight") == D{512});
    CHECK(dims(b + "ffn_down.weight") == D{512, 256});
    CHECK(g->find_tensor(b + "ffn_down.weight")->type == GgufTensorType::TQ2_0);
  }
  // Ternary content: all three values occur, one scale per tensor.
  auto t = formats::gguf_ternary(*g->find_tensor("blk.1.ffn_up.weight"));
  REQUIRE(t.ok());
  CHECK(std::set<std::int8_t>(t->values.begin(), t->values.end()) == std::set<std::int8_t>{-1, 0, 1});
  CHECK(std::set<float>(t->scales.begin(), t->scales.end()).size() == 1);
  // Deterministic: the same seed writes the same bytes, another seed others.
  TempFile again("again.gguf"), other("other.gguf");
  REQUIRE(formats::write_synthetic_bitnet(again.path, c, 42).ok());
  REQUIRE(formats::write_synthetic_bitnet(other.path, c, 43).ok());
  CHECK(file_bytes(again.path) == file_bytes(file.path));
  CHECK(file_bytes(other.path) != file_bytes(file.path));
  CHECK(!std::filesystem::exists(file.path + ".tmp"));
}

TEST_CASE("synthetic bitnet: bound with the name map, ternary at 2 bits, token_embd in row order without a copy") {
  const BitNetConfig c = formats::tiny_bitnet_config();
  TempFile file("bind.gguf");
  REQUIRE(formats::write_synthetic_bitnet(file.path, c, 5).ok());
  const std::vector<std::string> rules = formats::bitnet_name_map("BitNet");
  auto names = formats::NameMap::parse(rules);
  REQUIRE(names.ok());
  auto w = formats::WeightFile::open(file.path, names.value());
  REQUIRE_MESSAGE(w.ok(), (w.ok() ? "" : w.error().message));
  auto find = [&](const std::string& n) -> const formats::WeightOffer& {
    auto o = w->find(n);
    REQUIRE(o.ok());
    REQUIRE_MESSAGE(o.value() != nullptr, "no offer " << n);
    return *o.value();
  };
  auto q = w->load(find("BitNet.blk.1.attn_q"), ElemKind::T2, {256, 256}, "p");
  REQUIRE_MESSAGE(q.ok(), (q.ok() ? "" : q.error().message));
  CHECK(q->kind() == ElemKind::T2);
  auto qs = w->load(find("BitNet.blk.1.attn_q_scale"), ElemKind::F32, {256}, "p");
  REQUIRE_MESSAGE(qs.ok(), (qs.ok() ? "" : qs.error().message));
  CHECK(qs->at(0) > 0);
  CHECK(qs->at(0) == qs->at(255));
  auto n = w->load(find("BitNet.blk.0.ffn_sub_norm"), ElemKind::F32, {512}, "p");
  REQUIRE(n.ok());
  CHECK(n->at(3) >= 0.9);
  CHECK(n->at(3) < 1.1);
  // token_embd (E, V) declared [V, E]: row v of the table is ggml's row v, not copied.
  const formats::WeightOffer& e = find("BitNet.token_embd");
  ir::Type declared{ElemKind::F16, {ir::Dim::fixed(50), ir::Dim::fixed(256)}, WeightFormat::Plain};
  auto shape = w->shape_for(e, declared, "p");
  REQUIRE(shape.ok());
  CHECK(shape->value() == std::vector<std::int64_t>{50, 256});
  auto e1 = w->load(e, ElemKind::F16, {50, 256}, "p");
  auto e2 = w->load(e, ElemKind::F16, {50, 256}, "p");
  REQUIRE(e1.ok());
  REQUIRE(e2.ok());
  CHECK(e1->bytes().data() == e2->bytes().data());
  auto g = formats::read_gguf(file.path);
  REQUIRE(g.ok());
  auto ref = formats::dequantize_gguf(*g->find_tensor("token_embd.weight"));
  REQUIRE(ref.ok());
  for (std::size_t i : {std::size_t{0}, std::size_t{257}, std::size_t{49 * 256 + 255}}) CHECK(e1->at(i) == ref.value()[i]);
}

TEST_CASE("bitnet config: what cannot be written or read is refused by name") {
  BitNetConfig c = formats::tiny_bitnet_config();
  c.hidden = 64;  // the brief's tiny width: TQ2_0 blocks need 256 along K
  auto r = formats::check_bitnet_config(c);
  REQUIRE(!r.ok());
  CHECK(r.error().message.find("multiples of 256") != std::string::npos);
  c = formats::tiny_bitnet_config();
  c.kv_heads = 3;
  REQUIRE(!formats::check_bitnet_config(c).ok());
  c = formats::tiny_bitnet_config();
  c.blocks = 0;
  CHECK(formats::check_bitnet_config(c).error().message.find("block_count") != std::string::npos);
  TempFile file("bad.gguf");
  CHECK(!formats::write_synthetic_bitnet(file.path, c, 1).ok());
  CHECK(!std::filesystem::exists(file.path));
  // Another architecture, and a missing key.
  formats::GgufFile g;
  formats::GgufValue arch;
  arch.type = formats::GgufValueType::String;
  arch.str = "llama";
  g.metadata.push_back({"general.architecture", arch});
  auto a = formats::bitnet_config(g);
  REQUIRE(!a.ok());
  CHECK(a.error().message.find("not 'bitnet'") != std::string::npos);
  g.metadata[0].value.str = "bitnet";
  auto m = formats::bitnet_config(g);
  REQUIRE(!m.ok());
  CHECK(m.error().message.find("bitnet.block_count") != std::string::npos);
  CHECK(formats::bitnet_head_dim(BitNetConfig{}) == 128);
  CHECK(formats::check_bitnet_config(BitNetConfig{}).ok());
}

TEST_CASE("write_gguf_streamed: a tensor whose bytes cannot be made leaves no file and no temporary behind") {
  TempFile file("fails.gguf");
  formats::GgufTensorSource ok{"a", formats::GgufTensorType::F32, {4}, [](std::span<std::uint8_t> b) -> Result<void> {
                                 std::fill(b.begin(), b.end(), 0);
                                 return success();
                               }};
  formats::GgufTensorSource bad{"b", formats::GgufTensorType::F32, {4}, [](std::span<std::uint8_t>) -> Result<void> {
                                  return make_error(ErrorCode::InvalidArgument, "no bytes for b");
                                }};
  const formats::GgufTensorSource ts[] = {ok, bad};
  auto r = formats::write_gguf_streamed(file.path, {}, ts);
  REQUIRE(!r.ok());
  CHECK(r.error().message.find("no bytes for b") != std::string::npos);
  CHECK(!std::filesystem::exists(file.path));
  const std::string stem = std::filesystem::path(file.path).filename().string();
  for (const auto& e : std::filesystem::directory_iterator(std::filesystem::path(file.path).parent_path()))
    CHECK_MESSAGE(e.path().filename().string().rfind(stem, 0) != 0, "left behind: " << e.path());
  const formats::GgufTensorSource good[] = {ok};
  REQUIRE(formats::write_gguf_streamed(file.path, {}, good).ok());
  CHECK(formats::read_gguf(file.path).ok());
}

TEST_CASE("bitnet config: bitnet.hidden_activation relu2 / silu round-trips, absent is relu2, others are refused") {
  BitNetConfig c = formats::tiny_bitnet_config();
  c.ffn_activation = BitNetActivation::Silu;
  TempFile file("silu.gguf");
  REQUIRE(formats::write_synthetic_bitnet(file.path, c, 3).ok());
  auto g = formats::read_gguf(file.path);
  REQUIRE(g.ok());
  CHECK(g->get_string("bitnet.hidden_activation").value() == "silu");
  auto back = formats::bitnet_config(g.value());
  REQUIRE(back.ok());
  CHECK(back->ffn_activation == BitNetActivation::Silu);
  formats::GgufFile f = std::move(g.value());
  auto at = std::find_if(f.metadata.begin(), f.metadata.end(),
                         [](const formats::GgufKv& kv) { return kv.key == "bitnet.hidden_activation"; });
  REQUIRE(at != f.metadata.end());
  at->value.str = "gelu";
  auto gelu = formats::bitnet_config(f);
  REQUIRE(!gelu.ok());
  CHECK(gelu.error().message.find("bitnet.hidden_activation is 'gelu'") != std::string::npos);
  at->value.type = formats::GgufValueType::U32;
  CHECK(!formats::bitnet_config(f).ok());  // not a string
  f.metadata.erase(at);                     // a file converted without the key (llama.cpp's converter)
  auto absent = formats::bitnet_config(f);
  REQUIRE(absent.ok());
  CHECK(absent->ffn_activation == BitNetActivation::Relu2);
  CHECK(formats::check_bitnet_config(BitNetConfig{}).ok());
}

TEST_CASE("bitnet config: the token table's type round-trips through the file; embedding and kv_cache are float kinds") {
  // `c` written as a synthetic file and read back.
  auto written = [](const BitNetConfig& c) {
    TempFile file("written.gguf");
    REQUIRE(formats::write_synthetic_bitnet(file.path, c, 9).ok());
    auto g = formats::read_gguf(file.path);
    REQUIRE(g.ok());
    return std::move(g.value());
  };
  for (ElemKind kind : {ElemKind::F16, ElemKind::BF16, ElemKind::F32}) {
    BitNetConfig c = formats::tiny_bitnet_config();
    c.embedding = kind;
    const formats::GgufFile g = written(c);
    const GgufTensorType want = kind == ElemKind::F16 ? GgufTensorType::F16
                                : kind == ElemKind::BF16 ? GgufTensorType::BF16
                                                         : GgufTensorType::F32;
    CHECK(g.find_tensor("token_embd.weight")->type == want);
    auto back = formats::bitnet_config(g);
    REQUIRE(back.ok());
    CHECK(back->embedding == kind);
    CHECK(back->kv_cache == ElemKind::F16);
    CHECK(!back->separate_head);
  }
  // A separate head: output.weight written, read back, bound by the name map.
  BitNetConfig c = formats::tiny_bitnet_config();
  c.separate_head = true;
  const formats::GgufFile g = written(c);
  REQUIRE(g.find_tensor("output.weight") != nullptr);
  CHECK(g.find_tensor("output.weight")->dims == std::vector<std::uint64_t>{256, 50});
  CHECK(formats::bitnet_config(g)->separate_head);
  auto names = formats::NameMap::parse(formats::bitnet_name_map("BitNet"));
  REQUIRE(names.ok());
  CHECK(names->apply("output.weight") == "BitNet.output");
  c = formats::tiny_bitnet_config();
  c.embedding = ElemKind::I8;
  auto r = formats::check_bitnet_config(c);
  REQUIRE(!r.ok());
  CHECK(r.error().message.find("embedding is i8") != std::string::npos);
  c = formats::tiny_bitnet_config();
  c.kv_cache = ElemKind::T2;
  REQUIRE(!formats::check_bitnet_config(c).ok());
  CHECK(formats::check_bitnet_config(c).error().message.find("kv_cache is t2") != std::string::npos);
}

}  // namespace
}  // namespace ternjit
