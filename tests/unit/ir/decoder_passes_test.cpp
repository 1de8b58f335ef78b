// SPDX-License-Identifier: Apache-2.0
// decoder_passes_test.cpp - the decoder ops (gather, slice, concat, layernorm, rope,
// causal_softmax, kv_write, attention) through the passes: O2 keeps what a block using
// all of them computes, CSE/DCE/folding treat them as pure values, autodiff refuses them
// naming the op, and the public FunctionBuilder makes each of them.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "ir/interpret.h"
#include "ir/module_impl.h"
#include "ir/parse.h"
#include "ir/print.h"
#include "passes/passes.h"
#include "passes/pipeline.h"
#include "ternjit/builder.h"

namespace ternjit {
namespace {


using ir::HostTensor;

ir::Module parse(const std::string& text) {
  auto m = ir::parse_module(text, "block.tir");
  REQUIRE_MESSAGE(m.ok(), (m.ok() ? std::string() : render(m.error())));
  return std::move(m.value());
}

std::size_t count(const ir::Function& f, ir::Op op) {
  std::size_t n = 0;
  for (ir::BlockId b : f.blocks())
    for (ir::InstId i : f.insts(b)) n += f.inst(i).op == op;
  return n;
}

// A small decoder block using every decoder op, with a ternary projection that O2
// turns into an integer tmatmul and two kv_writes of different layers with the same
// operands (CSE must keep both).
constexpr const char* kBlock = R"(param @B.table : f16[11, 8]
param @B.g : f32[8]
param @B.b : f32[8]
param @B.w : t2[8, 8]

func @block(%ids: i32[3], %pos: i32[], %kc: f16[2, 6, 2, 2], %vc: f16[2, 6, 2, 2]) -> (f32[3, 8], f16[2, 6, 2, 2], f16[2, 6, 2, 2], f32[3, 6], f16[2, 6, 2, 2], f32[2, 2]) {
^entry:
  %t = param @B.table : f16[11, 8]
  %e = gather %t, %ids {axis = 0} : f16[3, 8]
  %h = cast %e {to = f32} : f32[3, 8]
  %g = param @B.g : f32[8]
  %b = param @B.b : f32[8]
  %x = layernorm %h, %g, %b {eps = 1e-05} : f32[3, 8]
  %xq = quantize_int8 %x : f32[3, 8]
  %w = param @B.w : t2[8, 8]
  %qk = matmul %xq, %w : f32[3, 8]
  %q = slice %qk {axis = 1, start = 0, size = 4} : f32[3, 4]
  %k = slice %qk {axis = 1, start = 4, size = 4} : f32[3, 4]
  %q3 = reshape %q : f32[3, 2, 2]
  %k3 = reshape %k : f32[3, 2, 2]
  %qr = rope %q3, %pos {theta = 10000, mode = norm} : f32[3, 2, 2]
  %kr = rope %k3, %pos {theta = 10000, mode = neox} : f32[3, 2, 2]
  %kc1 = kv_write %kc, %kr, %pos {layer = 1} : f16[2, 6, 2, 2]
  %kc0 = kv_write %kc, %kr, %pos {layer = 0} : f16[2, 6, 2, 2]
  %vc1 = kv_write %vc, %k3, %pos {layer = 1} : f16[2, 6, 2, 2]
  %a = attention %qr, %kc1, %vc1, %pos {layer = 1, scale = 0.7} : f32[3, 2, 2]
  %a2 = reshape %a : f32[3, 4]
  %cat = concat %a2, %q {axis = 1} : f32[3, 8]
  %one = const {value = 1} : f32[]
  %y0 = mul %cat, %one : f32[3, 8]
  %y = add %y0, %h : f32[3, 8]
  %s6 = slice %y {axis = 1, start = 1, size = 6} : f32[3, 6]
  %p = causal_softmax %s6, %pos : f32[3, 6]
  %c = const {values = [1, 2, 3, 4, 5, 6]} : f32[2, 3]
  %cs = slice %c {axis = 1, start = 1, size = 2} : f32[2, 2]
  %dead = kv_write %vc, %kr, %pos {layer = 0} : f16[2, 6, 2, 2]
  ret %y, %kc1, %vc1, %p, %kc0, %cs
}
)";

TEST_CASE("O2 keeps what a block of decoder ops computes (interpreter before vs after, random inputs)") {
  const ir::Module before = parse(kBlock);
  ir::Module after = parse(kBlock);
  passes::PipelineOptions popts;  // verify after every pass
  auto r = passes::run_pipeline(after, passes::default_pipeline(passes::OptLevel::O2), popts);
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? std::string() : r.error().message));
  const ir::Function& f = *after.find_function("block");
  // The projection became an integer tmatmul; the decoder ops are still there; the
  // unused kv_write is gone; the two kv_writes of one cache into layers 0 and 1 stay
  // two; the slice of a constant was folded.
  CHECK(count(f, ir::Op::TMatMul) == 1);
  CHECK(count(f, ir::Op::KvWrite) == 3);
  CHECK(count(f, ir::Op::Attention) == 1);
  CHECK(count(f, ir::Op::Rope) == 2);
  CHECK(count(f, ir::Op::Gather) == 1);
  CHECK(count(f, ir::Op::Slice) == 3);
  CHECK(count(f, ir::Op::Concat) == 1);
  CHECK(count(f, ir::Op::LayerNorm) == 1);
  CHECK(count(f, ir::Op::CausalSoftmax) == 1);

  for (std::uint64_t seed = 1; seed <= 6; ++seed) {
    CAPTURE(seed);
    ir::ParamValues params;
    params.set("B.table", HostTensor::random(ElemKind::F16, {11, 8}, seed * 10 + 1));
    params.set("B.g", HostTensor::random(ElemKind::F32, {8}, seed * 10 + 2));
    params.set("B.b", HostTensor::random(ElemKind::F32, {8}, seed * 10 + 3));
    params.set("B.w", HostTensor::random(ElemKind::T2, {8, 8}, seed * 10 + 4));
    std::vector<HostTensor> args;
    HostTensor ids = HostTensor::random(ElemKind::I32, {3}, seed * 10 + 5);
    for (double& v : ids.data) v = static_cast<double>((static_cast<std::int64_t>(v) % 11 + 11) % 11);
    args.push_back(ids);
    args.push_back(HostTensor::scalar(ElemKind::I32, static_cast<double>(seed % 4)));  // pos + 3 <= C = 6
    args.push_back(HostTensor::random(ElemKind::F16, {2, 6, 2, 2}, seed * 10 + 6));
    args.push_back(HostTensor::random(ElemKind::F16, {2, 6, 2, 2}, seed * 10 + 7));
    auto want = ir::interpret(before, "block", args, params);
    auto got = ir::interpret(after, "block", args, params);
    REQUIRE_MESSAGE(want.ok(), (want.ok() ? std::string() : want.error().message));
    REQUIRE_MESSAGE(got.ok(), (got.ok() ? std::string() : got.error().message));
    REQUIRE(want->size() == got->size());
    // O2 replaces matmul(quantize_int8(x), w) by the integer tmatmul path, exact up to
    // the f32 rounding of the q * s products (ir/README.md tmatmul): a few f32 ulps of
    // |values| <= ~30 on f32 results (rtol 1e-5), and an f16 cache entry may then land
    // one f16 ulp away (rtol 2^-10).
    for (std::size_t i = 0; i < want->size(); ++i) {
      CAPTURE(i);
      const bool f16 = (*want)[i].kind == ElemKind::F16;
      auto mm = ir::compare((*want)[i], (*got)[i], f16 ? 1e-3 : 1e-5, f16 ? 1e-3 : 1e-5);
      CHECK_MESSAGE(!mm.has_value(), (mm ? mm->message : std::string()));
    }
  }
}

