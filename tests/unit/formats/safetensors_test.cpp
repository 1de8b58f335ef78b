// SPDX-License-Identifier: Apache-2.0
// safetensors_test.cpp - safetensors round trips, golden bytes and one test per malformation.
#include "formats/safetensors.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "formats/mapped_file.h"
#include "ir/numeric.h"

namespace {

using namespace ternjit;
using namespace ternjit::formats;
namespace fs = std::filesystem;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// A safetensors image: length prefix, the header text as given, then `data`.
std::vector<std::uint8_t> image(const std::string& header, const std::vector<std::uint8_t>& data = {},
                                std::uint64_t header_size_override = UINT64_MAX) {
  const std::uint64_t n = header_size_override != UINT64_MAX ? header_size_override : header.size();
  std::vector<std::uint8_t> out;
  for (int k = 0; k < 8; ++k) out.push_back(static_cast<std::uint8_t>(n >> (8 * k)));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

// Parses an image that must be rejected; returns the message after checking the code
// and the display-name prefix.
ir::SharedBytes bytes_of(std::vector<std::uint8_t> bytes) { return ir::SharedBytes::adopt(std::move(bytes)); }

std::string parse_error(const std::vector<std::uint8_t>& bytes) {
  auto r = parse_safetensors(bytes, "w.st");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ErrorCode::InvalidInput);
  CHECK(r.error().message.rfind("w.st: ", 0) == 0);
  return r.error().message;
}

std::string header_error(const std::string& header, std::size_t data_bytes = 16) {
  return parse_error(image(header, std::vector<std::uint8_t>(data_bytes)));
}

// A scratch directory unique to one test case, removed at the end of the test.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& name)
      : path_(fs::path(TERNJIT_BINARY_DIR) / "formats_test_scratch" / name) {
    std::error_code ec;
    fs::remove_all(path_, ec);
    fs::create_directories(path_, ec);
    REQUIRE_FALSE(ec);
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  [[nodiscard]] std::string file(const std::string& name) const { return (path_ / name).string(); }
  [[nodiscard]] std::vector<std::string> entries() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(path_)) out.push_back(e.path().filename().string());
    return out;
  }

 private:
  fs::path path_;
};

StFile sample_file() {
  StFile file;
  const std::vector<float> w = {1.0f, -2.5f, 0.0f, 3.25f, 1e-3f, -0.0f};
  const std::vector<std::int8_t> q = {-1, 0, 1, 127, -128};
  const std::vector<std::int32_t> idx = {0, -1, 2147483647, -2147483647 - 1};
  const std::vector<std::uint8_t> packed = {0xA4, 0x55, 0x56};
  file.tensors.push_back(make_i32_tensor("z.idx", {2, 2}, idx));
  file.tensors.push_back(make_f32_tensor("layer.0.weight", {2, 3}, w));
  file.tensors.push_back(make_i8_tensor("layer.0.q", {5}, q));
  file.tensors.push_back(make_u8_tensor("layer.0.tern2", {3}, packed));
  file.tensors.push_back(make_f32_tensor("scalar", {}, std::vector<float>{42.0f}));
  file.tensors.push_back(make_f32_tensor("empty", {0, 3}, std::vector<float>{}));
  StTensor half{"h", "F16", ElemKind::F16, {2}, bytes_of({0x00, 0x3C, 0x00, 0xC0})};  // 1.0, -2.0
  StTensor brain{"b", "BF16", ElemKind::BF16, {2}, bytes_of({0x80, 0x3F, 0x49, 0x40})};  // 1.0, 3.140625
  file.tensors.push_back(half);
  file.tensors.push_back(brain);
  file.metadata = {{"format", "pt"}, {"note", "quote \" and \\ and \xC3\xA9"}};
  return file;
}

void check_same(const StFile& a, const StFile& b) {
  REQUIRE(a.tensors.size() == b.tensors.size());
  CHECK(a.metadata == b.metadata);
  for (const StTensor& t : a.tensors) {
    const StTensor* u = b.find(t.name);
    REQUIRE(u != nullptr);
    CHECK(u->dtype == t.dtype);
    CHECK(u->kind == t.kind);
    CHECK(u->shape == t.shape);
    CHECK(std::ranges::equal(u->bytes.span(), t.bytes.span()));
  }
}

}  // namespace

