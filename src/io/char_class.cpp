// Character classes from tables generated from node, the reference encoders' runtime.
#include "char_class.hpp"

#include "utf8.hpp"

namespace trident {
namespace {

struct CodeRange {
  uint32_t first, last;
};
#include "unicode_tables.inc"

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

constexpr CharClass classify_constexpr(uint32_t cp) {
  if (in_table(kLetterRanges, cp)) return CharClass::kLetter;
  if (in_table(kNumberRanges, cp)) return CharClass::kNumber;
  if (in_table(kSpaceRanges, cp)) return CharClass::kSpace;
  return CharClass::kOther;
}

// ASCII is most of the text; its classes come from the same tables, looked up once.
constexpr std::array<CharClass, 128> make_ascii_classes() {
  std::array<CharClass, 128> t{};
  for (uint32_t c = 0; c < 128; ++c) t[c] = classify_constexpr(c);
  return t;
}

}  // namespace

const std::array<CharClass, 128> kAsciiClasses = make_ascii_classes();

CharClass classify(uint32_t cp) { return classify_constexpr(cp); }

Char non_ascii_char_at(std::string_view s, size_t pos) {
  const Utf8Char c = decode_utf8(s, pos);
  return {c.valid ? classify(c.cp) : CharClass::kOther, c.len};
}

}  // namespace trident