TEST_CASE("CSE merges identical decoder ops only: kv_writes of different layers stay apart") {
  ir::Module m = parse(R"(func @f(%c: f32[2, 4, 1, 2], %r: f32[1, 1, 2], %p: i32[]) -> (f32[2, 4, 1, 2], f32[2, 4, 1, 2], f32[2, 4, 1, 2], f32[1, 1, 2], f32[1, 1, 2]) {
^entry:
  %a = kv_write %c, %r, %p {layer = 0} : f32[2, 4, 1, 2]
  %b = kv_write %c, %r, %p {layer = 1} : f32[2, 4, 1, 2]
  %a2 = kv_write %c, %r, %p {layer = 0} : f32[2, 4, 1, 2]
  %x = rope %r, %p {theta = 10000, mode = norm} : f32[1, 1, 2]
  %y = rope %r, %p {theta = 10000, mode = neox} : f32[1, 1, 2]
  ret %a, %b, %a2, %x, %y
}
)");
  ir::Function& f = m.functions()[0];
  passes::eliminate_common_subexpressions(f);
  passes::eliminate_dead_code(f);
  CHECK(count(f, ir::Op::KvWrite) == 2);  // layer 0 twice -> once; layer 1 kept
  CHECK(count(f, ir::Op::Rope) == 2);     // the modes differ
}

