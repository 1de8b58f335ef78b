// SPDX-License-Identifier: Apache-2.0
// shader_set.h - the SPIR-V target's plan of one specialized function: one compute shader per kernel op, bindings, geometry.
//
// build_shader_set() runs the shared step walk (targets/common/step_plan.h) and turns every
// computed instruction into a Shader: GLSL 4.50 source with the shapes baked in, the
// slots bound as storage buffers 0..n-1 (operands, then results) and the number of
// invocations. Load-time values are Const slots uploaded once per kernel, except tmatmul
// weights, which are uploaded once per Program in the 2-bit layout below (weight_words).
// Tile sizes stay out of the source: they are specialization constants (constant_id 0:
// the workgroup width, 1: rows per invocation of a tmatmul), chosen at load through the
// tuning source, so one SPIR-V module serves every configuration. compile() and load()
// both call build_shader_set, so the shaders and slots agree. No Vulkan types here.
//
// The 2-bit weight layout: a [K, N] ternary weight is KW = ceil(K / 16) rows of N 32-bit
// words; word kw * N + n holds k = 16 kw + i of column n in bit i (the +1 plane) and bit
// 16 + i (the -1 plane); both bits are 0 for a zero weight and for k >= K. Invocations
// of neighbouring columns read neighbouring words (coalesced on a GPU, one vector load
// on lavapipe) while the activations they read are the same (a broadcast). Four
// weights expand to a packed int8x4 with two multiplies ((p * 0x204081) & 0x01010101
// spreads four bits to four bytes), the operand of OpSDot.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ir/ir.h"
#include "targets/common/kernel_source.h"
#include "targets/common/step_plan.h"
#include "targets/load_value.h"
#include "ternjit/result.h"

namespace ternjit::targets::spirv {

/// One computed instruction as a compute shader.
struct Shader {
  ir::InstId inst;
  std::string name;                ///< "tj_<op>_<step>": the module's label
  std::string glsl;                ///< the source
  std::vector<Slot> bindings;      ///< storage buffer i is bindings[i]
  std::int64_t items = 0;          ///< invocations (1-D shaders); tmatmul: columns N
  bool tmatmul = false;            ///< 2-D: items columns x ceil(M / rows-per-invocation)
  TMatMulShape mm;                 ///< tmatmul only
  std::size_t weight_const = 0;    ///< tmatmul: the load-time index of its weight (bindings[1])
  bool zero_first_result = false;  ///< results[0] is cleared before the dispatch (int8 results: byte ORs)
};

/// One thing a call does, in order.
struct CallStep {
  enum class Kind : std::uint8_t { Dispatch, Copy } kind = Kind::Dispatch;
  std::size_t shader = 0;  ///< Dispatch: index into ShaderSet::shaders
  Slot from, to;           ///< Copy
  std::size_t bytes = 0;   ///< Copy
};

/// The shaders of one function and the steps of a call over them.
struct ShaderSet {
  StepPlan plan;
  std::vector<Shader> shaders;
  std::vector<CallStep> steps;
  std::vector<std::size_t> scratch_offsets;  ///< distinct scratch regions (one device buffer each)
  std::vector<std::size_t> scratch_sizes;    ///< their sizes in bytes
};

/// The workgroup width of the 1-D shaders (specialization constant 0).
inline constexpr std::uint32_t kDefaultWorkgroup = 64;

/// Success when every instruction of `f` has a shader (single block, static shapes,
/// each computed op one of: tmatmul (i8 or f32 x t2 weights that are load-time, f32
/// epilogue in row/column broadcast, a grouped w_scale f32[G, N]), ewise and the elementwise ops (f32), quantize,
/// quantize_int8, rmsnorm, softmax, reduce_sum/mean/max (f32)); otherwise Unsupported
/// naming the first that has none.
Result<void> shader_set_supported(const ir::Function& f);

/// Plans `f` (precondition: shader_set_supported). `int_dot`: tmatmul shaders use OpSDot
/// (SPV_KHR_integer_dot_product), else scalar multiply-adds.
Result<ShaderSet> build_shader_set(const ir::Function& f, bool int_dot);

/// The standalone tmatmul shader of `shape` (epilogue: none) bound as x, w, y (grouped:
/// x, w, the scales f32[G, N] as argument 1, y): what the tuning bench compiles.
Shader tmatmul_bench_shader(const TMatMulShape& shape, bool int_dot);

/// Words per weight column: ceil(K / 16).
inline std::int64_t weight_words_per_column(std::int64_t k) { return (k + 15) / 16; }

/// The 2-bit layout (file comment) of a [K, N] weight whose rows `value` reads as int8
/// (read_int8). Values other than -1, 0, 1 are InvalidInput.
Result<std::vector<std::uint32_t>> weight_words(const LoadValue& value, std::int64_t k, std::int64_t n);

}  // namespace ternjit::targets::spirv
