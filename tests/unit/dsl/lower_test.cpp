// SPDX-License-Identifier: Apache-2.0
// lower_test.cpp - lowering of .tri layers to IR: params, signatures, ops, calls, numerics.
#include "ir/dsl/dsl.h"

#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "ir/interpret.h"
#include "ir/parse.h"
#include "ir/print.h"
#include "ir/verify.h"

namespace ternjit::dsl {
namespace {

namespace fs = std::filesystem;

std::string read_tri(const std::string& name) {
  std::ifstream in(fs::path(TERNJIT_SOURCE_DIR) / "tests/dsl" / name, std::ios::binary);
  REQUIRE_MESSAGE(in.good(), "cannot open tests/dsl/" << name);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Compiles, requires success and a module the verifier accepts.
ir::Module compile_ok(const std::string& source, const std::string& name) {
  auto r = compile_tri(source, name);
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? std::string() : render(r.error())));
  auto problems = ir::verify_module(*r);
  for (const Diagnostic& d : problems) FAIL_CHECK(render(d));
  return std::move(r).value();
}

const ir::Function& func(const ir::Module& m, std::string_view name) {
  const ir::Function* f = m.find_function(name);
  REQUIRE_MESSAGE(f != nullptr, "no function " << name);
  return *f;
}

// The ops of a function's entry block, in order.
std::vector<ir::Op> ops(const ir::Function& f) {
  std::vector<ir::Op> out;
  for (ir::InstId i : f.insts(f.entry())) out.push_back(f.inst(i).op);
  return out;
}

// The first instruction with op `op`.
const ir::InstData& first(const ir::Function& f, ir::Op op) {
  for (ir::InstId i : f.insts(f.entry()))
    if (f.inst(i).op == op) return f.inst(i);
  FAIL("no '" << ir::op_name(op) << "' in @" << f.name());
  return f.inst(f.insts(f.entry()).front());
}

std::string ty(const ir::Function& f, ir::ValueId v) { return ir::type_str(f.type_of(v), f.symbols()); }

TEST_CASE("lower: the predecessor's LinearClassifier, verbatim") {
  const std::string src = read_tri("linear_classifier.tri");
  // The file holds the predecessor's example as written.
  CHECK(src.find("layer LinearClassifier {\n"
                 "    param weights: TernaryTensor[784, 10]\n"
                 "    param bias: Tensor[10]\n"
                 "\n"
                 "    fn forward(x: Tensor[N, 784]) -> Tensor[N, 10] {\n"
                 "        return x @ weights + bias\n"
                 "    }\n"
                 "}\n") != std::string::npos);
  ir::Module m = compile_ok(src, "linear_classifier.tri");

  REQUIRE(m.params().size() == 2);
  CHECK(m.params()[0].name == "LinearClassifier.weights");
  CHECK(ir::type_str(m.params()[0].type, m.params()[0].symbols) == "t2[784, 10]");
  CHECK(m.params()[0].symbols.empty());
  CHECK(m.params()[0].loc.line == 4);
  CHECK(m.params()[0].loc.col == 11);
  CHECK(m.params()[1].name == "LinearClassifier.bias");
  CHECK(ir::type_str(m.params()[1].type, m.params()[1].symbols) == "f32[10]");

  REQUIRE(m.functions().size() == 1);
  const ir::Function& f = m.functions()[0];
  CHECK(f.name() == "LinearClassifier.forward");
  CHECK(f.symbols() == std::vector<std::string>{"N"});
  REQUIRE(f.args().size() == 1);
  CHECK(f.value(f.args()[0]).name == "x");
  CHECK(ty(f, f.args()[0]) == "f32[N, 784]");
  REQUIRE(f.result_types().size() == 1);
  CHECK(ir::type_str(f.result_types()[0], f.symbols()) == "f32[N, 10]");
  using ir::Op;
  CHECK(ops(f) == std::vector<Op>{Op::Param, Op::MatMul, Op::Param, Op::Add, Op::Ret});
  const ir::InstData& mm = first(f, Op::MatMul);
  CHECK(mm.operands[0] == f.args()[0]);
  CHECK(std::get<ir::ParamAttrs>(f.inst(f.value(mm.operands[1]).inst).attrs).name ==
        "LinearClassifier.weights");
  CHECK(ty(f, mm.results[0]) == "f32[N, 10]");
  CHECK(mm.loc.file == "linear_classifier.tri");
  CHECK(mm.loc.line == 8);
  CHECK(mm.loc.col == 18);  // the '@'

  CHECK(ir::print_module(m) ==
        "param @LinearClassifier.weights : t2[784, 10]\n"
        "param @LinearClassifier.bias : f32[10]\n"
        "\n"
        "func @LinearClassifier.forward<N>(%x: f32[N, 784]) -> f32[N, 10] {\n"
        "^entry:\n"
        "  %0 = param @LinearClassifier.weights : t2[784, 10]\n"
        "  %1 = matmul %x, %0 : f32[N, 10]\n"
        "  %2 = param @LinearClassifier.bias : f32[10]\n"
        "  %3 = add %1, %2 : f32[N, 10]\n"
        "  ret %3\n"
        "}\n");
}

TEST_CASE("lower: LinearClassifier computes x @ W + b on the interpreter") {
  ir::Module m = compile_ok(read_tri("linear_classifier.tri"), "linear_classifier.tri");
  const std::int64_t n = 2, k = 784, c = 10;
  std::vector<double> x(n * k), w(k * c), b(c);
  for (std::int64_t i = 0; i < n * k; ++i) x[i] = std::sin(0.37 * static_cast<double>(i));
  for (std::int64_t i = 0; i < k * c; ++i) w[i] = static_cast<double>((i * 7 + 3) % 3) - 1.0;
  for (std::int64_t i = 0; i < c; ++i) b[i] = 0.25 * static_cast<double>(i) - 1.0;
  std::vector<ir::HostTensor> args{ir::HostTensor::from_values(ElemKind::F32, {n, k}, x)};
  ir::ParamValues params;
  params.set("LinearClassifier.weights", ir::HostTensor::from_values(ElemKind::T2, {k, c}, w));
  params.set("LinearClassifier.bias", ir::HostTensor::from_values(ElemKind::F32, {c}, b));
  auto out = ir::interpret(m, "LinearClassifier.forward", args, params);
  REQUIRE_MESSAGE(out.ok(), (out.ok() ? std::string() : render(out.error())));
  REQUIRE(out->size() == 1);
  const ir::HostTensor& y = (*out)[0];
  CHECK(y.shape == std::vector<std::int64_t>{n, c});
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t j = 0; j < c; ++j) {
      double acc = 0;
      for (std::int64_t i = 0; i < k; ++i)
        acc += static_cast<double>(static_cast<float>(args[0].data[r * k + i])) * w[i * c + j];
      CHECK(y.data[r * c + j] == doctest::Approx(acc + b[j]).epsilon(1e-5));
    }
}