TEST_CASE("safetensors: golden bytes of a one-tensor file") {
  StFile file;
  file.tensors.push_back(make_f32_tensor("a", {1}, std::vector<float>{1.0f}));
  const auto bytes = serialize_safetensors(file);
  const std::string header = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  REQUIRE(header.size() == 54);
  // 54 header bytes padded with 2 spaces to 56, so the data starts at offset 64.
  std::vector<std::uint8_t> expected = {56, 0, 0, 0, 0, 0, 0, 0};
  expected.insert(expected.end(), header.begin(), header.end());
  expected.insert(expected.end(), {' ', ' ', 0x00, 0x00, 0x80, 0x3F});
  CHECK(bytes == expected);
}

TEST_CASE("safetensors: serialization is deterministic and name-sorted") {
  StFile file = sample_file();
  const auto bytes = serialize_safetensors(file);
  std::reverse(file.tensors.begin(), file.tensors.end());
  CHECK(serialize_safetensors(file) == bytes);

  std::uint64_t n = 0;
  for (int k = 0; k < 8; ++k) n |= static_cast<std::uint64_t>(bytes[k]) << (8 * k);
  CHECK(n % 8 == 0);
  const std::string header(bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(n));
  CHECK(header.rfind(R"({"__metadata__":{"format":"pt","note":"quote \" and \\ and )", 0) == 0);
  CHECK(header.find("\"b\":") < header.find("\"empty\":"));
  CHECK(header.find("\"layer.0.weight\":") < header.find("\"scalar\":"));

  auto parsed = parse_safetensors(bytes, "mem");
  REQUIRE(parsed.ok());
  std::vector<std::string> names;
  for (const StTensor& t : parsed->tensors) names.push_back(t.name);
  CHECK(names == std::vector<std::string>{"b", "empty", "h", "layer.0.q", "layer.0.tern2", "layer.0.weight",
                                          "scalar", "z.idx"});
  check_same(sample_file(), *parsed);
  CHECK(serialize_safetensors(*parsed) == bytes);
}

TEST_CASE("safetensors: round trip through a file, written atomically") {
  ScratchDir dir("round_trip");
  const std::string path = dir.file("model.safetensors");
  const StFile file = sample_file();
  REQUIRE(write_safetensors(path, file).ok());
  CHECK(dir.entries() == std::vector<std::string>{"model.safetensors"});  // no temporary left

  auto back = read_safetensors(path);
  REQUIRE(back.ok());
  check_same(file, *back);

  // Overwriting replaces the whole file.
  StFile small;
  small.tensors.push_back(make_i8_tensor("only", {1}, std::vector<std::int8_t>{-7}));
  REQUIRE(write_safetensors(path, small).ok());
  auto again = read_safetensors(path);
  REQUIRE(again.ok());
  REQUIRE(again->tensors.size() == 1);
  CHECK(std::ranges::equal(again->tensors[0].bytes.span(), std::vector<std::uint8_t>{0xF9}));
  CHECK(again->metadata.empty());
  CHECK(dir.entries() == std::vector<std::string>{"model.safetensors"});
}

TEST_CASE("safetensors: reads a file laid out like the Python writer's") {
  // Python's safetensors pads with spaces, orders keys differently, and may leave the
  // metadata last; offsets need not follow name order.
  const std::string header =
      R"({"b": {"dtype": "I8", "shape": [2], "data_offsets": [0, 2]}, )"
      R"("a": {"data_offsets": [2, 10], "shape": [1, 2], "dtype": "F32"}, "__metadata__": {"k": "v"}}   )";
  const std::vector<std::uint8_t> data = {0xFF, 0x01, 0x00, 0x00, 0x80, 0x3F, 0x00, 0x00, 0x00, 0xC0};
  auto r = parse_safetensors(image(header, data), "py.st");
  REQUIRE(r.ok());
  REQUIRE(r->tensors.size() == 2);
  CHECK(r->tensors[0].name == "a");
  CHECK(r->metadata.at("k") == "v");
  auto a = to_f32(*r->find("a"));
  REQUIRE(a.ok());
  CHECK(*a == std::vector<float>{1.0f, -2.0f});
  auto b = to_i8(*r->find("b"));
  REQUIRE(b.ok());
  CHECK(*b == std::vector<std::int8_t>{-1, 1});
  CHECK(r->find("missing") == nullptr);
}

