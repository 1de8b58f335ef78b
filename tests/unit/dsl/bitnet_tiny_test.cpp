// SPDX-License-Identifier: Apache-2.0
// bitnet_tiny_test.cpp - tests/dsl/bitnet_tiny.tri: the 2-block decoder checks, lowers to
// the expected IR, and runs on the reference interpreter with a host-owned KV cache:
// a prefill equals decoding token by token, bitwise, and cache rows past pos + M are
// never read.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "ir/dsl/dsl.h"
#include "ir/interpret.h"
#include "ir/verify.h"

namespace ternjit::dsl {
namespace {

namespace fs = std::filesystem;

constexpr std::int64_t kVocab = 50, kCtx = 8, kLayers = 2, kKvHeads = 2, kHeadDim = 16;

ir::Module compile_bitnet() {
  std::ifstream in(fs::path(TERNJIT_SOURCE_DIR) / "tests/dsl/bitnet_tiny.tri", std::ios::binary);
  REQUIRE(in.good());
  std::ostringstream ss;
  ss << in.rdbuf();
  auto r = compile_tri(ss.str(), "bitnet_tiny.tri");
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? std::string() : render(r.error())));
  for (const Diagnostic& d : ir::verify_module(*r)) FAIL_CHECK(render(d));
  return std::move(r).value();
}

// Deterministic pseudo-random values in [-1, 1) (a small LCG: no dependence on the
// standard library's distributions).
struct Draw {
  std::uint64_t s;
  double next() {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<double>(s >> 11) / static_cast<double>(1ULL << 52) - 1.0;
  }
  std::vector<double> values(std::size_t n, double scale, double offset = 0) {
    std::vector<double> v(n);
    for (double& x : v) x = offset + scale * next();
    return v;
  }
  std::vector<double> ternary(std::size_t n) {
    std::vector<double> v(n);
    for (double& x : v) {
      const double u = next();
      x = u < -0.33 ? -1 : u > 0.33 ? 1 : 0;
    }
    return v;
  }
};

// Every parameter of the module, drawn by its declared type.
ir::ParamValues bitnet_params(const ir::Module& m) {
  Draw d{12345};
  ir::ParamValues p;
  for (const ir::ParamDecl& decl : m.params()) {
    if (decl.name.rfind("BitNet.", 0) != 0) continue;
    std::vector<std::int64_t> shape;
    std::size_t n = 1;
    for (const ir::Dim& dim : decl.type.shape) {
      const std::int64_t e = dim.is_static() ? dim.extent : kVocab;  // V is the only symbol
      shape.push_back(e);
      n *= static_cast<std::size_t>(e);
    }
    const bool is_norm = decl.name.find("norm") != std::string::npos;
    const bool is_scale = decl.name.find("scale") != std::string::npos;
    std::vector<double> v = decl.type.elem == ElemKind::T2 ? d.ternary(n)
                            : is_norm                    ? d.values(n, 0.25, 1.0)
                            : is_scale                   ? d.values(n, 0.01, 0.03)
                                                         : d.values(n, 1.0);
    p.set(decl.name, ir::HostTensor::from_values(decl.type.elem, shape, v));
  }
  return p;
}

ir::HostTensor cache_filled(double value) {
  const std::size_t n = static_cast<std::size_t>(kLayers * kCtx * kKvHeads * kHeadDim);
  return ir::HostTensor::from_values(ElemKind::F16, {kLayers, kCtx, kKvHeads, kHeadDim}, std::vector<double>(n, value));
}

Result<std::vector<ir::HostTensor>> step(const ir::Module& m, const ir::ParamValues& p, const std::vector<double>& ids,
                                         std::int64_t pos, const ir::HostTensor& kc, const ir::HostTensor& vc) {
  std::vector<ir::HostTensor> args{
      ir::HostTensor::from_values(ElemKind::I32, {static_cast<std::int64_t>(ids.size())}, ids),
      ir::HostTensor::from_values(ElemKind::I32, {}, std::vector<double>{static_cast<double>(pos)}), kc, vc};
  return ir::interpret(m, "BitNet.forward", args, p);
}

std::map<ir::Op, int> op_counts(const ir::Function& f) {
  std::map<ir::Op, int> n;
  for (ir::InstId i : f.insts(f.entry())) ++n[f.inst(i).op];
  return n;
}

}  // namespace

