// SPDX-License-Identifier: Apache-2.0
// gguf_test.cpp - GGUF: hand-built blocks of every type, round trips, and every malformation.
#include "formats/gguf.h"
#include "tests/unit/formats/tq_testing.h"
#include "tests/unit/process_memory.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace ternjit;
using namespace ternjit::formats;

// A little-endian byte writer for hand-built images (independent of serialize_gguf).
struct Bytes {
  std::vector<std::uint8_t> b;
  Bytes& u(std::uint64_t v, int n) {
    for (int k = 0; k < n; ++k) b.push_back(static_cast<std::uint8_t>(v >> (8 * k)));
    return *this;
  }
  Bytes& str(const std::string& s) {
    u(s.size(), 8);
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  Bytes& pad_to(std::size_t alignment) {
    while (b.size() % alignment != 0) b.push_back(0);
    return *this;
  }
};

ir::SharedBytes owned(const std::vector<std::uint8_t>& v) { return ir::SharedBytes::copy_of(v); }

GgufTensor tensor(std::string name, GgufTensorType type, std::vector<std::uint64_t> dims, std::vector<std::uint8_t> bytes) {
  GgufTensor t;
  t.name = std::move(name);
  t.type = type;
  t.dims = std::move(dims);
  t.bytes = ir::SharedBytes::adopt(std::move(bytes));
  return t;
}

using testing::tq1_pack;

// A small v3 file: kv "name" = "tiny", "n" = u32 7; tensor "a" F32 [4] at 0, tensor "b"
// Q8_0 [32] at 32. Returns the image and the header size.
std::vector<std::uint8_t> small_file(std::uint32_t version = 3) {
  Bytes f;
  f.u(0x46554747, 4).u(version, 4).u(2, 8).u(2, 8);
  f.str("name").u(8, 4).str("tiny");
  f.str("n").u(4, 4).u(7, 4);
  f.str("a").u(1, 4).u(4, 8).u(0, 4).u(0, 8);
  f.str("b").u(1, 4).u(32, 8).u(8, 4).u(32, 8);
  f.pad_to(32);
  for (int k = 0; k < 4; ++k) f.u(std::bit_cast<std::uint32_t>(static_cast<float>(k) + 0.5f), 4);
  f.pad_to(32);
  f.u(0x3C00, 2);  // d = 1.0
  for (int k = 0; k < 32; ++k) f.u(static_cast<std::uint8_t>(k - 16), 1);
  return f.b;
}

bool has(const Error& e, const std::string& s) { return e.message.find(s) != std::string::npos; }

}  // namespace

TEST_CASE("gguf: TQ2_0 block by hand") {
  std::vector<std::uint8_t> blk(66, 0x55);  // every code 01: value 0
  // Byte 0: codes (l=0..3) 10, 00, 01, 10 -> elements 0, 32, 64, 96 = +1, -1, 0, +1.
  blk[0] = 0b10'01'00'10;
  // Byte 33 (second half, m = 1): code 00 at l = 3 -> element 128 + 96 + 1 = 225 is -1.
  blk[33] = 0b00'01'01'01;
  blk[64] = 0x00;
  blk[65] = 0x40;  // d = 2.0
  const GgufTensor t = tensor("w", GgufTensorType::TQ2_0, {256}, blk);
  auto tern = gguf_ternary(t);
  REQUIRE(tern.ok());
  CHECK(tern.value().scales == std::vector<float>{2.0f});
  std::vector<std::int8_t> want(256, 0);
  want[0] = 1; want[32] = -1; want[96] = 1; want[225] = -1;
  CHECK(tern.value().values == want);
  auto f = dequantize_gguf(t);
  REQUIRE(f.ok());
  for (std::size_t i = 0; i < 256; ++i) CHECK(f.value()[i] == 2.0f * want[i]);
  // Code 3 is not ternary.
  blk[5] = 0xff;
  auto bad = gguf_ternary(tensor("w", GgufTensorType::TQ2_0, {256}, blk));
  REQUIRE(!bad.ok());
  CHECK(has(bad.error(), "element 5 has code 3"));
  // ggml dequantizes code 3 as 2 * d; so does dequantize_gguf.
  auto two = dequantize_gguf(tensor("w", GgufTensorType::TQ2_0, {256}, blk));
  REQUIRE(two.ok());
  CHECK(two.value()[5] == 4.0f);
  CHECK(two.value()[5 + 96] == 4.0f);
  CHECK(two.value()[0] == 2.0f);
}