TEST_CASE("lower: BitLinear (rmsnorm, quantize_int8, ternary matmul, scale, relu)") {
  ir::Module m = compile_ok(read_tri("bitlinear.tri"), "bitlinear.tri");
  REQUIRE(m.params().size() == 3);
  CHECK(m.params()[0].symbols == std::vector<std::string>{"K"});
  CHECK(m.params()[1].symbols == std::vector<std::string>{"K", "N"});
  CHECK(ir::type_str(m.params()[1].type, m.params()[1].symbols) == "t2[K, N]");
  CHECK(m.params()[2].symbols == std::vector<std::string>{"N"});
  const ir::Function& f = func(m, "BitLinear.forward");
  // Signature first (x: [M, K], then the result's N).
  CHECK(f.symbols() == std::vector<std::string>{"M", "K", "N"});
  using ir::Op;
  CHECK(ops(f) == std::vector<Op>{Op::Param, Op::RmsNorm, Op::QuantizeInt8, Op::Param, Op::MatMul,
                                  Op::Param, Op::Mul, Op::Relu, Op::Ret});
  const ir::InstData& norm = first(f, Op::RmsNorm);
  CHECK(std::get<ir::EpsAttrs>(norm.attrs).eps == 1e-5);
  CHECK(f.value(norm.results[0]).name == "h");
  CHECK(f.value(first(f, Op::QuantizeInt8).results[0]).name == "q");
  const ir::InstData& mm = first(f, Op::MatMul);
  CHECK(f.value(mm.results[0]).name == "y");
  CHECK(ty(f, mm.results[0]) == "f32[M, N]");  // float @ t2 -> f32
  CHECK(ir::print_function(&m, f) ==
        "func @BitLinear.forward<M, K, N>(%x: f32[M, K]) -> f32[M, N] {\n"
        "^entry:\n"
        "  %0 = param @BitLinear.gamma : f32[K]\n"
        "  %h = rmsnorm %x, %0 {eps = 1e-05} : f32[M, K]\n"
        "  %q = quantize_int8 %h : f32[M, K]\n"
        "  %1 = param @BitLinear.w : t2[K, N]\n"
        "  %y = matmul %q, %1 : f32[M, N]\n"
        "  %2 = param @BitLinear.w_scale : f32[N]\n"
        "  %3 = mul %y, %2 : f32[M, N]\n"
        "  %4 = relu %3 : f32[M, N]\n"
        "  ret %4\n"
        "}\n");
}

