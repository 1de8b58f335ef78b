// SPDX-License-Identifier: Apache-2.0
// plan_internal.h - what plan.cpp and the step files (data_ops.cpp, dense.cpp, attention.cpp) share:
// a value's location during a call, load-time values, the frame a step runs in, the Step interface
// and the lowering hooks of the ops that live outside plan.cpp. Private to targets/x86.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ir/ir.h"
#include "targets/common/step_plan.h"
#include "targets/load_value.h"
#include "targets/x86/isa.h"
#include "targets/x86/parallel.h"
#include "targets/x86/x86_target.h"
#include "ternjit/result.h"

namespace ternjit::targets::x86 {

using Loc = Slot;
using LocKind = SlotKind;

/// A load-time value (a parameter in its stored form, or computed at build time) and its
/// bytes when a kernel reads it: `data` points at the stored bytes of a bound parameter of
/// a byte-aligned kind (no copy: a 656 MB embedding table is read where it is mapped), else
/// at `bytes` (the value encoded once, on first use). `evaluated` is false for a value no
/// step reads (a transpose of a parameter that a kernel reads through its source).
struct ConstValue {
  LoadValue value;
  std::string expr;  // "param @L.w", "tquantize.0(param @L.w)": identifies it for packing
  std::vector<std::uint8_t> bytes;
  const std::uint8_t* data = nullptr;
  bool has_bytes = false;
  bool evaluated = true;
  [[nodiscard]] ir::HostTensor tensor() const { return value.tensor(); }
};

/// What a running step can see.
struct Frame {
  void* const* buffers;
  std::size_t n_in;
  std::uint8_t* scratch;
  const std::vector<ConstValue>* consts;
  const Parallel* parallel;
  std::int64_t rows = 0;  // > 0: this call's rows of axis 0 (fewer than rows_max)
  std::int64_t rows_max = 0;

  [[nodiscard]] void* ptr(const Loc& l) const {
    switch (l.kind) {
      case LocKind::Arg: return buffers[l.index];
      case LocKind::Out: return buffers[n_in + l.index];
      case LocKind::Scratch: return scratch + l.index;
      case LocKind::Const: return const_cast<std::uint8_t*>((*consts)[l.index].data);
    }
    return nullptr;
  }
};

class Step {
 public:
  virtual ~Step() = default;
  virtual Result<void> run(const Frame& fr) const = 0;
  [[nodiscard]] virtual StepCode describe() const = 0;
};

/// What the lowering hooks below are given about the instruction being lowered.
struct LowerContext {
  const ir::Function& f;
  ir::InstId inst;
  Isa isa;
  bool allow_foreign_isa;
  std::int64_t rows_max;          ///< PlanOptions::rows_max (0: static rows)
  std::vector<Loc> in, out;       ///< operand and result locations (consts as bytes)
  std::string summary;            ///< the instruction in IR text
};

/// The vector path of the compiled step kernels: 512-bit on Avx512 and up, else 256-bit.
[[nodiscard]] inline bool wide_vectors(Isa isa) { return isa >= Isa::Avx512; }

/// True for the ops lower_data_op / lower_attention_op may take (the plan asks them only then).
bool lowered_by_step_files(ir::Op op);

/// Data movement and conversion (data_ops.cpp): cast, broadcast, transpose of any rank
/// and permutation, and - once the IR has them - slice, concat, gather, kv_write. Returns
/// null when `ctx.inst` is not one of those forms (the caller falls back); Unsupported
/// when the plan has run-time rows that the op cannot honour.
Result<std::unique_ptr<Step>> lower_data_op(const LowerContext& ctx);

/// The transformer ops (attention.cpp): rope, layernorm, causal_softmax, attention. Null
/// when `ctx.inst` is none of them.
Result<std::unique_ptr<Step>> lower_attention_op(const LowerContext& ctx);

/// A dense `matmul(a f32 [M, K], transpose(p))` with p a load-time [N, K] f32/f16/bf16 value
/// read as stored (dense.cpp): `p` is p's constant; `a`/`c` A's and C's locations.
Result<std::unique_ptr<Step>> make_dense_nk_step(const LowerContext& ctx, std::int64_t M, std::int64_t K,
                                                 std::int64_t N, ElemKind p_kind, Loc a, Loc p, Loc c);

}  // namespace ternjit::targets::x86