TEST_CASE("gguf: Q2_0 block by hand") {
  // block_q2_0 { f16 d; uint8 qs[16] }: element j is (qs[j / 4] >> 2 (j % 4)) & 3, value code - 1.
  std::vector<std::uint8_t> blk(kGgufQ2_0Bytes, 0x55);  // every code 01: value 0
  blk[0] = 0x55;
  blk[1] = 0x3e;  // d = 0x3e55 = 1.5830078125
  blk[2] = 0b00'01'01'10;   // elements 0..3: +1, 0, 0, -1
  blk[17] = 0b10'00'01'01;  // elements 60..63: 0, 0, -1, +1
  std::vector<std::uint8_t> codes(kGgufQ2_0Elems);
  float d = 0;
  CHECK(gguf_q2_0_block(blk.data(), codes.data(), &d));
  CHECK(d == 1.5830078125f);
  std::vector<std::uint8_t> want(kGgufQ2_0Elems, 1);
  want[0] = 2; want[3] = 0; want[62] = 0; want[63] = 2;
  CHECK(codes == want);
  // Code 3 (+2) anywhere is not ternary; the codes are still written.
  blk[9] = 0b11'01'01'01;  // element 31
  CHECK_FALSE(gguf_q2_0_block(blk.data(), codes.data(), &d));
  CHECK(codes[31] == 3);
}

TEST_CASE("gguf: TQ1_0 block by hand") {
  // Literal: digits (2,0,1,2,1) -> q = 178 -> byte ceil(178 * 256 / 243) = 188.
  CHECK(tq1_pack(std::vector<int>{2, 0, 1, 2, 1}.data(), 5) == 188);
  std::mt19937 rng(7);
  std::vector<int> digits(256);
  for (int& d : digits) d = static_cast<int>(rng() % 3);
  // Layout of ggml's quantizer: qs[m] (m < 32) holds elements m + 32n, qs[32 + m]
  // (m < 16) holds 160 + m + 16n, qh[m] (m < 4) holds 240 + m + 4n.
  std::vector<std::uint8_t> blk(54);
  for (int m = 0; m < 32; ++m) {
    int g[5];
    for (int n = 0; n < 5; ++n) g[n] = digits[static_cast<std::size_t>(m + 32 * n)];
    blk[static_cast<std::size_t>(m)] = tq1_pack(g, 5);
  }
  for (int m = 0; m < 16; ++m) {
    int g[5];
    for (int n = 0; n < 5; ++n) g[n] = digits[static_cast<std::size_t>(160 + m + 16 * n)];
    blk[static_cast<std::size_t>(32 + m)] = tq1_pack(g, 5);
  }
  for (int m = 0; m < 4; ++m) {
    int g[4];
    for (int n = 0; n < 4; ++n) g[n] = digits[static_cast<std::size_t>(240 + m + 4 * n)];
    blk[static_cast<std::size_t>(48 + m)] = tq1_pack(g, 4);
  }
  blk[52] = 0x00;
  blk[53] = 0xB8;  // d = -0.5
  const GgufTensor t = tensor("w", GgufTensorType::TQ1_0, {256}, blk);
  auto tern = gguf_ternary(t);
  REQUIRE(tern.ok());
  CHECK(tern.value().scales == std::vector<float>{-0.5f});
  auto f = dequantize_gguf(t);
  REQUIRE(f.ok());
  for (std::size_t i = 0; i < 256; ++i) {
    CHECK(tern.value().values[i] == digits[i] - 1);
    CHECK(f.value()[i] == -0.5f * static_cast<float>(digits[i] - 1));
  }
}

