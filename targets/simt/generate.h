// SPDX-License-Identifier: Apache-2.0
// generate.h - the CUDA C++ / HIP C++ source generator of the SIMT targets: kernels, launch plan, weight packing.
//
// generate() turns one specialized function into ONE translation unit of header-free
// `extern "C" __global__` kernels (no #include: NVRTC and hiprtc compile it without
// system headers; the source defines its own integer types) and a launch plan: the
// kernels to launch in order, each with concrete grid and block dimensions (shapes are
// static) and its arguments. The same generator writes both dialects:
//
//   Dialect::Cuda  warp 32, __dp4a, __shfl_down_sync / __shfl_xor_sync, __fmul_rn & co
//   Dialect::Hip   warp 64 (or 32 on RDNA), __builtin_amdgcn_sdot4, __shfl_down / __shfl_xor,
//                  `#pragma clang fp contract(off)`
//
// No CUDA or HIP types appear here: the cuda and hip targets map the plan onto
// cuLaunchKernel / hipModuleLaunchKernel. tests/unit/simt executes the exact source on
// the CPU under tests/simt/simt_emu.h.
//
// LAUNCH CONVENTIONS (what a runtime must do to run a KernelSet):
//   - Buffers: every function argument i is an input buffer of plan.in_bytes[i] bytes,
//     every result j an output buffer of plan.out_bytes[j] bytes (row-major, the
//     HostTensor::to_bytes layout: f32 little-endian, i8 one byte, i32 four). Scratch
//     buffer s is a device allocation of scratch_bytes[s] bytes (contents undefined at
//     launch; no kernel reads scratch it has not written in the same call). Every
//     buffer must be at least 16-byte aligned (cuMemAlloc/hipMalloc give 256): kernels
//     load i8 activations 16 bytes at a time when K % 16 == 0, so a caller's pointer on
//     the framework path (a tensor view) must be checked (refused or copied) first.
//     Kernels read no byte outside a buffer's size.
//   - Load-time values: KernelArg::Kind::Const k is plan.load_time[k] uploaded once as
//     LoadValue::encoded() bytes (e.g. a w_scale f32[N]); KernelArg::Kind::Weight w is
//     weights[w]: the ternary weight packed by pack_ternary_weight() (layout below),
//     uploaded once per Program under the key "<device>/<param>/<layout_name()>"
//     when `param` is not empty.
//   - Kernels: launch kernels[0], kernels[1], ... in order on one stream (each reads
//     what the previous ones wrote; no host synchronization between them). Launch
//     kernel i as function `name` of the module compiled from `source`, with grid
//     (grid.x, grid.y, grid.z), block (block.x, block.y, block.z), dynamic shared
//     memory `shared_bytes` (always 0 today: shared memory is static), and one
//     kernel parameter per KernelArg in order: a device pointer (8 bytes) for Input,
//     Output, Const, Weight and Scratch, a 32-bit unsigned integer for Scalar. For
//     cuLaunchKernel that is `void* params[i] = &ptr_or_u32`.
//   - Copies (a returned value not computed in place) are kernels too (tj_copy_*), so
//     the plan is launches only.
//
// WEIGHT LAYOUT (layout_name() "tcodes64"): a ternary [K, N] weight becomes N columns
// of KP = ceil(K / 64) * 64 two-bit codes, column n at byte n * KP / 4 (16-byte
// aligned). The code of a weight w is w + 1 (0, 1, 2); the code of a padding k >= K is
// 0. Word kw (32 bits, little-endian) of a column holds k = 16 kw + 4 j + b at bits
// 8 b + 2 j (j, b in 0..3), so (word >> 2 j) & 0x03030303 is four int8 lanes holding the
// codes of the four consecutive k = 16 kw + 4 j .. + 3: the operand of one dp4a against
// four activation bytes. Since sum x (w + 1) = sum x w + sum x, a kernel subtracts the
// activation row sum from the dp4a sum; padding codes 0 add nothing. The row sums are
// computed once per row: by the quantize kernel that produced the activations when it
// is in the same program and the tmatmul has no grouped scale, else by a tj_rowsum
// kernel (once per activation value and group). One 16-byte load brings 64 weights.
//
// WEIGHT LAYOUT "tmma2" (the mma.sync form, pre-swizzled in B-fragment order at bind
// time): codes w + 1 as above, 2 bits each, padding (k >= K or n >= N) code 1 (weight
// 0). The weight is cut into tiles of 8 columns (NT = ceil(N / 8), tile nt = columns
// 8 nt ..) and blocks of 256 k (KB = ceil(K / 256)); block (nt, kb) is 512 bytes at
// byte (nt * KB + kb) * 512, lane L (0..31) of the warp owns its 16 bytes at + 16 L.
// Word q (0..3) of those holds k-tiles 2q and 2q + 1 (32 k each) of the block: with
// groupID g = L >> 2 and threadID_in_group t = L % 4, the code of column 8 nt + g and
// k = 256 kb + 32 (2q + h) + 4 t + b + 16 e (h, e in 0..1, b in 0..3) sits at bits
// 8 b + 2 (2 h + e) of word q. So (word >> 2 (2 h + e)) & 0x03030303 is register e
// (b0 / b1) of the mma.m16n8k32 .s8 B fragment of k-tile 2q + h as codes; the kernel
// decodes each byte to w = code - 1 in {-1, 0, 1} (a borrow-free byte subtract), so
// no row-sum correction is needed. One 16-byte load per lane brings 8 k-tiles.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/ir.h"
#include "targets/common/kernel_source.h"
#include "targets/common/step_plan.h"
#include "ternjit/result.h"

