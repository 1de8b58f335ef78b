// SPDX-License-Identifier: Apache-2.0
// dsl.h - the `.tri` front end: parse, check and lower layers to the SSA IR.
//
// The language (docs/dsl.md):
//
//   layer LinearClassifier {
//       param weights: TernaryTensor[784, 10]
//       param bias: Tensor[10]
//
//       fn forward(x: Tensor[N, 784]) -> Tensor[N, 10] {
//           return x @ weights + bias
//       }
//   }
//
// - Comments are `// ...` and `/* ... */` (not nested). A file holds any number of
//   `layer` blocks; a layer holds `param` declarations and `fn` definitions.
// - Types: `Tensor[d0, ...]` (f32), `Tensor<T>[...]` with T one of f16 bf16 f32 i8
//   i32, `TernaryTensor[...]` (IR kind t2). `Tensor[]` is a scalar. A dim is an
//   integer or a symbol name. Symbols belong to the layer: `N` in two types of one
//   layer is the same N. `Other.N` names the symbol N of layer Other (how a caller
//   spells an extent fixed by a callee's parameters).
// - Statements, one per line: `let name = expr`, `let (a, b) = expr` (a tuple's
//   elements), `for i in lo..hi { stmts }` and exactly one `return expr` (or
//   `return (a, b)` for `-> (T1, T2)`), last. An expression continues on the next line
//   only inside parentheses or brackets.
// - `for` loops are unrolled at lowering (bounds compile-time integers, at most 4096
//   iterations, 65536 expression nodes per function); inside a body a `let` may rebind
//   a name: one defined before the loop is loop-carried, others are per iteration.
// - `param blk: Block[N]` declares N instances of layer Block: `blk[i].p` is module
//   parameter `Layer.blk.i.p`, `blk[i](x)` / `blk[i].fn(x)` call copies of Block's
//   functions (`@Layer.blk.i.fn`) that read instance i's parameters.
// - Precedence, loosest first (Python's): `+ -`, then `@ * /` (one level), then
//   unary `-`. Binary operators are left-associative: `a + b @ c * d` is
//   `a + ((b @ c) * d)`, and `-x @ w` is `(-x) @ w`. `@` is IR matmul; `+ - * /`
//   are add/sub/mul/div with NumPy broadcasting.
// - A number literal becomes a scalar `const` of the other operand's element kind
//   (i32 next to a t2 operand; the declared kind for an argument of a layer call or
//   a returned literal); a float literal next to an integer tensor is an error, as
//   is an integer the kind cannot hold. A literal standing alone (e.g. `sqrt(2)`)
//   is an f32 scalar. Arithmetic on two literals is folded in double (`/` of two
//   integers gives a float, as in Python) and stays a literal; `let k = 0.5` keeps k
//   a literal.
// - Built-ins: relu sigmoid tanh gelu silu exp log sqrt rsqrt abs quantize_int8
//   ternarize_absmean (x); softmax(x, axis) and sum/mean/max(x, axis) (reduce_*,
//   keepdims false; axis an integer literal, negative counts from the end);
//   rmsnorm(x, gamma, eps) (eps a number literal); transpose(x) (reverses all dims);
//   ternarize(x, threshold) (threshold a number literal >= 0); dequantize(q, scale),
//   and dequantize(x) of a float x is x itself; cast<T>(x) with T one of f16 bf16
//   f32 i8 i32 t2; maximum(a, b) and minimum(a, b) (IR max/min);
//   grouped_matmul(x, w, scale[, group]): x [..., K] @ ternary w [K, N] with
//   scale [G, N], G = ceil(K / group), row g scaling the sum over k in
//   [g * group, (g + 1) * group) (IR `tmatmul {w_scale = true, group = ...}`; group an
//   integer literal in [1, 2^24], 256 when left out: GGUF TQ1_0/TQ2_0 blocks);
//   reshape(x, [dims]) (one -1 allowed), x[i], slice(x, axis, start, size),
//   split(x, axis, n) (a tuple), concat(a, ..., axis), gather(table, ids),
//   rope(x, pos, theta[, "norm" | "neox"]), layernorm(x, gamma, beta, eps),
//   causal_softmax(x, pos), kv_write(cache, rows, pos, layer),
//   attention(q, kc, vc, pos, layer, scale), pow(x, n) (n in [-16, 16]) and square(x)
//   (multiplications). docs/dsl.md has the table.
// - Composition: `Other.fn(args)` calls a function of another layer (or the same
//   one), `Other(args)` means `Other.forward(args)`, and a plain `fn(args)` calls a
//   function of the same layer. Calls lower to IR `call @Other.fn`. Calls may go to
//   layers defined before or after, but not in a cycle. A plain call name is looked
//   up as a function of the current layer, then a layer, then a built-in.
//
// Lowering: `param p` of layer L is module parameter `@L.p` (read with one IR
// `param` per use); `fn f` is function `@L.f` with the arguments as named entry
// block arguments, `let` names on the values they bind, symbols declared in order
// of first appearance (signature, then body). Every type comes from
// ir::infer_types through ir::Builder.
//
// Errors: each diagnostic is `file:line:col` with the source line (render() draws
// a caret), a lowercase message without final period. The first error of each
// statement or declaration is reported, then checking resumes at the next one,
// so one run shows up to kMaxDiagnostics mistakes, sorted by position.
#pragma once

#include <cstddef>
#include <string_view>

#include "ir/dsl/ast.h"
#include "ir/ir.h"
#include "ternjit/result.h"

namespace ternjit::dsl {

/// The most diagnostics one call reports; later ones are dropped.
inline constexpr std::size_t kMaxDiagnostics = 20;

/// Parses `source` (named `file_name` in diagnostics) into a syntax tree without
/// checking it. Errors: InvalidInput holding every syntax error (at most
/// kMaxDiagnostics, sorted by position, source lines filled in).
Result<File> parse_tri(std::string_view source, std::string_view file_name);

/// Parses, checks and lowers every layer of `source` into one IR module (see the
/// file comment for the names it uses). Errors: InvalidInput holding every
/// syntax and semantic error found (at most kMaxDiagnostics, sorted by position,
/// source lines filled in); `message` says how many there were.
Result<ir::Module> compile_tri(std::string_view source, std::string_view file_name);

}  // namespace ternjit::dsl