TEST_CASE("gguf: Q8_0, F16, BF16, F32 by hand") {
  std::vector<std::uint8_t> q8 = {0x00, 0x40};  // d = 2.0
  for (int j = 0; j < 32; ++j) q8.push_back(static_cast<std::uint8_t>(j - 16));
  auto q = dequantize_gguf(tensor("q", GgufTensorType::Q8_0, {32}, q8));
  REQUIRE(q.ok());
  for (int j = 0; j < 32; ++j) CHECK(q.value()[static_cast<std::size_t>(j)] == 2.0f * static_cast<float>(j - 16));
  auto h = dequantize_gguf(tensor("h", GgufTensorType::F16, {2}, {0x00, 0x3C, 0x00, 0xC0}));
  REQUIRE(h.ok());
  CHECK(h.value() == std::vector<float>{1.0f, -2.0f});
  auto bf = dequantize_gguf(tensor("b", GgufTensorType::BF16, {2}, {0x80, 0x3F, 0x40, 0xC0}));
  REQUIRE(bf.ok());
  CHECK(bf.value() == std::vector<float>{1.0f, -3.0f});
  auto f = dequantize_gguf(tensor("f", GgufTensorType::F32, {1}, {0x00, 0x00, 0xC0, 0x3F}));
  REQUIRE(f.ok());
  CHECK(f.value() == std::vector<float>{1.5f});
  CHECK(!dequantize_gguf(tensor("f", GgufTensorType::F32, {2}, {0, 0, 0, 0})).ok());
  CHECK(!gguf_ternary(tensor("f", GgufTensorType::F32, {1}, {0, 0, 0, 0})).ok());
}

TEST_CASE("gguf: hand-built v3 and v2 files parse") {
  for (std::uint32_t version : {2u, 3u}) {
    auto file = parse_gguf(owned(small_file(version)), "s.gguf");
    REQUIRE(file.ok());
    const GgufFile& g = file.value();
    CHECK(g.version == version);
    CHECK(g.get_string("name").value() == "tiny");
    CHECK(g.get_uint("n").value() == 7);
    CHECK(g.get_int("n").value() == 7);
    CHECK(g.get_bool("n").error().code == ErrorCode::InvalidInput);
    CHECK(g.get_string("missing").error().code == ErrorCode::NotFound);
    REQUIRE(g.tensors.size() == 2);
    CHECK(dequantize_gguf(g.tensors[0]).value() == std::vector<float>{0.5f, 1.5f, 2.5f, 3.5f});
    const GgufTensor* b = g.find_tensor("b");
    REQUIRE(b != nullptr);
    CHECK(b->offset == 32);
    CHECK(dequantize_gguf(*b).value()[0] == -16.0f);
  }
}

TEST_CASE("gguf: every truncation is an error") {
  const std::vector<std::uint8_t> full = small_file();
  for (std::size_t n = 0; n < full.size(); ++n) {
    std::vector<std::uint8_t> prefix(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(n));
    auto r = parse_gguf(owned(prefix), "t.gguf");
    CHECK_MESSAGE(!r.ok(), "prefix " << n);
    if (!r.ok()) CHECK(r.error().message.rfind("t.gguf: ", 0) == 0);
  }
}