TEST_CASE("safetensors: to_f32 converts every dtype exactly") {
  const StFile file = sample_file();
  auto h = to_f32(*file.find("h"));
  REQUIRE(h.ok());
  CHECK(*h == std::vector<float>{1.0f, -2.0f});
  auto b = to_f32(*file.find("b"));
  REQUIRE(b.ok());
  CHECK(*b == std::vector<float>{1.0f, 3.140625f});
  auto q = to_f32(*file.find("layer.0.q"));
  REQUIRE(q.ok());
  CHECK(*q == std::vector<float>{-1.0f, 0.0f, 1.0f, 127.0f, -128.0f});
  auto u = to_f32(*file.find("layer.0.tern2"));
  REQUIRE(u.ok());
  CHECK(*u == std::vector<float>{164.0f, 85.0f, 86.0f});
  auto w = to_f32(*file.find("layer.0.weight"));
  REQUIRE(w.ok());
  CHECK(*w == std::vector<float>{1.0f, -2.5f, 0.0f, 3.25f, 1e-3f, -0.0f});
  auto e = to_f32(*file.find("empty"));
  REQUIRE(e.ok());
  CHECK(e->empty());

  // I32 values that f32 holds exactly convert; others are an error, not a rounding.
  auto exact = to_f32(make_i32_tensor("i", {4}, std::vector<std::int32_t>{16777216, -16777216, 1 << 30, -7}));
  REQUIRE(exact.ok());
  CHECK(*exact == std::vector<float>{16777216.0f, -16777216.0f, 1073741824.0f, -7.0f});
  auto inexact = to_f32(make_i32_tensor("i", {2}, std::vector<std::int32_t>{1, 16777217}));
  REQUIRE_FALSE(inexact.ok());
  CHECK(inexact.error().message == "tensor 'i': I32 value 16777217 at index 1 is not exactly representable as f32");
  CHECK_FALSE(to_f32(*file.find("z.idx")).ok());  // 2147483647 is not an f32

  StTensor bad = make_f32_tensor("w", {2, 2}, std::vector<float>{1, 2, 3});
  auto mismatch = to_f32(bad);
  REQUIRE_FALSE(mismatch.ok());
  CHECK(mismatch.error().message == "tensor 'w': 12 bytes, but dtype F32 and shape [2, 2] need 16");
}

TEST_CASE("safetensors: to_i8") {
  auto u8 = to_i8(make_u8_tensor("u", {3}, std::vector<std::uint8_t>{0, 127, 5}));
  REQUIRE(u8.ok());
  CHECK(*u8 == std::vector<std::int8_t>{0, 127, 5});
  auto big = to_i8(make_u8_tensor("u", {3}, std::vector<std::uint8_t>{0, 1, 200}));
  REQUIRE_FALSE(big.ok());
  CHECK(big.error().message == "tensor 'u': U8 value 200 at index 2 does not fit in I8, expected at most 127");
  auto f32 = to_i8(make_f32_tensor("f", {1}, std::vector<float>{1.0f}));
  REQUIRE_FALSE(f32.ok());
  CHECK(f32.error().message == "tensor 'f' has dtype F32, expected I8 or U8");
}

