// SPDX-License-Identifier: Apache-2.0
// fuzz_bitnet_config.cpp - libFuzzer harness: a BitNet configuration, its validation and bitnet_tri_source.
//
// Input: the fields of a BitNetConfig and a KV capacity, each integer as a tag byte and
// its value (tag % 4: 0 one byte, 1 two bytes, 2 eight raw bytes, 3 one of the hostile
// values 0, -1, INT64_MIN, INT64_MAX, 2^31, 2^31 + 1, ...), each float likewise (a raw
// double, one of 0, -0, NaN, +-Inf, the smallest subnormal, DBL_MAX, 0.06, 1e300, ... or a
// byte / 16), then the activation, the two element kinds (any kind) and separate_head.
// Missing bytes read as 0. Invariants: check_bitnet_decoder and bitnet_tri_source never
// crash (no SIGFPE, no UB, ASan clean) and agree (the source is refused exactly when the
// configuration, the capacity or the KV caches' size is), a refusal has a message;
// accepted source compiles with compile_tri without a diagnostic (at most 8 blocks of it:
// see below), the module verifies, and its floats are the configuration's exactly (every
// rope theta, rmsnorm eps, and attention scale 1 / sqrt(D)).
#include <cmath>
#include <cstring>
#include <limits>

#include "formats/bitnet_gguf.h"
#include "ir/dsl/dsl.h"
#include "ternjit/bitnet.h"
#include "tests/fuzz/fuzz_testing.h"