TEST_CASE("gguf: malformations") {
  SUBCASE("big-endian refused") {
    std::vector<std::uint8_t> f = small_file();
    f[4] = 0; f[7] = 3;
    auto r = parse_gguf(owned(f), "be.gguf");
    REQUIRE(!r.ok());
    CHECK(has(r.error(), "big-endian"));
  }
  SUBCASE("bad magic and version") {
    std::vector<std::uint8_t> f = small_file();
    f[4] = 1;
    CHECK(has(parse_gguf(owned(f), "v").error(), "version 1"));
    f[0] = 'X';
    CHECK(has(parse_gguf(owned(f), "m").error(), "magic"));
  }
  SUBCASE("offset past the end") {
    Bytes f;
    f.u(0x46554747, 4).u(3, 4).u(1, 8).u(0, 8);
    f.str("a").u(1, 4).u(4, 8).u(0, 4).u(32, 8);
    f.pad_to(32).u(0, 8).u(0, 8);
    auto r = parse_gguf(owned(f.b), "p.gguf");
    REQUIRE(!r.ok());
    CHECK(has(r.error(), "tensor 'a'"));
    CHECK(has(r.error(), "past the end"));
  }
  SUBCASE("huge offset does not wrap") {
    Bytes f;
    f.u(0x46554747, 4).u(3, 4).u(1, 8).u(0, 8);
    f.str("a").u(1, 4).u(4, 8).u(0, 4).u(0xFFFFFFFFFFFFFFE0ull, 8);
    f.pad_to(32).u(0, 8).u(0, 8);
    CHECK(has(parse_gguf(owned(f.b), "p").error(), "past the end"));
  }
  SUBCASE("overlapping tensors") {
    Bytes f;
    f.u(0x46554747, 4).u(3, 4).u(2, 8).u(0, 8);
    f.str("a").u(1, 4).u(16, 8).u(0, 4).u(0, 8);
    f.str("b").u(1, 4).u(8, 8).u(0, 4).u(32, 8);
    f.pad_to(32);
    for (int k = 0; k < 16; ++k) f.u(0, 4);
    auto r = parse_gguf(owned(f.b), "o.gguf");
    REQUIRE(!r.ok());
    CHECK(has(r.error(), "overlap"));
  }
  SUBCASE("overlapping tensors with an empty one between them (issue 19, seen writing fuzz_gguf)") {
    // Sorted by offset: a [0, 64), e (empty, at 32), b [32, 64). Comparing neighbours
    // only, a-e and e-b were skipped for the empty e and the overlap of a and b passed.
    Bytes f;
    f.u(0x46554747, 4).u(3, 4).u(3, 8).u(0, 8);
    f.str("a").u(1, 4).u(16, 8).u(0, 4).u(0, 8);
    f.str("e").u(1, 4).u(0, 8).u(0, 4).u(32, 8);
    f.str("b").u(1, 4).u(8, 8).u(0, 4).u(32, 8);
    f.pad_to(32);
    for (int k = 0; k < 16; ++k) f.u(0, 4);
    auto r = parse_gguf(owned(f.b), "o.gguf");
    REQUIRE(!r.ok());
    CHECK(has(r.error(), "tensor 'a' and tensor 'b' overlap"));
  }
  SUBCASE("dims whose product overflows") {
    Bytes f;
    f.u(0x46554747, 4).u(3, 4).u(1, 8).u(0, 8);
    f.str("a").u(3, 4).u(1ull << 32, 8).u(1ull << 31, 8).u(2, 8).u(0, 4).u(0, 8);
    auto r = parse_gguf(owned(f.b), "d.gguf");
    REQUIRE(!r.ok());
    CHECK(has(r.error(), "tensor 'a' ne[1]"));
    CHECK(has(r.error(), "overflow"));
  }
  SUBCASE("byte size overflows") {
    Bytes f;
    f.u(0x46554747, 4).u(3, 4).u(1, 8).u(0, 8);
    f.str("a").u(1, 4).u(1ull << 62, 8).u(0, 4).u(0, 8);
    CHECK(has(parse_gguf(owned(f.b), "d").error(), "byte size overflows"));
  }
  SUBCASE("unknown type id") {
    Bytes f;
    f.u(0x46554747, 4).u(3, 4).u(1, 8).u(0, 8);
    f.str("a").u(1, 4).u(32, 8).u(4, 4).u(0, 8);  // 4 was Q4_2, removed from ggml
    auto r = parse_gguf(owned(f.b), "u.gguf");
    REQUIRE(!r.ok());
    CHECK(has(r.error(), "tensor 'a': unknown or unsupported ggml type id 4"));
  }
  SUBCASE("absurd counts") {
    Bytes f;
    f.u(0x46554747, 4).u(3, 4).u(0, 8).u(1ull << 60, 8);
    CHECK(has(parse_gguf(owned(f.b), "c").error(), "kv_count"));
    Bytes g;
    g.u(0x46554747, 4).u(3, 4).u(0, 8).u(1, 8).str("k").u(9, 4).u(0, 4).u(1ull << 61, 8);
    CHECK(has(parse_gguf(owned(g.b), "c").error(), "array count"));
    Bytes h;
    h.u(0x46554747, 4).u(3, 4).u(0, 8).u(1, 8).str("k").u(8, 4).u(1ull << 63, 8);
    CHECK(has(parse_gguf(owned(h.b), "c").error(), "key 'k' needs 9223372036854775808 bytes"));
  }
  SUBCASE("unknown value type, ne[0] not whole blocks, misaligned offset") {
    Bytes f;
    f.u(0x46554747, 4).u(3, 4).u(0, 8).u(1, 8).str("k").u(13, 4);
    CHECK(has(parse_gguf(owned(f.b), "c").error(), "unknown value type id 13"));
    Bytes g;
    g.u(0x46554747, 4).u(3, 4).u(1, 8).u(0, 8).str("a").u(1, 4).u(100, 8).u(35, 4).u(0, 8);
    CHECK(has(parse_gguf(owned(g.b), "c").error(), "not a multiple of the TQ2_0 block size 256"));
    Bytes h;
    h.u(0x46554747, 4).u(3, 4).u(1, 8).u(0, 8).str("a").u(1, 4).u(1, 8).u(0, 4).u(4, 8).pad_to(32).u(0, 8);
    CHECK(has(parse_gguf(owned(h.b), "c").error(), "not a multiple of the alignment"));
  }
}