TEST_CASE("safetensors: write_safetensors rejects invalid files") {
  ScratchDir dir("write_invalid");
  const std::string path = dir.file("x.st");
  const auto write_error = [&](const StFile& file) {
    auto r = write_safetensors(path, file);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == ErrorCode::InvalidArgument);
    return r.error().message;
  };
  StFile wrong_size;
  wrong_size.tensors.push_back(make_f32_tensor("w", {2, 2}, std::vector<float>{1, 2, 3}));
  CHECK(write_error(wrong_size) == "tensor 'w': 12 bytes, but dtype F32 and shape [2, 2] need 16");

  StFile twice;
  twice.tensors.push_back(make_i8_tensor("a", {1}, std::vector<std::int8_t>{1}));
  twice.tensors.push_back(make_i8_tensor("a", {1}, std::vector<std::int8_t>{2}));
  CHECK(write_error(twice) == "tensor name 'a' appears more than once");

  StFile reserved;
  reserved.tensors.push_back(make_i8_tensor("__metadata__", {1}, std::vector<std::int8_t>{1}));
  CHECK(contains(write_error(reserved), "reserved"));

  StFile misspelled;
  misspelled.tensors.push_back(make_i8_tensor("a", {1}, std::vector<std::int8_t>{1}));
  misspelled.tensors[0].dtype = "U8";
  CHECK(write_error(misspelled) == "tensor 'a': dtype 'U8' does not spell element kind i8, expected I8");

  StFile ternary;
  ternary.tensors.push_back(StTensor{"t", "", ElemKind::T2, {1}, bytes_of({0})});
  CHECK(contains(write_error(ternary), "element kind t2 has no safetensors dtype"));

  StFile negative;
  negative.tensors.push_back(make_i8_tensor("n", {-1}, std::vector<std::int8_t>{}));
  CHECK(contains(write_error(negative), "negative"));

  CHECK(dir.entries().empty());
}

TEST_CASE("safetensors: file system errors") {
  auto missing = read_safetensors("/nonexistent-dir-ternjit/none.safetensors");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().code == ErrorCode::NotFound);
  CHECK(contains(missing.error().message, "/nonexistent-dir-ternjit/none.safetensors"));

  StFile file;
  file.tensors.push_back(make_i8_tensor("a", {1}, std::vector<std::int8_t>{1}));
  auto unwritable = write_safetensors("/nonexistent-dir-ternjit/out.safetensors", file);
  REQUIRE_FALSE(unwritable.ok());
  CHECK(unwritable.error().code == ErrorCode::IoError);

  // A malformed file on disk reports its path as the display name.
  ScratchDir dir("fs_errors");
  const std::string path = dir.file("short.st");
  {
    std::ofstream out(path, std::ios::binary);
    out << "abc";
  }
  auto short_file = read_safetensors(path);
  REQUIRE_FALSE(short_file.ok());
  CHECK(short_file.error().message == path + ": file is 3 bytes, expected at least 8 (the header length)");
}

TEST_CASE("malformed: file shorter than 8 bytes") {
  CHECK(parse_error({}) == "w.st: file is 0 bytes, expected at least 8 (the header length)");
  CHECK(parse_error({1, 0, 0, 0, 0}) == "w.st: file is 5 bytes, expected at least 8 (the header length)");
}

TEST_CASE("malformed: header length past the end of the file") {
  CHECK(parse_error(image("{}", {}, 100)) ==
        "w.st: header length 100 is past the end of the file: only 2 bytes follow the length field");
  CHECK(contains(parse_error(image("", {}, UINT64_MAX - 1)), "over the limit"));
}

TEST_CASE("malformed: absurd header length") {
  CHECK(parse_error(image("{}", {}, std::uint64_t{1} << 40)) ==
        "w.st: header length 1099511627776 is over the limit of 100000000 bytes");
}

TEST_CASE("malformed: invalid JSON") {
  const std::string truncated = header_error(R"({"w": {"dtype": "F32", )");
  CHECK(contains(truncated, "header is not valid JSON: parse error at line 1"));
  CHECK(contains(header_error("{\"w\": nope}"), "not valid JSON"));
  CHECK(contains(header_error(""), "not valid JSON"));
  CHECK(contains(header_error("{} trailing"), "not valid JSON"));
  CHECK(contains(header_error("{\"\xFF\": 1}"), "not valid JSON"));  // invalid UTF-8
  // The offending token is not echoed (it could be megabytes long).
  CHECK_FALSE(contains(header_error("{\"w\": " + std::string(1000, 'x') + "}"), "xxxx"));
}

