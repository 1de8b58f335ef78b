// SPDX-License-Identifier: Apache-2.0
// step_plan_test.cpp - the shared CPU-target walk (targets/common/step_plan.h) and the option helpers of target.h.
#include <doctest/doctest.h>

#include "ir/parse.h"
#include "targets/common/step_plan.h"
#include "targets/target.h"

#include <map>
#include <random>
#include <sstream>

namespace ternjit {
namespace {

using targets::PlannedStep;
using targets::Slot;
using targets::SlotKind;

ir::Module parse(const char* text) {
  auto m = ir::parse_module(text, "plan.tir");
  REQUIRE_MESSAGE(m.ok(), (m.ok() ? "" : m.error().message));
  return std::move(m.value());
}

// The value named `name` in `f`.
ir::ValueId value(const ir::Function& f, const std::string& name) {
  for (std::uint32_t i = 0; i < f.num_values(); ++i)
    if (f.value(ir::ValueId{i}).name == name) return ir::ValueId{i};
  FAIL("no value %" << name);
  return ir::ValueId{0};
}

constexpr const char* kLayer = R"(param @L.w : t2[8, 4]
param @L.s : f32[8, 4]

func @f(%x: f32[2, 8]) -> (f32[2, 4], f32[2, 4], t2[8, 4]) {
^entry:
  %w = param @L.w : t2[8, 4]
  %s = param @L.s : f32[8, 4]
  %s2 = mul %s, %s : f32[8, 4]
  %y = matmul %x, %s2 : f32[2, 4]
  %r = reshape %y : f32[2, 4]
  %z = relu %r : f32[2, 4]
  ret %z, %r, %w
}
)";

TEST_CASE("step plan: load-time values, aliases, outputs written in place, copies") {
  ir::Module m = parse(kLayer);
  const ir::Function& f = m.functions()[0];
  REQUIRE(targets::plannable(f, "test").ok());
  const targets::StepPlan p = targets::plan_steps(f);
  CHECK(p.in_bytes == std::vector<std::size_t>{64});
  CHECK(p.out_bytes == std::vector<std::size_t>{32, 32, 32});
  // Load-time: the two params and the pure op of them, in definition order.
  REQUIRE(p.load_time.size() == 3);
  CHECK(p.load_time[0].value == value(f, "w"));
  CHECK(p.load_time[1].value == value(f, "s"));
  CHECK(p.load_time[2].value == value(f, "s2"));
  CHECK(p.slot(value(f, "s2")) == Slot{SlotKind::Const, 2});
  // %z is returned first as result 0: computed straight into output 0. %y is returned
  // through the reshape alias as result 1: it lives in scratch and is copied.
  CHECK(p.slot(value(f, "z")) == Slot{SlotKind::Out, 0});
  CHECK(p.slot(value(f, "y")).kind == SlotKind::Scratch);
  CHECK(p.slot(value(f, "r")) == p.slot(value(f, "y")));
  CHECK(p.scratch_bytes == targets::kScratchAlign);
  // Steps: matmul, relu, then the copies of results 1 (scratch) and 2 (a const).
  REQUIRE(p.steps.size() == 4);
  CHECK(p.steps[0].kind == PlannedStep::Kind::Compute);
  CHECK(f.inst(p.steps[0].inst).op == ir::Op::MatMul);
  CHECK(p.steps[0].in == std::vector<Slot>{{SlotKind::Arg, 0}, {SlotKind::Const, 2}});
  CHECK(f.inst(p.steps[1].inst).op == ir::Op::Relu);
  CHECK(p.steps[1].out == std::vector<Slot>{{SlotKind::Out, 0}});
  CHECK(p.steps[2].kind == PlannedStep::Kind::Copy);
  CHECK(p.steps[2].ret_index == 1);
  CHECK(p.steps[2].bytes == 32);
  CHECK(p.steps[3].kind == PlannedStep::Kind::Copy);
  CHECK(p.steps[3].in == std::vector<Slot>{{SlotKind::Const, 0}});
  CHECK(p.steps[3].out == std::vector<Slot>{{SlotKind::Out, 2}});
  // Run twice: the same plan.
  const targets::StepPlan q = targets::plan_steps(f);
  CHECK(q.slot_of == p.slot_of);
  CHECK(q.scratch_bytes == p.scratch_bytes);
}

// --------------------------------------------------------------- scratch reuse by liveness

// A chain of `n` relus on f32[`len`], the last one returned.
std::string relu_chain(int n, int len) {
  std::ostringstream t;
  t << "func @chain(%x: f32[" << len << "]) -> f32[" << len << "] {\n^entry:\n";
  std::string prev = "x";
  for (int k = 0; k < n; ++k) {
    t << "  %v" << k << " = relu %" << prev << " : f32[" << len << "]\n";
    prev = "v" + std::to_string(k);
  }
  t << "  ret %" << prev << "\n}\n";
  return t.str();
}

std::size_t aligned(std::size_t n) { return (n + targets::kScratchAlign - 1) / targets::kScratchAlign * targets::kScratchAlign; }

// Every pair of scratch values live at the same time (closed intervals [definition, last
// read], an alias's reads counted for its root, ret and `extra` reads included) has
// disjoint bytes; every region is aligned and inside scratch_bytes. Liveness is computed
// here, independently of the planner. Returns the number of overlapping-lifetime pairs
// checked, so a caller can see the check had work to do.
std::size_t check_no_live_overlap(const ir::Function& f, const targets::StepPlan& p,
                                  const std::vector<targets::ExtraRead>& extra = {}) {
  const auto insts = f.insts(f.entry());
  std::map<std::uint32_t, std::uint32_t> root;  // alias -> the value holding its bytes
  auto root_of = [&](ir::ValueId v) {
    auto it = root.find(v.index);
    return it == root.end() ? v.index : it->second;
  };
  std::map<std::uint32_t, std::pair<std::size_t, std::size_t>> live;  // root -> [def, last read]
  for (std::size_t k = 0; k < insts.size(); ++k) {
    const ir::InstData& inst = f.inst(insts[k]);
    for (ir::ValueId v : inst.operands) {
      auto it = live.find(root_of(v));
      if (it != live.end()) it->second.second = std::max(it->second.second, k);
    }
    for (const targets::ExtraRead& e : extra)
      if (e.at == insts[k]) live.at(root_of(e.value)).second = std::max(live.at(root_of(e.value)).second, k);
    // An alias, or a kv_write the plan put in place (its result in its cache's bytes).
    const bool in_place = inst.op == ir::Op::KvWrite && p.slot(inst.results[0]) == p.slot(inst.operands[0]);
    if (inst.op == ir::Op::Reshape || in_place) {
      root[inst.results[0].index] = root_of(inst.operands[0]);
      continue;
    }
    for (ir::ValueId r : inst.results)
      if (p.slot(r).kind == SlotKind::Scratch) live[r.index] = {k, k};
  }
  std::size_t pairs = 0;
  for (auto a = live.begin(); a != live.end(); ++a) {
    const Slot sa = p.slot_of[a->first];
    const std::size_t na = targets::static_bytes(f.type_of(ir::ValueId{a->first}));
    CHECK(sa.index % targets::kScratchAlign == 0);
    CHECK(sa.index + na <= p.scratch_bytes);
    for (auto b = std::next(a); b != live.end(); ++b) {
      const bool together = a->second.first <= b->second.second && b->second.first <= a->second.second;
      if (!together) continue;
      ++pairs;
      const Slot sb = p.slot_of[b->first];
      const std::size_t nb = targets::static_bytes(f.type_of(ir::ValueId{b->first}));
      const bool disjoint = na == 0 || nb == 0 || sa.index + na <= sb.index || sb.index + nb <= sa.index;
      INFO("values " << a->first << " [" << sa.index << ", +" << na << ") and " << b->first << " [" << sb.index << ", +"
                     << nb << ") are live together");
      CHECK(disjoint);
    }
  }
  return pairs;
}

TEST_CASE("step plan: the scratch of a chain of N ops is a few of its largest values, not their sum") {
  for (int n : {2, 3, 10, 60}) {
    INFO("chain of " << n);
    ir::Module m = parse(relu_chain(n, 1000).c_str());
    const ir::Function& f = m.functions()[0];
    const targets::StepPlan p = targets::plan_steps(f);
    // The last relu writes output 0; the others alternate between two regions (a step's
    // result never overlaps its operand).
    CHECK(p.scratch_bytes == (n == 2 ? 1 : 2) * aligned(4000));
    check_no_live_overlap(f, p);
  }
  // Values of different sizes: a big value dies, later small ones reuse its bytes.
  ir::Module m = parse(R"(func @g(%x: f32[4096]) -> f32[16] {
^entry:
  %a = relu %x : f32[4096]
  %b = reshape %a : f32[256, 16]
  %c = reduce_sum %b {axis = 0, keepdims = false} : f32[16]
  %d = relu %c : f32[16]
  %e = relu %d : f32[16]
  %f = relu %e : f32[16]
  ret %f
}
)");
  const ir::Function& f = m.functions()[0];
  const targets::StepPlan p = targets::plan_steps(f);
  CHECK(p.scratch_bytes == aligned(4 * 4096) + aligned(64));  // %a with %c, then the small ones in %a's bytes
  CHECK(check_no_live_overlap(f, p) >= 3);
}

