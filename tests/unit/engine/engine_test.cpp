// SPDX-License-Identifier: Apache-2.0
// engine_test.cpp - compile, bind (buffers, packed formats, safetensors, seeds) and run vs the interpreter.
#include <doctest/doctest.h>

#include "ir/numeric.h"
#include "formats/safetensors.h"
#include "formats/ternary.h"
#include "tests/unit/engine/engine_testing.h"

namespace ternjit {
namespace {

using testing::BitLinearWeights;
using testing::error_of;
using testing::view;

constexpr std::int64_t kM = 4, kK = 64, kN = 16;

// Runs BitLinear.forward through the program and returns y[M, N].
std::vector<float> run_layer(Program& p, std::vector<float>& x, std::int64_t M, std::int64_t K, std::int64_t N) {
  std::vector<float> y(static_cast<std::size_t>(M * N), -7.0f);
  TensorView in[] = {view(x, {M, K})};
  TensorView out[] = {view(y, {M, N})};
  auto r = p.run("BitLinear.forward", in, out);
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
  return y;
}

TEST_CASE("BitLinear: compile, bind buffers, run; bit-exact against the interpreter") {
  Engine e = testing::reference_engine();
  Program p = testing::bitlinear(e);
  BitLinearWeights w(kK, kN, 11);
  w.bind(p);
  std::vector<float> x = testing::random_f32(kM * kK, 5);
  std::vector<float> y = run_layer(p, x, kM, kK, kN);
  CHECK(testing::bit_equal(y, testing::oracle(w.params(), x, kM, kK)));
  // And close to the layer as written, before fusion into an int8 tmatmul.
  CHECK(testing::close(testing::oracle(w.params(), x, kM, kK, std::nullopt), y));
  // The layer is not trivially zero (relu of random data keeps about half).
  int nonzero = 0;
  for (float v : y) nonzero += v != 0;
  CHECK(nonzero > 0);
}

TEST_CASE("every optimization level gives the interpreter's result") {
  BitLinearWeights w(kK, kN, 3);
  std::vector<float> x = testing::random_f32(kM * kK, 4);
  const std::vector<float> unoptimized = testing::oracle(w.params(), x, kM, kK, std::nullopt);
  for (int level = 0; level <= 3; ++level) {
    EngineOptions o;
    o.target = "reference";
    o.opt_level = level;
    Engine e = testing::reference_engine(o);
    Program p = testing::bitlinear(e);
    w.bind(p);
    CAPTURE(level);
    std::vector<float> y = run_layer(p, x, kM, kK, kN);
    CHECK(testing::bit_equal(y, testing::oracle(w.params(), x, kM, kK, level)));
    CHECK(testing::close(unoptimized, y));
    if (level < 2) CHECK(testing::bit_equal(y, unoptimized));  // no int8 fusion below O2
  }
}

TEST_CASE("the KernelFn entry called with raw buffers gives run()'s output") {
  Engine e = testing::reference_engine();
  Program p = testing::bitlinear(e);
  BitLinearWeights w(kK, kN, 21);
  w.bind(p);
  std::vector<float> x = testing::random_f32(kM * kK, 22);
  TensorView in[] = {view(x, {kM, kK})};
  auto k = p.kernel("BitLinear.forward", in);
  REQUIRE(k.ok());
  REQUIRE((*k)->outputs().size() == 1);
  CHECK((*k)->outputs()[0].kind == ElemKind::F32);
  CHECK((*k)->outputs()[0].shape == std::vector<std::int64_t>{kM, kN});

  std::vector<float> direct(static_cast<std::size_t>(kM * kN), -1.0f);
  void* buffers[] = {x.data(), direct.data()};
  KernelFn fn = (*k)->entry();
  REQUIRE(static_cast<bool>(fn));
  CHECK(fn((*k)->state(), buffers) == 0);
  CHECK(testing::bit_equal(direct, run_layer(p, x, kM, kK, kN)));
  CHECK(testing::bit_equal(direct, testing::oracle(w.params(), x, kM, kK)));
}

TEST_CASE("bind: every packed ternary format and an i8 buffer give the plain result") {
  BitLinearWeights w(kK, kN, 31);
  std::vector<float> x = testing::random_f32(kM * kK, 32);
  const std::vector<float> want = testing::oracle(w.params(), x, kM, kK);
  Engine e = testing::reference_engine();
  for (WeightFormat format : formats::kPackedFormats) {
    CAPTURE(weight_format_name(format));
    Program p = testing::bitlinear(e);
    w.bind(p);  // plain first; the packed bind replaces w
    auto packed = formats::pack_ternary(format, w.w);
    REQUIRE(packed.ok());
    auto r = p.bind("BitLinear.w", view(*packed, {kK, kN}), format);
    REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
    CHECK(testing::bit_equal(run_layer(p, x, kM, kK, kN), want));
  }
  Program p = testing::bitlinear(e);
  w.bind(p);
  REQUIRE(p.bind("BitLinear.w", view(w.w, {kK, kN}, ElemKind::I8)).ok());
  CHECK(testing::bit_equal(run_layer(p, x, kM, kK, kN), want));
}

TEST_CASE("bind: a bf16 buffer for an f32 parameter is taken by value") {
  BitLinearWeights w(kK, kN, 41);
  // gamma rounded to bf16, as bits; the oracle gets the same rounded values.
  std::vector<std::uint16_t> bits;
  for (float& g : w.gamma) {
    bits.push_back(ir::f32_to_bf16_bits(g));
    g = ir::bf16_bits_to_f32(bits.back());
  }
  Engine e = testing::reference_engine();
  Program p = testing::bitlinear(e);
  w.bind(p);
  REQUIRE(p.bind("BitLinear.gamma", TensorView{bits.data(), ElemKind::BF16, {kK}}).ok());
  std::vector<float> x = testing::random_f32(kM * kK, 42);
  CHECK(testing::bit_equal(run_layer(p, x, kM, kK, kN), testing::oracle(w.params(), x, kM, kK)));
}

TEST_CASE("bind_file: safetensors with full and short names, packed with and without a shape entry") {
  testing::TempDir dir;
  BitLinearWeights w(kK, kN, 51);
  std::vector<float> x = testing::random_f32(kM * kK, 52);
  const std::vector<float> want = testing::oracle(w.params(), x, kM, kK);
  auto packed = formats::pack_ternary(WeightFormat::Tern16, w.w);
  REQUIRE(packed.ok());
  for (bool with_shape : {false, true}) {
    CAPTURE(with_shape);
    formats::StFile f;
    f.tensors.push_back(formats::make_f32_tensor("gamma", {kK}, w.gamma));  // short name
    f.tensors.push_back(formats::make_u8_tensor("BitLinear.w", {static_cast<std::int64_t>(packed->size())}, *packed));
    f.tensors.push_back(formats::make_f32_tensor("BitLinear.w_scale", {kN}, w.w_scale));
    f.tensors.push_back(formats::make_f32_tensor("unrelated", {1}, std::vector<float>{1.0f}));
    f.metadata["BitLinear.w.format"] = "tern1.6";
    if (with_shape) f.metadata["BitLinear.w.shape"] = std::to_string(kK) + "," + std::to_string(kN);
    const std::string path = (dir.path / "weights.safetensors").string();
    REQUIRE(formats::write_safetensors(path, f).ok());

    Engine e = testing::reference_engine();
    Program p = testing::bitlinear(e);
    auto r = p.bind_file(path);
    REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
    CHECK(testing::bit_equal(run_layer(p, x, kM, kK, kN), want));
  }
}

TEST_CASE("bind_file: errors name the file and tensor") {
  testing::TempDir dir;
  Engine e = testing::reference_engine();
  Program p = testing::bitlinear(e);
  auto missing = p.bind_file((dir.path / "nope.safetensors").string());
  CHECK(missing.error().code == ErrorCode::NotFound);

  formats::StFile none;
  none.tensors.push_back(formats::make_f32_tensor("other", {2}, std::vector<float>{1, 2}));
  const std::string none_path = (dir.path / "none.safetensors").string();
  REQUIRE(formats::write_safetensors(none_path, none).ok());
  CHECK(error_of(p.bind_file(none_path)).find("holds none of the program's parameters") != std::string::npos);

  // A ternary parameter stored as i32 is refused (it needs i8 values, packed u8 bytes or
  // a float master weight, which is ternarized at load).
  formats::StFile wrong;
  wrong.tensors.push_back(formats::make_i32_tensor("w", {2, 2}, std::vector<std::int32_t>{1, 0, -1, 0}));
  const std::string wrong_path = (dir.path / "wrong.safetensors").string();
  REQUIRE(formats::write_safetensors(wrong_path, wrong).ok());
  std::string msg = error_of(p.bind_file(wrong_path));
  CHECK(msg.find("parameter 'BitLinear.w': tensor 'w' of " + wrong_path) != std::string::npos);
  CHECK(msg.find("is ternary") != std::string::npos);

  // A packed tensor whose logical shape nothing fixes.
  formats::StFile shapeless;
  std::vector<std::uint8_t> bytes(4, 0x55);
  shapeless.tensors.push_back(formats::make_u8_tensor("w", {4}, bytes));
  shapeless.metadata["w.format"] = "tern2";
  const std::string shapeless_path = (dir.path / "shapeless.safetensors").string();
  REQUIRE(formats::write_safetensors(shapeless_path, shapeless).ok());
  CHECK(error_of(p.bind_file(shapeless_path)).find("needs a 'w.shape' metadata entry") != std::string::npos);
}

TEST_CASE("bind_random: binds only the unbound parameters, deterministically") {
  BitLinearWeights w(kK, kN, 61);
  std::vector<float> x = testing::random_f32(kM * kK, 62);
  Engine e = testing::reference_engine();
  auto make = [&](std::uint64_t seed) {
    Program p = testing::bitlinear(e);
    REQUIRE(p.bind("BitLinear.gamma", view(w.gamma, {kK})).ok());
    REQUIRE(p.bind("BitLinear.w_scale", view(w.w_scale, {kN})).ok());
    auto r = p.bind_random(seed);
    REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
    return run_layer(p, x, kM, kK, kN);
  };
  std::vector<float> a = make(7), b = make(7), c = make(8);
  CHECK(testing::bit_equal(a, b));
  CHECK_FALSE(testing::bit_equal(a, c));

  // With the random w rebound to known values, gamma and w_scale are still the caller's.
  Program p = testing::bitlinear(e);
  REQUIRE(p.bind("BitLinear.gamma", view(w.gamma, {kK})).ok());
  REQUIRE(p.bind("BitLinear.w_scale", view(w.w_scale, {kN})).ok());
  REQUIRE(p.bind_random(9).ok());
  REQUIRE(p.bind("BitLinear.w", view(w.w, {kK, kN})).ok());
  CHECK(testing::bit_equal(run_layer(p, x, kM, kK, kN), testing::oracle(w.params(), x, kM, kK)));

  // Nothing fixes K and N on a fresh program: the error names the parameter and symbol.
  Program fresh = testing::bitlinear(e);
  std::string msg = error_of(fresh.bind_random(1));
  CHECK(msg.find("parameter 'BitLinear.gamma'") != std::string::npos);
  CHECK(msg.find("'K'") != std::string::npos);
}

TEST_CASE("a module made elsewhere compiles too") {
  auto m = Module::from_tri(testing::kBitLinear, "bitlinear.tri");
  REQUIRE(m.ok());
  Engine e = testing::reference_engine();
  auto p = e.compile(*m);
  REQUIRE(p.ok());
  BitLinearWeights w(kK, kN, 71);
  w.bind(*p);
  std::vector<float> x = testing::random_f32(2 * kK, 72);
  CHECK(testing::bit_equal(run_layer(*p, x, 2, kK, kN), testing::oracle(w.params(), x, 2, kK)));
}

TEST_CASE("errors: compile, binding and calls name what is wrong") {
  Engine e = testing::reference_engine();
  SUBCASE("a DSL error is located") {
    auto p = e.compile("layer L {\n  fn forward(x: Tensor[N]) -> Tensor[N] {\n    return nope(x)\n  }\n}\n", "bad.tri");
    REQUIRE_FALSE(p.ok());
    REQUIRE_FALSE(p.error().diagnostics.empty());
    CHECK(p.error().diagnostics[0].loc.file == "bad.tri");
    CHECK(p.error().diagnostics[0].loc.line == 3);
  }
  Program p = testing::bitlinear(e);
  BitLinearWeights w(kK, kN, 81);
  std::vector<float> x = testing::random_f32(kM * kK, 82);
  std::vector<float> y(static_cast<std::size_t>(kM * kN));

  SUBCASE("unknown parameter") {
    std::string msg = error_of(p.bind("BitLinear.v", view(w.gamma, {kK})));
    CHECK(msg.find("no parameter 'BitLinear.v'") != std::string::npos);
    CHECK(msg.find("BitLinear.w_scale") != std::string::npos);
  }
  SUBCASE("non-ternary value, named by index") {
    w.w[5] = 2;
    auto r = p.bind("BitLinear.w", view(w.w, {kK, kN}));
    std::string msg = error_of(r);
    CHECK(r.error().code == ErrorCode::InvalidInput);
    CHECK(msg.find("parameter 'BitLinear.w'") != std::string::npos);
    CHECK(msg.find("(byte 5) is 2") != std::string::npos);
  }
  SUBCASE("invalid packed code, named by element") {
    std::vector<std::uint8_t> bytes(formats::packed_size(WeightFormat::Tern2, kK * kN), 0x55);
    bytes[3] = 0xFF;
    std::string msg = error_of(p.bind("BitLinear.w", view(bytes, {kK, kN}), WeightFormat::Tern2));
    CHECK(msg.find("tern2 element 12") != std::string::npos);
  }
  SUBCASE("packed bytes for a float parameter, a wrong buffer kind, null data") {
    std::vector<std::uint8_t> bytes(16);
    CHECK(error_of(p.bind("BitLinear.gamma", view(bytes, {kK}), WeightFormat::Tern2)).find("only for ternary") !=
          std::string::npos);
    CHECK(error_of(p.bind("BitLinear.gamma", view(w.w, {kK}, ElemKind::I8))).find("declared f32[K] but the buffer is i8") !=
          std::string::npos);
    CHECK(error_of(p.bind("BitLinear.gamma", TensorView{nullptr, ElemKind::F32, {kK}})).find("null") !=
          std::string::npos);
  }
  SUBCASE("shapes: rank, and a symbol another parameter fixed") {
    CHECK(error_of(p.bind("BitLinear.gamma", view(w.gamma, {kK, 1}))).find("declared f32[K]") != std::string::npos);
    REQUIRE(p.bind("BitLinear.gamma", view(w.gamma, {kK})).ok());
    std::string msg = error_of(p.bind("BitLinear.w", view(w.w, {kK / 2, 2 * kN})));
    CHECK(msg.find("symbol 'K' is 32 there but 64 from parameter 'BitLinear.gamma'") != std::string::npos);
    // Rebinding gamma itself with another K is fine while nothing else fixed K.
    std::vector<float> g2(kK / 2, 1.0f);
    CHECK(p.bind("BitLinear.gamma", view(g2, {kK / 2})).ok());
  }
  SUBCASE("unbound weights name the parameter") {
    REQUIRE(p.bind("BitLinear.gamma", view(w.gamma, {kK})).ok());
    REQUIRE(p.bind("BitLinear.w_scale", view(w.w_scale, {kN})).ok());
    TensorView in[] = {view(x, {kM, kK})};
    std::string msg = error_of(p.kernel("BitLinear.forward", in));
    CHECK(msg == "parameter 'BitLinear.w' of 'BitLinear.forward' is not bound: call bind, bind_file or bind_random first");
  }
  SUBCASE("calls: unknown function, input count, kind, rank and shape") {
    w.bind(p);
    TensorView in[] = {view(x, {kM, kK})};
    TensorView out[] = {view(y, {kM, kN})};
    auto unknown = p.kernel("BitLinear.backward", in);
    CHECK(unknown.error().code == ErrorCode::NotFound);
    CHECK(unknown.error().message.find("no function 'BitLinear.backward'") != std::string::npos);
    CHECK(unknown.error().message.find("BitLinear.forward") != std::string::npos);

    TensorView two[] = {view(x, {kM, kK}), view(x, {kM, kK})};
    CHECK(error_of(p.run("BitLinear.forward", two, out)) == "'BitLinear.forward' takes 1 input, got 2");
    std::vector<std::uint16_t> half(x.size());
    TensorView f16[] = {TensorView{half.data(), ElemKind::F16, {kM, kK}}};
    CHECK(error_of(p.kernel("BitLinear.forward", f16)) ==
          "input 0 ('x') of 'BitLinear.forward' is f16 but is declared f32[M, K]");
    TensorView rank1[] = {view(x, {kM * kK})};
    CHECK(error_of(p.kernel("BitLinear.forward", rank1)).find("has shape [256] but is declared f32[M, K]") !=
          std::string::npos);
    TensorView narrow[] = {view(x, {2 * kM, kK / 2})};
    CHECK(error_of(p.kernel("BitLinear.forward", narrow)) ==
          "input 0 ('x') of 'BitLinear.forward' has shape [8, 32] (declared f32[M, K]): 'K' is 32 there but 64 from "
          "parameter 'BitLinear.gamma'");
  }
  SUBCASE("Kernel::run checks outputs and data") {
    w.bind(p);
    TensorView in[] = {view(x, {kM, kK})};
    auto k = p.kernel("BitLinear.forward", in);
    REQUIRE(k.ok());
    TensorView small[] = {view(y, {kM, kN / 2})};
    CHECK(error_of((*k)->run(in, small)) ==
          "output 0 of 'BitLinear.forward' is f32[4, 8] but the kernel was specialized for f32[4, 16]");
    TensorView other_in[] = {view(x, {kM / 2, kK})};
    TensorView out[] = {view(y, {kM, kN})};
    CHECK(error_of((*k)->run(other_in, out)).find("input 0 ('x')") != std::string::npos);
    TensorView null_out[] = {TensorView{nullptr, ElemKind::F32, {kM, kN}}};
    CHECK(error_of((*k)->run(in, null_out)).find("no data") != std::string::npos);
    std::vector<TensorView> none;
    CHECK(error_of((*k)->run(none, out)).find("takes 1 input, got 0") != std::string::npos);
  }
  SUBCASE("weights are frozen once a kernel exists") {
    w.bind(p);
    TensorView in[] = {view(x, {kM, kK})};
    REQUIRE(p.kernel("BitLinear.forward", in).ok());
    CHECK(error_of(p.bind("BitLinear.gamma", view(w.gamma, {kK}))).find("frozen") != std::string::npos);
    CHECK(error_of(p.bind_random(3)).find("frozen") != std::string::npos);
  }
}

TEST_CASE("a Program outlives its Engine") {
  std::optional<Program> p;
  BitLinearWeights w(kK, kN, 91);
  {
    Engine e = testing::reference_engine();
    p.emplace(testing::bitlinear(e));
  }
  w.bind(*p);
  std::vector<float> x = testing::random_f32(kM * kK, 92);
  CHECK(testing::bit_equal(run_layer(*p, x, kM, kK, kN), testing::oracle(w.params(), x, kM, kK)));
}

TEST_CASE("target options: each target validates its own; typos and contradictions are errors") {
  auto create_error = [](EngineOptions o) {
    o.cache_dir = "off";
    auto e = Engine::create(o);
    return e.ok() ? std::string() : e.error().message;
  };
  EngineOptions o;
  o.target = "reference";
  o.target_options = "x86.max_iza=avx2";
  CHECK(create_error(o).find("unknown x86 option 'max_iza'") != std::string::npos);
  o.target_options = "x86.max_isa=sse9";
  CHECK(create_error(o).find("unknown x86 ISA 'sse9'") != std::string::npos);
  o.target_options = "cuda9.arch=sm_90";
  CHECK(create_error(o).find("unknown target 'cuda9'") != std::string::npos);
  o.target_options = "max_isa=avx2";
  CHECK(create_error(o).find("does not name a target and an option") != std::string::npos);
  o.target_options = "llvm.cpu=znver4;llvm.cpu=znver3";
  CHECK(create_error(o).find("is given twice") != std::string::npos);
  o.target_options = "llvm.tripel=x";
  CHECK(create_error(o).find("unknown llvm option 'tripel'") != std::string::npos);
  o.target_options = "reference.anything=1";
  CHECK(create_error(o).find("the reference target has no option 'anything'") != std::string::npos);
  o.target_options = "x86.max_isa=avx512";
  o.max_isa = "avx2";  // the older field is shorthand for x86.max_isa: they must agree
  CHECK(create_error(o).find("contradicts") != std::string::npos);
  o.max_isa = "avx512";
  CHECK(create_error(o).empty());
  o = {};
  o.target = "reference";
  o.target_options = " x86.max_isa = avx2 ; llvm.cpu=generic ;";  // spaces and empty entries are fine
  CHECK(create_error(o).empty());
}

TEST_CASE("x86.max_isa reaches the x86 target: the kernel runs that code path") {
  EngineOptions o;
  o.target = "x86";
  o.cache_dir = "off";
  o.verbose = 1;
  std::vector<std::string> lines;
  o.trace = [&](std::string_view l) { lines.emplace_back(l); };
  o.target_options = "x86.max_isa=avx2";
  auto e = Engine::create(o);
  if (!e.ok()) {
    MESSAGE("skipped: " << e.error().message);
    return;
  }
  Program p = testing::bitlinear(*e);
  BitLinearWeights w(kK, kN, 5);
  w.bind(p);
  std::vector<float> x = testing::random_f32(kM * kK, 6);
  CHECK(testing::close(testing::oracle(w.params(), x, kM, kK), run_layer(p, x, kM, kK, kN)));
  bool seen = false;
  for (const std::string& l : lines) seen = seen || l.find(",specialize,miss,target=x86,isa=avx2,") != std::string::npos;
  CHECK(seen);
}

// Input shapes are the user's: element counts past 2^60 or tensors past the byte cap are
// errors before anything is allocated (they aborted, threw std::bad_alloc or
// std::length_error).
TEST_CASE("errors: input shapes too large for a tensor are refused before allocating") {
  Engine e = testing::reference_engine();
  auto p = e.compile("layer L {\n  fn forward(x: Tensor[M, K]) -> Tensor[K] {\n    return sum(relu(x), 0)\n  }\n}\n",
                     "big.tri");
  REQUIRE(p.ok());
  float dummy = 0;
  auto kernel_for = [&](std::vector<std::int64_t> shape) {
    TensorView in[] = {TensorView{&dummy, ElemKind::F32, std::move(shape)}};
    return p->kernel("L.forward", in);
  };
  SUBCASE("an empty input whose other extent makes the result too large") {
    auto k = kernel_for({0, (std::int64_t{1} << 62) + 1});
    REQUIRE_FALSE(k.ok());
    CHECK(k.error().code == ErrorCode::InvalidInput);
    CHECK(k.error().message.find("more than 2^60 elements") != std::string::npos);
  }
  SUBCASE("extents whose product overflows") {
    auto k = kernel_for({std::int64_t{1} << 32, std::int64_t{1} << 32});
    REQUIRE_FALSE(k.ok());
    CHECK(k.error().message.find("after binding, %x: type f32[4294967296, 4294967296] has more than 2^60 elements") !=
          std::string::npos);
  }
  SUBCASE("a tensor past the byte cap") {
    auto k = kernel_for({std::int64_t{1} << 40, 64});
    REQUIRE_FALSE(k.ok());
    CHECK(k.error().code == ErrorCode::InvalidArgument);
    CHECK(k.error().message.find("bytes: more than one tensor may take (1099511627776 bytes)") != std::string::npos);
  }
}

}  // namespace
}  // namespace ternjit
