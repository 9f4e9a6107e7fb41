// Gpt2Tokenizer: GPT-2's byte-level BPE from the standard vocab.json and merges.txt files.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "byte_level_bpe.hpp"
#include "trident/io/tokenizer.hpp"

namespace trident {

class Gpt2Tokenizer : public Tokenizer {
 public:
  // Throws InputError naming the file (and line) when either file is missing or malformed.
  Gpt2Tokenizer(const std::string& vocab_file, const std::string& merges_file);

  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(const std::vector<int32_t>& ids) const override;
  int vocab_size() const override { return static_cast<int>(token_bytes_.size()); }
  int32_t eot_id() const override { return eot_id_; }
  std::string name() const override { return "gpt2"; }

 private:
  void load_vocab(const std::string& path);
  void load_merges(const std::string& path);

  std::vector<std::string> token_bytes_;   // id -> the bytes it stands for
  ByteLevelBpe bpe_;
  int32_t eot_id_ = -1;
};

}  // namespace trident
