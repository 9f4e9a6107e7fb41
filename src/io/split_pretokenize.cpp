// Llama 3's and Qwen 2's pre-tokenization regexes as one hand-written scanner over UTF-8.
#include "split_pretokenize.hpp"

#include "char_class.hpp"

namespace trident {
namespace {

constexpr const char* kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

// 's 't 're 've 'm 'll 'd in either case: its length, or 0.
size_t contraction_length(std::string_view s, size_t pos) {
  if (pos + 1 >= s.size()) return 0;
  const char c = lower(s[pos + 1]);
  if (c == 's' || c == 't' || c == 'm' || c == 'd') return 2;
  if (pos + 2 >= s.size()) return 0;
  const char d = lower(s[pos + 2]);
  if ((c == 'r' && d == 'e') || (c == 'v' && d == 'e') || (c == 'l' && d == 'l')) return 3;
  return 0;
}

bool is_newline(char c) { return c == '\r' || c == '\n'; }

// End of the run of `cls` characters from `pos`, taking at most `max_chars` of them.
size_t run_end(std::string_view s, size_t pos, CharClass cls, size_t max_chars = SIZE_MAX) {
  size_t n = 0;
  while (pos < s.size() && n < max_chars) {
    const Char c = char_at(s, pos);
    if (c.cls != cls) break;
    pos += c.len;
    ++n;
  }
  return pos;
}

}  // namespace

std::optional<SplitPattern> known_split_pattern(const std::string& regex) {
  if (regex == kLlama3Regex) return SplitPattern::kLlama3;
  if (regex == kQwen2Regex) return SplitPattern::kQwen2;
  return std::nullopt;
}

size_t split_piece_end(SplitPattern pattern, std::string_view s, size_t pos) {
  if (s[pos] == '\'') {
    if (const size_t n = contraction_length(s, pos)) return pos + n;
  }
  const Char first = char_at(s, pos);

  // "[^\r\n\p{L}\p{N}]?\p{L}+": letters, led by at most one character of neither class.
  if (first.cls == CharClass::kLetter) return run_end(s, pos, CharClass::kLetter);
  const bool can_lead = first.cls != CharClass::kNumber && !is_newline(s[pos]);
  if (can_lead && pos + first.len < s.size() && char_at(s, pos + first.len).cls == CharClass::kLetter)
    return run_end(s, pos + first.len, CharClass::kLetter);

  // "\p{N}{1,3}" or "\p{N}"
  if (first.cls == CharClass::kNumber)
    return run_end(s, pos, CharClass::kNumber, pattern == SplitPattern::kLlama3 ? 3 : 1);

  // " ?[^\s\p{L}\p{N}]+[\r\n]*": punctuation, led by at most one space, then any line breaks.
  size_t start = pos;
  if (s[pos] == ' ' && pos + 1 < s.size() && char_at(s, pos + 1).cls == CharClass::kOther) start = pos + 1;
  if (char_at(s, start).cls == CharClass::kOther) {
    size_t end = run_end(s, start, CharClass::kOther);
    while (end < s.size() && is_newline(s[end])) ++end;
    return end;
  }

  // What is left starts with whitespace. "\s*[\r\n]+": the run up to its last line break.
  size_t end = pos, last = pos, after_newline = 0;
  while (end < s.size()) {
    const Char c = char_at(s, end);
    if (c.cls != CharClass::kSpace) break;
    last = end;
    end += c.len;
    if (is_newline(s[last])) after_newline = end;
  }
  if (after_newline) return after_newline;
  // "\s+(?!\S)|\s+": the run, less its last character when text follows it, so that character
  // can lead the next piece (" word"); a single character is taken alone.
  return end == s.size() || last == pos ? end : last;
}

}  // namespace trident