// Deterministic pseudo-random values in [-1, 1).
std::vector<double> values(std::size_t n, double seed) {
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = std::fmod(std::abs(std::sin(seed + 1.7 * static_cast<double>(i)) * 977.0), 2.0) - 1.0;
  return v;
}

TEST_CASE("lower: MLP composition calls BitLinear.forward twice with different bindings") {
  ir::Module m = compile_ok(read_tri("mlp_composition.tri"), "mlp_composition.tri");
  CHECK(m.functions().size() == 2);
  const ir::ParamDecl* w_out = m.find_param("MLP.w_out");
  REQUIRE(w_out != nullptr);
  CHECK(w_out->symbols == std::vector<std::string>{"BitLinear.N"});
  const ir::Function& f = func(m, "MLP.forward");
  CHECK(f.symbols() == std::vector<std::string>{"B", "K", "T", "BitLinear.N"});
  std::vector<const ir::InstData*> calls;
  for (ir::InstId i : f.insts(f.entry()))
    if (f.inst(i).op == ir::Op::Call) calls.push_back(&f.inst(i));
  REQUIRE(calls.size() == 2);
  for (const ir::InstData* c : calls) CHECK(std::get<ir::CallAttrs>(c->attrs).callee == "BitLinear.forward");
  // M binds to B in the first call and to T in the second; N is the callee's.
  CHECK(ty(f, calls[0]->results[0]) == "f32[B, BitLinear.N]");
  CHECK(ty(f, calls[1]->results[0]) == "f32[T, BitLinear.N]");
  CHECK(f.value(calls[0]->results[0]).name == "hx");
  CHECK(f.value(calls[1]->results[0]).name == "hc");
  CHECK(calls[0]->operands[0] == f.args()[0]);
  CHECK(calls[1]->operands[0] == f.args()[1]);

  // Run it: the composition must equal the callee's outputs combined by hand.
  const std::int64_t B = 2, T = 3, K = 8, N = 4, C = 10;
  ir::ParamValues params;
  params.set("BitLinear.gamma", ir::HostTensor::from_values(ElemKind::F32, {K}, values(K, 1.0)));
  std::vector<double> w = values(K * N, 2.0);
  for (double& v : w) v = std::round(v);
  params.set("BitLinear.w", ir::HostTensor::from_values(ElemKind::T2, {K, N}, w));
  params.set("BitLinear.w_scale", ir::HostTensor::from_values(ElemKind::F32, {N}, values(N, 3.0)));
  std::vector<double> wo = values(N * C, 4.0);
  params.set("MLP.w_out", ir::HostTensor::from_values(ElemKind::F32, {N, C}, wo));
  ir::HostTensor x = ir::HostTensor::from_values(ElemKind::F32, {B, K}, values(B * K, 5.0));
  ir::HostTensor ctx = ir::HostTensor::from_values(ElemKind::F32, {T, K}, values(T * K, 6.0));

  auto out = ir::interpret(m, "MLP.forward", std::vector<ir::HostTensor>{x, ctx}, params);
  REQUIRE_MESSAGE(out.ok(), (out.ok() ? std::string() : render(out.error())));
  auto hx = ir::interpret(m, "BitLinear.forward", std::vector<ir::HostTensor>{x}, params);
  auto hc = ir::interpret(m, "BitLinear.forward", std::vector<ir::HostTensor>{ctx}, params);
  REQUIRE(hx.ok());
  REQUIRE(hc.ok());
  const auto& a = (*hx)[0].data;  // [B, N]
  const auto& c = (*hc)[0].data;  // [T, N]
  const ir::HostTensor& y = (*out)[0];
  REQUIRE(y.shape == std::vector<std::int64_t>{B, C});
  for (std::int64_t r = 0; r < B; ++r) {
    std::vector<double> s(T);
    double mx = -1e300, sum = 0;
    for (std::int64_t t = 0; t < T; ++t) {
      for (std::int64_t n = 0; n < N; ++n) s[t] += a[r * N + n] * c[t * N + n];
      mx = std::max(mx, s[t]);
    }
    for (double& v : s) sum += (v = std::exp(v - mx));
    for (double& v : s) v /= sum;
    for (std::int64_t j = 0; j < C; ++j) {
      double acc = 0;
      for (std::int64_t n = 0; n < N; ++n) {
        double mix = 0;
        for (std::int64_t t = 0; t < T; ++t) mix += s[t] * c[t * N + n];
        acc += mix * static_cast<double>(static_cast<float>(wo[n * C + j]));
      }
      CHECK(y.data[r * C + j] == doctest::Approx(acc).epsilon(1e-4));
    }
  }
}