namespace ternjit::targets {
struct LoadValue;
}

namespace ternjit::targets::simt {

/// The source language.
enum class Dialect : std::uint8_t { Cuda, Hip };

/// "cuda" / "hip".
std::string_view dialect_name(Dialect d);

/// The knobs of one tmatmul kernel (a TuningSpace configuration, tuning_space.h).
/// A block holds `cols` column groups x `tpc` threads per group; a group is `cpt`
/// adjacent columns. The threads of a group split K (chunks of 64 weights, `unroll`
/// 16-byte weight loads per column in flight per thread per iteration; an activation
/// chunk is loaded once for the cpt columns) and reduce with warp shuffles (and shared
/// memory when tpc exceeds the warp); each thread keeps rows x cpt accumulators (rows
/// of M per pass, <= 8).
///
/// mma = 1 (CUDA with SimtOptions::tensor_cores, i8 x, no grouped scale): the
/// tensor-core form (int8 mma.sync.m16n8k32 on the "tmma2" weight layout below). A
/// block is `cols` warps (tpc = 32, unroll = 1); each warp computes `rows` (1 or 2)
/// tiles of 16 rows x `cpt` (1, 2 or 4) tiles of 8 columns over the whole K.
struct TMatMulConfig {
  std::uint32_t tpc = 32;    ///< threads per column group: a power of two, 1 .. 1024
  std::uint32_t cols = 4;    ///< column groups per block
  std::uint32_t unroll = 2;  ///< 1, 2 or 4 chunks per iteration
  std::uint32_t rows = 1;    ///< accumulators per thread and column: 1 .. 8
  std::uint32_t cpt = 1;     ///< columns per thread: 1, 2 or 4
  std::uint32_t mma = 0;     ///< 1: the tensor-core form (the knobs above then mean what its comment says)
  friend bool operator==(const TMatMulConfig&, const TMatMulConfig&) = default;
};

/// "tpc=32;cols=4;unroll=2;rows=1;cpt=1" (";mma=1" appended for the tensor-core form)
/// <-> TMatMulConfig; nullopt for other text.
std::string config_text(const TMatMulConfig& c);
std::optional<TMatMulConfig> parse_config(std::string_view text);

/// Generation options.
struct SimtOptions {
  Dialect dialect = Dialect::Cuda;
  std::uint32_t warp_size = 32;  ///< 32 (CUDA, RDNA wave32) or 64 (CDNA/GCN wave64)
  bool int_dot = true;           ///< dp4a / sdot4 exist; false: scalar byte multiply-adds
  /// CUDA sm_80+: the int8 mma.sync form exists (TMatMulConfig::mma; default_config
  /// picks it for i8 x without grouped scale and M >= 16). Ignored for HIP (no MFMA form:
  /// HIP keeps the dp4a/sdot4 path) and with warp 64.
  bool tensor_cores = false;
  /// The configuration of each tmatmul of the function, in step order (as
  /// tmatmul_shapes() lists them); a missing or empty entry takes default_config().
  /// Invalid text is InvalidArgument.
  std::vector<std::string> decisions;
};

/// Whether `c` can run `s` with warps of `warp_size` (block = tpc * cols threads, a
/// multiple of the warp size and at most 1024; rows <= 8; cpt 1, 2 or 4). mma = 1 needs
/// `tensor_cores`, warp 32, i8 x, no grouped scale, tpc 32, unroll 1, cols 1..8, rows
/// 1 or 2, cpt 1, 2 or 4.
bool config_valid(const TMatMulConfig& c, const TMatMulShape& s, std::uint32_t warp_size, bool tensor_cores = false);

/// The configuration used when nothing better is known: a GEMV (M = 1) splits K over
/// up to a warp per column (more threads when N is small); larger M keeps up to 8 rows
/// and 2 (M >= 2) or 4 (M >= 4) columns per thread. With `tensor_cores` (and warp 32),
/// i8 x without grouped scale and M >= 16 takes the mma form (up to 4 warps per block,
/// 2 column tiles per warp, 2 row tiles when M >= 32).
TMatMulConfig default_config(const TMatMulShape& s, std::uint32_t warp_size, bool tensor_cores = false);

/// A grid or block extent.
struct Dim3 {
  std::uint32_t x = 1, y = 1, z = 1;
  friend bool operator==(const Dim3&, const Dim3&) = default;
};

/// One kernel parameter.
struct KernelArg {
  enum class Kind : std::uint8_t {
    Input,    ///< function argument buffer `index`
    Output,   ///< function result buffer `index`
    Const,    ///< load-time value `index` (plan.load_time[index]) as LoadValue::encoded() bytes
    Weight,   ///< KernelSet::weights[index], packed by pack_ternary_weight()
    Scratch,  ///< scratch buffer `index` (KernelSet::scratch_bytes[index] bytes)
    Scalar,   ///< the 32-bit unsigned `scalar`
  };
  Kind kind = Kind::Input;
  std::size_t index = 0;
  std::uint32_t scalar = 0;
  friend bool operator==(const KernelArg&, const KernelArg&) = default;
};

/// One kernel launch.
struct KernelLaunch {
  std::string name;               ///< the extern "C" function in KernelSet::source
  Dim3 grid, block;
  std::uint32_t shared_bytes = 0; ///< dynamic shared memory (0: kernels use static shared memory)
  std::vector<KernelArg> args;
  ir::InstId inst;                ///< the instruction it computes (tj_copy, tj_rowsum: the step it serves)
  std::string op;                 ///< "tmatmul", "rowsum", "quantize", "copy", ... (for listings)
  std::int64_t tmatmul = -1;      ///< a tmatmul kernel: its index in tmatmul_shapes(); else -1
};

/// The device layouts of a ternary weight (see the file comment).
enum class WeightLayout : std::uint8_t {
  Codes64,  ///< "tcodes64": the dp4a / sdot4 / scalar kernels
  Mma2,     ///< "tmma2": the mma.sync kernels (pre-swizzled in fragment order)
};

/// A ternary weight the program reads (one per distinct load-time weight value and layout).
struct WeightUse {
  std::size_t load_time = 0;  ///< plan.load_time index of the t2 [K, N] value
  std::string param;          ///< the parameter's name ("" when it is not a parameter)
  std::int64_t k = 0, n = 0;
  WeightLayout layout = WeightLayout::Codes64;
};

/// The generated kernels of one function: their source (one translation unit) and
/// their launch plan.
struct KernelSet {
  Dialect dialect = Dialect::Cuda;
  std::uint32_t warp_size = 32;
  std::string source;                      ///< one translation unit: every kernel
  std::vector<KernelLaunch> kernels;       ///< in launch order
  std::vector<std::size_t> scratch_bytes;  ///< by scratch id
  std::vector<WeightUse> weights;          ///< by KernelArg::Weight index
  std::vector<TMatMulShape> tmatmuls;      ///< tmatmul_shapes() of the function
  std::vector<TMatMulConfig> configs;      ///< the configuration each tmatmul got
  StepPlan plan;                           ///< in_bytes, out_bytes, load_time (Const indices)
};

/// Success when generate() handles every step of `f` (single block, static shapes;
/// ops: tmatmul (i8 or f32 x, t2 load-time weights, f32 result, row/column epilogue,
/// grouped w_scale), ewise and the elementwise ops, quantize, quantize_int8, rmsnorm,
/// softmax, reduce_sum/mean/max); otherwise Unsupported naming the first it cannot do.
Result<void> supported(const ir::Function& f);

/// The tmatmuls of `f` in step order (precondition: supported(f)).
std::vector<TMatMulShape> tmatmul_shapes(const ir::Function& f);

/// Generates `function` of `specialized`. Errors: NotFound for a missing function,
/// Unsupported (supported()), InvalidArgument for a bad decision or options (warp
/// size other than 32/64).
Result<KernelSet> generate(const ir::Module& specialized, std::string_view function, const SimtOptions& options);

/// A device layout's name (part of a weight's DeviceWeights key): "tcodes64", "tmma2".
std::string_view layout_name(WeightLayout layout = WeightLayout::Codes64);

/// Bytes of a packed [K, N] weight: tcodes64 N * ceil(K / 64) * 16; tmma2
/// ceil(N / 8) * ceil(K / 256) * 512.
std::size_t packed_weight_bytes(std::int64_t k, std::int64_t n, WeightLayout layout = WeightLayout::Codes64);

/// Packs a ternary [K, N] weight (elements read as int8 through `value.read_int8`,
/// row-major) into `layout` (above). Errors: InvalidInput for an element other than
/// -1, 0, 1 (naming it) or a shape that is not [K, N]; InvalidArgument when the size
/// overflows.
Result<std::vector<std::uint8_t>> pack_ternary_weight(const LoadValue& value, std::int64_t k, std::int64_t n,
                                                      WeightLayout layout = WeightLayout::Codes64);

/// The same from plain row-major int8 values (tests, benches).
Result<std::vector<std::uint8_t>> pack_ternary_weight(const std::int8_t* w, std::int64_t k, std::int64_t n,
                                                      WeightLayout layout = WeightLayout::Codes64);

}  // namespace ternjit::targets::simt
