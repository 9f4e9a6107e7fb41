// The letter / number / whitespace classes of the byte-level BPE pre-tokenizers' regexes
// (\p{L}, \p{N} and JavaScript's \s), per character of UTF-8 text.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace trident {

enum class CharClass : uint8_t { kLetter, kNumber, kSpace, kOther };

struct Char {
  CharClass cls;
  size_t len;   // bytes
};

// The class of a code point, from src/io/unicode_tables.inc.
CharClass classify(uint32_t cp);
// Valid UTF-8 decoded at pos; for other bytes.
Char non_ascii_char_at(std::string_view s, size_t pos);
extern const std::array<CharClass, 128> kAsciiClasses;

// The class and byte length of the character at `pos` (< s.size()). A byte that is not part of
// valid UTF-8 is one kOther character, so any byte string splits without loss.
inline Char char_at(std::string_view s, size_t pos) {
  const uint8_t b0 = static_cast<uint8_t>(s[pos]);
  if (b0 < 0x80) return {kAsciiClasses[b0], 1};
  return non_ascii_char_at(s, pos);
}

}  // namespace trident