TEST_CASE("lower: several layers, calls across the file and within a layer") {
  ir::Module m = compile_ok(read_tri("several_layers.tri"), "several_layers.tri");
  std::vector<std::string> names;
  for (const ir::Function& f : m.functions()) names.push_back(f.name());
  CHECK(names == std::vector<std::string>{"Head.forward", "Head.probs", "Body.forward"});
  std::vector<std::string> params;
  for (const ir::ParamDecl& p : m.params()) params.push_back(p.name);
  CHECK(params == std::vector<std::string>{"Head.proj", "Head.scale", "Body.w", "Body.b"});
  CHECK(ir::type_str(m.find_param("Head.scale")->type, {}) == "f32[]");
  CHECK(ir::type_str(m.find_param("Body.b")->type, {}) == "f16[64]");

  const ir::Function& head = func(m, "Head.forward");
  CHECK(std::get<ir::CallAttrs>(first(head, ir::Op::Call).attrs).callee == "Body.forward");  // defined later
  CHECK(ty(head, first(head, ir::Op::Call).results[0]) == "f32[N, 64]");
  const ir::Function& probs = func(m, "Head.probs");
  CHECK(std::get<ir::CallAttrs>(first(probs, ir::Op::Call).attrs).callee == "Head.forward");  // own layer
  CHECK(std::get<ir::AxisAttrs>(first(probs, ir::Op::Softmax).attrs).axis == 1);

  // `let eps = 0.001` stays a literal, and `1.0 - eps` folds to one f32 const.
  const ir::Function& body = func(m, "Body.forward");
  using ir::Op;
  CHECK(ops(body) == std::vector<Op>{Op::Param, Op::MatMul, Op::Param, Op::Cast, Op::Add, Op::Const,
                                     Op::Mul, Op::Ret});
  const ir::InstData& c = first(body, Op::Const);
  CHECK(ty(body, c.results[0]) == "f32[]");
  CHECK(std::get<ir::ConstAttrs>(c.attrs).values == std::vector<double>{static_cast<float>(0.999)});
}

TEST_CASE("lower: literal arithmetic folds; literals take the kind they meet") {
  ir::Module m = compile_ok(
      "layer L {\n"
      "  fn f(x: Tensor<f16>[4], q: Tensor<i8>[4]) -> Tensor<f16>[4] {\n"
      "    let half = 1 / 2\n"        // true division: 0.5
      "    let three = 1 + 2\n"       // stays an integer
      "    let a = x * half - -three\n"
      "    let b = q * three * 2\n"
      "    return a + cast<f16>(b)\n"
      "  }\n"
      "  fn g() -> Tensor[] {\n"
      "    return sqrt(4)\n"          // a literal alone is an f32 scalar
      "  }\n"
      "  fn h() -> Tensor<i32>[] {\n"
      "    return 2 * 3\n"            // a returned literal takes the declared kind
      "  }\n"
      "}\n",
      "fold.tri");
  auto consts = [&](const ir::Function& f) {
    std::vector<std::string> out;
    for (ir::InstId i : f.insts(f.entry()))
      if (f.inst(i).op == ir::Op::Const)
        out.push_back(ty(f, f.inst(i).results[0]) + "=" +
                      ir::format_double(std::get<ir::ConstAttrs>(f.inst(i).attrs).values.at(0)));
    return out;
  };
  CHECK(consts(func(m, "L.f")) == std::vector<std::string>{"f16[]=0.5", "f16[]=-3", "i8[]=3", "i8[]=2"});
  CHECK(consts(func(m, "L.g")) == std::vector<std::string>{"f32[]=4"});
  CHECK(consts(func(m, "L.h")) == std::vector<std::string>{"i32[]=6"});
  CHECK(ops(func(m, "L.h")) == std::vector<ir::Op>{ir::Op::Const, ir::Op::Ret});
}

