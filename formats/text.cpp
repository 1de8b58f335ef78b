// SPDX-License-Identifier: Apache-2.0
// text.cpp - file text made printable: control bytes, C1 controls and invalid UTF-8 escaped.
#include "formats/text.h"

#include <cstdint>
#include <cstdio>

namespace ternjit::formats {
namespace {

// The length of the valid UTF-8 sequence of a printable character at s[i] (1 to 4), or 0
// when s[i] is a control byte, starts a C1 control, or starts no valid sequence (a stray
// continuation byte, an overlong form, a surrogate, a code point past U+10FFFF, a cut one).
std::size_t printable_length(std::string_view s, std::size_t i) {
  const auto at = [&](std::size_t k) { return static_cast<std::uint8_t>(s[k]); };
  const std::uint8_t c = at(i);
  if (c < 0x80) return c >= 0x20 && c != 0x7F ? 1 : 0;
  // Lead byte -> length and the range its second byte must fall in (RFC 3629, section 4).
  std::size_t len = 0;
  std::uint8_t lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) len = 2;
  else if (c == 0xE0) len = 3, lo = 0xA0;
  else if (c >= 0xE1 && c <= 0xEC) len = 3;
  else if (c == 0xED) len = 3, hi = 0x9F;
  else if (c >= 0xEE && c <= 0xEF) len = 3;
  else if (c == 0xF0) len = 4, lo = 0x90;
  else if (c >= 0xF1 && c <= 0xF3) len = 4;
  else if (c == 0xF4) len = 4, hi = 0x8F;
  else return 0;
  if (i + len > s.size() || at(i + 1) < lo || at(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < len; ++k)
    if (at(i + k) < 0x80 || at(i + k) > 0xBF) return 0;
  if (c == 0xC2 && at(i + 1) <= 0x9F) return 0;  // U+0080..U+009F: the C1 controls
  return len;
}

}  // namespace

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    if (const std::size_t len = printable_length(text, i); len != 0) {
      out.append(text.substr(i, len));
      i += len;
      continue;
    }
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\x%02X", static_cast<unsigned>(static_cast<std::uint8_t>(text[i])));
    out += buf;
    ++i;
  }
  return out;
}

std::string quoted_printable(std::string_view text, std::size_t max_bytes) {
  if (text.size() <= max_bytes) return "'" + printable(text) + "'";
  return "'" + printable(text.substr(0, max_bytes)) + "...'";
}

}  // namespace ternjit::formats
