// The Split pre-tokenizer regexes of Llama 3 and Qwen 2/3 tokenizer.json files, written out by
// hand like GPT-2's (gpt2_pretokenize.hpp): the pieces of text that BPE merges within.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace trident {

enum class SplitPattern {
  kLlama3,   // numbers in groups of up to three digits
  kQwen2,    // every digit alone
};

// The pattern a tokenizer.json regex string is, compared character for character; nullopt for
// any other regex.
std::optional<SplitPattern> known_split_pattern(const std::string& regex);

// End of the piece of `text` that starts at `pos` (< text.size()), i.e. of the next match of
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
//   \s*[\r\n]+|\s+(?!\S)|\s+
// (kQwen2: \p{N} instead of \p{N}{1,3}) as the JavaScript reference runs it: the case-insensitive
// contractions are ASCII only, the classes are those of char_class.hpp. Pieces tile the text.
size_t split_piece_end(SplitPattern pattern, std::string_view text, size_t pos);

}  // namespace trident