TEST_CASE("lower: every built-in maps to its op with the right attributes") {
  ir::Module m = compile_ok(read_tri("all_builtins.tri"), "all_builtins.tri");
  using ir::Op;
  const ir::Function& un = func(m, "Builtins.unary");
  for (Op op : {Op::Relu, Op::Sigmoid, Op::Tanh, Op::Gelu, Op::Silu, Op::Exp, Op::Sqrt, Op::Log,
                Op::Abs, Op::Rsqrt, Op::Neg, Op::Add, Op::Sub, Op::Mul, Op::Div})
    CHECK_MESSAGE(ty(un, first(un, op).results[0]) == "f32[R, D]", ir::op_name(op));

  const ir::Function& ax = func(m, "Builtins.axes");
  CHECK(std::get<ir::AxisAttrs>(first(ax, Op::Softmax).attrs).axis == 1);  // -1 of rank 2
  CHECK(std::get<ir::AxisAttrs>(first(ax, Op::ReduceSum).attrs) == ir::AxisAttrs{1, false});
  CHECK(std::get<ir::AxisAttrs>(first(ax, Op::ReduceMean).attrs) == ir::AxisAttrs{1, false});
  CHECK(std::get<ir::AxisAttrs>(first(ax, Op::ReduceMax).attrs) == ir::AxisAttrs{0, false});
  CHECK(ty(ax, first(ax, Op::ReduceMax).results[0]) == "f32[R]");
  CHECK(std::get<ir::PermAttrs>(first(ax, Op::Transpose).attrs).perm == std::vector<std::int64_t>{1, 0});
  CHECK(ty(ax, first(ax, Op::Transpose).results[0]) == "f32[D, R]");

  const ir::Function& qu = func(m, "Builtins.quant");
  CHECK(std::get<ir::EpsAttrs>(first(qu, Op::RmsNorm).attrs).eps == 0.00001);
  CHECK(std::get<ir::ThresholdAttrs>(first(qu, Op::Ternarize).attrs).threshold == 0.5);
  CHECK(ty(qu, first(qu, Op::TernarizeAbsmean).results[0]) == "f32[R, D]");
  CHECK(ty(qu, first(qu, Op::QuantizeInt8).results[0]) == "f32[R, D]");
  CHECK(std::get<ir::CastAttrs>(first(qu, Op::Cast).attrs).to == ElemKind::I8);
  CHECK(ty(qu, first(qu, Op::Cast).results[0]) == "i8[R, D]");
  // dequantize(iq, s) is one op; dequantize(q) of a float is q itself.
  int dequantize_count = 0;
  for (ir::InstId i : qu.insts(qu.entry())) dequantize_count += qu.inst(i).op == Op::Dequantize;
  CHECK(dequantize_count == 1);
  CHECK(ty(qu, first(qu, Op::Dequantize).results[0]) == "f32[R, D]");
  CHECK(ty(qu, first(qu, Op::Max).results[0]) == "f32[R, D]");
  CHECK(ty(qu, first(qu, Op::Min).results[0]) == "f32[R, D]");
  CHECK(ty(qu, first(qu, Op::MatMul).results[0]) == "f32[R, D]");

  // Literals take the other operand's kind: i8 for `a * 2`, f16 for `h * 0.5`, and
  // i32 next to a t2 operand.
  const ir::Function& ki = func(m, "Builtins.kinds");
  std::vector<std::string> const_types;
  std::vector<double> const_values;
  for (ir::InstId i : ki.insts(ki.entry()))
    if (ki.inst(i).op == Op::Const) {
      const_types.push_back(ty(ki, ki.inst(i).results[0]));
      const_values.push_back(std::get<ir::ConstAttrs>(ki.inst(i).attrs).values.at(0));
    }
  CHECK(const_types == std::vector<std::string>{"i8[]", "f16[]", "i32[]", "f32[]"});
  CHECK(const_values == std::vector<double>{2, 0.5, -1, 3});
  CHECK(ty(ki, ki.args()[0]) == "i8[D]");
  CHECK(ty(ki, ki.args()[1]) == "f16[D]");
  CHECK(ty(ki, ki.args()[2]) == "bf16[D]");
  CHECK(ty(ki, ki.args()[3]) == "i32[]");
  std::vector<ElemKind> casts;
  for (ir::InstId i : ki.insts(ki.entry()))
    if (ki.inst(i).op == Op::Cast) casts.push_back(std::get<ir::CastAttrs>(ki.inst(i).attrs).to);
  CHECK(casts == std::vector<ElemKind>{ElemKind::T2, ElemKind::F32, ElemKind::F32, ElemKind::F32,
                                       ElemKind::BF16, ElemKind::F32});
}