TEST_CASE("gguf: legacy, K-quant and integer tensors parse by their ggml block sizes, never converted") {
  // (type id, elements per block, bytes per block) from ggml-common.h's block structs.
  const struct { std::uint32_t id; std::uint64_t elems, bytes; const char* name; } kinds[] = {
      {2, 32, 18, "Q4_0"},    {3, 32, 20, "Q4_1"},    {6, 32, 22, "Q5_0"},    {7, 32, 24, "Q5_1"},
      {9, 32, 36, "Q8_1"},    {10, 256, 84, "Q2_K"},  {11, 256, 110, "Q3_K"}, {12, 256, 144, "Q4_K"},
      {13, 256, 176, "Q5_K"}, {14, 256, 210, "Q6_K"}, {15, 256, 292, "Q8_K"}, {24, 1, 1, "I8"},
      {25, 1, 2, "I16"},      {26, 1, 4, "I32"},      {27, 1, 8, "I64"},      {28, 1, 8, "F64"}};
  for (const auto& k : kinds) {
    CAPTURE(k.name);
    const auto type = static_cast<GgufTensorType>(k.id);
    CHECK(gguf_type_name(type) == k.name);
    CHECK(gguf_block_elems(type) == k.elems);
    CHECK(gguf_block_bytes(type) == k.bytes);
    CHECK(!gguf_type_converted(type));
    // Two blocks of it in a hand-built file: parsed with its exact size; one byte short is
    // past the end.
    Bytes f;
    f.u(0x46554747, 4).u(3, 4).u(1, 8).u(0, 8);
    f.str("t").u(1, 4).u(2 * k.elems, 8).u(k.id, 4).u(0, 8);
    f.pad_to(32);
    for (std::uint64_t i = 0; i < 2 * k.bytes; ++i) f.u(i & 0xFF, 1);
    auto r = parse_gguf(owned(f.b), "k.gguf");
    REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
    CHECK(r->tensors[0].bytes.size() == 2 * k.bytes);
    CHECK(has(dequantize_gguf(r->tensors[0]).error(), std::string("type ") + k.name + " is not one ternjit converts"));
    std::vector<std::uint8_t> short_file = f.b;
    short_file.pop_back();
    CHECK(!parse_gguf(owned(short_file), "k.gguf").ok());
  }
  for (GgufTensorType t : {GgufTensorType::F32, GgufTensorType::F16, GgufTensorType::BF16, GgufTensorType::Q8_0,
                           GgufTensorType::TQ1_0, GgufTensorType::TQ2_0})
    CHECK(gguf_type_converted(t));
}