TEST_CASE("step plan: no two values live at once share bytes (random programs)") {
  std::size_t pairs = 0;
  for (std::uint32_t seed = 1; seed <= 60; ++seed) {
    std::mt19937 rng(seed);
    const int lens[] = {1, 3, 16, 17, 100, 250};
    std::ostringstream t;
    t << "func @r(%x: f32[17], %y: f32[100]) -> (f32[17], f32[100]) {\n^entry:\n";
    std::map<int, std::vector<std::string>> pool{{17, {"x"}}, {100, {"y"}}};
    const int n = 10 + static_cast<int>(rng() % 40);
    for (int k = 0; k < n; ++k) {
      const int len = lens[rng() % 6];
      auto& vs = pool[len];
      const std::string name = "v" + std::to_string(k);
      const std::string ty = "f32[" + std::to_string(len) + "]";
      if (vs.empty() || rng() % 5 == 0) {
        // A fresh value of this length: a reduction of some existing value.
        const std::vector<std::string>& src = pool.at(rng() % 2 ? 17 : 100);
        t << "  %" << name << "s = reduce_sum %" << src[rng() % src.size()] << " {axis = 0, keepdims = false} : f32[]\n";
        t << "  %" << name << " = broadcast %" << name << "s : " << ty << "\n";
      } else if (rng() % 4 == 0) {
        t << "  %" << name << "r = reshape %" << vs[rng() % vs.size()] << " : f32[1, " << len << "]\n";
        t << "  %" << name << " = reshape %" << name << "r : " << ty << "\n";
      } else if (rng() % 2 == 0) {
        t << "  %" << name << " = relu %" << vs[rng() % vs.size()] << " : " << ty << "\n";
      } else {
        t << "  %" << name << " = add %" << vs[rng() % vs.size()] << ", %" << vs[rng() % vs.size()] << " : " << ty << "\n";
      }
      vs.push_back(name);
    }
    t << "  ret %" << pool[17].back() << ", %" << pool[100][rng() % pool[100].size()] << "\n}\n";
    INFO(t.str());
    ir::Module m = parse(t.str().c_str());
    const ir::Function& f = m.functions()[0];
    REQUIRE(targets::plannable(f, "test").ok());
    const targets::StepPlan p = targets::plan_steps(f);
    pairs += check_no_live_overlap(f, p);
    // Every step's results are disjoint from its scratch operands.
    for (const PlannedStep& s : p.steps) {
      if (s.kind != PlannedStep::Kind::Compute) continue;
      const ir::InstData& inst = f.inst(s.inst);
      for (std::size_t r = 0; r < s.out.size(); ++r)
        for (std::size_t o = 0; o < s.in.size(); ++o)
          if (s.out[r].kind == SlotKind::Scratch && s.in[o].kind == SlotKind::Scratch) {
            const std::size_t rb = targets::static_bytes(f.type_of(inst.results[r]));
            const std::size_t ob = targets::static_bytes(f.type_of(inst.operands[o]));
            CHECK((s.out[r].index + rb <= s.in[o].index || s.in[o].index + ob <= s.out[r].index));
          }
    }
  }
  CHECK(pairs > 500);  // the programs had values live together to check
}

