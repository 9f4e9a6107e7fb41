// Unicode normalization form C over UTF-8, for tokenizer.json files whose normalizer is NFC
// (Qwen 2/3). Tables come from node (tools/gen_nfc_tables.js), the reference encoder's runtime.
#pragma once

#include <string>
#include <string_view>

namespace trident {

// True when to_nfc(text) may differ from text; false for text that is NFC already (nearly all).
bool may_need_nfc(std::string_view text);

// NFC of `text`. Bytes that are not valid UTF-8 are kept as they are and end the runs of
// characters that are normalized, as a character that combines with nothing would.
std::string to_nfc(std::string_view text);

}  // namespace trident
