// SPDX-License-Identifier: Apache-2.0
// text_test.cpp - file text made printable, and every reader's messages and offers escaped with it (issue 33 item 10).
#include "formats/text.h"

#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "formats/gguf.h"
#include "formats/safetensors.h"
#include "formats/weight_file.h"

namespace {

using namespace ternjit;
using namespace ternjit::formats;

// True when `s` holds a byte a terminal may act on: C0 controls and DEL, a C1 control
// (U+0080..U+009F, UTF-8 C2 80..C2 9F), or a byte of invalid UTF-8 (checked by printable
// itself being the identity on valid printable text, below).
bool has_control(const std::string& s) {
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<std::uint8_t>(s[i]);
    if (c < 0x20 || c == 0x7F) return true;
    if (c == 0xC2 && i + 1 < s.size() && static_cast<std::uint8_t>(s[i + 1]) <= 0x9F) return true;
    if (c >= 0x80) return true;  // every test string below is ASCII once escaped
  }
  return false;
}

const std::string kHostile = std::string("k\x1b[31m\x07\x7f") + "\xc2\x9b" + "1m\xff\xfe\xc0\xaf\xed\xa0\x80\xe2\x82";

}  // namespace

TEST_CASE("printable: control bytes, C1 controls and invalid UTF-8 as \\xHH; printable text and valid UTF-8 kept") {
  CHECK(printable("blk.0.attn_q.weight") == "blk.0.attn_q.weight");
  CHECK(printable("caf\xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x98\x80") == "caf\xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x98\x80");
  CHECK(printable(std::string("a\0b", 3)) == "a\\x00b");
  CHECK(printable("\x1b[2J\x7f") == "\\x1B[2J\\x7F");
  CHECK(printable("\xc2\x9b" "31m") == "\\xC2\\x9B31m");                 // U+009B, a CSI
  CHECK(printable("\xc2\xa0") == "\xc2\xa0");                              // U+00A0 prints
  CHECK(printable("\xff\xc0\xaf\xed\xa0\x80") == "\\xFF\\xC0\\xAF\\xED\\xA0\\x80");  // invalid, overlong, surrogate
  CHECK(printable("\xe2\x82") == "\\xE2\\x82");                            // cut short
  CHECK(printable("\xf4\x90\x80\x80") == "\\xF4\\x90\\x80\\x80");          // past U+10FFFF
  CHECK(!has_control(printable(kHostile)));
  CHECK(quoted_printable("w") == "'w'");
  CHECK(quoted_printable(std::string(300, 'a'), 10) == "'aaaaaaaaaa...'");
}

TEST_CASE("GGUF and safetensors messages and offers never carry a raw control byte from the file") {
  // GGUF: a hostile key, two tensors of the same hostile name (an error quoting it).
  std::vector<std::uint8_t> g;
  auto put = [&](std::uint64_t v, int n) {
    for (int k = 0; k < n; ++k) g.push_back(static_cast<std::uint8_t>(v >> (8 * k)));
  };
  auto put_str = [&](const std::string& s) {
    put(s.size(), 8);
    g.insert(g.end(), s.begin(), s.end());
  };
  put(0x46554747, 4), put(3, 4), put(2, 8), put(1, 8);
  put_str(kHostile), put(4, 4), put(7, 4);  // a U32 value
  for (int k = 0; k < 2; ++k) put_str(kHostile), put(1, 4), put(4, 8), put(0, 4), put(32 * static_cast<std::uint64_t>(k), 8);
  g.resize((g.size() + 31) / 32 * 32 + 64, 0);
  auto dup = parse_gguf(ir::SharedBytes::copy_of(g), "h.gguf");
  REQUIRE(!dup.ok());
  CHECK(dup.error().message.find("appears more than once") != std::string::npos);
  CHECK(!has_control(dup.error().message));
  // A truncated value of the hostile key: the error names the key, escaped.
  std::vector<std::uint8_t> cut(g.begin(), g.begin() + 24 + 8 + static_cast<std::ptrdiff_t>(kHostile.size()) + 4 + 2);
  cut[8] = 0;  // tensor_count 0
  auto truncated = parse_gguf(ir::SharedBytes::copy_of(cut), "t.gguf");
  REQUIRE(!truncated.ok());
  CHECK_MESSAGE(truncated.error().message.find("key 'k\\x1B[31m") != std::string::npos, truncated.error().message);
  CHECK(!has_control(truncated.error().message));

  // safetensors: a hostile tensor name (JSON \u escapes) whose dtype is refused, and a
  // hostile __metadata__ entry naming it packed in an unknown format.
  auto st_image = [](const std::string& header) {
    std::vector<std::uint8_t> st;
    for (int k = 0; k < 8; ++k) st.push_back(static_cast<std::uint8_t>(header.size() >> (8 * k)));
    st.insert(st.end(), header.begin(), header.end());
    st.resize(st.size() + 4, 0);
    return ir::SharedBytes::copy_of(st);
  };
  const std::string name = R"(w\u001b]0;x\u0007\u009b)";
  auto bad = parse_safetensors(st_image("{\"" + name + R"(":{"dtype":"Q4\u001b[2J","shape":[1],"data_offsets":[0,4]}})"),
                               "h.safetensors");
  REQUIRE(!bad.ok());
  CHECK(bad.error().message.find("unknown dtype") != std::string::npos);
  CHECK(!has_control(bad.error().message));
  auto ok = parse_safetensors(st_image("{\"__metadata__\":{\"" + name + R"(.format":"t\u001b[5m"},")" + name +
                                       R"(":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})"),
                              "h.safetensors");
  REQUIRE_MESSAGE(ok.ok(), (ok.ok() ? "" : ok.error().message));
  const WeightFile f = WeightFile::from_safetensors(std::move(ok.value()), "h.safetensors");
  for (const std::string& n : f.offer_names()) CHECK(!has_control(n));
  const WeightOffer& o = f.offers().at(0);
  auto loaded = f.load(o, ElemKind::T2, {4}, "parameter 'L.w'");
  REQUIRE(!loaded.ok());
  CHECK(loaded.error().message.find("unknown ternary format") != std::string::npos);
  CHECK(!has_control(loaded.error().message));
}
