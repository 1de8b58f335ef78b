// SPDX-License-Identifier: Apache-2.0
// llvm_target_test.cpp - the llvm target's host JIT: every kernel op against the interpreter, bit for bit.
//
// Each case writes a small fully static function in IR text, compiles it with the llvm
// target (O2 pass pipeline, host CPU), links the object in its own LLJIT, runs it on
// random inputs with NaN-poisoned outputs and compares the output bytes with
// ir::interpret on the same module. The generator mirrors the interpreter's arithmetic
// (f32 binary ops, f64 unary math and reductions, libm, no contraction), so every path,
// float ones included, is compared bit for bit.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <thread>

#include "ir/interpret.h"
#include "ir/parse.h"
#include "targets/llvm/llvm_target.h"
#include "targets/llvm/program.h"
#include "targets/reference/reference_target.h"
#include "targets/registry.h"
#include "tests/unit/engine/engine_testing.h"

namespace ternjit {
namespace {

using ir::HostTensor;


// Compiles `fn` of `tir` on the llvm target and runs it against the interpreter.
void check(const std::string& tir, const std::string& fn, const std::vector<HostTensor>& args,
           const ir::ParamValues& params = {}, bool expect_all_lowered = true) {
  CAPTURE(tir);
  auto m = ir::parse_module(tir, "test.tir");
  REQUIRE_MESSAGE(m.ok(), (m.ok() ? "" : m.error().message));
  auto target = targets::make_llvm_target();
  REQUIRE(target->available().ok());
  const ir::Function* f = m->find_function(fn);
  REQUIRE(f != nullptr);
  auto prog = targets::llvmjit::analyze(*f, targets::llvmjit::PanelLayout{16, 16});
  REQUIRE_MESSAGE(prog.ok(), (prog.ok() ? "" : prog.error().message));
  CHECK(prog->all_lowered == expect_all_lowered);
  auto art = target->compile(*m, fn, targets::CompileOptions{});
  REQUIRE_MESSAGE(art.ok(), (art.ok() ? "" : art.error().message));
  CHECK(art->kind == "llvm-object");
  auto k = targets::llvmjit::load_kernel(*art, params);
  REQUIRE_MESSAGE(k.ok(), (k.ok() ? "" : k.error().message));
  auto want = ir::interpret(*m, fn, args, params);
  REQUIRE_MESSAGE(want.ok(), (want.ok() ? "" : want.error().message));
  std::vector<std::vector<std::uint8_t>> in, out;
  std::vector<void*> buffers;
  for (const HostTensor& a : args) in.push_back(a.to_bytes());
  for (auto& b : in) buffers.push_back(b.data());
  for (const HostTensor& w : *want) out.emplace_back(w.to_bytes().size(), std::uint8_t{0x5A});
  for (auto& b : out) buffers.push_back(b.data());
  for (int rep = 0; rep < 2; ++rep) {  // twice: scratch reuse must not leak state
    auto r = (*k)->run(buffers.data());
    REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
    for (std::size_t j = 0; j < out.size(); ++j) {
      const std::vector<std::uint8_t> w = (*want)[j].to_bytes();
      if (w != out[j]) {
        std::size_t at = 0;
        while (at < w.size() && w[at] == out[j][at]) ++at;
        FAIL("result " << j << " differs first at byte " << at << " of " << w.size());
      }
    }
  }
}

HostTensor rnd(ElemKind k, std::vector<std::int64_t> shape, std::uint64_t seed) { return HostTensor::random(k, std::move(shape), seed); }

std::string sh(std::initializer_list<std::int64_t> d) {
  std::string s = "[";
  for (auto it = d.begin(); it != d.end(); ++it) s += (it == d.begin() ? "" : ", ") + std::to_string(*it);
  return s + "]";
}

TEST_CASE("llvm: int8 tmatmul with every epilogue and activation, odd shapes") {
  struct S {
    std::int64_t M, K, N;
  };
  const S shapes[] = {{1, 64, 16}, {3, 63, 5}, {7, 257, 33}, {2, 1, 1}, {4, 130, 67}};
  const char* acts[] = {"none", "relu", "gelu", "silu", "sigmoid", "tanh"};
  std::uint64_t seed = 1;
  for (const S& s : shapes) {
    for (const char* act : acts) {
      CAPTURE(s.M);
      CAPTURE(s.K);
      CAPTURE(s.N);
      CAPTURE(act);
      const std::string x = sh({s.M, s.K}), y = sh({s.M, s.N});
      const std::string tir = "param @w : t2" + sh({s.K, s.N}) + "\nparam @ws : f32" + sh({s.N}) +
                              "\nfunc @f(%q: i8" + x + ", %xs: f32" + sh({s.M, 1}) + ", %b: f32" + sh({s.N}) +
                              ", %r: f32" + y + ") -> f32" + y +
                              " {\n^entry:\n  %w = param @w : t2" + sh({s.K, s.N}) + "\n  %ws = param @ws : f32" +
                              sh({s.N}) +
                              "\n  %y = tmatmul %q, %w, %xs, %ws, %b, %r {x_scale = true, w_scale = true, bias = true, "
                              "residual = true, act = " + act + "} : f32" + y + "\n  ret %y\n}\n";
      ir::ParamValues pv;
      pv.set("w", rnd(ElemKind::T2, {s.K, s.N}, seed++));
      pv.set("ws", rnd(ElemKind::F32, {s.N}, seed++));
      check(tir, "f",
            {rnd(ElemKind::I8, {s.M, s.K}, seed), rnd(ElemKind::F32, {s.M, 1}, seed + 1),
             rnd(ElemKind::F32, {s.N}, seed + 2), rnd(ElemKind::F32, {s.M, s.N}, seed + 3)},
            pv);
      seed += 4;
    }
  }
}

TEST_CASE("llvm: tmatmul with f32 activations, per-tensor scale, no epilogue; i8 weights") {
  const std::string tir =
      "param @w : t2[37, 9]\nparam @s : f32[]\nfunc @f(%x: f32[5, 37]) -> f32[5, 9] {\n^entry:\n"
      "  %w = param @w : t2[37, 9]\n  %s = param @s : f32[]\n"
      "  %y = tmatmul %x, %w, %s {x_scale = false, w_scale = true, bias = false, residual = false, act = none} : f32[5, 9]\n"
      "  ret %y\n}\n";
  ir::ParamValues pv;
  pv.set("w", rnd(ElemKind::T2, {37, 9}, 3));
  pv.set("s", rnd(ElemKind::F32, {}, 4));
  check(tir, "f", {rnd(ElemKind::F32, {5, 37}, 5)}, pv);
  const std::string plain =
      "func @g(%x: i8[3, 300], %w: t2[300, 7]) -> f32[3, 7] {\n^entry:\n"
      "  %y = tmatmul %x, %w {x_scale = false, w_scale = false, bias = false, residual = false, act = none} : f32[3, 7]\n"
      "  ret %y\n}\n";
  // The weight is an argument here, not load-time: the tmatmul runs as a reference step.
  check(plain, "g", {rnd(ElemKind::I8, {3, 300}, 6), rnd(ElemKind::T2, {300, 7}, 7)}, {}, false);
}

TEST_CASE("llvm: tmatmul with a grouped w_scale (i8 and f32 x, partial last group, every epilogue), bit for bit") {
  // The groups' sums are scaled and added in double as the interpreter does, so the
  // result is bit-exact; the dot-product path is bypassed for grouped scales.
  struct S {
    std::int64_t M, K, N, group;
  };
  const S shapes[] = {{1, 300, 9, 256}, {3, 67, 33, 32}, {17, 100, 5, 256}, {4, 37, 7, 6}, {2, 512, 16, 256}};
  std::uint64_t seed = 100;
  for (const S& s : shapes) {
    const std::int64_t G = (s.K + s.group - 1) / s.group;
    for (const char* act : {"none", "relu", "silu"}) {
      CAPTURE(s.M);
      CAPTURE(s.K);
      CAPTURE(s.N);
      CAPTURE(s.group);
      CAPTURE(act);
      const std::string x = sh({s.M, s.K}), y = sh({s.M, s.N}), g = std::to_string(s.group);
      const std::string tir =
          "param @w : t2" + sh({s.K, s.N}) + "\nparam @s : f32" + sh({G, s.N}) + "\nfunc @f(%q: i8" + x +
          ", %xs: f32" + sh({s.M, 1}) + ", %b: f32" + sh({s.N}) + ", %r: f32" + y + ", %xf: f32" + x + ") -> (f32" + y +
          ", f32" + y + ") {\n^entry:\n  %w = param @w : t2" + sh({s.K, s.N}) + "\n  %s = param @s : f32" + sh({G, s.N}) +
          "\n  %y = tmatmul %q, %w, %xs, %s, %b, %r {x_scale = true, w_scale = true, group = " + g +
          ", bias = true, residual = true, act = " + act + "} : f32" + y +
          "\n  %z = tmatmul %xf, %w, %s {x_scale = false, w_scale = true, group = " + g +
          ", bias = false, residual = false, act = none} : f32" + y + "\n  ret %y, %z\n}\n";
      ir::ParamValues pv;
      pv.set("w", rnd(ElemKind::T2, {s.K, s.N}, seed++));
      pv.set("s", rnd(ElemKind::F32, {G, s.N}, seed++));
      check(tir, "f",
            {rnd(ElemKind::I8, {s.M, s.K}, seed), rnd(ElemKind::F32, {s.M, 1}, seed + 1),
             rnd(ElemKind::F32, {s.N}, seed + 2), rnd(ElemKind::F32, {s.M, s.N}, seed + 3),
             rnd(ElemKind::F32, {s.M, s.K}, seed + 4)},
            pv);
      seed += 5;
    }
  }
}

TEST_CASE("llvm: quantize per row, zero rows, NaN, inf and odd widths") {
  for (std::int64_t cols : {1, 7, 64, 129}) {
    CAPTURE(cols);
    const std::string t = sh({5, cols});
    const std::string tir = "func @f(%x: f32" + t + ") -> (i8" + t + ", f32[5, 1]) {\n^entry:\n  %q, %s = quantize %x : i8" +
                            t + ", f32[5, 1]\n  ret %q, %s\n}\n";
    HostTensor x = rnd(ElemKind::F32, {5, cols}, static_cast<std::uint64_t>(cols));
    for (std::int64_t c = 0; c < cols; ++c) x.data[static_cast<std::size_t>(cols + c)] = 0.0;  // row 1: zeros
    x.data[static_cast<std::size_t>(2 * cols)] = std::nan("");
    x.data[static_cast<std::size_t>(3 * cols)] = HUGE_VAL;
    x.data[static_cast<std::size_t>(4 * cols)] = 3.5;  // a tie after scaling? rounding is checked bitwise
    check(tir, "f", {x});
  }
}

TEST_CASE("llvm: rmsnorm, softmax and reductions on every axis") {
  check("func @f(%x: f32[3, 67], %g: f32[67]) -> f32[3, 67] {\n^entry:\n  %y = rmsnorm %x, %g {eps = 1e-05} : f32[3, 67]\n"
        "  ret %y\n}\n",
        "f", {rnd(ElemKind::F32, {3, 67}, 11), rnd(ElemKind::F32, {67}, 12)});
  for (int axis : {0, 1, 2}) {
    CAPTURE(axis);
    const std::string a = std::to_string(axis);
    HostTensor x = rnd(ElemKind::F32, {3, 5, 7}, 13);
    x.data[4] = -0.0;
    x.data[5] = 0.0;
    check("func @f(%x: f32[3, 5, 7]) -> f32[3, 5, 7] {\n^entry:\n  %y = softmax %x {axis = " + a +
              "} : f32[3, 5, 7]\n  ret %y\n}\n",
          "f", {x});
    std::vector<std::int64_t> kept = {3, 5, 7};
    kept[static_cast<std::size_t>(axis)] = 1;
    const std::string kt = sh({kept[0], kept[1], kept[2]});
    for (const char* op : {"reduce_sum", "reduce_mean", "reduce_max"}) {
      CAPTURE(op);
      check("func @f(%x: f32[3, 5, 7]) -> f32" + kt + " {\n^entry:\n  %y = " + op + " %x {axis = " + a +
                ", keepdims = true} : f32" + kt + "\n  ret %y\n}\n",
            "f", {x});
    }
  }
  HostTensor n = rnd(ElemKind::F32, {2, 9}, 14);
  n.data[3] = std::nan("");
  check("func @f(%x: f32[2, 9]) -> f32[2] {\n^entry:\n  %y = reduce_max %x {axis = 1, keepdims = false} : f32[2]\n"
        "  ret %y\n}\n",
        "f", {n});
  check("func @f(%x: f32[2, 9]) -> f32[2, 9] {\n^entry:\n  %y = softmax %x {axis = 1} : f32[2, 9]\n  ret %y\n}\n", "f",
        {n});
}

TEST_CASE("llvm: elementwise ops and ewise chains with row and column broadcasts") {
  const char* binary[] = {"add", "sub", "mul", "div", "max", "min"};
  for (const char* op : binary) {
    CAPTURE(op);
    HostTensor a = rnd(ElemKind::F32, {4, 9}, 21), b = rnd(ElemKind::F32, {1, 9}, 22);
    a.data[0] = std::nan("");
    a.data[1] = -0.0;
    b.data[1] = 0.0;
    check(std::string("func @f(%a: f32[4, 9], %b: f32[1, 9]) -> f32[4, 9] {\n^entry:\n  %y = ") + op +
              " %a, %b : f32[4, 9]\n  ret %y\n}\n",
          "f", {a, b});
  }
  const char* unary[] = {"neg", "abs", "relu", "sigmoid", "tanh", "gelu", "silu", "exp", "log", "sqrt", "rsqrt"};
  for (const char* op : unary) {
    CAPTURE(op);
    HostTensor a = rnd(ElemKind::F32, {3, 11}, 23);
    a.data[2] = -0.0;
    check(std::string("func @f(%a: f32[3, 11]) -> f32[3, 11] {\n^entry:\n  %y = ") + op +
              " %a : f32[3, 11]\n  ret %y\n}\n",
          "f", {a});
  }
  check("func @f(%a: f32[2, 3, 5], %b: f32[2, 3, 1], %c: f32[5], %d: f32[]) -> f32[2, 3, 5] {\n^entry:\n"
        "  %y = ewise %a, %b, %c, %d {steps = [mul(0, 1), add(4, 2), silu(5), max(6, 3), neg(7)]} : f32[2, 3, 5]\n"
        "  ret %y\n}\n",
        "f",
        {rnd(ElemKind::F32, {2, 3, 5}, 24), rnd(ElemKind::F32, {2, 3, 1}, 25), rnd(ElemKind::F32, {5}, 26),
         rnd(ElemKind::F32, {}, 27)});
}

TEST_CASE("llvm: reference steps, aliases, copies and several results") {
  // ternarize has no generator: a reference step between two generated ones.
  check("func @f(%a: f32[3, 4]) -> (f32[3, 4], f32[3, 4], f32[12]) {\n^entry:\n  %e = exp %a : f32[3, 4]\n"
        "  %t = ternarize %e {threshold = 1.5} : f32[3, 4]\n  %n = neg %t : f32[3, 4]\n"
        "  %r = reshape %a : f32[12]\n  ret %n, %a, %r\n}\n",
        "f", {rnd(ElemKind::F32, {3, 4}, 31)}, {}, false);
  check("func @f(%a: f32[3, 4]) -> (f32[3, 4], f32[3, 4]) {\n^entry:\n  %e = exp %a : f32[3, 4]\n  ret %e, %e\n}\n", "f",
        {rnd(ElemKind::F32, {3, 4}, 32)});
}

TEST_CASE("llvm: BitLinear through the engine, kernels used from several threads") {
  EngineOptions o;
  o.target = "llvm";
  auto e = Engine::create(o);
  REQUIRE_MESSAGE(e.ok(), (e.ok() ? "" : e.error().message));
  struct S {
    std::int64_t M, K, N;
  };
  for (const S& s : {S{1, 64, 16}, S{3, 63, 5}, S{9, 130, 67}}) {
    CAPTURE(s.M);
    Program p = testing::bitlinear(*e);
    testing::BitLinearWeights w(s.K, s.N, static_cast<std::uint64_t>(s.K));
    w.bind(p);
    std::vector<float> x = testing::random_f32(s.M * s.K, 5);
    const std::vector<float> want = testing::oracle(w.params(), x, s.M, s.K, std::nullopt);
    std::vector<std::thread> ts;
    std::vector<int> ok(4, 0);
    for (int t = 0; t < 4; ++t)
      ts.emplace_back([&, t] {
        std::vector<float> y(static_cast<std::size_t>(s.M * s.N), std::nanf(""));
        TensorView in[] = {testing::view(x, {s.M, s.K})};
        TensorView out[] = {testing::view(y, {s.M, s.N})};
        if (!p.run("BitLinear.forward", in, out).ok()) return;
        float mx = 0;
        for (float v : want) mx = std::max(mx, std::fabs(v));
        bool good = true;
        for (std::size_t i = 0; i < y.size(); ++i)
          good = good && std::fabs(double(y[i]) - double(want[i])) <= 1e-3 * mx + 1e-5;
        ok[static_cast<std::size_t>(t)] = good ? 1 : 0;
      });
    for (auto& t : ts) t.join();
    for (int v : ok) CHECK(v == 1);
  }
}

TEST_CASE("llvm: registry order keeps x86 first for auto, llvm before reference") {
  auto reg = targets::TargetRegistry::create();
  const std::string names = reg.names();
  CHECK(names.find("llvm") != std::string::npos);
  CHECK(names.find("llvm") < names.find("reference"));
  CHECK(names.find("x86") < names.find("llvm"));
}

TEST_CASE("llvm: a function generating more LLVM instructions than llvm.max_instructions is refused before optimizing "
          "(issue 33 item 18)") {
  // A chain of 64 elementwise steps: a few thousand LLVM instructions. With a budget of
  // 100 the target refuses it at once, naming the count, the budget and the option.
  std::string tir = "func @chain(%x: f32[4, 8]) -> f32[4, 8] {\n^entry:\n";
  std::string last = "%x";
  for (int i = 0; i < 64; ++i) {
    const std::string v = "%v" + std::to_string(i);
    tir += "  " + v + " = " + (i % 2 ? "relu " : "exp ") + last + " : f32[4, 8]\n";
    last = v;
  }
  tir += "  ret " + last + "\n}\n";
  auto m = ir::parse_module(tir, "chain.tir");
  REQUIRE(m.ok());
  auto target = targets::make_llvm_target();
  targets::CompileOptions o;
  o.opt_level = passes::OptLevel::O0;  // no fusion: one step per op
  REQUIRE(target->parse_options(targets::TargetOptions{{{"max_instructions", "100"}}}).ok());
  o.target.values["max_instructions"] = "100";
  auto art = target->compile(*m, "chain", o);
  REQUIRE_FALSE(art.ok());
  CHECK(art.error().code == ErrorCode::InvalidInput);
  const std::string& msg = art.error().message;
  CHECK(msg.find("llvm: @chain generates ") == 0);
  CHECK(msg.find(" LLVM instructions, over the llvm target's budget of 100 (llvm.max_instructions; ") !=
        std::string::npos);
  CHECK(msg.find("raise it with --target-options llvm.max_instructions=N") != std::string::npos);
  // The default budget compiles it; a bad value is an option error.
  CHECK(target->compile(*m, "chain", targets::CompileOptions{}).ok());
  CHECK(targets::llvmjit::kDefaultMaxInstructions == std::uint64_t{1} << 15);
  for (const char* bad : {"0", "-1", "x", "1e6", ""}) {
    auto r = target->parse_options(targets::TargetOptions{{{"max_instructions", bad}}});
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message == std::string("llvm.max_instructions is a positive integer (LLVM instructions), not '") +
                                   bad + "'");
  }
}

TEST_CASE("reference: the interpreter's budgets are its options max_steps and max_work, named in their errors "
          "(issue 33 item 18)") {
  auto m = ir::parse_module(R"(func @spin(%x: f32[8, 8]) -> f32[8, 8] {
^entry:
  br ^loop(%x)
^loop(%a: f32[8, 8]):
  %b = matmul %a, %x : f32[8, 8]
  %c = const {value = 1} : bool[]
  cond_br %c, ^loop(%b), ^done(%b)
^done(%r: f32[8, 8]):
  ret %r
}
)", "spin.tir");
  REQUIRE(m.ok());
  auto target = targets::make_reference_target();
  auto run = [&](const std::map<std::string, std::string>& options) -> std::string {
    targets::CompileOptions o;
    o.target.values = options;
    auto parsed = target->parse_options(o.target);
    if (!parsed.ok()) return parsed.error().message;
    auto art = target->compile(*m, "spin", o);
    REQUIRE(art.ok());
    ir::ParamValues params;
    targets::LoadContext context;
    context.params = &params;
    context.options = o.target;
    auto k = target->load(*art, context);
    REQUIRE(k.ok());
    std::vector<std::uint8_t> in(8 * 8 * 4), out(8 * 8 * 4);
    void* buffers[] = {in.data(), out.data()};
    auto r = k->run(k->state, buffers);
    return r.ok() ? "(ok)" : r.error().message;
  };
  CHECK(run({{"max_work", "5000"}}).find("execution exceeded the interpreter's work limit of 5000 element operations "
                                         "at 'matmul' in @spin (a long loop of large ops?): raise the reference "
                                         "target's option max_work (--target-options reference.max_work=N)") !=
        std::string::npos);
  CHECK(run({{"max_steps", "50"}}).find("execution exceeded 50 instructions (an infinite loop?) in @spin: raise the "
                                        "reference target's option max_steps (--target-options "
                                        "reference.max_steps=N)") != std::string::npos);
  // The defaults stop it too (interpret.h: 2^31 element operations, seconds).
  CHECK(run({}).find("work limit of 2147483648 element operations") != std::string::npos);
  CHECK(run({{"max_work", "0"}}) == "reference.max_work is a positive integer (a count of element operations), not '0'");
  CHECK(run({{"max_steps", "many"}}) == "reference.max_steps is a positive integer (a count of instructions), not 'many'");
  CHECK(run({{"anything", "1"}}) == "the reference target has no option 'anything' (it takes max_steps, max_work)");
}

}  // namespace
}  // namespace ternjit