TEST_CASE("malformed: deep nesting is rejected before the JSON parser builds it (issue 19 item 10)") {
  // 10 MB of nested arrays in a metadata value made the parser build 5 million nodes
  // (~900 MB); the depth check rejects it before parsing.
  const std::size_t levels = 5'000'000;
  const std::string deep = R"({"__metadata__": {"a": )" + std::string(levels, '[') + std::string(levels, ']') + "}}";
  CHECK(header_error(deep) == "w.st: header nests objects and arrays deeper than 8 levels (a safetensors header needs 3)");
  // Objects count as well; brackets inside strings do not.
  CHECK(contains(header_error(std::string(9, '{') + std::string(9, '}')), "deeper than 8 levels"));
  const std::string quoted = R"({"__metadata__": {"a": "[[[[[[[[[[\"{{{{{{{{{{"}})";
  auto ok = parse_safetensors(image(quoted), "w.st");
  REQUIRE(ok.ok());
  CHECK(ok->metadata.at("a") == "[[[[[[[[[[\"{{{{{{{{{{");
  // Eight levels are still parsed, and an ill-typed deep field keeps its precise message.
  CHECK(header_error(R"({"w": {"dtype": "F32", "shape": [[[[[[1]]]]]], "data_offsets": [0, 4]}})") ==
        "w.st: tensor 'w': shape dimension 0 is array, expected a non-negative integer");
}

TEST_CASE("malformed: header is not an object") {
  CHECK(header_error("[1, 2]") == "w.st: header is array, expected a JSON object");
  CHECK(header_error("42") == "w.st: header is 42, expected a JSON object");
}

TEST_CASE("malformed: non-object entry") {
  CHECK(header_error(R"({"w": 3})") == "w.st: tensor 'w': entry is 3, expected an object");
  CHECK(header_error(R"({"w": [1]})") == "w.st: tensor 'w': entry is array, expected an object");
}

TEST_CASE("malformed: missing or ill-typed dtype") {
  CHECK(header_error(R"({"w": {"shape": [1], "data_offsets": [0, 4]}})") ==
        "w.st: tensor 'w': missing field 'dtype'");
  CHECK(header_error(R"({"w": {"dtype": 7, "shape": [1], "data_offsets": [0, 4]}})") ==
        "w.st: tensor 'w': 'dtype' is 7, expected a string");
}

TEST_CASE("malformed: unknown dtype names it and lists the supported ones") {
  CHECK(header_error(R"({"w": {"dtype": "Q4", "shape": [1], "data_offsets": [0, 8]}})") ==
        "w.st: tensor 'w': unknown dtype 'Q4', expected one of F32, F16, BF16, I8, U8, I32 (or, read but never "
        "bound, F64, I64, U64, I16, U16, U32, BOOL, F8_E4M3, F8_E5M2)");
  CHECK(contains(header_error(R"({"w": {"dtype": "f32", "shape": [1], "data_offsets": [0, 4]}})"),
                 "unknown dtype 'f32'"));
}

TEST_CASE("malformed: missing or ill-typed shape") {
  CHECK(header_error(R"({"w": {"dtype": "F32", "data_offsets": [0, 4]}})") ==
        "w.st: tensor 'w': missing field 'shape'");
  CHECK(header_error(R"({"w": {"dtype": "F32", "shape": {"a": 1}, "data_offsets": [0, 4]}})") ==
        "w.st: tensor 'w': 'shape' is object, expected an array of integers");
  CHECK(header_error(R"({"w": {"dtype": "F32", "shape": [1, "2"], "data_offsets": [0, 8]}})") ==
        "w.st: tensor 'w': shape dimension 1 is string '2', expected a non-negative integer");
  CHECK(header_error(R"({"w": {"dtype": "F32", "shape": [2.5], "data_offsets": [0, 8]}})") ==
        "w.st: tensor 'w': shape dimension 0 is 2.5, expected a non-negative integer");
  CHECK(header_error(R"({"w": {"dtype": "F32", "shape": [null], "data_offsets": [0, 8]}})") ==
        "w.st: tensor 'w': shape dimension 0 is null, expected a non-negative integer");
}

TEST_CASE("malformed: negative dims") {
  CHECK(header_error(R"({"w": {"dtype": "F32", "shape": [2, -2], "data_offsets": [0, 16]}})") ==
        "w.st: tensor 'w': shape dimension 1 is -2, expected a non-negative integer");
}

TEST_CASE("malformed: element count overflow") {
  CHECK(header_error(R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 16]}})") ==
        "w.st: tensor 'w': dtype F32 and shape [4294967296, 4294967296] need more than 2^64 bytes");
  CHECK(header_error(R"({"w": {"dtype": "I8", "shape": [18446744073709551615], "data_offsets": [0, 16]}})") ==
        "w.st: tensor 'w': shape dimension 0 is 18446744073709551615, larger than 2^63 - 1");
  // A number beyond 64 bits parses as a float and is rejected as not an integer.
  CHECK(contains(header_error(R"({"w": {"dtype": "I8", "shape": [1e30], "data_offsets": [0, 16]}})"),
                 "expected a non-negative integer"));
  // A zero dim makes the tensor empty whatever the other dims are.
  auto zero = parse_safetensors(
      image(R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296, 0], "data_offsets": [0, 0]}})"), "w.st");
  REQUIRE(zero.ok());
  CHECK(zero->tensors[0].bytes.empty());
}

TEST_CASE("malformed: missing or ill-typed data_offsets") {
  CHECK(header_error(R"({"w": {"dtype": "F32", "shape": [1]}})") == "w.st: tensor 'w': missing field 'data_offsets'");
  CHECK(header_error(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": "0-4"}})") ==
        "w.st: tensor 'w': 'data_offsets' is string '0-4', expected an array [begin, end]");
  CHECK(header_error(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4, 8]}})") ==
        "w.st: tensor 'w': 'data_offsets' has 3 elements, expected 2 ([begin, end])");
  CHECK(header_error(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [-4, 0]}})") ==
        "w.st: tensor 'w': data_offsets[0] is -4, expected a non-negative integer");
  CHECK(header_error(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, true]}})") ==
        "w.st: tensor 'w': data_offsets[1] is true, expected a non-negative integer");
}