TEST_CASE("step plan: an extra read keeps a value live until the fused step that reads it") {
  ir::Module m = parse(relu_chain(5, 64).c_str());
  const ir::Function& f = m.functions()[0];
  const targets::StepPlan plain = targets::plan_steps(f);
  // Without it, %v0's bytes are reused by %v2.
  CHECK(plain.slot(value(f, "v0")) == plain.slot(value(f, "v2")));
  // The step of %v3 reads %v0 (as a fused kernel would): %v0 is live until then.
  const std::vector<targets::ExtraRead> extra{{value(f, "v0"), f.value(value(f, "v3")).inst}};
  const targets::StepPlan p = targets::plan_steps(f, extra);
  CHECK(p.slot(value(f, "v0")) != p.slot(value(f, "v2")));
  CHECK(p.slot(value(f, "v0")) != p.slot(value(f, "v3")));
  CHECK(check_no_live_overlap(f, p, extra) >= 4);
}

// ------------------------------------------------------------------- kv_write in place

// A two-layer step: each layer writes its rows into the cache, then attends over it.
// `extra` is inserted after the first kv_write; `rets` is the ret line's operands.
std::string kv_step(const std::string& extra, const std::string& rets, const std::string& results) {
  return "func @step(%x: f32[2, 1, 4], %p: i32[], %kc: f32[2, 8, 1, 4]) -> (" + results +
         ") {\n^entry:\n"
         "  %k0 = kv_write %kc, %x, %p {layer = 0} : f32[2, 8, 1, 4]\n" +
         extra +
         "  %a0 = attention %x, %k0, %k0, %p {layer = 0, scale = 0.5} : f32[2, 1, 4]\n"
         "  %k1 = kv_write %k0, %a0, %p {layer = 1} : f32[2, 8, 1, 4]\n"
         "  %a1 = attention %a0, %k1, %k1, %p {layer = 1, scale = 0.5} : f32[2, 1, 4]\n"
         "  ret " + rets + "\n}\n";
}

