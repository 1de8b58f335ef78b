// SPDX-License-Identifier: Apache-2.0
// aot_cases.cpp - writes the AArch64 AOT test cases: per case an object, its C header, inputs and the interpreter's outputs.
//
// Usage: llvm_aot_cases OUT_DIR [TRIPLE [CPU]]. Each case NAME gives NAME.o, NAME.h,
// NAME.in (inputs, concatenated) and NAME.want (the reference interpreter's outputs on
// the same module, concatenated); tests/llvm/aarch64_test.sh links NAME.o with
// driver.c, runs it under qemu-aarch64 and compares its outputs byte for byte.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "bitlinear_source.h"
#include "ir/dsl/dsl.h"
#include "ir/interpret.h"
#include "ir/parse.h"
#include "passes/pipeline.h"
#include "passes/specialize_shapes.h"
#include "targets/llvm/llvm_target.h"

namespace {

using namespace ternjit;

bool write(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return static_cast<bool>(f);
}

// Emits one case of function `fn` of the (specialized, optimized) module `m`.
bool emit_case(const std::string& dir, const std::string& name, const ir::Module& m, const std::string& fn,
               const std::vector<ir::HostTensor>& args, const ir::ParamValues& params, const std::string& triple,
               const std::string& cpu) {
  targets::llvmjit::EmitRequest r;
  r.triple = triple;
  r.cpu = cpu;
  r.params = &params;
  r.symbol = name;
  auto e = targets::llvmjit::emit(m, fn, r);
  if (!e.ok()) {
    std::cerr << name << ": " << e.error().message << "\n";
    return false;
  }
  auto want = ir::interpret(m, fn, args, params);
  if (!want.ok()) {
    std::cerr << name << ": interpreter: " << want.error().message << "\n";
    return false;
  }
  std::string in, out;
  for (const auto& a : args) {
    auto b = a.to_bytes();
    in.append(b.begin(), b.end());
  }
  for (const auto& w : *want) {
    auto b = w.to_bytes();
    out.append(b.begin(), b.end());
  }
  return write(dir + "/" + name + ".o", e->bytes) && write(dir + "/" + name + ".h", e->header) &&
         write(dir + "/" + name + ".in", in) && write(dir + "/" + name + ".want", out);
}

ir::HostTensor rnd(ElemKind k, std::vector<std::int64_t> s, std::uint64_t seed) {
  return ir::HostTensor::random(k, std::move(s), seed);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: llvm_aot_cases OUT_DIR [TRIPLE [CPU]]\n";
    return 2;
  }
  const std::string dir = argv[1];
  const std::string triple = argc > 2 ? argv[2] : "aarch64-linux-gnu";
  const std::string cpu = argc > 3 ? argv[3] : "";
  bool ok = true;
  int n = 0;
  // BitLinear layers (rmsnorm, quantize, int8 tmatmul with scale and relu) at O2.
  struct S {
    std::int64_t M, K, N;
  };
  for (const S& s : {S{1, 64, 16}, S{3, 63, 5}, S{8, 130, 67}}) {
    auto m = dsl::compile_tri(examples::kBitLinearSource, "bitlinear.tri");
    if (!m.ok()) return 1;
    auto sp = passes::specialize_function(*m, "BitLinear.forward", {{"M", s.M}, {"K", s.K}, {"N", s.N}}, true);
    if (!sp.ok()) return 1;
    passes::PipelineOptions po;
    po.target = targets::make_llvm_target()->info();
    if (!passes::run_pipeline(*sp, passes::default_pipeline(passes::OptLevel::O2, po.target), po).ok()) return 1;
    ir::ParamValues pv;
    pv.set("BitLinear.gamma", rnd(ElemKind::F32, {s.K}, 1));
    pv.set("BitLinear.w", rnd(ElemKind::T2, {s.K, s.N}, 2));
    pv.set("BitLinear.w_scale", rnd(ElemKind::F32, {s.N}, 3));
    ok = emit_case(dir, "bitlinear_" + std::to_string(n++), *sp, "BitLinear.forward",
                   {rnd(ElemKind::F32, {s.M, s.K}, 4)}, pv, triple, cpu) && ok;
  }
  // Kernel ops on their own: the full int8 epilogue, quantize, softmax, reductions, ewise.
  const std::string tir = R"(param @w : t2[77, 19]
param @ws : f32[19]
func @tmm(%q: i8[5, 77], %xs: f32[5, 1], %b: f32[19], %r: f32[5, 19]) -> f32[5, 19] {
^entry:
  %w = param @w : t2[77, 19]
  %ws = param @ws : f32[19]
  %y = tmatmul %q, %w, %xs, %ws, %b, %r {x_scale = true, w_scale = true, bias = true, residual = true, act = relu} : f32[5, 19]
  ret %y
}
func @quant(%x: f32[6, 33]) -> (i8[6, 33], f32[6, 1]) {
^entry:
  %q, %s = quantize %x : i8[6, 33], f32[6, 1]
  ret %q, %s
}
func @norm(%x: f32[3, 5, 7]) -> (f32[3, 5, 7], f32[3, 1, 7], f32[3, 5]) {
^entry:
  %s = softmax %x {axis = 2} : f32[3, 5, 7]
  %m = reduce_max %x {axis = 1, keepdims = true} : f32[3, 1, 7]
  %a = reduce_mean %x {axis = 2, keepdims = false} : f32[3, 5]
  ret %s, %m, %a
}
func @ew(%a: f32[4, 9], %b: f32[1, 9], %c: f32[4, 1]) -> f32[4, 9] {
^entry:
  %y = ewise %a, %b, %c {steps = [mul(0, 1), add(3, 2), max(4, 0), abs(5)]} : f32[4, 9]
  ret %y
}
)";
  auto m = ir::parse_module(tir, "cases.tir");
  if (!m.ok()) {
    std::cerr << m.error().message << "\n";
    return 1;
  }
  ir::ParamValues pv;
  pv.set("w", rnd(ElemKind::T2, {77, 19}, 5));
  pv.set("ws", rnd(ElemKind::F32, {19}, 6));
  ok = emit_case(dir, "tmm", *m, "tmm",
                 {rnd(ElemKind::I8, {5, 77}, 7), rnd(ElemKind::F32, {5, 1}, 8), rnd(ElemKind::F32, {19}, 9),
                  rnd(ElemKind::F32, {5, 19}, 10)},
                 pv, triple, cpu) && ok;
  // The same kernel for a CPU without +dotprod: the plain vectorized fallback.
  ok = emit_case(dir, "tmm_plain", *m, "tmm",
                 {rnd(ElemKind::I8, {5, 77}, 17), rnd(ElemKind::F32, {5, 1}, 18), rnd(ElemKind::F32, {19}, 19),
                  rnd(ElemKind::F32, {5, 19}, 20)},
                 pv, triple, "generic") && ok;
  ok = emit_case(dir, "quant", *m, "quant", {rnd(ElemKind::F32, {6, 33}, 11)}, {}, triple, cpu) && ok;
  ok = emit_case(dir, "norm", *m, "norm", {rnd(ElemKind::F32, {3, 5, 7}, 12)}, {}, triple, cpu) && ok;
  ok = emit_case(dir, "ew", *m, "ew",
                 {rnd(ElemKind::F32, {4, 9}, 13), rnd(ElemKind::F32, {1, 9}, 14), rnd(ElemKind::F32, {4, 1}, 15)}, {},
                 triple, cpu) && ok;
  return ok ? 0 : 1;
}
