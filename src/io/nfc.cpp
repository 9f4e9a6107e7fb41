// NFC: full canonical decomposition, canonical ordering of marks, canonical composition
// (Unicode Standard Annex #15), with Hangul syllables by arithmetic.
#include "nfc.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "utf8.hpp"

namespace trident {
namespace {

struct NfcRange {
  uint32_t first, last;
};
struct NfcClass {
  uint32_t cp;
  uint8_t rank;   // a combining class, renumbered with its order kept; 0 = starter
};
struct NfcDecomposition {
  uint32_t cp;
  uint16_t at, len;   // in kNfcDecompositionPoints
};
struct NfcComposition {
  uint32_t first, second, composite;
};
#include "nfc_tables.inc"

constexpr uint32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr uint32_t kLCount = 19, kVCount = 21, kTCount = 28, kSCount = kLCount * kVCount * kTCount;

bool unstable(uint32_t cp) {
  const auto it = std::lower_bound(std::begin(kNfcUnstable), std::end(kNfcUnstable), cp,
                                   [](const NfcRange& r, uint32_t c) { return r.last < c; });
  return it != std::end(kNfcUnstable) && it->first <= cp;
}

uint8_t combining_class(uint32_t cp) {
  const auto it = std::lower_bound(std::begin(kNfcClasses), std::end(kNfcClasses), cp,
                                   [](const NfcClass& c, uint32_t x) { return c.cp < x; });
  return it != std::end(kNfcClasses) && it->cp == cp ? it->rank : 0;
}

void decompose(uint32_t cp, std::vector<uint32_t>& out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const uint32_t s = cp - kSBase;
    out.push_back(kLBase + s / (kVCount * kTCount));
    out.push_back(kVBase + (s % (kVCount * kTCount)) / kTCount);
    if (s % kTCount) out.push_back(kTBase + s % kTCount);
    return;
  }
  const auto it = std::lower_bound(std::begin(kNfcDecompositions), std::end(kNfcDecompositions), cp,
                                   [](const NfcDecomposition& d, uint32_t x) { return d.cp < x; });
  if (it == std::end(kNfcDecompositions) || it->cp != cp) {
    out.push_back(cp);
    return;
  }
  out.insert(out.end(), kNfcDecompositionPoints + it->at, kNfcDecompositionPoints + it->at + it->len);
}

// The primary composite of (a, b), or 0.
uint32_t compose(uint32_t a, uint32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount)
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase && b < kTBase + kTCount)
    return a + (b - kTBase);
  const auto it = std::lower_bound(std::begin(kNfcCompositions), std::end(kNfcCompositions), std::make_pair(a, b),
                                   [](const NfcComposition& c, const std::pair<uint32_t, uint32_t>& x) {
                                     return std::make_pair(c.first, c.second) < x;
                                   });
  return it != std::end(kNfcCompositions) && it->first == a && it->second == b ? it->composite : 0;
}

void append_utf8(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// Normalizes the decomposed characters of one valid run and appends them to `out`.
void compose_run(std::vector<uint32_t>& buf, std::string& out) {
  if (buf.empty()) return;
  // Canonical ordering: a stable insertion sort of each run of marks by combining class.
  for (size_t i = 1; i < buf.size(); ++i) {
    const uint8_t c = combining_class(buf[i]);
    if (c == 0) continue;
    for (size_t j = i; j > 0 && combining_class(buf[j - 1]) > c; --j) std::swap(buf[j - 1], buf[j]);
  }
  // Composition: a character joins the last starter unless a mark of its class or a starter
  // stands between them ("blocked").
  constexpr int kNoStarter = 256;
  size_t starter = 0, n = 1;
  int last = combining_class(buf[0]) == 0 ? 0 : kNoStarter;
  for (size_t i = 1; i < buf.size(); ++i) {
    const uint8_t c = combining_class(buf[i]);
    if (last != kNoStarter && (last < c || last == 0)) {
      if (const uint32_t composite = compose(buf[starter], buf[i])) {
        buf[starter] = composite;
        continue;
      }
    }
    if (c == 0) starter = n, last = 0;
    else if (last != kNoStarter) last = c;
    buf[n++] = buf[i];
  }
  for (size_t i = 0; i < n; ++i) append_utf8(buf[i], out);
  buf.clear();
}

}  // namespace

bool may_need_nfc(std::string_view text) {
  for (size_t pos = 0; pos < text.size();) {
    // Below U+0300 (lead byte 0xCC) nothing is unstable.
    if (static_cast<uint8_t>(text[pos]) < 0xCC) {
      ++pos;
      continue;
    }
    const Utf8Char c = decode_utf8(text, pos);
    if (c.valid && unstable(c.cp)) return true;
    pos += c.len;
  }
  return false;
}

std::string to_nfc(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  std::vector<uint32_t> buf;
  for (size_t pos = 0; pos < text.size();) {
    const Utf8Char c = decode_utf8(text, pos);
    if (c.valid) {
      decompose(c.cp, buf);
    } else {
      compose_run(buf, out);
      out += text[pos];
    }
    pos += c.len;
  }
  compose_run(buf, out);
  return out;
}

}  // namespace trident
