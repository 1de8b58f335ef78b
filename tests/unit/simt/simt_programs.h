// SPDX-License-Identifier: Apache-2.0
// simt_programs.h - IR functions covering every kernel op the SIMT generator writes (NVRTC/hiprtc and golden tests), and generating one.
#pragma once

#include <doctest/doctest.h>

#include <string>
#include <utility>
#include <vector>

#include "ir/parse.h"
#include "targets/simt/generate.h"

namespace ternjit::simt_test {

/// One function @f per op and shape.
struct OpProgram {
  std::string name;  ///< golden file stem: "<op>_<shape>"
  std::string tir;
};

inline std::vector<OpProgram> op_programs() {
  const std::string mm =
      "param @w : t2[200, 17]\nparam @ws : f32[17]\n"
      "func @f(%x: i8[3, 200], %xs: f32[3, 1], %b: f32[17], %r: f32[3, 17]) -> f32[3, 17] {\n^entry:\n"
      "  %w = param @w : t2[200, 17]\n  %ws = param @ws : f32[17]\n"
      "  %y = tmatmul %x, %w, %xs, %ws, %b, %r {x_scale = true, w_scale = true, bias = true, residual = true, act = relu} "
      ": f32[3, 17]\n  ret %y\n}\n";
  const std::string gemv =
      "param @w : t2[2560, 6912]\nparam @ws : f32[]\n"
      "func @f(%x: i8[1, 2560], %xs: f32[1, 1]) -> f32[1, 6912] {\n^entry:\n"
      "  %w = param @w : t2[2560, 6912]\n  %ws = param @ws : f32[]\n"
      "  %y = tmatmul %x, %w, %xs, %ws {x_scale = true, w_scale = true, bias = false, residual = false, act = none} "
      ": f32[1, 6912]\n  ret %y\n}\n";
  const std::string mmf =
      "param @w : t2[37, 5]\nfunc @f(%x: f32[2, 37], %b: f32[5]) -> f32[2, 5] {\n^entry:\n  %w = param @w : t2[37, 5]\n"
      "  %y = tmatmul %x, %w, %b {x_scale = false, w_scale = false, bias = true, residual = false, act = gelu} "
      ": f32[2, 5]\n  ret %y\n}\n";
  const std::string mmf2 =
      "param @w : t2[4096, 64]\nfunc @f(%x: f32[8, 4096]) -> f32[8, 64] {\n^entry:\n  %w = param @w : t2[4096, 64]\n"
      "  %y = tmatmul %x, %w {x_scale = false, w_scale = false, bias = false, residual = false, act = silu} "
      ": f32[8, 64]\n  ret %y\n}\n";
  const std::string grouped =
      "param @w : t2[45, 19]\nparam @gs : f32[3, 19]\n"
      "func @f(%x: i8[3, 45], %xs: f32[3, 1]) -> f32[3, 19] {\n^entry:\n  %w = param @w : t2[45, 19]\n"
      "  %gs = param @gs : f32[3, 19]\n"
      "  %y = tmatmul %x, %w, %xs, %gs {x_scale = true, w_scale = true, group = 20, bias = false, residual = false, "
      "act = none} : f32[3, 19]\n  ret %y\n}\n";
  const std::string grouped2 =
      "param @w : t2[512, 33]\nparam @gs : f32[4, 33]\n"
      "func @f(%x: f32[1, 512]) -> f32[1, 33] {\n^entry:\n  %w = param @w : t2[512, 33]\n"
      "  %gs = param @gs : f32[4, 33]\n"
      "  %y = tmatmul %x, %w, %gs {x_scale = false, w_scale = true, group = 128, bias = false, residual = false, "
      "act = none} : f32[1, 33]\n  ret %y\n}\n";
  auto quant = [](const std::string& t, const std::string& s) {
    return "func @f(%x: f32" + t + ") -> (i8" + t + ", f32" + s + ", f32" + t + ") {\n^entry:\n  %q, %s = quantize %x : i8" +
           t + ", f32" + s + "\n  %fq = quantize_int8 %x : f32" + t + "\n  ret %q, %s, %fq\n}\n";
  };
  auto rms = [](const std::string& t, const std::string& g) {
    return "func @f(%x: f32" + t + ", %g: f32" + g + ") -> f32" + t + " {\n^entry:\n  %y = rmsnorm %x, %g {eps = 1e-05} : f32" +
           t + "\n  ret %y\n}\n";
  };
  auto axis = [](const std::string& t, const std::string& r, int a) {
    const std::string as = std::to_string(a);
    return "func @f(%x: f32" + t + ") -> (f32" + t + ", f32" + r + ", f32" + r + ", f32" + r +
           ") {\n^entry:\n  %s = softmax %x {axis = " + as + "} : f32" + t + "\n  %a = reduce_sum %x {axis = " + as +
           ", keepdims = true} : f32" + r + "\n  %m = reduce_mean %x {axis = " + as + ", keepdims = true} : f32" + r +
           "\n  %x1 = reduce_max %x {axis = " + as + ", keepdims = true} : f32" + r + "\n  ret %s, %a, %m, %x1\n}\n";
  };
  const std::string ew =
      "func @f(%a: f32[5, 11], %b: f32[11], %c: f32[5, 1]) -> (f32[5, 11], f32[5, 11], f32[5, 11]) {\n^entry:\n"
      "  %y = ewise %a, %b, %c {steps = [mul(0, 1), add(3, 2), silu(4)]} : f32[5, 11]\n"
      "  %z = div %a, %c : f32[5, 11]\n  %t = tanh %a : f32[5, 11]\n  ret %y, %z, %t\n}\n";
  const std::string ew2 =
      "func @f(%a: f32[4096], %b: f32[4096]) -> (f32[4096], f32[4096], f32[4096], f32[4096]) {\n^entry:\n"
      "  %y = ewise %a, %b {steps = [sub(0, 1), gelu(2), max(3, 0), rsqrt(4)]} : f32[4096]\n"
      "  %e = exp %a : f32[4096]\n  %l = log %b : f32[4096]\n  %n = min %a, %b : f32[4096]\n  ret %y, %e, %l, %n\n}\n";
  const std::string copy =
      "func @f(%a: f32[3, 4]) -> (f32[3, 4], f32[3, 4], f32[12]) {\n^entry:\n  %e = neg %a : f32[3, 4]\n"
      "  %r = reshape %e : f32[12]\n  ret %e, %a, %r\n}\n";
  const std::string chain =
      "param @w : t2[2560, 6912]\nparam @u : t2[2560, 6912]\n"
      "func @f(%x: f32[8, 2560], %g: f32[2560]) -> (f32[8, 6912], f32[8, 6912]) {\n^entry:\n"
      "  %h = rmsnorm %x, %g {eps = 1e-05} : f32[8, 2560]\n  %q, %s = quantize %h : i8[8, 2560], f32[8, 1]\n"
      "  %w = param @w : t2[2560, 6912]\n  %u = param @u : t2[2560, 6912]\n"
      "  %y = tmatmul %q, %w, %s {x_scale = true, w_scale = false, bias = false, residual = false, act = silu} : f32[8, 6912]\n"
      "  %z = tmatmul %q, %u, %s {x_scale = true, w_scale = false, bias = false, residual = false, act = none} : f32[8, 6912]\n"
      "  ret %y, %z\n}\n";
  return {
      {"tmatmul_i8_3x200x17", mm},
      {"tmatmul_i8_1x2560x6912", gemv},
      {"tmatmul_f32_2x37x5", mmf},
      {"tmatmul_f32_8x4096x64", mmf2},
      {"tmatmul_grouped_i8_3x45x19_g20", grouped},
      {"tmatmul_grouped_f32_1x512x33_g128", grouped2},
      {"quantize_5x7", quant("[5, 7]", "[5, 1]")},
      {"quantize_2x3x2560", quant("[2, 3, 2560]", "[2, 3, 1]")},
      {"rmsnorm_3x5x67", rms("[3, 5, 67]", "[67]")},
      {"rmsnorm_8x2560", rms("[8, 2560]", "[2560]")},
      {"softmax_reduce_3x5x7_axis1", axis("[3, 5, 7]", "[3, 1, 7]", 1)},
      {"softmax_reduce_4x300_axis1", axis("[4, 300]", "[4, 1]", 1)},
      {"ewise_5x11", ew},
      {"ewise_4096", ew2},
      {"copy_3x4", copy},
      {"bitlinear_ffn_8x2560x6912", chain},
  };
}

/// tmatmuls that take the CUDA tensor-core (mma.sync) form by default (M >= 16, i8 x):
/// odd shapes with every epilogue operand, and the BitLinear chain at M = 32.
inline std::vector<OpProgram> mma_programs() {
  const std::string mm =
      "param @w : t2[300, 13]\nparam @ws : f32[13]\n"
      "func @f(%x: i8[17, 300], %xs: f32[17, 1], %b: f32[13], %r: f32[17, 13]) -> f32[17, 13] {\n^entry:\n"
      "  %w = param @w : t2[300, 13]\n  %ws = param @ws : f32[13]\n"
      "  %y = tmatmul %x, %w, %xs, %ws, %b, %r {x_scale = true, w_scale = true, bias = true, residual = true, act = relu} "
      ": f32[17, 13]\n  ret %y\n}\n";
  const std::string chain =
      "param @w : t2[2560, 6912]\nparam @u : t2[2560, 6912]\n"
      "func @f(%x: f32[32, 2560], %g: f32[2560]) -> (f32[32, 6912], f32[32, 6912]) {\n^entry:\n"
      "  %h = rmsnorm %x, %g {eps = 1e-05} : f32[32, 2560]\n  %q, %s = quantize %h : i8[32, 2560], f32[32, 1]\n"
      "  %w = param @w : t2[2560, 6912]\n  %u = param @u : t2[2560, 6912]\n"
      "  %y = tmatmul %q, %w, %s {x_scale = true, w_scale = false, bias = false, residual = false, act = silu} : f32[32, 6912]\n"
      "  %z = tmatmul %q, %u, %s {x_scale = true, w_scale = false, bias = false, residual = false, act = none} : f32[32, 6912]\n"
      "  ret %y, %z\n}\n";
  return {{"tmatmul_mma_17x300x13", mm}, {"bitlinear_ffn_mma_32x2560x6912", chain}};
}

/// The functions the NVRTC/hiprtc tests compile (every op above).
inline std::vector<std::string> program_texts() {
  std::vector<std::string> out;
  for (const OpProgram& p : op_programs()) out.push_back(p.tir);
  return out;
}

/// Function @f of `tir` generated with `options` (the test case fails on an error).
inline targets::simt::KernelSet generate(const std::string& tir, const targets::simt::SimtOptions& options) {
  auto m = ir::parse_module(tir, "simt_test.tir");
  REQUIRE_MESSAGE(m.ok(), (m.ok() ? "" : m.error().message));
  auto p = targets::simt::generate(*m, "f", options);
  REQUIRE_MESSAGE(p.ok(), (p.ok() ? "" : p.error().message));
  return std::move(*p);
}

}  // namespace ternjit::simt_test
