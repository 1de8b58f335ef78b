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
               const std::string& cpu, bool no_packed = false) {
  targets::llvmjit::EmitRequest r;
  r.triple = triple;
  r.cpu = cpu;
  r.no_packed = no_packed;
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
    if (!passes::run_pipeline(*sp, passes::default_pipeline(passes::OptLevel::O2), po).ok()) return 1;
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
param @p : f16[6, 7]
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
func @dense(%x: f32[3, 7], %h: f16[7, 5], %b: bf16[3, 1]) -> (f16[3, 7], bf16[3, 7], i8[3, 7], f32[7, 3], bf16[3, 4], f32[3, 5], f32[3, 6]) {
^entry:
  %c16 = cast %x {to = f16} : f16[3, 7]
  %cb = cast %x {to = bf16} : bf16[3, 7]
  %c8 = cast %x {to = i8} : i8[3, 7]
  %t = transpose %x {perm = [1, 0]} : f32[7, 3]
  %bb = broadcast %b : bf16[3, 4]
  %mm = matmul %x, %h : f32[3, 5]
  %p = param @p : f16[6, 7]
  %pt = transpose %p {perm = [1, 0]} : f16[7, 6]
  %head = matmul %x, %pt : f32[3, 6]
  ret %c16, %cb, %c8, %t, %bb, %mm, %head
}
func @decoder(%ids: i32[3], %pos: i32[], %table: f16[32, 16], %g: f32[16], %b: f32[16], %kc: f16[2, 8, 2, 4], %vc: f16[2, 8, 2, 4]) -> (f32[3, 4, 4], f16[2, 8, 2, 4], f32[3, 16], f16[2, 8, 2, 4], f32[3, 24]) {
^entry:
  %0 = gather %table, %ids {axis = 0} : f16[3, 16]
  %1 = cast %0 {to = f32} : f32[3, 16]
  %2 = layernorm %1, %g, %b {eps = 1e-05} : f32[3, 16]
  %3 = slice %2 {axis = 1, start = 8, size = 8} : f32[3, 8]
  %4 = reshape %3 : f32[3, 2, 4]
  %5 = reshape %2 : f32[3, 4, 4]
  %6 = rope %5, %pos {theta = 5e+05, mode = norm} : f32[3, 4, 4]
  %7 = rope %4, %pos {theta = 10000, mode = neox} : f32[3, 2, 4]
  %8 = kv_write %kc, %7, %pos {layer = 1} : f16[2, 8, 2, 4]
  %9 = kv_write %vc, %4, %pos {layer = 1} : f16[2, 8, 2, 4]
  %10 = attention %6, %8, %9, %pos {layer = 1, scale = 0.5} : f32[3, 4, 4]
  %11 = causal_softmax %2, %pos : f32[3, 16]
  %13 = concat %2, %3 {axis = 1} : f32[3, 24]
  ret %10, %8, %11, %9, %13
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
  // The same kernel on int8 weight panels (the layout before packed 2-bit panels).
  ok = emit_case(dir, "tmm_int8", *m, "tmm",
                 {rnd(ElemKind::I8, {5, 77}, 27), rnd(ElemKind::F32, {5, 1}, 28), rnd(ElemKind::F32, {19}, 29),
                  rnd(ElemKind::F32, {5, 19}, 30)},
                 pv, triple, cpu, true) && ok;
  // Packed 2-bit panels (sdot: 16-column groups, 4 groups a panel at M < 4): M = 1, 3,
  // 17 and 128 with K tails (K % 4, K % 64) and N tails (N % 16, N % 64), the full
  // epilogue; x holds both ends of the i8 range. Plain (generic cpu) for M = 17 too.
  struct P {
    std::int64_t M, K, N;
    const char* cpu;
  };
  int np = 0;
  for (const P& c : {P{1, 130, 67, ""}, P{3, 63, 200, ""}, P{17, 257, 33, ""}, P{128, 96, 80, ""}, P{17, 257, 33, "generic"}}) {
    const std::string y = "[" + std::to_string(c.M) + ", " + std::to_string(c.N) + "]";
    const std::string wt = "[" + std::to_string(c.K) + ", " + std::to_string(c.N) + "]";
    const std::string t = "param @w : t2" + wt + "\nparam @ws : f32[" + std::to_string(c.N) + "]\nfunc @f(%q: i8[" +
                          std::to_string(c.M) + ", " + std::to_string(c.K) + "], %xs: f32[" + std::to_string(c.M) +
                          ", 1], %b: f32[" + std::to_string(c.N) + "], %r: f32" + y + ") -> f32" + y +
                          " {\n^entry:\n  %w = param @w : t2" + wt + "\n  %ws = param @ws : f32[" + std::to_string(c.N) +
                          "]\n  %y = tmatmul %q, %w, %xs, %ws, %b, %r {x_scale = true, w_scale = true, bias = true, "
                          "residual = true, act = relu} : f32" + y + "\n  ret %y\n}\n";
    auto pm = ir::parse_module(t, "packed.tir");
    if (!pm.ok()) {
      std::cerr << pm.error().message << "\n";
      return 1;
    }
    ir::ParamValues pp;
    const auto seed = static_cast<std::uint64_t>(40 + 10 * np);
    pp.set("w", rnd(ElemKind::T2, {c.K, c.N}, seed));
    pp.set("ws", rnd(ElemKind::F32, {c.N}, seed + 1));
    ir::HostTensor q = rnd(ElemKind::I8, {c.M, c.K}, seed + 2);
    q.data.front() = -128.0;
    q.data.back() = 127.0;
    ok = emit_case(dir, "packed_" + std::to_string(np++), *pm, "f",
                   {q, rnd(ElemKind::F32, {c.M, 1}, seed + 3), rnd(ElemKind::F32, {c.N}, seed + 4),
                    rnd(ElemKind::F32, {c.M, c.N}, seed + 5)},
                   pp, triple, *c.cpu ? c.cpu : cpu) && ok;
  }
  ok = emit_case(dir, "quant", *m, "quant", {rnd(ElemKind::F32, {6, 33}, 11)}, {}, triple, cpu) && ok;
  ok = emit_case(dir, "norm", *m, "norm", {rnd(ElemKind::F32, {3, 5, 7}, 12)}, {}, triple, cpu) && ok;
  // cast, transpose, broadcast, matmul f32 x f16 and the head form (K = 7 < 8 lanes:
  // the dot product is the scalar tail alone, so it is bit for bit too).
  ir::HostTensor xd = rnd(ElemKind::F32, {3, 7}, 31);
  for (double& v : xd.data) v = static_cast<float>(v * 200.0);  // i8 saturation, f16 rounding
  ir::ParamValues pd;
  pd.set("p", rnd(ElemKind::F16, {6, 7}, 32));
  ok = emit_case(dir, "dense", *m, "dense", {xd, rnd(ElemKind::F16, {7, 5}, 33), rnd(ElemKind::BF16, {3, 1}, 34)}, pd,
                 triple, cpu) && ok;
  // The decoder ops (rope's cos/sin and the softmax exp from the target's libm).
  ok = emit_case(dir, "decoder", *m, "decoder",
                 {ir::HostTensor{ElemKind::I32, {3}, {5, 31, 0}}, ir::HostTensor{ElemKind::I32, {}, {2}},
                  rnd(ElemKind::F16, {32, 16}, 41), rnd(ElemKind::F32, {16}, 42), rnd(ElemKind::F32, {16}, 43),
                  rnd(ElemKind::F16, {2, 8, 2, 4}, 44), rnd(ElemKind::F16, {2, 8, 2, 4}, 45)},
                 {}, triple, cpu) && ok;
  ok = emit_case(dir, "ew", *m, "ew",
                 {rnd(ElemKind::F32, {4, 9}, 13), rnd(ElemKind::F32, {1, 9}, 14), rnd(ElemKind::F32, {4, 1}, 15)}, {},
                 triple, cpu) && ok;
  return ok ? 0 : 1;
}