namespace {

using namespace ternjit;

// The fuzzer's bytes, read front to back; past the end every byte is 0.
class Reader {
 public:
  Reader(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  std::uint8_t byte() { return at_ < size_ ? data_[at_++] : 0; }
  std::uint64_t bytes(int n) {
    std::uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= std::uint64_t{byte()} << (8 * i);
    return v;
  }

  std::int64_t integer() {
    static constexpr std::int64_t kHostile[] = {0,
                                                -1,
                                                std::numeric_limits<std::int64_t>::min(),
                                                std::numeric_limits<std::int64_t>::max(),
                                                std::int64_t{1} << 31,
                                                (std::int64_t{1} << 31) + 1,
                                                (std::int64_t{1} << 31) - 1,
                                                std::int64_t{1} << 32,
                                                std::int64_t{1} << 62,
                                                256,
                                                4096,
                                                4097,
                                                -256};
    const std::uint8_t tag = byte();
    switch (tag % 4) {
      case 0: return byte();
      case 1: return static_cast<std::int64_t>(bytes(2));
      case 2: return static_cast<std::int64_t>(bytes(8));
      default: return kHostile[byte() % std::size(kHostile)];
    }
  }

  double real() {
    static constexpr double kHostile[] = {0.0,
                                          -0.0,
                                          std::numeric_limits<double>::quiet_NaN(),
                                          std::numeric_limits<double>::infinity(),
                                          -std::numeric_limits<double>::infinity(),
                                          std::numeric_limits<double>::denorm_min(),
                                          std::numeric_limits<double>::max(),
                                          std::numeric_limits<double>::min(),
                                          1e-300,
                                          1e300,
                                          0.06,
                                          0.04,
                                          1e-5,
                                          1e-6,
                                          500000.0,
                                          10000.0,
                                          -1.0,
                                          static_cast<double>(std::numeric_limits<float>::max()) * 2};
    const std::uint8_t tag = byte();
    switch (tag % 3) {
      case 0: {
        const std::uint64_t bits = bytes(8);
        double v;
        std::memcpy(&v, &bits, sizeof v);
        return v;
      }
      case 1: return kHostile[byte() % std::size(kHostile)];
      default: return byte() / 16.0;
    }
  }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t at_ = 0;
};

// Every rope theta, rmsnorm eps and attention scale of `m` equals the configuration's.
void check_floats(const ir::Module& m, const BitNetConfig& c) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.hidden / c.heads));
  for (const ir::Function& f : m.functions())
    for (ir::BlockId b : f.blocks())
      for (ir::InstId i : f.insts(b)) {
        const ir::InstData& d = f.inst(i);
        if (const auto* r = std::get_if<ir::RopeAttrs>(&d.attrs); r && r->theta != c.rope_theta)
          fuzz::finding("rope theta " + ir::format_double(r->theta) + " is not the configuration's " +
                        ir::format_double(c.rope_theta));
        if (const auto* e = std::get_if<ir::EpsAttrs>(&d.attrs); e && d.op == ir::Op::RmsNorm && e->eps != c.rms_eps)
          fuzz::finding("rmsnorm eps " + ir::format_double(e->eps) + " is not the configuration's " +
                        ir::format_double(c.rms_eps));
        if (const auto* a = std::get_if<ir::AttentionAttrs>(&d.attrs); a && a->scale != scale)
          fuzz::finding("attention scale " + ir::format_double(a->scale) + " is not 1 / sqrt(D) = " +
                        ir::format_double(scale));
      }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Reader in(data, size);
  BitNetConfig c;
  for (std::int64_t* field : {&c.blocks, &c.hidden, &c.heads, &c.kv_heads, &c.ffn, &c.vocab, &c.context})
    *field = in.integer();
  const std::int64_t capacity = in.integer();
  c.rope_theta = in.real();
  c.rms_eps = in.real();
  const std::uint8_t flags = in.byte();
  c.ffn_activation = flags & 1 ? BitNetActivation::Silu : BitNetActivation::Relu2;
  c.separate_head = (flags & 2) != 0;
  c.embedding = kAllElemKinds[in.byte() % std::size(kAllElemKinds)];
  c.kv_cache = kAllElemKinds[in.byte() % std::size(kAllElemKinds)];

  const auto valid = formats::check_bitnet_decoder(c);
  if (!valid.ok() && valid.error().message.empty()) fuzz::finding("check_bitnet_decoder refused with no message");
  auto source = bitnet_tri_source(c, capacity);
  // What bitnet_tri_source adds to the configuration's checks: the capacity's range, and
  // the KV caches [blocks, capacity, HKV, D] within 2^60 elements (the other types are
  // products of the configuration's counts, which check_bitnet_decoder bounds).
  bool accept = valid.ok() && capacity >= 1 && capacity <= (std::int64_t{1} << 31);
  if (accept) {
    const auto cache = static_cast<unsigned __int128>(c.blocks) * static_cast<unsigned __int128>(capacity) *
                       static_cast<unsigned __int128>(c.kv_heads) * static_cast<unsigned __int128>(c.hidden / c.heads);
    accept = cache <= static_cast<unsigned __int128>(ir::kMaxElements);
  }
  if (source.ok() != accept)
    fuzz::finding(std::string("bitnet_tri_source ") + (source.ok() ? "accepted" : "refused") +
                  " a configuration the checks " + (accept ? "accept: " + source.error().message
                                                           : "refuse: " + (valid.ok() ? "capacity or cache size"
                                                                                      : valid.error().message)));
  if (!source.ok()) {
    if (source.error().message.empty()) fuzz::finding("bitnet_tri_source refused with no message");
    return 0;
  }
  // The blocks are one unrolled loop: hundreds of them take seconds to compile under the
  // sanitizers (past -timeout), so a longer decoder is compiled with kCompiledBlocks
  // blocks and its other fields as they are (unit/engine compiles kMaxBitnetBlocks blocks).
  constexpr std::int64_t kCompiledBlocks = 8;
  if (c.blocks > kCompiledBlocks) {
    c.blocks = kCompiledBlocks;
    source = bitnet_tri_source(c, capacity);
    if (!source.ok()) fuzz::finding("fewer blocks are refused: " + source.error().message);
  }
  auto module = dsl::compile_tri(*source, "bitnet.tri");
  if (!module.ok()) fuzz::finding("the accepted configuration's source does not compile: " + render(module.error()));
  if (auto diags = ir::verify_module(*module); !diags.empty())
    fuzz::finding("the decoder's module does not verify: " + render(diags[0]));
  check_floats(*module, c);
  return 0;
}
