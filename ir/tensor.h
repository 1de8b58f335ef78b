// SPDX-License-Identifier: Apache-2.0
// tensor.h - HostTensor, the interpreter's value: a row-major tensor of exact element values.
//
// Every element is stored as a double that holds a value exactly representable in the
// tensor's kind: f32/f16/bf16 values are rounded to the kind (NaN and +-inf allowed),
// integer kinds hold integers in the kind's range, t2 holds -1/0/+1 and bool 0/1. A
// double represents every value of every kind exactly, so one storage type serves all
// kinds and the arithmetic of each op is spelled out explicitly in interpret.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ternjit/result.h"
#include "ternjit/types.h"

namespace ternjit::ir {

/// A host tensor: element kind, concrete shape and row-major element values.
/// Invariant (checked by validate(), assumed by the helpers below): every extent is
/// >= 0, data.size() == numel(), and each value is representable in `kind`.
struct HostTensor {
  ElemKind kind = ElemKind::F32;
  std::vector<std::int64_t> shape;
  std::vector<double> data;

  /// The product of the extents (1 for a scalar). Precondition: extents >= 0.
  [[nodiscard]] std::int64_t numel() const;

  /// A tensor of `shape` filled with zeros. Precondition: extents >= 0.
  static HostTensor zeros(ElemKind kind, std::vector<std::int64_t> shape);
  /// A rank-0 tensor holding `value` rounded to `kind` (round_to_kind).
  static HostTensor scalar(ElemKind kind, double value);
  /// An f32 tensor with the given values. Precondition (aborts otherwise): values.size()
  /// equals the product of `shape`, extents >= 0.
  static HostTensor from_f32(std::vector<std::int64_t> shape, std::span<const float> values);
  /// An i8 tensor with the given values. Precondition as from_f32.
  static HostTensor from_i8(std::vector<std::int64_t> shape, std::span<const std::int8_t> values);
  /// An i32 tensor with the given values. Precondition as from_f32.
  static HostTensor from_i32(std::vector<std::int64_t> shape, std::span<const std::int32_t> values);
  /// A tensor of `kind` whose values are `values` rounded with round_to_kind (floats to
  /// nearest even, integers half to even and saturated, t2 clamped, bool v != 0).
  /// Precondition as from_f32.
  static HostTensor from_values(ElemKind kind, std::vector<std::int64_t> shape,
                                std::span<const double> values);

  /// Decodes little-endian raw bytes: f32/i32 4 bytes, f16/bf16 2 bytes (IEEE binary16 /
  /// bfloat16 bits), i8/u8/t2/bool 1 byte. t2 bytes are signed i8 values and must be in
  /// {-1, 0, 1}; bool bytes must be 0 or 1.
  /// Errors (InvalidInput): a negative extent, a too-large shape, a byte count that is not
  /// numel * bytes-per-element, an invalid t2/bool byte (the message names its index).
  static Result<HostTensor> from_bytes(ElemKind kind, std::vector<std::int64_t> shape,
                                       std::span<const std::uint8_t> bytes);

  /// Deterministic random tensor from std::mt19937_64(seed), one draw per element in
  /// index order, mapped without std distributions (whose algorithms are unspecified):
  /// floats u = (draw >> 11) * 2^-53, value 2u - 1 in [-1, 1) rounded to the kind (f16
  /// and bf16 may round up to 1.0); i8 in [-127, 127], u8 in [0, 255], i32 in
  /// [-1000, 1000] and t2 in {-1, 0, 1} as draw % range + low; bool draw % 2.
  /// Precondition: extents >= 0. Identical on every platform for a given seed.
  static HostTensor random(ElemKind kind, std::vector<std::int64_t> shape, std::uint64_t seed);

  /// The values as floats (static_cast; exact for float kinds and for small integers).
  [[nodiscard]] std::vector<float> to_f32() const;
  /// The values as int8 (each rounded with round_to_kind(v, I8): saturated, NaN -> 0).
  [[nodiscard]] std::vector<std::int8_t> to_i8() const;
  /// The values as int32 (each rounded with round_to_kind(v, I32)).
  [[nodiscard]] std::vector<std::int32_t> to_i32() const;
  /// Encodes to the little-endian byte layout from_bytes reads (t2 as i8 bytes).
  /// Precondition: the tensor is valid.
  [[nodiscard]] std::vector<std::uint8_t> to_bytes() const;