// The planned step of the instruction defining `name`.
const PlannedStep& step_of(const ir::Function& f, const targets::StepPlan& p, const std::string& name) {
  for (const PlannedStep& s : p.steps)
    if (s.kind == PlannedStep::Kind::Compute && s.inst == f.value(value(f, name)).inst) return s;
  FAIL("no step defines %" << name);
  return p.steps.front();
}

TEST_CASE("step plan: a kv_write chain from an argument to a result lives in that output") {
  ir::Module m = parse(kv_step("", "%a1, %k1", "f32[2, 1, 4], f32[2, 8, 1, 4]").c_str());
  const ir::Function& f = m.functions()[0];
  const targets::StepPlan p = targets::plan_steps(f);
  CHECK(p.in_place == std::vector<targets::InPlace>{{2, 1}});
  CHECK(p.slot(value(f, "k0")) == Slot{SlotKind::Out, 1});
  CHECK(p.slot(value(f, "k1")) == Slot{SlotKind::Out, 1});
  // The first kv_write reads the argument and writes the output; the second runs in place.
  const PlannedStep& w0 = step_of(f, p, "k0");
  CHECK(w0.in[0] == Slot{SlotKind::Arg, 2});
  CHECK(w0.out[0] == Slot{SlotKind::Out, 1});
  const PlannedStep& w1 = step_of(f, p, "k1");
  CHECK(w1.in[0] == w1.out[0]);
  // No copy of the cache at ret, and no scratch for it.
  for (const PlannedStep& s : p.steps) CHECK(s.kind == PlannedStep::Kind::Compute);
  CHECK(p.scratch_bytes == targets::kScratchAlign);  // %a0 only (%a1 is output 0)
  check_no_live_overlap(f, p);
}

TEST_CASE("step plan: a cache argument read elsewhere is never written; the chain runs in scratch") {
  // %kc is also read by an attention after the first kv_write: the argument must stay intact.
  ir::Module m = parse(kv_step("  %s = attention %x, %kc, %kc, %p {layer = 1, scale = 0.5} : f32[2, 1, 4]\n",
                               "%a1, %k1, %s", "f32[2, 1, 4], f32[2, 8, 1, 4], f32[2, 1, 4]")
                           .c_str());
  const ir::Function& f = m.functions()[0];
  const targets::StepPlan p = targets::plan_steps(f);
  CHECK(p.in_place.empty());
  CHECK(p.slot(value(f, "k0")).kind == SlotKind::Scratch);
  CHECK(p.slot(value(f, "k1")) == p.slot(value(f, "k0")));  // still in place after the first
  CHECK(step_of(f, p, "k0").in[0] == Slot{SlotKind::Arg, 2});
  bool copied = false;
  for (const PlannedStep& s : p.steps)
    if (s.kind == PlannedStep::Kind::Copy && s.ret_index == 1) copied = s.in[0] == p.slot(value(f, "k0"));
  CHECK(copied);
  check_no_live_overlap(f, p);
}

