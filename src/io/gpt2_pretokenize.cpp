// GPT-2's pre-tokenization regex as a hand-written scanner over UTF-8 (no regex library), with
// the letter/number/space classes of char_class.hpp.
#include "gpt2_pretokenize.hpp"

#include "char_class.hpp"

namespace trident {
namespace {

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
