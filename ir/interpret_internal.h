// SPDX-License-Identifier: Apache-2.0
// interpret_internal.h - the reference numerics interpret.cpp's op switch calls (interpret_ops.cpp).
//
// Private to ir/: each function computes one op family exactly as interpret.h states, on
// whole HostTensors whose shapes the verifier and the interpreter's binding made
// consistent (a disagreement is our bug and aborts).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ir/ir.h"
#include "ir/tensor.h"

namespace ternjit::ir::interp {

/// Concrete row-major extents.
using Extents = std::vector<std::int64_t>;

/// An InvalidInput error, located at `loc` when it is known.
Error fail_at(const SourceLoc& loc, std::string msg);
/// An op's mnemonic in quotes: "'tmatmul'".
std::string q(Op op);
/// A concrete type as text: "f32[2, 3]".
std::string extents_str(ElemKind k, const Extents& s);
/// The product of the extents (1 for a scalar). Precondition: no overflow.
std::int64_t numel(const Extents& s);

/// Every function below takes `f64`: InterpretOptions::f32_as_f64 (interpret.h). When it
/// is set, a result of kind f32 is not rounded to f32 (it keeps the double value) and
/// the binary ops of an f32 result compute in double; every other kind is unaffected.
/// The result rounding of both modes.
double round_result(double v, ElemKind kind, bool f64);

/// One elementwise op (binary: add sub mul div max min; unary: neg abs relu sigmoid tanh
/// gelu silu exp log sqrt rsqrt) at result kind `kind`; `b` is null for unary ops. The
/// standalone ops, `ewise` steps and the `tmatmul` epilogue all compute through it.
/// Errors: integer division by zero, naming the element.
Result<HostTensor> elementwise(const InstData& inst, Op op, const HostTensor& a, const HostTensor* b, ElemKind kind,
                               bool f64);
/// `cast`: each value rounded with round_to_kind to `to`.
HostTensor cast(const HostTensor& t, ElemKind to, bool f64);
/// `transpose` by a valid permutation of t's dims.
HostTensor transpose(const HostTensor& t, const std::vector<std::int64_t>& perm);
/// `broadcast` to `shape` (NumPy stretch; precondition: compatible).
HostTensor broadcast_to(const HostTensor& t, const Extents& shape);
/// `matmul` (numpy.matmul) at result kind `kind`.
HostTensor matmul(const HostTensor& a, const HostTensor& b, ElemKind kind, bool f64);
/// reduce_sum / reduce_mean / reduce_max (inst.op) over `axis`. Errors: reduce_max of an
/// empty axis.
Result<HostTensor> reduce(const InstData& inst, const HostTensor& t, std::size_t axis, bool keepdims, ElemKind kind,
                          bool f64);
/// `softmax` over `axis`.
HostTensor softmax(const HostTensor& t, std::size_t axis, ElemKind kind, bool f64);
/// `rmsnorm` over the last axis.
HostTensor rmsnorm(const HostTensor& x, const HostTensor& gamma, double eps, ElemKind kind, bool f64);
/// `dequantize`: float(q) * float(s) in f32, broadcast. Precondition: `kind` is a float kind.
Result<HostTensor> dequantize(const InstData& inst, const HostTensor& q, const HostTensor& s, ElemKind kind,
                              bool f64);
/// quantize_int8, ternarize, ternarize_absmean, quantize and tquantize (inst.op) of `x`,
/// with result kinds `kinds` (one per result), exactly quant.h on the f32 values.
std::vector<HostTensor> quantization(const InstData& inst, const HostTensor& x, std::span<const ElemKind> kinds);
/// `tmatmul`: accumulation, then the epilogue operands present and the activation.
Result<HostTensor> tmatmul(const InstData& inst, const TMatMulAttrs& attrs, std::span<const HostTensor* const> ops,
                           ElemKind kind, bool f64);
/// `ewise`: each step as the standalone op on whole tensors; the last step's result.
Result<HostTensor> ewise(const InstData& inst, const EwiseAttrs& attrs, std::span<const HostTensor* const> ops,
                         ElemKind kind, bool f64);


// The decoder ops (interpret_decoder.cpp). The ones reading `pos` (an i32 scalar) check
// it at run time: pos < 0, rows [pos, pos + M) past the cache capacity and a layer past
// the cache's L are errors naming the op and the values.
/// `gather` of table rows [V, D] by i32 ids. Errors: an id outside [0, V).
Result<HostTensor> gather(const InstData& inst, const HostTensor& table, const HostTensor& ids);
/// `slice`: `size` elements from `start` along `axis` (precondition: in range).
HostTensor slice(const HostTensor& x, std::size_t axis, std::int64_t start, std::int64_t size);
/// `concat` along `axis` (precondition: the other dims equal).
HostTensor concat(std::span<const HostTensor* const> ops, std::size_t axis);
/// `layernorm` over the last axis, in double, rounded once to `kind`.
HostTensor layernorm(const HostTensor& x, const HostTensor& gamma, const HostTensor& beta, double eps, ElemKind kind,
                     bool f64);
/// `rope` of x [M, H, D] at positions pos + m. Errors: pos < 0, odd D.
Result<HostTensor> rope(const InstData& inst, const RopeAttrs& a, const HostTensor& x, const HostTensor& pos, bool f64);
/// `causal_softmax` of x [..., M, T]: entries t <= pos + m kept. Errors: pos < 0.
Result<HostTensor> causal_softmax(const InstData& inst, const HostTensor& x, const HostTensor& pos, ElemKind kind,
                                  bool f64);
/// `kv_write` of rows [M, H, D] into layer `layer` of cache [L, C, H, D] at rows pos + m.
Result<HostTensor> kv_write(const InstData& inst, std::int64_t layer, const HostTensor& cache, const HostTensor& rows,
                            const HostTensor& pos);
/// `attention` of q [M, HQ, D] over the cache rows [0, pos + m] of layer a.layer.
Result<HostTensor> attention(const InstData& inst, const AttentionAttrs& a, const HostTensor& q, const HostTensor& kc,
                             const HostTensor& vc, const HostTensor& pos, bool f64);

}  // namespace ternjit::ir::interp
