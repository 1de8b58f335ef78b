// SPDX-License-Identifier: Apache-2.0
// bitnet_source_test.cpp - ternjit::bitnet_tri_source (include/ternjit/bitnet.h): every
// configuration is checked before use with the checks of a GGUF file's (issue 33, item 1),
// and every float of it reaches the compiled program exactly (item 14).
#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <variant>

#include "formats/bitnet_gguf.h"
#include "ir/dsl/dsl.h"
#include "ternjit/bitnet.h"

namespace ternjit {
namespace {

// bitnet_tri_source refuses `c` with an InvalidArgument naming `needle`.
void refused(const BitNetConfig& c, std::int64_t capacity, const std::string& needle) {
  auto r = bitnet_tri_source(c, capacity);
  REQUIRE_MESSAGE(!r.ok(), "expected a refusal mentioning " << needle);
  CHECK(r.error().code == ErrorCode::InvalidArgument);
  CHECK_MESSAGE(r.error().message.find(needle) != std::string::npos, r.error().message);
}

TEST_CASE("bitnet_tri_source: a configuration is checked before use, as a GGUF file's is") {
  const BitNetConfig tiny = formats::tiny_bitnet_config();
  REQUIRE(bitnet_tri_source(tiny, 8).ok());
  // Each field the source divides or sizes by, out of range (heads = 0 divided by zero: SIGFPE;
  // INT64_MIN / -1 overflowed: SIGFPE).
  struct Bad {
    void (*edit)(BitNetConfig&);
    const char* needle;
  };
  const Bad cases[] = {
      {[](BitNetConfig& c) { c.heads = 0; }, "head_count = 0 is out of range"},
      {[](BitNetConfig& c) { c.hidden = std::numeric_limits<std::int64_t>::min(), c.heads = -1; },
       "embedding_length = -9223372036854775808 is out of range"},
      {[](BitNetConfig& c) { c.kv_heads = 0; }, "head_count_kv = 0 is out of range"},
      {[](BitNetConfig& c) { c.kv_heads = 3; }, "is not a multiple of head_count_kv 3"},
      {[](BitNetConfig& c) { c.heads = 512, c.kv_heads = 512; }, "256 / head_count 512 is not an even head dimension"},
      {[](BitNetConfig& c) { c.heads = 256, c.kv_heads = 256; }, "is not an even head dimension"},
      {[](BitNetConfig& c) { c.blocks = std::int64_t{1} << 40; }, "block_count = 1099511627776 is out of range"},
      {[](BitNetConfig& c) { c.vocab = -1; }, "vocab size = -1 is out of range"},
      {[](BitNetConfig& c) { c.rope_theta = 0; }, "rope.freq_base must be positive"},
      {[](BitNetConfig& c) { c.rope_theta = std::numeric_limits<double>::infinity(); }, "rope.freq_base"},
      {[](BitNetConfig& c) { c.rms_eps = std::numeric_limits<double>::quiet_NaN(); }, "layer_norm_rms_epsilon"},
      {[](BitNetConfig& c) { c.embedding = ElemKind::I8; }, "embedding is i8"},
      {[](BitNetConfig& c) { c.kv_cache = ElemKind::T2; }, "kv_cache is t2"},
  };
  for (const Bad& b : cases) {
    BitNetConfig c = tiny;
    b.edit(c);
    CAPTURE(b.needle);
    refused(c, 8, b.needle);
    // The same function refuses it at the synthetic writer, with the same message.
    auto w = formats::write_synthetic_bitnet("/nonexistent-dir/never-written.gguf", c, 1);
    REQUIRE(!w.ok());
    CHECK(w.error().message == bitnet_tri_source(c, 8).error().message);
  }
  // TQ2_0's multiples of 256 bind a file, not the decoder (tests/python/test_bitnet_model.py
  // runs E 64): the source is written, the file refused.
  BitNetConfig narrow = tiny;
  narrow.hidden = 384, narrow.heads = 3, narrow.kv_heads = 1;
  CHECK(bitnet_tri_source(narrow, 8).ok());
  auto w = formats::write_synthetic_bitnet("/nonexistent-dir/never-written.gguf", narrow, 1);
  REQUIRE(!w.ok());
  CHECK(w.error().message.find("multiples of 256") != std::string::npos);
  refused(tiny, 0, "capacity 0 is out of range");
  refused(tiny, -5, "capacity -5 is out of range");
  refused(tiny, (std::int64_t{1} << 31) + 1, "capacity 2147483649 is out of range");
  CHECK(bitnet_tri_source(tiny, std::int64_t{1} << 31).ok());
}

TEST_CASE("bitnet_tri_source: rope_theta and rms_eps reach the compiled program exactly") {
  // %.1f once turned 0.06 into 0.1, 0.04 into 0.0 (refused) and 1e300 into a cut literal;
  // each value is compiled and read back from the IR's rope and rmsnorm attributes.
  for (const double v : {0.06, 0.04, 1e-7, 1e300, 500000.0, 1e-5, 5e-324, 1.2345678901234567e19}) {
    CAPTURE(v);
    BitNetConfig c = formats::tiny_bitnet_config();
    c.rope_theta = v;
    c.rms_eps = v;
    auto source = bitnet_tri_source(c, 8);
    REQUIRE_MESSAGE(source.ok(), (source.ok() ? "" : source.error().message));
    auto m = dsl::compile_tri(*source, "bitnet.tri");
    REQUIRE_MESSAGE(m.ok(), (m.ok() ? "" : render(m.error())));
    int ropes = 0, norms = 0;
    for (const ir::Function& f : m->functions())
      for (ir::BlockId b : f.blocks())
        for (ir::InstId i : f.insts(b)) {
          if (const auto* r = std::get_if<ir::RopeAttrs>(&f.inst(i).attrs)) {
            CHECK(r->theta == v);
            ++ropes;
          }
          if (const auto* e = std::get_if<ir::EpsAttrs>(&f.inst(i).attrs)) {
            CHECK(e->eps == v);
            ++norms;
          }
        }
    CHECK(ropes >= 2);  // q and k
    CHECK(norms >= 5);  // four per block and the output norm
  }
}

TEST_CASE("bitnet_tri_source: what it accepts compiles (the DSL's budgets and type sizes; fuzz_bitnet_config)") {
  // fuzz_bitnet_config found configurations accepted here whose source the DSL refused:
  // 413 blocks and more overflow the unrolled loop's budget of expression nodes, and
  // counts near 2^31 make types past 2^60 elements. The largest accepted ones compile.
  BitNetConfig c = formats::tiny_bitnet_config();
  c.hidden = 8, c.heads = 2, c.kv_heads = 1, c.ffn = 8, c.vocab = 4;
  for (const bool silu : {false, true}) {
    c.blocks = formats::kMaxBitnetBlocks;
    c.ffn_activation = silu ? BitNetActivation::Silu : BitNetActivation::Relu2;
    c.separate_head = silu;
    auto source = bitnet_tri_source(c, 4);
    REQUIRE_MESSAGE(source.ok(), (source.ok() ? "" : source.error().message));
    auto m = dsl::compile_tri(*source, "bitnet.tri");
    CHECK_MESSAGE(m.ok(), (m.ok() ? "" : render(m.error())));
    c.blocks = formats::kMaxBitnetBlocks + 1;
    refused(c, 4, "block_count = 257 is more than the 256 blocks");
  }
  c = formats::tiny_bitnet_config();
  c.vocab = std::int64_t{1} << 31, c.hidden = std::int64_t{1} << 30, c.heads = 2, c.kv_heads = 2;
  refused(c, 4, "vocab size 2147483648 x embedding_length 1073741824 is a matrix of more than 2^60 elements");
  c.vocab = 2, c.hidden = std::int64_t{1} << 31;
  refused(c, 4, "embedding_length 2147483648 x embedding_length 2147483648 is a matrix of more than 2^60 elements");
  c = formats::tiny_bitnet_config();
  c.blocks = 256, c.hidden = std::int64_t{1} << 30, c.heads = 2, c.kv_heads = 2, c.vocab = 2;
  c.ffn = 2;
  refused(c, std::int64_t{1} << 31, "the KV caches [256, 2147483648, 2, 536870912] would have more than 2^60 elements");
  CHECK(bitnet_tri_source(c, 1).ok());  // 2^8 * 2^30 elements: within the limit
}

}  // namespace
}  // namespace ternjit
