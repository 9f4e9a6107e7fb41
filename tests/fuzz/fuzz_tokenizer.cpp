// Fuzz target: GPT-2 tokenizer files (vocab.json, merges.txt) loaded, then a text encoded and
// decoded back. Bad files must end in InputError; a loaded tokenizer must round-trip any text.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "fuzz_input.hpp"
#include "trident/core/error.hpp"
#include "trident/io/tokenizer.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  trident::fuzz::Input in(data, size);
  const std::string vocab = trident::fuzz::write_scratch("vocab.json", in.piece());
  const std::string merges = trident::fuzz::write_scratch("merges.txt", in.piece());
  const std::string text = in.rest();
  try {
    const auto tok = trident::make_tokenizer("gpt2", vocab, merges);
    if (tok->decode(tok->encode(text)) != text) std::abort();
  } catch (const trident::InputError&) {
  }
  return 0;
}
