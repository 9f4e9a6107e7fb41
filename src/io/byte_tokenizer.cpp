// ByteTokenizer: one token per byte; <|endoftext|> decodes to its literal text, as in GPT-2.
#include "byte_tokenizer.hpp"

#include "trident/core/error.hpp"

namespace trident {

std::vector<int32_t> ByteTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids(text.size());
  for (size_t i = 0; i < text.size(); ++i) ids[i] = static_cast<unsigned char>(text[i]);
  return ids;
}

std::string ByteTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  out.reserve(ids.size());
  for (int32_t id : ids) {
    if (id == eot_id()) out += "<|endoftext|>";
    else if (id >= 0 && id < 256) out += static_cast<char>(id);
    else throw InputError(str("token id ", id, " is outside the byte vocabulary (size ", vocab_size(), ")"));
  }
  return out;
}

}  // namespace trident
