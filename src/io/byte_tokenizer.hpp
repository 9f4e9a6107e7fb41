// ByteTokenizer: ids 0..255 are the bytes of the text, 256 is <|endoftext|>; needs no files.
#pragma once

#include "trident/io/tokenizer.hpp"

namespace trident {

class ByteTokenizer : public Tokenizer {
 public:
  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(const std::vector<int32_t>& ids) const override;
  int vocab_size() const override { return 257; }
  int32_t eot_id() const override { return 256; }
  std::string name() const override { return "byte"; }
};

}  // namespace trident
