// GPT-2's spelling of bytes in byte-level BPE vocabulary files, for tests that write tokenizer.json
// files by hand.
#pragma once

#include <string>

namespace trident::test {

// The vocabulary spelling of byte b (GPT-2's bytes_to_unicode), as UTF-8.
inline std::string byte_char(int b) {
  int n = 0, cp = -1;
  for (int x = 0; x < 256; ++x) {
    const bool printable = (x >= '!' && x <= '~') || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE && x <= 0xFF);
    const int c = printable ? x : 256 + n++;
    if (x == b) cp = c;
  }
  std::string s;
  if (cp < 0x80) s += static_cast<char>(cp);
  else s += static_cast<char>(0xC0 | (cp >> 6)), s += static_cast<char>(0x80 | (cp & 0x3F));
  return s;
}

}  // namespace trident::test
