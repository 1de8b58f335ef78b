// SPDX-License-Identifier: Apache-2.0
// gen_test.cpp - the random program generator: valid, deterministic, runnable, covering every op.
#include <doctest/doctest.h>

#include <cmath>
#include <map>
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
// the reason it cannot be generated.
// The decoder ops are not generated yet: their semantics are checked by
// tests/unit/interp/decoder_ops_test.cpp and each target's own tests against the reference.
const std::set<ir::Op> kNotGenerated = {ir::Op::Gather, ir::Op::Slice, ir::Op::Concat, ir::Op::LayerNorm,
                                        ir::Op::Rope, ir::Op::CausalSoftmax, ir::Op::KvWrite, ir::Op::Attention};

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

TEST_CASE("generated programs run on the interpreter with finite results") {
  for (std::uint64_t seed = 1000; seed < 1300; ++seed) {
    ir::Module m = generate_program(seed);
    INFO("seed " << seed << "\n" << ir::print_module(m));
    CHECK(output_bounds(m).size() == m.find_function(kMainFunction)->result_types().size());
    for (std::uint64_t in : {1ULL, 2ULL}) {
      Inputs inputs = make_inputs(m, in);
      auto r = ir::interpret(m, kMainFunction, inputs.args, inputs.params);
      REQUIRE_MESSAGE(r.ok(), (r.ok() ? std::string() : render(r.error())));
      for (const ir::HostTensor& t : r.value())
        for (double v : t.data) REQUIRE(std::isfinite(v));
    }
  }
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