TEST_CASE("step plan: a cache value read after the kv_write is not overwritten") {
  // %k0 is read again after %k1 = kv_write %k0: %k1 needs its own bytes.
  std::string text = kv_step("", "%a1, %k1, %b", "f32[2, 1, 4], f32[2, 8, 1, 4], f32[2, 1, 4]");
  text.insert(text.find("  ret"), "  %b = attention %a1, %k0, %k0, %p {layer = 0, scale = 0.5} : f32[2, 1, 4]\n");
  ir::Module m = parse(text.c_str());
  const ir::Function& f = m.functions()[0];
  const targets::StepPlan p = targets::plan_steps(f);
  CHECK(p.slot(value(f, "k1")) != p.slot(value(f, "k0")));
  CHECK(p.slot(value(f, "k1")) == Slot{SlotKind::Out, 1});
  // The argument chain does not reach a result (%k0's bytes must survive %k1): %k0 is scratch.
  CHECK(p.in_place.empty());
  CHECK(p.slot(value(f, "k0")).kind == SlotKind::Scratch);
  CHECK(check_no_live_overlap(f, p) > 0);
}

TEST_CASE("step plan: a chain that is not returned runs in scratch, the argument intact") {
  ir::Module m = parse(kv_step("", "%a1", "f32[2, 1, 4]").c_str());
  const ir::Function& f = m.functions()[0];
  const targets::StepPlan p = targets::plan_steps(f);
  CHECK(p.in_place.empty());
  CHECK(p.slot(value(f, "k0")).kind == SlotKind::Scratch);
  CHECK(p.slot(value(f, "k1")) == p.slot(value(f, "k0")));
  CHECK(step_of(f, p, "k0").in[0] == Slot{SlotKind::Arg, 2});
  check_no_live_overlap(f, p);
}

TEST_CASE("step plan: what cannot be planned names the target and the reason") {
  ir::Module m = parse(R"(func @g<N>(%x: f32[N]) -> f32[N] {
^entry:
  %y = relu %x : f32[N]
  ret %y
}
)");
  auto r = targets::plannable(m.functions()[0], "cpu9");
  REQUIRE(!r.ok());
  CHECK(r.error().code == ErrorCode::Unsupported);
  CHECK(r.error().message.find("the cpu9 target needs static shapes") != std::string::npos);
}

TEST_CASE("target options: split by target, and the options' one key text") {
  auto s = targets::split_target_options(" x86.max_isa = avx2 ;; llvm.cpu=znver4;llvm.triple=aarch64-linux-gnu ");
  REQUIRE(s.ok());
  CHECK(s->size() == 2);
  CHECK(s->at("x86").get("max_isa") == "avx2");
  CHECK(s->at("llvm").get("cpu") == "znver4");
  CHECK(s->at("llvm").get("nothing").empty());
  CHECK(targets::split_target_options("")->empty());
  for (const char* bad : {"max_isa=avx2", "x86.max_isa", ".x=1", "x86.=1", "x86.a=1;x86.a=2"}) {
    INFO(bad);
    auto e = targets::split_target_options(bad);
    REQUIRE(!e.ok());
    CHECK(e.error().code == ErrorCode::InvalidArgument);
  }
  targets::CompileOptions o;
  o.threads = 2;
  o.tuning = targets::TuningMode::Tune;
  o.target = s->at("llvm");
  CHECK(o.key() == "opt=O2;threads=2;tuning=tune;cpu=znver4;triple=aarch64-linux-gnu");
  o.decisions = {"mt=4", "mt=8"};
  o.rows_max = 16;
  CHECK(o.key() == "opt=O2;threads=2;tuning=tune;cpu=znver4;triple=aarch64-linux-gnu;decisions=mt=4|mt=8;rows<=16");
  CHECK(targets::parse_tuning_mode("cached") == targets::TuningMode::Cached);
  CHECK(!targets::parse_tuning_mode("sometimes"));
}

}  // namespace
}  // namespace ternjit
