// GPT-2's pre-tokenization, written out by hand: the pieces of text that BPE merges within.
#pragma once

#include <cstddef>
#include <string_view>

namespace trident {

// End of the piece of `text` that starts at `pos` (< text.size()), i.e. of the next match of
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// with JavaScript's Unicode classes (src/io/unicode_tables.inc). Pieces tile the text. A byte
// that is not part of valid UTF-8 counts as one character of the [^\s\p{L}\p{N}] class, so any
// byte string splits without loss.
size_t gpt2_piece_end(std::string_view text, size_t pos);

}  // namespace trident
