// SPDX-License-Identifier: Apache-2.0
// text.h - text that comes from a weights file: the length its tensor names may have.
#pragma once

#include <cstddef>

namespace ternjit::formats {

/// The longest tensor name the GGUF and safetensors readers accept, in bytes. ggml itself
/// keeps names under 64 bytes and Hugging Face checkpoints under 200; a longer name is a
/// file error naming the file and the tensor's index, so name maps and messages only ever
/// see names of bounded length.
inline constexpr std::size_t kMaxTensorNameBytes = 4096;

}  // namespace ternjit::formats
