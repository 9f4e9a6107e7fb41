// GPT-2's pre-tokenization regex as a hand-written scanner over UTF-8 (no regex library), with
// letter/number/space classes from tables generated from node, the reference encoder's runtime.
#include "gpt2_pretokenize.hpp"

#include <array>
#include <cstdint>

#include "utf8.hpp"

namespace trident {
namespace {

struct CodeRange {
  uint32_t first, last;
};
#include "unicode_tables.inc"

enum class CharClass : uint8_t { kLetter, kNumber, kSpace, kOther };

struct Char {
  CharClass cls;
  size_t len;   // bytes
};

template <size_t N>
constexpr bool in_table(const CodeRange (&table)[N], uint32_t cp) {
  // Binary search for the first range that ends at or after cp.
  size_t lo = 0, hi = N;
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    if (table[mid].last < cp) lo = mid + 1;
    else hi = mid;
  }
  return lo < N && table[lo].first <= cp;
}

constexpr CharClass classify(uint32_t cp) {
  if (in_table(kLetterRanges, cp)) return CharClass::kLetter;
  if (in_table(kNumberRanges, cp)) return CharClass::kNumber;
  if (in_table(kSpaceRanges, cp)) return CharClass::kSpace;
  return CharClass::kOther;
}

// ASCII is most of the text; its classes come from the same tables, looked up once.
constexpr std::array<CharClass, 128> make_ascii_classes() {
  std::array<CharClass, 128> t{};
  for (uint32_t c = 0; c < 128; ++c) t[c] = classify(c);
  return t;
}
constexpr std::array<CharClass, 128> kAsciiClasses = make_ascii_classes();

// The class and byte length of the character at `pos`; a byte that is not valid UTF-8 is one kOther.
Char char_at(std::string_view s, size_t pos) {
  const uint8_t b0 = static_cast<uint8_t>(s[pos]);
  if (b0 < 0x80) return {kAsciiClasses[b0], 1};
  const Utf8Char c = decode_utf8(s, pos);
  return {c.valid ? classify(c.cp) : CharClass::kOther, c.len};
}

// 's 't 're 've 'm 'll 'd (lower case only, as the regex has no i flag): its length, or 0.
size_t contraction_length(std::string_view s, size_t pos) {
  const std::string_view rest = s.substr(pos + 1);
  if (rest.empty()) return 0;
  const char c = rest[0];
  if (c == 's' || c == 't' || c == 'm' || c == 'd') return 2;
  if (rest.size() >= 2 && (rest.substr(0, 2) == "re" || rest.substr(0, 2) == "ve" || rest.substr(0, 2) == "ll"))
    return 3;
  return 0;
}

}  // namespace

size_t gpt2_piece_end(std::string_view s, size_t pos) {
  if (s[pos] == '\'') {
    if (const size_t n = contraction_length(s, pos)) return pos + n;
  }

  // " ?\p{L}+", " ?\p{N}+", " ?[^\s\p{L}\p{N}]+": an optional leading space, then a run of one
  // class. The classes are disjoint, so the first character picks the alternative.
  size_t start = pos;
  if (s[pos] == ' ' && pos + 1 < s.size() && char_at(s, pos + 1).cls != CharClass::kSpace) start = pos + 1;
  const Char first = char_at(s, start);
  if (first.cls != CharClass::kSpace) {
    size_t end = start + first.len;
    while (end < s.size()) {
      const Char c = char_at(s, end);
      if (c.cls != first.cls) break;
      end += c.len;
    }
    return end;
  }

  // "\s+(?!\S)|\s+": a whitespace run, less its last character when text follows the run, so
  // that character can lead the next piece (" word"); a single character is taken alone.
  size_t end = pos, last = pos;
  while (end < s.size()) {
    const Char c = char_at(s, end);
    if (c.cls != CharClass::kSpace) break;
    last = end;
    end += c.len;
  }
  return end == s.size() || last == pos ? end : last;
}

}  // namespace trident