TEST_CASE("gguf: write and read back") {
  std::vector<GgufKv> meta;
  auto add = [&](std::string key, GgufValue v) { meta.push_back({std::move(key), std::move(v)}); };
  GgufValue v;
  v.type = GgufValueType::String; v.str = "bitnet"; add("general.architecture", v);
  v = {}; v.type = GgufValueType::U32; v.u = 64; add("general.alignment", v);
  v = {}; v.type = GgufValueType::I8; v.i = -5; add("i8", v);
  v = {}; v.type = GgufValueType::I64; v.i = -1234567890123; add("i64", v);
  v = {}; v.type = GgufValueType::U16; v.u = 65535; add("u16", v);
  v = {}; v.type = GgufValueType::F32; v.f = 0.25; add("f32", v);
  v = {}; v.type = GgufValueType::F64; v.f = 1e300; add("f64", v);
  v = {}; v.type = GgufValueType::Bool; v.b = true; add("flag", v);
  std::vector<GgufValue> token_values;
  for (const char* s : {"<s>", "a", ""}) {
    GgufValue e; e.type = GgufValueType::String; e.str = s; token_values.push_back(e);
  }
  add("tokenizer.tokens", make_gguf_array(GgufValueType::String, token_values).value());

  std::vector<std::uint8_t> tq2(2 * 66, 0x55);
  tq2[0] = 0x56;  // element 0: code 10, +1
  tq2[64] = 0x00; tq2[65] = 0x3C; tq2[130] = 0x00; tq2[131] = 0x40;  // d = 1.0, 2.0
  std::vector<GgufTensor> tensors = {
      tensor("blk.0.w", GgufTensorType::TQ2_0, {256, 2}, tq2),
      tensor("norm", GgufTensorType::F32, {3}, {0, 0, 0x80, 0x3F, 0, 0, 0, 0x40, 0, 0, 0x40, 0x40}),
  };
  const std::string path = (std::filesystem::temp_directory_path() / ("gguf_test_" + std::to_string(::getpid()) + ".gguf")).string();
  REQUIRE(write_gguf(path, meta, tensors).ok());
  auto read = read_gguf(path);
  REQUIRE(read.ok());
  const GgufFile& g = read.value();
  CHECK(g.version == 3);
  CHECK(g.alignment == 64);
  REQUIRE(g.metadata.size() == meta.size());
  for (std::size_t k = 0; k < meta.size(); ++k) {
    CHECK(g.metadata[k].key == meta[k].key);
    CHECK(g.metadata[k].value.type == meta[k].value.type);
  }
  CHECK(g.get_string("general.architecture").value() == "bitnet");
  CHECK(g.get_int("i8").value() == -5);
  CHECK(g.get_int("i64").value() == -1234567890123);
  CHECK(g.get_uint("u16").value() == 65535);
  CHECK(g.get_float("f32").value() == 0.25);
  CHECK(g.get_float("f64").value() == 1e300);
  CHECK(g.get_bool("flag").value());
  const GgufValue* tv = g.find("tokenizer.tokens");
  REQUIRE(tv != nullptr);
  REQUIRE(tv->array_count == 3);
  CHECK(tv->array_elements()[0].str == "<s>");
  CHECK(tv->array_elements()[2].str.empty());
  CHECK(tv->array_elements(1).size() == 1);
  REQUIRE(g.tensors.size() == 2);
  CHECK(g.tensors[1].offset % 64 == 0);
  for (std::size_t k = 0; k < 2; ++k) {
    CHECK(g.tensors[k].name == tensors[k].name);
    CHECK(g.tensors[k].type == tensors[k].type);
    CHECK(g.tensors[k].dims == tensors[k].dims);
    CHECK(std::equal(g.tensors[k].bytes.span().begin(), g.tensors[k].bytes.span().end(),
                     tensors[k].bytes.span().begin(), tensors[k].bytes.span().end()));
  }
  auto tern = gguf_ternary(g.tensors[0]);
  REQUIRE(tern.ok());
  CHECK(tern.value().scales == std::vector<float>{1.0f, 2.0f});
  CHECK(tern.value().values[0] == 1);
  CHECK(tern.value().values[1] == 0);
  std::filesystem::remove(path);

  // The writer rejects what the reader would.
  std::vector<GgufTensor> bad = {tensor("x", GgufTensorType::F32, {3}, {0, 0, 0, 0})};
  CHECK(serialize_gguf(meta, bad).error().code == ErrorCode::InvalidArgument);
  std::vector<GgufTensor> twice = {tensors[1], tensors[1]};
  CHECK(!serialize_gguf({}, twice).ok());
}

TEST_CASE("gguf: corrupting any header byte never crashes") {
  // Each byte before the data section set to a few values: the result is a file or an
  // error, and every tensor of a file lies inside the image (checked by the sanitizers
  // and by the bounds below).
  const std::vector<std::uint8_t> full = small_file();
  for (std::size_t pos = 0; pos < 96 && pos < full.size(); ++pos) {
    for (std::uint8_t value : {std::uint8_t{0}, std::uint8_t{1}, std::uint8_t{0x7f}, std::uint8_t{0xff}}) {
      std::vector<std::uint8_t> f = full;
      f[pos] = value;
      const ir::SharedBytes image = owned(f);
      auto r = parse_gguf(image, "c.gguf");
      if (!r.ok()) continue;
      for (const GgufTensor& t : r.value().tensors) {
        CHECK(t.bytes.data() >= image.data());
        CHECK(t.bytes.data() + t.bytes.size() <= image.data() + image.size());
        CHECK(dequantize_gguf(t).ok());
      }
    }
  }
}

namespace {

// Parses `image` and returns how far the peak resident memory rose above the memory in use
// before (bytes) and how long it took (seconds).
struct ParseCost {
  Result<GgufFile> file;
  double peak_growth = 0, seconds = 0;
};
ParseCost parse_cost(const ir::SharedBytes& image, const std::string& name) {
  testing::reset_peak();
  const testing::Memory before = testing::memory();
  const auto start = std::chrono::steady_clock::now();
  auto file = parse_gguf(image, name);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const testing::Memory after = testing::memory();
  return ParseCost{std::move(file), after.peak - std::max(before.rss, before.peak), seconds};
}

bool inside(const ir::SharedBytes& part, const ir::SharedBytes& whole) {
  return part.data() >= whole.data() && part.data() + part.size() <= whole.data() + whole.size();
}

}  // namespace

