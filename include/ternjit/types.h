// SPDX-License-Identifier: Apache-2.0
// types.h - element kinds and user-facing shapes (static extents or named symbols).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ternjit {

/// The element kinds of tensors. `T2` is a ternary value in {-1, 0, +1}; how it is
/// stored (tern2, tern1.6, interleaved...) is a storage format, not a kind.
/// `U8` exists for raw bytes (packed weights, safetensors u8); `Bool` for masks.
enum class ElemKind : std::uint8_t { T2, I8, U8, I32, F16, BF16, F32, Bool };

/// All element kinds, in declaration order.
inline constexpr ElemKind kAllElemKinds[] = {ElemKind::T2,  ElemKind::I8,   ElemKind::U8,  ElemKind::I32,
                                             ElemKind::F16, ElemKind::BF16, ElemKind::F32, ElemKind::Bool};

/// The IR spelling of a kind: "t2", "i8", "u8", "i32", "f16", "bf16", "f32", "bool".
std::string_view elem_name(ElemKind k);

/// Parses an IR spelling (also accepts "f32"'s DSL alias "float32"); nullopt if unknown.
std::optional<ElemKind> parse_elem_kind(std::string_view s);

/// True for F16, BF16 and F32.
constexpr bool is_float(ElemKind k) { return k == ElemKind::F16 || k == ElemKind::BF16 || k == ElemKind::F32; }

/// True for T2, I8, U8, I32 and Bool (values are integers).
constexpr bool is_integer(ElemKind k) { return !is_float(k); }

/// Bits of one element in an unpacked host buffer (T2 and Bool: 8).
constexpr int elem_bits(ElemKind k) {
  switch (k) {
    case ElemKind::T2: case ElemKind::I8: case ElemKind::U8: case ElemKind::Bool: return 8;
    case ElemKind::F16: case ElemKind::BF16: return 16;
    case ElemKind::I32: case ElemKind::F32: return 32;
  }
  return 0;
}

/// How weights are stored: `Plain` is one element per value in the declared kind, row-major
/// (the layout every op reads); the others pack ternary values (formats/ternary.h gives the
/// bytes). One enum names the concept everywhere: Program::bind's buffers, the
/// "<tensor>.format" metadata of safetensors files, and the storage layout of a t2 type
/// in the IR (`t2<tern2>[K, N]`).
enum class WeightFormat : std::uint8_t { Plain, Tern2, Tern2SM, Tern16, Bitplane };

/// All weight formats, in declaration order.
inline constexpr WeightFormat kAllWeightFormats[] = {WeightFormat::Plain, WeightFormat::Tern2, WeightFormat::Tern2SM,
                                                     WeightFormat::Tern16, WeightFormat::Bitplane};

/// The one spelling of a format, in IR text, file metadata and CLI flags alike:
/// "plain", "tern2", "tern2-sm", "tern1.6" or "bitplane".
std::string_view weight_format_name(WeightFormat f);

/// Parses a spelling produced by weight_format_name (exact, case-sensitive); nullopt if unknown.
std::optional<WeightFormat> parse_weight_format(std::string_view s);

/// One dimension as a user writes it: a static extent or a symbol name ("N").
struct Dim {
  std::int64_t extent = -1;  ///< >= 0 when static
  std::string symbol;        ///< non-empty when symbolic

  Dim(std::int64_t e) : extent(e) {}                      // NOLINT: implicit, `{4, "N"}` reads naturally
  Dim(const char* s) : symbol(s) {}                        // NOLINT
  Dim(std::string s) : symbol(std::move(s)) {}             // NOLINT
  [[nodiscard]] bool is_static() const { return symbol.empty(); }
  friend bool operator==(const Dim&, const Dim&) = default;
};

/// A user-facing shape: a list of dims.
using Shape = std::vector<Dim>;

}  // namespace ternjit
