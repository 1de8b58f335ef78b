// SPDX-License-Identifier: Apache-2.0
// text.h - text that comes from a weights file: the length its tensor names may have, and
// how any of it is printed (escaped, so a file cannot write to a terminal).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ternjit::formats {

/// The longest tensor name the GGUF and safetensors readers accept, in bytes. ggml itself
/// keeps names under 64 bytes and Hugging Face checkpoints under 200; a longer name is a
/// file error naming the file and the tensor's index, so name maps and messages only ever
/// see names of bounded length.
inline constexpr std::size_t kMaxTensorNameBytes = 4096;

/// `text` from a file made safe to print on a terminal or in a one-line message: printable
/// ASCII and valid UTF-8 stay as they are; control bytes (0x00-0x1F, 0x7F), the C1
/// controls U+0080..U+009F (whose U+009B is a CSI on some terminals) and every byte of
/// invalid UTF-8 become "\xHH" per byte. So no escape sequence from a file reaches a
/// terminal. Every key, tensor name, metadata string and dtype a file holds goes through
/// this (or quoted_printable) before it is printed.
std::string printable(std::string_view text);

/// printable(text) in single quotes, for messages: "'blk.0.w'". Text longer than
/// `max_bytes` is cut there and marked "..." (a message about a 4 KB name stays short).
std::string quoted_printable(std::string_view text, std::size_t max_bytes = 200);

}  // namespace ternjit::formats