TEST_CASE("fold-constants evaluates decoder ops of constants with the interpreter; a failing one is left to run time") {
  ir::Module m = parse(R"(func @f() -> (f32[3, 2], f32[2, 2]) {
^entry:
  %t = const {values = [1, 2, 3, 4, 5, 6]} : f32[3, 2]
  %i = const {values = [2, 0, 2]} : i32[3]
  %g = gather %t, %i {axis = 0} : f32[3, 2]
  %bad = const {values = [7, 0]} : i32[2]
  %h = gather %t, %bad {axis = 0} : f32[2, 2]
  ret %g, %h
}
)");
  ir::Function& f = m.functions()[0];
  passes::fold_constants(f);
  passes::eliminate_dead_code(f);
  CHECK(count(f, ir::Op::Gather) == 1);  // the out-of-range one stays and fails when run
  auto r = ir::interpret(m, "f", {}, {});
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("gather: id 7 at index 0 is out of range [0, 3)") != std::string::npos);
  const std::string text = ir::print_module(m);
  CHECK(text.find("const {values = [5, 6, 1, 2, 5, 6]} : f32[3, 2]") != std::string::npos);
}

TEST_CASE("a load-time gather of a parameter is kept (not a const) and computes the same") {
  ir::Module m = parse(R"(param @E.table : f32[4, 3]

func @f() -> f32[2, 3] {
^entry:
  %t = param @E.table : f32[4, 3]
  %i = const {values = [3, 1]} : i32[2]
  %g = gather %t, %i {axis = 0} : f32[2, 3]
  ret %g
}
)");
  ir::ParamValues params;
  params.set("E.table", HostTensor::from_values(ElemKind::F32, {4, 3}, std::vector<double>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
  passes::PipelineOptions popts;
  REQUIRE(passes::run_pipeline(m, passes::default_pipeline(passes::OptLevel::O2), popts).ok());
  CHECK(count(m.functions()[0], ir::Op::Gather) == 1);
  auto r = ir::interpret(m, "f", {}, params);
  REQUIRE(r.ok());
  CHECK((*r)[0].data == std::vector<double>{9, 10, 11, 3, 4, 5});
}

TEST_CASE("autodiff refuses each decoder op on the gradient path, naming the op") {
  struct Case { const char* op; const char* result; const char* body; };
  const Case cases[] = {
      {"slice", "f32[2, 2, 4]", "  %z = slice %x {axis = 1, start = 0, size = 2} : f32[2, 2, 4]"},
      {"concat", "f32[2, 4, 4]", "  %z = concat %x {axis = 0} : f32[2, 4, 4]"},
      {"rope", "f32[2, 4, 4]", "  %z = rope %x, %p {theta = 10000, mode = norm} : f32[2, 4, 4]"},
      {"causal_softmax", "f32[2, 4, 4]", "  %z = causal_softmax %x, %p : f32[2, 4, 4]"},
      {"attention", "f32[2, 4, 4]", "  %z = attention %x, %c, %c, %p {layer = 0, scale = 0.5} : f32[2, 4, 4]"},
      {"layernorm", "f32[2, 4, 4]", "  %g = const {value = 1} : f32[4]\n  %z = layernorm %x, %g, %g {eps = 1e-05} : f32[2, 4, 4]"},
      {"kv_write", "f32[2, 4, 4]", "  %w = kv_write %c, %x, %p {layer = 0} : f32[1, 2, 4, 4]\n  %z = reshape %w : f32[2, 4, 4]"},
      {"gather", "f32[2, 4, 4]",
       "  %t = reshape %x : f32[8, 4]\n  %i = const {values = [1, 0, 1, 0, 7, 0, 1, 0]} : i32[2, 4]\n"
       "  %z = gather %t, %i {axis = 0} : f32[2, 4, 4]"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.op);
    ir::Module m = parse(std::string("func @f(%x: f32[2, 4, 4], %p: i32[], %c: f32[1, 2, 4, 4]) -> ") + c.result +
                         " {\n^entry:\n" + c.body + "\n  ret %z\n}\n");
    const std::string before = ir::print_module(m);
    auto r = passes::autodiff(m, passes::AutodiffOptions{"f", {"%x"}, false});
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == ErrorCode::InvalidInput);
    CHECK(r.error().message.find(std::string("'") + c.op + "' has no gradient rule") != std::string::npos);
    CHECK(ir::print_module(m) == before);  // unchanged on error
  }
}

TEST_CASE("FunctionBuilder makes every decoder op; misuse is located at the caller") {
  ModuleBuilder mb;
  mb.param("E.table", ElemKind::BF16, {Dim{16}, Dim{8}});
  FunctionBuilder f = mb.function("step");
  Value ids = f.arg("ids", ElemKind::I32, {Dim{"M"}});
  Value pos = f.arg("pos", ElemKind::I32, {});
  Value kc = f.arg("kc", ElemKind::F16, {Dim{2}, Dim{8}, Dim{1}, Dim{4}});
  Value vc = f.arg("vc", ElemKind::F16, {Dim{2}, Dim{8}, Dim{1}, Dim{4}});
  Value g = f.arg("g", ElemKind::F32, {Dim{8}});
  Value h = f.cast(f.gather(f.param("E.table"), ids), ElemKind::F32);
  Value x = f.layernorm(h, g, g, 1e-5);
  Value q = f.slice(x, -1, 0, 4);
  Value k = f.slice(x, 1, 4, 4);
  Value qk = f.concat({q, k}, -1);
  Value p = f.causal_softmax(qk, pos);
  // rope, kv_write and attention need rank-3 values: the second module below.
  f.ret({p});
  auto m = mb.finish();
  REQUIRE_MESSAGE(m.ok(), (m.ok() ? std::string() : m.error().message));
  const std::string text = m->to_text();
  for (const char* want : {"gather %", "layernorm %", "{axis = 1, start = 0, size = 4}", "{axis = 1, start = 4, size = 4}",
                           "concat %", "causal_softmax %"})
    CHECK_MESSAGE(text.find(want) != std::string::npos, want);
  (void)kc;
  (void)vc;

  ModuleBuilder mb2;
  FunctionBuilder f2 = mb2.function("attn");
  Value q3 = f2.arg("q", ElemKind::F32, {Dim{"M"}, Dim{2}, Dim{4}});
  Value p2 = f2.arg("pos", ElemKind::I32, {});
  Value k2 = f2.arg("kc", ElemKind::F16, {Dim{2}, Dim{8}, Dim{1}, Dim{4}});
  Value v2 = f2.arg("vc", ElemKind::F16, {Dim{2}, Dim{8}, Dim{1}, Dim{4}});
  Value r = f2.rope(q3, p2, 500000.0, RopeMode::Neox);
  Value kw = f2.kv_write(k2, f2.slice(r, 1, 0, 1), p2, 1);
  Value a = f2.attention(r, kw, v2, p2, 1, 0.5);
  f2.ret({a, kw});
  auto m2 = mb2.finish();
  REQUIRE_MESSAGE(m2.ok(), (m2.ok() ? std::string() : m2.error().message));
  const std::string t2 = m2->to_text();
  CHECK(t2.find("rope %q, %pos {theta = 5e+05, mode = neox}") != std::string::npos);
  CHECK(t2.find("kv_write %kc, %") != std::string::npos);
  CHECK(t2.find(", %pos {layer = 1} : f16[2, 8, 1, 4]") != std::string::npos);
  CHECK(t2.find("{layer = 1, scale = 0.5}") != std::string::npos);

  ModuleBuilder bad;
  FunctionBuilder fb = bad.function("bad");
  Value bq = fb.arg("q", ElemKind::F32, {Dim{1}, Dim{3}, Dim{4}});
  Value bp = fb.arg("pos", ElemKind::I32, {});
  Value bk = fb.arg("kc", ElemKind::F32, {Dim{1}, Dim{8}, Dim{2}, Dim{4}});
  const int line = __LINE__ + 1;
  Value ba = fb.attention(bq, bk, bk, bp, 0, 1.0);
  fb.ret({ba});
  auto mb_bad = bad.finish();
  REQUIRE_FALSE(mb_bad.ok());
  CHECK(mb_bad.error().message.find("'attention' needs the query heads HQ = 3 to be a multiple of the cache heads HKV = 2") !=
        std::string::npos);
  CHECK(render(mb_bad.error()).find("decoder_passes_test.cpp:" + std::to_string(line) + ":") != std::string::npos);
}

}  // namespace
}  // namespace ternjit
