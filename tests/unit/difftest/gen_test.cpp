// SPDX-License-Identifier: Apache-2.0
// gen_test.cpp - the random program generator: valid, deterministic, runnable, covering every op.
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "ir/interpret.h"
#include "ir/parse.h"
#include "ir/print.h"
#include "ir/verify.h"
#include "tests/difftest/gen.h"

namespace ternjit::difftest {
namespace {

// Ops the generator never emits. Every other op of ops.def must appear in 500 programs,
// so a new op fails this test until the generator learns it or it is listed here with
// the reason it cannot be generated. None is listed now: every op of ops.def, the eight
// decoder ops included, is generated.
const std::set<ir::Op> kNotGenerated = {};

std::string render_all(const std::vector<Diagnostic>& diags) {
  std::string s;
  for (const Diagnostic& d : diags) s += render(d);
  return s;
}

// Which instructions of f contribute to a terminator or a call (are not dead code).
std::vector<bool> live_insts(const ir::Function& f) {
  std::vector<bool> live(f.num_insts(), false);
  std::vector<ir::InstId> work;
  for (ir::BlockId b : f.blocks())
    for (ir::InstId i : f.insts(b))
      if (ir::op_flags(f.inst(i).op) != ir::OpFlags::Pure) live[i.index] = true, work.push_back(i);
  auto mark = [&](ir::ValueId v) {
    const ir::ValueData& d = f.value(v);
    if (d.def == ir::ValueDef::InstResult && !live[d.inst.index]) live[d.inst.index] = true, work.push_back(d.inst);
  };
  while (!work.empty()) {
    const ir::InstData& in = f.inst(work.back());
    work.pop_back();
    for (ir::ValueId v : in.operands) mark(v);
    for (const ir::BlockCall& t : in.targets)
      for (ir::ValueId v : t.args) mark(v);
  }
  return live;
}

// Op counts over the live instructions of every function.
std::map<ir::Op, int> histogram(const ir::Module& m) {
  std::map<ir::Op, int> h;
  for (const ir::Function& f : m.functions()) {
    std::vector<bool> live = live_insts(f);
    for (ir::BlockId b : f.blocks())
      for (ir::InstId i : f.insts(b))
        if (live[i.index]) ++h[f.inst(i).op];
  }
  return h;
}

TEST_CASE("every generated program verifies and prints back identically") {
  for (std::uint64_t seed = 0; seed < 300; ++seed) {
    for (bool strict : {true, false}) {
      GenOptions o;
      o.strict_quant = strict;
      ir::Module m = generate_program(seed, o);
      auto diags = ir::verify_module(m);
      INFO("seed " << seed << "\n" << ir::print_module(m));
      REQUIRE_MESSAGE(diags.empty(), render_all(diags));
      const std::string text = ir::print_module(m);
      auto parsed = ir::parse_module(text, "gen.tir");
      REQUIRE_MESSAGE(parsed.ok(), (parsed.ok() ? std::string() : render(parsed.error())));
      CHECK(ir::print_module(parsed.value()) == text);
      CHECK(m.find_function(kMainFunction) != nullptr);
    }
  }
}

TEST_CASE("programs are deterministic per seed") {
  for (std::uint64_t seed : {0ULL, 1ULL, 42ULL, 123456789ULL}) {
    CHECK(ir::print_module(generate_program(seed)) == ir::print_module(generate_program(seed)));
    CHECK(ir::print_module(generate_program(seed)) != ir::print_module(generate_program(seed + 1)));
  }
  // Inputs too.
  ir::Module m = generate_program(5);
  Inputs a = make_inputs(m, 3), b = make_inputs(m, 3), c = make_inputs(m, 4);
  REQUIRE(a.args.size() == b.args.size());
  for (std::size_t i = 0; i < a.args.size(); ++i) CHECK(a.args[i].data == b.args[i].data);
  bool differ = false;
  for (std::size_t i = 0; i < a.args.size(); ++i) differ = differ || a.args[i].data != c.args[i].data;
  CHECK(differ);
}

// Whether result j of @main is a kv_write result (a cache, which copies the NaN rows
// make_inputs puts where no attention reads: kUnreadKey).
bool cache_result(const ir::Module& m, std::size_t j) {
  const ir::Function& f = *m.find_function(kMainFunction);
  for (ir::BlockId b : f.blocks()) {
    auto t = f.terminator(b);
    if (!t || f.inst(*t).op != ir::Op::Ret) continue;
    const ir::ValueData& d = f.value(f.inst(*t).operands[j]);
    return d.def == ir::ValueDef::InstResult && f.inst(d.inst).op == ir::Op::KvWrite;
  }
  return false;
}

TEST_CASE("generated programs run on the interpreter with finite results (NaN only in the unread cache rows)") {
  int nan_caches = 0;
  for (std::uint64_t seed = 1000; seed < 1300; ++seed) {
    ir::Module m = generate_program(seed);
    INFO("seed " << seed << "\n" << ir::print_module(m));
    CHECK(output_bounds(m).size() == m.find_function(kMainFunction)->result_types().size());
    for (std::uint64_t in : {1ULL, 2ULL}) {
      Inputs inputs = make_inputs(m, in);
      auto r = ir::interpret(m, kMainFunction, inputs.args, inputs.params);
      REQUIRE_MESSAGE(r.ok(), (r.ok() ? std::string() : render(r.error())));
      for (std::size_t j = 0; j < r->size(); ++j) {
        INFO("result " << j);
        bool nan = false;
        for (double v : (*r)[j].data) {
          nan = nan || std::isnan(v);
          REQUIRE((std::isfinite(v) || (std::isnan(v) && cache_result(m, j))));
        }
        nan_caches += nan ? 1 : 0;
      }
    }
  }
  CHECK(nan_caches >= 10);  // the poison is there, and stays out of everything but caches
}

TEST_CASE("the op histogram over 500 programs covers ops.def, counting live instructions") {
  std::map<ir::Op, int> total;
  int bitlinear = 0, helper = 0, branches = 0;
  for (std::uint64_t seed = 0; seed < 500; ++seed) {
    ir::Module m = generate_program(seed);
    auto h = histogram(m);
    for (auto [op, n] : h) total[op] += n;
    if (m.find_function("helper")) ++helper;
    if (h.count(ir::Op::CondBr)) ++branches;
    // The BitLinear chain: a matmul whose lhs is quantize_int8 and whose rhs is ternary.
    const ir::Function& f = *m.find_function(kMainFunction);
    bool found = false;
    std::vector<bool> live = live_insts(f);
    for (ir::BlockId b : f.blocks())
      for (ir::InstId i : f.insts(b)) {
        const ir::InstData& in = f.inst(i);
        if (in.op != ir::Op::MatMul || !live[i.index]) continue;
        const ir::ValueData& lhs = f.value(in.operands[0]);
        found = found || (lhs.def == ir::ValueDef::InstResult && f.inst(lhs.inst).op == ir::Op::QuantizeInt8 &&
                          f.type_of(in.operands[1]).elem == ElemKind::T2);
      }
    bitlinear += found ? 1 : 0;
  }
  std::string counts;
  for (ir::Op op : ir::all_ops()) {
    INFO("op '" << ir::op_name(op) << "'");
    if (kNotGenerated.count(op)) CHECK(total[op] == 0);
    else CHECK(total[op] >= 5);
    counts += " " + std::string(ir::op_name(op)) + "=" + std::to_string(total[op]);
  }
  MESSAGE("live ops:" << counts);
  MESSAGE("BitLinear chains in " << bitlinear << "/500 programs, @helper in " << helper << ", branches in "
                                 << branches);
  CHECK(bitlinear >= 100);
  CHECK(helper >= 50);
  CHECK(branches >= 30);
}

// The decoder ops' uses in the live code of @main.
struct DecoderUses {
  bool attention_of_written = false;  // attention reads a kv_write result (the decoder step)
  bool attention_of_arg = false;      // attention reads caches as they were passed
  bool write_chain = false;           // kv_write of a kv_write result (several layers)
  bool narrow_cache = false;          // an f16 or bf16 cache
  bool gqa = false;                   // attention with HQ > HKV
  bool rope_norm = false, rope_neox = false;
  std::set<std::int64_t> slice_axes, concat_axes;
};

DecoderUses decoder_uses(const ir::Module& m) {
  DecoderUses u;
  const ir::Function& f = *m.find_function(kMainFunction);
  std::vector<bool> live = live_insts(f);
  auto def_op = [&](ir::ValueId v) -> std::optional<ir::Op> {
    const ir::ValueData& d = f.value(v);
    if (d.def != ir::ValueDef::InstResult) return std::nullopt;
    return f.inst(d.inst).op;
  };
  for (ir::BlockId b : f.blocks())
    for (ir::InstId i : f.insts(b)) {
      if (!live[i.index]) continue;
      const ir::InstData& in = f.inst(i);
      switch (in.op) {
        case ir::Op::Attention: {
          for (std::size_t c : {1, 2}) {
            if (def_op(in.operands[c]) == ir::Op::KvWrite) u.attention_of_written = true;
            if (f.value(in.operands[c]).def == ir::ValueDef::BlockArg) u.attention_of_arg = true;
          }
          u.gqa = u.gqa || f.type_of(in.operands[0]).shape[1].extent > f.type_of(in.operands[1]).shape[2].extent;
          break;
        }
        case ir::Op::KvWrite:
          u.write_chain = u.write_chain || def_op(in.operands[0]) == ir::Op::KvWrite;
          u.narrow_cache = u.narrow_cache || f.type_of(in.operands[0]).elem != ElemKind::F32;
          break;
        case ir::Op::Rope:
          (std::get<ir::RopeAttrs>(in.attrs).mode == ir::RopeMode::Neox ? u.rope_neox : u.rope_norm) = true;
          break;
        case ir::Op::Slice: u.slice_axes.insert(std::get<ir::SliceAttrs>(in.attrs).axis); break;
        case ir::Op::Concat: u.concat_axes.insert(std::get<ir::AxisAttrs>(in.attrs).axis); break;
        default: break;
      }
    }
  return u;
}

TEST_CASE("the decoder ops come in the decoder's pattern and standalone, in every form") {
  GenOptions o = target_gen_options();
  o.decoder_share = 1;
  DecoderUses all;
  int programs_with_attention = 0;
  for (std::uint64_t seed = 0; seed < 200; ++seed) {
    DecoderUses u = decoder_uses(generate_program(seed, o));
    all.attention_of_written = all.attention_of_written || u.attention_of_written;
    all.attention_of_arg = all.attention_of_arg || u.attention_of_arg;
    all.write_chain = all.write_chain || u.write_chain;
    all.narrow_cache = all.narrow_cache || u.narrow_cache;
    all.gqa = all.gqa || u.gqa;
    all.rope_norm = all.rope_norm || u.rope_norm;
    all.rope_neox = all.rope_neox || u.rope_neox;
    all.slice_axes.insert(u.slice_axes.begin(), u.slice_axes.end());
    all.concat_axes.insert(u.concat_axes.begin(), u.concat_axes.end());
    programs_with_attention += u.attention_of_written || u.attention_of_arg ? 1 : 0;
  }
  CHECK(all.attention_of_written);
  CHECK(all.attention_of_arg);
  CHECK(all.write_chain);
  CHECK(all.narrow_cache);
  CHECK(all.gqa);
  CHECK(all.rope_norm);
  CHECK(all.rope_neox);
  CHECK(all.slice_axes.size() >= 3);
  CHECK(all.concat_axes.size() >= 3);
  CHECK(programs_with_attention >= 50);
}

TEST_CASE("decoder_share picks programs by seed; the others are the programs without the decoder ops") {
  GenOptions none, some, every;
  none.decoder_share = 0;
  every.decoder_share = 1;
  int decoder = 0;
  for (std::uint64_t seed = 0; seed < 200; ++seed) {
    const std::string with = ir::print_module(generate_program(seed, some));
    const bool uses = with.find("difftest.ranges") != std::string::npos || with.find("kv_write") != std::string::npos ||
                      with.find("slice") != std::string::npos || with.find("concat") != std::string::npos ||
                      with.find("layernorm") != std::string::npos;
    const std::string without = ir::print_module(generate_program(seed, none));
    INFO("seed " << seed);
    CHECK(without.find("slice") == std::string::npos);
    if (with != without) {
      ++decoder;
      CHECK(ir::print_module(generate_program(seed, every)) == with);  // the same draw of the same program
    } else {
      CHECK_FALSE(uses);
    }
  }
  // About a quarter (GenOptions::decoder_share = 0.25) of 200 programs.
  CHECK(decoder >= 30);
  CHECK(decoder <= 70);
}

TEST_CASE("make_inputs draws ranged arguments (ids, pos) inside their range; bad ranges are ignored") {
  GenOptions o;
  o.decoder_share = 1;
  int ranged = 0;
  for (std::uint64_t seed = 0; seed < 100; ++seed) {
    ir::Module m = generate_program(seed, o);
    auto it = m.metadata().find(std::string(kRangesKey));
    if (it == m.metadata().end()) continue;
    const ir::Function& f = *m.find_function(kMainFunction);
    for (std::uint64_t in : {1ULL, 2ULL, 3ULL}) {
      Inputs inputs = make_inputs(m, in);
      for (std::size_t a = 0; a < f.args().size(); ++a) {
        const std::string& name = f.value(f.args()[a]).name;
        if (name.empty()) continue;
        if (name.rfind("cache", 0) == 0) {  // a KV cache: NaN exactly in rows [row, C) of every layer
          const std::string& un = m.metadata().at(std::string(kUnreadKey));
          const std::size_t at = un.find(name + ":");
          REQUIRE(at != std::string::npos);
          const std::int64_t row = std::stoll(un.substr(at + name.size() + 1));
          const ir::HostTensor& c = inputs.args[a];
          REQUIRE(c.shape.size() == 4);
          INFO("seed " << seed << ", cache %" << name << " unread from row " << row);
          for (std::size_t e = 0; e < c.data.size(); ++e) {
            const auto t = static_cast<std::int64_t>(e) / (c.shape[2] * c.shape[3]) % c.shape[1];
            CHECK(std::isnan(c.data[e]) == (t >= row));
          }
          continue;
        }
        // "name:lo:hi" in the metadata
        const std::size_t at = it->second.find(name + ":");
        REQUIRE(at != std::string::npos);
        const std::string item = it->second.substr(at + name.size() + 1, it->second.find(',', at) - at - name.size() - 1);
        const double lo = std::stod(item.substr(0, item.find(':'))), hi = std::stod(item.substr(item.find(':') + 1));
        INFO("seed " << seed << ", argument %" << name << " in [" << lo << ", " << hi << "]");
        for (double v : inputs.args[a].data) {
          CHECK(v >= lo);
          CHECK(v <= hi);
        }
        ++ranged;
      }
    }
  }
  CHECK(ranged >= 100);
  // Malformed items are left out: the argument is drawn as any i32 (in [-1000, 1000]).
  auto m = ir::parse_module("meta \"difftest.ranges\" = \"a:0:3,b:5:2,c:1,d:x:4,:0:1,e:0:2junk\"\n"
                            "func @main(%a: i32[64], %b: i32[64], %c: i32[64], %e: i32[64]) -> i32[64] {\n"
                            "^entry:\n  ret %a\n}\n",
                            "ranges.tir");
  REQUIRE_MESSAGE(m.ok(), (m.ok() ? std::string() : render(m.error())));
  Inputs in = make_inputs(*m, 7);
  for (double v : in.args[0].data) CHECK((v >= 0 && v <= 3));
  for (std::size_t a = 1; a < 4; ++a) {
    bool outside = false;
    for (double v : in.args[a].data) outside = outside || v < 0 || v > 5;
    CHECK(outside);
  }
}

TEST_CASE("output bounds are read from the metadata") {
  ir::Module m = generate_program(9);
  auto bounds = output_bounds(m);
  REQUIRE(!bounds.empty());
  for (double b : bounds) CHECK(b >= 1);
  m.metadata()[std::string(kBoundsKey)] = "garbage";
  for (double b : output_bounds(m)) CHECK(b == 1);
}

}  // namespace
}  // namespace ternjit::difftest