TEST_CASE("lower: symbols are per layer, ordered by signature then body") {
  ir::Module m = compile_ok(
      "layer L {\n"
      "  param w: Tensor[K, P]\n"
      "  param s: Tensor[Q]\n"
      "  fn f(x: Tensor[M, K]) -> Tensor[M, P] {\n"
      "    let t = sum(s, 0)\n"          // brings in Q (body), after P (signature)
      "    return x @ w * t\n"
      "  }\n"
      "  fn g(x: Tensor[L.K]) -> Tensor[K] {\n"  // L.K inside L is plain K
      "    return x\n"
      "  }\n"
      "}\n",
      "sym.tri");
  CHECK(func(m, "L.f").symbols() == std::vector<std::string>{"M", "K", "P", "Q"});
  CHECK(func(m, "L.g").symbols() == std::vector<std::string>{"K"});
}

TEST_CASE("lower: a let of a name is another name for the same value") {
  ir::Module m = compile_ok(
      "layer L {\n"
      "  fn f(x: Tensor[4]) -> Tensor[4] {\n"
      "    let a = x\n"
      "    let b = a + 1\n"
      "    return b\n"
      "  }\n"
      "}\n",
      "alias.tri");
  const ir::Function& f = func(m, "L.f");
  CHECK(f.value(f.args()[0]).name == "x");
  CHECK(first(f, ir::Op::Add).operands[0] == f.args()[0]);
  CHECK(f.value(first(f, ir::Op::Add).results[0]).name == "b");
}

TEST_CASE("lower: the printed IR of every valid tests/dsl file parses back identically") {
  for (const char* name : {"linear_classifier.tri", "bitlinear.tri", "mlp_composition.tri",
                           "all_builtins.tri", "several_layers.tri"}) {
    INFO(name);
    ir::Module m = compile_ok(read_tri(name), name);
    std::string text = ir::print_module(m);
    auto back = ir::parse_module(text, "printed.tir");
    REQUIRE_MESSAGE(back.ok(), (back.ok() ? std::string() : render(back.error())));
    CHECK(ir::print_module(*back) == text);
    // Lowering is deterministic.
    CHECK(ir::print_module(compile_ok(read_tri(name), name)) == text);
  }
}

TEST_CASE("parse_tri: the tree of a valid file, and filled-in errors of a broken one") {
  auto r = parse_tri(read_tri("mlp_composition.tri"), "mlp_composition.tri");
  REQUIRE(r.ok());
  REQUIRE(r->layers.size() == 2);
  CHECK(r->layers[1].name == "MLP");
  CHECK(r->layers[1].params[0].type->dims[0].symbol == "BitLinear.N");

  auto bad = parse_tri("layer {\n}\n", "bad.tri");
  REQUIRE_FALSE(bad.ok());
  REQUIRE(bad.error().diagnostics.size() == 1);
  CHECK(bad.error().diagnostics[0].message == "expected a layer name after 'layer', got '{'");
  CHECK(bad.error().diagnostics[0].source_line == "layer {");
  CHECK(bad.error().diagnostics[0].loc.col == 7);
}

TEST_CASE("compile_tri: an empty file is an empty module") {
  ir::Module m = compile_ok("// nothing here\n", "empty.tri");
  CHECK(m.functions().empty());
  CHECK(m.params().empty());
}

}  // namespace
}  // namespace ternjit::dsl
