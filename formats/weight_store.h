// SPDX-License-Identifier: Apache-2.0
// weight_store.h - caller buffers and file tensors to StoredTensors in a parameter's own element type.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/stored_tensor.h"
#include "ternjit/result.h"
#include "ternjit/types.h"

namespace ternjit::formats {

/// Stores `bytes`, which hold the elements of `shape` as kind `given` in `format`, as a
/// parameter declared with element kind `declared`:
///   - a packed format (declared t2, given u8): store_packed (tern2 kept as is);
///   - Plain, given == declared: the bytes as they are (StoredTensor::view);
///   - Plain, declared t2, given t2 or i8 (one signed byte per value): packed to tern2;
///   - Plain, declared and given both float kinds: each value rounded to the declared kind.
/// Owned `bytes` kept as they are are shared, borrowed ones copied (SharedBytes::keep);
/// the conversions write new buffers of the stored size, never a wider temporary.
/// Precondition (aborts otherwise): the combination is one of these; callers decide which
/// kinds they accept and word the refusal. Errors (InvalidInput): a bad shape, a byte
/// count other than the shape needs ("t2[4, 2] needs 8 bytes, got 7"; packed: as
/// unpack_ternary), a value outside {-1, 0, 1} or an invalid code or bool byte (naming
/// the element).
Result<ir::StoredTensor> store_weight(ElemKind declared, ElemKind given, WeightFormat format,
                                      std::vector<std::int64_t> shape, const ir::SharedBytes& bytes);

}  // namespace ternjit::formats
