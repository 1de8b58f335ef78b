// SPDX-License-Identifier: Apache-2.0
// elem_io.h - one element of any byte-aligned kind read as its exact value, and a value stored
// with the IR's rounding (ir::round_to_kind): the scalar paths of the x86 step files. Private.
#pragma once

#include <cstdint>
#include <cstring>

#include "ir/builder.h"
#include "ir/numeric.h"
#include "ternjit/types.h"

namespace ternjit::targets::x86 {

/// Element i of a buffer of kind k (not t2), exactly.
inline double load_elem(ElemKind k, const std::uint8_t* p, std::int64_t i) {
  switch (k) {
    case ElemKind::F32: {
      float v;
      std::memcpy(&v, p + 4 * i, 4);
      return v;
    }
    case ElemKind::I32: {
      std::int32_t v;
      std::memcpy(&v, p + 4 * i, 4);
      return v;
    }
    case ElemKind::F16:
    case ElemKind::BF16: {
      std::uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      return k == ElemKind::F16 ? ir::f16_bits_to_f32(h) : ir::bf16_bits_to_f32(h);
    }
    case ElemKind::I8: return static_cast<std::int8_t>(p[i]);
    case ElemKind::U8:
    case ElemKind::Bool: return p[i];
    case ElemKind::T2: break;
  }
  return 0;
}

/// Stores v rounded to kind k (round_to_kind: float -> int rounds half to even and
/// saturates, NaN -> 0) as element i.
inline void store_elem(ElemKind k, std::uint8_t* p, std::int64_t i, double v) {
  const double r = ir::round_to_kind(v, k);
  switch (k) {
    case ElemKind::F32: {
      const auto f = static_cast<float>(r);
      std::memcpy(p + 4 * i, &f, 4);
      return;
    }
    case ElemKind::I32: {
      const auto x = static_cast<std::int32_t>(r);
      std::memcpy(p + 4 * i, &x, 4);
      return;
    }
    case ElemKind::F16:
    case ElemKind::BF16: {
      const auto f = static_cast<float>(r);  // exact: r is a value of the kind
      const std::uint16_t h = k == ElemKind::F16 ? ir::f32_to_f16_bits(f) : ir::f32_to_bf16_bits(f);
      std::memcpy(p + 2 * i, &h, 2);
      return;
    }
    case ElemKind::I8: p[i] = static_cast<std::uint8_t>(static_cast<std::int8_t>(r)); return;
    case ElemKind::U8:
    case ElemKind::Bool: p[i] = static_cast<std::uint8_t>(r); return;
    case ElemKind::T2: return;
  }
}


}  // namespace ternjit::targets::x86