TEST_CASE("malformed: data_offsets out of range") {
  CHECK(header_error(R"({"w": {"dtype": "F32", "shape": [16], "data_offsets": [0, 64]}})", 16) ==
        "w.st: tensor 'w': data_offsets [0, 64] end past the data buffer, which holds 16 bytes");
  CHECK(contains(header_error(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [18, 22]}})", 16),
                 "end past the data buffer"));
}

TEST_CASE("malformed: data_offsets begin > end") {
  CHECK(header_error(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [8, 4]}})") ==
        "w.st: tensor 'w': data_offsets [8, 4] have begin > end");
}

TEST_CASE("malformed: byte length does not match shape and dtype") {
  CHECK(header_error(R"({"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 12]}})") ==
        "w.st: tensor 'w': data_offsets [0, 12] hold 12 bytes, but dtype F32 and shape [2, 2] need 16");
  CHECK(header_error(R"({"w": {"dtype": "BF16", "shape": [], "data_offsets": [0, 4]}})") ==
        "w.st: tensor 'w': data_offsets [0, 4] hold 4 bytes, but dtype BF16 and shape [] need 2");
}

TEST_CASE("malformed: overlapping tensors") {
  CHECK(header_error(R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},)"
                     R"( "b": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}})",
                     24) == "w.st: tensors 'a' (data_offsets [0, 16]) and 'b' (data_offsets [8, 24]) overlap");
  // Containment, found even when a shorter range sits between.
  CHECK(contains(header_error(R"({"big": {"dtype": "U8", "shape": [16], "data_offsets": [0, 16]},)"
                              R"( "x": {"dtype": "U8", "shape": [2], "data_offsets": [2, 4]},)"
                              R"( "y": {"dtype": "U8", "shape": [2], "data_offsets": [10, 12]}})"),
                 "tensors 'big' (data_offsets [0, 16]) and 'x' (data_offsets [2, 4]) overlap"));
  // Identical ranges overlap; empty ranges never do.
  CHECK(contains(header_error(R"({"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},)"
                              R"( "b": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]}})"),
                 "overlap"));
  auto empty = parse_safetensors(image(R"({"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},)"
                                       R"( "e": {"dtype": "U8", "shape": [0], "data_offsets": [2, 2]}})",
                                       std::vector<std::uint8_t>(4)),
                                 "w.st");
  CHECK(empty.ok());
}