TEST_CASE("bitnet_tiny: the 2-block decoder lowers to one unrolled step function") {
  ir::Module m = compile_bitnet();
  const ir::Function* f = m.find_function("BitNet.forward");
  REQUIRE(f != nullptr);
  CHECK(f->result_types().size() == 3);
  auto n = op_counts(*f);
  CHECK(n[ir::Op::Gather] == 1);
  CHECK(n[ir::Op::Rope] == 4);       // q and k of each block
  CHECK(n[ir::Op::KvWrite] == 4);    // k and v of each block
  CHECK(n[ir::Op::Attention] == 2);
  CHECK(n[ir::Op::Reshape] == 8);    // q, k, v in, attention out, per block
  CHECK(n[ir::Op::QuantizeInt8] == 8);
  CHECK(n[ir::Op::MatMul] == 15);    // 7 projections per block, and the head
  // Each block's kv_write / attention names its layer; each block reads its own weights.
  std::vector<std::int64_t> kv_layers, attn_layers;
  std::map<std::string, int> reads;
  for (ir::InstId i : f->insts(f->entry())) {
    const ir::InstData& d = f->inst(i);
    if (d.op == ir::Op::KvWrite) kv_layers.push_back(std::get<ir::LayerAttrs>(d.attrs).layer);
    if (d.op == ir::Op::Attention) attn_layers.push_back(std::get<ir::AttentionAttrs>(d.attrs).layer);
    if (d.op == ir::Op::Param) ++reads[std::get<ir::ParamAttrs>(d.attrs).name];
  }
  CHECK(kv_layers == std::vector<std::int64_t>{0, 0, 1, 1});
  CHECK(attn_layers == std::vector<std::int64_t>{0, 1});
  CHECK(reads["BitNet.blk.0.attn_q"] == 1);
  CHECK(reads["BitNet.blk.1.attn_q"] == 1);
  CHECK(reads["BitNet.blk.1.ffn_down_scale"] == 1);
  CHECK(reads["BitNet.token_embd"] == 2);  // the embedding gather and the tied head
  // 18 parameters per block instance, plus the embedding and the output norm.
  int model_params = 0;
  for (const ir::ParamDecl& d : m.params()) model_params += d.name.rfind("BitNet.", 0) == 0;
  CHECK(model_params == 2 * 18 + 2);
}

TEST_CASE("bitnet_tiny: prefill equals token-by-token decoding on the interpreter, bitwise") {
  ir::Module m = compile_bitnet();
  const ir::ParamValues p = bitnet_params(m);
  const std::vector<double> ids{7, 0, 49, 23, 7};
  const auto tokens = static_cast<std::int64_t>(ids.size());
  // Rows at and past pos + M are never read: NaN there must not reach the logits.
  auto prefill = step(m, p, ids, 0, cache_filled(NAN), cache_filled(NAN));
  REQUIRE_MESSAGE(prefill.ok(), (prefill.ok() ? std::string() : render(prefill.error())));
  REQUIRE(prefill->size() == 3);
  const ir::HostTensor& logits = (*prefill)[0];
  CHECK(logits.shape == std::vector<std::int64_t>{tokens, kVocab});
  for (double v : logits.data) REQUIRE(std::isfinite(v));

  ir::HostTensor kc = cache_filled(NAN), vc = cache_filled(NAN);
  for (std::int64_t t = 0; t < tokens; ++t) {
    auto one = step(m, p, {ids[static_cast<std::size_t>(t)]}, t, kc, vc);
    REQUIRE_MESSAGE(one.ok(), (one.ok() ? std::string() : render(one.error())));
    for (std::int64_t v = 0; v < kVocab; ++v) {
      INFO("token ", t, " logit ", v);
      CHECK((*one)[0].data[static_cast<std::size_t>(v)] == logits.data[static_cast<std::size_t>(t * kVocab + v)]);
    }
    kc = (*one)[1];
    vc = (*one)[2];
  }
  // The caches the steps built equal the prefill's, row for row (the rest stays NaN).
  for (std::size_t i = 0; i < kc.data.size(); ++i) {
    const double a = kc.data[i], b = (*prefill)[1].data[i];
    CHECK(((std::isnan(a) && std::isnan(b)) || a == b));
    const double c = vc.data[i], d = (*prefill)[2].data[i];
    CHECK(((std::isnan(c) && std::isnan(d)) || c == d));
  }
  // Different weights in one block instance change the logits: the blocks are distinct.
  ir::ParamValues q = p;
  q.set("BitNet.blk.1.ffn_down_scale", ir::HostTensor::from_values(ElemKind::F32, {64}, std::vector<double>(64, 0.5)));
  auto other = step(m, q, ids, 0, cache_filled(0), cache_filled(0));
  REQUIRE(other.ok());
  CHECK((*other)[0].data != logits.data);
}

TEST_CASE("bitnet_tiny: an id outside the vocabulary and a position past the cache are run-time errors") {
  ir::Module m = compile_bitnet();
  const ir::ParamValues p = bitnet_params(m);
  auto bad_id = step(m, p, {3, 50}, 0, cache_filled(0), cache_filled(0));
  REQUIRE_FALSE(bad_id.ok());
  CHECK(render(bad_id.error()).find("gather") != std::string::npos);
  auto full = step(m, p, {3, 4}, kCtx - 1, cache_filled(0), cache_filled(0));
  REQUIRE_FALSE(full.ok());
  CHECK(render(full.error()).find("kv_write") != std::string::npos);
}

}  // namespace ternjit::dsl
