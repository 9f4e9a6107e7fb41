// Strict UTF-8 decoding of one character, shared by the GPT-2 pre-tokenizer and vocab reader.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace trident {

struct Utf8Char {
  uint32_t cp;   // the code point, or the lone byte's value when !valid
  size_t len;    // bytes consumed: 1 for an invalid byte
  bool valid;
};

// Decodes the character at `pos` (< s.size()). Overlong forms, surrogates, code points past
// U+10FFFF, truncated sequences and stray continuation bytes yield one invalid byte.
inline Utf8Char decode_utf8(std::string_view s, size_t pos) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(s[i]); };
  const uint8_t b0 = byte(pos);
  if (b0 < 0x80) return {b0, 1, true};
  const Utf8Char invalid{b0, 1, false};
  size_t len;
  uint32_t cp, min_cp;
  if (b0 >= 0xC2 && b0 <= 0xDF) len = 2, cp = b0 & 0x1Fu, min_cp = 0x80;
  else if (b0 >= 0xE0 && b0 <= 0xEF) len = 3, cp = b0 & 0x0Fu, min_cp = 0x800;
  else if (b0 >= 0xF0 && b0 <= 0xF4) len = 4, cp = b0 & 0x07u, min_cp = 0x10000;
  else return invalid;
  if (pos + len > s.size()) return invalid;
  for (size_t i = 1; i < len; ++i) {
    const uint8_t b = byte(pos + i);
    if ((b & 0xC0) != 0x80) return invalid;
    cp = (cp << 6) | (b & 0x3Fu);
  }
  if (cp < min_cp || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return invalid;
  return {cp, len, true};
}

}  // namespace trident