  /// The type as text: "f32[2, 3]"; a scalar is "f32[]".
  [[nodiscard]] std::string describe() const;
};

/// Checks the HostTensor invariant. `what` names the tensor in the message
/// ("argument %x", "parameter @w"). Errors (InvalidInput): a negative extent, an element
/// count that overflows, data.size() != numel(), or a value not representable in the
/// kind (the message names the multi-index and the value).
Result<void> validate(const HostTensor& t, std::string_view what);

/// The product of `shape`'s extents (1 for a scalar), or nullopt when an extent is
/// negative or the product overflows int64.
std::optional<std::int64_t> checked_numel(std::span<const std::int64_t> shape);

/// The value of one little-endian element of `kind` at `p`, in the from_bytes layout
/// (t2 as a signed byte; t2 and bool values are not range-checked here).
double decode_element(ElemKind kind, const std::uint8_t* p);

/// Writes `v` (representable in `kind`) at `p` as one little-endian element in the
/// to_bytes layout (elem_bits(kind) / 8 bytes).
void encode_element(ElemKind kind, double v, std::uint8_t* p);

/// The value stream behind HostTensor::random: one std::mt19937_64 draw per element,
/// mapped as that function documents. Anything drawing from the same seed in the same
/// order gets the same values.
class RandomValues {
 public:
  /// A stream seeded with `seed`.
  explicit RandomValues(std::uint64_t seed) : gen_(seed) {}
  /// The next value, for an element of `kind`.
  double next(ElemKind kind);

 private:
  std::mt19937_64 gen_;
};

/// The row-major multi-index of flat element `flat` of `shape` (all zeros when a dim is 0).
std::vector<std::int64_t> multi_index(std::int64_t flat, std::span<const std::int64_t> shape);

/// A row-major multi-index as text: "[1, 2]"; a scalar's is "[]".
std::string index_str(std::span<const std::int64_t> index);

/// The first difference compare() found between an expected and an actual tensor.
struct Mismatch {
  /// What differs: the element kind, the shape, the data size (invalid tensor), or a value.
  enum class Reason : std::uint8_t { Kind, Shape, Size, Value };
  Reason reason = Reason::Value;
  std::vector<std::int64_t> index;  ///< multi-index of the first differing element (Value)
  double expected = 0;              ///< the expected element (Value)
  double actual = 0;                ///< the actual element (Value)
  std::string message;              ///< one line, e.g. "element [1, 0]: expected 0.5, got 0.625"
};

/// Compares element by element in row-major order and reports the first mismatch, or
/// nullopt when the tensors agree. Kinds and shapes must be equal. Elements agree when
/// they are equal (so -0 == +0 and equal infinities agree), both are NaN, or both are
/// finite and |actual - expected| <= atol + rtol * |expected| (numpy.isclose): a NaN or an
/// infinity agrees only with its own class (NaN, +inf, -inf), whatever the tolerance. With
/// rtol = atol = 0 the comparison is exact. The oracle of every target test. rtol and atol
/// are meant finite: an infinite one accepts every finite pair (output_tolerance never
/// gives one).
std::optional<Mismatch> compare(const HostTensor& expected, const HostTensor& actual, double rtol,
                                double atol);

/// The tolerance of compare() for an output checked against its own magnitude.
struct OutputTolerance {
  double rtol = 0;
  double atol = 0;
};

/// rtol = `rel` and atol = `rel` * the largest |e| over the *finite* elements of `expected`
/// (0 when it has none): a NaN or an infinity in the output never widens the finite
/// elements' tolerance (it must match in class, compare()). `run --check` and `bench` use
/// it with rel = 1e-4 for float outputs (docs/cli.md).
OutputTolerance output_tolerance(const HostTensor& expected, double rel);

}  // namespace ternjit::ir