// Issue 33 item 20: every metadata array element was a ~100-byte GgufValue, so a 4 MB
// array of 4M u8 took 0.5-0.9 GB and seconds, and the number of key/value pairs was
// uncapped (68 MB of pairs: 817 MB). Arrays are now regions of the file, pairs capped.
TEST_CASE("gguf metadata: arrays are views of the image, pairs capped; hostile headers cost bounded memory and time") {
  constexpr double kMB = 1 << 20;
  SUBCASE("a 4 MB u8 array, two arrays of 2^21 + 1, strings and nested arrays") {
    const std::uint64_t n = (std::uint64_t{1} << 22) - 64;
    Bytes f;
    f.u(0x46554747, 4).u(3, 4).u(0, 8).u(1, 8);
    f.str("a").u(9, 4).u(0, 4).u(n, 8);
    f.b.resize(f.b.size() + n, 7);
    const ir::SharedBytes image = owned(f.b);
    ParseCost c = parse_cost(image, "u8.gguf");
    REQUIRE_MESSAGE(c.file.ok(), (c.file.ok() ? "" : c.file.error().message));
    const GgufValue& v = c.file->metadata.at(0).value;
    CHECK(v.array_count == n);
    CHECK(v.array_bytes.size() == n);
    CHECK(inside(v.array_bytes, image));  // a view, not a copy
    CHECK(v.array_elements(3).size() == 3);
    CHECK(v.array_elements(3)[2].u == 7);
    CHECK_MESSAGE(c.peak_growth < 16 * kMB, "peak grew " << c.peak_growth / kMB << " MB");  // was ~440 MB
    CHECK(c.seconds < 10);  // ~1 ms; was 5-12 s

    // Two arrays of 2^21 + 1 elements passed the former cap of 2^22 in all: now both parse.
    const std::uint64_t half = (std::uint64_t{1} << 21) + 1;
    Bytes two;
    two.u(0x46554747, 4).u(3, 4).u(0, 8).u(2, 8);
    for (const char* key : {"a", "b"}) {
      two.str(key).u(9, 4).u(0, 4).u(half, 8);
      two.b.resize(two.b.size() + half, 7);
    }
    auto both = parse_gguf(owned(two.b), "arrays.gguf");
    REQUIRE(both.ok());
    CHECK(both->metadata.at(1).value.array_count == half);

    // 4 MB of empty strings (512k of them) and of arrays of one u8 (~320k).
    for (const GgufValueType elem : {GgufValueType::String, GgufValueType::Array}) {
      const std::uint64_t each = elem == GgufValueType::String ? 8 : 13, count = (std::uint64_t{4} << 20) / each;
      Bytes g;
      g.u(0x46554747, 4).u(3, 4).u(0, 8).u(1, 8);
      g.str("v").u(9, 4).u(static_cast<std::uint32_t>(elem), 4).u(count, 8);
      for (std::uint64_t k = 0; k < count; ++k) {
        if (elem == GgufValueType::String) g.u(0, 8);
        else g.u(0, 4).u(1, 8).u(5, 1);
      }
      const ir::SharedBytes img = owned(g.b);
      ParseCost s = parse_cost(img, "s.gguf");
      REQUIRE_MESSAGE(s.file.ok(), (s.file.ok() ? "" : s.file.error().message));
      const GgufValue& sv = s.file->metadata.at(0).value;
      CHECK(sv.array_count == count);
      CHECK(inside(sv.array_bytes, img));
      CHECK_MESSAGE(s.peak_growth < 16 * kMB, "peak grew " << s.peak_growth / kMB << " MB");
      CHECK(s.seconds < 10);
      const std::vector<GgufValue> head = sv.array_elements(2);
      REQUIRE(head.size() == 2);
      if (elem == GgufValueType::Array) CHECK(head[1].array_elements().at(0).u == 5);
      else CHECK(head[1].str.empty());
    }
  }
  SUBCASE("malformed elements are named") {
    Bytes f;
    f.u(0x46554747, 4).u(3, 4).u(0, 8).u(1, 8);
    f.str("flags").u(9, 4).u(7, 4).u(4, 8).u(1, 1).u(0, 1).u(2, 1).u(1, 1);
    auto r = parse_gguf(owned(f.b), "b.gguf");
    REQUIRE(!r.ok());
    CHECK(has(r.error(), "b.gguf: key 'flags'[2]: bool value 2, expected 0 or 1"));
    Bytes g;
    g.u(0x46554747, 4).u(3, 4).u(0, 8).u(1, 8);
    g.str("words").u(9, 4).u(8, 4).u(2, 8).str("ok").u(100, 8).u(0, 8);
    auto w = parse_gguf(owned(g.b), "w.gguf");
    REQUIRE(!w.ok());
    CHECK(has(w.error(), "w.gguf: key 'words'[1] needs 100 bytes"));
    // Nine nested arrays are read (depth 0 .. 8), ten are not.
    for (int levels : {9, 10}) {
      Bytes h;
      h.u(0x46554747, 4).u(3, 4).u(0, 8).u(1, 8);
      h.str("deep").u(9, 4);
      for (int l = 1; l < levels; ++l) h.u(9, 4).u(1, 8);
      h.u(0, 4).u(0, 8);
      auto d = parse_gguf(owned(h.b), "d.gguf");
      CHECK_MESSAGE(d.ok() == (levels == 9), levels);
      if (!d.ok()) CHECK(has(d.error(), "arrays nested more than 8 deep"));
    }
  }
  SUBCASE("key/value pairs past kMaxGgufMetadataPairs are refused before any is read") {
    for (const std::uint64_t pairs : {kMaxGgufMetadataPairs, kMaxGgufMetadataPairs + 1}) {
      Bytes f;
      f.u(0x46554747, 4).u(3, 4).u(0, 8).u(pairs, 8);
      for (std::uint64_t k = 0; k < pairs; ++k) f.str("").u(0, 4).u(1, 1);  // 13 bytes each
      ParseCost c = parse_cost(owned(f.b), "pairs.gguf");
      if (pairs == kMaxGgufMetadataPairs) {
        REQUIRE(c.file.ok());
        CHECK(c.file->metadata.size() == pairs);
        // A pair takes sizeof(GgufKv) (~150 bytes): about 10 MB at the limit.
        CHECK_MESSAGE(c.peak_growth < 32 * kMB, "peak grew " << c.peak_growth / kMB << " MB");
      } else {
        REQUIRE(!c.file.ok());
        CHECK(has(c.file.error(), "pairs.gguf: kv_count 65537 is over the limit of 65536 key/value pairs"));
      }
      CHECK(c.seconds < 10);
    }
  }
}