TEST_CASE("malformed: metadata that is not an object of strings") {
  CHECK(header_error(R"({"__metadata__": [1]})") == "w.st: '__metadata__' is array, expected an object of strings");
  CHECK(header_error(R"({"__metadata__": {"a": "b", "n": 3}})") ==
        "w.st: '__metadata__' entry 'n' is 3, expected a string");
}

TEST_CASE("malformed: names with control characters are escaped in messages") {
  CHECK(header_error("{\"a\\nb\": 1}") == "w.st: tensor 'a\\x0Ab': entry is 1, expected an object");
}

TEST_CASE("malformed: truncations and random corruption never crash") {
  const auto valid = serialize_safetensors(sample_file());
  for (std::size_t n = 0; n < valid.size(); ++n) {
    const std::vector<std::uint8_t> cut(valid.begin(), valid.begin() + static_cast<std::ptrdiff_t>(n));
    auto r = parse_safetensors(cut, "cut");
    // Only cuts that keep the whole header can parse, and none does here: the data
    // buffer is always short of the last tensor.
    CHECK_FALSE(r.ok());
    if (!r.ok()) CHECK(r.error().code == ErrorCode::InvalidInput);
  }
  std::mt19937 rng(3);
  int parsed = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    auto bytes = valid;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) bytes[rng() % bytes.size()] = static_cast<std::uint8_t>(rng());
    auto r = parse_safetensors(bytes, "fuzz");
    if (r.ok()) {
      ++parsed;
    } else {
      CHECK(r.error().code == ErrorCode::InvalidInput);
      CHECK(r.error().message.rfind("fuzz: ", 0) == 0);
    }
  }
  CHECK(parsed > 0);  // flips in the data buffer leave the file valid
}

TEST_CASE("map_file and read_safetensors: tensors point into the mapping, never copied") {
  ScratchDir dir("mapped");
  const std::string path = dir.file("w.st");
  const StFile file = sample_file();
  REQUIRE(write_safetensors(path, file).ok());
  auto image = map_file(path);
  REQUIRE(image.ok());
  CHECK(image->owned());
  CHECK(std::ranges::equal(image->span(), serialize_safetensors(file)));

  // Parsing an owned image shares its bytes; parsing caller memory copies them.
  auto shared = parse_safetensors(*image, path);
  REQUIRE(shared.ok());
  check_same(file, *shared);
  for (const StTensor& t : shared->tensors) {
    if (t.bytes.empty()) continue;
    CHECK(t.bytes.data() >= image->data());
    CHECK(t.bytes.data() + t.bytes.size() <= image->data() + image->size());
  }
  auto copied = parse_safetensors(image->span(), path);
  REQUIRE(copied.ok());
  const StTensor* w = copied->find("layer.0.weight");
  REQUIRE(w != nullptr);
  CHECK((w->bytes.data() < image->data() || w->bytes.data() >= image->data() + image->size()));

  // The tensors keep the mapping alive after the file and the image are gone.
  auto read = read_safetensors(path);
  REQUIRE(read.ok());
  image = ir::SharedBytes();
  fs::remove(path);
  check_same(file, *read);

  const std::string empty = dir.file("empty");
  std::ofstream(empty).close();
  auto none = map_file(empty);
  REQUIRE(none.ok());
  CHECK(none->empty());
  CHECK(map_file(dir.file("missing")).error().code == ErrorCode::NotFound);
  auto directory = map_file(dir.file(""));
  REQUIRE_FALSE(directory.ok());
  CHECK(directory.error().code == ErrorCode::IoError);
}
