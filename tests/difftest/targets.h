// SPDX-License-Identifier: Apache-2.0
// targets.h - the differential test across targets: random programs compiled by each target's
// engine against the reference interpreter.
//
// A program (gen.h, in target mode: GenOptions::for_targets) is compiled by an Engine
// for one target configuration (x86 at each ISA cap this CPU runs, LLVM, and each other
// available target), its parameters bound, @main run on make_inputs(m, seed), and every
// result compared with ir::interpret on the same inputs. Integer results must be
// bit-exact; float results agree within TargetTolerance, argued per op there.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ir/ir.h"
#include "ir/tensor.h"
#include "tests/difftest/check.h"
#include "tests/difftest/gen.h"
#include "ternjit/result.h"

namespace ternjit::difftest {

/// One way to run a program: an engine target with its options.
struct TargetConfig {
  std::string name;            ///< "x86/avx2", "llvm", ...: how reports name it
  std::string target;          ///< EngineOptions::target
  std::string target_options;  ///< EngineOptions::target_options ("x86.max_isa=avx2")
  int threads = 1;             ///< EngineOptions::threads
};

/// Every configuration this machine can run, in a fixed order: the x86 target at each ISA
/// cap the CPU supports (avx2, avx_vnni, avx512, avx512_vnni, amx), then every other
/// available target but the reference (llvm, spirv, ...). `skipped` (when given) receives one
/// "name: reason" line per configuration that is not available here.
std::vector<TargetConfig> available_targets(std::vector<std::string>* skipped = nullptr);

/// The configurations among `all` whose name is, or starts with, one of the
/// comma-separated `names` ("x86" selects every ISA cap); an unknown name is an error.
Result<std::vector<TargetConfig>> select_targets(std::span<const TargetConfig> all, const std::string& names);

/// The (argument i, result j) pairs of @main that the KV cache convention (docs/bitnet.md)
/// lets a caller pass as one buffer, updated in place: result j is the last of a chain of
/// kv_write that starts at argument i, argument i is read by the chain's first kv_write
/// only, each cache between two writes is read by nothing but earlier non-kv_write
/// instructions and the next write, and result j is returned once and read by no other
/// kv_write. Single-block @main only; each argument and result in one pair at most.
std::vector<std::pair<std::size_t, std::size_t>> kv_in_place_pairs(const ir::Module& m);

/// Runs @main of `m` on `config` with the inputs: compile (cache off), bind every
/// parameter, specialize on the inputs, run into outputs poisoned with NaN first. With
/// `in_place`, result j of each kv_in_place_pairs pair (i, j) is written into a copy of
/// argument i's buffer passed as both (the decoder's in-place cache update) instead.
/// Errors are the engine's.
Result<std::vector<ir::HostTensor>> run_on_target(const TargetConfig& config, const ir::Module& m,
                                                  const Inputs& inputs, bool in_place = false);

/// The float tolerance of the target comparison. An element agrees when
/// |actual - expected| <= atol * max(1, bound) + rtol * |expected| (bound: the
/// generator's magnitude bound of that result). Integer kinds compare exactly.
///
/// Why these values (the interpreter computes every float op in double and rounds once
/// per op; targets compute in f32 with vector code):
///   add sub mul div max min neg abs relu cast, data movement: the interpreter also
///     computes these in f32 (interpret.h), so a target is exact up to FMA contraction
///     and the order of fused steps: <= 1 f32 ulp (2^-24 relative) per op.
///   matmul tmatmul reduce_sum reduce_mean rmsnorm softmax: f32 accumulation of at most
///     K <= 512 terms (GenOptions::max_elements) in another order than the double sum:
///     |error| <= K * 2^-24 * sum|terms| ~ 3e-5 * sum|terms|, and sum|terms| <= bound
///     (the generator's bounds are bounds of sums of absolute values).
///   exp log sqrt rsqrt sigmoid tanh gelu silu: the targets' f32 approximations are held
///     to rtol 2e-6 against the double reference (tests/unit/x86/eltwise_test.cpp), and
///     the generator feeds them bounded arguments; then propagated like any rounding.
///   quantize_int8 quantize ternarize* tquantize: exact on both sides, because in target
///     mode a quantizer only reads values computed without rounding (arguments,
///     parameters, exact ops: GenOptions::exact_quant); a rounded input could sit one ulp
///     from a rounding boundary and flip a step, which is no bug.
///   f16 results: 2^-11 relative per rounding; the generator keeps them in short chains.
///   gather slice concat kv_write: copies (kv_write's f16/bf16 rounding of rows no pass
///     or target rounds differently: the generator stores only exact values in narrow
///     caches), so exact. layernorm rope causal_softmax: the interpreter's double
///     arithmetic (x86 and llvm follow it), at most an f32 rounding apart. attention: f32
///     dots of D <= 80 terms scaled, an f32 softmax over <= 24 rows and a weighted sum: a
///     score error e moves the result by <= 2 e |V|, and e <= D 2^-24 scale sum |q_i k_i|
///     <= 8 D 2^-24 <= 4e-5, because the generator tames q to scale D |q| |k| <= 8; the
///     result's bound is |V|'s.
/// Chains of up to ~40 ops add these; with cancellation they become absolute, hence the
/// atol scaled by the bound. 2e-4 leaves a margin of ~6x over the matmul bound, and a
/// real miscompile (wrong op, operand, axis, tail or epilogue) is off by far more.
struct TargetTolerance {
  double rtol = 2e-4;
  double atol = 2e-4;
  /// f16/bf16 results (2^-11 / 2^-8 per rounding).
  double half_rtol = 2e-2;
};

/// The first disagreement of a target's results with the interpreter's ("result 1:
/// element [0, 2]: ..."), or nullopt: integer, bool and t2 kinds exactly, floats within
/// `tol` scaled by `bounds` (one per result; missing ones are 1).
std::optional<std::string> compare_target_results(const std::vector<ir::HostTensor>& want,
                                                  const std::vector<ir::HostTensor>& got,
                                                  const std::vector<double>& bounds, const TargetTolerance& tol = {});

/// Compares every target with the interpreter on each input seed. Failure::level names
/// the target configuration. A program with kv_in_place_pairs runs a second time per
/// target and seed with those caches in place (Failure::level "<target> in place"). An
/// interpreter error on `m` is CheckReport::original_error.
/// A target whose engine answers Unsupported (check_supported refused an op of the
/// optimized program) is listed in CheckReport::unsupported instead: not its program,
/// neither a run nor a failure.
CheckReport check_targets(const ir::Module& m, std::span<const TargetConfig> targets,
                          std::span<const std::uint64_t> input_seeds, const TargetTolerance& tol = {});

/// Shrinks a module on which `target` fails, as minimize() does for a pass level.
ir::Module minimize_on_target(const ir::Module& m, const TargetConfig& target,
                              std::span<const std::uint64_t> input_seeds, const TargetTolerance& tol = {});

}  // namespace ternjit::difftest