TEST_CASE("gguf metadata: make_gguf_array, serialize and parse again; hand-built arrays are checked") {
  std::vector<GgufValue> words;
  for (const char* w : {"x", "", "yz"}) {
    GgufValue e;
    e.type = GgufValueType::String;
    e.str = w;
    words.push_back(e);
  }
  auto inner = make_gguf_array(GgufValueType::String, words);
  REQUIRE(inner.ok());
  const std::vector<GgufValue> nested{inner.value(), make_gguf_array(GgufValueType::String, {}).value()};
  auto outer = make_gguf_array(GgufValueType::Array, nested);
  REQUIRE(outer.ok());
  GgufValue wrong;
  wrong.type = GgufValueType::U8;
  CHECK(!make_gguf_array(GgufValueType::String, std::vector{wrong}).ok());
  std::vector<GgufKv> meta{{"nested", outer.value()}};
  auto image = serialize_gguf(meta, {});
  REQUIRE(image.ok());
  auto back = parse_gguf(owned(image.value()), "n.gguf");
  REQUIRE(back.ok());
  const std::vector<GgufValue> got = back->metadata.at(0).value.array_elements();
  REQUIRE(got.size() == 2);
  CHECK(got[0].array_count == 3);
  CHECK(got[0].array_elements()[2].str == "yz");
  CHECK(got[1].array_count == 0);
  // A hand-built array whose bytes do not hold what it says is refused by the writer.
  GgufValue lying = outer.value();
  lying.array_count = 3;
  std::vector<GgufKv> bad{{"lying", lying}};
  auto refused = serialize_gguf(bad, {});
  REQUIRE(!refused.ok());
  CHECK(has(refused.error(), "key 'lying': array_bytes do not hold 3 elements"));
}
