// Parsing of blend specs: words split on whitespace, weights read as exact decimals and reduced to
// coprime integer shares.
#include "trident/config/blend_spec.hpp"

#include <numeric>
#include <sstream>

#include "trident/core/error.hpp"

namespace trident {
namespace {

// value = digits / 10^frac, trailing fractional zeros dropped.
struct Decimal {
  uint64_t digits = 0;
  int frac = 0;
};

// False for anything but [0-9]*[.][0-9]* with at least one digit, or more digits than uint64 holds.
bool parse_decimal(const std::string& word, Decimal& out) {
  Decimal d;
  bool dot = false, any_digit = false;
  int pending_zeros = 0;   // fractional zeros kept back until a non-zero digit follows them
  for (char ch : word) {
    if (ch == '.' && !dot) {
      dot = true;
      continue;
    }
    if (ch < '0' || ch > '9') return false;
    any_digit = true;
    const unsigned digit = static_cast<unsigned>(ch - '0');
    if (dot && digit == 0) {
      ++pending_zeros;
      continue;
    }
    for (int z = 0; z <= pending_zeros; ++z)
      if (__builtin_mul_overflow(d.digits, uint64_t(10), &d.digits)) return false;
    if (__builtin_add_overflow(d.digits, uint64_t(digit), &d.digits)) return false;
    if (dot) d.frac += pending_zeros + 1;
    pending_zeros = 0;
  }
  out = d;
  return any_digit;
}

}  // namespace

std::vector<BlendPart> parse_blend_spec(const std::string& option, const std::string& spec) {
  std::vector<std::string> words;
  std::istringstream in(spec);
  for (std::string w; in >> w;) words.push_back(w);
  auto fail = [&](const std::string& fix) { throw InputError(str(option, " = '", spec, "': ", fix)); };
  if (words.empty()) return {};
  if (words.size() == 1) return {BlendPart{words[0], 1}};
  if (words.size() % 2 != 0)
    fail(str(words.size(), " words; give one PREFIX or weight/prefix pairs 'W1 PREFIX1 W2 PREFIX2 ...'"));

  std::vector<Decimal> weights(words.size() / 2);
  int frac = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    const std::string& w = words[2 * i];
    if (!parse_decimal(w, weights[i]) || weights[i].digits == 0)
      fail(str("weight '", w, "' of ", words[2 * i + 1],
               " must be a positive decimal number of at most 18 digits, such as 0.3 or 2"));
    frac = std::max(frac, weights[i].frac);
  }

  const std::string too_fine = str("the weights need more than ", kMaxBlendPeriod,
                                   " samples per blend period; round them to fewer significant digits");
  // On a common denominator 10^frac, then divided by their gcd.
  std::vector<uint64_t> shares(weights.size());
  uint64_t gcd = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    uint64_t v = weights[i].digits;
    for (int z = weights[i].frac; z < frac; ++z)
      if (__builtin_mul_overflow(v, uint64_t(10), &v)) fail(too_fine);
    shares[i] = v;
    gcd = std::gcd(gcd, v);
  }
  uint64_t period = 0;
  std::vector<BlendPart> parts;
  for (size_t i = 0; i < shares.size(); ++i) {
    parts.push_back(BlendPart{words[2 * i + 1], shares[i] / gcd});
    if (__builtin_add_overflow(period, parts.back().weight, &period)) fail(too_fine);
  }
  if (period > kMaxBlendPeriod) fail(too_fine);
  return parts;
}

}  // namespace trident
